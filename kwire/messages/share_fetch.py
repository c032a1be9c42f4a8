"""ShareFetch (key 78, KIP-932), versions 1-2, flexible 1+.

Version 0 (Kafka 4.0's early access) was removed in 4.1; v2 adds the request's
``share_acquire_mode`` (KIP-1206) and the RENEW acknowledge type (4, KIP-1222).
Acknowledgements ride along with a fetch (``acknowledgement_batches``); acknowledge types
per offset, or one for a whole batch: 0 GAP, 1 ACCEPT, 2 RELEASE, 3 REJECT, 4 RENEW.
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from kwire.schema import ARRAY, INT8, INT16, INT32, INT64, RECORDS, STRING, STRUCT, UUID, RecordsData, W


@dataclass(frozen=True, slots=True, kw_only=True)
class AcknowledgementBatch:
    first_offset: Annotated[int, W(INT64)]
    last_offset: Annotated[int, W(INT64)]
    acknowledge_types: Annotated[Sequence[int], W(ARRAY(INT8))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareFetchPartition:
    partition_index: Annotated[int, W(INT32)]
    acknowledgement_batches: Annotated[Sequence[AcknowledgementBatch], W(ARRAY(AcknowledgementBatch))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareFetchTopic:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[ShareFetchPartition], W(ARRAY(ShareFetchPartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareForgottenTopic:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareFetchRequest:
    group_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    member_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    share_session_epoch: Annotated[int, W(INT32)] = 0
    max_wait_ms: Annotated[int, W(INT32)] = 0
    min_bytes: Annotated[int, W(INT32)] = 0
    max_bytes: Annotated[int, W(INT32)] = 0x7FFFFFFF
    max_records: Annotated[int, W(INT32)] = 500
    batch_size: Annotated[int, W(INT32)] = 500
    share_acquire_mode: Annotated[int, W(INT8, "2+", ignorable=False)] = 0
    topics: Annotated[Sequence[ShareFetchTopic], W(ARRAY(ShareFetchTopic))] = ()
    forgotten_topics_data: Annotated[Sequence[ShareForgottenTopic], W(ARRAY(ShareForgottenTopic))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareLeaderIdAndEpoch:
    leader_id: Annotated[int, W(INT32)] = -1
    leader_epoch: Annotated[int, W(INT32)] = -1


NO_LEADER: Final = ShareLeaderIdAndEpoch()  # leader unchanged: the defaults


@dataclass(frozen=True, slots=True, kw_only=True)
class AcquiredRecords:
    first_offset: Annotated[int, W(INT64)]
    last_offset: Annotated[int, W(INT64)]
    delivery_count: Annotated[int, W(INT16)]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareFetchPartitionData:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    acknowledge_error_code: Annotated[int, W(INT16)] = 0
    acknowledge_error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    current_leader: Annotated[ShareLeaderIdAndEpoch, W(STRUCT(ShareLeaderIdAndEpoch))] = NO_LEADER
    records: Annotated[RecordsData | None, W(RECORDS, nullable="0+")] = None
    acquired_records: Annotated[Sequence[AcquiredRecords], W(ARRAY(AcquiredRecords))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareFetchableTopicResponse:
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[Sequence[ShareFetchPartitionData], W(ARRAY(ShareFetchPartitionData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareNodeEndpoint:
    node_id: Annotated[int, W(INT32)]
    host: Annotated[str, W(STRING)]
    port: Annotated[int, W(INT32)]
    rack: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareFetchResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    acquisition_lock_timeout_ms: Annotated[int, W(INT32)] = 0
    responses: Annotated[Sequence[ShareFetchableTopicResponse], W(ARRAY(ShareFetchableTopicResponse))] = ()
    node_endpoints: Annotated[Sequence[ShareNodeEndpoint], W(ARRAY(ShareNodeEndpoint))] = ()
