"""One partition's log: an ordered list of segments plus its offset bookkeeping.

Structure (Kafka's UnifiedLog / LocalLog / LogLoader): ``Log`` here is the public API and
owns the offsets (log start, local log start, high watermark), reads, leader epochs and
the locks; each other responsibility is a module of functions over the ``Log``
(or a helper object it holds), always called with ``Log._lock`` held:

* appending: a leader's append ``hot.leader_append``, a follower's ``hot.follower_append``,
  their pure batch checks and stamping ``hot.log_append``, rolling, the write itself and
  the flush ``hot.log_write`` (a leader's plain one-batch append stamps and writes its
  batch in one C call, ``hot/_recordwalk.c`` ``write_stamped``);
* the log start offset (DeleteRecords, remote retention) and deleting segments by
  retention ``hot.log_start`` (which segments: ``hot.retention``);
* follower truncation ``hot.log_truncation``;
* the high watermark's futures and listeners ``hot.hw_waiters``; producer state and its
  snapshot files ``hot.producer_snapshots``; which segments the cleaner and the uploader
  may take ``hot.segment_handoff``;
* the segment list, read position lookup, cutting segments, the cleaner's swap, the
  recovery point and the directory's small files ``hot.local_log.LocalLog`` (one per
  ``Log``); opening and recovery ``hot.log_loader``.

There is one lock, ``Log._lock`` (plus ``_flush_lock`` serializing flush / retention /
truncation / close, and LocalLog's recovery-point file lock), exactly as before the split.

Partition directory ``<logs_dir>/<topic>-<partition>/``::

    <20-digit base offset>.log / .index / .timeindex   segments (hot.segment)
    <20-digit base offset>.txnindex   aborted transactions whose marker is in that segment
                        (hot.txn_index, where there is one; transactions: hot.log_txn)
    recovery-point      text "<offset>\\n": every byte below this offset was fsynced
    log-start-offset    text "<offset>\\n": records below it are deleted (retention,
                        DeleteRecords) even if a segment still holds some of them. With
                        tiered storage it may be below the first local segment: the
                        offsets in between live only in the object store
    <20-digit offset>.snapshot   idempotent-producer state as of that offset
                        (hot.producer_state): one per segment, named by its base
                        offset and written when the previous segment rolls, plus one
                        at the log end on clean close
    leader-epoch-checkpoint      where each leader epoch starts (hot.leader_epoch);
                        rebuilt from the batches' partitionLeaderEpoch if missing
    cleaner-offset-checkpoint    compacted topics: text "<offset>\n", segments below it
                        were cleaned (hot.cleaner) and may skip offsets between batches
    <B>.log/.index/.timeindex + .cleaned / .swap   a cleaned segment being built / being
                        swapped in (``replace_segments``: crash behaviour; ``open``
                        completes a committed swap and discards an unfinished one)

Both small files are replaced atomically (write ``<name>.tmp``, fsync, rename, fsync
the directory). A missing recovery point means "recover everything". The recovery
point is persisted on roll, truncation, open and close, not on every flush: recovery
works a whole segment at a time, so a fresher value inside the active segment would
save no work but cost two fsyncs per flush.

Named offsets (first offsets or exclusive ends, as in Kafka)::

    log_start_offset <= local_log_start_offset <= log_end_offset
    high_watermark <= log_end_offset,  recovery_point <= log_end_offset

``local_log_start_offset`` is the first offset on local disk: max(log start offset, base
of the first local segment). It is derived, not stored: local retention (tiered topics)
deletes segments without moving the log start offset, so a stored log start below the
first segment means "the rest is remote" (docs/tiering.md).
In ``fsync`` flush mode the high watermark is the flushed offset (<= recovery point);
in ``interval`` mode it follows the log end at once. A replicated log
(``hw_managed_externally``) leaves it to its owner: the leader sets the minimum log end
of the in-sync replicas, a follower what its leader reports (``set_high_watermark``).

Follower truncation (``truncate_to``, ``truncate_fully_and_start_at``; hot.log_truncation)
removes segments newest first, each removal durable before the next, then cuts the
containing segment, then the leader-epoch cache, producer state and recovery point: a
crash at any point leaves the old log or a prefix of it, which ``open`` loads as a
consistent log (the cache is cut to the log end there). The replica then simply
truncates again.

Durability ordering: a segment is fsynced when it is rolled, before the first byte
goes to its successor. Hence after any crash every segment but the last is complete,
and an invalid batch in a non-last segment is real corruption (CorruptLogError, the
partition is refused) while in the last segment it is a torn write (truncated).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Container, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hot import follower_append, leader_append, log_start, log_truncation, log_txn, log_write
from hot.batch import TimestampType
from hot.config import LogConfig
from hot.errors import (
    CorruptLogError,
    FencedLeaderEpochError,
    InvalidRequestError,
    LogClosedError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
    StorageError,
)
from hot.hw_waiters import HwWaiters
from hot.leader_epoch import EpochEntry, LeaderEpochCache
from hot.local_log import (
    CLEANED_SUFFIX,
    CLEANER_CHECKPOINT_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    LocalLog,
    atomic_write,
    fsync_dir,
    read_offset_file,
)
from hot.log_append import AppendInfo
from hot.log_loader import create_directory_at, load_segments, restore_state
from hot.producer_snapshots import ProducerSnapshots
from hot.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerEntry,
    VerificationGuard,
)
from hot.records import ControlType
from hot.region import FileRegion
from hot.segment import (
    Segment,
    segment_name,
)
from hot.segment_handoff import CleanerView, SegmentHandoff
from hot.txn_index import AbortedTxn

if TYPE_CHECKING:
    from hot.flush import GroupCommitter

logger = logging.getLogger(__name__)

HwListener = Callable[["Log"], None]
RetentionGuard = Callable[[Segment], bool]
# Called with the size of every append before anything is written; raises (e.g.
# DiskHighWaterError) to refuse it. Installed by the LogManager.
AppendGuard = Callable[[int], None]
StorageErrorListener = Callable[[StorageError], None]
RollListener = Callable[["Log"], None]


# --- results --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches for a fetch, as file regions, plus the log's offsets at read time."""

    regions: tuple[FileRegion, ...]
    size: int
    first_offset: int  # base offset of the first batch returned (-1 if none)
    next_offset: int  # offset after the last batch returned (the fetch offset if none)
    high_watermark: int
    log_start_offset: int
    log_end_offset: int

    def read(self) -> bytes:
        """The batches' bytes (tests, and transports that cannot sendfile)."""
        if len(self.regions) == 1:
            return self.regions[0].read()
        return b"".join(r.read() for r in self.regions)


# --- the log ----------------------------------------------------------------------------------


class Log:
    """A partition's segments and offsets. Thread-safe (one RLock; fsyncs run outside it).
    Files, crash behaviour and the modules each responsibility lives in: module docstring."""

    def __init__(
        self,
        directory: str,
        config: LogConfig,
        *,
        topic: str,
        partition: int,
        flusher: GroupCommitter | None,
        segments: list[Segment],
        log_start_offset: int,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        hw_managed_externally: bool = False,
    ) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self._config = config
        self._flusher = flusher
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()  # serializes flushes, retention, truncation, close
        # The segments, the recovery point and the directory (protected by self._lock).
        self._local = LocalLog(directory, f"{topic}-{partition}", config, segments)
        self._log_start_offset = log_start_offset
        self._local_log_start_offset = max(log_start_offset, segments[0].base_offset)
        leo = self._local.log_end_offset
        self._hw_external = hw_managed_externally
        # Replicated: nothing past the log start is known to be committed until the owner says so.
        self._hw = log_start_offset if hw_managed_externally else leo
        # A replicated log led by its broker alone (no follower), in interval mode: the
        # append moves the HW to the log end itself (hot.log_write.follow_log_end).
        self.hw_follows_end = False
        self._epochs = LeaderEpochCache(None)  # replaced by open()
        # The recovery point never passes an epoch entry that is not durable: recovery
        # rescans only the batches above it for epochs (hot.leader_epoch, crash behaviour).
        self._local.before_recovery_point = lambda: self._epochs.sync()
        self._closed = False
        self._offline: StorageError | None = None
        # High-watermark futures and listeners (protected by self._lock).
        self._hw_waiters: HwWaiters[Log] = HwWaiters(self, f"{topic}-{partition}")
        # Producer state and its .snapshot files (protected by self._lock).
        self._pstate = ProducerSnapshots(directory, f"{topic}-{partition}", producer_id_expiration_ms)
        self._unflushed_messages = 0
        self._last_flush = time.monotonic()
        self.retention_guard: RetentionGuard | None = None
        self.append_guard: AppendGuard | None = None
        # Told of every I/O failure of a write, fsync or roll (hot.disk_health: disk full).
        self.storage_error_listener: StorageErrorListener | None = None
        self.roll_listener: RollListener | None = None  # under the lock, after each roll
        # Compaction (hot.cleaner). With a cleaner attached, a compacted tiered log uploads
        # only cleaned segments, and the cleaner never rewrites one handed to the uploader.
        self.cleaner_attached = False
        self._handoff = SegmentHandoff(self._local)  # first dirty offset, upload floor

    # --- opening and recovery ------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | Path,
        config: LogConfig,
        *,
        topic: str,
        partition: int,
        flusher: GroupCommitter | None = None,
        clean_shutdown: bool = False,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        hw_managed_externally: bool = False,
        high_watermark: int | None = None,
    ) -> Log:
        """Open (creating if needed) and, after an unclean shutdown, recover a partition:
        segments by ``hot.log_loader.load_segments``, then producer state, leader epochs
        and the high watermark by ``hot.log_loader.restore_state`` (what each step does
        and how a crash is handled: there).

        ``flusher`` is asked to flush the log after every append in fsync mode (and in
        interval mode when flush.messages is reached); without one the caller must call
        ``flush()`` for the high watermark to move in fsync mode.
        """
        d = str(directory)
        loaded = load_segments(d, config, clean_shutdown=clean_shutdown)
        try:
            log = cls(
                d,
                config,
                topic=topic,
                partition=partition,
                flusher=flusher,
                segments=loaded.segments,
                log_start_offset=loaded.log_start_offset,
                producer_id_expiration_ms=producer_id_expiration_ms,
                hw_managed_externally=hw_managed_externally,
            )
            restore_state(log, loaded, high_watermark if hw_managed_externally else None)
            return log
        except BaseException:
            for s in loaded.segments:
                s.close_quietly()
            raise

    @classmethod
    def create_at(
        cls,
        directory: str | Path,
        config: LogConfig,
        *,
        topic: str,
        partition: int,
        log_start_offset: int,
        next_offset: int,
        flusher: GroupCommitter | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        hw_managed_externally: bool = False,
    ) -> Log:
        """Create a new, empty partition whose offsets [log_start_offset, next_offset) live
        only in the object store (restore): its one segment starts at ``next_offset``, so
        appends continue there and reads below it go remote.

        The directory is built under a ``*-delete`` name and renamed into place, so a crash
        half-way leaves either nothing (a leftover the manager removes) or the whole log.
        A replicated log (``hw_managed_externally``) starts with its high watermark at
        ``next_offset``: everything in the object store was committed.
        """
        if not 0 <= log_start_offset <= next_offset:
            raise InvalidRequestError(
                f"cannot create {topic}-{partition}: log start offset {log_start_offset} "
                f"must be in [0, next offset {next_offset}]"
            )
        d = str(directory)
        create_directory_at(d, config, log_start_offset=log_start_offset, next_offset=next_offset)
        return cls.open(
            d,
            config,
            topic=topic,
            partition=partition,
            flusher=flusher,
            clean_shutdown=False,
            producer_id_expiration_ms=producer_id_expiration_ms,
            hw_managed_externally=hw_managed_externally,
            high_watermark=next_offset,
        )

    # --- properties ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self._config = config
            self._local.update_config(config)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        return self._local_log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def hw_managed_externally(self) -> bool:
        """Replicated mode: only ``set_high_watermark`` (and truncation) move the HW."""
        return self._hw_external

    @property
    def size(self) -> int:
        with self._lock:
            return sum(s.size for s in self._local.segments)

    @property
    def is_online(self) -> bool:
        return self._offline is None and not self._closed

    @property
    def offline_error(self) -> StorageError | None:
        return self._offline

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def active_segment(self) -> Segment:
        return self._local.active

    def segments(self) -> list[Segment]:
        """Snapshot of the segments, oldest first (the last one is the active segment)."""
        with self._lock:
            return list(self._local.segments)

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, start={self._log_start_offset}, hw={self._hw}, "
            f"end={self.log_end_offset}, segments={len(self._local.segments)})"
        )

    # --- state checks ------------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._offline is not None:
            raise StorageError(f"log {self.name} is offline: {self._offline}")
        if self._closed:
            raise LogClosedError(f"log {self.name} is closed")

    def _go_offline(self, error: StorageError) -> None:
        """Refuse the partition from now on (fsync failure, corruption found on a read)."""
        with self._lock:
            if self._offline is not None:
                return
            self._offline = error
            waiters = self._hw_waiters.take_all_locked()
        logger.error("log %s taken offline: %s", self.name, error)
        self._report_storage_error(error)
        HwWaiters.fail(waiters, lambda: StorageError(f"log {self.name} is offline: {error}"))
        self._hw_waiters.notify()

    def _report_storage_error(self, error: StorageError) -> None:
        listener = self.storage_error_listener
        if listener is not None:
            try:
                listener(error)
            except Exception:
                logger.exception("storage error listener of %s failed", self.name)

    # --- high watermark --------------------------------------------------------------------------

    def add_hw_listener(self, callback: HwListener, gate: Container[int] | None = None) -> None:
        """``callback(log)`` runs on whatever thread advanced the high watermark, each time
        it advances, when the log start offset rises (DeleteRecords, retention), and when
        the log goes offline or closes. It must be quick and never
        block (e.g. ``loop.call_soon_threadsafe``): it normally runs outside the log's
        lock, but not when a failure found under the lock takes the log offline or the
        log start offset rises.

        ``gate``: where the listener acts only while ``id(log)`` is in it (a read path's
        parked fetches), so that an append of a replicated log led alone may skip telling
        it (hot.log_write ``after_append``); it is still told of every other move."""
        with self._lock:
            self._hw_waiters.add_listener_locked(callback, gate)

    def remove_hw_listener(self, callback: HwListener) -> None:
        with self._lock:
            self._hw_waiters.remove_listener_locked(callback)

    def high_watermark_future(self, offset: int) -> Future[None]:
        """Completed once ``high_watermark >= offset``; failed with StorageError if the log
        goes offline (fsync failure) and LogClosedError if it is closed first."""
        fut: Future[None] = Future()
        with self._lock:
            if self._hw >= offset:
                fut.set_result(None)
            elif self._offline is not None:
                fut.set_exception(StorageError(f"log {self.name} is offline: {self._offline}"))
            elif self._closed:
                fut.set_exception(LogClosedError(f"log {self.name} is closed"))
            else:
                self._hw_waiters.wait_locked(offset, fut)
        return fut

    def set_high_watermark(self, hw: int) -> int:
        """Replicated mode: raise the high watermark to ``min(hw, log end offset)``; never
        lowers it (only truncation does). Completes ``high_watermark_future``s and notifies
        the listeners when it moved. Returns the high watermark now in effect.

        A leader passes the minimum log end offset over its in-sync replicas, a follower
        the leader's high watermark. InvalidRequestError on a log that manages its own
        high watermark (single node)."""
        with self._lock:
            self._check_usable()
            if not self._hw_external:
                raise InvalidRequestError(
                    f"{self.name} advances its own high watermark (not opened with hw_managed_externally)"
                )
            before = self._hw
            done = self._advance_hw_locked(min(hw, self.log_end_offset))
            now = self._hw
        if now != before:
            self._fire(done)
        return now

    def _advance_hw_locked(self, hw: int) -> list[Future[None]]:
        """Raise the HW (under the lock); returns the futures to complete after unlocking."""
        if hw <= self._hw:
            return []
        self._hw = hw
        return self._hw_waiters.reached_locked(hw)

    def _fire(self, done: list[Future[None]]) -> None:
        self._hw_waiters.fire(done)

    # --- leader epochs ----------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        """The highest leader epoch in the epoch cache, -1 if none."""
        with self._lock:
            return self._epochs.latest_epoch

    def leader_epochs(self) -> tuple[EpochEntry, ...]:
        """The leader-epoch cache: (epoch, start offset) entries, ascending."""
        with self._lock:
            return self._epochs.entries()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``epoch``, its end offset), where the end
        of the latest epoch is the log end offset; (-1, -1) if undefined. Exact rules in
        ``hot.leader_epoch.end_offset_for`` (KIP-101 / KIP-279)."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch the batch holding ``offset`` was written in, -1 if unknown."""
        with self._lock:
            return self._epochs.epoch_for_offset(offset)

    def assign_leader_epoch(self, epoch: int) -> None:
        """This replica becomes leader in ``epoch``: record that the epoch starts at the
        current log end, before anything is appended in it (Kafka's makeLeader). Without
        it a new leader could not answer OffsetForLeaderEpoch for the epochs between its
        last batch and its own (KIP-279's fast back-to-back failovers). No-op if ``epoch``
        is already the latest; FencedLeaderEpochError if the log holds a later one. The
        entry starts at the log end, so its file write waits for the recovery point's
        ``sync`` (``LeaderEpochCache.assign`` with ``defer``: no file created per new
        leader)."""
        with self._lock:
            self._check_usable()
            self._assign_epoch_locked(epoch, self.log_end_offset, leader=True, defer=True)

    def _assign_epoch_locked(
        self, epoch: int, start_offset: int, *, leader: bool, defer: bool = False
    ) -> None:
        if leader and epoch < self._epochs.latest_epoch:
            raise FencedLeaderEpochError(
                f"{self.name}: leader epoch {epoch} is older than epoch {self._epochs.latest_epoch} "
                "already in the log"
            )
        try:
            self._epochs.assign(epoch, start_offset, defer=defer)
        except StorageError as e:
            self._go_offline(e)
            raise

    # --- appending ---------------------------------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        now_ms: int | None = None,
        transactional: bool = False,
        origin_coordinator: bool = False,
        verification: Mapping[int, VerificationGuard] | None = None,
    ) -> AppendInfo:
        """Append producer batches as leader: assign offsets from the log end, stamp
        ``leader_epoch``, check the producers (idempotence, ``transactional``,
        ``origin_coordinator``, ``verification``) atomically with the write. The rules,
        and what each refusal raises: hot.leader_append."""
        return leader_append.append_as_leader(
            self,
            data,
            leader_epoch=leader_epoch,
            now_ms=now_ms,
            transactional=transactional,
            origin_coordinator=origin_coordinator,
            verification=verification,
        )

    def start_txn_verification(self, producer_id: int, epoch: int) -> VerificationGuard | None:
        """The guard to verify the producer's next transactional batch with, None when its
        transaction is already ongoing here in ``epoch`` (hot.producer_state)."""
        with self._lock:
            return self._pstate.state.start_verification(producer_id, epoch, time.time_ns() // 1_000_000)

    def append_marker(
        self,
        producer_id: int,
        epoch: int,
        kind: ControlType,
        coordinator_epoch: int,
        *,
        leader_epoch: int = 0,
        now_ms: int | None = None,
    ) -> AppendInfo:
        """The coordinator's append (WriteTxnMarkers, origin COORDINATOR): one COMMIT or
        ABORT marker ending the producer's transaction here (rules: hot.producer_state;
        files: hot.log_txn). ``leader_epoch`` and ``now_ms`` as for ``append``."""
        return log_txn.append_marker(
            self, producer_id, epoch, kind, coordinator_epoch, leader_epoch=leader_epoch, now_ms=now_ms
        )

    def append_as_follower(
        self, data: bytes | bytearray | memoryview, *, now_ms: int | None = None, roll: bool | None = None
    ) -> AppendInfo:
        """Append batches that already carry their offsets (replication; hot.follower_append).

        The first batch must start at the log end and each next one where the previous
        ended (InvalidRecordError "non-monotonic offsets" otherwise), except on a compacted
        topic (``cleanup.policy`` with ``compact``): a leader's cleaner leaves offset gaps
        between batches, which a follower catching up copies as they are, so there a
        batch may start after the log end or the previous batch (never before). Anywhere
        else a gap means corruption and is refused. Bytes are written
        unchanged (leader epochs and timestamps included). Each batch whose
        partitionLeaderEpoch (when >= 0) differs from the latest cached epoch is recorded
        in the leader-epoch cache before anything is written (Kafka's assign).

        ``roll``: None rolls by this log's own rules (size, age); True starts a new
        segment first (unless the active one is empty); False does not roll (unless the
        offsets would not fit the active segment's index), so a replica can cut its
        segments exactly where its leader's begin.
        """
        return follower_append.append_as_follower(self, data, now_ms=now_ms, roll=roll)

    # --- rolling -------------------------------------------------------------------------------

    def roll(self) -> Segment:
        """Start a new active segment (no-op if the active one is empty); returns it."""
        with self._lock:
            self._check_usable()
            if self._local.active.is_empty:
                return self._local.active
            seg, done = log_write.roll_locked(self)
        if done:
            self._fire(done)
        return seg

    def roll_if_older_than(self, max_age_ms: int, now_ms: int) -> bool:
        """Roll if the active segment holds data whose first append was at least
        ``max_age_ms`` before ``now_ms`` (``Segment.created_ms``, the clock ``segment.ms``
        uses; after a restart the file's mtime). An empty active segment never rolls, so a
        quiet log rolls at most once per ``max_age_ms``. Returns whether it rolled."""
        with self._lock:
            self._check_usable()
            seg = self._local.active
            if seg.is_empty or seg.created_ms is None or now_ms - seg.created_ms < max_age_ms:
                return False
            _, done = log_write.roll_locked(self)
        if done:
            self._fire(done)
        return True

    # --- flushing ------------------------------------------------------------------------------

    def flush(self) -> int:
        """fsync everything appended so far (one fsync per dirty segment covers every batch
        since the last flush: group commit); advance the recovery point and, in fsync
        mode, the high watermark. Returns the recovery point. A failure takes the log
        offline. (hot.log_write.flush)"""
        return log_write.flush(self)

    def flush_due(self) -> float | None:
        """Monotonic time at which flush.ms requires a flush (interval mode), None if never."""
        cfg = self._config
        if cfg.fsync_mode or cfg.flush_ms >= (1 << 62) or self._unflushed_messages == 0 or not self.is_online:
            return None
        return self._last_flush + cfg.flush_ms / 1000.0

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    # --- reading -----------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True
    ) -> ReadResult:
        """Whole batches from the one holding ``offset``, only those entirely below
        ``max_offset`` (default: the high watermark), at most ``max_bytes`` in total except
        that with ``min_one`` the first batch is returned even if larger (KIP-74).

        An offset inside a batch returns that whole batch (clients skip the records before
        it). An offset in [log start offset, local log start offset) is
        OffsetMovedToTieredStorageError (read it from the object store); any other
        ``offset`` outside [log start offset, log end offset] is OffsetOutOfRangeError;
        from the high watermark up to the log end the result is empty. A batch header that
        cannot be valid is CorruptLogError and takes the log offline.
        """
        with self._lock:
            self._check_usable()
            leo = self.log_end_offset
            lso = self._log_start_offset
            hw = self._hw
            if lso <= offset < self._local_log_start_offset:
                raise OffsetMovedToTieredStorageError(offset, self._local_log_start_offset)
            if offset < lso or offset > leo:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range for {self.name}: log start offset {lso}, "
                    f"log end offset {leo}"
                )
            limit = hw if max_offset is None else min(max_offset, leo)
            try:
                regions, first, nxt = self._local.read_locked(offset, max_bytes, limit, min_one)
            except CorruptLogError as e:
                self._go_offline(e)
                raise
            return ReadResult(
                regions=tuple(regions),
                size=sum(r.length for r in regions),
                first_offset=first,
                next_offset=nxt,
                high_watermark=hw,
                log_start_offset=lso,
                log_end_offset=leo,
            )

    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first local record at or above the log start offset whose
        timestamp is >= ``timestamp`` and whose offset is below ``max_offset`` (default:
        the high watermark); None if there is none (Kafka ListOffsets by timestamp).

        The time index and batch maxTimestamp locate the batch; that batch is decoded to
        find the exact record. If it cannot be decoded (e.g. a producer's broken
        compression, which appends never inspect) the batch's base offset and
        maxTimestamp are returned instead. Only local segments are searched: offsets below
        the local log start offset are the remote reader's business.
        """
        with self._lock:
            self._check_usable()
            limit = self._hw if max_offset is None else min(max_offset, self.log_end_offset)
            try:
                return self._local.offset_for_timestamp_locked(timestamp, self._local_log_start_offset, limit)
            except CorruptLogError as e:
                self._go_offline(e)
                raise

    # --- retention and truncation ------------------------------------------------------------------

    def apply_retention(
        self, now_ms: int | None = None, *, unless: Callable[[Log], bool] | None = None
    ) -> list[int]:
        """Delete whole sealed segments (never the active one) that are entirely below the
        high watermark and either entirely below the log start offset, older than
        retention.ms (by max timestamp, or mtime if none), or removable while keeping at
        least retention.bytes (Kafka's rule: delete the oldest segment while the log minus
        that segment is still >= retention.bytes). Deletion stops at the first segment
        that does not qualify, or that ``retention_guard`` (tiering: "uploaded yet?")
        refuses; nothing when ``unless(log)`` holds under the log's lock (an owner elsewhere).
        Advances and persists the log start offset. Returns the deleted bases.
        """
        return log_start.apply_retention(self, now_ms, unless)

    def apply_local_retention(self, now_ms: int, is_uploaded: RetentionGuard) -> list[int]:
        """Local retention of a tiered log: delete whole sealed segments (never the active
        one), entirely below the high watermark, oldest first, that are entirely below the
        log start offset, or that ``is_uploaded`` (COPIED in the manifest) and exceed
        local.retention.ms (by max timestamp, or mtime if none) or local.retention.bytes
        (Kafka's rule, as in ``apply_retention``). Stops at the first segment that does not
        qualify, so local data stays contiguous. Only the local log start offset moves:
        the deleted offsets stay readable from the object store.

        ``is_uploaded`` is called under the log's lock: it must only look at memory.
        Returns the deleted bases.
        """
        return log_start.apply_local_retention(self, now_ms, is_uploaded)

    def advance_log_start_offset(self, offset: int) -> None:
        """Move the log start offset up to ``offset`` (total retention of remote data,
        DeleteRecords); never backwards, never past the high watermark. Local segments that
        end up entirely below it are removed by the next (local) retention pass. Durable
        when this returns (hot.log_start)."""
        with self._lock:
            self._check_usable()
            log_start.advance_locked(self, offset)

    def sealed_segments_for_upload(self, max_offset: int, *, from_offset: int = 0) -> list[Segment]:
        """Sealed, non-empty segments whose offsets are all below both ``max_offset`` and
        the high watermark and that end after ``from_offset``, oldest first (what tiered
        storage may upload). The active segment is never included."""
        with self._lock:
            limit = min(max_offset, self._hw)
            if self.upload_waits_for_cleaner:
                limit = min(limit, self._handoff.first_dirty)
            return self._handoff.for_upload_locked(limit, from_offset)

    # --- compaction (hot.cleaner) ---------------------------------------------------------------

    @property
    def upload_waits_for_cleaner(self) -> bool:
        """A compacted tiered log with a cleaner: only cleaned segments are uploaded (those
        below ``first_dirty_offset``), so the bucket gets compacted data and the cleaner
        never rewrites a segment the uploader may be reading."""
        return self._handoff.upload_waits(self.cleaner_attached)

    @property
    def first_dirty_offset(self) -> int:
        """Segments from this offset on were never cleaned (``cleaner-offset-checkpoint``)."""
        return self._handoff.first_dirty

    def set_first_dirty_offset(self, offset: int) -> None:
        """Persist the cleaner's progress (atomic, durable). Segments below it may hold offset
        gaps: open lets their batches skip offsets (``Segment.compacted``)."""
        with self._lock:
            self._handoff.set_first_dirty_locked(offset)

    def cleaner_view(self, now_ms: int) -> CleanerView:
        """The cleanable segments: sealed, entirely below the high watermark and the first
        unstable offset, newest record older than min.compaction.lag.ms, not handed to the
        uploader; oldest first, stopping at the first that does not qualify."""
        with self._lock:
            return self._handoff.cleaner_view_locked(
                now_ms,
                self._hw,
                self._log_start_offset,
                self._pstate.state,
                self.upload_waits_for_cleaner,
                log_txn.first_unstable_offset_locked(self),
            )

    def replace_segments(self, old: Sequence[Segment], cleaned: Segment) -> bool:
        """Swap ``cleaned`` (sealed and closed ``<B>.*.cleaned`` files, B = old[0]'s base)
        in for the consecutive sealed segments ``old``; False (nothing changed) if ``old``
        are no longer exactly those segments (retention, truncation, a concurrent clean).

        Crash-safe order: rename ``.index.cleaned``, ``.timeindex.cleaned``, then
        ``.log.cleaned`` to ``.swap`` and fsync the directory (the commit point: ``open``
        completes a swap whose ``.log.swap`` exists, and discards one whose does not);
        delete the old segments; rename the ``.swap`` files into place (``.log`` last);
        fsync the directory. Offsets, high watermark, log start offset and recovery point
        do not change. Fetches holding regions of the old files keep reading them."""
        with self._flush_lock, self._lock:
            if not self.is_online or not old:
                return False
            i = self._local.find_run_locked(old)
            if i is None:
                return False
            # First: the checkpoint tells open that these offsets may hold gaps.
            self.set_first_dirty_offset(old[-1].next_offset)
            self._local.commit_swap_locked(old[0].base_offset)
            try:
                self._local.finish_swap_locked(i, old)
            except StorageError as e:
                self._go_offline(e)
                raise
            return True

    def delete_records(self, offset: int) -> int:
        """Kafka DeleteRecords: move the log start offset up to ``offset`` (-1 = high
        watermark), which must not exceed the high watermark. Segments entirely below it
        are removed by the next retention pass. Returns the new log start offset."""
        with self._lock:
            self._check_usable()
            return log_start.delete_records_locked(self, offset)

    def _persist_log_start_offset(self) -> None:
        self._local.write_offset_file(LOG_START_OFFSET_FILE, self._log_start_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after the batch holding ``offset`` (follower truncation,
        Kafka's truncateTo). The log end becomes that batch's base offset; the high
        watermark and recovery point come down to it if above; the leader-epoch cache
        loses the epochs starting there or later; producer state is rebuilt from the
        latest snapshot at or below the new end plus the batches after it. At or beyond
        the log end only an epoch entry starting at the log end is dropped (a leader's that
        never wrote in its epoch). At or below the first local segment's base, or
        below the log start offset, the log is emptied and restarts at ``offset``
        (``truncate_fully_and_start_at``). Durable when this returns; a crash part-way
        leaves a prefix of the old log (hot.log_truncation). A failure takes the log offline.
        """
        if offset < 0:
            raise InvalidRequestError(f"cannot truncate {self.name} to negative offset {offset}")
        with self._flush_lock, self._lock:
            self._check_usable()
            done = log_truncation.truncate_to_locked(self, offset)
        if done:
            self._fire(done)

    def truncate_fully_and_start_at(self, offset: int, *, log_start_offset: int | None = None) -> None:
        """Delete every segment and restart the log empty at ``offset`` (Kafka's
        truncateFullyAndStartAt: a follower whose log ended below the leader's log start,
        or whose fetch offset moved to tiered storage). The log start offset becomes
        ``log_start_offset`` (default ``offset``; lower when [log_start_offset, offset)
        lives in the object store). The high watermark and recovery point become
        ``offset``; epochs and producer state are cleared. Durable when this returns; a
        crash part-way leaves a prefix of the old log or an empty one (hot.log_truncation).
        """
        lso = offset if log_start_offset is None else log_start_offset
        if not 0 <= lso <= offset:
            raise InvalidRequestError(
                f"cannot restart {self.name} at {offset} with log start offset {lso}: "
                "need 0 <= log start offset <= offset"
            )
        with self._flush_lock, self._lock:
            self._check_usable()
            done = log_truncation.truncate_fully_locked(self, offset, lso)
        if done:
            self._fire(done)

    # --- transactions (hot.log_txn) ----------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest transaction ongoing or not yet replicated, or None."""
        with self._lock:
            return log_txn.first_unstable_offset_locked(self)

    @property
    def last_stable_offset(self) -> int:
        """LSO = min(first unstable offset, high watermark): read_committed reads below it."""
        if self._pstate.state.all_stable:
            # Every fetch answers the LSO: without transactions it is the HW, read without
            # the lock like ``high_watermark`` (a transaction starting meanwhile is an
            # append this read precedes).
            return self._hw
        with self._lock:
            return log_txn.last_stable_offset_locked(self)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The local aborted transactions overlapping [start_offset, upper_bound_offset), in
        marker order (Kafka's collectAbortedTransactions, stopping as early as it does)."""
        with self._lock:
            return log_txn.collect_aborted_locked(self._local, start_offset, upper_bound_offset)

    # --- producer state ------------------------------------------------------------------------------

    def producer_snapshot_path(self, offset: int) -> str:
        """Path of the producer-state snapshot as of ``offset`` (it may not exist)."""
        return self._pstate.path(offset)

    def producer_snapshots(self) -> list[int]:
        """Offsets of the producer-state snapshots on disk, ascending."""
        with self._lock:
            return self._pstate.offsets_locked()

    def producer_snapshot_after(self, segment: Segment) -> str | None:
        """The snapshot of the producer state right after ``segment`` (named by its next
        offset, i.e. the next segment's base), None if there is none (e.g. the active
        segment). Tiered storage uploads it with the segment, as Kafka's RemoteLogManager does."""
        with self._lock:
            return self._pstate.path_at_locked(segment.next_offset)

    def producer_entries(self) -> dict[int, ProducerEntry]:
        """A copy of the producer state: producer id -> entry."""
        with self._lock:
            return self._pstate.state.entries()

    def max_producer_id(self) -> int:
        """The highest producer id in the state, -1 if none (producer id allocation floor)."""
        with self._lock:
            return self._pstate.state.max_producer_id()

    # --- closing -------------------------------------------------------------------------------------

    def close(self, clean: bool = True) -> None:
        """Close the log. ``clean``: flush everything and persist the recovery point first
        (what a clean shutdown needs); otherwise just release the files. Waiting futures
        fail with LogClosedError. Regions already handed out stay readable."""
        done: list[Future[None]] = []
        with self._flush_lock, self._lock:
            if self._closed:
                return
            try:
                if clean and self._offline is None:
                    self._local.flush_for_close_locked()
                    self._local.recovery_point = self.log_end_offset
                    if not self._hw_external:
                        done = self._advance_hw_locked(self._local.recovery_point)
                    self._local.persist_recovery_point()
                    # The next open loads this and scans nothing.
                    self._pstate.take_locked(self.log_end_offset, self._local.active.base_offset)
            finally:
                self._closed = True
                self._local.close_segments(clean and self._offline is None)
                waiters = self._hw_waiters.take_all_locked()
        HwWaiters.complete(done)  # made durable by the final flush
        HwWaiters.fail(waiters, lambda: LogClosedError(f"log {self.name} was closed"))
        self._hw_waiters.notify()

    def delete(self) -> None:
        """Close and remove the partition directory (renamed to ``*-delete`` first, so a
        crash half-way leaves a name the manager recognizes and removes)."""
        self.close(clean=False)
        self._local.delete_directory()


__all__ = [
    "CLEANED_SUFFIX",
    "CLEANER_CHECKPOINT_FILE",
    "LOG_START_OFFSET_FILE",
    "RECOVERY_POINT_FILE",
    "AppendGuard",
    "AppendInfo",
    "CleanerView",
    "Log",
    "ReadResult",
    "TimestampType",
    "atomic_write",
    "fsync_dir",
    "read_offset_file",
    "segment_name",
]
