"""Writing a partition log's active segment, shared by the leader and follower appends
(hot.leader_append, hot.follower_append): rolling to a new segment (Kafka's
``UnifiedLog.roll`` / ``maybeRoll``), the write itself, what follows an append (the
high watermark in interval mode, a flush request), and the flush (``Log.flush``).

A roll happens before an append that would not fit the active segment (``segment.bytes``,
``segment.ms``, or relative offsets past the index's int32 range), on request
(``Log.roll``, a follower cutting where its leader did) and by age (``Log.roll_if_older_than``).
An empty active segment never rolls.

Files, in roll order: the active segment's ``.log`` / ``.index`` / ``.timeindex`` are
fsynced and sealed, then the next segment's files are created, the producer
``<next base>.snapshot`` written (its rename made durable by the next step), and
``recovery-point`` (text ``"<offset>\\n"``) advanced to the new base and written with a
directory fsync. Hence every segment but the last is complete on disk after any crash
(hot.log, "Durability ordering"). A write is appended to the active segment's files
(hot.segment.Segment.append) and fsynced later by a flush: a failed write is undone
there (the log stays online; the client may retry) unless the undo fails
(WriteUndoFailedError: the log goes offline). A StorageError in a roll takes the log
offline.

Locking: none of its own; the ``*_locked`` functions run with ``Log._lock`` held and
return the high-watermark futures to complete; ``after_append`` runs after it is released;
``flush`` takes ``Log._flush_lock`` and ``Log._lock`` itself, fsyncing outside the latter.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from hot.errors import StorageError
from hot.local_log import LocalLog
from hot.segment import WriteUndoFailedError

if TYPE_CHECKING:
    from hot.log import Log
    from hot.segment import Segment


def maybe_roll_locked(log: Log, size: int, offsets: int, now_ms: int) -> tuple[Segment, list[Future[None]]]:
    """The segment an append of ``size`` bytes and ``offsets`` offsets goes to, rolling
    first if the active one cannot take it; plus the futures to complete after unlocking."""
    seg = log._local.active
    if seg.is_empty:
        return seg, []
    cfg = log.config
    if (
        seg.size + size > cfg.segment_bytes
        or (seg.created_ms is not None and now_ms - seg.created_ms > cfg.segment_ms)
        or not seg.fits(offsets)
    ):
        return roll_locked(log)
    return seg, []


def roll_locked(log: Log) -> tuple[Segment, list[Future[None]]]:
    """Seal the active segment and start a new one. Returns it and the high watermark
    futures the caller must complete once it released the lock."""
    local = log._local
    try:
        new = local.seal_and_create_next_locked()
    except StorageError as e:
        log._go_offline(e)
        raise
    # The state as of the new segment's start. The recovery-point write below fsyncs
    # the directory for this rename too.
    log._pstate.take_locked(new.base_offset, local.active.base_offset, sync_dir=False)
    local.add_segment_locked(new)
    listener = log.roll_listener
    if listener is not None:
        listener(log)  # a sealed segment to upload (tiering.pass_schedule)
    done: list[Future[None]] = []
    if new.base_offset > local.recovery_point:
        local.recovery_point = new.base_offset
        if log.config.fsync_mode and not log.hw_managed_externally:
            done = log._advance_hw_locked(new.base_offset)
    try:
        local.persist_recovery_point()  # also makes the new segment's files durable
    except StorageError as e:
        log._go_offline(e)
        raise
    return new, done


def write_locked(
    log: Log,
    seg: Segment,
    iov: list[bytes | bytearray | memoryview],
    total: int,
    tracked: list[tuple[int, int, int]],
    next_offset: int,
    records: int,
    now_ms: int,
) -> list[Future[None]]:
    """Append ``iov`` (``total`` bytes; ``tracked``: (base offset, size, max timestamp) per
    batch, for the indexes) to ``seg``. In interval mode on a log that keeps its own high
    watermark, it moves to ``next_offset`` at once: returns the futures to complete."""
    try:
        seg.append(iov, total, tracked, next_offset, now_ms)
    except WriteUndoFailedError as e:
        log._go_offline(e)
        raise
    except StorageError as e:  # undone: the log stays online, the client may retry
        log._report_storage_error(e)
        raise
    log._unflushed_messages += records
    if log.config.fsync_mode or (log._hw_external and not log.hw_follows_end):
        return []
    return log._advance_hw_locked(next_offset)


def write_stamped_locked(
    log: Log,
    seg: Segment,
    data: memoryview,
    position: int,
    size: int,
    leader_epoch: int,
    max_ts: int,
    last_offset_delta: int,
    now_ms: int,
) -> list[Future[None]]:
    """``write_locked`` of one batch of ``data`` (a leader's one-batch append whose header
    is kept but for its baseOffset and partitionLeaderEpoch) at ``seg``'s next offset, in
    one C call (hot.segment.Segment.append_stamped)."""
    base = seg.next_offset
    next_offset = base + last_offset_delta + 1
    try:
        seg.append_stamped(data, position, size, base, leader_epoch, next_offset, max_ts, now_ms)
    except WriteUndoFailedError as e:
        log._go_offline(e)
        raise
    except StorageError as e:  # undone: the log stays online, the client may retry
        log._report_storage_error(e)
        raise
    log._unflushed_messages += last_offset_delta + 1
    if log.config.fsync_mode or (log._hw_external and not log.hw_follows_end):
        return []
    return log._advance_hw_locked(next_offset)


def after_append(log: Log, done: list[Future[None]]) -> None:
    """After the lock is released: complete ``done``, tell the listeners, and ask for a
    flush (fsync mode: always, through the group committer; interval mode: once
    flush.messages appends are unflushed)."""
    cfg = log.config
    if done or not (cfg.fsync_mode or log._hw_external):
        # Interval mode: the write itself moved the high watermark (write_locked), and
        # the listeners (parked fetches) hear of it now, once per append, even when no
        # producer waits on a future; otherwise consumers sat out fetch.wait.max.ms.
        log._fire(done)
    elif log.hw_follows_end and not cfg.fsync_mode and log._hw_waiters.wanted():
        # The same, for a replicated log led alone: only when a listener would act (a
        # fetch parked on it, Log.add_hw_listener's gate).
        log._fire(done)
    flusher = log._flusher
    if cfg.fsync_mode:
        if flusher is not None:
            flusher.request(log)
        return
    if log._unflushed_messages >= cfg.flush_messages:
        if flusher is not None:
            flusher.request(log)
        else:
            log.flush()


def flush(log: Log) -> int:
    """``Log.flush``: fsync every dirty segment outside the log's lock (under its flush
    lock), then move the recovery point to the log end taken before the fsyncs and, in
    fsync mode on a log that keeps its own high watermark, the high watermark with it."""
    with log._flush_lock:
        with log._lock:
            log._check_usable()
            target = log.log_end_offset
            try:
                dirty = log._local.start_flush_locked(log._report_storage_error)
            except StorageError as e:
                log._go_offline(e)
                raise
            log._unflushed_messages = 0
            log._last_flush = time.monotonic()
        try:
            LocalLog.sync_segments(dirty)
        except StorageError as e:
            log._go_offline(e)
            raise
        with log._lock:
            if target > log._local.recovery_point:
                log._local.recovery_point = target
            auto = log.config.fsync_mode and not log._hw_external
            done = log._advance_hw_locked(target) if auto else []
            rp = log._local.recovery_point
    if done:
        log._fire(done)
    return rp


def follow_log_end(log: Log, on: bool) -> None:
    """Whether a replicated log's leader appends move its high watermark to the log end
    themselves, in their own lock section (issue 34): its owner (broker.replica_manager)
    turns this on while it leads the partition with no follower at all, so the log end
    is the minimum over the ISR and nothing else can hold the HW. Only interval mode
    uses it (in fsync mode the flush moves the HW). Turned on, the HW moves to the log
    end at once, so no append made before is left behind it."""
    with log._lock:
        log.hw_follows_end = on
        done = log._advance_hw_locked(log.log_end_offset) if on and not log.config.fsync_mode else []
    if done or on:
        log._fire(done)
