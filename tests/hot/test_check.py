"""hot.check: the scan behind ``strata check`` names exactly the batches a reader cannot
pass (bad batch, unreadable region, torn tail), reading only, in bounded chunks."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from hot.batch import Compression
from hot.check import ProblemKind, check_partition_dir, run_scan, scan_segment
from hot.log import LOG_START_OFFSET_FILE, Log
from hot.records import RecordInput, build_batch
from tests.hot.badbatch import REASON, malformed_batch
from tests.hot.hotlib import batch_at, open_log

CFG: dict[str, object] = {"segment_bytes": 1024, "index_interval_bytes": 128, "flush_mode": "interval"}


def fill(log: Log, batches: int) -> None:
    for i in range(batches):
        log.append(batch_at(log.log_end_offset, 1 + i % 3, size=30 + 7 * i % 50))


def build_log(d: Path, *, bad_after: int = 12, after: int = 12) -> tuple[int, bytes]:
    """A closed multi-segment log with one malformed batch in a sealed segment; returns
    the bad batch's base offset and bytes."""
    log = open_log(d, **CFG)
    fill(log, bad_after)
    base = log.log_end_offset
    bad = malformed_batch(base)
    log.append_as_follower(bad)
    fill(log, after)
    log.close()
    return base, bad


def files(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"))


def snapshot(d: Path) -> dict[str, tuple[int, int, bytes]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in d.iterdir()}


def test_clean_partition_counts_every_batch_and_record(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    fill(log, 30)
    gz = [RecordInput(b"k%d" % i, b"z" * 200) for i in range(5)]
    log.append(build_batch(gz, compression=Compression.GZIP))
    records, end = log.log_end_offset, log.log_end_offset
    log.close()
    before = snapshot(d)
    result = check_partition_dir(d, "t", 0)
    assert result.problems == []
    assert len(result.segments) == len(files(d)) > 2
    assert result.batches == 31 and result.records == records == end
    assert result.bytes == sum(p.stat().st_size for p in files(d))
    assert snapshot(d) == before  # read-only: nothing written, not even a timestamp


def test_bad_batch_in_a_sealed_segment_is_named_exactly(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    base, bad = build_log(d)
    [seg] = [p for p in files(d) if bad in p.read_bytes()]
    assert seg != files(d)[-1]  # in the middle of the log, not its tail
    position = seg.read_bytes().index(bad)
    for chunk in (4 * 1024 * 1024, 100, 61):  # batches straddle the read chunks
        result = check_partition_dir(d, "t", 0, chunk_size=chunk)
        [p] = result.problems
        assert p.kind is ProblemKind.BAD_BATCH and p.counts
        assert (p.segment, p.position, p.size) == (seg.name, position, len(bad))
        assert (p.base_offset, p.last_offset, p.skip_to) == (base, base + 2, base + 3)
        assert REASON in p.reason
    # The indexes play no part.
    for idx in [*d.glob("*.index"), *d.glob("*.timeindex")]:
        idx.unlink()
    assert check_partition_dir(d, "t", 0).problems == result.problems


def test_torn_tail_is_told_apart_from_damage_in_the_middle(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    fill(log, 40)
    log.close()
    segs = files(d)
    last, sealed = segs[-1], segs[1]
    size = last.stat().st_size
    with open(last, "ab") as f:  # a batch cut short by a crash: its header survived
        f.write(batch_at(0, 3)[:70])
    [p] = check_partition_dir(d, "t", 0).problems
    assert p.kind is ProblemKind.TORN_TAIL and not p.counts
    assert (p.segment, p.position, p.size) == (last.name, size, 70)
    assert p.base_offset == 0 and "runs past the end of the segment" in p.reason
    os.truncate(last, size + 20)  # a header cut short
    [p] = check_partition_dir(d, "t", 0).problems
    assert p.kind is ProblemKind.TORN_TAIL and "truncated batch header: 20 of 61 bytes" in p.reason
    os.truncate(last, size)
    os.truncate(last, size + 4096)  # extended, never written: zeros
    [p] = check_partition_dir(d, "t", 0).problems
    assert p.kind is ProblemKind.TORN_TAIL and p.reason.startswith("4096 zero bytes")
    os.truncate(last, size)
    assert check_partition_dir(d, "t", 0).problems == []
    data = bytearray(last.read_bytes())
    data[-1] ^= 0xFF  # the log's last batch fails its CRC: bad, with a hint about crashes
    last.write_bytes(bytes(data))
    [p] = check_partition_dir(d, "t", 0).problems
    assert p.kind is ProblemKind.BAD_BATCH and p.reason.startswith("CRC mismatch")
    assert p.reason.endswith("after a crash, recovery truncates it)")
    data[-1] ^= 0xFF
    last.write_bytes(bytes(data))

    # An impossible length in a sealed segment: the rest of that segment is unreachable.
    data = bytearray(sealed.read_bytes())
    first_len = struct.unpack_from(">i", data, 8)[0]
    second = first_len + 12
    struct.pack_into(">i", data, second + 8, 3)
    sealed.write_bytes(bytes(data))
    [p] = check_partition_dir(d, "t", 0).problems
    assert p.kind is ProblemKind.UNREADABLE and p.counts
    assert (p.segment, p.position, p.size) == (sealed.name, second, len(data) - second)
    assert p.base_offset is None and p.skip_to == int(segs[2].stem)
    assert "batch length 3 below minimum 49" in p.reason


def test_crc_mismatch_and_the_log_start_offset(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    fill(log, 30)
    log.close()
    first = files(d)[0]
    data = bytearray(first.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records
    first.write_bytes(bytes(data))
    [p] = check_partition_dir(d, "t", 0).problems
    assert p.kind is ProblemKind.BAD_BATCH and p.position == 0 and p.reason.startswith("CRC mismatch")
    # A damaged lastOffsetDelta (under the CRC) is not believed: the next batch says
    # where readers resume, and nothing after it is out of sequence.
    struct.pack_into(">i", data, 23, 1_000_000)
    first.write_bytes(bytes(data))
    [q] = check_partition_dir(d, "t", 0).problems
    assert (q.position, q.last_offset, q.skip_to) == (0, 1_000_000, p.skip_to)
    # Behind the log start offset (DeleteRecords, retention) no reader gets to it.
    (d / LOG_START_OFFSET_FILE).write_text(f"{p.skip_to}\n")
    [q] = check_partition_dir(d, "t", 0).problems
    assert q.below_log_start and not q.counts
    (d / LOG_START_OFFSET_FILE).write_text(f"{p.last_offset}\n")  # the batch holds the log start
    [q] = check_partition_dir(d, "t", 0).problems
    assert not q.below_log_start and q.counts


def test_offset_gaps_are_bad_except_in_compacted_topics(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, cleanup_policy="compact", **CFG)
    b = bytearray(build_batch([RecordInput(b"a", b"1"), RecordInput(b"b", b"2")]))
    log.append_as_follower(bytes(b))
    struct.pack_into(">q", b, 0, 10)  # the cleaner dropped offsets 2-9
    log.append_as_follower(bytes(b))
    log.close()
    assert check_partition_dir(d, "t", 0, compact=True).problems == []
    [p] = check_partition_dir(d, "t", 0).problems
    assert p.kind is ProblemKind.BAD_BATCH and p.reason == "base offset 10 where 2 was expected"


def test_a_failed_read_is_reported_where_it_happened() -> None:
    data = batch_at(0, 2) + batch_at(2, 2)
    first = len(batch_at(0, 2))

    def read(pos: int, n: int) -> bytes:
        if pos >= first:
            raise OSError(5, "Input/output error")
        return data[pos : min(pos + n, first)]

    result = run_scan(scan_segment("x.log", 0, len(data), chunk_size=first), read)
    [p] = result.problems
    assert p.kind is ProblemKind.UNREADABLE and p.position == first and "Input/output error" in p.reason
    assert result.batches == 1 and result.records == 2
