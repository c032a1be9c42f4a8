"""Who waits for a log's high watermark: futures for an offset, and listeners.

A produce with acks waits on a future completed once the high watermark reaches its
offset (``hot.log.Log.high_watermark_future``); a parked fetch is a listener told every
time the high watermark moves, and when the log goes offline or closes
(``Log.add_hw_listener``). The high watermark itself stays in ``Log``.

Locking: none of its own. The ``*_locked`` methods run with the owning log's lock held
(``Log._lock``) and only collect the futures to complete; ``fire`` / ``fail`` / ``notify``
then run after the lock is released, so no callback ever runs under it (except when a
failure found under the lock takes the log offline, as documented on ``add_hw_listener``).
Files: none.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Container
from concurrent.futures import Future
from typing import Generic, TypeVar

# The log's own logger: operators and tests filter the partition's messages on it.
logger = logging.getLogger("hot.log")

L = TypeVar("L")


class HwWaiters(Generic[L]):
    """The waiter heap (offset, arrival, future) and the listeners of one log ``owner``."""

    def __init__(self, owner: L, name: str) -> None:
        self._owner = owner
        self._name = name
        self._waiters: list[tuple[int, int, Future[None]]] = []
        self._seq = itertools.count()  # ties on an offset complete in arrival order
        self._listeners: list[Callable[[L], None]] = []
        # The listeners registered with a gate: (callback, gate), and how many without one.
        self._gated: list[tuple[Callable[[L], None], Container[int]]] = []
        self._ungated = 0

    @property
    def listening(self) -> bool:
        """Whether a listener is registered (read without the lock: a listener added
        after an append reads the high watermark it registered at)."""
        return bool(self._listeners)

    def wanted(self) -> bool:
        """Whether a listener would act on a move now: one without a gate, or one whose
        gate holds ``id(owner)`` (read without the lock, as ``listening``; a gated
        listener's owner adds the key before it reads the mark it waits on)."""
        if self._ungated:
            return True
        key = id(self._owner)
        for _, gate in self._gated:  # noqa: SIM110 (a loop: no generator per append)
            if key in gate:
                return True
        return False

    def add_listener_locked(self, callback: Callable[[L], None], gate: Container[int] | None = None) -> None:
        self._listeners.append(callback)
        if gate is None:
            self._ungated += 1
        else:
            self._gated.append((callback, gate))

    def remove_listener_locked(self, callback: Callable[[L], None]) -> None:
        try:
            self._listeners.remove(callback)
        except ValueError:
            return
        for i, (cb, _) in enumerate(self._gated):
            if cb == callback:
                del self._gated[i]
                return
        self._ungated -= 1

    def wait_locked(self, offset: int, fut: Future[None]) -> None:
        """Park ``fut`` until the high watermark reaches ``offset``."""
        heapq.heappush(self._waiters, (offset, next(self._seq), fut))

    def reached_locked(self, hw: int) -> list[Future[None]]:
        """Remove and return the futures waiting for an offset at or below ``hw``."""
        done: list[Future[None]] = []
        while self._waiters and self._waiters[0][0] <= hw:
            done.append(heapq.heappop(self._waiters)[2])
        return done

    def take_all_locked(self) -> list[Future[None]]:
        """Remove and return every waiting future (offline, close)."""
        waiters, self._waiters = self._waiters, []
        return [fut for _, _, fut in waiters]

    def fire(self, done: list[Future[None]]) -> None:
        """Complete ``done`` and tell the listeners (outside the log's lock)."""
        self.complete(done)
        self.notify()

    @staticmethod
    def complete(done: list[Future[None]]) -> None:
        for fut in done:
            if not fut.done():
                fut.set_result(None)

    @staticmethod
    def fail(waiters: list[Future[None]], error: Callable[[], Exception]) -> None:
        """Fail each of ``waiters`` with a fresh ``error()`` (outside the log's lock)."""
        for fut in waiters:
            if not fut.done():
                fut.set_exception(error())

    def notify(self) -> None:
        for cb in list(self._listeners):
            try:
                cb(self._owner)
            except Exception:
                logger.exception("high watermark listener of %s failed", self._name)


__all__ = ["HwWaiters"]
