"""The console in a 3-broker cluster (`strata serve --etcd`, tests/broker/clusterlib.py): any
broker's console shows the whole cluster, its three brokers and the leaders and ISR of a
replicated topic's partitions, whichever broker serves the page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.broker.clusterlib import Cluster, wait_until
from tests.broker.etcdlib import EtcdProcess
from tests.ops.chromium import chromium

TOPIC = "replicated"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("console-cluster")
    etcd = EtcdProcess(root / "etcd").start()
    c = Cluster(root, etcd, proxied=False)
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def test_brokers_page_lists_the_whole_cluster(cluster: Cluster, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC].result(30)
    wait_until(lambda: cluster.fully_replicated(TOPIC), "the topic fully replicated")
    node = cluster.nodes[2]  # any broker serves the whole cluster
    with httpx.Client(base_url=node.http_url, timeout=30) as h:
        brokers = h.get("/console/api/brokers").json()["brokers"]
        assert [(b["id"], b["up"]) for b in brokers] == [(1, True), (2, True), (3, True)]
        assert sum(b["leaders"] for b in brokers) >= 3 and all(b["replicas"] >= 3 for b in brokers)
        parts = h.get(f"/console/api/topics/{TOPIC}").json()["partitions"]
        assert all(sorted(p["isr"]) == [1, 2, 3] and p["leader"] in (1, 2, 3) for p in parts)
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
