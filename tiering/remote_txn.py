"""Transaction indexes of remote segments (pure): parsing, the aborted-transaction search
over a partition's remote segments, and the merge with the local log's answer.

A segment's ``.txnindex`` (hot.txn_index: 34-byte AbortedTxn entries, version 0, in marker
order) is uploaded beside it when it has one, and the manifest records its size
(``RemoteSegment.txnindex_size``; absent: no aborted transaction's marker in the segment).
A read_committed fetch below the local log start gets the same aborted list as the hot
log would give: ``collect_remote`` walks the COPIED segments from the one holding the
fetch offset and stops as Kafka's RemoteLogManager.collectAbortedTransactions does (at the
first entry whose LSO reaches the upper bound); if the remote segments never complete the
search, the caller continues in the local segments (``combine``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from hot.txn_index import ENTRY_SIZE, AbortedTxn, TxnSearch, collect_aborted, decode_entries
from tiering.cache import RemoteCorruptObjectError
from tiering.manifest import RemoteSegment, SegmentState

# A parsed entry held in the reader's index cache: the frozen dataclass and four ints.
ENTRY_MEMORY_BYTES = 200


def parse_txn_index(data: bytes, seg: RemoteSegment) -> tuple[AbortedTxn, ...]:
    """Parse and check a remote ``.txnindex`` against its manifest entry: the recorded
    size, whole entries of version 0, markers strictly increasing inside the segment, each
    transaction's first offset at or below its marker. RemoteCorruptObjectError names the
    key; a damaged index is never used (its aborted data would become visible)."""
    key = seg.keys.txnindex
    if seg.txnindex_size is not None and len(data) != seg.txnindex_size:
        raise RemoteCorruptObjectError(key, f"{len(data)} bytes, the manifest says {seg.txnindex_size}")
    if len(data) % ENTRY_SIZE:
        raise RemoteCorruptObjectError(key, f"size {len(data)} is not a multiple of {ENTRY_SIZE}")
    try:
        entries = decode_entries(data)
    except ValueError as e:
        raise RemoteCorruptObjectError(key, str(e)) from None
    prev = -1
    for i, t in enumerate(entries):
        if (
            not seg.base_offset <= t.last_offset <= seg.last_offset
            or t.last_offset <= prev
            or not 0 <= t.first_offset <= t.last_offset
            or t.last_stable_offset < 0
        ):
            raise RemoteCorruptObjectError(
                key,
                f"entry {i} (producer {t.producer_id}, offsets {t.first_offset}..{t.last_offset}, "
                f"LSO {t.last_stable_offset}) is out of order or outside the segment "
                f"[{seg.base_offset}, {seg.last_offset}]",
                position=i * ENTRY_SIZE,
            )
        prev = t.last_offset
    return tuple(entries)


async def collect_remote(
    segments: Sequence[RemoteSegment],
    start_offset: int,
    upper_bound_offset: int,
    load: Callable[[RemoteSegment], Awaitable[Sequence[AbortedTxn]]],
) -> TxnSearch:
    """The aborted transactions overlapping [start_offset, upper_bound_offset) in the COPIED
    ``segments`` (offset order), from the one holding ``start_offset`` on (a marker in an
    earlier segment ended its transaction before the start), stopping at the first entry
    whose LSO reaches the upper bound (``complete``: no later segment, remote or local, can
    add one). ``load`` gives a segment's entries; it is called only for segments that
    have an index."""
    out: list[AbortedTxn] = []
    if upper_bound_offset <= start_offset:
        return TxnSearch((), True)
    for seg in segments:
        if seg.state is not SegmentState.COPIED or seg.last_offset < start_offset:
            continue
        if seg.txnindex_size is None:
            continue
        found = collect_aborted(await load(seg), start_offset, upper_bound_offset)
        out.extend(found.aborted)
        if found.complete:
            return TxnSearch(tuple(out), True)
    return TxnSearch(tuple(out), False)


def combine(remote: TxnSearch, local: Sequence[AbortedTxn]) -> list[AbortedTxn]:
    """The aborted list of a fetch that began in the remote tier: the remote search, then,
    unless it was complete, the local log's entries (``Log.collect_aborted_transactions``
    from the same start offset). A segment both uploaded and still on disk gives its
    entries twice: local ones at or below the last remote marker are dropped."""
    if remote.complete:
        return list(remote.aborted)
    last = remote.aborted[-1].last_offset if remote.aborted else -1
    return [*remote.aborted, *(t for t in local if t.last_offset > last)]


__all__ = ["ENTRY_MEMORY_BYTES", "collect_remote", "combine", "parse_txn_index"]
