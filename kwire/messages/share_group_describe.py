"""ShareGroupDescribe (key 77, KIP-932), version 1, flexible 1+."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from kwire.schema import ARRAY, BOOL, INT16, INT32, STRING, STRUCT, UUID, W

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupDescribeRequest:
    group_ids: Annotated[Sequence[str], W(ARRAY(STRING))] = ()
    include_authorized_operations: Annotated[bool, W(BOOL)] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTopicPartitions:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    topic_name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedAssignment:
    topic_partitions: Annotated[Sequence[DescribedTopicPartitions], W(ARRAY(DescribedTopicPartitions))] = ()


NO_ASSIGNMENT: Final = DescribedAssignment()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedShareMember:
    member_id: Annotated[str, W(STRING)]
    rack_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    member_epoch: Annotated[int, W(INT32)] = 0
    client_id: Annotated[str, W(STRING)] = ""
    client_host: Annotated[str, W(STRING)] = ""
    subscribed_topic_names: Annotated[Sequence[str], W(ARRAY(STRING))] = ()
    assignment: Annotated[DescribedAssignment, W(STRUCT(DescribedAssignment))] = NO_ASSIGNMENT


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedShareGroup:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    group_id: Annotated[str, W(STRING)]
    group_state: Annotated[str, W(STRING)] = ""
    group_epoch: Annotated[int, W(INT32)] = 0
    assignment_epoch: Annotated[int, W(INT32)] = 0
    assignor_name: Annotated[str, W(STRING)] = ""
    members: Annotated[Sequence[DescribedShareMember], W(ARRAY(DescribedShareMember))] = ()
    authorized_operations: Annotated[int, W(INT32)] = AUTHORIZED_OPERATIONS_OMITTED


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupDescribeResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    groups: Annotated[Sequence[DescribedShareGroup], W(ARRAY(DescribedShareGroup))] = ()
