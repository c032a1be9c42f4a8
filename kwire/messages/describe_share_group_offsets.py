"""DescribeShareGroupOffsets (key 90, KIP-932), version 0, flexible 0+: each share
partition's start offset. ``topics`` None: every topic-partition the group has state for."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, STRING, UUID, W


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsRequestTopic:
    topic_name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsRequestGroup:
    group_id: Annotated[str, W(STRING)]
    topics: Annotated[
        Sequence[DescribeShareGroupOffsetsRequestTopic] | None,
        W(ARRAY(DescribeShareGroupOffsetsRequestTopic), nullable="0+"),
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsRequest:
    groups: Annotated[
        Sequence[DescribeShareGroupOffsetsRequestGroup], W(ARRAY(DescribeShareGroupOffsetsRequestGroup))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponsePartition:
    partition_index: Annotated[int, W(INT32)]
    start_offset: Annotated[int, W(INT64)] = -1
    leader_epoch: Annotated[int, W(INT32)] = -1
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponseTopic:
    topic_name: Annotated[str, W(STRING)]
    topic_id: Annotated[uuid.UUID, W(UUID)]
    partitions: Annotated[
        Sequence[DescribeShareGroupOffsetsResponsePartition],
        W(ARRAY(DescribeShareGroupOffsetsResponsePartition)),
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponseGroup:
    group_id: Annotated[str, W(STRING)]
    topics: Annotated[
        Sequence[DescribeShareGroupOffsetsResponseTopic], W(ARRAY(DescribeShareGroupOffsetsResponseTopic))
    ] = ()
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeShareGroupOffsetsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    groups: Annotated[
        Sequence[DescribeShareGroupOffsetsResponseGroup], W(ARRAY(DescribeShareGroupOffsetsResponseGroup))
    ] = ()
