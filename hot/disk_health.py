"""Whether the data directory takes writes, and what the operator is told about it.

A full disk is two states, either of which refuses appends:

- ``high_water``: the disk high-water mark (``hot.manager.DiskGuard``) refused an append
  (the client gets KAFKA_STORAGE_ERROR, retriable; nothing was written). It is left when
  a measurement is below the mark again: the next append that passes the guard, or the
  poll below.
- ``no_space``: a write, fsync or segment roll failed with ENOSPC or EDQUOT. A failed
  write was undone (the client gets KAFKA_STORAGE_ERROR and may retry; an idempotent
  producer's sequence did not advance); a failed fsync or roll took that partition
  offline, as any other I/O error does. It is left when the filesystem has at least
  ``NO_SPACE_CLEAR_BYTES`` more available than at the failure.

Every change of state is logged once, naming the directory and its free bytes: ERROR on
entering (with the reason), WARNING on leaving. ``poll`` re-measures; the manager runs it
every ``POLL_INTERVAL_S`` while a state is set (so recovery is noticed, and logged,
without appends), and the status endpoint and the metrics scrape read ``snapshot``.

Thread-safe: failures are reported from request threads, the event loop and the
group-commit thread.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

logger = logging.getLogger(__name__)

NO_SPACE_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})
NO_SPACE_CLEAR_BYTES: Final = 16 * 1024 * 1024
POLL_INTERVAL_S: Final = 1.0


def is_no_space(exc: BaseException) -> bool:
    """True if ``exc`` or an exception it was raised from is ENOSPC/EDQUOT."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in NO_SPACE_ERRNOS:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """The data directory's filesystem, in bytes (``available``: what an unprivileged
    writer may still use, statvfs ``f_bavail``)."""

    total: int
    used: int
    available: int


@dataclass(frozen=True, slots=True)
class DiskState:
    directory: str
    usage: DiskUsage | None  # None when the filesystem cannot be measured
    high_water: bool
    no_space: bool
    reason: str | None  # why appends are refused; None when they are not

    @property
    def refusing(self) -> bool:
        return self.high_water or self.no_space


def measure(path: str | Path) -> DiskUsage | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    total = st.f_blocks * st.f_frsize
    return DiskUsage(total, total - st.f_bfree * st.f_frsize, st.f_bavail * st.f_frsize)


class DiskHealth:
    """The states of one data directory (module docstring). ``high_water_check`` tells
    whether the high-water mark is exceeded now (None: no mark configured)."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        high_water_check: Callable[[], str | None] | None = None,
        clear_bytes: int = NO_SPACE_CLEAR_BYTES,
    ) -> None:
        self.data_dir = str(data_dir)
        self.high_water_check = high_water_check
        self._clear_bytes = clear_bytes
        self._lock = threading.Lock()
        self._high_water: str | None = None  # the reason while in the state
        self._no_space: str | None = None
        self._no_space_available = 0  # available bytes when the ENOSPC was seen
        # Read without the lock on the append path: a stale False costs one late clear.
        self.refusing = False

    def _free(self, usage: DiskUsage | None) -> str:
        return f"{usage.available} bytes free" if usage is not None else "free space unknown"

    def _update_refusing(self) -> None:
        self.refusing = self._high_water is not None or self._no_space is not None

    def high_water_refused(self, reason: str) -> None:
        """The high-water mark refused an append."""
        if self._high_water is not None:
            return  # the common case while full: no lock, no statvfs
        with self._lock:
            if self._high_water is not None:
                return
            self._high_water = reason
            self._update_refusing()
        usage = measure(self.data_dir)
        logger.error(
            "data directory %s is above its high-water mark (%s), appends are refused: %s",
            self.data_dir,
            self._free(usage),
            reason,
        )

    def high_water_passed(self) -> None:
        """An append passed the high-water mark."""
        if self._high_water is None:
            return
        with self._lock:
            if self._high_water is None:
                return
            self._high_water = None
            self._update_refusing()
        logger.warning(
            "data directory %s is below its high-water mark again (%s), appends are accepted",
            self.data_dir,
            self._free(measure(self.data_dir)),
        )

    def storage_error(self, exc: BaseException) -> None:
        """A write, fsync or roll failed; only ENOSPC/EDQUOT changes the state."""
        if not is_no_space(exc):
            return
        usage = measure(self.data_dir)
        with self._lock:
            self._no_space_available = usage.available if usage is not None else 0
            if self._no_space is not None:
                return
            self._no_space = f"no space left on device: {exc}"
            self._update_refusing()
        logger.error("data directory %s is full (%s), writes fail: %s", self.data_dir, self._free(usage), exc)

    def poll(self) -> None:
        """Re-measure and leave the states whose cause is gone."""
        if not self.refusing:
            return
        check = self.high_water_check
        if self._high_water is not None and check is not None and check() is None:
            self.high_water_passed()
        if self._no_space is None:
            return
        usage = measure(self.data_dir)
        if usage is None:
            return
        with self._lock:
            if self._no_space is None or usage.available < self._no_space_available + self._clear_bytes:
                return
            self._no_space = None
            self._update_refusing()
        logger.warning("data directory %s has space again (%s)", self.data_dir, self._free(usage))

    def snapshot(self) -> DiskState:
        """The state now (re-measured first)."""
        self.poll()
        usage = measure(self.data_dir)
        with self._lock:
            reason = "; ".join(r for r in (self._no_space, self._high_water) if r is not None) or None
            return DiskState(
                self.data_dir, usage, self._high_water is not None, self._no_space is not None, reason
            )
