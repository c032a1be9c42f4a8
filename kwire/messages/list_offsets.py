"""ListOffsets (key 2), versions 1-10, flexible 6+.

``timestamp`` -1 asks for the latest offset, -2 for the earliest, -3 the offset of the
largest timestamp (v7+), -4 the first offset still on the leader's disk (v8+, KIP-405), -5
the last offset in remote storage (v9+, KIP-1005). v10 adds ``timeout_ms`` (KIP-1075: the
bound of a lookup in remote storage).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT8, INT16, INT32, INT64, STRING, W

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartition:
    partition_index: Annotated[int, W(INT32)]
    current_leader_epoch: Annotated[int, W(INT32, "4+")] = -1
    timestamp: Annotated[int, W(INT64)]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[ListOffsetsPartition], W(ARRAY(ListOffsetsPartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsRequest:
    replica_id: Annotated[int, W(INT32)] = -1
    isolation_level: Annotated[int, W(INT8, "2+")] = 0
    topics: Annotated[Sequence[ListOffsetsTopic], W(ARRAY(ListOffsetsTopic))] = ()
    timeout_ms: Annotated[int, W(INT32, "10+")] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartitionResponse:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    timestamp: Annotated[int, W(INT64, "1+")] = -1
    offset: Annotated[int, W(INT64, "1+")] = -1
    leader_epoch: Annotated[int, W(INT32, "4+")] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopicResponse:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[ListOffsetsPartitionResponse], W(ARRAY(ListOffsetsPartitionResponse))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsResponse:
    throttle_time_ms: Annotated[int, W(INT32, "2+")] = 0
    topics: Annotated[Sequence[ListOffsetsTopicResponse], W(ARRAY(ListOffsetsTopicResponse))] = ()
