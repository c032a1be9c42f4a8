"""Committed offsets (broker.groups.offset_manager), driven through the coordinator by a fake
clock: commits checked against members and generations, durability and restarts,
OffsetDelete, expiry and topic deletion; and once alone, loading a log's groups."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.groups.config import GroupConfig
from broker.groups.group import Group
from broker.groups.membership import GroupMembership
from broker.groups.offset_manager import OffsetManager
from broker.groups.offsets import OffsetsLog
from broker.groups.timers import Timers
from broker.groups.types import (
    GroupProtocol,
    GroupState,
    MemberIdentity,
    OffsetAndMetadata,
    OffsetCommitRequest,
    StoredGroup,
    TopicPartition,
)
from hot.errors import (
    CoordinatorLoadInProgressError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from tests.broker.groups.grouplib import (
    DELAY_MS,
    TP0,
    TP1,
    FakeClock,
    Harness,
    commit,
    settle,
)

pytestmark = pytest.mark.timeout(60)


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


# --- the offsets manager alone --------------------------------------------------------------------


async def test_the_offsets_manager_loads_the_logs_groups_and_serves_them_alone(tmp_path: Path) -> None:
    clock = FakeClock()
    store = OffsetsLog.open(tmp_path, now_ms=clock.time_ms)
    empty_since = clock.wall_ms - 5000
    await store.store_group("g", StoredGroup("consumer", 4, None, None, empty_since))
    await store.commit("s", {TP0: OffsetAndMetadata(9, -1, "", clock.wall_ms)})
    store.close()

    timers = Timers(clock, lambda: None)
    config = GroupConfig(offsets_retention_minutes=1)
    manager: list[OffsetManager] = []

    class Forward:  # the state machine persists through the manager built after it
        def store_group(self, group: Group) -> None:
            manager[0].store_group(group)

        def maybe_drop(self, group: Group) -> None:
            manager[0].maybe_drop(group)

    groups = GroupMembership(config, clock, timers, Forward())
    offsets = OffsetManager(config, groups, timers, clock, lambda topic, partition: topic == "t")
    manager.append(offsets)
    with pytest.raises(CoordinatorLoadInProgressError):
        offsets.committed_offsets("s")
    offsets.load(OffsetsLog.open(tmp_path, now_ms=clock.time_ms))
    try:
        g, s = groups.groups["g"], groups.groups["s"]
        # Stored while Empty: Empty since then. Offsets only: no protocol, no timestamp.
        assert (g.protocol_type, g.generation, g.state_timestamp_ms) == ("consumer", 4, empty_since)
        assert (s.protocol_type, s.generation, s.state_timestamp_ms) == (None, 0, -1)
        stored = OffsetAndMetadata(9, -1, "", clock.wall_ms)
        assert offsets.committed_offsets("s", [TP0, TP1]) == {TP0: stored}
        out = await offsets.commit_offsets(commit("s", (TP1, 10), (TopicPartition("u", 0), 1)))
        assert out[TP1] is None and isinstance(out[TopicPartition("u", 0)], UnknownTopicOrPartitionError)
        assert offsets.committed_offsets("s").keys() == {TP0, TP1}
        # The periodic expiry is armed by load: a minute after their commit, s's offsets go,
        # and then s itself, with nothing left; g has no offsets and goes too.
        clock.advance(config.offsets_retention_check_interval_ms)
        timers.run_due()
        await settle()
        assert offsets.store is not None and not offsets.store.has_offsets("s")
        assert groups.groups == {}
    finally:
        offsets.close()
