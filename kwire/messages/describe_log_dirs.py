"""DescribeLogDirs (key 35), versions 1-4, flexible 2+ (v0 removed in Kafka 4.0, KIP-896).

A broker's log directories and the size of each partition replica in them (what admin UIs
show as topic sizes); a null ``topics`` asks for every partition. v3 adds the top-level
``error_code``, v4 the volume's ``total_bytes`` / ``usable_bytes`` (local disk only).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BOOL, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribableLogDirTopic:
    topic: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsRequest:
    topics: Annotated[
        Sequence[DescribableLogDirTopic] | None, W(ARRAY(DescribableLogDirTopic), nullable="0+")
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsPartition:
    partition_index: Annotated[int, W(INT32)]
    partition_size: Annotated[int, W(INT64)] = 0
    offset_lag: Annotated[int, W(INT64)] = 0
    is_future_key: Annotated[bool, W(BOOL)] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[DescribeLogDirsPartition], W(ARRAY(DescribeLogDirsPartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsResult:
    error_code: Annotated[int, W(INT16)] = 0
    log_dir: Annotated[str, W(STRING)]
    topics: Annotated[Sequence[DescribeLogDirsTopic], W(ARRAY(DescribeLogDirsTopic))] = ()
    total_bytes: Annotated[int, W(INT64, "4+")] = -1
    usable_bytes: Annotated[int, W(INT64, "4+")] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16, "3+")] = 0
    results: Annotated[Sequence[DescribeLogDirsResult], W(ARRAY(DescribeLogDirsResult))] = ()
