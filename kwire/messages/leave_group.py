"""LeaveGroup (key 13), versions 0-5, flexible 4+.

v0-2 remove the one ``member_id``; v3+ (KIP-345) remove a batch of ``members``, each
answered in the response's ``members`` with its own error code.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberIdentity:
    member_id: Annotated[str, W(STRING, "3+")] = ""
    group_instance_id: Annotated[str | None, W(STRING, "3+", nullable="3+")] = None
    reason: Annotated[str | None, W(STRING, "5+", nullable="5+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupRequest:
    group_id: Annotated[str, W(STRING)]
    member_id: Annotated[str, W(STRING, "0-2")] = ""
    members: Annotated[Sequence[MemberIdentity], W(ARRAY(MemberIdentity), "3+")] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberResponse:
    member_id: Annotated[str, W(STRING, "3+")] = ""
    group_instance_id: Annotated[str | None, W(STRING, "3+", nullable="3+")] = None
    error_code: Annotated[int, W(INT16, "3+")] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupResponse:
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    error_code: Annotated[int, W(INT16)] = 0
    members: Annotated[Sequence[MemberResponse], W(ARRAY(MemberResponse), "3+")] = ()
