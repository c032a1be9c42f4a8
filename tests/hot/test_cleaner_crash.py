"""kill -9 of a child process cleaning a log, at every file operation of the swap and at
random moments: reopening the log must serve the latest value of every key, nothing else
changed, and nothing corrupt.

As a program (``python test_cleaner_crash.py <log dir> <kill at> <rate>``) it cleans the log
once; with ``kill at`` N > 0 it SIGKILLs itself just before its N-th rename/unlink (counting
only the cleaner's), and it prints the number of such operations when it finishes.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hot.cleaner import CleanerConfig, LogCleaner
from hot.config import LogConfig
from hot.log import Log
from hot.records import RecordInput, build_batch, decode_batches

ROOT = Path(__file__).resolve().parents[2]
CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=2048,
    min_cleanable_dirty_ratio=0.0,
    flush_mode="interval",
    delete_retention_ms=0,
)
NOW = 2_000_000_000_000


def history(seed: int) -> list[tuple[bytes, bytes | None]]:
    rng = random.Random(seed)
    out: list[tuple[bytes, bytes | None]] = []
    for i in range(400):
        k = b"k%d" % rng.randrange(30)
        out.append((k, None if rng.random() < 0.1 else b"v%d-" % i + b"x" * rng.randrange(50)))
    return out


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        r = log.read(offset, 1 << 20)
        if not r.regions:
            break
        for b in decode_batches(r.read()):
            out.extend((rec.offset, rec.key, rec.value) for rec in b.records if rec.offset >= offset)
        offset = r.next_offset
    return out


def child(log_dir: str, kill_at: int, rate: float) -> None:
    log = Log.open(log_dir, CONFIG, topic="t", partition=0, clean_shutdown=True)
    ops = 0
    real_rename, real_unlink = os.rename, os.unlink

    def counted(real):  # type: ignore[no-untyped-def]
        def op(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal ops
            ops += 1
            if ops == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        return op

    os.rename, os.unlink = counted(real_rename), counted(real_unlink)  # type: ignore[assignment]
    cleaner = LogCleaner(CleanerConfig(io_max_bytes_per_second=rate))
    print("started", flush=True)
    while cleaner.clean(log, NOW) is not None:
        pass
    print(ops, flush=True)
    os._exit(0)  # no clean close: as after a crash right after the pass


def build(path: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    log = Log.open(path, CONFIG, topic="t", partition=0)
    try:
        writes = history(7)
        for i in range(0, len(writes), 3):
            log.append(build_batch([RecordInput(k, v, timestamp=NOW - 60_000) for k, v in writes[i : i + 3]]))
        log.roll()
        return read_all(log)
    finally:
        log.close()


def check(path: Path, before: list[tuple[int, bytes | None, bytes | None]]) -> None:
    log = Log.open(path, CONFIG, topic="t", partition=0, clean_shutdown=False)
    try:
        for seg in log.segments():
            assert seg.verify() == seg.size
        after = read_all(log)
        orig = {o: (k, v) for o, k, v in before}
        assert [o for o, _, _ in after] == sorted({o for o, _, _ in after})
        for o, k, v in after:
            assert orig[o] == (k, v)
        latest: dict[bytes | None, int] = {}
        for o, k, _ in before:
            latest[k] = o
        kept = {o for o, _, _ in after}
        for o in latest.values():
            assert orig[o][1] is None or o in kept, f"latest value at {o} lost"
        assert log.log_end_offset == before[-1][0] + 1
        assert not [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap"))]
        # The log stays cleanable after the crash.
        cleaner = LogCleaner()
        while cleaner.clean(log, NOW) is not None:
            pass
        final = {k: v for _, k, v in read_all(log)}
        final = {k: v for k, v in final.items() if v is not None}
        assert final == {
            k: v for k, v in ((orig[o][0], orig[o][1]) for o in latest.values()) if v is not None
        }
    finally:
        log.close()


def run_child(path: Path, kill_at: int, rate: float = float("inf")) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, __file__, str(path), str(kill_at), str(rate)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_kill_at_every_file_operation(tmp_path: Path) -> None:
    original = tmp_path / "orig" / "t-0"
    before = build(original)
    counting = tmp_path / "count" / "t-0"
    shutil.copytree(original, counting)
    p = run_child(counting, 0)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    total = int(out.split()[-1])
    assert total > 10  # several groups swapped, each several renames and unlinks
    check(counting, before)
    for kill_at in range(1, total + 1):
        work = tmp_path / f"k{kill_at}" / "t-0"
        shutil.copytree(original, work)
        p = run_child(work, kill_at)
        p.communicate(timeout=120)
        assert p.returncode == -signal.SIGKILL, f"kill point {kill_at} not reached"
        check(work, before)
        shutil.rmtree(work.parent)


def test_kill_at_random_moments(tmp_path: Path) -> None:
    original = tmp_path / "orig" / "t-0"
    before = build(original)
    rng = random.Random(11)
    size = sum(f.stat().st_size for f in original.glob("*.log"))
    for i in range(5):
        work = tmp_path / f"r{i}" / "t-0"
        shutil.copytree(original, work)
        # Throttled so one pass takes about a second; the kill lands anywhere in it.
        p = run_child(work, 0, rate=size * 2.0)
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "started"
        time.sleep(rng.uniform(0.0, 1.0))
        p.kill()
        p.communicate(timeout=120)
        check(work, before)
        shutil.rmtree(work.parent)


if __name__ == "__main__":
    child(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
