"""Follower truncation of a partition log (the log side of Kafka's ``UnifiedLog.truncateTo``
and ``truncateFullyAndStartAt``): cutting the log back to an offset, or emptying it and
restarting it at one, together with everything that describes the dropped batches.

``hot.log.Log.truncate_to`` and ``Log.truncate_fully_and_start_at`` are the entry points;
they check their arguments and call these with ``Log._flush_lock`` and ``Log._lock`` held,
then complete the returned high-watermark futures once both are released. The segments
themselves are cut by ``hot.local_log.LocalLog``.

Files touched, in this order (each step durable before the next, so a crash at any point
leaves the old log or a prefix of it, which ``Log.open`` loads as a consistent log and the
replica simply truncates again):

* ``truncate_to_locked``: the segments newest first (each removal durable before the next),
  then the one holding the offset is cut (``.log`` / ``.index`` / ``.timeindex``); the
  ``leader-epoch-checkpoint`` loses the epochs starting at the new end or later (``open``
  cuts it to the log end too); producer state is rebuilt in memory from the latest
  ``.snapshot`` at or below the new end (later ones are deleted); ``recovery-point`` last.
* ``truncate_fully_locked``: the ``leader-epoch-checkpoint`` is emptied first (a missing or
  empty one is rebuilt from whatever segments a crash leaves, a stale one would describe
  deleted batches), then every segment and ``.snapshot`` is deleted, ``log-start-offset``
  written (its directory fsync covers the deletions), one empty segment created at the
  new offset and ``recovery-point`` written.

A StorageError on the way takes the log offline (``Log._go_offline``) and is re-raised.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING

from hot.errors import StorageError

if TYPE_CHECKING:
    from hot.log import Log


def truncate_to_locked(log: Log, offset: int) -> list[Future[None]]:
    """``Log.truncate_to`` with both locks held; ``0 <= offset``. Returns the high-watermark
    futures to complete after unlocking (only a full truncation can raise the HW)."""
    leo = log.log_end_offset
    if offset >= leo:
        # An epoch entry at the log end (a leader that took an epoch and wrote nothing in
        # it) goes anyway, as in Kafka's truncateTo: left in place, a follower would keep
        # asking OffsetForLeaderEpoch for that epoch and its KIP-279 rounds would never
        # converge.
        try:
            log._epochs.truncate_from_end(leo)
        except StorageError as e:
            log._go_offline(e)
            raise
        return []
    if offset <= log._local.segments[0].base_offset or offset < log._log_start_offset:
        return truncate_fully_locked(log, offset, offset)
    try:
        _cut_locked(log, offset)
    except StorageError as e:
        log._go_offline(e)
        raise
    return []


def _cut_locked(log: Log, offset: int) -> None:
    """Drop the batches from the one holding ``offset`` on (it lies in a local segment
    above the first one's base and at or above the log start offset)."""
    log._handoff.truncated_locked(offset)
    # Newest first, each removal durable before the next: a crash leaves a prefix.
    log._local.truncate_to_locked(offset)
    leo = log.log_end_offset
    log._epochs.truncate_from_end(leo)
    log._pstate.load_locked(log._local, log._log_start_offset)
    log._hw = min(log._hw, leo)
    log._local.recovery_point = min(log._local.recovery_point, leo)
    log._local.persist_recovery_point()  # also fsyncs the directory


def truncate_fully_locked(log: Log, offset: int, log_start: int) -> list[Future[None]]:
    """Delete every segment and restart the log empty at ``offset`` with log start offset
    ``log_start`` (``0 <= log_start <= offset``), both locks held. The high watermark and
    recovery point become ``offset``; epochs and producer state are cleared. Returns the
    high-watermark futures to complete after unlocking."""
    log._handoff.truncated_locked(offset)
    try:
        # The checkpoint goes first: a missing one is rebuilt from whatever segments a
        # crash leaves behind, a stale one would describe deleted batches.
        log._epochs.clear()
        log._local.sync_dir()
        log._local.delete_all_segments_locked()
        log._pstate.delete_locked(lambda o: True)
        log._log_start_offset = log_start
        log._persist_log_start_offset()  # fsyncs the directory for the deletions too
        new = log._local.new_segment(offset)
        log._local.reset_locked(new)
        log._local_log_start_offset = offset
        new.flush()
        log._pstate.state.clear()
        log._local.recovery_point = offset
        log._local.persist_recovery_point()
    except StorageError as e:
        log._go_offline(e)
        raise
    if offset < log._hw:
        log._hw = offset
        return []
    return log._advance_hw_locked(offset)
