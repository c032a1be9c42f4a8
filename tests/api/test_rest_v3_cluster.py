"""REST v3 and v2 metadata on a 2-broker cluster (real etcd, real broker processes): whichever
broker serves the request, brokers, partitions, leaders, replicas and in-sync replicas are the
whole cluster's, as the metadata store says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker.clusterlib import Cluster
from tests.broker.etcdlib import EtcdProcess

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    etcd = EtcdProcess(tmp_path / "etcd").start()
    c = Cluster(tmp_path, etcd, n=2)
    try:
        yield c.start()
    finally:
        c.close()
        etcd.kill()


def test_metadata_is_the_clusters_from_any_broker(cluster: Cluster) -> None:
    cluster.create_topic("spread", 2, rf=2, min_isr=1)
    cluster.wait_fully_replicated("spread")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i in range(20):
        producer.produce("spread", value=b"x", partition=i % 2)
    assert producer.flush(30) == 0
    commit = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "spread-readers"})
    try:
        commit.commit(
            offsets=[TopicPartition("spread", 0, 5), TopicPartition("spread", 1, 5)], asynchronous=False
        )
    finally:
        commit.close()
    for b in (1, 2):
        with httpx.Client(base_url=cluster.nodes[b].http_url, timeout=30) as http:
            clusters = http.get("/v3/clusters").json()["data"]
            [c] = clusters
            cid = c["cluster_id"]
            base = f"{cluster.nodes[b].http_url}/v3/clusters/{cid}"
            assert c["controller"] == {"related": f"{base}/brokers/{cluster.controller()}"}
            brokers = http.get(f"/v3/clusters/{cid}/brokers").json()["data"]
            assert [x["broker_id"] for x in brokers] == [1, 2]
            assert all(isinstance(x["port"], int) and x["host"] for x in brokers)
            assert http.get("/brokers").json() == {"brokers": [1, 2]}
            for p in (0, 1):
                leader = cluster.leader("spread", p)
                part = http.get(f"/v3/clusters/{cid}/topics/spread/partitions/{p}").json()
                assert part["leader"] == {"related": f"{base}/topics/spread/partitions/{p}/replicas/{leader}"}
                replicas = http.get(f"/v3/clusters/{cid}/topics/spread/partitions/{p}/replicas").json()[
                    "data"
                ]
                assert sorted(r["broker_id"] for r in replicas) == [1, 2]
                assert {r["broker_id"]: r["is_leader"] for r in replicas} == {1: leader == 1, 2: leader == 2}
                assert all(r["is_in_sync"] for r in replicas)
                v2 = http.get(f"/topics/spread/partitions/{p}").json()
                assert v2["leader"] == leader
                assert sorted((r["broker"], r["leader"], r["in_sync"]) for r in v2["replicas"]) == [
                    (1, leader == 1, True),
                    (2, leader == 2, True),
                ]
            on_other = http.get(f"/v3/clusters/{cid}/brokers/{3 - b}/partition-replicas").json()["data"]
            assert {(r["topic_name"], r["partition_id"]) for r in on_other} >= {("spread", 0), ("spread", 1)}
            # a broker's static configs: another broker's are relayed to it
            for other in (b, 3 - b):
                r = http.get(f"/v3/clusters/{cid}/brokers/{other}/configs")
                assert r.status_code == 200, r.text
                assert {c["broker_id"] for c in r.json()["data"]} == {other}
            # consumer groups: every broker lists the group and answers for it (relayed to
            # its coordinator when that is the other broker)
            groups = http.get(f"/v3/clusters/{cid}/consumer-groups").json()["data"]
            assert [g["consumer_group_id"] for g in groups] == ["spread-readers"]
            summary = http.get(f"/v3/clusters/{cid}/consumer-groups/spread-readers/lag-summary")
            assert summary.status_code == 200, summary.text
            assert summary.json()["total_lag"] == 10  # 20 produced, 10 committed
            lags = http.get(f"/v3/clusters/{cid}/consumer-groups/spread-readers/lags").json()["data"]
            assert {(x["partition_id"], x["current_offset"]) for x in lags} == {(0, 5), (1, 5)}
