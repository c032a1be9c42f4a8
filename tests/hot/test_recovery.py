"""Fault injection on closed logs: the durability promise of recovery.

After an unclean shutdown every complete batch before the first damaged byte of the
last segment is served byte-identical, nothing from the damaged batch on is served,
damaged or missing indexes are rebuilt, and damage inside an older (sealed) segment
refuses the partition instead of dropping data.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from hot.batch import iter_batches
from hot.errors import CorruptLogError
from hot.log import LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE, Log
from tests.hot.hotlib import batch_at, headers, open_log

CFG: dict[str, object] = {"segment_bytes": 1024, "index_interval_bytes": 128, "flush_mode": "interval"}


class Fixture:
    """A closed multi-segment log plus everything needed to check a reopened copy."""

    def __init__(self, root: Path, batches: int = 40) -> None:
        self.dir = root / "t-0"
        log = open_log(self.dir, **CFG)
        rnd = random.Random(7)
        for _ in range(batches):
            log.append(batch_at(log.log_end_offset, rnd.randint(1, 4), size=rnd.randint(10, 80)))
        self.full = log.read(0, 1 << 30).read()
        self.layout = headers(self.full)  # (position in self.full, base, next) per batch
        self.segments = [(s.log_path, s.base_offset, s.size) for s in log.segments()]
        self.entries = [(s.offset_index.entries(), s.time_index.entries()) for s in log.segments()]
        self.leo = log.log_end_offset
        log.close(clean=True)
        self.snapshot = root / "snapshot"
        shutil.copytree(self.dir, self.snapshot)

    def restore(self) -> None:
        shutil.rmtree(self.dir)
        shutil.copytree(self.snapshot, self.dir)

    @property
    def last_log(self) -> str:
        return self.segments[-1][0]

    def last_segment_start(self) -> int:
        """Position in ``self.full`` where the last segment begins."""
        return len(self.full) - self.segments[-1][2]

    def batches_in_last_segment(self) -> list[tuple[int, int, int]]:
        start = self.last_segment_start()
        return [(p - start, b, n) for p, b, n in self.layout if p >= start]

    def check(self, log: Log, served_end: int) -> None:
        """The log serves exactly ``self.full[:served_end]`` (a batch boundary)."""
        assert log.log_end_offset == log.high_watermark
        data = log.read(0, 1 << 30).read() if log.log_end_offset else b""
        assert data == self.full[:served_end]
        for _ in iter_batches(data):  # everything served validates
            pass


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return Fixture(tmp_path)


def reopen(fx: Fixture, *, clean: bool = False) -> Log:
    return open_log(fx.dir, clean=clean, **CFG)


def test_truncation_at_every_byte_of_the_last_batch(fx: Fixture) -> None:
    assert len(fx.segments) > 3
    seg_pos, base, _ = fx.batches_in_last_segment()[-1]
    size = fx.segments[-1][2] - seg_pos
    original = Path(fx.last_log).read_bytes()
    for cut in range(seg_pos, seg_pos + size):
        fx.restore()
        Path(fx.last_log).write_bytes(original[:cut])
        log = reopen(fx)
        assert log.log_end_offset == base
        fx.check(log, fx.last_segment_start() + seg_pos)
        assert os.path.getsize(fx.last_log) == seg_pos
        log.close(clean=False)
    fx.restore()
    log = reopen(fx)  # the untouched copy recovers completely
    assert log.log_end_offset == fx.leo
    fx.check(log, len(fx.full))
    log.close()


def test_random_bit_flips_in_the_tail(fx: Fixture) -> None:
    rnd = random.Random(1234)
    tail = fx.batches_in_last_segment()[-6:]
    seg_size = fx.segments[-1][2]
    original = Path(fx.last_log).read_bytes()
    for _ in range(250):
        pos = rnd.randrange(tail[0][0], seg_size)
        i = max(k for k, (p, _, _) in enumerate(tail) if p <= pos)
        if 12 <= pos - tail[i][0] < 16:
            continue  # partitionLeaderEpoch: outside the CRC in format v2, flips are undetectable
        damaged = bytearray(original)
        damaged[pos] ^= 1 << rnd.randrange(8)
        fx.restore()
        Path(fx.last_log).write_bytes(bytes(damaged))
        log = reopen(fx)
        assert log.log_end_offset == tail[i][1], (pos, i)
        fx.check(log, fx.last_segment_start() + tail[i][0])
        log.close(clean=False)


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("damage", ["delete", "garbage", "truncate", "past_end", "shifted", "shifted_first"])
def test_damaged_indexes_are_rebuilt(fx: Fixture, damage: str, clean: bool) -> None:
    rnd = random.Random(99)
    for log_path, _, size in fx.segments:
        for path in (log_path[:-4] + ".index", log_path[:-4] + ".timeindex"):
            if not os.path.exists(path):  # an active segment without an entry has none
                continue
            raw = Path(path).read_bytes()
            if damage == "delete":
                os.unlink(path)
            elif damage == "garbage":
                Path(path).write_bytes(rnd.randbytes(len(raw) + 8))
            elif damage == "truncate" and raw:
                Path(path).write_bytes(raw[:-3])
            elif damage == "past_end" and path.endswith(".index"):
                Path(path).write_bytes(raw + struct.pack(">II", 10**6, size + 100))
            elif damage == "shifted" and path.endswith(".index") and raw:
                # Passes the sanity check but every entry names the wrong offset.
                entries = list(struct.iter_unpack(">II", raw))
                Path(path).write_bytes(b"".join(struct.pack(">II", r + 1, p) for r, p in entries))
            elif damage == "shifted_first" and path.endswith(".index") and len(raw) >= 16:
                # Only an early entry is wrong: found by a lookup, not by loading.
                r, p = struct.unpack_from(">II", raw)
                Path(path).write_bytes(struct.pack(">II", r - 1, p) + raw[8:])
    log = reopen(fx, clean=clean)
    fx.check(log, len(fx.full))
    for _, base, nxt in fx.layout:
        for off in range(base, nxt):
            assert log.read(off, 1).first_offset == base
    assert log.offset_for_timestamp(1000 + fx.leo // 2) == (fx.leo // 2, 1000 + fx.leo // 2)
    assert log.is_online
    log.close()
    again = reopen(fx, clean=True)  # the rebuilt indexes were written out, as they were
    assert [(s.offset_index.entries(), s.time_index.entries()) for s in again.segments()] == fx.entries
    assert sum(len(e) for e, _ in fx.entries) > 10
    fx.check(again, len(fx.full))
    again.close()


def test_bit_flip_in_sealed_segment_refuses_the_partition(fx: Fixture) -> None:
    path, _, size = fx.segments[1]
    start = len(fx.full) - sum(s for _, _, s in fx.segments[1:])
    batches = [(p - start, b) for p, b, _ in fx.layout if start <= p < start + size]
    flip_batch = batches[len(batches) // 2][0]
    raw = bytearray(Path(path).read_bytes())
    raw[flip_batch + 30] ^= 0x04  # inside the CRC-covered bytes
    Path(path).write_bytes(bytes(raw))
    os.unlink(fx.dir / RECOVERY_POINT_FILE)  # no recovery point: every segment is recovered
    with pytest.raises(CorruptLogError) as e:
        reopen(fx)
    assert e.value.path == path and e.value.position == flip_batch
    assert "CRC" in e.value.reason and path in str(e.value)
    # Nothing was "repaired" by dropping data.
    assert bytes(raw) == Path(path).read_bytes()


@pytest.mark.parametrize("rp_file", [True, False])
def test_torn_sealed_segment_refuses_the_partition(fx: Fixture, rp_file: bool) -> None:
    path, _, size = fx.segments[1]
    with open(path, "r+b") as f:
        f.truncate(size - 10)
    if not rp_file:
        os.unlink(fx.dir / RECOVERY_POINT_FILE)
    with pytest.raises(CorruptLogError) as e:
        reopen(fx)
    assert e.value.path == path


def test_clean_shutdown_skips_the_crc_scan(fx: Fixture) -> None:
    seg_pos, base, _ = fx.batches_in_last_segment()[-1]
    raw = bytearray(Path(fx.last_log).read_bytes())
    raw[-2] ^= 0x01  # last batch's payload; its header stays structurally fine
    Path(fx.last_log).write_bytes(bytes(raw))
    log = reopen(fx, clean=True)
    assert log.log_end_offset == fx.leo  # trusted, not scanned
    log.close(clean=False)
    log = reopen(fx, clean=False)
    assert log.log_end_offset == base  # scanned: the bad batch is gone
    fx.check(log, fx.last_segment_start() + seg_pos)
    log.close()


def test_clean_shutdown_still_never_serves_a_torn_tail(fx: Fixture) -> None:
    seg_pos, base, _ = fx.batches_in_last_segment()[-1]
    raw = Path(fx.last_log).read_bytes()
    Path(fx.last_log).write_bytes(raw[:-7])
    log = reopen(fx, clean=True)
    assert log.log_end_offset == base
    fx.check(log, fx.last_segment_start() + seg_pos)
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_zero_filled_tail(fx: Fixture, clean: bool) -> None:
    with open(fx.last_log, "ab") as f:
        f.write(b"\x00" * 4096)
    log = reopen(fx, clean=clean)
    assert log.log_end_offset == fx.leo
    fx.check(log, len(fx.full))
    assert os.path.getsize(fx.last_log) == fx.segments[-1][2]
    log.close()


def test_missing_or_garbage_recovery_point_recovers_everything(fx: Fixture) -> None:
    for content in (None, b"garbage\n"):
        fx.restore()
        rp = fx.dir / RECOVERY_POINT_FILE
        if content is None:
            rp.unlink()
        else:
            rp.write_bytes(content)
        for log_path, _, _ in fx.segments:
            Path(log_path[:-4] + ".index").unlink(missing_ok=True)  # none without an entry
        log = reopen(fx)
        fx.check(log, len(fx.full))
        assert rp.read_text().strip() == str(fx.leo)
        log.close()


def test_stray_files_are_cleaned_up(fx: Fixture) -> None:
    strays = [
        "00000000000000000000.log.swap",
        "00000000000000000000.index.cleaned",
        "00000000000000000000.log.deleted",
        "recovery-point.tmp",
        "00000000000000099999.index",
        "00000000000000099999.timeindex",
    ]
    for name in strays:
        (fx.dir / name).write_bytes(b"junk")
    log = reopen(fx)
    fx.check(log, len(fx.full))
    for name in strays:
        assert not (fx.dir / name).exists()
    log.close()


def test_malformed_segment_name_is_refused(fx: Fixture) -> None:
    (fx.dir / "123.log").write_bytes(b"")
    with pytest.raises(CorruptLogError, match=r"123\.log"):
        reopen(fx)


def test_segment_whose_first_batch_disagrees_with_its_name(fx: Fixture) -> None:
    path, base, _ = fx.segments[1]
    os.rename(path, path.replace(f"{base:020d}", f"{base + 1:020d}"))
    os.unlink(fx.dir / RECOVERY_POINT_FILE)
    with pytest.raises(CorruptLogError):
        reopen(fx)


def test_empty_directory_and_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    log.close(clean=False)
    shutil.rmtree(tmp_path / "t-0")
    (tmp_path / "t-0").mkdir()
    (tmp_path / "t-0" / LOG_START_OFFSET_FILE).write_text("500\n")
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    log.append(batch_at(500, 2))
    assert log.read(500, 100).first_offset == 500
    log.close()


def test_log_start_offset_beyond_the_log_end_restarts_empty(fx: Fixture) -> None:
    (fx.dir / LOG_START_OFFSET_FILE).write_text(f"{fx.leo + 100}\n")
    log = reopen(fx)
    assert log.log_start_offset == log.log_end_offset == fx.leo + 100
    assert len(log.segments()) == 1 and log.size == 0
    log.close()


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_missing_middle_segment_is_refused(fx: Fixture, how: str) -> None:
    path = fx.segments[2][0]
    if how == "deleted":
        os.unlink(path)
    else:
        Path(path).write_bytes(b"")
    with pytest.raises(CorruptLogError, match="gap"):
        reopen(fx, clean=True)
