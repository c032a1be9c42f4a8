"""ListPartitionReassignments (key 46), version 0, flexible 0+ (KIP-455): the reassignments
in progress; ``topics`` None lists every one."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignmentsTopics:
    name: Annotated[str, W(STRING)]
    partition_indexes: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignmentsRequest:
    timeout_ms: Annotated[int, W(INT32)] = 60000
    topics: Annotated[
        Sequence[ListPartitionReassignmentsTopics] | None,
        W(ARRAY(ListPartitionReassignmentsTopics), nullable="0+"),
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OngoingPartitionReassignment:
    partition_index: Annotated[int, W(INT32)]
    replicas: Annotated[Sequence[int], W(ARRAY(INT32))] = ()
    adding_replicas: Annotated[Sequence[int], W(ARRAY(INT32))] = ()
    removing_replicas: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OngoingTopicReassignment:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[OngoingPartitionReassignment], W(ARRAY(OngoingPartitionReassignment))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignmentsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    topics: Annotated[Sequence[OngoingTopicReassignment], W(ARRAY(OngoingTopicReassignment))] = ()
