"""Partition reassignment under continuous acks=all load on four real brokers (the
fourth starts with nothing): a follower's replica moves to broker 4, then the leader's
replica moves away (the leadership changes with an epoch bump), a reassignment is
cancelled after its new replica caught up, and the controller is stopped (SIGTERM) just
as a reassignment starts. Requests go through a real Kafka client (kafka-python's
AlterPartitionReassignments / ListPartitionReassignments) and through
``strata cluster reassign``. The checker then proves that no acknowledged record was
lost or moved and that every replica, the new ones included, is byte-identical below the
high watermark; a broker a replica moved away from no longer has its directory."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.broker.clusterlib import (
    CLUSTER_NAME,
    Cluster,
    PhantomBroker,
    running_workload,
    started_cluster,
    wait_until,
)
from tests.brokers import ROOT

pytest.importorskip("confluent_kafka")
kafka_admin = pytest.importorskip("kafka.admin")

log = logging.getLogger(__name__)
TOPIC = "moving"
PHANTOM = 9  # registered in etcd, never fetches: keeps a reassignment in progress


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-reassign")
    with started_cluster(root, n=4) as c:
        yield c


def _cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    where = ("--etcd", cluster.etcd.endpoint, "--cluster-name", CLUSTER_NAME)
    return subprocess.run(
        [sys.executable, "-m", "api.cli", "cluster", *args, *where],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _admin(cluster: Cluster) -> Any:
    return kafka_admin.KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)


def _phantom_gone(cluster: Cluster) -> bool:
    from confluent_kafka.admin import AdminClient

    for node in cluster.nodes.values():
        if node.running:
            brokers = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10).brokers
            if PHANTOM in brokers:
                return False
    return True


def _replicas(cluster: Cluster, p: int) -> tuple[int, ...]:
    return cluster.view().topics[TOPIC].value.partitions[p]


def _settled(cluster: Cluster, p: int, replicas: tuple[int, ...]) -> bool:
    view = cluster.view()
    a = view.topics[TOPIC].value
    s = view.partition_state(TOPIC, p)
    return (
        p not in a.reassigning
        and a.partitions[p] == replicas
        and s is not None
        and set(s.isr) == set(replicas)
        and s.leader in view.brokers
    )


def _wait_settled(cluster: Cluster, p: int, replicas: tuple[int, ...]) -> None:
    wait_until(lambda: _settled(cluster, p, replicas), f"{TOPIC}-{p} on {list(replicas)}, all in sync")


def _controller(cluster: Cluster) -> int | None:
    c = cluster.view().controller  # None between a resignation and the next election
    return None if c is None else c.value.broker_id


def _dir(cluster: Cluster, broker: int, p: int) -> Any:
    return cluster.nodes[broker].data_dir / "logs" / f"{TOPIC}-{p}"


def _checkpointed(cluster: Cluster, broker: int, p: int) -> bool:
    path = cluster.nodes[broker].data_dir / "meta" / "replication-offset-checkpoint"
    return path.exists() and any(line.startswith(f"{TOPIC} {p} ") for line in path.read_text().splitlines())


def _wait_removed(cluster: Cluster, broker: int, p: int) -> None:
    wait_until(
        lambda: not _dir(cluster, broker, p).exists(), f"broker {broker}'s replica of {TOPIC}-{p} gone"
    )
    wait_until(
        lambda: not _checkpointed(cluster, broker, p), f"{TOPIC}-{p} out of broker {broker}'s checkpoint"
    )


def test_reassignments_under_load(cluster: Cluster) -> None:
    from kafka import TopicPartition

    cluster.create_topic(TOPIC, 2, min_isr=2, assignment=[[1, 2, 3], [2, 3, 1]])
    admin = _admin(cluster)
    phantom = PhantomBroker(cluster.etcd, PHANTOM).start()
    try:
        with running_workload(cluster, TOPIC, 2) as w:
            w.wait_progress(100)

            # 1. A follower's replica (3) moves to the empty broker 4, over the Kafka API.
            assert admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [1, 2, 4]}) == {
                TopicPartition(TOPIC, 0): None
            }
            _wait_settled(cluster, 0, (1, 2, 4))
            assert cluster.leader(TOPIC, 0) == 1
            _wait_removed(cluster, 3, 0)  # broker 3 still has partition 1: only 0 goes
            assert _dir(cluster, 3, 1).exists()
            w.wait_progress(100)

            # 2. The leader's replica moves away (to 3, which comes back empty), with the CLI.
            before = cluster.state(TOPIC, 0)
            out = _cli(
                cluster, "reassign", "--topic", TOPIC, "--partition", "0", "--replicas", "2,4,3", "--wait"
            )
            assert out.returncode == 0, out.stderr
            assert "replicas 2,4,3" in out.stdout
            _wait_settled(cluster, 0, (2, 4, 3))
            after = cluster.state(TOPIC, 0)
            assert after.leader == 2 and after.leader_epoch > before.leader_epoch
            _wait_removed(cluster, 1, 0)
            w.wait_progress(100)

            # 3. Cancelled after the new replica (4) caught up: 9 never does, so the
            # reassignment is still running when the cancellation comes.
            admin.alter_partition_reassignments({TopicPartition(TOPIC, 1): [4, PHANTOM, 2]})
            wait_until(lambda: 4 in cluster.state(TOPIC, 1).isr, "broker 4 in sync on partition 1")
            listed = admin.list_partition_reassignments()
            assert listed == {
                TopicPartition(TOPIC, 1): {
                    "replicas": [4, PHANTOM, 2, 3, 1],
                    "adding_replicas": [4, PHANTOM],
                    "removing_replicas": [3, 1],
                }
            }
            out = _cli(cluster, "reassignments", "--output", "json")
            assert out.returncode == 0, out.stderr
            assert [(r["partition"], r["target"]) for r in json.loads(out.stdout)] == [(1, [4, PHANTOM, 2])]
            out = _cli(cluster, "status")
            assert "reassignments in progress (1)" in out.stdout, out.stdout
            out = _cli(cluster, "reassign", "--topic", TOPIC, "--partition", "1", "--cancel", "--wait")
            assert out.returncode == 0, out.stderr
            _wait_settled(cluster, 1, (2, 3, 1))
            _wait_removed(cluster, 4, 1)
            assert admin.list_partition_reassignments() == {}
            w.wait_progress(100)

            # 4. The controller stops (SIGTERM) as a reassignment starts; another takes
            # over, the state being in etcd, and the move completes.
            controller = cluster.controller()
            admin.close()
            out = _cli(cluster, "reassign", "--topic", TOPIC, "--partition", "1", "--replicas", "3,1,4")
            assert out.returncode == 0, out.stderr
            cluster.nodes[controller].stop()  # SIGTERM
            wait_until(lambda: _controller(cluster) not in (None, controller), "a new controller")
            cluster.nodes[controller].start()  # it may be one of the replicas
            _wait_settled(cluster, 1, (3, 1, 4))
            _wait_removed(cluster, 2, 1)
            w.wait_progress(100)
            w.stop()
            counts = w.check(cluster)  # replicas, new ones included, identical below the HW
        log.info("%s: %s", TOPIC, counts)
    finally:
        phantom.close()
    # A client that still sees the phantom in Metadata may pick it to ask for the controller.
    wait_until(lambda: _phantom_gone(cluster), f"broker {PHANTOM} out of every broker's metadata")
    # Errors are per partition, precise, and change nothing.
    admin = _admin(cluster)
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    results = admin.alter_partition_reassignments(
        {
            TopicPartition(TOPIC, 0): [2, 42, 3],
            TopicPartition(TOPIC, 1): None,
            TopicPartition(TOPIC, 7): [1, 2],
        }
    )
    assert results == {
        TopicPartition(TOPIC, 0): InvalidReplicationAssignmentError,
        TopicPartition(TOPIC, 1): NoReassignmentInProgressError,
        TopicPartition(TOPIC, 7): UnknownTopicOrPartitionError,
    }
    admin.close()
    out = _cli(cluster, "reassign", "--topic", TOPIC, "--partition", "0", "--replicas", "2,2")
    assert out.returncode == 1 and "repeats a broker" in out.stderr
    assert _replicas(cluster, 0) == (2, 4, 3) and _replicas(cluster, 1) == (3, 1, 4)
