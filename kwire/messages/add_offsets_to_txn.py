"""AddOffsetsToTxn (key 25), versions 0-4, flexible 3+.

The producer's ``sendOffsetsToTransaction`` first call: the coordinator adds the group's
``__consumer_offsets`` partition to the transaction; the offsets follow in TxnOffsetCommit
to the group coordinator. v1 is v0; v2 allows PRODUCER_FENCED; v4 allows
TRANSACTION_ABORTABLE (KIP-890).
"""

from dataclasses import dataclass
from typing import Annotated

from kwire.schema import INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class AddOffsetsToTxnRequest:
    transactional_id: Annotated[str, W(STRING)]
    producer_id: Annotated[int, W(INT64)]
    producer_epoch: Annotated[int, W(INT16)]
    group_id: Annotated[str, W(STRING)]


@dataclass(frozen=True, slots=True, kw_only=True)
class AddOffsetsToTxnResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
