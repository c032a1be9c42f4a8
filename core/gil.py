"""Handing the GIL over sooner while a thread does many small system calls.

Why: a thread that creates thousands of partition directories makes some twenty system
calls per partition, and each one gives up the GIL and must take it back. While the
event loop is busy (clients retrying produce and metadata requests against a topic
whose partitions are still being created), taking it back waits for the loop to drop
it, which CPython forces only every ``sys.getswitchinterval()`` (5 ms): each system
call then costs up to 5 ms, and a 3,000-partition creation on one node took more than
30 s while its producers' records timed out (issue 35; ``bench_partitions --single``
counts them). Inside ``handoff`` the interval is 0.2 ms, so such a thread waits a
fraction of that; outside, CPython's default is back. Nested and concurrent uses share
one count: the interval is restored when the last one leaves.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Final

HANDOFF_INTERVAL_S: Final = 0.0002

_lock = threading.Lock()
_active = 0
_saved = 0.0


@contextlib.contextmanager
def handoff() -> Iterator[None]:
    """The GIL switch interval at ``HANDOFF_INTERVAL_S`` for the duration (module doc)."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = sys.getswitchinterval()
            sys.setswitchinterval(HANDOFF_INTERVAL_S)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                sys.setswitchinterval(_saved)
