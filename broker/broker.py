"""The broker's request logic: one ``Broker`` behind every door (Kafka listener, REST).

The same class runs a single node (a cluster of one on the embedded metadata store,
``broker.embedded_store``) and every member of a replicated cluster (etcd): there is no
second code path. Nothing here knows about wire formats: it takes and returns plain values
and ``hot.errors`` types.

* topics are created, deleted, grown and configured through the metadata store
  (``broker.admin`` / ``broker.controller``, the awaited ``admin_*`` methods); this
  broker's logs follow (``broker.replica_manager``). Creation waits until the new
  partitions this broker leads are writable here, so a produce right after it succeeds;
* produce (``writes``, ``broker.produce_path``): only the partition's current leader
  appends (NOT_LEADER_OR_FOLLOWER otherwise), stamping its leader epoch into every batch;
  acks=all is refused before the append when the ISR is below ``min.insync.replicas``
  (NOT_ENOUGH_REPLICAS) and answered once the high watermark (minimum over the ISR)
  passes the batch; acks=1 once the leader has it (flushed, in fsync mode); acks=0 not at
  all. A Produce request is one call, ``writes.append_records``;
* consumer and follower fetches (``reads``, ``broker.read_path``): the leader serves
  them, from local segments or, below the local log start, from the bucket (tiering);
* offsets (ListOffsets, OffsetForLeaderEpoch) are answered by the leader, across tiers;
* DescribeConfigs shows the topic's configs as the metadata store holds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker import admin
from broker.config import BrokerConfig
from broker.controller import (
    CLUSTER_TOPIC_CONFIGS,
    IDLE_PASS_S,
    REPAIR_GRACE_S,
    UNCLEAN_LEADER_ELECTION,
    create_topic,
    machines_of,
)
from broker.fetch_sessions import FetchSessionCache
from broker.groups.offsets import OFFSETS_TOPIC
from broker.local_topics import log_configs
from broker.log_manager import ClusterLogManager
from broker.metadata import ClusterView, TopicAssignment
from broker.metrics import BrokerMetrics
from broker.produce_path import ProducePath
from broker.read_path import ReadPath, RemoteTier
from broker.replica_manager import ReplicaManager
from broker.security.quotas import QuotaManager
from broker.share.service import ShareService
from hot.config import LogConfig
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    NotLeaderError,
    RequestTimedOutError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from hot.records import ControlType
from hot.topics import TopicInfo, validate_topic_name
from tiering.restore import StartupRestore

if TYPE_CHECKING:
    from broker.groups.coordinator import GroupCoordinator
    from broker.groups.replicated_offsets import ClusterOffsetStore
    from broker.metrics_history import MetricsHistory
    from broker.schema_registry.store import SchemaStore
    from broker.security.authz import AccessControl
    from broker.security.users import UserTable
    from broker.transactions.coordinator import TransactionCoordinator
    from broker.txn_markers import MarkerChannels

log = logging.getLogger("strata.broker")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405: the first offset still on local disk
LATEST_TIERED_TIMESTAMP = -5  # KIP-1005: the last offset uploaded to remote storage
# How long a topic creation waits for the new partitions to be led (await_leaders).
CREATE_VISIBLE_S = 5.0
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    is_default: bool


class Broker:
    """One broker's request logic over its replicas (see the module docstring)."""

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
        self.config = config
        self.manager = manager
        self.replicas = replicas
        # __consumer_offsets' partitions (broker.groups.replicated_offsets), set by broker.node.
        self.offset_store: ClusterOffsetStore | None = None
        self.metrics = metrics or BrokerMetrics()
        self.tiering = tiering
        self.groups = groups  # consumer groups (api.handlers.groups); None: not served
        # The transaction coordinator (api.handlers.txn_coordinator), set by broker.node.
        self.transactions: TransactionCoordinator | None = None
        # Inter-broker connections to other coordinators (broker.txn_markers), set by broker.node.
        self.txn_channels: MarkerChannels | None = None
        # ACL enforcement (broker.security.authz); None: authorization off, everything allowed.
        self.access: AccessControl | None = None
        # SASL / REST basic-auth users (in the metadata store); None: not needed.
        self.users: UserTable | None = None
        # Byte-rate quotas per user, shared by the Kafka listeners and REST; the runtime
        # quotas' store (the metadata store's, broker.security.stored) is set by broker.node.
        self.quotas = QuotaManager(config.quotas, on_throttle=self.metrics.quota_throttled)
        # The console's metric history (broker.metrics_history), sampled by the process wiring.
        self.history: MetricsHistory | None = None
        # What this broker restored from the bucket at start-up (set by the process wiring).
        self.startup_restore: StartupRestore | None = None
        # The schema registry's store (broker.schema_registry), set by api.server.
        self.schema_store: SchemaStore | None = None
        # The Iceberg committer's per-table status (api.iceberg_service), set by api.server:
        # the console's tier view shows it.
        self.iceberg_status: Callable[[], list[dict[str, object]]] | None = None
        # The read half (fetches) and the write half (produce, markers) of the request logic.
        self.reads = ReadPath(manager, replicas, self.metrics, tiering)
        self.fetch_sessions = FetchSessionCache()  # KIP-227: followers' and consumers' sessions
        self.fetch_sessions.on_drop = self.reads.consumers.forget
        self.writes = ProducePath(self, replicas, self.metrics, self.reads.log)
        # Share groups (KIP-932; api.handlers.share).
        self.shares = ShareService(self.reads, self._partition_count)
        self.shares.produce = lambda t, p, data: self.writes.produce(t, p, data, acks=-1, timeout_ms=30_000)

    @property
    def node_id(self) -> int:
        return self.config.broker_id

    def _partition_count(self, topic: str) -> int:
        """The topic's partition count in the metadata view (0: no such topic)."""
        v = self.replicas.view.topics.get(topic)
        return 0 if v is None else v.value.partition_count

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called on ``loop``'s thread: parked fetches live there."""
        self.reads.bind_loop(loop)

    # -- topics (the metadata store owns them; broker.admin changes them) ----------------

    def topic(self, name: str) -> TopicInfo:
        va = self.replicas.view.topics.get(name)
        if va is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return self._info(name, va.value)

    def topics(self) -> list[TopicInfo]:
        return [self.topic(n) for n in sorted(self.replicas.view.topics)]

    # The synchronous single-node forms would change this broker only: refused. The
    # awaited ``admin_*`` forms change etcd (``broker.admin``), every broker follows.

    @staticmethod
    def _info(name: str, a: TopicAssignment, topic_id: uuid.UUID | None = None) -> TopicInfo:
        return TopicInfo(name, a.partition_count, dict(a.configs), topic_id or uuid.UUID(a.topic_id))

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

    async def admin_create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Create the topic (-1: ``num.partitions`` / ``default.replication.factor``)."""
        created, topic_id = await self.create_topic(
            name, partitions, replication_factor, configs, validate_only=validate_only
        )
        return self._info(name, created, topic_id)

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> tuple[TopicAssignment, uuid.UUID]:
        """Create a topic through ``broker.admin.create`` (every door's one path) and wait
        until the partitions it leads here are writable. -1 counts mean the broker
        defaults, unless ``assignments`` gives the replicas. Returns the assignment and the
        topic id (zero for ``validate_only``)."""
        if not assignments:
            if partitions == -1:
                partitions = self.config.num_partitions
            if replication_factor == -1:
                replication_factor = self.replicas.config.default_replication_factor
        try:
            res = await admin.create(
                self.replicas.client,
                name,
                partitions,
                replication_factor,
                dict(configs or {}),
                self.manager.defaults,
                assignments=assignments,
                validate_only=validate_only,
            )
        except TopicExistsError:
            if not validate_only:
                await self._await_whole(name)
            raise
        if isinstance(res, TopicAssignment):
            return res, ZERO_UUID
        await self.await_leaders(name, res.mod_revision)
        return res.value, uuid.UUID(res.value.topic_id)

    async def _await_whole(self, name: str, timeout: float = REPAIR_GRACE_S + IDLE_PASS_S + 5.0) -> None:
        """A CreateTopics retry of a topic that exists: answered TOPIC_ALREADY_EXISTS only
        once the topic is whole, every partition's state written (a large topic is created
        in steps, and the controller fills in what a creator that died left out), else
        REQUEST_TIMED_OUT, so the client retries rather than use a half-made topic. The
        wait covers the controller's repair of a creator that died (``REPAIR_GRACE_S``)."""
        view = self.replicas.view

        def whole(v: ClusterView) -> bool:
            return name not in v.topics or v.is_whole(name)

        try:
            await view.wait_for(whole, timeout)
        except TimeoutError:
            raise RequestTimedOutError(f"topic {name!r} exists but is still being created; retry") from None

    async def auto_create_topic(self, name: str, *, wait_for_leaders: bool = True) -> TopicInfo:
        """Create a topic on first use (``auto.create.topics.enable``, checked by the
        caller) with ``num.partitions`` and the default replication factor (capped at the
        live brokers), and wait for its leaders (REST; the Metadata handler answers
        LEADER_NOT_AVAILABLE instead, as Kafka does); a concurrent creator is fine."""
        replicas = self.replicas
        machines = len(set(machines_of(replicas.view.brokers).values()))  # a node's processes: one
        rf = min(replicas.config.default_replication_factor, max(machines, 1))
        admin.refuse_internal_topic(name, "auto-create")  # FindCoordinator creates it, configured
        validate_topic_name(name)
        try:
            created = await create_topic(replicas.client, name, self.config.num_partitions, rf, {})
        except TopicExistsError:
            return self.topic(name)
        if wait_for_leaders:
            await self.await_leaders(name, created.mod_revision)
        return self._info(name, created.value)

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
        pending: range | list[int] | None = None
        while loop.time() < deadline:
            va = view.topics.get(name)
            if va is None:
                return  # deleted meanwhile
            # Only the partitions still pending are looked at again: a check of every
            # partition each turn costs a 10,000-partition creation seconds of CPU.
            seq = view.seq
            pending = [p for p in (pending or range(va.value.partition_count)) if not self._writable(name, p)]
            if not pending:
                return
            # A leadership taken here does not change the view: look again soon anyway.
            await view.wait_changed(seq, 0.02)

    def _writable(self, name: str, p: int) -> bool:
        vs = self.replicas.view.partitions.get((name, p))
        if vs is None or not vs.value.has_leader:
            return False
        return vs.value.leader != self.node_id or self.replicas.leads(name, p)

    async def admin_delete_topic(self, name: str) -> None:
        await admin.delete(self.replicas.client, name)
        self.reads.wake_all()

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

    # -- groups -------------------------------------------------------------------------

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

    def on_txn_marker(self, topic: str, partition: int, producer_id: int, kind: ControlType) -> None:
        """The group coordinator's part of a transaction marker: called by WriteTxnMarkers
        (broker.txn_markers) for each ``__consumer_offsets`` partition led here once the marker of
        ``producer_id`` there is acknowledged (acks=all), before the answer.

        The producer's pending transactional offsets (TxnOffsetCommit, KIP-447) of the
        partition's groups complete: a COMMIT makes them the groups' committed offsets, an
        ABORT drops them (Kafka's GroupCoordinator.completeTransaction;
        broker.groups.replicated_offsets). A StrataError raised here is the partition's
        error in the answer: NOT_LEADER_OR_FOLLOWER while the partition is not loaded
        here (the transaction coordinator retries the marker)."""
        if topic != OFFSETS_TOPIC:
            return
        if self.groups is None:
            raise NotLeaderError(f"broker {self.node_id} runs no group coordinator")
        self.groups.complete_txn(partition, producer_id, kind is ControlType.COMMIT)

    # -- offsets ------------------------------------------------------------------------

    async def list_offset(
        self, topic: str, partition: int, timestamp: int, *, read_committed: bool = False
    ) -> tuple[int, int]:
        """ListOffsets for the doors on the leader; LATEST under ``read_committed`` is the
        last stable offset."""
        rep = self.replicas.leader_replica(topic, partition)
        if read_committed and timestamp == LATEST_TIMESTAMP:
            return rep.log.last_stable_offset, -1
        return await self._list_offset(topic, partition, timestamp)

    async def _list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        """(offset, timestamp) for ListOffsets; (-1, -1) when no record is at or after ``timestamp``.

        EARLIEST is the log start offset of the whole log (remote included). A timestamp
        search covers the remote tier first (its offsets come first), then the local one."""
        lg = self.reads.log(topic, partition)
        if timestamp == EARLIEST_TIMESTAMP:
            return lg.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return lg.high_watermark, -1
        reader = self.tiering.reader if self.tiering is not None else None
        local_start = min(lg.local_log_start_offset, lg.high_watermark)
        remote = reader is not None and lg.log_start_offset < local_start
        topic_id = self.manager.topic(topic).topic_id if remote else None
        if timestamp == MAX_TIMESTAMP:
            # the earliest record carrying the largest timestamp (ListOffsets v7, KIP-734)
            max_ts = max((s.max_timestamp for s in lg.segments()), default=-1)
            if reader is not None and topic_id is not None:
                remote_max = await reader.max_timestamp(topic, topic_id, partition, max_offset=local_start)
                if remote_max >= 0 and remote_max >= max_ts:
                    found = await reader.offset_for_timestamp(
                        topic, topic_id, partition, remote_max, max_offset=local_start
                    )
                    if found is not None:
                        return found
            if max_ts < 0:
                return -1, -1
            found = lg.offset_for_timestamp(max_ts)
            return found if found is not None else (-1, -1)
        if timestamp < 0:
            raise InvalidRequestError(f"invalid ListOffsets timestamp {timestamp}")
        if reader is not None and topic_id is not None:
            found = await reader.offset_for_timestamp(
                topic, topic_id, partition, timestamp, max_offset=local_start
            )
            if found is not None:
                return found
        found = lg.offset_for_timestamp(timestamp)
        if found is None or found[0] >= lg.high_watermark:
            return -1, -1
        return found

    async def list_offset_with_epoch(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        *,
        current_leader_epoch: int,
        replica_id: int,
        read_committed: bool = False,
    ) -> tuple[int, int, int]:
        """ListOffsets on the leader: (offset, timestamp, leader epoch of that offset).
        A follower (``replica_id`` >= 0) sees the log end for LATEST, and may ask for the
        first local offset (EARLIEST_LOCAL, KIP-405). ``read_committed`` (isolation level
        1): LATEST is the last stable offset and a timestamp search finds only offsets
        below it, as Kafka answers."""
        rep = self.replicas.leader_replica(topic, partition, current_leader_epoch)
        lg = rep.log
        if timestamp == LATEST_TIMESTAMP:
            if replica_id >= 0:
                end = lg.log_end_offset
            else:
                end = lg.last_stable_offset if read_committed else lg.high_watermark
            return end, -1, rep.leader_epoch
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            return lg.local_log_start_offset, -1, lg.epoch_for_offset(lg.local_log_start_offset)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            # KIP-1005: the last offset in remote storage; -1 when nothing is (or the topic
            # is not tiered), as Kafka answers.
            uploaded = self.tiering.uploaded(topic, partition) if self.tiering is not None else 0
            if uploaded <= max(lg.log_start_offset, 0) or not lg.config.remote_storage_enable:
                return -1, -1, -1
            return uploaded - 1, -1, lg.epoch_for_offset(uploaded - 1)
        if timestamp == EARLIEST_TIMESTAMP:
            return lg.log_start_offset, -1, lg.epoch_for_offset(lg.log_start_offset)
        offset, ts = await self._list_offset(topic, partition, timestamp)
        if read_committed and offset >= lg.last_stable_offset:
            return -1, -1, -1
        return offset, ts, lg.epoch_for_offset(offset) if offset >= 0 else -1

    def end_offset_for_epoch(
        self, topic: str, partition: int, leader_epoch: int, *, current_leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (largest epoch <= ``leader_epoch``, its end)."""
        rep = self.replicas.leader_replica(topic, partition, current_leader_epoch)
        return rep.log.end_offset_for_epoch(leader_epoch)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
