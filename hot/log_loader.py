"""Opening a partition directory: load or recover its segments (Kafka's ``LogLoader``).

``load_segments`` runs once, from ``hot.log.Log.open``, before the ``Log`` exists, and
hands back what it found (``LoadedSegments``); ``load_leader_epochs`` then builds the
epoch cache for the loaded segments. The producer state is rebuilt by the ``Log`` itself
(``hot.producer_snapshots``), because follower truncation rebuilds it the same way.
``create_directory_at`` builds the directory of a partition that starts past offsets
held only in the object store (``Log.create_at``).

Files it reads, repairs or removes (what each holds: hot.log, hot.local_log)::

    <B>.log/.index/.timeindex    segments: validated from the recovery point on after an
                                 unclean shutdown; a torn tail of the LAST segment is cut,
                                 damage anywhere else is CorruptLogError
    <B>.txnindex                 aborted transactions: rebuilt from the log (by the Log's
                                 producer-state load, which knows the transactions ongoing
                                 at the segment's start) for every recovered segment, and
                                 for a trusted one whose index is damaged (a torn entry,
                                 entries out of order or outside it); a missing one below
                                 the recovery point means "no aborted transaction", as in Kafka
    <B>.log.swap (+ indexes)     a committed cleaner swap: completed (``complete_swaps``)
    *.tmp .deleted .cleaned .swap, an index without its .log   strays: removed, one WARNING each
    recovery-point, log-start-offset, cleaner-offset-checkpoint   read (``read_offset_file``)
    <offset>.snapshot            listed; those above the log end are discarded (WARNING)
    leader-epoch-checkpoint      cut to the log, or rebuilt from the batch headers

Crash behaviour: every repair is durable before the log is served (recovered segments are
fsynced, removals and renames are followed by a directory fsync), and loading again after
a crash during loading finds the same or an already repaired directory.

Locking: none. Nothing else can see the directory while it is loaded.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import shutil
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from core import disk
from hot.batch import LOG_OVERHEAD, MIN_BATCH_LENGTH
from hot.config import LogConfig
from hot.errors import CorruptLogError, StorageError
from hot.leader_epoch import CHECKPOINT_FILE as LEADER_EPOCH_FILE
from hot.leader_epoch import LeaderEpochCache
from hot.local_log import (
    CLEANER_CHECKPOINT_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    STRAY_SUFFIXES,
    SWAP_SUFFIX,
    fsync_dir,
    read_offset_file,
    rename_segment_files,
    swap_names,
)
from hot.naming import delete_dir_path
from hot.producer_state import parse_snapshot_name, snapshot_name
from hot.segment import SUFFIXES, Segment, parse_segment_name

if TYPE_CHECKING:
    from hot.log import Log

logger = logging.getLogger("hot.log")  # one logger name for a partition's log, as before the split

# First 16 bytes of a batch: baseOffset, batchLength, partitionLeaderEpoch.
_PREFIX: Final = struct.Struct(">qii")
_PREFIX_SIZE: Final = 16
_EPOCH_SCAN_CHUNK: Final = 256 * 1024  # read size of the leader-epoch rebuild scan


@dataclass(frozen=True, slots=True)
class LoadedSegments:
    """What ``load_segments`` found: the segments to serve (open, oldest first, never empty)
    and the directory's bookkeeping as stored."""

    segments: list[Segment]
    # validated (and possibly cut) by this load, or with a damaged transaction index: the
    # Log rebuilds their transaction indexes
    recovered: list[Segment]
    log_start_offset: int  # stored value, else the first segment's base
    stored_recovery_point: int | None
    first_dirty: int  # cleaner-offset-checkpoint, 0 if none (not yet clamped to the log end)
    snapshots: list[int]  # offsets of the producer snapshots present, ascending


def load_segments(directory: str, config: LogConfig, *, clean_shutdown: bool) -> LoadedSegments:
    """Open (creating if needed) and, after an unclean shutdown, recover the segments of a
    partition directory (for ``hot.log.Log.open``). On failure every segment opened so far
    is closed again.

    * A cleaner swap that reached its commit point (``<B>.log.swap`` present) is
      completed first (``complete_swaps``). Then stray ``.tmp`` / ``.deleted`` /
      ``.cleaned`` / ``.swap`` files are removed (Strata only creates them
      transiently; for the cleaner's, the old segments keep serving), as are index
      files without a ``.log``. A file with a segment suffix whose name is not 20
      digits is CorruptLogError.
    * ``clean_shutdown``: every file is trusted; indexes get a sanity check (rebuilt
      from the log headers if it fails) and only the tail after the last index entry
      is scanned to find the log end.
    * Otherwise every segment from the one holding the recovery point to the end is
      validated batch by batch (CRC-32C). The first invalid batch of the LAST segment
      is a torn write: the file is truncated there (a warning names file, position
      and bytes dropped). In any earlier segment it is corruption: CorruptLogError
      naming the file and position, and nothing is served. Recovered segments are
      fsynced, so the high watermark starts at the recovered log end.
    * A ``log-start-offset`` beyond the recovered log end restarts the log empty at
      that offset (Kafka does the same).
    """
    d = directory
    try:
        created = not os.path.isdir(d)
        os.makedirs(d, exist_ok=True)
        names = os.listdir(d)
    except OSError as e:
        raise StorageError(f"cannot open log directory {d}: {e}") from e
    if created:
        fsync_dir(os.path.dirname(d) or ".")
    if any(n.endswith(SUFFIXES[0] + SWAP_SUFFIX) for n in names):
        complete_swaps(d, names, config.index_interval_bytes)
        try:
            names = os.listdir(d)
        except OSError as e:
            raise StorageError(f"cannot open log directory {d}: {e}") from e
    logs: set[int] = set()
    indexes: list[tuple[int, str]] = []
    snapshots: list[int] = []
    removed = False
    for name in names:
        path = os.path.join(d, name)
        if name.endswith(STRAY_SUFFIXES):
            _warn_discard(path, "a leftover of an interrupted operation")
            _unlink(path)
            removed = True
            continue
        snap = parse_snapshot_name(name)
        if snap is not None:
            snapshots.append(snap)
            continue
        parsed = parse_segment_name(name)
        if parsed is None:
            if name.endswith(SUFFIXES):
                raise CorruptLogError(path, 0, "segment file name is not a 20-digit base offset")
            continue
        base, suffix = parsed
        if suffix == ".log":
            logs.add(base)
        else:
            indexes.append((base, path))
    for base, path in indexes:
        if base not in logs:
            _warn_discard(path, "an index without its segment")
            _unlink(path)
            removed = True
    if removed:
        fsync_dir(d)

    lso_file = read_offset_file(os.path.join(d, LOG_START_OFFSET_FILE))
    rp_file = read_offset_file(os.path.join(d, RECOVERY_POINT_FILE))
    first_dirty = read_offset_file(os.path.join(d, CLEANER_CHECKPOINT_FILE)) or 0
    interval = config.index_interval_bytes
    segments: list[Segment] = []
    try:
        bases = sorted(logs)
        for base in bases:
            segments.append(Segment(d, base, index_interval_bytes=interval))
            # Below the cleaner checkpoint segments may have been cleaned (gaps allowed);
            # a compacted topic's replica may also have copied its leader's gaps.
            segments[-1].compacted = base < first_dirty or config.compact
        recovered = _recover(segments, clean_shutdown, rp_file or 0)
        if segments and lso_file is not None and lso_file > segments[-1].next_offset:
            logger.warning(
                "%s: log start offset %d is beyond the log end %d; starting empty there",
                d,
                lso_file,
                segments[-1].next_offset,
            )
            for s in segments:
                _warn_discard(s.log_path, f"below the log start offset {lso_file}")
                s.delete()
            segments = []
            recovered = []
        if not segments:
            segments.append(Segment(d, lso_file or 0, index_interval_bytes=interval))
            segments[-1].compacted = config.compact
            recovered.append(segments[-1])
        for s in recovered:
            s.flush()
        fsync_dir(d)
    except BaseException:
        for s in segments:
            s.close_quietly()
        raise
    leo = segments[-1].next_offset
    snapshots.sort()
    for off in snapshots:
        if off > leo:  # deleted by ProducerSnapshots.load_locked
            _warn_discard(os.path.join(d, snapshot_name(off)), f"beyond the log end {leo}")
    return LoadedSegments(
        segments=segments,
        recovered=recovered,
        # A stored log start below the first segment: the offsets in between are in
        # the object store (tiered storage; local retention keeps the log start).
        log_start_offset=lso_file if lso_file is not None else segments[0].base_offset,
        stored_recovery_point=rp_file,
        first_dirty=first_dirty,
        snapshots=snapshots,
    )


def restore_state(log: Log, loaded: LoadedSegments, high_watermark: int | None) -> None:
    """The rest of opening a log once its segments are loaded (``Log.open``):

    * Producer state: the latest valid snapshot at or below the log end plus the batch
      headers after it (``hot.producer_snapshots``; nothing to scan after a clean shutdown;
      the transaction indexes of recovered segments rebuilt).
    * Leader epochs: the checkpoint cut to the log, or rebuilt from the batch headers
      (``load_leader_epochs``).
    * ``high_watermark`` (a replicated log, ``hw_managed_externally``): the owner's
      checkpoint, clamped to [log start offset, log end offset]; the high watermark then
      moves only through ``set_high_watermark`` and truncation. None: it starts at the
      log start offset (replicated) or follows the log end.
    * The recovery point is persisted when recovery moved it.
    * The sealed segments release their ``.log`` descriptors (reopened when read).
    """
    lso = loaded.log_start_offset
    if high_watermark is not None:
        log._hw = max(lso, min(high_watermark, log.log_end_offset))
    log._pstate.set_offsets_locked(list(loaded.snapshots))
    log._handoff.first_dirty = min(loaded.first_dirty, log.log_end_offset)
    log._pstate.load_locked(log._local, lso, loaded.recovered)
    log._epochs = load_leader_epochs(log.dir, log.name, loaded.segments, loaded.recovered, lso)
    stored_rp = loaded.stored_recovery_point
    # No file means 0 (recover everything): an empty log at 0 needs none written.
    if (stored_rp if stored_rp is not None else 0) != log.log_end_offset:
        log._local.persist_recovery_point()
    for seg in log._local.segments[:-1]:
        seg.release()  # sealed: no descriptor until read (the scans above may have opened it)


def create_directory_at(
    directory: str,
    config: LogConfig,
    *,
    log_start_offset: int,
    next_offset: int,
    extra_files: Mapping[str, bytes] | None = None,
) -> None:
    """Build the directory of ``Log.create_at``: one empty segment at ``next_offset``, the
    log-start-offset and recovery-point files (and ``extra_files``: name -> content, e.g.
    the partition metadata), under a ``*-delete`` name renamed into place, so a crash
    half-way leaves either nothing (a leftover the manager removes) or the whole
    directory. The staging directory is private until the rename, so its files are
    written in place, each fsynced (one inode each instead of a temp file and a rename).
    A new log at offset 0 gets neither offset file: a missing one means 0, what each
    would hold (``load_segments``; ``restore_state`` writes no recovery point for an
    empty log at 0 either), and each file created costs this machine's kernel about a
    millisecond, a tenth of a 10,000-partition creation (issue 35).
    StorageError if it exists or cannot be built."""
    d = directory
    if os.path.exists(d):
        raise StorageError(f"cannot create {d}: it already exists")
    staging = delete_dir_path(d)  # fits NAME_MAX for every legal topic name
    files = dict(extra_files or {})
    if next_offset > 0:
        # History elsewhere (restore): the log starts at log_start_offset, not at its
        # first segment, and recovery starts at next_offset.
        files[RECOVERY_POINT_FILE] = b"%d\n" % next_offset
        files[LOG_START_OFFSET_FILE] = b"%d\n" % log_start_offset
    try:
        os.makedirs(staging)
        seg = Segment(staging, next_offset, index_interval_bytes=config.index_interval_bytes)
        try:
            seg.flush()
        finally:
            seg.close_quietly()
        for name, data in files.items():
            _write_new(os.path.join(staging, name), data)
        fsync_dir(staging)
        os.rename(staging, d)
        fsync_dir(os.path.dirname(d) or ".")
    except OSError as e:
        shutil.rmtree(staging, ignore_errors=True)
        raise StorageError(f"cannot create log directory {d}: {e}") from e
    except StorageError:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        disk.fsync(fd)
    finally:
        os.close(fd)


def complete_swaps(d: str, names: Sequence[str], index_interval_bytes: int) -> None:
    """Finish the cleaner swaps a crash interrupted (see ``Log.replace_segments``).

    ``<B>.log.swap`` exists only once the cleaned segment and its indexes were complete
    and fsynced: it replaces every segment with a base offset in [B, its next offset).
    Those are deleted, then the ``.swap`` files are renamed into place (the ``.log``
    last). Index ``.swap`` files without their ``.log.swap`` and ``.cleaned`` files
    are an unfinished clean: open removes them as strays, the old segments serve."""
    log_suffix = SUFFIXES[0]
    for name in sorted(names):
        if not name.endswith(log_suffix + SWAP_SUFFIX):
            continue
        parsed = parse_segment_name(name[: -len(SWAP_SUFFIX)])
        if parsed is None:
            continue
        base = parsed[0]
        seg = Segment(d, base, index_interval_bytes=index_interval_bytes, suffix=SWAP_SUFFIX)
        seg.compacted = True
        try:
            seg.recover(allow_truncate=False)  # fsynced before the rename: must be whole
            end = seg.next_offset
            if end > base:
                seg.seal()  # index files exist again (a crash may have renamed them already)
            seg.close()
        except CorruptLogError as e:
            # Not something the cleaner wrote: leave the old segments serving (a gap
            # the swap had already opened would still refuse the partition at load).
            seg.close_quietly()
            logger.warning("%s: discarding invalid cleaned segment: %s", d, e)
            continue  # removed with the other strays
        except BaseException:
            seg.close_quietly()
            raise
        if end == base:
            logger.warning("%s: discarding empty cleaned segment %s", d, name)
            continue
        logger.warning("%s: completing the swap of cleaned segment [%d, %d)", d, base, end)
        for other in names:
            p = parse_segment_name(other)
            if p is not None and base <= p[0] < end:
                _unlink(os.path.join(d, other))
        stem, swapped = swap_names(d, base)
        try:
            rename_segment_files(swapped, SWAP_SUFFIX, "")
        except OSError as e:
            raise StorageError(f"cannot complete the swap of {stem}{log_suffix}{SWAP_SUFFIX}: {e}") from e
        fsync_dir(d)


def _recover(segments: list[Segment], clean: bool, recovery_point: int) -> list[Segment]:
    """Load or recover ``segments`` in place; returns the ones that were modified."""
    if not segments:
        return []
    last = len(segments) - 1
    if clean:
        start = len(segments)
    else:
        start = max(0, bisect.bisect_right([s.base_offset for s in segments], recovery_point) - 1)
    recovered: list[Segment] = []
    for i, seg in enumerate(segments):
        if i < start:
            problem = seg.load()
            if problem is None:
                txn_problem = seg.txn_index.problem(seg.next_offset)
                if txn_problem is not None:
                    # Rebuilt from the log with the producer state (hot.producer_snapshots).
                    logger.warning("rebuilding transaction index %s: %s", seg.txnindex_path, txn_problem)
                    recovered.append(seg)
                continue
            if i != last:
                raise CorruptLogError(seg.log_path, *problem)
            logger.warning(
                "%s at position %d: %s; recovering the last segment", seg.log_path, problem[0], problem[1]
            )
        seg.recover(allow_truncate=i == last)
        recovered.append(seg)
    # Segments are contiguous; an empty non-last one (never rolled so) shows up as a gap.
    for a, b in itertools.pairwise(segments):
        if a.next_offset != b.base_offset:
            what = "overlaps" if a.next_offset > b.base_offset else "leaves a gap before"
            raise CorruptLogError(
                a.log_path,
                a.size,
                f"segment ends at offset {a.next_offset}, which {what} the next segment "
                f"(base offset {b.base_offset})",
            )
    return recovered


# --- leader epochs ----------------------------------------------------------------------------


def load_leader_epochs(
    directory: str,
    name: str,
    segments: Sequence[Segment],
    recovered: Sequence[Segment],
    log_start_offset: int,
) -> LeaderEpochCache:
    """The epoch cache of a loaded log: the ``leader-epoch-checkpoint`` cut to the log end
    and the log start, extended by the epochs of the ``recovered`` batches; rebuilt from
    every batch header of ``segments`` if the file is missing or damaged."""
    path = os.path.join(directory, LEADER_EPOCH_FILE)
    try:
        stored = LeaderEpochCache.read(path)
    except CorruptLogError as e:
        logger.warning("rebuilding the leader-epoch cache of %s: %s", name, e)
        _unlink(path)
        stored = None
    if stored is None:
        scan = (pair for seg in segments for pair in _batch_epochs(seg))
        return LeaderEpochCache.rebuild(path, scan)
    cache = LeaderEpochCache(path, stored)
    cache.truncate_from_end(segments[-1].next_offset)
    cache.truncate_from_start(log_start_offset)
    # Batches of an epoch whose entry never reached the file (as in Kafka's recovery,
    # only epochs newer than the latest count).
    for seg in recovered:
        for epoch, base in _batch_epochs(seg):
            cache.assign_if_newer(epoch, base)
    return cache


def _batch_epochs(seg: Segment) -> Iterator[tuple[int, int]]:
    """(partitionLeaderEpoch, base offset) of every batch of a loaded segment, in order:
    the 16-byte prefixes only, read in chunks."""
    pos = 0
    limit = seg.size
    buf = b""
    buf_at = 0
    while pos < limit:
        rel = pos - buf_at
        if rel + _PREFIX_SIZE > len(buf):
            buf = seg.read_bytes(pos, min(_EPOCH_SCAN_CHUNK, limit - pos))
            buf_at, rel = pos, 0
            if len(buf) < _PREFIX_SIZE:
                raise CorruptLogError(seg.log_path, pos, f"truncated batch header: {len(buf)} bytes")
        base, length, epoch = _PREFIX.unpack_from(buf, rel)
        if length < MIN_BATCH_LENGTH or pos + length + LOG_OVERHEAD > limit:
            raise CorruptLogError(seg.log_path, pos, f"batch length {length} does not fit the segment")
        yield epoch, base
        pos += length + LOG_OVERHEAD


def _warn_discard(path: str, why: str) -> None:
    """One WARNING per file that recovery at start discards, with what it held."""
    try:
        size = f"{os.path.getsize(path)} bytes"
    except OSError:
        size = "size unknown"
    logger.warning("recovery discards %s (%s): %s", path, size, why)


def _unlink(path: str) -> None:
    try:
        disk.unlink_missing_ok(path)
    except OSError as e:
        raise StorageError(f"cannot remove {path}: {e}") from e


__all__ = ["LoadedSegments", "complete_swaps", "create_directory_at", "load_leader_epochs", "load_segments"]
