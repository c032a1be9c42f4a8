"""Harness of the replication tests: a real etcd, real `strata serve --etcd` brokers on
loopback, TCP proxies between brokers, and a checker for acknowledged records.

* ``StrataNode`` is a ``BrokerProcess`` in cluster mode (``--etcd``, ``--broker-id``), that
  can also be paused (SIGSTOP) and resumed. Followers reach it through its own
  ``TcpProxy`` (its advertised inter-broker listener), so a test can cut it off from the
  other brokers while clients and etcd still reach it.
* ``Cluster`` starts the brokers, reads partition state straight from etcd, and waits for
  conditions (a new leader, a fully replicated topic...).
* ``PhantomBroker`` is a live registration in etcd with no broker behind it: a replica
  assigned to it never catches up (a reassignment onto it stays in progress).
* ``Workload`` produces with confluent-kafka (acks=all, idempotent), recording every
  acknowledged record from the delivery callbacks, and consumes continuously with
  another client; ``check`` then asserts that no acknowledged record is lost and each is
  at the offset it was acknowledged with, that each partition holds the producer's
  records once and in order, that the live consumer never saw a record the log does not
  hold, and that every replica's log is byte-identical up to the high watermark.

Waits are bounded (``WAIT``) and never part of an assertion about speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.metadata import ClusterView, PartitionState
from broker.status import read_view
from hot.errors import MetadataStoreError
from tests.broker.etcdlib import EtcdProcess
from tests.brokers import BrokerProcess

WAIT = 60.0  # upper bound of every wait; reached only when something is broken
CLUSTER_NAME = "strata-test"

# Short timings keep failovers quick; the lease TTL is long enough for a busy 2-core machine.
FAST_ENV = {
    "STRATA_CLUSTER_ID": CLUSTER_NAME,
    "STRATA_BROKER_SESSION_TIMEOUT_MS": "2000",
    "STRATA_REPLICA_LAG_TIME_MAX_MS": "2000",
    "STRATA_REPLICA_FETCH_WAIT_MAX_MS": "200",
    "STRATA_REPLICA_FETCH_BACKOFF_MS": "100",
    "STRATA_REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS": "500",
    "STRATA_ETCD_TIMEOUT_MS": "2000",
    "STRATA_LOG_SEGMENT_BYTES": "65536",
    "STRATA_LOG_REMOTE_STORAGE_ENABLE": "false",
}


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT, step: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)


# --- a TCP proxy we can cut -------------------------------------------------------------------


class TcpProxy:
    """Forwards connections from a loopback port to ``target_port``, one thread pair per
    connection. ``cut()`` resets every connection and refuses new ones (accepted and
    closed at once) until ``heal()``."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.target_port = 0
        self._cut = False
        self._closed = False
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True, name=f"proxy-{self.port}")
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            socks, self._socks = self._socks, set()
        for s in socks:
            _abort(s)

    def heal(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._thread.join(timeout=5)
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                refuse = self._cut or self.target_port == 0
            if refuse:
                _abort(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                _abort(client)
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                # Forward each piece at once: with Nagle, a frame's tail would wait for the
                # peer's delayed ACK (~40 ms) behind its head.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._cut:
                    _abort(client)
                    _abort(upstream)
                    continue
                self._socks |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._socks.discard(src)
                self._socks.discard(dst)
            _abort(src)
            _abort(dst)


def _abort(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
    with contextlib.suppress(OSError):
        s.close()


# --- brokers -------------------------------------------------------------------------------------


class StrataNode(BrokerProcess):
    """A cluster-mode broker (``--etcd``, fixed ``--broker-id``) behind its own proxy."""

    def __init__(
        self, data_dir: Path, broker_id: int, etcd_port: int, env: dict[str, str], *, proxied: bool = True
    ) -> None:
        self.broker_id = broker_id
        self.proxy = TcpProxy()  # in front of its Kafka listener, for the other brokers
        self.etcd_proxy = TcpProxy()  # between it and etcd
        self.etcd_proxy.target_port = etcd_port
        args = ["--broker-id", str(broker_id)]
        if proxied:
            args += ["--etcd", self.etcd_proxy.address, "--inter-broker-listener", self.proxy.address]
        else:  # direct connections (benchmarks): isolate() has no effect
            args += ["--etcd", f"127.0.0.1:{etcd_port}"]
        super().__init__(data_dir, *args, env=env)

    def start(self, timeout: float = WAIT) -> StrataNode:
        try:
            super().start(timeout)
        except RuntimeError as exc:
            # A restart reuses the ports, and on a shared machine another process may have
            # taken one meanwhile: take fresh ones (clients learn them from Metadata).
            if "Address already in use" not in str(exc):
                raise
            self.kafka_port = self.http_port = 0
            super().start(timeout)
        self.proxy.target_port = self.kafka_port
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.running:
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGCONT)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self.resume()
        super().kill(sig)

    def isolate(self, *, from_etcd: bool = False) -> None:
        """Cut it off from the other brokers (and from etcd): it keeps running and its
        clients still reach it."""
        self.proxy.cut()
        if from_etcd:
            self.etcd_proxy.cut()

    def reconnect(self) -> None:
        self.proxy.heal()
        self.etcd_proxy.heal()

    def close(self) -> None:
        self.kill()
        self.proxy.close()
        self.etcd_proxy.close()


@dataclass
class Cluster:
    """``n`` brokers (ids 1..n) of one cluster on ``etcd``."""

    root: Path
    etcd: EtcdProcess
    n: int = 3
    env: dict[str, str] = field(default_factory=dict)
    proxied: bool = True  # brokers reach each other and etcd through TcpProxy (cuttable)
    nodes: dict[int, StrataNode] = field(default_factory=dict)

    def start(self) -> Cluster:
        env = {**FAST_ENV, **self.env}
        for i in range(1, self.n + 1):
            self.nodes[i] = StrataNode(
                self.root / f"broker{i}", i, self.etcd.client_port, env, proxied=self.proxied
            )
        for node in self.nodes.values():
            node.start()
        self.wait_registered()
        wait_until(lambda: self.view().controller is not None, "a controller")
        return self

    def close(self) -> None:
        for node in self.nodes.values():
            node.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values() if n.kafka_port)

    # --- metadata, straight from etcd ----------------------------------------------------------

    def view(self) -> ClusterView:
        """The cluster's metadata as etcd holds it now (retried while etcd is restarting)."""
        deadline = time.monotonic() + WAIT
        while True:
            try:
                return asyncio.run(read_view(self.etcd.endpoint, CLUSTER_NAME, timeout=5.0))
            except MetadataStoreError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def state(self, topic: str, partition: int) -> PartitionState:
        s = self.view().partition_state(topic, partition)
        assert s is not None, f"no state for {topic}-{partition}"
        return s

    def leader(self, topic: str, partition: int = 0) -> int:
        return self.state(topic, partition).leader

    def controller(self) -> int:
        c = self.view().controller
        assert c is not None
        return c.value.broker_id

    def fully_replicated(self, topic: str) -> bool:
        view = self.view()
        va = view.topics.get(topic)
        if va is None:
            return False
        for p, replicas in enumerate(va.value.partitions):
            s = view.partition_state(topic, p)
            if s is None or s.leader not in view.brokers or set(s.isr) != set(replicas):
                return False
        return True

    def wait_fully_replicated(self, topic: str) -> None:
        wait_until(lambda: self.fully_replicated(topic), f"every replica of {topic} in sync")

    def wait_registered(self) -> None:
        """Every running broker is registered again: one paused for longer than the session
        timeout lost its lease and re-registers only after it resumed and noticed."""
        running = {i for i, n in self.nodes.items() if n.running}
        wait_until(lambda: set(self.view().brokers) == running, f"brokers {sorted(running)} registered")

    def wait_new_leader(self, topic: str, partition: int, old: int, old_epoch: int) -> int:
        def moved() -> bool:
            s = self.state(topic, partition)
            return (
                s.leader not in (-1, old) and s.leader_epoch > old_epoch and s.leader in self.view().brokers
            )

        wait_until(moved, f"a new leader of {topic}-{partition}")
        return self.leader(topic, partition)

    def fetch_error(self, broker_id: int, topic: str, current_leader_epoch: int) -> int:
        """The error code a Fetch of partition 0 naming ``current_leader_epoch`` gets."""
        from kclient import KafkaClient
        from kwire import ApiKey
        from kwire.address import HostPort
        from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic

        part = FetchPartition(
            partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=0, partition_max_bytes=1024
        )
        req = FetchRequest(max_wait_ms=0, min_bytes=1, topics=(FetchTopic(topic=topic, partitions=(part,)),))
        with KafkaClient.connect(HostPort("127.0.0.1", self.nodes[broker_id].kafka_port), timeout=30) as c:
            got = c.call(ApiKey.FETCH, req).responses[0].partitions[0]
        assert got.records is not None  # empty on errors, never null: librdkafka cannot parse null
        return int(got.error_code)

    # --- admin -----------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        rf: int = 3,
        min_isr: int = 2,
        assignment: list[list[int]] | None = None,
        configs: dict[str, str] | None = None,
    ) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        config = {"min.insync.replicas": str(min_isr), **(configs or {})}
        if assignment is not None:  # explicit replicas (partitions and rf follow from them)
            topic = NewTopic(name, len(assignment), replica_assignment=assignment, config=config)
        else:
            topic = NewTopic(name, num_partitions=partitions, replication_factor=rf, config=config)
        admin.create_topics([topic])[name].result(timeout=30)
        wait_until(lambda: self.fully_replicated(name), f"topic {name} created with all leaders")

    # --- replica bytes ---------------------------------------------------------------------------

    def log_bytes(self, broker_id: int, topic: str, partition: int, upto: int) -> bytes:
        """Every batch of the broker's replica with base offset below ``upto``, as stored."""
        d = self.nodes[broker_id].data_dir / "logs" / f"{topic}-{partition}"
        out = bytearray()
        for path in sorted(d.glob("*.log")):
            data = path.read_bytes()
            pos = 0
            while pos + 12 <= len(data):
                base, length = struct.unpack_from(">qi", data, pos)
                end = pos + 12 + length
                if length <= 0 or end > len(data) or base >= upto:
                    break
                out += data[pos:end]
                pos = end
        return bytes(out)

    def wait_replicas_identical(self, topic: str, partitions: int, hw: dict[int, int]) -> None:
        """Every replica's log equals the leader's, byte for byte, below the HW."""
        for p in range(partitions):
            replicas = self.view().topics[topic].value.partitions[p]

            def same() -> bool:
                logs = {b: self.log_bytes(b, topic, p, hw[p]) for b in replicas}  # noqa: B023
                return len(set(logs.values())) == 1

            wait_until(same, f"identical replicas of {topic}-{p} below {hw[p]}")
            assert len(self.log_bytes(replicas[0], topic, p, hw[p])) > 0 or hw[p] == 0


# --- a registration without a broker ---------------------------------------------------------------


class PhantomBroker:
    """A live broker registration in etcd (a real lease, kept alive) with no broker
    process behind it: a replica assigned to it never fetches, so a reassignment onto it
    stays in progress until cancelled, deterministically."""

    def __init__(self, etcd: EtcdProcess, broker_id: int) -> None:
        self.etcd = etcd
        self.broker_id = broker_id
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="phantom-broker")
        self._client: Any = None

    def start(self) -> PhantomBroker:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._register(), self._loop).result(WAIT)
        return self

    async def _register(self) -> None:
        from broker.etcd import EtcdClient
        from broker.keys import KeyLayout
        from broker.metadata import MetadataClient

        etcd = await EtcdClient(self.etcd.endpoint, timeout=5.0).connect()
        self._client = MetadataClient(etcd, KeyLayout(CLUSTER_NAME), lease_ttl=2)
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()  # nothing listens there
        await self._client.register("127.0.0.1", port, port, broker_id=self.broker_id)

    async def _close(self) -> None:
        if self._client is not None:
            await self._client.close(deregister=True)
            await self._client.etcd.close()

    def close(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(WAIT)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(WAIT)


# --- the workload and its checker ------------------------------------------------------------------


def _seq(value: bytes) -> int:
    return int(value.split(b"-", 1)[0])


def _disorder(records: list[tuple[int, bytes]], seqs: list[int]) -> str:
    """Where the producer's sequence stops increasing: (offset, seq) around each of the
    first three places (what to look up in the replicas' logs)."""
    out = []
    for i in range(1, len(seqs)):
        if seqs[i] <= seqs[i - 1]:
            out.append([(records[j][0], seqs[j]) for j in range(max(0, i - 2), min(len(seqs), i + 2))])
            if len(out) == 3:
                break
    return f"{out} ({len(seqs) - len(set(seqs))} duplicate records)"


class Workload:
    """Continuous acks=all production (idempotent) and consumption of one topic."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, rate: float = 300.0) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.failed: list[tuple[bytes, str]] = []
        self.consumed: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.sent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_consumer = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    # --- production ------------------------------------------------------------------------------

    def _producer_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "request.timeout.ms": 10000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000,
            "socket.connection.setup.timeout.ms": 3000,
            "reconnect.backoff.max.ms": 500,
        }

    def _produce_loop(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(self._producer_config())
        seq = 0

        def on_delivery(err: Any, msg: Any) -> None:
            with self._lock:
                if err is None:
                    self.acked[msg.partition()].append((msg.offset(), msg.value()))
                else:
                    self.failed.append((msg.value(), str(err)))

        started = time.monotonic()
        while not self._stop.is_set():
            due = started + seq / self.rate
            now = time.monotonic()
            if due > now:
                producer.poll(min(due - now, 0.05))
                continue
            value = b"%09d-%s" % (seq, b"x" * 40)
            try:
                producer.produce(
                    self.topic, value=value, partition=seq % self.partitions, on_delivery=on_delivery
                )
            except BufferError:
                producer.poll(0.1)
                continue
            seq += 1
            self.sent = seq
            producer.poll(0)
        remaining = producer.flush(150)
        if remaining:
            self.errors.append(f"{remaining} messages neither acknowledged nor failed at the end")

    # --- consumption -----------------------------------------------------------------------------

    def _consumer(self, group: str) -> Any:
        from confluent_kafka import Consumer

        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
                "fetch.wait.max.ms": 100,
                "socket.connection.setup.timeout.ms": 3000,
                "reconnect.backoff.max.ms": 500,
            }
        )

    def _consume_loop(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        consumer = self._consumer(f"live-{self.topic}")
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        try:
            while not self._stop_consumer.is_set():
                msg = consumer.poll(0.1)
                if msg is None or msg.error() is not None:
                    continue
                with self._lock:
                    self.consumed[msg.partition()].append((msg.offset(), msg.value()))
        finally:
            consumer.close()

    def start(self) -> Workload:
        for target in (self._produce_loop, self._consume_loop):
            t = threading.Thread(target=target, daemon=True, name=f"workload-{target.__name__}")
            t.start()
            self._threads.append(t)
        return self

    def acked_count(self, partition: int | None = None) -> int:
        with self._lock:
            if partition is not None:
                return len(self.acked[partition])
            return sum(len(v) for v in self.acked.values())

    def acked_since(self, partition: int, index: int) -> list[tuple[int, bytes]]:
        with self._lock:
            return list(self.acked[partition][index:])

    def wait_progress(self, more: int = 50) -> None:
        """Until ``more`` further records were acknowledged (production goes on)."""
        target = self.acked_count() + more
        wait_until(lambda: self.acked_count() >= target, f"{more} more acknowledged records")

    def stop(self) -> None:
        self._stop.set()
        self._threads[0].join(timeout=200)
        assert not self._threads[0].is_alive(), "producer did not finish"

    def stop_consumer(self) -> None:
        self._stop_consumer.set()
        self._threads[1].join(timeout=60)

    # --- the checker -----------------------------------------------------------------------------

    def read_all(self) -> tuple[dict[int, list[tuple[int, bytes]]], dict[int, int]]:
        """Every record of every partition below the high watermark, by a fresh consumer."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        consumer = self._consumer(f"check-{self.topic}")
        try:
            hw = {}
            for p in range(self.partitions):
                _, hw[p] = consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=30)
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(self.partitions)}

            def done() -> bool:
                return all(
                    (records[p][-1][0] + 1 if records[p] else 0) >= hw[p] for p in range(self.partitions)
                )

            deadline = time.monotonic() + WAIT
            while not done():
                assert time.monotonic() < deadline, "could not read the topic up to its high watermark"
                msg = consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                if msg.offset() < hw[msg.partition()]:
                    records[msg.partition()].append((msg.offset(), msg.value()))
            return records, hw
        finally:
            consumer.close()

    def check(self, cluster: Cluster) -> dict[str, int]:
        """Assert the checker's properties (module docstring); returns counts for the log."""
        cluster.wait_fully_replicated(self.topic)
        records, hw = self.read_all()
        acked = {p: list(v) for p, v in self.acked.items()}
        total_acked = sum(len(v) for v in acked.values())
        assert total_acked > 0, "nothing was acknowledged"
        for p in range(self.partitions):
            log = dict(records[p])
            offsets = [o for o, _ in records[p]]
            assert offsets == sorted(set(offsets)), f"partition {p}: offsets not increasing"
            # None lost, each at the offset its acknowledgement named.
            for offset, value in acked[p]:
                assert log.get(offset) == value, (
                    f"partition {p}: acknowledged record {value[:9]!r} at offset {offset} "
                    f"is {'missing' if offset not in log else repr(log[offset][:9])} in the log"
                )
            # The idempotent producer's records: once each, in production order.
            seqs = [_seq(v) for _, v in records[p]]
            assert seqs == sorted(set(seqs)), (
                f"partition {p}: duplicates or reordering in the log: {_disorder(records[p], seqs)}; "
                f"failed deliveries: {len(self.failed)} {self.failed[:5]}"
            )
            # The live consumer saw only records the log holds, at their offsets, in order.
            seen = [o for o, _ in self.consumed[p]]
            assert seen == sorted(set(seen)), f"partition {p}: live consumer saw offsets out of order"
            for offset, value in self.consumed[p]:
                if offset < hw[p]:
                    assert log.get(offset) == value, (
                        f"partition {p}: consumer saw {offset} that is not in the log"
                    )

        # Consumers kept working through the leader changes: the live one got everything.
        def caught_up() -> bool:
            with self._lock:
                return all(
                    {o for o, _ in self.consumed[p]} >= set(range(hw[p])) for p in range(self.partitions)
                )

        wait_until(caught_up, "the live consumer to read every record")
        cluster.wait_replicas_identical(self.topic, self.partitions, hw)
        return {
            "acked": total_acked,
            "failed": len(self.failed),
            "sent": self.sent,
            "records": sum(map(len, records.values())),
        }


@contextlib.contextmanager
def running_workload(
    cluster: Cluster, topic: str, partitions: int, rate: float = 300.0
) -> Iterator[Workload]:
    w = Workload(cluster.bootstrap, topic, partitions, rate=rate).start()
    try:
        yield w
    finally:
        if not w._stop.is_set():
            w._stop.set()
        w._stop_consumer.set()


@contextlib.contextmanager
def started_cluster(root: Path, **kwargs: Any) -> Iterator[Cluster]:
    """A real etcd under ``root`` and a started ``Cluster(root, etcd, **kwargs)`` on it,
    both stopped on exit (the module fixtures' one body)."""
    etcd = EtcdProcess(root / "etcd").start()
    c = Cluster(root, etcd, **kwargs)
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()
