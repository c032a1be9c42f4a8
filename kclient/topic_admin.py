"""Topic administration and the cluster's health through the Kafka APIs, as Kafka's Admin
client does it (``strata topic alter-config|add-partitions|trim``, ``strata cluster
health|info``): IncrementalAlterConfigs and CreatePartitions on any broker (the
controller's work is forwarded by the broker that answers), DeleteRecords on each
partition's leader, Metadata for the health of every partition.

Works against any Kafka-compatible broker: nothing here reads etcd or Strata's HTTP
listener. ``connect`` opens a client to another broker with the caller's security settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from kclient.kafka_client import KafkaClient, topic_error
from kwire import ApiKey
from kwire.address import HostPort
from kwire.error_table import LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, error_for_code
from kwire.messages.alter_configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterableConfigOp,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from kwire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from kwire.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic

Connect = Callable[[HostPort], KafkaClient]

RESOURCE_TOPIC: Final = 2
# How a config change names its operation (kafka-configs / rpk's flags).
OPERATIONS: Final = {"set": OP_SET, "delete": OP_DELETE, "append": OP_APPEND, "subtract": OP_SUBTRACT}


def alter_topic_configs(
    client: KafkaClient,
    topic: str,
    ops: Sequence[tuple[str, str, str | None]],
    *,
    validate_only: bool = False,
) -> None:
    """IncrementalAlterConfigs (KIP-339) of one topic: ``ops`` are (operation, key, value)
    with the operations of OPERATIONS; the broker applies all or none."""
    req = IncrementalAlterConfigsRequest(
        resources=(
            IncrementalAlterConfigsResource(
                resource_type=RESOURCE_TOPIC,
                resource_name=topic,
                configs=tuple(
                    AlterableConfigOp(name=k, config_operation=OPERATIONS[op], value=v) for op, k, v in ops
                ),
            ),
        ),
        validate_only=validate_only,
    )
    for r in client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, req).responses:
        if r.error_code:
            raise error_for_code(r.error_code, topic_error(topic, r.error_code, r.error_message))


def create_partitions(client: KafkaClient, topic: str, total: int) -> None:
    """CreatePartitions: grow ``topic`` to ``total`` partitions (replicas placed by the
    controller, as kafka-topics --alter --partitions leaves them)."""
    req = CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=topic, count=total, assignments=None),), timeout_ms=30000
    )
    for r in client.call(ApiKey.CREATE_PARTITIONS, req).results:
        if r.error_code:
            raise error_for_code(r.error_code, topic_error(topic, r.error_code, r.error_message))


def cluster_metadata(client: KafkaClient, topics: Sequence[str] | None = None) -> Any:
    """The Metadata response for ``topics`` (None: every topic)."""
    wanted = None if topics is None else tuple(MetadataRequestTopic(name=t) for t in topics)
    return client.call(ApiKey.METADATA, MetadataRequest(topics=wanted, allow_auto_topic_creation=False))


def delete_records(
    client: KafkaClient, connect: Connect, topic: str, offsets: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """DeleteRecords (KIP-107): move each partition's log start up to its offset (-1: the
    high watermark), asking each partition's leader. Returns, per partition, (the new
    low watermark, 0) or (-1, error code)."""
    md = cluster_metadata(client, [topic])
    t = md.topics[0]
    if t.error_code:
        raise error_for_code(t.error_code, topic_error(topic, t.error_code))
    brokers = {b.node_id: HostPort(b.host, b.port) for b in md.brokers}
    leaders = {p.partition_index: p.leader_id for p in t.partitions}
    out: dict[int, tuple[int, int]] = {}
    by_leader: dict[int, dict[int, int]] = {}
    for p, off in offsets.items():
        if p not in leaders:
            out[p] = (-1, UNKNOWN_TOPIC_OR_PARTITION)
        elif leaders[p] not in brokers:
            out[p] = (-1, LEADER_NOT_AVAILABLE)
        else:
            by_leader.setdefault(leaders[p], {})[p] = off
    for leader, parts in sorted(by_leader.items()):
        req = DeleteRecordsRequest(
            topics=(
                DeleteRecordsTopic(
                    name=topic,
                    partitions=tuple(
                        DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts.items()
                    ),
                ),
            ),
            timeout_ms=30000,
        )
        # one broker: the one asked already (its advertised address may differ from --bootstrap)
        target = client if len(brokers) == 1 else connect(brokers[leader])
        try:
            for rt in target.call(ApiKey.DELETE_RECORDS, req).topics:
                for rp in rt.partitions:
                    out[rp.partition_index] = (rp.low_watermark if not rp.error_code else -1, rp.error_code)
        finally:
            if target is not client:
                target.close()
    return out


def cluster_health(md: Any) -> dict[str, Any]:
    """``rpk cluster health`` from a Metadata response: the brokers, the controller, and the
    partitions that are under-replicated (ISR smaller than the replicas) or offline (no
    leader); healthy when there is a controller, nothing is offline or under-replicated and
    every replica's broker is live."""
    live = sorted(b.node_id for b in md.brokers)
    under: list[dict[str, Any]] = []
    offline: list[dict[str, Any]] = []
    down: set[int] = set()
    partitions = 0
    for t in md.topics:
        if t.error_code:
            continue
        for p in t.partitions:
            partitions += 1
            row = {
                "topic": t.name,
                "partition": p.partition_index,
                "leader": p.leader_id,
                "replicas": list(p.replica_nodes),
                "isr": list(p.isr_nodes),
            }
            if p.leader_id < 0 or p.leader_id not in live:
                offline.append(row)
            elif len(p.isr_nodes) < len(p.replica_nodes):
                under.append(row)
            down.update(r for r in p.replica_nodes if r not in live)
    controller = md.controller_id if md.controller_id >= 0 else None
    return {
        "healthy": controller is not None and not under and not offline and not down,
        "cluster_id": md.cluster_id,
        "controller_id": controller,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in md.brokers
        ],
        "down_brokers": sorted(down),
        "topics": sum(1 for t in md.topics if not t.error_code),
        "partitions": partitions,
        "under_replicated": under,
        "offline": offline,
    }
