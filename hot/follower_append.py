"""A follower's append (Kafka's ``UnifiedLog.appendAsFollower``): batches that already carry
their offsets, copied from the leader byte for byte.

``hot.log.Log.append_as_follower`` is the entry point and delegates here. The batch checks
are ``hot.log_append.validate_batches`` (as for a leader, minus the producer checks: the
leader did those); the write, the roll and the high watermark are the log's own
(``hot.log_write``). Files: the active segment's ``.log``,
``.index`` and ``.timeindex`` (hot.segment), the ``leader-epoch-checkpoint`` when a batch
starts a new epoch (written before any byte of the batch, so no batch is ever on disk
without its epoch), at a roll a producer ``.snapshot``, and the ``.txnindex`` of the
segment a replicated ABORT marker lands in (hot.txn_index). A failed write is undone by
the segment (or the log goes offline, hot.segment.WriteUndoFailedError): nothing partial
stays. Locking: runs under ``Log._lock``, completes high-watermark futures after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING

from hot import log_write
from hot.errors import InvalidRecordError, StorageError
from hot.log_append import AppendBatch, AppendInfo, byte_view, validate_batches
from hot.segment import ProducerBatch
from hot.txn_marker import read_marker

if TYPE_CHECKING:
    from hot.log import Log
    from hot.segment import Segment


def append_as_follower(
    log: Log, data: bytes | bytearray | memoryview, *, now_ms: int | None, roll: bool | None
) -> AppendInfo:
    """``Log.append_as_follower`` (its docstring states the rules)."""
    mv = byte_view(data)
    batches, idempotent = validate_batches(mv, log.config, leader=False)
    # Markers decoded before anything is written: an unreadable one refuses the append.
    stored = list(producer_batches(mv, batches)) if idempotent else []
    if log.append_guard is not None:
        log.append_guard(len(mv))
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    total = len(mv)
    records = sum(b.records for b in batches)
    with log._lock:
        log._check_usable()
        expect = log.log_end_offset
        gaps_ok = log.config.compact
        for b in batches:
            if b.base_offset != expect and not (gaps_ok and b.base_offset > expect):
                raise InvalidRecordError(
                    f"non-monotonic offsets: batch base offset {b.base_offset} where {expect} was expected"
                )
            expect = b.base_offset + b.last_offset_delta + 1
        for b in batches:
            if b.leader_epoch >= 0 and b.leader_epoch != log._epochs.latest_epoch:
                log._assign_epoch_locked(b.leader_epoch, b.base_offset, leader=False)
        first = log.log_end_offset
        active = log._local.active
        seg: Segment
        done: list[Future[None]]
        if roll is None:
            seg, done = log_write.maybe_roll_locked(log, total, expect - first, now_ms)
        elif active.is_empty or (not roll and active.fits(expect - first)):
            seg, done = active, []
        else:  # asked to, or relative offsets would overflow the index
            seg, done = log_write.roll_locked(log)
        tracked = [(b.base_offset, b.size, b.max_timestamp) for b in batches]
        done += log_write.write_locked(log, seg, [mv], total, tracked, expect, records, now_ms)
        if stored:
            try:
                log._pstate.replay_locked(stored, now_ms, seg)
            except StorageError as e:  # the transaction index: recovery rebuilds it
                log._go_offline(e)
                raise
        lso = log._log_start_offset
    log_write.after_append(log, done)
    return AppendInfo(
        first_offset=first,
        last_offset=expect - 1,
        batch_count=len(batches),
        record_count=records,
        max_timestamp=max(b.max_timestamp for b in batches),
        log_append_time_ms=-1,
        log_start_offset=lso,
    )


def producer_batches(mv: memoryview, batches: Iterable[AppendBatch]) -> Iterator[ProducerBatch]:
    """The producer batches of a follower's append, as producer state replays them (a
    transaction marker decoded from its control batch)."""
    for b in batches:
        if b.producer_id < 0:
            continue
        ctype = cepoch = -1
        if b.is_control:
            marker = read_marker(mv[b.position : b.position + b.size])
            if marker is not None:
                ctype, cepoch = int(marker.control_type), marker.coordinator_epoch
        yield ProducerBatch(
            b.base_offset,
            b.last_offset_delta,
            b.max_timestamp,
            b.producer_id,
            b.producer_epoch,
            b.base_sequence,
            b.is_transactional,
            b.is_control,
            ctype,
            cepoch,
        )
