"""Kafka protocol handlers of a cluster-mode broker, installed over the single-node ones.

* Metadata answers from the watched etcd view: every registered broker, the controller,
  and per partition the leader, leader epoch, replicas, ISR and offline replicas
  (LEADER_NOT_AVAILABLE while a partition has no leader).
* CreateTopics places replicas round-robin over the live brokers and writes the topic to
  etcd (replication factor -1: ``default.replication.factor``); DeleteTopics deletes it
  there. Every broker's replica manager then creates or deletes its local replicas.
* Produce and Fetch wrap the single-node handlers: partitions this broker does not lead
  (or whose ``current_leader_epoch`` is stale: FENCED_LEADER_EPOCH) are answered with the
  error, the rest go through the usual path; acks=all is checked against
  ``min.insync.replicas`` before anything is appended. A Fetch with a ``replica_id`` is a
  follower's and is served by ``ClusterBroker.replica_fetch``.
* AlterPartitionReassignments writes each partition's target to etcd
  (``cluster.reassign``) and ListPartitionReassignments lists them from the view; any
  broker answers both, the controller carries reassignments out.
* InitProducerId hands out producer ids unique across the cluster (``cluster.producer_ids``).
* FindCoordinator names the leader of the group's ``__consumer_offsets`` partition
  (``cluster.groups``); that internal topic cannot be created, deleted or produced to.
* CreatePartitions, AlterConfigs and IncrementalAlterConfigs change the topic's etcd
  record (``cluster.admin``: validated like the single node, compare-and-swap); every
  broker applies the change to its replicas from the watch. DescribeConfigs (the
  single-node handler) reads ``ClusterBroker.topic_configs``, i.e. etcd's values.
* ListOffsets and OffsetForLeaderEpoch are answered by the leader only, with leader
  epochs (KIP-320), LATEST being the log end for followers and EARLIEST_LOCAL (-4) the
  first local offset (KIP-405).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from api.broker import Broker as ClusterBroker
from api.broker import ReplicaFetchPartition
from api.groups.offsets import OFFSETS_TOPIC
from api.kafka_server import (
    RESOURCE_TOPIC,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_TOPIC_CONFIG,
    ZERO_UUID,
    Connection,
    Handler,
)
from api.kafka_server import handle_fetch as single_node_fetch
from api.kafka_server import handle_produce as single_node_produce
from api.protocol import ApiKey, RequestHeader
from api.protocol.messages.alter_configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterableConfigOp,
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from api.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from api.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from api.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from api.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from api.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from api.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from api.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from api.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from api.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
)
from api.protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from cluster.admin import refuse_internal_topic
from cluster.controller import (
    CLUSTER_TOPIC_CONFIGS,
    create_topic,
    place_replicas,
    validate_topic_configs,
)
from cluster.groups import handle_find_coordinator
from cluster.metadata import NO_LEADER, TopicAssignment
from cluster.producer_ids import handle_init_producer_id
from cluster.reassign import alter_reassignment, ongoing_reassignments
from cluster.replica_manager import log_configs
from hot import errors as E
from hot.config import LogConfig
from hot.errors import (
    InvalidReplicationFactorError,
    InvalidRequestError,
    StrataError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    kafka_code,
)
from hot.topics import check_topic_collision, validate_topic_name

log = logging.getLogger("strata.cluster.kafka")


def _broker(conn: Connection) -> ClusterBroker:
    broker = conn.broker
    assert isinstance(broker, ClusterBroker)
    return broker


# --- Metadata ---------------------------------------------------------------------------------


def _partitions(
    broker: ClusterBroker, name: str, a: TopicAssignment
) -> tuple[MetadataResponsePartition, ...]:
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
    broker = _broker(conn)
    view = broker.replicas.view
    topics: list[MetadataResponseTopic] = []
    wanted: list[tuple[str | None, uuid.UUID, int]] = []
    if req.topics is None:
        wanted = [(name, ZERO_UUID, 0) for name in sorted(view.topics)]
    else:
        allow_auto = req.allow_auto_topic_creation  # absent before v4: its default, True
        by_id = {uuid.UUID(va.value.topic_id): name for name, va in view.topics.items()}
        for rt in req.topics:
            name = rt.name if rt.name is not None else by_id.get(rt.topic_id)
            if name is None:
                wanted.append((None, rt.topic_id, E.UNKNOWN_TOPIC_OR_PARTITION))
            elif name in view.topics:
                wanted.append((name, ZERO_UUID, 0))
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
                is_internal=name == OFFSETS_TOPIC,
                partitions=_partitions(broker, name, a),
            )
        )
    brokers = tuple(
        MetadataResponseBroker(
            node_id=bid,
            host=live.registration.host,
            port=live.registration.kafka_port,
            rack=live.registration.rack,
        )
        for bid, live in sorted(view.brokers.items())
    )
    controller = view.controller
    return MetadataResponse(
        brokers=brokers,
        cluster_id=broker.config.cluster_id,
        controller_id=controller.value.broker_id if controller is not None else -1,
        topics=tuple(topics),
    )


async def _auto_create(broker: ClusterBroker, name: str) -> int:
    """Create a topic on first use (auto.create.topics.enable); the error code to report
    (LEADER_NOT_AVAILABLE while the new partitions elect their leaders, as Kafka does)."""
    replicas = broker.replicas
    rf = min(replicas.config.default_replication_factor, max(len(replicas.view.brokers), 1))
    try:
        refuse_internal_topic(name, "auto-create")  # FindCoordinator creates it, configured
        validate_topic_name(name)
        await create_topic(replicas.client, name, broker.config.num_partitions, rf, {})
    except TopicExistsError:
        pass
    except StrataError as exc:
        return kafka_code(exc)
    return E.LEADER_NOT_AVAILABLE


# --- CreateTopics / DeleteTopics ---------------------------------------------------------------------


def _effective_configs(broker: ClusterBroker, configs: dict[str, str]) -> tuple[CreatableTopicConfigs, ...]:
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


async def _create_one(broker: ClusterBroker, t: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    replicas = broker.replicas
    view = replicas.view
    refuse_internal_topic(t.name, "create")
    validate_topic_name(t.name)
    configs = {c.name: c.value for c in t.configs if c.value is not None}
    validate_topic_configs(configs)
    if t.name in view.topics:
        raise TopicExistsError(f"topic {t.name!r} already exists")
    check_topic_collision(t.name, view.topics)
    live = view.live_broker_ids()
    if t.assignments:
        ordered = sorted(t.assignments, key=lambda a: a.partition_index)
        if [a.partition_index for a in ordered] != list(range(len(ordered))):
            raise InvalidRequestError("assignments must name partitions 0..n-1 once each")
        assignment = tuple(tuple(a.broker_ids) for a in ordered)
        # Kafka wants -1 for both; some clients repeat what the assignment implies.
        if t.num_partitions not in (-1, len(assignment)) or t.replication_factor not in (
            -1,
            len(assignment[0]),
        ):
            raise InvalidRequestError("assignments contradict num_partitions or replication_factor")
        unknown = sorted({b for r in assignment for b in r} - live)
        if unknown:
            raise InvalidReplicationFactorError(f"assignment names brokers {unknown} that are not live")
        partitions, rf = len(assignment), len(assignment[0])
    else:
        partitions = t.num_partitions if t.num_partitions != -1 else broker.config.num_partitions
        rf = (
            t.replication_factor if t.replication_factor != -1 else replicas.config.default_replication_factor
        )
        place_replicas(partitions, rf, live)  # validates the count against the live brokers
        assignment = ()
    if validate_only:
        return CreatableTopicResult(
            name=t.name,
            num_partitions=partitions,
            replication_factor=rf,
            configs=_effective_configs(broker, configs),
        )
    if assignment:
        created = await replicas.client.create_topic(t.name, assignment, configs)
    else:
        created = await create_topic(replicas.client, t.name, partitions, rf, configs)
    await broker.await_leaders(t.name, created.mod_revision)
    return CreatableTopicResult(
        name=t.name,
        topic_id=uuid.UUID(created.value.topic_id),
        num_partitions=created.value.partition_count,
        replication_factor=created.value.replication_factor,
        configs=_effective_configs(broker, configs),
    )


async def handle_create_topics(
    conn: Connection, header: RequestHeader, req: CreateTopicsRequest
) -> CreateTopicsResponse:
    broker = _broker(conn)
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
    broker = _broker(conn)
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


# --- Produce --------------------------------------------------------------------------------------


async def handle_produce(
    conn: Connection, header: RequestHeader, req: ProduceRequest
) -> ProduceResponse | None:
    broker = _broker(conn)
    errors: dict[str, list[ProducePartitionResponse]] = {}
    kept = []
    if req.acks in (-1, 0, 1) and req.transactional_id is None:
        for td in req.topic_data:
            keep = []
            for pd in td.partition_data:
                try:
                    broker.replicas.writable_leader(td.name, pd.index, req.acks)
                except StrataError as exc:
                    code = kafka_code(exc)
                    broker.metrics.errors.labels("produce", str(code)).inc()
                    errors.setdefault(td.name, []).append(
                        ProducePartitionResponse(
                            index=pd.index, error_code=code, error_message=str(exc) or None
                        )
                    )
                    continue
                keep.append(pd)
            if keep:
                kept.append(dataclasses.replace(td, partition_data=tuple(keep)))
        req = dataclasses.replace(req, topic_data=tuple(kept))
    # The single-node path appends synchronously before its first await, so nothing can
    # change between the checks above and the appends.
    resp = await single_node_produce(conn, header, req) if req.topic_data else None
    if req.acks == 0:
        return None
    if not errors:
        return resp if resp is not None else ProduceResponse()
    by_topic: dict[str, list[ProducePartitionResponse]] = {}
    for tr in resp.responses if resp is not None else ():
        by_topic.setdefault(tr.name, []).extend(tr.partition_responses)
    for name, ps in errors.items():
        by_topic.setdefault(name, []).extend(ps)
    return ProduceResponse(
        responses=tuple(
            ProduceTopicResponse(name=n, partition_responses=tuple(ps)) for n, ps in by_topic.items()
        )
    )


# --- Fetch ------------------------------------------------------------------------------------------


async def handle_fetch(conn: Connection, header: RequestHeader, req: FetchRequest) -> FetchResponse:
    broker = _broker(conn)
    if req.replica_id >= 0:
        return await _replica_fetch(broker, req)
    errors: dict[str, list[FetchPartitionData]] = {}
    kept = []
    for t in req.topics:
        keep = []
        for p in t.partitions:
            try:
                broker.replicas.leader_replica(t.topic, p.partition, p.current_leader_epoch)
            except StrataError as exc:
                code = kafka_code(exc)
                broker.metrics.errors.labels("fetch", str(code)).inc()
                # Empty records, never null: librdkafka cannot parse a null records field
                # ("invalid MessageSetSize -1") and drops the whole response.
                errors.setdefault(t.topic, []).append(
                    FetchPartitionData(partition_index=p.partition, error_code=code, records=b"")
                )
                continue
            keep.append(p)
        if keep:
            kept.append(dataclasses.replace(t, partitions=tuple(keep)))
    if not errors:
        return await single_node_fetch(conn, header, req)
    # An error is answered at once, as Kafka does, with whatever the others have now.
    resp = (
        await single_node_fetch(conn, header, dataclasses.replace(req, topics=tuple(kept), max_wait_ms=0))
        if kept
        else FetchResponse()
    )
    by_topic: dict[str, list[FetchPartitionData]] = {}
    for tr in resp.responses:
        by_topic.setdefault(tr.topic, []).extend(tr.partitions)
    for name, ps in errors.items():
        by_topic.setdefault(name, []).extend(ps)
    return dataclasses.replace(
        resp,
        responses=tuple(FetchableTopicResponse(topic=n, partitions=tuple(ps)) for n, ps in by_topic.items()),
    )


async def _replica_fetch(broker: ClusterBroker, req: FetchRequest) -> FetchResponse:
    started = time.perf_counter()
    parts = [
        ReplicaFetchPartition(
            t.topic,
            p.partition,
            p.fetch_offset,
            p.partition_max_bytes,
            current_leader_epoch=p.current_leader_epoch,
            log_start_offset=p.log_start_offset,
        )
        for t in req.topics
        for p in t.partitions
    ]
    fetched = await broker.replica_fetch(
        req.replica_id, parts, max_wait_ms=req.max_wait_ms, max_bytes=req.max_bytes
    )
    by_topic: dict[str, list[FetchPartitionData]] = {}
    for f in fetched:
        if f.error is not None:
            data = FetchPartitionData(
                partition_index=f.partition, error_code=kafka_code(f.error), records=b""
            )
        else:
            data = FetchPartitionData(
                partition_index=f.partition,
                high_watermark=f.high_watermark,
                last_stable_offset=f.last_stable_offset,
                log_start_offset=f.log_start_offset,
                records=f.records,
                # With batches always (empty: no leader segment begins among them).
                segment_bases=f.segment_bases if f.size else None,
            )
        by_topic.setdefault(f.topic, []).append(data)
    broker.metrics.fetch_latency.labels("replica").observe(time.perf_counter() - started)
    return FetchResponse(
        responses=tuple(FetchableTopicResponse(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    )


# --- ListOffsets / OffsetForLeaderEpoch ------------------------------------------------------------


async def handle_list_offsets(
    conn: Connection, header: RequestHeader, req: ListOffsetsRequest
) -> ListOffsetsResponse:
    broker = _broker(conn)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                offset, ts, epoch = await broker.list_offset_with_epoch(
                    t.name,
                    p.partition_index,
                    p.timestamp,
                    current_leader_epoch=p.current_leader_epoch,
                    replica_id=req.replica_id,
                )
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, timestamp=ts, offset=offset, leader_epoch=epoch
                    )
                )
            except StrataError as exc:
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=kafka_code(exc)
                    )
                )
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return ListOffsetsResponse(topics=tuple(topics))


async def handle_offset_for_leader_epoch(
    conn: Connection, header: RequestHeader, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    broker = _broker(conn)
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                epoch, end = broker.end_offset_for_epoch(
                    t.topic, p.partition, p.leader_epoch, current_leader_epoch=p.current_leader_epoch
                )
                parts.append(
                    OffsetForLeaderPartitionResult(partition=p.partition, leader_epoch=epoch, end_offset=end)
                )
            except StrataError as exc:
                parts.append(
                    OffsetForLeaderPartitionResult(partition=p.partition, error_code=kafka_code(exc))
                )
        out.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=tuple(parts)))
    return OffsetForLeaderEpochResponse(topics=tuple(out))


# --- AlterPartitionReassignments / ListPartitionReassignments (KIP-455) ----------------------------


async def handle_alter_partition_reassignments(
    conn: Connection, header: RequestHeader, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    """Record each partition's target (or cancellation) in etcd; the controller moves the
    replicas. Answered once written, as Kafka answers once the controller accepted it."""
    broker = _broker(conn)
    out = []
    for t in req.topics:
        parts = []
        seen: set[int] = set()
        for p in t.partitions:
            try:
                if p.partition_index in seen:
                    raise InvalidRequestError(f"partition {p.partition_index} named twice in one request")
                seen.add(p.partition_index)
                await alter_reassignment(
                    broker.replicas.client,
                    t.name,
                    p.partition_index,
                    None if p.replicas is None else tuple(p.replicas),
                    defaults=broker.manager.defaults,
                )
                parts.append(ReassignablePartitionResponse(partition_index=p.partition_index))
            except StrataError as exc:
                parts.append(
                    ReassignablePartitionResponse(
                        partition_index=p.partition_index, error_code=kafka_code(exc), error_message=str(exc)
                    )
                )
        out.append(ReassignableTopicResponse(name=t.name, partitions=tuple(parts)))
    return AlterPartitionReassignmentsResponse(responses=tuple(out))


async def handle_list_partition_reassignments(
    conn: Connection, header: RequestHeader, req: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    view = _broker(conn).replicas.view
    wanted = None if req.topics is None else {t.name: tuple(t.partition_indexes) for t in req.topics}
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for r in ongoing_reassignments(view, wanted):
        by_topic.setdefault(r.topic, []).append(
            OngoingPartitionReassignment(
                partition_index=r.partition,
                replicas=r.replicas,
                adding_replicas=r.adding,
                removing_replicas=r.removing,
            )
        )
    return ListPartitionReassignmentsResponse(
        topics=tuple(OngoingTopicReassignment(name=n, partitions=tuple(ps)) for n, ps in by_topic.items())
    )


# --- CreatePartitions / AlterConfigs / IncrementalAlterConfigs (through etcd) -------------------


async def handle_create_partitions(
    conn: Connection, header: RequestHeader, req: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    broker = _broker(conn)
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


async def _alter_topic(
    broker: ClusterBroker,
    res_type: int,
    name: str,
    changes: dict[str, str | None],
    replace: bool,
    validate_only: bool,
) -> AlterConfigsResourceResponse:
    try:
        if res_type != RESOURCE_TOPIC:
            raise InvalidRequestError(f"altering resource type {res_type} is not supported; only topics")
        await broker.admin_alter_topic_configs(name, changes, replace=replace, validate_only=validate_only)
        return AlterConfigsResourceResponse(resource_type=res_type, resource_name=name)
    except StrataError as exc:
        return AlterConfigsResourceResponse(
            error_code=kafka_code(exc), error_message=str(exc), resource_type=res_type, resource_name=name
        )


async def handle_alter_configs(
    conn: Connection, header: RequestHeader, req: AlterConfigsRequest
) -> AlterConfigsResponse:
    broker = _broker(conn)
    out = []
    for res in req.resources:
        changes = {c.name: c.value for c in res.configs}
        out.append(
            await _alter_topic(broker, res.resource_type, res.resource_name, changes, True, req.validate_only)
        )
    return AlterConfigsResponse(responses=tuple(out))


def incremental_changes(current: dict[str, str], ops: Iterable[AlterableConfigOp]) -> dict[str, str | None]:
    """IncrementalAlterConfigs operations as changes (None: back to the default); list
    values (cleanup.policy) are comma-separated. Same rules as the single-node handler."""
    changes: dict[str, str | None] = {}
    for c in ops:
        if c.config_operation == OP_SET:
            if c.value is None:
                raise InvalidRequestError(f"SET of {c.name} needs a value")
            changes[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            changes[c.name] = None
        elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
            base = changes.get(c.name, current.get(c.name)) or ""
            items = [i for i in base.split(",") if i]
            for v in (c.value or "").split(","):
                if c.config_operation == OP_APPEND and v and v not in items:
                    items.append(v)
                elif c.config_operation == OP_SUBTRACT and v in items:
                    items.remove(v)
            changes[c.name] = ",".join(items)
        else:
            raise InvalidRequestError(f"unknown config operation {c.config_operation}")
    return changes


async def handle_incremental_alter_configs(
    conn: Connection, header: RequestHeader, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    broker = _broker(conn)
    out = []
    for res in req.resources:
        try:
            current = (
                {c.name: c.value for c in broker.topic_configs(res.resource_name)}
                if res.resource_type == RESOURCE_TOPIC
                else {}
            )
            changes = incremental_changes(current, res.configs)
        except StrataError as exc:
            out.append(
                AlterConfigsResourceResponse(
                    error_code=kafka_code(exc),
                    error_message=str(exc),
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                )
            )
            continue
        out.append(
            await _alter_topic(
                broker, res.resource_type, res.resource_name, changes, False, req.validate_only
            )
        )
    return IncrementalAlterConfigsResponse(responses=tuple(out))


def cluster_handlers() -> dict[int, Handler]:
    """The handlers a cluster-mode Kafka listener uses instead of the single-node ones."""
    table: dict[int, Callable[..., Any]] = {
        ApiKey.METADATA: handle_metadata,
        ApiKey.CREATE_TOPICS: handle_create_topics,
        ApiKey.DELETE_TOPICS: handle_delete_topics,
        ApiKey.PRODUCE: handle_produce,
        ApiKey.FETCH: handle_fetch,
        ApiKey.LIST_OFFSETS: handle_list_offsets,
        ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
        ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
        ApiKey.FIND_COORDINATOR: handle_find_coordinator,
        ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
        ApiKey.CREATE_PARTITIONS: handle_create_partitions,
        ApiKey.ALTER_CONFIGS: handle_alter_configs,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    }
    return table
