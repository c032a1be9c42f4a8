"""SyncGroup (key 14), versions 0-5, flexible 4+.

Only the leader's request carries ``assignments``; every member gets its own
``assignment`` back. v5 adds ``protocol_type``/``protocol_name`` so both sides can check
they agree on what was negotiated in JoinGroup.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BYTES, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequestAssignment:
    member_id: Annotated[str, W(STRING)]
    assignment: Annotated[bytes, W(BYTES)] = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequest:
    group_id: Annotated[str, W(STRING)]
    generation_id: Annotated[int, W(INT32)]
    member_id: Annotated[str, W(STRING)]
    group_instance_id: Annotated[str | None, W(STRING, "3+", nullable="3+")] = None
    protocol_type: Annotated[str | None, W(STRING, "5+", nullable="5+")] = None
    protocol_name: Annotated[str | None, W(STRING, "5+", nullable="5+")] = None
    assignments: Annotated[Sequence[SyncGroupRequestAssignment], W(ARRAY(SyncGroupRequestAssignment))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupResponse:
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    error_code: Annotated[int, W(INT16)] = 0
    protocol_type: Annotated[str | None, W(STRING, "5+", nullable="5+")] = None
    protocol_name: Annotated[str | None, W(STRING, "5+", nullable="5+")] = None
    assignment: Annotated[bytes, W(BYTES)] = b""
