"""The request logic of a cluster-mode broker: ``api.broker.Broker`` with replication.

What changes against the single-node broker:

* produce: only the partition's current leader appends (NOT_LEADER_OR_FOLLOWER
  otherwise), stamping its leader epoch into every batch; acks=all is refused before
  the append when the ISR is below ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS) and
  answered once the high watermark (minimum over the ISR) passes the batch; acks=1 once
  the leader has it (flushed, in fsync mode); acks=0 not at all;
* consumer fetches and offsets are served by the leader only, below the high watermark;
* follower fetches (``replica_id`` >= 0) read up to the log end, record the follower's
  progress (which moves the high watermark and the ISR) and long-poll for appends;
* topics are created, deleted, grown and configured through etcd (``cluster.admin``,
  through the awaited ``admin_*`` methods the REST API and ``cluster.kafka_handlers``
  use); the synchronous single-node forms, which would change one broker, are refused;
* DescribeConfigs shows the topic's configs as etcd holds them, on every broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from api.broker import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Broker,
    ConfigEntry,
    FetchedPartition,
    FetchRequestPartition,
    PendingAppend,
    ProduceResult,
    RemoteTier,
)
from api.config import BrokerConfig
from api.groups.offsets import OFFSETS_TOPIC
from api.metrics import BrokerMetrics
from cluster import admin
from cluster.controller import CLUSTER_TOPIC_CONFIGS, UNCLEAN_LEADER_ELECTION, create_topic
from cluster.groups import ClusterOffsetStore
from cluster.log_manager import ClusterLogManager
from cluster.metadata import TopicAssignment
from cluster.replica_manager import PartitionReplica, ReplicaManager, Role, log_configs
from hot.config import LogConfig
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    InvalidTopicError,
    RequestTimedOutError,
    StrataError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from hot.log import Log
from hot.topics import TopicInfo, validate_topic_name

if TYPE_CHECKING:
    from api.groups.coordinator import GroupCoordinator

# How long a topic creation waits for the new partitions to be led (await_leaders).
CREATE_VISIBLE_S = 5.0
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405: the first offset still on local disk

_NOT_IN_CLUSTER_MODE = (
    "{what} through this door would change one broker only; in cluster mode use the Kafka "
    "admin API or the REST API, which change the cluster metadata"
)
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class ClusterPendingAppend(PendingAppend):
    """A leader's append, with the replica and the epoch it was made in."""

    replica: PartitionReplica | None = None
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class ReplicaFetchPartition:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1


class ClusterBroker(Broker):
    """``Broker`` over replicated logs (see the module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        manager: ClusterLogManager,
        replicas: ReplicaManager,
        metrics: BrokerMetrics | None = None,
        *,
        tiering: RemoteTier | None = None,
        groups: GroupCoordinator | None = None,
    ) -> None:
        super().__init__(config, manager, metrics, tiering=tiering, groups=groups)
        self.replicas = replicas
        self.offset_store: ClusterOffsetStore | None = None  # set by cluster.node

    async def prepare_group(self, group_id: str, timeout: float = CREATE_VISIBLE_S) -> None:
        """What FindCoordinator does before a Kafka client talks to a group, for the REST
        consumers that use the coordinator in process: create ``__consumer_offsets`` when
        missing, then wait (bounded; the calls that follow report what is still wrong)
        until the group's coordinator is known and, when it is this broker, loaded."""
        store = self.offset_store
        if store is None:
            return
        await store.ensure_topic()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                store.coordinator_for(group_id)
                return
            except (CoordinatorLoadInProgressError, CoordinatorNotAvailableError):
                if loop.time() >= deadline:
                    return
                await asyncio.sleep(0.01)

    # --- topics (etcd owns them) ---------------------------------------------------------------

    def topic(self, name: str, *, auto_create: bool = False) -> TopicInfo:
        va = self.replicas.view.topics.get(name)
        if va is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        a = va.value
        return TopicInfo(name, a.partition_count, dict(a.configs), uuid.UUID(a.topic_id))

    def topics(self) -> list[TopicInfo]:
        return [self.topic(n) for n in sorted(self.replicas.view.topics)]

    # The synchronous single-node forms would change this broker only: refused. The
    # awaited ``admin_*`` forms change etcd (``cluster.admin``), every broker follows.

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        raise InvalidRequestError(_NOT_IN_CLUSTER_MODE.format(what="topic creation"))

    def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool = False
    ) -> TopicInfo:
        raise InvalidRequestError(_NOT_IN_CLUSTER_MODE.format(what="altering topic configs"))

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> TopicInfo:
        raise InvalidRequestError(_NOT_IN_CLUSTER_MODE.format(what="adding partitions"))

    def delete_topic(self, name: str) -> None:
        raise InvalidRequestError(_NOT_IN_CLUSTER_MODE.format(what="topic deletion"))

    @staticmethod
    def _info(name: str, a: TopicAssignment, topic_id: uuid.UUID | None = None) -> TopicInfo:
        return TopicInfo(name, a.partition_count, dict(a.configs), topic_id or uuid.UUID(a.topic_id))

    async def admin_create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Create the topic in etcd (-1: ``num.partitions`` / ``default.replication.factor``)."""
        if partitions == -1:
            partitions = self.config.num_partitions
        if replication_factor == -1:
            replication_factor = self.replicas.config.default_replication_factor
        res = await admin.create(
            self.replicas.client,
            name,
            partitions,
            replication_factor,
            dict(configs or {}),
            self.manager.defaults,
            validate_only=validate_only,
        )
        if isinstance(res, TopicAssignment):
            return self._info(name, res, ZERO_UUID)
        await self.await_leaders(name, res.mod_revision)
        return self._info(name, res.value)

    async def await_leaders(self, name: str, revision: int, timeout: float = CREATE_VISIBLE_S) -> None:
        """Wait (up to ``timeout``; then clients see LEADER_NOT_AVAILABLE / NOT_LEADER and
        retry) until this broker's view has the topic at ``revision`` and every partition
        this broker leads is writable here: a produce right after the creation succeeds,
        as it does on a single node."""
        view = self.replicas.view
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        with contextlib.suppress(TimeoutError):
            await view.wait_for_revision(revision, timeout)
        while loop.time() < deadline:
            va = view.topics.get(name)
            if va is None:
                return  # deleted meanwhile
            pending = False
            for p in range(va.value.partition_count):
                vs = view.partitions.get((name, p))
                if vs is None or not vs.value.has_leader:
                    pending = True
                elif vs.value.leader == self.node_id:
                    rep = self.replicas.replicas.get((name, p))
                    pending = pending or rep is None or rep.role is not Role.LEADER
            if not pending:
                return
            await asyncio.sleep(0.005)

    async def auto_create_topic(self, name: str) -> TopicInfo:
        """Create a topic on first use (``auto.create.topics.enable``, checked by the
        caller) with ``num.partitions`` and the default replication factor (capped at the
        live brokers), and wait for its leaders; a concurrent creator is fine."""
        replicas = self.replicas
        rf = min(replicas.config.default_replication_factor, max(len(replicas.view.brokers), 1))
        admin.refuse_internal_topic(name, "auto-create")  # FindCoordinator creates it, configured
        validate_topic_name(name)
        try:
            created = await create_topic(replicas.client, name, self.config.num_partitions, rf, {})
        except TopicExistsError:
            return self.topic(name)
        await self.await_leaders(name, created.mod_revision)
        return self._info(name, created.value)

    async def admin_delete_topic(self, name: str) -> None:
        await admin.delete(self.replicas.client, name)
        for key in list(self._waiters):
            self._wake_key(key)

    async def admin_alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool = False
    ) -> TopicInfo:
        a = await admin.alter_configs(
            self.replicas.client,
            name,
            changes,
            self.manager.defaults,
            replace=replace,
            validate_only=validate_only,
        )
        return self._info(name, a)

    async def admin_add_partitions(
        self,
        name: str,
        total: int,
        *,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        a = await admin.add_partitions(
            self.replicas.client, name, total, assignments=assignments, validate_only=validate_only
        )
        return self._info(name, a)

    def replication_factor(self, name: str) -> int:
        va = self.replicas.view.topics.get(name)
        if va is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return va.value.replication_factor

    def topic_configs(self, name: str) -> list[ConfigEntry]:
        """The topic's effective configs as etcd says (the same on every broker, whether
        or not it holds a replica): overrides, then broker defaults."""
        va = self.replicas.view.topics.get(name)
        if va is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        configs = dict(va.value.configs)
        effective = LogConfig.from_kafka(log_configs(configs), self.manager.defaults).to_kafka()
        effective[UNCLEAN_LEADER_ELECTION] = "false"
        effective.update({k: v for k, v in configs.items() if k in CLUSTER_TOPIC_CONFIGS})
        return [ConfigEntry(k, v, k not in configs) for k, v in sorted(effective.items())]

    # --- produce -------------------------------------------------------------------------------

    def append(
        self, topic: str, partition: int, data: bytes | bytearray | memoryview, *, acks: int = 1
    ) -> PendingAppend:
        try:
            if topic == OFFSETS_TOPIC:  # written by the group coordinators only (cluster.groups)
                raise InvalidTopicError(f"cannot produce to the internal topic {topic}")
            rep = self.replicas.writable_leader(topic, partition, acks)
            lg = self._log(topic, partition)
            if lg is not rep.log:
                raise UnknownTopicOrPartitionError(f"{topic}-{partition} is being recreated")
            if rep.roll_before_append:  # a new leadership's first append (replica_manager)
                lg.roll()
                rep.roll_before_append = False
            info = lg.append(data, leader_epoch=rep.leader_epoch)
        except StrataError as exc:
            # Counted once, by the protocol layer that answers the request.
            return ClusterPendingAppend(topic, None, None, exc)
        self.replicas.appended(rep)
        self.metrics.produced_messages.labels(topic).inc(info.record_count)
        self.metrics.produced_bytes.labels(topic).inc(len(data))
        return ClusterPendingAppend(topic, lg, info, None, replica=rep, epoch=rep.leader_epoch)

    async def complete(self, pending: PendingAppend, *, acks: int, timeout_ms: int) -> ProduceResult:
        if pending.error is not None or pending.log is None or pending.info is None:
            return ProduceResult(pending.error)
        info = pending.info
        if acks != 0 and isinstance(pending, ClusterPendingAppend) and pending.replica is not None:
            try:
                await self.replicas.wait_for_acks(
                    pending.replica, pending.epoch, info.last_offset + 1, acks, max(timeout_ms, 1) / 1000
                )
            except TimeoutError:
                what = "replicated to the in-sync replicas" if acks == -1 else "durable on the leader"
                error = RequestTimedOutError(f"not {what} within {timeout_ms} ms")
                return ProduceResult(error, record_count=info.record_count)
            except StrataError as exc:
                return ProduceResult(exc, record_count=info.record_count)
        return ProduceResult(
            None,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=pending.log.log_start_offset,
            record_count=info.record_count,
        )

    async def produce(
        self, topic: str, partition: int, data: bytes | bytearray | memoryview, *, acks: int, timeout_ms: int
    ) -> ProduceResult:
        if acks not in (-1, 0, 1):
            return ProduceResult(InvalidRequestError(f"acks must be -1, 0 or 1, got {acks}"))
        pending = self.append(topic, partition, data, acks=acks)
        return await self.complete(pending, acks=acks, timeout_ms=timeout_ms)

    # --- consumer fetches and offsets ----------------------------------------------------------

    async def fetch(
        self,
        parts: Sequence[FetchRequestPartition],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
    ) -> list[FetchedPartition]:
        """Consumer fetch: leaders only, below the high watermark (the base class's
        reading and long-polling; the HW listener wakes it when the HW moves)."""
        errors: dict[int, FetchedPartition] = {}
        ok: list[FetchRequestPartition] = []
        for i, p in enumerate(parts):
            try:
                self.replicas.leader_replica(p.topic, p.partition, getattr(p, "current_leader_epoch", -1))
                ok.append(p)
            except StrataError as exc:
                errors[i] = FetchedPartition(p.topic, p.partition, exc)
        if errors:
            max_wait_ms = 0  # an error is answered at once, as Kafka does
        fetched = iter(
            await super().fetch(ok, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes)
            if ok
            else []
        )
        return [errors[i] if i in errors else next(fetched) for i in range(len(parts))]

    async def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        self.replicas.leader_replica(topic, partition)
        return await super().list_offset(topic, partition, timestamp)

    async def list_offset_with_epoch(
        self, topic: str, partition: int, timestamp: int, *, current_leader_epoch: int, replica_id: int
    ) -> tuple[int, int, int]:
        """ListOffsets on the leader: (offset, timestamp, leader epoch of that offset).
        A follower (``replica_id`` >= 0) sees the log end for LATEST, and may ask for the
        first local offset (EARLIEST_LOCAL, KIP-405)."""
        rep = self.replicas.leader_replica(topic, partition, current_leader_epoch)
        lg = rep.log
        if timestamp == LATEST_TIMESTAMP:
            end = lg.log_end_offset if replica_id >= 0 else lg.high_watermark
            return end, -1, rep.leader_epoch
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            return lg.local_log_start_offset, -1, lg.epoch_for_offset(lg.local_log_start_offset)
        if timestamp == EARLIEST_TIMESTAMP:
            return lg.log_start_offset, -1, lg.epoch_for_offset(lg.log_start_offset)
        offset, ts = await super().list_offset(topic, partition, timestamp)
        return offset, ts, lg.epoch_for_offset(offset) if offset >= 0 else -1

    def end_offset_for_epoch(
        self, topic: str, partition: int, leader_epoch: int, *, current_leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (largest epoch <= ``leader_epoch``, its end)."""
        rep = self.replicas.leader_replica(topic, partition, current_leader_epoch)
        return rep.log.end_offset_for_epoch(leader_epoch)

    # --- follower fetches ----------------------------------------------------------------------

    async def replica_fetch(
        self,
        follower_id: int,
        parts: Sequence[ReplicaFetchPartition],
        *,
        max_wait_ms: int,
        max_bytes: int,
    ) -> list[FetchedPartition]:
        """A follower's fetch: whole batches up to the log end, in request order within
        ``max_bytes`` (the first partition with data gets at least one batch); waits up to
        ``max_wait_ms`` for an append when there is nothing to send."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        replicas = self.replicas
        while True:
            out: list[FetchedPartition] = []
            served: list[PartitionReplica] = []
            budget = max_bytes
            failed = False
            for p in parts:
                try:
                    rep = replicas.leader_replica(p.topic, p.partition, p.current_leader_epoch)
                    replicas.follower_fetch(rep, follower_id, p.offset, p.log_start_offset)
                    lg = rep.log
                    r = lg.read(
                        p.offset,
                        max(0, min(p.max_bytes, budget)),
                        max_offset=lg.log_end_offset,
                        min_one=budget == max_bytes,
                    )
                    out.append(
                        FetchedPartition(
                            p.topic,
                            p.partition,
                            None,
                            high_watermark=lg.high_watermark,
                            last_stable_offset=lg.high_watermark,
                            log_start_offset=lg.log_start_offset,
                            regions=r.regions,
                            size=r.size,
                            segment_bases=_segment_bases(lg, r.first_offset, r.next_offset) if r.size else (),
                        )
                    )
                    budget -= r.size
                    served.append(rep)
                except StrataError as exc:
                    failed = True
                    out.append(FetchedPartition(p.topic, p.partition, exc))
            if failed or budget < max_bytes or not served or loop.time() >= deadline:
                return out
            waiter = replicas.data_waiter(served)
            try:
                await asyncio.wait_for(waiter, deadline - loop.time())
            except TimeoutError:
                pass


def _segment_bases(lg: Log, first: int, end: int) -> tuple[int, ...]:
    """Base offsets of ``lg``'s segments that begin within [first, end) (a replica read):
    where the follower must start new segments. Read on the event loop right after the
    read, with no append (hence no roll) in between."""
    return tuple(b for b in (s.base_offset for s in lg.segments()) if first <= b < end)
