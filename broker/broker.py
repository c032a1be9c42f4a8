"""The broker's request logic: one ``Broker`` behind every door (Kafka listener, REST).

The same class runs a single node (a cluster of one on the embedded metadata store,
``broker.embedded_store``) and every member of a replicated cluster (etcd): there is no
second code path. Nothing here knows about wire formats: it takes and returns plain values
and ``hot.errors`` types.

* topics are created, deleted, grown and configured through the metadata store
  (``broker.admin`` / ``broker.controller``, the awaited ``admin_*`` methods); this
  broker's logs follow (``broker.replica_manager``). Creation waits until the new
  partitions this broker leads are writable here, so a produce right after it succeeds;
* produce: only the partition's current leader appends (NOT_LEADER_OR_FOLLOWER
  otherwise), stamping its leader epoch into every batch; acks=all is refused before
  the append when the ISR is below ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS) and
  answered once the high watermark (minimum over the ISR) passes the batch; acks=1 once
  the leader has it (flushed, in fsync mode); acks=0 not at all. Callers serving several
  partitions append all of them before awaiting any (``append`` then ``complete``), so
  requests pipelined on one connection keep their order and one group commit covers them;
* consumer fetches and offsets are served by the leader only, below the high watermark,
  from local segments or, below the local log start, from the bucket (tiering); a fetch
  long-polls until ``min_bytes`` or ``max_wait_ms``, woken by the high watermark;
* follower fetches (``replica_fetch``, the Fetch handler's branch for ``replica_id`` >= 0)
  read up to the log end, record the follower's progress (which moves the high watermark
  and the ISR) and long-poll for appends;
* DescribeConfigs shows the topic's configs as the metadata store holds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker import admin
from broker.config import BrokerConfig
from broker.controller import CLUSTER_TOPIC_CONFIGS, UNCLEAN_LEADER_ELECTION, create_topic
from broker.groups.offsets import OFFSETS_TOPIC
from broker.log_manager import ClusterLogManager
from broker.metadata import TopicAssignment
from broker.metrics import BrokerMetrics
from broker.replica_manager import PartitionReplica, ReplicaManager, log_configs
from broker.security.quotas import QuotaManager
from hot.config import LogConfig
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    InvalidTopicError,
    NotLeaderError,
    OffsetMovedToTieredStorageError,
    RequestTimedOutError,
    StrataError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from hot.log import AppendInfo, Log
from hot.records import ControlType
from hot.region import FileRegion
from hot.topics import TopicInfo, validate_topic_name
from hot.txn_index import AbortedTxn
from tiering.remote_read import RemoteReader, RemoteReadResult
from tiering.remote_txn import combine
from tiering.restore import StartupRestore

if TYPE_CHECKING:
    from broker.groups.coordinator import GroupCoordinator
    from broker.groups.replicated_offsets import ClusterOffsetStore
    from broker.metrics_history import MetricsHistory
    from broker.security.authz import AccessControl
    from broker.security.users import UserTable
    from broker.transactions.coordinator import TransactionCoordinator
    from broker.txn_markers import MarkerChannels
    from hot.producer_state import VerificationGuard

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
class ProduceResult:
    error: StrataError | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_count: int = 0


@dataclass(frozen=True, slots=True)
class PendingAppend:
    """A leader's append, with the replica and the epoch it was made in."""

    topic: str
    log: Log | None
    info: AppendInfo | None
    error: StrataError | None
    replica: PartitionReplica | None = None
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchRequestPartition:
    topic: str
    partition: int
    offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class ReplicaFetchPartition:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    topic: str
    partition: int
    error: StrataError | None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    regions: tuple[FileRegion, ...] = ()
    size: int = 0
    # Whole batches read from the object store (offsets below the local log start), as views
    # of the chunk cache's buffers (never joined: the Fetch encoder sends each as a frame
    # part); a partition's data is either ``regions`` (local, sent with sendfile) or this.
    remote: tuple[bytes | memoryview, ...] = ()
    # Replica fetches (cluster mode): the leader's segment base offsets within the batches
    # returned, so the follower's segments begin where the leader's do.
    segment_bases: tuple[int, ...] = ()
    # read_committed fetches: the aborted transactions overlapping the batches returned
    # (None for read_uncommitted, which Kafka answers with a null list).
    aborted: tuple[AbortedTxn, ...] | None = None
    # Offsets the batches returned cover (next - first): the records served, counted from
    # batch headers already parsed (an upper bound where a compacted segment skips offsets).
    record_span: int = 0

    @property
    def records(self) -> tuple[FileRegion, ...] | tuple[bytes | memoryview, ...]:
        """What to put in a Fetch response: the file regions, or the remote bytes."""
        return self.regions if self.regions else self.remote

    def read(self) -> bytes:
        """The batches' bytes (REST, tests)."""
        if self.regions:
            return b"".join(r.read() for r in self.regions)
        return b"".join(self.remote)


class RemoteTier(Protocol):
    """What the broker needs of tiered storage (``tiering.service.TieringService``)."""

    @property
    def reader(self) -> RemoteReader: ...

    def uploaded(self, topic: str, partition: int) -> int:
        """The remote next offset of the partition (0: nothing uploaded)."""
        ...


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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._waiters: dict[int, set[asyncio.Future[None]]] = {}
        self._listening: weakref.WeakSet[Log] = weakref.WeakSet()

    @property
    def node_id(self) -> int:
        return self.config.broker_id

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called on ``loop``'s thread: parked fetches live there."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

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
        if isinstance(res, TopicAssignment):
            return res, ZERO_UUID
        await self.await_leaders(name, res.mod_revision)
        return res.value, uuid.UUID(res.value.topic_id)

    async def auto_create_topic(self, name: str, *, wait_for_leaders: bool = True) -> TopicInfo:
        """Create a topic on first use (``auto.create.topics.enable``, checked by the
        caller) with ``num.partitions`` and the default replication factor (capped at the
        live brokers), and wait for its leaders (REST; the Metadata handler answers
        LEADER_NOT_AVAILABLE instead, as Kafka does); a concurrent creator is fine."""
        replicas = self.replicas
        rf = min(replicas.config.default_replication_factor, max(len(replicas.view.brokers), 1))
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
                    pending = pending or not self.replicas.leads(name, p)
            if not pending:
                return
            await asyncio.sleep(0.005)

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

    # -- produce ------------------------------------------------------------------------

    def _log(self, topic: str, partition: int) -> Log:
        lg = self.manager.get_log(topic, partition)
        if lg not in self._listening:
            lg.add_hw_listener(self._on_hw_advance)
            self._listening.add(lg)
        return lg

    def append(
        self,
        topic: str,
        partition: int,
        data: bytes | bytearray | memoryview,
        *,
        acks: int = 1,
        transactional: bool = False,
        verification: Mapping[int, VerificationGuard] | None = None,
        leader: PartitionReplica | None = None,
    ) -> PendingAppend:
        """Append a producer's batches as the partition's leader; ``transactional``: the
        request named a transactional id (its transactional batches are accepted, hot.log);
        ``verification``: the producers' guards the coordinator confirmed
        (broker.txn_verification; None: not verified); ``leader``: what
        ``replicas.writable_leader`` returned for this append, with no await since (the
        Produce handler checks every partition first), so it is not checked twice."""
        # The internal topics are written by their coordinators only (Kafka: INVALID_TOPIC_EXCEPTION).
        if admin.is_internal(topic):
            return PendingAppend(
                topic, None, None, InvalidTopicError(f"cannot produce to the internal topic {topic}")
            )
        pending = self._leader_append(
            topic,
            partition,
            acks,
            lambda lg, epoch: lg.append(
                data, leader_epoch=epoch, transactional=transactional, verification=verification
            ),
            leader,
        )
        if pending.info is not None:
            totals = self.metrics.produced(topic)
            totals[0] += pending.info.record_count
            totals[1] += len(data)
        return pending

    def append_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        kind: ControlType,
        coordinator_epoch: int,
    ) -> PendingAppend:
        """A transaction marker (WriteTxnMarkers, broker.txn_markers), appended as the
        leader in its epoch like a produce with acks=all (``complete`` awaits it), on any
        partition, ``__consumer_offsets`` included (a transactional offset commit's)."""
        return self._leader_append(
            topic,
            partition,
            -1,
            lambda lg, epoch: lg.append_marker(
                producer_id, producer_epoch, kind, coordinator_epoch, leader_epoch=epoch
            ),
        )

    def _leader_append(
        self,
        topic: str,
        partition: int,
        acks: int,
        write: Callable[[Log, int], AppendInfo],
        leader: PartitionReplica | None = None,
    ) -> PendingAppend:
        """``write(log, leader_epoch)`` on the partition as its current leader. Nothing
        awaits between the leader check and the append, so appends are in call order."""
        try:
            rep = leader if leader is not None else self.replicas.writable_leader(topic, partition, acks)
            lg = self._log(topic, partition)
            if lg is not rep.log:
                raise UnknownTopicOrPartitionError(f"{topic}-{partition} is being recreated")
            if rep.roll_before_append:  # a new leadership's first append (replica_manager)
                lg.roll()
                rep.roll_before_append = False
            info = write(lg, rep.leader_epoch)
        except StrataError as exc:
            # Counted once, by the protocol layer that answers the request.
            return PendingAppend(topic, None, None, exc)
        self.replicas.appended(rep)
        return PendingAppend(topic, lg, info, None, replica=rep, epoch=rep.leader_epoch)

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

    def complete_now(self, pending: PendingAppend, *, acks: int) -> ProduceResult | None:
        """``complete``'s result when it has nothing to wait for (an error, acks=0, acks=1
        in interval mode), else None: a Produce to many partitions costs no coroutine per
        partition then."""
        if pending.error is not None or pending.log is None or pending.info is None:
            return ProduceResult(pending.error)
        if acks != 0 and pending.replica is not None and (acks == -1 or pending.log.config.fsync_mode):
            return None
        return self._appended_result(pending)

    def _appended_result(self, pending: PendingAppend) -> ProduceResult:
        info = pending.info
        assert info is not None and pending.log is not None
        return ProduceResult(
            None,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=pending.log.log_start_offset,
            record_count=info.record_count,
        )

    async def complete(self, pending: PendingAppend, *, acks: int, timeout_ms: int) -> ProduceResult:
        if pending.error is not None or pending.log is None or pending.info is None:
            return ProduceResult(pending.error)
        info = pending.info
        if acks != 0 and pending.replica is not None:
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
        return self._appended_result(pending)

    async def produce(
        self, topic: str, partition: int, data: bytes | bytearray | memoryview, *, acks: int, timeout_ms: int
    ) -> ProduceResult:
        if acks not in (-1, 0, 1):
            return ProduceResult(InvalidRequestError(f"acks must be -1, 0 or 1, got {acks}"))
        pending = self.append(topic, partition, data, acks=acks)
        return await self.complete(pending, acks=acks, timeout_ms=timeout_ms)

    # -- fetch --------------------------------------------------------------------------

    def _on_hw_advance(self, lg: Log) -> None:
        """Wake the fetches parked on ``lg``. Runs on whichever thread moved the high
        watermark: the event loop for an append in interval mode (once per append), the
        group-commit thread after an fsync, a REST worker thread.

        Cheap when nobody waits: a fetch registers its waiter before it reads, so one
        registered after this membership test (a dict lookup, atomic under the GIL)
        reads the data that moved the high watermark anyway. On the loop's own thread
        the waiters are woken in place (no self-pipe write); elsewhere the wake hops
        onto the loop before touching futures."""
        key = id(lg)
        if key not in self._waiters:
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            self._wake_key(key)
            return
        try:
            loop.call_soon_threadsafe(self._wake_key, key)
        except RuntimeError:
            pass  # loop shutting down

    def _wake_key(self, key: int) -> None:
        waiters = self._waiters.pop(key, None)
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    def _remote_bound(self, lg: Log, offset: int) -> int | None:
        """The offset where the local tier starts if ``offset`` must be read remotely, else None."""
        if self.tiering is None:
            return None
        local_start = min(lg.local_log_start_offset, lg.high_watermark)
        if lg.log_start_offset <= offset < local_start:
            return local_start
        return None

    async def _read_remote(
        self, lg: Log, offset: int, max_bytes: int, bound: int, *, min_one: bool
    ) -> RemoteReadResult:
        assert self.tiering is not None
        topic_id = self.manager.topic(lg.topic).topic_id
        return await self.tiering.reader.read(
            lg.topic, topic_id, lg.partition, offset, max_bytes, min_one=min_one, max_offset=bound
        )

    async def _read_all(
        self, parts: Sequence[FetchRequestPartition], max_bytes: int, *, read_committed: bool = False
    ) -> list[FetchedPartition]:
        """Read every partition, filling ``max_bytes`` in request order (whole batches; the
        first partition with data gets at least one batch, KIP-74). ``read_committed``
        (isolation level 1): only below the last stable offset, with the aborted
        transactions of the range.

        Partitions whose offset is below the local log start are read from the object
        store first, all at once (one slow GET delays none of the others, and never a
        produce); their results are then cut to the budget left at their turn.
        """
        remote: dict[int, asyncio.Future[RemoteReadResult]] = {}
        if self.tiering is not None:
            for i, p in enumerate(parts):
                try:
                    lg = self._log(p.topic, p.partition)
                except StrataError:
                    continue
                bound = self._remote_bound(lg, p.offset)
                if bound is not None:
                    if read_committed:
                        bound = min(bound, lg.last_stable_offset)
                    limit = max(0, min(p.max_bytes, max_bytes))
                    remote[i] = asyncio.ensure_future(
                        self._read_remote(lg, p.offset, limit, bound, min_one=True)
                    )
            if remote:
                try:
                    await asyncio.wait(remote.values())
                except BaseException:
                    for t in remote.values():
                        t.cancel()
                    raise
                for t in remote.values():
                    t.exception()  # retrieved here; raised per partition below
        out: list[FetchedPartition] = []
        budget = max_bytes
        first_with_data = True
        for i, p in enumerate(parts):
            try:
                lg = self._log(p.topic, p.partition)
                limit = max(0, min(p.max_bytes, budget))
                task = remote.get(i)
                if task is not None:
                    r = task.result().truncate(limit, min_one=first_with_data)
                    fp = await self._remote_fetched(p, lg, r, read_committed)
                else:
                    lso = lg.last_stable_offset
                    try:
                        result = lg.read(
                            p.offset,
                            limit,
                            min_one=first_with_data,
                            max_offset=lso if read_committed else None,
                        )
                    except OffsetMovedToTieredStorageError:
                        # local retention removed the segment since the first pass
                        bound = self._remote_bound(lg, p.offset)
                        if bound is None:
                            raise
                        if read_committed:
                            bound = min(bound, lso)
                        r = await self._read_remote(lg, p.offset, limit, bound, min_one=first_with_data)
                        fp = await self._remote_fetched(p, lg, r, read_committed)
                    else:
                        fp = FetchedPartition(
                            p.topic,
                            p.partition,
                            None,
                            high_watermark=lg.high_watermark,
                            last_stable_offset=lso,
                            log_start_offset=lg.log_start_offset,
                            regions=result.regions,
                            size=result.size,
                            aborted=self._aborted(lg, p.offset, result.next_offset, result.size)
                            if read_committed
                            else None,
                            record_span=result.next_offset - result.first_offset if result.size else 0,
                        )
            except StrataError as exc:
                fp = FetchedPartition(p.topic, p.partition, exc)
            if fp.size:
                first_with_data = False
                budget -= fp.size
            out.append(fp)
        return out

    @staticmethod
    def _aborted(lg: Log, start: int, next_offset: int, size: int) -> tuple[AbortedTxn, ...]:
        """The aborted transactions a read_committed client needs to drop the aborted
        records among the batches returned (Kafka: those overlapping [fetch offset, the
        offset after the last batch))."""
        if not size:
            return ()
        return tuple(lg.collect_aborted_transactions(start, next_offset))

    async def _remote_fetched(
        self, p: FetchRequestPartition, lg: Log, r: RemoteReadResult, read_committed: bool = False
    ) -> FetchedPartition:
        aborted: tuple[AbortedTxn, ...] | None = None
        if read_committed:
            aborted = await self._remote_aborted(lg, p.offset, r.next_offset) if r.size else ()
        return FetchedPartition(
            p.topic,
            p.partition,
            None,
            high_watermark=lg.high_watermark,
            last_stable_offset=lg.last_stable_offset,
            log_start_offset=lg.log_start_offset,
            remote=r.parts,
            size=r.size,
            aborted=aborted,
            record_span=r.next_offset - r.first_offset if r.size else 0,
        )

    async def _remote_aborted(self, lg: Log, start: int, next_offset: int) -> tuple[AbortedTxn, ...]:
        """The aborted transactions of a read_committed fetch served from the bucket: the
        tiered transaction indexes (Kafka's stop rule), continued in the local segments
        when the remote search could not settle it (a transaction whose marker is local)."""
        assert self.tiering is not None
        topic_id = self.manager.topic(lg.topic).topic_id
        remote = await self.tiering.reader.search_aborted_transactions(
            lg.topic, topic_id, lg.partition, start, next_offset
        )
        local = () if remote.complete else lg.collect_aborted_transactions(start, next_offset)
        return tuple(combine(remote, local))

    async def fetch(
        self,
        parts: Sequence[FetchRequestPartition],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        read_committed: bool = False,
    ) -> list[FetchedPartition]:
        """Consumer fetch: leaders only, below the high watermark (below the last stable
        offset for ``read_committed``); long-polls, and the HW listener wakes it when the HW
        (and so the LSO) moves."""
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
            await self._fetch_led(
                ok,
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                read_committed=read_committed,
            )
            if ok
            else []
        )
        return [errors[i] if i in errors else next(fetched) for i in range(len(parts))]

    async def _fetch_led(
        self,
        parts: Sequence[FetchRequestPartition],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        read_committed: bool = False,
    ) -> list[FetchedPartition]:
        """Read every (led) partition; long-poll until ``min_bytes`` are available or ``max_wait_ms`` passes.

        Waiters are registered before each read, so an append landing between the read
        and the wait still wakes us.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        while True:
            fut: asyncio.Future[None] = loop.create_future()
            keys = []
            for p in parts:
                try:
                    key = id(self._log(p.topic, p.partition))
                except StrataError:
                    continue
                self._waiters.setdefault(key, set()).add(fut)
                keys.append(key)
            try:
                results = await self._read_all(parts, max_bytes, read_committed=read_committed)
                total = sum(r.size for r in results)
                remaining = deadline - loop.time()
                if (
                    total >= max(min_bytes, 1)
                    or remaining <= 0
                    or any(r.error is not None for r in results)
                    or not keys
                ):
                    for r in results:
                        if r.size:
                            totals = self.metrics.fetched(r.topic)
                            totals[0] += r.record_span
                            totals[1] += r.size
                    return results
                try:
                    await asyncio.wait_for(fut, timeout=remaining)
                except TimeoutError:
                    pass
            finally:
                for key in keys:
                    waiters = self._waiters.get(key)
                    if waiters is not None:
                        waiters.discard(fut)
                        if not waiters:
                            self._waiters.pop(key, None)

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
        lg = self._log(topic, partition)
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

    # -- follower fetches ---------------------------------------------------------------

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


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _segment_bases(lg: Log, first: int, end: int) -> tuple[int, ...]:
    """Base offsets of ``lg``'s segments that begin within [first, end) (a replica read):
    where the follower must start new segments. Read on the event loop right after the
    read, with no append (hence no roll) in between."""
    return tuple(b for b in (s.base_offset for s in lg.segments()) if first <= b < end)
