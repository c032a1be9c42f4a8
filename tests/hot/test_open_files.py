"""Open files per partition (issue 35): an idle log holds one descriptor, its active
segment's ``.log``; indexes open their files only to write or fsync them; a sealed
segment holds none until read; a new partition creates no index files.

Descriptors are counted in /proc/self/fd around the operations (the test process opens
nothing else meanwhile).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.limits import FDS_PER_PARTITION
from hot.config import LogConfig
from hot.log import Log
from tests.hot.hotlib import batch_at, decode

ROOT = Path(__file__).resolve().parents[2]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def open_paths() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return out


def fill(log: Log, records: int, *, size: int = 200) -> None:
    for _ in range(records // 5):
        log.append(batch_at(log.log_end_offset, 5, size=size))


def test_idle_logs_hold_one_descriptor_each(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=1024)
    before = open_fds()
    logs = [Log.open(tmp_path / f"t-{i}", cfg, topic="t", partition=i) for i in range(10)]
    assert open_fds() - before == 10 * FDS_PER_PARTITION == 10
    # A new partition's directory: the empty .log alone, no index files, no recovery point
    # (a missing one means 0, what it would hold: one file creation less per partition).
    assert sorted(os.listdir(tmp_path / "t-0")) == ["00000000000000000000.log"]

    # Data past several index intervals, flushed, then rolled twice: still one each.
    for log in logs:
        fill(log, 400)  # about 100 KB: rolls at 64 KB
        log.flush()
        log.roll()
        fill(log, 50)
        log.flush()
    assert all(len(log.segments()) >= 3 for log in logs)
    assert open_fds() - before == 10
    names = os.listdir(tmp_path / "t-0")
    sealed_base = logs[0].segments()[0].base_offset
    # A sealed segment has its index files (tiering uploads them by path).
    assert f"{sealed_base:020d}.index" in names and f"{sealed_base:020d}.timeindex" in names
    assert not any(p.endswith((".index", ".timeindex")) for p in open_paths())

    # Reading a sealed segment: the fetch's region keeps its file open until dropped.
    log = logs[0]
    res = log.read(0, 1000)  # one region, of the first (sealed) segment
    assert res.regions and res.first_offset == 0
    assert open_fds() - before == 11
    assert decode(res.read())[0][0] == 0
    del res
    assert open_fds() - before == 10
    # ListOffsets by timestamp over the sealed segments releases them again too.
    assert log.offset_for_timestamp(1_000 + 7) is not None
    assert open_fds() - before == 10

    for log in logs:
        log.close()
    assert open_fds() == before


def test_clean_reopen_without_index_files_is_quiet(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An active segment that never had an index entry has no index files; reopening it
    (clean or not) is normal and silent, and the log reads as before."""
    cfg = LogConfig(index_interval_bytes=1 << 20)
    log = Log.open(tmp_path / "t-0", cfg, topic="t", partition=0)
    fill(log, 20)
    log.close()
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(("index", "timeindex"))]
    with caplog.at_level(logging.WARNING):
        for clean in (True, False):
            log = Log.open(tmp_path / "t-0", cfg, topic="t", partition=0, clean_shutdown=clean)
            assert log.log_end_offset == 20
            assert decode(log.read(10, 1 << 20, max_offset=20).read())[0][0] <= 10
            log.close()
    assert not [r for r in caplog.records if "index" in r.getMessage()]


def test_lost_index_files_of_a_sealed_segment_are_rebuilt(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=32 * 1024, index_interval_bytes=512)
    log = Log.open(tmp_path / "t-0", cfg, topic="t", partition=0)
    fill(log, 400)
    first = log.segments()[0]
    entries = first.offset_index.entries()
    assert entries
    log.close()
    os.unlink(first.index_path)
    os.unlink(first.timeindex_path)
    log = Log.open(tmp_path / "t-0", cfg, topic="t", partition=0, clean_shutdown=True)
    try:
        assert log.segments()[0].offset_index.entries() == entries
        assert decode(log.read(123, 1 << 20).read())[0][0] <= 123
    finally:
        log.close()
    assert os.path.exists(first.index_path)  # written back at close


_CHILD = """
import os, sys
from hot.config import LogConfig
from hot.log import Log
from tests.hot.hotlib import batch_at
log = Log.open(sys.argv[1], LogConfig(segment_bytes=32 * 1024, index_interval_bytes=512),
               topic="t", partition=0)
while log.log_end_offset < 600:
    log.append(batch_at(log.log_end_offset, 5, size=200))
log.flush()
while log.log_end_offset < 700:  # written, not flushed
    log.append(batch_at(log.log_end_offset, 5, size=200))
# A torn batch at the end, as a crash in the middle of a write leaves it.
with open(log.segments()[-1].log_path, "ab") as f:
    f.write(batch_at(log.log_end_offset, 5, size=200)[:100])
print(log.log_end_offset, flush=True)
os.kill(os.getpid(), 9)
"""


def test_kill9_with_lazily_created_indexes_recovers(tmp_path: Path) -> None:
    """SIGKILL after flushed and unflushed appends plus a torn tail: the recovery scan
    cuts the torn batch, rebuilds the active segment's indexes (its files may be missing
    or short) and every offset written reads back."""
    d = tmp_path / "t-0"
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(d)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    written = int(proc.stdout.split()[0])
    log = Log.open(d, LogConfig(segment_bytes=32 * 1024, index_interval_bytes=512), topic="t", partition=0)
    try:
        assert log.log_end_offset == written  # the torn batch is gone, nothing else
        got: list[int] = []
        offset = 0
        while offset < written:
            res = log.read(offset, 1 << 20, max_offset=written)
            got.extend(r[0] for r in decode(res.read()))
            offset = res.next_offset
        assert got == list(range(written))
        active = log.segments()[-1]
        assert active.offset_index.entries()  # rebuilt by the recovery scan
    finally:
        log.close()
