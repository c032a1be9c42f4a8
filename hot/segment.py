"""One log segment: a ``.log`` data file plus its ``.index``, ``.timeindex`` and ``.txnindex``.

Files of a segment whose first batch has base offset B, in the partition directory::

    <B as 20 zero-padded digits>.log        record batches (v2), back to back, as produced
                                            except baseOffset / partitionLeaderEpoch
    <B as 20 zero-padded digits>.index      sparse offset index (hot.offset_index); created
                                            at its first entry or when the segment is sealed
    <B as 20 zero-padded digits>.timeindex  sparse time index (hot.time_index); likewise
    <B as 20 zero-padded digits>.txnindex   aborted transactions whose ABORT marker is in
                                            this segment (hot.txn_index); created on the
                                            first entry, so most segments have none
    <B as 20 zero-padded digits>.snapshot   producer state as of B (hot.producer_state),
                                            owned and written by hot.log.Log

Open files: the active segment holds one descriptor, its ``.log`` (read and written
through it, ``LogFile``); the indexes live in memory and open their files only to write,
truncate or fsync them; a sealed segment holds none until it is read (and a region of it
handed to a fetch keeps the ``.log`` open until sent). A new partition creates one file
here, its empty ``.log``.

Batch header fields the segment reads (all big-endian; see hot.batch)::

    0  baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64
    35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32
    57 recordsCount int32 | 61 records
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

from core import disk
from hot.batch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC, MIN_BATCH_LENGTH
from hot.errors import CorruptLogError, StorageError, StrataError
from hot.offset_index import MAX_RELATIVE, OffsetIndex
from hot.region import FileRegion, SegmentFile
from hot.time_index import TimeIndex
from hot.txn_index import TransactionIndex
from hot.txn_marker import read_marker

log = logging.getLogger(__name__)

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIMEINDEX_SUFFIX: Final = ".timeindex"
TXNINDEX_SUFFIX: Final = ".txnindex"
SUFFIXES: Final = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)
# Segment files that may be absent (created on their first entry): renames skip them.
OPTIONAL_SUFFIXES: Final = (TXNINDEX_SUFFIX,)
NAME_DIGITS: Final = 20
# The producer-state snapshot after a segment (hot.producer_state), named like the segments.
SNAPSHOT_SUFFIX: Final = ".snapshot"
NO_TIMESTAMP: Final = -1
# A segment written by appends is dense: every batch starts exactly where the previous one
# ended, and the first one at the segment's base offset. Scans enforce it, which also
# catches bit flips in baseOffset (a field outside the CRC). A segment the cleaner wrote
# (``Segment.compacted``, hot.cleaner) has gaps where it dropped whole batches: there
# scans only refuse a base offset going backwards.

IOV_MAX: Final = 1024  # Linux UIO_MAXIOV
_SCAN_CHUNK: Final = 4 * 1024 * 1024  # read size of the CRC scans

Buffer = bytes | bytearray | memoryview

# Indexes into the tuple HEADER.unpack gives (cheaper than building a BatchHeader per batch).
_H_BASE: Final = 0
_H_LENGTH: Final = 1
_H_MAGIC: Final = 3
_H_CRC: Final = 4
_H_ATTRS: Final = 5
_H_DELTA: Final = 6
_H_MAX_TS: Final = 8
_H_PRODUCER_ID: Final = 9
_H_PRODUCER_EPOCH: Final = 10
_H_BASE_SEQUENCE: Final = 11
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20
_HEADER_SCAN_CHUNK: Final = 256 * 1024  # read size of the producer-state header scan

_write_stamped: Callable[[int, Buffer, int, int, int, int, int], None] | None
try:  # one batch stamped and written in one call (LogFile.append_stamped)
    from hot._recordwalk import write_stamped as _write_stamped
except ImportError:  # installed without a C compiler, or a module built before it existed
    _write_stamped = None
# Whether LogFile.append_stamped can be used (hot.leader_append's one-batch path).
STAMPED_WRITE: bool = _write_stamped is not None


def segment_name(base_offset: int) -> str:
    return f"{base_offset:0{NAME_DIGITS}d}"


def snapshot_name(offset: int) -> str:
    return f"{offset:0{NAME_DIGITS}d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> int | None:
    """The offset of a ``<20 digits>.snapshot`` file name, None for any other name."""
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    if len(stem) != NAME_DIGITS or not (stem.isdigit() and stem.isascii()):
        return None
    return int(stem)


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) for a segment file name, None if ``name`` is not one."""
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            if len(stem) == NAME_DIGITS and stem.isdigit() and stem.isascii():
                return int(stem), suffix
            return None
    return None


def _header_problem(h: tuple[int, ...], pos: int, limit: int) -> str | None:
    """Why the unpacked header ``h`` at ``pos`` cannot start a batch ending by ``limit``."""
    if h[_H_MAGIC] != MAGIC:
        return f"magic {h[_H_MAGIC]} is not 2"
    if h[_H_LENGTH] < MIN_BATCH_LENGTH:
        return f"batch length {h[_H_LENGTH]} below minimum {MIN_BATCH_LENGTH}"
    if h[_H_DELTA] < 0:
        return f"negative lastOffsetDelta {h[_H_DELTA]}"
    if pos + h[_H_LENGTH] + LOG_OVERHEAD > limit:
        return f"batch of {h[_H_LENGTH] + LOG_OVERHEAD} bytes runs past the end of the data ({limit})"
    return None


class _IndexMismatch(Exception):
    """An offset index entry that does not match the log (internal: triggers a rebuild)."""


class WriteUndoFailedError(StorageError):
    """A failed append left bytes in the file that could not be removed: the log must go offline."""


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """Where one batch of a segment is and what its header says."""

    position: int
    base_offset: int
    size: int
    last_offset_delta: int
    max_timestamp: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def _info(pos: int, h: tuple[int, ...]) -> BatchInfo:
    return BatchInfo(pos, h[_H_BASE], h[_H_LENGTH] + LOG_OVERHEAD, h[_H_DELTA], h[_H_MAX_TS])


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """The producer fields of one producer batch's header (producer-state rebuild); for a
    transaction marker (a control batch) also its type and coordinator epoch."""

    base_offset: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool = False
    is_control: bool = False
    control_type: int = -1  # a control batch's: 0 ABORT, 1 COMMIT, -1 not a transaction marker
    coordinator_epoch: int = -1


@dataclass(frozen=True, slots=True)
class SegmentRead:
    """The result of reading one segment: a region of whole batches (or None)."""

    region: FileRegion | None
    first_offset: int  # base offset of the first batch in the region (-1 if none)
    next_offset: int  # offset after the last batch in the region (the start offset if none)


class LogFile:
    """The ``.log`` file of a segment: record batches back to back, nothing else.

    One descriptor serves both directions (Kafka's one FileChannel per segment): a
    ``SegmentFile`` opened read-write, written only at its end with ``pwrite``/``pwritev``
    at the tracked size and read with explicit positions (``pread``, ``sendfile``), so
    nothing depends on the file position. It is shared with the ``FileRegion``s handed
    to fetches and never closed explicitly: the last reference going away closes it
    (hot.region), so a fetch in flight keeps reading a segment closed or deleted under
    it. ``release`` drops the segment's own reference once everything written is
    fsynced (a sealed segment): it then holds no descriptor until the next read, which
    reopens the file by its path.

    After a crash the file may end in a torn batch, garbage or zeros (data written
    but not fsynced); recovery validates every batch and truncates at the first bad
    one (hot.log decides where that is allowed).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._closed = False
        # Writes and truncations, and how many of them the last fsync covered: a file
        # with none outstanding may be released (and an fsync of it is a no-op).
        self._changes = 0
        self._synced = 0
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StorageError(f"cannot open segment {path}: {e}") from e
        self._fd = fd  # the descriptor of _file, -1 without one (the append path's check)
        try:
            self.size = os.fstat(fd).st_size
            self._file: SegmentFile | None = SegmentFile(fd, "r+", closefd=True)
        except BaseException as e:
            os.close(fd)
            if isinstance(e, OSError):
                raise StorageError(f"cannot open segment {path}: {e}") from e
            raise

    @property
    def reader(self) -> SegmentFile:
        """The open file (reopened if released); StorageError once closed."""
        f = self._file
        if f is None:
            if self._closed:
                raise StorageError(f"segment {self.path} is closed")
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            except OSError as e:
                raise StorageError(f"cannot open segment {self.path}: {e}") from e
            try:
                f = SegmentFile(fd, "r+", closefd=True)
            except BaseException:
                os.close(fd)
                raise
            self._file, self._fd = f, fd
        return f

    @property
    def is_open(self) -> bool:
        """Whether the segment holds a descriptor of its own (regions may hold more)."""
        return self._file is not None

    def _writer(self) -> int:
        """The descriptor for a write or truncation (counted as a change to fsync)."""
        fd = self._fd
        if fd < 0:
            if self._closed:
                raise StorageError(f"segment {self.path} is closed for writing")
            fd = self.reader.fileno()
        self._changes += 1
        return fd

    def release(self) -> None:
        """Drop the descriptor if nothing written is waiting for an fsync (a sealed
        segment, after its seal or a load); the next read reopens the file."""
        if self._changes == self._synced:
            self._file, self._fd = None, -1

    def append(self, iov: Sequence[Buffer], total: int) -> int:
        """Write the buffers at the end of the file; returns the position they start at.

        On failure the file is cut back to its previous size; if even that fails a
        StorageError says so (the caller must then take the log offline).
        """
        fd = self._writer()
        start = self.size
        try:
            if len(iov) == 1:
                done = os.pwrite(fd, iov[0], start)
                if done < total:
                    self._write_rest(fd, iov, start, done)
            elif len(iov) <= IOV_MAX:
                done = os.pwritev(fd, iov, start)
                if done < total:
                    self._write_rest(fd, iov, start, done)
            else:
                at = start
                for i in range(0, len(iov), IOV_MAX):
                    chunk = iov[i : i + IOV_MAX]
                    want = sum(len(b) for b in chunk)
                    done = os.pwritev(fd, chunk, at)
                    if done < want:
                        self._write_rest(fd, chunk, at, done)
                    at += want
        except OSError as e:
            raise self._undo(fd, start, e) from e
        self.size = start + total
        return start

    def append_stamped(
        self, data: Buffer, position: int, size: int, base_offset: int, leader_epoch: int
    ) -> int:
        """``append`` of the one batch ``data[position:position + size]`` with its
        baseOffset and partitionLeaderEpoch replaced, in one C call (hot/_recordwalk.c
        ``write_stamped``; only called when it is loaded). Returns the position."""
        fd = self._writer()
        start = self.size
        try:
            _write_stamped(fd, data, position, size, start, base_offset, leader_epoch)  # type: ignore[misc]
        except OSError as e:
            raise self._undo(fd, start, e) from e
        self.size = start + size
        return start

    def _undo(self, fd: int, start: int, e: OSError) -> StorageError:
        """Cut the file back to ``start`` after a failed write: the error to raise."""
        try:
            os.ftruncate(fd, start)
        except OSError as e2:
            return WriteUndoFailedError(f"write to {self.path} failed ({e}) and could not be undone ({e2})")
        return StorageError(f"write to {self.path} failed: {e}")

    @staticmethod
    def _write_rest(fd: int, iov: Sequence[Buffer], at: int, done: int) -> None:
        """Finish a short (p)writev: write what is left of ``iov`` after ``done`` bytes."""
        for b in iov:
            mv = memoryview(b).cast("B")
            if done >= len(mv):
                done -= len(mv)
                at += len(mv)
                continue
            pos = done
            done = 0
            while pos < len(mv):
                n = os.pwrite(fd, mv[pos:], at + pos)
                if n <= 0:
                    raise OSError(f"pwrite wrote {n} bytes")
                pos += n
            at += len(mv)

    def pread(self, position: int, length: int) -> bytes:
        f = self.reader  # held: the descriptor stays open for the call
        try:
            return os.pread(f.fileno(), length, position)
        except OSError as e:
            raise StorageError(f"read of {self.path} at {position} failed: {e}") from e

    def truncate(self, size: int) -> None:
        try:
            os.ftruncate(self._writer(), size)
        except OSError as e:
            raise StorageError(f"cannot truncate {self.path}: {e}") from e
        self.size = size

    def _sync_target(self) -> tuple[SegmentFile, int] | None:
        """(file, changes an fsync of it covers); None if nothing is unsynced and the file
        is released (a sealed segment: its seal synced everything). The caller holds the
        file object while it syncs: an fsync runs outside the log's lock, where a roll may
        release the segment's reference, and the object keeps the descriptor open."""
        changes = self._changes
        if self._file is None and changes == self._synced:
            return None
        if self._closed:
            raise StorageError(f"segment {self.path} is closed for writing")
        return self.reader, changes

    def fsync(self) -> None:
        target = self._sync_target()
        if target is None:
            return
        f, changes = target
        try:
            disk.fsync(f.fileno())
        except OSError as e:
            raise StorageError(f"fsync of {self.path} failed: {e}") from e
        self._synced = max(self._synced, changes)

    def datasync(self) -> None:
        """fdatasync: the data and the file size, not timestamps (all recovery needs)."""
        target = self._sync_target()
        if target is None:
            return
        f, changes = target
        try:
            os.fdatasync(f.fileno())
        except OSError as e:
            raise StorageError(f"fdatasync of {self.path} failed: {e}") from e
        self._synced = max(self._synced, changes)

    def mtime_ms(self) -> int:
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except OSError as e:
            raise StorageError(f"cannot stat {self.path}: {e}") from e

    def close(self) -> None:
        """Drop the file: no more writes or reads through this object. The descriptor
        closes with the last region holding it (at once if none does)."""
        self._closed = True
        self._file, self._fd = None, -1

    def delete(self) -> None:
        try:
            self.close()
        except StorageError:
            pass
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(f"cannot delete {self.path}: {e}") from e


class Segment:
    """A contiguous range of offsets [base_offset, next_offset) of one partition.

    Composes a ``LogFile`` (``<20-digit base>.log``: v2 record batches back to back) and
    its ``OffsetIndex`` (``.index``) / ``TimeIndex`` (``.timeindex``) / ``TransactionIndex``
    (``.txnindex``, created on its first entry; the Log writes it and recovery rebuilds it
    with the producer state, hot.producer_snapshots); layouts in the module docstrings.
    Not thread-safe: the owning ``Log`` serializes access, except that ``sync`` (the
    fsyncs) may run outside the log's lock.

    Crash behaviour: a segment loaded as trusted (clean shutdown, or below the recovery
    point) gets only an index sanity check and a header scan of its tail (a missing index
    file, normal for an active segment that never had an entry, means a rebuild of both
    from the headers); everything
    else goes through ``recover``, which validates the CRC of every batch, cuts the
    file at the first invalid batch (or, when truncation is not allowed, raises
    CorruptLogError naming the file and position) and rebuilds both indexes.

    The cleaner builds a segment under ``suffix`` ``.cleaned`` (``<B>.log.cleaned``, ...),
    which ``Log.replace_segments`` renames to ``.swap`` and then into place; a crash in
    between is resolved by ``Log.open`` (hot.log: the swap completes or the old segments
    serve).
    """

    def __init__(
        self, directory: str, base_offset: int, *, index_interval_bytes: int, suffix: str = ""
    ) -> None:
        # ``suffix`` (e.g. ".cleaned") names files the cleaner builds before swapping them in.
        stem = os.path.join(directory, segment_name(base_offset))
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = stem + LOG_SUFFIX + suffix
        self.file = LogFile(self.log_path)
        try:
            self.offset_index = OffsetIndex(stem + INDEX_SUFFIX + suffix, base_offset)
            self.time_index = TimeIndex(stem + TIMEINDEX_SUFFIX + suffix, base_offset)
            self.txn_index = TransactionIndex(stem + TXNINDEX_SUFFIX + suffix, base_offset)
        except StorageError:
            self.file.close()
            raise
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        # Wall-clock ms of the first append (segment.ms); the file's mtime after a restart.
        self.created_ms: int | None = None
        self.dirty = False  # bytes written since the last fsync
        self.sealed = False
        # Written by the cleaner: batches may leave offset gaps (set before load/recover).
        self.compacted = False
        self.deleted = False
        self._bytes_since_index = 0
        # The last batch appended, (base offset, position, size, next offset), while it is
        # the file's last: a consumer's fetch of the log's tail reads it without a header
        # ``pread`` (``_read_regions``). None until an append, and after a truncation.
        self._tail: tuple[int, int, int, int] | None = None

    # --- properties ----------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.file.size

    @property
    def is_empty(self) -> bool:
        return self.file.size == 0

    @property
    def index_path(self) -> str:
        return self.offset_index.path

    @property
    def timeindex_path(self) -> str:
        return self.time_index.path

    @property
    def txnindex_path(self) -> str:
        """The transaction index (it exists only once an aborted transaction's marker was
        written to this segment: ``txn_index.exists``)."""
        return self.txn_index.path

    @property
    def snapshot_path(self) -> str:
        """The producer-state snapshot as of this segment's base offset (written by the Log
        when the previous segment rolled; may not exist). The state after this segment is
        the next segment's snapshot (``Log.producer_snapshot_after``)."""
        return self.log_path[: -len(LOG_SUFFIX)] + SNAPSHOT_SUFFIX

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime when no batch carries one (retention)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return self.file.mtime_ms()

    def __repr__(self) -> str:
        return f"Segment({self.log_path}, [{self.base_offset}, {self.next_offset}), {self.size} bytes)"

    # --- writing -------------------------------------------------------------------------

    def _track(self, base_offset: int, position: int, size: int, max_ts: int) -> None:
        """Account for one batch written (or found by a scan) at ``position``."""
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = base_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def fits(self, offsets: int) -> bool:
        """Whether ``offsets`` more offsets keep relative offsets within uint32."""
        return self.next_offset + offsets - self.base_offset <= MAX_RELATIVE

    def append(
        self,
        iov: Sequence[Buffer],
        total: int,
        batches: Sequence[tuple[int, int, int]],
        next_offset: int,
        now_ms: int,
    ) -> int:
        """Write already validated batches; ``batches`` lists (base offset, size, max
        timestamp) in file order. Returns the position of the first."""
        position = self.file.append(iov, total)
        pos = position
        for base, size, max_ts in batches:
            self._track(base, pos, size, max_ts)
            pos += size
        if batches:
            base, size, _ = batches[-1]
            self._tail = (base, pos - size, size, next_offset)
        self.next_offset = next_offset
        self.dirty = True
        if self.created_ms is None:
            self.created_ms = now_ms
        return position

    def append_stamped(
        self,
        data: Buffer,
        position: int,
        size: int,
        base_offset: int,
        leader_epoch: int,
        next_offset: int,
        max_ts: int,
        now_ms: int,
    ) -> int:
        """``append`` of one validated batch of ``data`` (at ``position``, ``size``
        bytes) whose header is stored as the client sent it but for baseOffset and
        partitionLeaderEpoch (hot.leader_append's one-batch path; LogFile.append_stamped)."""
        pos = self.file.append_stamped(data, position, size, base_offset, leader_epoch)
        self._track(base_offset, pos, size, max_ts)
        self._tail = (base_offset, pos, size, next_offset)
        self.next_offset = next_offset
        self.dirty = True
        if self.created_ms is None:
            self.created_ms = now_ms
        return pos

    # --- reading headers -----------------------------------------------------------------

    def _misplaced(self, base: int, expect: int) -> bool:
        """A batch base offset that cannot follow ``expect`` (see the module comment on gaps)."""
        return base < expect or (base != expect and not self.compacted)

    def _corrupt(self, position: int, reason: str) -> CorruptLogError:
        return CorruptLogError(self.log_path, position, reason)

    def _header_at(self, pos: int, limit: int) -> tuple[int, ...]:
        """The unpacked header of the batch at ``pos``; CorruptLogError if it cannot be one."""
        raw = self.file.pread(pos, HEADER_SIZE)
        if len(raw) < HEADER_SIZE:
            raise self._corrupt(pos, f"truncated batch header: {len(raw)} of {HEADER_SIZE} bytes")
        h = HEADER.unpack(raw)
        problem = _header_problem(h, pos, limit)
        if problem is not None:
            raise self._corrupt(pos, problem)
        return h

    def _headers(self, limit: int) -> _HeaderWindow:
        """A reader of the batch headers below ``limit`` for a scan that follows an index
        lookup: such a scan covers about one index interval, so one ``pread`` of twice that
        serves every header of it (a fetch of small batches read one per ``pread`` before:
        7-8 system calls of a small Fetch's cost)."""
        return _HeaderWindow(self, limit, min(max(2 * self.index_interval_bytes, 8192), _HEADER_SCAN_CHUNK))

    def find_batch(self, offset: int) -> BatchInfo | None:
        """The first batch whose last offset is >= ``offset`` (the batch holding it), or
        None if the segment ends before it. Index floor lookup, then a header scan.

        An index entry that does not match the log (possible only if a damaged index
        passed the load sanity check) gets the indexes rebuilt from the log headers."""
        try:
            return self._find_batch(offset)
        except _IndexMismatch as e:
            log.warning("rebuilding indexes of %s: %s", self.log_path, e)
            self.rebuild_indexes()
            return self._find_batch(offset)

    def _find_batch(self, offset: int) -> BatchInfo | None:
        entry_offset, pos = self.offset_index.lookup(offset)
        limit = self.file.size
        headers = self._headers(limit)
        expect = entry_offset
        first = True
        while pos < limit:
            h = headers.at(pos)
            base = h[_H_BASE]
            if first and pos > 0 and base != expect:
                raise _IndexMismatch(f"index entry ({expect}, {pos}) points at a batch with base {base}")
            if self._misplaced(base, expect):
                raise self._corrupt(pos, f"batch base offset {base} where {expect} was expected")
            first = False
            expect = base + h[_H_DELTA] + 1
            if expect > offset:
                return _info(pos, h)
            pos += h[_H_LENGTH] + LOG_OVERHEAD
        return None

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the log headers (the data is trusted, not CRC-checked)."""
        dirty, created = self.dirty, self.created_ms
        problem = self._rebuild_from_headers()
        self.dirty, self.created_ms = dirty, created
        if problem is not None:
            raise self._corrupt(*problem)

    def find_position(self, offset: int) -> int | None:
        """File position of the batch holding ``offset`` (None if the segment ends before it)."""
        found = self.find_batch(offset)
        return None if found is None else found.position

    def iter_batches(self, start_position: int = 0) -> Iterator[BatchInfo]:
        """Headers of every batch from ``start_position`` (a batch start) to the end."""
        pos = start_position
        limit = self.file.size
        while pos < limit:
            h = self._header_at(pos, limit)
            yield _info(pos, h)
            pos += h[_H_LENGTH] + LOG_OVERHEAD

    def batches(self, start_position: int = 0) -> list[BatchInfo]:
        return list(self.iter_batches(start_position))

    def iter_producer_batches(self, start_position: int = 0) -> Iterator[ProducerBatch]:
        """Producer batches (producerId >= 0: idempotent or transactional data, and
        transaction markers) from ``start_position`` (a batch start) to the end: headers
        only, read in chunks, no CRC (the data is trusted), except that a control batch is
        decoded for its marker."""
        pos = start_position
        limit = self.file.size
        buf = b""
        buf_at = 0
        while pos < limit:
            rel = pos - buf_at
            if rel + HEADER_SIZE > len(buf):
                buf = self.file.pread(pos, min(_HEADER_SCAN_CHUNK, limit - pos))
                buf_at, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    raise self._corrupt(pos, f"truncated batch header: {len(buf)} of {HEADER_SIZE} bytes")
            h = HEADER.unpack_from(buf, rel)
            problem = _header_problem(h, pos, limit)
            if problem is not None:
                raise self._corrupt(pos, problem)
            if h[_H_PRODUCER_ID] >= 0:
                attrs = h[_H_ATTRS]
                ctype = cepoch = -1
                if attrs & _CONTROL_BIT:
                    size = h[_H_LENGTH] + LOG_OVERHEAD
                    raw = buf[rel : rel + size] if rel + size <= len(buf) else self.read_bytes(pos, size)
                    try:
                        marker = read_marker(raw)
                    except StrataError as e:
                        raise self._corrupt(pos, f"unreadable control batch: {e}") from None
                    if marker is not None:
                        ctype, cepoch = int(marker.control_type), marker.coordinator_epoch
                yield ProducerBatch(
                    h[_H_BASE],
                    h[_H_DELTA],
                    h[_H_MAX_TS],
                    h[_H_PRODUCER_ID],
                    h[_H_PRODUCER_EPOCH],
                    h[_H_BASE_SEQUENCE],
                    bool(attrs & _TRANSACTIONAL_BIT),
                    bool(attrs & _CONTROL_BIT),
                    ctype,
                    cepoch,
                )
            pos += h[_H_LENGTH] + LOG_OVERHEAD

    def read_regions(self, start_offset: int, max_bytes: int, max_offset: int, min_one: bool) -> SegmentRead:
        """Whole batches from the one holding ``start_offset``: only batches ending at or
        below ``max_offset`` (exclusive bound) and at most ``max_bytes`` in total, except
        that with ``min_one`` the first batch is returned whatever its size.

        A sealed segment's descriptor is released again after the read: the region keeps
        the file open until it is sent, and an idle sealed segment holds none."""
        try:
            return self._read_regions(start_offset, max_bytes, max_offset, min_one)
        finally:
            if self.sealed:
                self.file.release()

    def _read_regions(self, start_offset: int, max_bytes: int, max_offset: int, min_one: bool) -> SegmentRead:
        tail = self._tail
        if (
            tail is not None
            and tail[0] <= start_offset < tail[3] <= max_offset
            and tail[1] + tail[2] == self.file.size
            and (tail[2] <= max_bytes or min_one)
        ):
            # The last batch appended holds the offset (a consumer at the log's tail), and it
            # is still the file's last: its place and size are known, so no header is read
            # (the index lookup and scan below would find this same batch and this answer).
            return SegmentRead(self._region(tail[1], tail[2]), tail[0], tail[3])
        empty = SegmentRead(None, -1, start_offset)
        first = self.find_batch(start_offset)
        if first is None or first.next_offset > max_offset:
            return empty
        start = first.position
        if first.size > max_bytes:
            if not min_one:
                return empty
            return SegmentRead(self._region(start, first.size), first.base_offset, first.next_offset)
        limit = self.file.size
        # Where the offset bound stops us.
        if max_offset >= self.next_offset:
            end_by_offset, next_at_end = limit, self.next_offset
        else:
            last = self.find_batch(max_offset - 1)
            assert last is not None  # max_offset - 1 < next_offset
            if last.next_offset <= max_offset:
                end_by_offset, next_at_end = last.position + last.size, last.next_offset
            else:
                end_by_offset, next_at_end = last.position, last.base_offset
        target = start + max_bytes
        if target >= end_by_offset:
            end, nxt = end_by_offset, next_at_end
        else:
            # The last batch boundary at or below target: jump there through the index.
            _, pos = self.offset_index.lookup_position(target)
            pos = max(pos, start)
            headers = self._headers(limit)
            while True:
                h = headers.at(pos)
                size = h[_H_LENGTH] + LOG_OVERHEAD
                if pos + size > target:
                    end, nxt = pos, h[_H_BASE]
                    break
                pos += size
        return SegmentRead(self._region(start, end - start), first.base_offset, nxt)

    def _region(self, position: int, length: int) -> FileRegion:
        return FileRegion(self.file.reader, self.log_path, position, length)

    def read_bytes(self, position: int, length: int) -> bytes:
        data = self.file.pread(position, length)
        if len(data) != length:
            raise self._corrupt(position, f"short read: {len(data)} of {length} bytes")
        return data

    def offset_for_timestamp(self, timestamp: int) -> BatchInfo | None:
        """The first batch whose maxTimestamp is >= ``timestamp``, or None (batch granularity:
        ``Log.offset_for_timestamp`` decodes that batch to find the exact record)."""
        if self.max_timestamp < timestamp:
            return None
        entry = self.time_index.lookup_before(timestamp)
        if entry is None:
            pos = 0
        else:
            found = self.find_batch(entry[1])
            if found is None:
                raise self._corrupt(0, f"time index names offset {entry[1]} past the segment end")
            pos = found.position
        limit = self.file.size
        while pos < limit:
            h = self._header_at(pos, limit)
            if h[_H_MAX_TS] >= timestamp:
                return _info(pos, h)
            pos += h[_H_LENGTH] + LOG_OVERHEAD
        return None

    # --- loading and recovery ----------------------------------------------------------------

    def load(self) -> tuple[int, str] | None:
        """Load a trusted segment: sanity-check the indexes (rebuilding a failing one from
        the log headers) and find the segment end by scanning headers after the last
        index entry. Returns None, or (position, reason) if the data itself looks damaged
        (the caller then runs ``recover`` or refuses the segment)."""
        size = self.file.size
        if size > 0 and not (self.offset_index.existed and self.time_index.existed):
            # Index files are created at their first entry or at seal: an active segment
            # smaller than an index interval has none, and its rebuild is the header scan
            # a load does anyway. Only a rebuild that found entries means a file was lost.
            damage = self._rebuild_from_headers()
            if damage is None and len(self.offset_index):
                log.warning("rebuilt the missing indexes of %s from the log", self.log_path)
            return damage
        reason = self.offset_index.load(size)
        if reason is not None:
            log.warning("rebuilding offset index %s: %s", self.offset_index.path, reason)
            return self._rebuild_from_headers()
        entry_offset, entry_pos = self.offset_index.last_entry()
        if entry_pos > 0:
            # The tail scan below checks the batch at the last entry; check the first one too.
            raw = self.file.pread(0, HEADER_SIZE)
            if len(raw) < HEADER_SIZE:
                return 0, "truncated batch header"
            h = HEADER.unpack(raw)
            problem = _header_problem(h, 0, size)
            if problem is None and self._misplaced(h[_H_BASE], self.base_offset):
                problem = f"first batch has base offset {h[_H_BASE]}, file name says {self.base_offset}"
            if problem is not None:
                return 0, problem
        pos = entry_pos
        next_offset = entry_offset
        tail_max_ts, tail_max_off = NO_TIMESTAMP, self.base_offset
        while pos < size:
            raw = self.file.pread(pos, HEADER_SIZE)
            if len(raw) < HEADER_SIZE:
                return pos, "truncated batch header"
            h = HEADER.unpack(raw)
            problem = _header_problem(h, pos, size)
            if problem is None and (
                self._misplaced(h[_H_BASE], next_offset)
                or (pos == entry_pos and entry_pos > 0 and h[_H_BASE] != next_offset)
            ):
                problem = f"batch base offset {h[_H_BASE]} where {next_offset} was expected"
            if problem is not None:
                if entry_pos > 0 and pos == entry_pos:
                    log.warning("rebuilding indexes of %s: last entry is wrong (%s)", self.log_path, problem)
                    return self._rebuild_from_headers()
                return pos, problem
            next_offset = h[_H_BASE] + h[_H_DELTA] + 1
            if h[_H_MAX_TS] > tail_max_ts:
                tail_max_ts, tail_max_off = h[_H_MAX_TS], h[_H_BASE]
            pos += h[_H_LENGTH] + LOG_OVERHEAD
        self.next_offset = next_offset
        reason = self.time_index.load(next_offset)
        if reason is None and len(self.time_index) == 0 and len(self.offset_index) > 0:
            reason = "time index is empty although the offset index is not"
        if reason is not None:
            log.warning("rebuilding time index %s: %s", self.time_index.path, reason)
            return self._rebuild_from_headers()
        last = self.time_index.last_entry()
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        if tail_max_ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = tail_max_ts, tail_max_off
        self._bytes_since_index = size - entry_pos
        self._after_load()
        return None

    def _after_load(self) -> None:
        if self.created_ms is None and not self.is_empty:
            self.created_ms = self.file.mtime_ms()
        self.dirty = False

    def _reset_state(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self._bytes_since_index = 0
        self._tail = None

    def _rebuild_from_headers(self) -> tuple[int, str] | None:
        """Rebuild both indexes from the batch headers (no CRC: the data is trusted)."""
        self._reset_state()
        size = self.file.size
        pos = 0
        next_offset = self.base_offset
        while pos < size:
            raw = self.file.pread(pos, HEADER_SIZE)
            if len(raw) < HEADER_SIZE:
                return pos, "truncated batch header"
            h = HEADER.unpack(raw)
            problem = _header_problem(h, pos, size)
            if problem is None and self._misplaced(h[_H_BASE], next_offset):
                problem = f"batch base offset {h[_H_BASE]} where {next_offset} was expected"
            if problem is not None:
                return pos, problem
            size_b = h[_H_LENGTH] + LOG_OVERHEAD
            self._track(h[_H_BASE], pos, size_b, h[_H_MAX_TS])
            next_offset = h[_H_BASE] + h[_H_DELTA] + 1
            pos += size_b
        self.next_offset = next_offset
        self._after_load()
        return None

    def _scan(self, *, build: bool) -> tuple[int, int, str | None]:
        """Validate every batch (structure, offsets in sequence, CRC-32C) from the start.

        Returns (valid bytes, next offset after them, why the batch after them is invalid
        or None). With ``build`` the indexes and timestamps are rebuilt on the way.
        """
        size = self.file.size
        pos = 0
        next_offset = self.base_offset
        buf = b""
        buf_at = 0  # file position of buf[0]
        while pos < size:
            if pos + HEADER_SIZE > buf_at + len(buf):
                buf = self.file.pread(pos, min(_SCAN_CHUNK, size - pos))
                buf_at = pos
            rel = pos - buf_at
            if len(buf) - rel < HEADER_SIZE:
                return pos, next_offset, f"truncated batch header: {size - pos} bytes left"
            h = HEADER.unpack_from(buf, rel)
            problem = _header_problem(h, pos, size)
            if problem is None:
                if pos == 0 and self._misplaced(h[_H_BASE], self.base_offset):
                    problem = f"first batch has base offset {h[_H_BASE]}, file name says {self.base_offset}"
                elif self._misplaced(h[_H_BASE], next_offset):
                    problem = f"batch base offset {h[_H_BASE]} where {next_offset} was expected"
            if problem is not None:
                return pos, next_offset, problem
            bsize = h[_H_LENGTH] + LOG_OVERHEAD
            if rel + bsize > len(buf):
                buf = self.file.pread(pos, max(bsize, min(_SCAN_CHUNK, size - pos)))
                buf_at = pos
                rel = 0
                if len(buf) < bsize:
                    return pos, next_offset, f"batch of {bsize} bytes truncated at {len(buf)} bytes"
            crc = crc32c(memoryview(buf)[rel + CRC_START : rel + bsize])
            if crc != h[_H_CRC]:
                return pos, next_offset, f"CRC mismatch: stored {h[_H_CRC]:#010x}, computed {crc:#010x}"
            if build:
                self._track(h[_H_BASE], pos, bsize, h[_H_MAX_TS])
            next_offset = h[_H_BASE] + h[_H_DELTA] + 1
            pos += bsize
        return pos, next_offset, None

    def verify(self) -> int:
        """Validate every batch (CRC included) without modifying anything; returns the
        number of bytes verified. Raises CorruptLogError(path, position, reason)."""
        end, _, problem = self._scan(build=False)
        if problem is not None:
            raise self._corrupt(end, problem)
        return end

    def recover(self, max_message_bytes: int = 0, *, allow_truncate: bool = True) -> int:
        """Full validation; rebuild the indexes; cut the file at the first invalid batch.

        Returns the number of bytes dropped. Without ``allow_truncate`` an invalid batch
        raises CorruptLogError instead. ``max_message_bytes`` is deliberately not used as a
        validity bound: max.message.bytes may have been lowered after older, larger
        batches were written, and those are still valid data.
        """
        del max_message_bytes
        self._reset_state()
        end, next_offset, problem = self._scan(build=True)
        dropped = self.file.size - end
        if problem is not None:
            if not allow_truncate:
                raise self._corrupt(end, problem)
            log.warning(
                "truncating %s at position %d (%s): dropping %d bytes", self.log_path, end, problem, dropped
            )
            self.file.truncate(end)
        self.next_offset = next_offset
        self._after_load()
        return dropped

    # --- durability and lifecycle --------------------------------------------------------------

    def write_index_pending(self) -> None:
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def sync(self) -> None:
        """fsync the log and the indexes (index entries must have been written first; the
        transaction index writes its entries at once)."""
        self.file.fsync()
        self.offset_index.fsync()
        self.time_index.fsync()
        self.txn_index.fsync()

    def sync_data(self) -> None:
        """Group-commit durability: only the log's bytes.

        Index files are not synced here: after an unclean shutdown every segment from the
        recovery point on (always including the active one) is rescanned and its indexes
        rebuilt, and seal/close sync them fully. Syncing them per commit would triple the
        fsyncs on the produce path for nothing recovery relies on.
        """
        self.file.datasync()

    def flush(self) -> None:
        self.dirty = False
        self.write_index_pending()
        self.sync()

    def seal(self) -> None:
        """No more appends: create the index files if no entry did (tiering uploads them,
        the cleaner renames them), make everything durable, and release the ``.log``
        descriptor (the next read reopens it)."""
        self.offset_index.materialize()
        self.time_index.materialize()
        self.flush()
        self.sealed = True
        self.file.release()

    def release(self) -> None:
        """For a sealed segment just loaded: its index files on disk, whole (a rebuild at
        load keeps entries pending; tiering uploads the files by path), and no
        descriptor held until it is read (``LogFile.release``)."""
        if self.sealed:
            self.offset_index.materialize()
            self.time_index.materialize()
            self.write_index_pending()
            self.file.release()

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and everything after; returns bytes dropped."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        dropped = self.file.size - found.position
        self._tail = None
        self.file.truncate(found.position)
        self.offset_index.truncate_to(found.base_offset)
        self.time_index.truncate_to(found.base_offset)
        # ``offset`` may fall in a gap (a compacted segment): the log then ends at ``offset``,
        # not at the dropped batch's base, so a follower refetches from there.
        self.next_offset = min(found.base_offset, offset) if self.compacted else found.base_offset
        # Recompute the max timestamp from what is left.
        last = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = last if last else (NO_TIMESTAMP, self.base_offset)
        _, entry_pos = self.offset_index.last_entry()
        for b in self.batches(entry_pos):
            if b.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = b.max_timestamp, b.base_offset
        self._bytes_since_index = self.file.size - entry_pos
        # Aborted transactions whose marker was dropped are open again (the producer state
        # is rebuilt by the Log).
        self.txn_index.truncate_to(self.next_offset)
        if self.is_empty:
            self.created_ms = None
        self.dirty = True
        return dropped

    def close(self) -> None:
        """Write pending index entries and close every file (no fsync)."""
        try:
            self.offset_index.close()
            self.time_index.close()
            self.txn_index.close()
        finally:
            self.offset_index.close_quietly()
            self.time_index.close_quietly()
            self.txn_index.close_quietly()
            self.file.close()

    def close_quietly(self) -> None:
        self.offset_index.close_quietly()
        self.time_index.close_quietly()
        self.txn_index.close_quietly()
        try:
            self.file.close()
        except StorageError:
            pass

    def delete(self) -> None:
        """Remove the files. Fetches holding a region of it can still read it."""
        self.deleted = True
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.file.delete()


class _HeaderWindow:
    """Batch headers of one segment read through a window of ``chunk`` bytes: a header
    outside the window (or cut by its end) refills it from that header on. Validation is
    ``Segment._header_at``'s: a truncated or impossible header is a CorruptLogError."""

    __slots__ = ("_at", "_buf", "_chunk", "_limit", "_seg")

    def __init__(self, seg: Segment, limit: int, chunk: int) -> None:
        self._seg = seg
        self._limit = limit
        self._chunk = chunk
        self._buf = b""
        self._at = 0

    def at(self, pos: int) -> tuple[int, ...]:
        rel = pos - self._at
        buf = self._buf
        if rel < 0 or rel + HEADER_SIZE > len(buf):
            buf = self._buf = self._seg.file.pread(pos, min(self._chunk, self._limit - pos))
            self._at, rel = pos, 0
            if len(buf) < HEADER_SIZE:
                raise self._seg._corrupt(pos, f"truncated batch header: {len(buf)} of {HEADER_SIZE} bytes")
        h = HEADER.unpack_from(buf, rel)
        problem = _header_problem(h, pos, self._limit)
        if problem is not None:
            raise self._seg._corrupt(pos, problem)
        return h
