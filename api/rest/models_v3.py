"""Response and request bodies of the Confluent REST v3 resources beyond clusters and topics
(partitions, replicas, reassignments, brokers, configs, ACLs, consumer groups, share groups, produce).

The shapes are Confluent REST Proxy v3's: every resource has ``kind``, ``metadata.self``
and ``metadata.resource_name`` (a CRN), every list ``kind``, ``metadata.self`` and
``metadata.next`` (always null: Strata answers a whole list at once), and relations are
``{"related": url}`` objects.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.rest.models import ListMetadata, Related, ResourceMetadata
from hot.config import INT32_MAX

# v3 request bodies refuse unknown fields, as Confluent's v3 does ("Unrecognized field"): a
# v2-shaped body sent to a v3 route must not pass for an empty record.
_STRICT = ConfigDict(strict=True, extra="forbid")

# --- partitions, replicas, reassignments ----------------------------------------------------


class PartitionV3(BaseModel):
    kind: Literal["KafkaPartition"] = "KafkaPartition"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    leader: Related | None = Field(description="the leader's replica; null while the partition is offline")
    replicas: Related
    reassignment: Related


class PartitionListV3(BaseModel):
    kind: Literal["KafkaPartitionList"] = "KafkaPartitionList"
    metadata: ListMetadata
    data: list[PartitionV3]


class ReplicaV3(BaseModel):
    kind: Literal["KafkaReplica"] = "KafkaReplica"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    broker_id: int
    is_leader: bool
    is_in_sync: bool
    broker: Related


class ReplicaListV3(BaseModel):
    kind: Literal["KafkaReplicaList"] = "KafkaReplicaList"
    metadata: ListMetadata
    data: list[ReplicaV3]


class ReassignmentV3(BaseModel):
    kind: Literal["KafkaReassignment"] = "KafkaReassignment"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    adding_replicas: list[int]
    removing_replicas: list[int]
    replicas: Related


class ReassignmentListV3(BaseModel):
    kind: Literal["KafkaReassignmentList"] = "KafkaReassignmentList"
    metadata: ListMetadata
    data: list[ReassignmentV3]


# --- brokers ----------------------------------------------------------------------------------


class BrokerV3(BaseModel):
    kind: Literal["KafkaBroker"] = "KafkaBroker"
    metadata: ResourceMetadata
    cluster_id: str
    broker_id: int
    host: str | None
    port: int | None
    rack: str | None
    configs: Related
    partition_replicas: Related


class BrokerListV3(BaseModel):
    kind: Literal["KafkaBrokerList"] = "KafkaBrokerList"
    metadata: ListMetadata
    data: list[BrokerV3]


# --- configs ----------------------------------------------------------------------------------

ConfigSource = Literal[
    "DYNAMIC_TOPIC_CONFIG",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "STATIC_BROKER_CONFIG",
    "DEFAULT_CONFIG",
    "UNKNOWN",
]


class ConfigSynonymV3(BaseModel):
    name: str
    value: str | None
    source: ConfigSource


class _ConfigV3(BaseModel):
    """What a topic's and a broker's config have in common."""

    metadata: ResourceMetadata
    cluster_id: str
    name: str
    value: str | None
    is_default: bool
    is_read_only: bool
    is_sensitive: bool
    source: ConfigSource
    synonyms: list[ConfigSynonymV3]


class TopicConfigV3(_ConfigV3):
    kind: Literal["KafkaTopicConfig"] = "KafkaTopicConfig"
    topic_name: str


class TopicConfigListV3(BaseModel):
    kind: Literal["KafkaTopicConfigList"] = "KafkaTopicConfigList"
    metadata: ListMetadata
    data: list[TopicConfigV3]


class BrokerConfigV3(_ConfigV3):
    kind: Literal["KafkaBrokerConfig"] = "KafkaBrokerConfig"
    broker_id: int


class BrokerConfigListV3(BaseModel):
    kind: Literal["KafkaBrokerConfigList"] = "KafkaBrokerConfigList"
    metadata: ListMetadata
    data: list[BrokerConfigV3]


class ClusterConfigListV3(BaseModel):
    """``/broker-configs``: cluster-wide dynamic broker configs (Strata has none to list)."""

    kind: Literal["KafkaClusterConfigList"] = "KafkaClusterConfigList"
    metadata: ListMetadata
    data: list[dict[str, Any]]


class AlterConfigIn(BaseModel):
    model_config = _STRICT
    name: str = Field(min_length=1)
    value: str | None = None
    operation: str | None = Field(
        default=None, description="SET (default), DELETE (back to the default), APPEND or SUBTRACT"
    )


class AlterConfigsRequest(BaseModel):
    model_config = _STRICT
    data: list[AlterConfigIn]
    validate_only: bool = False


class UpdateConfigRequest(BaseModel):
    model_config = _STRICT
    value: str | None = None


# --- ACLs -------------------------------------------------------------------------------------


class AclV3(BaseModel):
    kind: Literal["KafkaAcl"] = "KafkaAcl"
    metadata: ResourceMetadata
    cluster_id: str
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


class AclListV3(BaseModel):
    kind: Literal["KafkaAclList"] = "KafkaAclList"
    metadata: ListMetadata
    data: list[AclV3]


# --- consumer groups --------------------------------------------------------------------------


class ConsumerGroupV3(BaseModel):
    kind: Literal["KafkaConsumerGroup"] = "KafkaConsumerGroup"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    is_simple: bool = Field(description="true for groups that only commit offsets (no members' protocol)")
    partition_assignor: str
    state: str
    type: str = Field("CLASSIC", description="CLASSIC, or CONSUMER for a KIP-848 consumer group")
    coordinator: Related
    consumers: Related
    lag_summary: Related


class ConsumerGroupListV3(BaseModel):
    kind: Literal["KafkaConsumerGroupList"] = "KafkaConsumerGroupList"
    metadata: ListMetadata
    data: list[ConsumerGroupV3]


class ConsumerV3(BaseModel):
    kind: Literal["KafkaConsumer"] = "KafkaConsumer"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    consumer_id: str
    instance_id: str | None
    client_id: str
    member_epoch: int | None = Field(None, description="the member epoch in a KIP-848 consumer group")
    assignments: Related


class ConsumerListV3(BaseModel):
    kind: Literal["KafkaConsumerList"] = "KafkaConsumerList"
    metadata: ListMetadata
    data: list[ConsumerV3]


class ConsumerAssignmentV3(BaseModel):
    kind: Literal["KafkaConsumerAssignment"] = "KafkaConsumerAssignment"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    consumer_id: str
    topic_name: str
    partition_id: int
    partition: Related
    lag: Related


class ConsumerAssignmentListV3(BaseModel):
    kind: Literal["KafkaConsumerAssignmentList"] = "KafkaConsumerAssignmentList"
    metadata: ListMetadata
    data: list[ConsumerAssignmentV3]


class ConsumerLagV3(BaseModel):
    kind: Literal["KafkaConsumerLag"] = "KafkaConsumerLag"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    topic_name: str
    partition_id: int
    current_offset: int | None = Field(description="the committed offset; null when none is")
    log_end_offset: int | None = Field(description="the high watermark; null when not served here")
    lag: int | None
    consumer_id: str
    instance_id: str | None
    client_id: str


class ConsumerLagListV3(BaseModel):
    kind: Literal["KafkaConsumerLagList"] = "KafkaConsumerLagList"
    metadata: ListMetadata
    data: list[ConsumerLagV3]


class ConsumerGroupLagSummaryV3(BaseModel):
    kind: Literal["KafkaConsumerGroupLagSummary"] = "KafkaConsumerGroupLagSummary"
    metadata: ResourceMetadata
    cluster_id: str
    consumer_group_id: str
    max_lag_consumer_id: str = Field(description='"" when the partition has no member')
    max_lag_instance_id: str | None
    max_lag_client_id: str
    max_lag_topic_name: str | None = Field(description="null when the group has no partition")
    max_lag_partition_id: int | None
    max_lag: int
    total_lag: int
    max_lag_consumer: Related | None = Field(description="null when the partition has no member")
    max_lag_partition: Related | None = Field(description="null when the group has no partition")


# --- share groups (KIP-932; Confluent's Share Group v3 shapes, api.rest.v3_share_groups) -------


class ShareGroupTopicPartitionV3(BaseModel):
    kind: Literal["KafkaShareGroupTopicPartition"] = "KafkaShareGroupTopicPartition"
    metadata: ResourceMetadata
    cluster_id: str
    topic_name: str
    partition_id: int
    partition: Related


class ShareGroupV3(BaseModel):
    kind: Literal["KafkaShareGroup"] = "KafkaShareGroup"
    metadata: ResourceMetadata
    cluster_id: str
    share_group_id: str
    state: str = Field(description="EMPTY or STABLE")
    coordinator: Related
    consumers: Related
    consumer_count: int
    partition_count: int = Field(description="topic-partitions assigned to the group's consumers")
    assigned_topic_partitions: list[ShareGroupTopicPartitionV3]
    partition_assignor: str = Field(description="Strata's: the share assignor (simple)")
    group_epoch: int = Field(description="Strata's")
    assignment_epoch: int = Field(description="Strata's")
    lags: Related = Field(description="Strata's: start offset, in-flight records and lag per share partition")


class ShareGroupListV3(BaseModel):
    kind: Literal["KafkaShareGroupList"] = "KafkaShareGroupList"
    metadata: ListMetadata
    data: list[ShareGroupV3]


class ShareConsumerV3(BaseModel):
    kind: Literal["KafkaShareGroupConsumer"] = "KafkaShareGroupConsumer"
    metadata: ResourceMetadata
    cluster_id: str
    group_id: str
    consumer_id: str
    client_id: str
    member_epoch: int = Field(description="Strata's")
    host: str = Field(description="Strata's: the consumer's address")
    assignments: Related


class ShareConsumerListV3(BaseModel):
    kind: Literal["KafkaShareConsumerList"] = "KafkaShareConsumerList"
    metadata: ListMetadata
    data: list[ShareConsumerV3]


class ShareConsumerAssignmentV3(BaseModel):
    kind: Literal["KafkaShareGroupConsumerAssignment"] = "KafkaShareGroupConsumerAssignment"
    metadata: ResourceMetadata
    cluster_id: str
    group_id: str
    consumer_id: str
    topic_name: str
    partition_id: int
    partition: Related
    lag: Related = Field(description="Strata's")


class ShareConsumerAssignmentListV3(BaseModel):
    kind: Literal["KafkaShareGroupConsumerAssignmentList"] = "KafkaShareGroupConsumerAssignmentList"
    metadata: ListMetadata
    data: list[ShareConsumerAssignmentV3]


class ShareGroupLagV3(BaseModel):
    """Strata's (Confluent's API has no share-group lag)."""

    kind: Literal["KafkaShareGroupLag"] = "KafkaShareGroupLag"
    metadata: ResourceMetadata
    cluster_id: str
    group_id: str
    topic_name: str
    partition_id: int
    start_offset: int = Field(description="the share-partition start offset; -1: no state yet")
    in_flight: int | None = Field(description="records of the window not yet acknowledged; null: unknown")
    acquired: int | None = Field(description="records held by a consumer now; null: not served here")
    log_end_offset: int | None = Field(description="the high watermark; null when not known here")
    lag: int | None = Field(description="records from the start offset to the end not yet acknowledged")
    partition: Related


class ShareGroupLagListV3(BaseModel):
    kind: Literal["KafkaShareGroupLagList"] = "KafkaShareGroupLagList"
    metadata: ListMetadata
    data: list[ShareGroupLagV3]


# --- produce ----------------------------------------------------------------------------------

DataType = Literal["BINARY", "JSON", "STRING"]


class ProduceDataIn(BaseModel):
    model_config = _STRICT
    type: DataType | None = Field(default=None, description="BINARY (base64), JSON or STRING; default JSON")
    data: Any = Field(default=None, description="null: no key / a null value")


class ProduceHeaderIn(BaseModel):
    model_config = _STRICT
    name: str
    value: str | None = Field(default=None, description="base64, or null")


class ProduceRecordV3(BaseModel):
    model_config = _STRICT
    partition_id: int | None = Field(default=None, ge=0, le=INT32_MAX)
    headers: list[ProduceHeaderIn] = Field(default_factory=list)
    key: ProduceDataIn | None = None
    value: ProduceDataIn | None = None
    timestamp: str | None = Field(default=None, description="ISO 8601; default: now")


class ProduceDataOut(BaseModel):
    type: DataType
    size: int


class ProduceResultV3(BaseModel):
    """One record's delivery report: ``error_code`` 200 on success (Confluent's), otherwise
    an HTTP-style code and ``message``, the other fields then absent."""

    error_code: int
    message: str | None = None
    cluster_id: str | None = None
    topic_name: str | None = None
    partition_id: int | None = None
    offset: int | None = None
    timestamp: str | None = None
    key: ProduceDataOut | None = None
    value: ProduceDataOut | None = None


# Referenced by the v3 routes' request (and produce's response) schemas: added to the
# OpenAPI components with api.rest.models.BODY_MODELS.
V3_BODY_MODELS: Final = (AlterConfigsRequest, UpdateConfigRequest, ProduceRecordV3, ProduceResultV3)
