"""Iceberg topics in a 3-broker cluster: the committer (leader of partition 0) reads each
partition's hot tail from that partition's leader; after a kill -9 of the committer, the
new leader of partition 0 takes over from the offsets in the bucket's newest metadata: no
duplicate, no gap. The table is read from the bucket by its newest metadata file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.clusterlib import Cluster
from tests.broker.etcdlib import EtcdProcess
from tests.iceberg.icelib import wait_for

ck = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.timeout(600)
TOPIC = "lake"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-iceberg")
    etcd = EtcdProcess(root / "etcd").start()
    env = {"STRATA_OBJECT_STORE": f"file://{root / 'bucket'}", "STRATA_ICEBERG_CHECK_INTERVAL_MS": "200"}
    c = Cluster(root, etcd, env=env)
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def _rows(root: Path) -> list[tuple[int, int, bytes]] | None:
    from pyiceberg.table import StaticTable

    meta = root / "bucket" / "iceberg"
    files = sorted(meta.rglob("*.metadata.json"), key=lambda p: int(re.match(r"\d+", p.name)[0]))  # type: ignore[index]
    if not files:
        return None
    t: Any = StaticTable.from_metadata(f"file://{files[-1]}")
    if t.current_snapshot() is None:
        return None
    a = t.scan(selected_fields=("partition", "offset", "value")).to_arrow()
    rows = zip(*(a.column(c).to_pylist() for c in ("partition", "offset", "value")), strict=True)
    return sorted(rows)


def _produce(bootstrap: str, tag: bytes, n: int) -> list[bytes]:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    values = []
    for part in (0, 1):
        for i in range(n):
            v = tag + b"-%d-%d" % (part, i)
            p.produce(TOPIC, v, partition=part)
            values.append(v)
    assert p.flush(60) == 0
    return values


def test_committer_reads_every_leader_and_moves_on_a_leader_kill(cluster: Cluster) -> None:
    cluster.create_topic(
        TOPIC,
        2,
        assignment=[[1, 2, 3], [2, 3, 1]],  # partition 1 led by another broker than the committer
        configs={"iceberg.mode": "key_value", "iceberg.target.lag.ms": "1000"},
    )
    expected = _produce(cluster.bootstrap, b"a", 50)

    def complete() -> list[tuple[int, int, bytes]] | None:
        rows = _rows(cluster.root)
        return rows if rows is not None and len(rows) >= len(expected) else None

    rows = wait_for(complete, 120, "the first translation")
    assert sorted(r[2] for r in rows) == sorted(expected)

    s = cluster.state(TOPIC, 0)
    cluster.nodes[s.leader].kill()  # the committer, kill -9
    cluster.wait_new_leader(TOPIC, 0, s.leader, s.leader_epoch)
    expected += _produce(cluster.bootstrap, b"b", 50)
    rows = wait_for(complete, 120, "translation by the new committer")
    assert sorted(r[2] for r in rows) == sorted(expected)
    assert len({(p, o) for p, o, _ in rows}) == len(rows)
