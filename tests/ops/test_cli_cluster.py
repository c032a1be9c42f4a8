"""`strata cluster health` and `strata cluster info` as a user runs them, through the Kafka
listener only (no --etcd): against a single broker, and against a 3-broker cluster losing
a broker (nodes down, under-replicated partitions, the exit code) and getting it back."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.clusterlib import Cluster, wait_until
from tests.broker.etcdlib import EtcdProcess
from tests.brokers import ROOT, BrokerProcess, create_topic


def strata(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_single_broker_health_and_info(broker: BrokerProcess) -> None:
    bs = ("-b", broker.bootstrap)
    create_topic(broker.bootstrap, "cluster-info", 3)
    r = strata("cluster", "health", *bs, "--fail-if-unhealthy")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == ["CLUSTER HEALTH OVERVIEW", "=======================", "Healthy:" + " " * 26 + "true"]
    assert "Under-replicated partitions (0):  []" in lines
    doc = json.loads(strata("cluster", "health", *bs, "-o", "json").stdout)
    assert doc["healthy"] is True and doc["unhealthy_reasons"] == [] and doc["partitions"] >= 3

    info = json.loads(strata("cluster", "info", *bs, "-o", "json").stdout)
    assert [b["port"] for b in info["brokers"]] == [broker.kafka_port]
    assert info["controller_id"] == info["brokers"][0]["node_id"]
    assert {"name": "cluster-info", "partitions": 3, "replicas": 1, "internal": False} in info["topics"]
    text = strata("cluster", "info", *bs).stdout
    assert text.startswith("CLUSTER\n=======\n") and "cluster-info" in text and "BROKERS" in text


def test_health_commands_against_nothing_are_one_line() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
        for cmd in ("health", "info"):
            r = strata("cluster", cmd, "-b", dead)
            assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot connect" in r.stderr, r.stderr
    r = strata("cluster", "status")  # etcd's view needs --etcd; says where else to look
    assert r.returncode == 1 and "give --etcd" in r.stderr and "strata cluster health" in r.stderr, r.stderr


@pytest.fixture
def three(tmp_path: Path) -> Iterator[Cluster]:
    etcd = EtcdProcess(tmp_path / "etcd").start()
    c = Cluster(tmp_path, etcd)
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def test_cluster_losing_a_broker(three: Cluster) -> None:
    three.create_topic("health", 2, rf=3, min_isr=1)
    bs = ("-b", three.nodes[1].bootstrap)
    # the topic commands work in a cluster too: trim asks each partition's leader
    three.create_topic("spread", 3, rf=2, assignment=[[1, 2], [2, 3], [3, 1]])
    for p in range(3):
        r = subprocess.run(
            [sys.executable, "-m", "api.cli", "produce", "spread", *bs, "-p", str(p)],
            cwd=ROOT, input="a\nb\nc\n", capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    r = strata("topic", "trim", "spread", *bs, "--offset", "2", "--no-confirm", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert [(x["partition"], x["log_start_offset"]) for x in json.loads(r.stdout)] == [(0, 2), (1, 2), (2, 2)]
    r = strata("consume", "spread", *bs, "-o", "beginning", "-e", "-f", r"%p:%o:%s\n")
    assert r.returncode == 0 and sorted(r.stdout.split()) == ["0:2:c", "1:2:c", "2:2:c"], r.stderr
    r = strata("topic", "add-partitions", "spread", *bs, "-n", "1")
    assert r.returncode == 0 and r.stdout == "topic spread: 3 -> 4 partitions\n", r.stderr
    r = strata("topic", "alter-config", "spread", *bs, "--set", "retention.ms=3600000")
    assert r.returncode == 0, r.stderr
    described = json.loads(strata("topic", "describe", "spread", *bs, "-o", "json").stdout)
    assert described["configs"]["retention.ms"] == "3600000" and len(described["partitions"]) == 4
    assert [p["log_start_offset"] for p in described["partitions"]][:3] == [2, 2, 2]
    info = json.loads(strata("cluster", "info", *bs, "-o", "json").stdout)
    assert {"name": "spread", "partitions": 4, "replicas": 2, "internal": False} in info["topics"]
    wait_until(lambda: three.fully_replicated("spread"), "the new partition replicated")
    r = strata("cluster", "health", *bs, "--fail-if-unhealthy", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [b["node_id"] for b in json.loads(r.stdout)["brokers"]] == [1, 2, 3]

    three.nodes[3].kill()

    def settled() -> bool:
        # every partition with a replica on broker 3 (the new spread/3 may have one too)
        doc = json.loads(strata("cluster", "health", *bs, "-o", "json").stdout)
        under = {(t["topic"], t["partition"]) for t in doc["under_replicated"]}
        wanted = {("health", 0), ("health", 1), ("spread", 1), ("spread", 2)}
        return doc["down_brokers"] == [3] and wanted <= under and not doc["offline"]

    wait_until(settled, "the partitions on broker 3 under-replicated")
    r = strata("cluster", "health", *bs, "--fail-if-unhealthy")
    assert r.returncode == 1, r.stdout
    assert "Healthy:                          false" in r.stdout
    assert "Unhealthy reasons:                [nodes_down under_replicated_partitions]" in r.stdout
    assert "Nodes down:                       [3]" in r.stdout
    assert "health/0 health/1" in r.stdout and "spread/1 spread/2" in r.stdout
    # without the flag the report is the same and the exit 0
    assert strata("cluster", "health", *bs).returncode == 0

    # --wait: asks again until healthy
    three.nodes[3].start()
    r = strata("cluster", "health", *bs, "--wait", "90")
    assert r.returncode == 0, r.stdout
    assert "Healthy:                          true" in r.stdout
