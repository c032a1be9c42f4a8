"""The life cycle of a cluster-mode broker (``strata serve --etcd ...``), driven by
``api.server.serve``.

Start-up, in order:

1. ``connect``: reach etcd, start the metadata watch (an etcd that does not answer fails
   the start with a clear error), and take the broker id: the configured one, or a fresh
   one from etcd's counter;
2. the server opens the ``ClusterLogManager`` (replicated logs, checkpointed high
   watermarks), builds the ``Broker`` and a Kafka listener with the cluster
   handlers, and binds its sockets;
3. ``start``: register in etcd under a lease with the bound addresses (waiting for a
   previous incarnation's registration to expire), then start the replica manager
   (roles, fetchers, ISR, acks) and campaign for the controller role; return once the
   view lists this broker and a live controller (a cluster of one: once it leads its
   partitions again). Only then does the server answer requests (api.startup_gate).

Shutdown (SIGTERM), ``stop``, before the listeners close: refuse new writes, give
acks=all requests already appended a moment to complete, resign as controller, revoke
the lease (the controller moves leadership away at once, rather than after the lease
TTL), stop fetching, and write the high-watermark checkpoint when the logs close.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from broker.broker import Broker
from broker.cluster_config import ClusterConfig
from broker.config import BrokerConfig
from broker.controller import Controller
from broker.embedded_store import EmbeddedMetadataStore
from broker.etcd import EtcdClient
from broker.follower_retention import FollowerRetention
from broker.groups.coordinator import GroupCoordinator
from broker.groups.offsets import OFFSETS_TOPIC
from broker.groups.replicated_offsets import ClusterOffsetStore, offsets_topic_configs
from broker.inter_broker import client_security
from broker.keys import KeyLayout
from broker.local_topics import log_configs
from broker.log_manager import ClusterLogManager
from broker.metadata import ClusterView, MetadataClient
from broker.metadata_store import MetadataStore
from broker.metrics import BrokerMetrics
from broker.partition_replica import Role
from broker.producer_ids import scoped_producer_id
from broker.read_path import RemoteTier
from broker.replica_manager import ReplicaManager
from broker.security.acl_store import AclStore
from broker.security.adopt import adopt_security_files
from broker.security.stored import SecurityDocuments, StoredAcls, StoredQuotas, StoredUsers
from broker.store_socket import LocalStoreClient, LocalStoreServer
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.markers import MarkerWriter
from broker.txn_markers import MarkerChannels, marker_writer
from hot.errors import InvalidConfigError, MetadataStoreError
from hot.tasks import cancel_and_wait
from tiering.service import TieringService

log = logging.getLogger("strata.cluster.node")

# How long a stopping leader waits for followers to acknowledge what it already appended.
SHUTDOWN_DRAIN_S = 1.0
# How long a cluster of one waits at start to lead its partitions again before "ready".
LEAD_AT_START_S = 15.0
# A burst of role changes (a start, a failover) reaches tiering as two notices: its first
# change, and the rest after this long.
ROLES_SETTLE_S = 0.05


class ClusterNode:
    """One broker's membership of a cluster (see the module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        cluster: ClusterConfig,
        etcd: MetadataStore,
        client: MetadataClient,
        broker_id: int,
    ) -> None:
        self.config = dataclasses.replace(config, broker_id=broker_id)
        self.cluster = cluster
        self.etcd = etcd
        self.client = client
        self.broker_id = broker_id
        self.manager = ClusterLogManager(self.config.data_dir, self.config.log)
        self.replicas = ReplicaManager(broker_id, client, self.manager, cluster)
        self.replicas.security = client_security(self.config)
        self.controller: Controller | None = None
        self.follower_retention: FollowerRetention | None = None
        self._tiering: TieringService | None = None
        self._roles_task: asyncio.Task[None] | None = None  # _tell_tiering_roles
        self._started = False
        self.offset_store: ClusterOffsetStore | None = None  # make_groups
        self.transactions: TransactionCoordinator | None = None  # make_transactions
        self.markers: tuple[MarkerWriter, MarkerChannels] | None = None  # make_broker
        # ACLs and SASL users of the whole cluster (broker.security.stored), watched in the store.
        self.security = SecurityDocuments(etcd, client.layout)
        # A single node's store for `strata users --data-dir` while it runs (broker.store_socket).
        self.admin_socket: LocalStoreServer | None = None

    @classmethod
    async def connect(cls, config: BrokerConfig, cluster: ClusterConfig) -> ClusterNode:
        etcd: MetadataStore
        if cluster.store_socket is not None:  # a worker of a multi-process node
            etcd = LocalStoreClient(path=cluster.store_socket, timeout=cluster.etcd_timeout_s)
        elif cluster.etcd is None:
            etcd = EmbeddedMetadataStore(config.data_dir / "meta")
        else:
            etcd = EtcdClient(cluster.etcd, timeout=cluster.etcd_timeout_s)
        try:
            await etcd.connect()
            if isinstance(etcd, LocalStoreClient) and etcd.cluster != config.cluster_id:
                raise InvalidConfigError(
                    f"the metadata store on {cluster.store_socket} serves cluster {etcd.cluster!r},"
                    f" not {config.cluster_id!r}"
                )
            client = MetadataClient(etcd, KeyLayout(config.cluster_id), lease_ttl=cluster.lease_ttl_s)
            try:
                await client.start()
            except MetadataStoreError as exc:
                where = f"etcd at {cluster.etcd}" if cluster.etcd is not None else "the metadata store"
                raise MetadataStoreError(f"cannot reach {where}: {exc}") from exc
            broker_id = cluster.broker_id
            if broker_id is None:
                broker_id = await client.allocate_broker_id()
                log.info("broker id %d assigned through etcd", broker_id)
        except BaseException:
            await etcd.close()
            raise
        node = cls(config, cluster, etcd, client, broker_id)
        if cluster.embedded:
            try:
                await node._open_local_store()
            except BaseException:
                await node.close()
                raise
        return node

    async def _open_local_store(self) -> None:
        """A cluster of one's store, on its data dir: adopt the security files a single node
        kept before the embedded store (broker.security.adopt), then serve the store to
        ``strata users --data-dir`` (broker.store_socket). Without the socket (a path the OS
        cannot bind) the broker still runs; the CLI then works only while it is stopped."""
        meta_dir = self.config.data_dir / "meta"
        adopted = await adopt_security_files(self.etcd, self.client.layout, meta_dir)
        if adopted:
            log.info("the metadata store adopted %s", ", ".join(adopted))
        server = LocalStoreServer(self.etcd, meta_dir, self.config.cluster_id)
        try:
            await server.start()
        except MetadataStoreError as exc:
            log.warning("%s; `strata users --data-dir` works only while the broker is stopped", exc)
            return
        self.admin_socket = server

    async def adopt_local_topics(self, *, home: bool = False) -> list[str]:
        """A cluster of one (embedded store) adopts the topics its data dir already holds
        and the store does not: a data dir written before the single node ran on the
        embedded store, or restored from the bucket (``tiering.restore``). Same topic id,
        partitions and overrides; one replica, this broker. Returns the adopted names.
        ``home``: process 1 of a node of several on the embedded store (api.supervisor),
        which adopts them for the node (the next start spreads them over its processes)."""
        if not (self.cluster.embedded or home):
            return []
        # A single node's committed offsets from before (hot.manager.adopt_partition):
        # partition 0 of a one-partition __consumer_offsets, so every group maps to it
        # (broker.groups.replicated_offsets.partition_for) and finds its offsets there.
        offsets_configs = offsets_topic_configs(1, self.config.groups.offsets_segment_bytes)
        old = [self.config.data_dir / f"{OFFSETS_TOPIC}-0", self.manager.adoption_dir(OFFSETS_TOPIC, 0)]
        source = next((d for d in old if d.is_dir()), None)
        if source is not None:
            self.manager.adopt_partition(OFFSETS_TOPIC, 0, source, log_configs(offsets_configs))
            log.info("adopted the committed offsets of %s", source)
        adopted: list[str] = []
        for info in self.manager.topics():
            if info.name in self.client.view.topics:
                continue
            configs = offsets_configs if info.name == OFFSETS_TOPIC else dict(info.configs)
            replicas = [[self.broker_id]] * info.partitions
            await self.client.create_topic(info.name, replicas, configs, topic_id=str(info.topic_id))
            adopted.append(info.name)
        if adopted:
            log.info("the metadata store adopted %d local topics: %s", len(adopted), ", ".join(adopted))
        return adopted

    def make_broker(
        self,
        config: BrokerConfig,
        metrics: BrokerMetrics | None = None,
        *,
        tiering: RemoteTier | None = None,
        groups: object | None = None,
    ) -> Broker:
        """The broker over this node's replicas; ``config`` is the final one (with the
        bound listener addresses)."""
        self.config = config
        broker = Broker(
            config,
            self.manager,
            self.replicas,
            metrics,
            tiering=tiering,
            groups=groups,  # type: ignore[arg-type]
        )
        broker.offset_store = self.offset_store
        broker.transactions = self.transactions
        # Runtime quotas shared by the whole cluster (broker.security.stored), not per data dir.
        broker.quotas.store = StoredQuotas(self.etcd, self.client.layout, self.client.view)
        return broker

    def attach_marker_writer(self, broker: Broker) -> None:
        """Give the transaction coordinator its marker writer, once the broker exists: each
        partition's leader gets the markers, this broker's own by a direct call, the
        others' over their replica listeners (broker.txn_markers). Closed by ``stop``."""
        if self.transactions is not None:
            self.markers = marker_writer(broker)
            self.transactions.attach_markers(self.markers[0])
            broker.txn_channels = self.markers[1]  # the leaders' verifications (broker.txn_verification)

    def make_groups(self, config: BrokerConfig) -> GroupCoordinator:
        """The group coordinator of cluster mode: offsets in the replicated
        ``__consumer_offsets`` topic, groups served by its partitions' leaders
        (``broker.groups.replicated_offsets``)."""
        store = ClusterOffsetStore(self.broker_id, self.replicas, config.groups)
        coordinator = GroupCoordinator(
            config.groups,
            lambda: store,
            node_id=self.broker_id,
            locator=store,
            partition_exists=store.partition_exists,
        )
        store.attach(coordinator)
        self.offset_store = store
        return coordinator

    def make_transactions(self, config: BrokerConfig) -> TransactionCoordinator:
        """The transaction coordinator: state in the replicated ``__transaction_state``
        topic, ids served by its partitions' leaders (``broker.transactions.state_log``);
        producer ids from this broker's allocator, unique in the cluster. Start it on the
        event loop, attach its marker writer once the broker exists."""
        manager = self.manager

        def new_producer_id() -> int:
            return scoped_producer_id(manager.producer_ids.allocate(), self.broker_id)

        def offsets_partitions() -> int:
            store = self.offset_store
            n = store.partition_count() if store is not None else None
            return n if n is not None else config.groups.offsets_topic_num_partitions

        self.transactions = TransactionCoordinator(
            self.broker_id, self.replicas, config.transactions, new_producer_id, offsets_partitions
        )
        return self.transactions

    # ACLs, SASL users and runtime quotas live in the metadata store (broker.security.stored):
    # a cluster's etcd, or a single node's embedded store, which `strata users` reaches
    # through the admin socket while the broker runs.

    async def start_security(self) -> None:
        """Load the cluster's ACLs and users before any listener accepts a connection."""
        await self.security.start()

    def acl_store(self) -> AclStore:
        return StoredAcls(self.security)

    def user_store(self) -> StoredUsers:
        return StoredUsers(self.security)

    def security_home(self) -> str:
        """Where ACLs and users live, for the start-up lines."""
        if self.cluster.embedded:
            return f"the metadata store in {self.config.data_dir / 'meta'}"
        if self.cluster.store_socket is not None:
            return f"the node's metadata store (through {self.cluster.store_socket})"
        return "etcd"

    def attach_tiering(self, tiering: TieringService) -> None:
        """Only partition leaders upload and apply remote retention, and each manifest
        write carries the leader epoch (a deposed leader's writes are refused)."""
        tiering.is_leader = self.is_leader
        tiering.roles_key = lambda: (self.replicas.wakeups.roles_seq, self.replicas.lease_alive())
        tiering.uploader.leader_epoch = self.leader_epoch
        self._tiering = tiering

        def deleted() -> None:
            guard = self.manager.disk_guard  # installed when tiering starts
            if guard is not None:
                guard.invalidate()

        # Followers delete local segments the leader has uploaded (read-only manifests).
        self.follower_retention = FollowerRetention(
            self.replicas, tiering.manifests, tiering.config.upload_interval_ms / 1000, on_deleted=deleted
        )

    def is_leader(self, topic: str, partition: int) -> bool:
        """Whether this broker leads the partition now (tiering uploads only then)."""
        rep = self.replicas.replicas.get((topic, partition))
        return rep is not None and rep.role is Role.LEADER and self.replicas.lease_alive()

    def leader_epoch(self, topic: str, partition: int) -> int:
        rep = self.replicas.replicas.get((topic, partition))
        return rep.leader_epoch if rep is not None and rep.role is Role.LEADER else -1

    async def start(
        self,
        kafka_host: str,
        kafka_port: int,
        http_port: int,
        *,
        external_listener: str | None = None,
        machine: str | None = None,
    ) -> None:
        """Register (after the listeners are bound) and start replicating. ``machine``:
        the node this broker is a process of (api.supervisor)."""
        reg = await self.client.register(
            kafka_host,
            kafka_port,
            http_port,
            broker_id=self.broker_id,
            replica_listener=self.cluster.inter_broker_listener,
            external_listener=external_listener,
            machine=machine,
        )
        log.info(
            "registered as broker %d (%s:%d) in cluster %s",
            reg.broker_id,
            reg.host,
            reg.kafka_port,
            self.config.cluster_id,
        )
        # "ready" only once this broker's own view lists it: a CreateTopics right after
        # the start would otherwise place replicas on no live broker.
        with contextlib.suppress(TimeoutError):
            await self.client.view.wait_for(
                lambda v: self.broker_id in v.live_broker_ids(), self.cluster.etcd_timeout_s
            )
        self.replicas.start()
        if self.follower_retention is not None:
            self.follower_retention.start()
        if self._tiering is not None:
            self._roles_task = asyncio.create_task(
                self._tell_tiering_roles(self._tiering), name="tiering-roles"
            )
        # Only etcd's history is compacted here: the embedded store trims its own.
        every = self.cluster.compaction_interval_ms / 1000 if self.cluster.etcd is not None else 0.0
        self.controller = Controller(self.client, compaction_interval_s=every).start()
        self._started = True
        # Nor before the view names a live controller: a Metadata answer without one sends
        # admin clients into a metadata refresh (librdkafka: about 25 s) before they retry.
        # Bounded: a previous controller's key may outlive it by a lease TTL; Metadata then
        # names this broker (api.handlers.topics), which serves controller requests too.
        try:
            await self.client.view.wait_for(_has_live_controller, self.cluster.etcd_timeout_s)
        except TimeoutError:
            log.warning("no live controller %.0f s after registering", self.cluster.etcd_timeout_s)
        if self.cluster.embedded or self.cluster.store_socket is not None:
            # One machine (a single node, or a process of a node): nobody else leads its
            # partitions, so it is ready once it leads them again.
            await self._await_leadership(LEAD_AT_START_S)
            if self._tiering is not None:
                # Leading them now: tiering loads their manifests before the first fetch
                # (the roles task's notice of this may still be waiting out its settle time).
                self._tiering.roles_changed()

    async def _await_leadership(self, timeout: float) -> None:
        """A cluster of one is ready once it leads every partition again (the controller
        elects it anew after a restart, in a new leader epoch): as a single node always
        was, so a client's first request after "ready" finds its leader. Bounded: a
        partition still without a leader after ``timeout`` answers NOT_LEADER and the
        clients retry."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        me = self.broker_id
        while loop.time() < deadline:
            view = self.client.view
            waiting = [
                (name, p)
                for name, va in view.topics.items()
                for p, replicas in enumerate(va.value.partitions)
                if me in replicas and not self.replicas.leads(name, p)
            ]
            if not waiting:
                return
            await asyncio.sleep(0.01)
        log.warning("not leading every partition %.0f s after the start; clients will retry", timeout)

    async def _tell_tiering_roles(self, tiering: TieringService) -> None:
        """Tell tiering when this broker's roles change, so it loads the manifests of the
        tiered partitions it now leads before their first fetch waits for one
        (``tiering.manifest_preload``)."""
        wakeups = self.replicas.wakeups
        seen: int | None = None
        while True:
            seq = wakeups.roles_seq
            if seq != seen:
                # At once (a restarted single node's leaderships come just before "ready"),
                # then the rest of a burst as one more notice.
                seen = seq
                tiering.roles_changed()
                await asyncio.sleep(ROLES_SETTLE_S)
            else:
                await wakeups.wait_roles_changed(wakeups.view.seq, seq, 60.0)

    async def _stop_roles_task(self) -> None:
        task, self._roles_task = self._roles_task, None
        if task is not None:
            with contextlib.suppress(Exception):
                await cancel_and_wait(task)

    async def stop(self, *, before_leaving: Callable[[], Awaitable[None]] | None = None) -> None:
        """Leave the cluster (see the module docstring); the logs close afterwards.
        ``before_leaving`` runs once writes are refused and acknowledged, while this broker
        still leads (the upload at shutdown, tiering.upload_lag). The transaction
        coordinator is closed before (its markers in flight are the next coordinator's)."""
        await self._close_markers()
        self.replicas.begin_shutdown()
        if self._started:
            await self.replicas.drain(SHUTDOWN_DRAIN_S)
            if before_leaving is not None:
                await before_leaving()
        if self.controller is not None:
            await self.controller.stop(resign=True)
            self.controller = None
        with contextlib.suppress(MetadataStoreError):
            await self.client.close(deregister=True)
        if self.follower_retention is not None:
            await self.follower_retention.stop()
        await self._stop_roles_task()
        await self.replicas.stop()
        await self.security.close()
        if self.admin_socket is not None:
            await self.admin_socket.close()
        await self.etcd.close()

    async def _close_markers(self) -> None:
        if self.markers is not None:
            writer, channels = self.markers
            self.markers = None
            await writer.close()
            await channels.close()

    async def close(self) -> None:
        """Release etcd without the orderly leave (start-up failures)."""
        await self._close_markers()
        with contextlib.suppress(MetadataStoreError):
            await self.client.close(deregister=True)
        if self.follower_retention is not None:
            await self.follower_retention.stop()
        await self._stop_roles_task()
        await self.replicas.stop()
        await self.security.close()
        if self.admin_socket is not None:
            await self.admin_socket.close()
        await self.etcd.close()


def _has_live_controller(view: ClusterView) -> bool:
    controller = view.controller
    return controller is not None and controller.value.broker_id in view.brokers
