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

Transactions (KIP-98; Kafka's ProducerAppendInfo / ProducerStateManager):

* a transactional batch of a producer without an ongoing transaction begins one: the
  entry's ``current_txn_first_offset`` is that batch's first offset, and the transaction
  is ongoing until its marker. A non-transactional batch of a producer whose transaction
  is ongoing is ``InvalidTxnStateError``.
* a marker (the coordinator's COMMIT / ABORT, ``ProducerAppend.append_marker``): an
  epoch below the producer's is ``InvalidProducerEpochError``, a coordinator epoch below
  the last one seen ``TransactionCoordinatorFencedError``. It ends the ongoing
  transaction (a ``CompletedTxn``; none for an empty transaction), moves the producer to
  the marker's epoch and records the coordinator epoch.
* a completed transaction stays "unreplicated" until the high watermark passes its
  marker: the first unstable offset (``first_unstable_offset``) is the smallest first
  offset of the ongoing and unreplicated transactions, and the last stable offset is
  min(first unstable offset, high watermark) (hot.log_txn). A producer with an ongoing
  transaction never expires.

Transaction verification (KIP-890 part 1, Kafka's VerificationGuard): before a leader
appends a transactional batch that would begin a transaction here, it asks the
coordinator whether the partition is in the producer's ongoing transaction
(``start_verification`` hands it a ``VerificationGuard`` for the producer; None when the
transaction is already ongoing here in that epoch, nothing to verify). The append passes
the guard back: a batch beginning a transaction is refused (``InvalidTxnStateError``)
unless its guard is still the producer's current one. A marker for the producer, or the
transaction beginning, drops the guard, so a batch that was verified for a transaction
that has ended since (a late retry after the abort) can never open a transaction that no
marker will close (a "hanging" transaction holding the last stable offset back forever).
Guards live in memory only: after a restart the client's retry is verified afresh.

A coordinator's own batch (origin COORDINATOR: the group coordinator's transactional
offsets, written with base sequence -1) is checked for its epoch only: no sequence check,
no duplicate detection (Kafka checks sequences for client batches alone).

Replicas (``replay``, ``replay_marker``) and rebuilds from the log apply batches without
validation (the leader did it), with the same state changes.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

from hot.errors import (
    CorruptLogError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    StorageError,
    TransactionCoordinatorFencedError,
)
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


class VerificationGuard:
    """A leader's proof, by identity, that the coordinator was asked about one producer's
    next transaction here (module docstring)."""

    __slots__ = ()


# Passed by a leader for a batch it found inside an ongoing transaction (nothing verified):
# never a producer's current guard, so the batch is refused should it begin a transaction.
UNVERIFIED: Final = VerificationGuard()


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended (Kafka's CompletedTxn): [first_offset, last_offset], the
    last being the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """One producer's state in a partition: epoch and its last (up to 5) batches, oldest
    first; the last coordinator epoch of its markers and its ongoing transaction's first
    offset (-1: none)."""

    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]
    last_used_ms: int  # broker wall clock of its last append (expiry)
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

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

    def with_batch(
        self, epoch: int, batch: BatchMetadata, now_ms: int, txn_first_offset: int | None = None
    ) -> ProducerEntry:
        """This entry after ``batch``; a new epoch forgets the old epoch's batches.
        ``txn_first_offset``: the ongoing transaction's first offset from now on (None:
        unchanged)."""
        kept = self.batches[-(MAX_CACHED_BATCHES - 1) :] if epoch == self.epoch else ()
        txn = self.current_txn_first_offset if txn_first_offset is None else txn_first_offset
        return ProducerEntry(self.producer_id, epoch, (*kept, batch), now_ms, self.coordinator_epoch, txn)

    def after_marker(self, epoch: int, coordinator_epoch: int, now_ms: int) -> ProducerEntry:
        """This entry after a transaction marker: no ongoing transaction, the marker's
        epochs (a new producer epoch forgets the old epoch's batches)."""
        kept = self.batches if epoch == self.epoch else ()
        return ProducerEntry(self.producer_id, epoch, kept, now_ms, coordinator_epoch, -1)


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
        # Ongoing transactions: first offset -> producer id. Transactions begin in offset
        # order, so insertion order is ascending and the first key is the smallest.
        self._ongoing: dict[int, int] = {}
        # Completed transactions whose marker may still be above the high watermark:
        # first offset -> last offset (the marker's).
        self._unreplicated: dict[int, int] = {}
        self._guards: dict[int, VerificationGuard] = {}  # producer id -> current guard

    def __len__(self) -> int:
        return len(self._producers)

    def _expired(self, entry: ProducerEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_used_ms >= self.expiration_ms

    # --- transactions -----------------------------------------------------------------------

    @property
    def all_stable(self) -> bool:
        """No transaction ongoing or awaiting its marker's replication: the LSO is the HW."""
        return not self._ongoing and not self._unreplicated

    def start_verification(self, producer_id: int, epoch: int, now_ms: int) -> VerificationGuard | None:
        """The guard a leader verifies the producer's next transactional batch with (the
        producer's current one, or a new one), or None when its transaction is ongoing
        here in ``epoch`` (module docstring)."""
        entry = self.get(producer_id, now_ms)
        if entry is not None and entry.current_txn_first_offset >= 0 and entry.epoch == epoch:
            return None
        guard = self._guards.get(producer_id)
        if guard is None:
            guard = self._guards[producer_id] = VerificationGuard()
        return guard

    def is_verified(self, producer_id: int, guard: VerificationGuard) -> bool:
        return self._guards.get(producer_id) is guard

    def ongoing_txns(self) -> list[tuple[int, int]]:
        """(first offset, producer id) of every ongoing transaction, ascending."""
        return sorted(self._ongoing.items())

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest transaction that is ongoing, or completed with
        its marker at or above ``high_watermark`` (forgotten once the HW passed it); None
        if there is none (Kafka's firstUnstableOffset after onHighWatermarkUpdated)."""
        if self._unreplicated:
            for first in [f for f, last in self._unreplicated.items() if last < high_watermark]:
                del self._unreplicated[first]
        best = next(iter(self._ongoing), None)
        if self._unreplicated:
            low = min(self._unreplicated)
            best = low if best is None else min(best, low)
        return best

    def last_stable_offset_of(self, txn: CompletedTxn) -> int:
        """The LSO recorded with a completed transaction in the transaction index: the first
        offset of the earliest ongoing transaction of another producer, else the offset
        after the marker (Kafka's ProducerStateManager.lastStableOffset)."""
        for first, pid in self._ongoing.items():
            if pid != txn.producer_id:
                return first
        return txn.last_offset + 1

    def complete_txn(self, txn: CompletedTxn) -> None:
        """The marker of ``txn`` was written: it is no longer ongoing, only unreplicated."""
        if self._ongoing.pop(txn.first_offset, None) is None:
            logger.warning(
                "completed transaction of producer %d at %d was not ongoing",
                txn.producer_id,
                txn.first_offset,
            )
        self._unreplicated[txn.first_offset] = txn.last_offset

    def _begin_txn(self, producer_id: int, first_offset: int) -> None:
        if self._ongoing and first_offset < next(reversed(self._ongoing)):
            self._ongoing[first_offset] = producer_id
            self._ongoing = dict(sorted(self._ongoing.items()))
        else:
            self._ongoing[first_offset] = producer_id

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
        is_transactional: bool = False,
    ) -> None:
        """Apply a data batch already in the log (replica append, rebuild): no validation."""
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
        txn: int | None = None
        if is_transactional and entry.current_txn_first_offset < 0:
            txn = first_offset
            self._begin_txn(producer_id, first_offset)
            self._guards.pop(producer_id, None)
        self._producers[producer_id] = entry.with_batch(epoch, meta, now_ms, txn)

    def replay_marker(
        self, producer_id: int, epoch: int, is_abort: bool, coordinator_epoch: int, offset: int, now_ms: int
    ) -> CompletedTxn | None:
        """Apply a transaction marker already in the log at ``offset``: no validation.
        Returns the transaction it completed (None for an empty one); the caller records
        it (transaction index, ``complete_txn``)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, NO_PRODUCER_EPOCH, (), now_ms)
        done = None
        if entry.current_txn_first_offset >= 0:
            done = CompletedTxn(producer_id, entry.current_txn_first_offset, offset, is_abort)
        self._producers[producer_id] = entry.after_marker(epoch, coordinator_epoch, now_ms)
        self._guards.pop(producer_id, None)
        return done

    def _commit(
        self,
        updated: dict[int, ProducerEntry],
        started: list[tuple[int, int]],
        now_ms: int,
        ended: Iterable[int] = (),
    ) -> None:
        self._producers.update(updated)
        for first, pid in started:
            self._begin_txn(pid, first)
            self._guards.pop(pid, None)
        for pid in ended:
            self._guards.pop(pid, None)
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
        moved past all their data, as Kafka does), except those with an ongoing
        transaction (its marker is still to come) and those without a batch of their
        current epoch (a marker bumped it: only expiry forgets that epoch, or a fenced
        producer could write again after a restart); returns how many. Completed
        transactions ending below ``offset`` are forgotten too."""
        doomed = [
            pid
            for pid, e in self._producers.items()
            if e.batches and e.last_offset < offset and e.current_txn_first_offset < 0
        ]
        for pid in doomed:
            del self._producers[pid]
        for first in [f for f, last in self._unreplicated.items() if last < offset]:
            del self._unreplicated[first]
        return len(doomed)

    def load(self, entries: Iterable[ProducerEntry], now_ms: int) -> None:
        """Replace the state with ``entries`` (a snapshot), dropping expired ones; their
        ongoing transactions are ongoing again."""
        self._producers = {e.producer_id: e for e in entries if not self._expired(e, now_ms)}
        self._sweep_at = max(_MIN_SWEEP, 2 * len(self._producers))
        self._ongoing = {
            first: pid
            for first, pid in sorted(
                (e.current_txn_first_offset, e.producer_id)
                for e in self._producers.values()
                if e.current_txn_first_offset >= 0
            )
        }
        self._unreplicated = {}
        self._guards = {}

    def clear(self) -> None:
        self._producers = {}
        self._sweep_at = _MIN_SWEEP
        self._ongoing = {}
        self._unreplicated = {}
        self._guards = {}


class ProducerAppend:
    """The producer-state changes of one append request, applied by ``commit`` only once
    the batches are written (a failed write leaves the state untouched)."""

    __slots__ = ("_ended", "_now", "_started", "_state", "_updated", "completed")

    def __init__(self, state: ProducerStateManager, now_ms: int) -> None:
        self._state = state
        self._now = now_ms
        self._updated: dict[int, ProducerEntry] = {}
        self._started: list[tuple[int, int]] = []  # (first offset, producer id) of new transactions
        self._ended: list[int] = []  # producer ids whose marker this append writes
        # Transactions ended by this append's markers, in order (the Log records them).
        self.completed: list[CompletedTxn] = []

    def _entry(self, producer_id: int) -> ProducerEntry | None:
        entry = self._updated.get(producer_id)
        if entry is None:
            entry = self._state.get(producer_id, self._now)
        return entry

    def append(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_offset_delta: int,
        first_offset: int,
        timestamp: int,
        is_transactional: bool = False,
        *,
        coordinator: bool = False,
        guard: VerificationGuard | None = None,
    ) -> BatchMetadata | None:
        """Validate a data batch that would be written at ``first_offset``. Returns the
        original batch if it is a duplicate (then it must not be written), else None after
        recording it. Raises InvalidProducerEpochError / OutOfOrderSequenceError /
        InvalidTxnStateError (module docstring). ``coordinator``: a coordinator's batch
        (origin COORDINATOR, as Kafka's ProducerAppendInfo): only the epoch is checked.
        ``guard``: the leader's verification of a batch that begins a transaction (None:
        not checked; module docstring)."""
        entry = self._entry(producer_id)
        last_seq = increment_sequence(first_seq, last_offset_delta)
        if entry is None:
            entry = ProducerEntry(producer_id, NO_PRODUCER_EPOCH, (), self._now)
        elif coordinator:
            if epoch < entry.epoch:
                raise InvalidProducerEpochError(
                    f"producer {producer_id} has epoch {epoch}, older than its current epoch {entry.epoch}"
                )
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
        txn: int | None = None
        if entry.current_txn_first_offset >= 0:
            if not is_transactional:
                raise InvalidTxnStateError(
                    f"producer {producer_id} wrote a non-transactional batch at offset {first_offset} "
                    f"while its transaction from offset {entry.current_txn_first_offset} is ongoing"
                )
        elif is_transactional:
            if guard is not None and not self._state.is_verified(producer_id, guard):
                raise InvalidTxnStateError(
                    f"producer {producer_id}: the batch at offset {first_offset} was not verified as part "
                    f"of an ongoing transaction (the partition is not in the producer's transaction)"
                )
            txn = first_offset
            self._started.append((first_offset, producer_id))
        meta = BatchMetadata(first_seq, last_seq, first_offset, first_offset + last_offset_delta, timestamp)
        self._updated[producer_id] = entry.with_batch(epoch, meta, self._now, txn)
        return None

    def append_marker(
        self, producer_id: int, epoch: int, is_abort: bool, coordinator_epoch: int, offset: int
    ) -> CompletedTxn | None:
        """Validate a transaction marker that would be written at ``offset`` (the
        coordinator's append) and record it; returns the transaction it completes (None
        for an empty one), also kept in ``completed``. Raises InvalidProducerEpochError /
        TransactionCoordinatorFencedError."""
        entry = self._entry(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, NO_PRODUCER_EPOCH, (), self._now)
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"transaction marker of producer {producer_id} at offset {offset} has epoch {epoch}, "
                f"older than its current epoch {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"transaction marker of producer {producer_id} has coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch} (a zombie coordinator)"
            )
        done = None
        if entry.current_txn_first_offset >= 0:
            done = CompletedTxn(producer_id, entry.current_txn_first_offset, offset, is_abort)
            self.completed.append(done)
        self._updated[producer_id] = entry.after_marker(epoch, coordinator_epoch, self._now)
        self._ended.append(producer_id)
        return done

    def commit(self) -> None:
        if self._updated:
            self._state._commit(self._updated, self._started, self._now, self._ended)


# --- snapshot files ---------------------------------------------------------------------------

# Byte layout: ProducerSnapshotFile's docstring.
_SNAP_HEADER: Final = struct.Struct(">hIqi")
_SNAP_CRC_START: Final = 6
_SNAP_ENTRY_V1: Final = struct.Struct(">qhqb")
_SNAP_ENTRY: Final = struct.Struct(">qhqiqb")
_SNAP_BATCH: Final = struct.Struct(">iiqqq")
SNAPSHOT_VERSION: Final = 2
_SNAPSHOT_VERSIONS: Final = (1, 2)


class ProducerSnapshotFile:
    """``<20-digit offset>.snapshot`` in the partition directory: the producer state as of
    that offset (every batch below it applied, none at or above it).

    Layout (big-endian)::

        0   version        int16   2 (1 is still read)
        2   crc            uint32  CRC-32C of bytes [6, end)
        6   offset         int64   the offset in the file name
        14  producerCount  int32
        18  producerCount entries:
              version 2: producerId int64 | epoch int16 | lastUsedMs int64
                         | coordinatorEpoch int32 (-1: none seen)
                         | currentTxnFirstOffset int64 (-1: no ongoing transaction)
                         | batchCount int8 (0..5)
              version 1: producerId int64 | epoch int16 | lastUsedMs int64 | batchCount int8
                         (read as coordinatorEpoch -1, no ongoing transaction)
              batchCount x (firstSeq int32 | lastSeq int32 | firstOffset int64
                            | lastOffset int64 | timestamp int64), oldest first

    An ongoing transaction's first offset is below the snapshot's offset, so the last
    stable offset survives a restart (the transaction is ongoing again after the load).

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
            body += _SNAP_ENTRY.pack(
                e.producer_id,
                e.epoch,
                e.last_used_ms,
                e.coordinator_epoch,
                e.current_txn_first_offset,
                len(e.batches),
            )
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
        if version not in _SNAPSHOT_VERSIONS:
            raise bad(0, f"unsupported version {version}")
        layout = _SNAP_ENTRY if version >= 2 else _SNAP_ENTRY_V1
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
            if pos + layout.size > len(data):
                raise bad(pos, "truncated producer entry")
            if version >= 2:
                pid, epoch, last_used, coord, txn, n = layout.unpack_from(data, pos)
            else:
                pid, epoch, last_used, n = layout.unpack_from(data, pos)
                coord, txn = -1, -1
            if pid < 0 or pid in seen or epoch < 0 or not 0 <= n <= MAX_CACHED_BATCHES:
                raise bad(pos, f"bad producer entry (id {pid}, epoch {epoch}, {n} batches)")
            if not -1 <= txn < offset or coord < -1:
                raise bad(pos, f"producer {pid}: transaction first offset {txn}, coordinator epoch {coord}")
            pos += layout.size
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
            out.append(ProducerEntry(pid, epoch, tuple(batches), last_used, coord, txn))
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
    "CompletedTxn",
    "ProducerAppend",
    "ProducerEntry",
    "ProducerSnapshotFile",
    "ProducerStateManager",
    "in_sequence",
    "increment_sequence",
    "parse_snapshot_name",
    "snapshot_name",
]
