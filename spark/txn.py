"""read_committed scans of the bucket (``kafka.isolation.level=read_committed``): where the
bucket's decided data ends, and which transactions in it were aborted. Used by the
planner (spark.plan); the tasks filter with the result (spark.columnar).

- The bucket holds only segments below the last stable offset at upload time, but a
  transaction whose data was uploaded may have its marker in the part not uploaded yet:
  it is undecided as far as the bucket knows. The producer snapshot uploaded with the last
  COPIED segment (version 2) names those transactions' first offsets; the first of them
  is where a read_committed scan of the bucket stops (as a consumer stops at the LSO),
  the rest coming from the broker with includeHot.
- The aborted transactions come from the segments' transaction indexes
  (tiering.remote_txn, Kafka's stop rule).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from hot.errors import CorruptLogError, ObjectNotFoundError
from hot.txn_index import AbortedTxn
from tiering.manifest import RemoteSegment
from tiering.store import ObjectStore

logger = logging.getLogger(__name__)


async def first_unstable(store: ObjectStore, last: RemoteSegment | None) -> int | None:
    """The first offset of the earliest transaction open after ``last`` (the partition's
    last COPIED segment), None if none is, or if its snapshot is missing or unreadable
    (then no transaction is taken as open: such a segment predates transactions or lost
    its snapshot, which a warning reports)."""
    from hot.producer_state import ProducerSnapshotFile  # read_committed only: not on every plan's import

    snap = last.snapshot_part() if last is not None else None
    if last is None or snap is None:
        return None
    key = snap.name
    try:
        entries = ProducerSnapshotFile.decode(await snap.get(store), last.last_offset + 1, key)
    except (ObjectNotFoundError, CorruptLogError) as e:
        logger.warning("producer snapshot %s unusable (%s): open transactions unknown", key, e)
        return None
    return min((e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0), default=None)


async def aborted_between(
    store: ObjectStore, segments: Sequence[RemoteSegment], start: int, end: int
) -> tuple[AbortedTxn, ...]:
    """The aborted transactions overlapping ``[start, end)`` in ``segments`` (COPIED, in
    offset order, from the one holding ``start`` to the bucket's end)."""
    from tiering.remote_txn import collect_remote, parse_txn_index

    async def load(seg: RemoteSegment) -> tuple[AbortedTxn, ...]:
        return parse_txn_index(await store.get(seg.keys.txnindex), seg)

    return (await collect_remote(segments, start, end, load)).aborted


def overlapping(aborted: Sequence[AbortedTxn], start: int, end: int) -> tuple[AbortedTxn, ...]:
    """The entries a task reading ``[start, end)`` needs."""
    return tuple(t for t in aborted if t.last_offset >= start and t.first_offset < end)


__all__ = ["aborted_between", "first_unstable", "overlapping"]
