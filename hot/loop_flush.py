"""fsync-mode group commit driven by the event loop, the fdatasync on a C thread that never
takes the GIL (issue 34 §2: "fsync mode without the GIL ping-pong").

``hot.flush.GroupCommitter``'s worker is a Python thread: per flush round it took the GIL
to wake up, to take the dirty logs, for ``Log.flush``'s two lock sections, after the
``fdatasync`` and for the hand-off to the loop, each time contending with the event loop
that was appending. Here everything but the system call runs on the loop:

* ``request(log)`` (on the loop's thread, from ``Log.append``): the log is marked dirty
  and one ``_submit`` is scheduled for the end of the loop iteration, so a burst of
  appends handled in one iteration is one flush;
* ``_submit``: for each dirty log not already being flushed, under the log's lock, the
  flush target (its log end offset) and a duplicate of the active segment's write
  descriptor (so a roll, truncation or close meanwhile cannot close or reuse the number
  being synced), handed to ``hot._syncer.Syncer``;
* ``SYNC_THREADS`` Syncers, each a thread that fdatasyncs every descriptor queued to it
  and writes the shared eventfd once per round; a round's logs are spread over them (the
  least loaded first), so its fdatasyncs run side by side: ext4 (jbd2) commits
  concurrent fdatasyncs in one journal transaction, while one thread syncing 3 logs in
  turn paid 3 journal commits (3-4 ms each on the shared VM's disk: 9-11 ms a round
  against 1.2-3 ms for 3 threads; 8 logs 30 ms against 1.6-5 ms for 4 threads), which
  was most of the wait of a share-group acknowledgement (state writes to several
  ``__share_group_state`` partitions) and of a produce to several partitions;
* the loop's reader ``_synced`` then moves each log's recovery point to its
  target (under its lock, as ``Log.flush`` does), takes a log whose fdatasync failed
  offline, and reports the round once (``on_flushed``: the replica manager completes the
  waiters and advances the high watermarks).

Durability is ``Log.flush``'s: a recovery point only moves past what an fdatasync that
started after those bytes were written covered. Sealed segments need nothing here: a roll
makes the sealed segment durable before the next append (``hot.segment.Segment.seal``).
The active segment's index entries are written when it is sealed or flushed by
``Log.flush`` (its ``dirty`` flag is left alone, so a concurrent ``Log.flush`` from
another thread still syncs by itself rather than trusting a flush still in flight);
after a crash recovery rebuilds the active segment's indexes anyway.

Without the C module (no compiler at install) ``available()`` is False and the caller
keeps using ``GroupCommitter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hot.errors import StorageError, StrataError

if TYPE_CHECKING:
    from hot.log import Log

logger = logging.getLogger(__name__)

try:
    from hot._syncer import Syncer  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - the pure-Python committer is used instead
    Syncer = None


# fdatasyncs of one round run on this many threads at most (module docstring).
SYNC_THREADS = 4


def available() -> bool:
    return Syncer is not None and hasattr(os, "eventfd")


class LoopFlush:
    """Group commit of fsync-mode logs for one event loop (module docstring). Every method
    but ``close`` runs on the loop's thread."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_flushed: Callable[[list[Log]], None],
        fallback: Callable[[Log], None],
    ) -> None:
        """``fallback(log)``: flush it another way (``GroupCommitter.request``), for a log
        open and online whose descriptor cannot be duplicated (out of descriptors)."""
        if not available():
            raise RuntimeError("hot._syncer is not built")
        self.loop = loop
        self.thread = threading.get_ident()
        self._on_flushed = on_flushed
        self._fallback = fallback
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._syncers: list[Any] = [Syncer(self._efd) for _ in range(SYNC_THREADS)]
        self._queued = [0] * SYNC_THREADS  # jobs each syncer has not handed back yet
        self._dirty: dict[int, Log] = {}  # insertion-ordered set keyed by id(log)
        self._busy: set[int] = set()  # logs with an fdatasync in flight
        # token -> (log, target, descriptor, syncer)
        self._jobs: dict[int, tuple[Log, int, int, int]] = {}
        self._tokens = itertools.count()
        self._scheduled = False
        self._closed = False
        loop.add_reader(self._efd, self._synced)

    def request(self, log: Log) -> None:
        """``log`` appended and wants a flush (on the loop's thread)."""
        self._dirty[id(log)] = log
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._submit)

    def _submit(self) -> None:
        self._scheduled = False
        if self._closed:
            return
        failed: list[Log] = []
        for key, log in list(self._dirty.items()):
            if key in self._busy:
                continue  # taken again when its flush in flight is done
            del self._dirty[key]
            job = _begin(log)
            if job is None:
                if log.is_online:
                    self._fallback(log)
                else:
                    failed.append(log)  # closed or offline: the listener fails its waiters
                continue
            token = next(self._tokens)
            queued = self._queued
            i = queued.index(min(queued))
            queued[i] += 1
            self._jobs[token] = (log, *job, i)
            self._busy.add(key)
            self._syncers[i].submit(token, job[1])
        if failed:
            self._report(failed)

    def _synced(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self._efd)
        flushed = self._finish(self._take())
        if self._dirty and not self._scheduled:
            self._submit()  # appended while their flush ran: the next round now
        if flushed:
            self._report(flushed)

    def _take(self) -> list[tuple[int, int]]:
        done: list[tuple[int, int]] = []
        for s in self._syncers:
            done += s.take()
        return done

    def _finish(self, done: list[tuple[int, int]]) -> list[Log]:
        flushed: list[Log] = []
        for token, err in done:
            log, target, fd, i = self._jobs.pop(token)
            self._queued[i] -= 1
            os.close(fd)
            self._busy.discard(id(log))
            _end(log, target, err)
            flushed.append(log)
        return flushed

    def _report(self, logs: list[Log]) -> None:
        try:
            self._on_flushed(logs)
        except Exception:
            logger.exception("flush listener failed")

    def close(self) -> list[Log]:
        """Stop: wait for the fdatasyncs in flight and finish them (reported as usual), and
        return the logs still asking for a flush (the caller flushes them another way).
        Safe from any thread once the loop no longer runs our callbacks."""
        if self._closed:
            return []
        self._closed = True
        with contextlib.suppress(Exception):  # the loop may be closed already
            self.loop.remove_reader(self._efd)
        for s in self._syncers:
            s.close()  # finishes what is queued
        flushed = self._finish(self._take())
        os.close(self._efd)
        if flushed:
            self._report(flushed)
        left = list(self._dirty.values())
        self._dirty.clear()
        return left


def _begin(log: Log) -> tuple[int, int] | None:
    """(flush target, a duplicate of the active segment's write descriptor), or None when
    the log is closed or offline, or the descriptor cannot be duplicated."""
    with log._lock:
        try:
            log._check_usable()
            fd = os.dup(log._local.segments[-1].file._writer())
        except (StrataError, OSError):
            return None
        return log.log_end_offset, fd


def _end(log: Log, target: int, err: int) -> None:
    """``Log.flush``'s second lock section for ``target`` (``err``: the fdatasync's errno)."""
    if err:
        log._go_offline(StorageError(f"fdatasync of {log.name} failed: {os.strerror(err)}"))
        return
    with log._lock:
        if log._offline is not None or log._closed:
            return
        if target > log._local.recovery_point:
            log._local.recovery_point = target
        auto = log._config.fsync_mode and not log._hw_external
        done = log._advance_hw_locked(target) if auto else []
    if done:
        log._fire(done)
