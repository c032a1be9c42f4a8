"""The object-store seam: ``ObjectStore``, the one async interface every backend implements
(``tiering.s3_store.S3Store``, ``tiering.file_store.FileStore``), and what the backends
share: ``ObjectInfo``, key and range validation, ``InvalidRangeError``, the checks of a
``put_file`` source. ``tiering.store`` opens a backend by URL and re-exports these names;
code that only uses a store imports them from there.

Keys are ``/``-separated, relative to the store's prefix, and validated identically on
both backends (no empty, ``.`` or ``..`` segments, no leading or trailing ``/``, no control
characters, at most 1024 bytes, first segment not ``.strata``), so code that works on one
works on the other.

ETags are opaque strings without the surrounding quotes S3 puts on the wire; pass what
``put``/``head``/``get_with_etag`` returned to ``if_match``. On S3 they are S3's own ETags;
on a ``FileStore`` they are the hex SHA-256 of the content.

Ranged reads: ``get(key, start=, end=)`` with ``end`` exclusive returns the bytes of
``[start, min(end, size))``. A range that starts at or past the end of the object raises
``InvalidRangeError`` (an ``ObjectStoreError`` naming the key and the size), except that
``start=0`` on an empty object returns ``b""``. ``start == end`` returns ``b""`` once the
object is known to exist. ``get_view`` is ``get`` for large bodies read on their way to
the chunk cache: same ranges and errors, the bytes as a read-only-by-convention
``memoryview`` (on S3, of a reused page-aligned buffer: see ``BufferPool``).

Errors: every library exception (botocore, aiohttp, OSError) is converted here, and only
here, into ``hot.errors`` types whose message names the operation, bucket (or root) and
key: ``ObjectNotFoundError``, ``PreconditionFailedError`` (a conditional write lost),
``RetriableObjectStoreError`` (outages, timeouts, throttling, 5xx, a full disk) and plain
``ObjectStoreError`` (missing bucket, access denied, bad credentials: retrying will not
help). ``put_file`` reports a failure to read its local *source* file as ``StorageError``.
Invalid keys and ranges raise ``InvalidRequestError``.

Retry caveat: S3Store retries transient failures inside botocore (standard mode). A
conditional put whose first attempt succeeded but whose response was lost is retried and
then fails its own precondition, so a ``PreconditionFailedError`` means "the object is not
what you expected", not "nothing was written"; compare-and-swap callers reload and
re-apply idempotent changes (``tiering.manifest_store.ManifestStore.update`` does).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from hot.errors import (
    InvalidRequestError,
    ObjectStoreError,
    StorageError,
)

T = TypeVar("T")

MAX_KEY_BYTES: Final = 1024
RESERVED_SEGMENT: Final = ".strata"  # FileStore's private directory; refused as a first key segment
_CONTROL_CHARS: Final = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    last_modified_ms: int


class InvalidRangeError(ObjectStoreError):
    """A ranged read that starts at or past the end of the object."""

    def __init__(self, message: str, *, object_size: int | None = None) -> None:
        super().__init__(message)
        self.object_size = object_size


# --- keys -----------------------------------------------------------------------------------


def validate_key(key: str) -> str:
    """Return ``key`` if it is a legal object key, else raise InvalidRequestError saying why."""
    if not isinstance(key, str) or not key:
        raise InvalidRequestError(f"object key must be a non-empty string, got {key!r}")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise InvalidRequestError(f"object key is longer than {MAX_KEY_BYTES} bytes: {key[:80]!r}...")
    if _CONTROL_CHARS.search(key):
        raise InvalidRequestError(f"object key contains a control character: {key!r}")
    if key.startswith("/") or key.endswith("/"):
        raise InvalidRequestError(f"object key must not start or end with '/': {key!r}")
    parts = key.split("/")
    for p in parts:
        if p in ("", ".", ".."):
            raise InvalidRequestError(f"object key has an empty, '.' or '..' segment: {key!r}")
    if parts[0] == RESERVED_SEGMENT:
        raise InvalidRequestError(f"object keys under {RESERVED_SEGMENT}/ are reserved: {key!r}")
    return key


def validate_prefix(prefix: str) -> str:
    """A listing prefix: empty, or a key prefix (may end with '/', may end mid-segment)."""
    if not isinstance(prefix, str):
        raise InvalidRequestError(f"list prefix must be a string, got {prefix!r}")
    if not prefix:
        return prefix
    if prefix.startswith("/") or _CONTROL_CHARS.search(prefix):
        raise InvalidRequestError(f"illegal list prefix {prefix!r}")
    parts = prefix.split("/")
    # Every complete segment (all but the last) must be legal; the last may be partial.
    for p in parts[:-1]:
        if p in ("", ".", ".."):
            raise InvalidRequestError(f"list prefix has an empty, '.' or '..' segment: {prefix!r}")
    if parts[-1] == "..":
        raise InvalidRequestError(f"list prefix has a '..' segment: {prefix!r}")
    return prefix


def check_range(key: str, start: int | None, end: int | None) -> tuple[int, int | None]:
    if start is None:
        start = 0
    for name, v in (("start", start), ("end", end)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise InvalidRequestError(f"get {key!r}: {name} must be a non-negative integer, got {v!r}")
    if end is not None and end < start:
        raise InvalidRequestError(f"get {key!r}: end {end} is before start {start}")
    return start, end


def range_error(key: str, start: int, end: int | None, size: int) -> InvalidRangeError:
    return InvalidRangeError(
        f"get {key!r}: range [{start}, {'end' if end is None else end}) starts at or past "
        f"the end of the {size}-byte object",
        object_size=size,
    )


class ObjectStore(abc.ABC):
    """Async object store. All keys are relative to the store's prefix (see module docstring)."""

    url: str

    @abc.abstractmethod
    async def put(
        self, key: str, data: bytes | memoryview, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        """Write ``data``; return the new ETag. With ``if_match``/``if_none_match`` the write
        happens only if the object's ETag equals ``if_match`` / no object exists, else
        PreconditionFailedError."""

    @abc.abstractmethod
    async def put_file(
        self, key: str, path: str | os.PathLike[str], *, offset: int = 0, length: int | None = None
    ) -> str:
        """Upload ``length`` bytes (default: to the end) of a local file from ``offset``;
        multipart above the part size. Overwrites; returns the ETag."""

    async def put_file_moved(self, key: str, path: str | os.PathLike[str]) -> str:
        """Store the whole local file ``path`` under ``key`` and take the file: it is gone
        afterwards, whether the put succeeded or not. The file store renames it into place
        (no copy of its bytes into fresh pages) when it is on the same file system; other
        stores upload it and delete it. For files written only to be put (the Iceberg
        translator's data files). Returns the ETag."""
        try:
            return await self.put_file(key, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    async def put_file_checked(
        self,
        key: str,
        path: str | os.PathLike[str],
        *,
        offset: int = 0,
        length: int | None = None,
        crc32c: int,
    ) -> str:
        """``put_file`` of bytes whose CRC-32C the caller has already computed (the uploader,
        while verifying a segment). A backend that sends a checksum with the body (S3's
        ``x-amz-checksum-crc32c``) sends this one instead of hashing the bytes again, and
        the service refuses bytes that differ from it. Default: ``put_file``."""
        return await self.put_file(key, path, offset=offset, length=length)

    @abc.abstractmethod
    async def get(self, key: str, *, start: int | None = None, end: int | None = None) -> bytes:
        """The object's bytes ``[start, end)`` (see the module docstring for ranges)."""

    async def get_view(
        self,
        key: str,
        *,
        start: int | None = None,
        end: int | None = None,
        check: Callable[[memoryview], None] | None = None,
    ) -> memoryview:
        """``get`` as a memoryview (S3: of a pooled buffer, without a copy). The caller
        must not write to it. ``check`` is called with the bytes in a worker thread (on S3
        the one that fetched them) before they are returned; what it raises fails the get."""
        data = memoryview(await self.get(key, start=start, end=end))
        if check is not None:
            await asyncio.to_thread(check, data)
        return data

    @abc.abstractmethod
    async def get_with_etag(self, key: str) -> tuple[bytes, str]:
        """The whole object and the ETag of exactly those bytes."""

    @abc.abstractmethod
    async def head(self, key: str) -> ObjectInfo | None:
        """Metadata, or None if the object does not exist."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Delete; a missing object is not an error."""

    @abc.abstractmethod
    async def delete_many(self, keys: Sequence[str]) -> None:
        """Delete several objects; missing ones are not an error."""

    @abc.abstractmethod
    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix``, sorted by key."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections; the store must not be used afterwards."""

    async def connect(self) -> None:
        """Prepare the client ahead of the first request (no network round trip is
        required). A no-op unless the store has costly set-up; errors are ObjectStoreError
        and leave the store usable: the next request tries again."""
        return None

    async def exists(self, key: str) -> bool:
        return await self.head(key) is not None

    async def __aenter__(self) -> ObjectStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


# --- local source files (put_file) --------------------------------------------------------------


def source_span(path: str, offset: int, length: int | None) -> int:
    """The number of bytes put_file will read; StorageError if the source is unusable."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidRequestError(f"put_file {path}: offset must be a non-negative integer, got {offset!r}")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 0):
        raise InvalidRequestError(f"put_file {path}: length must be a non-negative integer, got {length!r}")
    try:
        size = os.stat(path).st_size
    except OSError as e:
        raise StorageError(f"put_file: cannot read source file {path}: {e.strerror or e}") from e
    if length is None:
        length = size - offset
    if offset + length > size or length < 0:
        raise InvalidRequestError(
            f"put_file {path}: [{offset}, {offset + max(length, 0)}) is past the end of the {size}-byte file"
        )
    return length


def unquote_etag(etag: str) -> str:
    """An ETag as the stores return it: without S3's quotes or a weak ``W/`` marker."""
    return etag.strip().removeprefix("W/").strip('"')
