"""``strata serve --processes N``: one node made of N broker processes on this machine.

Why processes: a broker is one Python process, and one process uses one core (the GIL).
A node of N processes is a cluster of N brokers on one host (broker.node_layout): each
process is a broker of its own (its broker id, its own Kafka port, the partitions it
leads, its share of the group and transaction coordinators, its tiering and retention),
so Kafka clients route each request to the process that leads its partition by
themselves and no request is forwarded between processes. Shards behind one port would
need a forwarding hop (or a connection handed between processes) for every request
whose partition another shard leads; the cluster reuses what replication, the peer relay
and the clients already do.

The supervisor (this module, one small process):

* opens the node's metadata store, the embedded store on ``<data_dir>/meta`` (leases
  expiring by their TTL), and serves it to the processes over the admin socket
  (broker.store_socket, which ``strata users`` reaches too); in cluster mode (``--etcd``)
  the processes reach etcd themselves;
* gives each process slot its broker id (process 1: the configured one; process k:
  assigned once through the store and kept in ``processes/<k>/meta/broker.id``);
* moves partitions between the process data dirs when N changed (``rehome``);
* binds the node's listeners, the one address users know (Kafka, HTTP, external,
  metrics), and hands the listening sockets to every process: each process accepts
  connections on them as well as on its own Kafka port, which its registration
  advertises (port + k for process k; an ephemeral port when the listener's port is 0);
  the listening sockets outlive a process that dies, so the node's address never refuses
  a connection while one process restarts;
* restarts a process that dies (its leases revoked at once: its partitions are led again
  as soon as it is back), with a growing pause if it keeps dying;
* on SIGTERM/SIGINT stops every process (each hands over and uploads what the bucket
  lacks, as a single process does), waiting up to ``STOP_GRACE_S`` plus the upload grace.

Processes die with the supervisor: each sets ``PR_SET_PDEATHSIG`` = SIGTERM first thing
(kill -9 of the supervisor stops them cleanly, no orphans) and checks that its parent is
still the supervisor right after setting it (``die_with_parent``).

The supervisor's stdout carries the node's lines (``strata: kafka listener on ...``,
``strata: ready`` once every process is ready); a process's own lines are relayed as
``strata[k]: ...``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import json
import logging
import math
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from api.node_metrics import TOKEN_ENV
from api.process_io import bind_listener, say_line
from broker.cluster_config import ClusterConfig
from broker.config import BrokerConfig
from broker.embedded_store import EmbeddedMetadataStore, MetadataStoreLockedError
from broker.etcd import EtcdClient
from broker.keys import KeyLayout
from broker.metadata import MetadataClient
from broker.metadata_store import MetadataStore
from broker.node_layout import MAX_PROCESSES, NodeLayout, machine_name, rehome
from broker.store_socket import LocalStoreServer
from hot.errors import InvalidConfigError, MetadataStoreError, StorageError
from kwire.address import HostPort

log = logging.getLogger("strata.supervisor")

STOP_GRACE_S: Final = 60.0
START_TIMEOUT_S: Final = 300.0
RESTART_PAUSE_S: Final = (0.5, 30.0)  # first pause, longest pause
STABLE_S: Final = 60.0  # a process up this long has its restart pause reset
PR_SET_PDEATHSIG: Final = 1


def available_cores() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota
    (``cpu.max``; a container limited to 2.5 CPUs gets 3)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    with contextlib.suppress(OSError, ValueError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    return max(1, cores)


def resolve_processes(value: str | int) -> int:
    """``processes`` as configured: a count, or ``auto`` (``available_cores``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        text = str(value).strip().lower()
        if text == "auto":
            return min(available_cores(), MAX_PROCESSES)
        if not text.isdigit():
            raise InvalidConfigError(f"processes: expected a number or 'auto', got {value!r}")
        n = int(text)
    if not 1 <= n <= MAX_PROCESSES:
        raise InvalidConfigError(f"processes: must be in [1, {MAX_PROCESSES}] or 'auto', got {value!r}")
    return n


@dataclass(frozen=True)
class WorkerSpec:
    """What process k of a node is, passed to it as ``strata serve ... --worker JSON``."""

    index: int  # k, 1-based
    processes: int
    broker_id: int
    data_dir: str
    machine: str
    store_socket: str | None  # None: cluster mode, etcd as configured
    # Inherited listening sockets (file descriptors) of the node's listeners.
    kafka_fd: int
    http_fd: int
    external_fd: int | None = None
    metrics_fd: int | None = None
    registry_fd: int | None = None  # the schema registry's listener
    parent: int = 0  # the supervisor's pid
    # Open the node's listeners only on the supervisor's SIGUSR1 (every process ready):
    # the node's first start; a process restarted alone opens them once it is ready.
    wait_node: bool = True

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError) as exc:
            raise InvalidConfigError(f"--worker: not a process description: {exc}") from exc


def own_port(port: int, offset: int) -> int:
    """Process k's own port beside a node listener's ``port`` (0 stays ephemeral)."""
    if port == 0:
        return 0
    if port + offset > 65535:
        raise InvalidConfigError(f"port {port} + {offset} (a process's own port) is above 65535")
    return port + offset


def worker_config(config: BrokerConfig, spec: WorkerSpec) -> BrokerConfig:
    """The broker config of process ``spec.index``: its data dir, broker id and own
    ports (Kafka and external: the node's port + k; internal: + k - 1), its cluster
    reached through the store socket (embedded) or etcd."""
    k = spec.index
    cluster = config.cluster if config.cluster is not None else ClusterConfig.of_one(spec.broker_id)
    inter = cluster.inter_broker_listener
    if inter is not None:  # where followers fetch: each process's own (+ k - 1)
        host, _, port = inter.rpartition(":")
        inter = f"{host}:{own_port(int(port), k - 1)}"
    cluster = dataclasses.replace(
        cluster,
        broker_id=spec.broker_id,
        store_socket=Path(spec.store_socket) if spec.store_socket is not None else None,
        inter_broker_listener=inter,
    )
    kafka = config.kafka_listen
    changes: dict[str, Any] = {
        "data_dir": Path(spec.data_dir),
        "object_store": config.object_store_url,  # the node's bucket (by default under its data dir)
        "broker_id": spec.broker_id,
        "cluster": cluster,
        "kafka_listen": HostPort(kafka.host, own_port(kafka.port, k)),
        "http_listen": HostPort(config.http_listen.host, 0),
        "metrics_listen": None,
        "schema_registry_listen": None,  # the node's, handed down (WorkerSpec.registry_fd)
    }
    if config.advertised_listener is not None:
        adv = config.advertised_listener
        changes["advertised_listener"] = HostPort(adv.host, own_port(kafka.port, k)) if kafka.port else None
    if config.external_listen is not None:
        ext = config.external_listen
        changes["external_listen"] = HostPort(ext.host, own_port(ext.port, k))
        if config.external_advertised_listener is not None:
            ea = config.external_advertised_listener
            own = HostPort(ea.host, own_port(ext.port, k))
            changes["external_advertised_listener"] = own if ext.port else None
    if config.internal_listen is not None:
        il = config.internal_listen
        changes["internal_listen"] = HostPort(il.host, own_port(il.port, k - 1))
    return dataclasses.replace(config, **changes)


def die_with_parent(parent: int) -> None:
    """In a process of a node, first thing: SIGTERM when the supervisor dies (Linux
    ``PR_SET_PDEATHSIG``), and exit at once if it died already (before that call). Done
    by the process itself rather than between fork and exec, where the supervisor's
    threads make anything but exec unsafe."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        raise SystemExit("strata: the node's supervisor is gone; not starting")


def worker_say(line: str) -> None:
    """A process's stdout line for its supervisor: a supervisor gone (its pipe closed)
    must not stop the process's clean shutdown half-way."""
    with contextlib.suppress(OSError):
        say_line(line)


class _Process:
    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.proc: asyncio.subprocess.Process | None = None
        self.ready = asyncio.Event()
        self.started_at = 0.0
        self.pause = RESTART_PAUSE_S[0]
        self.relay: asyncio.Task[None] | None = None


class Supervisor:
    def __init__(
        self,
        config: BrokerConfig,
        processes: int,
        argv: Sequence[str],
        *,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.n = processes
        self.argv = list(argv)  # `serve` and its options, as this process got them
        self.say = announce or say_line
        self.layout = NodeLayout(config.data_dir)
        one = ClusterConfig.of_one(config.broker_id)
        self.cluster = config.cluster if config.cluster is not None else one
        self.store: MetadataStore | None = None
        self.client: MetadataClient | None = None
        self.server: LocalStoreServer | None = None
        self.sockets: dict[str, socket.socket] = {}
        self.procs: list[_Process] = []
        self.stopping = False
        # The processes' proof to each other that a request comes from the node
        # (api.node_metrics); in their environment, which only the node's user can read.
        self.token = secrets.token_hex(16)

    # --- start ------------------------------------------------------------------------------------

    async def _open_store(self) -> None:
        cluster = self.cluster
        store: MetadataStore
        if cluster.etcd is None:
            store = EmbeddedMetadataStore(self.config.data_dir / "meta", expire_leases=True)
        else:
            store = EtcdClient(cluster.etcd, timeout=cluster.etcd_timeout_s)
        try:
            await store.connect()
        except MetadataStoreLockedError as exc:
            raise MetadataStoreError(
                f"{self.config.data_dir} is in use by another Strata broker ({exc})"
            ) from None
        self.store = store
        self.client = MetadataClient(store, KeyLayout(self.config.cluster_id), lease_ttl=cluster.lease_ttl_s)
        await self.client.start()

    async def _broker_ids(self) -> tuple[list[int], list[int]]:
        """(the ids of processes 1..N, every id a process slot of this node ever had)."""
        assert self.client is not None
        layout = self.layout
        first = self.cluster.broker_id
        if first is None:  # cluster mode without --broker-id: kept like the others'
            first = layout.stored_broker_id(1)
            if first is None:
                first = await self.client.allocate_broker_id()
                layout.keep_broker_id(1, first)
        ids = [first]
        for k in range(2, self.n + 1):
            bid = layout.stored_broker_id(k)
            if bid is None:
                bid = await self.client.allocate_broker_id()
                layout.keep_broker_id(k, bid)
            ids.append(bid)
        if len(set(ids)) != len(ids):
            raise StorageError(f"process slots of {layout.data_dir} share a broker id: {ids}")
        every = set(ids)
        for k in layout.existing_processes():
            bid = layout.stored_broker_id(k) if k > 1 else first
            if bid is not None:
                every.add(bid)
        return ids, sorted(every)

    def _bind_listeners(self) -> None:
        c = self.config
        self.sockets["kafka"] = bind_listener(c.kafka_listen, backlog=4096, inheritable=True)
        self.sockets["http"] = bind_listener(c.http_listen, backlog=4096, inheritable=True)
        if c.external_listen is not None:
            self.sockets["external"] = bind_listener(c.external_listen, backlog=4096, inheritable=True)
        if c.metrics_listen is not None:
            self.sockets["metrics"] = bind_listener(c.metrics_listen, backlog=4096, inheritable=True)
        if c.schema_registry_listen is not None:
            self.sockets["registry"] = bind_listener(c.schema_registry_listen, backlog=1024, inheritable=True)

    def _spec(self, k: int, broker_id: int) -> WorkerSpec:
        s = self.sockets
        return WorkerSpec(
            index=k,
            processes=self.n,
            broker_id=broker_id,
            data_dir=str(self.layout.process_dir(k)),
            machine=machine_name(self.config.data_dir),
            store_socket=str(self.server.path) if self.server is not None else None,
            kafka_fd=s["kafka"].fileno(),
            http_fd=s["http"].fileno(),
            external_fd=s["external"].fileno() if "external" in s else None,
            metrics_fd=s["metrics"].fileno() if "metrics" in s else None,
            registry_fd=s["registry"].fileno() if "registry" in s else None,
            parent=os.getpid(),
        )

    async def _spawn(self, p: _Process) -> None:
        cmd = [sys.executable, "-m", "api.cli", *self.argv, "--worker", p.spec.to_json()]
        p.ready.clear()
        p.proc = await asyncio.create_subprocess_exec(
            *cmd,
            env={**os.environ, TOKEN_ENV: self.token},
            stdout=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
            pass_fds=[sock.fileno() for sock in self.sockets.values()],
        )
        p.started_at = time.monotonic()
        p.relay = asyncio.create_task(self._relay(p, p.proc), name=f"process-{p.spec.index}-out")

    async def _relay(self, p: _Process, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        k = p.spec.index
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith("strata: "):
                if line == "strata: ready":
                    p.ready.set()
                line = f"strata[{k}]: " + line[len("strata: ") :]
            say_line(line)

    async def start(self) -> None:
        await self._open_store()
        assert self.client is not None and self.store is not None
        ids, every = await self._broker_ids()
        done = await rehome(self.client, self.layout, ids, all_node_ids=every)
        if done.moved or done.rewritten:
            self.say(
                f"strata: {self.n} processes: {done.moved} partition directories moved,"
                f" {done.rewritten} partitions now led by another process"
            )
        self.layout.write_node_file(self.n)
        if self.cluster.etcd is None:
            self.server = LocalStoreServer(self.store, self.config.data_dir / "meta", self.config.cluster_id)
            await self.server.start()
        self._bind_listeners()
        self.procs = [_Process(self._spec(k, bid)) for k, bid in enumerate(ids, start=1)]
        for p in self.procs:
            await self._spawn(p)
        waits = [asyncio.create_task(p.ready.wait()) for p in self.procs]
        exits = [asyncio.create_task(p.proc.wait()) for p in self.procs if p.proc is not None]
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                while not all(p.ready.is_set() for p in self.procs):
                    await asyncio.wait([*waits, *exits], return_when=asyncio.FIRST_COMPLETED)
                    dead = [p for p in self.procs if p.proc is not None and p.proc.returncode is not None]
                    if dead:
                        k, code = dead[0].spec.index, dead[0].proc.returncode  # type: ignore[union-attr]
                        raise StorageError(
                            f"process {k} of the node exited with code {code} during start-up (log above)"
                        )
        finally:
            for t in (*waits, *exits):
                t.cancel()
        for p in self.procs:
            p.spec = dataclasses.replace(p.spec, wait_node=False)  # for its restarts
            if p.proc is not None and p.proc.returncode is None:
                p.proc.send_signal(signal.SIGUSR1)
        self._announce()

    def _announce(self) -> None:
        c = self.config
        kafka = self.sockets["kafka"].getsockname()
        http = self.sockets["http"].getsockname()
        ids = ", ".join(str(p.spec.broker_id) for p in self.procs)
        self.say(f"strata: node of {self.n} processes (broker ids {ids}) on {c.data_dir.resolve()}")
        self.say(f"strata: kafka listener on {HostPort(c.kafka_listen.host, kafka[1])} (the node's address)")
        scheme = "https" if c.tls.enabled else "http"
        if c.tls.enabled:
            self.say(f"strata: http listener on {HostPort(c.http_listen.host, http[1])} ({scheme})")
        else:
            self.say(f"strata: http listener on http://{HostPort(c.http_listen.host, http[1])}")
        if "registry" in self.sockets and c.schema_registry_listen is not None:
            port = self.sockets["registry"].getsockname()[1]
            where = HostPort(c.schema_registry_listen.host, port)
            self.say(f"strata: schema registry listener on {scheme}://{where}")
        self.say("strata: ready")

    # --- run --------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        watchers = {asyncio.create_task(self._watch(p)) for p in self.procs}
        try:
            await stop.wait()
        finally:
            self.stopping = True
            for t in watchers:
                t.cancel()
            await self._stop_all()

    async def _watch(self, p: _Process) -> None:
        while True:
            assert p.proc is not None
            code = await p.proc.wait()
            if self.stopping:
                return
            k, bid = p.spec.index, p.spec.broker_id
            await self._revoke(p)
            if time.monotonic() - p.started_at > STABLE_S:
                p.pause = RESTART_PAUSE_S[0]
            log.warning(
                "process %d (broker %d) exited with code %s; restarting in %.1f s", k, bid, code, p.pause
            )
            self.say(f"strata: process {k} (broker {bid}) exited with code {code}; restarting")
            await asyncio.sleep(p.pause)
            p.pause = min(p.pause * 2, RESTART_PAUSE_S[1])
            if self.stopping:
                return
            await self._spawn(p)

    async def _revoke(self, p: _Process) -> None:
        """The dead process's leases, revoked at once: its registration goes (the
        controller moves its partitions' leadership to another machine's replica, if
        any) and its next incarnation registers without waiting for the TTL."""
        assert p.proc is not None
        try:
            if self.server is not None:
                revoked = await self.server.revoke_leases_of(p.proc.pid)
                log.info("process %d: %d leases revoked", p.spec.index, revoked)
            elif self.client is not None and self.store is not None:
                live = self.client.view.brokers.get(p.spec.broker_id)
                if live is not None and live.lease:
                    await self.store.revoke_lease(live.lease)
        except MetadataStoreError as exc:  # the lease then runs out by its TTL
            log.warning("process %d: its leases were not revoked: %s", p.spec.index, exc)

    async def _stop_all(self) -> None:
        running = [p for p in self.procs if p.proc is not None and p.proc.returncode is None]
        for p in running:
            assert p.proc is not None
            with contextlib.suppress(ProcessLookupError):
                p.proc.send_signal(signal.SIGTERM)
        grace = STOP_GRACE_S + self.config.tiering.shutdown_upload_grace_ms / 1000
        waits = [p.proc.wait() for p in running if p.proc is not None]
        try:
            async with asyncio.timeout(grace):
                await asyncio.gather(*waits)
        except TimeoutError:
            for p in running:
                if p.proc is not None and p.proc.returncode is None:
                    log.error("process %d did not stop within %.0f s: killed", p.spec.index, grace)
                    with contextlib.suppress(ProcessLookupError):
                        p.proc.kill()
            await asyncio.gather(*(p.proc.wait() for p in running if p.proc is not None))
        for p in self.procs:
            if p.relay is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(p.relay, 5)

    async def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()
        if self.server is not None:
            await self.server.close()
        if self.client is not None:
            await self.client.close(deregister=False)
        if self.store is not None:
            await self.store.close()

    @property
    def clean(self) -> bool:
        return all(p.proc is not None and p.proc.returncode == 0 for p in self.procs)


async def supervise(
    config: BrokerConfig,
    processes: int,
    argv: Sequence[str],
    *,
    announce: Callable[[str], None] | None = None,
) -> int:
    say = announce or say_line
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    sup = Supervisor(config, processes, argv, announce=say)
    try:
        await sup.start()
        await sup.run(stop)
    finally:
        sup.stopping = True
        await sup._stop_all()
        await sup.close()
    if sup.clean:
        say("strata: stopped cleanly")
        return 0
    return 1
