"""One group's state (broker.groups.group) without a coordinator: protocol support and
selection, leader re-election, static ids, waiters, subscriptions and the DescribeGroups
view."""

from __future__ import annotations

import asyncio

import pytest

from broker.groups.group import Group, Member
from broker.groups.types import GroupProtocol, GroupState, JoinGroupResult, SyncGroupResult, TopicPartition
from hot.errors import FencedInstanceIdError
from tests.broker.groups.grouplib import assignment, jreq, protocols


def member(mid: str, *names: str, instance: str | None = None, topics: tuple[str, ...] = ("t",)) -> Member:
    return Member(mid, jreq(member_id=mid, protos=protocols(*names, topics=topics), instance=instance), 0.0)


def group(*members: Member) -> Group:
    g = Group("g", 0)
    for m in members:
        g.add(m)
    return g


def test_an_empty_group_takes_the_first_members_protocol_type_and_leader() -> None:
    g = Group("g", 5)
    assert (g.state, g.generation, g.state_timestamp_ms) == (GroupState.EMPTY, 0, 5)
    assert g.supports("consumer", protocols("range"))
    assert not g.supports("", protocols("range")) and not g.supports("consumer", ())
    g.add(member("a", "range", "roundrobin"))
    assert (g.protocol_type, g.leader_id) == ("consumer", "a")
    assert g.supports("consumer", protocols("roundrobin"))
    assert not g.supports("connect", protocols("range"))
    assert not g.supports("consumer", protocols("sticky"))


def test_protocol_selection_votes_among_common_protocols_ties_to_the_leader() -> None:
    g = group(member("a", "range", "rr"), member("b", "rr", "range"))
    assert g.select_protocol() == "range"  # one vote each: the leader's preference
    g.add(member("c", "rr", "range", "sticky"))
    assert g.select_protocol() == "rr"  # sticky is not common; rr has two votes


def test_removing_the_leader_elects_the_next_member_and_frees_its_static_id() -> None:
    a, b = member("a", "range", instance="ia"), member("b", "range")
    g = group(a, b)
    assert g.static == {"ia": "a"}
    g.pending_sync = {"a", "b"}
    g.remove(a)
    assert (g.leader_id, g.static, g.pending_sync, list(g.members)) == ("b", {}, {"b"}, ["b"])
    g.remove(b)
    assert g.leader_id is None and not g.members


async def test_all_joined_counts_pending_members_and_fail_waiters_answers_parked_requests() -> None:
    a = member("a", "range")
    g = group(a)
    loop = asyncio.get_running_loop()
    assert not g.all_joined()
    a.join_future = loop.create_future()
    assert g.all_joined()
    g.pending["p"] = object()  # type: ignore[assignment]
    assert not g.all_joined()
    g.pending.clear()
    join: asyncio.Future[JoinGroupResult] = a.join_future
    sync: asyncio.Future[SyncGroupResult] = loop.create_future()
    a.sync_future = sync
    a.fail_waiters(FencedInstanceIdError("replaced"))
    assert a.join_future is None and a.sync_future is None
    for fut in (join, sync):
        with pytest.raises(FencedInstanceIdError):
            fut.result()


def test_join_members_carry_the_selected_protocols_metadata() -> None:
    g = group(member("a", "range", topics=("x",)), member("b", "range", instance="ib", topics=("y",)))
    g.protocol_name = "range"
    [ma, mb] = g.join_members()
    assert (ma.member_id, ma.group_instance_id, ma.metadata) == ("a", None, g.members["a"].metadata("range"))
    assert (mb.member_id, mb.group_instance_id) == ("b", "ib")
    assert g.members["a"].metadata("other") == b""


def test_subscribed_topics_of_a_consumer_group_and_when_unknown() -> None:
    g = group(member("a", "range", topics=("x",)), member("b", "range", topics=("y", "z")))
    assert g.subscribed_topics() == {"x", "y", "z"}
    g.protocol_name = "range"
    assert g.subscribed_topics() == {"x", "y", "z"}
    g.add(Member("c", jreq(member_id="c", protos=(GroupProtocol("range", b"\x00"),)), 0.0))
    assert g.subscribed_topics() is None  # does not parse: every topic counts as subscribed
    other = Group("o", 0)
    other.add(Member("m", jreq(member_id="m", protocol_type="connect"), 0.0))
    assert other.subscribed_topics() is None


def test_describe_lists_the_assigned_partitions_of_a_consumer_group() -> None:
    g = group(member("a", "range"), member("b", "range"))
    g.protocol_name, g.generation, g.state = "range", 3, GroupState.STABLE
    g.members["a"].assignment = assignment(t=[0, 2])
    g.members["b"].assignment = b"\xff"  # does not parse: no partitions listed
    d = g.describe()
    assert (d.group_id, d.state, d.protocol_type, d.protocol_name, d.generation_id, d.leader_id) == (
        "g",
        GroupState.STABLE,
        "consumer",
        "range",
        3,
        "a",
    )
    da, db = d.members
    assert da.assigned_partitions == (TopicPartition("t", 0), TopicPartition("t", 2))
    assert db.assigned_partitions == () and db.assignment == b"\xff"
