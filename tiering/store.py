"""Object stores: one small async interface, two real backends.

``open_store(url)`` returns

- ``S3Store`` for ``s3://bucket[/prefix]`` (``s3a://`` is accepted as an alias): any
  S3-compatible service through aioboto3 (GETs through botocore's blocking client in
  worker threads, signed and sent directly when they succeed: see ``S3Store`` and
  ``tiering.s3_direct``). Endpoint, region and credentials come from the
  standard AWS chain (``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``,
  profiles, instance roles, ...) unless given explicitly. Path-style addressing, so MinIO
  and other self-hosted endpoints work without wildcard DNS.
- ``FileStore`` for ``file:///abs/path``: a local directory, the embedded default.

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
re-apply idempotent changes (``tiering.manifest.ManifestStore.update`` does).

``SyncObjectStore`` is the blocking facade for Spark executors, the CLI and tools: it runs
an ``ObjectStore`` on a private event-loop thread, so both faces share one code path,
including error conversion.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import contextlib
import datetime
import email.utils
import errno
import fcntl
import functools
import hashlib
import mmap
import os
import re
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, TypeVar
from urllib.parse import unquote, urlsplit

from core import disk
from hot.errors import (
    InvalidConfigError,
    InvalidRequestError,
    ObjectNotFoundError,
    ObjectStoreError,
    PreconditionFailedError,
    RetriableObjectStoreError,
    StorageError,
    StrataError,
)
from hot.naming import key_prefix_of_dirs, key_to_path_parts, path_parts_to_key
from tiering.s3_direct import DirectGet

T = TypeVar("T")

MIN_PART_SIZE: Final = 5 << 20  # S3's minimum for every part but the last
MAX_PART_SIZE: Final = 5 << 30
MAX_PARTS: Final = 10_000
MAX_KEY_BYTES: Final = 1024
RESERVED_SEGMENT: Final = ".strata"  # FileStore's private directory; refused as a first key segment
_DELETE_BATCH: Final = 1000  # DeleteObjects limit
_IO_THREADS: Final = 8  # S3Store's worker threads for large GETs and PUTs (at most max_pool)
_WARM_UP_WAIT_S: Final = 2.0  # how long ``connect`` waits for the clients' warm-up
_WARM_UP_CONNECTIONS: Final = 4  # blocking client connections opened by the warm-up
_BLOCKING_PUT_BYTES: Final = 1 << 20  # bodies from this size go through the blocking client
_COPY_CHUNK: Final = 1 << 20
_PAGE: Final = mmap.PAGESIZE
_POOL_FREE_BYTES: Final = 64 << 20  # GET buffers kept for reuse once nothing views them
# Smaller GET bodies are plain bytes: a mapping per small object (an index file, say) would
# cost a syscall and a VMA each, and malloc reuses small blocks anyway.
_POOL_MIN_BYTES: Final = 256 << 10
_CONTROL_CHARS: Final = re.compile(r"[\x00-\x1f\x7f]")
_BUCKET_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


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


def _check_range(key: str, start: int | None, end: int | None) -> tuple[int, int | None]:
    if start is None:
        start = 0
    for name, v in (("start", start), ("end", end)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise InvalidRequestError(f"get {key!r}: {name} must be a non-negative integer, got {v!r}")
    if end is not None and end < start:
        raise InvalidRequestError(f"get {key!r}: end {end} is before start {start}")
    return start, end


def _range_error(key: str, start: int, end: int | None, size: int) -> InvalidRangeError:
    return InvalidRangeError(
        f"get {key!r}: range [{start}, {'end' if end is None else end}) starts at or past "
        f"the end of the {size}-byte object",
        object_size=size,
    )


# --- the interface --------------------------------------------------------------------------


def _anonymous_map(size: int) -> mmap.mmap:
    """Private anonymous memory. Why: a fresh 8 MiB buffer cost about 8 ms of CPU to
    fault in on the benchmark VM as the shared mapping ``mmap.mmap(-1, n)`` makes (shmem
    pages), 6 ms private; that is what every buffer a pool grows by costs (e.g. during
    the first cold read after a start). Transparent huge pages (MADV_HUGEPAGE) cut it to
    1.3 ms but, with the kernel's default ``defrag=madvise``, fault with direct
    compaction: first fetches after a start took 120-240 ms instead of 60-80."""
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


class BufferPool:
    """Page-aligned anonymous memory for GET bodies, reused once nothing refers to it.

    Why: a GET of 8 MiB into a fresh ``bytes`` (what botocore returns) touches 2,048 new
    pages: on the benchmark VM that was about 2,300 page faults per segment and the
    largest part of the difference between the broker's GET (4.4-6.9 ms of CPU) and a
    plain boto3 loop's (3.5 ms), which frees and reuses the same heap memory. A body read
    into a buffer that an earlier GET used costs no faults.

    ``take(n)`` returns an ``mmap`` of at least ``n`` bytes (capacity rounded up to whole
    pages) that nothing else refers to. The bytes are handed out as memoryviews, which
    keep a reference to their ``mmap`` for as long as any view of it (however derived)
    is alive; a buffer is reused only when the pool holds the last reference to it
    (``sys.getrefcount``), so memory some reader, cache entry or socket write still sees
    is never written again. Free buffers beyond ``max_free_bytes`` are dropped (unmapped).
    Thread-safe."""

    def __init__(self, max_free_bytes: int = _POOL_FREE_BYTES) -> None:
        self.max_free_bytes = max_free_bytes
        self._lent: list[mmap.mmap] = []
        self._free: list[mmap.mmap] = []
        self._lock = threading.Lock()
        self.allocated = 0  # buffers mapped so far (tests, metrics)
        self.reused = 0  # takes served by a buffer used before

    def take(self, n: int) -> mmap.mmap:
        cap = max(_PAGE, -(-n // _PAGE) * _PAGE)
        with self._lock:
            self._collect()
            for i, m in enumerate(self._free):
                if cap <= len(m) <= cap + (cap >> 2):  # no more than a quarter unused
                    del self._free[i]
                    self._lent.append(m)
                    self.reused += 1
                    return m
            m = _anonymous_map(cap)
            self._lent.append(m)
            self.allocated += 1
            return m

    def _collect(self) -> None:
        """Move lent buffers nothing views any more to the free list (newest first)."""
        still: list[mmap.mmap] = []
        for i in range(len(self._lent)):
            # 2: the list's reference and the argument's; a live memoryview adds one
            if sys.getrefcount(self._lent[i]) <= 2:
                self._free.insert(0, self._lent[i])
            else:
                still.append(self._lent[i])
        self._lent = still
        size = 0
        for i in range(len(self._free)):
            size += len(self._free[i])
            if size > self.max_free_bytes:
                del self._free[i:]
                break


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


def open_store(
    url: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    part_size: int = 16 << 20,
    max_pool: int = 32,
    connect_timeout: float = 10.0,
    read_timeout: float = 30.0,
    max_attempts: int = 5,
    upload_concurrency: int = 4,
) -> ObjectStore:
    """Open the store named by ``url`` (``s3://bucket/prefix`` or ``file:///abs/path``).

    The S3 keyword arguments override the AWS chain; ``max_attempts`` counts the first
    try (botocore standard retry mode); they are ignored for ``file://``."""
    if not isinstance(url, str) or not url:
        raise InvalidConfigError(f"object store URL must be a non-empty string, got {url!r}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if parts.query or parts.fragment:
        raise InvalidConfigError(f"object store URL {url!r} must not have a query or fragment")
    if scheme in ("s3", "s3a"):
        bucket = parts.netloc
        if not bucket or not _BUCKET_NAME.fullmatch(bucket):
            raise InvalidConfigError(
                f"object store URL {url!r} has no valid bucket name (s3://bucket/prefix)"
            )
        prefix = parts.path.strip("/")
        if prefix:
            try:
                validate_key(prefix)
            except InvalidRequestError as e:
                raise InvalidConfigError(f"object store URL {url!r} has an illegal prefix: {e}") from None
        if not MIN_PART_SIZE <= part_size <= MAX_PART_SIZE:
            raise InvalidConfigError(
                f"part_size {part_size} is outside S3's limits [{MIN_PART_SIZE}, {MAX_PART_SIZE}]"
            )
        if max_pool < 1 or upload_concurrency < 1 or max_attempts < 1:
            raise InvalidConfigError("max_pool, upload_concurrency and max_attempts must be at least 1")
        if connect_timeout <= 0 or read_timeout <= 0:
            raise InvalidConfigError("connect_timeout and read_timeout must be positive")
        if (access_key is None) != (secret_key is None):
            raise InvalidConfigError("access_key and secret_key must be given together")
        if endpoint_url is not None and urlsplit(endpoint_url).scheme not in ("http", "https"):
            raise InvalidConfigError(f"endpoint_url {endpoint_url!r} must be an http:// or https:// URL")
        return S3Store(
            url,
            bucket,
            prefix,
            endpoint_url=endpoint_url,
            region=region,
            access_key=access_key,
            secret_key=secret_key,
            part_size=part_size,
            max_pool=max_pool,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_attempts=max_attempts,
            upload_concurrency=upload_concurrency,
        )
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidConfigError(
                f"object store URL {url!r}: file URLs need an absolute path, like file:///var/lib/strata"
            )
        path = unquote(parts.path)
        if not path.startswith("/"):
            raise InvalidConfigError(f"object store URL {url!r}: the path must be absolute")
        return FileStore(url, path)
    raise InvalidConfigError(
        f"unsupported object store URL {url!r}: use s3://bucket/prefix or file:///absolute/path"
    )


# --- local source files (put_file) --------------------------------------------------------------


def _source_span(path: str, offset: int, length: int | None) -> int:
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


def _pread_exact(path: str, offset: int, length: int) -> bytes:
    try:
        with open(path, "rb", buffering=0) as f:
            buf = bytearray(length)
            view = memoryview(buf)
            done = 0
            while done < length:
                n = os.preadv(f.fileno(), [view[done:]], offset + done)
                if n == 0:
                    raise StorageError(
                        f"put_file: source file {path} shrank while reading [{offset}, {offset + length})"
                    )
                done += n
            return bytes(buf)
    except OSError as e:
        raise StorageError(f"put_file: cannot read source file {path}: {e.strerror or e}") from e


# --- S3 -----------------------------------------------------------------------------------------

_NOT_FOUND_CODES: Final = frozenset({"NoSuchKey", "404", "NotFound"})
_PRECONDITION_CODES: Final = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict"})
_RETRIABLE_CODES: Final = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "RequestTimeout",
        "RequestTimeoutException",
        "InternalError",
        "ServiceUnavailable",
        "PriorRequestNotComplete",
        "OperationAborted",
        "NoSuchUpload",  # the multipart upload vanished: the whole put_file can be redone
        "XAmzContentSHA256Mismatch",
        "BadDigest",  # the body was damaged on the way
    }
)


def _convert_s3_error(exc: BaseException, op: str, where: str) -> StrataError:
    """The one mapping from botocore/aiohttp exceptions to hot.errors types."""
    import aiohttp
    from botocore import exceptions as bce

    if isinstance(exc, bce.ClientError):
        err = exc.response.get("Error", {}) or {}
        meta = exc.response.get("ResponseMetadata", {}) or {}
        code = str(err.get("Code", "") or "")
        status = int(meta.get("HTTPStatusCode", 0) or 0)
        detail = str(err.get("Message", "") or exc)
        msg = f"S3 {op} {where} failed: {code or status} {detail}".rstrip()
        if code in _NOT_FOUND_CODES:
            return ObjectNotFoundError(f"S3 {op}: object not found: {where}")
        if code in _PRECONDITION_CODES or status == 412:
            return PreconditionFailedError(f"S3 {op} {where}: precondition failed ({code or status})")
        if code == "InvalidRange" or status == 416:
            size = str(err.get("ActualObjectSize", ""))
            return InvalidRangeError(msg, object_size=int(size) if size.isdigit() else None)
        if code == "NoSuchBucket":
            return ObjectStoreError(f"S3 {op} {where} failed: the bucket does not exist")
        if code in _RETRIABLE_CODES or status >= 500 or status == 429:
            return RetriableObjectStoreError(msg)
        return ObjectStoreError(msg)
    if isinstance(exc, bce.SSLError):
        return ObjectStoreError(f"S3 {op} {where} failed: TLS error: {exc}")
    if isinstance(exc, bce.ConnectionError | bce.HTTPClientError):
        return RetriableObjectStoreError(f"S3 {op} {where} failed: {exc}")
    if isinstance(exc, bce.NoCredentialsError | bce.PartialCredentialsError | bce.CredentialRetrievalError):
        return ObjectStoreError(f"S3 {op} {where} failed: no usable AWS credentials: {exc}")
    if isinstance(exc, bce.BotoCoreError):
        return ObjectStoreError(f"S3 {op} {where} failed: {exc}")
    if isinstance(exc, aiohttp.ClientError | TimeoutError | ConnectionError):
        return RetriableObjectStoreError(f"S3 {op} {where} failed: {type(exc).__name__}: {exc}")
    if isinstance(exc, OSError):
        return RetriableObjectStoreError(f"S3 {op} {where} failed: {exc}")
    raise exc


def _unquote_etag(etag: str) -> str:
    return etag.strip().removeprefix("W/").strip('"')


def _quote_etag(etag: str) -> str:
    return f'"{_unquote_etag(etag)}"'


def _md5_b64(data: bytes) -> str:
    # Content-MD5 makes S3 reject a body damaged in transit (BadDigest), on every S3-compatible
    # service, without relying on botocore's newer default checksums that some services lack.
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii")


def _read_body_into(body: Any, view: memoryview) -> None:
    """Fill ``view`` with a GET response's body (botocore ``StreamingBody``), exactly.

    The body is read with ``readinto`` on the ``http.client`` response under botocore's
    and urllib3's wrappers (their own ``readinto`` reads into a new ``bytes`` and copies),
    then the connection goes back to urllib3's pool as after a full ``read()``. A body
    those wrappers would transform (chunked transfer, content decoding) or a layout of
    them this code does not know is read with ``read()`` and copied instead. A short or
    long body raises (converted like any other error of the GET)."""
    n = len(view)
    raw: Any = getattr(body, "_raw_stream", None)
    fp: Any = getattr(raw, "_fp", None)
    direct = (
        fp is not None
        and hasattr(fp, "readinto")
        and not getattr(raw, "chunked", True)
        and getattr(raw, "_decoder", None) is None
        and not getattr(raw, "decode_content", True)
        and hasattr(raw, "release_conn")
    )
    if not direct:
        data = body.read()
        if len(data) != n:
            raise OSError(f"response body is {len(data)} bytes where Content-Length says {n}")
        view[:] = data
        return
    got = 0
    while got < n:
        k = fp.readinto(view[got:])
        if not k:
            raise OSError(f"response body ended after {got} of {n} bytes")
        got += k
    if fp.isclosed():  # all of Content-Length read: the connection can serve the next request
        raw.release_conn()


def _import_s3_client_modules() -> None:
    import aioboto3  # noqa: F401
    from aiobotocore.config import AioConfig  # noqa: F401


def _parse_timestamp(value: Any) -> datetime.datetime:
    """botocore's response timestamp parser, fast for the two forms S3 sends: ISO 8601 in
    XML bodies, RFC 1123 in headers (every GET's Last-Modified). botocore's default goes
    through dateutil, about 140 µs per value here; anything these two do not read as an
    aware datetime still goes to it."""
    if isinstance(value, str):
        try:
            ts = datetime.datetime.fromisoformat(value)
        except ValueError:
            try:
                ts = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                ts = None
        if ts is not None and ts.tzinfo is not None:
            return ts
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)  # type: ignore[no-any-return]


def _tune_session(botocore_session: Any) -> Any:
    """A botocore session whose clients parse timestamps with ``_parse_timestamp``."""
    factory = botocore_session.get_component("response_parser_factory")
    factory.set_parser_defaults(timestamp_parser=_parse_timestamp)
    return botocore_session


class S3Store(ObjectStore):
    """An S3 bucket (and key prefix) through one aioboto3 client, plus one blocking botocore
    client for the requests that carry many bytes.

    The aioboto3 client is created inside the running event loop by ``connect()`` (or
    lazily on first use if that was not called or failed) and reused; it belongs to that
    loop (aiohttp), so one store serves one loop. ``close()`` closes it.

    The requests that move the bulk of the bytes (``get``, and puts of bodies of at
    least ``_BLOCKING_PUT_BYTES``: segment uploads and their parts) run botocore's
    blocking client in a small pool of worker threads of its own instead: urllib3 reads a
    body into one buffer with the GIL released, where aiohttp hands the event loop every
    256 KiB and joins the pieces; and the Content-MD5 and SigV4 payload hashes of a large
    body are computed off the event loop. On a local S3 endpoint a GET of 8 MiB cost 5-6
    ms of CPU against 18-23 ms, and ``bench_tiering``'s cold reads could not get near the
    ``get_object`` baseline otherwise. Same endpoint, credentials, retries, timeouts and
    checksum settings; botocore clients are thread-safe. Each GET is first sent as a
    direct GET (``tiering.s3_direct``: botocore's signer and the blocking client's own
    HTTP session, without the client's per-request Python, which was a third of the
    broker's GIL-held time in cold reads); anything but a success is repeated through
    ``get_object``, so retries and errors stay the client's. ``get_view`` (the chunk cache's
    GETs) reads the body into a reused page-aligned buffer (``BufferPool``, ``readinto``):
    no page faults for fresh memory and no copy of the body.
    """

    def __init__(
        self,
        url: str,
        bucket: str,
        prefix: str,
        *,
        endpoint_url: str | None,
        region: str | None,
        access_key: str | None,
        secret_key: str | None,
        part_size: int,
        max_pool: int,
        connect_timeout: float,
        read_timeout: float,
        max_attempts: int,
        upload_concurrency: int,
    ) -> None:
        self.url = url
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.part_size = part_size
        self.upload_concurrency = upload_concurrency
        self.list_page_size = 1000  # S3's maximum; smaller only to exercise paging
        self.delete_batch = _DELETE_BATCH
        self._endpoint_url = endpoint_url
        self._region = region
        self._access_key = access_key
        self._secret_key = secret_key
        self._max_pool = max_pool
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_attempts = max_attempts
        self._client_task: asyncio.Task[tuple[Any, Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._bucket_verified = False
        self._closed = False
        self._sync: Any = None  # the blocking client of ``get``, created on first use
        self._direct: DirectGet | None = None  # its direct GET path, made with it
        self._warm_up_task: asyncio.Task[None] | None = None
        self.buffers = BufferPool()  # bodies of ``get_view``
        self._sync_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(
            max_workers=min(max_pool, _IO_THREADS), thread_name_prefix="strata-s3"
        )

    # -- plumbing --

    def _where(self, key: str | None = None) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key or ''}"

    async def _create_client(self) -> tuple[Any, Any]:
        import aioboto3
        from aiobotocore.config import AioConfig

        config = AioConfig(
            s3={"addressing_style": "path"},
            retries={"mode": "standard", "max_attempts": self._max_attempts},
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
            max_pool_connections=self._max_pool,
            # Only the checksums S3 requires; Content-MD5 is sent explicitly (see _md5_b64).
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        from aiobotocore.session import get_session

        session = aioboto3.Session(
            aws_access_key_id=self._access_key,
            aws_secret_access_key=self._secret_key,
            region_name=self._region,
            botocore_session=_tune_session(get_session()),
        )
        cm = session.client("s3", endpoint_url=self._endpoint_url, config=config)
        client = await cm.__aenter__()
        return cm, client

    def _sync_client(self) -> Any:
        """The blocking client (created once, in whichever pool thread gets there first)."""
        with self._sync_lock:
            if self._sync is None:
                import boto3
                from botocore.config import Config

                config = Config(
                    s3={"addressing_style": "path"},
                    retries={"mode": "standard", "max_attempts": self._max_attempts},
                    connect_timeout=self._connect_timeout,
                    read_timeout=self._read_timeout,
                    max_pool_connections=self._max_pool,
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required",
                )
                import botocore.session

                session = boto3.session.Session(
                    aws_access_key_id=self._access_key,
                    aws_secret_access_key=self._secret_key,
                    region_name=self._region,
                    botocore_session=_tune_session(botocore.session.get_session()),
                )
                self._sync = session.client("s3", endpoint_url=self._endpoint_url, config=config)
                self._direct = DirectGet.for_client(self._sync, session)
            return self._sync

    @property
    def direct_get(self) -> DirectGet | None:
        """The direct GET path, once the blocking client exists (metrics, tests)."""
        return self._direct

    def _open_get(self, args: dict[str, Any]) -> tuple[int, Any]:
        """(Content-Length, body) of a GET with ``args``: a direct GET first, the client's
        ``get_object`` (retries, errors) for anything but success."""
        client = self._sync_client()  # made with its direct path
        direct = self._direct
        if direct is not None:
            got = direct.get(args["Bucket"], args["Key"], args.get("Range"))
            if got is not None:
                return got
        resp = client.get_object(**args)
        if direct is not None:
            direct.client_succeeded()
        return int(resp["ContentLength"]), resp["Body"]

    def _get_blocking(self, args: dict[str, Any]) -> bytes:
        _, body = self._open_get(args)
        try:
            data = body.read()
        finally:
            body.close()
        return bytes(data)

    def _get_view_blocking(
        self, args: dict[str, Any], check: Callable[[memoryview], None] | None
    ) -> memoryview:
        """GET into a pooled buffer (``BufferPool``; bodies of at least ``_POOL_MIN_BYTES``):
        the body is read from the HTTP response straight into it (``readinto``), not into
        a new ``bytes``; then ``check``."""
        n, body = self._open_get(args)
        try:
            if n < _POOL_MIN_BYTES:  # small (index files, short ranges): one mapping each would not pay
                data = body.read()
                if len(data) != n:
                    raise OSError(f"response body is {len(data)} bytes where Content-Length says {n}")
                view = memoryview(data)
            else:
                view = memoryview(self.buffers.take(n))[:n]
                _read_body_into(body, view)
        finally:
            body.close()
        if check is not None:
            check(view)
        return view

    def _put_blocking(self, method: str, args: dict[str, Any], source: tuple[str, int, int] | None) -> Any:
        """``put_object``/``upload_part`` with ``args``; the body is read from ``source``
        (path, offset, length) here if given, and its Content-MD5 computed here."""
        if source is not None:
            args["Body"] = _pread_exact(*source)
        args["ContentMD5"] = _md5_b64(args["Body"])
        return getattr(self._sync_client(), method)(**args)

    async def _in_pool(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise ObjectStoreError(f"{self._where()}: the object store is closed")
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _client(self) -> Any:
        if self._closed:
            raise ObjectStoreError(f"{self._where()}: the object store is closed")
        loop = asyncio.get_running_loop()
        if self._client_task is not None and self._loop is not loop:
            if self._loop is not None and not self._loop.is_closed():
                raise ObjectStoreError(
                    f"{self._where()}: an S3Store serves the event loop it was first used in; "
                    "open one store per loop (or use SyncObjectStore)"
                )
            self._client_task = None  # that loop is gone, and its connections with it
        if self._client_task is None:
            self._loop = loop
            self._client_task = loop.create_task(self._create_client())
        try:
            _, client = await asyncio.shield(self._client_task)
        except StrataError:
            self._client_task = None
            raise
        except Exception as e:
            self._client_task = None
            raise _convert_s3_error(e, "connect", self._where()) from e
        return client

    async def connect(self, *, warm_up_wait: float = _WARM_UP_WAIT_S) -> None:
        """Create the clients now (the broker calls this at start) rather than on the first
        request: importing aioboto3 and building the client blocks for about a second. The
        imports run in a worker thread; the client is then built on this loop. Then warm
        the clients up (``_warm_up``), waiting at most ``warm_up_wait`` seconds for it: a
        reachable endpoint answers within milliseconds, so the broker announces itself
        ready with warm clients; an endpoint that is down does not hold the start (the
        warm-up goes on in the background, its retries included)."""
        await asyncio.to_thread(_import_s3_client_modules)
        await self._client()
        await self._in_pool(self._sync_client)
        if self._warm_up_task is None:
            self._warm_up_task = asyncio.create_task(self._warm_up(), name="strata-s3-warm-up")
        if warm_up_wait > 0:
            await asyncio.wait({self._warm_up_task}, timeout=warm_up_wait)

    async def _warm_up(self) -> None:
        """GETs of a key that cannot exist: one through the event loop's client and
        ``_WARM_UP_CONNECTIONS`` at once through the blocking one.

        A client's first request loads and compiles what botocore defers (the operation's
        model and parsers, the endpoint rule set, signing): about 60 ms on the first
        aioboto3 GET (the first manifest read of a remote fetch) and a few on the first
        blocking one. The concurrent blocking GETs leave that many open connections in its
        pool: a cold read's first fetch runs its GET and the prefetch of the next segments
        at once, and each new connection costs a name lookup and a TCP (or TLS) handshake
        on that fetch. Best effort: any outcome (NoSuchKey, expected) is ignored."""
        key = f"{self.prefix}{RESERVED_SEGMENT}/warm-up"
        with contextlib.suppress(Exception):
            client = await self._client()
            resp = await client.get_object(Bucket=self.bucket, Key=key)
            resp["Body"].close()
        with contextlib.suppress(Exception):
            get = functools.partial(self._sync_client().get_object, Bucket=self.bucket, Key=key)
            n = min(_WARM_UP_CONNECTIONS, self._max_pool, _IO_THREADS)
            await asyncio.gather(*(self._in_pool(get) for _ in range(n)), return_exceptions=True)

    @contextlib.asynccontextmanager
    async def _errors(self, op: str, key: str | None = None) -> AsyncIterator[None]:
        try:
            yield
        except StrataError:
            raise
        except Exception as e:
            raise _convert_s3_error(e, op, self._where(key)) from e

    async def _check_bucket(self, client: Any) -> None:
        # HEAD answers a bare 404 both for a missing key and a missing bucket; tell them apart once.
        if self._bucket_verified:
            return
        try:
            await client.head_bucket(Bucket=self.bucket)
        except Exception as e:
            conv = _convert_s3_error(e, "head_bucket", self._where())
            if isinstance(conv, ObjectNotFoundError):
                raise ObjectStoreError(f"S3 head {self._where()} failed: the bucket does not exist") from e
            raise conv from e
        self._bucket_verified = True

    # -- operations --

    async def put(
        self, key: str, data: bytes | memoryview, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        return await self._put(key, bytes(data), None, if_match=if_match, if_none_match=if_none_match)

    async def _put(
        self,
        key: str,
        body: bytes | None,
        source: tuple[str, int, int] | None,
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        """PUT ``body``, or the bytes of ``source`` (path, offset, length), read in the pool."""
        validate_key(key)
        if if_match is not None and if_none_match:
            raise InvalidRequestError(f"put {key!r}: if_match and if_none_match are mutually exclusive")
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self.prefix + key}
        if if_match is not None:
            args["IfMatch"] = _quote_etag(if_match)
        if if_none_match:
            args["IfNoneMatch"] = "*"
        size = len(body) if body is not None else source[2] if source is not None else 0
        try:
            async with self._errors("put", key):
                if size >= _BLOCKING_PUT_BYTES:
                    if body is not None:
                        args["Body"] = body
                    resp = await self._in_pool(self._put_blocking, "put_object", args, source)
                else:
                    if body is None:
                        assert source is not None
                        body = await asyncio.to_thread(_pread_exact, *source)
                    args["Body"] = body
                    args["ContentMD5"] = _md5_b64(body)
                    resp = await (await self._client()).put_object(**args)
        except ObjectNotFoundError:
            if if_match is None:
                raise
            # S3 answers If-Match on a missing object with 404; to a CAS caller it is a lost race.
            raise PreconditionFailedError(
                f"S3 put {self._where(key)}: precondition failed (object does not exist)"
            ) from None
        return _unquote_etag(resp["ETag"])

    async def put_file(
        self, key: str, path: str | os.PathLike[str], *, offset: int = 0, length: int | None = None
    ) -> str:
        validate_key(key)
        src = os.fspath(path)
        length = await asyncio.to_thread(_source_span, src, offset, length)
        if length <= self.part_size:
            return await self._put(key, None, (src, offset, length))
        n_parts = -(-length // self.part_size)
        if n_parts > MAX_PARTS:
            raise InvalidRequestError(
                f"put_file {key!r}: {length} bytes need {n_parts} parts of {self.part_size}; "
                f"S3 allows {MAX_PARTS} (raise part_size)"
            )
        client = await self._client()
        full = self.prefix + key
        async with self._errors("create_multipart_upload", key):
            upload_id = (await client.create_multipart_upload(Bucket=self.bucket, Key=full))["UploadId"]
        sem = asyncio.Semaphore(self.upload_concurrency)

        async def upload(number: int) -> dict[str, Any]:
            async with sem:
                pos = (number - 1) * self.part_size
                size = min(self.part_size, length - pos)
                args = {"Bucket": self.bucket, "Key": full, "UploadId": upload_id, "PartNumber": number}
                async with self._errors(f"upload_part {number}/{n_parts}", key):
                    resp = await self._in_pool(
                        self._put_blocking, "upload_part", args, (src, offset + pos, size)
                    )
                return {"PartNumber": number, "ETag": resp["ETag"]}

        tasks = [asyncio.ensure_future(upload(i)) for i in range(1, n_parts + 1)]
        try:
            parts = await asyncio.gather(*tasks)
            async with self._errors("complete_multipart_upload", key):
                resp = await client.complete_multipart_upload(
                    Bucket=self.bucket, Key=full, UploadId=upload_id, MultipartUpload={"Parts": parts}
                )
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):  # best effort; a lifecycle rule reaps leftovers
                await client.abort_multipart_upload(Bucket=self.bucket, Key=full, UploadId=upload_id)
            raise
        return _unquote_etag(resp["ETag"])

    async def get(self, key: str, *, start: int | None = None, end: int | None = None) -> bytes:
        data = await self._get(key, start, end, self._get_blocking)
        return data if isinstance(data, bytes) else bytes(data)

    async def get_view(
        self,
        key: str,
        *,
        start: int | None = None,
        end: int | None = None,
        check: Callable[[memoryview], None] | None = None,
    ) -> memoryview:
        data = await self._get(key, start, end, functools.partial(self._get_view_blocking, check=check))
        if isinstance(data, memoryview):
            return data
        view = memoryview(data)  # empty range or object: nothing was fetched, nothing checked
        if check is not None:
            check(view)
        return view

    async def _get(
        self,
        key: str,
        start: int | None,
        end: int | None,
        fetch: Callable[[dict[str, Any]], bytes | memoryview],
    ) -> bytes | memoryview:
        validate_key(key)
        start, end = _check_range(key, start, end)
        if end is not None and end == start:
            if await self.head(key) is None:
                raise ObjectNotFoundError(f"S3 get: object not found: {self._where(key)}")
            return b""
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self.prefix + key}
        if start or end is not None:
            args["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        try:
            async with self._errors("get", key):
                return await self._in_pool(fetch, args)
        except InvalidRangeError as e:
            size = e.object_size
            if size is None:
                info = await self.head(key)
                if info is None:
                    raise ObjectNotFoundError(f"S3 get: object not found: {self._where(key)}") from None
                size = info.size
            if start == 0 and size == 0:
                return b""
            raise _range_error(key, start, end, size) from None

    async def get_with_etag(self, key: str) -> tuple[bytes, str]:
        validate_key(key)
        client = await self._client()
        async with self._errors("get", key):
            resp = await client.get_object(Bucket=self.bucket, Key=self.prefix + key)
            async with resp["Body"] as stream:
                data = bytes(await stream.read())
        return data, _unquote_etag(resp["ETag"])

    async def head(self, key: str) -> ObjectInfo | None:
        validate_key(key)
        client = await self._client()
        try:
            async with self._errors("head", key):
                resp = await client.head_object(Bucket=self.bucket, Key=self.prefix + key)
        except ObjectNotFoundError:
            await self._check_bucket(client)
            return None
        return ObjectInfo(
            key=key,
            size=int(resp["ContentLength"]),
            etag=_unquote_etag(resp["ETag"]),
            last_modified_ms=int(resp["LastModified"].timestamp() * 1000),
        )

    async def delete(self, key: str) -> None:
        validate_key(key)
        client = await self._client()
        with contextlib.suppress(ObjectNotFoundError):
            async with self._errors("delete", key):
                await client.delete_object(Bucket=self.bucket, Key=self.prefix + key)

    async def delete_many(self, keys: Sequence[str]) -> None:
        for k in keys:
            validate_key(k)
        if not keys:
            return
        client = await self._client()
        for i in range(0, len(keys), self.delete_batch):
            batch = list(dict.fromkeys(keys[i : i + self.delete_batch]))
            async with self._errors("delete_many", batch[0]):
                resp = await client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": self.prefix + k} for k in batch], "Quiet": True},
                )
            failed = [e for e in resp.get("Errors", []) if e.get("Code") not in _NOT_FOUND_CODES]
            if failed:
                shown = ", ".join(
                    f"{e.get('Key')}: {e.get('Code')} {e.get('Message', '')}" for e in failed[:5]
                )
                msg = (
                    f"S3 delete_many in s3://{self.bucket}/{self.prefix} failed "
                    f"for {len(failed)} keys: {shown}"
                )
                if all(e.get("Code") in _RETRIABLE_CODES for e in failed):
                    raise RetriableObjectStoreError(msg)
                raise ObjectStoreError(msg)

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        validate_prefix(prefix)
        client = await self._client()
        out: list[ObjectInfo] = []
        async with self._errors("list", prefix + "*"):
            paginator = client.get_paginator("list_objects_v2")
            pages = paginator.paginate(
                Bucket=self.bucket,
                Prefix=self.prefix + prefix,
                PaginationConfig={"PageSize": self.list_page_size},
            )
            async for page in pages:
                for obj in page.get("Contents", []):
                    full: str = obj["Key"]
                    if full.endswith("/"):  # "folder" markers made by consoles
                        continue
                    out.append(
                        ObjectInfo(
                            key=full[len(self.prefix) :],
                            size=int(obj["Size"]),
                            etag=_unquote_etag(obj.get("ETag", "")),
                            last_modified_ms=int(obj["LastModified"].timestamp() * 1000),
                        )
                    )
        out.sort(key=lambda o: o.key)
        return out

    async def close(self) -> None:
        self._closed = True
        warm_up, self._warm_up_task = self._warm_up_task, None
        if warm_up is not None and not warm_up.done():
            warm_up.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await warm_up
        self._pool.shutdown(wait=False)
        task, self._client_task = self._client_task, None
        if task is None or self._loop is not asyncio.get_running_loop():
            return
        with contextlib.suppress(Exception):
            cm, _ = await task
            await cm.__aexit__(None, None, None)


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
                            if if_match is not None and current != _unquote_etag(if_match):
                                raise PreconditionFailedError(
                                    f"file store put {self.root}/{key}: precondition failed "
                                    f"(etag is {current or 'absent'}, expected {_unquote_etag(if_match)})"
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
        length = _source_span(src, offset, length)
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
                raise _range_error(key, start, end, size)
            stop = size if end is None else min(end, size)
            out = bytearray()
            pos = start
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

    async def get(self, key: str, *, start: int | None = None, end: int | None = None) -> bytes:
        validate_key(key)
        s, e = _check_range(key, start, end)
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


# --- blocking facade -------------------------------------------------------------------------------


class SyncObjectStore:
    """Blocking face of an ObjectStore, for code without an event loop (Spark executors,
    the CLI, tools). The store runs on a private event-loop thread, so both faces share
    one implementation and one error conversion. Thread-safe; use as a context manager
    or call ``close()``."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.url = store.url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"strata-objstore:{store.url}", daemon=True
        )
        self._thread.start()
        self._closed = False

    @classmethod
    def open(cls, url: str, **kwargs: Any) -> SyncObjectStore:
        """``open_store(url, **kwargs)`` behind a blocking facade."""
        return cls(open_store(url, **kwargs))

    def _run(self, make: Callable[[], Awaitable[T]]) -> T:
        if self._closed:
            raise ObjectStoreError(f"{self.url}: the object store is closed")

        async def call() -> T:
            return await make()

        coro: Coroutine[Any, Any, T] = call()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def put(
        self, key: str, data: bytes | memoryview, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        return self._run(lambda: self.store.put(key, data, if_match=if_match, if_none_match=if_none_match))

    def put_file(
        self, key: str, path: str | os.PathLike[str], *, offset: int = 0, length: int | None = None
    ) -> str:
        return self._run(lambda: self.store.put_file(key, path, offset=offset, length=length))

    def get(self, key: str, *, start: int | None = None, end: int | None = None) -> bytes:
        return self._run(lambda: self.store.get(key, start=start, end=end))

    def get_with_etag(self, key: str) -> tuple[bytes, str]:
        return self._run(lambda: self.store.get_with_etag(key))

    def head(self, key: str) -> ObjectInfo | None:
        return self._run(lambda: self.store.head(key))

    def exists(self, key: str) -> bool:
        return self._run(lambda: self.store.exists(key))

    def delete(self, key: str) -> None:
        self._run(lambda: self.store.delete(key))

    def delete_many(self, keys: Sequence[str]) -> None:
        self._run(lambda: self.store.delete_many(keys))

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        return self._run(lambda: self.store.list(prefix))

    def close(self) -> None:
        if self._closed:
            return
        try:
            self._run(self.store.close)
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> SyncObjectStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SyncObjectStore({self.url!r})"
