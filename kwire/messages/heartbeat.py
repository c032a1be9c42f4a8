"""Heartbeat (key 12), versions 0-4, flexible 4+."""

from dataclasses import dataclass
from typing import Annotated

from kwire.schema import INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    group_id: Annotated[str, W(STRING)]
    generation_id: Annotated[int, W(INT32)]
    member_id: Annotated[str, W(STRING)]
    group_instance_id: Annotated[str | None, W(STRING, "3+", nullable="3+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse:
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    error_code: Annotated[int, W(INT16)] = 0
