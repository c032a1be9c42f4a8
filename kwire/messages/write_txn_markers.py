"""WriteTxnMarkers (key 27), versions 1-2, flexible 1+.

Sent by the transaction coordinator to each partition leader: write a COMMIT
(``transaction_result`` true) or ABORT control batch for these producers' transactions.
v0 was removed in Kafka 4.0 (v1, its flexible twin, is the baseline). v2 (Kafka 4.2) adds
the marker's ``transaction_version`` (0/1 legacy, 2 = TV2); it is ignorable, so a v1
request carries none and the leader reads it as 0.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BOOL, INT8, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopic:
    name: Annotated[str, W(STRING)]
    partition_indexes: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarker:
    producer_id: Annotated[int, W(INT64)]
    producer_epoch: Annotated[int, W(INT16)]
    transaction_result: Annotated[bool, W(BOOL)]
    topics: Annotated[Sequence[WritableTxnMarkerTopic], W(ARRAY(WritableTxnMarkerTopic))] = ()
    coordinator_epoch: Annotated[int, W(INT32)]
    transaction_version: Annotated[int, W(INT8, "2+")] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersRequest:
    markers: Annotated[Sequence[WritableTxnMarker], W(ARRAY(WritableTxnMarker))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerPartitionResult:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopicResult:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[
        Sequence[WritableTxnMarkerPartitionResult], W(ARRAY(WritableTxnMarkerPartitionResult))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerResult:
    producer_id: Annotated[int, W(INT64)]
    topics: Annotated[Sequence[WritableTxnMarkerTopicResult], W(ARRAY(WritableTxnMarkerTopicResult))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersResponse:
    markers: Annotated[Sequence[WritableTxnMarkerResult], W(ARRAY(WritableTxnMarkerResult))] = ()
