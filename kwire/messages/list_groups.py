"""ListGroups (key 16), versions 0-5, flexible 3+.

An empty ``states_filter`` (v4+, KIP-518) lists groups in every state; an empty
``types_filter`` (v5+, KIP-848: "classic", "consumer", case-insensitive) every type.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsRequest:
    states_filter: Annotated[Sequence[str], W(ARRAY(STRING), "4+")] = ()
    types_filter: Annotated[Sequence[str], W(ARRAY(STRING), "5+")] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedGroup:
    group_id: Annotated[str, W(STRING)]
    protocol_type: Annotated[str, W(STRING)] = ""
    group_state: Annotated[str, W(STRING, "4+")] = ""
    group_type: Annotated[str, W(STRING, "5+")] = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsResponse:
    throttle_time_ms: Annotated[int, W(INT32, "1+")] = 0
    error_code: Annotated[int, W(INT16)] = 0
    groups: Annotated[Sequence[ListedGroup], W(ARRAY(ListedGroup))] = ()
