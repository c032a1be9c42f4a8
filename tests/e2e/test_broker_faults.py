"""Fault injection against a real broker process: malformed frames, kill -9 under load, clean restarts."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(300)


def _api_versions_v0(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _healthy(bootstrap: str) -> None:
    """A well-formed request on a fresh connection is still answered."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_api_versions_v0(7))
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        body = _recv_exact(s, size)
        corr, err = struct.unpack_from(">ih", body)
        assert corr == 7 and err == 0


def _closed_by_peer(sock: socket.socket, timeout: float = 10.0) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(struct.pack(">i", 0x7FFFFFFF), id="absurd-length"),
        pytest.param(struct.pack(">i", -5), id="negative-length"),
        pytest.param(struct.pack(">i", 6) + struct.pack(">hhh", 999, 0, 1), id="unknown-api-key"),
        pytest.param(struct.pack(">i", 3) + b"\x00\x12\x00", id="truncated-header"),
        pytest.param(struct.pack(">i", 40) + struct.pack(">hhi", 3, 12, 1) + b"\xff" * 32, id="garbage-body"),
    ],
)
def test_malformed_frame_closes_only_that_connection(broker: BrokerProcess, payload: bytes) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    bystander = socket.create_connection((host, int(port)), timeout=10)
    with socket.create_connection((host, int(port)), timeout=10) as bad:
        bad.sendall(payload)
        assert _closed_by_peer(bad), "broker kept a connection open after a malformed frame"
    # the other connection, opened before, keeps working
    bystander.sendall(_api_versions_v0(11))
    size = struct.unpack(">i", _recv_exact(bystander, 4))[0]
    assert struct.unpack_from(">i", _recv_exact(bystander, size))[0] == 11
    bystander.close()
    _healthy(broker.bootstrap)


def test_disconnect_mid_request_and_random_frames(broker: BrokerProcess) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    rng = random.Random(1234)
    for i in range(150):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            kind = i % 3
            if kind == 0:  # announce a body, send part of it, hang up
                s.sendall(
                    struct.pack(">i", 1000) + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 999)))
                )
            elif kind == 1:  # random header + body of the announced size
                body = struct.pack(
                    ">hhi", rng.choice([0, 1, 3, 18, 19, 20, 32, 22, 2]), rng.randrange(-2, 20), i
                )
                body += bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
                s.sendall(struct.pack(">i", len(body)) + body)
                s.settimeout(5)
                try:
                    s.recv(65536)
                except (TimeoutError, ConnectionResetError):
                    pass
            else:  # a few random bytes
                s.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12))))
    _healthy(broker.bootstrap)
    assert broker.proc is not None and broker.proc.poll() is None


def test_kill9_under_acks_all_load_loses_nothing_acknowledged(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    b = broker_factory(data_dir=tmp_path / "data")
    topic = f"kill-{uuid.uuid4().hex[:6]}"
    parts = 3
    create_topic(b.bootstrap, topic, parts)

    acked: dict[tuple[int, int], bytes] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            with lock:
                acked[(msg.partition(), msg.offset())] = msg.value()  # type: ignore[attr-defined]

    producer = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "enable.idempotence": False,
            "message.timeout.ms": 60000,
            "reconnect.backoff.max.ms": 500,
        }
    )

    def produce_loop() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=f"rec-{i:09d}".encode() + b"." * 90, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.01)
            if i % 1000 == 0:
                producer.poll(0)

    t = threading.Thread(target=produce_loop, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 20000 and time.monotonic() < deadline:
        time.sleep(0.05)
    b.kill()  # SIGKILL mid-load
    stop.set()
    t.join(10)
    with lock:
        acked_at_kill = dict(acked)
    assert len(acked_at_kill) > 1000, "load did not get going before the kill"

    b.start()  # same data dir and ports
    producer.flush(60)  # retries of in-flight batches may land now (duplicates are allowed)
    with lock:
        final_acked = dict(acked)

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    hw = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(parts)}
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 120
    while sum(1 for _ in seen) < sum(hw.values()) and time.monotonic() < deadline:
        for m in c.consume(10000, timeout=0.5):
            if m.error():
                raise KafkaException(m.error())
            key = (m.partition(), m.offset())
            assert key not in seen, f"offset {key} delivered twice"
            seen[key] = m.value()
    c.close()
    missing = [k for k in final_acked if k not in seen]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    wrong = [k for k, v in final_acked.items() if seen[k] != v]
    assert not wrong, f"acknowledged offsets with different bytes: {wrong[:5]}"
    for p in range(parts):  # offsets dense: nothing corrupt skipped, no holes
        offs = sorted(o for (pp, o) in seen if pp == p)
        assert offs == list(range(hw[p]))


def test_sigterm_is_clean_and_restart_skips_recovery(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    topic = "clean"
    create_topic(b.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(100):
        p.produce(topic, value=str(i).encode())
    assert p.flush(30) == 0
    assert b.stop() == 0
    assert "stopped cleanly" in b.output()
    assert (b.data_dir / "logs" / ".clean_shutdown").exists()
    b.start()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused"})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 100)
    c.close()
