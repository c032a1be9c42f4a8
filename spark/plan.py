"""Planning a scan of archived (and optionally hot) records: manifests in, small tasks out.

Runs once, on the Spark driver (or in ``strata export``). It reads, through the object
store, only metadata and the few bytes needed to place range boundaries:

1. ``topics/<topic>.json`` for the topic id and partition count;
2. each partition manifest, and the spillover manifests whose offset range (and, for
   timestamp bounds, whose max timestamp) can matter;
3. with ``includeHot``, the broker's high watermark and log start offset of every
   partition (ListOffsets), taken *after* the manifests: every offset below that
   snapshot is then either in a COPIED segment the plan reads from the bucket or in a
   gap the plan reads from the broker, exactly once;
4. the remote ``.index`` of a segment only when a range boundary falls inside it or it is
   split, and ``.timeindex`` plus a short ranged read only to resolve a timestamp bound.

Segment pruning: a segment is read only if its ``[base_offset, last_offset]`` overlaps the
resolved offset range; a timestamp bound resolves to an offset per partition first
(Kafka's offsetsForTimes: the earliest offset whose record timestamp is >= the bound,
found via the segments' max timestamps, the time index and one scan), so time pruning is
offset pruning. Byte ranges inside a segment come from the offset index: the start is the
position of the last indexed batch at or below the first wanted offset, the end the
position of the first indexed batch at or above the end offset.

Remote index layouts (as uploaded from ``hot.offset_index`` / ``hot.time_index``)::

    .index      8-byte entries:  relativeOffset uint32 BE | position uint32 BE
    .timeindex  12-byte entries: timestamp int64 BE | relativeOffset uint32 BE

The output tasks are frozen dataclasses of plain values, small and picklable; clients
are created by the task's reader, never here.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import logging
import struct
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

from hot.errors import (
    AuthorizationError,
    CorruptLogError,
    CorruptRecordError,
    InvalidConfigError,
    ObjectNotFoundError,
    OffsetOutOfRangeError,
    StrataError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from hot.records import decode_batch
from hot.txn_index import AbortedTxn
from kclient.security import ClientSecurity
from spark.columnar import frame
from spark.options import ReadOptions, StoreOptions, TopicPartition
from spark.txn import aborted_between, first_unstable, overlapping
from tiering.manifest import ObjectPart, PartitionManifest, RemoteSegment, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.store import InvalidRangeError, ObjectStore, open_store

if TYPE_CHECKING:
    from kclient import KafkaClient

INDEX_ENTRY: Final = struct.Struct(">II")
TIMEINDEX_ENTRY: Final = struct.Struct(">qI")
_CONCURRENCY: Final = 16
logger = logging.getLogger(__name__)
T = TypeVar("T")


# --- tasks ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """Bytes ``[start_position, end_position)`` of one segment's ``.log`` object, holding
    (at least) the wanted offsets ``[start_offset, end_offset)``; batches start at both ends."""

    key: str
    base_offset: int
    last_offset: int
    size: int
    start_position: int
    end_position: int
    start_offset: int
    end_offset: int
    compacted: bool = False  # cleaned segment (compacted topic): offsets may skip between batches

    @property
    def length(self) -> int:
        return self.end_position - self.start_position


@dataclass(frozen=True, slots=True)
class ColdTask:
    """Consecutive slices of one partition, read from the bucket by one Spark task;
    ``topic_id`` (hex) lets the reader tell a segment deleted by retention since the plan
    from a missing object."""

    topic: str
    partition: int
    slices: tuple[SegmentSlice, ...]
    topic_id: str | None = None
    # read_committed: the aborted transactions overlapping the task's offsets (spark.txn)
    aborted: tuple[AbortedTxn, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(s.length for s in self.slices)


@dataclass(frozen=True, slots=True)
class HotTask:
    """Offsets ``[start_offset, end_offset)`` not archived when the plan was made, fetched
    from ``broker``; ``topic_id`` lets the reader fall back to the bucket for offsets the
    broker uploaded and deleted locally in the meantime."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    broker: str
    topic_id: str | None

    @property
    def bytes(self) -> int:
        return 0


ScanTask = ColdTask | HotTask


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """The resolved range of one partition: rows are offsets ``[start, end)``."""

    topic: str
    partition: int
    start: int
    end: int
    archived_end: int
    high_watermark: int | None


@dataclass(frozen=True, slots=True)
class ScanPlan:
    tasks: tuple[ScanTask, ...]
    ranges: tuple[PartitionRange, ...]

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tasks)


# --- remote indexes (pure) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RemoteOffsetIndex:
    """A segment's offset index: absolute batch base offsets and their byte positions."""

    offsets: tuple[int, ...]
    positions: tuple[int, ...]

    def floor(self, offset: int) -> tuple[int, int] | None:
        """(offset, position) of the last entry at or below ``offset``."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        return None if i < 0 else (self.offsets[i], self.positions[i])

    def ceil(self, offset: int) -> tuple[int, int] | None:
        """(offset, position) of the first entry at or above ``offset``."""
        i = bisect.bisect_left(self.offsets, offset)
        return None if i >= len(self.offsets) else (self.offsets[i], self.positions[i])


def parse_offset_index(data: bytes, seg: RemoteSegment) -> RemoteOffsetIndex:
    """Entries must be whole, strictly increasing in offset and position, inside the segment."""
    key = seg.keys.index
    if len(data) % INDEX_ENTRY.size:
        raise CorruptLogError(key, 0, f"{len(data)} bytes is not a whole number of 8-byte entries")
    offsets: list[int] = []
    positions: list[int] = []
    for i, (rel, pos) in enumerate(INDEX_ENTRY.iter_unpack(data)):
        if rel == 0 and pos == 0:  # zero fill after the last entry: the first batch is never indexed
            break
        off = seg.base_offset + rel
        if (
            (offsets and (off <= offsets[-1] or pos <= positions[-1]))
            or off > seg.last_offset
            or pos >= seg.size
        ):
            raise CorruptLogError(
                key,
                i,
                f"entry (offset {off}, position {pos}) out of order or outside the segment",
                what="entry",
            )
        offsets.append(off)
        positions.append(pos)
    return RemoteOffsetIndex(tuple(offsets), tuple(positions))


def parse_time_index(data: bytes, seg: RemoteSegment) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(timestamps, absolute offsets) of a segment's time index."""
    key = seg.keys.timeindex
    if len(data) % TIMEINDEX_ENTRY.size:
        raise CorruptLogError(key, 0, f"{len(data)} bytes is not a whole number of 12-byte entries")
    stamps: list[int] = []
    offsets: list[int] = []
    for i, (ts, rel) in enumerate(TIMEINDEX_ENTRY.iter_unpack(data)):
        if ts == 0 and rel == 0 and stamps:
            break
        off = seg.base_offset + rel
        if (stamps and (ts <= stamps[-1] or off < offsets[-1])) or off > seg.last_offset:
            raise CorruptLogError(
                key,
                i,
                f"entry (timestamp {ts}, offset {off}) out of order or outside the segment",
                what="entry",
            )
        stamps.append(ts)
        offsets.append(off)
    return tuple(stamps), tuple(offsets)


def _cut_points(index: RemoteOffsetIndex, sl: SegmentSlice, ideal: Sequence[float]) -> list[tuple[int, int]]:
    """For each ideal cut position inside ``sl``, the nearest of: an index entry strictly
    inside the slice, the slice's start or its end; as (position, first offset after the
    cut), non-decreasing."""
    positions = index.positions
    out: list[tuple[int, int]] = []
    last = (sl.start_position, sl.start_offset)
    for x in ideal:
        if x - sl.start_position <= sl.end_position - x:
            best = (sl.start_position, sl.start_offset)
        else:
            best = (sl.end_position, sl.end_offset)
        j = bisect.bisect_left(positions, x)
        for k in (j - 1, j):
            if (
                0 <= k < len(positions)
                and sl.start_position < positions[k] < sl.end_position
                and sl.start_offset < index.offsets[k] < sl.end_offset
                and abs(positions[k] - x) < abs(best[0] - x)
            ):
                best = (positions[k], index.offsets[k])
        last = max(last, best)
        out.append(last)
    return out


def _cut(sl: SegmentSlice, offset: int, position: int) -> tuple[SegmentSlice, SegmentSlice]:
    """``sl`` cut at a batch boundary (an index entry): offsets below and from ``offset``."""
    head = dataclasses.replace(sl, end_position=position, end_offset=offset)
    tail = dataclasses.replace(sl, start_position=position, start_offset=offset)
    return head, tail


# --- object reads with context ------------------------------------------------------------------


async def _get(
    store: ObjectStore, key: str, what: str, *, start: int | None = None, end: int | None = None
) -> bytes:
    try:
        return await store.get(key, start=start, end=end)
    except ObjectNotFoundError as e:
        raise ObjectNotFoundError(f"{what}: object {key} is missing from {store.url} ({e})") from None
    except InvalidRangeError as e:
        raise CorruptLogError(key, start or 0, f"object is shorter than the manifest says ({e})") from None


async def _get_part(store: ObjectStore, part: ObjectPart, what: str) -> bytes:
    """``_get`` of one of a segment's indexes (alone, or in its ``.indexes`` object)."""
    if part.name == part.key:
        return await _get(store, part.key, what)
    return await _get(store, part.key, what, start=part.start, end=part.end)


# --- the planner --------------------------------------------------------------------------------


_MIN_SPLIT: Final = 4096  # minPartitions never cuts pieces smaller than an index interval


@dataclass(frozen=True, slots=True)
class _Partition:
    topic: str
    topic_id: uuid.UUID | None
    partition: int
    manifest: PartitionManifest | None


@dataclass(frozen=True, slots=True)
class _Resolved:
    part: _Partition
    range: PartitionRange
    segments: tuple[RemoteSegment, ...]
    cold_end: int  # cold tasks read below it (read_committed: the bucket's stable end)
    aborted: tuple[AbortedTxn, ...] = ()  # read_committed, over [start, cold_end)


class Planner:
    """Builds a ScanPlan from the bucket (and, for includeHot, ``broker``: a BrokerClient)."""

    def __init__(
        self,
        options: ReadOptions,
        store: ObjectStore,
        broker: BrokerClient | None = None,
        *,
        absent: list[TopicPartition] | None = None,
    ) -> None:
        """``absent``: a stream's list collecting assigned partitions that do not exist
        (yet), which are then left out instead of failing the plan (Spark's Kafka source
        reads an assignment's existing partitions and adds the others when they appear)."""
        self.options = options
        self.store = store
        self.manifests = ManifestStore(store)
        self.broker = broker
        self.absent = absent
        self._sem = asyncio.Semaphore(_CONCURRENCY)

    async def plan(self) -> ScanPlan:
        """The tasks reading the options' offset ranges of every selected partition."""
        parts: list[_Partition] = []
        for topic in await self.topics():
            parts.extend(await self._partitions_of(topic))
        return await self._plan(await self._resolve_all(parts, None, with_segments=True))

    async def ranges(self) -> tuple[PartitionRange, ...]:
        """The options' resolved offset ranges of every selected partition, without tasks
        (a stream's offsets: with bounds earliest/latest, each partition's log start and
        latest offset)."""
        parts: list[_Partition] = []
        for topic in await self.topics():
            parts.extend(await self._partitions_of(topic))
        return tuple(r.range for r in await self._resolve_all(parts, None, with_segments=False))

    async def plan_exact(self, ranges: Mapping[TopicPartition, tuple[int, int]]) -> ScanPlan:
        """The tasks reading exactly offsets ``[start, end)`` of each partition named (a
        stream's micro-batch). Offsets below the log start now were deleted by retention:
        data loss (``report_data_loss``), read from the log start on when tolerated."""
        parts: list[_Partition] = []
        for topic in sorted({t for t, _ in ranges}):
            doc = await self.manifests.load_topic_manifest(topic)
            tid = uuid.UUID(doc["topic_id"]) if doc is not None else None
            nums = sorted(p for t, p in ranges if t == topic)
            parts.extend(await asyncio.gather(*(self._load(topic, tid, p) for p in nums)))
        return await self._plan(await self._resolve_all(parts, ranges, with_segments=True))

    async def topics(self) -> list[str]:
        """The topics read: subscribe's and assign's, or those whose whole name matches
        subscribePattern among the bucket's topic manifests and (with a broker) the
        broker's non-internal topics."""
        o = self.options
        if o.pattern is None:
            return list(o.topics)
        names = set(await self.manifests.list_topics())
        if o.include_hot and self.broker is not None:
            names |= set(await asyncio.to_thread(self.broker.topics))
        return sorted(n for n in names if o.selects(n))

    async def _resolve_all(
        self,
        parts: Sequence[_Partition],
        exact: Mapping[TopicPartition, tuple[int, int]] | None,
        *,
        with_segments: bool,
    ) -> list[_Resolved]:
        o = self.options
        hw: dict[TopicPartition, int] = {}
        broker_start: dict[TopicPartition, int] = {}
        if o.include_hot:
            assert self.broker is not None
            for topic in dict.fromkeys(p.topic for p in parts):
                nums = [p.partition for p in parts if p.topic == topic]
                hw.update({(topic, p): v for p, v in (await self._broker_offsets(topic, nums, -1)).items()})
                broker_start.update(
                    {(topic, p): v for p, v in (await self._broker_offsets(topic, nums, -2)).items()}
                )
        return list(
            await asyncio.gather(*(self._resolve(p, hw, broker_start, exact, with_segments) for p in parts))
        )

    async def _plan(self, resolved: Sequence[_Resolved]) -> ScanPlan:
        o = self.options
        split = o.max_partition_bytes
        if o.min_partitions:
            total = sum(s.size for r in resolved for s in r.segments)
            split = min(split, max(_MIN_SPLIT, -(-total // o.min_partitions)))
        planned = await asyncio.gather(*(self._tasks(r, split) for r in resolved))
        tasks = [t for ts in planned for t in ts]
        return ScanPlan(tuple(tasks), tuple(r.range for r in resolved))

    async def _broker_offsets(self, topic: str, partitions: Sequence[int], ts: int) -> dict[int, int]:
        assert self.broker is not None
        broker = self.broker
        level = self.options.isolation_level
        return await asyncio.to_thread(broker.list_offsets, topic, list(partitions), ts, level)

    async def _partitions_of(self, topic: str) -> list[_Partition]:
        o = self.options
        doc = await self.manifests.load_topic_manifest(topic)
        count = 0
        topic_id: uuid.UUID | None = None
        if doc is not None:
            topic_id = uuid.UUID(doc["topic_id"])
            count = int(doc["partitions"])
        if o.include_hot:
            assert self.broker is not None
            count = max(count, await asyncio.to_thread(self.broker.partition_count, topic))
        if count == 0 or (doc is None and not o.include_hot):
            if self.absent is not None and o.assign is None:
                return []  # a stream's subscribed topic not created yet: it joins when it appears
            if o.include_hot:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} is neither archived in {self.store.url} nor known to broker {o.broker}"
                )
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no topic manifest topics/{topic}.json in {self.store.url}: "
                "nothing of it is archived there (check the URL and topic; records not tiered yet are "
                'read with option("kafka.bootstrap.servers", "HOST:PORT"), and `strata tier sync` '
                "uploads them now)"
            )
        nums = list(range(count))
        wanted = o.partitions_of(topic)
        if wanted is not None:
            missing = sorted(wanted - set(nums))
            if missing and o.pattern is None and self.absent is not None:
                self.absent.extend((topic, p) for p in missing)
            elif missing and o.pattern is None:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} has {count} partition(s); partition(s) {missing} do not exist"
                )
            nums = sorted(wanted & set(nums))
        for b, name in ((o.start, "starting"), (o.end, "ending")):
            for t, p in b.named_partitions():
                if t == topic and p >= count:
                    raise UnknownTopicOrPartitionError(
                        f"{name} offsets name {topic}-{p}, but topic {topic!r} has {count} partition(s)"
                    )

        return list(await asyncio.gather(*(self._load(topic, topic_id, p) for p in nums)))

    async def _load(self, topic: str, topic_id: uuid.UUID | None, p: int) -> _Partition:
        if topic_id is None:
            return _Partition(topic, None, p, None)
        async with self._sem:
            m, _ = await self.manifests.load(topic, topic_id, p)
        return _Partition(topic, topic_id, p, m)

    async def _segments(
        self, m: PartitionManifest, lo: int, hi: int, min_ts: int | None = None
    ) -> list[RemoteSegment]:
        """COPIED segments overlapping offsets [lo, hi), loading only the spillover
        manifests that can hold some (with ``min_ts``: whose max timestamp reaches it)."""
        out: list[RemoteSegment] = []
        for ref in m.spillover:
            if ref.last_offset < lo or ref.base_offset >= hi:
                continue
            if min_ts is not None and 0 <= ref.max_timestamp < min_ts:
                continue
            async with self._sem:
                out.extend(await self.manifests.load_spillover(ref))
        out.extend(m.copied())
        segs = [
            s for s in out if s.state is SegmentState.COPIED and s.last_offset >= lo and s.base_offset < hi
        ]
        segs.sort(key=lambda s: s.base_offset)
        return segs

    async def _resolve(
        self,
        part: _Partition,
        hw: dict[TopicPartition, int],
        broker_start: dict[TopicPartition, int],
        exact: Mapping[TopicPartition, tuple[int, int]] | None = None,
        with_segments: bool = True,
    ) -> _Resolved:
        """The partition's offset range and the archived segments overlapping it."""
        o = self.options
        tp = (part.topic, part.partition)
        m = part.manifest
        log_start = m.log_start_offset if m is not None else 0
        archived_end = m.next_offset() if m is not None else 0
        if tp in broker_start:
            log_start = max(log_start, broker_start[tp]) if m is not None else broker_start[tp]
        # read_committed: the bucket's decided data ends at its first open transaction.
        stable = archived_end
        if o.isolation_level and m is not None:
            copied = m.copied()
            unstable = await first_unstable(self.store, copied[-1] if copied else None)
            stable = archived_end if unstable is None else min(archived_end, max(unstable, log_start))
        latest = max(hw.get(tp, stable), log_start)

        async def resolve(kind: str, value: int) -> int:
            if kind == "earliest":
                return log_start
            if kind == "latest":
                return latest
            if kind == "offset":
                return min(max(value, log_start), latest)
            found = await self._offset_for_timestamp(part, log_start, latest, value)
            return latest if found is None else min(max(found, log_start), latest)

        if exact is not None:
            start, end = exact[tp]
            if start < log_start:
                report_data_loss(o, part.topic, part.partition, start, log_start)
                start = log_start
            end = max(start, end)
        else:
            start = await resolve(*o.start.for_partition(tp))
            end = max(start, await resolve(*o.end.for_partition(tp)))
        cold_end = min(end, stable)
        rng = PartitionRange(part.topic, part.partition, start, end, archived_end, hw.get(tp))
        if not with_segments:
            return _Resolved(part, rng, (), cold_end)
        segs = await self._segments(m, start, cold_end) if m is not None and start < cold_end else []
        aborted: tuple[AbortedTxn, ...] = ()
        if o.isolation_level and segs and m is not None:
            aborted = await aborted_between(
                self.store, await self._segments(m, start, 1 << 62), start, cold_end
            )
        return _Resolved(part, rng, tuple(segs), cold_end, aborted)

    async def _tasks(self, r: _Resolved, split: int) -> list[ScanTask]:
        """Cold tasks for the archived segments, hot tasks for the gaps (includeHot only)."""
        o = self.options
        part, start, end = r.part, r.range.start, r.range.end
        topic_id = part.topic_id.hex if part.topic_id else None
        tasks: list[ScanTask] = [
            ColdTask(
                part.topic,
                part.partition,
                tuple(piece),
                topic_id,
                overlapping(r.aborted, piece[0].start_offset, piece[-1].end_offset),
            )
            for piece in await self._pieces(r.segments, start, r.cold_end, split)
        ]
        if o.include_hot and start < end:
            assert o.broker is not None
            pos = start
            cold = ((s.base_offset, min(s.last_offset + 1, r.cold_end)) for s in r.segments)
            for lo, hi in [*cold, (end, end)]:
                if lo > pos:
                    tasks.append(HotTask(part.topic, part.partition, pos, min(lo, end), o.broker, topic_id))
                pos = max(pos, hi)
                if pos >= end:
                    break
        return tasks

    async def _pieces(
        self, segments: Sequence[RemoteSegment], start: int, end: int, split: int
    ) -> list[list[SegmentSlice]]:
        """Offsets ``[start, end)`` of consecutive segments of one partition, cut into the
        fewest pieces of at most about ``split`` bytes, of nearly equal size: Spark's task
        waves stay even, and small segments share a task instead of each paying a task's
        fixed cost. A cut falls at a segment boundary when one is near (no index needed),
        otherwise at the offset index entry nearest to it."""
        whole = list(await asyncio.gather(*(self._slice(s, start, end) for s in segments)))
        total = sum(sl.length for sl in whole)
        if not whole:
            return []
        count = max(1, -(-total // split))
        target = total / count
        snap = target / 8
        ends_piece: set[int] = set()  # a piece ends after these segments
        inside: dict[int, list[float]] = {}  # ideal cut positions inside a segment
        lo = 0
        k = 1
        for i, sl in enumerate(whole):
            hi = lo + sl.length
            while k < count and k * target < hi:
                x = k * target - lo
                if x <= snap:
                    ends_piece.add(i - 1)
                elif sl.length - x <= snap:
                    ends_piece.add(i)
                else:
                    inside.setdefault(i, []).append(sl.start_position + x)
                k += 1
            lo = hi
        indexes = await asyncio.gather(*(self._index(segments[i]) for i in inside))
        cuts = {i: _cut_points(ix, whole[i], inside[i]) for i, ix in zip(inside, indexes, strict=True)}
        pieces: list[list[SegmentSlice]] = [[]]
        for i, sl in enumerate(whole):
            for pos, off in cuts.get(i, ()):
                if pos == sl.end_position:
                    ends_piece.add(i)
                elif pos > sl.start_position:
                    head, sl = _cut(sl, off, pos)
                    pieces[-1].append(head)
                    pieces.append([])
                elif pieces[-1]:
                    pieces.append([])
            pieces[-1].append(sl)
            if i in ends_piece:
                pieces.append([])
        return [p for p in pieces if p]

    async def archived_slices(
        self, topic: str, topic_id: uuid.UUID, partition: int, start: int, end: int
    ) -> list[SegmentSlice]:
        """Slices of the COPIED segments holding ``[start, end)`` from ``start`` on, up to
        the first offset the bucket does not hold (used when a broker no longer has them)."""
        m, _ = await self.manifests.load(topic, topic_id, partition)
        if m is None:
            return []
        out: list[SegmentSlice] = []
        expect = max(start, m.log_start_offset)
        for seg in await self._segments(m, expect, end):
            if seg.base_offset > expect:
                break
            out.append(await self._slice(seg, expect, end))
            expect = seg.last_offset + 1
        return out

    async def archived_aborted(
        self, topic: str, topic_id: uuid.UUID, partition: int, start: int, end: int
    ) -> tuple[AbortedTxn, ...]:
        """The aborted transactions overlapping ``[start, end)`` in the bucket (read_committed
        reads of slices from ``archived_slices``)."""
        m, _ = await self.manifests.load(topic, topic_id, partition)
        if m is None:
            return ()
        return await aborted_between(self.store, await self._segments(m, start, 1 << 62), start, end)

    async def _index(self, seg: RemoteSegment) -> RemoteOffsetIndex:
        if seg.index_size == 0:
            return RemoteOffsetIndex((), ())
        async with self._sem:
            data = await _get_part(self.store, seg.index_part(), f"offset index of segment {seg.base_offset}")
        return parse_offset_index(data, seg)

    async def _slice(self, seg: RemoteSegment, start: int, end: int) -> SegmentSlice:
        """The bytes of ``seg`` holding offsets ``[start, end)``: the whole object, or (when a
        bound falls inside the segment) from the last indexed batch at or below ``start``
        to the first indexed batch at or above ``end``."""
        lo = max(start, seg.base_offset)
        hi = min(end, seg.last_offset + 1)
        start_pos, end_pos = 0, seg.size
        if lo > seg.base_offset or hi <= seg.last_offset:
            index = await self._index(seg)
            if lo > seg.base_offset:
                fl = index.floor(lo)
                if fl is not None:
                    start_pos = fl[1]
            if hi <= seg.last_offset:
                ce = index.ceil(hi)
                if ce is not None:
                    end_pos = ce[1]
        return SegmentSlice(
            seg.keys.log,
            seg.base_offset,
            seg.last_offset,
            seg.size,
            start_pos,
            end_pos,
            lo,
            hi,
            seg.compacted,
        )

    # -- timestamps --

    async def _offset_for_timestamp(
        self, part: _Partition, log_start: int, latest: int, ts: int
    ) -> int | None:
        m = part.manifest
        if m is not None:
            for seg in await self._segments(m, log_start, latest, min_ts=ts):
                if seg.max_timestamp < ts:
                    continue
                found = await self._scan_segment_for_timestamp(part, seg, max(log_start, seg.base_offset), ts)
                if found is not None:
                    return found
        if self.options.include_hot and self.broker is not None:
            got = (await self._broker_offsets(part.topic, [part.partition], ts)).get(part.partition, -1)
            return None if got < 0 else got
        return None

    async def _scan_segment_for_timestamp(
        self, part: _Partition, seg: RemoteSegment, min_offset: int, ts: int
    ) -> int | None:
        """Kafka's lookup: start at the last time-index entry below ``ts``, then the first
        data batch whose max timestamp reaches ``ts``, then its first record that does."""
        pos = 0
        if seg.timeindex_size and seg.index_size:
            async with self._sem:
                raw = await _get_part(
                    self.store, seg.timeindex_part(), f"time index of segment {seg.base_offset}"
                )
            stamps, offsets = parse_time_index(raw, seg)
            i = bisect.bisect_left(stamps, ts) - 1
            if i >= 0:
                fl = (await self._index(seg)).floor(offsets[i])
                if fl is not None:
                    pos = fl[1]
        chunk = self.options.read_chunk_bytes
        buf = b""
        read_to = pos
        while read_to < seg.size:
            stop = min(read_to + chunk, seg.size)
            async with self._sem:
                data = await _get(
                    self.store,
                    seg.keys.log,
                    f"segment {seg.base_offset} of {part.topic}-{part.partition}",
                    start=read_to,
                    end=stop,
                )
            if len(data) != stop - read_to:
                raise CorruptLogError(
                    seg.keys.log,
                    read_to,
                    f"object ends after {read_to + len(data)} bytes, the manifest says {seg.size}",
                )
            read_to = stop
            buf = buf + data if buf else data
            try:
                fr = frame(buf)
                consumed = fr.consumed
                wanted = fr.data_batches()
                hits = wanted[(fr.max_timestamps[wanted] >= ts) & (fr.next_offsets[wanted] > min_offset)]
                for i in hits.tolist():
                    for rec in decode_batch(buf, int(fr.positions[i]), verify_crc=False).records:
                        if rec.offset >= min_offset and rec.timestamp >= ts:
                            return rec.offset
            except CorruptRecordError as e:
                raise CorruptLogError(
                    seg.keys.log, seg.base_offset, f"while resolving timestamp {ts}: {e}", what="offset"
                ) from None
            buf = buf[consumed:]
        if buf:
            raise CorruptLogError(seg.keys.log, seg.base_offset, "ends with a partial batch", what="offset")
        return None


def report_data_loss(options: ReadOptions, topic: str, partition: int, start: int, log_start: int) -> None:
    """Offsets ``[start, log_start)`` of a stream's next batch were deleted (retention, or
    the topic deleted) before it read them: fail, as Spark's Kafka source does, or with
    failOnDataLoss=false log a warning (the batch reads from ``log_start`` on)."""
    what = (
        f"{topic}-{partition}: offsets {start} to {log_start - 1} are not available any more "
        f"(the log now starts at offset {log_start})"
    )
    if options.fail_on_data_loss:
        raise OffsetOutOfRangeError(
            f"{what}. Some data may have been lost because they are not available any more; either "
            "the data was aged out by retention or the topic may have been deleted before all the "
            "data in the topic was processed. If you want your streaming query to skip such data "
            'instead of failing, set the source option "failOnDataLoss" to "false"'
        )
    logger.warning("%s; skipped (failOnDataLoss=false)", what)


def refused(broker: object, operation: str, topic: str) -> TopicAuthorizationFailedError:
    """includeHot against a broker whose ACLs do not let this principal at the topic."""
    return TopicAuthorizationFailedError(
        f"includeHot: broker {broker} refuses to let this principal {operation} topic {topic!r}"
        f" (an ACL must allow READ on it; see kafka.sasl.username)"
    )


class BrokerClient:
    """The two questions a plan asks a broker, over the project's blocking Kafka client.

    The Kafka protocol modules are imported here, when a broker is used, not with this
    module: Spark starts a fresh Python process for every streaming query's source, and a
    bucket-only stream then does not pay for importing the protocol's message registry."""

    def __init__(self, address: str, security: ClientSecurity | None = None) -> None:
        from kwire.address import HostPort

        self.address = HostPort.parse(address, setting="strata option broker")
        self.security = security

    def _client(self) -> KafkaClient:
        from kclient import KafkaClient

        try:
            return KafkaClient.connect(self.address, timeout=30.0, security=self.security)
        except OSError as e:
            raise StrataError(
                f"cannot reach broker {self.address} for includeHot: {e.strerror or e}"
            ) from None

    def topics(self) -> list[str]:
        """The names of the broker's topics, internal ones (``__consumer_offsets``...) left
        out as a Kafka consumer's pattern subscription leaves them out."""
        from kwire import ApiKey
        from kwire.messages.metadata import MetadataRequest

        with self._client() as client:
            md = client.call(ApiKey.METADATA, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        return [t.name for t in md.topics if not t.error_code and not t.is_internal and t.name]

    def partition_count(self, topic: str) -> int:
        with self._client() as client:
            try:
                return client.partition_count(topic)
            except UnknownTopicOrPartitionError:
                return 0
            except AuthorizationError:
                raise refused(self.address, "DESCRIBE", topic) from None

    def list_offsets(
        self, topic: str, partitions: list[int], timestamp: int, isolation_level: int = 0
    ) -> dict[int, int]:
        """Offset per partition for ListOffsets ``timestamp`` (-1 high watermark, or the
        last stable offset with ``isolation_level`` 1; -2 log start)."""
        from kwire import ApiKey
        from kwire.error_table import TOPIC_AUTHORIZATION_FAILED, error_for_code
        from kwire.messages.list_offsets import (
            ListOffsetsPartition,
            ListOffsetsRequest,
            ListOffsetsTopic,
        )

        if not partitions:
            return {}
        with self._client() as client:
            req = ListOffsetsRequest(
                isolation_level=isolation_level,
                topics=(
                    ListOffsetsTopic(
                        name=topic,
                        partitions=tuple(
                            ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in partitions
                        ),
                    ),
                ),
            )
            out: dict[int, int] = {}
            for t in client.call(ApiKey.LIST_OFFSETS, req).topics:
                for p in t.partitions:
                    if p.error_code == TOPIC_AUTHORIZATION_FAILED:
                        raise refused(self.address, "DESCRIBE", topic)
                    if p.error_code:
                        raise error_for_code(
                            p.error_code, f"ListOffsets {topic}-{p.partition_index}: error {p.error_code}"
                        )
                    out[p.partition_index] = p.offset
            return out


def plan_scan(
    options: ReadOptions,
    *,
    store: ObjectStore | None = None,
    broker: BrokerClient | None = None,
) -> ScanPlan:
    """Plan a scan (blocking). ``store`` defaults to ``open_store`` on the options' URL."""

    async def run() -> ScanPlan:
        s = store if store is not None else open_store_from(options.store)
        b = broker
        if options.include_hot and b is None:
            assert options.broker is not None
            b = BrokerClient(options.broker, options.security)
        try:
            return await Planner(options, s, b).plan()
        finally:
            if store is None:
                await s.close()

    return run_blocking(run)


def open_store_from(opts: StoreOptions) -> ObjectStore:
    """The object store the options name (S3 settings override the AWS chain)."""
    try:
        return open_store(
            opts.url,
            endpoint_url=opts.endpoint,
            region=opts.region,
            access_key=opts.access_key,
            secret_key=opts.secret_key,
        )
    except InvalidConfigError as e:
        raise InvalidConfigError(f"strata: {e}") from None


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run`` that also works when the calling thread already runs a loop (notebooks)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
