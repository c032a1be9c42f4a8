"""Server-side partition assignors for REST consumer instances that lead their group.

Pure functions with Kafka's exact semantics, so a group mixing REST instances with Kafka
clients gets the assignment any Java or librdkafka leader would compute:

* ``range`` (Kafka's RangeAssignor): per topic, the members subscribed to it in order
  (group.instance.id when both members have one, else member id) each get a contiguous
  run of partitions; the first ``partitions % members`` get one more.
* ``roundrobin`` (RoundRobinAssignor): every subscribed partition, sorted by topic and
  partition, dealt in turn to the members (same order) subscribed to its topic.

Topics that do not exist (no partition count) are left out, as Kafka's assignors do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from api.groups.consumer_protocol import Assignment, Subscription, TopicPartitions, encode_assignment
from api.groups.types import TopicPartition

RANGE: Final = "range"
ROUNDROBIN: Final = "roundrobin"
# What instances offer in JoinGroup, most preferred first (both are eager protocols).
SUPPORTED: Final = (RANGE, ROUNDROBIN)


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
    else:
        raise ValueError(f"no server-side assignor {protocol!r}")
    return {mid: encode_assignment(Assignment(0, group_partitions(tps))) for mid, tps in plan.items()}


def group_partitions(tps: Sequence[TopicPartition]) -> tuple[TopicPartitions, ...]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(TopicPartitions(t, tuple(ps)) for t, ps in by_topic.items())
