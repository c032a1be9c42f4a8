"""Produce (key 0), versions 3-11, flexible 9+.

v10 adds the tagged ``current_leader`` and ``node_endpoints`` of KIP-951 (a leader that moved
named in the answer; Strata leaves them out: clients then refresh their metadata, as with
older versions); v11 lets the broker answer TRANSACTION_ABORTABLE (KIP-890). v12 belongs
to Transactions V2, which the coordinator does not run.

``records`` decode to a zero-copy ``memoryview`` of the request frame (None for null); the
broker validates and appends that slice without copying it.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, RECORDS, STRING, STRUCT, W


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducePartitionData:
    index: Annotated[int, W(INT32)]
    records: Annotated[bytes | memoryview | None, W(RECORDS, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceTopicData:
    name: Annotated[str, W(STRING, "0-12")]
    partition_data: Annotated[Sequence[ProducePartitionData], W(ARRAY(ProducePartitionData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceRequest:
    transactional_id: Annotated[str | None, W(STRING, "3+", nullable="3+")] = None
    acks: Annotated[int, W(INT16)]
    timeout_ms: Annotated[int, W(INT32)]
    topic_data: Annotated[Sequence[ProduceTopicData], W(ARRAY(ProduceTopicData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchIndexAndErrorMessage:
    batch_index: Annotated[int, W(INT32, "8+")]
    batch_index_error_message: Annotated[str | None, W(STRING, "8+", nullable="8+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderIdAndEpoch:
    leader_id: Annotated[int, W(INT32, "10+")] = -1
    leader_epoch: Annotated[int, W(INT32, "10+")] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeEndpoint:
    node_id: Annotated[int, W(INT32, "10+")] = -1
    host: Annotated[str, W(STRING, "10+")] = ""
    port: Annotated[int, W(INT32, "10+")] = -1
    rack: Annotated[str | None, W(STRING, "10+", nullable="10+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducePartitionResponse:
    index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    base_offset: Annotated[int, W(INT64)] = -1
    log_append_time_ms: Annotated[int, W(INT64, "2+")] = -1
    log_start_offset: Annotated[int, W(INT64, "5+")] = -1
    record_errors: Annotated[
        Sequence[BatchIndexAndErrorMessage], W(ARRAY(BatchIndexAndErrorMessage), "8+")
    ] = ()
    error_message: Annotated[str | None, W(STRING, "8+", nullable="8+")] = None
    current_leader: Annotated[LeaderIdAndEpoch | None, W(STRUCT(LeaderIdAndEpoch), "10+", tag=0)] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceTopicResponse:
    name: Annotated[str, W(STRING, "0-12")]
    partition_responses: Annotated[
        Sequence[ProducePartitionResponse], W(ARRAY(ProducePartitionResponse))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResponse:
    responses: Annotated[Sequence[ProduceTopicResponse], W(ARRAY(ProduceTopicResponse))] = ()
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    node_endpoints: Annotated[Sequence[NodeEndpoint], W(ARRAY(NodeEndpoint), "10+", tag=0)] = ()
