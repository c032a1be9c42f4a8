"""Leader-side replication state (pure logic, fake clock): Kafka's caught-up rule, ISR
shrink and expand candidates, the high watermark over the (maximal) ISR, acks=all checks
and leader-epoch fencing."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.replication.leader_state import (
    ACKS_ALL,
    UNKNOWN_OFFSET,
    LeaderState,
    check_current_leader_epoch,
)
from hot.errors import (
    FencedLeaderEpochError,
    InvalidRequestError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)

LAG = 10_000


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def leader(
    clock: Clock,
    *,
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] = (1, 2, 3),
    hw: int = 0,
    epoch_start: int = 0,
    min_isr: int = 2,
    eligible: set[int] | None = None,
) -> LeaderState:
    return LeaderState(
        leader_id=1,
        leader_epoch=5,
        replicas=replicas,
        isr=isr,
        leader_epoch_start_offset=epoch_start,
        high_watermark=hw,
        replica_lag_time_max_ms=LAG,
        min_insync_replicas=min_isr,
        clock=clock,
        is_eligible=None if eligible is None else eligible.__contains__,
    )


# --- construction ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "isr", "match"),
    [
        ((2, 3), (2,), "not one of the replicas"),
        ((1, 2, 2), (1,), "duplicates"),
        ((1, 2, 3), (2, 3), "must hold the leader"),
        ((1, 2), (1, 4), "only replicas"),
    ],
)
def test_invalid_assignments(replicas: tuple[int, ...], isr: tuple[int, ...], match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        leader(Clock(), replicas=replicas, isr=isr)


def test_invalid_settings() -> None:
    with pytest.raises(InvalidRequestError, match=r"min\.insync\.replicas"):
        leader(Clock(), min_isr=0)


def test_initial_state() -> None:
    clock = Clock()
    state = leader(clock, isr=(1, 2), hw=40)
    assert state.isr == frozenset({1, 2}) and state.maximal_isr == state.isr and state.pending_isr is None
    assert state.high_watermark == 40 and state.under_replicated
    f2, f3 = state.follower(2), state.follower(3)
    assert f2 is not None and f3 is not None and state.follower(1) is None
    assert f2.log_end_offset == UNKNOWN_OFFSET and f2.last_caught_up_ms == clock.now
    assert f3.last_caught_up_ms < 0  # never caught up
    assert set(state.followers()) == {2, 3}


# --- the caught-up rule and shrinking -------------------------------------------------------------


def test_fetching_to_the_leader_end_is_caught_up_now() -> None:
    clock = Clock()
    state = leader(clock)
    clock.advance(LAG * 3)
    assert state.record_fetch(2, 100, 100)
    assert state.follower(2).last_caught_up_ms == clock.now  # type: ignore[union-attr]
    assert state.shrink_candidates(100) == {3}


def test_keeping_up_with_a_busy_leader_stays_in_sync() -> None:
    """The follower never equals the leader's end, but each fetch reaches the end the
    leader had at its previous fetch: caught up as of that previous fetch."""
    clock = Clock()
    state = leader(clock)
    leo = 0
    for _ in range(50):
        fetch_at = leo  # everything the previous fetch returned
        leo += 10  # the leader appended meanwhile
        state.record_fetch(2, fetch_at, leo)
        state.record_fetch(3, 0 if leo > 30 else fetch_at, leo)  # 3 stopped making progress
        clock.advance(LAG // 4)
        assert 2 not in state.shrink_candidates(leo)
    assert state.shrink_candidates(leo) == {3}
    last = state.follower(2)
    assert last is not None and clock.now - last.last_caught_up_ms <= LAG


def test_a_follower_at_the_leader_end_is_in_sync_however_long_ago_it_fetched() -> None:
    clock = Clock()
    state = leader(clock)
    state.record_fetch(2, 50, 50)
    state.record_fetch(3, 50, 50)
    clock.advance(LAG * 10)
    assert state.shrink_candidates(50) == set()
    assert state.shrink_candidates(51) == {2, 3}  # a new write: now they lag


def test_lag_is_measured_from_the_last_catch_up() -> None:
    clock = Clock()
    state = leader(clock)
    state.record_fetch(2, 10, 10)  # caught up at t0
    clock.advance(LAG)
    state.record_fetch(2, 10, 30)  # behind; its previous fetch's leader end was 10: caught up as of t0
    assert 2 not in state.shrink_candidates(30)
    clock.advance(1)
    assert 2 in state.shrink_candidates(30)


def test_unknown_broker_and_bad_offsets() -> None:
    state = leader(Clock())
    assert not state.record_fetch(9, 0, 10)
    with pytest.raises(OffsetOutOfRangeError, match="leader log end is 10"):
        state.record_fetch(2, 11, 10)
    with pytest.raises(OffsetOutOfRangeError):
        state.record_fetch(2, -1, 10)


# --- the high watermark ------------------------------------------------------------------------------


def test_high_watermark_is_the_minimum_over_the_isr() -> None:
    clock = Clock()
    state = leader(clock, hw=0)
    assert state.maybe_increment_high_watermark(100) is None  # followers unknown: it waits
    state.record_fetch(2, 80, 100)
    assert state.maybe_increment_high_watermark(100) is None  # 3 still unknown
    state.record_fetch(3, 60, 100)
    assert state.maybe_increment_high_watermark(100) == 60
    state.record_fetch(3, 100, 100)
    assert state.maybe_increment_high_watermark(100) == 80
    assert state.maybe_increment_high_watermark(100) is None
    state.record_fetch(2, 100, 120)
    assert state.maybe_increment_high_watermark(90) == 90  # the leader's own end bounds it
    assert state.high_watermark == 90
    state.record_fetch(2, 50, 120)  # a follower going back (it truncated) never lowers it
    assert state.maybe_increment_high_watermark(120) is None and state.high_watermark == 90


def test_out_of_sync_followers_do_not_hold_the_high_watermark() -> None:
    clock = Clock()
    state = leader(clock, isr=(1, 2))
    state.record_fetch(2, 100, 100)
    state.record_fetch(3, 10, 100)  # outside the ISR and never caught up
    assert state.maybe_increment_high_watermark(100) == 100


def test_a_caught_up_follower_about_to_join_holds_the_high_watermark() -> None:
    """Kafka's shouldWaitForReplicaToJoinIsr: so that it can meet the join condition."""
    clock = Clock()
    state = leader(clock, isr=(1, 2))
    state.record_fetch(2, 100, 100)
    state.record_fetch(3, 100, 100)  # caught up now, not yet in the ISR
    state.record_fetch(3, 100, 130)
    state.record_fetch(2, 130, 130)
    assert state.maybe_increment_high_watermark(130) == 100
    ineligible = leader(Clock(), isr=(1, 2), eligible={2})
    ineligible.record_fetch(2, 100, 100)
    ineligible.record_fetch(3, 40, 100)
    ineligible.record_fetch(3, 100, 130)
    ineligible.record_fetch(2, 130, 130)
    assert ineligible.maybe_increment_high_watermark(130) == 130


def test_pending_isr_changes_count_for_the_high_watermark() -> None:
    clock = Clock()
    state = leader(clock, isr=(1, 2))
    state.record_fetch(2, 100, 100)
    clock.advance(LAG * 2)
    state.record_fetch(3, 70, 100)
    state.propose_isr({1, 2, 3})  # adding 3: it counts at once
    assert state.maximal_isr == {1, 2, 3}
    assert state.maybe_increment_high_watermark(100) == 70
    state.commit_isr({1, 2, 3})
    state.propose_isr({1, 3})  # removing 2: it still counts until committed
    state.record_fetch(3, 100, 100)
    state.record_fetch(2, 90, 100)
    assert state.maybe_increment_high_watermark(100) == 90
    state.commit_isr({1, 3})
    assert state.maybe_increment_high_watermark(100) == 100


# --- ISR changes -------------------------------------------------------------------------------------


def test_expand_needs_the_high_watermark_and_the_epoch_start() -> None:
    clock = Clock()
    state = leader(clock, isr=(1, 2), hw=50, epoch_start=60)
    assert state.expand_candidates() == set()  # 3 has not fetched
    state.record_fetch(3, 55, 100)
    assert not state.can_join_isr(3)  # >= HW but below what this leader wrote as leader
    state.record_fetch(3, 60, 100)
    assert state.expand_candidates() == {3}
    assert not state.can_join_isr(2)  # already in
    assert not state.can_join_isr(7)
    blocked = leader(Clock(), isr=(1, 2), hw=50, eligible={1, 2})
    blocked.record_fetch(3, 100, 100)
    assert blocked.expand_candidates() == set()


def test_isr_change_protocol() -> None:
    clock = Clock()
    state = leader(clock)
    clock.advance(LAG + 1)
    state.record_fetch(2, 10, 10)
    assert state.shrink_candidates(10) == {3}
    state.propose_isr({1, 2})
    assert state.shrink_candidates(10) == set() and state.expand_candidates() == set()
    with pytest.raises(InvalidRequestError, match="already pending"):
        state.propose_isr({1})
    state.abort_isr_change()  # the compare failed
    assert state.isr == {1, 2, 3} and state.pending_isr is None
    state.propose_isr({1, 2})
    state.commit_isr({1, 2})
    assert state.isr == {1, 2} and state.under_replicated
    with pytest.raises(InvalidRequestError, match="must hold the leader"):
        state.propose_isr({2, 3})
    with pytest.raises(InvalidRequestError, match="only replicas"):
        state.propose_isr({1, 9})
    with pytest.raises(InvalidRequestError):
        state.commit_isr({2})


def test_reassignment_adds_a_never_caught_up_follower() -> None:
    clock = Clock()
    state = leader(clock, replicas=(1, 2), isr=(1, 2))
    state.record_fetch(2, 10, 10)
    state.update_replicas((1, 2, 4))
    f4 = state.follower(4)
    assert f4 is not None and f4.log_end_offset == UNKNOWN_OFFSET and f4.last_caught_up_ms < 0
    assert state.follower(2) is not None and state.follower(2).log_end_offset == 10  # type: ignore[union-attr]
    state.record_fetch(4, 10, 10)
    assert state.expand_candidates() == {4}
    with pytest.raises(InvalidRequestError):
        state.update_replicas((2, 4))


# --- acks=all --------------------------------------------------------------------------------------------


def test_acks_all_refused_before_the_append_below_min_isr() -> None:
    state = leader(Clock(), isr=(1,), min_isr=2)
    with pytest.raises(NotEnoughReplicasError, match=r"min\.insync\.replicas is 2"):
        state.check_before_append(ACKS_ALL)
    state.check_before_append(1)  # acks=1 and 0 do not care
    state.check_before_append(0)
    leader(Clock(), isr=(1, 2), min_isr=2).check_before_append(ACKS_ALL)


def test_acks_all_completes_when_every_isr_member_has_it() -> None:
    clock = Clock()
    state = leader(clock, min_isr=2)
    state.check_before_append(ACKS_ALL)
    # The leader appended offsets [0, 10): the produce waits for offset 10.
    assert not state.acks_all_complete(10)
    state.record_fetch(2, 10, 10)
    state.maybe_increment_high_watermark(10)
    assert not state.acks_all_complete(10)  # 3 is still in the ISR and lacks it
    state.record_fetch(3, 10, 10)
    state.maybe_increment_high_watermark(10)
    assert state.acks_all_complete(10)


def test_acks_all_after_the_isr_shrank_below_the_minimum() -> None:
    clock = Clock()
    state = leader(clock, isr=(1, 2), min_isr=2)
    state.record_fetch(2, 5, 10)
    clock.advance(LAG + 1)
    state.propose_isr({1})
    state.commit_isr({1})
    state.maybe_increment_high_watermark(10)
    with pytest.raises(NotEnoughReplicasAfterAppendError, match="shrank below"):
        state.acks_all_complete(10)
    with pytest.raises(NotEnoughReplicasError):
        state.check_before_append(ACKS_ALL)


# --- fencing --------------------------------------------------------------------------------------------


def test_current_leader_epoch_fencing() -> None:
    check_current_leader_epoch(-1, 7)
    check_current_leader_epoch(7, 7)
    with pytest.raises(FencedLeaderEpochError, match="older"):
        check_current_leader_epoch(6, 7)
    with pytest.raises(UnknownLeaderEpochError, match="newer"):
        check_current_leader_epoch(8, 7)


# --- hypothesis: invariants under arbitrary fetch / append / time interleavings -------------------------

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 20)),
        st.tuples(st.just("fetch2"), st.integers(0, 100)),
        st.tuples(st.just("fetch3"), st.integers(0, 100)),
        st.tuples(st.just("time"), st.integers(0, LAG)),
        st.tuples(st.just("shrink"), st.just(0)),
        st.tuples(st.just("expand"), st.just(0)),
    ),
    max_size=60,
)


@settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=STEPS)
def test_invariants(steps: list[tuple[str, int]]) -> None:
    clock = Clock()
    state = leader(clock, min_isr=2)
    leo = 0
    logs = {2: 0, 3: 0}  # each follower's log end; it fetches from it
    hws = [state.high_watermark]
    for op, n in steps:
        if op == "append":
            leo += n
        elif op in ("fetch2", "fetch3"):
            f = int(op[-1])
            # A fetch returns some of what the leader has beyond the follower's end.
            state.record_fetch(f, logs[f], leo)
            logs[f] = min(leo, logs[f] + n)
        elif op == "time":
            clock.advance(n)
        elif op == "shrink":
            out = state.shrink_candidates(leo)
            if out and len(state.isr - out) >= 1:
                state.propose_isr(state.isr - out)
                state.commit_isr(state.isr - out)
        else:
            join = state.expand_candidates()
            if join:
                state.propose_isr(state.isr | join)
                state.commit_isr(state.isr | join)
        new = state.maybe_increment_high_watermark(leo)
        hw = state.high_watermark
        assert new is None or new == hw
        assert hw >= hws[-1] and hw <= leo  # monotonic, never past the leader
        for f in state.isr - {1}:
            known = state.follower(f)
            assert known is not None
            if new is not None:
                # Every ISR member has everything below a freshly raised high watermark.
                assert known.log_end_offset >= hw
        hws.append(hw)
        assert state.leader_id in state.isr
        # acks=all done means every ISR member reported having it.
        if len(state.maximal_isr) >= 2 and state.acks_all_complete(hw) and new is not None:
            assert all(state.follower(f).log_end_offset >= hw for f in state.isr - {1})  # type: ignore[union-attr]
