"""AlterShareGroupOffsets (key 91) and DeleteShareGroupOffsets (key 92), version 0, flexible
0+ (KIP-932, Kafka 4.2): an administrator setting a share group's start offsets, or
deleting its state for whole topics (the group then starts where
``share.auto.offset.reset`` says)."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, STRING, UUID, W


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterShareGroupOffsetsRequestPartition:
    partition_index: Annotated[int, W(INT32)]
    start_offset: Annotated[int, W(INT64)]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterShareGroupOffsetsRequestTopic:
    topic_name: Annotated[str, W(STRING)]
    partitions: Annotated[
        Sequence[AlterShareGroupOffsetsRequestPartition], W(ARRAY(AlterShareGroupOffsetsRequestPartition))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterShareGroupOffsetsRequest:
    group_id: Annotated[str, W(STRING)]
    topics: Annotated[
        Sequence[AlterShareGroupOffsetsRequestTopic], W(ARRAY(AlterShareGroupOffsetsRequestTopic))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterShareGroupOffsetsResponsePartition:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterShareGroupOffsetsResponseTopic:
    topic_name: Annotated[str, W(STRING)]
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[
        Sequence[AlterShareGroupOffsetsResponsePartition], W(ARRAY(AlterShareGroupOffsetsResponsePartition))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterShareGroupOffsetsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    responses: Annotated[
        Sequence[AlterShareGroupOffsetsResponseTopic], W(ARRAY(AlterShareGroupOffsetsResponseTopic))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteShareGroupOffsetsRequestTopic:
    topic_name: Annotated[str, W(STRING)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteShareGroupOffsetsRequest:
    group_id: Annotated[str, W(STRING)]
    topics: Annotated[
        Sequence[DeleteShareGroupOffsetsRequestTopic], W(ARRAY(DeleteShareGroupOffsetsRequestTopic))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteShareGroupOffsetsResponseTopic:
    topic_name: Annotated[str, W(STRING)]
    topic_id: Annotated[uuid.UUID, W(UUID)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteShareGroupOffsetsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    responses: Annotated[
        Sequence[DeleteShareGroupOffsetsResponseTopic], W(ARRAY(DeleteShareGroupOffsetsResponseTopic))
    ] = ()
