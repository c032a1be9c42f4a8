"""Background flushing: group commit (fsync mode) and Kafka-style periodic flushes (interval mode).

No files of its own; it only decides when ``Log.flush`` runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from hot.errors import LogClosedError, StrataError

if TYPE_CHECKING:
    from hot.log import Log

logger = logging.getLogger(__name__)


class GroupCommitter:
    """Flushes logs that asked for it on a few daemon threads (one by default).

    ``request(log)`` marks a log dirty and wakes a worker. A worker takes the dirty logs
    (all of them with one worker, its share with several) and calls ``log.flush()`` on
    each: a single fsync per log covers every batch appended to it since its previous
    flush, however many producers wrote them (group commit). Appends made while those
    fsyncs run mark the log dirty again and are covered by the next round. After a round
    ``flushed(logs)`` runs once on the worker for everything that round flushed (a
    subclass's hook: one hand-off to the event loop per round, not one per log). A log
    whose flush fails is offline (``Log.flush`` failed its waiters); the committer just
    moves on. No busy waiting: idle workers sleep on a condition variable.
    """

    def __init__(self, *, workers: int = 1, name: str = "strata-group-commit") -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self._cond = threading.Condition()
        self._dirty: dict[int, Log] = {}  # insertion-ordered set keyed by id(log)
        self._busy: set[int] = set()  # logs being flushed right now
        self._closing = False
        self._workers = workers
        # defer_wakes: requests made on that thread wake a worker through ``_defer``.
        self._defer: Callable[[Callable[[], None]], object] | None = None
        self._defer_thread = 0
        self._wake_deferred = False
        self._bursts = False  # requests on that thread come in bursts: defer (``request``)
        self._burst = 0  # requests on that thread since the last deferred wake-up ran
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def request(self, log: Log) -> None:
        """Ask for ``log`` to be flushed soon. Ignored once ``close`` began: whoever closes
        the committer closes (and thereby flushes) the logs next."""
        with self._cond:
            if self._closing:
                return
            deferring = self._defer is not None and threading.get_ident() == self._defer_thread
            if deferring:
                self._burst += 1
            if id(log) in self._dirty:
                # A second append before the worker took the log: appends come in bursts.
                self._bursts = self._bursts or deferring
                return
            self._dirty[id(log)] = log
            if not deferring or not self._bursts:
                self._cond.notify()
            elif not self._wake_deferred:
                assert self._defer is not None
                self._wake_deferred = True
                self._defer(self._wake)

    def defer_wakes(self, schedule: Callable[[Callable[[], None]], object] | None) -> None:
        """Called on the thread that appends most (an event loop's, with its
        ``loop.call_soon``): from then on, while requests made on that thread come in
        bursts, they wake a worker through ``schedule`` instead of at once, one wake-up for
        all the requests made before it runs. A burst of appends (pipelined produce
        requests handled in one loop iteration) then reaches the worker as one flush, and
        the worker does not contend for the GIL with the loop while the loop is still
        appending (issue 34 §2). Requests that come one at a time (a producer waiting for
        each answer) wake the worker at once, as without this: deferring would only delay
        their flush. A burst is a log asked for again before the worker took it; a
        deferred wake-up that covered a single request ends the bursts. A worker busy
        flushing takes the new dirty logs when it is done, without waiting for the
        wake-up; ``close`` flushes whatever is still dirty. None: wake at once again."""
        with self._cond:
            self._defer = schedule
            self._defer_thread = threading.get_ident()
            self._bursts, self._burst = True, 0  # until a wake-up covers a single request
            if schedule is None and self._dirty:
                self._cond.notify()

    def _wake(self) -> None:
        with self._cond:
            self._wake_deferred = False
            if self._burst <= 1:
                self._bursts = False  # one request per wake-up: deferring only delays it
            self._burst = 0
            if self._dirty:
                self._cond.notify()

    def _take(self) -> list[Log] | None:
        """The dirty logs no other worker is flushing (with several workers, this worker's
        share of them), now busy; None once closing and nothing is left."""
        with self._cond:
            while True:
                free = [log for key, log in self._dirty.items() if key not in self._busy]
                if free:  # one worker per log at a time
                    share = -(-len(free) // self._workers)  # ceil: one worker takes all
                    taken = free[:share]
                    for log in taken:
                        del self._dirty[id(log)]
                        self._busy.add(id(log))
                    return taken
                if self._closing and not self._dirty:
                    return None
                self._cond.wait()

    def _run(self) -> None:
        while True:
            logs = self._take()
            if logs is None:
                return
            for log in logs:
                try:
                    log.flush()
                except LogClosedError:
                    pass
                except StrataError as e:
                    logger.error("flush of %s failed: %s", log.name, e)
                except Exception:
                    logger.exception("flush of %s failed", log.name)
            with self._cond:
                for log in logs:
                    self._busy.discard(id(log))
                if self._dirty:
                    self._cond.notify()
            try:
                self.flushed(logs)
            except Exception:
                logger.exception("flush listener failed")

    def flushed(self, logs: list[Log]) -> None:
        """Called on the worker after each round with the logs it flushed (or tried to:
        a failed one is offline). Nothing here; ``broker.log_manager.ReplicaCommitter``
        reports them."""

    def close(self) -> None:
        """Flush whatever is still requested, then stop the workers."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for t in self._threads:
            t.join()


class IntervalFlusher:
    """Flushes interval-mode logs whose ``flush.ms`` elapsed (one daemon thread).

    ``logs`` is called on every round to get the current logs (the manager's view).
    The thread sleeps until the earliest due time, at most ``max_sleep_s`` (logs may be
    added or appended to meanwhile; ``wake()`` cuts the sleep short). ``flush.messages``
    is enforced by ``Log.append`` itself.
    """

    def __init__(
        self,
        logs: Callable[[], Iterable[Log]],
        *,
        max_sleep_s: float = 1.0,
        name: str = "strata-interval-flush",
    ) -> None:
        self._logs = logs
        self._max_sleep = max_sleep_s
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def _run(self) -> None:
        while True:
            now = time.monotonic()
            next_due = now + self._max_sleep
            for log in list(self._logs()):
                due = log.flush_due()
                if due is None:
                    continue
                if due <= now:
                    try:
                        log.flush()
                    except LogClosedError:
                        pass
                    except StrataError as e:
                        logger.error("flush of %s failed: %s", log.name, e)
                else:
                    next_due = min(next_due, due)
            with self._cond:
                if self._closing:
                    return
                self._cond.wait(max(0.0, next_due - time.monotonic()))
                if self._closing:
                    return

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
