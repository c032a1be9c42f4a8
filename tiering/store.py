"""Object stores: one small async interface, two real backends.

``open_store(url)`` returns

- ``S3Store`` (``tiering.s3_store``) for ``s3://bucket[/prefix]`` (``s3a://`` is accepted as an alias): any
  S3-compatible service through aioboto3 (GETs through botocore's blocking client in
  worker threads, signed and sent directly when they succeed: see ``S3Store`` and
  ``tiering.s3_direct``). Endpoint, region and credentials come from the
  standard AWS chain (``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``,
  profiles, instance roles, ...) unless given explicitly. Path-style addressing, so MinIO
  and other self-hosted endpoints work without wildcard DNS.
- ``FileStore`` (``tiering.file_store``) for ``file:///abs/path``: a local directory, the embedded default.

The interface, its contract (keys, ETags, ranged reads, errors, the retry caveat) and the
helpers both backends share live in ``tiering.store_base``, one module per backend next to
it (``tiering.s3_store``, ``tiering.file_store``); the seam's names are re-exported here,
so code that only uses a store imports from this module.

``SyncObjectStore`` is the blocking facade for Spark executors, the CLI and tools: it runs
an ``ObjectStore`` on a private event-loop thread, so both faces share one code path,
including error conversion.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final, TypeVar
from urllib.parse import unquote, urlsplit

from hot.errors import (
    InvalidConfigError,
    InvalidRequestError,
    ObjectStoreError,
)
from tiering.file_store import FileStore
from tiering.s3_store import MAX_PART_SIZE, MIN_PART_SIZE, S3Store
from tiering.store_base import (
    MAX_KEY_BYTES,
    RESERVED_SEGMENT,
    InvalidRangeError,
    ObjectInfo,
    ObjectStore,
    validate_key,
    validate_prefix,
)

__all__ = [
    "MAX_KEY_BYTES",
    "RESERVED_SEGMENT",
    "InvalidRangeError",
    "ObjectInfo",
    "ObjectStore",
    "SyncObjectStore",
    "open_store",
    "validate_key",
    "validate_prefix",
]

T = TypeVar("T")

_BUCKET_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


def _env_flag(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise InvalidConfigError(f"{name}: expected true or false, got {value!r}")


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
    sign_payload: bool | None = None,
) -> ObjectStore:
    """Open the store named by ``url`` (``s3://bucket/prefix`` or ``file:///abs/path``).

    The S3 keyword arguments override the AWS chain; ``max_attempts`` counts the first
    try (botocore standard retry mode); they are ignored for ``file://``. PUTs send their
    CRC-32C (``x-amz-checksum-crc32c``) and an unsigned payload; ``sign_payload`` adds
    the SHA-256 payload signature (a second pass over every body) for plain-HTTP
    endpoints on networks that are not trusted; unset, ``STRATA_S3_SIGN_PAYLOAD=true`` in
    the environment turns it on (how a broker, which opens its store by URL, gets it)."""
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
            sign_payload=_env_flag("STRATA_S3_SIGN_PAYLOAD") if sign_payload is None else sign_payload,
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

    def put_file_moved(self, key: str, path: str | os.PathLike[str]) -> str:
        return self._run(lambda: self.store.put_file_moved(key, path))

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
