"""One log's idempotent-producer state together with its ``.snapshot`` files.

The state's rules and the file format are ``hot.producer_state``; this is the part of
Kafka's ProducerStateManager that owns the snapshot files of a partition directory:
which exist, writing one at a roll and at clean close, deleting them with the data they
describe, and rebuilding the state at open and after truncation (latest valid snapshot
at or below the log end plus a header scan of the batches after it). It also records the
transactions that markers complete (``complete_txns_locked``): each aborted one is an
entry of the transaction index (hot.txn_index) of the segment holding its marker, which
recovery rebuilds the same way (``load_locked`` with ``rebuild``).

Files: ``<dir>/<20-digit offset>.snapshot`` (hot.producer_state.ProducerSnapshotFile),
the state as of that offset. Locking: none of its own; the owning ``hot.log.Log`` calls
every ``*_locked`` method with ``Log._lock`` held. Snapshot write failures are logged,
not raised: a missing snapshot only costs a longer scan at the next open.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from hot.errors import CorruptLogError, StorageError
from hot.local_log import LocalLog
from hot.producer_state import (
    CompletedTxn,
    ProducerEntry,
    ProducerSnapshotFile,
    ProducerStateManager,
    snapshot_name,
)
from hot.records import ControlType
from hot.txn_index import AbortedTxn

if TYPE_CHECKING:
    from hot.segment import Segment

# The log's own logger: operators and tests filter the partition's messages on it.
logger = logging.getLogger("hot.log")


class ProducerBatch(Protocol):
    """The header fields of a stored batch that producer state replays."""

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def control_type(self) -> int: ...  # 0 ABORT, 1 COMMIT, -1 not a transaction marker
    @property
    def coordinator_epoch(self) -> int: ...


class ProducerSnapshots:
    """The producer state (``state``) of one partition and the offsets of its snapshot files."""

    def __init__(self, directory: str, name: str, expiration_ms: int) -> None:
        self._dir = directory
        self._name = name
        self.state = ProducerStateManager(expiration_ms)
        self._offsets: list[int] = []  # offsets of the .snapshot files, ascending

    def path(self, offset: int) -> str:
        """Path of the snapshot as of ``offset`` (it may not exist)."""
        return os.path.join(self._dir, snapshot_name(offset))

    def offsets_locked(self) -> list[int]:
        """Offsets of the snapshots on disk, ascending (a copy)."""
        return list(self._offsets)

    def set_offsets_locked(self, offsets: list[int]) -> None:
        """The snapshots found by the loader (ascending), before ``load_locked``."""
        self._offsets = list(offsets)

    def path_at_locked(self, offset: int) -> str | None:
        """The snapshot named by exactly ``offset``, None if there is none."""
        i = bisect.bisect_left(self._offsets, offset)
        if i < len(self._offsets) and self._offsets[i] == offset:
            return self.path(offset)
        return None

    def take_locked(self, offset: int, active_base: int, *, sync_dir: bool = True) -> None:
        """Write the state as of ``offset`` (the current log end), then delete the
        snapshots it supersedes: those inside the active segment starting at
        ``active_base`` (earlier clean closes)."""
        self.state.remove_expired(time.time_ns() // 1_000_000)
        path = self.path(offset)
        try:
            ProducerSnapshotFile.write(path, offset, self.state.entries().values(), sync_dir=sync_dir)
        except StorageError as e:
            logger.warning("cannot write producer snapshot %s: %s", path, e)
            return
        i = bisect.bisect_left(self._offsets, offset)
        if i == len(self._offsets) or self._offsets[i] != offset:
            self._offsets.insert(i, offset)
        try:
            self.delete_locked(lambda o: active_base < o < offset)
        except StorageError as e:
            logger.warning("cannot delete old producer snapshots of %s: %s", self._name, e)

    def delete_locked(self, doomed: Callable[[int], bool]) -> bool:
        """Delete the snapshots whose offset ``doomed`` selects; True if any. The caller
        fsyncs the directory when the deletion must be durable."""
        gone = [o for o in self._offsets if doomed(o)]
        for o in gone:
            ProducerSnapshotFile.delete(self.path(o))
            self._offsets.remove(o)
        return bool(gone)

    def delete_below_locked(self, offset: int) -> None:
        """Retention: delete the snapshots below ``offset`` except the newest one."""
        newest = self._offsets[-1] if self._offsets else None
        self.delete_locked(lambda o: o < offset and o != newest)

    def load_locked(self, local: LocalLog, log_start_offset: int, rebuild: Sequence[Segment] = ()) -> None:
        """Rebuild the state for ``local``'s segments (open, truncation): drop snapshots
        above the log end, load the latest valid one, replay the headers after it. A
        damaged snapshot is deleted and the next older one (or the log) used.

        ``rebuild`` (open after recovery): segments whose transaction index is rebuilt
        from the log. Each is emptied, the replay starts at the latest snapshot at or
        below the first one's base (so the transactions ongoing there are known), and
        the markers found in them write their aborted transactions again, with the LSO
        the replayed state gives, as when they were appended (Kafka's recoverSegment)."""
        now = time.time_ns() // 1_000_000
        leo = local.log_end_offset
        removed = self.delete_locked(lambda o: o > leo)
        for seg in rebuild:
            seg.txn_index.reset()
        limit = min((s.base_offset for s in rebuild), default=leo)
        entries: list[ProducerEntry] = []
        start = local.segments[0].base_offset
        for off in reversed(list(self._offsets)):
            if off > limit:
                continue
            path = self.path(off)
            try:
                entries = ProducerSnapshotFile.read(path, off)
            except CorruptLogError as e:
                logger.warning("ignoring damaged producer snapshot: %s", e)
                ProducerSnapshotFile.delete(path)
                self._offsets.remove(off)
                removed = True
                continue
            start = max(start, off)
            break
        self.state.load(entries, now)
        scanned = self._replay_locked(local, start, now, rebuild)
        self.state.evict_below(log_start_offset)
        for seg in rebuild:
            # Durable before the recovery point moves past them: later opens trust them.
            seg.txn_index.fsync()
        if removed or rebuild:
            local.sync_dir()
        if scanned:
            self.take_locked(leo, local.active.base_offset)

    def _replay_locked(self, local: LocalLog, start: int, now_ms: int, rebuild: Sequence[Segment]) -> bool:
        """Apply the producer batches from offset ``start`` to the log end (headers only;
        markers decoded), writing the transaction index of the ``rebuild`` segments."""
        if start >= local.log_end_offset:
            return False
        for seg in local.segments[local.segment_index(start) :]:
            if seg.next_offset <= start:
                continue
            pos = 0
            if start > seg.base_offset:
                found = seg.find_batch(start)
                if found is None:
                    continue
                pos = found.position
            index = seg if any(seg is r for r in rebuild) else None
            self.replay_locked(seg.iter_producer_batches(pos), now_ms, index)
        return True

    def replay_locked(self, batches: Iterable[ProducerBatch], now_ms: int, segment: Segment | None) -> None:
        """Apply stored producer batches (recovery, and a follower's appends) to the state,
        one at a time in log order. Transactions completed by markers are recorded
        (``complete_txns_locked``) in ``segment``'s transaction index (None: the index
        already has them, e.g. a replay after truncation)."""
        state = self.state
        for b in batches:
            if not b.is_control:
                state.replay(
                    b.producer_id,
                    b.producer_epoch,
                    b.base_sequence,
                    b.last_offset_delta,
                    b.base_offset,
                    b.max_timestamp,
                    now_ms,
                    b.is_transactional,
                )
                continue
            if b.control_type not in (ControlType.ABORT, ControlType.COMMIT):
                continue  # not a transaction marker: no producer state
            done = state.replay_marker(
                b.producer_id,
                b.producer_epoch,
                b.control_type == ControlType.ABORT,
                b.coordinator_epoch,
                b.base_offset,
                now_ms,
            )
            if done is not None:
                self.complete_txns_locked(segment, (done,))

    def complete_txns_locked(self, segment: Segment | None, completed: Iterable[CompletedTxn]) -> None:
        """Record transactions whose markers were just written to ``segment``: each aborted
        one becomes an entry of its transaction index (with the LSO as of its marker:
        ``ProducerStateManager.last_stable_offset_of``), then each stops being ongoing.
        StorageError if the index cannot be written (the caller takes the log offline)."""
        state = self.state
        for txn in completed:
            if txn.is_aborted and segment is not None:
                lso = state.last_stable_offset_of(txn)
                segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
            state.complete_txn(txn)


__all__ = ["ProducerSnapshots"]
