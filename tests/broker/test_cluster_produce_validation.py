"""Issue 18 §1 on a 2-broker cluster: the partition leader refuses a batch with malformed
records (api.handlers.produce, the one Produce handler), the follower never
sees it, and both replicas end byte-identical with every good record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.clusterlib import Cluster
from tests.broker.etcdlib import EtcdProcess
from tests.e2e.test_produce_validation import check_refusal_and_recovery

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    etcd = EtcdProcess(tmp_path / "etcd").start()
    c = Cluster(tmp_path, etcd, n=2)
    try:
        yield c.start()
    finally:
        c.close()
        etcd.kill()


def test_leader_refuses_malformed_records_and_replicas_agree(cluster: Cluster) -> None:
    topic = "validated"
    cluster.create_topic(topic, 1, rf=2, min_isr=2)
    leader = cluster.nodes[cluster.leader(topic)]
    check_refusal_and_recovery(cluster.bootstrap, leader.bootstrap, topic)
    cluster.wait_replicas_identical(topic, 1, {0: 7})
