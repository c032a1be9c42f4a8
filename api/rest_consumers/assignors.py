"""Server-side partition assignors for REST consumer instances that lead their group.

Pure functions with Kafka's exact semantics, so a group mixing REST instances with Kafka
clients gets the assignment any Java or librdkafka leader would compute:

* ``range`` (Kafka's RangeAssignor): per topic, the members subscribed to it in order
  (group.instance.id when both members have one, else member id) each get a contiguous
  run of partitions; the first ``partitions % members`` get one more.
* ``roundrobin`` (RoundRobinAssignor): every subscribed partition, sorted by topic and
  partition, dealt in turn to the members (same order) subscribed to its topic.
* ``cooperative-sticky`` (KIP-429, CooperativeStickyAssignor's contract, not its exact
  algorithm: clients accept any valid plan): every member keeps the partitions it owned
  (its subscription's ``owned_partitions``; a partition claimed by two members stays with
  the claim of the newer generation, v2+ subscriptions), the rest go to the least loaded
  subscribed member, then partitions move one at a time from a member to one with at
  least two fewer that is subscribed to them, until no such move is left (balanced, and
  sticky: only what balance needs moves). A partition moving away from its owner is left
  out of this round's plan entirely: the owner sees it revoked and rejoins, and the next
  round hands it over, so no partition is ever consumed by two members at once.

Topics that do not exist (no partition count) are left out, as Kafka's assignors do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from broker.groups.types import TopicPartition
from kwire.consumer_protocol import Assignment, Subscription, TopicPartitions, encode_assignment

RANGE: Final = "range"
ROUNDROBIN: Final = "roundrobin"
COOPERATIVE_STICKY: Final = "cooperative-sticky"
# What instances offer in JoinGroup, most preferred first: the eager protocols first, as
# the Java consumer's default [range, cooperative-sticky] does, so a group of REST
# instances alone stays eager, and a group with cooperative-only clients can still take
# REST instances (the group picks a protocol every member offers).
SUPPORTED: Final = (RANGE, ROUNDROBIN, COOPERATIVE_STICKY)
COOPERATIVE: Final = frozenset({COOPERATIVE_STICKY})


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    member_id: str
    group_instance_id: str | None
    subscription: Subscription


def _order(m: MemberSubscription) -> tuple[str, str]:
    # Kafka's MemberInfo ordering: by group.instance.id when present, then member id.
    return (m.group_instance_id if m.group_instance_id is not None else "\uffff" + m.member_id, m.member_id)


def assign_range(
    members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    topics = sorted({t for m in members for t in m.subscription.topics})
    for topic in topics:
        count = partitions_per_topic.get(topic)
        if not count:
            continue
        subscribed = sorted((m for m in members if topic in m.subscription.topics), key=_order)
        per, extra = divmod(count, len(subscribed))
        for i, m in enumerate(subscribed):
            start = per * i + min(i, extra)
            length = per + (1 if i < extra else 0)
            out[m.member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
    return out


def assign_roundrobin(
    members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    ordered = sorted(members, key=_order)
    if not ordered:
        return out
    topics = sorted({t for m in members for t in m.subscription.topics})
    i = 0
    for topic in topics:
        for p in range(partitions_per_topic.get(topic, 0)):
            for _ in range(len(ordered)):  # the next member (circularly) subscribed to topic
                m = ordered[i % len(ordered)]
                i += 1
                if topic in m.subscription.topics:
                    out[m.member_id].append(TopicPartition(topic, p))
                    break
    return out


def _owners(
    members: Sequence[MemberSubscription], valid: Mapping[str, set[TopicPartition]]
) -> tuple[dict[TopicPartition, str], set[TopicPartition]]:
    """Partition -> the member that owned it in the previous generation, as far as it is
    still valid (subscribed, existing); of two claims the newer generation wins. Two claims
    of one generation cancel out and the partition is contested (second result): nobody
    keeps it, and nobody gets it this round, since either claimant may still consume it."""
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    for m in members:
        gen = m.subscription.generation_id
        for tps in m.subscription.owned_partitions:
            for p in tps.partitions:
                tp = TopicPartition(tps.topic, p)
                if tp not in valid[m.member_id]:
                    continue
                seen = best.get(tp)
                if seen is None or gen > seen[0]:
                    best[tp] = (gen, m.member_id)
                elif gen == seen[0]:
                    best[tp] = (gen, None)
    owners = {tp: mid for tp, (_, mid) in best.items() if mid is not None}
    return owners, {tp for tp, (_, mid) in best.items() if mid is None}


def assign_cooperative_sticky(
    members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """The ``cooperative-sticky`` plan (module docstring), movements already withheld."""
    ordered = sorted(members, key=_order)
    valid: dict[str, set[TopicPartition]] = {
        m.member_id: {
            TopicPartition(t, p)
            for t in set(m.subscription.topics)
            for p in range(partitions_per_topic.get(t, 0))
        }
        for m in ordered
    }
    owners, contested = _owners(ordered, valid)
    plan: dict[str, set[TopicPartition]] = {m.member_id: set() for m in ordered}
    for tp, mid in owners.items():
        plan[mid].add(tp)
    rank = {m.member_id: i for i, m in enumerate(ordered)}
    every = sorted(set().union(*valid.values())) if valid else []
    for tp in every:
        if tp in owners:
            continue
        eligible = [mid for mid in plan if tp in valid[mid]]
        plan[min(eligible, key=lambda mid: (len(plan[mid]), rank[mid]))].add(tp)
    # Balance: move one partition at a time from the most loaded member that can give one
    # to a member with at least two fewer; each move lowers the sum of squared loads, so
    # this ends. Partitions not owned before move first (nothing to revoke), then the
    # highest ones, as a deterministic choice.
    while True:
        move: tuple[TopicPartition, str, str] | None = None
        for giver in sorted(plan, key=lambda mid: (-len(plan[mid]), rank[mid])):
            takers = sorted(
                (mid for mid in plan if len(plan[mid]) + 2 <= len(plan[giver])),
                key=lambda mid: (len(plan[mid]), rank[mid]),
            )
            for tp in sorted(plan[giver], key=lambda tp: (tp not in owners, tp), reverse=True):
                taker = next((mid for mid in takers if tp in valid[mid]), None)
                if taker is not None:
                    move = (tp, giver, taker)
                    break
            if move is not None:
                break
        if move is None:
            break
        tp, giver, taker = move
        plan[giver].discard(tp)
        plan[taker].add(tp)
    # Cooperative: a partition changing hands is revoked first (left out this round).
    return {
        mid: sorted(tp for tp in tps if owners.get(tp, mid) == mid and tp not in contested)
        for mid, tps in plan.items()
    }


def assign(
    protocol: str, members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, bytes]:
    """Encoded consumer-protocol assignments for every member under ``protocol``
    (one of ``SUPPORTED``; anything else is ValueError: the group chose a protocol every
    member offered, so the caller only asks for its own)."""
    if protocol == RANGE:
        plan = assign_range(members, partitions_per_topic)
    elif protocol == ROUNDROBIN:
        plan = assign_roundrobin(members, partitions_per_topic)
    elif protocol == COOPERATIVE_STICKY:
        plan = assign_cooperative_sticky(members, partitions_per_topic)
    else:
        raise ValueError(f"no server-side assignor {protocol!r}")
    # Version 1 marks a cooperative assignor's plan (Kafka's ConsumerProtocolAssignment).
    version = 1 if protocol in COOPERATIVE else 0
    return {mid: encode_assignment(Assignment(version, group_partitions(tps))) for mid, tps in plan.items()}


def group_partitions(tps: Sequence[TopicPartition]) -> tuple[TopicPartitions, ...]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(TopicPartitions(t, tuple(ps)) for t, ps in by_topic.items())
