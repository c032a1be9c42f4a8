"""Share groups in a 3-broker cluster (real etcd): the share-partition state goes to the
share coordinator (the leader of the key's ``__share_group_state`` partition, reached
over the replica listener when it is another broker) before acknowledgements are
answered; SIGKILL of that coordinator loses no acknowledgement: after the failover no
accepted record is delivered again, and the records that were only acquired are.

Alter/DeleteShareGroupOffsets are answered by the group's coordinator only
(NOT_COORDINATOR elsewhere); after that coordinator is killed and the group moves, the
new coordinator's offsets hold: a write from a share partition's copy of the older
state epoch is FENCED_STATE_EPOCH, one from an older leader epoch FENCED_LEADER_EPOCH."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from broker.coordinator_runtime.records import partition_for
from broker.share.config import SHARE_STATE_TOPIC
from broker.share.state_store import state_key
from kwire import ApiKey
from kwire import error_table as E
from kwire.messages.find_coordinator import FindCoordinatorRequest
from kwire.messages.share_fetch import AcknowledgementBatch
from kwire.messages.share_group_describe import ShareGroupDescribeRequest
from kwire.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kwire.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from kwire.messages.share_group_state import (
    ReadShareGroupStateRequest,
    ReadStateData,
    ReadStatePartition,
    WriteShareGroupStateRequest,
    WriteStateData,
    WriteStatePartition,
)
from tests.api.test_share_wire import Wire, _acquired, _fetch, _set_configs, _topic_id
from tests.broker.clusterlib import WAIT, Cluster, wait_until
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


def _join(cluster: Cluster, group: str, member: str) -> None:
    """Join at the group's coordinator (as clients do: only it answers heartbeats), found
    again while the group moves."""
    req = ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=(TOPIC,)
    )
    deadline = time.monotonic() + WAIT
    while True:
        c = _coordinator(cluster, group)
        code = -1
        if c != -1 and cluster.nodes[c].running:
            code = _call(cluster, c, ApiKey.SHARE_GROUP_HEARTBEAT, 1, req).error_code
            if code == 0:
                return
            assert code in _MOVING, code
        assert time.monotonic() < deadline, f"no coordinator took the heartbeat (last error {code})"
        time.sleep(0.2)


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
        _join(cluster, group, "m1")
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
        _join(cluster, group, "m2")
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


FENCED_STATE_EPOCH = 124
INVALID_RECORD_STATE = 121
_MOVING = (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE)


def _coordinator(cluster: Cluster, group: str) -> int:
    """The group's coordinator per FindCoordinator (asked of a live broker)."""
    live = next(i for i, n in cluster.nodes.items() if n.running)
    wire = _wire_to(cluster, live)
    try:
        c = wire.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(coordinator_keys=(group,)))
        found = c.coordinators[0]
        return int(found.node_id) if found.error_code == 0 else -1
    finally:
        wire.close()


def _call(cluster: Cluster, broker_id: int, key: int, version: int, req: object) -> Any:
    wire = _wire_to(cluster, broker_id)
    try:
        return wire.call(key, version, req)
    finally:
        wire.close()


def _alter(group: str, topic: str, offset: int) -> AlterShareGroupOffsetsRequest:
    part = AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=offset)
    return AlterShareGroupOffsetsRequest(
        group_id=group, topics=(AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(part,)),)
    )


def _read_state(cluster: Cluster, node: int, group: str, tid: uuid.UUID, leader_epoch: int = -1) -> Any:
    req = ReadShareGroupStateRequest(
        group_id=group,
        topics=(
            ReadStateData(
                topic_id=tid, partitions=(ReadStatePartition(partition=0, leader_epoch=leader_epoch),)
            ),
        ),
    )
    return _call(cluster, node, ApiKey.READ_SHARE_GROUP_STATE, 0, req).results[0].partitions[0]


def _write_state(
    cluster: Cluster, node: int, group: str, tid: uuid.UUID, state_epoch: int, leader_epoch: int
) -> int:
    part = WriteStatePartition(
        partition=0, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=0
    )
    req = WriteShareGroupStateRequest(
        group_id=group, topics=(WriteStateData(topic_id=tid, partitions=(part,)),)
    )
    return int(
        _call(cluster, node, ApiKey.WRITE_SHARE_GROUP_STATE, 0, req).results[0].partitions[0].error_code
    )


def _preferred_leaders(cluster: Cluster) -> None:
    """A restarted broker comes back leading nothing, so a group coordinated away from a
    partition's leader may not exist among three brokers: once the restarted broker is back
    in sync on the internal topics, a preferred election spreads their leaders again."""
    from confluent_kafka import ElectionType
    from confluent_kafka.admin import AdminClient

    internal = [t for t in ("__consumer_offsets", SHARE_STATE_TOPIC) if t in cluster.view().topics]
    wait_until(lambda: all(cluster.fully_replicated(t) for t in internal), "internal topics in sync")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=30)


def test_share_offsets_at_the_coordinator_only_and_fenced_after_its_kill(cluster: Cluster) -> None:
    restarted = [node for node in cluster.nodes.values() if not node.running]
    for node in restarted:  # the test before killed one
        node.start()
    cluster.wait_registered()
    if restarted:
        _preferred_leaders(cluster)
    topic = "fenced"
    cluster.create_topic(topic, 1)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(10):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0
    leader = cluster.leader(topic)
    wire = _wire_to(cluster, leader)
    tid: uuid.UUID = _topic_id(wire, topic)
    # A group whose coordinator also leads its share state, on another broker than the
    # partition's leader: killing it moves both.
    placed: list[tuple[str, int]] = []

    seen: dict[str, tuple[int, int]] = {}  # group: (coordinator, its share state's leader)

    def _placed() -> bool:
        for g in (f"fenced-{i}" for i in range(200)):
            c = _coordinator(cluster, g)
            seen[g] = (c, cluster.leader(SHARE_STATE_TOPIC, partition_for(state_key(g, tid, 0), 8)))
            if c not in (-1, leader) and seen[g][1] == c:
                placed[:] = [(g, c)]
                return True
        if restarted:
            # A replica that joined an internal partition's ISR after the first preferred
            # election (on a loaded machine) gets its leadership back from a later one.
            _preferred_leaders(cluster)
        return False

    try:
        wait_until(_placed, "a group led away from the partition's leader", step=0.5)
    except TimeoutError as e:
        pairs = sorted(set(seen.values()))
        what = f"partition leader {leader}, (coordinator, share-state leader) seen {pairs}"
        raise TimeoutError(f"{e}: {what}") from e
    group, coordinator = placed[0]
    other = next(i for i in cluster.nodes if i != coordinator)
    try:
        assert (
            _set_configs(
                wire, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms="30000"
            ).error_code
            == 0
        )
        # Only the group's coordinator answers the group's heartbeats and descriptions.
        hb = ShareGroupHeartbeatRequest(
            group_id=group, member_id="m0", member_epoch=0, subscribed_topic_names=(topic,)
        )
        assert _call(cluster, other, ApiKey.SHARE_GROUP_HEARTBEAT, 1, hb).error_code == E.NOT_COORDINATOR
        described = _call(
            cluster, other, ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest(group_ids=(group,))
        )
        assert described.groups[0].error_code == E.NOT_COORDINATOR
        _join(cluster, group, "m1")
        assert _acquired(_fetch(wire, group, "m1", 0, tid, wait=500)) == [(0, 9, 1)]
        accept = AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=(1,))
        r = _fetch(wire, group, "m1", 1, tid, (accept,), wait=0)
        assert r.responses[0].partitions[0].acknowledge_error_code == 0

        # Only the group's coordinator changes its offsets.
        moved = _call(cluster, other, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, _alter(group, topic, 8))
        assert moved.error_code == E.NOT_COORDINATOR
        assert moved.responses[0].partitions[0].error_code == E.NOT_COORDINATOR
        req = DeleteShareGroupOffsetsRequest(
            group_id=group, topics=(DeleteShareGroupOffsetsRequestTopic(topic_name=topic),)
        )
        deleted = _call(cluster, other, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, req)
        assert (deleted.error_code, deleted.responses[0].error_code) == (E.NOT_COORDINATOR,) * 2
        busy = _call(cluster, coordinator, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, _alter(group, topic, 8))
        assert busy.error_code == E.NON_EMPTY_GROUP  # m1 is a member there
        before = _read_state(cluster, coordinator, group, tid)
        assert (before.error_code, before.start_offset) == (0, 5)

        # The coordinator dies (m1 with it); the group and its share state move.
        cluster.nodes[coordinator].kill()
        wait_until(lambda: _coordinator(cluster, group) not in (-1, coordinator), "the group moved")
        new = _coordinator(cluster, group)
        deadline = time.monotonic() + WAIT
        while True:
            altered = _call(cluster, new, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, _alter(group, topic, 8))
            code = altered.error_code or altered.responses[0].partitions[0].error_code
            if code not in _MOVING or time.monotonic() > deadline:
                break
            time.sleep(0.2)
            found = _coordinator(cluster, group)
            new = found if found != -1 else new
        assert code == 0
        state_node = cluster.leader(SHARE_STATE_TOPIC, partition_for(state_key(group, tid, 0), 8))
        after = _read_state(cluster, state_node, group, tid)
        assert (after.error_code, after.start_offset, after.state_batches) == (0, 8, ())
        assert after.state_epoch > before.state_epoch

        # The partition leader's copy is of the old state epoch: m1's acknowledgement
        # there is fenced, not written over the new offsets (INVALID_RECORD_STATE where the
        # leader reloaded the new state first: its leader epoch moved with the kill).
        late = AcknowledgementBatch(first_offset=5, last_offset=6, acknowledge_types=(1,))
        r = _fetch(wire, group, "m1", 2, tid, (late,), wait=0)
        code = r.responses[0].partitions[0].acknowledge_error_code
        assert code in (FENCED_STATE_EPOCH, INVALID_RECORD_STATE)
        newest = 10_000  # a leader epoch past any the partition has
        assert _write_state(cluster, state_node, group, tid, before.state_epoch, newest) == (
            FENCED_STATE_EPOCH
        )
        # The new view holds: 8 and 9 only, delivered for the first time.
        member, epoch = "m1", 3
        got = _acquired(r)
        if not got:
            member, epoch = "m2", 1
            got = _acquired(_fetch(wire, group, "m2", 0, tid, wait=500))
        assert got == [(8, 9, 1)]
        assert _read_state(cluster, state_node, group, tid).start_offset == 8

        # A newer leader of the partition read the state: the current one is deposed for
        # the share coordinator, its writes FENCED_LEADER_EPOCH.
        assert _read_state(cluster, state_node, group, tid, newest).error_code == 0
        current = cluster.state(topic, 0).leader_epoch
        assert _write_state(cluster, state_node, group, tid, after.state_epoch, current) == (
            E.FENCED_LEADER_EPOCH
        )
        accept = AcknowledgementBatch(first_offset=8, last_offset=9, acknowledge_types=(1,))
        r = _fetch(wire, group, member, epoch, tid, (accept,), wait=0)
        assert r.responses[0].partitions[0].acknowledge_error_code == E.FENCED_LEADER_EPOCH
    finally:
        wire.close()
