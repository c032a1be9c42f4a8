"""The schema registry in a 3-broker cluster on real etcd: every broker answers (those
that do not lead ``_schemas-0`` relay to the one that does), ids stay what they were
after the leader is killed, new ids continue above them, and ``_schemas`` holds
Confluent's record layout."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.broker.clusterlib import Cluster, wait_until
from tests.broker.etcdlib import EtcdProcess

MEDIA = "application/vnd.schemaregistry.v1+json"


def call(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": MEDIA})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def record(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "f", "type": "string"}]})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-registry")
    etcd = EtcdProcess(root / "etcd").start()
    c = Cluster(root, etcd, env={"STRATA_SCHEMA_REGISTRY_LISTEN": "127.0.0.1:0"})
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def test_every_broker_serves_and_ids_survive_a_leader_kill(cluster: Cluster) -> None:
    urls = {i: n.registry_url for i, n in cluster.nodes.items()}
    ids: dict[str, int] = {}
    for i, url in urls.items():  # each broker registers one: relayed to the leader
        status, doc = call(f"{url}/subjects/s{i}-value/versions", "POST", {"schema": record(f"R{i}")})
        assert status == 200, doc
        ids[f"s{i}-value"] = doc["id"]
    assert sorted(ids.values()) == [1, 2, 3]
    for url in urls.values():
        assert call(f"{url}/subjects") == (200, sorted(ids))
        for s, sid in ids.items():
            assert call(f"{url}/subjects/{s}/versions/1")[1]["id"] == sid
    cluster.wait_fully_replicated("_schemas")
    old = cluster.state("_schemas", 0)
    cluster.nodes[old.leader].kill(signal.SIGKILL)
    new_leader = cluster.wait_new_leader("_schemas", 0, old.leader, old.leader_epoch)
    survivors = [i for i in urls if i != old.leader]
    assert new_leader in survivors

    def answers() -> bool:
        return call(f"{urls[survivors[0]]}/subjects")[0] == 200

    wait_until(answers, "the registry answering after the failover")
    for i in survivors:
        for s, sid in ids.items():
            assert call(f"{urls[i]}/subjects/{s}/versions/1")[1]["id"] == sid
    status, doc = call(
        f"{urls[survivors[-1]]}/subjects/after-value/versions", "POST", {"schema": record("After")}
    )
    assert status == 200 and doc["id"] == 4, doc

    # _schemas in Confluent's layout, read by a plain consumer.
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("_schemas", 0, 0)])
        keys = []
        for _ in range(60):
            m = c.poll(1.0)
            if m is None or m.error():
                if len(keys) >= 4:
                    break
                continue
            keys.append(json.loads(m.key()))
            value = json.loads(m.value())
            assert value["id"] == ids.get(value["subject"], 4)
    finally:
        c.close()
    assert {"keytype": "SCHEMA", "subject": "s1-value", "version": 1, "magic": 1} in keys
