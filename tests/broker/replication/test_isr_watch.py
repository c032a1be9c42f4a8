"""The leader's ISR expiry check without a periodic walk of every session partition
(issue 35): which partitions the check looks at (``ReplicaManager.check_isr``), and the
caught-up time a quiet session partition falls back on when its log end moves
(``LeaderState.end_moved`` with the session's last fetch, ``ReplicaWakeups.stated_at``).

Pure logic over a stand-in log and a fake clock (the cluster tests run the real thing):
a follower that stopped fetching is still dropped from the ISR once an append leaves it
behind for replica.lag.time.max.ms (at once if it stopped longer ago than that, as
Kafka's lastCaughtUpTimeMs has it), a lagging one too, and one whose session keeps
fetching stays however long its partition was quiet."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.fetch_sessions import Session, SessionPartition
from broker.partition_replica import PartitionReplica, Role
from broker.replica_manager import ReplicaManager
from broker.replica_wakeups import ReplicaWakeups
from broker.replication.leader_state import LeaderState

LAG = 30_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@dataclass
class _Config:
    fsync_mode: bool = False
    min_insync_replicas: int = 2


@dataclass
class StandInLog:
    """What the leader side reads of a log here."""

    log_end_offset: int = 0
    high_watermark: int = 0
    hw_follows_end: bool = False
    config: _Config = field(default_factory=_Config)

    def set_high_watermark(self, hw: int) -> None:
        self.high_watermark = hw


class Harness:
    """A ReplicaManager's ISR bookkeeping for one partition led by broker 1, followers 2
    and 3 in the ISR, each with a fetch session holding the partition."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.lg = StandInLog()
        rm = ReplicaManager.__new__(ReplicaManager)
        rm._isr_watch = set()
        rm.wakeups = ReplicaWakeups(view=None)  # type: ignore[arg-type]
        self.proposed: list[frozenset[int]] = []

        def propose(rep: PartitionReplica, isr: frozenset[int], why: str) -> None:
            self.proposed.append(isr)

        rm._propose_isr = propose  # type: ignore[method-assign]
        self.rm = rm
        self.rep = PartitionReplica("t", 0, self.lg)  # type: ignore[arg-type]
        self.rep.role = Role.LEADER
        self.rep.leader_epoch = 7
        self.leader = LeaderState(
            leader_id=1,
            leader_epoch=7,
            replicas=(1, 2, 3),
            isr=(1, 2, 3),
            leader_epoch_start_offset=0,
            high_watermark=0,
            replica_lag_time_max_ms=LAG,
            min_insync_replicas=2,
            clock=self.clock,
        )
        self.rep.leader = self.leader
        rm._isr_watch.add(self.rep)  # led anew
        self.sessions = {b: Session(session_id=b, replica=True, epoch=1) for b in (2, 3)}

    def append(self, n: int = 1) -> None:
        self.lg.log_end_offset += n
        self.rm.appended(self.rep)

    def fetch(self, b: int, offset: int | None = None) -> None:
        """Follower ``b`` fetches at ``offset`` (its log end; default: the leader's)."""
        at = self.lg.log_end_offset if offset is None else offset
        self.sessions[b].partitions[("t", 0)] = SessionPartition(at, 1 << 20, current_leader_epoch=7)
        self.leader.record_fetch(b, at, self.lg.log_end_offset)
        self.rm.maybe_advance_hw(self.rep)

    def idle_session_fetch(self, b: int) -> None:
        """An incremental fetch of ``b``'s session that leaves the partition out (quiet)."""
        self.rm.wakeups.session_seen(b, self.sessions[b], self.clock.now)

    def advance(self, ms: int) -> None:
        self.clock.now += ms

    @property
    def watched(self) -> bool:
        return self.rep in self.rm._isr_watch


def _harness(**kw: Any) -> Harness:
    return Harness(**kw)


def test_an_idle_partition_leaves_the_watch_and_an_append_brings_it_back() -> None:
    h = _harness()
    h.append(5)
    h.fetch(2)
    h.fetch(3)
    h.rm.check_isr()
    assert not h.watched and h.proposed == []  # every ISR follower at the log end
    h.append()
    assert h.watched
    h.fetch(2)
    h.fetch(3)
    h.rm.check_isr()
    assert not h.watched


def test_followers_that_never_fetched_keep_a_new_leadership_watched_and_are_dropped() -> None:
    h = _harness()
    h.rm.check_isr()
    assert h.watched and h.proposed == []  # caught up "now" at the election, for LAG
    h.advance(LAG + 1)
    h.rm.check_isr()
    assert h.proposed == [frozenset({1})]


def test_a_stopped_follower_is_dropped_after_an_append_with_no_walk() -> None:
    """Follower 3 stops fetching on an idle partition: nothing happens (it is at the log
    end, as in Kafka, and the controller fences a dead broker); the first append leaves it
    behind, and the check drops it once replica.lag.time.max.ms has passed since."""
    h = _harness()
    h.append(10)
    h.fetch(2)
    h.fetch(3)
    h.rm.check_isr()
    for _ in range(8):  # minutes of quiet: only follower 2's session keeps fetching
        h.advance(LAG // 2)
        h.idle_session_fetch(2)
        h.rm.check_isr()
        assert h.proposed == []
    h.idle_session_fetch(2)
    h.advance(100)
    h.append()
    h.fetch(2, 10)  # woken by the append: at the old end, then caught up
    h.fetch(2)
    # 3 was last caught up at its last fetch, minutes ago (Kafka's lastCaughtUpTimeMs):
    # the first check after the append drops it.
    h.rm.check_isr()
    assert h.proposed == [frozenset({1, 2})]


def test_a_follower_stopped_just_before_an_append_is_dropped_after_the_lag_time() -> None:
    h = _harness()
    h.append(10)
    h.fetch(2)
    h.fetch(3)
    h.advance(1000)
    h.idle_session_fetch(2)
    h.idle_session_fetch(3)  # its last fetch; then it stops
    h.advance(100)
    h.append()
    h.fetch(2)
    h.rm.check_isr()
    assert h.proposed == [] and h.watched
    h.advance(LAG // 2)
    h.rm.check_isr()
    assert h.proposed == [] and h.watched
    h.advance(LAG // 2)
    h.rm.check_isr()
    assert h.proposed == [frozenset({1, 2})]


def test_a_quiet_session_follower_is_caught_up_as_of_its_last_session_fetch() -> None:
    """After minutes of quiet, an append; the follower's first fetch after it states the
    old end (it was parked): caught up as of its last session fetch, not as of the fetch
    recorded minutes ago, so a check between its two fetches keeps it."""
    h = _harness()
    h.append(10)
    h.fetch(2)
    h.fetch(3)
    for _ in range(10):
        h.advance(LAG // 2)
        h.idle_session_fetch(2)
        h.idle_session_fetch(3)
    h.advance(200)
    h.append()
    h.fetch(2, 10)
    h.fetch(3, 10)
    h.rm.check_isr()
    assert h.proposed == []
    st = h.leader.follower(2)
    assert st is not None and h.clock.now - st.last_caught_up_ms == 200


def test_without_a_session_fetch_since_the_old_caught_up_time_stands() -> None:
    """The session's last fetch must be later than the recorded one, at the same offset,
    in this leader epoch: otherwise nothing is restated."""
    h = _harness()
    h.append(10)
    h.fetch(2)
    h.fetch(3)
    h.idle_session_fetch(3)
    h.sessions[3].partitions[("t", 0)].current_leader_epoch = 6  # an older epoch's statement
    h.advance(LAG + 1)
    h.append()
    h.fetch(2, 10)
    h.fetch(3, 10)
    h.rm.check_isr()
    assert h.proposed == [frozenset({1})]


def test_a_lagging_follower_stays_watched_until_dropped() -> None:
    h = _harness()
    h.append(10)
    h.fetch(2)
    h.fetch(3)
    for _ in range(4):  # a steady stream; follower 3 keeps fetching but never gets past 10
        h.advance(LAG // 3)
        h.append(5)
        h.fetch(2)
        h.fetch(3, 10)
        h.rm.check_isr()
        if h.proposed:
            break
    assert h.proposed == [frozenset({1, 2})]
