"""The S3 backend of the object-store seam (``tiering.store_base.ObjectStore``): any
S3-compatible service through aioboto3, with the bulk GETs and PUTs on botocore's
blocking client in worker threads (signed and sent directly when they succeed:
``tiering.s3_direct``), GET bodies in pooled page-aligned buffers (``BufferPool``), and
the one conversion of botocore/aiohttp exceptions into ``hot.errors`` types.

aioboto3, aiobotocore, botocore and aiohttp are imported when a store first needs a client,
not with this module, so importing ``tiering.store`` stays cheap for Spark workers and
the CLI.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import email.utils
import functools
import mmap
import os
import struct
import sys
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

from crc32c import crc32c as _crc32c

from hot.errors import (
    InvalidRequestError,
    ObjectNotFoundError,
    ObjectStoreError,
    PreconditionFailedError,
    RetriableObjectStoreError,
    StorageError,
    StrataError,
)
from tiering.checksum import crc32c_concat
from tiering.s3_direct import DirectGet
from tiering.store_base import (
    RESERVED_SEGMENT,
    InvalidRangeError,
    ObjectInfo,
    ObjectStore,
    check_range,
    range_error,
    source_span,
    unquote_etag,
    validate_key,
    validate_prefix,
)

T = TypeVar("T")
_C = TypeVar("_C")  # a botocore Config class (see S3Store._client_config)
MIN_PART_SIZE: Final = 5 << 20  # S3's minimum for every part but the last
MAX_PART_SIZE: Final = 5 << 30
MAX_PARTS: Final = 10_000
_DELETE_BATCH: Final = 1000  # DeleteObjects limit
_IO_THREADS: Final = 8  # S3Store's worker threads for large GETs and PUTs (at most max_pool)
_WARM_UP_WAIT_S: Final = 2.0  # how long ``connect`` waits for the clients' warm-up
_WARM_UP_CONNECTIONS: Final = 4  # blocking client connections opened by the warm-up
_BLOCKING_PUT_BYTES: Final = 1 << 20  # bodies from this size go through the blocking client
_PAGE: Final = mmap.PAGESIZE
_POOL_FREE_BYTES: Final = 64 << 20  # GET buffers kept for reuse once nothing views them
# Smaller GET bodies are plain bytes: a mapping per small object (an index file, say) would
# cost a syscall and a VMA each, and malloc reuses small blocks anyway.
_POOL_MIN_BYTES: Final = 256 << 10


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

    @property
    def mapped_bytes(self) -> int:
        """Bytes of every buffer the pool holds, lent or free (metrics)."""
        with self._lock:
            return sum(len(m) for m in self._lent) + sum(len(m) for m in self._free)

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


def _pread_exact(path: str, offset: int, length: int) -> bytearray:
    """``length`` bytes of ``path`` from ``offset``, read straight into the buffer that is
    sent (no second copy into a ``bytes``: botocore and http.client send a bytearray as is)."""
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
            return buf
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


_THROTTLING_CODES: Final = frozenset(c for c in _RETRIABLE_CODES if "Throttl" in c or "Limit" in c) | {
    "SlowDown",
    "TooManyRequestsException",
}


class S3RequestStats:
    """Counters of failed S3 request attempts, from botocore's ``needs-retry`` event (which
    both clients emit after every attempt, before their retry handler decides): what
    ``/metrics`` shows as ``strata_tiering_s3_*``. Retries themselves are botocore's
    standard mode: exponential backoff with full jitter (at most 20 s between attempts),
    ``max_attempts`` in all, and a client-wide retry quota that throttling drains, so a
    bucket answering 503 SlowDown is asked less often, not more. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.throttled = 0  # attempts answered 429/503 or a throttling error code
        self.failed_attempts = 0  # attempts that failed (any error status or a connection error)

    def on_status(self, status: int) -> None:
        """A direct GET's failed attempt (``DirectGet.on_failure``), which the client repeats."""
        with self._lock:
            self.failed_attempts += 1
            if status in (429, 503):
                self.throttled += 1

    def on_needs_retry(self, response: Any = None, caught_exception: Any = None, **_: Any) -> None:
        status, code = 0, ""
        if response is not None:
            http, parsed = response
            status = int(getattr(http, "status_code", 0) or 0)
            code = str((parsed or {}).get("Error", {}).get("Code", "") or "")
        if caught_exception is None and status < 300:
            return
        throttled = status in (429, 503) or code in _THROTTLING_CODES
        with self._lock:
            self.failed_attempts += 1
            if throttled:
                self.throttled += 1


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


def _quote_etag(etag: str) -> str:
    return f'"{unquote_etag(etag)}"'


def _crc32c_b64(data: bytes | bytearray | memoryview, crc: int | None = None) -> str:
    """The ``x-amz-checksum-crc32c`` value of ``data`` (``crc``: its CRC-32C, already known).

    Why this and not Content-MD5: S3 (and MinIO) reject a body whose CRC-32C differs
    (BadDigest), as they do for Content-MD5, but the uploader has already computed the
    segment's CRC-32C while verifying it (the manifest's ``log_crc32c``), so a segment's
    bytes are hashed once instead of twice; where it is not known, CRC-32C in hardware is
    about 20 times cheaper than MD5. moto 5.2 stores the value without checking it."""
    value = int(_crc32c(data)) if crc is None else crc
    return base64.b64encode(struct.pack(">I", value & 0xFFFFFFFF)).decode("ascii")


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
    256 KiB and joins the pieces; and the body is read and its CRC-32C computed off the
    event loop. On a local S3 endpoint a GET of 8 MiB cost 5-6
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
        sign_payload: bool = False,
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
        self._sign_payload = sign_payload
        self._client_task: asyncio.Task[tuple[Any, Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._bucket_verified = False
        self._closed = False
        self._sync: Any = None  # the blocking client of ``get``, created on first use
        self._direct: DirectGet | None = None  # its direct GET path, made with it
        self._warm_up_task: asyncio.Task[None] | None = None
        self.buffers = BufferPool()  # bodies of ``get_view``
        self.requests = S3RequestStats()  # failed and throttled attempts (metrics)
        self._sync_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(
            max_workers=min(max_pool, _IO_THREADS), thread_name_prefix="strata-s3"
        )

    # -- plumbing --

    def _where(self, key: str | None = None) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key or ''}"

    def _client_config(self, config_cls: Callable[..., _C]) -> _C:
        """The botocore ``Config`` (or aiobotocore's ``AioConfig``, its subclass) of both
        clients: one set of settings for the async client and the blocking one."""
        return config_cls(
            # ``payload_signing_enabled`` False: PUTs are signed with UNSIGNED-PAYLOAD, over
            # plain HTTP too (botocore otherwise hashes every body with SHA-256 there): the
            # body's integrity is S3's check of the signed x-amz-checksum-crc32c header
            # (``_crc32c_b64``). ``sign_payload=True`` restores the SHA-256 payload
            # signature for plain-HTTP endpoints on untrusted networks.
            s3={"addressing_style": "path", "payload_signing_enabled": self._sign_payload},
            # total_max_attempts: the first try included, as open_store documents (botocore's
            # "max_attempts" counts retries only).
            retries={"mode": "standard", "total_max_attempts": self._max_attempts},
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
            max_pool_connections=self._max_pool,
            # Only the checksums S3 requires; every PUT sends its CRC-32C itself (_crc32c_b64).
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )

    async def _create_client(self) -> tuple[Any, Any]:
        import aioboto3
        from aiobotocore.config import AioConfig

        config = self._client_config(AioConfig)
        from aiobotocore.session import get_session

        session = aioboto3.Session(
            aws_access_key_id=self._access_key,
            aws_secret_access_key=self._secret_key,
            region_name=self._region,
            botocore_session=_tune_session(get_session()),
        )
        cm = session.client("s3", endpoint_url=self._endpoint_url, config=config)
        client = await cm.__aenter__()
        client.meta.events.register_first("needs-retry.s3", self.requests.on_needs_retry)
        return cm, client

    def _sync_client(self) -> Any:
        """The blocking client (created once, in whichever pool thread gets there first)."""
        with self._sync_lock:
            if self._sync is None:
                import boto3
                from botocore.config import Config

                config = self._client_config(Config)
                import botocore.session

                session = boto3.session.Session(
                    aws_access_key_id=self._access_key,
                    aws_secret_access_key=self._secret_key,
                    region_name=self._region,
                    botocore_session=_tune_session(botocore.session.get_session()),
                )
                self._sync = session.client("s3", endpoint_url=self._endpoint_url, config=config)
                self._sync.meta.events.register_first("needs-retry.s3", self.requests.on_needs_retry)
                self._direct = DirectGet.for_client(self._sync, session)
                if self._direct is not None:
                    self._direct.on_failure = self.requests.on_status
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

    def _put_blocking(
        self,
        method: str,
        args: dict[str, Any],
        source: tuple[str, int, int] | None,
        crc: int | None = None,
    ) -> Any:
        """``put_object``/``upload_part`` with ``args``; the body is read from ``source``
        (path, offset, length) here if given, and its CRC-32C (unless ``crc`` is already
        known) computed here. The response gets the CRC-32C sent as ``"_crc32c"``."""
        if source is not None:
            args["Body"] = _pread_exact(*source)
        if crc is None:
            crc = int(_crc32c(args["Body"]))
        args["ChecksumCRC32C"] = _crc32c_b64(args["Body"], crc)
        resp = getattr(self._sync_client(), method)(**args)
        resp["_crc32c"] = crc
        return resp

    def _put_small_file(self, args: dict[str, Any], source: tuple[str, int, int], crc: int | None) -> Any:
        """An unconditional PUT of a small file: a direct PUT first, the blocking client's
        ``put_object`` (retries, errors) for anything but success."""
        body = bytes(_pread_exact(*source))
        checksum = _crc32c_b64(body, crc)
        client = self._sync_client()  # made with its direct path
        direct = self._direct
        if direct is not None:
            etag = direct.put(args["Bucket"], args["Key"], body, checksum)
            if etag is not None:
                return {"ETag": etag}
        resp = client.put_object(**args, Body=body, ChecksumCRC32C=checksum)
        if direct is not None:
            direct.client_succeeded()
        return resp

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
        crc: int | None = None,
    ) -> str:
        """PUT ``body``, or the bytes of ``source`` (path, offset, length), read in the pool;
        ``crc``: their CRC-32C if the caller knows it (S3 checks it against the bytes)."""
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
                    resp = await self._in_pool(self._put_blocking, "put_object", args, source, crc)
                elif source is not None and if_match is None and not if_none_match:
                    # A small file (an index): read, checksummed and sent directly in the
                    # pool (``DirectGet.put``), the client's put_object only if that fails.
                    resp = await self._in_pool(self._put_small_file, args, source, crc)
                else:
                    if body is None:
                        assert source is not None
                        body = bytes(await asyncio.to_thread(_pread_exact, *source))
                    args["Body"] = body
                    args["ChecksumCRC32C"] = _crc32c_b64(body, crc)
                    resp = await (await self._client()).put_object(**args)
        except ObjectNotFoundError:
            if if_match is None:
                raise
            # S3 answers If-Match on a missing object with 404; to a CAS caller it is a lost race.
            raise PreconditionFailedError(
                f"S3 put {self._where(key)}: precondition failed (object does not exist)"
            ) from None
        return unquote_etag(resp["ETag"])

    async def put_file(
        self,
        key: str,
        path: str | os.PathLike[str],
        *,
        offset: int = 0,
        length: int | None = None,
        crc32c: int | None = None,
    ) -> str:
        validate_key(key)
        src = os.fspath(path)
        length = await asyncio.to_thread(source_span, src, offset, length)
        if length <= self.part_size:
            return await self._put(key, None, (src, offset, length), crc=crc32c)
        n_parts = -(-length // self.part_size)
        if n_parts > MAX_PARTS:
            raise InvalidRequestError(
                f"put_file {key!r}: {length} bytes need {n_parts} parts of {self.part_size}; "
                f"S3 allows {MAX_PARTS} (raise part_size)"
            )
        client = await self._client()
        full = self.prefix + key
        async with self._errors("create_multipart_upload", key):
            upload_id = (
                await client.create_multipart_upload(Bucket=self.bucket, Key=full, ChecksumAlgorithm="CRC32C")
            )["UploadId"]
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
                return {
                    "PartNumber": number,
                    "ETag": resp["ETag"],
                    "ChecksumCRC32C": _crc32c_b64(b"", resp["_crc32c"]),
                    "_size": size,
                    "_crc": resp["_crc32c"],
                }

        tasks = [asyncio.ensure_future(upload(i)) for i in range(1, n_parts + 1)]
        try:
            parts = await asyncio.gather(*tasks)
            if crc32c is not None:
                # The parts' CRCs combined must be the caller's CRC of the whole span: a
                # source that changed since the caller checksummed it is not completed.
                got = crc32c_concat((p.pop("_crc"), p.pop("_size")) for p in parts)
                if got != crc32c:
                    raise StorageError(
                        f"put_file: source file {src} changed while uploading [{offset}, {offset + length}) "
                        f"(CRC-32C {got:#010x}, expected {crc32c:#010x})"
                    )
            for p in parts:
                p.pop("_crc", None)
                p.pop("_size", None)
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
        return unquote_etag(resp["ETag"])

    async def put_file_checked(
        self,
        key: str,
        path: str | os.PathLike[str],
        *,
        offset: int = 0,
        length: int | None = None,
        crc32c: int,
    ) -> str:
        return await self.put_file(key, path, offset=offset, length=length, crc32c=crc32c)

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
        start, end = check_range(key, start, end)
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
            raise range_error(key, start, end, size) from None

    async def get_with_etag(self, key: str) -> tuple[bytes, str]:
        validate_key(key)
        client = await self._client()
        async with self._errors("get", key):
            resp = await client.get_object(Bucket=self.bucket, Key=self.prefix + key)
            async with resp["Body"] as stream:
                data = bytes(await stream.read())
        return data, unquote_etag(resp["ETag"])

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
            etag=unquote_etag(resp["ETag"]),
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
                            etag=unquote_etag(obj.get("ETag", "")),
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
