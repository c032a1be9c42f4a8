"""Group commit: concurrent producers in fsync mode share fsyncs, and the high watermark
never passes bytes that were not fsynced.

os.fsync is wrapped (the real call still happens) to record, per segment file, how many
bytes each completed fsync covered, and to make the disk a little slow so that appends
pile up behind an fsync as they do on real hardware.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hot.config import LogConfig
from hot.flush import GroupCommitter
from hot.log import Log
from tests.hot.hotlib import batch_at, decode, headers


class FsyncRecorder:
    """Wraps os.fsync or os.fdatasync (both make a file's data durable)."""

    def __init__(self, real: Callable[[int], None], delay_s: float = 0.002) -> None:
        self.real = real
        self.delay = delay_s
        self.lock = threading.Lock()
        self.log_fsyncs = 0
        self.durable: dict[str, int] = {}  # .log path -> bytes covered by a completed fsync

    def __call__(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        size = os.fstat(fd).st_size  # every byte written before this call is covered
        time.sleep(self.delay)
        self.real(fd)
        if path.endswith(".log"):
            with self.lock:
                self.log_fsyncs += 1
                self.durable[path] = max(self.durable.get(path, 0), size)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> FsyncRecorder:
    rec = FsyncRecorder(os.fsync)
    data_rec = FsyncRecorder(os.fdatasync)
    # one ledger for both calls
    data_rec.lock, data_rec.durable = rec.lock, rec.durable

    def datasync(fd: int) -> None:
        data_rec(fd)
        with rec.lock:
            rec.log_fsyncs += data_rec.log_fsyncs
            data_rec.log_fsyncs = 0

    monkeypatch.setattr(os, "fsync", rec)
    monkeypatch.setattr(os, "fdatasync", datasync)
    return rec


def test_concurrent_producers_share_fsyncs(tmp_path: Path, recorder: FsyncRecorder) -> None:
    committer = GroupCommitter()
    log = Log.open(
        tmp_path / "t-0", LogConfig(segment_bytes=16 * 1024), topic="t", partition=0, flusher=committer
    )
    observed: list[tuple[int, int, dict[str, int]]] = []

    def on_hw(lg: Log) -> None:
        with recorder.lock:
            observed.append((lg.high_watermark, lg.recovery_point, dict(recorder.durable)))

    log.add_hw_listener(on_hw)
    acked: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    threads_n, appends_n = 8, 40

    def producer(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            for _ in range(appends_n):
                info = log.append(batch_at(0, rnd.randint(1, 3), size=rnd.randint(20, 200)))
                log.high_watermark_future(info.next_offset).result(timeout=60)
                assert log.high_watermark >= info.next_offset
                with recorder.lock:
                    acked.append((info.first_offset, info.last_offset))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(acked) == threads_n * appends_n

    # Every offset was acknowledged exactly once, and the log holds exactly those offsets.
    covered = sorted(o for first, last in acked for o in range(first, last + 1))
    assert covered == list(range(log.log_end_offset))
    assert [r[0] for r in decode(log.read(0, 1 << 30).read())] == covered

    # Group commit: fewer fsyncs of the log than acknowledged appends.
    assert recorder.log_fsyncs < len(acked), (recorder.log_fsyncs, len(acked))

    # The high watermark never passed bytes that a completed fsync had not covered.
    ends: dict[int, tuple[str, int]] = {}
    for seg in log.segments():
        data = seg.read_bytes(0, seg.size)
        layout = headers(data)
        for i, (_, _, nxt) in enumerate(layout):
            ends[nxt] = (seg.log_path, layout[i + 1][0] if i + 1 < len(layout) else len(data))
    assert observed
    for hw, rp, durable in observed:
        assert hw <= rp
        if hw == 0:
            continue
        path, end = ends[hw]
        assert durable.get(path, 0) >= end, (hw, path, end, durable.get(path))
    log.close()
    committer.close()


def test_committer_serves_many_logs_and_drains_on_close(tmp_path: Path, recorder: FsyncRecorder) -> None:
    committer = GroupCommitter(workers=2)
    logs = [
        Log.open(tmp_path / f"t-{p}", LogConfig(), topic="t", partition=p, flusher=committer)
        for p in range(5)
    ]
    futures = []
    for _ in range(10):
        for lg in logs:
            info = lg.append(batch_at(0, 2))
            futures.append(lg.high_watermark_future(info.next_offset))
    committer.close()  # drains what was requested
    for f in futures:
        assert f.result(timeout=0) is None
    for lg in logs:
        assert lg.high_watermark == lg.log_end_offset == lg.recovery_point == 20
        lg.close()


class RoundRecorder(GroupCommitter):
    """Records each round's logs (``flushed``: once per round, hot.flush)."""

    def __init__(self) -> None:
        self.rounds: list[list[str]] = []
        self.round_done = threading.Event()
        super().__init__()

    def flushed(self, logs: list[Log]) -> None:
        self.rounds.append([lg.name for lg in logs])
        self.round_done.set()


def test_deferred_wake_flushes_a_burst_in_one_round(tmp_path: Path, recorder: FsyncRecorder) -> None:
    """With ``defer_wakes`` a burst of appends on the deferring thread wakes the worker once,
    when the scheduled wake-up runs: one round, one fsync per log, one ``flushed`` call for
    all of them. Nothing is acknowledged before its fsync. Requests that come one at a time
    wake the worker at once again."""
    committer = RoundRecorder()
    scheduled: list[Callable[[], None]] = []
    committer.defer_wakes(scheduled.append)
    logs = [
        Log.open(tmp_path / f"t-{p}", LogConfig(), topic="t", partition=p, flusher=committer)
        for p in range(3)
    ]
    opened = recorder.log_fsyncs  # creating the segments
    futures = []
    for _ in range(2):
        for lg in logs:
            futures.append(lg.high_watermark_future(lg.append(batch_at(0, 1)).next_offset))
    assert len(scheduled) == 1  # one wake-up for the six appends
    assert not any(f.done() for f in futures)  # not flushed: nobody woke the worker
    assert recorder.log_fsyncs == opened
    scheduled.pop()()
    assert committer.round_done.wait(10)
    for f in futures:
        assert f.result(timeout=10) is None
    assert committer.rounds == [["t-0", "t-1", "t-2"]]
    assert recorder.log_fsyncs == opened + 3
    # a wake-up that covered one request only: the next request wakes the worker at once
    committer.round_done.clear()
    fut = logs[1].high_watermark_future(logs[1].append(batch_at(0, 1)).next_offset)
    assert len(scheduled) == 1 and not fut.done()
    scheduled.pop()()
    assert fut.result(timeout=10) is None
    committer.round_done.clear()
    fut = logs[2].high_watermark_future(logs[2].append(batch_at(0, 1)).next_offset)
    assert fut.result(timeout=10) is None and not scheduled
    # another thread's request wakes the worker at once
    committer.round_done.clear()
    other = threading.Thread(target=lambda: logs[0].append(batch_at(0, 1)))
    other.start()
    other.join()
    assert committer.round_done.wait(10) and not scheduled
    committer.close()
    for lg in logs:
        assert lg.high_watermark == lg.recovery_point == lg.log_end_offset
        lg.close()
