"""Metadata (key 3), versions 0-13, flexible 9+ (v13: a top-level ``error_code``, KIP-1102).

A null ``topics`` means "all topics" (v1+). In v0 the wire has no null and an empty array
means all topics; the registry normalises that so callers only ever see ``None`` for
"all topics" (see ``kwire.apis``).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from kwire.primitives import ZERO_UUID
from kwire.schema import ARRAY, BOOL, INT16, INT32, STRING, UUID, W

NO_AUTHORIZED_OPERATIONS = -(2**31)  # INT32 min: "not requested"


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataRequestTopic:
    topic_id: Annotated[uuid.UUID, W(UUID, "10+")] = ZERO_UUID
    name: Annotated[str | None, W(STRING, nullable="10+")]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataRequest:
    topics: Annotated[
        Sequence[MetadataRequestTopic] | None, W(ARRAY(MetadataRequestTopic), nullable="1+")
    ] = None
    allow_auto_topic_creation: Annotated[bool, W(BOOL, "4+")] = True
    include_cluster_authorized_operations: Annotated[bool, W(BOOL, "8-10")] = False
    include_topic_authorized_operations: Annotated[bool, W(BOOL, "8+")] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataResponseBroker:
    node_id: Annotated[int, W(INT32)]
    host: Annotated[str, W(STRING)]
    port: Annotated[int, W(INT32)]
    rack: Annotated[str | None, W(STRING, "1+", nullable="1+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataResponsePartition:
    error_code: Annotated[int, W(INT16)] = 0
    partition_index: Annotated[int, W(INT32)]
    leader_id: Annotated[int, W(INT32)]
    leader_epoch: Annotated[int, W(INT32, "7+")] = -1
    replica_nodes: Annotated[Sequence[int], W(ARRAY(INT32))] = ()
    isr_nodes: Annotated[Sequence[int], W(ARRAY(INT32))] = ()
    offline_replicas: Annotated[Sequence[int], W(ARRAY(INT32), "5+")] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataResponseTopic:
    error_code: Annotated[int, W(INT16)] = 0
    name: Annotated[str | None, W(STRING, nullable="12+")]
    topic_id: Annotated[uuid.UUID, W(UUID, "10+")] = ZERO_UUID
    is_internal: Annotated[bool, W(BOOL, "1+")] = False
    partitions: Annotated[Sequence[MetadataResponsePartition], W(ARRAY(MetadataResponsePartition))] = ()
    topic_authorized_operations: Annotated[int, W(INT32, "8+")] = NO_AUTHORIZED_OPERATIONS


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataResponse:
    throttle_time_ms: Annotated[int, W(INT32, "3+")] = 0
    brokers: Annotated[Sequence[MetadataResponseBroker], W(ARRAY(MetadataResponseBroker))] = ()
    cluster_id: Annotated[str | None, W(STRING, "2+", nullable="2+")] = None
    controller_id: Annotated[int, W(INT32, "1+")] = -1
    topics: Annotated[Sequence[MetadataResponseTopic], W(ARRAY(MetadataResponseTopic))] = ()
    cluster_authorized_operations: Annotated[int, W(INT32, "8-10")] = NO_AUTHORIZED_OPERATIONS
    error_code: Annotated[int, W(INT16, "13+")] = 0
