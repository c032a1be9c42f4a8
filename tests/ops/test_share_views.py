"""Share groups (KIP-932) in REST v3 and the console, with the real client: confluent-kafka's
``ShareConsumer`` creates the group, holds some records and accepts others, and REST v3
(Confluent's Share Group shapes), the console's API and the console's group page in headless
Chromium show its consumer, its assignment and, per share partition, the start offset, the
records in flight and the lag; once the consumer leaves, the group is empty and its held
records are Available again (in flight, no longer acquired)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from tests.api.test_rest import assert_error
from tests.api.test_share_consumer import _configure
from tests.brokers import BrokerProcess, create_topic
from tests.ops.chromium import chromium

TOPIC, GROUP = "sv-jobs", "sv-workers"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("share-views")).start()
    yield b
    b.kill()


@pytest.fixture(scope="module")
def cluster(broker: BrokerProcess) -> str:
    r = httpx.get(f"{broker.http_url}/v3/clusters", timeout=10)
    return f"{broker.http_url}/v3/clusters/{r.json()['data'][0]['cluster_id']}"


@pytest.fixture(scope="module")
def consumer(broker: BrokerProcess) -> Iterator[ShareConsumer]:
    """A share consumer holding partition 0's 10 records and having accepted partition 1's 4."""
    create_topic(broker.bootstrap, TOPIC, 2)
    _configure(broker.bootstrap, GROUP, **{"share.record.lock.duration.ms": "60000"})  # held throughout
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for partition, n in ((0, 10), (1, 4)):
        for i in range(n):
            p.produce(TOPIC, value=b"%d" % i, partition=partition)
        assert p.flush(10) == 0  # one batch per partition
    c = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": GROUP,
            "client.id": "sv-client",
            "share.acknowledgement.mode": "explicit",
        }
    )
    c.subscribe([TOPIC])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < 14 and time.monotonic() < deadline:
        got += [m for m in c.poll(1.0) if m.error() is None]
    assert len(got) == 14, [(m.partition(), m.offset()) for m in got]
    for m in got:
        if m.partition() == 1:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
    c.commit_sync(30)
    yield c
    c.close()


def _get(url: str) -> Any:
    r = httpx.get(url, timeout=10)
    assert r.status_code == 200, (url, r.status_code, r.text)
    return r.json()


def test_rest_v3_share_group(cluster: str, consumer: ShareConsumer) -> None:
    listed = _get(f"{cluster}/share-groups")
    assert listed["kind"] == "KafkaShareGroupList"
    [g] = [x for x in listed["data"] if x["share_group_id"] == GROUP]
    assert g == _get(f"{cluster}/share-groups/{GROUP}")
    assert g["kind"] == "KafkaShareGroup"
    assert g["metadata"]["self"] == f"{cluster}/share-groups/{GROUP}"
    assert g["metadata"]["resource_name"].endswith(f"/share-group={GROUP}")
    assert (g["state"], g["consumer_count"], g["partition_count"]) == ("STABLE", 1, 2)
    assert g["partition_assignor"] == "simple" and g["group_epoch"] >= 1
    assert [(x["topic_name"], x["partition_id"]) for x in g["assigned_topic_partitions"]] == [
        (TOPIC, 0),
        (TOPIC, 1),
    ]
    assert g["coordinator"]["related"].startswith(f"{cluster}/brokers/")

    consumers = _get(g["consumers"]["related"])
    assert consumers["kind"] == "KafkaShareConsumerList"
    [c] = consumers["data"]
    assert (c["kind"], c["group_id"], c["client_id"]) == ("KafkaShareGroupConsumer", GROUP, "sv-client")
    assert c["member_epoch"] >= 1 and c == _get(f"{cluster}/share-groups/{GROUP}/consumers/{c['consumer_id']}")
    assignments = _get(c["assignments"]["related"])["data"]
    assert [(a["kind"], a["topic_name"], a["partition_id"]) for a in assignments] == [
        ("KafkaShareGroupConsumerAssignment", TOPIC, 0),
        ("KafkaShareGroupConsumerAssignment", TOPIC, 1),
    ]

    lags = _get(g["lags"]["related"])
    assert lags["kind"] == "KafkaShareGroupLagList"
    rows = {x["partition_id"]: x for x in lags["data"]}
    fields = ("start_offset", "in_flight", "acquired", "log_end_offset", "lag")
    assert tuple(rows[0][f] for f in fields) == (0, 10, 10, 10, 10)  # held
    assert tuple(rows[1][f] for f in fields) == (4, 0, 0, 4, 0)  # accepted
    assert _get(f"{cluster}/share-groups/{GROUP}/lags/{TOPIC}/partitions/0") == rows[0]

    # every link answers
    for doc in (g, c, *assignments, *lags["data"]):
        for link in _links(doc):
            assert httpx.get(link, timeout=10).status_code == 200, link

    # not a share group, no such consumer or partition: Confluent's 404 body
    for url in (
        f"{cluster}/share-groups/nope",
        f"{cluster}/share-groups/{GROUP}/consumers/nobody",
        f"{cluster}/share-groups/{GROUP}/lags/{TOPIC}/partitions/7",
    ):
        assert_error(httpx.get(url, timeout=10), 404, 404)


def _links(doc: Any) -> list[str]:
    out: list[str] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += [v] if k in ("related", "self") and isinstance(v, str) else _links(v)
    elif isinstance(doc, list):
        for v in doc:
            out += _links(v)
    return out
