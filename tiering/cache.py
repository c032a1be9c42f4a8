"""On-disk LRU cache of fixed-size chunks of remote objects, with single-flight GETs and prefetch.

Remote reads fetch objects in chunks of ``chunk_bytes`` (chunk ``i`` of an object is its
bytes ``[i * chunk_bytes, min((i + 1) * chunk_bytes, size))``), so a consumer reading a
segment costs one ranged GET per chunk however small its fetches are, and a chunk read
once is served from local disk afterwards. Objects are immutable (segment keys carry a
fresh segment id per upload), so a cached chunk never goes stale.

Files, one per chunk, under ``<cache_dir>/<d0d1>/<digest>-<index>.chunk`` where
``digest`` is the first 40 hex digits of SHA-256 of the object key and ``d0d1`` its first
two (256 subdirectories keep directories small). Layout (big-endian)::

    offset  size  field
    0       4     magic        b"STCC"
    4       4     crc          uint32  CRC-32C of bytes [8, end)
    8       4     index        uint32  chunk index
    12      4     length       uint32  payload bytes
    16      2     keyLength    uint16
    18      k     key          UTF-8 object key (guards against digest collisions)
    18+k    n     payload

Crash behaviour: a chunk is written to ``<name>.tmp`` and renamed into place (no fsync:
it is a cache). A crash can leave ``.tmp`` files (deleted by the start-up scan) or a
renamed file whose data never reached the disk; the CRC check on every read catches the
latter, and a damaged file is deleted and fetched again, never served.

Restart: the start-up scan rebuilds the in-memory index from the file names and sizes
(no file is read), oldest modification time first, so the LRU order survives roughly.

Concurrency: the index lives on the event loop; file I/O runs in worker threads. Requests
for a chunk that is being fetched join that fetch (one GET however many readers), and
reading chunk N of an object right after chunk N-1 starts background fetches of the next
``prefetch_chunks`` chunks (consumers catching up read sequentially). ``prefetch`` lets
the remote reader ask for the chunks after the bytes it just served, across objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import struct
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from crc32c import crc32c

from hot.errors import InvalidConfigError, ObjectNotFoundError, ObjectStoreError
from tiering.store import InvalidRangeError, ObjectStore

logger = logging.getLogger(__name__)

MAGIC: Final = b"STCC"
CHUNK_HEADER: Final = struct.Struct(">4sIIIH")  # magic, crc, index, length, keyLength
CHUNK_SUFFIX: Final = ".chunk"
DIGEST_HEX: Final = 40
_CRC_START: Final = 8
_MAX_TRACKED_OBJECTS: Final = 4096  # objects whose last read chunk is remembered for prefetch


class RemoteObjectMissingError(ObjectNotFoundError):
    """An object the manifest names is not in the bucket (KAFKA_STORAGE_ERROR); names the key."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class RemoteCorruptObjectError(ObjectStoreError):
    """Bytes of a remote object fail validation (CRC, SHA-256, impossible header or size).

    Never served: the partition gets KAFKA_STORAGE_ERROR naming the key and position."""

    def __init__(
        self, key: str, reason: str, *, position: int | None = None, offset: int | None = None
    ) -> None:
        where = []
        if offset is not None:
            where.append(f"offset {offset}")
        if position is not None:
            where.append(f"byte {position}")
        at = f" at {', '.join(where)}" if where else ""
        super().__init__(f"corrupt remote object {key}{at}: {reason}")
        self.key = key
        self.reason = reason
        self.position = position
        self.offset = offset


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters since the cache was created (exported as metrics by the tiering service)."""

    hits: int  # chunks served from disk
    misses: int  # reader requests that started a GET
    coalesced: int  # reader requests that joined a GET already in flight
    prefetches: int  # GETs started by sequential prefetch
    evictions: int  # chunk files deleted to stay under the size cap
    gets: int  # ranged GETs sent to the store
    fetched_bytes: int  # bytes received from the store
    corrupt: int  # damaged chunk files found and deleted
    entries: int  # chunk files currently cached
    size: int  # bytes of those files


# --- chunk files ------------------------------------------------------------------------------


class ChunkFile:
    """One cached chunk: ``<cache_dir>/<d0d1>/<digest40>-<index:08d>.chunk``.

    Layout (big-endian): magic ``STCC`` | crc uint32 (CRC-32C of everything after it) |
    index uint32 | length uint32 | keyLength uint16 | key (UTF-8) | payload. Written to
    ``<name>.tmp`` and renamed, without fsync (a cache); after a crash a torn or empty
    file fails ``decode`` (magic, CRC, lengths, key, index) and is deleted, never served.
    ``encode``/``decode`` are pure; ``read``/``write``/``delete`` block (worker threads)."""

    @staticmethod
    def encode(key: str, index: int, payload: bytes) -> bytes:
        kb = key.encode("utf-8")
        body = struct.pack(">IIH", index, len(payload), len(kb)) + kb
        crc = crc32c(payload, crc32c(body))
        return CHUNK_HEADER.pack(MAGIC, crc, index, len(payload), len(kb)) + kb + payload

    @staticmethod
    def decode(data: bytes, key: str, index: int) -> bytes | None:
        """The payload, or None if the file is damaged or holds another chunk."""
        if len(data) < CHUNK_HEADER.size:
            return None
        magic, crc, idx, length, klen = CHUNK_HEADER.unpack_from(data, 0)
        start = CHUNK_HEADER.size + klen
        if magic != MAGIC or idx != index or len(data) != start + length:
            return None
        if crc32c(memoryview(data)[_CRC_START:]) != crc:
            return None
        if data[CHUNK_HEADER.size : start] != key.encode("utf-8"):
            return None
        return data[start:]

    @staticmethod
    def read(path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            logger.warning("cannot read cache file %s: %s", path, e)
            return None

    @staticmethod
    def write(path: str, data: bytes) -> bool:
        tmp = path + ".tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            return True
        except OSError as e:
            logger.warning("cannot write cache file %s: %s", path, e)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False

    @staticmethod
    def delete(paths: list[str]) -> None:
        for p in paths:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
            except OSError as e:
                logger.warning("cannot delete cache file %s: %s", p, e)


# --- the cache --------------------------------------------------------------------------------


class ChunkCache:
    """LRU of chunk files under ``directory`` holding at most ``max_bytes`` (file sizes).

    ``max_bytes == 0`` disables the disk (every read is a GET; GETs still coalesce).
    """

    def __init__(
        self,
        store: ObjectStore,
        directory: str | os.PathLike[str],
        *,
        max_bytes: int,
        chunk_bytes: int = 1 << 20,
        prefetch_chunks: int = 2,
    ) -> None:
        if chunk_bytes < 1024:
            raise InvalidConfigError(f"cache chunk size must be at least 1024 bytes, got {chunk_bytes}")
        if max_bytes < 0 or prefetch_chunks < 0:
            raise InvalidConfigError("cache size and prefetch count must not be negative")
        self.store = store
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.chunk_bytes = chunk_bytes
        self.prefetch_chunks = prefetch_chunks
        self._index: OrderedDict[str, int] = OrderedDict()  # chunk file name -> file size, LRU first
        self._size = 0
        self._inflight: dict[str, asyncio.Task[bytes]] = {}
        self._prefetching: set[asyncio.Task[bytes]] = set()
        self._last_chunk: OrderedDict[str, int] = OrderedDict()  # object key -> last chunk read
        self._closed = False
        self._hits = self._misses = self._coalesced = self._prefetches = 0
        self._evictions = self._gets = self._fetched_bytes = self._corrupt = 0
        if max_bytes > 0:
            self._scan()

    # -- start-up ---------------------------------------------------------------------------

    def _scan(self) -> None:
        """Rebuild the index from the files left by a previous run (blocking, at start)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InvalidConfigError(f"cannot create cache directory {self.directory}: {e}") from e
        found: list[tuple[float, str, int]] = []
        stale: list[str] = []
        for sub in self.directory.iterdir():
            if not sub.is_dir() or len(sub.name) != 2:
                continue
            try:
                entries = list(os.scandir(sub))
            except OSError as e:
                logger.warning("cannot list cache directory %s: %s", sub, e)
                continue
            for entry in entries:
                if entry.name.endswith(".tmp"):
                    stale.append(entry.path)
                    continue
                if not entry.name.endswith(CHUNK_SUFFIX) or not entry.name.startswith(sub.name):
                    continue
                try:
                    st = entry.stat()
                except OSError:
                    continue
                found.append((st.st_mtime, entry.name, st.st_size))
        ChunkFile.delete(stale)
        found.sort()
        for _, name, size in found:
            self._index[name] = size
            self._size += size
        evicted = self._evict_names()
        ChunkFile.delete([self._path(n) for n in evicted])
        if found:
            logger.info("chunk cache %s: %d chunks, %d bytes", self.directory, len(self._index), self._size)

    # -- naming -------------------------------------------------------------------------------

    @staticmethod
    def chunk_name(key: str, index: int) -> str:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:DIGEST_HEX]
        return f"{digest}-{index:08d}{CHUNK_SUFFIX}"

    def _path(self, name: str) -> str:
        return str(self.directory / name[:2] / name)

    def chunk_range(self, index: int, object_size: int) -> tuple[int, int]:
        start = index * self.chunk_bytes
        return start, min(start + self.chunk_bytes, object_size)

    def chunk_count(self, object_size: int) -> int:
        return -(-object_size // self.chunk_bytes)

    # -- reading ------------------------------------------------------------------------------

    async def read(self, key: str, start: int, end: int, *, object_size: int) -> bytes:
        """Bytes ``[start, end)`` of the object (``end`` clipped to ``object_size``)."""
        end = min(end, object_size)
        if start >= end:
            return b""
        first, last = start // self.chunk_bytes, (end - 1) // self.chunk_bytes
        chunks = await asyncio.gather(
            *(self.get_chunk(key, i, object_size=object_size) for i in range(first, last + 1))
        )
        base = first * self.chunk_bytes
        if len(chunks) == 1:
            return chunks[0][start - base : end - base]
        return b"".join(chunks)[start - base : end - base]

    async def get_chunk(self, key: str, index: int, *, object_size: int) -> bytes:
        """Chunk ``index`` of the object (exactly its expected length, else an error)."""
        if self._closed:
            raise ObjectStoreError(f"chunk cache {self.directory} is closed")
        start, end = self.chunk_range(index, object_size)
        if index < 0 or start >= end:
            raise ObjectStoreError(f"chunk {index} is outside the {object_size}-byte object {key}")
        self._note_sequential(key, index, object_size)
        name = self.chunk_name(key, index)
        if name in self._index:
            data, damaged = await asyncio.to_thread(self._load, name, key, index)
            self._corrupt += damaged
            if data is not None and len(data) == end - start:
                self._hits += 1
                if name in self._index:
                    self._index.move_to_end(name)
                return data
            self._forget(name)
        task = self._inflight.get(name)
        if task is not None:
            self._coalesced += 1
        else:
            self._misses += 1
            task = self._start_fetch(name, key, index, start, end)
        # shield: a cancelled reader must not cancel the GET other readers wait for
        return await asyncio.shield(task)

    def _load(self, name: str, key: str, index: int) -> tuple[bytes | None, bool]:
        """(payload or None, whether the file was damaged and deleted). Runs in a thread."""
        raw = ChunkFile.read(self._path(name))
        if raw is None:
            return None, False
        data = ChunkFile.decode(raw, key, index)
        if data is None:
            logger.warning("damaged cache file %s deleted", self._path(name))
            ChunkFile.delete([self._path(name)])
            return None, True
        return data, False

    def _forget(self, name: str) -> None:
        size = self._index.pop(name, None)
        if size is not None:
            self._size -= size

    def _start_fetch(self, name: str, key: str, index: int, start: int, end: int) -> asyncio.Task[bytes]:
        task = asyncio.get_running_loop().create_task(self._fetch(name, key, index, start, end))
        self._inflight[name] = task
        # retrieve the exception when nobody awaits it (e.g. a failed prefetch)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    async def _fetch(self, name: str, key: str, index: int, start: int, end: int) -> bytes:
        try:
            self._gets += 1
            try:
                data = await self.store.get(key, start=start, end=end)
            except InvalidRangeError as e:
                data = b""  # the object ends before this chunk starts
                logger.debug("short object: %s", e)
            self._fetched_bytes += len(data)
            if len(data) != end - start:
                raise RemoteCorruptObjectError(
                    key,
                    f"object is shorter than its recorded size: {len(data)} bytes where "
                    f"{end - start} were expected",
                    position=start,
                )
            if self.max_bytes > 0 and not self._closed:
                await self._store_chunk(name, key, index, data)
            return data
        finally:
            self._inflight.pop(name, None)

    async def _store_chunk(self, name: str, key: str, index: int, data: bytes) -> None:
        blob = ChunkFile.encode(key, index, data)
        if not await asyncio.to_thread(ChunkFile.write, self._path(name), blob):
            return
        self._forget(name)
        self._index[name] = len(blob)
        self._size += len(blob)
        evicted = self._evict_names()
        if evicted:
            await asyncio.to_thread(ChunkFile.delete, [self._path(n) for n in evicted])

    def _evict_names(self) -> list[str]:
        out: list[str] = []
        while self._size > self.max_bytes and self._index:
            name, size = self._index.popitem(last=False)
            self._size -= size
            out.append(name)
        self._evictions += len(out)
        return out

    # -- prefetch -----------------------------------------------------------------------------

    def _note_sequential(self, key: str, index: int, object_size: int) -> None:
        prev = self._last_chunk.get(key)
        self._last_chunk[key] = index
        self._last_chunk.move_to_end(key)
        while len(self._last_chunk) > _MAX_TRACKED_OBJECTS:
            self._last_chunk.popitem(last=False)
        if prev != index - 1 or self.prefetch_chunks == 0 or self.max_bytes == 0:
            return
        # Soon, not now: the reader's own GET (started right after this) goes first.
        asyncio.get_running_loop().call_soon(self._prefetch, key, index, object_size)

    def _prefetch(self, key: str, index: int, object_size: int) -> None:
        self._prefetch_chunks(key, index + 1, self.prefetch_chunks, object_size)

    def prefetch(self, key: str, start: int, count: int, *, object_size: int) -> int:
        """Fetch in the background the ``count`` chunks from the first one starting at or
        after byte ``start`` (fewer at the object's end); chunks cached or in flight are
        skipped, and a reader asking for one being fetched joins that GET. Returns how many
        chunks the window covered, so a caller can carry the rest into the next object.
        Does nothing without a disk cache (the bytes would have nowhere to go)."""
        first = -(-max(start, 0) // self.chunk_bytes)
        covered = max(0, min(count, self.chunk_count(object_size) - first))
        if self.max_bytes > 0:
            self._prefetch_chunks(key, first, covered, object_size)
        return covered

    def _prefetch_chunks(self, key: str, first: int, count: int, object_size: int) -> None:
        if self._closed:
            return
        for i in range(first, min(first + count, self.chunk_count(object_size))):
            name = self.chunk_name(key, i)
            if name in self._index or name in self._inflight:
                continue
            start, end = self.chunk_range(i, object_size)
            self._prefetches += 1
            task = self._start_fetch(name, key, i, start, end)
            self._prefetching.add(task)
            task.add_done_callback(self._prefetching.discard)

    # -- maintenance ----------------------------------------------------------------------------

    async def invalidate(
        self, key: str, first: int = 0, last: int | None = None, *, object_size: int
    ) -> None:
        """Drop the cached chunks ``first..last`` (default: all) of an object, e.g. after its
        bytes failed validation, so the next read fetches them again."""
        last = self.chunk_count(object_size) - 1 if last is None else last
        names = [self.chunk_name(key, i) for i in range(first, last + 1)]
        doomed = [n for n in names if n in self._index]
        for n in doomed:
            self._forget(n)
        if doomed:
            await asyncio.to_thread(ChunkFile.delete, [self._path(n) for n in doomed])

    def stats(self) -> CacheStats:
        return CacheStats(
            hits=self._hits,
            misses=self._misses,
            coalesced=self._coalesced,
            prefetches=self._prefetches,
            evictions=self._evictions,
            gets=self._gets,
            fetched_bytes=self._fetched_bytes,
            corrupt=self._corrupt,
            entries=len(self._index),
            size=self._size,
        )

    async def wait_prefetches(self) -> None:
        """Wait for the background prefetches in flight (tests, orderly shutdown)."""
        await asyncio.sleep(0)  # let prefetches scheduled by the last read start
        while self._prefetching:
            await asyncio.gather(*list(self._prefetching), return_exceptions=True)

    async def close(self) -> None:
        """Cancel background prefetches; reads after this fail. The files stay for the next run."""
        self._closed = True
        tasks = list(self._prefetching)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


__all__ = [
    "CHUNK_SUFFIX",
    "CacheStats",
    "ChunkCache",
    "ChunkFile",
    "RemoteCorruptObjectError",
    "RemoteObjectMissingError",
]
