"""How far the bucket may trail the log: the roll-by-age rule and the upload at shutdown.

Only sealed segments are uploaded, and ``segment.ms`` defaults to 7 days, so without a
bound a quiet partition's newest records could stay local-only for days. Two rules bound
that (docs/tiering.md, "Recovery points"):

* **roll by age** (``remote.copy.max.lag.ms``, per topic, broker default in ``[log]``):
  every tiering pass rolls the active segment of each tiered partition it leads whose
  first record was appended at least that long ago, so the pass uploads it. The age is
  counted from the segment's first append (as ``segment.ms`` counts it), so a partition
  rolls for this reason at most once per bound; a busy one reaches ``segment.bytes``
  first and never rolls by age. Followers never roll on their own clock: they cut their
  segments where the leader's begin (``broker.fetcher``), and a new leader starts a new
  segment at its first append (``broker.replica_manager``), so a roll the old leader made
  just before losing leadership, which no follower saw, cannot leave the new leader with
  a segment that straddles the end of the uploaded range.
* **upload at shutdown** (``[tiering] shutdown_upload_grace_ms``): a clean stop seals every
  tiered partition's active segment and uploads what is not in the bucket yet, for at
  most the grace period, then logs what it did or what it left. Single node: on by
  default. Cluster mode: the replicas hold the tail, so only with
  ``shutdown_upload_in_cluster``; it runs while this broker still leads (writes already
  refused), before it leaves the cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from hot.errors import StrataError
from hot.log import Log
from tiering.metrics import TieringMetrics

logger = logging.getLogger(__name__)

_LISTED: Final = 10  # partitions named in a shutdown summary; the rest are counted


def lag_roll_due(log: Log, now_ms: int) -> bool:
    """Whether ``log``'s active segment holds data older than its topic's
    ``remote.copy.max.lag.ms`` (a cheap check without the log's lock; the roll itself
    checks again under it)."""
    cfg = log.config
    bound = cfg.remote_copy_max_lag_ms
    if bound < 0 or not cfg.remote_storage_enable or not log.is_online:
        return False
    seg = log.active_segment
    created = seg.created_ms
    return created is not None and not seg.is_empty and now_ms - created >= bound


async def roll_aged_segments(logs: Iterable[Log], now_ms: int, metrics: TieringMetrics) -> list[Log]:
    """Roll the active segment of every log in ``logs`` whose data reached its upload-lag
    bound (file work in a worker thread); returns the logs that rolled."""
    rolled: list[Log] = []
    for log in logs:
        if not lag_roll_due(log, now_ms):
            continue
        try:
            done = await asyncio.to_thread(log.roll_if_older_than, log.config.remote_copy_max_lag_ms, now_ms)
        except StrataError as e:
            if not (log.closed or not log.is_online):
                logger.error("cannot roll %s for its upload-lag bound: %s", log.name, e)
            continue
        if done:
            metrics.lag_rolls.labels(log.topic).inc()
            logger.debug("rolled %s: its data reached remote.copy.max.lag.ms", log.name)
            rolled.append(log)
    return rolled


@dataclass(frozen=True, slots=True)
class PendingRange:
    """Offsets of a partition the bucket does not hold (``first`` to ``last``, inclusive)."""

    partition: str
    first: int
    last: int
    reason: str = ""  # why the upload at shutdown could not go on, when known


@dataclass(slots=True)
class ShutdownUpload:
    """The outcome of the upload at shutdown (what the broker logs)."""

    grace_s: float
    uploaded: int = 0  # segments uploaded
    partitions: int = 0  # tiered partitions looked at
    elapsed_s: float = 0.0
    # Per complete partition: its name and the remote next offset (every offset below is there).
    complete: list[tuple[str, int]] = field(default_factory=list)
    pending: list[PendingRange] = field(default_factory=list)
    error: str | None = None  # the last object-store error
    timed_out: bool = False  # the grace period ran out

    @property
    def ok(self) -> bool:
        return not self.pending

    def summary(self) -> str:
        if self.ok:
            listed = self.complete[:_LISTED]
            ends = ", ".join(f"{name} up to offset {nxt - 1}" for name, nxt in listed if nxt > 0)
            more = len(self.complete) - _LISTED
            tail = f" and {more} more" if more > 0 else ""
            return (
                f"upload at shutdown: {self.uploaded} segment(s) uploaded in {self.elapsed_s:.1f} s; "
                f"the bucket holds every record of the {self.partitions} tiered partition(s)"
                + (f" ({ends}{tail})" if ends else "")
            )
        ranges = ", ".join(
            f"{p.partition} offsets {p.first}..{p.last}" + (f" ({p.reason})" if p.reason else "")
            for p in self.pending[:_LISTED]
        )
        more = len(self.pending) - _LISTED
        head = (
            f"gave up after {self.elapsed_s:.1f} s (grace {self.grace_s:.0f} s)"
            if self.timed_out
            else f"ended after {self.elapsed_s:.1f} s"
        )
        return (
            f"upload at shutdown {head}: "
            f"{self.uploaded} segment(s) uploaded; {len(self.pending)} of {self.partitions} tiered "
            f"partition(s) not complete in the bucket: {ranges}"
            + (f" and {more} more" if more > 0 else "")
            + (f" (last error: {self.error})" if self.error else "")
        )


def pending_ranges(
    targets: Sequence[tuple[Log, int]], remote_next: Sequence[int], reasons: Sequence[str | None]
) -> list[PendingRange]:
    """The ranges below each log's target offset the bucket lacks (``remote_next[i]`` is
    the remote next offset of ``targets[i]``'s partition, ``reasons[i]`` why it is stuck)."""
    out: list[PendingRange] = []
    for (log, target), nxt, why in zip(targets, remote_next, reasons, strict=True):
        first = max(nxt, log.log_start_offset)
        if first < target:
            out.append(PendingRange(log.name, first, target - 1, why or ""))
    return out


__all__ = [
    "PendingRange",
    "ShutdownUpload",
    "lag_roll_due",
    "pending_ranges",
    "roll_aged_segments",
]
