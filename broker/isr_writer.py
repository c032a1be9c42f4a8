"""A leader's ISR changes, written to the metadata store in batches.

A leader changes a partition's ISR itself (Kafka's AlterPartition, written straight to
etcd here): a follower that caught up joins, one out of sync for
``replica.lag.time.max.ms`` leaves. Such changes come in crowds: a restarted broker
catches up on every partition it follows within seconds, and a follower that stalls
falls out of all of them at the same ISR check. One transaction per partition made a
rejoin at 10,000 partitions ten thousand etcd writes, each a view update on every broker
(issue 35: "leader elections and ISR changes written to etcd in batches"). Changes
proposed in one turn of the event loop are therefore written together,
``max_txn_ops - 1`` per transaction (etcd caps a transaction's compares and its puts
separately), each comparing its partition's mod revision; a batch that meets any
conflict is written again partition by partition, which says which one and why, as a
single change always was.

Crash behaviour: nothing is kept here but proposals in memory. A change is applied
(``LeaderState.commit_isr``) only after its transaction succeeded; a leader that dies
before leaves the stored ISR as it was, and its successor's view is the stored one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from broker.metadata import ClusterView, MetadataClient, PartitionState, Versioned
from broker.partition_replica import PartitionReplica, Role
from broker.replication.leader_state import LeaderState
from hot.errors import MetadataStoreError, StrataError

log = logging.getLogger("strata.cluster.replicas")


class IsrHost(Protocol):
    """What the writer uses of ``broker.replica_manager.ReplicaManager`` (declared here,
    not imported: the replica manager imports this module)."""

    broker_id: int
    client: MetadataClient
    view: ClusterView
    on_isr_change: Callable[[str, int, tuple[int, ...], tuple[int, ...]], None]

    def maybe_advance_hw(self, rep: PartitionReplica) -> None: ...

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None: ...

    def _apply(
        self, rep: PartitionReplica, replicas: tuple[int, ...], vs: Versioned[PartitionState]
    ) -> None: ...


# The stored state and the one to write in its place.
_Change = tuple[Versioned[PartitionState], PartitionState]


@dataclass(slots=True)
class _Proposal:
    rep: PartitionReplica
    leader: LeaderState
    isr: frozenset[int]
    why: str
    committed: bool = False
    finished: bool = False  # ``IsrWriter._done`` ran: a later proposal may hold the flags


class IsrWriter:
    """The leader's queue of ISR changes (see the module docstring)."""

    def __init__(self, replicas: IsrHost) -> None:
        self._replicas = replicas
        self._queued: list[_Proposal] = []
        self._writing = False

    def propose(self, rep: PartitionReplica, leader: LeaderState, isr: frozenset[int], why: str) -> None:
        """Write ``isr`` as the partition's ISR, with the next ones proposed in this loop
        turn. The caller has marked the change pending (``LeaderState.propose_isr``,
        ``rep.isr_writing``); whatever happens, both are cleared when it is done."""
        self._queued.append(_Proposal(rep, leader, isr, why))
        if not self._writing:
            self._writing = True
            self._replicas._spawn(self._write_all(), "isr-changes")

    async def _write_all(self) -> None:
        try:
            await asyncio.sleep(0)  # the rest of this loop turn's proposals join the batch
            while self._queued:
                queued, self._queued = self._queued, []
                step = max(1, self._replicas.client.max_txn_ops - 1)
                for i in range(0, len(queued), step):
                    await self._write_batch(queued[i : i + step])
        finally:
            for p in self._queued:  # cancelled (shutdown): nothing of these was written
                self._done(p)
            self._queued.clear()
            self._writing = False

    async def _write_batch(self, batch: list[_Proposal]) -> None:
        try:
            if len(batch) > 1:
                ready = [(p, c) for p in batch if (c := self._change(p)) is not None]
                for p in batch:
                    if not any(p is q for q, _ in ready):
                        self._done(p)  # fenced or moved: the view's change comes next
                if len(ready) > 1 and await self._write_together(ready):
                    return
                batch = [p for p, _ in ready]
            for p in batch:
                await self._write_one(p)
        finally:
            for p in batch:
                self._done(p)

    def _change(self, p: _Proposal) -> _Change | None:
        """The stored state and the one to write, or None when this leader may not write."""
        vs = self._replicas.view.partitions.get((p.rep.topic, p.rep.partition))
        return None if vs is None else self._next(p, vs)

    def _next(
        self, p: _Proposal, vs: Versioned[PartitionState]
    ) -> tuple[Versioned[PartitionState], PartitionState] | None:
        s = vs.value
        if s.leader != self._replicas.broker_id or s.leader_epoch != p.leader.leader_epoch:
            return None  # fenced: a new epoch is coming through the watch
        va = self._replicas.view.topics.get(p.rep.topic)
        if va is None or va.value.partitions[p.rep.partition] != p.leader.replicas:
            return None  # the replica set changed (reassignment): the view comes first
        ordered = tuple(r for r in p.leader.replicas if r in p.isr)
        return vs, PartitionState(self._replicas.broker_id, s.leader_epoch, ordered, s.controller_epoch)

    async def _write_together(self, ready: list[tuple[_Proposal, _Change]]) -> bool:
        changes = [(p.rep.topic, p.rep.partition, vs, new) for p, (vs, new) in ready]
        try:
            revision = await self._replicas.client.update_partition_states(changes, controller=None)
        except (MetadataStoreError, StrataError) as exc:
            log.warning("could not write %d ISR changes at once: %s", len(ready), exc)
            return False
        if revision is None:
            return False  # a conflict: one by one says which
        for p, (vs, new) in ready:
            self._commit(p, vs.value, new.isr, revision)
        log.info(
            "wrote %d ISR changes in one transaction (%s: %s, ...)",
            len(ready),
            ready[0][0].rep.name,
            ready[0][0].why,
        )
        return True

    async def _write_one(self, p: _Proposal) -> None:
        try:
            vs = self._replicas.view.partitions.get((p.rep.topic, p.rep.partition))
            for _ in range(3):
                if vs is None or (change := self._next(p, vs)) is None:
                    return
                _, new = change
                res = await self._replicas.client.update_partition_state(
                    p.rep.topic, p.rep.partition, vs, new
                )
                if res.ok:
                    assert res.state is not None
                    self._commit(p, vs.value, new.isr, res.state.mod_revision)
                    return
                vs = res.state
        except MetadataStoreError as exc:
            log.warning("%s: ISR change to %s not written: %s", p.rep.name, sorted(p.isr), exc)

    def _commit(self, p: _Proposal, old: PartitionState, isr: tuple[int, ...], revision: int) -> None:
        if p.rep.leader is not p.leader:
            return
        p.rep.isr_revision = revision
        p.leader.commit_isr(isr)
        p.committed = True
        log.info("%s: ISR %s -> %s (%s)", p.rep.name, list(old.isr), list(isr), p.why)
        self._replicas.on_isr_change(p.rep.topic, p.rep.partition, old.isr, isr)

    def _done(self, p: _Proposal) -> None:
        """The end of a proposal, written or not (once: later calls do nothing)."""
        if p.finished:
            return
        p.finished = True
        rep, leader = p.rep, p.leader
        if rep.leader is not leader:
            return
        if not p.committed and leader.pending_isr is not None:
            leader.abort_isr_change()
        rep.isr_writing = False
        if p.committed:
            self._replicas.maybe_advance_hw(rep)
        # The view may have moved meanwhile (our write, or the controller's).
        current = self._replicas.view.partitions.get((rep.topic, rep.partition))
        if current is not None and rep.role is Role.LEADER:
            self._replicas._apply(rep, rep.replicas, current)
