"""KIP-848 consumer groups inside the group coordinator (broker.groups.coordinator), over a
real offsets log and a fake clock: classic and consumer groups under the same ids, the
conversions of empty groups, offsets routed through the member-epoch checks, listing,
describing, deleting and the session timeout."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from broker.groups.consumer_group import HeartbeatCall
from broker.groups.types import GroupState, OffsetCommitRequest, TopicPartition
from hot.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NonEmptyGroupError,
    StaleMemberEpochError,
)
from tests.broker.groups.grouplib import Harness

TP0 = TopicPartition("t", 0)


class Image:
    def partition_count(self, topic: str) -> int | None:
        return {"t": 2}.get(topic)

    def topic_names(self) -> Iterable[str]:
        return ["t"]


async def beat(h: Harness, group: str, member: str, epoch: int) -> int:
    extra = (
        {"rebalance_timeout_ms": 10_000, "subscribed_topic_names": ("t",), "owned": {}} if epoch == 0 else {}
    )
    r = await h.coord.consumer_group_heartbeat(
        HeartbeatCall(group_id=group, member_id=member, member_epoch=epoch, **extra),  # type: ignore[arg-type]
        Image(),
    )
    return r.member_epoch


def commit(group: str, member: str = "", epoch: int = -1, offset: int = 7) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group, offsets=((TP0, offset, -1, None),), generation_id=epoch, member_id=member
    )


async def test_consumer_group_offsets_listing_and_deletion(h: Harness) -> None:
    epoch = await beat(h, "cg", "m1", 0)
    assert (await h.coord.commit_offsets(commit("cg", "m1", epoch), api_version=9)) == {TP0: None}
    with pytest.raises(StaleMemberEpochError):
        await h.coord.commit_offsets(commit("cg", "m1", epoch - 1), api_version=9)
    assert h.coord.committed_offsets("cg", member_id="m1", member_epoch=epoch)[TP0].offset == 7
    with pytest.raises(StaleMemberEpochError):
        h.coord.committed_offsets("cg", member_id="m1", member_epoch=epoch + 3)
    (listed,) = [g for g in h.coord.list_groups() if g.group_id == "cg"]
    assert (listed.group_type, listed.protocol_type, listed.state) == (
        "consumer",
        "consumer",
        GroupState.STABLE,
    )
    assert [g.group_id for g in h.coord.list_groups(["reconciling"])] == []
    d = h.coord.describe_group("cg")
    assert (d.group_type, d.generation_id, d.protocol_name) == ("consumer", epoch, "uniform")
    assert d.members[0].member_epoch == epoch and d.members[0].target_partitions == (
        TP0,
        TopicPartition("t", 1),
    )
    deleted = await h.coord.delete_offsets("cg", [TP0])
    assert isinstance(deleted[TP0], GroupSubscribedToTopicError)
    assert isinstance((await h.coord.delete_groups(["cg"]))["cg"], NonEmptyGroupError)
    # the session expires: the group is empty and can be deleted with its offsets
    await h.advance(h.config.consumer_session_timeout_ms + 1)
    assert h.coord.describe_group("cg").state is GroupState.EMPTY
    assert (await h.coord.delete_groups(["cg"]))["cg"] is None
    assert h.coord.committed_offsets("cg") == {}
    with pytest.raises(GroupIdNotFoundError):
        h.coord.describe_consumer_group("cg")


async def test_empty_groups_change_protocol(h: Harness) -> None:
    # a classic group with only committed offsets becomes a consumer group ...
    assert (await h.coord.commit_offsets(commit("g2"))) == {TP0: None}
    epoch = await beat(h, "g2", "m1", 0)
    assert h.coord.is_consumer_group("g2")
    # ... and back when its last member left and a classic member joins; offsets stay
    assert await beat(h, "g2", "m1", -1) == -1
    results = await h.through_initial_delay(h.join("g2", await h.member_id("g2")))
    assert results[0].generation_id == 1 and not h.coord.is_consumer_group("g2")
    assert h.coord.committed_offsets("g2")[TP0].offset == 7
    assert epoch > 0
    # (groups with members convert online: tests/broker/groups/test_classic_bridge.py)


async def test_empty_consumer_group_without_offsets_is_cleaned_up(h: Harness) -> None:
    """Kafka's periodic cleanup deletes an empty group with no offsets left, consumer
    groups included; one with offsets stays."""
    await beat(h, "gone", "m1", 0)
    kept_epoch = await beat(h, "kept", "m1", 0)
    assert (await h.coord.commit_offsets(commit("kept", "m1", kept_epoch), api_version=9)) == {TP0: None}
    h.coord.expire_offsets()
    assert {"gone", "kept"} <= {g.group_id for g in h.coord.list_groups()}  # members: kept
    assert await beat(h, "gone", "m1", -1) == -1
    assert await beat(h, "kept", "m1", -1) == -1
    h.coord.expire_offsets()
    ids = {g.group_id for g in h.coord.list_groups()}
    assert "gone" not in ids and "kept" in ids
