"""ListTransactions (key 66), versions 0-2, flexible 0+ (KIP-664).

Sent to every broker (each lists the transactions it coordinates). Empty filters match
everything. v1 (KIP-994) adds ``duration_filter``: only transactions running longer than
that many ms (-1: all). v2 (KIP-1152, Kafka 4.1) adds ``transactional_id_pattern``, a
regular expression (null or empty: all; a bad one is INVALID_REGULAR_EXPRESSION). Neither is
ignorable: a filter the peer's version cannot carry is an ``EncodeError`` rather than a
silently wider listing.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTransactionsRequest:
    state_filters: Annotated[Sequence[str], W(ARRAY(STRING))] = ()
    producer_id_filters: Annotated[Sequence[int], W(ARRAY(INT64))] = ()
    duration_filter: Annotated[int, W(INT64, "1+", ignorable=False)] = -1
    transactional_id_pattern: Annotated[str | None, W(STRING, "2+", nullable="2+", ignorable=False)] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedTransactionState:
    transactional_id: Annotated[str, W(STRING)]
    producer_id: Annotated[int, W(INT64)] = 0
    transaction_state: Annotated[str, W(STRING)] = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTransactionsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    unknown_state_filters: Annotated[Sequence[str], W(ARRAY(STRING))] = ()
    transaction_states: Annotated[Sequence[ListedTransactionState], W(ARRAY(ListedTransactionState))] = ()
