"""The disk seam: atomic replacement of small files, directory fsync, unlink, temp names.

Every durable small file in Strata (a partition's recovery point and log start offset,
leader-epoch checkpoints, producer snapshots, ``topics.json``, producer-id blocks, the
high-watermark checkpoint, the tiering state, the security files under ``<data_dir>/meta``)
is written by ``atomic_write``, and every directory entry made durable by ``fsync_dir``.

These functions raise the OS's ``OSError`` unchanged; each layer converts it into its own
error at its boundary (``hot.log`` into ``StorageError``, the file object store into an
``ObjectStoreError`` classified by errno, the security files into ``StorageError``).

Crash behaviour of ``atomic_write(path, data)``, step by step:

1. ``<path>.tmp`` is created (or truncated) and ``data`` written: a crash leaves ``path``
   as it was (old content, or absent) plus a partial ``<path>.tmp``.
2. ``<path>.tmp`` is fsynced: same as 1, the temp file now complete.
3. ``<path>.tmp`` is renamed over ``path`` (atomic in POSIX): a reader sees the old content
   or the new, never a mix. Before the directory fsync a crash may still undo the rename
   (the old content comes back, possibly with the complete ``<path>.tmp`` beside it).
4. The directory is fsynced: the new content is durable. With ``sync_dir=False`` this step
   is left to the caller's next ``fsync_dir`` of the directory (several files, one fsync).

Deferred durability (``deferred_sync``): creating thousands of empty partitions cost about
ten fsyncs each (segment, indexes, checkpoint files, directories). Inside
``with deferred_sync(root):`` this thread's ``fsync``, ``fsync_dir`` and ``atomic_write``
skip their fsyncs, and the block's end makes everything durable at once with one
``syncfs(2)`` of ``root``'s filesystem. A crash inside the block may leave any of its files
missing, empty or torn, so a caller builds only what it can throw away, and publishes it
(a registry entry, a rename) after the block. Other threads are not affected.

Leftover temp files (``TEMP_SUFFIX``) are never read as data. Who removes them: a
partition directory's stray ``.tmp`` files are deleted when the log opens (``hot.log``);
every other temp file (``topics.json.tmp``, checkpoint and security temp files) is
truncated and overwritten by the next write of the same file, as step 1 opens it with
``O_TRUNC``. A failed write removes its own temp file before raising.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading
from collections.abc import Iterator
from typing import Final

TEMP_SUFFIX: Final = ".tmp"

StrPath = str | os.PathLike[str]


def temp_path(path: StrPath) -> str:
    """The temp file ``atomic_write`` writes before renaming it onto ``path``."""
    return os.fspath(path) + TEMP_SUFFIX


_deferred = threading.local()


def _deferring() -> bool:
    return getattr(_deferred, "depth", 0) > 0


def fsync(fd: int) -> None:
    """fsync a file descriptor (skipped inside this thread's ``deferred_sync`` block)."""
    if not _deferring():
        os.fsync(fd)


def _libc_syncfs() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(name, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_SYNCFS = _libc_syncfs()


def sync_filesystem(path: StrPath) -> None:
    """Make every file and directory entry of ``path``'s filesystem durable: ``syncfs(2)``
    (Linux), else ``sync(2)``. OSError if the filesystem reports a write-back error."""
    if _SYNCFS is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _SYNCFS(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs of {os.fspath(path)} failed: {os.strerror(err)}")
    finally:
        os.close(fd)


@contextlib.contextmanager
def deferred_sync(root: StrPath) -> Iterator[None]:
    """This thread's fsyncs skipped inside the block, one ``sync_filesystem(root)`` at its
    end (not when the block raises: what it built is to be thrown away). Nests."""
    _deferred.depth = getattr(_deferred, "depth", 0) + 1
    try:
        yield
    finally:
        _deferred.depth -= 1
    if not _deferring():
        sync_filesystem(root)


def fsync_dir(path: StrPath) -> None:
    """fsync a directory so that entries created, renamed or removed in it are durable."""
    if _deferring():
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    path: StrPath, data: bytes, *, sync_dir: bool = True, mode: int | None = None, sync: bool = True
) -> None:
    """Replace ``path`` with ``data`` atomically and durably (temp file, fsync, rename, fsync dir).

    ``mode``: the file's permission bits, set exactly (also on a temp file left by an
    earlier crash, which ``O_TRUNC`` reuses with its old bits), e.g. ``0o600`` for private
    files; None: ``0o644`` less the umask. ``sync_dir=False`` leaves the rename's durability
    to the caller's next ``fsync_dir``. ``sync=False`` skips both fsyncs: still atomic for
    readers, but a crash may bring back the old content or leave an empty or partial
    file (for files rebuilt from elsewhere when they do not parse). On failure the temp
    file is removed and the ``OSError`` raised; ``path`` is unchanged unless the rename happened.
    """
    path = os.fspath(path)
    tmp = temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644 if mode is None else mode)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # already failing: the first error is the one to see
            os.unlink(tmp)
        raise
    if sync_dir and sync:
        fsync_dir(os.path.dirname(path) or ".")


def unlink_missing_ok(path: StrPath) -> None:
    """Remove a file; a file already gone is not an error (other failures raise OSError)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


__all__ = [
    "TEMP_SUFFIX",
    "StrPath",
    "atomic_write",
    "deferred_sync",
    "fsync",
    "fsync_dir",
    "sync_filesystem",
    "temp_path",
    "unlink_missing_ok",
]
