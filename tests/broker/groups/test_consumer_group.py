"""The KIP-848 consumer-group state machine (broker.groups.consumer_group) and its
assignors (broker.groups.assignors), with a fake clock: epochs, incremental
reconciliation, static members, fencing, regex subscriptions, metadata changes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.groups.assignors import MemberSubscription, range_assignor, uniform
from broker.groups.config import GroupConfig
from broker.groups.consumer_group import (
    ConsumerGroups,
    HeartbeatCall,
    HeartbeatResult,
    MemberState,
)
from broker.groups.timers import Timers
from hot.errors import (
    FencedMemberEpochError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)
from tests.broker.groups.grouplib import FakeClock

SESSION_MS = 45_000
G = "g"


class Image:
    def __init__(self, **topics: int) -> None:
        self.topics = dict(topics)

    def partition_count(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def topic_names(self) -> Iterable[str]:
        return self.topics


class Harness:
    def __init__(self, **topics: int) -> None:
        self.clock = FakeClock()
        self.timers = Timers(self.clock, lambda: None)
        self.groups = ConsumerGroups(GroupConfig(), self.clock, self.timers)
        self.image = Image(**topics)
        self.owned: dict[str, dict[str, frozenset[int]]] = {}
        self.epochs: dict[str, int] = {}

    def join(self, mid: str, *topics: str, regex: str | None = None, **kw: object) -> HeartbeatResult:
        call = HeartbeatCall(
            group_id=G,
            member_id=mid,
            member_epoch=0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=tuple(topics) if regex is None else None,
            subscribed_topic_regex=regex,
            owned={},
            **kw,  # type: ignore[arg-type]
        )
        r = self.groups.heartbeat(call, self.image)
        self._took(r)
        return r

    def beat(self, mid: str, **kw: object) -> HeartbeatResult:
        """A heartbeat reporting what the client owns (it applies every answer at once)."""
        call = HeartbeatCall(
            group_id=G,
            member_id=mid,
            member_epoch=self.epochs[mid],
            owned=self.owned.get(mid, {}),
            **kw,  # type: ignore[arg-type]
        )
        r = self.groups.heartbeat(call, self.image)
        self._took(r)
        return r

    def _took(self, r: HeartbeatResult) -> None:
        self.epochs[r.member_id] = r.member_epoch
        if r.assignment is not None:
            self.owned[r.member_id] = dict(r.assignment)

    def settle(self, rounds: int = 6) -> None:
        for _ in range(rounds):
            for mid in list(self.epochs):
                if self.epochs[mid] >= 0 and mid in self.groups.groups[G].members:
                    self.beat(mid)

    def member(self, mid: str):  # type: ignore[no-untyped-def]
        return self.groups.groups[G].members[mid]


def _flat(a: Mapping[str, frozenset[int]]) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in a.items() for p in ps}


def _exclusive(h: Harness) -> None:
    seen: set[tuple[str, int]] = set()
    group = h.groups.groups.get(G)
    for m in group.members.values() if group is not None else ():
        mine = _flat(m.assigned) | _flat(m.revoking)
        assert not (mine & seen), "a partition owned by two members"
        seen |= mine


def test_single_member_gets_everything_at_the_first_epoch() -> None:
    h = Harness(t=6)
    r = h.join("a", "t")
    assert r.member_epoch == h.groups.groups[G].assignment_epoch > 0
    assert r.assignment == {"t": frozenset(range(6))}
    assert h.groups.groups[G].state.value == "Stable"


def test_second_member_waits_for_revocation_then_gets_its_share() -> None:
    h = Harness(t=6)
    h.join("a", "t")
    r = h.join("b", "t")
    # b's share is still a's: nothing until a revokes it
    assert r.assignment == {}
    assert h.member("b").state is MemberState.UNRELEASED_PARTITIONS
    ra = h.beat("a")
    assert h.member("a").state is MemberState.UNREVOKED_PARTITIONS
    assert len(ra.assignment["t"]) == 3  # type: ignore[index]
    _exclusive(h)
    h.beat("a")  # a reports it gave them up
    assert h.member("a").state is MemberState.STABLE
    rb = h.beat("b")
    assert len(rb.assignment["t"]) == 3  # type: ignore[index]
    assert h.groups.groups[G].state.value == "Stable"
    assert h.epochs["a"] == h.epochs["b"] == h.groups.groups[G].group_epoch


def test_leave_frees_partitions_and_bumps_the_epoch() -> None:
    h = Harness(t=4)
    h.join("a", "t")
    h.join("b", "t")
    h.settle()
    epoch = h.groups.groups[G].group_epoch
    r = h.groups.heartbeat(HeartbeatCall(group_id=G, member_id="b", member_epoch=-1), h.image)
    assert r.member_epoch == -1
    assert h.groups.groups[G].group_epoch == epoch + 1
    ra = h.beat("a")
    assert ra.assignment == {"t": frozenset(range(4))}


def test_epoch_checks() -> None:
    h = Harness(t=2)
    h.join("a", "t")
    e = h.epochs["a"]
    with pytest.raises(FencedMemberEpochError):
        h.groups.heartbeat(HeartbeatCall(group_id=G, member_id="a", member_epoch=e + 1, owned={}), h.image)
    with pytest.raises(UnknownMemberIdError):
        h.groups.heartbeat(HeartbeatCall(group_id=G, member_id="zz", member_epoch=1), h.image)
    h.join("b", "t")
    h.settle()
    # a lost response: the previous epoch with partitions still its own is accepted
    prev = h.member("a").previous_member_epoch
    ok = h.groups.heartbeat(
        HeartbeatCall(group_id=G, member_id="a", member_epoch=prev, owned=h.owned["a"]), h.image
    )
    assert ok.member_epoch == h.member("a").member_epoch
    with pytest.raises(FencedMemberEpochError):
        h.groups.heartbeat(
            HeartbeatCall(group_id=G, member_id="a", member_epoch=prev, owned={"t": frozenset({0, 1})}),
            h.image,
        )


def test_request_validation() -> None:
    h = Harness(t=1)
    bad = [
        HeartbeatCall(group_id="", member_id="a", member_epoch=0),
        HeartbeatCall(group_id=G, member_id="", member_epoch=0, rebalance_timeout_ms=1, owned={}),
        HeartbeatCall(group_id=G, member_id="a", member_epoch=0, owned={}, subscribed_topic_names=("t",)),
        HeartbeatCall(
            group_id=G, member_id="a", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=("t",)
        ),
        HeartbeatCall(group_id=G, member_id="a", member_epoch=0, rebalance_timeout_ms=1, owned={}),
        HeartbeatCall(group_id=G, member_id="a", member_epoch=-2),
        HeartbeatCall(group_id=G, member_id="a", member_epoch=-3),
    ]
    for call in bad:
        with pytest.raises(InvalidRequestError):
            h.groups.heartbeat(call, h.image)
    with pytest.raises(UnsupportedAssignorError):
        h.join("a", "t", server_assignor="sticky")
    with pytest.raises(InvalidRegularExpressionError):
        h.join("a", regex="(unclosed")


def test_session_timeout_fences_and_rebalance_timeout_fences_a_slow_revoker() -> None:
    h = Harness(t=4)
    h.join("a", "t")
    h.join("b", "t")
    h.settle()
    h.clock.advance(SESSION_MS - 1000)
    h.beat("a")
    h.clock.advance(2000)
    h.timers.run_due()
    assert set(h.groups.groups[G].members) == {"a"}  # b's session expired
    h.beat("a")
    assert h.owned["a"] == {"t": frozenset(range(4))}
    # c joins; a must revoke but never reports it: fenced after its rebalance timeout
    h.join("c", "t")
    h.beat("a")
    assert h.member("a").state is MemberState.UNREVOKED_PARTITIONS
    h.clock.advance(30_001)
    h.groups.heartbeat(
        HeartbeatCall(group_id=G, member_id="c", member_epoch=h.epochs["c"], owned={}), h.image
    )
    h.timers.run_due()
    assert "a" not in h.groups.groups[G].members


def test_static_member_leaves_temporarily_and_its_instance_takes_over() -> None:
    h = Harness(t=4)
    h.join("a", "t", instance_id="i1")
    h.join("b", "t")
    h.settle()
    a_parts = h.owned["a"]
    epoch = h.groups.groups[G].group_epoch
    r = h.groups.heartbeat(
        HeartbeatCall(group_id=G, member_id="a", member_epoch=-2, instance_id="i1"), h.image
    )
    assert r.member_epoch == -2
    h.join("x", "t", instance_id="i2")
    with pytest.raises(UnreleasedInstanceIdError):
        h.join("y", "t", instance_id="i2")  # x has not left
    h.groups.fence(G, "x")
    r2 = h.join("a2", "t", instance_id="i1")
    assert r2.assignment == a_parts  # same partitions, no rebalance of the others
    assert h.groups.groups[G].group_epoch >= epoch


def test_regex_subscription_and_new_topics_bump_the_epoch() -> None:
    h = Harness(**{"orders-1": 2, "other": 3, "__consumer_offsets": 8})
    r = h.join("a", regex="orders-.*")
    assert r.assignment == {"orders-1": frozenset({0, 1})}
    epoch = h.groups.groups[G].group_epoch
    h.image.topics["orders-2"] = 1
    r = h.beat("a")
    assert h.groups.groups[G].group_epoch == epoch + 1
    assert r.assignment == {"orders-1": frozenset({0, 1}), "orders-2": frozenset({0})}
    h.image.topics["orders-2"] = 3  # partitions added
    r = h.beat("a")
    assert r.assignment == {"orders-1": frozenset({0, 1}), "orders-2": frozenset({0, 1, 2})}


def test_offset_commit_and_fetch_epoch_checks() -> None:
    h = Harness(t=1)
    h.join("a", "t")
    e = h.epochs["a"]
    h.groups.validate_offset_commit(G, "a", e, 9)
    with pytest.raises(StaleMemberEpochError):
        h.groups.validate_offset_commit(G, "a", e - 1, 9)
    with pytest.raises(FencedMemberEpochError):
        h.groups.validate_offset_commit(G, "a", e + 1, 9)
    with pytest.raises(UnknownMemberIdError):
        h.groups.validate_offset_commit(G, "zz", e, 9)
    with pytest.raises(UnknownMemberIdError):
        h.groups.validate_offset_commit(G, "", -1, 9)  # members: admin commits refused
    with pytest.raises(UnsupportedVersionError):
        h.groups.validate_offset_commit(G, "a", e, 8)
    h.groups.validate_offset_fetch(G, None, -1)
    h.groups.validate_offset_fetch(G, "a", e)
    with pytest.raises(StaleMemberEpochError):
        h.groups.validate_offset_fetch(G, "a", e - 1)


def test_range_and_uniform_assignors() -> None:
    members = [
        MemberSubscription("m1", frozenset({"t", "u"})),
        MemberSubscription("m2", frozenset({"t", "u"})),
    ]
    r = range_assignor(members, {"t": 3, "u": 3})
    assert r["m1"] == {"t": frozenset({0, 1}), "u": frozenset({0, 1})}
    assert r["m2"] == {"t": frozenset({2}), "u": frozenset({2})}
    u = uniform(members, {"t": 3, "u": 3})
    assert sorted(len(_flat(a)) for a in u.values()) == [3, 3]
    # sticky: a third member takes only what it must
    prev = [MemberSubscription(m.member_id, m.topics, u[m.member_id]) for m in members]
    u2 = uniform([*prev, MemberSubscription("m3", frozenset({"t", "u"}))], {"t": 3, "u": 3})
    assert sorted(len(_flat(a)) for a in u2.values()) == [2, 2, 2]
    for m in members:
        assert _flat(u2[m.member_id]) <= _flat(u[m.member_id])


def test_chosen_assignor_is_the_members() -> None:
    h = Harness(t=4)
    h.join("a", "t", server_assignor="range")
    assert h.groups.groups[G].assignor == "range"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["join", "leave", "beat", "grow"]), st.integers(0, 4)),
        min_size=1,
        max_size=25,
    )
)
def test_ownership_is_exclusive_and_converges(ops: list[tuple[str, int]]) -> None:
    h = Harness(t=6, u=3)
    live: set[str] = set()
    for op, i in ops:
        mid = f"m{i}"
        if op == "join" and mid not in live:
            h.join(mid, "t", "u")
            live.add(mid)
        elif op == "leave" and mid in live:
            h.groups.heartbeat(HeartbeatCall(group_id=G, member_id=mid, member_epoch=-1), h.image)
            live.discard(mid)
            h.owned.pop(mid, None)
            h.epochs.pop(mid, None)
        elif op == "beat" and mid in live:
            h.beat(mid)
        elif op == "grow":
            h.image.topics["t"] += 1
        _exclusive(h)
    h.settle(rounds=8)
    _exclusive(h)
    group = h.groups.groups.get(G)
    if live:
        assert group is not None
        assert group.state.value == "Stable"
        every = {(t, p) for t, n in h.image.topics.items() for p in range(n)}
        got = set().union(*(_flat(m.assigned) for m in group.members.values()))
        assert got == every
        counts = [len(_flat(m.assigned)) for m in group.members.values()]
        assert max(counts) - min(counts) <= 1
