"""The share-partition state machine (broker.share.partition) with a hand-moved clock."""

from __future__ import annotations

import pytest

from broker.share.errors import InvalidRecordStateError
from broker.share.partition import AckType, Acquired, BatchSpan, RecordState, SharePartition, StateBatch


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _sp(clock: Clock, max_in_flight: int = 2_000) -> SharePartition:
    return SharePartition(start=0, clock=clock, lock_ms=1_000, delivery_limit=3, max_in_flight=max_in_flight)


def test_acquire_up_to_max_records_rounded_to_batches() -> None:
    clock = Clock()
    sp = _sp(clock)
    batches = [BatchSpan(0, 4), BatchSpan(5, 9)]
    assert sp.acquire("a", 0, batches, max_records=3) == [Acquired(0, 4, 1)]
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("b", 5, batches[1:], max_records=100) == [Acquired(5, 9, 1)]
    assert sp.acquired == 10 and sp.end == 10
    # Nothing Available is left: a second fetch gets nothing
    assert sp.acquire("b", 0, batches, 100) == []


def test_accept_release_reject_and_window_advance() -> None:
    clock = Clock()
    sp = _sp(clock)
    sp.acquire("a", 0, [BatchSpan(0, 5)], 10)
    sp.acknowledge("a", 0, 1, [AckType.ACCEPT])
    sp.acknowledge("a", 2, 4, [AckType.RELEASE, AckType.REJECT, AckType.ACCEPT])
    assert sp.start == 2  # 0-1 accepted; 2 released
    assert sp.state_of(2) is RecordState.AVAILABLE
    assert sp.state_of(3) is RecordState.ARCHIVED
    assert [a.offset for a in sp.drain_archived()] == [3]
    # Offset 2 is redelivered with a delivery count of 2
    assert sp.acquire("b", 2, [BatchSpan(0, 5)], 10) == [Acquired(2, 2, 2)]
    sp.acknowledge("b", 2, 2, [AckType.ACCEPT])
    sp.acknowledge("a", 5, 5, [AckType.ACCEPT])
    assert sp.start == 6 and not sp.runs


def test_ack_of_records_not_held_is_invalid_and_changes_nothing() -> None:
    clock = Clock()
    sp = _sp(clock)
    sp.acquire("a", 0, [BatchSpan(0, 3)], 10)
    with pytest.raises(InvalidRecordStateError):
        sp.acknowledge("b", 0, 0, [AckType.ACCEPT])
    with pytest.raises(InvalidRecordStateError):
        sp.acknowledge("a", 2, 5, [AckType.ACCEPT])  # 4-5 never acquired
    assert sp.acquired == 4


def test_lock_expiry_redelivers_and_delivery_limit_archives() -> None:
    clock = Clock()
    sp = _sp(clock)
    for delivery in (1, 2, 3):
        got = sp.acquire("a", sp.next_fetch_offset() or 0, [BatchSpan(0, 0)], 1)
        assert got == [Acquired(0, 0, delivery)]
        clock.now += 999
        assert sp.expire_locks() == 0
        clock.now += 1
        assert sp.expire_locks() == 1
    # Delivered three times (the limit) without acceptance: archived, never again
    assert sp.state_of(0) is RecordState.ACKNOWLEDGED  # below the start: done
    assert sp.start == 1
    assert [(a.offset, a.delivery_count) for a in sp.drain_archived()] == [(0, 3)]


def test_control_and_aborted_batches_are_never_delivered() -> None:
    clock = Clock()
    sp = _sp(clock)
    got = sp.acquire("a", 0, [BatchSpan(0, 1), BatchSpan(2, 2, skip=True), BatchSpan(5, 6)], 10)
    assert got == [Acquired(0, 1, 1), Acquired(5, 6, 1)]
    assert sp.state_of(2) is RecordState.ARCHIVED
    assert sp.state_of(3) is RecordState.ARCHIVED  # 3-4: compacted away
    sp.acknowledge("a", 0, 1, [AckType.ACCEPT])
    assert sp.start == 5


def test_max_in_flight_bounds_the_window() -> None:
    clock = Clock()
    sp = _sp(clock, max_in_flight=4)
    assert sp.acquire("a", 0, [BatchSpan(0, 9)], 100) == [Acquired(0, 3, 1)]
    assert sp.next_fetch_offset() is None
    sp.acknowledge("a", 0, 0, [AckType.ACCEPT])
    assert sp.next_fetch_offset() == 4


def test_release_member_and_snapshot_restore() -> None:
    clock = Clock()
    sp = _sp(clock)
    sp.acquire("a", 0, [BatchSpan(0, 3)], 100)
    sp.acknowledge("a", 1, 1, [AckType.ACCEPT])
    # Still acquired: persisted Available without its in-flight delivery (KIP-932).
    assert sp.snapshot()[0] == StateBatch(0, 0, RecordState.AVAILABLE, 0)
    assert sp.release_member("a") == 3
    snap = sp.snapshot()
    assert snap == [
        StateBatch(0, 0, RecordState.AVAILABLE, 1),
        StateBatch(1, 1, RecordState.ACKNOWLEDGED, 1),
        StateBatch(2, 3, RecordState.AVAILABLE, 1),
    ]
    other = _sp(clock)
    other.restore(sp.start, snap)
    assert other.acquire("b", 0, [BatchSpan(0, 3)], 100) == [Acquired(0, 0, 2), Acquired(2, 3, 2)]


def test_move_start_drops_records_below() -> None:
    clock = Clock()
    sp = _sp(clock)
    sp.acquire("a", 0, [BatchSpan(0, 3)], 100)
    sp.move_start(2)
    assert sp.start == 2 and [(r.first, r.last) for r in sp.runs] == [(2, 3)]


def test_renew_restarts_the_lock() -> None:
    clock = Clock()
    sp = _sp(clock)  # lock 1 s
    sp.acquire("a", 0, [BatchSpan(0, 3)], 100)
    clock.now += 800
    sp.acknowledge("a", 0, 1, [AckType.RENEW])  # 0-1 locked until now + 1 s; 2-3 not
    clock.now += 500
    assert sp.expire_locks() == 2
    assert [sp.state_of(o) for o in range(4)] == [RecordState.ACQUIRED] * 2 + [RecordState.AVAILABLE] * 2
    assert sp.delivery_count(0) == 1  # a renewal is no delivery
    sp.acknowledge("a", 0, 1, [AckType.ACCEPT])
    assert sp.start == 2
