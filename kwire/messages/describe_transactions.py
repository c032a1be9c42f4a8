"""DescribeTransactions (key 65), version 0, flexible 0+ (KIP-664).

Sent to each transactional id's coordinator. ``transaction_state`` is the coordinator's
state name as Kafka spells it (Empty, Ongoing, PrepareCommit, PrepareAbort,
CompleteCommit, CompleteAbort, Dead, PrepareEpochFence); ``topics`` lists the partitions in
the transaction (while preparing, only those still without a marker). Defaults are Kafka's
(0, ""), so an error entry carrying only its code and id encodes as Kafka's does.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsRequest:
    transactional_ids: Annotated[Sequence[str], W(ARRAY(STRING))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionTopicData:
    topic: Annotated[str, W(STRING)]
    partitions: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTransactionState:
    error_code: Annotated[int, W(INT16)] = 0
    transactional_id: Annotated[str, W(STRING)]
    transaction_state: Annotated[str, W(STRING)] = ""
    transaction_timeout_ms: Annotated[int, W(INT32)] = 0
    transaction_start_time_ms: Annotated[int, W(INT64)] = 0
    producer_id: Annotated[int, W(INT64)] = 0
    producer_epoch: Annotated[int, W(INT16)] = 0
    topics: Annotated[Sequence[TransactionTopicData], W(ARRAY(TransactionTopicData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    transaction_states: Annotated[
        Sequence[DescribedTransactionState], W(ARRAY(DescribedTransactionState))
    ] = ()
