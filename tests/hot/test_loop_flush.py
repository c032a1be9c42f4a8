"""hot.loop_flush / hot._syncer: fsync-mode group commit from the event loop, the
fdatasync on a C thread (issue 34 §2). The crash side is covered by
tests/e2e/test_broker_faults.py (kill -9 of a broker under acks=all load in fsync mode,
the path the broker uses) and tests/hot/test_crash_kill9.py."""

from __future__ import annotations

import asyncio
import errno
import os
import select
from pathlib import Path

import pytest

from hot import loop_flush
from hot.config import LogConfig
from hot.log import Log
from hot.records import RecordInput, build_batch

pytestmark = pytest.mark.skipif(not loop_flush.available(), reason="hot._syncer not built")


def test_syncer_syncs_and_wakes_once_per_round(tmp_path: Path) -> None:
    from hot._syncer import Syncer  # type: ignore[import-not-found,unused-ignore]

    efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    fds = [os.open(tmp_path / f"f{i}", os.O_WRONLY | os.O_CREAT) for i in range(3)]
    try:
        s = Syncer(efd)
        for i, fd in enumerate(fds):
            os.write(fd, b"x" * 100)
            s.submit(i, fd)
        s.submit(99, 1_000_000)  # not a descriptor: its errno comes back, nothing else fails
        s.drain()
        assert select.select([efd], [], [], 5)[0]
        assert os.eventfd_read(efd) >= 1  # one write per round, several jobs per round
        assert sorted(s.take()) == [(0, 0), (1, 0), (2, 0), (99, errno.EBADF)]
        assert s.take() == []
        s.close()
        s.close()  # idempotent
        with pytest.raises(RuntimeError):
            s.submit(1, fds[0])
    finally:
        for fd in fds:
            os.close(fd)
        os.close(efd)


def _batch(i: int) -> bytes:
    return build_batch([RecordInput(None, b"v%d" % i)])


def test_loop_flush_moves_the_recovery_point_once_per_burst(tmp_path: Path) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        rounds: list[list[Log]] = []
        fallback: list[Log] = []
        lf = loop_flush.LoopFlush(loop, rounds.append, fallback.append)
        cfg = LogConfig(flush_mode="fsync")
        logs = [Log.open(tmp_path / f"t-{p}", cfg, topic="t", partition=p) for p in range(2)]
        try:
            for i in range(10):  # one burst: appends in one loop iteration
                lg = logs[i % 2]
                lg.append(_batch(i), leader_epoch=0)
                lf.request(lg)
            assert [lg.recovery_point for lg in logs] == [0, 0]
            for _ in range(500):
                await asyncio.sleep(0.01)
                if all(lg.recovery_point == lg.log_end_offset for lg in logs):
                    break
            assert [lg.recovery_point for lg in logs] == [5, 5]
            assert [lg.high_watermark for lg in logs] == [5, 5]  # single node: the flush moves it
            assert sorted(id(lg) for r in rounds for lg in r) == sorted(id(lg) for lg in logs)
            # A closed log asking for a flush is reported (its waiters fail), not synced.
            logs[0].append(_batch(10), leader_epoch=0)
            logs[0].close()
            lf.request(logs[0])
            await asyncio.sleep(0.05)
            assert [id(lg) for lg in rounds[-1]] == [id(logs[0])]
            assert fallback == []
            logs[1].append(_batch(11), leader_epoch=0)
            lf.request(logs[1])
            left = lf.close()  # its round not submitted yet: handed back to the caller
            assert [id(lg) for lg in left] == [id(logs[1])]
        finally:
            lf.close()
            for lg in logs:
                if not lg.closed:
                    lg.close()

    asyncio.run(run())


def test_a_rounds_logs_are_synced_side_by_side(tmp_path: Path) -> None:
    """A round of several logs goes to several Syncer threads (their fdatasyncs share one
    journal commit), each handed back once."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        rounds: list[list[Log]] = []
        lf = loop_flush.LoopFlush(loop, rounds.append, lambda lg: None)
        cfg = LogConfig(flush_mode="fsync")
        logs = [Log.open(tmp_path / f"s-{p}", cfg, topic="s", partition=p) for p in range(3)]
        try:
            for i, lg in enumerate(logs):
                lg.append(_batch(i), leader_epoch=0)
                lf.request(lg)
            lf._submit()  # the round, now rather than at the end of the iteration
            assert sorted(lf._queued) == [0] * (loop_flush.SYNC_THREADS - 3) + [1] * 3
            for _ in range(500):
                await asyncio.sleep(0.01)
                if all(lg.recovery_point == 1 for lg in logs):
                    break
            assert [lg.recovery_point for lg in logs] == [1, 1, 1]
            assert lf._queued == [0] * loop_flush.SYNC_THREADS
            assert sorted(id(lg) for r in rounds for lg in r) == sorted(id(lg) for lg in logs)
        finally:
            lf.close()
            for lg in logs:
                lg.close()

    asyncio.run(run())
