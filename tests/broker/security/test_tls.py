"""TLS on a real broker: real clients (confluent-kafka, kcat, kafka-python, httpx) over TLS,
mutual TLS, and clients that must be refused cleanly while the broker keeps serving."""

from __future__ import annotations

import shutil
import socket
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.broker.security.tlslib import Pki, make_pki, server_env
from tests.brokers import BrokerProcess

BrokerFactory = Callable[..., BrokerProcess]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    env = {**server_env(pki), "STRATA_SCHEMA_REGISTRY_LISTEN": "127.0.0.1:0"}
    b = BrokerProcess(tmp_path_factory.mktemp("tls-broker"), "--auto-create-topics", env=env).start()
    yield b
    b.kill()


def ssl_conf(b: BrokerProcess, pki: Pki, *, client_cert: bool = False) -> dict[str, str]:
    conf = {
        "bootstrap.servers": b.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca),
        "ssl.endpoint.identification.algorithm": "https",
    }
    if client_cert:
        conf["ssl.certificate.location"] = str(pki.client_cert)
        conf["ssl.key.location"] = str(pki.client_key)
    return conf


def produce_consume(conf: dict[str, str], topic: str, n: int = 5) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    p = Producer(conf)
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), key=b"k")
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value() or b"")
    finally:
        c.close()
    return got


def wait_for_line(b: BrokerProcess, needle: str, start: int = 0, timeout: float = 30.0) -> str:
    """The first broker output line after ``start`` containing ``needle`` (bounded wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in b.lines[start:]:
            if needle in line:
                return line
        time.sleep(0.05)
    raise AssertionError(f"no line with {needle!r} in:\n" + "".join(b.lines[start:]))


def test_confluent_kafka_over_tls(tls_broker: BrokerProcess, pki: Pki) -> None:
    assert "SSL)" in tls_broker.output()
    assert produce_consume(ssl_conf(tls_broker, pki), "tls-ck") == [f"v{i}".encode() for i in range(5)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_over_tls(tls_broker: BrokerProcess, pki: Pki) -> None:
    common = ["-b", tls_broker.bootstrap, "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}"]
    subprocess.run(
        ["kcat", "-P", *common, "-t", "tls-kcat", "-p", "0"], input=b"a\nb\nc\n", check=True, timeout=60
    )
    out = subprocess.run(
        ["kcat", "-C", *common, "-t", "tls-kcat", "-p", "0", "-o", "beginning", "-e", "-q"],
        check=True,
        timeout=60,
        capture_output=True,
    )
    assert out.stdout.split() == [b"a", b"b", b"c"]


def test_kafka_python_over_tls(tls_broker: BrokerProcess, pki: Pki) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    tls = {"security_protocol": "SSL", "ssl_cafile": str(pki.ca)}
    p = KafkaProducer(bootstrap_servers=tls_broker.bootstrap, **tls)
    for i in range(3):
        p.send("tls-kp", f"kp{i}".encode()).get(timeout=30)
    p.close()
    c = KafkaConsumer(
        "tls-kp",
        bootstrap_servers=tls_broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **tls,
    )
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 3:
            break
    c.close()
    assert got == [b"kp0", b"kp1", b"kp2"]


def test_https(tls_broker: BrokerProcess, pki: Pki) -> None:
    url = f"https://127.0.0.1:{tls_broker.http_port}"
    r = httpx.get(f"{url}/topics", verify=ca_context(pki.ca), timeout=30)
    assert r.status_code == 200
    with pytest.raises(httpx.ConnectError):  # a CA that did not sign the server certificate
        httpx.get(f"{url}/topics", verify=ca_context(pki.other_ca), timeout=30)
    with pytest.raises(httpx.RemoteProtocolError):  # plain HTTP to the TLS port
        httpx.get(f"http://127.0.0.1:{tls_broker.http_port}/topics", timeout=30)


def test_schema_registry_over_tls(tls_broker: BrokerProcess, pki: Pki) -> None:
    """The registry listener takes the HTTP listener's certificate: confluent-kafka's
    SchemaRegistryClient over https with the CA registers and reads back; plain HTTP and
    a CA that did not sign it are refused."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    url = f"https://127.0.0.1:{tls_broker.registry_port}"
    sr = SchemaRegistryClient({"url": url, "ssl.ca.location": str(pki.ca)})
    sid = sr.register_schema("tls-value", Schema('{"type": "string"}', "AVRO"))
    assert sr.get_schema(sid).schema_str == '{"type": "string"}'
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/subjects", verify=ca_context(pki.other_ca), timeout=30)
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(f"http://127.0.0.1:{tls_broker.registry_port}/subjects", timeout=30)
    other = SchemaRegistryClient({"url": url, "ssl.ca.location": str(pki.other_ca)})
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):  # its own vendored httpx's error
        other.get_subjects()


def _api_versions_frame() -> bytes:
    # ApiVersions v0, correlation 1, client id "raw"
    body = struct.pack(">hhih", 18, 0, 1, 3) + b"raw"
    return struct.pack(">i", len(body)) + body


def test_plaintext_client_refused_cleanly(tls_broker: BrokerProcess, pki: Pki) -> None:
    start = len(tls_broker.lines)
    with socket.create_connection(("127.0.0.1", tls_broker.kafka_port), timeout=30) as s:
        s.sendall(_api_versions_frame())
        data = b""
        while chunk := s.recv(4096):  # the broker closes: no Kafka answer to plaintext
            data += chunk
    assert data == b""
    line = wait_for_line(tls_broker, "TLS handshake with", start)
    assert "failed" in line
    # still serving TLS clients
    assert produce_consume(ssl_conf(tls_broker, pki), "tls-after-plain", 1) == [b"v0"]
    assert "Traceback" not in "".join(tls_broker.lines[start:])


def test_mtls_required(broker_factory: BrokerFactory, pki: Pki) -> None:
    b = broker_factory("--auto-create-topics", env=server_env(pki, "required"))
    # with a client certificate signed by the CA: served
    assert produce_consume(ssl_conf(b, pki, client_cert=True), "mtls", 2) == [b"v0", b"v1"]
    # without one: the handshake is refused, one log line, the broker keeps serving
    start = len(b.lines)
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", b.kafka_port), timeout=30) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                # TLS 1.3: the client's side of the handshake completes; the server then closes
                s.sendall(_api_versions_frame())
                assert s.recv(4096) == b""
        except (ssl.SSLError, ConnectionError):
            pass
    line = wait_for_line(b, "TLS handshake with", start)
    assert "certificate" in line
    https = f"https://127.0.0.1:{b.http_port}/topics"
    assert httpx.get(https, verify=ssl_context_with_cert(pki), timeout=30).status_code == 200
    with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
        httpx.get(https, verify=ca_context(pki.ca), timeout=30)
    assert produce_consume(ssl_conf(b, pki, client_cert=True), "mtls-after", 1) == [b"v0"]
    assert "Traceback" not in "".join(b.lines[start:])


def ca_context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def ssl_context_with_cert(pki: Pki) -> ssl.SSLContext:
    ctx = ca_context(pki.ca)
    ctx.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return ctx


def test_bad_tls_config_is_one_clear_error(tmp_path: Path, pki: Pki) -> None:
    b = BrokerProcess(
        tmp_path / "d", env={"STRATA_TLS_CERT": str(pki.server_cert), "STRATA_TLS_KEY": str(pki.client_key)}
    )
    with pytest.raises(RuntimeError) as info:
        b.start()
    out = b.output()
    assert "strata: error: tls: cannot load certificate" in out
    assert "Traceback" not in out and "PRIVATE KEY" not in out
    assert "exited during start-up" in str(info.value)
