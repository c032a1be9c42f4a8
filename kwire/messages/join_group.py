"""JoinGroup (key 11), versions 0-9, flexible 6+.

``rebalance_timeout_ms`` exists from v1; a v0 request decodes with -1, meaning "use
``session_timeout_ms``" (Kafka's rule). From v4 a member joining with an empty
``member_id`` is answered MEMBER_ID_REQUIRED with its assigned id and must join again.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BOOL, BYTES, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequestProtocol:
    name: Annotated[str, W(STRING)]
    metadata: Annotated[bytes, W(BYTES)] = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequest:
    group_id: Annotated[str, W(STRING)]
    session_timeout_ms: Annotated[int, W(INT32)]
    rebalance_timeout_ms: Annotated[int, W(INT32, "1+")] = -1
    member_id: Annotated[str, W(STRING)] = ""
    group_instance_id: Annotated[str | None, W(STRING, "5+", nullable="5+")] = None
    protocol_type: Annotated[str, W(STRING)]
    protocols: Annotated[Sequence[JoinGroupRequestProtocol], W(ARRAY(JoinGroupRequestProtocol))] = ()
    reason: Annotated[str | None, W(STRING, "8+", nullable="8+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResponseMember:
    member_id: Annotated[str, W(STRING)]
    group_instance_id: Annotated[str | None, W(STRING, "5+", nullable="5+")] = None
    metadata: Annotated[bytes, W(BYTES)] = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResponse:
    throttle_time_ms: Annotated[int, W(INT32, "2+")] = 0
    error_code: Annotated[int, W(INT16)] = 0
    generation_id: Annotated[int, W(INT32)] = -1
    protocol_type: Annotated[str | None, W(STRING, "7+", nullable="7+")] = None
    # Null only from v7 (e.g. on errors); older versions carry "" instead.
    protocol_name: Annotated[str | None, W(STRING, nullable="7+")] = ""
    leader: Annotated[str, W(STRING)] = ""
    skip_assignment: Annotated[bool, W(BOOL, "9+")] = False
    member_id: Annotated[str, W(STRING)] = ""
    members: Annotated[Sequence[JoinGroupResponseMember], W(ARRAY(JoinGroupResponseMember))] = ()
