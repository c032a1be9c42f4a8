"""Share-group membership (broker.share.membership): epochs, assignment, expiry."""

from __future__ import annotations

import pytest

from broker.share.errors import FencedMemberEpochError
from broker.share.membership import ShareGroup, assign
from hot.errors import GroupMaxSizeReachedError, InvalidRequestError, UnknownMemberIdError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _counts(topic: str) -> int:
    return {"t": 2, "u": 3}.get(topic, 0)


def test_assign_shares_partitions_when_members_outnumber_them() -> None:
    got = assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 2})
    assert got == {"a": {"t": (0,)}, "b": {"t": (1,)}, "c": {"t": (0,)}}
    got = assign({"a": ["t", "u"], "b": ["u"]}, {"t": 2, "u": 3})
    assert got == {"a": {"t": (0, 1), "u": (0, 2)}, "b": {"u": (1,)}}


def test_join_heartbeat_and_rebalance_on_new_member() -> None:
    clock = Clock()
    g = ShareGroup("g", clock)
    r = g.heartbeat("m1", 0, ["t"], _counts)
    assert r.member_epoch == 1 and r.assignment == {"t": (0, 1)}
    r = g.heartbeat("m1", 1, None, _counts)
    assert r.assignment is None  # nothing changed
    r2 = g.heartbeat("m2", 0, ["t"], _counts)
    assert r2.member_epoch == 2 and r2.assignment == {"t": (1,)}
    r = g.heartbeat("m1", 1, None, _counts)
    assert r.member_epoch == 2 and r.assignment == {"t": (0,)}
    assert g.state == "Stable"


def test_errors() -> None:
    clock = Clock()
    g = ShareGroup("g", clock, max_size=1)
    with pytest.raises(InvalidRequestError):
        g.heartbeat("", 0, ["t"], _counts)
    with pytest.raises(InvalidRequestError):
        g.heartbeat("m1", 0, None, _counts)
    with pytest.raises(UnknownMemberIdError):
        g.heartbeat("m1", 3, None, _counts)
    g.heartbeat("m1", 0, ["t"], _counts)
    with pytest.raises(FencedMemberEpochError):
        g.heartbeat("m1", 7, None, _counts)
    with pytest.raises(GroupMaxSizeReachedError):
        g.heartbeat("m2", 0, ["t"], _counts)


def test_leave_and_session_expiry() -> None:
    clock = Clock()
    g = ShareGroup("g", clock, session_timeout_ms=1_000)
    g.heartbeat("m1", 0, ["t"], _counts)
    g.heartbeat("m2", 0, ["t"], _counts)
    assert g.heartbeat("m2", -1, None, _counts).member_epoch == -1
    clock.now = 2_000
    assert g.expire_members() == ["m1"]
    assert g.state == "Empty"
