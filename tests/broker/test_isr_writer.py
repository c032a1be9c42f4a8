"""``broker.isr_writer``: a leader's ISR changes proposed in one loop turn go to the store
in one transaction per ``max_txn_ops - 1``; a batch that meets a conflict is written one
by one (the conflicting partition retried against the stored state); a proposal whose
leader was fenced meanwhile is dropped; finishing a proposal never touches a later one of
the same partition. Fakes stand for the store and the replica manager (the real thing:
``tests/broker/test_cluster_scale_faults.py`` counts etcd writes of a rejoin)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from broker.isr_writer import IsrWriter
from broker.metadata import CasResult, Conflict, PartitionState, TopicAssignment, Versioned
from broker.partition_replica import PartitionReplica, Role
from broker.replication.leader_state import LeaderState

ME = 1
REPLICAS = (1, 2, 3)


@dataclass
class _View:
    partitions: dict[tuple[str, int], Versioned[PartitionState]] = field(default_factory=dict)
    topics: dict[str, Versioned[TopicAssignment]] = field(default_factory=dict)


class _Store:
    """The two calls the writer makes, over ``view`` (revisions: a counter)."""

    def __init__(self, view: _View, max_txn_ops: int = 4) -> None:
        self.view = view
        self.max_txn_ops = max_txn_ops
        self.revision = 100
        self.batches: list[int] = []  # sizes of the multi-state transactions tried
        self.singles = 0
        self.conflicts: dict[tuple[str, int], int] = {}  # writes a partition loses to "someone else"

    def _bump(self, key: tuple[str, int], new: PartitionState) -> Versioned[PartitionState]:
        self.revision += 1
        old = self.view.partitions[key]
        vs = Versioned(replace(new, partition_epoch=old.value.partition_epoch + 1), self.revision, 1)
        self.view.partitions[key] = vs
        return vs

    def _race(self, key: tuple[str, int]) -> None:
        if self.conflicts.get(key, 0) > 0:
            self.conflicts[key] -= 1
            old = self.view.partitions[key].value
            self._bump(key, old)  # the same state, a newer revision (e.g. the controller's)

    async def update_partition_states(
        self,
        changes: Sequence[tuple[str, int, Versioned[PartitionState], PartitionState]],
        *,
        controller: object,
    ) -> int | None:
        await asyncio.sleep(0)
        self.batches.append(len(changes))
        for topic, p, _, _ in changes:
            self._race((topic, p))
        if any(self.view.partitions[(t, p)].mod_revision != vs.mod_revision for t, p, vs, _ in changes):
            return None
        self.revision += 1
        for topic, p, vs, new in changes:
            self.view.partitions[(topic, p)] = Versioned(
                replace(new, partition_epoch=vs.value.partition_epoch + 1), self.revision, 1
            )
        return self.revision

    async def update_partition_state(
        self, topic: str, p: int, expected: Versioned[PartitionState], new: PartitionState
    ) -> CasResult:
        await asyncio.sleep(0)
        self.singles += 1
        self._race((topic, p))
        current = self.view.partitions[(topic, p)]
        if current.mod_revision != expected.mod_revision:
            return CasResult(False, current, Conflict.STALE_VERSION)
        return CasResult(True, self._bump((topic, p), new))


class _Replicas:
    """What the writer uses of ``ReplicaManager``."""

    def __init__(self, store: _Store) -> None:
        self.broker_id = ME
        self.client = store
        self.view = store.view
        self.changes: list[tuple[str, int, tuple[int, ...], tuple[int, ...]]] = []
        self.applied: list[str] = []
        self.tasks: list[asyncio.Task[None]] = []

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(coro, name=name))

    def on_isr_change(self, topic: str, p: int, old: tuple[int, ...], new: tuple[int, ...]) -> None:
        self.changes.append((topic, p, old, new))

    def maybe_advance_hw(self, rep: PartitionReplica) -> None:
        pass

    def _apply(self, rep: PartitionReplica, replicas: tuple[int, ...], vs: Versioned[PartitionState]) -> None:
        self.applied.append(rep.name)


def _setup(
    partitions: int, max_txn_ops: int = 4
) -> tuple[_Store, _Replicas, IsrWriter, list[PartitionReplica]]:
    view = _View()
    view.topics["t"] = Versioned(
        TopicAssignment(topic_id="00" * 16, replication_factor=3, partitions=(REPLICAS,) * partitions), 1, 1
    )
    reps = []
    for p in range(partitions):
        view.partitions[("t", p)] = Versioned(PartitionState(ME, 5, (1, 2)), 10 + p, 1)
        lead = LeaderState(
            leader_id=ME,
            leader_epoch=5,
            replicas=REPLICAS,
            isr=(1, 2),
            leader_epoch_start_offset=0,
            high_watermark=0,
            replica_lag_time_max_ms=30_000,
            min_insync_replicas=1,
        )
        rep = PartitionReplica("t", p, log=None, role=Role.LEADER, leader_id=ME, leader_epoch=5)  # type: ignore[arg-type]
        rep.replicas, rep.leader = REPLICAS, lead
        reps.append(rep)
    store = _Store(view, max_txn_ops)
    replicas = _Replicas(store)
    return store, replicas, IsrWriter(replicas), reps  # type: ignore[arg-type]


def _propose(writer: IsrWriter, rep: PartitionReplica, isr: frozenset[int]) -> None:
    """As ``ReplicaManager._propose_isr`` does."""
    assert rep.leader is not None
    rep.leader.propose_isr(isr)
    rep.isr_writing = True
    writer.propose(rep, rep.leader, isr, "test")


async def _settle(replicas: _Replicas) -> None:
    while any(not t.done() for t in replicas.tasks):
        await asyncio.gather(*replicas.tasks)


async def test_one_turns_proposals_go_in_batches_of_max_txn_ops_less_one() -> None:
    store, replicas, writer, reps = _setup(7, max_txn_ops=4)
    for rep in reps:
        _propose(writer, rep, frozenset(REPLICAS))
    await _settle(replicas)
    assert store.batches == [3, 3] and store.singles == 1  # 7 = 3 + 3 + a batch of one
    for rep in reps:
        assert rep.leader is not None and rep.leader.isr == frozenset(REPLICAS)
        assert rep.leader.pending_isr is None and not rep.isr_writing
        assert store.view.partitions[("t", rep.partition)].value.isr == REPLICAS
        assert rep.isr_revision == store.view.partitions[("t", rep.partition)].mod_revision
    assert sorted(p for _, p, _, _ in replicas.changes) == list(range(7))


async def test_a_conflict_in_a_batch_writes_each_against_the_stored_state() -> None:
    store, replicas, writer, reps = _setup(3, max_txn_ops=8)
    store.conflicts[("t", 1)] = 2  # loses the batch and its first write alone
    for rep in reps:
        _propose(writer, rep, frozenset(REPLICAS))
    await _settle(replicas)
    assert store.batches == [3]  # refused as a whole
    assert store.singles == 4  # then one by one, partition 1 twice (against the new state)
    assert all(store.view.partitions[("t", p)].value.isr == REPLICAS for p in range(3))
    assert all(rep.leader is not None and rep.leader.isr == frozenset(REPLICAS) for rep in reps)


async def test_a_fenced_leader_writes_nothing_and_a_later_proposal_is_left_alone() -> None:
    store, replicas, writer, reps = _setup(3, max_txn_ops=8)
    # Partition 0's replica set moved in the view (a reassignment): its proposal is
    # dropped, the others written together.
    va = store.view.topics["t"]
    moved = replace(va.value, partitions=((1, 2, 4), REPLICAS, REPLICAS))
    store.view.topics["t"] = Versioned(moved, va.mod_revision + 1, 1)
    for rep in reps:
        _propose(writer, rep, frozenset(REPLICAS))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the batch is in flight; partition 0's proposal already ended
    rep0 = reps[0]
    assert rep0.leader is not None and not rep0.isr_writing and rep0.leader.pending_isr is None
    # The view moves back and partition 0 gets a new proposal while the batch is in
    # flight: the end of the batch must not end it too (its flags hold until it is written).
    store.view.topics["t"] = va
    _propose(writer, rep0, frozenset({1}))
    seen: list[tuple[bool, frozenset[int] | None]] = []
    single = store.update_partition_state

    async def watched(topic: str, p: int, expected: Any, new: PartitionState) -> CasResult:
        assert rep0.leader is not None
        seen.append((rep0.isr_writing, rep0.leader.pending_isr))
        return await single(topic, p, expected, new)

    store.update_partition_state = watched  # type: ignore[method-assign]
    await _settle(replicas)
    assert store.batches == [2]
    assert seen == [(True, frozenset({1}))]
    assert store.view.partitions[("t", 0)].value.isr == (1,)
    assert not rep0.isr_writing and rep0.leader.pending_isr is None and rep0.leader.isr == {1}
    assert [p for _, p, _, _ in replicas.changes] == [1, 2, 0]
