"""Wire codec of the group-coordinator APIs (FindCoordinator, JoinGroup, Heartbeat, LeaveGroup,
SyncGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete):
round trips at every version, golden bytes against three independent implementations
(kafka-python's JSON-driven classes, its older hand-written structs, aiokafka's structs),
hand-checked layouts of the batched and flexible versions, and precise rejection of
truncated or malformed bodies.

The specs are built here exactly as their ``APIS`` registry lines build them, so these tests
do not depend on the APIs being served yet.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire import EncodeError, ProtocolError
from kwire.apis import ApiKey, ApiSpec, _api
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
    Coordinator,
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
from kwire.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kwire.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kwire.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse
from kwire.primitives import Reader, Writer
from tests.kwire.test_protocol import SETTINGS, _fill, struct_strategy, to_kafka_python

# The exact lines for kwire/apis.py's APIS once the handlers exist.
GROUP_SPECS: tuple[ApiSpec, ...] = (
    _api(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse, "0-9", "8+"),
    _api(ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse, "0-9", "6+"),
    _api(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse, "0-4", "3+"),
    _api(ApiKey.JOIN_GROUP, JoinGroupRequest, JoinGroupResponse, "0-9", "6+"),
    _api(ApiKey.HEARTBEAT, HeartbeatRequest, HeartbeatResponse, "0-4", "4+"),
    _api(ApiKey.LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse, "0-5", "4+"),
    _api(ApiKey.SYNC_GROUP, SyncGroupRequest, SyncGroupResponse, "0-5", "4+"),
    _api(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, DescribeGroupsResponse, "0-5", "5+"),
    _api(ApiKey.LIST_GROUPS, ListGroupsRequest, ListGroupsResponse, "0-4", "3+"),
    _api(ApiKey.DELETE_GROUPS, DeleteGroupsRequest, DeleteGroupsResponse, "0-2", "2+"),
    _api(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, OffsetDeleteResponse, "0", "none"),
)
SPECS: dict[int, ApiSpec] = {s.api_key: s for s in GROUP_SPECS}

VERSIONS = [(s.api_key, v) for s in GROUP_SPECS for v in range(s.min_version, s.max_version + 1)]
VERSION_IDS = [f"{SPECS[k].name}-v{v}" for k, v in VERSIONS]


def encode_body(key: int, version: int, obj: Any) -> bytes:
    spec = SPECS[key]
    schema = spec.request if type(obj) is spec.request.cls else spec.response
    w = Writer()
    try:
        schema.codecs[version].encode(w, obj)
    except EncodeError as e:
        e.where = f"{spec.name} v{version} {'request' if schema is spec.request else 'response'}"
        raise
    return w.getvalue()


def decode_body(key: int, version: int, data: bytes, kind: str = "request") -> Any:
    """Decode a body as ``codec.decode_request`` does (strict), naming the message on error."""
    spec = SPECS[key]
    schema = spec.request if kind == "request" else spec.response
    r = Reader(data)
    try:
        obj = schema.codecs[version].decode(r)
        if r.pos != r.end:
            raise ProtocolError(f"{r.end - r.pos} trailing bytes after the body at offset {r.pos}")
    except ProtocolError as e:
        e.where = f"{spec.name} v{version} {kind}"
        raise
    return obj


# --- version table --------------------------------------------------------------------------


def test_ranges_are_exactly_the_brief() -> None:
    ranges = {s.name: (s.min_version, s.max_version, s.flexible_from) for s in GROUP_SPECS}
    assert ranges == {
        "FindCoordinator": (0, 4, 3),
        "JoinGroup": (0, 9, 6),
        "Heartbeat": (0, 4, 4),
        "LeaveGroup": (0, 5, 4),
        "SyncGroup": (0, 5, 4),
        "OffsetCommit": (0, 9, 8),
        "OffsetFetch": (0, 9, 6),
        "ListGroups": (0, 4, 3),
        "DescribeGroups": (0, 5, 5),
        "DeleteGroups": (0, 2, 2),
        "OffsetDelete": (0, 0, None),
    }
    assert (int(ApiKey.DELETE_GROUPS), int(ApiKey.OFFSET_DELETE)) == (42, 47)
    for s in GROUP_SPECS:  # header versions follow flexibility, as for every other API
        for v in range(s.min_version, s.max_version + 1):
            assert s.request_header_version(v) == (2 if s.is_flexible(v) else 1)
            assert s.response_header_version(v) == (1 if s.is_flexible(v) else 0)


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@SETTINGS
@given(data=st.data())
def test_request_round_trip(key: int, version: int, data: st.DataObject) -> None:
    spec = SPECS[key]
    obj = data.draw(struct_strategy(spec.request.cls, version, spec.is_flexible(version)))
    raw = encode_body(key, version, obj)
    decoded = decode_body(key, version, raw)
    assert decoded == obj
    assert encode_body(key, version, decoded) == raw


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@SETTINGS
@given(data=st.data())
def test_response_round_trip(key: int, version: int, data: st.DataObject) -> None:
    spec = SPECS[key]
    obj = data.draw(struct_strategy(spec.response.cls, version, spec.is_flexible(version)))
    raw = encode_body(key, version, obj)
    decoded = decode_body(key, version, raw, "response")
    assert decoded == obj
    assert encode_body(key, version, decoded) == raw


# --- golden bytes against kafka-python's JSON-driven classes (every version) ----------------

kp_admin = pytest.importorskip("kafka.protocol.admin")
kp_consumer = pytest.importorskip("kafka.protocol.consumer")
kp_metadata = pytest.importorskip("kafka.protocol.metadata")

KP: dict[int, tuple[Any, Any]] = {
    8: (kp_consumer.OffsetCommitRequest, kp_consumer.OffsetCommitResponse),
    9: (kp_consumer.OffsetFetchRequest, kp_consumer.OffsetFetchResponse),
    10: (kp_metadata.FindCoordinatorRequest, kp_metadata.FindCoordinatorResponse),
    11: (kp_consumer.JoinGroupRequest, kp_consumer.JoinGroupResponse),
    12: (kp_consumer.HeartbeatRequest, kp_consumer.HeartbeatResponse),
    13: (kp_consumer.LeaveGroupRequest, kp_consumer.LeaveGroupResponse),
    14: (kp_consumer.SyncGroupRequest, kp_consumer.SyncGroupResponse),
    15: (kp_admin.DescribeGroupsRequest, kp_admin.DescribeGroupsResponse),
    16: (kp_admin.ListGroupsRequest, kp_admin.ListGroupsResponse),
    42: (kp_admin.DeleteGroupsRequest, kp_admin.DeleteGroupsResponse),
    47: (kp_consumer.OffsetDeleteRequest, kp_consumer.OffsetDeleteResponse),
}


def kafka_python_bytes(key: int, version: int, obj: Any) -> bytes:
    kp_cls = KP[key][0 if type(obj) is SPECS[key].request.cls else 1]
    return bytes(to_kafka_python(kp_cls, kp_cls._struct, obj, version).encode(version=version))


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@settings(SETTINGS, max_examples=8)
@given(data=st.data())
def test_golden_request_body_matches_kafka_python(key: int, version: int, data: st.DataObject) -> None:
    spec = SPECS[key]
    obj = data.draw(struct_strategy(spec.request.cls, version, spec.is_flexible(version)))
    theirs = kafka_python_bytes(key, version, obj)
    assert encode_body(key, version, obj) == theirs
    assert decode_body(key, version, theirs) == obj


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@settings(SETTINGS, max_examples=8)
@given(data=st.data())
def test_golden_response_body_matches_kafka_python(key: int, version: int, data: st.DataObject) -> None:
    spec = SPECS[key]
    obj = data.draw(struct_strategy(spec.response.cls, version, spec.is_flexible(version)))
    theirs = kafka_python_bytes(key, version, obj)
    assert encode_body(key, version, obj) == theirs
    assert decode_body(key, version, theirs, "response") == obj


# --- hand-checked layouts of batched and flexible versions (also checked by kafka-python) ----

# (label, key, version, message, body bytes)
LAYOUTS: list[tuple[str, int, int, Any, str]] = [
    (
        "find-coordinator-v4-request",
        10,
        4,
        FindCoordinatorRequest(key_type=0, coordinator_keys=("g1", "g2")),
        (
            "00"  # key_type int8 (the v0-3 key is gone)
            "03"  # coordinator_keys: compact array, 2 + 1
            "036731"  # "g1": compact string, length + 1
            "036732"  # "g2"
            "00"  # tagged fields
        ),
    ),
    (
        "find-coordinator-v4-response",
        10,
        4,
        FindCoordinatorResponse(
            coordinators=(Coordinator(key="g1", node_id=1, host="h", port=9092, error_message=None),)
        ),
        (
            "00000000"  # throttle_time_ms (the v0-3 top-level node fields are gone)
            "02"  # coordinators: compact array of 1
            "036731"  # key "g1"
            "00000001"  # node_id
            "0268"  # host "h"
            "00002384"  # port 9092
            "0000"  # error_code
            "00"  # error_message null
            "00"  # coordinator tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "find-coordinator-v0-request",
        10,
        0,
        FindCoordinatorRequest(key="g"),
        "000167",  # key "g": INT16 length; no key_type before v1
    ),
    (
        "join-group-v9-response",
        11,
        9,
        JoinGroupResponse(
            generation_id=5,
            protocol_type="consumer",
            protocol_name="range",
            leader="m1",
            skip_assignment=True,
            member_id="m1",
            members=(JoinGroupResponseMember(member_id="m1", group_instance_id=None, metadata=b"\x01"),),
        ),
        (
            "00000000"  # throttle_time_ms
            "0000"  # error_code
            "00000005"  # generation_id
            "09636f6e73756d6572"  # protocol_type "consumer" (v7+)
            "0672616e6765"  # protocol_name "range"
            "036d31"  # leader "m1"
            "01"  # skip_assignment (v9+)
            "036d31"  # member_id "m1"
            "02"  # members: compact array of 1
            "036d31"  # member_id
            "00"  # group_instance_id null
            "0201"  # metadata: compact bytes 0x01
            "00"  # member tagged fields
            "00"  # tagged fields
        ),
    ),
    (
        "join-group-v0-request",
        11,
        0,
        JoinGroupRequest(
            group_id="g",
            session_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\xab"),),
        ),
        (
            "000167"  # group_id "g"
            "00002710"  # session_timeout_ms (no rebalance_timeout_ms before v1)
            "0000"  # member_id ""
            "0008636f6e73756d6572"  # protocol_type "consumer"
            "00000001"  # protocols: 1
            "000572616e6765"  # name "range"
            "00000001ab"  # metadata: INT32 length, 0xab
        ),
    ),
    (
        "offset-fetch-v8-request",
        9,
        8,
        OffsetFetchRequest(
            groups=(
                OffsetFetchRequestGroup(group_id="a", topics=None),
                OffsetFetchRequestGroup(
                    group_id="b", topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0, 7)),)
                ),
            ),
            require_stable=True,
        ),
        (
            "03"  # groups: compact array of 2 (the v0-7 group_id/topics are gone)
            "0261"  # group_id "a"
            "00"  # topics null: every committed offset of the group
            "00"  # group tagged fields
            "0262"  # group_id "b"
            "02"  # topics: 1
            "0274"  # name "t"
            "03"  # partition_indexes: 2
            "00000000"
            "00000007"
            "00"  # topic tagged fields
            "00"  # group tagged fields
            "01"  # require_stable
            "00"  # tagged fields
        ),
    ),
    (
        "offset-fetch-v2-request-all-topics",
        9,
        2,
        OffsetFetchRequest(group_id="g", topics=None),
        (
            "000167"  # group_id "g"
            "ffffffff"  # topics: null INT32 array
        ),
    ),
    (
        "offset-commit-v1-request",
        8,
        1,
        OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=3,
            member_id="m",
            topics=(
                OffsetCommitRequestTopic(
                    name="t",
                    partitions=(
                        OffsetCommitRequestPartition(
                            partition_index=1,
                            committed_offset=42,
                            commit_timestamp=1000,
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        ),
        (
            "000167"  # group_id "g"
            "00000003"  # generation_id_or_member_epoch (v1+)
            "00016d"  # member_id "m" (v1+)
            "00000001"  # topics: 1
            "000174"  # name "t"
            "00000001"  # partitions: 1
            "00000001"  # partition_index
            "000000000000002a"  # committed_offset 42
            "00000000000003e8"  # commit_timestamp 1000 (v1 only)
            "ffff"  # committed_metadata null
        ),
    ),
    (
        "offset-delete-v0-request",
        47,
        0,
        OffsetDeleteRequest(
            group_id="g",
            topics=(
                OffsetDeleteRequestTopic(
                    name="t",
                    partitions=(
                        OffsetDeleteRequestPartition(partition_index=0),
                        OffsetDeleteRequestPartition(partition_index=4),
                    ),
                ),
            ),
        ),
        (
            "000167"  # group_id "g"
            "00000001"  # topics: 1
            "000174"  # name "t"
            "00000002"  # partitions: 2
            "00000000"
            "00000004"
        ),
    ),
    (
        "offset-delete-v0-response",
        47,
        0,
        OffsetDeleteResponse(
            error_code=0,
            throttle_time_ms=2,
            topics=(
                OffsetDeleteResponseTopic(
                    name="t", partitions=(OffsetDeleteResponsePartition(partition_index=0, error_code=86),)
                ),
            ),
        ),
        (
            "0000"  # error_code, before throttle_time_ms in this response
            "00000002"  # throttle_time_ms
            "00000001"  # topics: 1
            "000174"  # name "t"
            "00000001"  # partitions: 1
            "00000000"  # partition_index
            "0056"  # error_code 86
        ),
    ),
    (
        "delete-groups-v2-request",
        42,
        2,
        DeleteGroupsRequest(groups_names=("a", "bc")),
        (
            "03"  # groups_names: compact array of 2
            "0261"  # "a"
            "036263"  # "bc"
            "00"  # tagged fields
        ),
    ),
]


@pytest.mark.parametrize("case", LAYOUTS, ids=lambda c: c[0])
def test_hand_checked_layouts(case: tuple[str, int, int, Any, str]) -> None:
    _, key, version, obj, hexed = case
    expected = bytes.fromhex(hexed)
    assert encode_body(key, version, obj) == expected
    kind = "request" if type(obj) is SPECS[key].request.cls else "response"
    assert decode_body(key, version, expected, kind) == obj
    assert kafka_python_bytes(key, version, obj) == expected


# Realistic messages at the first flexible (and newest) versions, for the APIs the layouts
# above do not pin byte by byte.
FLEXIBLE_SAMPLES: list[tuple[str, int, int, Any]] = [
    (
        "find-coordinator-v3-response",
        10,
        3,
        FindCoordinatorResponse(error_code=15, error_message="loading", node_id=-1, host="", port=-1),
    ),
    (
        "join-group-v6-request",
        11,
        6,
        JoinGroupRequest(
            group_id="g",
            session_timeout_ms=45000,
            rebalance_timeout_ms=300000,
            member_id="m-1",
            group_instance_id="i-1",
            protocol_type="consumer",
            protocols=(
                JoinGroupRequestProtocol(name="range", metadata=b"\x00\x03"),
                JoinGroupRequestProtocol(name="cooperative-sticky", metadata=b""),
            ),
        ),
    ),
    (
        "join-group-v8-request",
        11,
        8,
        JoinGroupRequest(group_id="g", session_timeout_ms=1, protocol_type="consumer", reason="rebalance"),
    ),
    (
        "heartbeat-v4-request",
        12,
        4,
        HeartbeatRequest(group_id="g", generation_id=3, member_id="m", group_instance_id="i"),
    ),
    ("heartbeat-v4-response", 12, 4, HeartbeatResponse(error_code=27)),
    (
        "leave-group-v5-request",
        13,
        5,
        LeaveGroupRequest(
            group_id="g",
            members=(MemberIdentity(member_id="m", reason="shutdown"), MemberIdentity(group_instance_id="i")),
        ),
    ),
    (
        "leave-group-v4-response",
        13,
        4,
        LeaveGroupResponse(members=(MemberResponse(member_id="m", group_instance_id="i", error_code=0),)),
    ),
    (
        "sync-group-v5-request",
        14,
        5,
        SyncGroupRequest(
            group_id="g",
            generation_id=1,
            member_id="m",
            protocol_type="consumer",
            protocol_name="range",
            assignments=(SyncGroupRequestAssignment(member_id="m", assignment=b"\x00\x03xyz"),),
        ),
    ),
    (
        "sync-group-v4-response",
        14,
        4,
        SyncGroupResponse(assignment=b"\x00\x03"),
    ),
    (
        "offset-commit-v8-request",
        8,
        8,
        OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=4,
            member_id="m",
            group_instance_id=None,
            topics=(
                OffsetCommitRequestTopic(
                    name="orders",
                    partitions=(
                        OffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=1234,
                            committed_leader_epoch=2,
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        ),
    ),
    (
        "offset-commit-v8-response",
        8,
        8,
        OffsetCommitResponse(
            topics=(
                OffsetCommitResponseTopic(
                    name="orders",
                    partitions=(OffsetCommitResponsePartition(partition_index=0, error_code=0),),
                ),
            )
        ),
    ),
    (
        "offset-fetch-v6-response",
        9,
        6,
        OffsetFetchResponse(
            topics=(
                OffsetFetchResponseTopic(
                    name="orders",
                    partitions=(
                        OffsetFetchResponsePartition(
                            partition_index=0, committed_offset=1234, committed_leader_epoch=2, metadata=""
                        ),
                        OffsetFetchResponsePartition(partition_index=1, committed_offset=-1, metadata=None),
                    ),
                ),
            ),
        ),
    ),
    ("list-groups-v4-request", 16, 4, ListGroupsRequest(states_filter=("Stable", "Empty"))),
    (
        "list-groups-v3-response",
        16,
        3,
        ListGroupsResponse(groups=(ListedGroup(group_id="g", protocol_type="consumer"),)),
    ),
    (
        "list-groups-v4-response",
        16,
        4,
        ListGroupsResponse(
            groups=(ListedGroup(group_id="g", protocol_type="consumer", group_state="Stable"),)
        ),
    ),
    (
        "describe-groups-v5-request",
        15,
        5,
        DescribeGroupsRequest(groups=("g",), include_authorized_operations=True),
    ),
    (
        "describe-groups-v5-response",
        15,
        5,
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
                            group_instance_id="i",
                            client_id="c",
                            client_host="/10.0.0.1",
                            member_metadata=b"\x00\x03",
                            member_assignment=b"\x00\x03",
                        ),
                    ),
                ),
            )
        ),
    ),
    (
        "delete-groups-v2-response",
        42,
        2,
        DeleteGroupsResponse(results=(DeletableGroupResult(group_id="g", error_code=68),)),
    ),
]


@pytest.mark.parametrize("case", FLEXIBLE_SAMPLES, ids=lambda c: c[0])
def test_flexible_samples_match_kafka_python(case: tuple[str, int, int, Any]) -> None:
    _, key, version, obj = case
    assert SPECS[key].is_flexible(version)
    data = encode_body(key, version, obj)
    assert data == kafka_python_bytes(key, version, obj)
    kind = "request" if type(obj) is SPECS[key].request.cls else "response"
    assert decode_body(key, version, data, kind) == obj


# --- version semantics ----------------------------------------------------------------------


def test_fields_outside_a_version_decode_as_their_defaults() -> None:
    join = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=6000,
        rebalance_timeout_ms=60000,
        group_instance_id="i",
        protocol_type="consumer",
        reason="restart",
    )
    # v0 has no rebalance timeout: -1 means "use session_timeout_ms" to the coordinator
    assert decode_body(11, 0, encode_body(11, 0, join)).rebalance_timeout_ms == -1
    assert decode_body(11, 4, encode_body(11, 4, join)).group_instance_id is None
    assert decode_body(11, 7, encode_body(11, 7, join)).reason is None
    assert decode_body(11, 8, encode_body(11, 8, join)) == join

    part = OffsetCommitRequestPartition(
        partition_index=0, committed_offset=1, committed_leader_epoch=4, commit_timestamp=77
    )
    commit = OffsetCommitRequest(
        group_id="g",
        retention_time_ms=5000,
        topics=(OffsetCommitRequestTopic(name="t", partitions=(part,)),),
    )
    got = {v: decode_body(8, v, encode_body(8, v, commit)) for v in range(9)}
    assert [got[v].topics[0].partitions[0].commit_timestamp for v in range(9)] == [-1, 77] + [-1] * 7
    assert [got[v].retention_time_ms for v in range(9)] == [-1, -1, 5000, 5000, 5000, -1, -1, -1, -1]
    assert [got[v].topics[0].partitions[0].committed_leader_epoch for v in range(9)] == [-1] * 6 + [4] * 3

    fc = FindCoordinatorRequest(key="g", key_type=1, coordinator_keys=("a", "b"))
    assert decode_body(10, 3, encode_body(10, 3, fc)) == FindCoordinatorRequest(key="g", key_type=1)
    assert decode_body(10, 4, encode_body(10, 4, fc)) == FindCoordinatorRequest(
        key_type=1, coordinator_keys=("a", "b")
    )
    assert decode_body(10, 0, encode_body(10, 0, fc)) == FindCoordinatorRequest(key="g")


def test_offset_fetch_null_topics_means_all_only_where_kafka_allows_it() -> None:
    all_topics = OffsetFetchRequest(group_id="g", topics=None)
    for v in range(2, 8):
        assert decode_body(9, v, encode_body(9, v, all_topics)).topics is None
    for v in (0, 1):  # no null array before v2
        with pytest.raises(EncodeError, match=rf"OffsetFetch v{v} request topics: null array is not allowed"):
            encode_body(9, v, all_topics)
        with pytest.raises(
            ProtocolError, match=rf"OffsetFetch v{v} request topics: non-nullable array is null"
        ):
            decode_body(9, v, bytes.fromhex("000167ffffffff"))
    # v8: per group, and an empty list is "no topics", distinct from null
    req = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id="g", topics=()),))
    assert decode_body(9, 8, encode_body(9, 8, req)).groups[0].topics == ()
    # the batched response carries one entry per group, each with its own error code
    resp = OffsetFetchResponse(
        groups=(
            OffsetFetchResponseGroup(group_id="a", error_code=16),
            OffsetFetchResponseGroup(
                group_id="b",
                topics=(
                    OffsetFetchResponseTopic(
                        name="t",
                        partitions=(OffsetFetchResponsePartition(partition_index=0, committed_offset=9),),
                    ),
                ),
            ),
        )
    )
    assert decode_body(9, 8, encode_body(9, 8, resp), "response") == resp


def test_join_group_protocol_name_is_nullable_only_from_v7() -> None:
    err = JoinGroupResponse(error_code=25, protocol_name=None)
    assert decode_body(11, 7, encode_body(11, 7, err), "response").protocol_name is None
    with pytest.raises(EncodeError, match=r"JoinGroup v6 response protocol_name: null is not allowed"):
        encode_body(11, 6, err)
    # v6 is flexible: a null compact string (length byte 0) where the spec forbids it
    body = bytes.fromhex("000000000019ffffffff") + b"\x00"
    with pytest.raises(
        ProtocolError, match=r"JoinGroup v6 response protocol_name: non-nullable compact string is null"
    ):
        decode_body(11, 6, body, "response")


# --- truncated and malformed input ----------------------------------------------------------


def _examples() -> list[tuple[str, int, int, str, bytes]]:
    out = []
    for key, version in VERSIONS:
        spec = SPECS[key]
        flexible = spec.is_flexible(version)
        for kind, cls in (("request", spec.request.cls), ("response", spec.response.cls)):
            data = encode_body(key, version, _fill(cls, version, flexible))
            out.append((f"{spec.name}-v{version}-{kind}", key, version, kind, data))
    return out


EXAMPLES = _examples()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e[0])
def test_every_truncation_is_a_protocol_error_naming_the_message(
    example: tuple[str, int, int, str, bytes],
) -> None:
    _, key, version, kind, data = example
    whole = decode_body(key, version, data, kind)
    assert encode_body(key, version, whole) == data
    where = f"{SPECS[key].name} v{version} {kind}"
    for cut in range(len(data)):
        with pytest.raises(ProtocolError) as info:
            decode_body(key, version, data[:cut], kind)
        assert str(info.value).startswith(where), (cut, str(info.value))
        assert "offset" in info.value.reason, info.value.reason  # and says where in the frame


def _cut_after(data: bytes, marker: bytes) -> bytes:
    return data[: data.index(marker) + len(marker)]


def test_truncation_errors_name_the_field() -> None:
    join = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=6000,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b"0123456789"),),
    )
    data = encode_body(11, 9, join)
    with pytest.raises(ProtocolError) as info:
        decode_body(11, 9, _cut_after(data, b"0123"))
    assert info.value.path == "protocols[0].metadata"
    assert str(info.value).startswith("JoinGroup v9 request protocols[0].metadata: bytes of length 10")
    assert "overruns the frame" in str(info.value)

    commit = OffsetCommitRequest(
        group_id="g",
        topics=(
            OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=0, committed_metadata="m" * 40
                    ),
                    OffsetCommitRequestPartition(partition_index=1, committed_offset=2**40),
                ),
            ),
        ),
    )
    data = encode_body(8, 8, commit)
    cut = data.index(struct.pack(">q", 2**40)) + 3  # inside committed_offset of a merged fixed-width run
    with pytest.raises(
        ProtocolError,
        match=r"^OffsetCommit v8 request topics\[0\]\.partitions\[1\]\.committed_offset: truncated int64",
    ):
        decode_body(8, 8, data[:cut])

    with pytest.raises(ProtocolError, match=r"^Heartbeat v2 request generation_id: truncated int32"):
        decode_body(12, 2, bytes.fromhex("0001670000"))
    with pytest.raises(ProtocolError, match=r"^OffsetDelete v0 response throttle_time_ms: truncated int32"):
        decode_body(47, 0, bytes.fromhex("000000"), "response")


@pytest.mark.parametrize(
    ("key", "version", "kind", "hexed", "message"),
    [
        (13, 3, "request", "0001677fffffff", r"members: array count 2147483647 .* cannot fit"),
        (13, 4, "request", "026700", r"members: non-nullable compact array is null"),
        (15, 0, "request", "fffffffe", r"groups: array has invalid count -2"),
        (42, 1, "request", "00000001ffff", r"groups_names\[0\]: non-nullable string has length -1"),
        (10, 0, "request", "0001ff", r"key: string at offset 2 is not valid UTF-8"),
        (9, 8, "request", "02026700000000ff", r"1 trailing bytes after the body"),
        (14, 5, "response", "000000000000000005ab", r"assignment: bytes of length 4 .* overruns"),
        (12, 4, "request", "026700000001026d00010005", r"tagged field 0 of 5 bytes .* overruns"),
    ],
    ids=[
        "leave-v3-huge-count",
        "leave-v4-null-members",
        "describe-v0-negative-count",
        "delete-v1-null-name",
        "find-v0-bad-utf8",
        "offset-fetch-v8-trailing",
        "sync-v5-short-assignment",
        "heartbeat-v4-tag-overrun",
    ],
)
def test_malformed_bodies_get_precise_errors(
    key: int, version: int, kind: str, hexed: str, message: str
) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_body(key, version, bytes.fromhex(hexed), kind)


def test_encode_errors_name_the_field() -> None:
    with pytest.raises(
        EncodeError, match=r"^Heartbeat v0 request generation_id: .*-2147483648 <= number <= 2147483647"
    ):
        encode_body(12, 0, HeartbeatRequest(group_id="g", generation_id=2**31, member_id="m"))
    with pytest.raises(
        EncodeError, match=r"^LeaveGroup v3 request members\[0\]\.member_id: null is not allowed"
    ):
        encode_body(13, 3, LeaveGroupRequest(group_id="g", members=(MemberIdentity(member_id=None),)))  # type: ignore[arg-type]
    with pytest.raises(
        EncodeError, match=r"^SyncGroup v0 request assignments\[0\]: expected SyncGroupRequestAssignment"
    ):
        wrong: Any = (JoinGroupRequestProtocol(name="x"),)
        encode_body(14, 0, SyncGroupRequest(group_id="g", generation_id=1, member_id="m", assignments=wrong))


@settings(SETTINGS, max_examples=300)
@given(
    idx=st.integers(0, len(EXAMPLES) - 1),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 10_000),
)
def test_fuzz_mutated_bodies_raise_only_protocol_errors(
    idx: int, flips: list[tuple[int, int]], cut: int | None
) -> None:
    _, key, version, kind, valid = EXAMPLES[idx]
    data = bytearray(valid)
    for pos, bit in flips if data else ():  # some bodies are empty (ListGroups v0 request)
        data[pos % len(data)] ^= 1 << bit
    if cut is not None:
        del data[cut % (len(data) + 1) :]
    try:
        decode_body(key, version, bytes(data), kind)
    except ProtocolError:
        pass
