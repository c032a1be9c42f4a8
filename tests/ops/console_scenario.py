"""The console's test scenario, shared by tests/ops/test_console.py and the screenshot script
(tests/ops/console_screenshots.py): one real `strata serve` with SCRAM users, ACLs and REST
basic auth, tiering to a moto S3 endpoint with small segments and a small local retention
(so partitions have a bucket-only part), topics written by a real confluent-kafka producer
and a consumer group that committed part of them (so it has lag), then left (empty)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from tests.broker.security.test_authorization import ADMIN_PW, add_acls, add_user, binding, conf
from tests.brokers import BrokerProcess, S3Endpoint
from tests.ops.settle import wait_settled

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

TOPIC = "orders"
JSON_TOPIC = "payments"
GROUP = "billing"
OTHER_GROUP = "audit"
SEGMENT = 32 * 1024
RECORDS = 2000
PW = {"admin": ADMIN_PW, "nobody": "Nobody-pw-4f1c2b"}


def order_value(i: int) -> bytes:
    return (f"order-{i}:" + "x" * 500).encode()


def http(b: BrokerProcess, user: str = "admin") -> httpx.Client:
    return httpx.Client(base_url=b.http_url, timeout=30, auth=(user, PW[user]))


def start_broker(
    data: Path, s3: S3Endpoint, bucket: str, *, sample_interval_s: float = 10.0
) -> BrokerProcess:
    for name, pw in PW.items():
        add_user(data, name, pw)
    env = {
        **s3.env,
        "STRATA_SASL_MECHANISMS": "SCRAM-SHA-256",
        "STRATA_AUTHORIZATION_ENABLED": "true",
        "STRATA_AUTHORIZATION_SUPER_USERS": "User:admin",
        "STRATA_SASL_REST_BASIC_AUTH": "true",
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100",
        "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "200",
        "STRATA_CONSOLE_SAMPLE_INTERVAL_S": str(sample_interval_s),
        "STRATA_QUOTAS_CONSUMER_BYTE_RATE": str(256 * 1024 * 1024),  # shown on the security page
        # the Iceberg committer reads the hot tail through a plaintext internal listener: the
        # SASL-only Kafka listener would refuse it (docs/iceberg.md)
        "STRATA_INTERNAL_LISTEN": "127.0.0.1:0",
    }
    return BrokerProcess(data, "--object-store", f"s3://{bucket}/console", env=env).start()


def produce(b: BrokerProcess, topic: str, values: list[tuple[bytes | None, bytes]], **extra: Any) -> None:
    from confluent_kafka import Producer

    p = Producer({**conf(b, "admin", ADMIN_PW), "linger.ms": 5, "batch.size": 8192, **extra})
    for i, (key, value) in enumerate(values):
        p.produce(topic, key=key, value=value, headers=[("source", b"console-test")])
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def consume_and_commit(b: BrokerProcess, group: str, topic: str, count: int) -> None:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            **conf(b, "admin", ADMIN_PW),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 60
        while got < count:
            assert time.monotonic() < deadline, f"consumed only {got} of {count}"
            msg = c.poll(1.0)
            if msg is not None and not msg.error():
                got += 1
        c.commit(asynchronous=False)
    finally:
        c.close()


def populate(b: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf(b, "admin", ADMIN_PW))
    tiered = {"segment.bytes": str(SEGMENT), "local.retention.bytes": str(2 * SEGMENT)}
    futures = admin.create_topics(
        [
            NewTopic(TOPIC, num_partitions=2, config=tiered),
            # an Iceberg topic too: the tier view's Iceberg column
            NewTopic(
                JSON_TOPIC,
                num_partitions=3,
                config={"iceberg.mode": "key_value", "iceberg.target.lag.ms": "1000"},
            ),
        ]
    )
    for f in futures.values():
        f.result(timeout=30)
    produce(b, TOPIC, [(str(i % 7).encode(), order_value(i)) for i in range(RECORDS)])
    payments = [
        (
            f"c{i % 13}".encode(),
            json.dumps({"id": i, "customer": f"c{i % 13}", "amount": round(i * 1.37, 2)}).encode(),
        )
        for i in range(300)
    ]
    produce(b, JSON_TOPIC, payments)
    wait_settled(b.http_url, TOPIC, auth=("admin", ADMIN_PW))
    consume_and_commit(b, GROUP, TOPIC, 700)
    consume_and_commit(b, OTHER_GROUP, JSON_TOPIC, 120)
    add_acls(
        b,
        binding("GROUP", "nobody-group", "User:nobody", "READ"),
        binding("TOPIC", JSON_TOPIC, "User:analytics", "READ"),
        binding("GROUP", "analytics-", "User:analytics", "READ", prefixed=True),
        binding("TOPIC", TOPIC, "User:analytics", "WRITE", deny=True),
    )


@contextmanager
def authorized(driver: WebDriver, user: str = "admin") -> Iterator[None]:
    """Every request of the page carries ``user``'s basic-auth header (Chromium's DevTools
    protocol: no credentials dialog to drive)."""
    token = base64.b64encode(f"{user}:{PW[user]}".encode()).decode()
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})
    yield


PAGES = {
    "overview": "/dashboard",
    "topics": "/dashboard/topics",
    "topic": f"/dashboard/topics/{TOPIC}",
    "groups": "/dashboard/groups",
    "group": f"/dashboard/groups/{GROUP}",
    "brokers": "/dashboard/brokers",
    "broker": "/dashboard/brokers/{id}",
    "tiering": "/dashboard/tiering",
    "security": "/dashboard/security",
}
