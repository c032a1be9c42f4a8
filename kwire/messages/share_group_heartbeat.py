"""ShareGroupHeartbeat (key 76, KIP-932), version 1, flexible 1+.

Version 0 was Kafka 4.0's early access and was removed in 4.1; the member id is generated
by the client and sent in every request.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, STRING, STRUCT, UUID, W


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupHeartbeatRequest:
    group_id: Annotated[str, W(STRING)]
    member_id: Annotated[str, W(STRING)]
    member_epoch: Annotated[int, W(INT32)]
    rack_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    subscribed_topic_names: Annotated[Sequence[str] | None, W(ARRAY(STRING), nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareTopicPartitions:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAssignment:
    topic_partitions: Annotated[Sequence[ShareTopicPartitions], W(ARRAY(ShareTopicPartitions))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupHeartbeatResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    member_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    member_epoch: Annotated[int, W(INT32)] = 0
    heartbeat_interval_ms: Annotated[int, W(INT32)] = 0
    assignment: Annotated[ShareAssignment | None, W(STRUCT(ShareAssignment), nullable="0+")] = None
