"""OffsetDelete (key 47), version 0, not flexible. The response's ``error_code`` precedes
``throttle_time_ms``, unlike most responses."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequestPartition:
    partition_index: Annotated[int, W(INT32)]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequestTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[OffsetDeleteRequestPartition], W(ARRAY(OffsetDeleteRequestPartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequest:
    group_id: Annotated[str, W(STRING)]
    topics: Annotated[Sequence[OffsetDeleteRequestTopic], W(ARRAY(OffsetDeleteRequestTopic))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteResponsePartition:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteResponseTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[
        Sequence[OffsetDeleteResponsePartition], W(ARRAY(OffsetDeleteResponsePartition))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteResponse:
    error_code: Annotated[int, W(INT16)] = 0
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    topics: Annotated[Sequence[OffsetDeleteResponseTopic], W(ARRAY(OffsetDeleteResponseTopic))] = ()
