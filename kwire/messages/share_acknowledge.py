"""ShareAcknowledge (key 79, KIP-932), versions 1-2, flexible 1+.

v2 adds ``is_renew_ack`` to the request and ``acquisition_lock_timeout_ms`` to the
response (KIP-1222, the RENEW acknowledge type).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.messages.share_fetch import (
    NO_LEADER,
    AcknowledgementBatch,
    ShareLeaderIdAndEpoch,
    ShareNodeEndpoint,
)
from kwire.schema import ARRAY, BOOL, INT16, INT32, STRING, STRUCT, UUID, W


@dataclass(frozen=True, slots=True, kw_only=True)
class AcknowledgePartition:
    partition_index: Annotated[int, W(INT32)]
    acknowledgement_batches: Annotated[Sequence[AcknowledgementBatch], W(ARRAY(AcknowledgementBatch))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AcknowledgeTopic:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[AcknowledgePartition], W(ARRAY(AcknowledgePartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcknowledgeRequest:
    group_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    member_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    share_session_epoch: Annotated[int, W(INT32)] = 0
    is_renew_ack: Annotated[bool, W(BOOL, "2+", ignorable=False)] = False
    topics: Annotated[Sequence[AcknowledgeTopic], W(ARRAY(AcknowledgeTopic))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcknowledgePartitionData:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    current_leader: Annotated[ShareLeaderIdAndEpoch, W(STRUCT(ShareLeaderIdAndEpoch))] = NO_LEADER


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcknowledgeTopicResponse:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[
        Sequence[ShareAcknowledgePartitionData], W(ARRAY(ShareAcknowledgePartitionData))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcknowledgeResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    acquisition_lock_timeout_ms: Annotated[int, W(INT32, "2+")] = 0
    responses: Annotated[
        Sequence[ShareAcknowledgeTopicResponse], W(ARRAY(ShareAcknowledgeTopicResponse))
    ] = ()
    node_endpoints: Annotated[Sequence[ShareNodeEndpoint], W(ARRAY(ShareNodeEndpoint))] = ()
