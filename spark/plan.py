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
import struct
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from hot.errors import (
    CorruptLogError,
    CorruptRecordError,
    InvalidConfigError,
    ObjectNotFoundError,
    StrataError,
    UnknownTopicOrPartitionError,
)
from hot.records import decode_batch
from spark.columnar import frame
from spark.options import ReadOptions, StoreOptions, TopicPartition
from tiering.manifest import ManifestStore, PartitionManifest, RemoteSegment, SegmentState
from tiering.store import InvalidRangeError, ObjectStore, open_store

INDEX_ENTRY: Final = struct.Struct(">II")
TIMEINDEX_ENTRY: Final = struct.Struct(">qI")
_CONCURRENCY: Final = 16
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

    @property
    def length(self) -> int:
        return self.end_position - self.start_position


@dataclass(frozen=True, slots=True)
class ColdTask:
    """Consecutive slices of one partition, read from the bucket by one Spark task."""

    topic: str
    partition: int
    slices: tuple[SegmentSlice, ...]

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


def split_positions(
    index: RemoteOffsetIndex, start_pos: int, end_pos: int, target: int
) -> list[tuple[int, int]]:
    """Index entries (offset, position) cutting ``(start_pos, end_pos)`` into pieces of at
    most about ``target`` bytes and of nearly equal size (equal pieces keep Spark's task
    waves even): the entry nearest each ideal cut, strictly increasing."""
    pieces = -(-(end_pos - start_pos) // target)
    if pieces <= 1:
        return []
    positions = index.positions
    cuts: list[tuple[int, int]] = []
    last = start_pos
    for i in range(1, pieces):
        ideal = start_pos + (end_pos - start_pos) * i // pieces
        j = bisect.bisect_left(positions, ideal)
        best = None
        for k in (j - 1, j):
            if (0 <= k < len(positions) and last < positions[k] < end_pos) and (
                best is None or abs(positions[k] - ideal) < abs(positions[best] - ideal)
            ):
                best = k
        if best is not None:
            cuts.append((index.offsets[best], positions[best]))
            last = positions[best]
    return cuts


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


class Planner:
    """Builds a ScanPlan from the bucket (and, for includeHot, ``broker``: a BrokerClient)."""

    def __init__(self, options: ReadOptions, store: ObjectStore, broker: BrokerClient | None = None) -> None:
        self.options = options
        self.store = store
        self.manifests = ManifestStore(store)
        self.broker = broker
        self._sem = asyncio.Semaphore(_CONCURRENCY)

    async def plan(self) -> ScanPlan:
        o = self.options
        parts: list[_Partition] = []
        for topic in o.topics:
            parts.extend(await self._partitions_of(topic))
        hw: dict[TopicPartition, int] = {}
        broker_start: dict[TopicPartition, int] = {}
        if o.include_hot:
            assert self.broker is not None
            for topic in o.topics:
                nums = [p.partition for p in parts if p.topic == topic]
                hw.update({(topic, p): v for p, v in (await self._broker_offsets(topic, nums, -1)).items()})
                broker_start.update(
                    {(topic, p): v for p, v in (await self._broker_offsets(topic, nums, -2)).items()}
                )
        resolved = await asyncio.gather(*(self._resolve(p, hw, broker_start) for p in parts))
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
        return await asyncio.to_thread(broker.list_offsets, topic, list(partitions), ts)

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
            if count == 0:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} is neither archived in {self.store.url} nor known to broker {o.broker}"
                )
        elif doc is None:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no topic manifest topics/{topic}.json in {self.store.url}: "
                "nothing of it is archived there (check the URL and topic, or use includeHot)"
            )
        nums = list(range(count))
        if o.partitions is not None:
            missing = sorted(o.partitions - set(nums))
            if missing:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} has {count} partition(s); partition(s) {missing} do not exist"
                )
            nums = sorted(o.partitions)
        for b, name in ((o.start, "starting"), (o.end, "ending")):
            for t, p in b.named_partitions():
                if t == topic and p >= count:
                    raise UnknownTopicOrPartitionError(
                        f"{name} offsets name {topic}-{p}, but topic {topic!r} has {count} partition(s)"
                    )

        async def load(p: int) -> _Partition:
            if topic_id is None:
                return _Partition(topic, None, p, None)
            async with self._sem:
                m, _ = await self.manifests.load(topic, topic_id, p)
            return _Partition(topic, topic_id, p, m)

        return list(await asyncio.gather(*(load(p) for p in nums)))

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
        self, part: _Partition, hw: dict[TopicPartition, int], broker_start: dict[TopicPartition, int]
    ) -> _Resolved:
        """The partition's offset range and the archived segments overlapping it."""
        o = self.options
        tp = (part.topic, part.partition)
        m = part.manifest
        log_start = m.log_start_offset if m is not None else 0
        archived_end = m.next_offset() if m is not None else 0
        if tp in broker_start:
            log_start = max(log_start, broker_start[tp]) if m is not None else broker_start[tp]
        latest = max(hw.get(tp, archived_end), log_start)

        async def resolve(kind: str, value: int) -> int:
            if kind == "earliest":
                return log_start
            if kind == "latest":
                return latest
            if kind == "offset":
                return min(max(value, log_start), latest)
            found = await self._offset_for_timestamp(part, log_start, latest, value)
            return latest if found is None else min(max(found, log_start), latest)

        start = await resolve(*o.start.for_partition(tp))
        end = max(start, await resolve(*o.end.for_partition(tp)))
        segs = await self._segments(m, start, end) if m is not None and start < end else []
        rng = PartitionRange(part.topic, part.partition, start, end, archived_end, hw.get(tp))
        return _Resolved(part, rng, tuple(segs))

    async def _tasks(self, r: _Resolved, split: int) -> list[ScanTask]:
        """Cold tasks for the archived segments, hot tasks for the gaps (includeHot only)."""
        o = self.options
        part, start, end = r.part, r.range.start, r.range.end
        slices = await asyncio.gather(*(self._slices(s, start, end, split) for s in r.segments))
        tasks = self._pack(part, [sl for group in slices for sl in group])
        if o.include_hot and start < end:
            assert o.broker is not None
            pos = start
            for lo, hi in [*((s.base_offset, s.last_offset + 1) for s in r.segments), (end, end)]:
                if lo > pos:
                    topic_id = part.topic_id.hex if part.topic_id else None
                    tasks.append(HotTask(part.topic, part.partition, pos, min(lo, end), o.broker, topic_id))
                pos = max(pos, hi)
                if pos >= end:
                    break
        return tasks

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
            out.extend(await self._slices(seg, expect, end, self.options.max_partition_bytes))
            expect = seg.last_offset + 1
        return out

    def _pack(self, part: _Partition, slices: list[SegmentSlice]) -> list[ScanTask]:
        limit = self.options.min_partition_bytes
        tasks: list[ScanTask] = []
        group: list[SegmentSlice] = []
        size = 0
        for sl in slices:
            if group and size + sl.length > limit:
                tasks.append(ColdTask(part.topic, part.partition, tuple(group)))
                group, size = [], 0
            group.append(sl)
            size += sl.length
        if group:
            tasks.append(ColdTask(part.topic, part.partition, tuple(group)))
        return tasks

    async def _index(self, seg: RemoteSegment) -> RemoteOffsetIndex:
        if seg.index_size == 0:
            return RemoteOffsetIndex((), ())
        async with self._sem:
            data = await _get(self.store, seg.keys.index, f"offset index of segment {seg.base_offset}")
        return parse_offset_index(data, seg)

    async def _slices(self, seg: RemoteSegment, start: int, end: int, split: int) -> list[SegmentSlice]:
        lo = max(start, seg.base_offset)
        hi = min(end, seg.last_offset + 1)
        start_pos, end_pos = 0, seg.size
        first_off = lo
        inside = lo > seg.base_offset or hi <= seg.last_offset
        if not inside and seg.size <= split:
            return [
                SegmentSlice(seg.keys.log, seg.base_offset, seg.last_offset, seg.size, 0, seg.size, lo, hi)
            ]
        index = await self._index(seg)
        if lo > seg.base_offset:
            fl = index.floor(lo)
            if fl is not None:
                start_pos = fl[1]
        if hi <= seg.last_offset:
            ce = index.ceil(hi)
            if ce is not None:
                end_pos = ce[1]
        out: list[SegmentSlice] = []
        pos, off = start_pos, first_off
        for cut_off, cut_pos in split_positions(index, start_pos, end_pos, split):
            if cut_off <= off:
                continue
            out.append(
                SegmentSlice(
                    seg.keys.log, seg.base_offset, seg.last_offset, seg.size, pos, cut_pos, off, cut_off
                )
            )
            pos, off = cut_pos, cut_off
        out.append(
            SegmentSlice(seg.keys.log, seg.base_offset, seg.last_offset, seg.size, pos, end_pos, off, hi)
        )
        return out

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
                raw = await _get(self.store, seg.keys.timeindex, f"time index of segment {seg.base_offset}")
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


class BrokerClient:
    """The two questions a plan asks a broker, over the project's blocking Kafka client."""

    def __init__(self, address: str) -> None:
        from api.config import HostPort

        self.address = HostPort.parse(address, setting="strata option broker")

    def _client(self) -> object:
        from api.client import KafkaClient

        try:
            return KafkaClient.connect(self.address, timeout=30.0)
        except OSError as e:
            raise StrataError(
                f"cannot reach broker {self.address} for includeHot: {e.strerror or e}"
            ) from None

    def partition_count(self, topic: str) -> int:
        from api.client import KafkaClient

        client = self._client()
        assert isinstance(client, KafkaClient)
        with client:
            try:
                return len(client.describe_topic(topic)["partitions"])
            except UnknownTopicOrPartitionError:
                return 0

    def list_offsets(self, topic: str, partitions: list[int], timestamp: int) -> dict[int, int]:
        """Offset per partition for ListOffsets ``timestamp`` (-1 high watermark, -2 log start)."""
        from api.client import KafkaClient
        from api.protocol import ApiKey
        from api.protocol.messages.list_offsets import (
            ListOffsetsPartition,
            ListOffsetsRequest,
            ListOffsetsTopic,
        )
        from hot.errors import error_for_code

        if not partitions:
            return {}
        client = self._client()
        assert isinstance(client, KafkaClient)
        with client:
            req = ListOffsetsRequest(
                topics=(
                    ListOffsetsTopic(
                        name=topic,
                        partitions=tuple(
                            ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in partitions
                        ),
                    ),
                )
            )
            out: dict[int, int] = {}
            for t in client.call(ApiKey.LIST_OFFSETS, req).topics:
                for p in t.partitions:
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
            b = BrokerClient(options.broker)
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
