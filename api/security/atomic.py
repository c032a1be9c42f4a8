"""Atomic, private file writes for the broker's small state files (quotas, tokens)."""

from __future__ import annotations

import os
from pathlib import Path

from hot.errors import StorageError


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data``: temp file (0600), fsync, rename, fsync of the directory.

    A crash leaves either the old or the new file, never a torn one.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # an older temp file may have had other bits
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror}") from None


def file_version(path: Path) -> tuple[int, int, int] | None:
    """(inode, mtime, size): changes with every write_private (a new inode each time)."""
    try:
        st = path.stat()
        return (st.st_ino, st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot stat {path}: {exc.strerror}") from None
