"""A consumer fetch session's marks (broker.consumer_marks), as pure logic: what its next
incremental fetch looks at, the one waiter a parked fetch waits on, the safety walk."""

from __future__ import annotations

import asyncio
import random

from broker.consumer_marks import ConsumerMarks
from broker.fetch_sessions import Asked, FetchSessionCache, Session


def session(cache: FetchSessionCache, n: int, topic: str = "t") -> Session:
    ctx = cache.begin(0, 0, [Asked(topic, p, 0, 1 << 20) for p in range(n)], [], replica=False)
    assert ctx.session is not None
    return ctx.session


def test_a_walk_first_then_only_what_was_marked_or_asked() -> None:
    cache = FetchSessionCache(rng=random.Random(1))
    marks = ConsumerMarks(walk_s=30.0)
    s = session(cache, 100)
    st = marks.state(s)
    walk, tps = marks.pick(st, (), 0.0)
    assert walk and tps == [("t", p) for p in range(100)]
    for tp in tps:
        marks.watch(st, tp, hash(tp))
    # Nothing marked, nothing asked: nothing to look at.
    assert marks.pick(st, (), 1.0) == (False, [])
    marks.mark(("t", 42))
    marks.mark(("t", 7))
    marks.mark(("other", 0))  # watched by nobody: no mark
    walk, tps = marks.pick(st, [("t", 60)], 2.0)
    assert not walk and tps == [("t", 7), ("t", 42), ("t", 60)]  # session order
    assert marks.pick(st, (), 3.0) == (False, [])  # marks are taken once
    marks.remark(st, [("t", 3)])
    assert marks.pick(st, (), 4.0) == (False, [("t", 3)])
    # Forgotten by the session: a mark of it is not looked at.
    del s.partitions[("t", 5)]
    marks.mark(("t", 5))
    assert marks.pick(st, (), 5.0) == (False, [])
    assert marks.looked == 100 + 3 + 1


def test_the_safety_walk_and_mark_all() -> None:
    cache = FetchSessionCache(rng=random.Random(2))
    marks = ConsumerMarks(walk_s=10.0)
    s = session(cache, 20)
    st = marks.state(s)
    assert marks.pick(st, (), 0.0)[0]
    assert not marks.pick(st, (), 9.9)[0]
    walk, tps = marks.pick(st, (), 10.0)  # every walk_s: what no mark reports (retention)
    assert walk and len(tps) == 20
    marks.mark_all()  # a topic deleted
    assert marks.pick(st, (), 11.0)[0]
    assert not marks.pick(st, (), 12.0)[0]
    assert marks.pick(st, (), 12.0, walk=True)[0]  # asked for (the ACLs changed)
    assert marks.walks == 4


def test_one_waiter_per_session_woken_by_a_mark() -> None:
    async def run() -> None:
        cache = FetchSessionCache(rng=random.Random(3))
        marks = ConsumerMarks(walk_s=30.0)
        a, b = session(cache, 30), session(cache, 30, topic="u")
        sa, sb = marks.state(a), marks.state(b)
        for st in (sa, sb):
            _, tps = marks.pick(st, (), 0.0)
            for tp in tps:
                marks.watch(st, tp, None)
        wa, wb = marks.waiter(sa), marks.waiter(sb)
        assert marks.waiter(sa) is wa  # one future per session, however many partitions
        marks.mark(("t", 9))
        assert wa.done() and not wb.done()
        assert marks.pick(sa, (), 1.0) == (False, [("t", 9)])
        marks.mark_all()
        assert wb.done()

    asyncio.run(run())


def test_dropped_sessions_take_their_watches_and_gate_with_them() -> None:
    cache = FetchSessionCache(rng=random.Random(4))
    marks = ConsumerMarks(walk_s=30.0)
    cache.on_drop = marks.forget
    s1, s2 = session(cache, 16), session(cache, 16)
    for s in (s1, s2):
        st = marks.state(s)
        for tp in marks.pick(st, (), 0.0)[1]:
            marks.watch(st, tp, 1000 + tp[1])
    assert len(marks.gate) == 16 and len(marks) == 2
    # Closed (a full fetch of epoch -1): its marks go; the other session still watches.
    cache.begin(s1.session_id, -1, [], [], replica=False)
    assert len(marks) == 1 and len(marks.gate) == 16
    cache.close_all()
    assert len(marks) == 0 and marks.gate == {}
    marks.mark(("t", 1))  # nobody watches: nothing happens


def test_a_replaced_log_is_gated_under_its_new_id() -> None:
    cache = FetchSessionCache(rng=random.Random(5))
    marks = ConsumerMarks(walk_s=30.0)
    st = marks.state(session(cache, 16))
    marks.watch(st, ("t", 0), 1)
    marks.watch(st, ("t", 0), 2)  # the partition's log was replaced (topic re-created)
    assert marks.gate == {2: ("t", 0)}
    marks.watch(st, ("t", 0), None)  # no log here now: the gate keeps the last one
    assert marks.gate == {2: ("t", 0)}
