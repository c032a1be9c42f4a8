"""Partition reassignment (KIP-455) without broker processes: the pure rules
(``broker.replication.reassignment``), the records that carry them, and the request path
and the controller's completion against a real etcd, including a controller failover in
the middle of a reassignment. The ISR changes a leader would make are written here with
the same compare-and-swap the leader uses."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.controller import Controller
from broker.metadata import ClusterView, MetadataClient, PartitionState, TopicAssignment
from broker.reassign import alter_reassignment, ongoing_reassignments
from broker.replication.reassignment import (
    Completion,
    PartitionReplicas,
    complete,
    reassign,
    validate_target,
)
from broker.status import cluster_status, format_status
from hot.errors import (
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from tests.broker.etcdlib import EtcdProcess

MakeClient = Callable[..., Awaitable[MetadataClient]]
WAIT = 20.0  # upper bound for waits on watches; never reached when correct

# --- pure rules -----------------------------------------------------------------------------------


def test_new_reassignment_adds_target_then_keeps_originals() -> None:
    rs = reassign(PartitionReplicas((1, 2, 3)), (2, 3, 4))
    assert rs == PartitionReplicas((2, 3, 4, 1), adding=(4,), removing=(1,))
    # As in Kafka, the set is target ++ original: the original's order is not kept.
    assert rs.target == (2, 3, 4) and rs.original == (2, 3, 1) and rs.reassigning


def test_same_replicas_reordered_is_not_a_reassignment() -> None:
    assert reassign(PartitionReplicas((1, 2, 3)), (3, 1, 2)) == PartitionReplicas((3, 1, 2))
    assert not reassign(PartitionReplicas((1, 2, 3)), (1, 2, 3)).reassigning


def test_replication_factor_changes() -> None:
    up = reassign(PartitionReplicas((1, 2)), (1, 2, 3))
    assert up == PartitionReplicas((1, 2, 3), adding=(3,))
    down = reassign(PartitionReplicas((1, 2, 3)), (2, 3))
    assert down == PartitionReplicas((2, 3, 1), removing=(1,))


def test_cancel_reverts_to_the_original_and_marks_added_replicas_for_removal() -> None:
    running = reassign(PartitionReplicas((1, 2, 3)), (2, 3, 4))
    cancelled = reassign(running, None)
    # 4 is neither original nor target: in both lists, it leaves at completion.
    assert cancelled == PartitionReplicas((2, 3, 1, 4), adding=(4,), removing=(4,))
    assert cancelled.target == (2, 3, 1) and cancelled.original == (2, 3, 1)
    # Cancelling a pure shrink has nothing to remove: done at once.
    assert reassign(reassign(PartitionReplicas((1, 2, 3)), (1, 2)), None) == PartitionReplicas((1, 2, 3))
    with pytest.raises(NoReassignmentInProgressError):
        reassign(PartitionReplicas((1, 2, 3)), None)


def test_a_new_target_replaces_a_running_one_keeping_the_original() -> None:
    running = reassign(PartitionReplicas((1, 2, 3)), (2, 3, 4))
    replaced = reassign(running, (3, 5, 1))
    assert set(replaced.original) == {1, 2, 3}
    assert replaced.target == (3, 5, 1)
    assert set(replaced.replicas) == {1, 2, 3, 4, 5}  # nothing removed by a request


@settings(derandomize=True, database=None, max_examples=200, deadline=None)
@given(
    start=st.lists(st.integers(0, 6), min_size=1, max_size=4, unique=True),
    targets=st.lists(
        st.none() | st.lists(st.integers(0, 6), min_size=1, max_size=4, unique=True), max_size=4
    ),
)
def test_requests_only_add_and_keep_original_and_target_derivable(
    start: list[int], targets: list[list[int] | None]
) -> None:
    rs = PartitionReplicas(tuple(start))
    original = tuple(start)
    for t in targets:
        before = set(rs.replicas)
        try:
            new = reassign(rs, t)
        except NoReassignmentInProgressError:
            assert not rs.reassigning and t is None
            continue
        assert before <= set(new.replicas) or not new.reassigning
        if new.reassigning:
            assert new.original == tuple(r for r in new.replicas if r in original)
            assert set(new.original) == set(original)
            assert set(new.target) == set(t if t is not None else original)
        else:
            # Settled at once (nothing to move): the replicas are the target itself.
            assert set(new.replicas) == set(t if t is not None else original)
            original = new.replicas
        rs = new


def test_validate_target() -> None:
    assert validate_target([2, 3, 4], known_brokers={1, 2, 3, 4}, min_insync_replicas=2) == (2, 3, 4)
    with pytest.raises(InvalidReplicaAssignmentError, match="empty"):
        validate_target([], known_brokers={1}, min_insync_replicas=1)
    with pytest.raises(InvalidReplicaAssignmentError, match="repeats"):
        validate_target([1, 1], known_brokers={1}, min_insync_replicas=1)
    with pytest.raises(InvalidReplicaAssignmentError, match=r"\[7, -1\]|\[-1, 7\]"):
        validate_target([1, 7, -1], known_brokers={1}, min_insync_replicas=1)
    with pytest.raises(InvalidReplicationFactorError, match=r"min\.insync\.replicas 2"):
        validate_target([1], known_brokers={1, 2}, min_insync_replicas=2)


def test_completion_waits_for_every_target_replica_in_the_isr() -> None:
    rs = reassign(PartitionReplicas((1, 2, 3)), (1, 2, 4))
    assert complete(rs, leader=1, leader_epoch=5, isr=(1, 2, 3), live={1, 2, 3, 4}) is None
    done = complete(rs, leader=1, leader_epoch=5, isr=(1, 2, 3, 4), live={1, 2, 3, 4})
    assert done == Completion(replicas=(1, 2, 4), leader=1, leader_epoch=5, isr=(1, 2, 4))
    # Not reassigning, or offline: nothing to do.
    assert complete(PartitionReplicas((1, 2)), leader=1, leader_epoch=0, isr=(1, 2), live={1, 2}) is None
    assert complete(rs, leader=-1, leader_epoch=6, isr=(1, 2, 4), live={1, 2, 4}) is None
    # A dead leader is replaced by the usual election first.
    assert complete(rs, leader=1, leader_epoch=5, isr=(1, 2, 3, 4), live={2, 3, 4}) is None


def test_completion_moves_the_leader_off_a_removed_replica_with_an_epoch_bump() -> None:
    rs = reassign(PartitionReplicas((1, 2, 3)), (4, 3, 2))
    done = complete(rs, leader=1, leader_epoch=7, isr=(1, 2, 3, 4), live={1, 2, 3, 4})
    assert done == Completion(replicas=(4, 3, 2), leader=4, leader_epoch=8, isr=(4, 3, 2))
    # The first in-sync target replica that is alive leads.
    done = complete(rs, leader=1, leader_epoch=7, isr=(1, 2, 3, 4), live={1, 2, 3})
    assert done is not None and done.leader == 3
    assert complete(rs, leader=1, leader_epoch=7, isr=(1, 2, 3, 4), live={1}) is None


def test_partition_replicas_refuses_inconsistent_lists() -> None:
    for bad in [((),), ((1, 1),), ((1, 2), (3,)), ((1, 2), (), (1, 2)), ((1,), (1,))]:
        with pytest.raises(ValueError):
            PartitionReplicas(*bad)


# --- records --------------------------------------------------------------------------------------


def _assignment(*partitions: tuple[int, ...]) -> TopicAssignment:
    return TopicAssignment(str(uuid.uuid4()), len(partitions[0]), tuple(partitions))


def test_assignment_round_trips_with_a_reassignment_and_stays_unchanged_without() -> None:
    a = _assignment((1, 2, 3), (2, 3, 1))
    assert b"adding" not in a.to_json()  # records of topics never reassigned are as before
    b = a.with_replica_set(0, reassign(a.replica_set(0), (2, 3, 4)))
    assert b.reassigning == (0,)
    assert TopicAssignment.from_json(b.to_json()) == b
    assert b"adding_replicas" in b.to_json() and b"removing_replicas" in b.to_json()
    done = b.with_replica_set(0, PartitionReplicas((2, 3, 4)))
    assert done.reassigning == () and done.partitions == ((2, 3, 4), (2, 3, 1))
    assert done.to_json() == TopicAssignment.from_json(done.to_json()).to_json()
    # A replication factor change: the topic's count follows once every partition agrees.
    grown = done.with_replica_set(0, PartitionReplicas((2, 3, 4, 1)))
    assert grown.replication_factor == 3  # mixed counts: kept
    assert TopicAssignment.from_json(grown.to_json()) == grown
    both = grown.with_replica_set(1, PartitionReplicas((2, 3, 1, 4)))
    assert both.replication_factor == 4


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (b'"adding_replicas":{"0":[9]}', "adding"),
        (b'"adding_replicas":{"5":[1]}', "partition 5"),
        (b'"removing_replicas":{"x":[1]}', "not a partition"),
        (b'"removing_replicas":{"0":[1,2]}', "leaves no replica"),
        (b'"adding_replicas":[1]', "adding_replicas"),
    ],
)
def test_corrupt_reassignment_fields_are_refused(extra: bytes, match: str) -> None:
    from broker.metadata import CorruptMetadataError

    data = b'{"version":1,"topic_id":"%s","replication_factor":2,"partitions":[[1,2]],"configs":{},%s}' % (
        str(uuid.uuid4()).encode(),
        extra,
    )
    with pytest.raises(CorruptMetadataError, match=match):
        TopicAssignment.from_json(data)


# --- against etcd: requests, completion, controller failover ------------------------------------


@pytest.fixture
async def controllers() -> AsyncIterator[Callable[[MetadataClient], Controller]]:
    made: list[Controller] = []

    def make(mc: MetadataClient) -> Controller:
        c = Controller(mc, poll_interval=0.2).start()
        made.append(c)
        return c

    yield make
    for c in made:
        await c.stop(resign=False)


async def _brokers(make: MakeClient, server: EtcdProcess, n: int) -> list[MetadataClient]:
    out = []
    for i in range(1, n + 1):
        mc = await make(server)
        await mc.register("127.0.0.1", 9000 + i, 8000 + i, broker_id=i)
        out.append(mc)
    await out[0].view.wait_for(lambda v: len(v.brokers) == n, WAIT)
    return out


def _state(view: ClusterView, topic: str, p: int = 0) -> PartitionState:
    s = view.partition_state(topic, p)
    assert s is not None
    return s


async def _join_isr(mc: MetadataClient, topic: str, broker: int) -> None:
    """What the leader writes when ``broker`` caught up (its AlterPartition)."""
    for _ in range(20):
        await mc.view.wait_for(lambda v: v.partition_state(topic, 0) is not None, WAIT)
        vs = mc.view.partitions[(topic, 0)]
        s = vs.value
        new = PartitionState(s.leader, s.leader_epoch, (*s.isr, broker), s.controller_epoch)
        if (await mc.update_partition_state(topic, 0, vs, new)).ok:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("ISR expansion kept conflicting")


async def test_request_errors_are_precise(etcd_server: EtcdProcess, metadata_clients: MakeClient) -> None:
    (a, _, _) = await _brokers(metadata_clients, etcd_server, 3)
    await a.create_topic("moves", [(1, 2)], {"min.insync.replicas": "2"})
    with pytest.raises(UnknownTopicOrPartitionError):
        await alter_reassignment(a, "nope", 0, (1, 2))
    with pytest.raises(UnknownTopicOrPartitionError):
        await alter_reassignment(a, "moves", 3, (1, 2))
    with pytest.raises(InvalidReplicaAssignmentError, match="42"):
        await alter_reassignment(a, "moves", 0, (1, 42))
    with pytest.raises(InvalidReplicaAssignmentError, match="repeats"):
        await alter_reassignment(a, "moves", 0, (1, 1))
    with pytest.raises(InvalidReplicaAssignmentError, match="empty"):
        await alter_reassignment(a, "moves", 0, ())
    with pytest.raises(InvalidReplicationFactorError, match=r"min\.insync\.replicas 2"):
        await alter_reassignment(a, "moves", 0, (3,))
    with pytest.raises(NoReassignmentInProgressError):
        await alter_reassignment(a, "moves", 0, None)
    va = await a.get_topic("moves")
    assert va is not None and va.value.reassigning == () and va.value.partitions == ((1, 2),)


async def test_reassignment_completes_across_a_controller_failover(
    etcd_server: EtcdProcess,
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    a, b, c = await _brokers(metadata_clients, etcd_server, 3)
    await a.create_topic("moves", [(1, 2)])
    ca = controllers(a)
    await asyncio.wait_for(ca.active.wait(), WAIT)
    cb = controllers(b)
    # Move 1's replica to 3: leader 1 leaves, so the leadership moves too.
    written = await alter_reassignment(c, "moves", 0, (3, 2))
    assert written == PartitionReplicas((3, 2, 1), adding=(3,), removing=(1,))
    await a.view.wait_for(lambda v: v.topics["moves"].value.reassigning == (0,), WAIT)
    assert [(r.topic, r.partition, r.adding, r.removing) for r in ongoing_reassignments(a.view)] == [
        ("moves", 0, (3,), (1,))
    ]
    report = cluster_status(a.view)
    assert report["reassignments"][0]["target"] == [3, 2]
    assert "reassignments in progress (1)" in format_status(report)
    # Not in sync yet: the controller waits (its passes see nothing to switch).
    assert ca.token is not None
    await ca.reconcile(ca.token)
    assert a.view.topics["moves"].value.partitions[0] == (3, 2, 1)
    before = _state(a.view, "moves")
    # The controller goes; its successor finds the reassignment in etcd and finishes it
    # once 3 is in sync.
    await ca.stop(resign=True)
    await asyncio.wait_for(cb.active.wait(), WAIT)
    await _join_isr(b, "moves", 3)
    await b.view.wait_for(lambda v: v.topics["moves"].value.reassigning == (), WAIT)
    a_now = b.view.topics["moves"].value
    s = _state(b.view, "moves")
    assert a_now.partitions == ((3, 2),) and a_now.replication_factor == 2
    assert s.leader == 3 and s.leader_epoch == before.leader_epoch + 1 and set(s.isr) == {3, 2}
    # The watch may deliver the write before the controller's own call returns.
    await asyncio.wait_for(_until(lambda: cb.reassignments_completed == 1), WAIT)


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.02)


async def test_cancel_after_catch_up_removes_the_added_replica_from_the_isr(
    etcd_server: EtcdProcess,
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    a, _, c = await _brokers(metadata_clients, etcd_server, 3)
    await a.create_topic("moves", [(1, 2)])
    # No controller yet, so nothing completes: 3 is added, catches up, then the request
    # is cancelled; the controller then reverts to the original replicas.
    await alter_reassignment(c, "moves", 0, (3, 1))
    await _join_isr(a, "moves", 3)
    await alter_reassignment(c, "moves", 0, None)
    ca = controllers(a)
    await asyncio.wait_for(ca.active.wait(), WAIT)
    await a.view.wait_for(lambda v: v.topics["moves"].value.reassigning == (), WAIT)
    assert a.view.topics["moves"].value.partitions == ((1, 2),)
    s = _state(a.view, "moves")
    assert s.leader == 1 and s.leader_epoch == 0 and s.isr == (1, 2)


async def test_cancel_before_catch_up(
    etcd_server: EtcdProcess,
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    a, _, c = await _brokers(metadata_clients, etcd_server, 3)
    await a.create_topic("moves", [(1, 2)])
    ca = controllers(a)
    await asyncio.wait_for(ca.active.wait(), WAIT)
    await alter_reassignment(c, "moves", 0, (3, 2))  # 3 never catches up here
    await a.view.wait_for(lambda v: v.topics["moves"].value.reassigning == (0,), WAIT)
    assert ca.token is not None
    await ca.reconcile(ca.token)
    assert a.view.topics["moves"].value.reassigning == (0,)
    cancelled = await alter_reassignment(c, "moves", 0, None)
    assert cancelled == PartitionReplicas((2, 1, 3), adding=(3,), removing=(3,))
    await a.view.wait_for(lambda v: v.topics["moves"].value.reassigning == (), WAIT)
    assert a.view.topics["moves"].value.partitions == ((2, 1),)
    s = _state(a.view, "moves")
    assert s.leader == 1 and s.leader_epoch == 0 and set(s.isr) == {1, 2}
