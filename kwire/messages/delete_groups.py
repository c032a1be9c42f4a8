"""DeleteGroups (key 42), versions 0-2, flexible 2+. ``groups_names`` is Kafka's spelling."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequest:
    groups_names: Annotated[Sequence[str], W(ARRAY(STRING))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableGroupResult:
    group_id: Annotated[str, W(STRING)]
    error_code: Annotated[int, W(INT16)] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    results: Annotated[Sequence[DeletableGroupResult], W(ARRAY(DeletableGroupResult))] = ()
