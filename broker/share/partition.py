"""A share partition's state (KIP-932): the in-flight window of one topic partition for one
share group, as Kafka's ``SharePartition`` keeps it.

The window runs from the share-partition start offset (SPSO, ``start``) to the end offset
(``end``, exclusive here: the next offset never yet acquired). Every record inside it is
Available, Acquired (by one member, under a lock that expires), Acknowledged or Archived,
with its delivery count. Records at or past ``end`` are Available with no delivery yet;
records below ``start`` are done. Acknowledgements: ACCEPT (1) -> Acknowledged, RELEASE (2)
-> Available again, REJECT (3) -> Archived, GAP (0) -> Archived (no record at the offset),
RENEW (4, KIP-1222) -> still Acquired, under a new lock.
A record released (or whose lock expires) after ``delivery_limit`` deliveries is Archived
instead: a poison record stops being redelivered. The window's start moves past every
leading Acknowledged/Archived record.

The window is kept as offset ranges (``Run``), each with one state, delivery count, member
and lock, as Kafka keeps an ``InFlightBatch`` per fetched batch: a batch is acquired whole
as one range, and a range is split only where an operation covers part of it (an
acknowledgement of some of its records, per-offset acknowledge types). The common case, a
batch acquired and accepted whole, costs the same whatever the batch's record count.

Pure: the clock is injected (milliseconds), nothing here does I/O.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Final

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
    RENEW = 4  # KIP-1222: the records stay acquired, their lock starts again


@dataclass(slots=True)
class Run:
    """Offsets ``first``..``last`` of the window in one state (a Kafka in-flight batch)."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member: str | None = None
    deadline: float = 0.0  # lock expiry (ms), while Acquired

    @property
    def size(self) -> int:
        return self.last - self.first + 1


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


_LIVE: Final = (RecordState.AVAILABLE, RecordState.ACQUIRED)
_DONE: Final = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass
class SharePartition:
    """One share partition (module docstring). ``runs`` cover ``start``..``end - 1``
    contiguously, in offset order."""

    start: int
    clock: Clock
    lock_ms: int = 30_000
    delivery_limit: int = 5
    max_in_flight: int = 2_000
    runs: list[Run] = field(default_factory=list)
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

    def _run_at(self, offset: int) -> Run | None:
        if not self.start <= offset < self.end:
            return None
        return self.runs[bisect_right(self.runs, offset, key=_first) - 1]

    def state_of(self, offset: int) -> RecordState:
        if offset < self.start:
            return RecordState.ACKNOWLEDGED
        run = self._run_at(offset)
        return RecordState.AVAILABLE if run is None else run.state

    def delivery_count(self, offset: int) -> int:
        run = self._run_at(offset)
        return 0 if run is None else run.delivery_count

    @property
    def in_flight(self) -> int:
        """Records in the window not yet done (Available inside the window, or Acquired)."""
        return sum(r.size for r in self.runs if r.state in _LIVE)

    @property
    def acquired(self) -> int:
        return sum(r.size for r in self.runs if r.state is RecordState.ACQUIRED)

    def next_fetch_offset(self) -> int | None:
        """Where a fetch should read from: the first Available record of the window, else
        its end; None when the window is full of records still to be acknowledged."""
        self.expire_locks()
        for r in self.runs:
            if r.state is RecordState.AVAILABLE:
                return r.first
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
        for r in self.runs:
            if r.state is RecordState.ACQUIRED:
                if r.deadline <= now:
                    self._release(r)
                    n += r.size
                else:
                    soonest = min(soonest, r.deadline)
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
        out: list[Acquired] = []
        count = 0
        expected = fetch_offset
        runs = self.runs
        for b in batches:
            gap_from = max(expected, self.end)
            if b.first > gap_from:
                # Offsets no batch holds (compacted away): nothing to deliver there.
                self._archive_range(gap_from, b.first - 1)
            expected = b.last + 1
            if count >= max_records:
                break
            first = max(b.first, self.start)
            # Inside the window: range by range (some may be held or done).
            in_last = min(b.last, self.end - 1)
            if first <= in_last:
                i, j = self._split(first), self._split(in_last + 1)
                for r in runs[i:j]:
                    if r.state is not RecordState.AVAILABLE:
                        continue
                    if b.skip:
                        r.state = RecordState.ARCHIVED
                        continue
                    r.state = RecordState.ACQUIRED
                    r.delivery_count += 1
                    r.member = member
                    r.deadline = deadline
                    _add_range(out, r.first, r.last, r.delivery_count)
                    count += r.size
            # Past the window's end: new records, first delivery, one range for the batch.
            lo = max(first, self.end)
            hi = min(b.last, self.start + self.max_in_flight - 1)
            if lo > hi:
                continue
            if b.skip:
                runs.append(Run(lo, hi, RecordState.ARCHIVED))
            else:
                prev = runs[-1] if runs else None
                if (
                    prev is not None
                    and prev.last == lo - 1
                    and prev.state is RecordState.ACQUIRED
                    and prev.delivery_count == 1
                    and prev.member == member
                    and prev.deadline == deadline
                ):
                    prev.last = hi  # acquired by this same call: one range
                else:
                    runs.append(Run(lo, hi, RecordState.ACQUIRED, 1, member, deadline))
                _add_range(out, lo, hi, 1)
                count += hi - lo + 1
            self.end = hi + 1
        if count:
            self.next_expiry = min(self.next_expiry, deadline)
        self._advance()
        return out

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
            if t not in (AckType.GAP, AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW):
                raise InvalidRequestError(f"unknown acknowledge type {t}")
        self.expire_locks()
        if first < self.start or last >= self.end:
            off = first if first < self.start else max(first, self.end)
            raise InvalidRecordStateError(
                f"offset {off} is not acquired by member {member} (state {self.state_of(off).name})"
            )
        # Splitting changes no state: a failed check below still leaves the window as it was.
        i, j = self._split(first), self._split(last + 1)
        for r in self.runs[i:j]:
            if r.state is RecordState.ACQUIRED and r.member == member:
                continue
            kinds = types if len(types) == 1 else types[r.first - first : r.last - first + 1]
            if r.state is RecordState.ARCHIVED and all(k == AckType.GAP for k in kinds):
                continue
            raise InvalidRecordStateError(
                f"offset {r.first} is not acquired by member {member} (state {r.state.name})"
            )
        if len(types) == 1:
            self._apply(i, j, types[0])
        else:
            # Runs of equal types, each applied to its own (split) ranges.
            at = first
            for kind, group in groupby(types):
                size = sum(1 for _ in group)
                a, b = self._split(at), self._split(at + size)
                self._apply(a, b, kind)
                at += size
        self._advance()

    def release_member(self, member: str) -> int:
        """Everything ``member`` holds goes back (its session closed, it left the group)."""
        n = 0
        for r in self.runs:
            if r.state is RecordState.ACQUIRED and r.member == member:
                self._release(r)
                n += r.size
        self._advance()
        return n

    def move_start(self, offset: int) -> None:
        """The log's start moved past the window (retention, DeleteRecords), or an operator
        reset the start (AlterShareGroupOffsets): records below ``offset`` are done."""
        if offset >= self.end:
            self.runs.clear()
            self.end = offset
        elif offset > self.start:
            del self.runs[: self._split(offset)]
        self.start = offset
        self._advance()

    def drain_archived(self) -> list[Archived]:
        out, self.archived = self.archived, []
        return out

    # -- persistence (ShareSnapshot) -----------------------------------------------------

    def snapshot(self) -> list[StateBatch]:
        """The window as state batches. An Acquired record is persisted Available with its
        in-flight delivery not counted, as KIP-932 specifies ("an Acquired record with a
        delivery count of 1 is recorded as Available with a delivery count of 0"): the
        acquisition is transient, a lock does not survive the broker that granted it, and
        a leader crash loses the memory of that delivery."""
        out: list[StateBatch] = []
        for r in self.runs:
            state, count = r.state, r.delivery_count
            if state is RecordState.ACQUIRED:
                state, count = RecordState.AVAILABLE, count - 1
            if out and out[-1].state is state and out[-1].delivery_count == count:
                out[-1] = StateBatch(out[-1].first, r.last, state, count)
            else:
                out.append(StateBatch(r.first, r.last, state, count))
        return out

    def restore(self, start: int, batches: Iterable[StateBatch]) -> None:
        self.runs.clear()
        self.start = self.end = start
        for b in sorted(batches, key=lambda b: b.first):
            first = max(b.first, self.end)
            if b.last < first:
                continue
            if first > self.end:  # offsets no batch names: Available, never delivered
                self.runs.append(Run(self.end, first - 1, RecordState.AVAILABLE))
            self.runs.append(Run(first, b.last, b.state, b.delivery_count))
            self.end = b.last + 1
        self._advance()

    # -- internals ---------------------------------------------------------------------

    def _split(self, offset: int) -> int:
        """The index of the run starting at ``offset`` (splitting the run holding it);
        ``len(runs)`` at or past the end, 0 at or before the start."""
        runs = self.runs
        if offset >= self.end:
            return len(runs)
        if offset <= self.start:
            return 0
        i = bisect_right(runs, offset, key=_first) - 1
        r = runs[i]
        if r.first == offset:
            return i
        runs.insert(i + 1, Run(offset, r.last, r.state, r.delivery_count, r.member, r.deadline))
        r.last = offset - 1
        return i + 1

    def _apply(self, i: int, j: int, kind: int) -> None:
        if kind == AckType.RENEW:
            deadline = self.clock() + self.lock_ms
            for r in self.runs[i:j]:
                r.deadline = deadline
            self.next_expiry = min(self.next_expiry, deadline)
            return
        for r in self.runs[i:j]:
            if kind == AckType.ACCEPT:
                r.state = RecordState.ACKNOWLEDGED
            elif kind == AckType.RELEASE:
                self._release(r)
                continue
            else:
                if kind == AckType.REJECT:
                    self.archived.extend(Archived(o, r.delivery_count) for o in range(r.first, r.last + 1))
                r.state = RecordState.ARCHIVED
            r.member = None
            r.deadline = 0.0

    def _release(self, r: Run) -> None:
        r.member = None
        r.deadline = 0.0
        if r.delivery_count >= self.delivery_limit:
            r.state = RecordState.ARCHIVED
            self.archived.extend(Archived(o, r.delivery_count) for o in range(r.first, r.last + 1))
        else:
            r.state = RecordState.AVAILABLE

    def _archive_range(self, first: int, last: int) -> None:
        """Offsets no batch holds, from ``first`` (at or past the window's end)."""
        if last - self.start >= self.max_in_flight:
            last = self.start + self.max_in_flight - 1
        if last < first:
            return
        if first > self.end:
            self.runs.append(Run(self.end, first - 1, RecordState.AVAILABLE))
        self.runs.append(Run(max(first, self.end), last, RecordState.ARCHIVED))
        self.end = last + 1

    def _advance(self) -> None:
        runs = self.runs
        k = 0
        while k < len(runs) and runs[k].state in _DONE:
            k += 1
        if k:
            self.start = runs[k - 1].last + 1
            del runs[:k]


def _first(r: Run) -> int:
    return r.first


def _add_range(runs: list[Acquired], first: int, last: int, delivery_count: int) -> None:
    """Append an acquired range, merged with the previous one when contiguous and alike."""
    if runs and runs[-1].last == first - 1 and runs[-1].delivery_count == delivery_count:
        runs[-1] = Acquired(runs[-1].first, last, delivery_count)
    else:
        runs.append(Acquired(first, last, delivery_count))
