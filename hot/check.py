"""Verification of stored record batches (``strata check``): which batches no reader can pass.

Every batch of every segment is decoded with the strict decoder
(``hot.records.decode_batch``: header, CRC-32C, decompression, every record; the one
marker record of a control batch is parsed too), in file order from position 0. Files
are opened read-only, no lock is taken and no index is read (a missing or stale
``.index`` does not matter), so a check can run beside a broker: it changes nothing.

The scan of one segment is a sans-I/O generator (``scan_segment``): it yields
``(position, length)`` read requests, is sent the bytes read (fewer when the data ends
early) and returns a ``SegmentCheck``. The same code checks a local ``.log`` file
(``check_segment_file``: ``pread``) and a segment object in the bucket (tiering.check:
ranged GETs). Memory stays within the read chunk plus the largest batch.

What a ``Problem`` is (``ProblemKind``):

    bad_batch   a whole batch (its length field frames it) that does not decode: CRC
                mismatch, impossible header field, malformed records, a payload that does
                not decompress, or a base offset out of sequence. Kafka consumers stop at
                it without an error; REST answers 503. It stays on disk across restarts
                (recovery checks the CRC only, and the CRC may well be right): readers get
                past it only by starting at ``skip_to`` (its last offset + 1).
    unreadable  the bytes from ``position`` to the end of the segment cannot be framed as
                batches (an impossible length, a magic other than 2, a read error): no
                batch after it in that segment can be reached. ``skip_to`` is the next
                segment's base offset (None in the last segment).
    torn_tail   the same at the end of a partition's last local segment where it looks
                like an interrupted write: a partial header, a batch running past the end
                of the file, or nothing but zero bytes. The broker truncates it when it
                recovers after a crash; on a running broker it can also be an append
                caught half-way. Not counted as bad.

Segment file layout and the recovery rules are hot.segment's and hot.log's.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hot.batch import HEADER, HEADER_SIZE, MAGIC, MIN_BATCH_LENGTH, BatchHeader
from hot.errors import StorageError, StrataError
from hot.log import CLEANER_CHECKPOINT_FILE, LOG_START_OFFSET_FILE, read_offset_file
from hot.records import decode_batch, parse_control_record
from hot.segment import LOG_SUFFIX, parse_segment_name

CHUNK_SIZE: Final = 4 * 1024 * 1024  # bytes asked for per read (more when one batch is larger)

# A read request: (position, length). The scan is sent the bytes read.
ReadRequest = tuple[int, int]
SegmentScan = Generator[ReadRequest, bytes, "SegmentCheck"]
Progress = Callable[[int], None]  # told the number of bytes each read returned


class ProblemKind(enum.StrEnum):
    BAD_BATCH = "bad_batch"
    UNREADABLE = "unreadable"
    TORN_TAIL = "torn_tail"


class ReadError(Exception):
    """Thrown into a scan by its driver when a read fails (the message says why)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One place in a segment that a reader cannot get past (kinds: module docstring)."""

    kind: ProblemKind
    segment: str  # the .log file name, or the object key of a remote segment
    position: int  # byte position in the segment
    size: int  # bytes of the batch, or of the region up to the end of the segment
    reason: str
    base_offset: int | None  # as the batch header says; None where no header can be trusted
    last_offset: int | None
    expected_offset: int  # where the batch before it ended (the segment's base at position 0)
    skip_to: int | None  # first offset a reader can resume at after it; None: unknown
    below_log_start: bool = False  # wholly below the log start offset: no reader gets there

    @property
    def counts(self) -> bool:
        """Whether it makes a check fail: not a torn tail, not below the log start."""
        return self.kind is not ProblemKind.TORN_TAIL and not self.below_log_start


@dataclass(frozen=True, slots=True)
class SegmentCheck:
    name: str
    base_offset: int
    size: int  # bytes scanned (the file's size when the scan began)
    batches: int  # whole batches walked, bad ones included
    records: int  # records decoded
    problems: tuple[Problem, ...]


@dataclass(frozen=True, slots=True)
class PartitionCheck:
    topic: str
    partition: int
    source: str  # "local" or "remote"
    log_start_offset: int | None
    segments: tuple[SegmentCheck, ...]
    note: str | None = None  # why nothing was scanned, when that is the case

    @property
    def problems(self) -> list[Problem]:
        return [p for s in self.segments for p in s.problems]

    @property
    def batches(self) -> int:
        return sum(s.batches for s in self.segments)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments)

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self.segments)


# --- the scan of one segment (sans-I/O) ---------------------------------------------------------


def _ensure(
    buf: bytes, buf_at: int, pos: int, n: int, end: int, chunk: int
) -> Generator[ReadRequest, bytes, tuple[bytes, int]]:
    """``(buf, buf_at)`` holding the ``n`` bytes at ``pos`` (fewer only when the data ends
    first), reading what is missing: at least a chunk, and never past ``end``."""
    have = buf_at + len(buf) - pos
    if have >= n:
        return buf, buf_at
    keep = buf[pos - buf_at :] if have > 0 else b""
    start = pos + len(keep)
    want = min(max(n - len(keep), chunk), end - start)
    if want <= 0:
        return keep, pos
    data = yield (start, want)
    return keep + data, pos


def _zero_rest(pos: int, end: int, chunk: int) -> Generator[ReadRequest, bytes, bool]:
    """Whether every byte from ``pos`` to ``end`` is zero (a crash can leave a file
    extended but never written: zeros), read a chunk at a time."""
    while pos < end:
        data = yield (pos, min(chunk, end - pos))
        if not data:
            return True  # the file shrank meanwhile: nothing more to look at
        if data.count(0) != len(data):
            return False
        pos += len(data)
    return True


def _framing_problem(h: BatchHeader, pos: int, end: int) -> tuple[str, bool] | None:
    """Why the header at ``pos`` cannot frame a batch, and whether that is because the
    data ends too soon (a partial batch), or None when it frames one."""
    if h.magic != MAGIC:
        return f"magic {h.magic} is not 2: no batch starts here", False
    if h.batch_length < MIN_BATCH_LENGTH:
        return f"batch length {h.batch_length} below minimum {MIN_BATCH_LENGTH}", False
    if pos + h.size > end:
        return f"batch of {h.size} bytes runs past the end of the segment ({end - pos} bytes left)", True
    return None


def _decode_problem(buf: bytes, rel: int) -> tuple[int, str | None]:
    """(records, None) for a batch that decodes, else (0, why not)."""
    try:
        batch = decode_batch(buf, rel)
        if batch.is_control:
            for rec in batch.records:
                parse_control_record(rec)
    except StrataError as e:
        return 0, str(e)
    return len(batch.records), None


def scan_segment(
    name: str,
    base_offset: int,
    size: int,
    *,
    allow_gaps: bool = False,
    tail: bool = False,
    chunk_size: int = CHUNK_SIZE,
) -> SegmentScan:
    """Check the ``size`` bytes of one segment whose first batch should have offset
    ``base_offset`` (the file name's). ``allow_gaps``: a compacted segment, where a batch
    may start after the previous one ended (never before). ``tail``: the partition's last
    local segment, where an unframeable end may be a torn write. The driver sends the
    bytes of each request, or throws ``ReadError`` into the scan."""
    problems: list[Problem] = []
    batches = records = 0
    expect = base_offset
    buf = b""
    buf_at = 0
    pos = 0
    end = size
    bad: int | None = None  # index in ``problems`` of the bad batch just walked

    def unframed(reason: str, partial: bool, zeros: bool, h: BatchHeader | None = None) -> Problem:
        # ``h``: the header of a batch cut short, whose offsets can be believed.
        kind = ProblemKind.TORN_TAIL if tail and (partial or zeros) else ProblemKind.UNREADABLE
        base, last = (h.base_offset, h.last_offset) if h is not None else (None, None)
        return Problem(kind, name, pos, end - pos, reason, base, last, expect, None)

    try:
        while pos < end:
            buf, buf_at = yield from _ensure(buf, buf_at, pos, HEADER_SIZE, end, chunk_size)
            rel = pos - buf_at
            if len(buf) - rel < HEADER_SIZE:
                end = min(end, buf_at + len(buf))  # the data ended before ``size``
                problems.append(
                    unframed(f"truncated batch header: {end - pos} of {HEADER_SIZE} bytes", True, False)
                )
                break
            h = BatchHeader(*HEADER.unpack_from(buf, rel))
            framing = _framing_problem(h, pos, end)
            if framing is not None:
                why, partial = framing
                zeros = tail and not partial and (yield from _zero_rest(pos, end, chunk_size))
                if zeros:
                    why = f"{end - pos} zero bytes ({why})"
                problems.append(unframed(why, partial, zeros, h if partial else None))
                break
            buf, buf_at = yield from _ensure(buf, buf_at, pos, h.size, end, chunk_size)
            rel = pos - buf_at
            if len(buf) - rel < h.size:
                end = buf_at + len(buf)
                problems.append(
                    unframed(f"batch of {h.size} bytes truncated at {end - pos} bytes", True, False, h)
                )
                break
            batches += 1
            if bad is not None and h.base_offset >= expect:
                # The batch after a bad one says where a reader resumes: a bad header's
                # offsets (lastOffsetDelta under a failed CRC) may be anything.
                problems[bad] = dataclasses.replace(problems[bad], skip_to=h.base_offset)
            n, reason = _decode_problem(buf, rel)
            records += n
            if h.base_offset < expect or (h.base_offset != expect and not allow_gaps and bad is None):
                where = f"base offset {h.base_offset} where {expect} was expected"
                reason = where if reason is None else f"{reason}; {where}"
            bad = None
            if reason is not None and tail and pos + h.size == end and reason.startswith("CRC mismatch"):
                # Possibly a torn write; kept as bad, since a clean restart would serve it.
                reason += " (the last batch of the log: after a crash, recovery truncates it)"
            if reason is not None:
                problems.append(
                    Problem(
                        ProblemKind.BAD_BATCH,
                        name,
                        pos,
                        h.size,
                        reason,
                        h.base_offset,
                        h.last_offset,
                        expect,
                        max(h.next_offset, expect),
                    )
                )
                bad = len(problems) - 1  # ``expect`` stays: this header is not believed
            else:
                expect = max(expect, h.next_offset)
            pos += h.size
    except ReadError as e:
        problems.append(
            Problem(ProblemKind.UNREADABLE, name, pos, end - pos, str(e), None, None, expect, None)
        )
    return SegmentCheck(name, base_offset, size, batches, records, tuple(problems))


def run_scan(
    scan: SegmentScan, read: Callable[[int, int], bytes], progress: Progress | None = None
) -> SegmentCheck:
    """Drive ``scan`` with a blocking ``read(position, length)``; an OSError of a read is
    thrown into the scan as ReadError."""
    try:
        request = next(scan)
        while True:
            try:
                data = read(*request)
            except OSError as e:
                request = scan.throw(ReadError(f"read of {request[1]} bytes at {request[0]} failed: {e}"))
                continue
            if progress is not None:
                progress(len(data))
            request = scan.send(data)
    except StopIteration as stop:
        result: SegmentCheck = stop.value
        return result


# --- local segments and partitions -------------------------------------------------------------


def check_segment_file(
    path: str | os.PathLike[str],
    base_offset: int,
    *,
    allow_gaps: bool = False,
    tail: bool = False,
    chunk_size: int = CHUNK_SIZE,
    progress: Progress | None = None,
) -> SegmentCheck:
    """Scan one ``.log`` file, opened read-only (OSError if it cannot be opened). Its size
    is taken when it is opened: bytes a running broker appends afterwards are not read."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        scan = scan_segment(
            os.path.basename(path), base_offset, size, allow_gaps=allow_gaps, tail=tail, chunk_size=chunk_size
        )
        return run_scan(scan, lambda p, n: os.pread(fd, n, p), progress)
    finally:
        os.close(fd)


def segment_files(directory: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """(base offset, path) of every ``<20 digits>.log`` in a partition directory, by base
    offset (a cleaner's ``.cleaned`` / ``.swap`` files in the making are not segments)."""
    out = []
    for name in os.listdir(directory):
        parsed = parse_segment_name(name)
        if parsed is not None and parsed[1] == LOG_SUFFIX:
            out.append((parsed[0], os.path.join(directory, name)))
    return sorted(out)


def finish_partition(
    topic: str,
    partition: int,
    source: str,
    segments: Sequence[SegmentCheck],
    log_start_offset: int | None,
) -> PartitionCheck:
    """Fill in what a segment alone cannot know: where a reader resumes after an
    unreadable region (the next segment's base) and which problems lie wholly below the
    log start offset (no reader gets there; retention removes them)."""
    done: list[SegmentCheck] = []
    for i, seg in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        fixed = []
        for p in seg.problems:
            skip_to = p.skip_to if p.skip_to is not None else nxt
            if skip_to is not None and nxt is not None and skip_to > nxt:
                skip_to = nxt  # a damaged header's claim; the next segment starts there
            below = log_start_offset is not None and skip_to is not None and skip_to <= log_start_offset
            fixed.append(dataclasses.replace(p, skip_to=skip_to, below_log_start=below))
        done.append(dataclasses.replace(seg, problems=tuple(fixed)))
    return PartitionCheck(topic, partition, source, log_start_offset, tuple(done))


def check_partition_dir(
    directory: str | os.PathLike[str],
    topic: str,
    partition: int,
    *,
    compact: bool = False,
    chunk_size: int = CHUNK_SIZE,
    progress: Progress | None = None,
) -> PartitionCheck:
    """Scan every segment of one partition directory (hot.log's layout). ``compact``: the
    topic is compacted, so batches may skip offsets anywhere (below the cleaner's
    checkpoint they may in any topic that has one)."""
    d = Path(directory)
    try:
        files = segment_files(d)
    except FileNotFoundError:
        # Not hosted here (cluster mode), or a single node's that it creates at start.
        return PartitionCheck(topic, partition, "local", None, (), note="no local directory")
    except OSError as e:
        raise StorageError(f"cannot list {d}: {e}") from e
    log_start = read_offset_file(str(d / LOG_START_OFFSET_FILE))
    cleaned_below = read_offset_file(str(d / CLEANER_CHECKPOINT_FILE))
    segments: list[SegmentCheck] = []
    for i, (base, path) in enumerate(files):
        gaps = compact or (cleaned_below is not None and base < cleaned_below)
        try:
            seg = check_segment_file(
                path,
                base,
                allow_gaps=gaps,
                tail=i == len(files) - 1,
                chunk_size=chunk_size,
                progress=progress,
            )
        except FileNotFoundError:
            continue  # deleted by a running broker (retention, cleaner) since the listing
        except OSError as e:
            problem = Problem(
                ProblemKind.UNREADABLE, os.path.basename(path), 0, 0, str(e), None, None, base, None
            )
            seg = SegmentCheck(os.path.basename(path), base, 0, 0, 0, (problem,))
        segments.append(seg)
    if log_start is None and segments:
        log_start = segments[0].base_offset
    return finish_partition(topic, partition, "local", segments, log_start)
