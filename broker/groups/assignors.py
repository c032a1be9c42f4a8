"""The server-side partition assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

Pure functions of the members' resolved subscriptions, the partition counts of the
subscribed topics and the previous target assignment; the coordinator
(broker.groups.consumer_group) calls the one the members name in ``ServerAssignor``
(``group.remote.assignor`` on the client), ``uniform`` by default as in Kafka.

* ``uniform``: every partition of a subscribed topic goes to one member subscribed to
  it, counts differ by at most one between members that could take each other's
  partitions, and a partition stays with its previous owner whenever that keeps the
  balance (so a member joining or leaving moves only the partitions it must).
* ``range``: per topic, the members subscribed to it, sorted by member id, take
  consecutive ranges, the first ``partitions % members`` one partition more; members
  subscribed to the same co-partitioned topics get the same partition numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

# topic name -> partitions
Assignment = Mapping[str, frozenset[int]]
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What the assignor knows of one member: its id, the topics it subscribes to
    (names and regular expression resolved) and its previous target assignment."""

    member_id: str
    topics: frozenset[str]
    previous: Assignment = field(default_factory=dict)


AssignFn = Callable[[Sequence[MemberSubscription], Mapping[str, int]], dict[str, dict[str, frozenset[int]]]]


def _to_assignment(owned: dict[str, set[TopicPartition]]) -> dict[str, dict[str, frozenset[int]]]:
    out: dict[str, dict[str, frozenset[int]]] = {}
    for member_id, tps in owned.items():
        by_topic: dict[str, set[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, set()).add(p)
        out[member_id] = {t: frozenset(ps) for t, ps in sorted(by_topic.items())}
    return out


def uniform(
    members: Sequence[MemberSubscription], partitions: Mapping[str, int]
) -> dict[str, dict[str, frozenset[int]]]:
    """Balanced and sticky (module docstring)."""
    ids = sorted(m.member_id for m in members)
    subs = {m.member_id: m.topics for m in members}
    owned: dict[str, set[TopicPartition]] = {mid: set() for mid in ids}
    all_tps = sorted(
        (t, p)
        for t in {t for m in members for t in m.topics}
        if t in partitions
        for p in range(partitions[t])
    )
    if not ids or not all_tps:
        return _to_assignment(owned)
    # The most any member may keep of its previous partitions: the balanced share.
    cap = -(-len(all_tps) // len(ids))
    taken: set[TopicPartition] = set()
    for m in sorted(members, key=lambda m: m.member_id):
        kept = sorted(
            (t, p)
            for t, ps in m.previous.items()
            if t in m.topics and t in partitions
            for p in ps
            if p < partitions[t] and (t, p) not in taken
        )
        for tp in kept[:cap]:
            owned[m.member_id].add(tp)
            taken.add(tp)
    for tp in all_tps:
        if tp in taken:
            continue
        eligible = [mid for mid in ids if tp[0] in subs[mid]]
        best = min(eligible, key=lambda mid: (len(owned[mid]), mid))
        owned[best].add(tp)
        taken.add(tp)
    # Balance: move one partition from a fuller member to an emptier one able to take it
    # until no pair differs by more than one (bounded: each move lowers the spread).
    for _ in range(len(all_tps) * len(ids)):
        moved = False
        by_load = sorted(ids, key=lambda mid: (len(owned[mid]), mid))
        for low in by_load:
            for high in reversed(by_load):
                if len(owned[high]) - len(owned[low]) <= 1:
                    break
                movable = sorted(tp for tp in owned[high] if tp[0] in subs[low])
                if movable:
                    tp = movable[-1]
                    owned[high].remove(tp)
                    owned[low].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return _to_assignment(owned)


def range_assignor(
    members: Sequence[MemberSubscription], partitions: Mapping[str, int]
) -> dict[str, dict[str, frozenset[int]]]:
    """Consecutive ranges per topic (module docstring)."""
    owned: dict[str, set[TopicPartition]] = {m.member_id: set() for m in members}
    topics = sorted({t for m in members for t in m.topics if t in partitions})
    for t in topics:
        subscribed = sorted(m.member_id for m in members if t in m.topics)
        n = partitions[t]
        share, extra = divmod(n, len(subscribed))
        start = 0
        for i, mid in enumerate(subscribed):
            count = share + (1 if i < extra else 0)
            owned[mid].update((t, p) for p in range(start, start + count))
            start += count
    return _to_assignment(owned)


ASSIGNORS: Final[dict[str, AssignFn]] = {"uniform": uniform, "range": range_assignor}
DEFAULT_ASSIGNOR: Final = "uniform"
