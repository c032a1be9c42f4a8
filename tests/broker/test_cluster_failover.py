"""Failover under continuous acks=all load (RF=3, min.insync.replicas=2), as Kafka's
replication_test.py does it: hard (kill -9) and clean (SIGTERM) bounces of a partition's
leader, and clean bounces of the controller, five times each. Real confluent-kafka
clients keep producing and consuming throughout; the checker then proves that no
acknowledged record was lost or moved, that nothing was duplicated or reordered, and that
all replicas are byte-identical up to the high watermark."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

from kwire import error_table as E
from tests.broker.clusterlib import Cluster, StrataNode, running_workload, started_cluster, wait_until

pytest.importorskip("confluent_kafka")

log = logging.getLogger(__name__)
ROUNDS = 5
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-failover")
    with started_cluster(root) as c:
        yield c


def _bounce_leaders(cluster: Cluster, topic: str, stop: Callable[[StrataNode], object]) -> None:
    cluster.create_topic(topic, PARTITIONS, rf=3, min_isr=2)
    with running_workload(cluster, topic, PARTITIONS) as w:
        w.wait_progress(100)
        for i in range(ROUNDS):
            s = cluster.state(topic, 0)
            victim = cluster.nodes[s.leader]
            stop(victim)
            new = cluster.wait_new_leader(topic, 0, s.leader, s.leader_epoch)
            log.info("round %d: leader %d -> %d", i, s.leader, new)
            w.wait_progress(50)  # the producer found the new leader
            victim.start()
            cluster.wait_fully_replicated(topic)
        w.wait_progress(50)
        w.stop()
        counts = w.check(cluster)
    log.info("%s: %s", topic, counts)
    # A client still naming an epoch before the failovers is told its metadata is stale.
    s = cluster.state(topic, 0)
    assert cluster.fetch_error(s.leader, topic, s.leader_epoch - 1) == E.FENCED_LEADER_EPOCH
    assert cluster.fetch_error(s.leader, topic, s.leader_epoch) == E.NONE
    follower = next(b for b in s.isr if b != s.leader)
    assert cluster.fetch_error(follower, topic, s.leader_epoch) == E.NOT_LEADER_OR_FOLLOWER


def test_kill_9_of_the_leader(cluster: Cluster) -> None:
    _bounce_leaders(cluster, "kill-leader", lambda node: node.kill())


def test_sigterm_bounce_of_the_leader(cluster: Cluster) -> None:
    _bounce_leaders(cluster, "bounce-leader", lambda node: node.stop())


def test_sigterm_bounce_of_the_controller(cluster: Cluster) -> None:
    topic = "bounce-controller"
    cluster.create_topic(topic, PARTITIONS, rf=3, min_isr=2)
    with running_workload(cluster, topic, PARTITIONS) as w:
        w.wait_progress(100)
        for _ in range(ROUNDS):
            old = cluster.controller()
            victim = cluster.nodes[old]
            assert victim.stop() == 0
            wait_until(
                lambda: (c := cluster.view().controller) is not None and c.value.broker_id != old,  # noqa: B023
                "another controller",
            )
            w.wait_progress(50)
            victim.start()
            cluster.wait_fully_replicated(topic)
        w.wait_progress(50)
        w.stop()
        counts = w.check(cluster)
    log.info("%s: %s", topic, counts)
