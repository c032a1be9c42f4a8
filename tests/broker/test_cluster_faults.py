"""Faults other than process crashes, under continuous acks=all load (RF=3, min ISR 2):
a follower frozen (SIGSTOP) until it leaves the ISR, then resumed; etcd crashed and
restarted; two fast back-to-back failovers (KIP-279); and the leader cut off from the
other brokers by a TCP proxy, first with etcd still reachable (it must stop acknowledging
acks=all writes), then from etcd too (a zombie: what it accepted after the cut must not
survive as acknowledged). The checker of ``clusterlib`` runs after each."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.broker.clusterlib import Cluster, running_workload, started_cluster, wait_until

pytest.importorskip("confluent_kafka")

log = logging.getLogger(__name__)
PARTITIONS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-faults")
    with started_cluster(root) as c:
        yield c


def test_paused_follower_leaves_the_isr_and_rejoins(cluster: Cluster) -> None:
    topic = "paused"
    cluster.create_topic(topic, PARTITIONS, rf=3, min_isr=2)
    with running_workload(cluster, topic, PARTITIONS) as w:
        w.wait_progress(100)
        s = cluster.state(topic, 0)
        follower = next(b for b in s.isr if b != s.leader)
        node = cluster.nodes[follower]
        node.pause()
        try:
            wait_until(
                lambda: follower not in cluster.state(topic, 0).isr, "the frozen follower to leave the ISR"
            )
            w.wait_progress(100)  # two in-sync replicas still satisfy min.insync.replicas
        finally:
            node.resume()
        cluster.wait_fully_replicated(topic)
        w.wait_progress(50)
        w.stop()
        log.info("%s: %s", topic, w.check(cluster))


def test_etcd_crash_and_restart(cluster: Cluster) -> None:
    topic = "etcd-restart"
    cluster.create_topic(topic, PARTITIONS, rf=3, min_isr=2)
    with running_workload(cluster, topic, PARTITIONS) as w:
        w.wait_progress(100)
        cluster.etcd.restart()  # kill -9, then start on the same ports and data
        w.wait_progress(100)
        # Failover still works once etcd is back.
        s = cluster.state(topic, 0)
        victim = cluster.nodes[s.leader]
        victim.kill()
        cluster.wait_new_leader(topic, 0, s.leader, s.leader_epoch)
        w.wait_progress(50)
        victim.start()
        cluster.wait_fully_replicated(topic)
        w.stop()
        log.info("%s: %s", topic, w.check(cluster))


def test_two_fast_back_to_back_failovers(cluster: Cluster) -> None:
    """KIP-279: the second leader is killed as soon as it is elected, so the third may never
    have seen its epoch; the returning replicas must truncate by epoch, in rounds."""
    topic = "back-to-back"
    cluster.create_topic(topic, PARTITIONS, rf=3, min_isr=2)
    with running_workload(cluster, topic, PARTITIONS) as w:
        w.wait_progress(100)
        s0 = cluster.state(topic, 0)
        first = cluster.nodes[s0.leader]
        first.kill()
        second_id = cluster.wait_new_leader(topic, 0, s0.leader, s0.leader_epoch)
        s1 = cluster.state(topic, 0)
        second = cluster.nodes[second_id]
        second.kill()
        third = cluster.wait_new_leader(topic, 0, second_id, s1.leader_epoch)
        log.info("leaders %d -> %d -> %d", s0.leader, second_id, third)
        first.start()
        second.start()
        cluster.wait_fully_replicated(topic)
        w.wait_progress(100)
        w.stop()
        log.info("%s: %s", topic, w.check(cluster))


def test_leader_cut_off_from_the_other_brokers(cluster: Cluster) -> None:
    topic = "cut-off"
    cluster.create_topic(topic, PARTITIONS, rf=3, min_isr=2)
    with running_workload(cluster, topic, PARTITIONS) as w:
        w.wait_progress(100)
        s = cluster.state(topic, 0)
        leader = cluster.nodes[s.leader]
        followers = [b for b in s.isr if b != s.leader]

        # 1. Cut from the brokers only: followers cannot fetch; the leader shrinks the ISR
        # to itself and must acknowledge nothing the followers do not have.
        index = w.acked_count(0)
        leader.isolate()
        wait_until(lambda: cluster.state(topic, 0).isr == (s.leader,), "the ISR to shrink to the leader")
        # Acknowledged means on at least one other broker (acks=all with min ISR 2). The
        # ISR read above may have lost a follower before the cut, under load: such a
        # follower lags legitimately, so the bound is the furthest follower, not the nearest.
        frozen = max(_log_end(cluster, b, topic) for b in followers)
        sent = w.sent
        wait_until(lambda: w.sent >= sent + 200, "the producer to keep trying")
        late = [off for off, _ in w.acked_since(0, index) if off >= frozen]
        assert not late, f"acknowledged offsets {late[:5]} that no follower has"
        leader.reconnect()
        cluster.wait_fully_replicated(topic)
        w.wait_progress(100)

        # 2. Cut from the brokers and from etcd: its lease runs out, a follower takes over,
        # and what the old leader accepted meanwhile is truncated when it returns.
        s = cluster.state(topic, 0)
        leader = cluster.nodes[s.leader]
        leader.isolate(from_etcd=True)
        cluster.wait_new_leader(topic, 0, s.leader, s.leader_epoch)
        w.wait_progress(100)
        leader.reconnect()
        cluster.wait_fully_replicated(topic)
        w.wait_progress(50)
        w.stop()
        log.info("%s: %s", topic, w.check(cluster))


def _log_end(cluster: Cluster, broker: int, topic: str) -> int:
    """The log end offset of the broker's replica of partition 0, from its files."""
    import struct

    end = 0
    d = cluster.nodes[broker].data_dir / "logs" / f"{topic}-0"
    for path in sorted(d.glob("*.log")):
        data = path.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length <= 0 or pos + 12 + length > len(data):
                break
            (last_delta,) = struct.unpack_from(">i", data, pos + 23)
            end = base + last_delta + 1
            pos += 12 + length
    return end
