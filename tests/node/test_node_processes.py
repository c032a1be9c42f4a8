"""A node of several broker processes (``strata serve --processes N``, api.supervisor),
with real Kafka clients and real kill -9s.

Invariants, exact: every record a producer had acknowledged is read back, once (an
idempotent producer), in order within its partition, after a worker was killed, after a
restart with more and then fewer processes, and after the supervisor itself was killed;
no process outlives a killed supervisor; each partition directory exists in exactly one
process data dir.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.node_layout import NodeLayout
from tests.brokers import BrokerProcess

pytestmark = pytest.mark.timeout(600)

TOPIC = "orders"
PARTITIONS = 6


def _workers(data_dir: Path) -> list[int]:
    """Pids of this node's worker processes (their command line names the data dir)."""
    out = subprocess.run(["pgrep", "-f", f'"data_dir":"{data_dir}'], capture_output=True, text=True)
    found = [int(p) for p in out.stdout.split()]
    out = subprocess.run(
        ["pgrep", "-f", f'"data_dir":"{data_dir}/processes/'], capture_output=True, text=True
    )
    return sorted({*found, *(int(p) for p in out.stdout.split())})


def _worker_pid(data_dir: Path, index: int) -> int:
    out = subprocess.run(
        ["pgrep", "-f", f'"index":{index},.*"data_dir":"{data_dir}'], capture_output=True, text=True
    )
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 1, f"process {index}: {pids}"
    return pids[0]


class Acked:
    """An idempotent producer remembering what was acknowledged, per partition, in order."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 60000,
            }
        )
        self.acked: dict[int, list[bytes]] = {}
        self.failed = 0
        self.n = 0

    def _done(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.failed += 1
        else:
            self.acked.setdefault(msg.partition(), []).append(msg.value())  # type: ignore[attr-defined]

    def send(self, count: int, pause: float = 0.0) -> None:
        for _ in range(count):
            self.producer.produce(
                TOPIC, value=f"r{self.n:06d}".encode(), key=str(self.n).encode(), on_delivery=self._done
            )
            self.n += 1
            self.producer.poll(0)
            if pause:
                time.sleep(pause)

    def flush(self) -> None:
        assert self.producer.flush(90) == 0

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.acked.values())


def _read_all(bootstrap: str) -> dict[int, list[bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    got: dict[int, list[bytes]] = {}
    idle_since = time.monotonic()
    deadline = time.monotonic() + 90
    try:
        # Idle for 8 s once records came (the group's join comes first: up to the deadline).
        while time.monotonic() < deadline and (not got or time.monotonic() - idle_since < 8):
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.setdefault(msg.partition(), []).append(msg.value())
            idle_since = time.monotonic()
    finally:
        consumer.close()
    return got


def _check(acked: Acked, bootstrap: str) -> None:
    got = _read_all(bootstrap)
    for p, values in acked.acked.items():
        have = got.get(p, [])
        assert len(have) == len(set(have)), f"partition {p}: a record read twice"
        assert set(values) <= set(have), (
            f"partition {p}: {len(set(values) - set(have))} acknowledged records lost"
        )
        index = {v: i for i, v in enumerate(have)}
        order = [index[v] for v in values]
        assert order == sorted(order), f"partition {p}: out of order"
    assert sum(len(v) for v in got.values()) == acked.total  # nothing but what was acknowledged


def _dirs_once(data_dir: Path) -> None:
    layout = NodeLayout(data_dir)
    seen: dict[str, Path] = {}
    for k in layout.existing_processes():
        logs = layout.process_dir(k) / "logs"
        for d in logs.glob(f"{TOPIC}-*") if logs.is_dir() else []:
            assert d.name not in seen, f"{d.name} in {seen[d.name]} and {d}"
            seen[d.name] = d
    assert len(seen) == PARTITIONS


def _leaders(bootstrap: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=20)
    return {p.id: p.leader for p in md.topics[TOPIC].partitions.values()}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "node", "--processes", "2")
    b.start(timeout=120)
    try:
        yield b
    finally:
        b.kill()
        for _ in range(100):  # workers die with their supervisor (PR_SET_PDEATHSIG)
            if not _workers(b.data_dir):
                break
            time.sleep(0.1)


def test_worker_kill_restarts_and_n_changes_keep_every_acknowledged_record(node: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(30)
    md = admin.list_topics(timeout=20)
    assert len(md.brokers) == 2  # the node's address answers for both processes
    assert len(set(_leaders(node.bootstrap).values())) == 2  # partitions over both

    acked = Acked(node.bootstrap)
    acked.send(300)
    victim = _worker_pid(node.data_dir, 2)
    os.kill(victim, signal.SIGKILL)
    acked.send(700, pause=0.002)  # through the kill and the restart: only its partitions wait
    acked.flush()
    assert acked.failed == 0 and acked.total == 1000
    assert "exited with code -9; restarting" in node.output()
    assert _worker_pid(node.data_dir, 2) != victim
    _check(acked, node.bootstrap)

    # More processes: partitions move by rename, their leaders follow, nothing is copied.
    assert node.stop(timeout=90) == 0
    node.extra_args = ["--processes", "3"]
    node.start(timeout=120)
    assert "partition directories moved" in node.output()
    assert len(set(_leaders(node.bootstrap).values())) == 3
    _dirs_once(node.data_dir)
    acked = _more(acked, node.bootstrap)
    _check(acked, node.bootstrap)

    # One process again: every partition comes home to the node's data dir.
    assert node.stop(timeout=90) == 0
    node.extra_args = []
    node.start(timeout=120)
    assert set(_leaders(node.bootstrap).values()) == {0}
    _dirs_once(node.data_dir)
    _check(acked, node.bootstrap)


def _more(acked: Acked, bootstrap: str) -> Acked:
    """A new producer (new address set) continuing the same record of acknowledgements."""
    fresh = Acked(bootstrap)
    fresh.acked, fresh.n = acked.acked, acked.n
    fresh.send(200)
    fresh.flush()
    assert fresh.failed == 0
    return fresh


def test_supervisor_kill_stops_every_worker_and_the_next_start_recovers(node: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(30)
    acked = Acked(node.bootstrap)
    acked.send(500)
    acked.flush()
    workers = _workers(node.data_dir)
    assert len(workers) == 2
    assert node.proc is not None
    os.kill(node.proc.pid, signal.SIGKILL)  # the supervisor alone
    node.proc.wait(10)
    deadline = time.monotonic() + 30
    while _workers(node.data_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _workers(node.data_dir) == [], "workers outlived their supervisor"
    node.start(timeout=120)
    _dirs_once(node.data_dir)
    _check(acked, node.bootstrap)


def test_replicas_never_share_a_machine(node: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    fut = admin.create_topics([NewTopic("twice", num_partitions=1, replication_factor=2)])["twice"]
    with pytest.raises(Exception) as info:
        fut.result(30)
    err = info.value.args[0]
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "machine" in err.str()


def test_the_node_address_shows_the_whole_node(node: BrokerProcess) -> None:
    import json
    import urllib.request

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(30)
    acked = Acked(node.bootstrap)
    acked.send(60)
    acked.flush()
    leaders = set(_leaders(node.bootstrap).values())
    assert len(leaders) == 2
    for _ in range(4):  # whichever process accepts the connection
        with urllib.request.urlopen(f"{node.http_url}/metrics", timeout=20) as resp:
            text = resp.read().decode()
        for b in leaders:
            assert f'strata_node_process_up{{broker="{b}"}} 1.0' in text
            assert f'strata_log_end_offset{{broker="{b}",partition=' in text
        with urllib.request.urlopen(f"{node.http_url}/v3/clusters/strata-local/brokers", timeout=20) as resp:
            assert {b["broker_id"] for b in json.loads(resp.read())["data"]} == leaders
