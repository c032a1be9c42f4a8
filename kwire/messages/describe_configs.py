"""DescribeConfigs (key 32), versions 0-4, flexible 4+."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BOOL, INT8, INT16, INT32, STRING, W

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResource:
    resource_type: Annotated[int, W(INT8)]
    resource_name: Annotated[str, W(STRING)]
    configuration_keys: Annotated[Sequence[str] | None, W(ARRAY(STRING), nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsRequest:
    resources: Annotated[Sequence[DescribeConfigsResource], W(ARRAY(DescribeConfigsResource))] = ()
    include_synonyms: Annotated[bool, W(BOOL, "1+")] = False
    include_documentation: Annotated[bool, W(BOOL, "3+")] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsSynonym:
    name: Annotated[str, W(STRING, "1+")]
    value: Annotated[str | None, W(STRING, "1+", nullable="0+")]
    source: Annotated[int, W(INT8, "1+")]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResourceResult:
    name: Annotated[str, W(STRING)]
    value: Annotated[str | None, W(STRING, nullable="0+")]
    read_only: Annotated[bool, W(BOOL)] = False
    config_source: Annotated[int, W(INT8, "1+")] = -1
    is_default: Annotated[bool, W(BOOL, "0")] = False
    is_sensitive: Annotated[bool, W(BOOL)] = False
    synonyms: Annotated[Sequence[DescribeConfigsSynonym], W(ARRAY(DescribeConfigsSynonym), "1+")] = ()
    config_type: Annotated[int, W(INT8, "3+")] = 0
    documentation: Annotated[str | None, W(STRING, "3+", nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResult:
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    resource_type: Annotated[int, W(INT8)]
    resource_name: Annotated[str, W(STRING)]
    configs: Annotated[Sequence[DescribeConfigsResourceResult], W(ARRAY(DescribeConfigsResourceResult))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    results: Annotated[Sequence[DescribeConfigsResult], W(ARRAY(DescribeConfigsResult))] = ()
