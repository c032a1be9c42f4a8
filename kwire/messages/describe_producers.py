"""DescribeProducers (key 61), version 0, flexible 0+ (KIP-664).

Sent to a partition's leader: the producers with state in that partition, with each one's
ongoing transaction's first offset (-1: none). Note ``producer_epoch`` is INT32 here,
unlike every other producer epoch on the wire (INT16), as in Kafka's JSON.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeProducersTopicRequest:
    name: Annotated[str, W(STRING)]
    partition_indexes: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeProducersRequest:
    topics: Annotated[Sequence[DescribeProducersTopicRequest], W(ARRAY(DescribeProducersTopicRequest))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerState:
    producer_id: Annotated[int, W(INT64)]
    producer_epoch: Annotated[int, W(INT32)]
    last_sequence: Annotated[int, W(INT32)] = -1
    last_timestamp: Annotated[int, W(INT64)] = -1
    coordinator_epoch: Annotated[int, W(INT32)] = 0
    current_txn_start_offset: Annotated[int, W(INT64)] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeProducersPartitionResponse:
    partition_index: Annotated[int, W(INT32)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    active_producers: Annotated[Sequence[ProducerState], W(ARRAY(ProducerState))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeProducersTopicResponse:
    name: Annotated[str, W(STRING)]
    partitions: Annotated[
        Sequence[DescribeProducersPartitionResponse], W(ARRAY(DescribeProducersPartitionResponse))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeProducersResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    topics: Annotated[Sequence[DescribeProducersTopicResponse], W(ARRAY(DescribeProducersTopicResponse))] = ()
