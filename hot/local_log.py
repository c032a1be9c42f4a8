"""One partition's segments on local disk (Kafka's ``LocalLog``).

Owns the partition directory ``<logs_dir>/<topic>-<partition>/`` as a place on disk: the
segment list and its active (last) segment, rolling, the position lookup of reads, cutting
the log (``truncate_to_locked``, ``delete_all_segments_locked``), the cleaner's segment
swap, the recovery point and the directory's own deletion. Offsets beyond "which
segment holds what" (log start, high watermark, epochs, producer state) belong to
``hot.log.Log``, which composes one ``LocalLog``; opening and recovery are
``hot.log_loader``.

Files it owns (byte layouts in hot.segment, hot.offset_index, hot.time_index)::

    <20-digit base offset>.log / .index / .timeindex / .txnindex   the segments (the
                        .txnindex only where an aborted transaction's marker is)
    recovery-point      text "<offset>\\n": every byte below this offset was fsynced
    <B>.log/.index/.timeindex/.txnindex + .cleaned / .swap   a cleaned segment being swapped in

The small text files of the directory (``recovery-point``, ``log-start-offset``,
``cleaner-offset-checkpoint``) are written here with ``atomic_write`` (``<name>.tmp``,
fsync, rename, fsync the directory) and read with ``read_offset_file``; which offset each
holds is its owner's business (module docstring of hot.log).

Crash behaviour: a segment is fsynced when it is rolled, before its successor exists, so
after a crash every segment but the last is complete. Truncation removes segments newest
first, each removal durable before the next, then cuts the containing segment: a crash
leaves a prefix of the old log. The swap's commit point is the ``.log.swap`` rename
(``replace_segments`` in hot.log; ``hot.log_loader`` completes or discards it).

Locking: a LocalLog has no lock of its own. Every method whose name ends in ``_locked``
and every access to ``segments`` / ``recovery_point`` runs with the owning ``Log``'s lock
held (``Log._lock``; truncation, swap and close also hold ``Log._flush_lock``). The only
lock here, ``_ckpt_lock``, serializes writes of the recovery-point file, as it did in
``Log`` before the split (every caller also holds ``Log._lock`` today). Nothing here
takes a partition offline: errors are raised and the ``Log`` decides.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from core import disk
from hot.config import LogConfig
from hot.disk_health import is_no_space
from hot.errors import CorruptLogError, StorageError, StrataError
from hot.naming import delete_dir_path
from hot.records import decode_batch
from hot.region import FileRegion
from hot.segment import OPTIONAL_SUFFIXES, SUFFIXES, BatchInfo, Segment, segment_name

logger = logging.getLogger("hot.log")  # one logger name for a partition's log, as before the split

RECOVERY_POINT_FILE: Final = "recovery-point"
LOG_START_OFFSET_FILE: Final = "log-start-offset"
CLEANER_CHECKPOINT_FILE: Final = "cleaner-offset-checkpoint"
CLEANED_SUFFIX: Final = ".cleaned"
SWAP_SUFFIX: Final = ".swap"
STRAY_SUFFIXES: Final = (disk.TEMP_SUFFIX, ".deleted", CLEANED_SUFFIX, SWAP_SUFFIX)


# --- small durable files ----------------------------------------------------------------------


def fsync_dir(path: str | Path) -> None:
    """fsync a directory so that entries created, renamed or removed in it are durable
    (``core.disk.fsync_dir``; a failure raises StorageError)."""
    try:
        disk.fsync_dir(path)
    except OSError as e:
        raise StorageError(f"fsync of directory {path} failed: {e}") from e


def atomic_write(path: str | Path, data: bytes, *, sync_dir: bool = True, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically and durably (``core.disk.atomic_write``:
    ``<path>.tmp``, fsync, rename, then ``fsync_dir``; a failure raises StorageError).

    ``sync_dir=False`` leaves the rename's durability to the caller's next directory fsync;
    ``sync=False`` skips every fsync (see core.disk.atomic_write)."""
    try:
        disk.atomic_write(path, data, sync_dir=False, sync=sync)
    except OSError as e:
        raise StorageError(f"cannot write {path}: {e}") from e
    if sync_dir and sync:
        fsync_dir(os.path.dirname(os.fspath(path)) or ".")


def rename_segment_files(names: Sequence[str], from_suffix: str, to_suffix: str) -> None:
    """Rename each ``name + from_suffix`` to ``name + to_suffix`` in order (``names`` from
    ``LocalLog.swap_names``: the ``.log`` last). A file that may be absent (a segment
    without a transaction index) is skipped. OSError on failure."""
    for name in names:
        try:
            os.rename(name + from_suffix, name + to_suffix)
        except FileNotFoundError:
            if not name.endswith(OPTIONAL_SUFFIXES):
                raise


def read_offset_file(path: str) -> int | None:
    """The offset stored in a recovery-point / log-start-offset file; None if missing or unreadable."""
    try:
        with open(path, "rb") as f:
            text = f.read(64).decode("ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        logger.warning("ignoring unreadable %s: %s", path, e)
        return None
    if not text.isdigit():
        logger.warning("ignoring malformed %s: %r", path, text[:32])
        return None
    return int(text)


def swap_names(directory: str, base: int) -> tuple[str, list[str]]:
    """The stem of segment ``base``'s files and their names, the ``.log`` last (the one
    whose rename commits a swap)."""
    stem = os.path.join(directory, segment_name(base))
    return stem, [stem + suffix for suffix in (*SUFFIXES[1:], SUFFIXES[0])]


# --- the segments -----------------------------------------------------------------------------


class LocalLog:
    """The segment list of one partition directory (see the module docstring for files,
    crash behaviour and locking). ``segments`` is oldest first, never empty; the last is
    the active segment."""

    def __init__(self, directory: str, name: str, config: LogConfig, segments: list[Segment]) -> None:
        self.dir = directory
        self.name = name
        self.config = config
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        for s in segments[:-1]:
            s.sealed = True
        self.recovery_point = segments[-1].next_offset
        self._ckpt_lock = threading.Lock()  # serializes writes of the recovery-point file
        self.before_recovery_point: Callable[[], None] = lambda: None

    # --- offsets and lookup (Log's lock held, or a racy read of one value) ---------------

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_index(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (0 below the first)."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.segments[-1].index_interval_bytes = config.index_interval_bytes
        if config.compact:  # from now on a follower may copy a leader's gaps
            for seg in self.segments:
                seg.compacted = True

    # --- small files ------------------------------------------------------------------------

    def sync_dir(self) -> None:
        """fsync the partition directory (StorageError on failure)."""
        fsync_dir(self.dir)

    def write_offset_file(self, name: str, offset: int) -> None:
        """Replace the small text file ``name`` with ``"<offset>\\n"``, atomically and durably."""
        atomic_write(os.path.join(self.dir, name), b"%d\n" % offset)

    def persist_recovery_point(self) -> None:
        """Write ``recovery_point`` to its file (also fsyncs the directory), after
        ``before_recovery_point`` (the owner's files that must be durable for every
        offset below it: the leader-epoch checkpoint)."""
        self.before_recovery_point()
        with self._ckpt_lock:
            atomic_write(os.path.join(self.dir, RECOVERY_POINT_FILE), b"%d\n" % self.recovery_point)

    # --- rolling ----------------------------------------------------------------------------

    def new_segment(self, base_offset: int) -> Segment:
        """A new, empty segment file at ``base_offset`` (not yet in the list)."""
        seg = Segment(self.dir, base_offset, index_interval_bytes=self.config.index_interval_bytes)
        seg.compacted = self.config.compact  # a follower may copy a cleaned leader's gaps
        return seg

    def seal_and_create_next_locked(self) -> Segment:
        """First half of a roll: seal the active segment (durable before anything can reach
        its successor, module docstring) and create its successor, not yet in the list
        (``add_segment_locked``). StorageError on failure."""
        old = self.segments[-1]
        old.seal()
        return self.new_segment(old.next_offset)

    def add_segment_locked(self, seg: Segment) -> None:
        """Make ``seg`` (the one ``seal_and_create_next_locked`` returned) the active segment."""
        self.segments.append(seg)
        self._bases.append(seg.base_offset)
        logger.debug("rolled %s at offset %d", self.name, seg.base_offset)

    # --- reading ----------------------------------------------------------------------------

    def read_locked(
        self, offset: int, max_bytes: int, limit: int, min_one: bool
    ) -> tuple[list[FileRegion], int, int]:
        """Regions of whole batches from the one holding ``offset`` up to ``limit`` (exclusive)
        and ``max_bytes`` (KIP-74 ``min_one``); returns (regions, first offset or -1, next
        offset). The caller has checked the range. CorruptLogError on a bad batch header."""
        regions: list[FileRegion] = []
        first = -1
        nxt = offset
        if offset < limit:
            remaining = max_bytes
            for seg in self.segments[self.segment_index(offset) :]:
                start = max(nxt, seg.base_offset)
                if start >= seg.next_offset:
                    continue
                r = seg.read_regions(start, remaining, limit, min_one and not regions)
                if r.region is None:
                    break
                if not regions:
                    first = r.first_offset
                regions.append(r.region)
                remaining -= r.region.length
                nxt = r.next_offset
                if nxt < seg.next_offset or remaining <= 0 or nxt >= limit:
                    break
        return regions, first, nxt

    def offset_for_timestamp_locked(self, timestamp: int, lso: int, limit: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record in [lso, limit) with a timestamp >=
        ``timestamp`` (``Log.offset_for_timestamp``). CorruptLogError on a bad header."""
        for seg in self.segments[self.segment_index(lso) :]:
            if seg.base_offset >= limit:
                break
            try:
                done, hit = self._offset_for_timestamp_in(seg, timestamp, lso, limit)
            finally:
                if seg.sealed:
                    seg.file.release()  # a sealed segment holds no descriptor between reads
            if done:
                return hit
        return None

    def _offset_for_timestamp_in(
        self, seg: Segment, timestamp: int, lso: int, limit: int
    ) -> tuple[bool, tuple[int, int] | None]:
        """(whether the search ends here, its answer) for one segment."""
        found = seg.offset_for_timestamp(timestamp)
        if found is None:
            return False, None
        for b in seg.iter_batches(found.position):
            if b.base_offset >= limit:
                return True, None
            if b.max_timestamp < timestamp or b.next_offset <= lso:
                continue
            hit = self._search_batch(seg, b, decode_batch, timestamp, lso, limit)
            if hit is not None:
                return True, hit
        return False, None

    @staticmethod
    def _search_batch(
        seg: Segment,
        b: BatchInfo,
        decode: Callable[..., object],
        timestamp: int,
        lso: int,
        limit: int,
    ) -> tuple[int, int] | None:
        data = seg.read_bytes(b.position, b.size)
        try:
            batch = decode(data)
        except StrataError as e:
            logger.info(
                "cannot decode batch at %s:%d (%s); using batch granularity", seg.log_path, b.position, e
            )
            return max(b.base_offset, lso), b.max_timestamp
        for rec in batch:  # type: ignore[attr-defined]
            if rec.offset >= limit:
                return None
            if rec.offset >= lso and rec.timestamp >= timestamp:
                return int(rec.offset), int(rec.timestamp)
        return None

    # --- removing segments ------------------------------------------------------------------

    def drop_oldest_locked(self, n: int) -> list[Segment]:
        """Take the ``n`` oldest segments out of the list (retention); returns them for
        ``delete_segments`` once the caller persisted what must precede the deletion."""
        doomed = self.segments[:n]
        self.segments = self.segments[n:]
        self._bases = self._bases[n:]
        return doomed

    @staticmethod
    def delete_segments(doomed: Sequence[Segment]) -> None:
        """Delete segments already out of the list (the caller fsyncs the directory)."""
        for seg in doomed:
            logger.info("deleting segment %s", seg.log_path)
            seg.delete()

    def truncate_to_locked(self, offset: int) -> None:
        """Cut the segments at ``offset`` (a batch boundary inside the log, above the first
        segment's base): delete the later segments newest first, each removal durable before
        the next, cut and flush the segment holding it, drop it if that left it empty and it
        is not the only one. The recovery point is the caller's. StorageError on failure."""
        i = self.segment_index(offset)
        for doomed in reversed(self.segments[i + 1 :]):
            doomed.delete()
            fsync_dir(self.dir)
        del self.segments[i + 1 :]
        del self._bases[i + 1 :]
        seg = self.segments[-1]
        seg.truncate_to(offset)
        seg.flush()
        if seg.is_empty and len(self.segments) > 1:
            # Keep an empty active segment only if it is the only one.
            self._bases.pop()
            self.segments.pop().delete()
            fsync_dir(self.dir)
        self.segments[-1].sealed = False

    def delete_all_segments_locked(self) -> None:
        """Delete every segment file, newest first, each removal durable before the next. The
        list is left as it was until ``reset_locked``. StorageError on failure."""
        for doomed in reversed(self.segments):
            doomed.delete()
            fsync_dir(self.dir)

    def reset_locked(self, seg: Segment) -> None:
        """Make the new, empty ``seg`` the only segment (after ``delete_all_segments_locked``)."""
        self.segments = [seg]
        self._bases = [seg.base_offset]

    # --- the cleaner's swap (crash-safe order in Log.replace_segments) ----------------------

    def find_run_locked(self, old: Sequence[Segment]) -> int | None:
        """Index of ``old`` if it is still a run of consecutive sealed segments of the list."""
        try:
            i = next(k for k, s in enumerate(self.segments) if s is old[0])
        except StopIteration:
            return None
        n = len(old)
        if i + n >= len(self.segments) or any(
            a is not b for a, b in zip(self.segments[i : i + n], old, strict=True)
        ):
            return None
        return i

    def _swap_names(self, base: int) -> tuple[str, list[str]]:
        return swap_names(self.dir, base)

    def commit_swap_locked(self, base: int) -> None:
        """Rename the cleaned ``<base>`` files to ``.swap`` (``.log`` last) and fsync the
        directory: the commit point. StorageError on failure (the old segments still serve)."""
        stem, names = self._swap_names(base)
        try:
            rename_segment_files(names, CLEANED_SUFFIX, SWAP_SUFFIX)
            fsync_dir(self.dir)
        except OSError as e:
            raise StorageError(f"cannot swap in cleaned segment {stem}: {e}") from e

    def finish_swap_locked(self, i: int, old: Sequence[Segment]) -> None:
        """After ``commit_swap_locked``: delete ``old`` (at index ``i``), rename the ``.swap``
        files into place (``.log`` last), fsync the directory and load the new segment into
        the list. StorageError (CorruptLogError) on failure: the caller must take the
        partition offline (open completes the swap)."""
        base = old[0].base_offset
        stem, names = self._swap_names(base)
        try:
            for seg in old:
                seg.delete()
            rename_segment_files(names, SWAP_SUFFIX, "")
            fsync_dir(self.dir)
            new = Segment(self.dir, base, index_interval_bytes=self.config.index_interval_bytes)
            new.compacted = True
            problem = new.load()
            if problem is not None:
                new.close_quietly()
                raise CorruptLogError(new.log_path, *problem)
        except OSError as e:
            raise StorageError(f"cannot swap in cleaned segment {stem}: {e}") from e
        new.sealed = True
        new.release()
        self.segments[i : i + len(old)] = [new]
        self._bases = [s.base_offset for s in self.segments]

    # --- flushing ---------------------------------------------------------------------------

    def start_flush_locked(self, report: Callable[[StorageError], None]) -> list[Segment]:
        """First half of a flush, under the lock: write the dirty segments' pending index
        entries and return those segments (``sync_segments`` fsyncs them outside it).
        StorageError on failure, except disk full on the active segment's index, which is
        ``report``ed: its entries stay in memory (reads use them) and pending for the
        next flush, and recovery rebuilds that index anyway."""
        dirty = [s for s in self.segments if s.dirty]
        for s in dirty:
            s.dirty = False
            try:
                s.write_index_pending()
            except StorageError as e:
                if s.sealed or not is_no_space(e):
                    raise
                report(e)
        return dirty

    @staticmethod
    def sync_segments(dirty: Sequence[Segment]) -> None:
        """Second half of a flush, outside the lock: fsync ``dirty`` (data only for the
        active segment, whose size the recovery scan finds anyway)."""
        for s in dirty:
            if s.sealed:
                s.sync()
            else:
                s.sync_data()

    # --- closing and deleting ---------------------------------------------------------------

    def flush_for_close_locked(self) -> None:
        """Clean close: flush the dirty segments and the active one, fsync the directory."""
        for s in self.segments:
            if s.dirty or s is self.segments[-1]:
                s.flush()
        fsync_dir(self.dir)

    def close_segments(self, clean: bool) -> None:
        """Release the files (``clean``: report close failures; otherwise ignore them)."""
        for s in self.segments:
            if clean:
                s.close()
            else:
                s.close_quietly()

    def delete_directory(self) -> None:
        """Remove the (closed) partition directory: renamed to ``*-delete`` first, so a crash
        half-way leaves a name the manager recognizes and removes."""
        doomed = delete_dir_path(self.dir)  # fits NAME_MAX for every legal topic name
        try:
            os.rename(self.dir, doomed)
            fsync_dir(os.path.dirname(self.dir) or ".")
            shutil.rmtree(doomed)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(f"cannot delete log directory {self.dir}: {e}") from e


__all__ = [
    "CLEANED_SUFFIX",
    "CLEANER_CHECKPOINT_FILE",
    "LOG_START_OFFSET_FILE",
    "RECOVERY_POINT_FILE",
    "STRAY_SUFFIXES",
    "SWAP_SUFFIX",
    "LocalLog",
    "atomic_write",
    "fsync_dir",
    "read_offset_file",
    "rename_segment_files",
    "swap_names",
]
