"""OffsetIndex / TimeIndex: append, lookup, truncation, persistence and the load sanity check."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from hot.offset_index import OffsetIndex
from hot.time_index import TimeIndex


def make_offset_index(tmp_path: Path, base: int = 100) -> OffsetIndex:
    return OffsetIndex(str(tmp_path / f"{base:020d}.index"), base)


def test_offset_index_lookup_floor(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    assert idx.lookup(100) == (100, 0)
    assert idx.lookup(5000) == (100, 0)
    idx.append(110, 4096)
    idx.append(125, 8200)
    idx.append(190, 20000)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 4096)
    assert idx.lookup(124) == (110, 4096)
    assert idx.lookup(125) == (125, 8200)
    assert idx.lookup(10**9) == (190, 20000)
    assert idx.lookup_position(0) == (100, 0)
    assert idx.lookup_position(8199) == (110, 4096)
    assert idx.lookup_position(8200) == (125, 8200)
    assert idx.last_entry() == (190, 20000)
    idx.close()


def test_offset_index_rejects_non_increasing(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    idx.append(110, 4096)
    with pytest.raises(ValueError):
        idx.append(110, 5000)
    with pytest.raises(ValueError):
        idx.append(120, 4096)
    idx.close()


def test_offset_index_entries_are_written_on_flush_and_reload(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    idx.append(110, 4096)
    idx.append(125, 8200)
    assert not Path(idx.path).exists()  # buffered until a flush, created by the first write
    idx.flush()
    raw = Path(idx.path).read_bytes()
    assert raw == struct.pack(">IIII", 10, 4096, 25, 8200)
    idx.append(190, 20000)
    idx.close()  # close writes what is pending
    again = make_offset_index(tmp_path)
    assert again.load(log_size=30000) is None
    assert again.entries() == [(110, 4096), (125, 8200), (190, 20000)]
    again.close()


def test_offset_index_truncate(tmp_path: Path) -> None:
    idx = make_offset_index(tmp_path)
    for i in range(1, 6):
        idx.append(100 + 10 * i, 1000 * i)
    idx.write_pending()
    idx.truncate_to(130)
    assert idx.entries() == [(110, 1000), (120, 2000)]
    assert Path(idx.path).stat().st_size == 16
    idx.append(125, 2500)
    idx.close()
    again = make_offset_index(tmp_path)
    assert again.load(log_size=10**6) is None
    assert again.entries() == [(110, 1000), (120, 2000), (125, 2500)]
    again.truncate_to(0)
    assert again.entries() == []
    again.close()


@pytest.mark.parametrize(
    ("content", "log_size", "why"),
    [
        (struct.pack(">II", 1, 100) + b"\x00\x01", 10**6, "multiple"),
        (struct.pack(">IIII", 5, 100, 5, 200), 10**6, "increase"),
        (struct.pack(">IIII", 5, 200, 6, 100), 10**6, "increase"),
        (struct.pack(">IIII", 5, 100, 6, 5000), 4000, "past the log end"),
    ],
)
def test_offset_index_sanity_check(tmp_path: Path, content: bytes, log_size: int, why: str) -> None:
    idx = make_offset_index(tmp_path)
    Path(idx.path).write_bytes(content)
    reason = idx.load(log_size)
    assert reason is not None and why in reason
    assert len(idx) == 0
    assert Path(idx.path).stat().st_size == 0  # emptied, ready for a rebuild
    idx.close()


def make_time_index(tmp_path: Path, base: int = 100) -> TimeIndex:
    return TimeIndex(str(tmp_path / f"{base:020d}.timeindex"), base)


def test_time_index_appends_only_growing_timestamps(tmp_path: Path) -> None:
    idx = make_time_index(tmp_path)
    assert idx.lookup_before(0) is None
    assert idx.maybe_append(1000, 100)
    assert not idx.maybe_append(1000, 105)
    assert not idx.maybe_append(900, 106)
    assert idx.maybe_append(2000, 110)
    assert idx.maybe_append(3000, 110)
    with pytest.raises(ValueError):
        idx.maybe_append(4000, 105)
    assert idx.entries() == [(1000, 100), (2000, 110), (3000, 110)]
    assert idx.lookup_before(1000) is None
    assert idx.lookup_before(1001) == (1000, 100)
    assert idx.lookup_before(2000) == (1000, 100)
    assert idx.lookup_before(10**12) == (3000, 110)
    assert idx.last_entry() == (3000, 110)
    idx.close()


def test_time_index_persist_truncate_reload(tmp_path: Path) -> None:
    idx = make_time_index(tmp_path)
    for i in range(5):
        idx.maybe_append(1000 * (i + 1), 100 + 10 * i)
    idx.flush()
    assert len(Path(idx.path).read_bytes()) == 5 * 12
    idx.truncate_to(120)
    assert idx.entries() == [(1000, 100), (2000, 110)]
    idx.close()
    again = make_time_index(tmp_path)
    assert again.load(next_offset=200) is None
    assert again.entries() == [(1000, 100), (2000, 110)]
    again.close()


@pytest.mark.parametrize(
    ("content", "next_offset", "why"),
    [
        (struct.pack(">qI", 5, 1)[:-1], 1000, "multiple"),
        (struct.pack(">qIqI", 5, 1, 4, 2), 1000, "increase"),
        (struct.pack(">qIqI", 5, 3, 6, 2), 1000, "increase"),
        (struct.pack(">qIqI", 5, 1, 6, 50), 120, "segment end"),
    ],
)
def test_time_index_sanity_check(tmp_path: Path, content: bytes, next_offset: int, why: str) -> None:
    idx = make_time_index(tmp_path)
    Path(idx.path).write_bytes(content)
    reason = idx.load(next_offset)
    assert reason is not None and why in reason
    assert len(idx) == 0
    idx.close()
