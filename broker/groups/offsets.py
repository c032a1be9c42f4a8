"""Durable committed offsets: an internal log compacted by key, as Kafka's ``__consumer_offsets``.

Directory ``<data_dir>/__consumer_offsets-0/``: one ``hot.log.Log`` (segments, indexes,
``recovery-point``, ``log-start-offset``; layout and crash recovery in hot.log). It is
not a topic: it is not in the topic registry, clients never see it, it is never tiered,
and the LogManager does not look at it (it lives outside ``<data_dir>/logs``). The data
directory's lock (held by the LogManager) covers it.

Records are uncompressed v2 batches whose keys and values are Kafka's own
``__consumer_offsets`` schemas (broker.groups.offsets_codec): key (group, topic, partition)
-> (offset, leader epoch, metadata, commit timestamp[, expire timestamp]), key (group)
-> group metadata (protocol type, generation, protocol, leader, state timestamp). A null
value is a tombstone (DeleteGroups, OffsetDelete, expiry, topic deletion). The latest
record of a key wins; opening the log replays every record from the log start offset to
the end to rebuild the maps.

Durability: a write is appended at once (so log order is call order) and its future
completes when the log's high watermark passes it, i.e. when it is durable per the
broker's flush mode (``fsync``: after the group-commit fsync; ``interval``: at append,
as in Kafka). Reads (``committed``, ``group_metadata``) show only what is durable, applied
in log order; the log-order state including writes still in flight is what compaction
dumps and what ``has_offsets`` answers from.

Compaction: when the log holds more than ``max(segment_bytes, 2 x live bytes)``, the
active segment is rolled, every live key's latest record is appended again (the dump),
the dump is fsynced, the log start offset is advanced to the dump's first offset, and the
segments below it are deleted. The dump is appended in one synchronous step on the event
loop, so no other write can land inside it. Crash safety:

* before the log start offset moved (its file is replaced atomically), replay starts at the
  old log start: the records before the dump rebuild the state, and each dump record (whole
  or cut short by a torn tail, which recovery truncates) restates a key's value as of the
  dump, which is the value the replay has already reached there, so the state is the same;
* after it moved, the dump is on disk in full (fsynced first) and holds every live key, and
  the records after it are newer;
* segments entirely below the log start offset are ignored by the replay and deleted at the
  next open or compaction.

In cluster mode the offsets live in the replicated ``__consumer_offsets`` topic instead
(``broker.groups.replicated_offsets``), which reuses these records, the replay and the same compaction, done
by each partition's leader through the replicated write path (``broker.coordinator_runtime``, where the
batch building and the replay's reader live, not being about groups).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from concurrent.futures import Future
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from broker.coordinator_runtime.records import RECORD_OVERHEAD, read_records
from broker.coordinator_runtime.records import build_batches as build_record_batches
from broker.groups.consumer_records import (
    ConsumerKey,
    ConsumerValue,
    decode_consumer_value,
    encode_consumer_value,
)
from broker.groups.offsets_codec import (
    GroupKey,
    OffsetKey,
    RecordKey,
    decode_group,
    decode_key,
    decode_offset,
    encode_group,
    encode_key,
    encode_offset,
)
from broker.groups.types import OffsetAndMetadata, StoredGroup, TopicPartition
from hot.config import FLUSH_FSYNC, INT32_MAX, LogConfig
from hot.errors import (
    CoordinatorNotAvailableError,
    StorageError,
    StrataError,
)
from hot.flush import GroupCommitter, IntervalFlusher
from hot.log import Log

logger = logging.getLogger(__name__)

OFFSETS_TOPIC: Final = "__consumer_offsets"
OFFSETS_DIR: Final = f"{OFFSETS_TOPIC}-0"
DEFAULT_SEGMENT_BYTES: Final = 16 * 1024 * 1024

Value = OffsetAndMetadata | StoredGroup | ConsumerValue
# (key, encoded key, encoded value or None for a tombstone, decoded value or None)
Op = tuple[RecordKey, bytes, bytes | None, Value | None]


class OffsetStore(Protocol):
    """Where a group coordinator keeps committed offsets and group metadata: ``OffsetsLog``
    on a single node, ``broker.groups.replicated_offsets.ClusterOffsetStore`` (the replicated
    ``__consumer_offsets`` topic) in cluster mode. Every method runs on the
    event loop. Writes are appended when called, in call order, and return a future that
    completes once they are durable (and visible to the readers) or fails with a
    StrataError; readers show durable state only."""

    def groups(self) -> Set[str]:
        """Groups with durable offsets or metadata."""
        ...

    def group_metadata(self, group: str) -> StoredGroup | None: ...

    def committed(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]: ...

    def has_offsets(self, group: str) -> bool:
        """Whether the group has offsets, counting writes not yet durable."""
        ...

    def commit(
        self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> asyncio.Future[None]: ...

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> asyncio.Future[None]: ...

    def delete_group(self, group: str) -> asyncio.Future[None]:
        """Tombstones for the group's metadata and every offset it has."""
        ...

    def store_group(self, group: str, value: StoredGroup) -> asyncio.Future[None]: ...

    def delete_topic(self, topic: str) -> asyncio.Future[None]:
        """Tombstones for every group's offsets of ``topic`` (the topic was deleted)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class TransactionalOffsetStore(OffsetStore, Protocol):
    """An OffsetStore that also keeps transactional offsets (TxnOffsetCommit, KIP-447):
    the replicated ``__consumer_offsets`` topic (broker.groups.replicated_offsets). The
    single-node ``OffsetsLog`` (kept for its tests) does not."""

    def commit_transactional(
        self, group: str, producer: tuple[int, int], offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> asyncio.Future[None]:
        """One transactional batch of ``producer`` (id, epoch); pending once durable."""
        ...

    def pending_transactional(self, group: str) -> Set[TopicPartition]:
        """The group's partitions with a durable transactional offset still pending."""
        ...

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's marker in offsets partition ``partition`` was acknowledged."""
        ...


@runtime_checkable
class ConsumerGroupStore(Protocol):
    """An OffsetStore that also keeps KIP-848 consumer groups' records (the replicated
    ``__consumer_offsets`` topic); topics are named by id in them."""

    def write_consumer(
        self, group: str, items: list[tuple[ConsumerKey, ConsumerValue | None]]
    ) -> asyncio.Future[None]: ...

    def topic_id(self, name: str) -> uuid.UUID | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...


def offsets_log_config(defaults: LogConfig | None, segment_bytes: int) -> LogConfig:
    """The internal log's configuration: the broker's flush policy, no time or size
    retention (compaction moves the log start), no size limit on our own batches."""
    base = defaults if defaults is not None else LogConfig()
    return LogConfig(
        segment_bytes=segment_bytes,
        retention_ms=-1,
        retention_bytes=-1,
        max_message_bytes=INT32_MAX,
        index_interval_bytes=base.index_interval_bytes,
        flush_mode=base.flush_mode,
        flush_messages=base.flush_messages,
        flush_ms=base.flush_ms,
        cleanup_policy="compact",
        remote_storage_enable=False,
    )


def encode_ops(items: Iterable[tuple[RecordKey, Value | None]]) -> list[Op]:
    """(key, value or None for a tombstone) pairs with their encoded forms."""
    ops: list[Op] = []
    for key, value in items:
        raw: bytes | None = None
        if isinstance(value, OffsetAndMetadata):
            raw = encode_offset(value)
        elif isinstance(value, StoredGroup):
            raw = encode_group(value)
        elif value is not None:
            raw = encode_consumer_value(value)
        ops.append((key, encode_key(key), raw, value))
    return ops


def build_batches(ops: Iterable[Op], now_ms: int) -> bytearray:
    """Uncompressed v2 batches of the ops' records (broker.coordinator_runtime.records)."""
    return build_record_batches(((k, v) for _, k, v, _ in ops), now_ms)


def decode_op(key_bytes: bytes, raw: bytes | None) -> Op:
    """A record of the offsets log as an op; OffsetRecordError when it does not parse."""
    key = decode_key(key_bytes)
    value: Value | None = None
    if raw is not None:
        if isinstance(key, ConsumerKey):
            value = decode_consumer_value(key.kind, raw)
        else:
            value = decode_offset(raw) if isinstance(key, OffsetKey) else decode_group(raw)
    return (key, key_bytes, raw, value)


def read_ops(log: Log, start: int, end: int) -> Iterator[list[Op]]:
    """The records of ``log`` in [``start``, ``end``) as decoded ops, in log order, a read
    chunk at a time (replay: here at open, in cluster mode when a broker takes the lead of
    an offsets partition). CorruptLogError for a batch or record that does not parse."""
    return read_records(log, start, end, decode_op, what="offset")


class OffsetsLog:
    """The OffsetStore of a single node (file layout, record format, durability and
    compaction: module docstring). Not thread-safe: use it from one event loop."""

    def __init__(
        self,
        log: Log,
        committer: GroupCommitter,
        interval: IntervalFlusher | None,
        *,
        compact_min_bytes: int,
        now_ms: Callable[[], int],
    ) -> None:
        self._log = log
        self._committer = committer
        self._interval = interval
        self._compact_min_bytes = compact_min_bytes
        self._now_ms = now_ms
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        # Log-order state, writes in flight included (what a replay would rebuild).
        self._latest: dict[RecordKey, bytes] = {}
        self._live_bytes = 0
        self._keys_by_group: dict[str, set[OffsetKey]] = {}
        # Durable state, what readers see.
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._groups: dict[str, StoredGroup] = {}
        # Writes appended but not yet durable: (end offset, ops), in log order.
        self._pending: deque[tuple[int, list[Op]]] = deque()
        self._compaction: asyncio.Task[None] | None = None
        self.compactions = 0
        log.add_hw_listener(self._on_hw)

    # --- opening ----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        data_dir: str | Path,
        defaults: LogConfig | None = None,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        now_ms: Callable[[], int] | None = None,
    ) -> OffsetsLog:
        """Open (creating if needed) ``<data_dir>/__consumer_offsets-0`` and replay it.
        CorruptLogError if the log cannot be recovered or holds a record that does not
        parse; StorageError for I/O failures."""
        import time

        config = offsets_log_config(defaults, segment_bytes)
        committer = GroupCommitter(name="strata-offsets-commit")
        interval: IntervalFlusher | None = None
        try:
            log = Log.open(
                Path(data_dir) / OFFSETS_DIR,
                config,
                topic=OFFSETS_TOPIC,
                partition=0,
                flusher=committer,
                clean_shutdown=False,  # the recovery point makes a clean reopen cheap anyway
            )
        except BaseException:
            committer.close()
            raise
        if config.flush_mode != FLUSH_FSYNC:
            interval = IntervalFlusher(lambda: [log], name="strata-offsets-flush")
        store = cls(
            log,
            committer,
            interval,
            compact_min_bytes=segment_bytes,
            now_ms=now_ms or (lambda: time.time_ns() // 1_000_000),
        )
        try:
            store._replay()
            log.apply_retention()  # segments a crash left below the log start offset
        except BaseException:
            store.close(clean=False)
            raise
        return store

    def _replay(self) -> None:
        log = self._log
        end = log.log_end_offset
        for ops in read_ops(log, log.log_start_offset, end):
            for op in ops:
                self._apply_latest(op)
                self._apply_durable(op)
        logger.info(
            "offsets log loaded: %d groups, %d live keys, offsets [%d, %d)",
            len(self.groups()),
            len(self._latest),
            log.log_start_offset,
            end,
        )

    # --- reading ------------------------------------------------------------------------------

    def groups(self) -> Set[str]:
        return self._offsets.keys() | self._groups.keys()

    def group_metadata(self, group: str) -> StoredGroup | None:
        return self._groups.get(group)

    def committed(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._offsets.get(group, {}))

    def has_offsets(self, group: str) -> bool:
        return bool(self._keys_by_group.get(group))

    @property
    def log(self) -> Log:
        return self._log

    @property
    def live_bytes(self) -> int:
        """Approximate size of a dump of every live key (the compaction yardstick)."""
        return self._live_bytes

    # --- writing ------------------------------------------------------------------------------

    def commit(self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> asyncio.Future[None]:
        return self._write([(OffsetKey(group, tp.topic, tp.partition), v) for tp, v in offsets.items()])

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> asyncio.Future[None]:
        keys = self._keys_by_group.get(group, set())
        doomed = [k for tp in partitions if (k := OffsetKey(group, tp.topic, tp.partition)) in keys]
        return self._write([(k, None) for k in doomed])

    def delete_group(self, group: str) -> asyncio.Future[None]:
        ops: list[tuple[RecordKey, Value | None]] = [
            (k, None) for k in sorted(self._keys_by_group.get(group, ()))
        ]
        if GroupKey(group) in self._latest:
            ops.append((GroupKey(group), None))
        return self._write(ops)

    def store_group(self, group: str, value: StoredGroup) -> asyncio.Future[None]:
        return self._write([(GroupKey(group), value)])

    def delete_topic(self, topic: str) -> asyncio.Future[None]:
        doomed = [k for keys in self._keys_by_group.values() for k in keys if k.topic == topic]
        return self._write([(k, None) for k in sorted(doomed)])

    def _write(self, items: list[tuple[RecordKey, Value | None]]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self._loop = loop
        if self._closed:
            raise CoordinatorNotAvailableError("the offsets log is closed")
        ops = encode_ops(items)
        fut: asyncio.Future[None] = loop.create_future()
        if not ops:
            fut.set_result(None)
            return fut
        self._append(ops, fut)
        self._maybe_compact()
        return fut

    def _append(self, ops: list[Op], fut: asyncio.Future[None], *, restate: bool = False) -> None:
        """Append ``ops`` now; ``fut`` completes when they are durable. ``restate``: a
        compaction dump, which changes no state."""
        data = build_batches(ops, self._now_ms())
        try:
            info = self._log.append(data)
        except StorageError as e:
            raise CoordinatorNotAvailableError(f"the offsets log is unavailable: {e}") from e
        end = info.last_offset + 1
        if not restate:
            for op in ops:
                self._apply_latest(op)
        self._pending.append((end, [] if restate else ops))
        loop = asyncio.get_running_loop()
        hw = self._log.high_watermark_future(end)

        def done(f: Future[None]) -> None:
            try:
                loop.call_soon_threadsafe(self._settle, f, fut)
            except RuntimeError:
                pass  # the loop is gone (shutdown)

        hw.add_done_callback(done)

    def _settle(self, hw: Future[None], fut: asyncio.Future[None]) -> None:
        self._drain()
        if fut.done():
            return
        exc = hw.exception()
        if exc is None:
            fut.set_result(None)
        else:
            fut.set_exception(CoordinatorNotAvailableError(f"offsets not durable: {exc}"))

    def _on_hw(self, log: Log) -> None:
        # Any thread (the flusher's): hop onto the loop.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                pass

    def _drain(self) -> None:
        hw = self._log.high_watermark
        while self._pending and self._pending[0][0] <= hw:
            for op in self._pending.popleft()[1]:
                self._apply_durable(op)

    def _apply_latest(self, op: Op) -> None:
        key, k, v, _ = op
        old = self._latest.pop(key, None)
        if old is not None:
            self._live_bytes -= len(k) + len(old) + RECORD_OVERHEAD
        if isinstance(key, OffsetKey):
            keys = self._keys_by_group.setdefault(key.group, set())
            if v is None:
                keys.discard(key)
                if not keys:
                    del self._keys_by_group[key.group]
            else:
                keys.add(key)
        if v is not None:
            self._latest[key] = v
            self._live_bytes += len(k) + len(v) + RECORD_OVERHEAD

    def _apply_durable(self, op: Op) -> None:
        key, _, _, value = op
        if isinstance(key, OffsetKey):
            if isinstance(value, OffsetAndMetadata):
                self._offsets.setdefault(key.group, {})[key.topic_partition] = value
            else:
                offsets = self._offsets.get(key.group)
                if offsets is not None:
                    offsets.pop(key.topic_partition, None)
                    if not offsets:
                        del self._offsets[key.group]
        elif isinstance(value, StoredGroup):
            self._groups[key.group] = value
        elif isinstance(key, GroupKey):
            self._groups.pop(key.group, None)
        # A KIP-848 group's records (ConsumerKey) are the cluster store's: kept in the
        # log-order state (compaction restates them), not read here.

    # --- compaction ---------------------------------------------------------------------------

    def _maybe_compact(self) -> None:
        if self._compaction is not None or self._closed:
            return
        if self._log.size <= max(self._compact_min_bytes, 2 * self._live_bytes):
            return
        task = asyncio.get_running_loop().create_task(self.compact(), name="strata-offsets-compaction")
        self._compaction = task

        def finished(t: asyncio.Task[None]) -> None:
            self._compaction = None
            if not t.cancelled() and t.exception() is not None:
                logger.error("compaction of the offsets log failed: %s", t.exception())

        task.add_done_callback(finished)

    async def compact(self) -> None:
        """Rewrite the live keys at the end of the log and drop everything before them
        (crash safety: module docstring). Runs by itself when the log grows; callable
        directly (tests, tools)."""
        log = self._log
        loop = asyncio.get_running_loop()
        self._loop = loop
        before = log.size
        try:
            # From here to the append nothing awaits: no write can land inside the dump.
            log.roll()
            start = log.log_end_offset
            fut: asyncio.Future[None] = loop.create_future()
            ops: list[Op] = [(key, encode_key(key), v, None) for key, v in self._latest.items()]
            if ops:
                self._append(ops, fut, restate=True)
            else:
                fut.set_result(None)
            await asyncio.to_thread(log.flush)  # durable whatever the flush mode
            await fut
            await asyncio.to_thread(log.advance_log_start_offset, start)
            await asyncio.to_thread(log.apply_retention)
        except StorageError as e:
            raise CoordinatorNotAvailableError(f"compaction of the offsets log failed: {e}") from e
        self.compactions += 1
        logger.info(
            "compacted the offsets log: %d live keys, %d -> %d bytes, log start offset %d",
            len(ops),
            before,
            log.size,
            start,
        )

    # --- closing ------------------------------------------------------------------------------

    def close(self, clean: bool = True) -> None:
        """Flush (when ``clean``) and close the log; writes still waiting fail. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._compaction is not None:
            self._compaction.cancel()
        try:
            if self._interval is not None:
                self._interval.close()
            if not clean:
                self._log.close(clean=False)
            self._committer.close()
        finally:
            try:
                self._log.close(clean=clean)
            except StrataError as e:
                logger.error("closing the offsets log failed: %s", e)
