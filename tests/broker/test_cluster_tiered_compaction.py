"""A compacted tiered topic in a cluster: three brokers share one bucket; every replica
cleans locally, only the leader uploads and compacts the bucket. After the leader is
killed with SIGKILL the new leader continues uploading where the old one stopped (its
cleaned segments were never merged, so their boundaries still meet the bucket's) and
compacts the bucket again; a consumer from offset 0 reads the latest value of every key."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.broker.clusterlib import Cluster, wait_until
from tests.broker.etcdlib import EtcdProcess
from tests.broker.test_cluster_compaction import _consume, _produce
from tiering.keys import manifest_key
from tiering.manifest import PartitionManifest

pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(300)

TOPIC = "compacted"  # the name _produce/_consume use
KEYS = 16
CONFIGS = {
    "cleanup.policy": "compact",
    "remote.storage.enable": "true",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": "3600000",
    "local.retention.bytes": "1024",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-tiered-compaction")
    etcd = EtcdProcess(root / "etcd").start()
    env = {
        "STRATA_OBJECT_STORE": f"file://{root / 'bucket'}",
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "200",
        "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "500",
        "STRATA_TIERING_REMOTE_COMPACTION_INTERVAL_MS": "500",
        "STRATA_TIERING_REMOTE_COMPACTION_GRACE_MS": "0",
        "STRATA_LOG_CLEANER_BACKOFF_MS": "200",
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
    try:
        return PartitionManifest.from_json(path.read_bytes())
    except FileNotFoundError:
        return None


def _wait_uploaded(cluster: Cluster, offset: int) -> PartitionManifest:
    wait_until(
        lambda: (m := _manifest(cluster)) is not None and m.next_offset() >= offset,
        f"the bucket up to offset {offset}",
        timeout=90,
    )
    m = _manifest(cluster)
    assert m is not None
    return m


def _wait_compacted(cluster: Cluster, offset: int) -> PartitionManifest:
    wait_until(
        lambda: (m := _manifest(cluster)) is not None and m.cleaned_offset >= offset,
        f"remote compaction up to offset {offset}",
        timeout=90,
    )
    m = _manifest(cluster)
    assert m is not None
    return m


def test_leader_failover_keeps_uploading_and_compacting(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 1, rf=3, min_isr=2, configs=CONFIGS)
    written: dict[int, tuple[bytes, bytes]] = {}
    for phase in range(3):  # each phase reaches the bucket before the next is written
        _produce(cluster.bootstrap, written, range(4 * phase, 4 * phase + 4))
        _wait_uploaded(cluster, max(written) + 1 - 3 * KEYS)
    m = _wait_compacted(cluster, max(written) + 1 - 4 * KEYS)
    assert any(s.compacted and s.cleaned_ms is not None for s in m.copied())
    first_epoch = m.leader_epoch

    s = cluster.state(TOPIC, 0)
    cluster.nodes[s.leader].kill()
    cluster.wait_new_leader(TOPIC, 0, s.leader, s.leader_epoch)
    for phase in range(3, 5):
        _produce(cluster.bootstrap, written, range(4 * phase, 4 * phase + 4))
        m = _wait_uploaded(cluster, max(written) + 1 - 3 * KEYS)
    assert m.leader_epoch > first_epoch  # the new leader writes the manifest now
    m = _wait_compacted(cluster, max(written) + 1 - 4 * KEYS)
    copied = m.copied()
    for a, b in itertools.pairwise(copied):
        assert b.base_offset == a.last_offset + 1

    latest: dict[bytes, int] = {}
    for o in sorted(written):
        latest[written[o][0]] = o
    deadline = time.monotonic() + 60
    while True:
        records = _consume(cluster.bootstrap)
        if set(latest.values()) <= {o for o, _, _ in records} or time.monotonic() > deadline:
            break
        time.sleep(1)
    offsets = [o for o, _, _ in records]
    assert offsets[0] < m.next_offset()  # served from the bucket first
    assert offsets == sorted(set(offsets))
    for o, k, v in records:
        assert written[o] == (k, v), f"offset {o}"
    assert set(latest.values()) <= set(offsets)
    assert len(records) < len(written) // 2
    cluster.nodes[s.leader].start()
