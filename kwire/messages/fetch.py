"""Fetch (key 1), versions 4-17, flexible 12+.

From v13 topics are named by their id only (KIP-516: ``topic`` is absent on the wire,
``topic_id`` present); the handler resolves ids to names. From v15 a follower's id travels
in the tagged ``replica_state`` (KIP-903); ``kwire.apis`` keeps ``replica_id`` and
``replica_state`` consistent across versions. v16 adds the response's ``node_endpoints``
(KIP-951), v17 the follower's ``replica_directory_id`` (KIP-853).

Response ``records`` accept bytes-likes, file regions (objects with an int ``length``) or a
sequence of those; regions are passed through to the caller after their length prefix, so
the server can send them with sendfile. Decoded records are ``memoryview`` slices.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from kwire.primitives import ZERO_UUID
from kwire.schema import (
    ARRAY,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    STRUCT,
    UUID,
    RecordsData,
    W,
)

# Tag numbers Kafka will not reach soon; see FetchPartitionData.segment_bases.
SEGMENT_BASES_TAG = 10_000


# isolation_level of Fetch and ListOffsets (KIP-98): read_committed reads only below the
# last stable offset, and gets the aborted transactions of the range.
READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartition:
    partition: Annotated[int, W(INT32)]
    current_leader_epoch: Annotated[int, W(INT32, "9+")] = -1
    fetch_offset: Annotated[int, W(INT64)]
    last_fetched_epoch: Annotated[int, W(INT32, "12+")] = -1
    log_start_offset: Annotated[int, W(INT64, "5+")] = -1
    partition_max_bytes: Annotated[int, W(INT32)]
    replica_directory_id: Annotated[uuid.UUID, W(UUID, "17+", tag=0)] = ZERO_UUID


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchTopic:
    topic: Annotated[str, W(STRING, "0-12")] = ""
    topic_id: Annotated[uuid.UUID, W(UUID, "13+")] = ZERO_UUID
    partitions: Annotated[Sequence[FetchPartition], W(ARRAY(FetchPartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgottenTopic:
    topic: Annotated[str, W(STRING, "7-12")] = ""
    topic_id: Annotated[uuid.UUID, W(UUID, "13+")] = ZERO_UUID
    partitions: Annotated[Sequence[int], W(ARRAY(INT32), "7+")] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaState:
    replica_id: Annotated[int, W(INT32, "15+")] = -1
    replica_epoch: Annotated[int, W(INT64, "15+")] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest:
    cluster_id: Annotated[str | None, W(STRING, "12+", nullable="12+", tag=0)] = None
    replica_id: Annotated[int, W(INT32, "0-14")] = -1
    replica_state: Annotated[ReplicaState | None, W(STRUCT(ReplicaState), "15+", tag=1)] = None
    max_wait_ms: Annotated[int, W(INT32)]
    min_bytes: Annotated[int, W(INT32)]
    max_bytes: Annotated[int, W(INT32, "3+")] = 0x7FFFFFFF
    isolation_level: Annotated[int, W(INT8, "4+")] = 0
    session_id: Annotated[int, W(INT32, "7+")] = 0
    session_epoch: Annotated[int, W(INT32, "7+")] = -1
    topics: Annotated[Sequence[FetchTopic], W(ARRAY(FetchTopic))] = ()
    forgotten_topics_data: Annotated[Sequence[ForgottenTopic], W(ARRAY(ForgottenTopic), "7+")] = ()
    rack_id: Annotated[str, W(STRING, "11+")] = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochEndOffset:
    epoch: Annotated[int, W(INT32, "12+")] = -1
    end_offset: Annotated[int, W(INT64, "12+")] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderIdAndEpoch:
    leader_id: Annotated[int, W(INT32, "12+")] = -1
    leader_epoch: Annotated[int, W(INT32, "12+")] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotId:
    end_offset: Annotated[int, W(INT64)] = -1
    epoch: Annotated[int, W(INT32)] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortedTransaction:
    producer_id: Annotated[int, W(INT64, "4+")]
    first_offset: Annotated[int, W(INT64, "4+")]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartitionData:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    high_watermark: Annotated[int, W(INT64)] = -1
    last_stable_offset: Annotated[int, W(INT64, "4+")] = -1
    log_start_offset: Annotated[int, W(INT64, "5+")] = -1
    # Tagged; None = absent. Not written when None or all-defaults, as in Kafka.
    diverging_epoch: Annotated[EpochEndOffset | None, W(STRUCT(EpochEndOffset), "12+", tag=0)] = None
    current_leader: Annotated[LeaderIdAndEpoch | None, W(STRUCT(LeaderIdAndEpoch), "12+", tag=1)] = None
    snapshot_id: Annotated[SnapshotId | None, W(STRUCT(SnapshotId), "12+", tag=2)] = None
    # Strata's own tag, in replica fetch responses only (Kafka clients skip unknown tags):
    # the leader's segment base offsets within the returned range, so a follower's
    # segments begin exactly where the leader's do (broker.fetcher).
    segment_bases: Annotated[Sequence[int] | None, W(ARRAY(INT64), "12+", tag=SEGMENT_BASES_TAG)] = None
    aborted_transactions: Annotated[
        Sequence[AbortedTransaction] | None, W(ARRAY(AbortedTransaction), "4+", nullable="4+")
    ] = None
    preferred_read_replica: Annotated[int, W(INT32, "11+")] = -1
    records: Annotated[RecordsData | None, W(RECORDS, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchableTopicResponse:
    topic: Annotated[str, W(STRING, "0-12")] = ""
    topic_id: Annotated[uuid.UUID, W(UUID, "13+")] = ZERO_UUID
    partitions: Annotated[Sequence[FetchPartitionData], W(ARRAY(FetchPartitionData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeEndpoint:
    node_id: Annotated[int, W(INT32, "16+")]
    host: Annotated[str, W(STRING, "16+")]
    port: Annotated[int, W(INT32, "16+")]
    rack: Annotated[str | None, W(STRING, "16+", nullable="16+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse:
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    error_code: Annotated[int, W(INT16, "7+")] = 0
    session_id: Annotated[int, W(INT32, "7+")] = 0
    responses: Annotated[Sequence[FetchableTopicResponse], W(ARRAY(FetchableTopicResponse))] = ()
    node_endpoints: Annotated[Sequence[NodeEndpoint], W(ARRAY(NodeEndpoint), "16+", tag=0)] = ()
