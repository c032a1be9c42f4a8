"""Nodes of several processes in an etcd cluster: two machines (two data dirs, one host),
two processes each. Replicas of a partition are never placed on one machine, and a
process killed with -9 loses nothing acknowledged (acks=all, an idempotent producer):
its partitions' leadership moves to the other machine's replica, and it comes back."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.clusterlib import FAST_ENV
from tests.broker.etcdlib import EtcdProcess
from tests.brokers import BrokerProcess
from tests.node.test_node_processes import TOPIC, Acked, _check, _worker_pid

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[list[BrokerProcess]]:
    etcd = EtcdProcess(tmp_path / "etcd").start()
    env = {**FAST_ENV, "STRATA_OBJECT_STORE": f"file://{tmp_path / 'bucket'}"}
    nodes = [
        BrokerProcess(
            tmp_path / f"m{i}", "--etcd", etcd.endpoint, "--broker-id", str(i), "--processes", "2", env=env
        )
        for i in (1, 2)
    ]
    try:
        for n in nodes:
            n.start(timeout=120)
        yield nodes
    finally:
        for n in nodes:
            n.kill()
        etcd.kill()


def test_replicas_span_machines_and_a_killed_process_loses_nothing(machines: list[BrokerProcess]) -> None:
    a, _ = machines
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    md = admin.list_topics(timeout=20)
    assert len(md.brokers) == 4
    fut = admin.create_topics([NewTopic("three", num_partitions=1, replication_factor=3)])["three"]
    with pytest.raises(Exception) as info:
        fut.result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR  # 2 machines

    admin.create_topics(
        [NewTopic(TOPIC, num_partitions=6, replication_factor=2, config={"min.insync.replicas": "1"})]
    )[TOPIC].result(30)
    md = admin.list_topics(TOPIC, timeout=20)
    ids_a = {1, _broker_id(a, 2)}
    for p in md.topics[TOPIC].partitions.values():
        on_a = len(set(p.replicas) & ids_a)
        assert on_a == 1, f"partition {p.id}: replicas {p.replicas} (machine A is {ids_a})"

    acked = Acked(a.bootstrap)
    acked.send(300)
    os.kill(_worker_pid(a.data_dir, 2), signal.SIGKILL)
    acked.send(700, pause=0.002)
    acked.flush()
    assert acked.failed == 0 and acked.total == 1000
    assert "exited with code -9; restarting" in a.output()
    _check(acked, a.bootstrap)


def _broker_id(node: BrokerProcess, index: int) -> int:
    return int((node.data_dir / "processes" / str(index) / "meta" / "broker.id").read_text())
