"""api.answer_queue.AnswerQueue: bounded FIFO order, a put waiting while full, a get
waiting while empty, and a cancelled waiter that had been woken passing its wake-up on (no
item or slot left with nobody told)."""

from __future__ import annotations

import asyncio

import pytest

from api.answer_queue import AnswerQueue


async def _order_and_bounds() -> None:
    q: AnswerQueue[int] = AnswerQueue(2)
    assert q.empty() and not q.full()
    q.put_nowait(1)
    q.put_nowait(2)
    assert q.full() and q.qsize() == 2
    with pytest.raises(asyncio.QueueFull):
        q.put_nowait(3)
    put = asyncio.create_task(q.put(3))
    await asyncio.sleep(0)
    assert not put.done()  # full: waits
    assert q.get_nowait() == 1
    await asyncio.wait_for(put, 1)
    assert [await q.get(), await q.get()] == [2, 3]
    with pytest.raises(asyncio.QueueEmpty):
        q.get_nowait()
    get = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not get.done()  # empty: waits
    q.put_nowait(4)
    assert await asyncio.wait_for(get, 1) == 4


async def _cancelled_waiters() -> None:
    q: AnswerQueue[int] = AnswerQueue(1)
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.put_nowait(7)  # wakes the first getter ...
    first.cancel()  # ... cancelled before it ran: the second hears of the item
    assert await asyncio.wait_for(second, 1) == 7
    assert first.cancelled()
    # a getter cancelled while waiting leaves no trace
    idle = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    idle.cancel()
    await asyncio.sleep(0)
    q.put_nowait(8)
    assert q.get_nowait() == 8


def test_order_and_bounds() -> None:
    asyncio.run(_order_and_bounds())


def test_cancelled_waiters_pass_their_wake_up_on() -> None:
    asyncio.run(_cancelled_waiters())
