"""Partition reassignment (KIP-455) as pure logic: what a request does to a partition's
replica set, and when and how the controller completes it.

A partition's replicas are stored as Kafka stores them: the full set ``replicas`` (while a
reassignment runs: the target followed by the original replicas, deduplicated) plus
``adding`` (in the set but not original) and ``removing`` (in the set but not target).
So ``target = replicas - removing`` and ``original = replicas - adding``. A replica added
by a reassignment that was then cancelled or replaced is in both lists: neither original
nor target, it leaves at completion.

A request only ever adds replicas to the set (or reorders it): new replicas start as
followers outside the ISR and catch up. Every removal happens at completion, which the
controller writes in one transaction together with the partition state: once every
target replica is in the ISR, replicas = target, ISR = ISR ∩ target, and a leader that is
not in the target hands over to the first live target replica of the ISR with the leader
epoch bumped. Cancelling is a reassignment back to the original replicas.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from hot.errors import (
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    NoReassignmentInProgressError,
)

NO_LEADER = -1


def _distinct(*lists: Sequence[int]) -> tuple[int, ...]:
    out: dict[int, None] = {}
    for ids in lists:
        for i in ids:
            out.setdefault(i, None)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PartitionReplicas:
    """One partition's replica set and the reassignment running on it, if any."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        members = set(self.replicas)
        if not self.replicas or len(members) != len(self.replicas):
            raise ValueError(f"replica list {list(self.replicas)} is empty or repeats a broker")
        for name, ids in (("adding", self.adding), ("removing", self.removing)):
            if len(set(ids)) != len(ids) or not set(ids) <= members:
                raise ValueError(f"{name} {list(ids)} must be distinct members of {list(self.replicas)}")
        if not self.target or not self.original:
            raise ValueError(f"reassignment of {list(self.replicas)} leaves no replica")

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


def validate_target(
    target: Sequence[int],
    *,
    known_brokers: Collection[int],
    min_insync_replicas: int,
) -> tuple[int, ...]:
    """The target replica list, or the error Kafka gives: empty, repeated, negative or
    unknown broker ids are InvalidReplicaAssignmentError; a replication factor below the
    topic's min.insync.replicas is InvalidReplicationFactorError (acks=all could never
    succeed). ``known_brokers``: the live brokers plus the partition's current replicas."""
    ids = tuple(target)
    if not ids:
        raise InvalidReplicaAssignmentError("the target replica list is empty")
    if len(set(ids)) != len(ids):
        raise InvalidReplicaAssignmentError(f"the target replica list {list(ids)} repeats a broker")
    unknown = sorted(i for i in ids if i < 0 or i not in known_brokers)
    if unknown:
        raise InvalidReplicaAssignmentError(f"unknown (or not live) broker ids {unknown} in {list(ids)}")
    if len(ids) < min_insync_replicas:
        raise InvalidReplicationFactorError(
            f"{len(ids)} replica(s) {list(ids)} are fewer than the topic's "
            f"min.insync.replicas {min_insync_replicas}"
        )
    return ids


def reassign(current: PartitionReplicas, target: Sequence[int] | None) -> PartitionReplicas:
    """What a request makes of ``current``: a new ``target`` (validated by the caller), or
    None to cancel (NoReassignmentInProgressError when nothing runs). Replicas are only
    added: ones that must go stay until the controller completes the reassignment."""
    if target is None:
        if not current.reassigning:
            raise NoReassignmentInProgressError("no reassignment of this partition is in progress")
        target = current.original
    target = tuple(target)
    original = current.original
    if not current.reassigning and set(target) == set(original):
        return PartitionReplicas(target)  # the same replicas, maybe reordered: nothing to move
    full = _distinct(target, original, current.replicas)
    return PartitionReplicas(
        full,
        adding=tuple(r for r in full if r not in original),
        removing=tuple(r for r in full if r not in target),
    )


@dataclass(frozen=True, slots=True)
class Completion:
    """The switch to the target: new replica set and partition leadership."""

    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


def complete(
    current: PartitionReplicas,
    *,
    leader: int,
    leader_epoch: int,
    isr: Sequence[int],
    live: Collection[int],
) -> Completion | None:
    """The completion of a running reassignment once every target replica is in the ISR,
    else None (also while the partition is offline or its leader dead, or when the leader
    must move and no in-sync target replica is alive)."""
    if not current.reassigning or leader == NO_LEADER or leader not in live:
        return None  # a dead leader is replaced first (``elect_leader``), then we switch
    target = current.target
    in_sync = set(isr)
    if not set(target) <= in_sync:
        return None
    new_isr = tuple(r for r in target if r in in_sync)
    if leader in target:
        return Completion(target, leader, leader_epoch, new_isr)
    candidates = [r for r in new_isr if r in live]
    if not candidates:
        return None
    return Completion(target, candidates[0], leader_epoch + 1, new_isr)


__all__ = [
    "Completion",
    "PartitionReplicas",
    "complete",
    "reassign",
    "validate_target",
]
