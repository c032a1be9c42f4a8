"""A leader's append (Kafka's ``UnifiedLog.appendAsLeader``): producer batches get their
offsets from the log end, the leader epoch, and for LogAppendTime topics the append time.

``hot.log.Log.append`` is the entry point and delegates here. The rules:

Every batch is validated first (magic 2, size <= max.message.bytes, CRC-32C,
recordsCount == lastOffsetDelta + 1, not a control batch, every record well formed:
hot.record_validation); one bad batch means nothing is written. baseOffset and
partitionLeaderEpoch are rewritten without copying the batch (they are outside the
CRC). A CreateTime batch whose maxTimestamp is not its records' largest timestamp
is copied with the right one and a new CRC, as Kafka does. For LogAppendTime topics the
timestamp type bit and maxTimestamp are set to ``now_ms`` and the CRC recomputed
(the batch is copied; it is never recompressed).

Batches with a producer id go through the producer-state checks (module
hot.producer_state), in order, atomically with the write: a fenced epoch or a
sequence gap raises and nothing is written; a retry of a batch already in the log
is not written again. If every batch was such a retry, the result has
``duplicate=True`` and the original batches' offsets.

``leader_epoch`` is stamped into every batch; the first append of a new epoch
records it in the leader-epoch cache at its first offset (a negative epoch is
stamped but not recorded). An epoch older than the latest in the cache is
FencedLeaderEpochError (a deposed leader) and nothing is written.

Transactional batches need ``transactional=True`` (the request's transactional id
was checked), else TransactionalIdAuthorizationError and nothing is written; their
rules: hot.producer_state. Markers come only through ``append_marker``.

``origin_coordinator``: a coordinator's own batches (Kafka's AppendOrigin.COORDINATOR;
the group coordinator's transactional offsets, TxnOffsetCommit): a producer id with
base sequence -1 (NO_SEQUENCE) is accepted, transactional batches need no
``transactional``, and no sequence check or duplicate detection applies (only the
producer epoch is checked).

``verification``: the guards from ``Log.start_txn_verification`` of the producers the
coordinator confirmed (KIP-890): a transactional batch that would begin a
transaction needs its producer's current guard, else InvalidTxnStateError (None:
not verified, hot.producer_state).

The batch checks and the bytes written per batch are ``hot.log_append`` (pure);
the idempotent producer's checks run against a pending producer-state change that is
committed only after the write succeeded, so a refused or failed append leaves the state
as it was. Files: the active segment's ``.log``, ``.index`` and ``.timeindex``
(hot.segment), the ``leader-epoch-checkpoint`` when the append starts a new epoch
(written before the roll and the write, so no batch is ever on disk without its epoch),
and at a roll a producer ``.snapshot``. A failed write is undone by the segment (or the
log goes offline, hot.segment.WriteUndoFailedError). Locking: runs under ``Log._lock``,
completes high-watermark futures after it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from hot import log_write
from hot.log_append import AppendInfo, byte_view, check_producers, leader_iov, leader_scan, validate_batches
from hot.producer_state import BatchMetadata, ProducerAppend, VerificationGuard
from hot.segment import STAMPED_WRITE

# Fields of a scanned batch (hot.log_append.AppendBatch's order, hot/_recordwalk.c scan).
_POSITION: Final = 0
_SIZE: Final = 1
_LAST_DELTA: Final = 3
_MAX_TS: Final = 4
_PRODUCER_ID: Final = 7
_ATTRIBUTES: Final = 13

if TYPE_CHECKING:
    from hot.log import Log


def append_as_leader(
    log: Log,
    data: bytes | bytearray | memoryview,
    *,
    leader_epoch: int,
    now_ms: int | None,
    transactional: bool = False,
    origin_coordinator: bool = False,
    verification: Mapping[int, VerificationGuard] | None = None,
) -> AppendInfo:
    """``Log.append``."""
    mv = byte_view(data)
    cfg = log.config
    scanned = leader_scan(mv, cfg)
    if scanned is not None and len(scanned) == 1 and STAMPED_WRITE:
        one = scanned[0]
        # No producer id, the client's header kept, CreateTime: what most producers send.
        if one[_PRODUCER_ID] < 0 and one[_ATTRIBUTES] < 0 and not cfg.log_append_time:
            return _append_plain(log, mv, one, leader_epoch, now_ms)
    batches, idempotent = validate_batches(
        mv, cfg, leader=True, coordinator=origin_coordinator, prescanned=True, scanned=scanned
    )
    if log.append_guard is not None:
        log.append_guard(len(mv))
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    total = len(mv)
    if len(batches) == 1:  # what producers send: no generator for one batch
        offsets, records = batches[0].last_offset_delta + 1, batches[0].records
    else:
        offsets = sum(b.last_offset_delta + 1 for b in batches)
        records = sum(b.records for b in batches)
    log_append = cfg.log_append_time
    plan: ProducerAppend | None = None
    dups: Sequence[BatchMetadata] = ()
    with log._lock:
        log._check_usable()
        if idempotent:
            plan = log._pstate.state.begin(now_ms)
            leo = log.log_end_offset
            batches, dups, reported_first = check_producers(
                plan, batches, leo, now_ms, log_append, transactional, origin_coordinator, verification
            )
            if dups:
                if not batches:
                    return _duplicate_info(dups, log_append, log._log_start_offset)
                total = sum(b.size for b in batches)
                offsets = sum(b.last_offset_delta + 1 for b in batches)
                records = sum(b.records for b in batches)
        if leader_epoch >= 0 and leader_epoch != log._epochs.latest_epoch:
            # Before the roll and the write: a failure leaves no batch without its epoch.
            log._assign_epoch_locked(leader_epoch, log.log_end_offset, leader=True)
        seg, done = log_write.maybe_roll_locked(log, total, offsets, now_ms)
        off = seg.next_offset
        if plan is None:
            reported_first = off
        if len(batches) == 1 and batches[0].attributes < 0 and not log_append and STAMPED_WRITE:
            # One batch whose header is kept (an idempotent producer's, usually): one C call.
            b = batches[0]
            max_ts = b.max_timestamp
            done += log_write.write_stamped_locked(
                log, seg, mv, b.position, b.size, leader_epoch, max_ts, b.last_offset_delta, now_ms
            )
            off += b.last_offset_delta + 1
        else:
            iov, tracked, max_ts, off = leader_iov(mv, batches, off, leader_epoch, now_ms, log_append)
            done += log_write.write_locked(log, seg, iov, total, tracked, off, records, now_ms)
        if plan is not None:
            plan.commit()
        lso = log._log_start_offset
    log_write.after_append(log, done)
    last = off - 1
    if dups:
        last = max(last, *(d.last_offset for d in dups))
    return AppendInfo(
        first_offset=reported_first,
        last_offset=last,
        batch_count=len(batches),
        record_count=records,
        max_timestamp=max_ts,
        log_append_time_ms=now_ms if log_append else -1,
        log_start_offset=lso,
    )


def _append_plain(
    log: Log, mv: memoryview, one: tuple[Any, ...], leader_epoch: int, now_ms: int | None
) -> AppendInfo:
    """``append_as_leader`` of one validated batch that needs no producer-state check and
    no header rewrite: the same steps in the same order (the append guard, the epoch,
    the roll, the write, the high watermark), the batch stamped and written in one C call
    (hot.log_write.write_stamped_locked). Tested equal to the general path:
    tests/hot/test_leader_append_plain.py."""
    size = one[_SIZE]
    last_delta = one[_LAST_DELTA]
    max_ts = one[_MAX_TS]
    if log.append_guard is not None:
        log.append_guard(size)
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    with log._lock:
        log._check_usable()
        if leader_epoch >= 0 and leader_epoch != log._epochs.latest_epoch:
            log._assign_epoch_locked(leader_epoch, log.log_end_offset, leader=True)
        seg, done = log_write.maybe_roll_locked(log, size, last_delta + 1, now_ms)
        first = seg.next_offset
        done += log_write.write_stamped_locked(
            log, seg, mv, one[_POSITION], size, leader_epoch, max_ts, last_delta, now_ms
        )
        lso = log._log_start_offset
    log_write.after_append(log, done)
    return AppendInfo(first, first + last_delta, 1, last_delta + 1, max_ts, -1, lso)


def _duplicate_info(dups: Sequence[BatchMetadata], log_append: bool, log_start_offset: int) -> AppendInfo:
    """Every batch was a retry of one already in the log: the originals' offsets."""
    return AppendInfo(
        first_offset=dups[0].first_offset,
        last_offset=max(d.last_offset for d in dups),
        batch_count=0,
        record_count=0,
        max_timestamp=max(d.timestamp for d in dups),
        log_append_time_ms=dups[0].timestamp if log_append else -1,
        log_start_offset=log_start_offset,
        duplicate=True,
    )
