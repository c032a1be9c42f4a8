"""The server-side assignors against Kafka's documented examples (RangeAssignor and
RoundRobinAssignor javadoc), and the cooperative-sticky assignor's contract (KIP-429):
owned partitions stay, the plan is balanced, and a partition changing hands is revoked
in one round and assigned in the next."""

from __future__ import annotations

import pytest

from api.rest_consumers.assignors import (
    MemberSubscription,
    assign,
    assign_cooperative_sticky,
    assign_range,
    assign_roundrobin,
)
from broker.groups.types import TopicPartition
from kwire.consumer_protocol import Subscription, TopicPartitions, decode_assignment


def member(mid: str, *topics: str, instance: str | None = None) -> MemberSubscription:
    return MemberSubscription(mid, instance, Subscription(1, topics))


def tps(*items: str) -> list[TopicPartition]:
    return [TopicPartition(s[:2], int(s[3:])) for s in items]


def test_range_two_members_two_topics() -> None:
    members = [member("C1", "t0", "t1"), member("C0", "t0", "t1")]
    plan = assign_range(members, {"t0": 3, "t1": 3})
    assert plan == {"C0": tps("t0p0", "t0p1", "t1p0", "t1p1"), "C1": tps("t0p2", "t1p2")}


def test_roundrobin_two_members_two_topics() -> None:
    members = [member("C0", "t0", "t1"), member("C1", "t0", "t1")]
    plan = assign_roundrobin(members, {"t0": 3, "t1": 3})
    assert plan == {"C0": tps("t0p0", "t0p2", "t1p1"), "C1": tps("t0p1", "t1p0", "t1p2")}


def test_roundrobin_different_subscriptions() -> None:
    members = [member("C0", "t0"), member("C1", "t0", "t1"), member("C2", "t0", "t1", "t2")]
    plan = assign_roundrobin(members, {"t0": 1, "t1": 2, "t2": 3})
    assert plan == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1", "t2p0", "t2p1", "t2p2")}


def test_range_more_members_than_partitions_and_unknown_topics() -> None:
    members = [member("a", "t0", "zz"), member("b", "t0"), member("c", "t0")]
    plan = assign_range(members, {"t0": 2})
    assert plan == {"a": tps("t0p0"), "b": tps("t0p1"), "c": []}


def test_static_members_order_by_instance_id_first() -> None:
    members = [member("a", "t0"), member("z", "t0", instance="i1")]
    assert assign_range(members, {"t0": 2}) == {"z": tps("t0p0"), "a": tps("t0p1")}


def test_assign_encodes_consumer_assignments() -> None:
    encoded = assign("range", [member("m1", "t0"), member("m2", "t0")], {"t0": 3})
    decoded = {m: decode_assignment(b) for m, b in encoded.items()}
    assert [(p.topic, p.partitions) for p in decoded["m1"].partitions] == [("t0", (0, 1))]
    assert [(p.topic, p.partitions) for p in decoded["m2"].partitions] == [("t0", (2,))]
    with pytest.raises(ValueError, match="'sticky'"):
        assign("sticky", [], {})  # the eager sticky assignor is not offered


def owning(mid: str, generation: int, owned: list[TopicPartition], *topics: str) -> MemberSubscription:
    by_topic: dict[str, list[int]] = {}
    for tp in owned:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    parts = tuple(TopicPartitions(t, tuple(ps)) for t, ps in by_topic.items())
    return MemberSubscription(mid, None, Subscription(2, topics, None, parts, generation))


def test_cooperative_sticky_revokes_before_reassigning() -> None:
    counts = {"t0": 6}
    # First round: nobody owns anything, a balanced plan.
    first = assign_cooperative_sticky([member("A", "t0"), member("B", "t0")], counts)
    assert sorted(len(v) for v in first.values()) == [3, 3]
    assert sorted(first["A"] + first["B"]) == tps(*(f"t0p{i}" for i in range(6)))
    # C joins: A and B keep two each, C gets nothing yet (what it will get is still owned).
    a, b = first["A"], first["B"]
    second = assign_cooperative_sticky(
        [owning("A", 1, a, "t0"), owning("B", 1, b, "t0"), member("C", "t0")], counts
    )
    assert len(second["A"]) == len(second["B"]) == 2 and second["C"] == []
    assert set(second["A"]) < set(a) and set(second["B"]) < set(b)
    # After A and B revoked, the next round hands the two partitions to C, moving nothing else.
    third = assign_cooperative_sticky(
        [owning("A", 2, second["A"], "t0"), owning("B", 2, second["B"], "t0"), owning("C", 2, [], "t0")],
        counts,
    )
    assert third["A"] == second["A"] and third["B"] == second["B"]
    assert sorted(third["C"]) == sorted((set(a) - set(second["A"])) | (set(b) - set(second["B"])))


def test_cooperative_sticky_claims_subscriptions_and_departures() -> None:
    counts = {"t0": 4, "t1": 2}
    # B claims t0p0 from an older generation than A: A keeps it. t1 is not B's any more.
    plan = assign_cooperative_sticky(
        [
            owning("A", 5, tps("t0p0", "t0p1"), "t0"),
            owning("B", 4, tps("t0p0", "t1p0", "t1p1"), "t0"),
        ],
        counts,
    )
    assert plan == {"A": tps("t0p0", "t0p1"), "B": tps("t0p2", "t0p3")}
    # Two claims of one generation: contested, nobody gets it this round.
    plan = assign_cooperative_sticky(
        [owning("A", 5, tps("t0p0", "t0p1"), "t0"), owning("B", 5, tps("t0p0"), "t0")], {"t0": 3}
    )
    assert TopicPartition("t0", 1) in plan["A"]  # A's own claim stands
    assert sorted(plan["A"] + plan["B"]) == tps("t0p1", "t0p2")  # t0p0 to nobody
    # A member left: its partitions are free and go to the others at once.
    plan = assign_cooperative_sticky([owning("A", 6, tps("t0p0", "t0p1"), "t0", "t1")], counts)
    assert plan == {"A": tps("t0p0", "t0p1", "t0p2", "t0p3", "t1p0", "t1p1")}
    # Different subscriptions: every partition to exactly one subscribed member.
    members = [member("A", "t0"), member("B", "t0", "t1"), member("C", "t1")]
    plan = assign_cooperative_sticky(members, counts)
    assert sorted(tp for v in plan.values() for tp in v) == tps(
        "t0p0", "t0p1", "t0p2", "t0p3", "t1p0", "t1p1"
    )
    assert all(tp.topic == "t0" for tp in plan["A"]) and all(tp.topic == "t1" for tp in plan["C"])
    assert max(len(v) for v in plan.values()) - min(len(v) for v in plan.values()) <= 1
    encoded = assign("cooperative-sticky", members, counts)
    assert {m: decode_assignment(e).version for m, e in encoded.items()} == {"A": 1, "B": 1, "C": 1}
