"""No request is answered before the broker can answer it correctly (issue 32, api.startup_gate).

A client that connects in a loop from the moment ``strata serve`` is spawned, and sends
CreateTopics through librdkafka's admin client as soon as a connection opens, completes
within 2 s: its first requests wait for the start instead of getting a Metadata answer
with no brokers and no controller (after which librdkafka waits ~25 s for its next
metadata refresh). Over restarts (``RESTARTS``) of a single node (plaintext, and twice
with SASL_SSL) and of one broker at a time of a 3-broker etcd cluster while the other
two stay up. HTTP requests made during the start are answered 503 "starting"
(``/healthz``) or wait; none gets a wrong answer.

The 2 s bound is the issue's: the stall it guards against is 25 s, and from the bind to
"ready" a start takes 0.3-1 s here on a busy 2-core machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.broker.clusterlib import Cluster, started_cluster
from tests.broker.security.tlslib import Pki, make_pki, server_env
from tests.brokers import ROOT, BrokerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

# The count: 20 restarts of each (plus the two SASL_SSL ones), each a start raced by
# a client; about 5 minutes on a busy 2-core machine. STRATA_TEST_READY_RESTARTS=N runs
# fewer while working on it.
RESTARTS = int(os.environ.get("STRATA_TEST_READY_RESTARTS", "20"))
# Each test restarts a broker 20+ times: bounded well above what that takes.
pytestmark = pytest.mark.timeout(900)
BOUND_S = 2.0  # the bound, from the connection opening to CreateTopics answered
CONNECT_WAIT_S = 60.0  # the process's start-up before it binds, on a busy machine
USERS_ADD = (sys.executable, "-m", "api.cli", "users", "add")


class _Starter(threading.Thread):
    """``broker.start()`` (spawn, wait for "strata: ready") off the test's thread."""

    def __init__(self, broker: BrokerProcess) -> None:
        super().__init__(daemon=True)
        self.broker = broker
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.broker.start()
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def finish(self) -> None:
        self.join(timeout=90)
        assert not self.is_alive(), "the broker did not start"
        if self.error is not None:
            raise self.error


def _await_port(port: int, starter: _Starter) -> None:
    """Return as soon as a TCP connection to ``port`` opens."""
    deadline = time.monotonic() + CONNECT_WAIT_S
    while time.monotonic() < deadline:
        if starter.error is not None:
            raise starter.error
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.002)
    raise TimeoutError(f"nothing listened on port {port} after {CONNECT_WAIT_S:.0f} s")


def _create_topic_on_connect(
    broker: BrokerProcess, port: int, topic: str, rf: int, conf: dict[str, str] | None = None
) -> float:
    """Start ``broker``, connect from the spawn on, create ``topic`` at once; the seconds
    from the connection opening to CreateTopics answered."""
    starter = _Starter(broker)
    starter.start()
    try:
        _await_port(port, starter)
        opened = time.monotonic()
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", **(conf or {})})
        futures = admin.create_topics([NewTopic(topic, 1, rf)], request_timeout=30)
        futures[topic].result(timeout=30)
        took = time.monotonic() - opened
    finally:
        starter.finish()
    return took


def _restart_loop(broker: BrokerProcess, prefix: str, n: int, conf: dict[str, str] | None = None) -> None:
    took: list[float] = []
    for i in range(n):
        broker.stop()
        took.append(_create_topic_on_connect(broker, broker.kafka_port, f"{prefix}-{i}", 1, conf))
    slow = [f"{t:.2f}" for t in took if t >= BOUND_S]
    assert not slow, f"CreateTopics right after the connection took {slow} s (all: {took})"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_single_node_answers_a_client_that_connects_during_start_up(tmp_path: Path, pki: Pki) -> None:
    """Plaintext with HTTP requests racing the start too, then SASL_SSL (the TLS handshake
    runs at once, the requests wait) on the same data dir and ports."""
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()  # picks the ports, kept on restarts
    http_answers: list[tuple[str, int, Any]] = []
    stop_polling = threading.Event()

    def poll_http() -> None:
        # From the moment of each spawn: /healthz is 503 "starting" or 200 "ok", and
        # /brokers (which waits for the start) is never an empty list.
        with httpx.Client(base_url=broker.http_url, timeout=30) as client:
            while not stop_polling.is_set():
                for path in ("/healthz", "/brokers"):
                    try:
                        r = client.get(path)
                    except httpx.TransportError:
                        continue
                    http_answers.append((path, r.status_code, r.json()))
                time.sleep(0.02)

    poller = threading.Thread(target=poll_http, daemon=True)
    poller.start()
    try:
        try:
            _restart_loop(broker, "single", RESTARTS)
        finally:
            stop_polling.set()
            poller.join(timeout=60)
        for path, status, body in http_answers:
            if path == "/healthz":
                assert (status, body.get("status")) in ((503, "starting"), (200, "ok")), (path, status, body)
            else:
                assert status == 200 and body["brokers"], (path, status, body)
        assert any(status == 503 for _, status, _ in http_answers), "no HTTP request fell in a start"

        # SASL_SSL: the user is added while the broker runs (through its admin socket).
        added = subprocess.run(
            [*USERS_ADD, "alice", "--password-stdin", "--data-dir", str(data)],
            cwd=ROOT,
            input="alice-pw-3c1f\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert added.returncode == 0, added.stderr
        broker.env = {**server_env(pki), "STRATA_SASL_MECHANISMS": "PLAIN"}
        conf = {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-pw-3c1f",
        }
        _restart_loop(broker, "sasl", 2, conf)
    finally:
        broker.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-ready")
    with started_cluster(root) as c:
        yield c


def test_cluster_broker_answers_a_client_that_connects_during_its_start_up(cluster: Cluster) -> None:
    """One broker at a time restarts while the other two stay up; the client knows only
    the restarting one, and creates a topic replicated on all three."""
    took: list[float] = []
    for i in range(RESTARTS):
        node = cluster.nodes[1 + i % 3]
        node.stop()
        took.append(_create_topic_on_connect(node, node.kafka_port, f"cluster-{i}", 3))
    slow = [f"{t:.2f}" for t in took if t >= BOUND_S]
    assert not slow, f"CreateTopics right after the connection took {slow} s (all: {took})"
