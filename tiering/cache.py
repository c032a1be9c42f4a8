"""On-disk LRU cache of fixed-size chunks of remote objects, with single-flight GETs and prefetch.

Remote reads fetch objects in chunks of ``chunk_bytes`` (chunk ``i`` of an object is its
bytes ``[i * chunk_bytes, min((i + 1) * chunk_bytes, size))``), so a consumer reading a
segment costs one ranged GET per chunk however small its fetches are, and a chunk read
once is served from local disk afterwards. Objects are immutable (segment keys carry a
fresh segment id per upload), so a cached chunk never goes stale.

A reader that starts at byte 0 of an object of at most ``whole_object_bytes`` (a consumer
reading a small segment sequentially from its start, or the prefetch into the next
segment) may ask for it whole: one GET of the whole object, split into its chunks. That
is one request instead of one per chunk on any S3 (fewer requests, and a GET of a few MiB
is within the sizes S3 recommends), and it lets the caller's ``check`` (the remote reader
passes the segment's whole-object checksum check against the manifest) run once, inside that GET, in a
worker thread, before any of its bytes is handed out.

Files, one per chunk, under ``<cache_dir>/<d0d1>/<digest>-<index>.chunk`` where
``digest`` is the first 40 hex digits of SHA-256 of the object key and ``d0d1`` its first
two (256 subdirectories keep directories small); their layout, its padding and the
older layout still read are tiering.chunk_file's (``ChunkFile``).

The padding aligns large payloads to 4 KiB in the file, so that a chunk of a GET's
page-aligned buffer is written with O_DIRECT straight from that buffer (no copy).

Files of the first layout (magic ``STCC``: no flags byte, the key at 18) are still read,
as not verified. VERIFIED: the payload is a slice of an object fetched whole whose
checksum matched the caller's ``check`` (for segments, the manifest's CRC-32C of the
whole object, computed by the uploader after it validated every batch). Readers may skip
their own validation of such bytes; the flag is covered by the file's CRC, so a damaged
flag fails the file like any other damage.

Whole-object GETs compute the CRC-32C of each chunk once, in the GET's worker thread;
the whole object's CRC handed to ``check`` and each chunk file's CRC are combined from
those (``tiering.checksum``), so the bytes are read once for both.

Write-behind: a GET's bytes go to the readers waiting for them (and to a small in-memory
LRU of recent chunks, ``memory_bytes``) first; the chunk files are written afterwards, in a
worker thread, so a reader never waits for the disk. Until its file is written a chunk is
served from memory; a chunk evicted from memory before that is simply fetched again.
Files are written with O_DIRECT where the filesystem allows (``ChunkFile._write_direct``):
history read once must not evict the hot tier's pages from the page cache.

Crash behaviour: a chunk is written to ``<name>.<n>.tmp`` and renamed into place (no
fsync: it is a cache). A crash can leave ``.tmp`` files (deleted by the start-up scan) or a
renamed file whose data never reached the disk; the CRC check on every read from disk
catches the latter, and a damaged file is deleted and fetched again, never served.

Restart: the start-up scan rebuilds the in-memory index from the file names and sizes
(no file is read), oldest modification time first, so the LRU order survives roughly.

Concurrency: the index lives on the event loop; file I/O runs in worker threads (all the
chunk files one read needs in one hop). Requests for a chunk that is being fetched join
that fetch (one GET however many readers), and reading chunk N of an object right after
chunk N-1 starts background fetches of the next ``prefetch_chunks`` chunks (consumers
catching up read sequentially). ``prefetch`` lets the remote reader ask for the chunks
after the bytes it just served, across objects.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from hot.errors import InvalidConfigError, ObjectNotFoundError, ObjectStoreError
from tiering.checksum import crc32c_concat, crc32c_pieces
from tiering.chunk_file import CHUNK_HEADER, ChunkFile, ChunkMap, sendable
from tiering.store import InvalidRangeError, ObjectStore

logger = logging.getLogger(__name__)


CHUNK_SUFFIX: Final = ".chunk"
DIGEST_HEX: Final = 40
# Objects up to this size are fetched with one GET when read from their start (``whole``).
DEFAULT_WHOLE_OBJECT_BYTES: Final = 16 << 20
# Recently fetched or loaded chunks kept in memory: prefetched bytes are read from here,
# not back from the file just written, and small fetches reuse a chunk without disk reads.
DEFAULT_MEMORY_BYTES: Final = 64 << 20
_MAX_TRACKED_OBJECTS: Final = 4096  # objects whose last read chunk is remembered for prefetch
# Chunk files kept mapped after a cache hit (``ChunkCache._maps``), at most: a mapping holds
# an open file, and the pages the reader touched (batch headers) count in the process's RSS
# while it is mapped, so the payload bytes kept mapped are bounded too (``mapped_bytes``).
MAX_MAPPED_CHUNKS: Final = 64


class RemoteObjectMissingError(ObjectNotFoundError):
    """An object the manifest names is not in the bucket (KAFKA_STORAGE_ERROR); names the key."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class RemoteCorruptObjectError(ObjectStoreError):
    """Bytes of a remote object fail validation (CRC, whole-object checksum, impossible header or size).

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

    hits: int  # chunks served from disk or memory
    misses: int  # reader requests that started a GET
    coalesced: int  # reader requests that joined a GET already in flight
    prefetches: int  # GETs started by sequential prefetch
    evictions: int  # chunk files deleted to stay under the size cap
    gets: int  # GETs sent to the store (ranged, or of a whole object)
    fetched_bytes: int  # bytes received from the store
    corrupt: int  # damaged chunk files found and deleted
    entries: int  # chunk files currently cached
    size: int  # bytes of those files
    memory: int = 0  # bytes of chunks in the in-memory LRU
    memory_limit: int = 0  # its bound (``read_memory_bytes``)


def _relay(to: asyncio.Future[_Chunk], src: asyncio.Future[_Chunk]) -> None:
    """Complete ``to`` as ``src`` completed."""
    if to.done():
        return
    if src.cancelled():
        to.cancel()
    elif (e := src.exception()) is not None:
        to.set_exception(e)
    else:
        to.set_result(src.result())


@functools.lru_cache(maxsize=4096)
def _key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:DIGEST_HEX]


class ObjectCheck(Protocol):
    """Checks a whole object's bytes, in the worker thread that fetched them; raises to
    reject them. ``crc`` is the CRC-32C of ``data`` (computed by the cache with the
    chunks' own)."""

    def __call__(self, data: memoryview, crc: int) -> None: ...


# A chunk's bytes, and whether they passed a whole-object check (module docstring: VERIFIED).
_Chunk = tuple[memoryview, bool]
# A chunk file to write: name, index, payload, VERIFIED, the payload's CRC-32C if known.
_Written = tuple[str, int, memoryview, bool, int | None]


def _check_size(key: str, position: int, size: int, data: memoryview) -> None:
    if len(data) != size:
        what = "shorter" if len(data) < size else "longer"
        raise RemoteCorruptObjectError(
            key,
            f"object is {what} than its recorded size: {len(data)} bytes where {size} were expected",
            position=position,
        )


def _check_whole(
    data: memoryview, *, key: str, size: int, check: ObjectCheck, chunk_bytes: int, crcs: list[int]
) -> None:
    """The size, then the caller's check, of a whole object (before anything is served).
    Fills ``crcs`` with the CRC-32C of each chunk (for the chunk files)."""
    _check_size(key, 0, size, data)
    pieces = crc32c_pieces(data, chunk_bytes)
    crcs[:] = [crc for crc, _ in pieces]
    check(data, crc32c_concat(pieces))


# --- the cache --------------------------------------------------------------------------------


class ChunkCache:
    """LRU of chunk files under ``directory`` holding at most ``max_bytes`` (file sizes).

    ``max_bytes == 0`` disables the disk (every read is a GET; GETs still coalesce; nothing
    is kept in memory or prefetched).
    """

    def __init__(
        self,
        store: ObjectStore,
        directory: str | os.PathLike[str],
        *,
        max_bytes: int,
        chunk_bytes: int = 1 << 20,
        prefetch_chunks: int = 2,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        whole_object_bytes: int = DEFAULT_WHOLE_OBJECT_BYTES,
        mapped_bytes: int | None = None,
    ) -> None:
        if chunk_bytes < 1024:
            raise InvalidConfigError(f"cache chunk size must be at least 1024 bytes, got {chunk_bytes}")
        if max_bytes < 0 or prefetch_chunks < 0 or memory_bytes < 0 or whole_object_bytes < 0:
            raise InvalidConfigError("cache sizes and prefetch count must not be negative")
        self.store = store
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.chunk_bytes = chunk_bytes
        self.prefetch_chunks = prefetch_chunks
        self.memory_bytes = min(memory_bytes, max_bytes)
        self.whole_object_bytes = whole_object_bytes
        self._index: OrderedDict[str, int] = OrderedDict()  # chunk file name -> file size, LRU first
        self._size = 0
        self._mem: OrderedDict[str, _Chunk] = OrderedDict()  # chunk name -> payload, LRU first
        self._mem_size = 0
        # Trusted chunk files mapped by a cache hit, LRU first: the next hit on one is served
        # on the event loop, without a worker-thread hop to open and map the file again.
        self._maps: OrderedDict[str, _Chunk] = OrderedDict()
        self._maps_size = 0
        # Payload bytes kept mapped: as many as the in-memory LRU holds, unless told.
        self.mapped_bytes = self.memory_bytes if mapped_bytes is None else max(0, mapped_bytes)
        self._inflight: dict[str, asyncio.Future[_Chunk]] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # GETs (strong references while they run)
        self._prefetching: set[asyncio.Task[None]] = set()
        self._prefetch_bytes = 0  # bytes of prefetch GETs in flight (bounded by memory_bytes)
        self._writes: set[asyncio.Task[None]] = set()
        self._pending_write: dict[str, object] = {}  # chunk name -> token of its newest write
        # Chunk files whose payload this process wrote or CRC-checked: hits on them are
        # mapped and sent with sendfile, unread (``ChunkFile.map_chunk``). Files left by an
        # earlier run are read and checked once first (a crash may have left garbage).
        self._trusted: set[str] = set()
        self._last_chunk: OrderedDict[str, int] = OrderedDict()  # object key -> last chunk read
        self._closed = False
        self._hits = self._misses = self._coalesced = self._prefetches = 0
        self._evictions = self._gets = self._fetched_bytes = self._corrupt = 0
        self.object_checks = 0  # whole-object GETs whose bytes went through ``check``
        # Seconds a GET takes from start to its last byte, a moving average (None: none
        # yet): the remote reader sizes its read-ahead by it (``RemoteReader``).
        self.get_seconds: float | None = None
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
        return f"{_key_digest(key)}-{index:08d}{CHUNK_SUFFIX}"

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
        views = await self.read_views(key, start, end, object_size=object_size)
        return bytes(views[0]) if len(views) == 1 else b"".join(views)

    async def read_views(
        self,
        key: str,
        start: int,
        end: int,
        *,
        object_size: int,
        whole: bool = False,
        check: ObjectCheck | None = None,
    ) -> list[memoryview]:
        """Bytes ``[start, end)`` of the object (``end`` clipped to ``object_size``) as views
        of the cached chunks, in order, without copying them.

        ``whole``: the caller reads the object sequentially; if ``start`` is 0, the object
        is at most ``whole_object_bytes`` and none of it is cached or being fetched, GET it
        whole, and pass its bytes to ``check`` (in a worker thread) before serving or
        caching any of them; an exception from ``check`` fails the read."""
        views, _ = await self.read_checked_views(
            key, start, end, object_size=object_size, whole=whole, check=check
        )
        return views

    async def read_checked_views(
        self,
        key: str,
        start: int,
        end: int,
        *,
        object_size: int,
        whole: bool = False,
        check: ObjectCheck | None = None,
    ) -> tuple[list[memoryview], bool]:
        """``read_views``, and whether every one of those bytes passed a whole-object
        ``check`` (now, or when its chunk was fetched; module docstring: VERIFIED)."""
        end = min(end, object_size)
        if start >= end:
            return [], True
        first, last = start // self.chunk_bytes, (end - 1) // self.chunk_bytes
        whole = whole and start == 0
        chunks = await self._chunks(key, first, last, object_size, whole=whole, check=check)
        verified = all(v for _, v in chunks)
        base = first * self.chunk_bytes
        if len(chunks) == 1:
            return [chunks[0][0][start - base : end - base]], verified
        out = [chunks[0][0][start - base :]]
        out.extend(c for c, _ in chunks[1:-1])
        out.append(chunks[-1][0][: end - (last * self.chunk_bytes)])
        return out, verified

    async def get_chunk(self, key: str, index: int, *, object_size: int) -> memoryview:
        """Chunk ``index`` of the object (exactly its expected length, else an error)."""
        return (await self._chunks(key, index, index, object_size))[0][0]

    async def _chunks(
        self,
        key: str,
        first: int,
        last: int,
        object_size: int,
        *,
        whole: bool = False,
        check: ObjectCheck | None = None,
    ) -> list[_Chunk]:
        """Chunks ``first..last``: from memory, else from disk (one worker-thread hop for
        all of them), else joining a GET in flight, else from new GETs."""
        if self._closed:
            raise ObjectStoreError(f"chunk cache {self.directory} is closed")
        start, _ = self.chunk_range(first, object_size)
        _, end = self.chunk_range(last, object_size)
        if first < 0 or start >= end or last * self.chunk_bytes >= object_size:
            raise ObjectStoreError(f"chunk {last} is outside the {object_size}-byte object {key}")
        for i in range(first, last + 1):
            self._note_sequential(key, i, object_size)
        n = last - first + 1
        out: list[_Chunk | None] = [None] * n
        waits: dict[int, asyncio.Future[_Chunk]] = {}
        on_disk: list[int] = []
        for i in range(n):
            name = self.chunk_name(key, first + i)
            chunk = self._from_memory(name)
            if chunk is not None:
                out[i] = chunk
            elif name in self._index and name not in self._inflight:
                on_disk.append(i)
            else:
                fut = self._inflight.get(name)
                if fut is not None:
                    self._coalesced += 1
                    waits[i] = fut
        if on_disk:
            jobs = [(self.chunk_name(key, first + i), first + i) for i in on_disk]
            trusted = [name in self._trusted for name, _ in jobs]
            loaded, damaged = await asyncio.to_thread(self._load_many, key, jobs, trusted)
            self._corrupt += damaged
            for i, (name, index), found in zip(on_disk, jobs, loaded, strict=True):
                a, b = self.chunk_range(index, object_size)
                if found is not None and len(found[0]) == b - a:
                    self._hits += 1
                    out[i] = found
                    if name in self._index:
                        self._trusted.add(name)  # checked now (or already trusted)
                    if name in self._index:
                        self._index.move_to_end(name)
                    self._remember(name, found)
                    continue
                self._forget(name)
                fut = self._inflight.get(name)  # a GET may have started during the load
                if fut is not None:
                    self._coalesced += 1
                    waits[i] = fut
        missing: list[int] = []
        for i in range(n):
            if out[i] is not None or i in waits:
                continue
            name = self.chunk_name(key, first + i)
            fut = self._inflight.get(name)  # started while this read loaded from disk
            if fut is not None:
                self._coalesced += 1
                waits[i] = fut
            else:
                missing.append(i)
        if missing:
            self._misses += len(missing)
            if whole and first == 0 and self._can_get_whole(key, object_size):
                self._start_get(
                    key, 0, self.chunk_count(object_size) - 1, object_size, whole=True, check=check
                )
            else:
                for i in missing:
                    self._start_get(key, first + i, first + i, object_size)
            for i in missing:
                waits[i] = self._inflight[self.chunk_name(key, first + i)]
        for i, fut in waits.items():
            # shield: a cancelled reader must not cancel the GET other readers wait for
            out[i] = await asyncio.shield(fut)
        return [v for v in out if v is not None]

    def _from_memory(self, name: str) -> _Chunk | None:
        chunk = self._mem.get(name)
        if chunk is None:
            chunk = self._maps.get(name)
            if chunk is None:
                return None
            self._maps.move_to_end(name)
        else:
            self._mem.move_to_end(name)
        self._hits += 1
        if name in self._index:
            self._index.move_to_end(name)
        return chunk

    def _remember(self, name: str, chunk: _Chunk) -> None:
        """Keep a chunk in the in-memory LRU (only with a disk cache: without one, every read
        is a GET by definition). A mapped chunk file goes to the LRU of mappings instead."""
        if isinstance(chunk[0].obj, ChunkMap):
            if len(chunk[0]) > self.mapped_bytes:
                return
            self._unmap(name)
            self._maps[name] = chunk
            self._maps_size += len(chunk[0])
            while len(self._maps) > MAX_MAPPED_CHUNKS or self._maps_size > self.mapped_bytes:
                _, dropped = self._maps.popitem(last=False)
                self._maps_size -= len(dropped[0])
            return
        size = len(chunk[0])
        if self.memory_bytes <= 0 or size > self.memory_bytes:
            return
        old = self._mem.pop(name, None)
        if old is not None:
            self._mem_size -= len(old[0])
        self._mem[name] = chunk
        self._mem_size += size
        while self._mem_size > self.memory_bytes:
            _, dropped = self._mem.popitem(last=False)
            self._mem_size -= len(dropped[0])

    def _unmap(self, name: str) -> None:
        old = self._maps.pop(name, None)
        if old is not None:
            self._maps_size -= len(old[0])

    def _drop_from_memory(self, name: str) -> None:
        self._unmap(name)
        old = self._mem.pop(name, None)
        if old is not None:
            self._mem_size -= len(old[0])

    def _load_many(
        self, key: str, jobs: Sequence[tuple[str, int]], trusted: Sequence[bool] = ()
    ) -> tuple[list[_Chunk | None], int]:
        """(payload and VERIFIED flag, or None, per chunk; files found damaged and
        deleted). ``trusted[i]``: job i's file is mapped, not read and checked. Runs in a
        thread."""
        out: list[_Chunk | None] = []
        damaged = 0
        for i, (name, index) in enumerate(jobs):
            path = self._path(name)
            if i < len(trusted) and trusted[i]:
                mapped = ChunkFile.map_chunk(path, key, index)
                if mapped is not None:
                    out.append(mapped)
                    continue
            raw = ChunkFile.read(path)
            if raw is None:
                out.append(None)
                continue
            found = ChunkFile.decode_chunk(raw, key, index)
            if found is None:
                logger.warning("damaged cache file %s deleted", path)
                ChunkFile.delete([path])
                damaged += 1
            out.append(found)
        return out, damaged

    def _forget(self, name: str) -> None:
        self._trusted.discard(name)
        self._unmap(name)  # the file goes: so does its mapping (and its disk space)
        size = self._index.pop(name, None)
        if size is not None:
            self._size -= size

    def at_hand(self, key: str, position: int) -> bool:
        """Whether the chunk holding byte ``position`` of the object is in memory or on
        disk (a read of it waits for no GET)."""
        name = self.chunk_name(key, position // self.chunk_bytes)
        return name in self._mem or name in self._maps or name in self._index

    def _can_get_whole(self, key: str, object_size: int) -> bool:
        """The object is small enough, and none of its chunks is cached or being fetched."""
        if object_size > self.whole_object_bytes:
            return False
        for i in range(self.chunk_count(object_size)):
            name = self.chunk_name(key, i)
            if name in self._mem or name in self._index or name in self._inflight:
                return False
        return True

    # -- GETs ---------------------------------------------------------------------------------

    def _start_get(
        self,
        key: str,
        first: int,
        last: int,
        object_size: int,
        *,
        whole: bool = False,
        check: ObjectCheck | None = None,
        prefetch: bool = False,
    ) -> asyncio.Task[None]:
        """One GET for chunks ``first..last`` (the whole object if ``whole``); a future per
        chunk in ``_inflight`` that readers join."""
        loop = asyncio.get_running_loop()
        futs: list[tuple[str, asyncio.Future[_Chunk]]] = []
        for i in range(first, last + 1):
            fut: asyncio.Future[_Chunk] = loop.create_future()
            # retrieve the exception when nobody awaits it (e.g. a failed prefetch)
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            name = self.chunk_name(key, i)
            self._inflight[name] = fut
            futs.append((name, fut))
        task = loop.create_task(self._get(key, first, last, object_size, whole, check, futs))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if prefetch:
            size = self.chunk_range(last, object_size)[1] - self.chunk_range(first, object_size)[0]
            self._prefetch_bytes += size
            self._prefetching.add(task)
            task.add_done_callback(self._prefetching.discard)
            task.add_done_callback(lambda _: self._prefetch_done(size))
        return task

    def _prefetch_done(self, size: int) -> None:
        self._prefetch_bytes -= size

    def _prefetch_full(self) -> bool:
        """Prefetch GETs in flight hold as many bytes as the memory tier: start no more (many
        partitions read at once keep the store busy with their own reads)."""
        return self._prefetch_bytes >= self.memory_bytes

    async def _get(
        self,
        key: str,
        first: int,
        last: int,
        object_size: int,
        whole: bool,
        check: ObjectCheck | None,
        futs: list[tuple[str, asyncio.Future[_Chunk]]],
    ) -> None:
        start, _ = self.chunk_range(first, object_size)
        _, end = self.chunk_range(last, object_size)
        began = time.monotonic()
        try:
            self._gets += 1
            verify: Callable[[memoryview], None] | None = None
            crcs: list[int] = []  # of each chunk, filled by a whole-object check
            if whole and check is not None:
                # in the worker thread that fetched the bytes: no hop back and forth
                self.object_checks += 1
                verify = functools.partial(
                    _check_whole,
                    key=key,
                    size=end - start,
                    check=check,
                    chunk_bytes=self.chunk_bytes,
                    crcs=crcs,
                )
            try:
                # a whole object is asked for without a Range: a longer object is caught too
                store = self.store
                data = await (
                    store.get_view(key, check=verify) if whole else store.get_view(key, start=start, end=end)
                )
            except InvalidRangeError as e:
                data = memoryview(b"")  # the object ends before this chunk starts
                logger.debug("short object: %s", e)
            self._fetched_bytes += len(data)
            took = time.monotonic() - began
            last_s = self.get_seconds
            self.get_seconds = took if last_s is None else last_s + (took - last_s) / 4
            _check_size(key, start, end - start, data)
            view = data
            verified = verify is not None
            chunks: list[_Written] = []
            for i, (name, fut) in enumerate(futs):
                lo = i * self.chunk_bytes
                payload = view[lo : lo + self.chunk_bytes]
                chunks.append((name, first + i, payload, verified, crcs[i] if verified else None))
                if self._inflight.get(name) is fut:
                    del self._inflight[name]
                if not self._closed:
                    self._remember(name, (payload, verified))
                if not fut.done():
                    fut.set_result((payload, verified))
            if self.max_bytes > 0 and not self._closed:
                self._write_behind(key, chunks)
        except BaseException as e:
            for name, fut in futs:
                if self._inflight.get(name) is fut:
                    del self._inflight[name]
                if fut.done():
                    continue
                if isinstance(e, asyncio.CancelledError):
                    fut.cancel()
                else:
                    fut.set_exception(e)
            if not isinstance(e, Exception):
                raise

    # -- write-behind -------------------------------------------------------------------------

    def _write_behind(self, key: str, chunks: list[_Written]) -> None:
        token = object()
        for name, *_ in chunks:
            self._pending_write[name] = token
        task = asyncio.get_running_loop().create_task(self._write_chunks(key, chunks, token))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    def _write_files(self, key: str, chunks: list[_Written], token: object) -> list[tuple[str, int]]:
        """Write the chunk files; (name, file size) of each written. Runs in a thread."""
        written: list[tuple[str, int]] = []
        for name, index, payload, verified, crc in chunks:
            if self._pending_write.get(name) is not token:
                continue  # invalidated (or fetched again) meanwhile
            header = ChunkFile.header(
                key, index, payload, verified=verified, payload_crc=crc, aligned=ChunkFile.zero_copy(payload)
            )
            if ChunkFile.write(self._path(name), payload, header):
                written.append((name, len(header) + len(payload)))
        return written

    async def _write_chunks(self, key: str, chunks: list[_Written], token: object) -> None:
        written = await asyncio.to_thread(self._write_files, key, chunks, token)
        stale: list[str] = []
        for name, size in written:
            current = self._pending_write.get(name)
            if current is not token:
                if current is None:  # invalidated while being written: do not keep it
                    stale.append(self._path(name))
                continue
            del self._pending_write[name]
            self._forget(name)
            self._index[name] = size
            self._size += size
            self._trusted.add(name)  # written from bytes this process checked
        for name, *_ in chunks:
            if self._pending_write.get(name) is token:
                del self._pending_write[name]  # not written (an I/O error, logged)
        doomed = stale + [self._path(n) for n in self._evict_names()]
        if doomed:
            await asyncio.to_thread(ChunkFile.delete, doomed)

    def _evict_names(self) -> list[str]:
        out: list[str] = []
        while self._size > self.max_bytes and self._index:
            name, size = self._index.popitem(last=False)
            self._trusted.discard(name)
            self._unmap(name)
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

    def prefetch(
        self,
        key: str,
        start: int,
        count: int,
        *,
        object_size: int,
        whole: bool = False,
        check: ObjectCheck | None = None,
    ) -> int:
        """Fetch in the background the ``count`` chunks from the first one starting at or
        after byte ``start`` (fewer at the object's end); chunks cached or in flight are
        skipped, and a reader asking for one being fetched joins that GET. With ``whole``
        (see ``read_views``) a window starting at byte 0 of a small object untouched so far
        fetches the whole object with one GET. Returns how many chunks the window covered,
        so a caller can carry the rest into the next object. Does nothing without a disk
        cache (the bytes would have nowhere to go)."""
        first = -(-max(start, 0) // self.chunk_bytes)
        covered = max(0, min(count, self.chunk_count(object_size) - first))
        if self.max_bytes > 0 and covered > 0 and not self._closed and not self._prefetch_full():
            if whole and first == 0 and self._can_get_whole(key, object_size):
                self._prefetches += 1
                last = self.chunk_count(object_size) - 1
                self._start_get(key, 0, last, object_size, whole=True, check=check, prefetch=True)
            else:
                self._prefetch_chunks(key, first, covered, object_size)
        return covered

    def _prefetch_chunks(self, key: str, first: int, count: int, object_size: int) -> None:
        if self._closed:
            return
        on_disk: list[tuple[str, int]] = []
        for i in range(first, min(first + count, self.chunk_count(object_size))):
            name = self.chunk_name(key, i)
            if name in self._mem or name in self._maps or name in self._inflight:
                continue
            if name in self._index:
                on_disk.append((name, i))
                continue
            if self._prefetch_full():
                break
            self._prefetches += 1
            self._start_get(key, i, i, object_size, prefetch=True)
        if on_disk:
            self._load_ahead(key, on_disk, object_size)

    def _load_ahead(self, key: str, jobs: list[tuple[str, int]], object_size: int) -> None:
        """Map (and read into the page cache) the chunk files ``jobs`` in the background, in
        one worker-thread hop: a reader reading on from cache hits then finds its next
        chunks mapped instead of waiting for the disk (the files are written with O_DIRECT,
        so they are not in the page cache). Readers asking meanwhile join the load."""
        loop = asyncio.get_running_loop()
        futs: list[asyncio.Future[_Chunk]] = []
        for name, _ in jobs:
            fut: asyncio.Future[_Chunk] = loop.create_future()
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._inflight[name] = fut
            futs.append(fut)
        task = loop.create_task(self._load_ahead_task(key, jobs, futs, object_size))
        self._prefetching.add(task)  # close() cancels it, wait_prefetches() waits for it
        task.add_done_callback(self._prefetching.discard)

    async def _load_ahead_task(
        self, key: str, jobs: list[tuple[str, int]], futs: list[asyncio.Future[_Chunk]], object_size: int
    ) -> None:
        trusted = [name in self._trusted for name, _ in jobs]
        try:
            loaded, damaged = await asyncio.to_thread(self._load_many, key, jobs, trusted)
        except BaseException as e:
            for (name, _), fut in zip(jobs, futs, strict=True):
                if self._inflight.get(name) is fut:
                    del self._inflight[name]
                if not fut.done():
                    fut.cancel() if isinstance(e, asyncio.CancelledError) else fut.set_exception(e)
            if not isinstance(e, Exception):
                raise
            return
        self._corrupt += damaged
        for (name, index), fut, found in zip(jobs, futs, loaded, strict=True):
            if self._inflight.get(name) is fut:
                del self._inflight[name]
            if fut.done():
                continue
            a, b = self.chunk_range(index, object_size)
            if found is not None and len(found[0]) == b - a and name in self._index and not self._closed:
                self._trusted.add(name)  # checked now (or already trusted)
                self._index.move_to_end(name)
                self._remember(name, found)
                fut.set_result(found)
                continue
            # Gone or damaged meanwhile: whoever joined gets the chunk from a GET instead.
            self._forget(name)
            if self._closed:
                fut.cancel()
                continue
            got = self._inflight.get(name)
            if got is None:
                self._start_get(key, index, index, object_size)
                got = self._inflight[name]
            got.add_done_callback(functools.partial(_relay, fut))

    # -- maintenance ----------------------------------------------------------------------------

    async def invalidate(
        self, key: str, first: int = 0, last: int | None = None, *, object_size: int
    ) -> None:
        """Drop the cached chunks ``first..last`` (default: all) of an object, from memory
        and disk, e.g. after its bytes failed validation, so the next read fetches them
        again (a chunk file still being written is deleted when the write ends)."""
        last = self.chunk_count(object_size) - 1 if last is None else last
        names = [self.chunk_name(key, i) for i in range(first, last + 1)]
        for n in names:
            self._drop_from_memory(n)
            self._pending_write.pop(n, None)
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
            memory=self._mem_size,
            memory_limit=self.memory_bytes,
        )

    async def wait_writes(self) -> None:
        """Wait until the chunk files of finished GETs are written (tests, shutdown)."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    async def wait_prefetches(self) -> None:
        """Wait for the background prefetches in flight and their chunk files (tests,
        orderly shutdown)."""
        await asyncio.sleep(0)  # let prefetches scheduled by the last read start
        while self._prefetching:
            await asyncio.gather(*list(self._prefetching), return_exceptions=True)
        await self.wait_writes()

    async def close(self) -> None:
        """Cancel background prefetches and finish pending chunk files; reads after this
        fail. The files stay for the next run."""
        self._closed = True
        tasks = list(self._prefetching)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.wait_writes()
        self._mem.clear()
        self._mem_size = 0
        self._maps.clear()
        self._maps_size = 0


__all__ = [
    "CHUNK_HEADER",
    "CHUNK_SUFFIX",
    "DEFAULT_MEMORY_BYTES",
    "DEFAULT_WHOLE_OBJECT_BYTES",
    "CacheStats",
    "ChunkCache",
    "ChunkFile",
    "ChunkMap",
    "ObjectCheck",
    "RemoteCorruptObjectError",
    "RemoteObjectMissingError",
    "sendable",
]
