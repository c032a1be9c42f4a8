"""A share partition's state (KIP-932): the in-flight window of one topic partition for one
share group, as Kafka's ``SharePartition`` keeps it.

The window runs from the share-partition start offset (SPSO, ``start``) to the end offset
(``end``, exclusive here: the next offset never yet acquired). Every record inside it is
Available, Acquired (by one member, under a lock that expires), Acknowledged or Archived,
with its delivery count. Records at or past ``end`` are Available with no delivery yet;
records below ``start`` are done. Acknowledgements: ACCEPT (1) -> Acknowledged, RELEASE (2)
-> Available again, REJECT (3) -> Archived, GAP (0) -> Archived (no record at the offset).
A record released (or whose lock expires) after ``delivery_limit`` deliveries is Archived
instead: a poison record stops being redelivered. The window's start moves past every
leading Acknowledged/Archived record.

Pure: the clock is injected (milliseconds), nothing here does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from broker.share.errors import InvalidRecordStateError
from hot.errors import InvalidRequestError

Clock = Callable[[], float]  # milliseconds


class RecordState(enum.IntEnum):
    """Kafka's record state ids (as persisted in ``__share_group_state``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member: str | None = None
    deadline: float = 0.0  # lock expiry (ms), while Acquired


@dataclass(frozen=True, slots=True)
class Acquired:
    """A run of acquired records with one delivery count (ShareFetch's AcquiredRecords)."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """A record batch read from the log: its offsets, and whether it is never delivered
    (a control batch, or an aborted transaction's batch in a read_committed group)."""

    first: int
    last: int
    skip: bool = False


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one state and delivery count (a persisted state batch)."""

    first: int
    last: int
    state: RecordState
    delivery_count: int


@dataclass(slots=True)
class Archived:
    """A record archived by the delivery-count limit or REJECT (for the dead-letter topic)."""

    offset: int
    delivery_count: int


@dataclass
class SharePartition:
    """One share partition (module docstring)."""

    start: int
    clock: Clock
    lock_ms: int = 30_000
    delivery_limit: int = 5
    max_in_flight: int = 2_000
    records: dict[int, InFlight] = field(default_factory=dict)
    end: int = -1
    state_epoch: int = 0
    # Records archived by REJECT or the delivery-count limit since the last drain.
    archived: list[Archived] = field(default_factory=list)
    # No lock expires before this (ms): expire_locks skips its scan until then.
    next_expiry: float = float("inf")

    def __post_init__(self) -> None:
        if self.end < self.start:
            self.end = self.start

    # -- reading the state -------------------------------------------------------------

    def state_of(self, offset: int) -> RecordState:
        if offset < self.start:
            return RecordState.ACKNOWLEDGED
        rec = self.records.get(offset)
        return RecordState.AVAILABLE if rec is None else rec.state

    def delivery_count(self, offset: int) -> int:
        rec = self.records.get(offset)
        return 0 if rec is None else rec.delivery_count

    @property
    def in_flight(self) -> int:
        """Records in the window not yet done (Available inside the window, or Acquired)."""
        live = (RecordState.AVAILABLE, RecordState.ACQUIRED)
        return sum(1 for r in self.records.values() if r.state in live)

    @property
    def acquired(self) -> int:
        return sum(1 for r in self.records.values() if r.state is RecordState.ACQUIRED)

    def next_fetch_offset(self) -> int | None:
        """Where a fetch should read from: the first Available record of the window, else
        its end; None when the window is full of records still to be acknowledged."""
        self.expire_locks()
        for off in range(self.start, self.end):
            rec = self.records.get(off)
            if rec is None or rec.state is RecordState.AVAILABLE:
                return off
        if self.end - self.start >= self.max_in_flight:
            return None
        return self.end

    # -- changing it -------------------------------------------------------------------

    def expire_locks(self) -> int:
        """Acquired records whose lock has run out go back to Available (or are archived at
        the delivery limit); returns how many."""
        now = self.clock()
        if now < self.next_expiry:
            return 0
        n = 0
        soonest = float("inf")
        for off, rec in self.records.items():
            if rec.state is RecordState.ACQUIRED:
                if rec.deadline <= now:
                    self._release(off, rec)
                    n += 1
                else:
                    soonest = min(soonest, rec.deadline)
        self.next_expiry = soonest
        if n:
            self._advance()
        return n

    def acquire(
        self, member: str, fetch_offset: int, batches: Sequence[BatchSpan], max_records: int
    ) -> list[Acquired]:
        """Acquire for ``member`` the Available records among ``batches`` (read from the log
        at ``fetch_offset``, in order), at most ``max_records`` of them, rounded up to the
        end of a batch as Kafka does."""
        self.expire_locks()
        deadline = self.clock() + self.lock_ms
        runs: list[Acquired] = []
        count = 0
        expected = fetch_offset
        records = self.records
        for b in batches:
            gap_from = max(expected, self.end)
            if b.first > gap_from:
                # Offsets no batch holds (compacted away): nothing to deliver there.
                self._archive_range(gap_from, b.first - 1)
            expected = b.last + 1
            if count >= max_records:
                break
            first = max(b.first, self.start)
            # Inside the window: record by record (some may be held or done).
            for off in range(first, min(b.last + 1, self.end)):
                rec = records.get(off)
                if rec is None:
                    rec = records[off] = InFlight(RecordState.AVAILABLE)
                if rec.state is not RecordState.AVAILABLE:
                    continue
                if b.skip:
                    rec.state = RecordState.ARCHIVED
                    continue
                rec.state = RecordState.ACQUIRED
                rec.delivery_count += 1
                rec.member = member
                rec.deadline = deadline
                _add_run(runs, off, rec.delivery_count)
                count += 1
            # Past the window's end: new records, first delivery, all at once.
            lo = max(first, self.end)
            hi = min(b.last, self.start + self.max_in_flight - 1)
            if lo > hi:
                continue
            if b.skip:
                for off in range(lo, hi + 1):
                    records[off] = InFlight(RecordState.ARCHIVED)
            else:
                for off in range(lo, hi + 1):
                    records[off] = InFlight(RecordState.ACQUIRED, 1, member, deadline)
                _add_range(runs, lo, hi, 1)
                count += hi - lo + 1
            self.end = hi + 1
        if count:
            self.next_expiry = min(self.next_expiry, deadline)
        self._advance()
        return runs

    def acknowledge(self, member: str, first: int, last: int, types: Sequence[int]) -> None:
        """One acknowledgement batch: a single type for the whole range, or one per offset.
        Every record must be Acquired by ``member`` (GAP offsets excepted), else nothing
        changes and INVALID_RECORD_STATE."""
        if last < first:
            raise InvalidRequestError(f"acknowledgement batch {first}-{last}: last offset before first")
        n = last - first + 1
        if len(types) not in (1, n):
            raise InvalidRequestError(
                f"acknowledgement batch {first}-{last}: {len(types)} types for {n} offsets"
            )
        for t in set(types):
            if t not in (AckType.GAP, AckType.ACCEPT, AckType.RELEASE, AckType.REJECT):
                raise InvalidRequestError(f"unknown acknowledge type {t}")
        single = types[0] if len(types) == 1 else None
        self.expire_locks()
        records = self.records
        recs = [records.get(off) for off in range(first, last + 1)]
        for i, rec in enumerate(recs):
            if rec is None or rec.state is not RecordState.ACQUIRED or rec.member != member:
                kind = single if single is not None else types[i]
                if kind == AckType.GAP and rec is not None and rec.state is RecordState.ARCHIVED:
                    continue
                off = first + i
                raise InvalidRecordStateError(
                    f"offset {off} is not acquired by member {member} (state {self.state_of(off).name})"
                )
        if single == AckType.ACCEPT:  # the common case: a whole range accepted
            for rec in recs:
                assert rec is not None
                rec.state = RecordState.ACKNOWLEDGED
                rec.member = None
            self._advance()
            return
        for i, rec in enumerate(recs):
            assert rec is not None
            kind = single if single is not None else types[i]
            if kind == AckType.ACCEPT:
                rec.state = RecordState.ACKNOWLEDGED
            elif kind == AckType.RELEASE:
                self._release(first + i, rec)
                continue
            else:
                if kind == AckType.REJECT:
                    self.archived.append(Archived(first + i, rec.delivery_count))
                rec.state = RecordState.ARCHIVED
            rec.member = None
        self._advance()

    def release_member(self, member: str) -> int:
        """Everything ``member`` holds goes back (its session closed, it left the group)."""
        n = 0
        for off, rec in self.records.items():
            if rec.state is RecordState.ACQUIRED and rec.member == member:
                self._release(off, rec)
                n += 1
        self._advance()
        return n

    def move_start(self, offset: int) -> None:
        """The log's start moved past the window (retention, DeleteRecords), or an operator
        reset the start (AlterShareGroupOffsets): records below ``offset`` are done."""
        for off in [o for o in self.records if o < offset]:
            del self.records[off]
        self.start = offset
        if self.end < offset:
            self.end = offset
        self._advance()

    def drain_archived(self) -> list[Archived]:
        out, self.archived = self.archived, []
        return out

    # -- persistence (ShareSnapshot) -----------------------------------------------------

    def snapshot(self) -> list[StateBatch]:
        """The window as state batches; an Acquired record is persisted Available, since a
        lock does not survive the broker that granted it."""
        out: list[StateBatch] = []
        for off in range(self.start, self.end):
            rec = self.records.get(off)
            state = RecordState.AVAILABLE if rec is None else rec.state
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            count = 0 if rec is None else rec.delivery_count
            if out and out[-1].last == off - 1 and out[-1].state is state and out[-1].delivery_count == count:
                prev = out[-1]
                out[-1] = StateBatch(prev.first, off, state, count)
            else:
                out.append(StateBatch(off, off, state, count))
        return out

    def restore(self, start: int, batches: Iterable[StateBatch]) -> None:
        self.records.clear()
        self.start = self.end = start
        for b in batches:
            for off in range(max(b.first, start), b.last + 1):
                self.records[off] = InFlight(b.state, b.delivery_count)
                self.end = max(self.end, off + 1)
        self._advance()

    # -- internals ---------------------------------------------------------------------

    def _release(self, offset: int, rec: InFlight) -> None:
        rec.member = None
        rec.deadline = 0.0
        if rec.delivery_count >= self.delivery_limit:
            rec.state = RecordState.ARCHIVED
            self.archived.append(Archived(offset, rec.delivery_count))
        else:
            rec.state = RecordState.AVAILABLE

    def _extend_to(self, offset: int) -> None:
        for off in range(self.end, offset + 1):
            self.records[off] = InFlight(RecordState.AVAILABLE)
        self.end = max(self.end, offset + 1)

    def _archive_range(self, first: int, last: int) -> None:
        if last - self.start >= self.max_in_flight:
            last = self.start + self.max_in_flight - 1
        if last < first:
            return
        self._extend_to(last)
        for off in range(first, last + 1):
            rec = self.records.setdefault(off, InFlight(RecordState.AVAILABLE))
            if rec.state is RecordState.AVAILABLE:
                rec.state = RecordState.ARCHIVED

    def _advance(self) -> None:
        while self.start < self.end:
            rec = self.records.get(self.start)
            if rec is None or rec.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            del self.records[self.start]
            self.start += 1


def _add_run(runs: list[Acquired], offset: int, delivery_count: int) -> None:
    _add_range(runs, offset, offset, delivery_count)


def _add_range(runs: list[Acquired], first: int, last: int, delivery_count: int) -> None:
    """Append an acquired range, merged with the previous one when contiguous and alike."""
    if runs and runs[-1].last == first - 1 and runs[-1].delivery_count == delivery_count:
        runs[-1] = Acquired(runs[-1].first, last, delivery_count)
    else:
        runs.append(Acquired(first, last, delivery_count))
