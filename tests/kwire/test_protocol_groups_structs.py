"""Wire codec of the group-coordinator APIs: golden bytes against two more independent
implementations, kafka-python's older hand-written structs and aiokafka's structs (split
from ``test_protocol_groups``, which keeps round trips, kafka-python's JSON-driven
classes, hand-checked layouts and malformed input)."""

from __future__ import annotations

from typing import Any

import pytest

from kwire.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from kwire.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kwire.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kwire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kwire.messages.join_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    JoinGroupResponseMember,
)
from kwire.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    MemberResponse,
)
from kwire.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from kwire.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kwire.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kwire.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse
from tests.kwire.test_protocol_groups import SPECS, decode_body, encode_body

# --- golden bytes against the older hand-written structs (kafka-python old, aiokafka) --------


def _old_pairs() -> list[tuple[str, int, int, Any, Any]]:
    """(label, key, version, our message, the same built with an independent struct class)."""
    old_fc = pytest.importorskip("kafka.protocol.old.find_coordinator")
    old_group = pytest.importorskip("kafka.protocol.old.group")
    old_commit = pytest.importorskip("kafka.protocol.old.commit")
    old_admin = pytest.importorskip("kafka.protocol.old.admin")
    aio_group = pytest.importorskip("aiokafka.protocol.group")
    aio_commit = pytest.importorskip("aiokafka.protocol.commit")
    aio_coord = pytest.importorskip("aiokafka.protocol.coordination")
    aio_admin = pytest.importorskip("aiokafka.protocol.admin")

    commit_v2 = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=7,
        member_id="m-1",
        retention_time_ms=-1,
        topics=(
            OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=10, committed_metadata=""
                    ),
                    OffsetCommitRequestPartition(
                        partition_index=3, committed_offset=99, committed_metadata="x"
                    ),
                ),
            ),
        ),
    )
    fetch_resp_v3 = OffsetFetchResponse(
        throttle_time_ms=1,
        topics=(
            OffsetFetchResponseTopic(
                name="t",
                partitions=(
                    OffsetFetchResponsePartition(partition_index=0, committed_offset=5, metadata=""),
                    OffsetFetchResponsePartition(
                        partition_index=1, committed_offset=-1, metadata=None, error_code=0
                    ),
                ),
            ),
        ),
        error_code=0,
    )
    join_v5 = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10000,
        rebalance_timeout_ms=300000,
        member_id="m",
        group_instance_id="i-1",
        protocol_type="consumer",
        protocols=(
            JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01"),
            JoinGroupRequestProtocol(name="roundrobin", metadata=b""),
        ),
    )
    sync_v3 = SyncGroupRequest(
        group_id="g",
        generation_id=2,
        member_id="m",
        group_instance_id="i-1",
        assignments=(SyncGroupRequestAssignment(member_id="m", assignment=b"\x00\x02"),),
    )
    return [
        (
            "find-coordinator-v0",
            10,
            0,
            FindCoordinatorRequest(key="g"),
            old_fc.FindCoordinatorRequest_v0("g"),
        ),
        (
            "find-coordinator-v1-txn",
            10,
            1,
            FindCoordinatorRequest(key="tx", key_type=1),
            old_fc.FindCoordinatorRequest_v1("tx", 1),
        ),
        (
            "find-coordinator-v1-aiokafka",
            10,
            1,
            FindCoordinatorRequest(key="g", key_type=0),
            aio_coord.FindCoordinatorRequest_v1("g", 0),
        ),
        (
            "find-coordinator-response-v1",
            10,
            1,
            FindCoordinatorResponse(
                throttle_time_ms=0, error_code=15, error_message="nope", node_id=-1, host="", port=-1
            ),
            old_fc.FindCoordinatorResponse_v1(0, 15, "nope", -1, "", -1),
        ),
        (
            "join-group-v0",
            11,
            0,
            JoinGroupRequest(
                group_id="g",
                session_timeout_ms=6000,
                protocol_type="consumer",
                protocols=(JoinGroupRequestProtocol(name="range", metadata=b"md"),),
            ),
            old_group.JoinGroupRequest_v0("g", 6000, "", "consumer", [("range", b"md")]),
        ),
        (
            "join-group-v5",
            11,
            5,
            join_v5,
            old_group.JoinGroupRequest_v5(
                "g", 10000, 300000, "m", "i-1", "consumer", [("range", b"\x00\x01"), ("roundrobin", b"")]
            ),
        ),
        (
            "join-group-v5-aiokafka",
            11,
            5,
            join_v5,
            aio_group.JoinGroupRequest_v5(
                "g", 10000, 300000, "m", "i-1", "consumer", [("range", b"\x00\x01"), ("roundrobin", b"")]
            ),
        ),
        (
            "join-group-response-v5",
            11,
            5,
            JoinGroupResponse(
                throttle_time_ms=0,
                generation_id=1,
                protocol_name="range",
                leader="m",
                member_id="m",
                members=(JoinGroupResponseMember(member_id="m", group_instance_id="i-1", metadata=b"z"),),
            ),
            old_group.JoinGroupResponse_v5(0, 0, 1, "range", "m", "m", [("m", "i-1", b"z")]),
        ),
        (
            "heartbeat-v0",
            12,
            0,
            HeartbeatRequest(group_id="g", generation_id=4, member_id="m"),
            old_group.HeartbeatRequest_v0("g", 4, "m"),
        ),
        (
            "heartbeat-v3",
            12,
            3,
            HeartbeatRequest(group_id="g", generation_id=4, member_id="m", group_instance_id=None),
            old_group.HeartbeatRequest_v3("g", 4, "m", None),
        ),
        (
            "heartbeat-response-v1",
            12,
            1,
            HeartbeatResponse(throttle_time_ms=0, error_code=27),
            old_group.HeartbeatResponse_v1(0, 27),
        ),
        (
            "leave-group-v0",
            13,
            0,
            LeaveGroupRequest(group_id="g", member_id="m"),
            old_group.LeaveGroupRequest_v0("g", "m"),
        ),
        (
            "leave-group-v3",
            13,
            3,
            LeaveGroupRequest(
                group_id="g",
                members=(
                    MemberIdentity(member_id="m"),
                    MemberIdentity(member_id="", group_instance_id="i-1"),
                ),
            ),
            old_group.LeaveGroupRequest_v3("g", [("m", None), ("", "i-1")]),
        ),
        (
            "leave-group-response-v3",
            13,
            3,
            LeaveGroupResponse(
                members=(MemberResponse(member_id="m", group_instance_id=None, error_code=25),)
            ),
            old_group.LeaveGroupResponse_v3(0, 0, [("m", None, 25)]),
        ),
        (
            "sync-group-v0",
            14,
            0,
            SyncGroupRequest(
                group_id="g",
                generation_id=1,
                member_id="m",
                assignments=(SyncGroupRequestAssignment(member_id="m", assignment=b"a"),),
            ),
            old_group.SyncGroupRequest_v0("g", 1, "m", [("m", b"a")]),
        ),
        (
            "sync-group-v3",
            14,
            3,
            sync_v3,
            old_group.SyncGroupRequest_v3("g", 2, "m", "i-1", [("m", b"\x00\x02")]),
        ),
        (
            "sync-group-v3-aiokafka",
            14,
            3,
            sync_v3,
            aio_group.SyncGroupRequest_v3("g", 2, "m", "i-1", [("m", b"\x00\x02")]),
        ),
        (
            "sync-group-response-v1",
            14,
            1,
            SyncGroupResponse(error_code=0, assignment=b"\x00\x01"),
            old_group.SyncGroupResponse_v1(0, 0, b"\x00\x01"),
        ),
        (
            "offset-commit-v0",
            8,
            0,
            OffsetCommitRequest(
                group_id="g",
                topics=(
                    OffsetCommitRequestTopic(
                        name="t",
                        partitions=(
                            OffsetCommitRequestPartition(
                                partition_index=0, committed_offset=1, committed_metadata=""
                            ),
                        ),
                    ),
                ),
            ),
            old_commit.OffsetCommitRequest_v0("g", [("t", [(0, 1, "")])]),
        ),
        (
            "offset-commit-v1",
            8,
            1,
            OffsetCommitRequest(
                group_id="g",
                generation_id_or_member_epoch=2,
                member_id="m",
                topics=(
                    OffsetCommitRequestTopic(
                        name="t",
                        partitions=(
                            OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=1,
                                commit_timestamp=123,
                                committed_metadata="md",
                            ),
                        ),
                    ),
                ),
            ),
            old_commit.OffsetCommitRequest_v1("g", 2, "m", [("t", [(0, 1, 123, "md")])]),
        ),
        (
            "offset-commit-v2",
            8,
            2,
            commit_v2,
            old_commit.OffsetCommitRequest_v2("g", 7, "m-1", -1, [("t", [(0, 10, ""), (3, 99, "x")])]),
        ),
        (
            "offset-commit-v2-aiokafka",
            8,
            2,
            commit_v2,
            aio_commit.OffsetCommitRequest_v2("g", 7, "m-1", -1, [("t", [(0, 10, ""), (3, 99, "x")])]),
        ),
        (
            "offset-commit-v7",
            8,
            7,
            OffsetCommitRequest(
                group_id="g",
                generation_id_or_member_epoch=7,
                member_id="m",
                group_instance_id="i-1",
                topics=(
                    OffsetCommitRequestTopic(
                        name="t",
                        partitions=(
                            OffsetCommitRequestPartition(
                                partition_index=2,
                                committed_offset=5,
                                committed_leader_epoch=3,
                                committed_metadata=None,
                            ),
                        ),
                    ),
                ),
            ),
            old_commit.OffsetCommitRequest_v7("g", 7, "m", "i-1", [("t", [(2, 5, 3, None)])]),
        ),
        (
            "offset-commit-response-v3",
            8,
            3,
            OffsetCommitResponse(
                throttle_time_ms=0,
                topics=(
                    OffsetCommitResponseTopic(
                        name="t",
                        partitions=(OffsetCommitResponsePartition(partition_index=0, error_code=22),),
                    ),
                ),
            ),
            old_commit.OffsetCommitResponse_v3(0, [("t", [(0, 22)])]),
        ),
        (
            "offset-fetch-v1",
            9,
            1,
            OffsetFetchRequest(
                group_id="g", topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0, 1)),)
            ),
            old_commit.OffsetFetchRequest_v1("g", [("t", [0, 1])]),
        ),
        (
            "offset-fetch-v2-all",
            9,
            2,
            OffsetFetchRequest(group_id="g", topics=None),
            old_commit.OffsetFetchRequest_v2("g", None),
        ),
        (
            "offset-fetch-response-v3-aiokafka",
            9,
            3,
            fetch_resp_v3,
            aio_commit.OffsetFetchResponse_v3(1, [("t", [(0, 5, "", 0), (1, -1, None, 0)])], 0),
        ),
        (
            "offset-fetch-response-v5",
            9,
            5,
            OffsetFetchResponse(
                topics=(
                    OffsetFetchResponseTopic(
                        name="t",
                        partitions=(
                            OffsetFetchResponsePartition(
                                partition_index=0, committed_offset=5, committed_leader_epoch=2, metadata="m"
                            ),
                        ),
                    ),
                ),
                error_code=16,
            ),
            old_commit.OffsetFetchResponse_v5(0, [("t", [(0, 5, 2, "m", 0)])], 16),
        ),
        ("list-groups-v0", 16, 0, ListGroupsRequest(), old_admin.ListGroupsRequest_v0()),
        (
            "list-groups-response-v1",
            16,
            1,
            ListGroupsResponse(groups=(ListedGroup(group_id="g", protocol_type="consumer"),)),
            old_admin.ListGroupsResponse_v1(0, 0, [("g", "consumer")]),
        ),
        (
            "describe-groups-v0",
            15,
            0,
            DescribeGroupsRequest(groups=("a", "b")),
            old_admin.DescribeGroupsRequest_v0(["a", "b"]),
        ),
        (
            "describe-groups-v3-aiokafka",
            15,
            3,
            DescribeGroupsRequest(groups=("a",), include_authorized_operations=True),
            aio_admin.DescribeGroupsRequest_v3(["a"], True),
        ),
        (
            "describe-groups-response-v3",
            15,
            3,
            DescribeGroupsResponse(
                groups=(
                    DescribedGroup(
                        group_id="g",
                        group_state="Stable",
                        protocol_type="consumer",
                        protocol_data="range",
                        members=(
                            DescribedGroupMember(
                                member_id="m",
                                client_id="c",
                                client_host="/127.0.0.1",
                                member_metadata=b"md",
                                member_assignment=b"as",
                            ),
                        ),
                        authorized_operations=(1 << 3) | (1 << 8),
                    ),
                )
            ),
            old_admin.DescribeGroupsResponse_v3(
                0, [(0, "g", "Stable", "consumer", "range", [("m", "c", "/127.0.0.1", b"md", b"as")], {3, 8})]
            ),
        ),
        (
            "delete-groups-v1",
            42,
            1,
            DeleteGroupsRequest(groups_names=("a", "b")),
            old_admin.DeleteGroupsRequest_v1(["a", "b"]),
        ),
        (
            "delete-groups-response-v0",
            42,
            0,
            DeleteGroupsResponse(results=(DeletableGroupResult(group_id="a", error_code=69),)),
            old_admin.DeleteGroupsResponse_v0(0, [("a", 69)]),
        ),
    ]


@pytest.mark.parametrize("pair", _old_pairs(), ids=lambda p: p[0])
def test_golden_body_matches_old_hand_written_structs(pair: tuple[str, int, int, Any, Any]) -> None:
    _, key, version, ours, old = pair
    kind = "request" if type(ours) is SPECS[key].request.cls else "response"
    data = encode_body(key, version, ours)
    assert data == bytes(old.encode())
    assert decode_body(key, version, data, kind) == ours
