"""DeleteRecords (key 21), versions 0-2, flexible 2+ (KIP-107).

Sent to each partition's leader: move the partition's log start offset up to ``offset``
(-1: the high watermark). The answer's ``low_watermark`` is the lowest log start offset of
the partition's live replicas once it reached ``offset`` (the request waits for the
followers up to ``timeout_ms``).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsPartition:
    partition_index: Annotated[int, W(INT32)]
    offset: Annotated[int, W(INT64)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsTopic:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[DeleteRecordsPartition], W(ARRAY(DeleteRecordsPartition))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsRequest:
    topics: Annotated[Sequence[DeleteRecordsTopic], W(ARRAY(DeleteRecordsTopic))] = ()
    timeout_ms: Annotated[int, W(INT32)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsPartitionResult:
    partition_index: Annotated[int, W(INT32)]
    low_watermark: Annotated[int, W(INT64)] = -1
    error_code: Annotated[int, W(INT16)] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsTopicResult:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[DeleteRecordsPartitionResult], W(ARRAY(DeleteRecordsPartitionResult))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    topics: Annotated[Sequence[DeleteRecordsTopicResult], W(ARRAY(DeleteRecordsTopicResult))] = ()
