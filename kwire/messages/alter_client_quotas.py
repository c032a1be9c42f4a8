"""AlterClientQuotas (key 49), versions 0-1, flexible 1+ (KIP-546).

    Request:  entries ARRAY(entity ARRAY(entity_type STRING, entity_name NULLABLE_STRING),
                            ops ARRAY(key STRING, value FLOAT64, remove BOOL)),
              validate_only BOOL
    Response: throttle_time_ms INT32,
              entries ARRAY(error_code INT16, error_message NULLABLE_STRING,
                            entity ARRAY(entity_type STRING, entity_name NULLABLE_STRING))

A null entity name is the entity type's default (``<default>`` in kafka-configs).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.messages.describe_client_quotas import EntityData
from kwire.schema import ARRAY, BOOL, FLOAT64, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class OpData:
    key: Annotated[str, W(STRING)]
    value: Annotated[float, W(FLOAT64)] = 0.0
    remove: Annotated[bool, W(BOOL)] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterEntryData:
    entity: Annotated[Sequence[EntityData], W(ARRAY(EntityData))] = ()
    ops: Annotated[Sequence[OpData], W(ARRAY(OpData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterClientQuotasRequest:
    entries: Annotated[Sequence[AlterEntryData], W(ARRAY(AlterEntryData))] = ()
    validate_only: Annotated[bool, W(BOOL)] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterEntryResponse:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    entity: Annotated[Sequence[EntityData], W(ARRAY(EntityData))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterClientQuotasResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    entries: Annotated[Sequence[AlterEntryResponse], W(ARRAY(AlterEntryResponse))] = ()
