"""The group coordinator's clock and timer heap.

Every deadline of the coordinator (member sessions, join and sync phases, KIP-394 pending
members, the periodic offset expiry) is a ``Timer`` in one ``Timers`` heap, driven by an
injectable ``Clock``: the coordinator runs a task that fires due timers on time, and
tests move a fake clock and call ``run_due`` (through ``GroupCoordinator.tick``). Nothing
here is persisted; a crash loses every timer, which is right: members and their
deadlines are not persisted either.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger("strata.groups")


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds, for deadlines."""
        ...

    def time_ms(self) -> int:
        """Wall clock, for commit timestamps and offset expiry."""
        ...


class SystemClock:
    """The real clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000


class Timer:
    """One deadline; ``cancel`` makes the heap skip it."""

    __slots__ = ("cancelled", "deadline", "fn")

    def __init__(self, deadline: float, fn: Callable[[], None]) -> None:
        self.deadline = deadline
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    """A heap of timers over ``clock``; ``changed`` is called when one is added (the
    timer task wakes up to recompute its sleep). A timer that raises is logged, not
    propagated: the others still fire."""

    def __init__(self, clock: Clock, changed: Callable[[], None]) -> None:
        self._clock = clock
        self._changed = changed
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> Timer:
        return self.call_at(self._clock.monotonic() + delay_ms / 1000.0, fn)

    def call_at(self, deadline: float, fn: Callable[[], None]) -> Timer:
        t = Timer(deadline, fn)
        heapq.heappush(self._heap, (deadline, next(self._seq), t))
        self._changed()
        return t

    def next_deadline(self) -> float | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def run_due(self) -> int:
        n = 0
        while self._heap and self._heap[0][0] <= self._clock.monotonic():
            t = heapq.heappop(self._heap)[2]
            if t.cancelled:
                continue
            t.cancelled = True
            n += 1
            try:
                t.fn()
            except Exception:
                logger.exception("group coordinator timer failed")
        return n

    def clear(self) -> None:
        for _, _, t in self._heap:
            t.cancel()
        self._heap.clear()
