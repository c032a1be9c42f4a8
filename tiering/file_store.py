"""The ``file://`` backend of the object-store seam (``tiering.store_base.ObjectStore``):
a local directory holding one file per object (layout, atomicity and ETags: ``FileStore``)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import hashlib
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Final

from core import disk
from hot.errors import (
    InvalidRequestError,
    ObjectNotFoundError,
    ObjectStoreError,
    PreconditionFailedError,
    RetriableObjectStoreError,
    StorageError,
)
from hot.naming import key_prefix_of_dirs, key_to_path_parts, path_parts_to_key
from tiering.store_base import (
    RESERVED_SEGMENT,
    ObjectInfo,
    ObjectStore,
    check_range,
    range_error,
    source_span,
    unquote_etag,
    validate_key,
    validate_prefix,
)

_COPY_CHUNK: Final = 1 << 20

# --- local directory ------------------------------------------------------------------------------

ETAG_XATTR: Final = "user.strata.sha256"
_RETRIABLE_ERRNOS: Final = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EIO,
        errno.EAGAIN,
        errno.EINTR,
        errno.EBUSY,
        errno.EMFILE,
        errno.ENFILE,
        errno.ENOMEM,
        errno.ETIMEDOUT,
        errno.ESTALE,
        errno.ENOLCK,
    }
)
_LOCK_STRIPES: Final = 256
_COMMIT_ATTEMPTS: Final = 32  # against directory pruning by concurrent deletes
_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")


class _PathConflictError(ObjectStoreError):
    pass


def _etag_of_fd(fd: int) -> str:
    """The content SHA-256 of an open file: from the xattr written with it, else computed
    (and cached in the xattr of that same inode, so it cannot land on a newer file)."""
    try:
        cached = os.getxattr(fd, ETAG_XATTR).decode("ascii", "replace")
        if _SHA256_HEX.fullmatch(cached):
            return cached
    except OSError:
        pass
    h = hashlib.sha256()
    pos = 0
    while chunk := os.pread(fd, _COPY_CHUNK, pos):
        h.update(chunk)
        pos += len(chunk)
    digest = h.hexdigest()
    with contextlib.suppress(OSError):
        os.setxattr(fd, ETAG_XATTR, digest.encode("ascii"))
    return digest


class FileStore(ObjectStore):
    """A local directory holding one file per object.

    Layout: ``<root>/<key>`` (``/`` in keys become directories; a key segment over 255
    bytes, such as ``<249-character topic>-<topic id>``, spans several directories of 255
    bytes ending in "+": ``hot.naming.key_to_path_parts``); ``<root>/.strata/tmp/``
    holds uploads in progress, ``<root>/.strata/locks/`` 256 lock files, one per stripe of
    the key space. Writes go to a temp file (fsync), then take the key's stripe lock
    (``fcntl.flock``, so threads and processes exclude each other), check the
    precondition, ``os.replace`` onto the key and fsync the directory: after a crash an
    object is the old or the new content, never a mix; a temp file left by a crash is
    ignored (and may be removed by ``sweep_temp``).

    ETag: hex SHA-256 of the content, stored in the ``user.strata.sha256`` xattr of the
    temp file before the rename, so it is atomic with the content. On a filesystem without
    user xattrs it is recomputed from the content (correct, but ``head``/``list`` then
    read whole objects).

    Limitation: a key cannot be both an object and a prefix of another key ("a/b" and
    "a/b/c"): putting the second raises ObjectStoreError. Strata's key layout never does.
    """

    def __init__(self, url: str, root: str) -> None:
        self.url = url
        self.root = os.path.abspath(root)
        self._tmp = os.path.join(self.root, RESERVED_SEGMENT, "tmp")
        self._locks = os.path.join(self.root, RESERVED_SEGMENT, "locks")
        try:
            os.makedirs(self._tmp, exist_ok=True)
            os.makedirs(self._locks, exist_ok=True)
        except OSError as e:
            raise self._os_error(e, "open", None) from e

    # -- plumbing --

    def _os_error(self, e: OSError, op: str, key: str | None) -> ObjectStoreError:
        what = f"{self.root}/{key}" if key else self.root
        msg = f"file store {op} {what} failed: {e.strerror or e}"
        if e.errno in _RETRIABLE_ERRNOS:
            return RetriableObjectStoreError(msg)
        if isinstance(e, NotADirectoryError | IsADirectoryError | FileExistsError):
            return _PathConflictError(f"{msg} (a key cannot be both an object and a prefix of another key)")
        return ObjectStoreError(msg)

    def _path(self, key: str) -> str:
        try:
            parts = key_to_path_parts(validate_key(key))
        except ValueError as e:
            raise InvalidRequestError(str(e)) from None
        return os.path.join(self.root, *parts)

    @contextlib.contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        stripe = (
            int.from_bytes(hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:2]) % _LOCK_STRIPES
        )
        fd = os.open(
            os.path.join(self._locks, f"{stripe:02x}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock

    def _make_parents(self, path: str) -> None:
        parent = os.path.dirname(path)
        missing: list[str] = []
        d = parent
        while d != self.root and not os.path.isdir(d):
            missing.append(d)
            d = os.path.dirname(d)
        os.makedirs(parent, exist_ok=True)
        for m in reversed(missing):  # make each new directory entry durable
            disk.fsync_dir(os.path.dirname(m))

    def _prune(self, path: str) -> None:
        d = os.path.dirname(path)
        while d != self.root and d.startswith(self.root + os.sep):
            try:
                os.rmdir(d)  # only succeeds on an empty directory: never loses data
            except OSError:
                return
            d = os.path.dirname(d)

    def _write_temp(self, chunks: Iterator[bytes | memoryview]) -> tuple[str, str]:
        tmp = os.path.join(self._tmp, f"{uuid.uuid4().hex}.tmp")
        h = hashlib.sha256()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            for chunk in chunks:
                h.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            digest = h.hexdigest()
            with contextlib.suppress(OSError):  # no user xattrs here: etags get recomputed
                os.setxattr(fd, ETAG_XATTR, digest.encode("ascii"))
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)
        return tmp, digest

    def _current_etag(self, path: str) -> str | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        try:
            if not _is_regular(fd):
                return None
            return _etag_of_fd(fd)
        finally:
            os.close(fd)

    def _commit(self, key: str, tmp: str, digest: str, if_match: str | None, if_none_match: bool) -> str:
        path = self._path(key)
        try:
            for attempt in range(_COMMIT_ATTEMPTS):
                try:
                    self._make_parents(path)
                    with self._lock(key):
                        if if_match is not None or if_none_match:
                            current = self._current_etag(path)
                            if if_none_match and current is not None:
                                raise PreconditionFailedError(
                                    f"file store put {self.root}/{key}: precondition failed (object exists)"
                                )
                            if if_match is not None and current != unquote_etag(if_match):
                                raise PreconditionFailedError(
                                    f"file store put {self.root}/{key}: precondition failed "
                                    f"(etag is {current or 'absent'}, expected {unquote_etag(if_match)})"
                                )
                        os.replace(tmp, path)
                        disk.fsync_dir(os.path.dirname(path))
                        return digest
                except (FileNotFoundError, FileExistsError):
                    # A concurrent delete pruned a parent directory while we made or used it
                    # (makedirs reports that as EEXIST): remake it. A real file in the way
                    # fails every attempt and is reported as a key conflict.
                    if attempt == _COMMIT_ATTEMPTS - 1 or not os.path.exists(tmp):
                        raise
            raise AssertionError("unreachable")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _put_sync(self, key: str, data: bytes | memoryview, if_match: str | None, if_none_match: bool) -> str:
        try:
            tmp, digest = self._write_temp(iter((data,)))
            return self._commit(key, tmp, digest, if_match, if_none_match)
        except OSError as e:
            raise self._os_error(e, "put", key) from e

    def _put_file_sync(self, key: str, src: str, offset: int, length: int | None) -> str:
        length = source_span(src, offset, length)
        try:
            sfd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise StorageError(f"put_file: cannot read source file {src}: {e.strerror or e}") from e

        def chunks() -> Iterator[bytes]:
            pos, end = offset, offset + length
            while pos < end:
                try:
                    chunk = os.pread(sfd, min(_COPY_CHUNK, end - pos), pos)
                except OSError as e:
                    raise StorageError(f"put_file: cannot read source file {src}: {e.strerror or e}") from e
                if not chunk:
                    raise StorageError(f"put_file: source file {src} shrank while reading [{offset}, {end})")
                pos += len(chunk)
                yield chunk

        try:
            tmp, digest = self._write_temp(chunks())
            return self._commit(key, tmp, digest, None, False)
        except OSError as e:
            raise self._os_error(e, "put_file", key) from e
        finally:
            os.close(sfd)

    def _put_file_moved_sync(self, key: str, src: str) -> str:
        # The file becomes the object, with no copy of its bytes: renamed into the temp
        # directory, then hashed (read back from the page cache), its ETag xattr set and
        # fsynced as ``_write_temp`` does with a temp file, and renamed onto the key by
        # ``_commit``. On another file system (EXDEV, also a bind mount of the same one):
        # copied as ``put_file``, then removed.
        tmp = os.path.join(self._tmp, f"{uuid.uuid4().hex}.tmp")
        try:
            os.rename(src, tmp)
        except OSError as e:
            if e.errno != errno.EXDEV:
                with contextlib.suppress(OSError):
                    os.unlink(src)
                raise StorageError(f"put_file_moved: cannot take source file {src}: {e.strerror or e}") from e
            try:
                return self._put_file_sync(key, src, 0, None)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(src)
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
            try:
                with open(fd, "rb", closefd=False) as f:
                    digest = hashlib.file_digest(f, "sha256").hexdigest()
                os.fchmod(fd, 0o644)  # (a spool file is made 0600)
                with contextlib.suppress(OSError):  # no user xattrs here: etags get recomputed
                    os.setxattr(fd, ETAG_XATTR, digest.encode("ascii"))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise self._os_error(e, "put_file_moved", key) from e
        try:
            return self._commit(key, tmp, digest, None, False)
        except OSError as e:
            raise self._os_error(e, "put_file_moved", key) from e

    def _open_object(self, key: str, op: str) -> int:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFoundError(f"file store {op}: object not found: {self.root}/{key}") from None
        except OSError as e:
            raise self._os_error(e, op, key) from e
        if not _is_regular(fd):
            os.close(fd)
            raise ObjectNotFoundError(f"file store {op}: object not found: {self.root}/{key}")
        return fd

    def _get_sync(self, key: str, start: int, end: int | None) -> bytes:
        fd = self._open_object(key, "get")
        try:
            size = os.fstat(fd).st_size
            if start >= size and not (start == 0 and size == 0) and end != start:
                raise range_error(key, start, end, size)
            stop = size if end is None else min(end, size)
            first = os.pread(fd, max(stop - start, 0), start)
            if len(first) >= stop - start or not first:
                return first  # one read, nearly always: no copies (a Spark scan's chunks are MiBs)
            out = bytearray(first)
            pos = start + len(first)
            while pos < stop:
                chunk = os.pread(fd, stop - pos, pos)
                if not chunk:
                    break
                out += chunk
                pos += len(chunk)
            return bytes(out)
        except OSError as e:
            raise self._os_error(e, "get", key) from e
        finally:
            os.close(fd)

    def _get_with_etag_sync(self, key: str) -> tuple[bytes, str]:
        fd = self._open_object(key, "get")
        try:
            size = os.fstat(fd).st_size
            chunks = []
            pos = 0
            while pos < size:
                chunk = os.pread(fd, size - pos, pos)
                if not chunk:
                    break
                chunks.append(chunk)
                pos += len(chunk)
            data = b"".join(chunks)
            try:
                etag = os.getxattr(fd, ETAG_XATTR).decode("ascii", "replace")
            except OSError:
                etag = ""
            if not _SHA256_HEX.fullmatch(etag):
                etag = hashlib.sha256(data).hexdigest()
            return data, etag
        except OSError as e:
            raise self._os_error(e, "get", key) from e
        finally:
            os.close(fd)

    def _info(self, key: str, path: str) -> ObjectInfo | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        try:
            st = os.fstat(fd)
            if not _is_regular(fd):
                return None
            return ObjectInfo(key, st.st_size, _etag_of_fd(fd), st.st_mtime_ns // 1_000_000)
        finally:
            os.close(fd)

    def _head_sync(self, key: str) -> ObjectInfo | None:
        try:
            return self._info(key, self._path(key))
        except OSError as e:
            raise self._os_error(e, "head", key) from e

    def _delete_sync(self, key: str) -> None:
        path = self._path(key)
        try:
            with self._lock(key):
                try:
                    os.unlink(path)
                except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    return
                with contextlib.suppress(FileNotFoundError):  # pruned by a concurrent delete
                    disk.fsync_dir(os.path.dirname(path))
            self._prune(path)
        except OSError as e:
            raise self._os_error(e, "delete", key) from e

    def _list_sync(self, prefix: str) -> list[ObjectInfo]:
        # Paths map back to keys through hot.naming (a segment over NAME_MAX bytes spans
        # several directories); start at the deepest directory every match lies under.
        base_dir = prefix.rpartition("/")[0]
        try:
            top_parts = key_to_path_parts(base_dir) if base_dir else []
        except ValueError:
            return []  # no key under it can be stored here
        top = os.path.join(self.root, *top_parts)
        out: list[ObjectInfo] = []
        try:
            for dirpath, dirnames, filenames in os.walk(top):
                rel = os.path.relpath(dirpath, self.root)
                rel_parts = [] if rel == "." else rel.split(os.sep)
                if not rel_parts:
                    dirnames[:] = [d for d in dirnames if d != RESERVED_SEGMENT]

                # Descend only where keys can still match the prefix.
                below = {d: key_prefix_of_dirs([*rel_parts, d]) for d in dirnames}
                dirnames[:] = [
                    d for d in dirnames if below[d].startswith(prefix) or prefix.startswith(below[d])
                ]
                for name in filenames:
                    key = path_parts_to_key([*rel_parts, name])
                    if key is not None and key.startswith(prefix):
                        info = self._info(key, os.path.join(dirpath, name))
                        if info is not None:  # gone since the walk saw it
                            out.append(info)
        except OSError as e:
            raise self._os_error(e, "list", prefix + "*") from e
        out.sort(key=lambda o: o.key)
        return out

    def sweep_temp(self, older_than_s: float = 3600.0) -> int:
        """Remove upload temp files left by crashes; returns how many were removed."""
        import time

        removed = 0
        cutoff = time.time() - older_than_s
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self._tmp):
                with contextlib.suppress(OSError):
                    if entry.stat().st_mtime < cutoff:
                        os.unlink(entry.path)
                        removed += 1
        return removed

    # -- operations --

    async def put(
        self, key: str, data: bytes | memoryview, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        validate_key(key)
        if if_match is not None and if_none_match:
            raise InvalidRequestError(f"put {key!r}: if_match and if_none_match are mutually exclusive")
        return await asyncio.to_thread(self._put_sync, key, data, if_match, if_none_match)

    async def put_file(
        self, key: str, path: str | os.PathLike[str], *, offset: int = 0, length: int | None = None
    ) -> str:
        validate_key(key)
        return await asyncio.to_thread(self._put_file_sync, key, os.fspath(path), offset, length)

    async def put_file_moved(self, key: str, path: str | os.PathLike[str]) -> str:
        validate_key(key)
        return await asyncio.to_thread(self._put_file_moved_sync, key, os.fspath(path))

    async def get(self, key: str, *, start: int | None = None, end: int | None = None) -> bytes:
        validate_key(key)
        s, e = check_range(key, start, end)
        return await asyncio.to_thread(self._get_sync, key, s, e)

    async def get_with_etag(self, key: str) -> tuple[bytes, str]:
        validate_key(key)
        return await asyncio.to_thread(self._get_with_etag_sync, key)

    async def head(self, key: str) -> ObjectInfo | None:
        validate_key(key)
        return await asyncio.to_thread(self._head_sync, key)

    async def delete(self, key: str) -> None:
        validate_key(key)
        await asyncio.to_thread(self._delete_sync, key)

    async def delete_many(self, keys: Sequence[str]) -> None:
        for k in keys:
            validate_key(k)

        def run() -> None:
            for k in dict.fromkeys(keys):
                self._delete_sync(k)

        await asyncio.to_thread(run)

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        validate_prefix(prefix)
        return await asyncio.to_thread(self._list_sync, prefix)

    async def close(self) -> None:
        return None


def _is_regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)
