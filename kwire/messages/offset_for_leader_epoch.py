"""OffsetForLeaderEpoch (key 23), versions 0-4, flexible 4+ (KIP-101, KIP-279, KIP-320).

A follower (``replica_id`` = its broker id, v3+) or a consumer (-1) asks, per partition,
where ``leader_epoch`` ended on the leader: the answer is the largest epoch <= the one
asked that the leader knows (``leader_epoch``, v1+) and its end offset, or -1/-1 when
undefined. ``current_leader_epoch`` (v2+) fences requests with stale metadata:
FENCED_LEADER_EPOCH if older than the leader's epoch, UNKNOWN_LEADER_EPOCH if newer.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, STRING, W

VERSIONS = "0-4"
FLEXIBLE = "4+"
DEBUG_REPLICA_ID = -2  # Kafka's default: a "debug" client allowed to see past the high watermark
CONSUMER_REPLICA_ID = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderPartition:
    partition: Annotated[int, W(INT32)]
    current_leader_epoch: Annotated[int, W(INT32, "2+")] = -1
    leader_epoch: Annotated[int, W(INT32)]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderTopic:
    topic: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[OffsetForLeaderPartition], W(ARRAY(OffsetForLeaderPartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderEpochRequest:
    replica_id: Annotated[int, W(INT32, "3+")] = DEBUG_REPLICA_ID
    topics: Annotated[Sequence[OffsetForLeaderTopic], W(ARRAY(OffsetForLeaderTopic))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderPartitionResult:
    """Kafka's ``EpochEndOffset`` (renamed: Fetch already has a struct of that name)."""

    error_code: Annotated[int, W(INT16)] = 0
    partition: Annotated[int, W(INT32)]
    leader_epoch: Annotated[int, W(INT32, "1+")] = -1
    end_offset: Annotated[int, W(INT64)] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderTopicResult:
    topic: Annotated[str, W(STRING)]
    partitions: Annotated[
        Sequence[OffsetForLeaderPartitionResult], W(ARRAY(OffsetForLeaderPartitionResult))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderEpochResponse:
    throttle_time_ms: Annotated[int, W(INT32, "2+")] = 0
    topics: Annotated[Sequence[OffsetForLeaderTopicResult], W(ARRAY(OffsetForLeaderTopicResult))] = ()
