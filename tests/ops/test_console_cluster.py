"""The console in a 3-broker cluster (`strata serve --etcd`, tests/broker/clusterlib.py): any
broker's console shows the whole cluster, whichever broker serves the page: its three
brokers with each one's own disk, the leaders and ISR of a replicated topic, the records of
partitions other brokers lead, and the groups other brokers coordinate
(api.rest.peers)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.broker.clusterlib import Cluster, started_cluster, wait_until
from tests.ops.chromium import chromium

TOPIC = "replicated"
GROUPS = [f"console-g{i}" for i in range(6)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("console-cluster")
    with started_cluster(root, env={"STRATA_CONSOLE_SAMPLE_INTERVAL_S": "1"}, proxied=False) as c:
        yield c


def test_brokers_page_lists_the_whole_cluster(cluster: Cluster, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC].result(30)
    wait_until(lambda: cluster.fully_replicated(TOPIC), "the topic fully replicated")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(30):
        p.produce(TOPIC, value=f"rec-{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0
    for g in GROUPS:  # offsets-only groups, spread over the coordinators
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": g, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
        c.close()
    node = cluster.nodes[2]  # any broker serves the whole cluster
    with httpx.Client(base_url=node.http_url, timeout=30) as h:
        brokers = h.get("/console/api/brokers").json()
        assert brokers["unreachable"] == []
        rows = brokers["brokers"]
        assert [(b["id"], b["up"]) for b in rows] == [(1, True), (2, True), (3, True)]
        assert sum(b["leaders"] for b in rows) >= 3 and all(b["replicas"] >= 3 for b in rows)
        assert all(b["disk"]["free_bytes"] > 0 for b in rows)  # each broker's own
        parts = h.get(f"/console/api/topics/{TOPIC}").json()["partitions"]
        assert all(sorted(p["isr"]) == [1, 2, 3] and p["leader"] in (1, 2, 3) for p in parts)
        assert any(p["leader"] != 2 for p in parts)  # some records are read on another broker
        doc = h.get(f"/console/api/topics/{TOPIC}/messages", params={"mode": "offset", "limit": 500}).json()
        assert sorted(r["offset"] for r in doc["records"] if r["partition"] == 1) == list(range(10))
        assert len(doc["records"]) == 30
        listed = {g["group_id"] for g in h.get("/console/api/groups").json()["groups"]}
        assert set(GROUPS) <= listed
        for g in GROUPS:
            detail = h.get(f"/console/api/groups/{g}").json()
            assert [(q["partition"], q["committed_offset"]) for q in detail["partitions"]] == [(0, 1)]
        # the overview's charts merge the three brokers' histories (sampled every second)
        deadline = time.monotonic() + 30
        while not (overview := h.get("/console/api/overview").json())["history"]:
            assert time.monotonic() < deadline, overview
            time.sleep(0.5)
        assert overview["history_brokers"] == [1, 2, 3]
        assert overview["history"][-1]["produce_msgs"] >= 0
        other = h.get("/console/api/brokers/1").json()  # answered by broker 1 itself
        assert other["broker_id"] == 1 and other["disk"]["free_bytes"] > 0
    with chromium(tmp_path / "profile", 1280, 1000) as driver:
        driver.get(f"{node.http_url}/dashboard/brokers")
        wait = WebDriverWait(driver, 30, poll_frequency=0.2)
        wait.until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "[data-testid=brokers] tbody tr[data-row]")) == 3
        )
        rows = driver.find_elements(By.CSS_SELECTOR, "[data-testid=brokers] tbody tr[data-row]")
        assert sorted(r.get_attribute("data-row") for r in rows) == ["broker-1", "broker-2", "broker-3"]
        driver.get(f"{node.http_url}/dashboard")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=stat-brokers]"))
        wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=stat-brokers]").text.startswith("3 / 3")
        )
