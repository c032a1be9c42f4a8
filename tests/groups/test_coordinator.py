"""The group state machine, driven by a fake clock (no sleeps): join, sync, heartbeat,
leave, expiry, static membership, protocol selection, offsets, and the error cases."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from api.groups.config import GroupConfig
from api.groups.coordinator import GroupCoordinator
from api.groups.offsets import OffsetsLog
from api.groups.types import (
    GroupProtocol,
    GroupState,
    MemberIdentity,
    OffsetCommitRequest,
    SyncGroupRequest,
    TopicPartition,
)
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptLogError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from tests.groups.grouplib import (
    DELAY_MS,
    REBALANCE_MS,
    SESSION_MS,
    FakeClock,
    Harness,
    assignment,
    jreq,
    pending,
    protocols,
    settle,
    subscription,
)

pytestmark = pytest.mark.timeout(60)

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await Harness(tmp_path).start()
    yield harness
    await harness.close()


def commit(
    group: str, *offsets: tuple[TopicPartition, int], generation: int = -1, member: str = "", **kw: object
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        offsets=tuple((tp, off, 3, "md") for tp, off in offsets),
        generation_id=generation,
        member_id=member,
        **kw,  # type: ignore[arg-type]
    )


# --- joining --------------------------------------------------------------------------------


async def test_new_member_gets_an_id_then_the_initial_delay_completes_the_join(h: Harness) -> None:
    mid = await h.member_id()
    assert mid.startswith("c-")
    task = h.join(member_id=mid)
    await settle()
    assert h.coord.describe_group("g").state is GroupState.PREPARING_REBALANCE
    await h.advance(DELAY_MS - 1)
    assert pending(task)
    await h.advance(1)
    r = await task
    assert (r.member_id, r.generation_id, r.leader_id, r.protocol_name) == (mid, 1, mid, "range")
    assert [m.member_id for m in r.members] == [mid]
    assert r.members[0].metadata == subscription("t")
    assert h.coord.describe_group("g").state is GroupState.COMPLETING_REBALANCE


async def test_each_newcomer_extends_the_initial_delay_up_to_the_rebalance_timeout(h: Harness) -> None:
    a, b = await h.member_id(), await h.member_id()
    ta = h.join(member_id=a)
    await h.advance(DELAY_MS - 10)
    tb = h.join(member_id=b)
    await h.advance(10)  # the first delay ends, but b came in meanwhile: wait once more
    assert pending(ta) and pending(tb)
    await h.advance(DELAY_MS)
    ra, rb = await ta, await tb
    assert ra.is_leader and not rb.is_leader
    assert {m.member_id for m in ra.members} == {a, b} and rb.members == ()
    assert ra.generation_id == rb.generation_id == 1


async def test_old_clients_join_without_member_id_round(h: Harness) -> None:
    task = h.join(require_known=False)
    await h.advance(DELAY_MS)
    r = await task
    assert r.is_leader and r.generation_id == 1


async def test_sync_hands_the_leaders_assignment_to_everyone(h: Harness) -> None:
    a, b = await h.member_id(), await h.member_id()
    ra, rb = await h.through_initial_delay(h.join(member_id=a), h.join(member_id=b))
    follower = h.sync("g", b, rb.generation_id)
    await settle()
    assert pending(follower)  # waits for the leader
    leader = h.sync("g", a, ra.generation_id, {a: assignment(t=[0]), b: assignment(t=[1])})
    assert (await leader).assignment == assignment(t=[0])
    got = await follower
    assert (got.assignment, got.protocol_type, got.protocol_name) == (assignment(t=[1]), "consumer", "range")
    d = h.coord.describe_group("g")
    assert d.state is GroupState.STABLE and d.generation_id == 1 and d.leader_id == a
    assert {m.member_id: m.assigned_partitions for m in d.members} == {a: (TP0,), b: (TP1,)}
    # A member the leader left out gets an empty assignment; a late sync in Stable gets its own.
    again = await h.sync("g", b, 1)
    assert again.assignment == assignment(t=[1])


async def test_sync_errors(h: Harness) -> None:
    [r] = await h.stable_group(1)
    with pytest.raises(IllegalGenerationError):
        await h.sync("g", r.member_id, r.generation_id + 1)
    with pytest.raises(UnknownMemberIdError):
        await h.sync("g", "nobody", r.generation_id)
    with pytest.raises(UnknownMemberIdError):
        await h.sync("nogroup", r.member_id, r.generation_id)
    with pytest.raises(InconsistentGroupProtocolError):
        await h.coord.sync_group(
            SyncGroupRequest("g", r.generation_id, r.member_id, protocol_name="roundrobin")
        )
    with pytest.raises(InconsistentGroupProtocolError):
        await h.coord.sync_group(SyncGroupRequest("g", r.generation_id, r.member_id, protocol_type="connect"))
    with pytest.raises(InvalidGroupIdError):
        await h.sync("", r.member_id, r.generation_id)


async def test_a_new_member_makes_everyone_rejoin_and_the_join_completes_when_all_did(h: Harness) -> None:
    ra, rb = await h.stable_group(2)
    c = await h.member_id()
    tc = h.join(member_id=c)
    await settle()
    assert h.coord.describe_group("g").state is GroupState.PREPARING_REBALANCE
    with pytest.raises(RebalanceInProgressError):
        h.coord.heartbeat("g", ra.member_id, ra.generation_id)
    ta = h.join(member_id=ra.member_id)
    await settle()
    assert pending(tc) and pending(ta)
    tb = h.join(member_id=rb.member_id)
    await settle()  # everyone is in: no need to wait for the rebalance timeout
    results = [await t for t in (ta, tb, tc)]
    assert {r.generation_id for r in results} == {2}
    leader = next(r for r in results if r.is_leader)
    assert leader.member_id == ra.member_id and len(leader.members) == 3


async def test_members_that_do_not_rejoin_in_the_rebalance_timeout_are_removed(h: Harness) -> None:
    ra, rb = await h.stable_group(2)
    tc = h.join(require_known=False)
    ta = h.join(member_id=ra.member_id)
    await settle()
    # rb keeps heartbeating but never rejoins
    for _ in range(REBALANCE_MS // 5000):
        with pytest.raises(RebalanceInProgressError):
            h.coord.heartbeat("g", rb.member_id, rb.generation_id)
        await h.advance(5000)
    rc, ra2 = await tc, await ta
    assert ra2.generation_id == rc.generation_id == 2
    assert {m.member_id for m in ra2.members} == {ra.member_id, rc.member_id}
    with pytest.raises(UnknownMemberIdError):
        h.coord.heartbeat("g", rb.member_id, 2)


async def test_a_leader_that_does_not_rejoin_is_replaced(h: Harness) -> None:
    ra, rb = await h.stable_group(2)
    leader, follower = (ra, rb) if ra.is_leader else (rb, ra)
    h.coord.leave_group("g", [MemberIdentity(leader.member_id)])
    tf = h.join(member_id=follower.member_id)
    r = await tf
    assert r.is_leader and r.generation_id == 2 and len(r.members) == 1


async def test_session_timeout_expires_a_silent_member(h: Harness) -> None:
    ra, rb = await h.stable_group(2)
    for _ in range(2):
        await h.advance(SESSION_MS // 2 - 1)
        h.coord.heartbeat("g", ra.member_id, 1)  # a keeps its session alive, b is silent
    assert h.coord.describe_group("g").state is GroupState.STABLE
    await h.advance(2)
    assert h.coord.describe_group("g").state is GroupState.PREPARING_REBALANCE
    assert [m.member_id for m in h.coord.describe_group("g").members] == [ra.member_id]
    with pytest.raises(RebalanceInProgressError):
        h.coord.heartbeat("g", ra.member_id, 1)
    r = await h.join(member_id=ra.member_id)
    assert r.generation_id == 2 and r.is_leader and len(r.members) == 1
    with pytest.raises(UnknownMemberIdError):
        h.coord.heartbeat("g", rb.member_id, 1)


async def test_parked_join_keeps_a_member_alive_but_not_a_finished_one(h: Harness) -> None:
    [ra] = await h.stable_group(1)
    rb = h.join(require_known=False)
    ta = h.join(member_id=ra.member_id)
    r = await ta
    assert r.generation_id == 2
    await rb
    # Neither syncs nor heartbeats now: both expire after their sessions (no sync timeout
    # first, since that equals the rebalance timeout which is longer here).
    await h.advance(SESSION_MS)
    d = h.coord.describe_group("g")
    assert d.members == () and d.state is GroupState.EMPTY and d.generation_id == 3


async def test_heartbeat_errors(h: Harness) -> None:
    [r] = await h.stable_group(1)
    h.coord.heartbeat("g", r.member_id, r.generation_id)
    with pytest.raises(IllegalGenerationError):
        h.coord.heartbeat("g", r.member_id, r.generation_id - 1)
    with pytest.raises(UnknownMemberIdError):
        h.coord.heartbeat("g", "ghost", r.generation_id)
    with pytest.raises(UnknownMemberIdError):
        h.coord.heartbeat("other", r.member_id, r.generation_id)
    with pytest.raises(InvalidGroupIdError):
        h.coord.heartbeat("", r.member_id, r.generation_id)


async def test_leave_group_in_a_batch_with_per_member_errors(h: Harness) -> None:
    ra, rb, rc = await h.stable_group(3)
    out = h.coord.leave_group(
        "g",
        [MemberIdentity(ra.member_id), MemberIdentity("ghost"), MemberIdentity(rb.member_id, reason="bye")],
    )
    assert [type(r.error) if r.error else None for r in out] == [None, UnknownMemberIdError, None]
    assert [m.member_id for m in h.coord.describe_group("g").members] == [rc.member_id]
    r = await h.join(member_id=rc.member_id)
    assert r.generation_id == 2 and r.is_leader
    out = h.coord.leave_group("nogroup", [MemberIdentity("x")])
    assert isinstance(out[0].error, UnknownMemberIdError)


async def test_last_member_leaving_empties_the_group_with_a_new_generation(h: Harness) -> None:
    [r] = await h.stable_group(1)
    h.coord.leave_group("g", [MemberIdentity(r.member_id)])
    d = h.coord.describe_group("g")
    assert (d.state, d.generation_id, d.members, d.protocol_name) == (GroupState.EMPTY, 2, (), "")


async def test_a_leaving_member_fails_the_parked_syncs_with_rebalance_in_progress(h: Harness) -> None:
    a, b = await h.member_id(), await h.member_id()
    ra, rb = await h.through_initial_delay(h.join(member_id=a), h.join(member_id=b))
    follower = rb if ra.is_leader else ra
    leader = ra if ra.is_leader else rb
    parked = h.sync("g", follower.member_id, 1)
    await settle()
    rejoin = h.join(require_known=False)  # a newcomer during CompletingRebalance
    with pytest.raises(RebalanceInProgressError):
        await parked
    h.coord.leave_group("g", [MemberIdentity(leader.member_id)])
    t1 = h.join(member_id=follower.member_id)
    assert (await t1).generation_id == 2 and (await rejoin).generation_id == 2


async def test_rejoin_during_completing_rebalance_returns_the_same_generation(h: Harness) -> None:
    a = await h.member_id()
    first = await _join_alone(h, a)
    again = await h.join(member_id=a)
    assert again == first  # lost response: answered again, no new rebalance


async def _join_alone(h: Harness, mid: str) -> object:
    t = h.join(member_id=mid)
    await h.advance(DELAY_MS)
    return await t


async def test_leader_rejoin_in_a_stable_group_rebalances_but_a_follower_rejoin_does_not(h: Harness) -> None:
    ra, rb = await h.stable_group(2)
    leader, follower = (ra, rb) if ra.is_leader else (rb, ra)
    same = await h.join(member_id=follower.member_id)
    assert same.generation_id == 1 and same.members == ()
    assert h.coord.describe_group("g").state is GroupState.STABLE
    tl = h.join(member_id=leader.member_id)
    await settle()
    assert h.coord.describe_group("g").state is GroupState.PREPARING_REBALANCE
    tf = h.join(member_id=follower.member_id)
    assert (await tl).generation_id == (await tf).generation_id == 2


async def test_members_that_never_sync_are_removed_after_the_rebalance_timeout(h: Harness) -> None:
    a, b = await h.member_id(), await h.member_id()
    ra, rb = await h.through_initial_delay(
        h.join(member_id=a, session=60_000), h.join(member_id=b, session=60_000)
    )
    leader = ra if ra.is_leader else rb
    follower = rb if ra.is_leader else ra
    await h.sync("g", leader.member_id, 1, {})
    await h.advance(REBALANCE_MS)  # the follower never synced
    d = h.coord.describe_group("g")
    assert d.state is GroupState.PREPARING_REBALANCE
    assert [m.member_id for m in d.members] == [leader.member_id]
    with pytest.raises(UnknownMemberIdError):
        h.coord.heartbeat("g", follower.member_id, 1)


async def test_pending_members_hold_the_join_until_they_rejoin_or_expire(h: Harness) -> None:
    [ra] = await h.stable_group(1)
    tb = h.join(require_known=False)  # triggers a rebalance
    await h.member_id()  # a member id handed out, never used
    ta = h.join(member_id=ra.member_id)
    await settle()
    assert pending(ta) and pending(tb)
    await h.advance(SESSION_MS)  # the pending member's session ends
    assert (await ta).generation_id == 2 and len((await ta).members) == 2


async def test_join_validation_errors(h: Harness) -> None:
    with pytest.raises(InvalidSessionTimeoutError):
        await h.coord.join_group(jreq(session=999))
    with pytest.raises(InvalidSessionTimeoutError):
        await h.coord.join_group(jreq(session=60_001))
    with pytest.raises(InvalidGroupIdError):
        await h.coord.join_group(jreq(""))
    with pytest.raises(UnknownMemberIdError):
        await h.coord.join_group(jreq("nogroup", "someone"))
    with pytest.raises(InconsistentGroupProtocolError):
        await h.coord.join_group(jreq(protos=()))
    assert h.coord.list_groups() == []  # failed joins leave no group behind
    await h.stable_group(1)
    with pytest.raises(InconsistentGroupProtocolError):
        await h.coord.join_group(jreq(protos=protocols("sticky")))
    with pytest.raises(InconsistentGroupProtocolError):
        await h.coord.join_group(jreq(protocol_type="connect"))
    with pytest.raises(UnknownMemberIdError):
        await h.coord.join_group(jreq(member_id="ghost"))


async def test_group_max_size(tmp_path: Path) -> None:
    h = await Harness(
        tmp_path, GroupConfig(initial_rebalance_delay_ms=DELAY_MS, min_session_timeout_ms=1000, max_size=2)
    ).start()
    try:
        await h.stable_group(2)
        with pytest.raises(GroupMaxSizeReachedError):
            await h.coord.join_group(jreq())
        with pytest.raises(GroupMaxSizeReachedError):
            await h.coord.join_group(jreq(instance="static-3"))
    finally:
        await h.close()


# --- protocol selection ----------------------------------------------------------------------


async def _select(h: Harness, group: str, *prefs: tuple[str, ...]) -> str:
    results = await h.through_initial_delay(
        *(h.join(group, require_known=False, protos=protocols(*p)) for p in prefs)
    )
    names = {r.protocol_name for r in results}
    assert len(names) == 1
    return names.pop() or ""


async def test_protocol_selection_by_votes_among_common_protocols(h: Harness) -> None:
    # Only roundrobin is supported by all, though two members prefer range.
    assert (
        await _select(h, "g1", ("range", "roundrobin"), ("range", "roundrobin"), ("roundrobin",))
        == "roundrobin"
    )
    # Both are common; range gets two first-choice votes out of three.
    assert (
        await _select(h, "g2", ("roundrobin", "range"), ("range", "roundrobin"), ("range", "roundrobin"))
        == "range"
    )
    # A tie goes to the leader's (first member's) preference.
    assert await _select(h, "g3", ("cooperative-sticky", "range"), ("range", "cooperative-sticky")) == (
        "cooperative-sticky"
    )


# --- static membership ---------------------------------------------------------------------------


async def _static_group(
    h: Harness, b_protocols: tuple[str, ...] = ("range",), session: int = SESSION_MS
) -> tuple[str, str]:
    """A stable group of static member "s1" (leader) and dynamic member b; returns their ids."""
    ts = h.join(instance="s1", client_id="static", session=session)
    await settle()
    b = await h.member_id()
    rs, _rb = await h.through_initial_delay(ts, h.join(member_id=b, protos=protocols(*b_protocols)))
    assert rs.is_leader and rs.member_id.startswith("s1-")
    plan = {rs.member_id: assignment(t=[0]), b: assignment(t=[1])}
    await asyncio.gather(h.sync("g", rs.member_id, 1, plan, instance="s1"), h.sync("g", b, 1))
    return rs.member_id, b


async def test_static_member_rejoins_without_a_rebalance_and_fences_its_old_id(h: Harness) -> None:
    old, b = await _static_group(h)
    r = await h.join(instance="s1")
    assert r.member_id != old and r.generation_id == 1
    assert not r.is_leader and r.leader_id == old and r.members == ()  # pre-KIP-814: not a leader
    assert h.coord.describe_group("g").state is GroupState.STABLE
    with pytest.raises(FencedInstanceIdError):
        h.coord.heartbeat("g", old, 1, "s1")
    with pytest.raises(FencedInstanceIdError):
        await h.sync("g", old, 1, instance="s1")
    h.coord.heartbeat("g", r.member_id, 1, "s1")
    assert (await h.sync("g", r.member_id, 1, instance="s1")).assignment == assignment(t=[0])
    h.coord.heartbeat("g", b, 1)  # the others never noticed


async def test_static_leader_rejoining_with_kip_814_gets_members_and_skip_assignment(h: Harness) -> None:
    _old, b = await _static_group(h)
    r = await h.join(instance="s1", skip=True)
    assert r.is_leader and r.skip_assignment and {m.member_id for m in r.members} == {r.member_id, b}
    assert h.coord.describe_group("g").leader_id == r.member_id


async def test_static_member_rejoining_with_other_protocols_triggers_a_rebalance(h: Harness) -> None:
    _old, b = await _static_group(h, ("range", "roundrobin"))
    # A new subscription under the same selected protocol changes nothing (as in Kafka)...
    r = await h.join(instance="s1", protos=protocols("range", topics=("t", "u")))
    assert r.generation_id == 1 and h.coord.describe_group("g").state is GroupState.STABLE
    # ...but a preference that changes the selected protocol does.
    t = h.join(instance="s1", protos=protocols("roundrobin", "range"))
    await settle()
    assert h.coord.describe_group("g").state is GroupState.PREPARING_REBALANCE
    tb = h.join(member_id=b, protos=protocols("range", "roundrobin"))
    r, rb = await t, await tb
    assert r.generation_id == rb.generation_id == 2 and r.protocol_name == "roundrobin"


async def test_static_member_replacing_a_parked_join_fences_that_request(h: Harness) -> None:
    old, b = await _static_group(h)
    tb = h.join(require_known=False)  # start a rebalance
    parked = h.join(member_id=old, instance="s1")
    await settle()
    replacement = h.join(instance="s1")
    with pytest.raises(FencedInstanceIdError):
        await parked
    t2 = h.join(member_id=b)
    rs, _, _ = await replacement, await tb, await t2
    assert rs.generation_id == 2


async def test_static_member_that_does_not_rejoin_stays_until_its_session_ends(h: Harness) -> None:
    # A long session: the static member is away (restarting) longer than the rebalance.
    old, b = await _static_group(h, session=60_000)
    tn = h.join(require_known=False)
    tb = h.join(member_id=b)
    for _ in range(REBALANCE_MS // 5000):
        await h.advance(5000)
    rn, rb = await tn, await tb
    assert rn.generation_id == 2
    members = {m.member_id for m in h.coord.describe_group("g").members}
    assert old in members  # static: kept through the rebalance
    assert rb.is_leader and {m.member_id for m in rb.members} == {old, b, rn.member_id}
    # It never syncs either: removed after the sync timeout (the rebalance timeout).
    await h.sync("g", b, 2, {})
    await h.sync("g", rn.member_id, 2)
    for _ in range(REBALANCE_MS // 5000 - 1):
        await h.advance(5000)
        h.coord.heartbeat("g", b, 2)
        h.coord.heartbeat("g", rn.member_id, 2)
    await h.advance(5000)
    d = h.coord.describe_group("g")
    assert old not in {m.member_id for m in d.members} and d.state is GroupState.PREPARING_REBALANCE


async def test_static_member_leave_by_instance_id(h: Harness) -> None:
    old, b = await _static_group(h)
    out = h.coord.leave_group("g", [MemberIdentity("", "s1"), MemberIdentity("wrong", "s1")])
    assert out[0].error is None and isinstance(out[1].error, UnknownMemberIdError)
    assert [m.member_id for m in h.coord.describe_group("g").members] == [b]
    _, b2 = old, b
    out = h.coord.leave_group("g", [MemberIdentity(b2, "s9")])
    assert isinstance(out[0].error, UnknownMemberIdError)


# --- offsets --------------------------------------------------------------------------------------


async def test_member_commits_are_checked_and_fetched(h: Harness) -> None:
    ra, _rb = await h.stable_group(2)
    ok = await h.coord.commit_offsets(commit("g", (TP0, 10), (TP1, 20), generation=1, member=ra.member_id))
    assert ok == {TP0: None, TP1: None}
    got = h.coord.committed_offsets("g")
    assert {tp: (o.offset, o.leader_epoch, o.metadata) for tp, o in got.items()} == {
        TP0: (10, 3, "md"),
        TP1: (20, 3, "md"),
    }
    assert got[TP0].commit_timestamp_ms == h.clock.wall_ms
    assert h.coord.committed_offsets("g", [TP1, TopicPartition("t", 9)]).keys() == {TP1}
    assert h.coord.committed_offsets("unknown") == {}
    with pytest.raises(IllegalGenerationError):
        await h.coord.commit_offsets(commit("g", (TP0, 11), generation=7, member=ra.member_id))
    with pytest.raises(UnknownMemberIdError):
        await h.coord.commit_offsets(commit("g", (TP0, 11), generation=1, member="ghost"))
    with pytest.raises(UnknownMemberIdError):  # a simple commit into a group with members
        await h.coord.commit_offsets(commit("g", (TP0, 11)))
    with pytest.raises(IllegalGenerationError):  # a member commit into a group that does not exist
        await h.coord.commit_offsets(commit("nogroup", (TP0, 1), generation=3, member="x"))
    assert h.coord.committed_offsets("g")[TP0].offset == 10


async def test_commits_during_rebalance(h: Harness) -> None:
    ra, rb = await h.stable_group(2)
    tc = h.join(require_known=False)
    await settle()
    # PreparingRebalance: members of the current generation may still commit.
    assert await h.coord.commit_offsets(commit("g", (TP0, 5), generation=1, member=ra.member_id)) == {
        TP0: None
    }
    ta, tb = h.join(member_id=ra.member_id), h.join(member_id=rb.member_id)
    await asyncio.gather(ta, tb, tc)
    with pytest.raises(RebalanceInProgressError):  # CompletingRebalance
        await h.coord.commit_offsets(commit("g", (TP0, 6), generation=2, member=ra.member_id))


async def test_simple_commits_to_an_empty_group_and_per_partition_errors(tmp_path: Path) -> None:
    h = await Harness(tmp_path, partition_exists=lambda t, p: t == "t" and p < 2).start()
    try:
        big = "x" * 4097
        req = OffsetCommitRequest(
            group_id="simple",
            offsets=((TP0, 1, -1, None), (TP1, 2, -1, big), (TopicPartition("u", 0), 3, -1, "")),
        )
        out = await h.coord.commit_offsets(req)
        assert out[TP0] is None
        assert isinstance(out[TP1], OffsetMetadataTooLargeError)
        assert isinstance(out[TopicPartition("u", 0)], UnknownTopicOrPartitionError)
        assert {tp: o.offset for tp, o in h.coord.committed_offsets("simple").items()} == {TP0: 1}
        assert [(g.group_id, g.protocol_type, g.state) for g in h.coord.list_groups()] == [
            ("simple", "", GroupState.EMPTY)
        ]
    finally:
        await h.close()


async def test_offsets_and_generation_survive_a_restart(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    ra, _rb = await h.stable_group(2)
    await h.coord.commit_offsets(commit("g", (TP0, 42), generation=1, member=ra.member_id))
    await h.coord.commit_offsets(commit("s", (TP1, 7)))
    await h.close()

    h2 = await Harness(tmp_path, clock=h.clock).start()
    try:
        assert h2.coord.committed_offsets("g")[TP0].offset == 42
        assert h2.coord.committed_offsets("s")[TP1].offset == 7
        listing = {g.group_id: (g.protocol_type, g.state) for g in h2.coord.list_groups()}
        assert listing == {"g": ("consumer", GroupState.EMPTY), "s": ("", GroupState.EMPTY)}
        assert h2.coord.describe_group("g").generation_id == 1
        with pytest.raises(UnknownMemberIdError):  # memberships are not persisted: rejoin
            h2.coord.heartbeat("g", ra.member_id, 1)
        [r] = await h2.stable_group(1)
        assert r.generation_id == 2
    finally:
        await h2.close()


async def test_commit_is_acknowledged_only_when_durable(h: Harness) -> None:
    store = h.coord.store
    assert isinstance(store, OffsetsLog)
    ra, _ = await h.stable_group(2)
    task = asyncio.create_task(
        h.coord.commit_offsets(commit("g", (TP0, 9), generation=1, member=ra.member_id))
    )
    await asyncio.sleep(0)
    # appended (log end moved) but not visible before the fsync moved the high watermark
    assert store.has_offsets("g")
    assert await task == {TP0: None}
    assert store.log.high_watermark == store.log.log_end_offset
    assert h.coord.committed_offsets("g")[TP0].offset == 9


# --- listing, describing, deleting -------------------------------------------------------------------


async def test_list_groups_with_states_filter(h: Harness) -> None:
    await h.stable_group(1, "stable")
    await h.coord.commit_offsets(commit("empty", (TP0, 1)))
    t = h.join("joining", require_known=False)
    await settle()
    states = {g.group_id: g.state for g in h.coord.list_groups()}
    assert states == {
        "stable": GroupState.STABLE,
        "empty": GroupState.EMPTY,
        "joining": GroupState.PREPARING_REBALANCE,
    }
    assert [g.group_id for g in h.coord.list_groups(["stable", "Empty"])] == ["empty", "stable"]
    assert [g.group_id for g in h.coord.list_groups([GroupState.PREPARING_REBALANCE])] == ["joining"]
    assert h.coord.list_groups(["nonsense"]) == []
    await h.advance(DELAY_MS)
    await t


async def test_describe_group(h: Harness) -> None:
    ra, _rb = await h.stable_group(2)
    d = h.coord.describe_group("g")
    assert (d.state, d.protocol_type, d.protocol_name, d.generation_id) == (
        GroupState.STABLE,
        "consumer",
        "range",
        1,
    )
    m = {x.member_id: x for x in d.members}
    assert m[ra.member_id].client_id == "c" and m[ra.member_id].client_host == "/127.0.0.1"
    assert m[ra.member_id].metadata == subscription("t")
    assert (m[ra.member_id].session_timeout_ms, m[ra.member_id].rebalance_timeout_ms) == (
        SESSION_MS,
        REBALANCE_MS,
    )
    with pytest.raises(GroupIdNotFoundError):
        h.coord.describe_group("nope")


async def test_delete_groups(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    await h.stable_group(1, "busy")
    await h.coord.commit_offsets(commit("idle", (TP0, 5)))
    out = await h.coord.delete_groups(["busy", "idle", "nope"])
    assert isinstance(out["busy"], NonEmptyGroupError)
    assert out["idle"] is None
    assert isinstance(out["nope"], GroupIdNotFoundError)
    assert h.coord.committed_offsets("idle") == {}
    assert [g.group_id for g in h.coord.list_groups()] == ["busy"]
    await h.close()
    h2 = await Harness(tmp_path, clock=h.clock).start()  # the tombstones are durable
    try:
        assert h2.coord.committed_offsets("idle") == {}
        assert [g.group_id for g in h2.coord.list_groups()] == ["busy"]
    finally:
        await h2.close()


async def test_offset_delete(h: Harness) -> None:
    tu = TopicPartition("u", 0)
    # A consumer group subscribed to "t" with offsets for t and u.
    [r] = await h.stable_group(1)
    await h.coord.commit_offsets(commit("g", (TP0, 1), (tu, 2), generation=1, member=r.member_id))
    out = await h.coord.delete_offsets("g", [TP0, tu])
    assert isinstance(out[TP0], GroupSubscribedToTopicError) and out[tu] is None
    assert h.coord.committed_offsets("g").keys() == {TP0}
    # Once empty, anything goes; the group has nothing left and is forgotten.
    h.coord.leave_group("g", [MemberIdentity(r.member_id)])
    assert await h.coord.delete_offsets("g", [TP0]) == {TP0: None}
    with pytest.raises(GroupIdNotFoundError):
        h.coord.describe_group("g")
    with pytest.raises(GroupIdNotFoundError):
        await h.coord.delete_offsets("nope", [TP0])
    # A non-consumer group with members: NON_EMPTY_GROUP.
    t = h.join("connect", require_known=False, protocol_type="connect")
    await h.advance(DELAY_MS)
    await t
    with pytest.raises(NonEmptyGroupError):
        await h.coord.delete_offsets("connect", [TP0])


async def test_offset_delete_with_unparseable_subscription_treats_every_topic_as_subscribed(
    h: Harness,
) -> None:
    t = h.join(require_known=False, protos=(GroupProtocol("range", b"\x00"),))
    await h.advance(DELAY_MS)
    r = await t
    await h.sync("g", r.member_id, 1, {})
    await h.coord.commit_offsets(commit("g", (TopicPartition("u", 0), 1), generation=1, member=r.member_id))
    out = await h.coord.delete_offsets("g", [TopicPartition("u", 0)])
    assert isinstance(out[TopicPartition("u", 0)], GroupSubscribedToTopicError)


# --- expiry ------------------------------------------------------------------------------------------


async def test_offsets_of_an_empty_group_expire_after_the_retention(tmp_path: Path) -> None:
    cfg = GroupConfig(
        initial_rebalance_delay_ms=DELAY_MS, min_session_timeout_ms=1000, offsets_retention_minutes=1
    )
    h = await Harness(tmp_path, cfg).start()
    try:
        [r] = await h.stable_group(1)
        await h.coord.commit_offsets(commit("g", (TP0, 1), generation=1, member=r.member_id))
        await h.coord.commit_offsets(commit("simple", (TP0, 1)))
        await h.coord.commit_offsets(commit("explicit", (TP1, 1), retention_time_ms=1000))
        await h.advance(1000)
        assert h.coord.expire_offsets() == 1  # explicit retention: 1 s after the commit
        for _ in range(12):  # g stays alive through heartbeats: nothing of it expires
            await h.advance(5000)
            h.coord.heartbeat("g", r.member_id, 1)
        assert h.coord.expire_offsets() == 1  # "simple": a minute after its commit
        h.coord.leave_group("g", [MemberIdentity(r.member_id)])
        await h.advance(59_000)
        assert h.coord.expire_offsets() == 0
        await h.advance(1000)
        assert h.coord.expire_offsets() == 1  # a minute after g became empty
        await settle()
        assert h.coord.list_groups() == []
    finally:
        await h.close()


async def test_periodic_expiry_runs_from_the_timers(tmp_path: Path) -> None:
    cfg = GroupConfig(
        min_session_timeout_ms=1000, offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000
    )
    h = await Harness(tmp_path, cfg).start()
    try:
        await h.coord.commit_offsets(commit("s", (TP0, 1)))
        await h.advance(60_000)
        for _ in range(5):
            await h.advance(1)
        assert h.coord.list_groups() == []
    finally:
        await h.close()


async def test_deleting_a_topic_deletes_its_offsets(h: Harness) -> None:
    await h.coord.commit_offsets(commit("a", (TP0, 1), (TopicPartition("u", 0), 2)))
    await h.coord.commit_offsets(commit("b", (TP1, 1)))
    h.coord.on_topic_deleted("t")
    await settle()
    for _ in range(50):
        if "b" not in h.coord.store.groups():  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    assert h.coord.committed_offsets("a").keys() == {TopicPartition("u", 0)}
    assert [g.group_id for g in h.coord.list_groups()] == ["a"]


# --- availability -------------------------------------------------------------------------------------


async def test_not_coordinator_and_loading_and_failed_store(tmp_path: Path) -> None:
    class Elsewhere:
        def coordinator_for(self, group_id: str) -> int:
            return 7 if group_id == "far" else 0

    c = GroupCoordinator(GroupConfig(), lambda: OffsetsLog.open(tmp_path / "a"), locator=Elsewhere())
    with pytest.raises(CoordinatorLoadInProgressError):
        c.heartbeat("g", "m", 1)
    await c.start(run_timers=False)
    try:
        with pytest.raises(NotCoordinatorError):
            await c.commit_offsets(commit("far", (TP0, 1)))
        assert c.find_coordinator("far") == 7 and c.find_coordinator("near") == 0
    finally:
        await c.close()
    with pytest.raises(CoordinatorNotAvailableError):
        c.list_groups()

    def broken() -> OffsetsLog:
        raise CorruptLogError("somewhere", 3, "bad record")

    c2 = GroupCoordinator(GroupConfig(), broken)
    await c2.start(run_timers=False)
    with pytest.raises(CoordinatorNotAvailableError, match="bad record"):
        c2.committed_offsets("g")
    with pytest.raises(CoordinatorNotAvailableError):
        c2.find_coordinator("g")
    await c2.close()


async def test_close_fails_parked_requests(tmp_path: Path) -> None:
    h = await Harness(tmp_path).start()
    t = h.join(require_known=False)
    await settle()
    await h.close()
    with pytest.raises(CoordinatorNotAvailableError):
        await t


async def test_real_timer_task_completes_a_join(tmp_path: Path) -> None:
    # The production timer loop (real monotonic clock), with a tiny initial delay.
    c = GroupCoordinator(
        GroupConfig(initial_rebalance_delay_ms=20, min_session_timeout_ms=1000),
        lambda: OffsetsLog.open(tmp_path),
    )
    await c.start()
    try:
        r = await asyncio.wait_for(c.join_group(jreq(require_known=False)), 10)
        assert r.is_leader and r.generation_id == 1
    finally:
        await c.close()


def test_fake_clock_moves_both_clocks() -> None:
    c = FakeClock()
    m, w = c.monotonic(), c.time_ms()
    c.advance(1500)
    assert c.monotonic() - m == 1.5 and c.time_ms() - w == 1500
