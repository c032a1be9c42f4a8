"""The server-side assignors against Kafka's documented examples (RangeAssignor and
RoundRobinAssignor javadoc)."""

from __future__ import annotations

import pytest

from api.groups.consumer_protocol import Subscription, decode_assignment
from api.groups.types import TopicPartition
from api.rest_consumers.assignors import (
    MemberSubscription,
    assign,
    assign_range,
    assign_roundrobin,
)


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
    with pytest.raises(ValueError, match="cooperative-sticky"):
        assign("cooperative-sticky", [], {})
