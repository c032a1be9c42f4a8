"""OffsetCommit (key 8), versions 0-9, flexible 8+.

v0 commits without group membership (no generation or member id: -1 and ""), v1 adds a
per-partition ``commit_timestamp``, v2-4 replace it with a request-wide
``retention_time_ms`` (-1: broker default), v5+ drop both (retention is broker config).
The generation field carries Kafka's current name; for the classic protocol it is the
group generation id. v9 (KIP-848) has v8's layout: it only says the client can commit
to a consumer-protocol group with its member epoch; a classic group treats it as v8.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestPartition:
    partition_index: Annotated[int, W(INT32)]
    committed_offset: Annotated[int, W(INT64)]
    committed_leader_epoch: Annotated[int, W(INT32, "6+")] = -1
    commit_timestamp: Annotated[int, W(INT64, "1")] = -1
    committed_metadata: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[OffsetCommitRequestPartition], W(ARRAY(OffsetCommitRequestPartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequest:
    group_id: Annotated[str, W(STRING)]
    generation_id_or_member_epoch: Annotated[int, W(INT32, "1+")] = -1
    member_id: Annotated[str, W(STRING, "1+")] = ""
    group_instance_id: Annotated[str | None, W(STRING, "7+", nullable="7+")] = None
    retention_time_ms: Annotated[int, W(INT64, "2-4")] = -1
    topics: Annotated[Sequence[OffsetCommitRequestTopic], W(ARRAY(OffsetCommitRequestTopic))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponsePartition:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponseTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[
        Sequence[OffsetCommitResponsePartition], W(ARRAY(OffsetCommitResponsePartition))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponse:
    throttle_time_ms: Annotated[int, W(INT32, "3+")] = 0
    topics: Annotated[Sequence[OffsetCommitResponseTopic], W(ARRAY(OffsetCommitResponseTopic))] = ()
