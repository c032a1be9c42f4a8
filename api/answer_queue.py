"""The listener's queue of answers between a connection's read loop and its writer
(``api.kafka_server.Connection.pending``; issue 34 round 6).

``asyncio.Queue`` does what it needs, plus unfinished-task accounting (``join``,
``task_done``) and a getter and putter list walked on every operation: ~2.8 µs per
request for one ``put_nowait``, ``get_nowait``, ``full`` and ``empty`` on the loaded test
machine against ~0.4 µs for the deque underneath. This is the same interface the listener
uses (``put``, ``put_nowait``, ``get``, ``get_nowait``, ``empty``, ``full``), bounded,
first in first out, on one event loop, with none of the rest.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class AnswerQueue(Generic[T]):
    """A bounded FIFO for one event loop: ``put`` waits while ``maxsize`` items are queued,
    ``get`` while none is; waiters are woken in arrival order."""

    __slots__ = ("_getters", "_items", "_maxsize", "_putters")

    def __init__(self, maxsize: int) -> None:
        if maxsize <= 0:
            raise ValueError("maxsize must be positive")
        self._maxsize = maxsize
        self._items: deque[T] = deque()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._putters: deque[asyncio.Future[None]] = deque()

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return len(self._items) >= self._maxsize

    def put_nowait(self, item: T) -> None:
        if len(self._items) >= self._maxsize:
            raise asyncio.QueueFull
        self._items.append(item)
        if self._getters:
            _wake_first(self._getters)

    def get_nowait(self) -> T:
        if not self._items:
            raise asyncio.QueueEmpty
        item = self._items.popleft()
        if self._putters:
            _wake_first(self._putters)
        return item

    async def put(self, item: T) -> None:
        while len(self._items) >= self._maxsize:
            await _wait(self._putters)
        self.put_nowait(item)

    async def get(self) -> T:
        while not self._items:
            await _wait(self._getters)
        return self.get_nowait()


def _wake_first(waiters: deque[asyncio.Future[None]]) -> None:
    while waiters:
        fut = waiters.popleft()
        if not fut.done():
            fut.set_result(None)
            return


async def _wait(waiters: deque[asyncio.Future[None]]) -> None:
    """Until woken (``_wake_first``). Cancelled after being woken, the wake-up passes on to
    the next waiter, so no item or free slot is left with nobody told of it."""
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiters.append(fut)
    try:
        await fut
    except asyncio.CancelledError:
        if fut.done() and not fut.cancelled():
            _wake_first(waiters)
        else:
            fut.cancel()
        raise


__all__ = ["AnswerQueue"]
