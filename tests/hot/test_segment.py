"""Segment: append, index cadence, lookups, reads, verify / recover, truncate, delete."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hot.batch import HEADER
from hot.errors import CorruptLogError
from hot.segment import Segment, parse_segment_name, segment_name
from tests.hot.hotlib import batch_at, decode, headers

BASE = 1000


def put(seg: Segment, count: int, *, ts: int | None = None, size: int = 40) -> bytes:
    """Append one batch of ``count`` records at the segment's end; returns its bytes."""
    off = seg.next_offset
    data = bytearray(batch_at(off, count, ts=ts, size=size))
    data[0:8] = off.to_bytes(8, "big")
    h = HEADER.unpack_from(data)
    seg.append([bytes(data)], len(data), [(off, len(data), h[8])], off + count, now_ms=0)
    return bytes(data)


def filled(tmp_path: Path, batches: int = 60, interval: int = 256) -> tuple[Segment, list[bytes]]:
    seg = Segment(str(tmp_path), BASE, index_interval_bytes=interval)
    out = [put(seg, 1 + i % 4, size=20 + (i * 37) % 200) for i in range(batches)]
    return seg, out


def test_names() -> None:
    assert segment_name(42) == "00000000000000000042"
    assert parse_segment_name("00000000000000000042.log") == (42, ".log")
    assert parse_segment_name("00000000000000000042.timeindex") == (42, ".timeindex")
    assert parse_segment_name("42.log") is None
    assert parse_segment_name("0000000000000000004x.index") is None
    assert parse_segment_name("recovery-point") is None


def test_append_tracks_offsets_timestamps_and_index_cadence(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path)
    assert seg.size == sum(len(b) for b in batches)
    assert seg.next_offset == BASE + sum(1 + i % 4 for i in range(60))
    assert seg.max_timestamp == 1000 + seg.next_offset - 1
    entries = seg.offset_index.entries()
    # Sparse: about one entry per 256 bytes, each at a batch start with that batch's base.
    starts = {pos: base for pos, base, _ in headers(b"".join(batches))}
    assert 0 < len(entries) < len(batches)
    for off, pos in entries:
        assert starts[pos] == off
    assert 0 not in [p for _, p in entries]
    seg.close()


def test_find_batch_for_every_offset(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path)
    layout = headers(b"".join(batches))
    for pos, base, nxt in layout:
        for off in range(base, nxt):
            found = seg.find_batch(off)
            assert found is not None and (found.position, found.base_offset) == (pos, base)
            assert seg.find_position(off) == pos
    assert seg.find_batch(seg.next_offset) is None
    assert seg.find_batch(0).base_offset == BASE  # type: ignore[union-attr]
    seg.close()


def test_read_regions_respect_bounds(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path)
    whole = b"".join(batches)
    layout = headers(whole)
    ends = [p for p, _, _ in layout[1:]] + [len(whole)]
    r = seg.read_regions(BASE, 10**9, 10**18, True)
    assert r.region is not None and r.region.read() == whole and r.next_offset == seg.next_offset
    # Brute force: from every 7th batch, several byte and offset bounds.
    for i in range(0, len(layout), 7):
        start_pos, start_base, _ = layout[i]
        for max_bytes in (1, 100, 700, 3000, 10**9):
            for max_offset in (layout[i][2], layout[min(i + 5, len(layout) - 1)][2] - 1, 10**18):
                r = seg.read_regions(start_base, max_bytes, max_offset, True)
                n = i
                while n < len(layout) and layout[n][2] <= max_offset and ends[n] - start_pos <= max_bytes:
                    n += 1
                if n == i and layout[i][2] <= max_offset:
                    n = i + 1  # min_one
                if n == i:
                    assert r.region is None and r.next_offset == start_base
                    continue
                assert r.region is not None and r.first_offset == start_base
                assert (r.region.position, r.region.length) == (start_pos, ends[n - 1] - start_pos)
                assert r.next_offset == layout[n - 1][2]
    # min_one=False with a first batch above max_bytes: nothing.
    assert seg.read_regions(BASE, 1, 10**18, False).region is None
    # Starting inside a batch returns that whole batch.
    pos, base, nxt = layout[10]
    r = seg.read_regions(nxt - 1, 1, 10**18, True)
    assert r.region is not None and r.first_offset == base and r.region.position == pos
    seg.close()


def _reads(seg: Segment, offsets: range) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for off in offsets:
        for max_bytes in (1, 40, 10**9):
            for max_offset in (off, seg.next_offset - 1, seg.next_offset, 10**18):
                for min_one in (True, False):
                    r = seg.read_regions(off, max_bytes, max_offset, min_one)
                    at = None if r.region is None else (r.region.position, r.region.length)
                    out.append((at, r.first_offset, r.next_offset))
    return out


def test_the_tail_batch_is_read_without_its_header_as_with_it(tmp_path: Path) -> None:
    """A read of the last batch appended takes its place and size from the append
    (``Segment._tail``, issue 34 round 6): the same answer as the index and header scan,
    for every offset, bound and ``min_one``; forgotten after a truncation."""
    seg, _ = filled(tmp_path, batches=12)
    assert seg._tail is not None
    offsets = range(BASE, seg.next_offset + 2)
    fast = _reads(seg, offsets)
    tail, seg._tail = seg._tail, None
    assert fast == _reads(seg, offsets)
    seg._tail = tail
    seg.truncate_to(seg.next_offset - 1)  # the last batch dropped
    assert seg._tail is None
    put(seg, 3)
    assert seg._tail is not None and seg._tail[3] == seg.next_offset
    fast = _reads(seg, offsets)
    seg._tail = None
    assert fast == _reads(seg, offsets)
    seg.close()


def test_verify_and_recover(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path)
    assert seg.verify() == seg.size
    layout = headers(b"".join(batches))
    flip_at = layout[30][0] + 40  # inside the CRC-covered part of batch 30
    with open(seg.log_path, "r+b") as f:
        f.seek(flip_at)
        byte = f.read(1)[0]
        f.seek(flip_at)
        f.write(bytes([byte ^ 0x10]))
    with pytest.raises(CorruptLogError) as e:
        seg.verify()
    assert e.value.path == seg.log_path and e.value.position == layout[30][0]
    assert "CRC" in e.value.reason
    with pytest.raises(CorruptLogError):
        seg.recover(allow_truncate=False)
    dropped = seg.recover()
    assert dropped == sum(len(b) for b in batches[30:])
    assert seg.next_offset == layout[30][1]
    assert seg.size == layout[30][0]
    assert seg.verify() == seg.size
    for _, base, _ in layout[:30]:
        assert seg.find_batch(base).base_offset == base  # type: ignore[union-attr]
    seg.close()


def test_load_trusted_segment(tmp_path: Path) -> None:
    seg, _ = filled(tmp_path)
    expect = (seg.next_offset, seg.max_timestamp, seg.offset_index.entries(), seg.time_index.entries())
    seg.flush()
    seg.close()
    again = Segment(str(tmp_path), BASE, index_interval_bytes=256)
    assert again.load() is None
    assert (again.next_offset, again.max_timestamp) == expect[:2]
    assert again.offset_index.entries() == expect[2]
    assert again.time_index.entries() == expect[3]
    assert again.created_ms is not None  # from the file's mtime
    again.close()


def test_truncate_to(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path)
    layout = headers(b"".join(batches))
    pos, base, nxt = layout[20]
    dropped = seg.truncate_to(base + (nxt - base) // 2)  # inside batch 20: drops it entirely
    assert dropped == sum(len(b) for b in batches[20:])
    assert seg.next_offset == base and seg.size == pos
    assert all(o < base for o, _ in seg.offset_index.entries())
    assert seg.max_timestamp == 1000 + base - 1
    assert seg.verify() == pos
    put(seg, 2)
    assert seg.next_offset == base + 2
    seg.close()


def test_region_outlives_deleted_segment(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, batches=5)
    r = seg.read_regions(BASE, 10**9, 10**18, True)
    assert r.region is not None
    seg.delete()
    assert not os.path.exists(seg.log_path)
    assert r.region.read() == b"".join(batches)
    assert [rec[0] for rec in decode(r.region.read())] == list(range(BASE, seg.next_offset))


def test_region_of_a_truncated_file_is_a_short_read(tmp_path: Path) -> None:
    seg, _ = filled(tmp_path, batches=10)
    r = seg.read_regions(BASE, 10**9, 10**18, True)
    assert r.region is not None
    seg.truncate_to(seg.next_offset - 1)
    with pytest.raises(CorruptLogError, match="short read"):
        r.region.read()
    seg.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    seg = Segment(str(tmp_path), BASE, index_interval_bytes=64)
    # Timestamps of batch i: 10 * i (one record each).
    for i in range(50):
        put(seg, 1, ts=10 * i)
    for target in (0, 1, 10, 15, 250, 490):
        b = seg.offset_for_timestamp(target)
        assert b is not None and b.max_timestamp >= target
        assert b.base_offset == BASE + (target + 9) // 10
    assert seg.offset_for_timestamp(491) is None
    seg.close()
