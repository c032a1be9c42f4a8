"""Crash-safe replacement of the small security files under ``<data_dir>/meta``.

Temp file (mode 0600), fsync, rename over the old file, fsync of the directory: a reader
sees the old document or the new one, never a torn one, and the rename survives a crash.
"""

from __future__ import annotations

from pathlib import Path

from core import disk
from hot.errors import StorageError


def write_atomic(path: Path, data: bytes) -> None:
    """``core.disk.atomic_write`` as a private (0600) file, making ``path``'s directory first."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        disk.atomic_write(path, data, mode=0o600)
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
