"""The log start offset of a partition log: moving it up (Kafka's DeleteRecords and the
total retention of remote data, ``maybeIncrementLogStartOffset``) and deleting the oldest
segments below it or beyond local retention (``deleteSegments``).

Two offsets (hot.log, module docstring): the log start offset, stored, and the local log
start offset, derived (max of the log start offset and the first local segment's base).
Both only rise, except that a full truncation restarts them (hot.log_truncation).

File: ``<dir>/log-start-offset``, text ``"<offset>\\n"``, replaced atomically
(hot.local_log.atomic_write: ``.tmp``, fsync, rename, fsync the directory). It is written
before the segments it covers are deleted: after a crash the next ``open`` starts the log
there even if a segment still holds records below it, so a deletion never runs ahead of
the file. Without the file ``open`` takes the first local segment's
base, which on a tiered log would hide the remote part: local retention therefore writes
it too. The ``leader-epoch-checkpoint`` loses the epochs wholly below the new start.

Locking: none of its own; ``hot.log.Log`` calls every function with ``Log._lock`` held
(segment deletion with ``Log._flush_lock`` too). A StorageError takes the log offline.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from hot.errors import OffsetOutOfRangeError, StorageError
from hot.retention import local_retention_doomed, retention_doomed

if TYPE_CHECKING:
    from collections.abc import Callable

    from hot.log import Log, RetentionGuard


def delete_records_locked(log: Log, offset: int) -> int:
    """``Log.delete_records``: ``offset`` -1 means the high watermark; OffsetOutOfRangeError
    if it is negative or above the high watermark. Returns the new log start offset."""
    hw = log._hw
    if offset == -1:
        offset = hw
    if offset < 0 or offset > hw:
        raise OffsetOutOfRangeError(
            f"cannot delete records of {log.name} up to {offset}: high watermark is {hw}"
        )
    _raise_locked(log, offset)
    return log._log_start_offset


def advance_locked(log: Log, offset: int) -> None:
    """``Log.advance_log_start_offset``: never backwards; OffsetOutOfRangeError above the
    high watermark."""
    if offset > log._hw:
        raise OffsetOutOfRangeError(
            f"cannot move the log start offset of {log.name} to {offset}: high watermark is {log._hw}"
        )
    _raise_locked(log, offset)


def _raise_locked(log: Log, offset: int) -> None:
    if offset <= log._log_start_offset:
        return
    log._log_start_offset = offset
    log._local_log_start_offset = max(log._local_log_start_offset, offset)
    log._pstate.state.evict_below(offset)
    try:
        log._persist_log_start_offset()
        log._epochs.truncate_from_start(offset)
    except StorageError as e:
        log._go_offline(e)
        raise
    # A fetch answer carries the log start: the high-watermark listeners (a consumer
    # session's marks, broker.consumer_marks) learn of the move as of an HW move.
    log._hw_waiters.notify()


def drop_segments_locked(log: Log, n: int, *, advance_log_start: bool = True) -> None:
    """Delete the ``n`` oldest segments (sealed ones, chosen by hot.retention). With
    ``advance_log_start`` (total retention) the log start offset rises to the new first
    segment's base; without (local retention of a tiered log) only the local log start
    offset moves and the deleted offsets stay readable from the object store. Producer
    snapshots below the new first segment go with it."""
    doomed = log._local.drop_oldest_locked(n)
    new_start = log._local.segments[0].base_offset
    log._local_log_start_offset = max(log._local_log_start_offset, new_start)
    try:
        moved = advance_log_start and new_start > log._log_start_offset
        if moved:
            log._log_start_offset = new_start
            log._persist_log_start_offset()
            log._epochs.truncate_from_start(new_start)
        elif not advance_log_start:
            # Without the file the next open would take the first local segment as the
            # log start and lose sight of the remote part.
            log._persist_log_start_offset()
        log._local.delete_segments(doomed)
        log._pstate.delete_below_locked(new_start)
        log._pstate.state.evict_below(log._log_start_offset)
        log._local.sync_dir()
    except StorageError as e:
        log._go_offline(e)
        raise
    if moved:
        log._hw_waiters.notify()  # as _raise_locked


def apply_retention(log: Log, now_ms: int | None, unless: Callable[[Log], bool] | None = None) -> list[int]:
    """``Log.apply_retention``: total retention (hot.retention.retention_doomed), then
    the log start offset rises to the first remaining segment. Returns the deleted bases.
    ``unless`` is asked under the log's lock, where ``update_config`` also runs: a topic
    altered to ``remote.storage.enable`` between a caller's look and the deletion is then
    seen, so un-uploaded segments are never deleted by the new total retention."""
    if now_ms is None:
        now_ms = time.time_ns() // 1_000_000
    with log._flush_lock, log._lock:
        if not log.is_online or (unless is not None and unless(log)):
            return []
        doomed = retention_doomed(
            log._local.segments, log.config, now_ms, log._hw, log._log_start_offset, log.retention_guard
        )
        if not doomed:
            return []
        drop_segments_locked(log, len(doomed))
    return [s.base_offset for s in doomed]


def apply_local_retention(log: Log, now_ms: int, is_uploaded: RetentionGuard) -> list[int]:
    """``Log.apply_local_retention``: local retention of a tiered log
    (hot.retention.local_retention_doomed); only the local log start offset moves.
    Returns the deleted bases."""
    with log._flush_lock, log._lock:
        if not log.is_online:
            return []
        doomed = local_retention_doomed(
            log._local.segments, log.config, now_ms, log._hw, log._log_start_offset, is_uploaded
        )
        if not doomed:
            return []
        drop_segments_locked(log, len(doomed), advance_log_start=False)
    return [s.base_offset for s in doomed]
