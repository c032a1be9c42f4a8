"""AlterConfigs (key 33), versions 0-2, flexible 2+; IncrementalAlterConfigs (key 44),
versions 0-1, flexible 1+. Both answer with one result per resource.

AlterConfigs replaces a resource's whole set of overrides; IncrementalAlterConfigs applies
per-key operations (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BOOL, INT8, INT16, INT32, STRING, W

OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterableConfig:
    name: Annotated[str, W(STRING)]
    value: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResource:
    resource_type: Annotated[int, W(INT8)]
    resource_name: Annotated[str, W(STRING)]
    configs: Annotated[Sequence[AlterableConfig], W(ARRAY(AlterableConfig))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsRequest:
    resources: Annotated[Sequence[AlterConfigsResource], W(ARRAY(AlterConfigsResource))] = ()
    validate_only: Annotated[bool, W(BOOL)] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResourceResponse:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    resource_type: Annotated[int, W(INT8)]
    resource_name: Annotated[str, W(STRING)]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    responses: Annotated[Sequence[AlterConfigsResourceResponse], W(ARRAY(AlterConfigsResourceResponse))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterableConfigOp:
    name: Annotated[str, W(STRING)]
    config_operation: Annotated[int, W(INT8)] = OP_SET
    value: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsResource:
    resource_type: Annotated[int, W(INT8)]
    resource_name: Annotated[str, W(STRING)]
    configs: Annotated[Sequence[AlterableConfigOp], W(ARRAY(AlterableConfigOp))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsRequest:
    resources: Annotated[
        Sequence[IncrementalAlterConfigsResource], W(ARRAY(IncrementalAlterConfigsResource))
    ] = ()
    validate_only: Annotated[bool, W(BOOL)] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    responses: Annotated[Sequence[AlterConfigsResourceResponse], W(ARRAY(AlterConfigsResourceResponse))] = ()
