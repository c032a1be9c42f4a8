"""When the controller compacts etcd's history, and to which revision (issue 35).

etcd keeps every earlier revision of every key until its history is compacted; without
compaction each partition state change stays (about 200 bytes) until the backend quota
(2 GiB by default) fills and etcd refuses every write. The controller therefore compacts
every ``etcd.compaction.interval.ms`` to the revision it saw one interval earlier: a
watcher at most one interval behind still resumes from its next revision, and one further
behind gets "required revision has been compacted" and re-lists the prefix
(``EtcdClient.watch_prefix`` turns that into a ``WatchReset``), losing no state change.
The default interval, five minutes, holds a few failovers' history (a failover of
100,000 partitions writes about 10 MiB), far below the quota.
"""

from __future__ import annotations

from collections import deque


class CompactionSchedule:
    """Revisions seen, one mark per interval; ``due`` names the revision to compact to
    once a mark is an interval old. Pure bookkeeping (the clock is the caller's)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.compacted = 0  # the last revision compacted to (by this controller)
        self._marks: deque[tuple[float, int]] = deque()

    def due(self, revision: int, now: float) -> int | None:
        """The revision to compact to now, or None (disabled, or nothing old enough)."""
        if self.interval_s <= 0:
            return None
        if not self._marks or now - self._marks[-1][0] >= self.interval_s:
            self._marks.append((now, revision))
        target = 0
        while self._marks and now - self._marks[0][0] >= self.interval_s:
            target = self._marks.popleft()[1]
        return target if target > self.compacted else None

    def done(self, revision: int) -> None:
        self.compacted = max(self.compacted, revision)
