"""DescribeClientQuotas (key 48), versions 0-1, flexible 1+ (KIP-546).

    Request:  components ARRAY(entity_type STRING, match_type INT8, match NULLABLE_STRING),
              strict BOOL
    Response: throttle_time_ms INT32, error_code INT16, error_message NULLABLE_STRING,
              entries NULLABLE ARRAY(entity ARRAY(entity_type STRING, entity_name NULLABLE_STRING),
                                     values ARRAY(key STRING, value FLOAT64))

match_type: 0 exact name (a null name: the default entity), 1 the default entity, 2 any.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from kwire.schema import ARRAY, BOOL, FLOAT64, INT8, INT16, INT32, STRING, W

MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_ANY: Final = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentData:
    entity_type: Annotated[str, W(STRING)]
    match_type: Annotated[int, W(INT8)]
    match: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeClientQuotasRequest:
    components: Annotated[Sequence[ComponentData], W(ARRAY(ComponentData))] = ()
    strict: Annotated[bool, W(BOOL)] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EntityData:
    entity_type: Annotated[str, W(STRING)]
    entity_name: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ValueData:
    key: Annotated[str, W(STRING)]
    value: Annotated[float, W(FLOAT64)]


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryData:
    entity: Annotated[Sequence[EntityData], W(ARRAY(EntityData))] = ()
    values: Annotated[Sequence[ValueData], W(ARRAY(ValueData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeClientQuotasResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    entries: Annotated[Sequence[EntryData] | None, W(ARRAY(EntryData), nullable="0+")] = None
