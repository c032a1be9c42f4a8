"""OffsetFetch (key 9), versions 0-9, flexible 6+.

v0-7 ask for one ``group_id``; v8 (KIP-709) batches ``groups`` and answers per group.
A null topic list means "every partition the group has committed" (v2+ at the top level,
every version inside ``groups``); v0-1 cannot express it. v0 read offsets from ZooKeeper
in old Kafka; here v0 and v1 are the same request. v9 (KIP-848) adds each group's
``member_id``/``member_epoch``, which only a consumer-protocol group validates; a classic
group ignores them, as Kafka's does.

Kafka declares separate, identically shaped structs for the batched v8 layout
(``OffsetFetchRequestTopics``, ``OffsetFetchResponseTopics``/``...Partitions``); the wire
shape is the same in every version we speak, so one class each serves both layouts.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BOOL, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequestTopic:
    name: Annotated[str, W(STRING)]
    partition_indexes: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequestGroup:
    group_id: Annotated[str, W(STRING, "8+")]
    member_id: Annotated[str | None, W(STRING, "9+", nullable="9+")] = None
    member_epoch: Annotated[int, W(INT32, "9+")] = -1
    topics: Annotated[
        Sequence[OffsetFetchRequestTopic] | None, W(ARRAY(OffsetFetchRequestTopic), "8+", nullable="8+")
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequest:
    group_id: Annotated[str, W(STRING, "0-7")] = ""
    topics: Annotated[
        Sequence[OffsetFetchRequestTopic] | None, W(ARRAY(OffsetFetchRequestTopic), "0-7", nullable="2-7")
    ] = ()
    groups: Annotated[Sequence[OffsetFetchRequestGroup], W(ARRAY(OffsetFetchRequestGroup), "8+")] = ()
    require_stable: Annotated[bool, W(BOOL, "7+")] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponsePartition:
    partition_index: Annotated[int, W(INT32)]
    committed_offset: Annotated[int, W(INT64)] = -1
    committed_leader_epoch: Annotated[int, W(INT32, "5+")] = -1
    metadata: Annotated[str | None, W(STRING, nullable="0+")] = None
    error_code: Annotated[int, W(INT16)] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponseTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[OffsetFetchResponsePartition], W(ARRAY(OffsetFetchResponsePartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponseGroup:
    group_id: Annotated[str, W(STRING, "8+")]
    topics: Annotated[Sequence[OffsetFetchResponseTopic], W(ARRAY(OffsetFetchResponseTopic), "8+")] = ()
    error_code: Annotated[int, W(INT16, "8+")] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponse:
    throttle_time_ms: Annotated[int, W(INT32, "3+")] = 0
    topics: Annotated[Sequence[OffsetFetchResponseTopic], W(ARRAY(OffsetFetchResponseTopic), "0-7")] = ()
    error_code: Annotated[int, W(INT16, "2-7")] = 0
    groups: Annotated[Sequence[OffsetFetchResponseGroup], W(ARRAY(OffsetFetchResponseGroup), "8+")] = ()
