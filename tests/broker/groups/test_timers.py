"""The coordinator's timer heap (broker.groups.timers) over a fake clock, and the fake clock."""

from __future__ import annotations

import pytest

from broker.groups.timers import SystemClock, Timers
from tests.broker.groups.grouplib import FakeClock


def test_timers_fire_in_deadline_order_once_due_and_skip_cancelled_ones() -> None:
    clock = FakeClock()
    wakeups: list[None] = []
    timers = Timers(clock, lambda: wakeups.append(None))
    fired: list[str] = []
    timers.call_later(300, lambda: fired.append("c"))
    timers.call_later(100, lambda: fired.append("a"))
    b = timers.call_later(200, lambda: fired.append("b"))
    timers.call_at(clock.monotonic() + 0.1, lambda: fired.append("a2"))  # same deadline: FIFO
    assert len(wakeups) == 4  # every new timer wakes the timer task
    assert timers.run_due() == 0 and fired == []
    b.cancel()
    clock.advance(250)
    assert timers.run_due() == 2 and fired == ["a", "a2"]
    assert timers.next_deadline() == pytest.approx(clock.monotonic() + 0.05)
    clock.advance(50)
    assert timers.run_due() == 1 and fired == ["a", "a2", "c"]
    assert timers.next_deadline() is None


def test_a_timer_that_raises_is_logged_and_the_others_still_fire(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    timers = Timers(clock, lambda: None)
    fired: list[int] = []

    def boom() -> None:
        raise RuntimeError("boom")

    timers.call_later(10, boom)
    timers.call_later(10, lambda: fired.append(1))
    clock.advance(10)
    assert timers.run_due() == 2 and fired == [1]
    assert "group coordinator timer failed" in caplog.text


def test_a_timer_scheduled_while_firing_runs_only_when_due_and_clear_drops_all() -> None:
    clock = FakeClock()
    timers = Timers(clock, lambda: None)
    fired: list[str] = []
    timers.call_later(10, lambda: timers.call_later(10, lambda: fired.append("later")))
    clock.advance(10)
    assert timers.run_due() == 1 and fired == []
    t = timers.call_later(5, lambda: fired.append("cleared"))
    timers.clear()
    assert t.cancelled and timers.next_deadline() is None
    clock.advance(100)
    assert timers.run_due() == 0 and fired == []


def test_system_clock_is_monotonic_and_in_milliseconds() -> None:
    c = SystemClock()
    m = c.monotonic()
    assert c.monotonic() >= m
    assert c.time_ms() > 1_600_000_000_000


def test_fake_clock_moves_both_clocks() -> None:
    c = FakeClock()
    m, w = c.monotonic(), c.time_ms()
    c.advance(1500)
    assert c.monotonic() - m == 1.5 and c.time_ms() - w == 1500
