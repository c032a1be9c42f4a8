"""``spark.readStream.format("strata")``: micro-batches over the bucket and the hot tail.

    spark.readStream.format("strata").option("subscribe", "events")
        .option("kafka.bootstrap.servers", "broker:9092").load("s3://bucket/prefix")

Spark's Kafka source semantics, on Spark 4's Python streaming API (``DataSourceStreamReader``):

- The source offset is Spark's Kafka JSON, ``{"topic": {"0": 123}}``: per partition the next
  offset to read. Spark writes it to the checkpoint's offset log before a batch runs and
  hands it back on restart, so a restarted query resumes exactly after its last committed
  batch; ``partitions(start, end)`` plans exactly ``[start, end)`` per partition with
  ``spark.plan.Planner.plan_exact``, whichever tier holds the offsets when the batch runs:
  cold segments from the bucket, the rest through the broker (a hot task whose offsets
  were uploaded and deleted locally meanwhile reads them from the bucket: ``spark.scan``).
  Each offset is therefore read once, in order, by exactly one batch.
- ``initialOffset``: startingOffsets (``latest`` by default, as in Spark), startingTimestamp
  or startingOffsetsByTimestamp, resolved once per partition and journaled by Spark.
- ``latestOffset(start, limit)``: every selected partition's latest offset (the high
  watermark, or the last stable offset with read_committed, when a broker is configured;
  the archive's end otherwise), limited by maxOffsetsPerTrigger as Spark's
  ``KafkaMicroBatchStream.rateLimit`` splits it, or held back by minOffsetsPerTrigger until
  maxTriggerDelay passes. Partitions and topics that appear (new partitions, new topics
  matching subscribePattern) join at their earliest offset.
- ``prepareForTriggerAvailableNow`` fixes the latest offsets as the target: the query stops
  there, whatever arrives later.
- failOnDataLoss: offsets that retention deleted before a batch read them, partitions that
  disappeared, an offset that went backwards (topic recreated): fail with a message that
  names them, or (false) log a warning and read on.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from hot.errors import InvalidConfigError, OffsetOutOfRangeError
from spark.options import EARLIEST, LATEST, Bound, ReadOptions, TopicPartition
from spark.partition import StrataInputPartition
from spark.plan import BrokerClient, PartitionRange, Planner, ScanPlan, open_store_from, run_blocking

logger = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]

_LOSS_HINT = (
    "Some data may have been lost because they are not available any more; either the data was "
    "aged out by retention or the topic may have been deleted before all the data in the topic was "
    "processed. If you want your streaming query to skip such data instead of failing, set the "
    'source option "failOnDataLoss" to "false"'
)


# --- offsets (pure) ----------------------------------------------------------------------------


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka source offset: ``{"topic": {"0": 123}}``, topics and partitions sorted."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = int(off)
    return out


def from_json(doc: Mapping[str, Any], what: str = "offset") -> Offsets:
    """The inverse of ``to_json``; a malformed offset (a damaged checkpoint) is an error."""
    out: Offsets = {}
    if not isinstance(doc, Mapping):
        raise InvalidConfigError(f'strata: {what} {doc!r} is not a JSON object like {{"topic":{{"0":1}}}}')
    for topic, parts in doc.items():
        if not isinstance(parts, Mapping):
            raise InvalidConfigError(f"strata: {what}: the value of topic {topic!r} must be a JSON object")
        for p, off in parts.items():
            if not str(p).isdigit() or isinstance(off, bool) or not isinstance(off, int) or off < 0:
                raise InvalidConfigError(f"strata: {what}: {topic}-{p}: {off!r} is not an offset")
            out[(str(topic), int(p))] = off
    return out


def rate_limit(limit: int, start: Mapping[TopicPartition, int], until: Offsets) -> Offsets:
    """At most about ``limit`` offsets past ``start``, split over the partitions in
    proportion to their backlog (Spark's ``KafkaMicroBatchStream.rateLimit``: a partition's
    share is floored, or ceiled when below 1 so that small partitions never starve; the
    sum may then pass ``limit`` by less than the number of partitions)."""
    sizes = {tp: end - start[tp] for tp, end in until.items() if tp in start and end - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(until)
    out: Offsets = {}
    for tp, end in until.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        prorate = limit * (size / total)
        share = int(-(-prorate // 1)) if prorate < 1 else int(prorate)
        out[tp] = min(end, start[tp] + share)
    return out


@dataclasses.dataclass(slots=True)
class TriggerPacer:
    """minOffsetsPerTrigger / maxTriggerDelay as Spark's Kafka source applies them: a
    trigger with fewer new offsets than the minimum is skipped, unless maxTriggerDelay
    passed since the last batch (the first trigger of a source always runs)."""

    max_delay_ms: int
    clock: Callable[[], float] = time.time
    last_trigger_ms: float = 0.0

    def delay(self, backlog: int, minimum: int) -> bool:
        now = self.clock() * 1000
        if now - self.last_trigger_ms >= self.max_delay_ms or backlog >= minimum:
            self.last_trigger_ms = now
            return False
        return True


# --- the reader -------------------------------------------------------------------------------


class StrataStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark keeps one instance per query on the driver (offsets, planning) and ships it
    pickled to the executors for ``read``: it holds parsed options and plain values only."""

    def __init__(self, options: ReadOptions, *, clock: Callable[[], float] = time.time) -> None:
        self.options = options
        self._pacer = TriggerPacer(options.stream.max_trigger_delay_ms, clock)
        self._target: Offsets | None = None
        self._latest: Offsets | None = None
        self._absent: set[TopicPartition] = set()  # assigned partitions not created yet, warned
        self._tail_checked = False  # whether the bucket-behind warning (spark.tail) was given

    # -- offsets --

    def initialOffset(self) -> dict[str, Any]:
        o = dataclasses.replace(self.options, end=Bound(LATEST))
        return to_json({(r.topic, r.partition): r.start for r in self._ranges(o)})

    def getDefaultReadLimit(self) -> ReadLimit:
        s = self.options.stream
        if s.max_offsets is not None:
            return ReadMaxRows(s.max_offsets)
        if s.min_offsets is not None:
            return ReadMinRows(s.min_offsets)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: latest for tp, (_, latest) in self._available().items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json(start, "start offset")
        available = self._available()
        self._latest = {tp: latest for tp, (_, latest) in available.items()}
        gone = sorted(tp for tp in begin if tp not in available)
        if gone:
            names = ", ".join(f"{t}-{p}" for t, p in gone)
            self._loss(f"partitions {names} are gone (topic deleted?)")
        if self._target is not None:
            target = self._target
            available = {tp: (ls, min(lt, target[tp])) for tp, (ls, lt) in available.items() if tp in target}
        until = {tp: latest for tp, (_, latest) in available.items()}
        origin = {tp: begin.get(tp, log_start) for tp, (log_start, _) in available.items()}
        max_rows, min_rows = self._limits(limit)
        if min_rows is not None and self._target is None:
            backlog = sum(max(0, until[tp] - origin[tp]) for tp in until)
            if self._pacer.delay(backlog, min_rows):
                return start
        if max_rows is not None:
            until = rate_limit(max_rows, origin, until)
        # partitions outside an availableNow target (added before a restart) stay where they are
        kept = {tp: off for tp, off in begin.items() if tp not in until and tp not in gone}
        return to_json({**kept, **until})

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else to_json(self._latest)

    def _limits(self, limit: ReadLimit) -> tuple[int | None, int | None]:
        """(max, min) offsets of this trigger: the engine's limit rules (ReadAllAvailable,
        e.g. Trigger.Once, ignores the options); the default limit stands for both options,
        as Spark's Kafka source's composite limit does."""
        s = self.options.stream
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows, s.min_offsets
        if isinstance(limit, ReadMinRows):
            return s.max_offsets, limit.min_rows
        return None, None

    def _available(self) -> dict[TopicPartition, tuple[int, int]]:
        """(log start, latest offset) of every selected partition now."""
        o = dataclasses.replace(self.options, start=Bound(EARLIEST), end=Bound(LATEST))
        ranges = self._ranges(o)
        if not self._tail_checked:
            # once per query: a bucket-only stream waits for the tiering, say so (spark.tail)
            self._tail_checked = True
            if not self.options.include_hot:
                from spark.tail import warn_unarchived

                warn_unarchived(ranges, self.options.broker, self.options.security)
        return {(r.topic, r.partition): (r.start, r.end) for r in ranges}

    def _ranges(self, options: ReadOptions) -> list[PartitionRange]:
        """``_ranges``, with a warning when assigned partitions are missing: never silent."""
        absent: list[TopicPartition] = []
        out = _ranges(options, absent)
        new = sorted(set(absent) - self._absent)
        if new:
            names = ", ".join(f"{t}-{p}" for t, p in new)
            logger.warning(
                "assigned partitions %s do not exist (yet): the stream reads them from their "
                "earliest offset once they are created",
                names,
            )
        self._absent = set(absent)
        return out

    def _loss(self, what: str) -> None:
        if self.options.fail_on_data_loss:
            raise OffsetOutOfRangeError(f"strata: {what}. {_LOSS_HINT}")
        logger.warning("%s; skipped (failOnDataLoss=false)", what)

    # -- batches --

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:

        lo, hi = from_json(start, "start offset"), from_json(end, "end offset")
        ranges: dict[TopicPartition, tuple[int, int]] = {}
        for tp, stop in hi.items():
            first = lo.get(tp, 0)  # a partition new to the stream: from its beginning
            if stop < first:
                self._loss(f"{tp[0]}-{tp[1]}: the offset went back from {first} to {stop} (topic recreated?)")
            elif stop > first:
                ranges[tp] = (first, stop)
        if not ranges:
            return []
        return [StrataInputPartition(t) for t in plan_batch(self.options, ranges).tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from spark.scan import read_task  # in the executors' workers, not the driver's source process

        return read_task(getattr(partition, "task", None), self.options)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the offsets live in Spark's checkpoint, not in the broker."""


def _planner_call(
    options: ReadOptions, call: Callable[[Planner], Any], absent: list[TopicPartition] | None = None
) -> Any:
    async def run() -> Any:
        store = open_store_from(options.store)
        broker = (
            BrokerClient(options.broker, options.security) if options.include_hot and options.broker else None
        )
        try:
            return await call(Planner(options, store, broker, absent=absent))
        finally:
            await store.close()

    return run_blocking(run)


def _ranges(options: ReadOptions, absent: list[TopicPartition]) -> list[PartitionRange]:
    """The resolved ranges of the selected partitions. A subscribed topic that does not
    exist yet has none (the stream picks it up when it appears); assigned partitions that
    do not exist (yet) are added to ``absent`` (an assigned topic that does not exist at all
    fails, as Spark's Kafka source fails to describe it)."""

    async def each(planner: Planner) -> list[PartitionRange]:
        return list(await planner.ranges())

    result: list[PartitionRange] = _planner_call(options, each, absent)
    return result


def plan_batch(options: ReadOptions, ranges: Mapping[TopicPartition, tuple[int, int]]) -> ScanPlan:
    """The tasks of one micro-batch: exactly offsets ``[start, end)`` of each partition."""

    async def plan(planner: Planner) -> ScanPlan:
        return await planner.plan_exact(ranges)

    result: ScanPlan = _planner_call(options, plan)
    return result


__all__ = ["StrataStreamReader", "TriggerPacer", "from_json", "plan_batch", "rate_limit", "to_json"]
