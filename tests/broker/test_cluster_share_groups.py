"""Share groups in a 3-broker cluster (real etcd): the share-partition state goes to the
share coordinator (the leader of the key's ``__share_group_state`` partition, reached
over the replica listener when it is another broker) before acknowledgements are
answered; SIGKILL of that coordinator loses no acknowledgement: after the failover no
accepted record is delivered again, and the records that were only acquired are."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from broker.coordinator_runtime.records import partition_for
from broker.share.config import SHARE_STATE_TOPIC
from broker.share.state_store import state_key
from kwire import ApiKey
from kwire.messages.share_fetch import AcknowledgementBatch
from kwire.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.api.test_share_wire import Wire, _acquired, _fetch, _set_configs, _topic_id
from tests.broker.clusterlib import WAIT, Cluster
from tests.broker.etcdlib import EtcdProcess

TOPIC = "jobs"
N = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-share")
    etcd = EtcdProcess(root / "etcd").start()
    c = Cluster(root, etcd, env={"STRATA_GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS": "1000"})
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def _wire_to(cluster: Cluster, broker_id: int) -> Wire:
    return Wire(cluster.nodes[broker_id].bootstrap)


def _join(wire: Wire, group: str, member: str) -> None:
    req = ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=(TOPIC,)
    )
    assert wire.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, req).error_code == 0


def test_coordinator_kill_loses_no_acknowledgement(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 1)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(N):
        p.produce(TOPIC, value=b"%d" % i)
        if i % 4 == 3:
            p.flush(30)
    assert p.flush(30) == 0
    leader = cluster.leader(TOPIC)
    wire = _wire_to(cluster, leader)
    try:
        tid: uuid.UUID = _topic_id(wire, TOPIC)
        # A first share fetch creates __share_group_state; then a group whose share
        # coordinator is another broker than the partition's leader (the remote path).
        _fetch(wire, "warm-up", "w", 0, tid, wait=0)
        cluster.wait_fully_replicated(SHARE_STATE_TOPIC)
        group = next(
            g
            for g in (f"jobs-share-{i}" for i in range(100))
            if cluster.leader(SHARE_STATE_TOPIC, partition_for(state_key(g, tid, 0), 8)) != leader
        )
        assert (
            _set_configs(
                wire, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms="2000"
            ).error_code
            == 0
        )
        _join(wire, group, "m1")
        got: list[tuple[int, int, int]] = []
        epoch = 0
        deadline = time.monotonic() + WAIT
        while not got and time.monotonic() < deadline:
            r = _fetch(wire, group, "m1", epoch, tid)
            epoch += 1
            got = _acquired(r)
        assert got == [(0, N - 1, 1)]
        accept = AcknowledgementBatch(first_offset=0, last_offset=N // 2 - 1, acknowledge_types=(1,))
        r = _fetch(wire, group, "m1", epoch, tid, (accept,), wait=0)
        assert r.responses[0].partitions[0].acknowledge_error_code == 0  # persisted at the coordinator
    finally:
        wire.close()

    key = state_key(group, tid, 0)
    coordinator = cluster.leader(SHARE_STATE_TOPIC, partition_for(key, 8))
    cluster.nodes[coordinator].kill()
    assert coordinator != leader

    # Another member reads what m1 never accepted, and nothing it accepted
    wire = _wire_to(cluster, leader)
    seen: list[tuple[int, int, int]] = []
    try:
        _join(wire, group, "m2")
        epoch = 0
        deadline = time.monotonic() + WAIT
        while sum(b - a + 1 for a, b, _ in seen) < N // 2 and time.monotonic() < deadline:
            r = _fetch(wire, group, "m2", epoch, tid, wait=500)
            if r.error_code or (r.responses and r.responses[0].partitions[0].error_code):
                epoch = 0  # the leader moved or the state is loading: start again
                time.sleep(0.2)
                continue
            epoch += 1
            seen += _acquired(r)
        assert seen and all(a >= N // 2 and c >= 2 for a, _, c in seen), seen
        assert sorted(o for a, b, _ in seen for o in range(a, b + 1)) == list(range(N // 2, N))
        # and acknowledging works against the new coordinator
        accept = AcknowledgementBatch(first_offset=N // 2, last_offset=N - 1, acknowledge_types=(1,))
        r = _fetch(wire, group, "m2", epoch, tid, (accept,), wait=0)
        assert r.responses[0].partitions[0].acknowledge_error_code == 0
    finally:
        wire.close()
