"""Exact cluster event counters on a real 3-broker cluster (real etcd): a follower frozen
with SIGSTOP leaves the ISR (strata_isr_shrinks_total moves), resumed it rejoins
(strata_isr_expands_total moves), a reassignment off the leader counts its ISR
changes and the leader it elects, and killing the leader makes the controller elect a
clean leader (strata_leader_elections_total{kind="clean"} moves). Each event is counted
by the broker that wrote it to etcd, so the figures are sums over the live brokers."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from tests.broker.clusterlib import CLUSTER_NAME, Cluster, StrataNode, wait_until
from tests.broker.etcdlib import EtcdProcess
from tests.brokers import ROOT
from tests.ops.test_metrics_workload import _scrape, _value

pytest.importorskip("confluent_kafka")

TOPIC = "events"
MOVED = "moved"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    etcd = EtcdProcess(tmp_path / "etcd").start()
    c = Cluster(tmp_path, etcd)
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def _total(nodes: Iterable[StrataNode], name: str, **labels: str) -> float:
    return sum(_value(_scrape(n.http_url), name, **labels) for n in nodes)


def _produce(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 2})
    for i in range(n):
        p.produce(TOPIC, value=f"e{i}".encode(), partition=0)
    assert p.flush(30) == 0


def test_isr_shrink_expand_and_leader_election_counters(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 1, assignment=[[1, 2, 3]], min_isr=1)
    pl = {"topic": TOPIC, "partition": "0"}
    nodes = list(cluster.nodes.values())
    _produce(cluster.bootstrap, 20)
    cluster.wait_fully_replicated(TOPIC)
    for n in nodes:  # the families exist on every broker, elections with both kinds
        scraped = _scrape(n.http_url)
        assert ("strata_leader_elections_total", frozenset({("kind", "unclean")})) in scraped
    shrinks0 = _total(nodes, "strata_isr_shrinks_total", **pl)
    expands0 = _total(nodes, "strata_isr_expands_total", **pl)
    clean0 = _total(nodes, "strata_leader_elections_total", kind="clean")

    # -- a frozen follower leaves the ISR --------------------------------------------------
    s = cluster.state(TOPIC, 0)
    controller = cluster.controller()
    follower = next(b for b in s.isr if b not in (s.leader, controller))
    frozen = cluster.nodes[follower]
    live = [n for n in nodes if n is not frozen]
    frozen.pause()
    try:
        _produce(",".join(n.bootstrap for n in live), 20)  # the follower falls behind
        wait_until(lambda: follower not in cluster.state(TOPIC, 0).isr, "the frozen follower out of the ISR")
        # Each counter moves right after its broker's etcd write: scrape until it has.
        wait_until(
            lambda: _total(live, "strata_isr_shrinks_total", **pl) >= shrinks0 + 1, "the shrink counted"
        )
    finally:
        frozen.resume()

    # -- resumed, it catches up and rejoins ---------------------------------------------------
    cluster.wait_fully_replicated(TOPIC)
    wait_until(lambda: _total(nodes, "strata_isr_expands_total", **pl) >= expands0 + 1, "the expand counted")
    now = cluster.state(TOPIC, 0)
    if now.leader_epoch == s.leader_epoch:  # no election meanwhile: ISR changes are not counted as one
        assert _total(nodes, "strata_leader_elections_total", kind="clean") == clean0

    # -- a reassignment moves the partition off its leader: the switch is one ISR write that
    #    removes the old leader and one election of a new one ----------------------------
    cluster.create_topic(MOVED, 1, assignment=[[1, 2]], min_isr=1)
    before = {
        "shrinks": _total(nodes, "strata_isr_shrinks_total", topic=MOVED, partition="0"),
        "expands": _total(nodes, "strata_isr_expands_total", topic=MOVED, partition="0"),
        "clean": _total(nodes, "strata_leader_elections_total", kind="clean"),
    }
    args = ("reassign", "--topic", MOVED, "--partition", "0", "--replicas", "3,2", "--wait")
    where = ("--etcd", cluster.etcd.endpoint, "--cluster-name", CLUSTER_NAME)
    moved = subprocess.run(
        [sys.executable, "-m", "api.cli", "cluster", *args, *where],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert moved.returncode == 0, moved.stderr
    assert cluster.state(MOVED, 0).leader in (2, 3)

    def switched() -> bool:  # the controller counts right after its etcd transaction
        return _total(nodes, "strata_leader_elections_total", kind="clean") >= before["clean"] + 1

    wait_until(switched, "the reassignment's election counted")
    # broker 3 joined the ISR (an expand, by the leader), broker 1 left it (a shrink)
    mpl = {"topic": MOVED, "partition": "0"}
    wait_until(
        lambda: _total(nodes, "strata_isr_expands_total", **mpl) >= before["expands"] + 1,
        "the reassignment's expand counted",
    )
    wait_until(
        lambda: _total(nodes, "strata_isr_shrinks_total", **mpl) >= before["shrinks"] + 1,
        "the reassignment's shrink counted",
    )

    # -- the leader dies: a clean election, counted by the (surviving) controller ------------
    s = cluster.state(TOPIC, 0)
    cluster.nodes[s.leader].kill()
    cluster.wait_new_leader(TOPIC, 0, s.leader, s.leader_epoch)
    survivors = [n for n in nodes if n.running]
    assert len(survivors) == 2

    def elected() -> bool:
        return _total(survivors, "strata_leader_elections_total", kind="clean") >= 1

    wait_until(elected, "the election counted by the controller")  # scraped after the etcd write
    assert _total(survivors, "strata_leader_elections_total", kind="unclean") == 0
