"""CreateTopics (key 19), versions 2-7, flexible 5+."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.primitives import ZERO_UUID
from kwire.schema import ARRAY, BOOL, INT8, INT16, INT32, STRING, UUID, W


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableReplicaAssignment:
    partition_index: Annotated[int, W(INT32)]
    broker_ids: Annotated[Sequence[int], W(ARRAY(INT32))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicConfig:
    name: Annotated[str, W(STRING)]
    value: Annotated[str | None, W(STRING, nullable="0+")]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopic:
    name: Annotated[str, W(STRING)]
    num_partitions: Annotated[int, W(INT32)] = -1  # -1: broker default (or from assignments)
    replication_factor: Annotated[int, W(INT16)] = -1
    assignments: Annotated[Sequence[CreatableReplicaAssignment], W(ARRAY(CreatableReplicaAssignment))] = ()
    configs: Annotated[Sequence[CreatableTopicConfig], W(ARRAY(CreatableTopicConfig))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsRequest:
    topics: Annotated[Sequence[CreatableTopic], W(ARRAY(CreatableTopic))] = ()
    timeout_ms: Annotated[int, W(INT32)] = 60000
    validate_only: Annotated[bool, W(BOOL, "1+")] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicConfigs:
    name: Annotated[str, W(STRING, "5+")]
    value: Annotated[str | None, W(STRING, "5+", nullable="5+")]
    read_only: Annotated[bool, W(BOOL, "5+")] = False
    config_source: Annotated[int, W(INT8, "5+")] = -1
    is_sensitive: Annotated[bool, W(BOOL, "5+")] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicResult:
    name: Annotated[str, W(STRING)]
    topic_id: Annotated[uuid.UUID, W(UUID, "7+")] = ZERO_UUID
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, "1+", nullable="0+")] = None
    topic_config_error_code: Annotated[int, W(INT16, "5+", tag=0)] = 0
    num_partitions: Annotated[int, W(INT32, "5+")] = -1
    replication_factor: Annotated[int, W(INT16, "5+")] = -1
    configs: Annotated[
        Sequence[CreatableTopicConfigs] | None, W(ARRAY(CreatableTopicConfigs), "5+", nullable="5+")
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsResponse:
    throttle_time_ms: Annotated[int, W(INT32, "2+")] = 0
    topics: Annotated[Sequence[CreatableTopicResult], W(ARRAY(CreatableTopicResult))] = ()
