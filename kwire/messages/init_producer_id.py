"""InitProducerId (key 22), versions 0-4, flexible 2+.

A null ``transactional_id`` asks for an idempotent producer id; a set one finds or creates
that id's transaction and bumps its epoch, fencing older instances. v3 (KIP-360) adds the
producer's current id and epoch so it can bump its epoch after a recoverable error;
v4 allows PRODUCER_FENCED.

Kafka 4.x serves 0-5. v5 (KIP-890) is v4 on the wire and only allows TRANSACTION_ABORTABLE:
this table is correct for it (tests check it at v5), and the served range becomes 0-5 when
the coordinator answers that error. v6 (KIP-939, two-phase commit: ``Enable2Pc``,
``KeepPreparedTxn``, and the ongoing transaction's id and epoch in the response) is marked
unstable in every Kafka 4.x release and no 4.x broker advertises it, so it is not here.
"""

from dataclasses import dataclass
from typing import Annotated

from kwire.schema import INT16, INT32, INT64, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducerIdRequest:
    transactional_id: Annotated[str | None, W(STRING, nullable="0+")] = None
    transaction_timeout_ms: Annotated[int, W(INT32)]
    producer_id: Annotated[int, W(INT64, "3+")] = -1
    producer_epoch: Annotated[int, W(INT16, "3+")] = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducerIdResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    producer_id: Annotated[int, W(INT64)] = -1
    producer_epoch: Annotated[int, W(INT16)] = 0
