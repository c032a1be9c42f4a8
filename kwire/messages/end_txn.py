"""EndTxn (key 26), versions 0-5, flexible 3+.

``committed`` true commits, false aborts. v1 is v0; v2 allows PRODUCER_FENCED; v4 allows
TRANSACTION_ABORTABLE; v5 (KIP-890 part 2, transaction version 2) bumps the producer epoch
on every commit or abort and returns the producer id and epoch the producer must use next.
Those two response fields are ignorable (-1 when absent or unknown): answering a v4
request drops them.
"""

from dataclasses import dataclass
from typing import Annotated

from kwire.schema import BOOL, INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTxnRequest:
    transactional_id: Annotated[str, W(STRING)]
    producer_id: Annotated[int, W(INT64)]
    producer_epoch: Annotated[int, W(INT16)]
    committed: Annotated[bool, W(BOOL)]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTxnResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    producer_id: Annotated[int, W(INT64, "5+")] = -1
    producer_epoch: Annotated[int, W(INT16, "5+")] = -1
