"""kill -9 a process appending in fsync mode: every acknowledged record survives.

The child (tests/hot/hotlib.py run as a program) appends batches whose payloads are a
function of their offsets and prints ``<first> <last>`` once a batch is acknowledged
(the high watermark passed it after an fsync). The parent SIGKILLs it at a random
moment and reopens the log as after a crash: every acknowledged offset must be there,
in order, exactly once, byte-identical; anything beyond must be intact too.
"""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from hot.config import LogConfig
from hot.log import Log
from tests.hot.hotlib import decode, value_for

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parent / "hotlib.py"


def run_and_kill(log_dir: Path, seed: int, acks_before_kill: int, deadline: float) -> int:
    """Run the child until it acknowledged ``acks_before_kill`` batches (plus a random
    extra moment), SIGKILL it; returns the highest acknowledged offset."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(log_dir), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""
    last_acked = -1
    acks = 0
    try:
        while acks < acks_before_kill:
            assert time.monotonic() < deadline, "child too slow"
            if not sel.select(timeout=1.0):
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, proc.stderr.read().decode() if proc.stderr else "child exited"
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                first, last = map(int, line.split())
                assert first > last_acked  # acknowledged in offset order
                last_acked = max(last_acked, last)
                acks += 1
        time.sleep(random.Random(seed).random() * 0.02)  # land somewhere inside an append / fsync
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        sel.close()
    # Acks printed before the kill but not read yet still count.
    rest = proc.stdout.read()
    for line in (buf + rest).split(b"\n"):
        if line.strip():
            last_acked = max(last_acked, int(line.split()[1]))
    proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    return last_acked


def test_acknowledged_records_survive_sigkill(tmp_path: Path) -> None:
    log_dir = tmp_path / "t-0"
    deadline = time.monotonic() + 25.0
    rnd = random.Random(2024)
    highest_acked = -1
    for round_no in range(6):
        acked = run_and_kill(log_dir, seed=round_no, acks_before_kill=rnd.randint(20, 120), deadline=deadline)
        assert acked > highest_acked
        highest_acked = acked
        log = Log.open(log_dir, LogConfig(segment_bytes=16 * 1024), topic="t", partition=0)
        records = decode(log.read(0, 1 << 30).read()) if log.log_end_offset else []
        assert log.log_end_offset > highest_acked
        assert [r[0] for r in records] == list(range(log.log_end_offset))  # in order, exactly once
        for offset, _, key, value in records:
            assert key == b"k%d" % offset
            assert value is not None and value == value_for(offset, len(value))
        log.close(clean=False)  # the next round is another unclean start
