"""The leader's replication state of one partition: followers, ISR, high watermark, acks.

Pure logic with an injectable millisecond clock; the caller serializes access and owns
the log (it passes the leader's log end offset in, and applies the high watermark this
returns with ``Log.set_high_watermark``). In ``fsync`` flush mode the caller passes the
leader's flushed offset as its log end, so an acknowledged record is on the leader's
disk as well as in every in-sync follower's log.

Kafka's rules (Partition and Replica, Kafka 3.x):

* A follower's log end offset is the fetch offset of its latest Fetch (it fetches from
  where its log ends). Unknown (-1) until it has fetched from this leader.
* Caught up: a fetch at time t whose offset reaches the leader's log end as of now
  makes the follower caught up at t; one that reaches the leader's log end as of the
  follower's previous fetch makes it caught up as of that previous fetch. So a follower
  that keeps up with a busy leader stays caught up although it never equals its end.
* Shrink: an ISR follower is out of sync when its log end differs from the leader's and
  it was last caught up more than ``replica.lag.time.max.ms`` ago.
* Expand: a follower outside the ISR may join once its log end is at least the high
  watermark and at least the start offset of the leader's epoch (it holds everything
  this leader wrote as leader).
* High watermark: the minimum log end over the leader and the *maximal* ISR (the ISR
  plus a pending addition; a pending removal still counts until committed) and any
  caught-up follower about to join; it never decreases.
* acks=all: refused before the append (NotEnoughReplicasError) when the ISR is smaller
  than ``min.insync.replicas``; complete once the high watermark passes the batch;
  NotEnoughReplicasAfterAppendError if the maximal ISR then is below the minimum.

ISR changes are two-phase: ``propose_isr`` (the caller writes it to the metadata store
with a compare on the leader epoch) then ``commit_isr`` or ``abort_isr_change``; while a
change is pending no other is proposed, as in Kafka's AlterPartition flow.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hot.errors import (
    FencedLeaderEpochError,
    InvalidRequestError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)

UNKNOWN_OFFSET = -1
NEVER = -(1 << 62)  # last caught-up time of a follower that never was (any clock origin)
NO_EPOCH_CHECK = -1  # current_leader_epoch of clients that do not fence
ACKS_ALL = -1

Clock = Callable[[], int]


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def check_current_leader_epoch(requested: int, current: int) -> None:
    """Fencing of Fetch / OffsetForLeaderEpoch / ListOffsets (KIP-320): a request naming an
    older epoch than the leader's is FencedLeaderEpochError (its sender has stale
    metadata), a newer one UnknownLeaderEpochError (this broker has not caught up yet);
    -1 means the sender does not fence."""
    if requested == NO_EPOCH_CHECK:
        return
    if requested < current:
        raise FencedLeaderEpochError(f"leader epoch {requested} is older than the current epoch {current}")
    if requested > current:
        raise UnknownLeaderEpochError(f"leader epoch {requested} is newer than the current epoch {current}")


@dataclass(frozen=True, slots=True)
class FollowerState:
    """What the leader knows of one follower (a snapshot)."""

    broker_id: int
    log_end_offset: int  # -1 until it fetched from this leader
    log_start_offset: int
    last_fetch_ms: int
    last_fetch_leader_end_offset: int  # the leader's log end at the follower's last fetch
    last_caught_up_ms: int

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_ms <= max_lag_ms


class LeaderState:
    """One partition led by ``leader_id`` in ``leader_epoch`` (a new instance per epoch:
    followers' progress is not carried over, as in Kafka's makeLeader)."""

    def __init__(
        self,
        *,
        leader_id: int,
        leader_epoch: int,
        replicas: Sequence[int],
        isr: Iterable[int],
        leader_epoch_start_offset: int,
        high_watermark: int,
        replica_lag_time_max_ms: int,
        min_insync_replicas: int,
        clock: Clock = monotonic_ms,
        is_eligible: Callable[[int], bool] | None = None,
    ) -> None:
        """``leader_epoch_start_offset`` is the leader's log end when it took the epoch,
        ``high_watermark`` its log's current one. ``is_eligible(broker)`` says whether a
        broker may join the ISR (e.g. not shutting down); by default every one may."""
        isr_set = frozenset(isr)
        if len(set(replicas)) != len(replicas):
            raise InvalidRequestError(f"replica list {list(replicas)} has duplicates")
        if leader_id not in replicas:
            raise InvalidRequestError(f"leader {leader_id} is not one of the replicas {list(replicas)}")
        if leader_id not in isr_set or not isr_set <= set(replicas):
            raise InvalidRequestError(
                f"ISR {sorted(isr_set)} must hold the leader {leader_id} and only replicas {list(replicas)}"
            )
        if replica_lag_time_max_ms < 0 or min_insync_replicas < 1:
            raise InvalidRequestError(
                f"bad replica.lag.time.max.ms {replica_lag_time_max_ms} or "
                f"min.insync.replicas {min_insync_replicas}"
            )
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = leader_epoch_start_offset
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.min_insync_replicas = min_insync_replicas
        self._clock = clock
        self._eligible = is_eligible
        self._hw = high_watermark
        self._isr = isr_set
        self._pending: frozenset[int] | None = None
        self._replicas: tuple[int, ...] = tuple(replicas)
        # The leader's log end as of the last ``end_moved`` (or fetch that saw it).
        self._end = leader_epoch_start_offset
        now = clock()
        # In-sync followers start caught up now, the others never were (Kafka's resetReplicaState).
        self._followers: dict[int, FollowerState] = {
            r: self._fresh(r, now if r in isr_set else NEVER) for r in replicas if r != leader_id
        }

    @staticmethod
    def _fresh(broker: int, caught_up_ms: int) -> FollowerState:
        return FollowerState(broker, UNKNOWN_OFFSET, UNKNOWN_OFFSET, NEVER, UNKNOWN_OFFSET, caught_up_ms)

    # --- views ---------------------------------------------------------------------------------

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._replicas

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR (what the metadata store holds)."""
        return self._isr

    @property
    def pending_isr(self) -> frozenset[int] | None:
        return self._pending

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR plus a pending change's members: what the high watermark waits for."""
        return self._isr if self._pending is None else self._isr | self._pending

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def under_replicated(self) -> bool:
        return len(self._isr) < len(self._replicas)

    def follower(self, broker_id: int) -> FollowerState | None:
        return self._followers.get(broker_id)

    def followers(self) -> dict[int, FollowerState]:
        return dict(self._followers)

    # --- follower fetches ------------------------------------------------------------------------

    def record_fetch(
        self,
        follower_id: int,
        fetch_offset: int,
        leader_log_end_offset: int,
        *,
        follower_log_start_offset: int = UNKNOWN_OFFSET,
    ) -> bool:
        """A Fetch from ``follower_id`` at ``fetch_offset`` while the leader's log ends at
        ``leader_log_end_offset``. Returns False (and changes nothing) for a broker that is
        not a follower of this partition: Kafka answers it with no data. A fetch offset
        beyond the leader's log end is OffsetOutOfRangeError."""
        state = self._followers.get(follower_id)
        if state is None:
            return False
        if fetch_offset < 0 or fetch_offset > leader_log_end_offset:
            raise OffsetOutOfRangeError(
                f"follower {follower_id} fetches at {fetch_offset}, leader log end is {leader_log_end_offset}"
            )
        now = self._clock()
        if leader_log_end_offset > self._end:
            self._end = leader_log_end_offset
        caught_up = state.last_caught_up_ms
        if fetch_offset >= leader_log_end_offset:
            caught_up = max(caught_up, now)
        elif fetch_offset >= state.last_fetch_leader_end_offset >= 0:
            caught_up = max(caught_up, state.last_fetch_ms)
        self._followers[follower_id] = FollowerState(
            follower_id,
            fetch_offset,
            follower_log_start_offset,
            now,
            max(leader_log_end_offset, state.last_fetch_leader_end_offset),
            caught_up,
        )
        return True

    def end_moved(self, leader_log_end_offset: int) -> tuple[tuple[int, int], ...]:
        """The leader's log end moved to ``leader_log_end_offset`` (an append). Returns
        the (follower, offset) of each follower whose last recorded fetch was at the log
        end as it stood until now and is more than a quarter of replica.lag.time.max.ms
        old: if a fetch session stated that offset for it since (its unchanged partitions
        are restated by every session fetch, KIP-227), the caller passes the time of that
        fetch to ``restate``. Until this append the log end stood at that offset since the
        recorded fetch (a leader's log end only grows, and every append reports here), so
        any later fetch at that offset was caught up (issue 35: an idle session partition
        is not recorded on every fetch, and the caught-up time a later append falls back
        on must still be recent)."""
        prev = self._end
        if leader_log_end_offset <= prev:
            return ()
        self._end = leader_log_end_offset
        stale: list[tuple[int, int]] = []
        now: int | None = None
        for b, st in self._followers.items():
            if st.log_end_offset != prev or st.last_fetch_leader_end_offset != prev:
                continue
            if now is None:
                now = self._clock()
            if now - st.last_fetch_ms >= self.replica_lag_time_max_ms // 4:
                stale.append((b, prev))
        return tuple(stale)

    def restate(self, follower_id: int, fetch_offset: int, at_ms: int) -> None:
        """``follower_id`` fetched at ``fetch_offset`` at ``at_ms`` while the leader's log
        ended there (``end_moved`` says when that holds): caught up at ``at_ms``."""
        st = self._followers.get(follower_id)
        if st is None or st.log_end_offset != fetch_offset or at_ms <= st.last_fetch_ms:
            return
        self._followers[follower_id] = FollowerState(
            follower_id,
            fetch_offset,
            st.log_start_offset,
            at_ms,
            max(fetch_offset, st.last_fetch_leader_end_offset),
            max(st.last_caught_up_ms, at_ms),
        )

    def at_end(self, leader_log_end_offset: int) -> bool:
        """Whether every member of the maximal ISR other than the leader was last recorded
        at ``leader_log_end_offset``: no shrink can come of this partition until its log
        end moves (``shrink_candidates``: a follower at the log end is in sync)."""
        maximal = self.maximal_isr
        return all(
            st.log_end_offset == leader_log_end_offset for b, st in self._followers.items() if b in maximal
        )

    # --- high watermark ----------------------------------------------------------------------------

    def maybe_increment_high_watermark(self, leader_log_end_offset: int) -> int | None:
        """The new high watermark if it can move forward, else None (it never moves back).
        It is the minimum log end over the leader, the maximal ISR and caught-up
        followers about to join (Kafka's maybeIncrementLeaderHW); a follower whose log
        end is unknown holds it where it is."""
        now = self._clock()
        hw = leader_log_end_offset
        maximal = self.maximal_isr
        for broker, state in self._followers.items():
            waits = broker in maximal or (
                state.is_caught_up(leader_log_end_offset, now, self.replica_lag_time_max_ms)
                and state.log_end_offset != UNKNOWN_OFFSET
                and self._is_eligible(broker)
            )
            if waits and state.log_end_offset < hw:
                hw = state.log_end_offset
        if hw <= self._hw:
            return None
        self._hw = hw
        return hw

    def follow_high_watermark(self, hw: int) -> None:
        """The log moved the high watermark to ``hw`` itself (led with no follower, so
        ``hw`` is its log end: broker.replica_manager ``_follow_end``); never moves it back."""
        if hw > self._hw:
            self._hw = hw

    def _is_eligible(self, broker: int) -> bool:
        return self._eligible is None or self._eligible(broker)

    # --- ISR changes ----------------------------------------------------------------------------------

    def shrink_candidates(self, leader_log_end_offset: int) -> frozenset[int]:
        """ISR followers out of sync for longer than replica.lag.time.max.ms; empty while an
        ISR change is pending."""
        if self._pending is not None:
            return frozenset()
        now = self._clock()
        return frozenset(
            b
            for b in self._isr
            if b != self.leader_id
            and not self._followers[b].is_caught_up(leader_log_end_offset, now, self.replica_lag_time_max_ms)
        )

    def quiet_fetch(self, follower_id: int, fetch_offset: int, follower_log_start_offset: int) -> bool:
        """Whether recording this fetch would change nothing: an ISR member (no ISR change
        pending) already known at ``fetch_offset`` and ``follower_log_start_offset``, whose
        last recorded fetch is less than a quarter of replica.lag.time.max.ms old. The
        caller also checks the fetch is at the leader's log end; such a fetch may then go
        unrecorded (broker.read_path: an idle follower's session), since the ISR check
        holds a follower at the log end in sync, and the caught-up time a later append
        falls back on is never staler than that quarter."""
        st = self._followers.get(follower_id)
        return (
            st is not None
            and self._pending is None
            and follower_id in self._isr
            and st.log_end_offset == fetch_offset
            and st.log_start_offset == follower_log_start_offset
            and self._clock() - st.last_fetch_ms < self.replica_lag_time_max_ms // 4
        )

    def can_join_isr(self, follower_id: int) -> bool:
        """Whether a follower outside the ISR holds everything this leader committed and
        wrote in its epoch (Kafka's isFollowerInSync)."""
        state = self._followers.get(follower_id)
        if state is None or follower_id in self._isr or not self._is_eligible(follower_id):
            return False
        leo = state.log_end_offset
        return leo != UNKNOWN_OFFSET and leo >= self._hw and leo >= self.leader_epoch_start_offset

    def expand_candidates(self) -> frozenset[int]:
        """Followers outside the ISR that may join it; empty while an ISR change is pending."""
        if self._pending is not None:
            return frozenset()
        return frozenset(b for b in self._followers if self.can_join_isr(b))

    def propose_isr(self, new_isr: Iterable[int]) -> frozenset[int]:
        """Start an ISR change (the caller then writes it, comparing the leader epoch).
        The new ISR must hold the leader and only replicas; one change at a time."""
        proposed = frozenset(new_isr)
        if self._pending is not None:
            raise InvalidRequestError(f"an ISR change to {sorted(self._pending)} is already pending")
        if self.leader_id not in proposed or not proposed <= set(self._replicas):
            raise InvalidRequestError(
                f"ISR {sorted(proposed)} must hold the leader {self.leader_id} and only replicas "
                f"{list(self._replicas)}"
            )
        self._pending = proposed
        return proposed

    def commit_isr(self, isr: Iterable[int]) -> None:
        """The metadata store accepted ``isr`` (normally the pending proposal; whatever it
        holds wins)."""
        committed = frozenset(isr)
        if self.leader_id not in committed or not committed <= set(self._replicas):
            raise InvalidRequestError(
                f"ISR {sorted(committed)} is not valid for replicas {list(self._replicas)}"
            )
        self._isr = committed
        self._pending = None

    def abort_isr_change(self) -> None:
        """The write lost its compare (or failed): the committed ISR stands."""
        self._pending = None

    def update_replicas(self, replicas: Sequence[int]) -> None:
        """The assignment changed within this epoch (reassignment): new replicas start as
        never caught up, removed ones leave the ISR view at the next ``commit_isr``."""
        if self.leader_id not in replicas or len(set(replicas)) != len(replicas):
            raise InvalidRequestError(f"replica list {list(replicas)} must hold the leader once")
        self._replicas = tuple(replicas)
        self._followers = {
            r: self._followers.get(r) or self._fresh(r, NEVER) for r in replicas if r != self.leader_id
        }

    # --- acks=all ----------------------------------------------------------------------------------------

    def check_before_append(self, acks: int) -> None:
        """NotEnoughReplicasError for acks=all when the ISR is below min.insync.replicas."""
        if acks == ACKS_ALL and len(self._isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"ISR {sorted(self._isr)} has {len(self._isr)} replicas, "
                f"min.insync.replicas is {self.min_insync_replicas}"
            )

    def acks_all_complete(self, required_offset: int) -> bool:
        """Whether an acks=all append ending before ``required_offset`` (its last offset + 1)
        is on every ISR member: the high watermark reached it. Raises
        NotEnoughReplicasAfterAppendError if it did but the maximal ISR is now below
        min.insync.replicas (Kafka's checkEnoughReplicasReachOffset)."""
        if self._hw < required_offset:
            return False
        maximal = self.maximal_isr
        if len(maximal) < self.min_insync_replicas:
            raise NotEnoughReplicasAfterAppendError(
                f"ISR {sorted(maximal)} shrank below min.insync.replicas {self.min_insync_replicas} "
                "after the append"
            )
        return True


__all__ = [
    "ACKS_ALL",
    "NEVER",
    "NO_EPOCH_CHECK",
    "UNKNOWN_OFFSET",
    "Clock",
    "FollowerState",
    "LeaderState",
    "check_current_leader_epoch",
    "monotonic_ms",
]
