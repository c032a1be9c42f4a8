"""AlterPartitionReassignments (key 45), version 0, flexible 0+ (KIP-455): move partitions'
replicas; ``replicas`` None cancels a partition's pending reassignment."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartition:
    partition_index: Annotated[int, W(INT32)]
    replicas: Annotated[Sequence[int] | None, W(ARRAY(INT32), nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignableTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[ReassignablePartition], W(ARRAY(ReassignablePartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsRequest:
    timeout_ms: Annotated[int, W(INT32)] = 60000
    topics: Annotated[Sequence[ReassignableTopic], W(ARRAY(ReassignableTopic))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartitionResponse:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignableTopicResponse:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[
        Sequence[ReassignablePartitionResponse], W(ARRAY(ReassignablePartitionResponse))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    responses: Annotated[Sequence[ReassignableTopicResponse], W(ARRAY(ReassignableTopicResponse))] = ()
