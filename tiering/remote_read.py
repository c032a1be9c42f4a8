"""Serving offsets below the local log start offset from the bucket.

A fetch at an offset in [log start offset, local log start offset) lands here (the hot
log raised OffsetMovedToTieredStorageError). The reader

1. finds the COPIED segment holding the offset in the partition manifest (kept in memory
   for ``manifest_ttl_s`` and reloaded on a miss: one GET per partition per TTL, not per
   fetch; concurrent loads of one manifest coalesce),
2. looks the offset up in the segment's remote offset index (``.index``, fetched once
   through the chunk cache and kept parsed in memory) to get a byte position,
3. reads the segment's ``.log`` from that position through the chunk cache (ranged GETs
   of whole chunks, see ``tiering.cache``), cutting at batch boundaries: whole batches
   only, at most ``max_bytes`` (at least one batch with ``min_one``, KIP-74), continuing
   into the next remote segment while budget remains, never at or past ``max_offset``
   (the local log start: the hot tier serves the rest),
4. validates every batch it returns (structure, offsets within the segment and
   increasing, CRC-32C). A segment read from its start (a consumer catching up, or the
   prefetch into the next segment) and no larger than the cache's ``whole_object_bytes``
   is fetched with one GET of the whole object, and the cache checks its CRC-32C (SHA-256
   for manifest entries older than ``log_crc32c``) against the manifest inside that GET,
   before any of its bytes is served: once per fetch of the
   object, never on cache hits (chunk files carry their own CRC-32C). Such bytes skip
   the batch CRCs (the uploader validated every batch before it computed the manifest's
   checksum); the cache marks them, in memory and in their chunk files (VERIFIED), so a
   cache hit on them skips it too. Bytes from ranged GETs get every check. Bytes that fail are
   never served: RemoteCorruptObjectError names the key, byte position and offset. A
   missing object is RemoteObjectMissingError naming the key. Both map to
   KAFKA_STORAGE_ERROR for that partition only.
5. starts, in the background, the GETs of the chunks that follow the last bytes it
   loaded (``prefetch_chunks`` of them, or two fetches' worth of ``max_bytes`` if that is
   more, or more for a consumer that keeps up: ``_read_ahead_chunks``), continuing into
   the following COPIED segments' ``.log`` (whole, when small): a
   consumer catching up asks for them next, and they are then cached, or in flight since
   a whole fetch earlier. The last bytes loaded may be the start of a segment the read
   only looked into (its first batch did not fit the budget): counting from the bytes
   served instead would leave the next read waiting for that segment's successor. A read
   past half its budget looks into the next segment only if that segment's first chunk
   is at hand: it does not wait for a GET for the few batches that could still fit.

Remote index layouts are the hot tier's (``hot.offset_index``: 8-byte entries of relative
offset u32 + position u32; ``hot.time_index``: 12-byte entries of timestamp i64 +
relative offset u32), parsed by the pure functions below.

Everything is awaits on the event loop; checksum work on large buffers runs in worker
threads, so a slow remote read never delays produce requests or hot fetches. Bytes are
never joined on their way out: a result is the cache's chunk views (``parts``), which the
Fetch encoder passes to the socket as frame parts of their own.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import hashlib
import logging
import struct
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from crc32c import crc32c

from hot.batch import CRC_START, HEADER_SIZE, BatchHeader, parse_header
from hot.errors import (
    ObjectNotFoundError,
    ObjectStoreError,
    OffsetOutOfRangeError,
    StrataError,
)
from hot.records import decode_batch
from hot.region import FileRegion
from hot.txn_index import AbortedTxn, TxnSearch
from tiering.cache import ChunkCache, RemoteCorruptObjectError, RemoteObjectMissingError, sendable
from tiering.config import TieringConfig
from tiering.keys import manifest_key
from tiering.manifest import ManifestError, ObjectPart, PartitionManifest, RemoteSegment, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.remote_txn import ENTRY_MEMORY_BYTES, collect_remote, parse_txn_index
from tiering.store import ObjectStore

logger = logging.getLogger(__name__)

T = TypeVar("T")

OFFSET_ENTRY: Final = struct.Struct(">II")  # relative offset, position
TIME_ENTRY: Final = struct.Struct(">qI")  # timestamp, relative offset
DEFAULT_MANIFEST_TTL_S: Final = 30.0
DEFAULT_INDEX_CACHE_BYTES: Final = 64 << 20
_THREAD_VALIDATE_BYTES: Final = 256 << 10  # CRC work above this size leaves the event loop
_SCAN_SLACK: Final = 16 << 10  # extra bytes read past the budget to find the next header
_MAX_PREFETCH_PLANS: Final = 256  # reads whose prefetch is still being planned
_MAX_STREAMS: Final = 4096  # partitions whose consumer's pace is remembered (read-ahead)

PartitionKey = tuple[str, uuid.UUID, int]


# --- results ------------------------------------------------------------------------------------


Buffer = bytes | memoryview


def _nbytes(parts: Sequence[Buffer]) -> int:
    return sum(len(p) for p in parts)


def _head(parts: Sequence[Buffer], n: int) -> tuple[Buffer, ...]:
    """The first ``n`` bytes of ``parts``, as views (no copy)."""
    out: list[Buffer] = []
    for p in parts:
        if n <= 0:
            break
        if len(p) <= n:
            out.append(p)
        else:
            out.append(memoryview(p)[:n])
        n -= len(p)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RemoteReadResult:
    """Whole batches read from the bucket, as ``parts``: views of the cache's chunks, in
    order (``data`` joins them, for callers that want one bytes object).

    ``batch_ends[i]`` is the end position in the bytes of the i-th batch and
    ``batch_next_offsets[i]`` the offset after it, so a caller can cut the result at a
    batch boundary (``truncate``) without parsing it again."""

    parts: tuple[Buffer, ...]
    size: int
    offset: int  # the offset asked for
    first_offset: int  # base offset of the first batch (-1 if none)
    next_offset: int  # offset after the last batch (``offset`` if none)
    batch_ends: tuple[int, ...] = ()
    batch_next_offsets: tuple[int, ...] = ()

    @property
    def data(self) -> bytes:
        return b"".join(self.parts)

    def sendable(self) -> tuple[bytes | memoryview | FileRegion, ...]:
        """``parts`` for the Kafka connection: bytes of cache hits on chunk files as file
        regions, sent with sendfile like the hot tier's (``tiering.cache.sendable``)."""
        return sendable(self.parts)

    @classmethod
    def empty(cls, offset: int) -> RemoteReadResult:
        return cls((), 0, offset, -1, offset)

    def truncate(self, max_bytes: int, *, min_one: bool) -> RemoteReadResult:
        """The longest prefix of whole batches within ``max_bytes`` (one batch at least if
        ``min_one``)."""
        if self.size <= max_bytes:
            return self
        n = bisect.bisect_right(self.batch_ends, max_bytes)
        if n == 0 and min_one and self.batch_ends:
            n = 1
        if n == 0:
            return RemoteReadResult.empty(self.offset)
        end = self.batch_ends[n - 1]
        return RemoteReadResult(
            _head(self.parts, end),
            end,
            self.offset,
            self.first_offset,
            self.batch_next_offsets[n - 1],
            self.batch_ends[:n],
            self.batch_next_offsets[:n],
        )


# --- remote index files (pure) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RemoteOffsetIndex:
    """A segment's parsed ``.index``: absolute offsets and positions, both increasing."""

    base_offset: int
    offsets: tuple[int, ...]
    positions: tuple[int, ...]

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below ``offset``, else (base, 0)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.offsets[i], self.positions[i]

    @property
    def nbytes(self) -> int:
        return 72 * len(self.offsets) + 64  # two boxed ints and two tuple slots per entry


@dataclass(frozen=True, slots=True)
class RemoteTimeIndex:
    """A segment's parsed ``.timeindex``: timestamps strictly increasing."""

    timestamps: tuple[int, ...]
    offsets: tuple[int, ...]

    def lookup_before(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is below ``timestamp`` (the answer
        lies after that entry's batch), None if there is none."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return None if i < 0 else self.offsets[i]

    @property
    def nbytes(self) -> int:
        return 72 * len(self.offsets) + 64  # two boxed ints and two tuple slots per entry


def parse_offset_index(data: bytes, seg: RemoteSegment) -> RemoteOffsetIndex:
    """Parse and sanity-check a remote ``.index``; RemoteCorruptObjectError names the key."""
    key = seg.keys.index
    if len(data) % OFFSET_ENTRY.size:
        raise RemoteCorruptObjectError(key, f"size {len(data)} is not a multiple of {OFFSET_ENTRY.size}")
    offsets: list[int] = []
    positions: list[int] = []
    prev_off = prev_pos = -1
    for i, (rel, pos) in enumerate(OFFSET_ENTRY.iter_unpack(data)):
        off = seg.base_offset + rel
        if off <= prev_off or pos <= prev_pos or off > seg.last_offset or pos >= seg.size:
            raise RemoteCorruptObjectError(
                key,
                f"entry {i} (offset {off}, position {pos}) is out of order or outside the segment "
                f"[{seg.base_offset}, {seg.last_offset}] of {seg.size} bytes",
                position=i * OFFSET_ENTRY.size,
            )
        offsets.append(off)
        positions.append(pos)
        prev_off, prev_pos = off, pos
    return RemoteOffsetIndex(seg.base_offset, tuple(offsets), tuple(positions))


def parse_time_index(data: bytes, seg: RemoteSegment) -> RemoteTimeIndex:
    """Parse and sanity-check a remote ``.timeindex``; RemoteCorruptObjectError names the key."""
    key = seg.keys.timeindex
    if len(data) % TIME_ENTRY.size:
        raise RemoteCorruptObjectError(key, f"size {len(data)} is not a multiple of {TIME_ENTRY.size}")
    timestamps: list[int] = []
    offsets: list[int] = []
    prev_ts = None
    prev_off = -1
    for i, (ts, rel) in enumerate(TIME_ENTRY.iter_unpack(data)):
        off = seg.base_offset + rel
        if (prev_ts is not None and ts <= prev_ts) or off < prev_off or off > seg.last_offset:
            raise RemoteCorruptObjectError(
                key,
                f"entry {i} (timestamp {ts}, offset {off}) is out of order or outside the segment",
                position=i * TIME_ENTRY.size,
            )
        timestamps.append(ts)
        offsets.append(off)
        prev_ts, prev_off = ts, off
    return RemoteTimeIndex(tuple(timestamps), tuple(offsets))


class _Pieces:
    """Consecutive buffers read as one byte string (positions relative to the first)."""

    __slots__ = ("size", "starts", "views")

    def __init__(self, parts: Sequence[Buffer]) -> None:
        self.views = [memoryview(p) for p in parts if len(p)]
        self.starts: list[int] = []
        pos = 0
        for v in self.views:
            self.starts.append(pos)
            pos += len(v)
        self.size = pos

    def span(self, a: int, b: int) -> Buffer:
        """Bytes ``[a, b)``: a view when they lie in one buffer, else a (small) copy."""
        i = bisect.bisect_right(self.starts, a) - 1
        rel = a - self.starts[i]
        v = self.views[i]
        if rel + (b - a) <= len(v):
            return v[rel : rel + (b - a)]
        return b"".join(self.iter(a, b))

    def iter(self, a: int, b: int) -> list[memoryview]:
        """Views covering ``[a, b)``."""
        out: list[memoryview] = []
        i = bisect.bisect_right(self.starts, a) - 1
        while a < b and i < len(self.views):
            v = self.views[i]
            rel = a - self.starts[i]
            take = min(len(v) - rel, b - a)
            out.append(v[rel : rel + take])
            a += take
            i += 1
        return out

    def crc(self, a: int, b: int) -> int:
        crc = 0
        for v in self.iter(a, b):
            crc = crc32c(v, crc)
        return int(crc)


def validate_batches(data: Buffer | Sequence[Buffer], seg: RemoteSegment, position: int) -> None:
    """Full check of whole batches read from ``seg`` at byte ``position`` (one buffer, or
    consecutive pieces a batch may straddle): structure and CRC-32C of every batch."""
    pieces = _Pieces([data] if isinstance(data, bytes | bytearray | memoryview) else data)
    pos = 0
    while pos < pieces.size:
        try:
            h = parse_header(pieces.span(pos, min(pos + HEADER_SIZE, pieces.size)), 0)
        except StrataError as e:
            raise RemoteCorruptObjectError(seg.keys.log, str(e), position=position + pos) from None
        if pos + h.size > pieces.size:
            raise RemoteCorruptObjectError(
                seg.keys.log, "batch truncated", position=position + pos, offset=h.base_offset
            )
        actual = pieces.crc(pos + CRC_START, pos + h.size)
        if actual != h.crc:
            raise RemoteCorruptObjectError(
                seg.keys.log,
                f"CRC mismatch: stored {h.crc:#010x}, computed {actual:#010x}",
                position=position + pos,
                offset=h.base_offset,
            )
        pos += h.size


def check_segment_object(data: Buffer, crc: int | None = None, *, seg: RemoteSegment) -> None:
    """The one check of a segment's ``.log`` fetched whole against its manifest entry: its
    CRC-32C (``crc`` if the caller computed it already) against ``log_crc32c`` or, for
    entries written before that field existed, its SHA-256 against ``log_sha256``. Bytes
    that pass need no batch-by-batch validation: the uploader (``inspect_segment``) and
    the remote compactor compute ``log_crc32c`` only after validating every batch. On a
    mismatch, the batches are scanned so that damage inside one is reported with its
    offset and position (a CRC error); the whole-object error covers what no batch CRC
    sees (e.g. a changed baseOffset or partitionLeaderEpoch, or another object under the
    key). Why CRC-32C: it is what S3
    itself offers as a full-object checksum, and in hardware it costs 0.4 ms per 8 MiB
    where SHA-256 cost 7.5 ms, the largest single item of a cold read's CPU."""
    if seg.log_crc32c is not None:
        crc = int(crc32c(data)) if crc is None else crc
        if crc == seg.log_crc32c:
            return
        problem = f"CRC-32C {crc:#010x} of the object differs from the manifest's {seg.log_crc32c:#010x}"
    else:
        digest = hashlib.sha256(data).hexdigest()
        if digest == seg.log_sha256:
            return
        problem = f"SHA-256 {digest} of the object differs from the manifest's {seg.log_sha256}"
    validate_batches(data, seg, 0)
    raise RemoteCorruptObjectError(seg.keys.log, problem)


# --- the reader -----------------------------------------------------------------------------------


class _SegmentGone(Exception):
    """The manifest snapshot looks stale: no segment holds the offset (``key`` None) or the
    object ``key`` is gone (retention deleted it after the snapshot). Reload and retry."""

    def __init__(self, key: str | None = None) -> None:
        super().__init__(key)
        self.key = key


class _LruBytes:
    """Small in-memory LRU of parsed index files, bounded by an estimate of their size."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[object, int]] = OrderedDict()
        self._size = 0

    def get(self, key: str) -> object | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: str, value: object, size: int) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._size -= old[1]
        self._items[key] = (value, size)
        self._size += size
        while self._size > self.max_bytes and len(self._items) > 1:
            _, (_, s) = self._items.popitem(last=False)
            self._size -= s


@dataclass(slots=True)
class _Stream:
    """A partition's last remote read, to size the next read-ahead by its consumer's pace."""

    next_offset: int  # where the last read ended: a read from here continues the stream
    size: int  # bytes it returned
    ended_at: float  # clock when it returned


@dataclass(slots=True)
class _CachedManifest:
    manifest: PartitionManifest | None
    loaded_at: float


class _SegmentBuffer:
    """A growing window ``[start, end)`` of one segment's ``.log`` bytes, held as the chunk
    cache's views (never joined). ``whole``: the read started at byte 0, so the cache may
    GET the whole segment (its checksum checked) rather than chunk by chunk. ``verified``:
    every byte of the window passed that whole-segment check (now or when the cache
    fetched it), so its batches need no validation of their own."""

    def __init__(self, cache: ChunkCache, seg: RemoteSegment, start: int, *, whole: bool = False) -> None:
        self.cache = cache
        self.seg = seg
        self.start = start
        self.end = start
        self.whole = whole and start == 0
        self._starts: list[int] = []  # segment position of each view
        self._views: list[memoryview] = []
        self.verified = True

    async def ensure(self, end: int, *, hint: int = 0) -> None:
        """Make ``[start, end)`` available (reading up to ``hint`` ahead in one go)."""
        end = min(end, self.seg.size)
        if end <= self.end:
            return
        want = min(self.seg.size, max(end, hint, self.end + self.cache.chunk_bytes))
        try:
            views, verified = await self.cache.read_checked_views(
                self.seg.keys.log,
                self.end,
                want,
                object_size=self.seg.size,
                whole=self.whole,
                check=functools.partial(check_segment_object, seg=self.seg),
            )
        except ObjectNotFoundError:
            raise _SegmentGone(self.seg.keys.log) from None
        self.verified = self.verified and verified
        for v in views:
            if len(v):
                self._starts.append(self.end)
                self._views.append(v)
                self.end += len(v)

    def header(self, pos: int, offset: int) -> BatchHeader:
        """The batch header at segment position ``pos`` (must be inside the window)."""
        if pos + HEADER_SIZE > self.seg.size:
            raise RemoteCorruptObjectError(
                self.seg.keys.log,
                f"truncated batch header: the segment ends {self.seg.size - pos} bytes after it starts",
                position=pos,
                offset=offset,
            )
        i = bisect.bisect_right(self._starts, pos) - 1
        rel = pos - self._starts[i]
        view = self._views[i]
        raw: Buffer = view if rel + HEADER_SIZE <= len(view) else b"".join(self.slice(pos, pos + HEADER_SIZE))
        try:
            return parse_header(raw, rel if raw is view else 0)
        except StrataError as e:
            raise RemoteCorruptObjectError(self.seg.keys.log, str(e), position=pos, offset=offset) from None

    def slice(self, a: int, b: int) -> list[memoryview]:
        """Views covering segment positions ``[a, b)`` (inside the window)."""
        out: list[memoryview] = []
        i = max(0, bisect.bisect_right(self._starts, a) - 1)
        while a < b and i < len(self._views):
            v = self._views[i]
            rel = a - self._starts[i]
            take = min(len(v) - rel, b - a)
            out.append(v[rel : rel + take])
            a += take
            i += 1
        return out


@dataclass(frozen=True, slots=True)
class _Piece:
    parts: tuple[memoryview, ...]
    size: int
    first_offset: int
    next_offset: int
    ends: tuple[int, ...]
    nexts: tuple[int, ...]
    at_segment_end: bool
    end_position: int  # segment position after the bytes
    loaded_end: int  # segment position after the bytes read into the buffer (>= end_position)


class RemoteReader:
    """Reads tiered offsets of any partition (module docstring)."""

    def __init__(
        self,
        store: ObjectStore,
        manifests: ManifestStore,
        cache: ChunkCache,
        config: TieringConfig | None = None,
        *,
        manifest_ttl_s: float | None = None,
        index_cache_bytes: int = DEFAULT_INDEX_CACHE_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.manifests = manifests
        self.cache = cache
        if manifest_ttl_s is None:
            ttl_ms = getattr(config, "manifest_cache_ttl_ms", None)
            manifest_ttl_s = ttl_ms / 1000 if isinstance(ttl_ms, int | float) else DEFAULT_MANIFEST_TTL_S
        self.manifest_ttl_s = manifest_ttl_s
        self._clock = clock
        self._manifests: dict[PartitionKey, _CachedManifest] = {}
        self._loading: dict[PartitionKey, asyncio.Task[PartitionManifest | None]] = {}
        self._indexes = _LruBytes(index_cache_bytes)
        self._index_loads: dict[str, asyncio.Task[object]] = {}
        self._prefetch_tasks: set[asyncio.Task[None]] = set()
        self._streams: OrderedDict[PartitionKey, _Stream] = OrderedDict()
        self.manifest_loads = 0  # manifest GETs (a metric, and a test hook for the GET budget)
        # Metric hooks (tiering.metrics), no-ops by default: (topic, bytes) per read that
        # returned data, (topic, kind) per failed read.
        self.on_read: Callable[[str, int], None] = lambda topic, nbytes: None
        self.on_error: Callable[[str, str], None] = lambda topic, kind: None

    @property
    def object_checks(self) -> int:
        """Whole-segment checksum checks so far (``check_segment_object``: one per
        whole-object GET, none on cache hits)."""
        return self.cache.object_checks

    # -- manifests ------------------------------------------------------------------------------

    def note_manifest(self, manifest: PartitionManifest) -> None:
        """Take a manifest the uploader just wrote (saves a GET; never replaces a newer one)."""
        tp = (manifest.topic, manifest.topic_id, manifest.partition)
        cached = self._manifests.get(tp)
        if (
            cached is not None
            and cached.manifest is not None
            and cached.manifest.revision > manifest.revision
        ):
            return
        self._manifests[tp] = _CachedManifest(manifest, self._clock())

    def has_manifest(self, topic: str, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether ``manifest`` would answer from the cache now (or joins a load in flight)."""
        tp = (topic, topic_id, partition)
        cached = self._manifests.get(tp)
        fresh = cached is not None and self._clock() - cached.loaded_at < self.manifest_ttl_s
        return fresh or tp in self._loading

    def forget(self, topic: str, topic_id: uuid.UUID, partition: int) -> None:
        """Drop the cached manifest (topic deleted)."""
        self._manifests.pop((topic, topic_id, partition), None)

    async def manifest(
        self, topic: str, topic_id: uuid.UUID, partition: int, *, refresh: bool = False
    ) -> PartitionManifest | None:
        """The partition manifest (cached; ``refresh`` forces a reload, coalesced with any in flight)."""
        tp = (topic, topic_id, partition)
        cached = self._manifests.get(tp)
        if not refresh and cached is not None and self._clock() - cached.loaded_at < self.manifest_ttl_s:
            return cached.manifest
        task = self._loading.get(tp)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load_manifest(tp))
            self._loading[tp] = task
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return await asyncio.shield(task)

    async def _load_manifest(self, tp: PartitionKey) -> PartitionManifest | None:
        try:
            self.manifest_loads += 1
            try:
                m, _ = await self.manifests.load(*tp)
            except ManifestError as e:
                raise RemoteCorruptObjectError(manifest_key(*tp), str(e)) from None
            self._manifests[tp] = _CachedManifest(m, self._clock())
            return m
        finally:
            self._loading.pop(tp, None)

    async def _find(self, m: PartitionManifest, offset: int) -> RemoteSegment | None:
        try:
            return await self.manifests.find_segment(m, offset)
        except ManifestError as e:
            raise RemoteCorruptObjectError(manifest_key(m.topic, m.topic_id, m.partition), str(e)) from None

    # -- indexes -------------------------------------------------------------------------------------

    async def _cached_index(self, key: str, load: Callable[[], Awaitable[tuple[object, int]]]) -> object:
        hit = self._indexes.get(key)
        if hit is not None:
            return hit
        task = self._index_loads.get(key)
        if task is None:

            async def run() -> object:
                try:
                    value, size = await load()
                    self._indexes.put(key, value, size)
                    return value
                finally:
                    self._index_loads.pop(key, None)

            task = asyncio.get_running_loop().create_task(run())
            self._index_loads[key] = task
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return await asyncio.shield(task)

    async def _read_part(self, part: ObjectPart) -> bytes:
        """An index's bytes through the chunk cache: with ``.indexes`` (one small object),
        the GET for the offset index also brings the time index in."""
        assert part.start is not None and part.end is not None and part.object_size is not None
        try:
            return await self.cache.read(part.key, part.start, part.end, object_size=part.object_size)
        except ObjectNotFoundError:
            raise _SegmentGone(part.key) from None

    async def offset_index(self, seg: RemoteSegment) -> RemoteOffsetIndex:
        part = seg.index_part()

        async def load() -> tuple[object, int]:
            data = await self._read_part(part)
            idx = await asyncio.to_thread(parse_offset_index, data, seg)
            return idx, idx.nbytes

        if seg.index_size == 0:
            return RemoteOffsetIndex(seg.base_offset, (), ())
        value = await self._cached_index(part.name, load)
        assert isinstance(value, RemoteOffsetIndex)
        return value

    async def time_index(self, seg: RemoteSegment) -> RemoteTimeIndex:
        part = seg.timeindex_part()

        async def load() -> tuple[object, int]:
            data = await self._read_part(part)
            idx = await asyncio.to_thread(parse_time_index, data, seg)
            return idx, idx.nbytes

        if seg.timeindex_size == 0:
            return RemoteTimeIndex((), ())
        value = await self._cached_index(part.name, load)
        assert isinstance(value, RemoteTimeIndex)
        return value

    async def txn_index(self, seg: RemoteSegment) -> tuple[AbortedTxn, ...]:
        """A segment's parsed ``.txnindex`` (tiering.remote_txn), cached like the other
        indexes; empty when the segment has none."""

        async def load() -> tuple[object, int]:
            size = seg.txnindex_size or 0
            try:
                data = await self.cache.read(seg.keys.txnindex, 0, size, object_size=size)
            except ObjectNotFoundError:
                raise _SegmentGone(seg.keys.txnindex) from None
            entries = parse_txn_index(bytes(data), seg)
            return entries, 64 + ENTRY_MEMORY_BYTES * len(entries)

        if not seg.txnindex_size:
            return ()
        value = await self._cached_index(seg.keys.txnindex, load)
        assert isinstance(value, tuple)
        return value

    # -- transactions ----------------------------------------------------------------------------

    async def search_aborted_transactions(
        self, topic: str, topic_id: uuid.UUID, partition: int, start_offset: int, upper_bound_offset: int
    ) -> TxnSearch:
        """The aborted transactions overlapping [start_offset, upper_bound_offset) in the
        remote segments, and whether the search is complete; if not, the caller continues
        in the local segments (``tiering.remote_txn.combine``). Kafka's
        RemoteLogManager.collectAbortedTransactions. RemoteObjectMissingError /
        RemoteCorruptObjectError as for ``read``."""
        if upper_bound_offset <= start_offset:
            return TxnSearch((), True)

        async def body(m: PartitionManifest) -> TxnSearch:
            # Spilled segments only where they can hold the start (they lie below the rest).
            segments: list[RemoteSegment] = []
            try:
                for ref in m.spillover:
                    if ref.last_offset >= start_offset:
                        segments.extend(await self.manifests.load_spillover(ref))
            except ManifestError as e:
                raise RemoteCorruptObjectError(manifest_key(topic, topic_id, partition), str(e)) from None
            segments.extend(m.copied())
            return await collect_remote(segments, start_offset, upper_bound_offset, self.txn_index)

        try:
            return await self._with_fresh_manifest(topic, topic_id, partition, None, body)
        except RemoteObjectMissingError:
            self.on_error(topic, "missing")
            raise
        except RemoteCorruptObjectError:
            self.on_error(topic, "corrupt")
            raise

    async def aborted_transactions(
        self, topic: str, topic_id: uuid.UUID, partition: int, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The AbortedTxn list of ``search_aborted_transactions`` (remote segments only)."""
        found = await self.search_aborted_transactions(
            topic, topic_id, partition, start_offset, upper_bound_offset
        )
        return list(found.aborted)

    # -- reading --------------------------------------------------------------------------------------

    async def _with_fresh_manifest(
        self,
        topic: str,
        topic_id: uuid.UUID,
        partition: int,
        offset: int | None,
        body: Callable[[PartitionManifest], Awaitable[T]],
    ) -> T:
        """Run ``body`` on the cached manifest; if it turns out stale (segment or object
        gone), once more on a freshly loaded one. Then explain what is missing."""
        gone: _SegmentGone | None = None
        m: PartitionManifest | None = None
        for attempt in range(2):
            m = await self.manifest(topic, topic_id, partition, refresh=attempt > 0)
            if m is None:
                continue
            if offset is not None and offset < m.log_start_offset:
                raise OffsetOutOfRangeError(
                    f"offset {offset} of {topic}-{partition} is below the remote log start offset "
                    f"{m.log_start_offset}"
                )
            try:
                return await body(m)
            except _SegmentGone as e:
                gone = e
        where = f"{topic}-{partition}" + (f" at offset {offset}" if offset is not None else "")
        mkey = manifest_key(topic, topic_id, partition)
        if m is None:
            raise RemoteObjectMissingError(f"{where}: the remote manifest {mkey} does not exist", key=mkey)
        if gone is not None and gone.key is not None:
            raise RemoteObjectMissingError(
                f"{where}: remote object {gone.key} named by manifest {mkey} is missing from the bucket",
                key=gone.key,
            )
        raise RemoteObjectMissingError(
            f"{where}: no COPIED remote segment holds the offset (manifest {mkey}, remote offsets "
            f"{m.log_start_offset} to {m.next_offset() - 1})",
            key=mkey,
        )

    async def read(
        self,
        topic: str,
        topic_id: uuid.UUID,
        partition: int,
        offset: int,
        max_bytes: int,
        *,
        min_one: bool = True,
        max_offset: int | None = None,
    ) -> RemoteReadResult:
        """Whole batches from the one holding ``offset``: at most ``max_bytes`` (but one
        batch at least with ``min_one``), none starting at or after ``max_offset``.

        OffsetOutOfRangeError below the remote log start; RemoteObjectMissingError when
        the manifest has no segment for the offset or an object is gone;
        RemoteCorruptObjectError for bytes that fail validation."""
        limit = max_offset if max_offset is not None else 1 << 62
        if offset >= limit:
            return RemoteReadResult.empty(offset)

        async def body(m: PartitionManifest) -> RemoteReadResult:
            return await self._read(m, offset, max_bytes, min_one, limit)

        try:
            result = await self._with_fresh_manifest(topic, topic_id, partition, offset, body)
        except OffsetOutOfRangeError:
            raise  # the client's offset, not a failure of the tier
        except RemoteObjectMissingError:
            self.on_error(topic, "missing")
            raise
        except RemoteCorruptObjectError:
            self.on_error(topic, "corrupt")
            raise
        except ObjectStoreError:
            self.on_error(topic, "store")
            raise
        self.on_read(topic, result.size)
        return result

    async def _read(
        self, m: PartitionManifest, offset: int, max_bytes: int, min_one: bool, limit: int
    ) -> RemoteReadResult:
        began = self._clock()
        seg = await self._find(m, offset)
        if seg is None:
            raise _SegmentGone
        if offset <= seg.base_offset and seg.size <= max_bytes - max_bytes // 2:
            # The read will run into the next segment: start its GET now, alongside this
            # one's, rather than after it (a consumer's first fetch waited for both in turn).
            # Past half the budget it will not wait for the next segment (below): that GET
            # is left to the read-ahead after it rather than slow this one's down.
            ahead = -(-max_bytes // self.cache.chunk_bytes)
            self._start_prefetch(m, seg, seg.size, limit, min(ahead, self._prefetch_chunks(max_bytes)))
        pieces: list[_Piece] = []
        remaining = max_bytes
        at = offset
        while True:
            piece = await self._read_segment_checked(seg, at, remaining, min_one and not pieces, limit)
            # Prefetch continues after the last bytes this read loaded, which may be the
            # start of a segment it only looked into (its first batch did not fit).
            touched, touched_end = seg, piece.loaded_end
            if piece.size:
                pieces.append(piece)
                remaining -= piece.size
                at = piece.next_offset
            if not piece.at_segment_end or remaining <= 0 or at >= limit:
                break
            nxt = await self._find(m, seg.last_offset + 1)
            if nxt is None:
                break
            if pieces and remaining < max_bytes // 2 and not self.cache.at_hand(nxt.keys.log, 0):
                # Most of the budget is filled: the batches that could still fit are not
                # worth a wait for the next segment's GET (the read-ahead has it coming
                # for the next fetch). Kafka's reads stop at a segment's end anyway.
                break
            seg, at = nxt, max(at, nxt.base_offset)
        if not pieces:
            return RemoteReadResult.empty(offset)
        if pieces[-1].next_offset < limit:
            tp = (m.topic, m.topic_id, m.partition)
            ahead = self._read_ahead_chunks(tp, offset, max_bytes, began)
            self._start_prefetch(m, touched, touched_end, limit, ahead)
            self._note_stream(tp, pieces[-1].next_offset, sum(p.size for p in pieces))
        if len(pieces) == 1:
            p = pieces[0]
            return RemoteReadResult(p.parts, p.size, offset, p.first_offset, p.next_offset, p.ends, p.nexts)
        ends: list[int] = []
        nexts: list[int] = []
        parts: list[Buffer] = []
        base = 0
        for p in pieces:
            ends.extend(base + e for e in p.ends)
            nexts.extend(p.nexts)
            parts.extend(p.parts)
            base += p.size
        return RemoteReadResult(
            tuple(parts),
            base,
            offset,
            pieces[0].first_offset,
            pieces[-1].next_offset,
            tuple(ends),
            tuple(nexts),
        )

    async def _read_segment_checked(
        self, seg: RemoteSegment, offset: int, max_bytes: int, min_one: bool, limit: int
    ) -> _Piece:
        try:
            return await self._read_segment(seg, offset, max_bytes, min_one, limit)
        except RemoteCorruptObjectError as e:
            if e.key != seg.keys.log:
                raise
            # A damaged GET or cache file: drop what we hold and try the bucket once more.
            logger.warning("remote read of %s failed validation (%s); fetching it again", seg.keys.log, e)
            await self.cache.invalidate(seg.keys.log, object_size=seg.size)
            return await self._read_segment(seg, offset, max_bytes, min_one, limit)

    async def _read_segment(
        self, seg: RemoteSegment, offset: int, max_bytes: int, min_one: bool, limit: int
    ) -> _Piece:
        if seg.state is not SegmentState.COPIED:
            raise _SegmentGone
        key = seg.keys.log
        if offset <= seg.base_offset:
            entry_offset, pos = seg.base_offset, 0
        else:
            entry_offset, pos = (await self.offset_index(seg)).lookup(offset)
        buf = _SegmentBuffer(self.cache, seg, pos, whole=True)
        await buf.ensure(pos + HEADER_SIZE, hint=pos + max(max_bytes, 0) + _SCAN_SLACK)
        # skip to the batch holding ``offset``
        h = buf.header(pos, offset)
        if pos > 0 and h.base_offset != entry_offset:
            raise RemoteCorruptObjectError(
                seg.keys.index,
                f"index names offset {entry_offset} at byte {pos} of {key}, where batch "
                f"{h.base_offset} starts",
                offset=offset,
            )
        expect = h.base_offset if pos > 0 else seg.base_offset
        while True:
            if h.base_offset < expect or h.last_offset > seg.last_offset:
                raise RemoteCorruptObjectError(
                    key,
                    f"batch [{h.base_offset}, {h.last_offset}] is out of order or outside the segment "
                    f"[{seg.base_offset}, {seg.last_offset}]",
                    position=pos,
                    offset=offset,
                )
            if h.next_offset > offset:
                break
            expect = h.next_offset
            pos += h.size
            if pos >= seg.size:
                raise RemoteCorruptObjectError(
                    key,
                    f"segment ends before offset {offset} (manifest: last {seg.last_offset})",
                    offset=offset,
                )
            await buf.ensure(pos + HEADER_SIZE, hint=pos + max(max_bytes, 0) + _SCAN_SLACK)
            h = buf.header(pos, offset)
        # collect whole batches
        first_pos = pos
        first_offset = h.base_offset
        ends: list[int] = []
        nexts: list[int] = []
        taken = 0
        while True:
            if h.base_offset >= limit:
                break
            if taken + h.size > max_bytes and not (min_one and taken == 0):
                break
            if pos + h.size > seg.size:
                raise RemoteCorruptObjectError(
                    key,
                    f"batch of {h.size} bytes runs past the end of the {seg.size}-byte segment",
                    position=pos,
                    offset=h.base_offset,
                )
            await buf.ensure(pos + h.size + HEADER_SIZE, hint=pos + (max_bytes - taken) + _SCAN_SLACK)
            taken += h.size
            pos += h.size
            ends.append(taken)
            nexts.append(h.next_offset)
            expect = h.next_offset
            if pos >= seg.size:
                break
            h = buf.header(pos, expect)
            if h.base_offset < expect or h.last_offset > seg.last_offset:
                raise RemoteCorruptObjectError(
                    key,
                    f"batch [{h.base_offset}, {h.last_offset}] is out of order or outside the segment "
                    f"[{seg.base_offset}, {seg.last_offset}]",
                    position=pos,
                    offset=expect,
                )
        at_end = pos >= seg.size
        if at_end and nexts and nexts[-1] != seg.last_offset + 1:
            raise RemoteCorruptObjectError(
                key,
                f"segment ends at offset {nexts[-1] - 1}, the manifest says {seg.last_offset}",
                position=pos,
            )
        parts = buf.slice(first_pos, pos)
        # Bytes that passed the whole-segment check need no second pass (check_segment_object).
        if not buf.verified:
            if taken >= _THREAD_VALIDATE_BYTES:
                await asyncio.to_thread(validate_batches, parts, seg, first_pos)
            else:
                validate_batches(parts, seg, first_pos)
        if not taken:
            return _Piece((), 0, -1, offset, (), (), at_end, pos, buf.end)
        return _Piece(
            tuple(parts), taken, first_offset, nexts[-1], tuple(ends), tuple(nexts), at_end, pos, buf.end
        )

    # -- prefetch -------------------------------------------------------------------------------------

    def _prefetch_chunks(self, max_bytes: int) -> int:
        """Chunks to fetch ahead of a read of ``max_bytes``: ``prefetch_chunks``, or two
        fetches' worth if that is more (the next fetch's bytes, and the one after it in
        flight while the next is served), within half the cache's memory tier."""
        c = self.cache
        if c.prefetch_chunks == 0 or c.max_bytes == 0:
            return 0
        two_fetches = min(2 * max_bytes, c.memory_bytes // 2)
        return max(c.prefetch_chunks, -(-two_fetches // c.chunk_bytes))

    def _read_ahead_chunks(self, tp: PartitionKey, offset: int, max_bytes: int, began: float) -> int:
        """Chunks to fetch ahead after a read of ``max_bytes`` at ``offset`` that started at
        ``began``, sized by the consumer's pace: enough bytes for what it takes while one
        GET runs (the bytes of its last read over the time it took to ask again, times the
        cache's average GET time) plus one fetch's worth. Never fewer than
        ``_prefetch_chunks`` (a slow consumer, or a first read), never more than half the
        read memory (``memory_bytes``, which also bounds all prefetch GETs in flight, of
        every partition: the other half is left to the chunks being served and to other
        partitions' reads): a consumer that keeps up with the bucket gets more GETs running
        at once while it does, one that lags holds no more memory than before."""
        c = self.cache
        base = self._prefetch_chunks(max_bytes)
        st = self._streams.get(tp)
        get_s = c.get_seconds
        if base == 0 or st is None or st.next_offset != offset or get_s is None:
            return base
        asked_after = max(began - st.ended_at, 1e-4)  # the consumer's time between reads
        want = max_bytes + int(st.size / asked_after * get_s)
        cap = c.memory_bytes // 2 // c.chunk_bytes
        return max(base, min(cap, -(-want // c.chunk_bytes)))

    def _note_stream(self, tp: PartitionKey, next_offset: int, size: int) -> None:
        self._streams[tp] = _Stream(next_offset, size, self._clock())
        self._streams.move_to_end(tp)
        while len(self._streams) > _MAX_STREAMS:
            self._streams.popitem(last=False)

    def _start_prefetch(
        self, m: PartitionManifest, seg: RemoteSegment, position: int, limit: int, chunks: int
    ) -> None:
        """Fetch ``chunks`` chunks after ``position`` of ``seg`` in the background (module
        docstring)."""
        if chunks <= 0:
            return
        if len(self._prefetch_tasks) >= _MAX_PREFETCH_PLANS:
            return  # many partitions read at once: their own reads keep the store busy
        task = asyncio.get_running_loop().create_task(self._prefetch(m, seg, position, limit, chunks))
        self._prefetch_tasks.add(task)
        task.add_done_callback(self._prefetch_tasks.discard)

    async def _prefetch(
        self, m: PartitionManifest, seg: RemoteSegment, position: int, limit: int, chunks: int
    ) -> None:
        left = chunks
        try:
            # one segment boundary per chunk at most (a segment of a few bytes covers none)
            for _ in range(left + 1):
                left -= self.cache.prefetch(
                    seg.keys.log,
                    position,
                    left,
                    object_size=seg.size,
                    whole=True,
                    check=functools.partial(check_segment_object, seg=seg),
                )
                if left <= 0:
                    return
                nxt = await self._find(m, seg.last_offset + 1)
                if nxt is None or nxt.state is not SegmentState.COPIED or nxt.base_offset >= limit:
                    return  # past ``limit`` the hot tier serves
                seg, position = nxt, 0
        except StrataError as e:  # a hint only: the read that needs these bytes reports errors
            logger.debug("remote prefetch after %s:%d skipped: %s", seg.keys.log, position, e)

    async def wait_prefetches(self) -> None:
        """Wait until the background prefetches started by reads are done (tests, shutdown)."""
        while self._prefetch_tasks:
            await asyncio.gather(*list(self._prefetch_tasks), return_exceptions=True)
        await self.cache.wait_prefetches()

    # -- timestamps ---------------------------------------------------------------------------------

    async def max_timestamp(self, topic: str, topic_id: uuid.UUID, partition: int, *, max_offset: int) -> int:
        """The largest batch max timestamp of the remote segments below ``max_offset`` (-1 if none)."""
        m = await self.manifest(topic, topic_id, partition)
        if m is None:
            return -1
        best = max((r.max_timestamp for r in m.spillover if r.base_offset < max_offset), default=-1)
        for s in m.copied():
            if s.base_offset < max_offset and s.last_offset >= m.log_start_offset:
                best = max(best, s.max_timestamp)
        return best

    async def offset_for_timestamp(
        self, topic: str, topic_id: uuid.UUID, partition: int, timestamp: int, *, max_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first remote record at or above the log start offset
        with a timestamp >= ``timestamp`` and an offset below ``max_offset``; None if none.

        Segment max timestamps (manifest) pick the segment, its ``.timeindex`` and
        ``.index`` the position, and that batch is decoded for the exact record (batch
        granularity if it cannot be decoded, as the hot log does)."""

        async def body(m: PartitionManifest) -> tuple[int, int] | None:
            lso = m.log_start_offset
            try:
                segments = await self.manifests.all_segments(m)
            except ManifestError as e:
                raise RemoteCorruptObjectError(manifest_key(topic, topic_id, partition), str(e)) from None
            for seg in segments:
                if seg.state is not SegmentState.COPIED or seg.last_offset < lso:
                    continue
                if seg.base_offset >= max_offset:
                    return None
                if seg.max_timestamp < timestamp:
                    continue
                found = await self._search_segment(seg, timestamp, lso, max_offset)
                if found is not None:
                    return found
            return None

        return await self._with_fresh_manifest(topic, topic_id, partition, None, body)

    async def _search_segment(
        self, seg: RemoteSegment, timestamp: int, lso: int, limit: int
    ) -> tuple[int, int] | None:
        start_offset = (await self.time_index(seg)).lookup_before(timestamp)
        pos = 0
        if start_offset is not None:
            _, pos = (await self.offset_index(seg)).lookup(start_offset)
        buf = _SegmentBuffer(self.cache, seg, pos)
        while pos < seg.size:
            await buf.ensure(pos + HEADER_SIZE)
            h = buf.header(pos, seg.base_offset)
            if h.base_offset >= limit:
                return None
            if h.max_timestamp >= timestamp and h.next_offset > lso:
                await buf.ensure(pos + h.size)
                raw = b"".join(buf.slice(pos, pos + h.size))
                try:
                    batch = await asyncio.to_thread(decode_batch, raw)
                except StrataError as e:
                    logger.info(
                        "cannot decode remote batch at %s:%d (%s); batch granularity", seg.keys.log, pos, e
                    )
                    return max(h.base_offset, lso), h.max_timestamp
                for rec in batch:
                    if rec.offset >= limit:
                        return None
                    if rec.offset >= lso and rec.timestamp >= timestamp:
                        return int(rec.offset), int(rec.timestamp)
            pos += h.size
        return None


__all__ = [
    "RemoteCorruptObjectError",
    "RemoteObjectMissingError",
    "RemoteOffsetIndex",
    "RemoteReadResult",
    "RemoteReader",
    "RemoteTimeIndex",
    "check_segment_object",
    "parse_offset_index",
    "parse_time_index",
    "validate_batches",
]
