"""Transactions in a partition log (KIP-98, the storage side of Kafka's UnifiedLog): the
coordinator's marker append, the last stable offset and the aborted transactions a
read_committed fetch needs.

``hot.log.Log.append_marker``, ``Log.last_stable_offset`` and
``Log.collect_aborted_transactions`` are the entry points. The producer-state rules (which
batch begins a transaction, what a marker may do) are ``hot.producer_state``; recording a
completed transaction and rebuilding the transaction index are
``hot.producer_snapshots``; the index file is ``hot.txn_index``.

Offsets (Kafka's names)::

    first unstable offset  the first offset of the earliest transaction that is ongoing, or
                           completed with its marker not yet below the high watermark
                           (never below the log start offset); none if there is none
    last stable offset     min(first unstable offset, high watermark): a read_committed
                           consumer reads below it only

Files: the marker goes to the active segment's ``.log`` like any leader append
(hot.log_write); an ABORT marker that ends a non-empty transaction adds an entry to that
segment's ``.txnindex``. A failure writing the index takes the log offline (the marker is
in the log; recovery rebuilds the index). Locking: under ``Log._lock``; high-watermark
futures completed after it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from hot import log_write
from hot.errors import InvalidRequestError, StorageError
from hot.log_append import AppendInfo
from hot.records import ControlType
from hot.txn_index import AbortedTxn
from hot.txn_marker import EndTxnMarker, build_marker_batch

if TYPE_CHECKING:
    from hot.local_log import LocalLog
    from hot.log import Log


def append_marker(
    log: Log,
    producer_id: int,
    producer_epoch: int,
    control_type: ControlType,
    coordinator_epoch: int,
    *,
    leader_epoch: int,
    now_ms: int | None,
) -> AppendInfo:
    """``Log.append_marker``."""
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        raise InvalidRequestError(f"control type {control_type} is not a transaction marker")
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    marker = EndTxnMarker(ControlType(control_type), coordinator_epoch)
    # Built once at offset 0 to know its size; rebuilt at the log end under the lock.
    size = len(
        build_marker_batch(marker, producer_id=producer_id, producer_epoch=producer_epoch, timestamp=now_ms)
    )
    if log.append_guard is not None:
        log.append_guard(size)
    with log._lock:
        log._check_usable()
        plan = log._pstate.state.begin(now_ms)
        leo = log.log_end_offset
        # Validation first (epochs): a refused marker writes nothing.
        plan.append_marker(
            producer_id, producer_epoch, marker.control_type is ControlType.ABORT, coordinator_epoch, leo
        )
        if leader_epoch >= 0 and leader_epoch != log._epochs.latest_epoch:
            log._assign_epoch_locked(leader_epoch, leo, leader=True)
        seg, done = log_write.maybe_roll_locked(log, size, 1, now_ms)
        off = seg.next_offset
        batch = build_marker_batch(
            marker,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            timestamp=now_ms,
            base_offset=off,
            partition_leader_epoch=leader_epoch,
        )
        done += log_write.write_locked(
            log, seg, [batch], len(batch), [(off, len(batch), now_ms)], off + 1, 1, now_ms
        )
        plan.commit()
        try:
            log._pstate.complete_txns_locked(seg, plan.completed)
        except StorageError as e:
            log._go_offline(e)
            raise
        lso = log._log_start_offset
    log_write.after_append(log, done)
    return AppendInfo(
        first_offset=off,
        last_offset=off,
        batch_count=1,
        record_count=1,
        max_timestamp=now_ms,
        log_append_time_ms=now_ms if log.config.log_append_time else -1,
        log_start_offset=lso,
    )


def first_unstable_offset_locked(log: Log) -> int | None:
    """The first unstable offset (module docstring), None if every transaction is decided
    and replicated."""
    first = log._pstate.state.first_unstable_offset(log._hw)
    if first is None:
        return None
    return max(first, log._log_start_offset)


def last_stable_offset_locked(log: Log) -> int:
    """min(first unstable offset, high watermark)."""
    first = first_unstable_offset_locked(log)
    hw = log._hw
    return hw if first is None or first >= hw else first


def collect_aborted_locked(local: LocalLog, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [start_offset, upper_bound_offset) in the local
    segments (Kafka's collectAbortedTransactions): the indexes of the segment holding
    ``start_offset`` (the first one if it lies below) and the later ones, stopping at the
    first entry whose LSO reaches the upper bound (no later marker can end a transaction
    that began below it). A transaction whose marker lies in an earlier segment ended
    before ``start_offset`` and cannot overlap."""
    out: list[AbortedTxn] = []
    if upper_bound_offset <= start_offset:
        return out
    for seg in local.segments[local.segment_index(start_offset) :]:
        found = seg.txn_index.collect(start_offset, upper_bound_offset)
        out.extend(found.aborted)
        if found.complete:
            break
    return out


__all__ = [
    "append_marker",
    "collect_aborted_locked",
    "first_unstable_offset_locked",
    "last_stable_offset_locked",
]
