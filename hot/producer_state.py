"""Idempotent-producer state of one partition (KIP-98): sequence checks, deduplication,
and the ``.snapshot`` files that make the state survive restarts.

Pure logic except ``ProducerSnapshotFile.read`` / ``write`` / ``delete``. The owning
``hot.log.Log`` serializes every call under its lock.

Rules for a batch with producerId >= 0 appended as leader (Kafka's ProducerAppendInfo,
checked in request order against the state left by the earlier batches of the request):

* same epoch, same (firstSeq, lastSeq) as one of the producer's last 5 batches: a
  duplicate (a client retry). Nothing is written; the caller answers with the original
  offsets.
* epoch below the producer's epoch: ``InvalidProducerEpochError`` (a fenced zombie).
* epoch above it: firstSeq must be 0 (a bumped epoch restarts its sequence), unless the
  producer is unknown here (never seen, expired, or its data deleted by retention, as in
  Kafka >= 2.5 / KIP-360: any sequence is accepted then, since there is nothing to check
  it against).
* same epoch: firstSeq must follow the last sequence (int32 wrap-around: 0 follows
  2**31-1), else ``OutOfOrderSequenceError`` (a gap, or an old retry no longer cached).

Replicas (``replay``) and rebuilds from the log apply batches without validation.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

from hot.errors import CorruptLogError, InvalidProducerEpochError, OutOfOrderSequenceError, StorageError
from hot.local_log import atomic_write
from hot.segment import SNAPSHOT_SUFFIX, parse_snapshot_name, snapshot_name

logger = logging.getLogger(__name__)

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
INT32_MAX: Final = (1 << 31) - 1
MAX_CACHED_BATCHES: Final = 5  # the client's max.in.flight.requests.per.connection bound
DEFAULT_PRODUCER_ID_EXPIRATION_MS: Final = 7 * 24 * 3600 * 1000  # producer.id.expiration.ms
_MIN_SWEEP: Final = 1024  # producers held before the first amortized expiry sweep


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping from 2**31-1 to 0 (Kafka's incrementSequence)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one appended batch of a producer landed (what a duplicate is answered with)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's maxTimestamp as written (LogAppendTime already stamped)


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """One producer's state in a partition: epoch and its last (up to 5) batches, oldest first."""

    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]
    last_used_ms: int  # broker wall clock of its last append (expiry)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def with_batch(self, epoch: int, batch: BatchMetadata, now_ms: int) -> ProducerEntry:
        """This entry after ``batch``; a new epoch forgets the old epoch's batches."""
        kept = self.batches[-(MAX_CACHED_BATCHES - 1) :] if epoch == self.epoch else ()
        return ProducerEntry(self.producer_id, epoch, (*kept, batch), now_ms)


class ProducerStateManager:
    """Every known producer of a partition. Not thread-safe (the Log's lock guards it).

    Entries unused for ``expiration_ms`` (broker time of their last append) are dropped
    lazily: when looked up, before a snapshot is written, and in an amortized sweep
    whenever the number of producers doubles.
    """

    def __init__(self, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.expiration_ms = expiration_ms
        self._producers: dict[int, ProducerEntry] = {}
        self._sweep_at = _MIN_SWEEP

    def __len__(self) -> int:
        return len(self._producers)

    def _expired(self, entry: ProducerEntry, now_ms: int) -> bool:
        return now_ms - entry.last_used_ms >= self.expiration_ms

    def get(self, producer_id: int, now_ms: int) -> ProducerEntry | None:
        entry = self._producers.get(producer_id)
        if entry is not None and self._expired(entry, now_ms):
            del self._producers[producer_id]
            return None
        return entry

    def entries(self) -> dict[int, ProducerEntry]:
        return dict(self._producers)

    def max_producer_id(self) -> int:
        return max(self._producers, default=NO_PRODUCER_ID)

    def begin(self, now_ms: int) -> ProducerAppend:
        """Start validating the idempotent batches of one append request."""
        return ProducerAppend(self, now_ms)

    def replay(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_offset_delta: int,
        first_offset: int,
        timestamp: int,
        now_ms: int,
    ) -> None:
        """Apply a batch already in the log (replica append, rebuild): no validation."""
        meta = BatchMetadata(
            first_seq,
            increment_sequence(first_seq, last_offset_delta),
            first_offset,
            first_offset + last_offset_delta,
            timestamp,
        )
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, epoch, (), now_ms)
        self._producers[producer_id] = entry.with_batch(epoch, meta, now_ms)

    def _commit(self, updated: dict[int, ProducerEntry], now_ms: int) -> None:
        self._producers.update(updated)
        if len(self._producers) >= self._sweep_at:
            self.remove_expired(now_ms)
            self._sweep_at = max(_MIN_SWEEP, 2 * len(self._producers))

    def remove_expired(self, now_ms: int) -> int:
        doomed = [pid for pid, e in self._producers.items() if self._expired(e, now_ms)]
        for pid in doomed:
            del self._producers[pid]
        return len(doomed)

    def evict_below(self, offset: int) -> int:
        """Forget producers whose last batch ends below ``offset`` (the log start offset
        moved past all their data, as Kafka does); returns how many."""
        doomed = [pid for pid, e in self._producers.items() if e.last_offset < offset]
        for pid in doomed:
            del self._producers[pid]
        return len(doomed)

    def load(self, entries: Iterable[ProducerEntry], now_ms: int) -> None:
        """Replace the state with ``entries`` (a snapshot), dropping expired ones."""
        self._producers = {e.producer_id: e for e in entries if not self._expired(e, now_ms)}
        self._sweep_at = max(_MIN_SWEEP, 2 * len(self._producers))

    def clear(self) -> None:
        self._producers = {}
        self._sweep_at = _MIN_SWEEP


class ProducerAppend:
    """The producer-state changes of one append request, applied by ``commit`` only once
    the batches are written (a failed write leaves the state untouched)."""

    __slots__ = ("_now", "_state", "_updated")

    def __init__(self, state: ProducerStateManager, now_ms: int) -> None:
        self._state = state
        self._now = now_ms
        self._updated: dict[int, ProducerEntry] = {}

    def append(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_offset_delta: int,
        first_offset: int,
        timestamp: int,
    ) -> BatchMetadata | None:
        """Validate a batch that would be written at ``first_offset``. Returns the original
        batch if it is a duplicate (then it must not be written), else None after
        recording it. Raises InvalidProducerEpochError / OutOfOrderSequenceError."""
        entry = self._updated.get(producer_id)
        if entry is None:
            entry = self._state.get(producer_id, self._now)
        last_seq = increment_sequence(first_seq, last_offset_delta)
        if entry is None:
            entry = ProducerEntry(producer_id, NO_PRODUCER_EPOCH, (), self._now)
        else:
            dup = entry.find_duplicate(epoch, first_seq, last_seq)
            if dup is not None:
                return dup
            if epoch < entry.epoch:
                raise InvalidProducerEpochError(
                    f"producer {producer_id} has epoch {epoch}, older than its current epoch {entry.epoch}"
                )
            if epoch > entry.epoch:
                if first_seq != 0:
                    raise OutOfOrderSequenceError(
                        f"producer {producer_id}: new epoch {epoch} must start at sequence 0, got {first_seq}"
                    )
            elif entry.batches and not in_sequence(entry.last_seq, first_seq):
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} epoch {epoch}: sequence {first_seq} does not follow "
                    f"{entry.last_seq}"
                )
        meta = BatchMetadata(first_seq, last_seq, first_offset, first_offset + last_offset_delta, timestamp)
        self._updated[producer_id] = entry.with_batch(epoch, meta, self._now)
        return None

    def commit(self) -> None:
        if self._updated:
            self._state._commit(self._updated, self._now)


# --- snapshot files ---------------------------------------------------------------------------

# Byte layout: ProducerSnapshotFile's docstring.
_SNAP_HEADER: Final = struct.Struct(">hIqi")
_SNAP_CRC_START: Final = 6
_SNAP_ENTRY: Final = struct.Struct(">qhqb")
_SNAP_BATCH: Final = struct.Struct(">iiqqq")
SNAPSHOT_VERSION: Final = 1


class ProducerSnapshotFile:
    """``<20-digit offset>.snapshot`` in the partition directory: the producer state as of
    that offset (every batch below it applied, none at or above it).

    Layout (big-endian)::

        0   version        int16   1
        2   crc            uint32  CRC-32C of bytes [6, end)
        6   offset         int64   the offset in the file name
        14  producerCount  int32
        18  producerCount entries:
              producerId int64 | epoch int16 | lastUsedMs int64 | batchCount int8 (0..5)
              batchCount x (firstSeq int32 | lastSeq int32 | firstOffset int64
                            | lastOffset int64 | timestamp int64), oldest first

    Written once, atomically (``<name>.tmp``, fsync, rename); never modified. The Log
    writes one when a segment rolls (named by the new segment's base offset, so every
    segment has the state as of its start beside it) and one at the log end on clean
    close. Crash behaviour: a file that fails any check (CRC, version, lengths, offset)
    is ignored and an older snapshot or the log itself is used instead; a snapshot above
    the log end (a truncated tail) is deleted when the log opens.
    """

    @staticmethod
    def encode(offset: int, entries: Iterable[ProducerEntry]) -> bytes:
        body = bytearray()
        count = 0
        for e in entries:
            body += _SNAP_ENTRY.pack(e.producer_id, e.epoch, e.last_used_ms, len(e.batches))
            for b in e.batches:
                body += _SNAP_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
            count += 1
        head = bytearray(_SNAP_HEADER.pack(SNAPSHOT_VERSION, 0, offset, count))
        crc = crc32c(body, crc32c(memoryview(head)[_SNAP_CRC_START:]))
        struct.pack_into(">I", head, 2, crc)
        return bytes(head + body)

    @staticmethod
    def decode(data: bytes, offset: int, path: str = "<snapshot>") -> list[ProducerEntry]:
        """Parse and check a snapshot that must describe ``offset``; CorruptLogError if not."""

        def bad(pos: int, reason: str) -> CorruptLogError:
            return CorruptLogError(path, pos, f"invalid producer snapshot: {reason}")

        if len(data) < _SNAP_HEADER.size:
            raise bad(0, f"{len(data)} bytes is shorter than the {_SNAP_HEADER.size}-byte header")
        version, crc, stored_offset, count = _SNAP_HEADER.unpack_from(data)
        if version != SNAPSHOT_VERSION:
            raise bad(0, f"unsupported version {version}")
        actual = crc32c(memoryview(data)[_SNAP_CRC_START:])
        if actual != crc:
            raise bad(2, f"CRC mismatch: stored {crc:#010x}, computed {actual:#010x}")
        if stored_offset != offset:
            raise bad(6, f"holds offset {stored_offset}, file name says {offset}")
        if count < 0:
            raise bad(14, f"negative producer count {count}")
        pos = _SNAP_HEADER.size
        out: list[ProducerEntry] = []
        seen: set[int] = set()
        for _ in range(count):
            if pos + _SNAP_ENTRY.size > len(data):
                raise bad(pos, "truncated producer entry")
            pid, epoch, last_used, n = _SNAP_ENTRY.unpack_from(data, pos)
            if pid < 0 or pid in seen or epoch < 0 or not 0 <= n <= MAX_CACHED_BATCHES:
                raise bad(pos, f"bad producer entry (id {pid}, epoch {epoch}, {n} batches)")
            pos += _SNAP_ENTRY.size
            if pos + n * _SNAP_BATCH.size > len(data):
                raise bad(pos, "truncated batch list")
            batches = []
            for _ in range(n):
                b = BatchMetadata(*_SNAP_BATCH.unpack_from(data, pos))
                if not b.first_offset <= b.last_offset < offset:
                    raise bad(pos, f"batch offsets [{b.first_offset}, {b.last_offset}] not below {offset}")
                batches.append(b)
                pos += _SNAP_BATCH.size
            seen.add(pid)
            out.append(ProducerEntry(pid, epoch, tuple(batches), last_used))
        if pos != len(data):
            raise bad(pos, f"{len(data) - pos} trailing bytes")
        return out

    @staticmethod
    def read(path: str, offset: int) -> list[ProducerEntry]:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise CorruptLogError(path, 0, f"unreadable producer snapshot: {e}") from e
        return ProducerSnapshotFile.decode(data, offset, path)

    @staticmethod
    def write(path: str, offset: int, entries: Iterable[ProducerEntry], *, sync_dir: bool = True) -> None:
        atomic_write(path, ProducerSnapshotFile.encode(offset, entries), sync_dir=sync_dir)

    @staticmethod
    def delete(path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(f"cannot remove {path}: {e}") from e


__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "MAX_CACHED_BATCHES",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "SNAPSHOT_SUFFIX",
    "BatchMetadata",
    "ProducerAppend",
    "ProducerEntry",
    "ProducerSnapshotFile",
    "ProducerStateManager",
    "in_sequence",
    "increment_sequence",
    "parse_snapshot_name",
    "snapshot_name",
]
