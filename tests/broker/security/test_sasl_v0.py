"""SaslHandshake v0: raw SASL tokens as bare size-prefixed frames after the handshake
(KIP-43), with a raw socket and with kafka-python pinned to a pre-1.0 broker version."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from tests.broker.security.test_sasl import strata_users
from tests.broker.security.test_tls import wait_for_line
from tests.brokers import BrokerProcess

PW = "V0-pw-8d2b61"
WRONG = "V0-wrong-3e7a90"


@pytest.fixture(scope="module")
def v0_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("sasl-v0")
    assert strata_users(data, "add", "frank", "--password-stdin", stdin=PW + "\n").returncode == 0
    env = {"STRATA_SASL_MECHANISMS": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"}  # SASL_PLAINTEXT
    b = BrokerProcess(data, "--auto-create-topics", env=env).start()
    yield b
    b.kill()
    assert PW not in b.output() and WRONG not in b.output()


def _request(api_key: int, version: int, correlation: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, correlation, 3) + b"raw" + body
    return struct.pack(">i", len(payload)) + payload


def _recv_frame(s: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        got = b""
        while len(got) < n:
            chunk = s.recv(n - len(got))
            if not chunk:
                raise ConnectionError("closed")
            got += chunk
        return got

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def _handshake_v0(s: socket.socket, mechanism: str) -> None:
    s.sendall(_request(17, 0, 1, _string(mechanism)))
    answer = _recv_frame(s)
    correlation, error = struct.unpack(">ih", answer[:6])
    assert (correlation, error) == (1, 0)


def test_raw_plain_after_v0_handshake(v0_broker: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", v0_broker.kafka_port), timeout=30) as s:
        _handshake_v0(s, "PLAIN")
        token = b"\0frank\0" + PW.encode()
        s.sendall(struct.pack(">i", len(token)) + token)
        assert _recv_frame(s) == b""  # PLAIN's empty server token, bare
        s.sendall(_request(3, 1, 2, struct.pack(">i", -1)))  # Metadata v1, all topics: served now
        assert struct.unpack(">i", _recv_frame(s)[:4]) == (2,)
    assert "authenticated as 'frank' with SASL PLAIN" in v0_broker.output()


def test_raw_plain_wrong_password_closes(v0_broker: BrokerProcess) -> None:
    start = len(v0_broker.lines)
    with socket.create_connection(("127.0.0.1", v0_broker.kafka_port), timeout=30) as s:
        _handshake_v0(s, "PLAIN")
        token = b"\0frank\0" + WRONG.encode()
        s.sendall(struct.pack(">i", len(token)) + token)
        assert s.recv(4096) == b""  # v0 cannot say why: closed
    line = wait_for_line(v0_broker, "authentication failed", start)
    assert "SASL PLAIN authentication failed for user 'frank'" in line


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_pre_1_0_uses_v0(v0_broker: BrokerProcess, mech: str) -> None:
    from kafka import KafkaConsumer

    start = len(v0_broker.lines)
    c = KafkaConsumer(
        bootstrap_servers=v0_broker.bootstrap,
        api_version=(0, 10, 2),  # SaslHandshake v1 came with Kafka 1.0: this client speaks v0
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mech,
        sasl_plain_username="frank",
        sasl_plain_password=PW,
        request_timeout_ms=20_000,
    )
    try:
        assert isinstance(c.topics(), set)
    finally:
        c.close()
    wait_for_line(v0_broker, f"authenticated as 'frank' with SASL {mech}", start)
