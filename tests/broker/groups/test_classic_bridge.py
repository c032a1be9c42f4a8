"""KIP-848's online migration (broker.groups.classic_bridge) inside the coordinator, over a
real offsets log and a fake clock: a classic group with members upgraded by a
consumer-protocol member, its classic members bridged (JoinGroup, SyncGroup, Heartbeat,
OffsetCommit, LeaveGroup), the downgrade when the last consumer-protocol member leaves,
the migration policies, and the classic members' metadata in the group's records."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from broker.groups.config import GroupConfig
from broker.groups.consumer_group import (
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
    HeartbeatCall,
    HeartbeatResult,
)
from broker.groups.consumer_records import (
    ConsumerKey,
    MemberMetadataValue,
    decode_consumer_value,
    encode_consumer_value,
    group_records,
    restore_group,
)
from broker.groups.group import Preparing
from broker.groups.types import GroupProtocol, OffsetCommitRequest, SyncGroupRequest, TopicPartition
from hot.errors import (
    FencedInstanceIdError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kwire.consumer_protocol import Subscription, TopicPartitions, decode_assignment, encode_subscription
from tests.broker.groups.grouplib import DELAY_MS, Harness, assignment, jreq

TOPIC_PARTITIONS = 4


class Image:
    def partition_count(self, topic: str) -> int | None:
        return {"t": TOPIC_PARTITIONS}.get(topic)

    def topic_names(self) -> Iterable[str]:
        return ["t"]


def config(policy: str = "bidirectional") -> GroupConfig:
    return GroupConfig(
        initial_rebalance_delay_ms=DELAY_MS,
        min_session_timeout_ms=1000,
        max_session_timeout_ms=60_000,
        consumer_migration_policy=policy,
    )


async def harness(tmp_path: Path, policy: str) -> Harness:
    h = await Harness(tmp_path, config(policy)).start()
    h.coord.topics = Image()
    return h


@pytest.fixture
async def hb(tmp_path: Path) -> AsyncIterator[Harness]:
    h = await harness(tmp_path, "bidirectional")
    yield h
    await h.close()


async def beat(
    h: Harness, member: str, epoch: int, owned: dict[str, frozenset[int]] | None = None, group: str = "g"
) -> HeartbeatResult:
    extra: dict[str, object] = {"owned": owned}
    if epoch == 0:
        extra |= {"rebalance_timeout_ms": 10_000, "subscribed_topic_names": ("t",), "owned": {}}
    return await h.coord.consumer_group_heartbeat(
        HeartbeatCall(group_id=group, member_id=member, member_epoch=epoch, **extra),  # type: ignore[arg-type]
        Image(),
    )


def owned_subscription(parts: Iterable[int]) -> tuple[GroupProtocol, ...]:
    """A cooperative classic member's protocol, declaring the partitions it still owns."""
    sub = Subscription(1, ("t",), owned_partitions=(TopicPartitions("t", tuple(sorted(parts))),))
    return (GroupProtocol("cooperative-sticky", encode_subscription(sub)),)


async def sync(h: Harness, member: str, generation: int) -> set[int]:
    r = await h.coord.sync_group(SyncGroupRequest(group_id="g", generation_id=generation, member_id=member))
    return {p for tp in decode_assignment(r.assignment).partitions for p in tp.partitions}


def members(h: Harness) -> dict[str, ConsumerMember]:
    return h.coord.consumer.groups["g"].members


async def test_upgrade_bridge_and_downgrade(hb: Harness) -> None:
    h = hb
    a, b = await h.stable_group(2)  # classic: a has t-0, b has t-1, generation 1
    gen = a.generation_id
    # a consumer-protocol member joins: the group is upgraded, the classic members stay
    joined = await beat(h, "c1", 0)
    assert h.coord.is_consumer_group("g")
    group = h.coord.consumer.groups["g"]
    assert {mid: m.classic is not None for mid, m in group.members.items()} == {
        a.member_id: True,
        b.member_id: True,
        "c1": False,
    }
    assert members(h)[a.member_id].member_epoch == gen and members(h)[a.member_id].assigned == {
        "t": frozenset({0})
    }
    assert joined.member_epoch == group.group_epoch > gen
    # the classic members' heartbeats ask them to rejoin; their old generation still commits
    for r in (a, b):
        with pytest.raises(RebalanceInProgressError):
            h.coord.heartbeat("g", r.member_id, gen)
    commit = OffsetCommitRequest(
        group_id="g",
        offsets=((TopicPartition("t", 0), 5, -1, None),),
        generation_id=gen,
        member_id=a.member_id,
    )
    assert await h.coord.commit_offsets(commit, api_version=8) == {TopicPartition("t", 0): None}
    with pytest.raises(IllegalGenerationError):
        h.coord.heartbeat("g", a.member_id, gen + 7)
    # eager members revoke everything and rejoin: each gets its target at the new epoch
    owners: dict[int, str] = {}
    for r in (a, b):
        j = await h.coord.join_group(jreq("g", r.member_id))
        assert (j.leader_id, j.protocol_name, j.generation_id) == ("", "range", group.group_epoch)
        for p in await sync(h, r.member_id, j.generation_id):
            owners[p] = r.member_id
        h.coord.heartbeat("g", r.member_id, j.generation_id)  # stable now: no rebalance
    got = await beat(h, "c1", joined.member_epoch, {})
    assert got.assignment is not None
    owners |= dict.fromkeys(got.assignment.get("t", frozenset()), "c1")
    assert sorted(owners) == list(range(TOPIC_PARTITIONS))
    assert {owners[0], owners[1]} == {a.member_id, b.member_id}  # sticky: kept their partitions
    assert group.state.value == "Stable"
    # the last consumer-protocol member leaves: a classic group again, rebalancing
    assert (await beat(h, "c1", -1)).member_epoch == -1
    assert not h.coord.is_consumer_group("g")
    classic = h.coord._groups.groups["g"]
    assert classic.state is Preparing and set(classic.members) == {a.member_id, b.member_id}
    with pytest.raises(RebalanceInProgressError):
        h.coord.heartbeat("g", a.member_id, classic.generation)
    rejoined = await h.through_initial_delay(h.join("g", a.member_id), h.join("g", b.member_id))
    assert {r.generation_id for r in rejoined} == {classic.generation}
    assert h.coord.committed_offsets("g")[TopicPartition("t", 0)].offset == 5


async def test_cooperative_member_revokes_then_gets_its_new_partitions(hb: Harness) -> None:
    h = hb
    (a,) = await h.stable_group(1, protos=owned_subscription([]))
    # the classic leader assigned itself t-0 only (grouplib's plan); give it everything
    members_before = h.coord._groups.groups["g"].members
    members_before[a.member_id].assignment = _assignment_bytes([0, 1, 2, 3])
    c = await beat(h, "c1", 0)
    assert c.assignment == {}  # everything is still a's
    with pytest.raises(RebalanceInProgressError):
        h.coord.heartbeat("g", a.member_id, a.generation_id)
    # a rejoins still owning all four: it keeps its share, its epoch stays until it revokes
    j = await h.coord.join_group(jreq("g", a.member_id, protos=owned_subscription([0, 1, 2, 3])))
    kept = await sync(h, a.member_id, j.generation_id)
    assert len(kept) == 2 and j.generation_id == a.generation_id
    with pytest.raises(RebalanceInProgressError):
        h.coord.heartbeat("g", a.member_id, j.generation_id)
    # it revoked the others and rejoins: new epoch; c1 gets them at its next heartbeat
    j2 = await h.coord.join_group(jreq("g", a.member_id, protos=owned_subscription(kept)))
    assert j2.generation_id > j.generation_id and await sync(h, a.member_id, j2.generation_id) == kept
    got = await beat(h, "c1", c.member_epoch, {})
    assert got.assignment == {"t": frozenset({0, 1, 2, 3}) - kept}


def _assignment_bytes(parts: list[int]) -> bytes:
    return assignment(t=parts)


async def test_policies(tmp_path: Path) -> None:
    h = await harness(tmp_path / "disabled", "disabled")
    try:
        await h.stable_group(1)
        with pytest.raises(GroupIdNotFoundError):
            await beat(h, "c1", 0)
    finally:
        await h.close()
    h = await harness(tmp_path / "upgrade", "upgrade")
    try:
        (a,) = await h.stable_group(1)
        await beat(h, "c1", 0)
        await beat(h, "c1", -1)  # no downgrade under "upgrade": a consumer group of a classic member
        assert h.coord.is_consumer_group("g") and set(members(h)) == {a.member_id}
    finally:
        await h.close()


def test_classic_member_metadata_round_trips_in_the_records() -> None:
    value = MemberMetadataValue(
        None, None, "c", "/h", ("t",), None, 30_000, None, (45_000, (("range", b"\x00\x01"), ("rr", b"")))
    )
    raw = encode_consumer_value(value)
    assert decode_consumer_value(5, raw) == value
    group = ConsumerGroup("g")
    m = ConsumerMember(member_id="m", instance_id=None, subscribed_topic_names=("t",))
    m.classic = ClassicMetadata(45_000, (("range", b"\x00\x01"),))
    group.members["m"] = m
    group.group_epoch = 3
    tid = uuid.uuid4()
    records = group_records(group, lambda name: tid)
    assert isinstance(records[ConsumerKey(5, "g", "m")], MemberMetadataValue)
    restored = restore_group("g", records, lambda i: "t")
    assert restored is not None and restored.members["m"].classic == m.classic


async def test_a_new_classic_member_joins_a_consumer_group(hb: Harness) -> None:
    h = hb
    c = await beat(h, "c1", 0)
    assert c.assignment == {"t": frozenset(range(TOPIC_PARTITIONS))}
    mid = await h.member_id("g")  # KIP-394's first round, through the bridge
    j = await h.coord.join_group(jreq("g", mid))
    assert members(h)[mid].classic is not None and await sync(h, mid, j.generation_id) == set()
    with pytest.raises(RebalanceInProgressError):  # its partitions are still c1's
        h.coord.heartbeat("g", mid, j.generation_id)
    revoking = await beat(h, "c1", c.member_epoch, {"t": frozenset(range(TOPIC_PARTITIONS))})
    assert revoking.assignment is not None and len(revoking.assignment["t"]) == 2
    await beat(h, "c1", c.member_epoch, revoking.assignment)  # revoked
    j2 = await h.coord.join_group(jreq("g", mid))
    assert len(await sync(h, mid, j2.generation_id)) == 2
    h.coord.heartbeat("g", mid, j2.generation_id)  # stable


async def test_a_classic_member_that_does_not_sync_is_removed(hb: Harness) -> None:
    """Kafka's sync timeout: SyncGroup within the rebalance timeout after JoinGroup."""
    h = hb
    await beat(h, "c1", 0)
    synced, silent = await h.member_id("g"), await h.member_id("g")
    for mid in (synced, silent):
        j = await h.coord.join_group(jreq("g", mid, rebalance=5_000))
    await sync(h, synced, members(h)[synced].member_epoch)
    await h.advance(5_001)
    assert synced in members(h) and silent not in members(h)
    assert j.member_id == silent


async def test_a_classic_static_member_replaces_a_consumer_member(hb: Harness) -> None:
    """Kafka 4: a classic member joining with the group.instance.id of a consumer-protocol
    member replaces it (its assignment and epoch); it was the last consumer-protocol
    member, so the group is classic again, Stable, the joiner's SyncGroup answering the
    replaced member's partitions; the replaced member is gone (UNKNOWN_MEMBER_ID)."""
    h = hb
    c = await h.coord.consumer_group_heartbeat(
        HeartbeatCall(
            group_id="g",
            member_id="c1",
            member_epoch=0,
            instance_id="i1",
            rebalance_timeout_ms=10_000,
            subscribed_topic_names=("t",),
            owned={},
        ),
        Image(),
    )
    assert c.assignment == {"t": frozenset(range(TOPIC_PARTITIONS))}
    j = await h.coord.join_group(jreq("g", instance="i1"))
    assert j.member_id != "c1" and j.generation_id == c.member_epoch
    assert not h.coord.is_consumer_group("g")
    classic = h.coord._groups.groups["g"]
    assert classic.state.value == "Stable" and set(classic.members) == {j.member_id}
    assert classic.static == {"i1": j.member_id}
    assert await sync(h, j.member_id, j.generation_id) == set(range(TOPIC_PARTITIONS))
    h.coord.heartbeat("g", j.member_id, j.generation_id, "i1")  # stable: no rebalance
    with pytest.raises(UnknownMemberIdError):
        await beat(h, "c1", c.member_epoch, {})


async def test_a_consumer_member_replaces_a_classic_static_member(hb: Harness) -> None:
    """The other way: a consumer-protocol member with the instance id of a classic member
    (Kafka replaces it without waiting for it to leave, which only a consumer-protocol
    predecessor must): the group is upgraded and the new member keeps the partitions."""
    h = hb
    (a,) = await h.through_initial_delay(h.join("g", instance="i2"))  # static: no KIP-394 round
    await h.sync("g", a.member_id, a.generation_id, {a.member_id: assignment(t=[0, 1])}, instance="i2")
    r = await h.coord.consumer_group_heartbeat(
        HeartbeatCall(
            group_id="g",
            member_id="c2",
            member_epoch=0,
            instance_id="i2",
            rebalance_timeout_ms=10_000,
            subscribed_topic_names=("t",),
            owned={},
        ),
        Image(),
    )
    assert h.coord.is_consumer_group("g") and set(members(h)) == {"c2"}
    assert members(h)["c2"].classic is None and r.member_epoch >= a.generation_id
    assert r.assignment is not None and r.assignment["t"] >= {0, 1}
    with pytest.raises((UnknownMemberIdError, FencedInstanceIdError)):
        h.coord.heartbeat("g", a.member_id, a.generation_id, "i2")
