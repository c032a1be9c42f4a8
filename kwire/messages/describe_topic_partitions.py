"""DescribeTopicPartitions (key 75), version 0, flexible 0+ (KIP-966): topics and their
partitions, paginated, what Kafka 3.8+ admin clients ask instead of Metadata to describe
topics. An empty ``topics`` asks for every topic; ``cursor`` resumes after a
``next_cursor`` (topics in name order, at most ``response_partition_limit`` partitions per
answer). ``eligible_leader_replicas`` / ``last_known_elr`` are null: Strata has no
eligible-leader-replica election (KIP-966's ELR).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from kwire.primitives import ZERO_UUID
from kwire.schema import ARRAY, BOOL, INT16, INT32, STRING, STRUCT, UUID, W

NO_AUTHORIZED_OPERATIONS: Final = -(2**31)  # INT32 min: "not requested"
DEFAULT_PARTITION_LIMIT: Final = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRequest:
    name: Annotated[str, W(STRING)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cursor:
    topic_name: Annotated[str, W(STRING)]
    partition_index: Annotated[int, W(INT32)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicPartitionsRequest:
    topics: Annotated[Sequence[TopicRequest], W(ARRAY(TopicRequest))] = ()
    response_partition_limit: Annotated[int, W(INT32)] = DEFAULT_PARTITION_LIMIT
    cursor: Annotated[Cursor | None, W(STRUCT(Cursor), nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicPartitionsResponsePartition:
    error_code: Annotated[int, W(INT16)] = 0
    partition_index: Annotated[int, W(INT32)]
    leader_id: Annotated[int, W(INT32)]
    leader_epoch: Annotated[int, W(INT32)] = -1
    replica_nodes: Annotated[Sequence[int], W(ARRAY(INT32))] = ()
    isr_nodes: Annotated[Sequence[int], W(ARRAY(INT32))] = ()
    eligible_leader_replicas: Annotated[Sequence[int] | None, W(ARRAY(INT32), nullable="0+")] = None
    last_known_elr: Annotated[Sequence[int] | None, W(ARRAY(INT32), nullable="0+")] = None
    offline_replicas: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicPartitionsResponseTopic:
    error_code: Annotated[int, W(INT16)] = 0
    name: Annotated[str | None, W(STRING, nullable="0+")]
    topic_id: Annotated[uuid.UUID, W(UUID)] = ZERO_UUID
    is_internal: Annotated[bool, W(BOOL)] = False
    partitions: Annotated[
        Sequence[DescribeTopicPartitionsResponsePartition], W(ARRAY(DescribeTopicPartitionsResponsePartition))
    ] = ()
    topic_authorized_operations: Annotated[int, W(INT32)] = NO_AUTHORIZED_OPERATIONS


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicPartitionsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    topics: Annotated[
        Sequence[DescribeTopicPartitionsResponseTopic], W(ARRAY(DescribeTopicPartitionsResponseTopic))
    ] = ()
    next_cursor: Annotated[Cursor | None, W(STRUCT(Cursor), nullable="0+")] = None
