"""Compaction of the replicated ``__consumer_offsets`` partitions (broker.groups.replicated_offsets).

Real etcd, three real brokers, confluent-kafka committing offsets. The offsets topic's
segments are tiny (``offsets.topic.segment.bytes`` 4096), so many commits over a few
keys make the coordinator compact its partition: the leader re-appends the live keys
and moves its log start offset past the old records; every follower follows (same log
start offset, same segment files, the old ones deleted). Committed offsets stay what
was last acknowledged, also after the coordinator is killed with SIGKILL right after a
compaction and another broker loads the partition.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.groups.replicated_offsets import partition_for
from tests.broker.clusterlib import Cluster, wait_until
from tests.broker.etcdlib import EtcdProcess

pytest.importorskip("confluent_kafka")

log = logging.getLogger(__name__)
OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 2
TOPIC = "ledger"
PARTITIONS = 3
SEGMENT_BYTES = 4096
MAX_COMMITS = 3000  # bound of the commit loops; reached only when compaction never happens


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-groups-compaction")
    etcd = EtcdProcess(root / "etcd").start()
    env = {
        "STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "STRATA_OFFSETS_TOPIC_SEGMENT_BYTES": str(SEGMENT_BYTES),
        "STRATA_OFFSETS_TOPIC_NUM_PARTITIONS": str(OFFSETS_PARTITIONS),
    }
    c = Cluster(root, etcd, env=env)
    try:
        c.start()
        c.create_topic(TOPIC, PARTITIONS)
        yield c
    finally:
        c.close()
        etcd.kill()


def _replica_dir(cluster: Cluster, broker: int, partition: int) -> Path:
    return cluster.nodes[broker].data_dir / "logs" / f"{OFFSETS}-{partition}"


def _log_start(cluster: Cluster, broker: int, partition: int) -> int:
    """The replica's durable log start offset (its ``log-start-offset`` file; 0 before any)."""
    path = _replica_dir(cluster, broker, partition) / "log-start-offset"
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return 0
    return int(text) if text else 0  # an atomic replace: never torn, but be lenient


def _segment_bases(cluster: Cluster, broker: int, partition: int) -> list[int]:
    return sorted(int(p.stem) for p in _replica_dir(cluster, broker, partition).glob("*.log"))


def _consumer(cluster: Cluster, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})


def _commit(consumer: Any, offset: int) -> dict[int, int]:
    """Commit ``offset + p`` for every partition p (synchronously: acknowledged on return)."""
    from confluent_kafka import TopicPartition

    wanted = {p: offset + p for p in range(PARTITIONS)}
    done = consumer.commit(
        offsets=[TopicPartition(TOPIC, p, o) for p, o in wanted.items()], asynchronous=False
    )
    assert {tp.partition: tp.offset for tp in done} == wanted
    assert all(tp.error is None for tp in done)
    return wanted


def _committed(cluster: Cluster, group: str) -> dict[int, int]:
    """The group's committed offsets, read by a fresh consumer (retried while the
    coordinator moves or loads: librdkafka reports some of those as errors)."""
    from confluent_kafka import KafkaException, TopicPartition

    out: dict[int, int] = {}

    def read() -> bool:
        c = _consumer(cluster, group)
        try:
            got = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        except KafkaException as exc:
            log.info("committed() of %s failed, retrying: %s", group, exc)
            return False
        finally:
            c.close()
        if any(tp.error is not None for tp in got):
            return False
        out.clear()
        out.update({tp.partition: tp.offset for tp in got})
        return True

    wait_until(read, f"the committed offsets of {group}")
    return out


def _all_replicas_compacted(cluster: Cluster, partition: int, leader: int) -> bool:
    """Every replica has the leader's log start offset (past 0) and the same segment files,
    none of them entirely below the log start offset."""
    lso = _log_start(cluster, leader, partition)
    bases = _segment_bases(cluster, leader, partition)
    if lso == 0 or not bases or bases[0] > lso:
        return False
    for b in cluster.nodes:
        if _log_start(cluster, b, partition) != lso or _segment_bases(cluster, b, partition) != bases:
            return False
    return len(bases) < 2 or bases[1] > lso


def test_offsets_partition_compacts_on_every_replica(cluster: Cluster) -> None:
    group = "compacting"
    p = partition_for(group, OFFSETS_PARTITIONS)
    consumer = _consumer(cluster, group)
    try:
        last = _commit(consumer, 0)  # creates the offsets topic (FindCoordinator)
        cluster.wait_fully_replicated(OFFSETS)
        leader = cluster.leader(OFFSETS, p)
        # Each commit is about 250 bytes, the live keys about 200: a compaction every
        # dozen commits or so. At least 100 commits, then until the log start offset moved.
        for i in range(1, MAX_COMMITS):
            last = _commit(consumer, i * 10)
            if i >= 100 and _log_start(cluster, leader, p) > 0:
                break
        else:
            pytest.fail(f"the log start offset of {OFFSETS}-{p} never moved on broker {leader}")
    finally:
        consumer.close()
    assert cluster.leader(OFFSETS, p) == leader, "leadership moved during the test"
    wait_until(
        lambda: _all_replicas_compacted(cluster, p, leader),
        f"every replica of {OFFSETS}-{p} compacted like leader {leader}",
    )
    for b in cluster.nodes:
        bases = _segment_bases(cluster, b, p)
        assert 0 not in bases, f"broker {b} kept the first segment: {bases}"
    assert _committed(cluster, group) == last


def test_new_coordinator_after_compaction_serves_the_same_offsets(cluster: Cluster) -> None:
    group = "compacted-then-killed"
    p = partition_for(group, OFFSETS_PARTITIONS)
    consumer = _consumer(cluster, group)
    last = _commit(consumer, 0)
    cluster.wait_fully_replicated(OFFSETS)
    state = cluster.state(OFFSETS, p)
    victim = state.leader
    before = _log_start(cluster, victim, p)
    for i in range(1, MAX_COMMITS):
        last = _commit(consumer, 1000 + i)
        if _log_start(cluster, victim, p) > before:
            break  # a compaction just moved the log start offset: kill at once
    else:
        consumer.close()
        pytest.fail(f"the log start offset of {OFFSETS}-{p} never moved on broker {victim}")
    log.info("killing coordinator %d right after a compaction (committed %s)", victim, last)
    cluster.nodes[victim].kill()
    consumer.close()
    try:
        new = cluster.wait_new_leader(OFFSETS, p, victim, state.leader_epoch)
        assert new != victim
        assert _committed(cluster, group) == last
        # And the new coordinator keeps taking commits on top of the compacted log.
        c = _consumer(cluster, group)
        try:
            after = _commit(c, 5000)
        finally:
            c.close()
        assert _committed(cluster, group) == after
    finally:
        cluster.nodes[victim].start()
    cluster.wait_fully_replicated(OFFSETS)
