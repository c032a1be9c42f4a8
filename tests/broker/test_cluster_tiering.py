"""Tiered storage in a cluster: three brokers share one bucket, only the partition's leader
uploads, every manifest write carries its leader epoch, and a write for an older epoch
(a deposed leader that has not noticed yet) is refused."""

from __future__ import annotations

import asyncio
import re
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from hot.errors import FencedLeaderEpochError
from tests.broker.clusterlib import Cluster, wait_until
from tests.broker.etcdlib import EtcdProcess
from tiering.keys import manifest_key
from tiering.manifest import PartitionManifest, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.store import open_store

ck = pytest.importorskip("confluent_kafka")

TOPIC = "tiered"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-tiering")
    etcd = EtcdProcess(root / "etcd").start()
    env = {
        "STRATA_OBJECT_STORE": f"file://{root / 'bucket'}",
        "STRATA_LOG_REMOTE_STORAGE_ENABLE": "true",
        "STRATA_LOG_SEGMENT_BYTES": "16384",
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "200",
        "STRATA_TIERING_SHUTDOWN_UPLOAD_IN_CLUSTER": "true",
    }
    c = Cluster(root, etcd, env=env)
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def _manifest(cluster: Cluster) -> PartitionManifest | None:
    topic_id = uuid.UUID(cluster.view().topics[TOPIC].value.topic_id)
    path = cluster.root / "bucket" / manifest_key(TOPIC, topic_id, 0)
    return PartitionManifest.from_json(path.read_bytes()) if path.exists() else None


def _uploaded_segments(cluster: Cluster, broker: int) -> float:
    with urllib.request.urlopen(f"{cluster.nodes[broker].http_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    m = re.search(rf'^strata_tiering_uploaded_segments_total{{topic="{TOPIC}"}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def test_only_the_leader_tiers_and_manifests_carry_its_epoch(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 1, rf=3, min_isr=2)
    producer = ck.Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 2048}
    )
    for i in range(3000):
        producer.produce(TOPIC, value=b"%06d" % i + b"x" * 100, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0

    def tiered() -> bool:
        m = _manifest(cluster)
        return m is not None and len([s for s in m.segments if s.state is SegmentState.COPIED]) >= 3

    wait_until(tiered, "three segments uploaded")
    s = cluster.state(TOPIC, 0)
    m = _manifest(cluster)
    assert m is not None and m.leader_epoch == s.leader_epoch
    # The manifest is written before the uploader counts the segment.
    wait_until(lambda: _uploaded_segments(cluster, s.leader) >= 3, "the leader to count its uploads")
    for b in s.isr:
        if b != s.leader:
            assert _uploaded_segments(cluster, b) == 0, f"follower {b} uploaded"


def test_leader_change_moves_tiering(cluster: Cluster) -> None:
    """After a failover the new leader writes the manifest in its epoch."""
    s = cluster.state(TOPIC, 0)
    old = cluster.nodes[s.leader]
    old.stop()
    new = cluster.wait_new_leader(TOPIC, 0, s.leader, s.leader_epoch)
    producer = ck.Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 2048}
    )
    for i in range(3000):
        producer.produce(TOPIC, value=b"%06d" % i + b"y" * 100, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0
    epoch = cluster.state(TOPIC, 0).leader_epoch

    def written_by_new_leader() -> bool:
        m = _manifest(cluster)
        return m is not None and m.leader_epoch == epoch

    wait_until(written_by_new_leader, f"broker {new} to write the manifest in epoch {epoch}")
    # Its first write in the epoch may be a COPY_STARTED entry; the counter moves at COPIED.
    wait_until(lambda: _uploaded_segments(cluster, new) > 0, f"broker {new} to complete an upload")

    # The deposed leader's epoch can no longer write (a zombie that has not noticed yet).
    topic_id = uuid.UUID(cluster.view().topics[TOPIC].value.topic_id)

    async def zombie_write() -> None:
        store = open_store(f"file://{cluster.root / 'bucket'}")
        try:
            with pytest.raises(FencedLeaderEpochError):
                await ManifestStore(store).update(
                    TOPIC, topic_id, 0, lambda cur: cur.advance_log_start(1), leader_epoch=s.leader_epoch
                )
        finally:
            await store.close()

    before = _manifest(cluster)
    asyncio.run(zombie_write())
    after = _manifest(cluster)
    assert before is not None and after is not None and after.log_start_offset == before.log_start_offset
    old.start()
    cluster.wait_fully_replicated(TOPIC)


def test_upload_at_shutdown_and_the_next_leader_continue_the_bucket(cluster: Cluster) -> None:
    """With shutdown_upload_in_cluster, a leader stopped cleanly seals its young active
    segment and uploads it; no follower saw that boundary. The new leader starts a segment
    at its first append, so its own upload at shutdown continues the uploaded range
    (appending into its older segment would straddle it: tiering would stop with a gap),
    and every replica ends up with the same segment boundaries."""
    topic = "sealed"
    cluster.create_topic(topic, 1, rf=3, min_isr=2)
    topic_id = uuid.UUID(cluster.view().topics[topic].value.topic_id)
    path = cluster.root / "bucket" / manifest_key(topic, topic_id, 0)

    def remote_next() -> int:
        return PartitionManifest.from_json(path.read_bytes()).next_offset() if path.exists() else 0

    def produce(first: int, count: int) -> None:
        p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(first, first + count):
            p.produce(topic, value=b"%06d" % i, partition=0)
        assert p.flush(60) == 0

    produce(0, 20)
    s = cluster.state(topic, 0)
    first = cluster.nodes[s.leader]
    first.stop()
    assert "sealed-0 up to offset 19" in first.output(), first.output()[-3000:]
    assert remote_next() == 20
    second_id = cluster.wait_new_leader(topic, 0, s.leader, s.leader_epoch)
    produce(20, 20)
    second = cluster.nodes[second_id]
    second.stop()
    assert "sealed-0 up to offset 39" in second.output(), second.output()[-3000:]
    assert remote_next() == 40
    first.start()
    second.start()
    cluster.wait_fully_replicated(topic)

    def bases(broker: int) -> list[int]:
        d = cluster.nodes[broker].data_dir / "logs" / f"{topic}-0"
        return sorted(int(f.stem) for f in d.glob("*.log") if f.stat().st_size > 0)

    wait_until(lambda: all(bases(b) == [0, 20] for b in cluster.nodes), "equal segment boundaries")
