"""Which tiered partitions a periodic tiering pass looks at (issue 35, issue 39: an idle
broker's passes cost what changed, not what it holds).

A pass once walked every partition it leads each second: listed them, checked each one's
shape, asked each one whether its data had reached ``remote.copy.max.lag.ms``. With
10,000 partitions that was most of an idle broker's CPU. Now a pass looks at:

* every tiered partition when the set of them may have changed: a topic created, deleted,
  altered or grown, a log opened or closed (``LogManager.generation``), a replica's role
  or epoch changed or the lease came or went (``roles``), after a pass that failed, and at
  least once per ``full_every_ms`` as a safety net;
* otherwise only the partitions that were *busy* at their last visit (something left to
  upload, delete or replace), the *quiet* ones whose time came (``due``: the quiet period
  ran out, or their active segment's data reaches its upload-lag bound), and those that
  rolled a segment since (``rolled``: ``Log.roll_listener``, called under the log's lock
  by whatever thread rolled it).

A quiet partition's due time is the earlier of the quiet period's end (local retention by
time comes due at its own pace) and the moment its active segment's first record reaches
``remote.copy.max.lag.ms``; an empty active segment is looked at again after that bound
(or the quiet period), so data appended meanwhile rolls on time. A partition whose shape
changed otherwise (DeleteRecords moved its log start, say) is seen at the latest when its
quiet period ends, as before this schedule. Thread-safety: ``rolled`` is the only part
touched off the event loop (added to and swapped out under its own lock).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Hashable, Iterable

from hot.log import Log

Key = tuple[str, int]


def upload_lag_due(log: Log, now_ms: int) -> float:
    """When ``log``'s active segment must be looked at for the roll by age: its first
    append plus the bound; with an empty active segment, one bound from now (data may be
    appended meanwhile); never without a bound."""
    bound = log.config.remote_copy_max_lag_ms
    if bound < 0:
        return float("inf")
    seg = log.active_segment
    created = seg.created_ms
    if seg.is_empty or created is None:
        return now_ms + bound
    return created + bound


class PassSchedule:
    """The partitions of the next pass; see the module docstring."""

    def __init__(self, full_every_ms: int, scan_key: Callable[[], Hashable | None]) -> None:
        self.full_every_ms = full_every_ms
        self._scan_key = scan_key
        self._last_key: Hashable | None = None
        self._next_full_ms = 0.0
        self._busy: set[Key] = set()
        self._due: list[tuple[float, Key]] = []  # heap; stale entries skipped (see ``_quiet_until``)
        self._quiet_until: dict[Key, float] = {}
        self._rolled: set[Key] = set()
        self._rolled_lock = threading.Lock()  # a roll's notice is never added to a set taken

    def rolled(self, log: Log) -> None:
        """``Log.roll_listener``: any thread, under the log's lock; keep it short."""
        with self._rolled_lock:
            self._rolled.add((log.topic, log.partition))

    def invalidate(self) -> None:
        """The next pass looks at everything (a pass failed, or the caller cannot say
        what changed)."""
        self._last_key = None

    def full_due(self, now_ms: int) -> bool:
        """Whether the next pass must look at every partition (and then call ``full``)."""
        key = self._scan_key()
        return key is None or key != self._last_key or now_ms >= self._next_full_ms

    def full(self, now_ms: int) -> None:
        """A full pass starts: forget the schedule, it is rebuilt by the visits' outcomes."""
        self._last_key = self._scan_key()
        self._next_full_ms = now_ms + self.full_every_ms
        self._busy.clear()
        self._due.clear()
        self._quiet_until.clear()
        with self._rolled_lock:
            self._rolled = set()

    def take(self, now_ms: int) -> set[Key]:
        """The partitions a partial pass looks at: busy, due and rolled ones (each then
        reported again through ``busy`` or ``quiet``, or dropped)."""
        out = self._busy
        self._busy = set()
        with self._rolled_lock:
            rolled, self._rolled = self._rolled, set()
        out |= rolled
        due = self._due
        while due and due[0][0] <= now_ms:
            when, key = heapq.heappop(due)
            if self._quiet_until.get(key) == when:
                del self._quiet_until[key]
                out.add(key)
        for key in rolled:
            self._quiet_until.pop(key, None)  # its heap entry goes stale
        return out

    def busy(self, keys: Iterable[Key]) -> None:
        for key in keys:
            self._quiet_until.pop(key, None)
            self._busy.add(key)

    def quiet(self, key: Key, until: float) -> None:
        """Skip ``key`` until ``until`` (ms) unless it rolls or a full pass comes first."""
        self._busy.discard(key)
        self._quiet_until[key] = until
        if until != float("inf"):
            heapq.heappush(self._due, (until, key))

    def forget(self, keys: Iterable[Key]) -> None:
        for key in keys:
            self._busy.discard(key)
            self._quiet_until.pop(key, None)
