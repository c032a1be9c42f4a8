"""ReadShareGroupState (key 84), WriteShareGroupState (key 85) and DeleteShareGroupState
(key 86), version 0, flexible 0+: between brokers, a share partition's leader reading and
writing its state at the share coordinator, and tombstones for it (KIP-932's persister;
broker.share.state_store)."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT8, INT16, INT32, INT64, STRING, UUID, W


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareStateBatch:
    first_offset: Annotated[int, W(INT64)]
    last_offset: Annotated[int, W(INT64)]
    delivery_state: Annotated[int, W(INT8)]  # 0 Available, 2 Acknowledged, 4 Archived
    delivery_count: Annotated[int, W(INT16)]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadStatePartition:
    partition: Annotated[int, W(INT32)]
    leader_epoch: Annotated[int, W(INT32)] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadStateData:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[ReadStatePartition], W(ARRAY(ReadStatePartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadShareGroupStateRequest:
    group_id: Annotated[str, W(STRING)]
    topics: Annotated[Sequence[ReadStateData], W(ARRAY(ReadStateData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadStatePartitionResult:
    partition: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    state_epoch: Annotated[int, W(INT32)] = 0
    start_offset: Annotated[int, W(INT64)] = -1  # -1: no state yet
    state_batches: Annotated[Sequence[ShareStateBatch], W(ARRAY(ShareStateBatch))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadStateResult:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[ReadStatePartitionResult], W(ARRAY(ReadStatePartitionResult))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadShareGroupStateResponse:
    results: Annotated[Sequence[ReadStateResult], W(ARRAY(ReadStateResult))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteStatePartition:
    partition: Annotated[int, W(INT32)]
    state_epoch: Annotated[int, W(INT32)] = 0
    leader_epoch: Annotated[int, W(INT32)] = -1
    start_offset: Annotated[int, W(INT64)] = -1
    state_batches: Annotated[Sequence[ShareStateBatch], W(ARRAY(ShareStateBatch))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteStateData:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[WriteStatePartition], W(ARRAY(WriteStatePartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteShareGroupStateRequest:
    group_id: Annotated[str, W(STRING)]
    topics: Annotated[Sequence[WriteStateData], W(ARRAY(WriteStateData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteStatePartitionResult:
    partition: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteStateResult:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[WriteStatePartitionResult], W(ARRAY(WriteStatePartitionResult))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteShareGroupStateResponse:
    results: Annotated[Sequence[WriteStateResult], W(ARRAY(WriteStateResult))] = ()


# DeleteShareGroupState (key 86), version 0, flexible 0+: tombstones for share partitions'
# state (DeleteGroups, DeleteShareGroupOffsets).


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteStatePartition:
    partition: Annotated[int, W(INT32)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteStateData:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[DeleteStatePartition], W(ARRAY(DeleteStatePartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteShareGroupStateRequest:
    group_id: Annotated[str, W(STRING)]
    topics: Annotated[Sequence[DeleteStateData], W(ARRAY(DeleteStateData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteStatePartitionResult:
    partition: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteStateResult:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[DeleteStatePartitionResult], W(ARRAY(DeleteStatePartitionResult))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteShareGroupStateResponse:
    results: Annotated[Sequence[DeleteStateResult], W(ARRAY(DeleteStateResult))] = ()
