"""pyiceberg's FileIO on Strata's object-store seam (``tiering.store``): the committer's
metadata and manifest files go through the same store, retries and error conversion as
every tiered object. (pyiceberg's PyArrow FileIO writes with S3 multipart uploads, which
some S3-compatible stores refuse for small files; readers of the table keep their own.)

Catalog property ``py-io-impl = spark.iceberg.fileio.StoreFileIO`` with
``strata.store-url`` set to the broker's object store URL; S3 settings come from the AWS
chain as for the broker's own store.
"""

from __future__ import annotations

import io
import threading
from typing import Any, Final

from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.typedef import Properties

from hot.errors import InvalidConfigError
from tiering.store import SyncObjectStore

STORE_URL_PROPERTY: Final = "strata.store-url"
_WHOLE_BYTES: Final = 1 << 20  # metadata and manifests: one GET; larger (data files): ranged
_stores: dict[str, SyncObjectStore] = {}
_lock = threading.Lock()


def _store(url: str) -> SyncObjectStore:
    # one per URL per process: pyiceberg makes a FileIO for every table it loads
    with _lock:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = SyncObjectStore.open(url)
        return store


class _Input(InputFile):
    def __init__(self, location: str, store: SyncObjectStore, key: str) -> None:
        super().__init__(location)
        self._store = store
        self._key = key

    def __len__(self) -> int:
        info = self._store.head(self._key)
        if info is None:
            raise FileNotFoundError(self.location)
        return info.size

    def exists(self) -> bool:
        return self._store.exists(self._key)

    def open(self, seekable: bool = True) -> InputStream:
        info = self._store.head(self._key)
        if info is None:
            raise FileNotFoundError(self.location)
        if info.size <= _WHOLE_BYTES:
            return io.BytesIO(self._store.get(self._key))
        return _Ranged(self._store, self._key, info.size)


class _Ranged(io.RawIOBase):
    """Ranged GETs on demand: add_files reads only a Parquet file's footer."""

    def __init__(self, store: SyncObjectStore, key: str, size: int) -> None:
        super().__init__()
        self._store = store
        self._key = key
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if self._pos >= end:
            return b""
        data = self._store.get(self._key, start=self._pos, end=end)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _Upload(io.BytesIO):
    """Buffered in memory, stored whole on close (Iceberg's files are written once)."""

    def __init__(self, store: SyncObjectStore, key: str, overwrite: bool) -> None:
        super().__init__()
        self._store = store
        self._key = key
        self._overwrite = overwrite
        self._done = False

    def close(self) -> None:
        if not self._done and not self.closed:
            self._done = True
            self._store.put(self._key, self.getvalue(), if_none_match=not self._overwrite)
        super().close()


class _Output(OutputFile):
    def __init__(self, location: str, store: SyncObjectStore, key: str) -> None:
        super().__init__(location)
        self._store = store
        self._key = key

    def __len__(self) -> int:
        info = self._store.head(self._key)
        return 0 if info is None else info.size

    def exists(self) -> bool:
        return self._store.exists(self._key)

    def to_input_file(self) -> InputFile:
        return _Input(self.location, self._store, self._key)

    def create(self, overwrite: bool = False) -> OutputStream:
        if not overwrite and self.exists():
            raise FileExistsError(self.location)
        return _Upload(self._store, self._key, overwrite)


class StoreFileIO(FileIO):
    def __init__(self, properties: Properties = {}) -> None:  # noqa: B006 (pyiceberg's signature)
        super().__init__(properties)
        url = properties.get(STORE_URL_PROPERTY)
        if not url:
            raise InvalidConfigError(f"StoreFileIO needs the catalog property {STORE_URL_PROPERTY}")
        self.url = str(url).rstrip("/")
        self.store = _store(self.url)

    def _key(self, location: str) -> str:
        prefix = self.url + "/"
        if location.startswith("s3a://"):
            location = "s3://" + location[len("s3a://") :]
        if not location.startswith(prefix):
            raise InvalidConfigError(f"{location} is outside the object store {self.url}")
        return location[len(prefix) :]

    def new_input(self, location: str) -> InputFile:
        return _Input(location, self.store, self._key(location))

    def new_output(self, location: str) -> OutputFile:
        return _Output(location, self.store, self._key(location))

    def delete(self, location: str | InputFile | OutputFile) -> None:
        where: Any = location if isinstance(location, str) else location.location
        self.store.delete(self._key(where))
