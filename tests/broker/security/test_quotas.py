"""Client quotas: the rate math on a fake clock, then real brokers held to a byte rate by
real clients (confluent-kafka producer and consumer, the observed rate within 30% of the
quota over a few seconds), AlterClientQuotas/DescribeClientQuotas through the project's
Kafka client, persisted in the data dir's metadata store."""

from __future__ import annotations

import base64
import re
import ssl
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from broker.security.quotas import (
    QuotaConfig,
    QuotaManager,
    QuotaTable,
    WindowedRate,
)
from hot.errors import InvalidConfigError, InvalidRequestError
from kclient import KafkaClient
from kwire import ApiKey
from kwire.address import HostPort
from kwire.error_table import INVALID_REQUEST
from kwire.messages.alter_client_quotas import AlterClientQuotasRequest, AlterEntryData, OpData
from kwire.messages.describe_client_quotas import (
    MATCH_ANY,
    MATCH_DEFAULT,
    ComponentData,
    DescribeClientQuotasRequest,
    EntityData,
)
from tests.brokers import BrokerProcess, create_topic

MIB = 1 << 20
TOLERANCE = 0.3


# --- the rate math (pure, fake clock) --------------------------------------------------------


def test_rate_counts_a_young_window_as_one_sample() -> None:
    r = WindowedRate(samples=11, window=1.0)
    r.record(1000, now=100.0)
    assert r.rate(100.0) == 1000  # not 1000 / 0
    assert r.rate(100.5) == 1000
    assert r.rate(102.0) == 500
    r.record(1000, now=102.0)
    assert r.rate(104.0) == 500


def test_old_samples_leave_the_window() -> None:
    r = WindowedRate(samples=3, window=1.0)
    r.record(3000, now=0.0)
    r.record(300, now=10.0)
    assert r.rate(10.0) == 300  # the first sample ended more than 3 windows ago


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    r = WindowedRate(samples=11, window=1.0)
    r.record(500, now=0.0)
    assert r.throttle_seconds(1000, 0.0) == 0  # within quota
    r.record(2500, now=0.5)
    # 3000 bytes at 1000/s need 3 s; 0.5 s have passed
    assert r.throttle_seconds(1000, 0.5) == pytest.approx(2.5)
    assert r.rate(3.0) == pytest.approx(1000)
    assert r.throttle_seconds(1000, 3.0) == 0


def test_throttle_time_is_capped_at_the_window_span() -> None:
    r = WindowedRate(samples=2, window=1.0)
    r.record(1_000_000, now=0.0)
    assert r.throttle_seconds(10, 0.0) == 2.0


def test_steady_client_that_obeys_throttles_gets_the_quota() -> None:
    now = [0.0]
    q = QuotaManager(QuotaConfig(defaults={"producer_byte_rate": 10_000}), clock=lambda: now[0])
    sent = 0
    while now[0] < 60:
        sent += 4000
        ms = q.record(None, "producer_byte_rate", 4000)
        now[0] += 0.01 + ms / 1000  # the client waits out every throttle
    assert sent / now[0] == pytest.approx(10_000, rel=0.1)


def test_effective_quota_precedence() -> None:
    class Store:
        def __init__(self, table: QuotaTable) -> None:
            self._t = table

        def table(self) -> QuotaTable:
            return self._t

        async def alter(self, changes: list[tuple[str | None, str, float | None]]) -> None:
            self._t = self._t.altered(changes)

    cfg = QuotaConfig(
        defaults={"producer_byte_rate": 1, "consumer_byte_rate": 2},
        users={"alice": {"producer_byte_rate": 3}},
    )
    runtime = QuotaTable(default={"consumer_byte_rate": 4}, users={"alice": {"consumer_byte_rate": 5}})
    q = QuotaManager(cfg, Store(runtime))
    assert q.quota("alice", "consumer_byte_rate") == 5  # runtime user
    assert q.quota("alice", "producer_byte_rate") == 3  # TOML user
    assert q.quota("bob", "consumer_byte_rate") == 4  # runtime default
    assert q.quota("bob", "producer_byte_rate") == 1  # TOML default
    assert QuotaManager(QuotaConfig()).record("x", "producer_byte_rate", 10**12) == 0  # unlimited


def test_quota_config_and_table_validation() -> None:
    cfg = QuotaConfig.from_mapping(
        {"producer_byte_rate": 1024, "users": {"alice": {"consumer_byte_rate": "2048"}}, "window_num": 5}
    )
    assert cfg.defaults == {"producer_byte_rate": 1024.0}
    assert cfg.users == {"alice": {"consumer_byte_rate": 2048.0}}
    assert cfg.window_num == 5
    for bad in ({"producer_byte_rate": 0}, {"request_percentage": 5}, {"users": {"a": {"x": 1}}}):
        with pytest.raises(InvalidConfigError):
            QuotaConfig.from_mapping(bad)
    with pytest.raises(InvalidRequestError):
        QuotaTable().altered([("alice", "request_percentage", 10.0)])
    t = QuotaTable().altered([("alice", "producer_byte_rate", 5.0), (None, "consumer_byte_rate", 7.0)])
    assert t.entities() == [(None, {"consumer_byte_rate": 7.0}), ("alice", {"producer_byte_rate": 5.0})]
    assert t.altered([("alice", "producer_byte_rate", None)]).entities() == [
        (None, {"consumer_byte_rate": 7.0})
    ]


# --- real brokers, real clients ------------------------------------------------------------


def metric(b: BrokerProcess, name: str, **labels: str) -> float:
    text = httpx.get(f"{b.http_url}/metrics", timeout=10).text
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"^{name}\{{([^}}]*)\}} (\S+)$", line)
        if m and all(part in m.group(1).split(",") for part in want.split(",") if part):
            total += float(m.group(2))
    return total


@pytest.fixture
def quota_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    env = {"STRATA_QUOTAS_PRODUCER_BYTE_RATE": str(MIB)}
    b = BrokerProcess(tmp_path / "data", "--auto-create-topics", env=env).start()
    yield b
    b.kill()


def test_producer_is_held_to_its_byte_rate(quota_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    b = quota_broker
    topic = f"q-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic, 1)
    throttles: list[int] = []
    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "linger.ms": 5,
            "batch.size": 64 * 1024,
            "compression.type": "none",
            "queue.buffering.max.kbytes": 4096,
            "throttle_cb": lambda ev: throttles.append(int(ev.throttle_time * 1000)),
        }
    )
    value = b"x" * 10_000
    t0 = time.monotonic()
    mark: tuple[float, float] | None = None
    while (now := time.monotonic()) - t0 < 5.0:
        if mark is None and now - t0 >= 1.0:  # after the first second's burst allowance
            mark = (now, metric(b, "strata_produce_bytes_total", topic=topic))
        try:
            p.produce(topic, value)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    end = (time.monotonic(), metric(b, "strata_produce_bytes_total", topic=topic))
    assert mark is not None
    rate = (end[1] - mark[1]) / (end[0] - mark[0])
    assert rate == pytest.approx(MIB, rel=TOLERANCE), f"{rate / MIB:.2f} MiB/s"
    p.flush(30)
    assert throttles and max(throttles) > 0  # the client was told
    assert metric(b, "strata_quota_throttle_seconds_count", principal="User:ANONYMOUS") > 0


def alter(
    b: BrokerProcess, user: str | None, key: str, value: float | None, validate_only: bool = False
) -> list[tuple[int, str | None]]:
    op = OpData(key=key, remove=True) if value is None else OpData(key=key, value=value)
    req = AlterClientQuotasRequest(
        entries=(AlterEntryData(entity=(EntityData(entity_type="user", entity_name=user),), ops=(op,)),),
        validate_only=validate_only,
    )
    with KafkaClient.connect(HostPort("127.0.0.1", b.kafka_port)) as c:
        resp = c.call(ApiKey.ALTER_CLIENT_QUOTAS, req)
    return [(e.error_code, e.error_message) for e in resp.entries]


def describe(b: BrokerProcess, *components: ComponentData) -> dict[str | None, dict[str, float]]:
    with KafkaClient.connect(HostPort("127.0.0.1", b.kafka_port)) as c:
        resp = c.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, DescribeClientQuotasRequest(components=components))
    assert resp.error_code == 0, resp.error_message
    out: dict[str | None, dict[str, float]] = {}
    for e in resp.entries or ():
        assert [x.entity_type for x in e.entity] == ["user"]
        out[e.entity[0].entity_name] = {v.key: v.value for v in e.values}
    return out


def test_alter_and_describe_client_quotas_persist(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        assert describe(b) == {}
        assert alter(b, "alice", "producer_byte_rate", 1000.0) == [(0, None)]
        assert alter(b, None, "consumer_byte_rate", 2000.0) == [(0, None)]
        assert alter(b, "bob", "consumer_byte_rate", 3000.0, validate_only=True) == [(0, None)]
        [(code, msg)] = alter(b, "bob", "request_percentage", 50.0)
        assert code == INVALID_REQUEST and msg and "request_percentage" in msg
        assert describe(b) == {"alice": {"producer_byte_rate": 1000.0}, None: {"consumer_byte_rate": 2000.0}}
        assert describe(b, ComponentData(entity_type="user", match_type=MATCH_DEFAULT)) == {
            None: {"consumer_byte_rate": 2000.0}
        }
        assert describe(b, ComponentData(entity_type="user", match_type=MATCH_ANY)) == {
            "alice": {"producer_byte_rate": 1000.0}
        }
        assert describe(b, ComponentData(entity_type="client-id", match_type=MATCH_ANY)) == {}
        path = tmp_path / "data" / "meta" / "metadata.journal"  # the runtime quotas' store
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        b.stop()
        b.start()
        assert describe(b)["alice"] == {"producer_byte_rate": 1000.0}
        assert alter(b, "alice", "producer_byte_rate", None) == [(0, None)]
        assert "alice" not in describe(b)
    finally:
        b.kill()


def test_consumer_is_held_to_a_quota_set_at_runtime(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    b = BrokerProcess(tmp_path / "data", "--auto-create-topics").start()
    try:
        topic = f"qf-{uuid.uuid4().hex[:6]}"
        create_topic(b.bootstrap, topic, 1)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "compression.type": "none"})
        value = b"y" * 10_000
        for _ in range(1000):  # ~10 MB: more than 5 s at the quota
            while True:
                try:
                    p.produce(topic, value)
                    break
                except BufferError:
                    p.poll(0.05)
        assert p.flush(60) == 0
        # The default user entity (kafka-configs --entity-default) covers ANONYMOUS.
        assert alter(b, None, "consumer_byte_rate", float(MIB)) == [(0, None)]
        throttled = threading.Event()
        c = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": f"g-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "fetch.max.bytes": 1 << 20,
                "throttle_cb": lambda ev: throttled.set(),
            }
        )
        c.subscribe([topic])
        got = 0
        first: float | None = None  # the clock starts at the first record (after the group join)
        mark: tuple[float, float] | None = None
        deadline = time.monotonic() + 30
        try:
            while (now := time.monotonic()) < deadline and (first is None or now - first < 5.5):
                if first is not None and mark is None and now - first >= 1.5:  # after the burst
                    mark = (now, metric(b, "strata_fetch_bytes_total", topic=topic))
                msg = c.poll(0.1)
                if msg is not None and msg.error() is None:
                    got += len(msg.value() or b"")
                    first = first or time.monotonic()
            end = (time.monotonic(), metric(b, "strata_fetch_bytes_total", topic=topic))
        finally:
            c.close()
        assert mark is not None
        rate = (end[1] - mark[1]) / (end[0] - mark[0])
        assert rate == pytest.approx(MIB, rel=TOLERANCE), f"{rate / MIB:.2f} MiB/s"
        assert got < 9_000_000  # far from all of it
        assert throttled.is_set()
    finally:
        b.kill()


def test_rest_produce_is_held_to_the_users_rate(tmp_path: Path) -> None:
    rate_limit = 200_000
    env = {"STRATA_QUOTAS_PRODUCER_BYTE_RATE": str(rate_limit)}
    b = BrokerProcess(tmp_path / "data", "--auto-create-topics", env=env).start()
    try:
        topic = f"qr-{uuid.uuid4().hex[:6]}"
        create_topic(b.bootstrap, topic, 1)
        value = base64.b64encode(b"x" * 15_000).decode()
        body = {"records": [{"value": value} for _ in range(4)]}  # 60 kB a request
        headers = {"Content-Type": "application/vnd.kafka.binary.v2+json"}
        throttled = 0
        with httpx.Client(base_url=b.http_url, timeout=30) as http:
            t0 = time.monotonic()
            mark: tuple[float, float] | None = None
            while (now := time.monotonic()) - t0 < 5.0:
                if mark is None and now - t0 >= 1.0:
                    mark = (now, metric(b, "strata_produce_bytes_total", topic=topic))
                r = http.post(f"/topics/{topic}", json=body, headers=headers)
                assert r.status_code == 200, r.text
                throttled += int(r.headers["X-Strata-Throttle-Ms"]) > 0
            end = (time.monotonic(), metric(b, "strata_produce_bytes_total", topic=topic))
        assert mark is not None
        rate = (end[1] - mark[1]) / (end[0] - mark[0])
        assert rate == pytest.approx(rate_limit, rel=TOLERANCE), f"{rate:.0f} B/s"
        assert throttled > 0
    finally:
        b.kill()


def test_quotas_are_per_sasl_user_from_the_toml(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    from tests.broker.security.test_sasl import strata_users

    data = tmp_path / "data"
    for user in ("alice", "bob"):
        assert strata_users(data, "add", user, "--password-stdin", stdin="pw-" + user).returncode == 0
    toml = tmp_path / "strata.toml"
    toml.write_text('[sasl]\nmechanisms = "PLAIN"\n[quotas.users.alice]\nproducer_byte_rate = 200000\n')
    b = BrokerProcess(data, "--config", str(toml), "--auto-create-topics").start()
    try:
        throttled: dict[str, int] = {}
        for user in ("alice", "bob"):
            events: list[int] = []
            p = Producer(
                {
                    "bootstrap.servers": b.bootstrap,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": user,
                    "sasl.password": "pw-" + user,
                    "throttle_cb": lambda ev, events=events: events.append(int(ev.throttle_time * 1000)),
                }
            )
            for _ in range(100):  # 1 MB: five seconds' worth for alice, nothing for bob
                p.produce("per-user", b"u" * 10_000)
                p.poll(0)
            assert p.flush(30) == 0
            throttled[user] = max(events, default=0)
        assert throttled["alice"] > 0 and throttled["bob"] == 0, throttled
        assert metric(b, "strata_quota_throttle_seconds_count", principal="User:alice") > 0
        assert metric(b, "strata_quota_throttle_seconds_count", principal="User:bob") == 0
    finally:
        b.kill()


def test_quota_of_a_client_certificate_principal(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    from tests.broker.security.tlslib import make_pki, server_env

    pki = make_pki(tmp_path / "pki")
    toml = tmp_path / "strata.toml"
    toml.write_text('[quotas.users."CN=test-client"]\nproducer_byte_rate = 200000\n')
    env = server_env(pki, client_auth="required")
    b = BrokerProcess(tmp_path / "data", "--config", str(toml), "--auto-create-topics", env=env).start()
    try:
        events: list[int] = []
        p = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "security.protocol": "SSL",
                "ssl.ca.location": str(pki.ca),
                "ssl.certificate.location": str(pki.client_cert),
                "ssl.key.location": str(pki.client_key),
                "throttle_cb": lambda ev: events.append(int(ev.throttle_time * 1000)),
            }
        )
        for _ in range(100):
            p.produce("mtls-quota", b"c" * 10_000)
            p.poll(0)
        assert p.flush(30) == 0
        assert events and max(events) > 0
        # the HTTP listener asks for the client certificate too
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        ctx.load_cert_chain(pki.client_cert, pki.client_key)
        text = httpx.get(f"https://127.0.0.1:{b.http_port}/metrics", verify=ctx, timeout=10).text
        assert 'strata_quota_throttle_seconds_count{principal="User:CN=test-client"' in text
    finally:
        b.kill()


def test_rest_consumer_instance_is_held_to_the_fetch_rate(tmp_path: Path) -> None:
    from tests.api.groups.helpers import BROKER_ENV, JSON_HEADERS, V2_BINARY, produce

    rate_limit = 100_000
    env = {**BROKER_ENV, "STRATA_QUOTAS_CONSUMER_BYTE_RATE": str(rate_limit)}
    b = BrokerProcess(tmp_path / "data", env=env).start()
    try:
        topic = "qrc"
        create_topic(b.bootstrap, topic, 1)
        produce(b.bootstrap, topic, [(None, b"r" * 10_000, 0) for _ in range(100)])
        with httpx.Client(base_url=b.http_url, timeout=30) as http:
            body = {"name": "i", "format": "binary", "auto.offset.reset": "earliest"}
            assert http.post("/consumers/qg", json=body, headers=JSON_HEADERS).status_code == 200
            base = "/consumers/qg/instances/i"
            r = http.post(f"{base}/subscription", json={"topics": [topic]}, headers=JSON_HEADERS)
            assert r.status_code == 204
            first: float | None = None
            counted = 0
            mark: tuple[float, int] | None = None
            deadline = time.monotonic() + 30
            while (now := time.monotonic()) < deadline and (first is None or now - first < 5.5):
                if first is not None and mark is None and now - first >= 1.5:
                    mark = (now, counted)
                r = http.get(
                    f"{base}/records",
                    params={"timeout": 200, "max_bytes": 20_000},
                    headers={"Accept": V2_BINARY},
                )
                assert r.status_code == 200, r.text
                if r.json():
                    first = first or time.monotonic()
                    counted += len(r.content)
            assert mark is not None
            rate = (counted - mark[1]) / (time.monotonic() - mark[0])
            assert rate == pytest.approx(rate_limit, rel=TOLERANCE), f"{rate:.0f} B/s"
    finally:
        b.kill()


def test_strata_quotas_cli(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from tests.brokers import ROOT

    def strata(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "api.cli", "quotas", *args, "-b", b.bootstrap],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    b = BrokerProcess(tmp_path / "data").start()
    try:
        assert strata("alter", "--user", "alice", "--producer-byte-rate", "1024").returncode == 0
        assert strata("alter", "--default", "--consumer-byte-rate", "2048").returncode == 0
        out = strata("describe", "-o", "json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == [
            {"user": None, "quotas": {"consumer_byte_rate": 2048.0}},
            {"user": "alice", "quotas": {"producer_byte_rate": 1024.0}},
        ]
        assert strata("alter", "--user", "alice", "--remove", "producer_byte_rate").returncode == 0
        assert strata("describe").stdout.split() == ["<default>", "consumer_byte_rate=2048"]
        bad = strata("alter", "--user", "alice")
        assert bad.returncode == 1 and "nothing to change" in bad.stderr
    finally:
        b.kill()
