"""The registry of Kafka APIs this broker speaks, with the exact version ranges it advertises.

Every request/response codec of every listed version is compiled at import time. Adding an
API: write ``kwire/messages/<name>.py`` and add one ``_api(...)`` line below.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kwire.messages.acls import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kwire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kwire.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kwire.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from kwire.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kwire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kwire.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from kwire.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kwire.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kwire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kwire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kwire.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from kwire.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from kwire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kwire.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kwire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from kwire.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from kwire.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kwire.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from kwire.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from kwire.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kwire.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from kwire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from kwire.messages.end_txn import EndTxnRequest, EndTxnResponse
from kwire.messages.fetch import FetchRequest, FetchResponse, ReplicaState
from kwire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kwire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kwire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kwire.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kwire.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kwire.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kwire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kwire.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kwire.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from kwire.messages.metadata import MetadataRequest, MetadataResponse
from kwire.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from kwire.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from kwire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from kwire.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kwire.messages.produce import ProduceRequest, ProduceResponse
from kwire.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kwire.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kwire.messages.share_acknowledge import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from kwire.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from kwire.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from kwire.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from kwire.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from kwire.messages.share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from kwire.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kwire.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from kwire.messages.user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kwire.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kwire.schema import MessageSchema


class ApiKey(enum.IntEnum):
    """Kafka api keys (protocol guide, "Api Keys"); only those in ``APIS`` are served."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# (version, message) -> message; for the few wire quirks a table cannot express.
Hook = Callable[[int, Any], Any]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    name: str
    request: MessageSchema
    response: MessageSchema
    after_decode_request: Hook | None = None  # normalise what came off the wire
    before_encode_request: Hook | None = None  # and its inverse
    response_header_always_v0: bool = False
    # What ApiVersions advertises as the minimum when it differs from what is served.
    advertised_min_version: int | None = None

    @property
    def min_version(self) -> int:
        return self.request.min_version

    @property
    def advertised_min(self) -> int:
        return self.min_version if self.advertised_min_version is None else self.advertised_min_version

    @property
    def max_version(self) -> int:
        return self.request.max_version

    @property
    def flexible_from(self) -> int | None:
        flex = self.request.flexible
        return None if flex is None else flex.lo

    def supports(self, version: int) -> bool:
        return self.request.min_version <= version <= self.request.max_version

    def is_flexible(self, version: int) -> bool:
        """Also answers for versions we do not support (header parsing of rejected requests)."""
        flex = self.request.flexible
        return flex is not None and version >= flex.lo

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.response_header_always_v0:
            return 0
        return 1 if self.is_flexible(version) else 0


def _api(
    key: ApiKey,
    request: type,
    response: type,
    versions: str,
    flexible: str,
    **extra: Any,
) -> ApiSpec:
    name = key.name.title().replace("_", "")
    return ApiSpec(
        api_key=int(key),
        name=name,
        request=MessageSchema(request, versions, flexible),
        response=MessageSchema(response, versions, flexible),
        **extra,
    )


def _metadata_after_decode(version: int, req: MetadataRequest) -> MetadataRequest:
    # v0 has no null array: empty means "all topics". Callers see None for that in every version.
    if version == 0 and req.topics is not None and len(req.topics) == 0:
        return dataclasses.replace(req, topics=None)
    return req


def _metadata_before_encode(version: int, req: MetadataRequest) -> MetadataRequest:
    if version == 0 and req.topics is None:
        return dataclasses.replace(req, topics=())
    return req


# From Fetch v15 a follower names itself in the tagged ReplicaState (KIP-903), not in
# replica_id: callers read and set ``replica_id`` in every version.
_FETCH_REPLICA_STATE_VERSION: Final = 15


def _fetch_after_decode(version: int, req: FetchRequest) -> FetchRequest:
    if version < _FETCH_REPLICA_STATE_VERSION:
        return req
    state = req.replica_state
    if state is None:  # a consumer: the common case, nothing to copy
        return req if req.replica_id == -1 else dataclasses.replace(req, replica_id=-1)
    if state == ReplicaState():
        return dataclasses.replace(req, replica_id=-1, replica_state=None)
    return dataclasses.replace(req, replica_id=state.replica_id)


def _fetch_before_encode(version: int, req: FetchRequest) -> FetchRequest:
    if version < _FETCH_REPLICA_STATE_VERSION or req.replica_id < 0:
        return req
    state = req.replica_state
    epoch = state.replica_epoch if state is not None else -1
    state = ReplicaState(replica_id=req.replica_id, replica_epoch=epoch)
    return dataclasses.replace(req, replica_state=state)


APIS: Final[dict[int, ApiSpec]] = {
    spec.api_key: spec
    for spec in (
        # Produce v0-2 are not served (KIP-896) but advertised, as Kafka 4.0 does
        # (KAFKA-18659): librdkafka before 2.10 looks for Produce v0 in the advertised range
        # to decide that the broker takes gzip, snappy and lz4, and otherwise silently
        # sends those batches uncompressed. A v0-2 request is still refused.
        _api(ApiKey.PRODUCE, ProduceRequest, ProduceResponse, "3-11", "9+", advertised_min_version=0),
        _api(
            ApiKey.FETCH,
            FetchRequest,
            FetchResponse,
            "4-17",
            "12+",
            after_decode_request=_fetch_after_decode,
            before_encode_request=_fetch_before_encode,
        ),
        _api(ApiKey.LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse, "1-10", "6+"),
        _api(
            ApiKey.METADATA,
            MetadataRequest,
            MetadataResponse,
            "0-13",
            "9+",
            after_decode_request=_metadata_after_decode,
            before_encode_request=_metadata_before_encode,
        ),
        _api(
            ApiKey.API_VERSIONS,
            ApiVersionsRequest,
            ApiVersionsResponse,
            "0-3",
            "3+",
            response_header_always_v0=True,
        ),
        _api(ApiKey.CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse, "2-7", "5+"),
        _api(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse, "1-6", "4+"),
        _api(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse, "0-4", "2+"),
        _api(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            OffsetForLeaderEpochRequest,
            OffsetForLeaderEpochResponse,
            "0-4",
            "4+",
        ),
        _api(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, DescribeConfigsResponse, "0-4", "4+"),
        _api(ApiKey.ALTER_CONFIGS, AlterConfigsRequest, AlterConfigsResponse, "0-2", "2+"),
        _api(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            IncrementalAlterConfigsRequest,
            IncrementalAlterConfigsResponse,
            "0-1",
            "1+",
        ),
        _api(ApiKey.CREATE_PARTITIONS, CreatePartitionsRequest, CreatePartitionsResponse, "0-3", "2+"),
        # DeleteRecords (api.handlers.delete_records)
        _api(ApiKey.DELETE_RECORDS, DeleteRecordsRequest, DeleteRecordsResponse, "0-2", "2+"),
        # DescribeTopicPartitions (KIP-966; api.handlers.topics)
        _api(
            ApiKey.DESCRIBE_TOPIC_PARTITIONS,
            DescribeTopicPartitionsRequest,
            DescribeTopicPartitionsResponse,
            "0",
            "0+",
        ),
        # ElectLeaders (KIP-460; api.handlers.elections)
        _api(ApiKey.ELECT_LEADERS, ElectLeadersRequest, ElectLeadersResponse, "0-2", "2+"),
        # DescribeLogDirs (api.handlers.log_dirs)
        _api(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest, DescribeLogDirsResponse, "1-4", "2+"),
        # partition reassignment (KIP-455; api.handlers.reassignment)
        _api(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            AlterPartitionReassignmentsRequest,
            AlterPartitionReassignmentsResponse,
            "0",
            "0+",
        ),
        _api(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            ListPartitionReassignmentsRequest,
            ListPartitionReassignmentsResponse,
            "0",
            "0+",
        ),
        # consumer groups (api.handlers.groups)
        _api(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse, "0-9", "8+"),
        _api(ApiKey.OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse, "0-9", "6+"),
        _api(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse, "0-4", "3+"),
        _api(ApiKey.JOIN_GROUP, JoinGroupRequest, JoinGroupResponse, "0-9", "6+"),
        _api(ApiKey.HEARTBEAT, HeartbeatRequest, HeartbeatResponse, "0-4", "4+"),
        _api(ApiKey.LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse, "0-5", "4+"),
        _api(ApiKey.SYNC_GROUP, SyncGroupRequest, SyncGroupResponse, "0-5", "4+"),
        _api(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, DescribeGroupsResponse, "0-6", "5+"),
        _api(ApiKey.LIST_GROUPS, ListGroupsRequest, ListGroupsResponse, "0-5", "3+"),
        _api(ApiKey.DELETE_GROUPS, DeleteGroupsRequest, DeleteGroupsResponse, "0-2", "2+"),
        _api(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, OffsetDeleteResponse, "0", "none"),
        # KIP-848 consumer groups (api.handlers.consumer_groups)
        _api(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            ConsumerGroupHeartbeatRequest,
            ConsumerGroupHeartbeatResponse,
            "0-1",
            "0+",
        ),
        _api(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            ConsumerGroupDescribeRequest,
            ConsumerGroupDescribeResponse,
            "0-1",
            "0+",
        ),
        # v5 (transaction version 2: the request adds the partition to the transaction) is
        # not served while the transaction coordinator runs transaction version 1.
        _api(ApiKey.TXN_OFFSET_COMMIT, TxnOffsetCommitRequest, TxnOffsetCommitResponse, "0-4", "3+"),
        # ACLs (api.handlers.acls)
        _api(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest, DescribeAclsResponse, "0-3", "2+"),
        _api(ApiKey.CREATE_ACLS, CreateAclsRequest, CreateAclsResponse, "0-3", "2+"),
        _api(ApiKey.DELETE_ACLS, DeleteAclsRequest, DeleteAclsResponse, "0-3", "2+"),
        # client quotas (broker.security.quotas)
        _api(
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            DescribeClientQuotasRequest,
            DescribeClientQuotasResponse,
            "0-1",
            "1+",
        ),
        _api(ApiKey.ALTER_CLIENT_QUOTAS, AlterClientQuotasRequest, AlterClientQuotasResponse, "0-1", "1+"),
        # SCRAM users (KIP-554; api.handlers.scram_users)
        _api(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            DescribeUserScramCredentialsRequest,
            DescribeUserScramCredentialsResponse,
            "0",
            "0+",
        ),
        _api(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            AlterUserScramCredentialsRequest,
            AlterUserScramCredentialsResponse,
            "0",
            "0+",
        ),
        # authentication (api.security.sasl)
        _api(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest, SaslHandshakeResponse, "0-1", "none"),
        _api(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest, SaslAuthenticateResponse, "0-2", "2+"),
        _api(ApiKey.DESCRIBE_PRODUCERS, DescribeProducersRequest, DescribeProducersResponse, "0", "0+"),
        # transactions (api.handlers.txn_markers)
        _api(ApiKey.WRITE_TXN_MARKERS, WriteTxnMarkersRequest, WriteTxnMarkersResponse, "1-2", "1+"),
        # the transaction coordinator (api.handlers.txn_coordinator); EndTxn v5 is
        # Transactions V2 (an epoch bump at every end), which the coordinator does not run
        _api(
            ApiKey.ADD_PARTITIONS_TO_TXN, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, "0-5", "3+"
        ),
        _api(ApiKey.ADD_OFFSETS_TO_TXN, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, "0-4", "3+"),
        _api(ApiKey.END_TXN, EndTxnRequest, EndTxnResponse, "0-4", "3+"),
        _api(
            ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest, DescribeTransactionsResponse, "0", "0+"
        ),
        _api(ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest, ListTransactionsResponse, "0-2", "0+"),
        # share groups (KIP-932; api.handlers.share): v0 was Kafka 4.0's early access
        _api(
            ApiKey.SHARE_GROUP_HEARTBEAT, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, "1", "1+"
        ),
        _api(ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest, ShareGroupDescribeResponse, "1", "1+"),
        _api(ApiKey.SHARE_FETCH, ShareFetchRequest, ShareFetchResponse, "1-2", "1+"),
        _api(ApiKey.SHARE_ACKNOWLEDGE, ShareAcknowledgeRequest, ShareAcknowledgeResponse, "1-2", "1+"),
        _api(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            DescribeShareGroupOffsetsRequest,
            DescribeShareGroupOffsetsResponse,
            "0",
            "0+",
        ),
        _api(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS,
            AlterShareGroupOffsetsRequest,
            AlterShareGroupOffsetsResponse,
            "0",
            "0+",
        ),
        _api(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            DeleteShareGroupOffsetsRequest,
            DeleteShareGroupOffsetsResponse,
            "0",
            "0+",
        ),
        # the share coordinator, between brokers (api.handlers.share_state)
        _api(
            ApiKey.READ_SHARE_GROUP_STATE, ReadShareGroupStateRequest, ReadShareGroupStateResponse, "0", "0+"
        ),
        _api(
            ApiKey.WRITE_SHARE_GROUP_STATE,
            WriteShareGroupStateRequest,
            WriteShareGroupStateResponse,
            "0",
            "0+",
        ),
        _api(
            ApiKey.DELETE_SHARE_GROUP_STATE,
            DeleteShareGroupStateRequest,
            DeleteShareGroupStateResponse,
            "0",
            "0+",
        ),
    )
}

# Class -> spec, so encode_response can check it was handed the right message type.
RESPONSE_API: Final[dict[type, ApiSpec]] = {spec.response.cls: spec for spec in APIS.values()}
REQUEST_API: Final[dict[type, ApiSpec]] = {spec.request.cls: spec for spec in APIS.values()}


def supported_api_versions() -> tuple[ApiVersion, ...]:
    """What ApiVersions advertises: every key in ``APIS`` with its range, by key."""
    return tuple(
        ApiVersion(api_key=s.api_key, min_version=s.advertised_min, max_version=s.max_version)
        for s in sorted(APIS.values(), key=lambda s: s.api_key)
    )


def api_versions_response(*, error_code: int = 0, throttle_time_ms: int = 0) -> ApiVersionsResponse:
    """The ApiVersions response body listing our supported ranges."""
    return ApiVersionsResponse(
        error_code=error_code, api_keys=supported_api_versions(), throttle_time_ms=throttle_time_ms
    )
