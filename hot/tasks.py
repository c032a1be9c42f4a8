"""Stopping background tasks reliably."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any], *, recancel_every: float = 0.5) -> None:
    """Cancel ``task`` and wait until it has ended.

    Cancels again while it runs on: in Python 3.11 ``asyncio.wait_for`` can swallow a
    cancellation that races with its inner call finishing, and a retry loop around it
    would then carry on as if nothing had happened (seen as a hang on shutdown under load).
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=recancel_every)
    with contextlib.suppress(asyncio.CancelledError):
        await task
