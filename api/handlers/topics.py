"""Metadata, CreateTopics, DeleteTopics and CreatePartitions.

* Metadata answers from the watched metadata view (broker.metadata; the embedded store
  for a single node): every registered broker (at least this one), the controller (a
  listed broker: this one when the view has none, as KRaft brokers do), and per partition the
  leader, leader epoch, replicas, ISR and offline replicas (LEADER_NOT_AVAILABLE while a
  partition has no leader; LEADER_NOT_AVAILABLE for the whole topic, without partitions,
  while its partition states are still being written in steps). Unknown topics are auto-created when
  ``auto.create.topics.enable``.
* CreateTopics places replicas round-robin over the live brokers and writes the topic to
  the metadata store (``broker.controller``; replication factor -1:
  ``default.replication.factor``); DeleteTopics deletes it there. Every broker's replica
  manager then creates or deletes its local replicas. Names and configs are validated as
  Kafka does (``hot.topics``, ``broker.controller.validate_topic_configs``).
* CreatePartitions changes the topic's record (``broker.admin``, compare-and-swap).
* The internal ``__consumer_offsets`` topic cannot be created, deleted or grown here.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from api.handlers.configs import SOURCE_DEFAULT_CONFIG, SOURCE_TOPIC_CONFIG
from broker.admin import is_internal, refuse_internal_topic
from broker.broker import Broker
from broker.controller import CLUSTER_TOPIC_CONFIGS
from broker.local_topics import log_configs
from broker.metadata import NO_LEADER, TopicAssignment
from hot.config import LogConfig
from hot.errors import (
    InvalidRequestError,
    StrataError,
    UnknownTopicOrPartitionError,
)
from kwire import RequestHeader
from kwire import error_table as E
from kwire.error_table import kafka_code
from kwire.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kwire.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kwire.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kwire.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection

ZERO_UUID = uuid.UUID(int=0)


def metadata_partitions(
    broker: Broker, name: str, a: TopicAssignment
) -> tuple[MetadataResponsePartition, ...]:
    """Each partition's leader, epoch, replicas, ISR and offline replicas from the view (also
    DescribeTopicPartitions', api.handlers.topic_partitions)."""
    view = broker.replicas.view
    out: list[MetadataResponsePartition] = []
    for p, replicas in enumerate(a.partitions):
        offline = tuple(r for r in replicas if r not in view.brokers)
        vs = view.partitions.get((name, p))
        if vs is None or not vs.value.has_leader:
            out.append(
                MetadataResponsePartition(
                    error_code=E.LEADER_NOT_AVAILABLE,
                    partition_index=p,
                    leader_id=NO_LEADER,
                    leader_epoch=vs.value.leader_epoch if vs is not None else -1,
                    replica_nodes=replicas,
                    isr_nodes=vs.value.isr if vs is not None else (),
                    offline_replicas=offline,
                )
            )
            continue
        s = vs.value
        out.append(
            MetadataResponsePartition(
                partition_index=p,
                leader_id=s.leader,
                leader_epoch=s.leader_epoch,
                replica_nodes=replicas,
                isr_nodes=s.isr,
                offline_replicas=offline,
            )
        )
    return tuple(out)


async def handle_metadata(conn: Connection, header: RequestHeader, req: MetadataRequest) -> MetadataResponse:
    broker = conn.broker
    view = broker.replicas.view
    topics: list[MetadataResponseTopic] = []
    wanted: list[tuple[str | None, uuid.UUID, int]] = []
    if req.topics is None:
        # A topic still being written in steps (its partition states not all there) is not
        # served: a client must never see part of a topic, or route by a wrong partition count.
        wanted = [(name, ZERO_UUID, 0) for name in sorted(view.topics) if view.is_whole(name)]
    else:
        allow_auto = req.allow_auto_topic_creation  # absent before v4: its default, True
        for rt in req.topics:
            name = rt.name if rt.name is not None else view.topic_name(rt.topic_id)
            if name is None:
                wanted.append((None, rt.topic_id, E.UNKNOWN_TOPIC_OR_PARTITION))
            elif name in view.topics:
                wanted.append((name, ZERO_UUID, 0 if view.is_whole(name) else E.LEADER_NOT_AVAILABLE))
            elif allow_auto and broker.config.auto_create_topics:
                wanted.append((name, ZERO_UUID, await _auto_create(broker, name)))
            else:
                wanted.append((name, rt.topic_id, E.UNKNOWN_TOPIC_OR_PARTITION))
    for name, topic_id, code in wanted:
        va = view.topics.get(name) if name is not None and code == 0 else None
        if va is None:
            topics.append(MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id))
            continue
        assert name is not None
        a = va.value
        topics.append(
            MetadataResponseTopic(
                name=name,
                topic_id=uuid.UUID(a.topic_id),
                is_internal=is_internal(name),
                partitions=metadata_partitions(broker, name, a),
            )
        )
    external = conn.server.external
    registrations = [live.registration for _, live in sorted(view.brokers.items())]
    own = broker.replicas.client.registration
    if not registrations and own is not None:
        # A view without live brokers (this broker's lease lost, being renewed): never
        # zero brokers from a live one, which clients take as "no cluster" (issue 32).
        registrations = [own]
    brokers = tuple(
        MetadataResponseBroker(node_id=reg.broker_id, host=host, port=port, rack=reg.rack)
        for reg in registrations
        for host, port in (reg.client_address(external),)
    )
    return MetadataResponse(
        brokers=brokers,
        cluster_id=broker.config.cluster_id,
        controller_id=_controller_id(broker, {b.node_id for b in brokers}),
        topics=tuple(topics),
    )


def _controller_id(broker: Broker, listed: set[int]) -> int:
    """The controller, if the view names a listed broker; else this broker. Any broker
    serves the requests clients send to the controller (CreateTopics, ...: they go to
    the metadata store), and Kafka's KRaft brokers likewise name a random live broker;
    another listed broker while this one is not listed (re-registering)."""
    controller = broker.replicas.view.controller
    if controller is not None and controller.value.broker_id in listed:
        return controller.value.broker_id
    if broker.node_id in listed:
        return broker.node_id
    return min(listed, default=-1)


async def _auto_create(broker: Broker, name: str) -> int:
    """Create a topic on first use (auto.create.topics.enable); the error code to report
    (LEADER_NOT_AVAILABLE while the new partitions elect their leaders, as Kafka does)."""
    try:
        await broker.auto_create_topic(name, wait_for_leaders=False)
    except StrataError as exc:
        return kafka_code(exc)
    return E.LEADER_NOT_AVAILABLE


def _effective_configs(broker: Broker, configs: dict[str, str]) -> tuple[CreatableTopicConfigs, ...]:
    effective = LogConfig.from_kafka(log_configs(configs), broker.manager.defaults).to_kafka()
    effective.update({k: v for k, v in configs.items() if k in CLUSTER_TOPIC_CONFIGS})
    return tuple(
        CreatableTopicConfigs(
            name=k,
            value=v,
            config_source=SOURCE_TOPIC_CONFIG if k in configs else SOURCE_DEFAULT_CONFIG,
        )
        for k, v in sorted(effective.items())
    )


async def _create_one(broker: Broker, t: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    configs = {c.name: c.value for c in t.configs if c.value is not None}
    assignments: list[tuple[int, ...]] = []
    if t.assignments:
        ordered = sorted(t.assignments, key=lambda a: a.partition_index)
        if [a.partition_index for a in ordered] != list(range(len(ordered))):
            raise InvalidRequestError("assignments must name partitions 0..n-1 once each")
        assignments = [tuple(a.broker_ids) for a in ordered]
    created, topic_id = await broker.create_topic(
        t.name,
        t.num_partitions,
        t.replication_factor,
        configs,
        assignments=assignments,
        validate_only=validate_only,
    )
    return CreatableTopicResult(
        name=t.name,
        topic_id=topic_id,
        num_partitions=created.partition_count,
        replication_factor=created.replication_factor,
        configs=_effective_configs(broker, configs),
    )


async def handle_create_topics(
    conn: Connection, header: RequestHeader, req: CreateTopicsRequest
) -> CreateTopicsResponse:
    broker = conn.broker
    results: list[CreatableTopicResult] = []
    seen: set[str] = set()
    for t in req.topics:
        if t.name in seen:
            results.append(
                CreatableTopicResult(
                    name=t.name,
                    error_code=E.INVALID_REQUEST,
                    error_message="topic named twice in one request",
                )
            )
            continue
        seen.add(t.name)
        try:
            results.append(await _create_one(broker, t, req.validate_only))
        except StrataError as exc:
            results.append(
                CreatableTopicResult(name=t.name, error_code=kafka_code(exc), error_message=str(exc))
            )
    return CreateTopicsResponse(topics=tuple(results))


async def handle_delete_topics(
    conn: Connection, header: RequestHeader, req: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    broker = conn.broker
    view = broker.replicas.view
    targets: list[tuple[str | None, uuid.UUID]] = [(n, ZERO_UUID) for n in req.topic_names]
    targets += [(t.name, t.topic_id) for t in req.topics]
    out: list[DeletableTopicResult] = []
    for name, topic_id in targets:
        try:
            if name is None:
                found = [n for n, va in view.topics.items() if uuid.UUID(va.value.topic_id) == topic_id]
                if not found:
                    raise UnknownTopicOrPartitionError(f"unknown topic id {topic_id}")
                name = found[0]
            va = view.topics.get(name)
            if va is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            refuse_internal_topic(name, "delete")
            await broker.replicas.client.delete_topic(name)
            out.append(DeletableTopicResult(name=name, topic_id=uuid.UUID(va.value.topic_id)))
        except StrataError as exc:
            out.append(
                DeletableTopicResult(
                    name=name, topic_id=topic_id, error_code=kafka_code(exc), error_message=str(exc)
                )
            )
    return DeleteTopicsResponse(responses=tuple(out))


async def handle_create_partitions(
    conn: Connection, header: RequestHeader, req: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    broker = conn.broker
    results: list[CreatePartitionsTopicResult] = []
    seen: set[str] = set()
    for t in req.topics:
        try:
            if t.name in seen:
                raise InvalidRequestError("topic named twice in one request")
            seen.add(t.name)
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
            await broker.admin_add_partitions(
                t.name, t.count, assignments=assignments, validate_only=req.validate_only
            )
            results.append(CreatePartitionsTopicResult(name=t.name))
        except StrataError as exc:
            results.append(
                CreatePartitionsTopicResult(name=t.name, error_code=kafka_code(exc), error_message=str(exc))
            )
    return CreatePartitionsResponse(results=tuple(results))
