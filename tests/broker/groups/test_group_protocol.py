"""The group APIs over the wire at old and new versions (the version quirks real clients
do not all exercise), against a real broker, with the project's own request codec."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.consumer_protocol import Subscription, encode_subscription
from kwire.messages.delete_groups import DeleteGroupsRequest
from kwire.messages.describe_groups import DescribeGroupsRequest
from kwire.messages.find_coordinator import FindCoordinatorRequest
from kwire.messages.heartbeat import HeartbeatRequest
from kwire.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kwire.messages.leave_group import LeaveGroupRequest, MemberIdentity
from kwire.messages.list_groups import ListGroupsRequest
from kwire.messages.metadata import NO_AUTHORIZED_OPERATIONS, MetadataRequest
from kwire.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kwire.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kwire.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
)
from kwire.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(120)

SUB = encode_subscription(Subscription(0, ("t",)))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("groups"),
        env={"STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS": "50", "STRATA_GROUP_MIN_SESSION_TIMEOUT_MS": "1000"},
    ).start()
    create_topic(b.bootstrap, "t", 2)
    yield b
    b.kill()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[KafkaClient]:
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as c:
        yield c


def call(client: KafkaClient, key: ApiKey, version: int, req: Any) -> Any:
    return client._call(key, version, req)


def join(client: KafkaClient, version: int, group: str, member_id: str = "", **kw: Any) -> Any:
    return call(
        client,
        ApiKey.JOIN_GROUP,
        version,
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id=member_id,
            protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=SUB),),
            **kw,
        ),
    )


def test_find_coordinator_at_every_version(client: KafkaClient, broker: BrokerProcess) -> None:
    for v in range(4):
        r = call(client, ApiKey.FIND_COORDINATOR, v, FindCoordinatorRequest(key="g"))
        assert (r.error_code, r.node_id, r.host, r.port) == (0, 0, "127.0.0.1", broker.kafka_port)
    r = call(client, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(coordinator_keys=("a", "b")))
    assert [(c.key, c.error_code, c.port) for c in r.coordinators] == [
        (k, 0, broker.kafka_port) for k in "ab"
    ]
    # A transactional id's coordinator: the leader of its __transaction_state partition.
    r = call(client, ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="txn", key_type=1))
    assert (r.error_code, r.node_id, r.port) == (0, 0, broker.kafka_port)
    r = call(
        client, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(coordinator_keys=("x", "y"), key_type=1)
    )
    assert [(c.key, c.error_code, c.port) for c in r.coordinators] == [
        (k, 0, broker.kafka_port) for k in "xy"
    ]
    r = call(client, ApiKey.FIND_COORDINATOR, 2, FindCoordinatorRequest(key="x", key_type=5))
    assert r.error_code == E.INVALID_REQUEST


def test_a_whole_generation_at_old_versions(client: KafkaClient) -> None:
    # v0: no member-id round, no rebalance timeout (the session timeout is used).
    j = join(client, 0, "old")
    assert (
        j.error_code == 0 and j.generation_id == 1 and j.leader == j.member_id and j.protocol_name == "range"
    )
    assert [m.member_id for m in j.members] == [j.member_id] and j.members[0].metadata == SUB
    s = call(
        client,
        ApiKey.SYNC_GROUP,
        0,
        SyncGroupRequest(
            group_id="old",
            generation_id=1,
            member_id=j.member_id,
            assignments=(SyncGroupRequestAssignment(member_id=j.member_id, assignment=b"A"),),
        ),
    )
    assert (s.error_code, s.assignment) == (0, b"A")
    hb = call(
        client, ApiKey.HEARTBEAT, 0, HeartbeatRequest(group_id="old", generation_id=1, member_id=j.member_id)
    )
    assert hb.error_code == 0
    hb = call(
        client, ApiKey.HEARTBEAT, 0, HeartbeatRequest(group_id="old", generation_id=9, member_id=j.member_id)
    )
    assert hb.error_code == E.ILLEGAL_GENERATION
    commit = OffsetCommitRequest(
        group_id="old",
        generation_id_or_member_epoch=1,
        member_id=j.member_id,
        retention_time_ms=60_000,
        topics=(
            OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=4, committed_metadata="m"
                    ),
                    OffsetCommitRequestPartition(partition_index=7, committed_offset=4),
                ),
            ),
        ),
    )
    r = call(client, ApiKey.OFFSET_COMMIT, 2, commit)
    assert [(p.partition_index, p.error_code) for p in r.topics[0].partitions] == [
        (0, 0),
        (7, E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    ask = (OffsetFetchRequestTopic(name="t", partition_indexes=(0, 1)),)
    f = call(client, ApiKey.OFFSET_FETCH, 1, OffsetFetchRequest(group_id="old", topics=ask))
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in f.topics[0].partitions] == [
        (0, 4, "m"),
        (1, -1, ""),
    ]
    d = call(client, ApiKey.DESCRIBE_GROUPS, 0, DescribeGroupsRequest(groups=["old"]))
    g = d.groups[0]
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    assert g.members[0].member_assignment == b"A" and g.members[0].client_id == "strata-cli"
    lv = call(client, ApiKey.LEAVE_GROUP, 0, LeaveGroupRequest(group_id="old", member_id=j.member_id))
    assert lv.error_code == 0
    lv = call(client, ApiKey.LEAVE_GROUP, 1, LeaveGroupRequest(group_id="old", member_id=j.member_id))
    assert lv.error_code == E.UNKNOWN_MEMBER_ID


def test_a_whole_generation_at_new_versions(client: KafkaClient) -> None:
    first = join(client, 9, "new", reason="starting")
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id and first.protocol_name is None
    j = join(client, 9, "new", first.member_id)
    assert (j.error_code, j.generation_id, j.protocol_type, j.protocol_name) == (0, 1, "consumer", "range")
    assert j.skip_assignment is False and j.leader == j.member_id
    sync = SyncGroupRequest(
        group_id="new",
        generation_id=1,
        member_id=j.member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(SyncGroupRequestAssignment(member_id=j.member_id, assignment=b"B"),),
    )
    s = call(client, ApiKey.SYNC_GROUP, 5, sync)
    assert (s.error_code, s.protocol_type, s.protocol_name, s.assignment) == (0, "consumer", "range", b"B")
    s = call(
        client,
        ApiKey.SYNC_GROUP,
        5,
        SyncGroupRequest(group_id="new", generation_id=1, member_id=j.member_id, protocol_name="x"),
    )
    assert s.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    hb = call(
        client, ApiKey.HEARTBEAT, 4, HeartbeatRequest(group_id="new", generation_id=1, member_id=j.member_id)
    )
    assert hb.error_code == 0
    commit = OffsetCommitRequest(
        group_id="new",
        generation_id_or_member_epoch=1,
        member_id=j.member_id,
        topics=(
            OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    OffsetCommitRequestPartition(
                        partition_index=1, committed_offset=9, committed_leader_epoch=2
                    ),
                ),
            ),
        ),
    )
    assert call(client, ApiKey.OFFSET_COMMIT, 8, commit).topics[0].partitions[0].error_code == 0
    # v7: null topics = every committed partition, with the leader epoch (v5+).
    f = call(client, ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id="new", topics=None))
    assert f.error_code == 0
    assert [
        (t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch)
        for t in f.topics
        for p in t.partitions
    ] == [("t", 1, 9, 2)]
    # v8: batched groups, each with its own answer.
    f = call(
        client,
        ApiKey.OFFSET_FETCH,
        8,
        OffsetFetchRequest(
            groups=(
                OffsetFetchRequestGroup(group_id="new", topics=None),
                OffsetFetchRequestGroup(
                    group_id="unknown", topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0,)),)
                ),
            )
        ),
    )
    assert [(g.group_id, g.error_code) for g in f.groups] == [("new", 0), ("unknown", 0)]
    assert f.groups[0].topics[0].partitions[0].committed_offset == 9
    assert f.groups[1].topics[0].partitions[0].committed_offset == -1
    lg = call(client, ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=("Stable",)))
    assert ("new", "consumer", "Stable") in [(g.group_id, g.protocol_type, g.group_state) for g in lg.groups]
    assert all(g.group_state == "Stable" for g in lg.groups)
    d = call(
        client,
        ApiKey.DESCRIBE_GROUPS,
        5,
        DescribeGroupsRequest(groups=["new", "ghost"], include_authorized_operations=True),
    )
    assert d.groups[0].members[0].group_instance_id is None and d.groups[0].authorized_operations > 0
    assert (d.groups[1].error_code, d.groups[1].group_state) == (0, "Dead")
    d = call(client, ApiKey.DESCRIBE_GROUPS, 3, DescribeGroupsRequest(groups=["new"]))
    assert d.groups[0].authorized_operations == NO_AUTHORIZED_OPERATIONS
    # OffsetDelete of a subscribed topic while a member is there.
    od = OffsetDeleteRequest(
        group_id="new",
        topics=(
            OffsetDeleteRequestTopic(name="t", partitions=(OffsetDeleteRequestPartition(partition_index=1),)),
        ),
    )
    r = call(client, ApiKey.OFFSET_DELETE, 0, od)
    assert (r.error_code, r.topics[0].partitions[0].error_code) == (0, E.GROUP_SUBSCRIBED_TO_TOPIC)
    r = call(client, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=("new",)))
    assert r.results[0].error_code == E.NON_EMPTY_GROUP
    lv = call(
        client,
        ApiKey.LEAVE_GROUP,
        5,
        LeaveGroupRequest(
            group_id="new",
            members=(MemberIdentity(member_id=j.member_id, reason="done"), MemberIdentity(member_id="ghost")),
        ),
    )
    assert (lv.error_code, [m.error_code for m in lv.members]) == (0, [0, E.UNKNOWN_MEMBER_ID])
    r = call(client, ApiKey.DELETE_GROUPS, 0, DeleteGroupsRequest(groups_names=("new", "ghost")))
    assert [(x.group_id, x.error_code) for x in r.results] == [("new", 0), ("ghost", E.GROUP_ID_NOT_FOUND)]
    r = call(client, ApiKey.OFFSET_DELETE, 0, od)
    assert r.error_code == E.GROUP_ID_NOT_FOUND


def test_static_member_over_the_wire(client: KafkaClient) -> None:
    j = join(client, 5, "st", group_instance_id="i1")
    assert j.error_code == 0 and j.member_id.startswith("i1-")
    call(
        client,
        ApiKey.SYNC_GROUP,
        3,
        SyncGroupRequest(group_id="st", generation_id=1, member_id=j.member_id, group_instance_id="i1"),
    )
    again = join(client, 9, "st", group_instance_id="i1")  # KIP-814: leader, skip the assignment
    assert again.error_code == 0 and again.skip_assignment and again.leader == again.member_id != j.member_id
    hb = call(
        client,
        ApiKey.HEARTBEAT,
        3,
        HeartbeatRequest(group_id="st", generation_id=1, member_id=j.member_id, group_instance_id="i1"),
    )
    assert hb.error_code == E.FENCED_INSTANCE_ID
    lv = call(
        client,
        ApiKey.LEAVE_GROUP,
        3,
        LeaveGroupRequest(group_id="st", members=(MemberIdentity(group_instance_id="i1"),)),
    )
    assert [m.error_code for m in lv.members] == [0]


def test_join_errors_over_the_wire(client: KafkaClient) -> None:
    r = call(
        client,
        ApiKey.JOIN_GROUP,
        7,
        JoinGroupRequest(
            group_id="e", session_timeout_ms=10, member_id="", protocol_type="consumer", protocols=()
        ),
    )
    assert r.error_code == E.INVALID_SESSION_TIMEOUT and r.protocol_name is None
    r = join(client, 6, "")
    assert r.error_code == E.INVALID_GROUP_ID
    r = join(client, 2, "e", "nobody")
    assert r.error_code == E.UNKNOWN_MEMBER_ID and r.member_id == "nobody" and r.protocol_name == ""
    hb = call(client, ApiKey.HEARTBEAT, 1, HeartbeatRequest(group_id="e", generation_id=1, member_id="x"))
    assert hb.error_code == E.UNKNOWN_MEMBER_ID
    s = call(client, ApiKey.SYNC_GROUP, 1, SyncGroupRequest(group_id="e", generation_id=1, member_id="x"))
    assert s.error_code == E.UNKNOWN_MEMBER_ID
    # A member commit to a group that does not exist; a simple (generation -1) one is fine.
    bad = OffsetCommitRequest(
        group_id="e",
        generation_id_or_member_epoch=3,
        member_id="x",
        topics=(
            OffsetCommitRequestTopic(
                name="t", partitions=(OffsetCommitRequestPartition(partition_index=0, committed_offset=1),)
            ),
        ),
    )
    assert (
        call(client, ApiKey.OFFSET_COMMIT, 5, bad).topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
    )


def test_offsets_topic_is_internal_in_metadata(
    client: KafkaClient, broker: BrokerProcess, tmp_path: Path
) -> None:
    """A single node is a cluster of one: committed offsets live in the internal topic
    ``__consumer_offsets`` (created by the first FindCoordinator), which Metadata lists
    with ``is_internal``, as Kafka does; no other topic is internal but ``__transaction_state``."""
    assert call(client, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g")).error_code == 0
    md = client.call(ApiKey.METADATA, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    internal = {t.name: t.is_internal for t in md.topics}
    assert internal.get("__consumer_offsets") is True
    internal_names = {"__consumer_offsets", "__transaction_state"}
    assert not any(v for name, v in internal.items() if name not in internal_names)
    assert (broker.data_dir / "logs" / "__consumer_offsets-0").is_dir()
