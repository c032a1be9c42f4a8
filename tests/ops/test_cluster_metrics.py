"""Cluster metrics move as the cluster changes: two real `strata serve --etcd` brokers on a
real etcd; a replicated topic is fully in sync, then one broker stops and the other
reports the under-replicated partitions, the shrunk ISR and the leader elections."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.broker.clusterlib import FAST_ENV
from tests.broker.etcdlib import EtcdProcess
from tests.brokers import BrokerProcess

TOPIC = "replicated"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(http: str) -> Samples:
    with urllib.request.urlopen(f"{http}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name.startswith("strata_cluster_")
    }


def _get(s: Samples, name: str, **labels: str) -> float | None:
    return s.get((name, frozenset(labels.items())))


def _wait(http: str, cond: Callable[[Samples], bool], what: str, timeout: float = 60.0) -> Samples:
    deadline = time.monotonic() + timeout
    while not cond(s := _scrape(http)):
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {s}"
        time.sleep(0.2)
    return s


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    server = EtcdProcess(tmp_path / "etcd").start()
    try:
        yield server
    finally:
        server.stop()


def test_under_replication_isr_and_elections_are_exported(etcd: EtcdProcess, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = [
        BrokerProcess(tmp_path / f"b{i}", "--etcd", etcd.endpoint, "--broker-id", str(i), env=dict(FAST_ENV))
        for i in (1, 2)
    ]
    try:
        for b in brokers:
            b.start()
        b1, b2 = brokers
        admin = AdminClient({"bootstrap.servers": b1.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=2)])[TOPIC].result(30)
        parts = [str(p) for p in (0, 1)]

        def in_sync(s: Samples) -> bool:
            return _get(s, "strata_cluster_live_brokers") == 2 and all(
                _get(s, "strata_cluster_partition_isr", topic=TOPIC, partition=p) == 2 for p in parts
            )

        before = _wait(b1.http_url, in_sync, "both replicas in sync")
        assert _get(before, "strata_cluster_under_replicated_partitions") == 0
        assert _get(before, "strata_cluster_offline_partitions") == 0
        assert _get(before, "strata_cluster_controller_epoch") is not None
        leaders = {
            p: _get(before, "strata_cluster_partition_leader", topic=TOPIC, partition=p) for p in parts
        }
        epochs = {
            p: _get(before, "strata_cluster_partition_leader_epoch", topic=TOPIC, partition=p) for p in parts
        }
        assert sorted(leaders.values()) == [1.0, 2.0]  # placement spreads leaders (broker.controller)
        for p in parts:
            assert _get(before, "strata_cluster_partition_replicas", topic=TOPIC, partition=p) == 2
            assert _get(before, "strata_cluster_partition_under_replicated", topic=TOPIC, partition=p) == 0

        assert b2.stop() == 0

        def shrunk(s: Samples) -> bool:
            return (
                _get(s, "strata_cluster_live_brokers") == 1
                and _get(s, "strata_cluster_under_replicated_partitions") == 2
                and all(
                    _get(s, "strata_cluster_partition_leader", topic=TOPIC, partition=p) == 1 for p in parts
                )
            )

        after = _wait(b1.http_url, shrunk, "broker 1 leading both partitions with a shrunk ISR")
        assert _get(after, "strata_cluster_offline_partitions") == 0
        for p in parts:
            assert _get(after, "strata_cluster_partition_isr", topic=TOPIC, partition=p) == 1
            assert _get(after, "strata_cluster_partition_under_replicated", topic=TOPIC, partition=p) == 1
            epoch = _get(after, "strata_cluster_partition_leader_epoch", topic=TOPIC, partition=p)
            assert epoch is not None and epochs[p] is not None
            # An election happened exactly where broker 2 led: its epoch moved on.
            assert (epoch > epochs[p]) == (leaders[p] == 2), (p, leaders, epochs, epoch)
        assert b1.stop() == 0
    finally:
        for b in brokers:
            b.kill()
