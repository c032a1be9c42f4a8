"""ConsumerGroupHeartbeat (key 68, KIP-848), versions 0-1, flexible 0+.

The one request of the consumer group protocol: a member joins (epoch 0), keeps its
session, learns its assignment and leaves (-1; -2 for a static member's temporary leave)
with it. Fields that did not change since the member's previous heartbeat are null. v1
adds ``subscribed_topic_regex`` (RE2 syntax, resolved by the coordinator) and makes the
client generate its member id (KIP-1082). Topics are named by id.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, STRING, STRUCT, UUID, W


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatTopicPartitions:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatRequest:
    group_id: Annotated[str, W(STRING)]
    member_id: Annotated[str, W(STRING)] = ""
    member_epoch: Annotated[int, W(INT32)] = 0
    instance_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    rack_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    rebalance_timeout_ms: Annotated[int, W(INT32)] = -1
    subscribed_topic_names: Annotated[Sequence[str] | None, W(ARRAY(STRING), nullable="0+")] = None
    subscribed_topic_regex: Annotated[str | None, W(STRING, "1+", nullable="1+", ignorable=False)] = None
    server_assignor: Annotated[str | None, W(STRING, nullable="0+")] = None
    topic_partitions: Annotated[
        Sequence[HeartbeatTopicPartitions] | None, W(ARRAY(HeartbeatTopicPartitions), nullable="0+")
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatAssignment:
    topic_partitions: Annotated[Sequence[HeartbeatTopicPartitions], W(ARRAY(HeartbeatTopicPartitions))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    member_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    member_epoch: Annotated[int, W(INT32)] = 0
    heartbeat_interval_ms: Annotated[int, W(INT32)] = 0
    assignment: Annotated[HeartbeatAssignment | None, W(STRUCT(HeartbeatAssignment), nullable="0+")] = None
