"""The records of a coordinator state topic, and which partition a key belongs to.

A coordinator writes (key bytes, value bytes or None) records: None is a tombstone, the
latest record of a key wins. They travel in uncompressed v2 batches without producer id
(``hot.records.build_batch``: base timestamp the append's wall clock, every record at
timestamp delta 0, no headers), cut at about 1 MiB so one batch stays far below the
topic's ``max.message.bytes``. What the keys and values mean is the coordinator's (the
group coordinator's are Kafka's ``__consumer_offsets`` schemas, broker.groups.offsets_codec).

A transactional write (the group coordinator's TxnOffsetCommit) is one uncompressed v2
batch carrying the producer's id and epoch, base sequence -1 (NO_SEQUENCE) and the
transactional bit, as Kafka's coordinator writes it (origin COORDINATOR); the
transaction's COMMIT or ABORT marker (a control batch) follows later in the same log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from hot.errors import CorruptLogError, CorruptRecordError, StrataError
from hot.log import Log
from hot.records import RecordInput, build_batch, decode_batches
from hot.txn_marker import EndTxnMarker

T = TypeVar("T")

BATCH_BYTES: Final = 1 << 20  # records per batch up to about this size
RECORD_OVERHEAD: Final = 16  # varints and attributes of one record, roughly
REPLAY_READ_BYTES: Final = 4 << 20

# (key, value or None for a tombstone), as written to the log.
StateRecord = tuple[bytes, bytes | None]


def record_size(key: bytes, value: bytes | None) -> int:
    """About what one record takes in a batch (batch cutting, live-bytes accounting)."""
    return len(key) + (len(value) if value is not None else 0) + RECORD_OVERHEAD


def build_batches(records: Iterable[StateRecord], now_ms: int) -> bytearray:
    """Uncompressed v2 batches of ``records`` in order, cut at about ``BATCH_BYTES``."""
    data = bytearray()
    chunk: list[RecordInput] = []
    size = 0
    for k, v in records:
        chunk.append(RecordInput(k, v))
        size += record_size(k, v)
        if size >= BATCH_BYTES:
            data += build_batch(chunk, base_timestamp=now_ms)
            chunk, size = [], 0
    if chunk:
        data += build_batch(chunk, base_timestamp=now_ms)
    return data


def build_transactional_batch(
    records: Iterable[StateRecord], now_ms: int, producer_id: int, producer_epoch: int
) -> bytes:
    """One transactional v2 batch of ``records`` (never cut: a transaction's records of
    one write stay together), producer id and epoch set, base sequence -1."""
    return build_batch(
        [RecordInput(k, v) for k, v in records],
        base_timestamp=now_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        transactional=True,
    )


@dataclass(frozen=True, slots=True)
class LogEntry(Generic[T]):
    """One record of a replayed state partition, or one transaction marker (``op`` None)."""

    offset: int
    producer_id: int  # the transaction's producer, -1 for a record outside a transaction
    op: T | None  # the record decoded; None for a COMMIT or ABORT marker
    commit: bool = False  # a marker's outcome
    producer_epoch: int = -1


def read_entries(
    log: Log, start: int, end: int, decode: Callable[[bytes, bytes | None], T], *, what: str = "offset"
) -> Iterator[list[LogEntry[T]]]:
    """``read_records`` with each record's offset and transaction, and the transaction
    markers (control batches) in their place: what a partition holding transactional
    writes replays. CorruptLogError as for ``read_records``, also for a control batch
    that is not a transaction marker."""
    pos = start
    while pos < end:
        result = log.read(pos, REPLAY_READ_BYTES, max_offset=end)
        if not result.regions:
            break
        try:
            batches = decode_batches(result.read(), allow_partial_tail=False)
        except CorruptRecordError as e:
            raise CorruptLogError(log.dir, pos, str(e), what=what) from e
        out: list[LogEntry[T]] = []
        for batch in batches:
            pid = batch.producer_id if batch.is_transactional else -1
            epoch = batch.producer_epoch if batch.is_transactional else -1
            for rec in batch:
                if rec.offset < pos or rec.offset >= end:
                    continue  # outside [start, end), inside the first or last batch
                try:
                    if batch.is_control:
                        marker = EndTxnMarker.decode(rec.key, rec.value)
                        out.append(LogEntry(rec.offset, pid, None, marker.is_commit, epoch))
                    else:
                        out.append(LogEntry(rec.offset, pid, decode(rec.key or b"", rec.value), False, epoch))
                except StrataError as e:
                    raise CorruptLogError(log.dir, rec.offset, str(e), what=what) from e
        yield out
        pos = result.next_offset


def read_records(
    log: Log, start: int, end: int, decode: Callable[[bytes, bytes | None], T], *, what: str = "offset"
) -> Iterator[list[T]]:
    """The records of ``log`` in [``start``, ``end``), each as ``decode(key, value)`` (a
    null key reads as empty), in log order, a read chunk at a time (the replay of a
    partition). CorruptLogError (at ``what`` and the offset) for a batch that does not
    parse, or a record ``decode`` refuses with a StrataError."""
    pos = start
    while pos < end:
        result = log.read(pos, REPLAY_READ_BYTES, max_offset=end)
        if not result.regions:
            break
        try:
            batches = decode_batches(result.read(), allow_partial_tail=False)
        except CorruptRecordError as e:
            raise CorruptLogError(log.dir, pos, str(e), what=what) from e
        out: list[T] = []
        for batch in batches:
            for rec in batch:
                if rec.offset < pos:
                    continue  # before the start offset, inside the first batch
                try:
                    out.append(decode(rec.key or b"", rec.value))
                except StrataError as e:
                    raise CorruptLogError(log.dir, rec.offset, str(e), what=what) from e
        yield out
        pos = result.next_offset


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """The state partition of a coordinator key (group id, transactional id): Kafka's
    ``Utils.abs(key.hashCode) % partitions``."""
    return (java_string_hash(key) & 0x7FFFFFFF) % partitions
