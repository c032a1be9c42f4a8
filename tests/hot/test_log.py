"""Log: appends and validation, offsets, rolling, reads, high watermark, retention, truncation."""

from __future__ import annotations

import errno
import itertools
import os
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from hot.batch import HEADER, TimestampType, parse_header, validate_batch
from hot.errors import (
    CorruptLogError,
    CorruptRecordError,
    InvalidRecordError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    UnsupportedMagicError,
)
from hot.log import LOG_START_OFFSET_FILE, Log
from tests.hot.hotlib import batch_at, build, decode, headers, open_log, value_for


def fill(log: Log, batches: int, *, records: int = 3, size: int = 60, ts: int | None = None) -> None:
    for _ in range(batches):
        log.append(batch_at(log.log_end_offset, records, size=size, ts=ts))


def all_records(log: Log) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return decode(log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset).read())


# --- appends --------------------------------------------------------------------------------------


def test_append_assigns_consecutive_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    info = log.append(batch_at(0, 3))
    assert (info.first_offset, info.last_offset, info.batch_count, info.record_count) == (0, 2, 1, 3)
    assert info.max_timestamp == 1002 and info.log_append_time_ms == -1
    two = batch_at(3, 2) + batch_at(5, 4)
    info = log.append(two)
    assert (info.first_offset, info.last_offset, info.batch_count, info.record_count) == (3, 8, 2, 6)
    # Offsets come from the log, not from the producer's batch.
    info = log.append(build([(b"k9", value_for(9), 1009)], base_offset=12345))
    assert (info.first_offset, info.last_offset) == (9, 9)
    assert log.log_end_offset == 10 == log.high_watermark
    recs = all_records(log)
    assert [r[0] for r in recs] == list(range(10))
    assert [r[3] for r in recs] == [value_for(o) for o in range(10)]
    log.close()


def test_leader_epoch_is_stamped(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    log.append(batch_at(0, 2), leader_epoch=7)
    raw = log.read(0, 1 << 20).read()
    h = parse_header(raw)
    assert h.partition_leader_epoch == 7 and h.base_offset == 0
    validate_batch(raw)
    log.close()


def corrupt_crc(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[-1] ^= 0x01
    return bytes(b)


def with_records_count(batch: bytes, count: int) -> bytes:
    b = bytearray(batch)
    struct.pack_into(">i", b, 57, count)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


@pytest.mark.parametrize(
    ("make_bad", "error"),
    [
        (corrupt_crc, CorruptRecordError),
        (lambda b: b[:16] + b"\x01" + b[17:], UnsupportedMagicError),
        (lambda b: b[:-5], CorruptRecordError),
        (lambda b: b + b"\x00" * 7, UnsupportedMagicError),  # the zeros start a "batch" of magic 0
        (lambda b: with_records_count(b, 2), InvalidRecordError),
    ],
)
def test_one_bad_batch_appends_nothing(tmp_path: Path, make_bad: object, error: type[Exception]) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    log.append(batch_at(0, 1))
    size = log.size
    payload = batch_at(1, 2) + make_bad(batch_at(3, 3)) + batch_at(6, 1)  # type: ignore[operator]
    with pytest.raises(error):
        log.append(payload)
    assert log.log_end_offset == 1 and log.size == size
    log.append(batch_at(1, 1))
    assert [r[0] for r in all_records(log)] == [0, 1]
    log.close()


def test_oversize_batch_and_empty_payload(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", max_message_bytes=1000, flush_mode="interval")
    big = batch_at(0, 1, size=2000)
    with pytest.raises(RecordTooLargeError):
        log.append(big)
    with pytest.raises(RecordTooLargeError):
        log.append(batch_at(0, 1) + big)
    with pytest.raises(InvalidRecordError):
        log.append(b"")
    with pytest.raises(CorruptRecordError):
        log.append(batch_at(0, 1) + b"\x00" * 11)  # trailing bytes that are not a whole batch
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


def test_log_append_time_restamps_with_valid_crc(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval", message_timestamp_type="LogAppendTime")
    info = log.append(batch_at(0, 3) + batch_at(3, 2), now_ms=123_456)
    assert info.log_append_time_ms == 123_456 and info.max_timestamp == 123_456
    raw = log.read(0, 1 << 20).read()
    for pos, _, _ in headers(raw):
        h = validate_batch(raw, pos)  # CRC recomputed
        assert h.timestamp_type is TimestampType.LOG_APPEND_TIME
        assert h.max_timestamp == 123_456
    assert [(r[0], r[1]) for r in decode(raw)] == [(o, 123_456) for o in range(5)]
    log.close()


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    b0 = bytearray(batch_at(0, 2))
    struct.pack_into(">i", b0, 12, 5)  # the leader's epoch survives
    info = log.append_as_follower(bytes(b0) + build([(None, b"x", 1)], base_offset=2))
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert parse_header(log.read(0, 1 << 20).read()).partition_leader_epoch == 5
    with pytest.raises(InvalidRecordError, match="non-monotonic"):
        log.append_as_follower(build([(None, b"y", 1)], base_offset=7))
    with pytest.raises(InvalidRecordError, match="non-monotonic"):
        log.append_as_follower(
            build([(None, b"y", 1)], base_offset=3) + build([(None, b"z", 1)], base_offset=3)
        )
    assert log.log_end_offset == 3
    log.close()


# --- rolling ----------------------------------------------------------------------------------


def test_roll_on_segment_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    fill(log, 60)
    segs = log.segments()
    assert len(segs) > 5
    for a, b in itertools.pairwise(segs):
        assert a.next_offset == b.base_offset and 0 < a.size <= 1024
    assert {p.name for p in (tmp_path / "t-0").iterdir()} >= {f"{s.base_offset:020d}.log" for s in segs}
    # A single batch above segment.bytes goes into a segment of its own; empty segments never roll.
    log.append(batch_at(log.log_end_offset, 1, size=3000))
    assert log.segments()[-1].size > 1024
    log.roll()
    n = len(log.segments())
    log.roll()
    assert len(log.segments()) == n and log.active_segment.is_empty
    log.close()


def test_roll_on_segment_ms(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_ms=1000, flush_mode="interval")
    log.append(batch_at(0, 1), now_ms=10_000)
    log.append(batch_at(1, 1), now_ms=10_900)
    log.append(batch_at(2, 1), now_ms=11_000)
    assert len(log.segments()) == 1
    log.append(batch_at(3, 1), now_ms=11_001)
    assert [s.base_offset for s in log.segments()] == [0, 3]
    log.append(batch_at(4, 1), now_ms=11_500)
    assert len(log.segments()) == 2
    log.close()


# --- reads -----------------------------------------------------------------------------------------


def test_every_offset_maps_to_its_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=2048, index_interval_bytes=200, flush_mode="interval")
    for i in range(80):
        log.append(batch_at(log.log_end_offset, 1 + i % 5, size=20 + i * 7 % 90))
    assert len(log.segments()) > 3
    whole = log.read(0, 1 << 30)
    assert len(whole.regions) == len(log.segments()) and whole.next_offset == log.log_end_offset
    layout = headers(whole.read())
    for _, base, nxt in layout:
        for off in range(base, nxt):
            r = log.read(off, 1)
            assert r.first_offset == base and len(r.regions) == 1
            assert headers(r.read())[0][1:] == (base, nxt)
            assert r.next_offset == nxt
    log.close()


def test_reads_span_segments_within_max_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    fill(log, 40)
    whole = log.read(0, 1 << 30).read()
    starts = [p for p, _, _ in headers(whole)]
    sizes = [b - a for a, b in itertools.pairwise([*starts, len(whole)])]
    for max_bytes in (1, 150, 1000, 2500, 5000):
        r = log.read(0, max_bytes)
        data = r.read()
        assert whole.startswith(data) and r.size == len(data)
        # The largest prefix of whole batches within max_bytes (at least one batch).
        n, total = 0, 0
        while n < len(sizes) and total + sizes[n] <= max_bytes:
            total += sizes[n]
            n += 1
        assert len(data) == max(total, sizes[0])
        assert len(headers(data)) == max(n, 1)
    assert log.read(0, 1, min_one=False).regions == ()
    log.close()


def test_high_watermark_bounds_reads(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")  # fsync mode, no flusher: HW moves on flush()
    fill(log, 3)
    assert log.high_watermark == 0 and log.log_end_offset == 9
    assert log.read(0, 1 << 20).regions == ()
    assert log.read(5, 1 << 20).regions == ()
    assert log.read(9, 1 << 20).regions == ()
    assert len(headers(log.read(0, 1 << 20, max_offset=9).read())) == 3
    assert log.flush() == 9
    assert log.high_watermark == 9 == log.recovery_point
    fill(log, 2)
    r = log.read(0, 1 << 20)
    assert r.next_offset == 9 and r.high_watermark == 9 and r.log_end_offset == 15
    assert log.read(9, 1 << 20).regions == ()
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(16, 100)
    assert "0" in str(e.value) and "15" in str(e.value)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.close()


def test_hw_future_and_listener(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    seen: list[int] = []
    log.add_hw_listener(lambda lg: seen.append(lg.high_watermark))
    assert log.high_watermark_future(0).done()
    fill(log, 2)
    fut = log.high_watermark_future(6)
    later = log.high_watermark_future(7)
    assert not fut.done()
    log.flush()
    assert fut.result(timeout=0) is None
    assert seen == [6] and not later.done()
    log.close()
    with pytest.raises(LogClosedError):
        later.result(timeout=0)
    with pytest.raises(LogClosedError):
        log.append(batch_at(0, 1))


def test_hw_listeners_told_when_the_log_start_rises(tmp_path: Path) -> None:
    """A fetch answer carries the log start: the HW listeners (a consumer session's marks)
    hear of DeleteRecords and of total retention, not of a local-only deletion."""
    log = open_log(tmp_path / "t-0", segment_bytes=1024, retention_ms=1000, flush_mode="interval")
    fill(log, 30, ts=5_000)
    log.flush()
    starts: list[int] = []
    log.add_hw_listener(lambda lg: starts.append(lg.log_start_offset))
    log.delete_records(3)
    assert starts == [3]
    log.delete_records(2)  # never backwards: nothing moved, nothing told
    assert starts == [3]
    assert log.apply_retention(now_ms=6_001)
    assert starts == [3, log.log_start_offset] and log.log_start_offset > 3
    log.close()


def test_interval_mode(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval", flush_messages=5)
    fill(log, 1, records=3)
    assert log.high_watermark == 3 and log.recovery_point == 0
    assert log.high_watermark_future(3).done()
    fill(log, 1, records=3)  # 6 unflushed messages >= flush.messages: flushed inline
    assert log.recovery_point == 6
    log.close()


def test_fsync_failure_takes_log_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 1)
    fut = log.high_watermark_future(3)

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "injected I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    monkeypatch.setattr(os, "fdatasync", failing_fsync)
    with pytest.raises(StorageError):
        log.flush()
    monkeypatch.undo()
    with pytest.raises(StorageError):
        fut.result(timeout=0)
    assert not log.is_online
    with pytest.raises(StorageError):
        log.append(batch_at(3, 1))
    with pytest.raises(StorageError):
        log.read(0, 100)
    with pytest.raises(StorageError):
        log.high_watermark_future(10).result(timeout=0)
    log.close()


def test_corrupt_header_on_read_takes_log_offline(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    fill(log, 30)
    seg = log.segments()[1]
    with open(seg.log_path, "r+b") as f:  # magic of the segment's first batch
        f.seek(16)
        f.write(b"\x07")
    with pytest.raises(CorruptLogError) as e:
        log.read(seg.base_offset, 1 << 20)
    assert e.value.path == seg.log_path and e.value.position == 0
    with pytest.raises(StorageError):
        log.read(0, 10)
    with pytest.raises(StorageError):
        log.append(batch_at(0, 1))
    log.close()


# --- timestamps -----------------------------------------------------------------------------------


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, index_interval_bytes=100, flush_mode="interval")
    # Record at offset o has timestamp 10 * o (several records per batch).
    while log.log_end_offset < 100:
        o = log.log_end_offset
        log.append(build([(None, b"v" * 30, 10 * x) for x in range(o, o + 4)]))
    assert len(log.segments()) > 3
    for target in (0, 5, 10, 11, 333, 555, 990):
        expect = (target + 9) // 10
        assert log.offset_for_timestamp(target) == (expect, 10 * expect)
    assert log.offset_for_timestamp(991) is None
    assert log.offset_for_timestamp(500, max_offset=40) is None
    log.delete_records(42)
    assert log.offset_for_timestamp(0) == (42, 420)
    log.close()


# --- retention -------------------------------------------------------------------------------------


def test_retention_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, retention_ms=1000, flush_mode="interval")
    fill(log, 30, ts=5_000)  # every record timestamped 5000
    segs = log.segments()
    assert len(segs) > 3
    assert log.apply_retention(now_ms=6_000) == []  # not older than retention.ms yet
    deleted = log.apply_retention(now_ms=6_001)
    assert deleted == [s.base_offset for s in segs[:-1]]  # never the active segment
    assert log.log_start_offset == segs[-1].base_offset == log.local_log_start_offset
    assert [s.base_offset for s in log.segments()] == [segs[-1].base_offset]
    assert not os.path.exists(segs[0].log_path) and not os.path.exists(segs[0].index_path)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.close()
    for clean in (True, False):
        again = open_log(tmp_path / "t-0", clean=clean, segment_bytes=1024, flush_mode="interval")
        assert again.log_start_offset == segs[-1].base_offset
        again.close()


def test_retention_by_size_keeps_at_least_retention_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, retention_bytes=3000, flush_mode="interval")
    fill(log, 40)
    sizes = [s.size for s in log.segments()]
    deleted = log.apply_retention(now_ms=0)
    assert deleted
    assert log.size >= 3000 > log.size - log.segments()[0].size
    assert sum(sizes) - log.size == sum(sizes[: len(deleted)])
    assert all_records(log)[0][0] == log.log_start_offset
    log.close()


def test_retention_respects_guard_and_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, retention_ms=0)
    fill(log, 30, ts=0)
    # fsync mode without flusher: rolled segments are durable, so HW reached the active segment.
    assert log.high_watermark == log.active_segment.base_offset
    log.retention_guard = lambda seg: False
    assert log.apply_retention(now_ms=10**6) == []
    allowed = log.segments()[1].base_offset
    log.retention_guard = lambda seg: seg.base_offset < allowed
    assert log.apply_retention(now_ms=10**6) == [0]
    assert log.log_start_offset == allowed
    log.close()


def test_region_survives_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, retention_ms=0, flush_mode="interval")
    fill(log, 20, ts=0)
    r = log.read(0, 1 << 20)
    before = r.read()
    assert log.apply_retention(now_ms=10**6)
    assert r.read() == before
    log.close()
    assert r.read() == before


def test_delete_records(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    fill(log, 30)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(log.high_watermark + 1)
    assert log.delete_records(40) == 40
    assert log.delete_records(10) == 40  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.read(39, 10)
    r = log.read(40, 10)
    assert r.first_offset <= 40 < r.next_offset
    assert (tmp_path / "t-0" / LOG_START_OFFSET_FILE).read_text().strip() == "40"
    deleted = log.apply_retention(now_ms=0)
    assert deleted and all(s.next_offset > 40 for s in log.segments())
    log.close()
    again = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    assert again.log_start_offset == 40
    assert again.delete_records(-1) == again.high_watermark
    again.close()


# --- truncation ---------------------------------------------------------------------------------------


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    fill(log, 40)
    before = all_records(log)
    log.truncate_to(50)  # batches hold 3 records: 50 is inside the batch [48, 51)
    assert log.log_end_offset == 48 == log.high_watermark
    assert all_records(log) == before[:48]
    assert all(s.base_offset < 48 for s in log.segments())
    fill(log, 1)
    assert log.log_end_offset == 51
    log.close(clean=False)
    again = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    assert again.log_end_offset == 51
    assert [r[0] for r in all_records(again)] == list(range(51))
    again.truncate_to(0)
    assert again.log_end_offset == 0 and again.size == 0 and len(again.segments()) == 1
    fill(again, 1)
    assert [r[0] for r in all_records(again)] == [0, 1, 2]
    again.close()


def test_truncate_below_log_start_restarts_there(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    fill(log, 40)
    log.delete_records(60)
    log.truncate_to(30)
    assert log.log_start_offset == log.log_end_offset == 30
    fill(log, 1)
    assert [r[0] for r in all_records(log)] == [30, 31, 32]
    log.close()


def test_reopen_preserves_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, index_interval_bytes=128, flush_mode="interval")
    fill(log, 50)
    before = all_records(log)
    segs = [(s.base_offset, s.next_offset, s.max_timestamp) for s in log.segments()]
    entries = [s.offset_index.entries() for s in log.segments()]
    log.close()
    for clean in (True, False):
        again = open_log(tmp_path / "t-0", clean=clean, segment_bytes=1024, index_interval_bytes=128)
        assert [(s.base_offset, s.next_offset, s.max_timestamp) for s in again.segments()] == segs
        assert [s.offset_index.entries() for s in again.segments()] == entries
        assert again.high_watermark == again.log_end_offset == again.recovery_point == segs[-1][1]
        assert all_records(again) == before
        again.close()


def test_header_is_unchanged_apart_from_offset_and_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    fill(log, 2)
    original = batch_at(3, 3, size=60)  # what fill() appended second
    stored = log.read(3, 1 << 20).read()
    assert stored[16:] == original[16:]
    assert HEADER.unpack_from(stored)[0] == 3
    log.close()
