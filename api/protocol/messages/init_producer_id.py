"""InitProducerId (key 22), versions 0-4, flexible 2+."""

from dataclasses import dataclass
from typing import Annotated

from api.protocol.schema import INT16, INT32, INT64, STRING, W


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
