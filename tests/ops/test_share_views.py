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
from urllib.parse import quote

import httpx
import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer

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
    try:
        c.close()
    except Exception:  # closed by the last test already
        pass


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("profile"), 1280, 1000) as d:
        yield d


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
    assert c["member_epoch"] >= 1
    # librdkafka's member ids are base64 (may hold "/"): the link quotes it, the route takes it
    assert c == _get(f"{cluster}/share-groups/{GROUP}/consumers/{quote(c['consumer_id'], safe='')}")
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

    # not while it has members
    assert httpx.delete(f"{cluster}/share-groups/{GROUP}", timeout=10).status_code == 409

    # not a share group, no such consumer or partition: Confluent's 404 body
    for url in (
        f"{cluster}/share-groups/nope",
        f"{cluster}/share-groups/{GROUP}/consumers/nobody",
        f"{cluster}/share-groups/{GROUP}/lags/{TOPIC}/partitions/7",
    ):
        assert_error(httpx.get(url, timeout=10), 404, 404)


def _cell(driver: Any, css: str, want: str) -> None:
    """Wait until the element ``css`` reads ``want`` (pages re-render every few seconds)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def read(d: Any) -> bool:
        try:
            return bool(d.find_element(By.CSS_SELECTOR, css).text == want)
        except (NoSuchElementException, StaleElementReferenceException):
            return False

    try:
        WebDriverWait(driver, 30, poll_frequency=0.2).until(read)
    except Exception as exc:
        raise AssertionError(f"{css}: never read {want!r}") from exc


def test_console_shows_share_and_kip848_groups(
    broker: BrokerProcess, consumer: ShareConsumer, driver: Any
) -> None:
    from selenium.webdriver.common.by import By

    listed = _get(f"{broker.http_url}/console/api/groups")["groups"]
    [row] = [g for g in listed if g["group_id"] == GROUP]
    assert (row["type"], row["state"], row["members"], row["total_lag"]) == ("share", "Stable", 1, 10)
    page = _get(f"{broker.http_url}/console/api/groups/{GROUP}")
    assert (page["type"], page["total_lag"], page["total_in_flight"]) == ("share", 10, 10)
    assert page["members"][0]["assignments"] == [f"{TOPIC}-0", f"{TOPIC}-1"]

    # a KIP-848 consumer group next to it: the console shows its protocol and epochs
    kip848 = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "sv-kip848",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    kip848.subscribe([TOPIC])
    try:
        deadline = time.monotonic() + 30
        while not kip848.assignment() and time.monotonic() < deadline:
            kip848.poll(0.5)
        assert kip848.assignment()
        epoch = _get(f"{broker.http_url}/console/api/groups/sv-kip848")["members"][0]["member_epoch"]

        driver.get(f"{broker.http_url}/dashboard/groups")
        _cell(driver, f"[data-row=group-{GROUP}] [data-field=type]", "share")
        _cell(driver, f"[data-row=group-{GROUP}] [data-field=total_lag]", "10")
        _cell(driver, "[data-row=group-sv-kip848] [data-field=type]", "consumer")

        driver.get(f"{broker.http_url}/dashboard/groups/{GROUP}")
        _cell(driver, f"[data-row={TOPIC}-0] [data-field=start_offset]", "0")
        _cell(driver, f"[data-row={TOPIC}-0] [data-field=in_flight]", "10")
        _cell(driver, f"[data-row={TOPIC}-0] [data-field=acquired]", "10")
        _cell(driver, f"[data-row={TOPIC}-0] [data-field=lag]", "10")
        _cell(driver, f"[data-row={TOPIC}-1] [data-field=start_offset]", "4")
        _cell(driver, f"[data-row={TOPIC}-1] [data-field=lag]", "0")
        _cell(driver, "[data-testid=total-in-flight]", "10")
        members = driver.find_element(By.CSS_SELECTOR, "[data-testid=members]").text
        assert "sv-client" in members and f"{TOPIC}-0, {TOPIC}-1" in members

        driver.get(f"{broker.http_url}/dashboard/groups/sv-kip848")
        _cell(driver, "[data-testid=members] [data-field=member_epoch]", str(epoch))
        info = driver.find_element(By.CSS_SELECTOR, ".kv").text
        assert "consumer (KIP-848)" in info and "assignment epoch" in info
    finally:
        kip848.close()


def test_after_the_consumer_leaves(cluster: str, consumer: ShareConsumer) -> None:
    consumer.close()  # leaves the group: its held records are Available again
    g = _get(f"{cluster}/share-groups/{GROUP}")
    assert (g["state"], g["consumer_count"], g["assigned_topic_partitions"]) == ("EMPTY", 0, [])
    rows = {x["partition_id"]: x for x in _get(f"{cluster}/share-groups/{GROUP}/lags")["data"]}
    fields = ("start_offset", "in_flight", "acquired", "lag")
    assert tuple(rows[0][f] for f in fields) == (0, 10, 0, 10)
    assert tuple(rows[1][f] for f in fields) == (4, 0, 0, 0)
    # DELETE (Confluent's; DeleteGroups): the group and its state go
    assert httpx.delete(f"{cluster}/share-groups/{GROUP}", timeout=10).status_code == 204
    assert_error(httpx.get(f"{cluster}/share-groups/{GROUP}", timeout=10), 404, 404)
    assert_error(httpx.delete(f"{cluster}/share-groups/{GROUP}", timeout=10), 404, 404)


def _links(doc: Any) -> list[str]:
    out: list[str] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += [v] if k in ("related", "self") and isinstance(v, str) else _links(v)
    elif isinstance(doc, list):
        for v in doc:
            out += _links(v)
    return out
