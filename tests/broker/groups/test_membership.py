"""The group state machine (broker.groups.membership), driven through the coordinator by a fake
clock (no sleeps): join, sync, heartbeat, leave, expiry, static membership, protocol
selection, listing and describing, and the error cases; and once alone, without a store,
with the writes it asks for recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.groups.config import GroupConfig
from broker.groups.group import Group
from broker.groups.membership import GroupMembership
from broker.groups.timers import Timers
from broker.groups.types import (
    GroupListing,
    GroupState,
    MemberIdentity,
    SyncGroupRequest,
)
from hot.errors import (
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from tests.broker.groups.grouplib import (
    DELAY_MS,
    REBALANCE_MS,
    SESSION_MS,
    TP0,
    TP1,
    FakeClock,
    Harness,
    assignment,
    commit,
    jreq,
    pending,
    protocols,
    settle,
    subscription,
)

pytestmark = pytest.mark.timeout(60)


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


# --- the state machine alone ----------------------------------------------------------------------


class RecordingPersistence:
    """A GroupPersistence that records what the state machine asks to have written."""

    def __init__(self) -> None:
        self.stored: list[tuple[str, int, str | None, str | None]] = []
        self.dropped: list[str] = []

    def store_group(self, group: Group) -> None:
        self.stored.append((group.group_id, group.generation, group.protocol_name, group.leader_id))

    def maybe_drop(self, group: Group) -> None:
        self.dropped.append(group.group_id)


async def test_the_state_machine_runs_without_a_store_and_asks_for_its_writes() -> None:
    clock = FakeClock()
    timers = Timers(clock, lambda: None)
    persistence = RecordingPersistence()
    config = GroupConfig(initial_rebalance_delay_ms=DELAY_MS, min_session_timeout_ms=1000)
    groups = GroupMembership(config, clock, timers, persistence)
    with pytest.raises(InconsistentGroupProtocolError):  # the group created for it is handed back
        await groups.join_group(jreq("bad", protocol_type=""))
    assert persistence.dropped == ["bad"]
    task = asyncio.create_task(groups.join_group(jreq(require_known=False)))
    await settle()
    assert groups.groups["g"].state is GroupState.PREPARING_REBALANCE and persistence.stored == []
    clock.advance(DELAY_MS)
    timers.run_due()
    r = await task
    # The join phase completed: generation 1 is persisted, with its protocol and leader.
    assert persistence.stored == [("g", 1, "range", r.member_id)]
    # "bad" stays: only the persistence knows whether it has offsets and may be forgotten.
    assert groups.list_groups() == [
        GroupListing("bad", "", GroupState.EMPTY),
        GroupListing("g", "consumer", GroupState.COMPLETING_REBALANCE),
    ]
    # The session ends: the group rebalances to Empty (generation 2) and is persisted again.
    clock.advance(SESSION_MS)
    timers.run_due()
    clock.advance(REBALANCE_MS)
    timers.run_due()
    assert groups.describe_group("g").state is GroupState.EMPTY
    assert persistence.stored[-1] == ("g", 2, None, None)
