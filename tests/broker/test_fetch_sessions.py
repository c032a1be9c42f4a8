"""The leader's fetch-session cache (KIP-227), a pure state machine with an injectable clock."""

from __future__ import annotations

import random

from broker.fetch_sessions import Asked, FetchSessionCache
from kwire import error_table as E


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def asked(n: int, offset: int = 0, topic: str = "t") -> list[Asked]:
    return [Asked(topic, p, offset, 1 << 20) for p in range(n)]


def marks(ctx, changed: set[int] = frozenset(), hw: int = 0) -> list[int]:  # type: ignore[no-untyped-def,assignment]
    """The partitions an answer carries, every one at high watermark ``hw`` (``hw + 1`` for
    ``changed``)."""
    out = []
    for (_, p), sp in ctx.fetch:
        h = hw + 1 if p in changed else hw
        if ctx.include(
            ("t", p),
            sp,
            has_data=False,
            error=False,
            high_watermark=h,
            last_stable_offset=h,
            log_start_offset=0,
        ):
            out.append(p)
    return out


def test_a_session_answers_only_what_changed() -> None:
    cache = FetchSessionCache(clock=Clock(), rng=random.Random(1))
    full = cache.begin(0, 0, asked(20), [], replica=True)
    assert full.session_id != 0 and not full.incremental
    assert marks(full) == list(range(20))  # a full answer
    sid = full.session_id
    idle = cache.begin(sid, 1, [], [], replica=True)
    assert idle.incremental and len(idle.fetch) == 20  # every partition is fetched
    assert marks(idle) == []  # nothing new: nothing answered
    moved = cache.begin(sid, 2, [Asked("t", 3, 7, 1 << 20)], [("t", 19)], replica=True)
    assert len(moved.fetch) == 19 and dict(moved.fetch)[("t", 3)].fetch_offset == 7
    assert marks(moved, changed={5}) == [5]  # its high watermark moved
    # errors: an unknown session, a stale epoch
    assert cache.begin(sid + 1, 3, [], [], replica=True).error == E.FETCH_SESSION_ID_NOT_FOUND
    assert cache.begin(sid, 2, [], [], replica=True).error == E.INVALID_FETCH_SESSION_EPOCH
    assert cache.begin(sid, 3, [], [], replica=False).error == E.FETCH_SESSION_ID_NOT_FOUND
    # closing it: a full fetch without session
    closed = cache.begin(sid, -1, asked(2), [], replica=True)
    assert closed.session_id == 0 and [tp for tp, _ in closed.fetch] == [("t", 0), ("t", 1)]
    assert len(cache) == 0


def test_small_consumers_get_no_session_and_the_cache_is_bounded() -> None:
    clock = Clock()
    cache = FetchSessionCache(max_sessions=2, eviction_ms=1000, clock=clock, rng=random.Random(2))
    assert cache.begin(0, 0, asked(3), [], replica=False).session_id == 0  # too small
    a = cache.begin(0, 0, asked(20), [], replica=True).session_id
    b = cache.begin(0, 0, asked(20), [], replica=False).session_id
    assert a and b
    assert cache.begin(0, 0, asked(20), [], replica=False).session_id == 0  # full, none stale
    clock.t = 2.0
    c = cache.begin(0, 0, asked(20), [], replica=False).session_id
    assert c and cache.begin(b, 1, [], [], replica=False).error == E.FETCH_SESSION_ID_NOT_FOUND  # b evicted
    clock.t = 4.0
    # a consumer never evicts a follower's session: c (a consumer's) goes first
    assert cache.begin(0, 0, asked(20), [], replica=False).session_id
    assert cache.begin(a, 1, [], [], replica=True).error == E.NONE


def test_epochs_wrap_to_one() -> None:
    cache = FetchSessionCache(clock=Clock(), rng=random.Random(3))
    sid = cache.begin(0, 0, asked(1), [], replica=True).session_id
    cache._sessions[sid].epoch = 0x7FFFFFFF
    assert cache.begin(sid, 0x7FFFFFFF, [], [], replica=True).error == E.NONE
    assert cache.begin(sid, 1, [], [], replica=True).error == E.NONE


def test_an_error_is_answered_again_until_it_clears() -> None:
    cache = FetchSessionCache(clock=Clock(), rng=random.Random(4))
    ctx = cache.begin(0, 0, asked(1), [], replica=True)
    ((tp, sp),) = ctx.fetch
    ctx.include(
        tp, sp, has_data=False, error=True, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1
    )
    nxt = cache.begin(ctx.session_id, 1, [], [], replica=True)
    assert marks(nxt) == [0]  # the recovered partition is answered, its marks fresh
    again = cache.begin(ctx.session_id, 2, [], [], replica=True)
    assert marks(again) == []
