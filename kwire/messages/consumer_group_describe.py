"""ConsumerGroupDescribe (key 69, KIP-848), versions 0-1, flexible 0+.

The consumer-group counterpart of DescribeGroups: epochs, the assignor, and each
member's subscription, current and target assignment (topics by id and name). v1 adds
``member_type`` (1: a consumer-protocol member, 0: a classic one, -1 unknown).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.messages.metadata import NO_AUTHORIZED_OPERATIONS
from kwire.schema import ARRAY, BOOL, INT8, INT16, INT32, STRING, STRUCT, UUID, W

MEMBER_TYPE_CLASSIC = 0  # a classic-protocol member of a consumer group (KIP-848 migration)
MEMBER_TYPE_CONSUMER = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescribeRequest:
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMember:
    member_id: Annotated[str, W(STRING)]
    instance_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    rack_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    member_epoch: Annotated[int, W(INT32)] = 0
    client_id: Annotated[str, W(STRING)] = ""
    client_host: Annotated[str, W(STRING)] = ""
    subscribed_topic_names: Annotated[Sequence[str], W(ARRAY(STRING))] = ()
    subscribed_topic_regex: Annotated[str | None, W(STRING, nullable="0+")] = None
    assignment: Annotated[DescribedAssignment, W(STRUCT(DescribedAssignment))] = DescribedAssignment()
    target_assignment: Annotated[DescribedAssignment, W(STRUCT(DescribedAssignment))] = DescribedAssignment()
    member_type: Annotated[int, W(INT8, "1+")] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescribed:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    group_id: Annotated[str, W(STRING)]
    group_state: Annotated[str, W(STRING)] = ""
    group_epoch: Annotated[int, W(INT32)] = 0
    assignment_epoch: Annotated[int, W(INT32)] = 0
    assignor_name: Annotated[str, W(STRING)] = ""
    members: Annotated[Sequence[ConsumerGroupMember], W(ARRAY(ConsumerGroupMember))] = ()
    authorized_operations: Annotated[int, W(INT32)] = NO_AUTHORIZED_OPERATIONS


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescribeResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    groups: Annotated[Sequence[ConsumerGroupDescribed], W(ARRAY(ConsumerGroupDescribed))] = ()
