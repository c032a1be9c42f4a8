"""CreatePartitions (key 37), versions 0-3, flexible 2+: grow a topic's partition count."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.schema import ARRAY, BOOL, INT16, INT32, STRING, W


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsAssignment:
    broker_ids: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopic:
    name: Annotated[str, W(STRING)]
    count: Annotated[int, W(INT32)]
    assignments: Annotated[
        Sequence[CreatePartitionsAssignment] | None, W(ARRAY(CreatePartitionsAssignment), nullable="0+")
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsRequest:
    topics: Annotated[Sequence[CreatePartitionsTopic], W(ARRAY(CreatePartitionsTopic))] = ()
    timeout_ms: Annotated[int, W(INT32)] = 60000
    validate_only: Annotated[bool, W(BOOL)] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopicResult:
    name: Annotated[str, W(STRING)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    results: Annotated[Sequence[CreatePartitionsTopicResult], W(ARRAY(CreatePartitionsTopicResult))] = ()
