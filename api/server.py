"""Process wiring for ``strata serve``: log manager, Kafka listener and HTTP server in one loop.

Start-up order is storage first (recovery happens before any listener accepts a
connection), then tiering (the object store and the TieringService, which must own the
retention of tiered topics before the manager's retention thread runs), then the
listeners. Their sockets are bound and accept connections before the broker registers
(their ports are part of its registration), but no request is answered until the start
is complete: every door waits on one gate (api.startup_gate), opened right before
"strata: ready". Shutdown (SIGTERM/SIGINT) is the reverse: stop accepting, let in-flight
requests finish for a bounded time, upload what the bucket lacks (single node, or cluster
mode with ``shutdown_upload_in_cluster``: tiering.upload_lag, bounded by
``shutdown_upload_grace_ms``), stop tiering, flush and close every log, and write
the clean-shutdown marker last so that a crash anywhere before it means a full recovery
scan on the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

import uvicorn

from api.iceberg_service import IcebergService
from api.iceberg_service import register_metrics as register_iceberg_metrics
from api.kafka_server import KafkaServer
from api.metrics_listener import create_metrics_app
from api.node_metrics import NodeMetrics
from api.process_io import bind_listener, say_line
from api.rest import create_app
from api.schema_registry.listener import create_registry_app, peer_context
from api.schema_registry.routes import registry_router
from api.startup_gate import StartupGate, gated
from broker.broker import Broker
from broker.cluster_config import ClusterConfig
from broker.cluster_metrics import ClusterEventMetrics, ClusterMetricsCollector
from broker.config import BrokerConfig
from broker.disk_metrics import DiskHealthCollector
from broker.fetch_session_metrics import FetchSessionCollector
from broker.groups.coordinator import GroupCoordinator
from broker.inter_broker import internal_listener_options
from broker.metrics import BrokerMetrics, LogStatsCollector, manager_logs
from broker.metrics_history import MetricsHistory, broker_totals, sample_interval_s
from broker.node import ClusterNode
from broker.node_layout import rehome_into_one
from broker.schema_registry.metrics import register_registry_metrics
from broker.schema_registry.store import HTTP_PREFIX as REGISTRY_PREFIX
from broker.schema_registry.store import SchemaStore
from broker.security.acl import Authorizer
from broker.security.authz import AccessControl
from broker.security.tls import server_context, uvicorn_options
from broker.share.state_store import ShareStateStore
from broker.share.stored_configs import StoredShareConfigs
from broker.transactions.coordinator import TransactionCoordinator
from broker.txn_metrics import register_txn_metrics
from core.limits import FDS_PER_PARTITION, raise_open_files
from hot import record_validation
from hot.errors import InvalidConfigError
from hot.topics import TopicInfo
from kwire.address import HostPort
from tiering.metrics import TieringMetrics
from tiering.restore import StartupRestore, restore_missing_topics
from tiering.service import TieringService
from tiering.store import open_store

if TYPE_CHECKING:
    from api.supervisor import WorkerSpec

log = logging.getLogger("strata.server")


class _EmbeddedUvicorn(uvicorn.Server):
    """uvicorn that leaves signal handling to us (it shares our event loop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def _start_http(
    app: Any, sock: socket.socket, name: str, **options: Any
) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    """Serve ``app`` on ``sock`` and return once it serves: "ready" means every listener
    serves (uvicorn's start-up, about 20 ms of event-loop time, otherwise ran after it,
    ahead of the first Kafka request)."""
    server = _EmbeddedUvicorn(
        uvicorn.Config(
            app,
            loop="asyncio",
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
            **options,
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]), name=name)
    while not server.started and not task.done():
        await asyncio.sleep(0.005)
    if task.done():
        task.result()  # its start-up failure, or:
        raise RuntimeError(f"the {name} listener stopped during start-up")
    return server, task


def make_access_control(config: BrokerConfig, node: ClusterNode) -> AccessControl:
    authz = config.authorization
    authorizer = Authorizer(authz.super_users, allow_if_no_acl=authz.allow_everyone_if_no_acl_found)
    store = node.acl_store()
    store.bindings()  # a malformed ACL document stops the start, with one line naming it
    return AccessControl(authorizer, store)


def _inherited(fd: int | None) -> socket.socket | None:
    """A node listener's socket the supervisor handed down (api.supervisor)."""
    if fd is None:
        return None
    sock = socket.socket(fileno=fd)
    sock.setblocking(False)
    return sock


async def serve(
    config: BrokerConfig,
    *,
    announce: Callable[[str], None] | None = None,
    worker: WorkerSpec | None = None,
) -> None:
    """Run a broker until SIGTERM/SIGINT (or cancellation). ``worker``: as process k of a
    node (api.supervisor): it also accepts on the node's listeners, once it is ready."""
    say = announce or say_line
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    # A process of a node at the node's first start opens the node's address once every
    # process is ready (the supervisor's SIGUSR1): no client of the node's address sees
    # part of the node; a process restarted alone opens it as soon as it is ready.
    node_go = asyncio.Event()
    if worker is not None:
        if worker.wait_node:
            loop.add_signal_handler(signal.SIGUSR1, node_go.set)
        else:
            node_go.set()

    config.data_dir.mkdir(parents=True, exist_ok=True)
    # One broker code path: a single node is a cluster of one on the embedded metadata
    # store (broker.embedded_store); with --etcd, a member of a replicated cluster.
    cluster = config.cluster if config.cluster is not None else ClusterConfig.of_one(config.broker_id)
    node: ClusterNode | None = await ClusterNode.connect(config, cluster)
    assert node is not None
    config = node.config  # with the broker id etcd assigned
    # Closed until the broker is registered: requests wait, none gets a wrong answer.
    gate = StartupGate()
    manager = node.manager
    store = open_store(config.object_store_url)
    startup_restore: StartupRestore | None = None
    # The node's home: a single process, or process 1 of a node on the embedded store.
    node_home = cluster.embedded or (
        worker is not None and worker.index == 1 and worker.store_socket is not None
    )
    try:
        if cluster.embedded:
            # A data dir a node of several processes left (api.supervisor): its
            # partitions come back into this one process's data dir first.
            back = await rehome_into_one(node.client, config.data_dir, config.broker_id)
            if back.moved or back.rewritten:
                say(f"strata: 1 process: {back.moved} partition directories moved into {config.data_dir}")
        if node_home:
            # A new or lost data dir: bring the bucket's topics back before the logs open
            # (a cluster's replicas come back from their leaders instead).
            began = time.monotonic()
            restored_names = await restore_missing_topics(manager, store)
            for name in restored_names:
                say(f"strata: restored topic {name} from {config.object_store_url}")
            if restored_names:
                startup_restore = StartupRestore(
                    tuple(restored_names),
                    config.object_store_url,
                    int(time.time() * 1000),
                    time.monotonic() - began,
                )
        manager.cleaner_config = config.cleaner
        manager.open()
        await node.adopt_local_topics(home=node_home)
    except BaseException:
        await node.close()
        await store.close()
        raise
    tiering: TieringService | None = None
    groups: GroupCoordinator | None = None
    transactions: TransactionCoordinator | None = None
    try:
        metrics = BrokerMetrics()
        metrics.registry.register(LogStatsCollector(manager_logs(manager)))
        metrics.registry.register(DiskHealthCollector(manager.disk_health))
        view = node.client.view
        client = node.client
        metrics.registry.register(ClusterMetricsCollector(lambda: view, lambda: client.keeper))
        events = ClusterEventMetrics(metrics.registry)
        node.replicas.on_isr_change = events.isr_changed
        tiering = TieringService(manager, store, config.tiering, TieringMetrics(metrics.registry))
        node.attach_tiering(tiering)  # only partition leaders tier
        await tiering.start()
        manager.start_background()
        kafka_sock = bind_listener(config.kafka_listen)
        http_sock = bind_listener(config.http_listen)
        internal_sock = bind_listener(config.internal_listen) if config.internal_listen is not None else None
        external_sock = bind_listener(config.external_listen) if config.external_listen is not None else None
        metrics_sock = bind_listener(config.metrics_listen) if config.metrics_listen is not None else None
        registry_listen = config.schema_registry_listen
        registry_sock = bind_listener(registry_listen) if registry_listen is not None else None
        kafka_addr = HostPort(config.kafka_listen.host, kafka_sock.getsockname()[1])
        http_addr = HostPort(config.http_listen.host, http_sock.getsockname()[1])
        if config.advertised_listener is None:
            config = dataclasses.replace(config, kafka_listen=kafka_addr)
        # Consumer groups: offsets in the internal __consumer_offsets topic
        # (broker.groups.replicated_offsets).
        groups = node.make_groups(config)
        await groups.start()
        coordinator = groups
        # Transactions: state in the internal __transaction_state topic
        # (broker.transactions.state_log).
        transactions = node.make_transactions(config)
        transactions.start()
        # The schema registry: state in the replicated _schemas topic (broker.schema_registry).
        schemas = SchemaStore(node.broker_id, node.replicas, ssl_context=peer_context(config), backup=store)
        schemas.start()

        def forget_topic(info: TopicInfo) -> None:  # any thread: REST deletes off the loop
            loop.call_soon_threadsafe(coordinator.on_topic_deleted, info.name)

        manager.add_delete_listener(forget_topic)
        broker: Broker = node.make_broker(config, metrics, tiering=tiering, groups=groups)
        metrics.registry.register(FetchSessionCollector(broker.fetch_sessions, broker.reads.consumers))
        # Share groups: share-partition state in the internal __share_group_state topic
        # (broker.share.state_store).
        share_store = ShareStateStore(node.broker_id, node.replicas)
        # The other brokers' share coordinators, over the transaction markers' channels.
        share_store.remote = lambda: broker.txn_channels.call if broker.txn_channels is not None else None
        broker.shares.attach_store(share_store, broker.replicas.view.topic_id)
        broker.shares.stored_configs = StoredShareConfigs(node.etcd, node.client.layout)
        broker.history = MetricsHistory(broker_totals(broker), interval_s=sample_interval_s())
        history_task = asyncio.create_task(broker.history.run())  # the console's charts
        node.attach_marker_writer(broker)
        broker.bind_loop(loop)
        broker.startup_restore = startup_restore
        broker.schema_store = schemas
        register_registry_metrics(metrics.registry, lambda: schemas)
        register_txn_metrics(broker)
        # ACLs and users, before any listener; the users always, as admin clients manage
        # SCRAM credentials (KIP-554) whether or not this broker's listeners use SASL.
        await node.start_security()
        broker.users = node.user_store().reload()
        if config.authorization.enabled:
            broker.access = make_access_control(config, node)

        client_opts: dict[str, Any] = {
            "ssl_context": server_context(config.tls) if config.tls.enabled else None,
            "sasl_mechanisms": config.sasl.mechanisms,
            "users": broker.users if config.sasl.enabled else None,
            "gate": gate,
        }
        kafka = KafkaServer(broker, **client_opts)
        await kafka.start(kafka_sock)
        # The second client listener: the same security and ACLs; its clients are told the
        # brokers' external addresses (BrokerRegistration.client_address).
        external: KafkaServer | None = None
        external_adv: HostPort | None = None
        if external_sock is not None and config.external_listen is not None:
            external = KafkaServer(broker, external=True, **client_opts)
            await external.start(external_sock)
            external_addr = HostPort(config.external_listen.host, external_sock.getsockname()[1])
            external_adv = config.external_advertised_listener or external_addr
        internal: KafkaServer | None = None
        internal_addr: HostPort | None = None
        if internal_sock is not None and config.internal_listen is not None:
            # Replication's listener: the same handlers, with the inter-broker protocol's
            # security (broker.inter_broker; plaintext by default). Its clients are the
            # inter-broker principal: no ACL checks there.
            internal_opts = internal_listener_options(config)
            internal = KafkaServer(
                broker,
                users=broker.users if internal_opts.get("sasl_mechanisms") else None,
                inter_broker=True,
                gate=gate,
                **internal_opts,
            )
            await internal.start(internal_sock)
            internal_addr = HostPort(config.internal_listen.host, internal_sock.getsockname()[1])
            if node.cluster.inter_broker_listener is None:
                node.cluster = dataclasses.replace(node.cluster, inter_broker_listener=str(internal_addr))
        app = create_app(broker)
        app.include_router(
            registry_router(lambda: schemas, broker), prefix=REGISTRY_PREFIX
        )  # forwarded requests
        http_options = uvicorn_options(config.tls)
        http, http_task = await _start_http(gated(app, gate), http_sock, "http", **http_options)
        registry_http: uvicorn.Server | None = None
        registry_task: asyncio.Task[None] | None = None
        if registry_sock is not None and registry_listen is not None:
            registry_app = create_registry_app(broker, lambda: schemas)
            registry_http, registry_task = await _start_http(
                gated(registry_app, gate), registry_sock, "schema-registry", **http_options
            )
            registry_addr = HostPort(registry_listen.host, registry_sock.getsockname()[1])
        metrics_http: uvicorn.Server | None = None
        metrics_task: asyncio.Task[None] | None = None
        if metrics_sock is not None and config.metrics_listen is not None:
            # Plain HTTP on purpose (api.metrics_listener): the operator's private interface.
            metrics_app = create_metrics_app(metrics)
            metrics_http, metrics_task = await _start_http(gated(metrics_app, gate), metrics_sock, "metrics")
            metrics_addr = HostPort(config.metrics_listen.host, metrics_sock.getsockname()[1])
        log.info(
            "produced records are validated by the record walk in %s",
            "C" if record_validation.NATIVE else "Python (hot/_recordwalk.c is not built: pip install -e .)",
        )
        say(f"strata: data dir {config.data_dir.resolve()}")
        say(f"strata: object store {config.object_store_url}")
        security = config.security_protocol
        say(f"strata: kafka listener on {kafka_addr} (advertised as {config.advertised}; {security})")
        if external_adv is not None:
            note = f"advertised as {external_adv}; {security}"
            say(f"strata: external kafka listener on {external_addr} ({note})")
        if internal_addr is not None:
            protocol = cluster.inter_broker_protocol
            say(f"strata: internal kafka listener on {internal_addr} ({protocol}, for replication)")
        if config.authorization.enabled:
            supers = ", ".join(sorted(config.authorization.super_users)) or "none"
            home = node.security_home()
            say(f"strata: authorization on (ACLs in {home}; super users {supers})")
        if config.sasl.enabled:
            home = node.security_home()
            say(f"strata: SASL mechanisms {', '.join(config.sasl.mechanisms)}, users in {home}")
        if config.tls.enabled:
            # no scheme before the address: tests/brokers.py reads the port from this line
            say(f"strata: http listener on {http_addr} (https, client certificates {config.tls.client_auth})")
        else:
            say(f"strata: http listener on http://{http_addr}")
        if metrics_task is not None:
            say(f"strata: metrics listener on http://{metrics_addr}/metrics (no authentication)")
        if registry_task is not None:
            scheme = "https" if config.tls.enabled else "http"
            say(f"strata: schema registry listener on {scheme}://{registry_addr}")
        # Everything allocated so far (S3 clients' service models: hundreds of thousands of
        # objects, the offsets log, ...) lives as long as the process; left to the cyclic GC,
        # each full collection walks it all, which stopped the event loop for 100-240 ms
        # during cold remote reads (bench_tiering).
        gc.collect()
        gc.freeze()
        adv = config.advertised
        await node.start(
            adv.host,
            adv.port,
            http_addr.port,
            external_listener=None if external_adv is None else str(external_adv),
            machine=worker.machine if worker is not None else None,
        )
        if node.controller is not None:  # created by start(); it has not run yet
            node.controller.on_isr_change = events.isr_changed
            node.controller.on_election = events.leader_elected
        if not cluster.embedded:
            say(f"strata: broker {config.broker_id} joined cluster {config.cluster_id}")
        gate.open()  # registered, with a controller in view: requests are answered from here on
        # Iceberg topics (docs/iceberg.md): the committer of each table whose partition 0 this
        # broker leads; it reads the hot tail through this broker's own Kafka listener (the
        # internal one where there is one: plaintext, no ACLs).
        live = node
        iceberg = IcebergService(
            manager,
            config,
            str(internal_addr or kafka_addr),
            is_committer=None if cluster.embedded else (lambda topic: live.is_leader(topic, 0)),
            leader_address=None if cluster.embedded else _leader_address(view),
            schemas=lambda: broker.schema_store,
        )
        register_iceberg_metrics(iceberg, metrics.registry)
        broker.iceberg_status = iceberg.status  # the console's tier view
        iceberg.start()
        # A process of a node takes connections on the node's address only now: while it
        # starts (or restarts) the others answer there.
        node_doors = _NodeDoors()
        doors_task = asyncio.create_task(
            _open_node_doors(
                node_doors,
                node_go,
                worker,
                broker,
                client_opts,
                app,
                metrics,
                http_options,
                lambda: create_registry_app(broker, lambda: schemas),
            )
        )
        say("strata: ready")
        try:
            stop_task = asyncio.create_task(stop.wait())
            done, _ = await asyncio.wait({stop_task, http_task}, return_when=asyncio.FIRST_COMPLETED)
            if http_task in done and not stop.is_set():
                exc = http_task.exception()
                raise RuntimeError(f"http server stopped unexpectedly: {exc!r}")
            stop_task.cancel()
        finally:
            say("strata: shutting down")
            await iceberg.close()
            history_task.cancel()
            http.should_exit = True
            if metrics_http is not None:
                metrics_http.should_exit = True
            if registry_http is not None:
                registry_http.should_exit = True
            # REST consumer instances commit their consumed positions and leave their groups
            # while the coordinator still serves them.
            try:
                await app.state.consumer_instances.close()
            except Exception:  # shutdown goes on: positions not committed are redelivered
                log.exception("closing REST consumer instances")
            # Then the coordinator: JoinGroup/SyncGroup requests parked in a rebalance would
            # hold their connections open through the whole drain grace period.
            await groups.close()
            await transactions.close()
            broker.shares.close()
            upload_grace = config.tiering.shutdown_upload_grace_ms
            # Hand leadership over before the listeners close (broker.node); with
            # shutdown_upload_in_cluster, upload the tail while still leading.
            # A single node uploads everything (tiering.upload_lag) once writes are refused,
            # while it still leads.
            upload = upload_grace > 0 and (cluster.embedded or config.tiering.shutdown_upload_in_cluster)
            await node.stop(before_leaving=_shutdown_upload(tiering) if upload else None)
            node = None
            doors_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await doors_task
            await kafka.close()
            await node_doors.close()
            if external is not None:
                await external.close()
            if internal is not None:
                await internal.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(http_task, timeout=10)
            if metrics_task is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(metrics_task, timeout=10)
            if registry_task is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(registry_task, timeout=10)
            await schemas.flush_backup()
            schemas.close()
    finally:
        if node is not None:
            await node.close()
        try:
            if tiering is not None:
                await tiering.close()
        finally:
            try:
                if groups is not None:
                    await groups.close()  # the offsets log closes with the manager
                if transactions is not None:
                    await transactions.close()
            finally:
                manager.close()
    say("strata: stopped cleanly")


class _NodeDoors:
    """A node process's listeners on the node's own address (api.supervisor): the Kafka
    and external listeners and HTTP on the sockets the supervisor handed down."""

    def __init__(self) -> None:
        self.kafka: list[KafkaServer] = []
        self.http: list[tuple[uvicorn.Server, asyncio.Task[None]]] = []

    async def close(self) -> None:
        for server, _ in self.http:
            server.should_exit = True
        for kafka in self.kafka:
            await kafka.close()
        for _, task in self.http:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, timeout=10)


async def _open_node_doors(
    doors: _NodeDoors,
    go: asyncio.Event,
    worker: WorkerSpec | None,
    broker: Broker,
    client_opts: dict[str, Any],
    app: Any,
    metrics: BrokerMetrics,
    http_options: dict[str, Any],
    registry_app: Callable[[], Any],
) -> None:
    if worker is None:
        return
    await go.wait()
    for fd, external in ((worker.kafka_fd, False), (worker.external_fd, True)):
        sock = _inherited(fd)
        if sock is not None:
            server = KafkaServer(broker, external=external, **client_opts)
            await server.start(sock)
            doors.kafka.append(server)
    http = _inherited(worker.http_fd)
    assert http is not None
    doors.http.append(await _start_http(app, http, "http-node", **http_options))
    metrics_sock = _inherited(worker.metrics_fd)
    if metrics_sock is not None:
        node_app = create_metrics_app(metrics, NodeMetrics(broker, metrics))
        doors.http.append(await _start_http(node_app, metrics_sock, "metrics-node"))
    registry_sock = _inherited(worker.registry_fd)
    if registry_sock is not None:  # the node's schema registry listener
        doors.http.append(
            await _start_http(registry_app(), registry_sock, "schema-registry-node", **http_options)
        )


def _leader_address(view: Any) -> Callable[[str, int], str | None]:
    """A partition's leader's Kafka address (its replica listener where it has one:
    plaintext, no ACLs), for the Iceberg committer's reads of the hot tail."""

    def address(topic: str, partition: int) -> str | None:
        state = view.partition_state(topic, partition)
        live = view.brokers.get(state.leader) if state is not None else None
        if live is None:
            return None
        reg = live.registration
        return reg.replica_listener or f"{reg.host}:{reg.kafka_port}"

    return address


def _shutdown_upload(tiering: TieringService) -> Callable[[], Awaitable[None]]:
    async def upload() -> None:
        try:
            await tiering.upload_before_shutdown()
        except Exception:  # the stop goes on: what was not uploaded is still on local disk
            log.exception("upload at shutdown failed")

    return upload


def event_loop_factory(config: BrokerConfig) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop (0.5-0.9 of asyncio's CPU per small request, docs/benchmarks.md
    "Issue 24"); asyncio's own with ``STRATA_EVENT_LOOP=asyncio``, when uvloop is not
    installed, and with TLS.

    uvloop raises RuntimeError where asyncio's transports only log (a write on a transport
    the peer has reset). Every transport user in the broker process handles it as a lost
    connection: the Kafka listener's writer (api.kafka_server), a follower's fetcher
    (broker.fetcher: under a network cut it once ended the fetcher and the partition never
    regained its ISR), the admin socket (broker.store_socket). The S3 store (aiohttp), the
    etcd client (grpc.aio) and uvicorn support uvloop themselves; the Kafka client
    (kclient) uses blocking sockets.

    Not with TLS: the Kafka listener upgrades accepted connections with ``start_tls`` (to
    log failed handshakes), and uvloop's transport has already read the client's first
    handshake bytes into the stream by then, so the handshake never completes."""
    choice = os.environ.get("STRATA_EVENT_LOOP", "uvloop")
    if choice not in ("uvloop", "asyncio"):
        raise InvalidConfigError(f"STRATA_EVENT_LOOP must be uvloop or asyncio, got {choice!r}")
    if config.tls.enabled or choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(
    config: BrokerConfig,
    *,
    log_level: str = "INFO",
    worker: str | None = None,
    argv: Sequence[str] = (),
) -> int:
    """``strata serve``: one broker process, a node of several (``processes``, its
    supervisor: api.supervisor), or with ``worker`` one process of such a node."""
    from api.supervisor import (
        WorkerSpec,
        die_with_parent,
        resolve_processes,
        supervise,
        worker_config,
        worker_say,
    )

    logging.basicConfig(
        level=log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    spec = WorkerSpec.from_json(worker) if worker is not None else None
    soft, _ = raise_open_files()
    log.debug(  # debug: a start that fails must print one line only
        "open files: up to %d (about %d partitions of one segment each; ulimit -n raises it)",
        soft,
        soft // FDS_PER_PARTITION,
    )
    processes = 1 if spec is not None else resolve_processes(config.processes)
    if spec is not None:
        die_with_parent(spec.parent)
        config = worker_config(config, spec)
    factory = event_loop_factory(config)
    log.debug("event loop: %s", "asyncio" if factory is None else f"{factory.__module__}.{factory.__name__}")
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            if processes > 1:
                return runner.run(supervise(config, processes, argv))
            runner.run(serve(config, worker=spec, announce=worker_say if spec is not None else None))
    except KeyboardInterrupt:
        pass
    return 0
