"""Crash-safe replacement of the small security files under ``<data_dir>/meta``.

Temp file (mode 0600), fsync, rename over the old file, fsync of the directory: a reader
sees the old document or the new one, never a torn one, and the rename survives a crash.
"""

from __future__ import annotations

import os
from pathlib import Path

from hot.errors import StorageError


def write_atomic(path: Path, data: bytes) -> None:
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


def stat_version(path: Path) -> tuple[int, int, int] | None:
    """(inode, mtime, size): every save renames a new file into place, so a new inode even
    within one mtime tick. None: no file."""
    try:
        st = path.stat()
        return (st.st_ino, st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot stat {path}: {exc.strerror}") from None
