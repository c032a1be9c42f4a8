"""Request and response bodies of the REST API: validation and the OpenAPI schema in one place."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from hot.config import INT32_MAX
from hot.topics import MAX_PARTITIONS

_STRICT = ConfigDict(strict=True)


class ErrorResponse(BaseModel):
    error_code: int
    message: str


class HeaderIn(BaseModel):
    model_config = _STRICT
    key: str
    value: str | None = Field(default=None, description="base64, or null")


class JsonRecordIn(BaseModel):
    model_config = _STRICT
    key: Any = Field(default=None, description="any JSON value; null means no key")
    value: Any = Field(default=None, description="any JSON value; null is a null value (tombstone)")
    partition: int | None = Field(default=None, ge=0, le=INT32_MAX)
    headers: list[HeaderIn] = Field(default_factory=list)


class JsonProduceRequest(BaseModel):
    model_config = _STRICT
    records: list[JsonRecordIn] = Field(min_length=1)


class BinaryRecordIn(BaseModel):
    model_config = _STRICT
    key: str | None = Field(default=None, description="base64, or null for no key")
    value: str | None = Field(default=None, description="base64, or null")
    partition: int | None = Field(default=None, ge=0, le=INT32_MAX)
    headers: list[HeaderIn] = Field(default_factory=list)


class BinaryProduceRequest(BaseModel):
    model_config = _STRICT
    records: list[BinaryRecordIn] = Field(min_length=1)


class ProduceOffset(BaseModel):
    partition: int
    offset: int | None
    error_code: int | None
    error: str | None


class ProduceResponse(BaseModel):
    offsets: list[ProduceOffset]
    key_schema_id: int | None = None
    value_schema_id: int | None = None


class HeaderOut(BaseModel):
    key: str
    value: str | None


class BinaryRecordOut(BaseModel):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: str | None
    headers: list[HeaderOut]


class JsonRecordOut(BaseModel):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: list[HeaderOut]
    error: str | None = Field(
        default=None,
        description="consumer instances only: why the key or value (then null) is not shown: not JSON",
    )


class ReplicaV2(BaseModel):
    broker: int
    leader: bool
    in_sync: bool


class PartitionV2(BaseModel):
    partition: int
    leader: int
    replicas: list[ReplicaV2]


class TopicV2(BaseModel):
    name: str
    configs: dict[str, str]
    partitions: list[PartitionV2]


class PartitionOffsetsV2(BaseModel):
    """``GET /topics/{t}/partitions/{p}/offsets`` (REST Proxy v2): the log start offset and
    the high watermark (the offset the next record gets once it is committed)."""

    beginning_offset: int
    end_offset: int


class BrokersV2(BaseModel):
    brokers: list[int]


class Health(BaseModel):
    status: str
    broker_id: int
    cluster_id: str
    topics: int


class Related(BaseModel):
    related: str


class ResourceMetadata(BaseModel):
    self: str
    resource_name: str | None = None


class ListMetadata(BaseModel):
    self: str
    next: str | None = None


class ClusterV3(BaseModel):
    kind: Literal["KafkaCluster"] = "KafkaCluster"
    metadata: ResourceMetadata
    cluster_id: str
    controller: Related
    acls: Related
    brokers: Related
    broker_configs: Related
    consumer_groups: Related
    topics: Related
    partition_reassignments: Related


class ClusterListV3(BaseModel):
    kind: Literal["KafkaClusterList"] = "KafkaClusterList"
    metadata: ListMetadata
    data: list[ClusterV3]


class TopicV3(BaseModel):
    kind: Literal["KafkaTopic"] = "KafkaTopic"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    is_internal: bool
    replication_factor: int
    partitions_count: int
    partitions: Related
    configs: Related
    partition_reassignments: Related
    authorized_operations: list[str]


class TopicListV3(BaseModel):
    kind: Literal["KafkaTopicList"] = "KafkaTopicList"
    metadata: ListMetadata
    data: list[TopicV3]


class ConfigIn(BaseModel):
    model_config = _STRICT
    name: str
    value: str | None = None


class CreateTopicRequest(BaseModel):
    model_config = _STRICT
    topic_name: str
    partitions_count: int | None = Field(
        default=None, ge=-1, le=MAX_PARTITIONS, description="-1: broker default"
    )
    replication_factor: int | None = Field(default=None, ge=-1, le=32767)
    configs: list[ConfigIn] = Field(default_factory=list)
    validate_only: bool = False


BODY_MODELS: Final = (
    ErrorResponse,
    JsonProduceRequest,
    BinaryProduceRequest,
    JsonRecordOut,
    BinaryRecordOut,
    CreateTopicRequest,
)
