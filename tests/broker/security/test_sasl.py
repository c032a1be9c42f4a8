"""SASL (PLAIN, SCRAM-SHA-256/512) over TLS on a real broker, with real clients: users
added with ``strata users``, wrong passwords and unknown users refused with
SASL_AUTHENTICATION_FAILED, requests before authentication closed, and no password in
the broker's output."""

from __future__ import annotations

import asyncio
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.security.test_tls import produce_consume, wait_for_line
from tests.broker.security.tlslib import Pki, make_pki, server_env
from tests.brokers import ROOT, BrokerProcess

ALICE_PW = "Alice-pw-7f3a9c"  # must never show up in the broker's output
BOB_PW = "Bob-pw-e41d02"
WRONG_PW = "Wrong-pw-5b8e11"
MECHS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


def strata_users(data_dir: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", "users", *args, "--data-dir", str(data_dir)],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("sasl-broker")
    added = strata_users(data, "add", "alice", "--password-stdin", stdin=ALICE_PW + "\n")
    assert added.returncode == 0, added.stderr
    env = {**server_env(pki), "STRATA_SASL_MECHANISMS": ",".join(MECHS)}
    b = BrokerProcess(data, "--auto-create-topics", env=env).start()
    yield b
    b.kill()
    out = b.output()
    for secret in (ALICE_PW, BOB_PW, WRONG_PW):
        assert secret not in out


def sasl_conf(b: BrokerProcess, pki: Pki, mech: str, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": b.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": mech,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize("mech", MECHS)
def test_confluent_kafka_sasl_ssl(sasl_broker: BrokerProcess, pki: Pki, mech: str) -> None:
    topic = f"sasl-{mech.lower()}"
    conf = sasl_conf(sasl_broker, pki, mech, "alice", ALICE_PW)
    assert produce_consume(conf, topic, 3) == [b"v0", b"v1", b"v2"]
    assert f"authenticated as 'alice' with SASL {mech}" in sasl_broker.output()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
@pytest.mark.parametrize("mech", MECHS)
def test_kcat_sasl_ssl(sasl_broker: BrokerProcess, pki: Pki, mech: str) -> None:
    topic = f"kcat-{mech.lower()}"
    common = ["-b", sasl_broker.bootstrap, "-t", topic, "-p", "0"]
    for k, v in sasl_conf(sasl_broker, pki, mech, "alice", ALICE_PW).items():
        if k != "bootstrap.servers":
            common += ["-X", f"{k}={v}"]
    subprocess.run(["kcat", "-P", *common], input=b"x\ny\n", check=True, timeout=60)
    out = subprocess.run(
        ["kcat", "-C", *common, "-o", "beginning", "-e", "-q"], check=True, timeout=60, capture_output=True
    )
    assert out.stdout.split() == [b"x", b"y"]


def auth_error(conf: dict[str, str]) -> object:
    """The error a confluent-kafka client reports for these credentials (bounded wait)."""
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    p = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors, "no error reported"
    return errors[0]


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize(("user", "password"), [("alice", WRONG_PW), ("nobody", WRONG_PW)])
def test_bad_credentials_refused(
    sasl_broker: BrokerProcess, pki: Pki, mech: str, user: str, password: str
) -> None:
    from confluent_kafka import KafkaError

    start = len(sasl_broker.lines)
    err = auth_error(sasl_conf(sasl_broker, pki, mech, user, password))
    assert err.code() == KafkaError._AUTHENTICATION, err  # type: ignore[attr-defined]
    assert "invalid user name or password" in err.str()  # type: ignore[attr-defined]
    line = wait_for_line(sasl_broker, "authentication failed", start)
    assert f"SASL {mech} authentication failed for user '{user}'" in line
    assert password not in sasl_broker.output()


def test_user_added_while_running_and_deleted(sasl_broker: BrokerProcess, pki: Pki) -> None:
    from confluent_kafka import KafkaError

    assert strata_users(sasl_broker.data_dir, "add", "bob", "--password-stdin", stdin=BOB_PW).returncode == 0
    listed = strata_users(sasl_broker.data_dir, "list", "-o", "json")
    assert '"bob"' in listed.stdout and BOB_PW not in listed.stdout
    conf = sasl_conf(sasl_broker, pki, "SCRAM-SHA-512", "bob", BOB_PW)
    assert produce_consume(conf, "bob-topic", 1) == [b"v0"]
    assert strata_users(sasl_broker.data_dir, "delete", "bob").returncode == 0
    err = auth_error(conf)
    assert err.code() == KafkaError._AUTHENTICATION  # type: ignore[attr-defined]


def _frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, 7, 3) + b"raw" + body
    return struct.pack(">i", len(payload)) + payload


def test_requests_before_authentication_close_the_connection(tmp_path: Path) -> None:
    # SASL_PLAINTEXT, so a raw socket can speak the protocol
    b = BrokerProcess(tmp_path / "d", env={"STRATA_SASL_MECHANISMS": "PLAIN"}).start()
    try:
        with socket.create_connection(("127.0.0.1", b.kafka_port), timeout=30) as s:
            s.sendall(_frame(18, 0))  # ApiVersions: allowed
            (size,) = struct.unpack(">i", s.recv(4))
            got = b""
            while len(got) < size:
                got += s.recv(size - len(got))
            start = len(b.lines)
            s.sendall(_frame(3, 0, struct.pack(">i", 0)))  # Metadata v0: refused, closed
            assert s.recv(4096) == b""
        line = wait_for_line(b, "before SASL authentication", start)
        assert "Metadata" in line
        assert "SASL_PLAINTEXT" in b.output()
    finally:
        b.stop()


def test_kafka_python_scram(sasl_broker: BrokerProcess, pki: Pki) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    opts = {
        "bootstrap_servers": sasl_broker.bootstrap,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(pki.ca),
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": ALICE_PW,
    }
    p = KafkaProducer(**opts)
    p.send("kp-scram", b"kp").get(timeout=30)
    p.close()
    c = KafkaConsumer("kp-scram", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **opts)
    got = next(iter(c)).value
    c.close()
    assert got == b"kp"


def test_users_add_from_prompt(tmp_path: Path) -> None:
    # not a terminal: click reads the password and its confirmation from stdin, echoing nothing
    out = strata_users(tmp_path, "add", "dave", stdin="Dave-pw-1\nDave-pw-1\n")
    assert out.returncode == 0, out.stderr
    assert "Dave-pw-1" not in out.stdout + out.stderr
    mismatch = strata_users(tmp_path, "add", "erin", stdin="a-pw\nb-pw\n")
    assert mismatch.returncode != 0
    listed = strata_users(tmp_path, "list")
    assert listed.stdout.split() == ["dave", "SCRAM-SHA-256,SCRAM-SHA-512"]
    bad = strata_users(tmp_path, "add", "bad name", "--password-stdin", stdin="x\n")
    assert bad.returncode == 1 and "invalid user name" in bad.stderr


@pytest.mark.parametrize("mech", ["SCRAM-SHA-512", "PLAIN"])
async def test_aiokafka_sasl_ssl(sasl_broker: BrokerProcess, pki: Pki, mech: str) -> None:
    import ssl

    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(
        bootstrap_servers=sasl_broker.bootstrap,
        security_protocol="SASL_SSL",
        ssl_context=ssl.create_default_context(cafile=str(pki.ca)),
        sasl_mechanism=mech,
        sasl_plain_username="alice",
        sasl_plain_password=ALICE_PW,
    )
    await p.start()
    try:
        meta = await asyncio.wait_for(p.send_and_wait(f"aio-{mech.lower()}", b"a"), 60)
        assert meta.offset == 0
    finally:
        await p.stop()
