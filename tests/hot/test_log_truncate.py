"""Log support for replication: follower truncation (at every batch boundary, fully, and
under kill -9 at every durability step), and the externally managed high watermark.

As a program (``python test_log_truncate.py <log dir> <seed> [<kill at>]``) it is the
child of the kill -9 tests: a follower that keeps appending batches of rising epochs and
truncating. With ``<kill at>`` = k it prepares nothing, truncates the log it finds to
half its length and SIGKILLs itself at the k-th directory fsync of that truncation
(deterministic crash points); otherwise it loops until the parent kills it.
"""

from __future__ import annotations

import itertools
import os
import random
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pytest

from hot.batch import iter_batches
from hot.config import LogConfig
from hot.errors import InvalidRequestError, LogClosedError, OffsetOutOfRangeError
from hot.leader_epoch import EpochEntry, LeaderEpochCache
from hot.log import Log
from hot.records import RecordInput, build_batch, decode_batches

ROOT = Path(__file__).resolve().parents[2]
CRASH_CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256)


# --- building logs ----------------------------------------------------------------------------


def payload(offset: int, epoch: int) -> bytes:
    return b"%d@%d:" % (offset, epoch) + bytes((offset * 7 + epoch + i) % 251 for i in range(30))


def batch(
    offset: int, count: int, epoch: int, *, pid: int = -1, seq: int = -1, producer_epoch: int = -1
) -> bytes:
    """A batch as a leader of ``epoch`` wrote it at ``offset``: values name (offset, epoch)."""
    return build_batch(
        [
            RecordInput(b"k%d" % o, payload(o, epoch), timestamp=1_000 + o)
            for o in range(offset, offset + count)
        ],
        base_offset=offset,
        partition_leader_epoch=epoch,
        producer_id=pid,
        producer_epoch=producer_epoch if pid >= 0 else -1,
        base_sequence=seq,
    )


def raw(log: Log) -> bytes:
    if log.log_end_offset == log.log_start_offset:
        return b""
    return log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset).read()


def batch_list(data: bytes) -> list[tuple[int, int, int, int]]:
    """(position, base offset, next offset, leader epoch) of every batch."""
    return [(pos, h.base_offset, h.next_offset, h.partition_leader_epoch) for pos, h in iter_batches(data)]


def expected_epochs(data: bytes) -> list[EpochEntry]:
    return list(LeaderEpochCache.rebuild(None, [(e, b) for _, b, _, e in batch_list(data)]).entries())


def producers(log: Log) -> dict[int, tuple[int, tuple[object, ...]]]:
    return {pid: (e.epoch, e.batches) for pid, e in log.producer_entries().items()}


def build_source(d: Path) -> Log:
    """A leader log over several segments and epochs, with two idempotent producers and
    plain batches mixed in."""
    log = Log.open(
        d,
        LogConfig(segment_bytes=1024, index_interval_bytes=128, flush_mode="interval"),
        topic="t",
        partition=0,
    )
    rnd = random.Random(7)
    seqs = {11: 0, 12: 0}
    for epoch in (0, 1, 3, 4, 8):
        for _ in range(rnd.randint(2, 7)):
            n = rnd.randint(1, 4)
            pid = rnd.choice((-1, 11, 12))
            if pid >= 0:
                data = batch(0, n, 0, pid=pid, seq=seqs[pid], producer_epoch=0)
                seqs[pid] += n
            else:
                data = batch(0, n, 0)
            log.append(data, leader_epoch=epoch)
    return log


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    d = tmp_path_factory.mktemp("source") / "t-0"
    log = build_source(d)
    assert len(log.segments()) >= 4
    data = raw(log)
    log.close()
    return d, data


def follower_of(data: bytes, upto: int, d: Path) -> Log:
    """A fresh follower log holding the batches of ``data`` below ``upto`` (reference state)."""
    log = Log.open(d, LogConfig(flush_mode="interval"), topic="t", partition=0)
    cut = next((pos for pos, base, _, _ in batch_list(data) if base >= upto), len(data))
    if cut:
        log.append_as_follower(data[:cut])
    return log


def assert_layout(log: Log) -> None:
    segs = log.segments()
    for a, b in itertools.pairwise(segs):
        assert a.next_offset == b.base_offset
    assert segs[-1].next_offset == log.log_end_offset
    assert all(o <= log.log_end_offset for o in log.producer_snapshots())
    names = set(os.listdir(log.dir))
    assert not [n for n in names if n.endswith(".tmp")]
    for s in segs:
        assert Path(s.log_path).name in names


# --- truncation at every batch boundary --------------------------------------------------------------


def boundaries(data: bytes) -> list[tuple[int, int]]:
    """(truncation offset, expected log end): every batch start, plus one offset inside
    each multi-record batch (which must drop that whole batch)."""
    out = []
    for _, base, nxt, _ in batch_list(data):
        out.append((base, base))
        if nxt - base > 1:
            out.append((base + 1, base))
    return out


def test_truncate_at_every_batch_boundary_then_append_again(
    source: tuple[Path, bytes], tmp_path: Path
) -> None:
    src, data = source
    leo = batch_list(data)[-1][2]
    cases = boundaries(data)
    assert len(cases) > 30
    for n, (target, end) in enumerate(cases):
        d = tmp_path / f"c{n}" / "t-0"
        shutil.copytree(src, d)
        log = Log.open(
            d,
            LogConfig(segment_bytes=1024, index_interval_bytes=128, flush_mode="interval"),
            topic="t",
            partition=0,
            clean_shutdown=True,
        )
        assert log.high_watermark == leo
        log.truncate_to(target)
        ref = follower_of(data, end, tmp_path / f"r{n}" / "t-0")
        prefix = raw(ref)
        state = (end, prefix, expected_epochs(prefix), producers(ref))
        ref.close()
        assert (log.log_end_offset, raw(log), list(log.leader_epochs()), producers(log)) == state, target
        assert log.high_watermark == log.recovery_point == end
        assert_layout(log)
        log.close(clean=n % 2 == 0)
        again = Log.open(
            d,
            LogConfig(segment_bytes=1024, flush_mode="interval"),
            topic="t",
            partition=0,
            clean_shutdown=n % 2 == 0,
        )
        assert (again.log_end_offset, raw(again), list(again.leader_epochs()), producers(again)) == state
        # The follower fetches the rest again: byte-identical to the source.
        cut = next((pos for pos, base, _, _ in batch_list(data) if base >= end), len(data))
        if cut < len(data):
            again.append_as_follower(data[cut:])
        assert raw(again) == data
        assert list(again.leader_epochs()) == expected_epochs(data)
        assert_layout(again)
        again.close()
        shutil.rmtree(d.parent)


def test_truncated_producer_state_accepts_the_producer_again(
    source: tuple[Path, bytes], tmp_path: Path
) -> None:
    src, _ = source
    d = tmp_path / "t-0"
    shutil.copytree(src, d)
    log = Log.open(d, LogConfig(flush_mode="interval"), topic="t", partition=0)
    entries = log.producer_entries()
    last = entries[11].batches[-1]
    log.truncate_to(last.first_offset)  # the producer's last batch is gone
    after = log.producer_entries()[11]
    assert after.last_seq == last.first_seq - 1
    # Its retry is new data again, written at the new end, and then a duplicate.
    retry = batch(0, last.last_seq - last.first_seq + 1, 0, pid=11, seq=last.first_seq, producer_epoch=0)
    info = log.append(retry, leader_epoch=9)
    assert not info.duplicate and info.first_offset == last.first_offset
    assert log.append(retry, leader_epoch=9).duplicate
    log.close()


def test_truncate_arguments_and_states(tmp_path: Path) -> None:
    log = build_source(tmp_path / "t-0")
    leo = log.log_end_offset
    with pytest.raises(InvalidRequestError, match="negative"):
        log.truncate_to(-1)
    log.truncate_to(leo)  # at or beyond the end: nothing to do
    log.truncate_to(leo + 10)
    assert log.log_end_offset == leo
    with pytest.raises(InvalidRequestError, match="log start offset"):
        log.truncate_fully_and_start_at(5, log_start_offset=6)
    log.close()
    with pytest.raises(LogClosedError):
        log.truncate_to(0)


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = build_source(d)
    leo = log.log_end_offset
    log.truncate_fully_and_start_at(leo + 100)  # the leader's log start is past our end
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == log.recovery_point == leo + 100
    assert log.leader_epochs() == () and log.producer_entries() == {} and log.producer_snapshots() == []
    assert len(log.segments()) == 1 and log.size == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.append_as_follower(batch(leo + 100, 2, 9))
    assert list(log.leader_epochs()) == [EpochEntry(9, leo + 100)]
    # Tiered: the offsets below the new local start live in the object store.
    log.truncate_fully_and_start_at(500, log_start_offset=300)
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset) == (300, 500, 500)
    log.close(clean=False)
    again = Log.open(d, LogConfig(), topic="t", partition=0)
    assert (again.log_start_offset, again.local_log_start_offset, again.log_end_offset) == (300, 500, 500)
    assert again.leader_epochs() == ()
    again.close()


def test_truncate_below_the_first_local_segment_empties_the_log(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = build_source(d)
    log.delete_records(20)
    log.apply_retention(now_ms=0)
    first = log.segments()[0].base_offset
    assert first > 0
    log.truncate_to(first)
    assert log.log_start_offset == log.log_end_offset == first
    assert log.leader_epochs() == ()
    log.close()


# --- the externally managed high watermark --------------------------------------------------------


def test_replicated_high_watermark_moves_only_when_set(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    for mode in ("fsync", "interval"):
        shutil.rmtree(d, ignore_errors=True)
        log = Log.open(
            d,
            LogConfig(flush_mode=mode, segment_bytes=1024),
            topic="t",
            partition=0,
            hw_managed_externally=True,
        )
        assert log.hw_managed_externally
        seen: list[int] = []

        def listener(lg: Log, seen: list[int] = seen) -> None:
            seen.append(lg.high_watermark)

        log.add_hw_listener(listener)
        for _ in range(20):
            log.append(batch(0, 2, 0), leader_epoch=1)
        log.flush()
        assert len(log.segments()) > 1  # rolls did not move it either
        assert log.high_watermark == 0 and log.recovery_point == 40
        assert log.read(0, 1 << 20).regions == ()  # consumers see nothing yet
        fut: Future[None] = log.high_watermark_future(10)
        assert log.set_high_watermark(8) == 8 and not fut.done()
        assert log.set_high_watermark(12) == 12 and fut.done()
        assert log.set_high_watermark(5) == 12  # never backwards
        assert log.set_high_watermark(1000) == 40  # never past the log end
        assert seen == [8, 12, 40]
        assert log.read(0, 1 << 20).next_offset == 40
        log.truncate_to(30)  # only truncation lowers it
        assert log.high_watermark == 30
        log.close()
        assert log.high_watermark == 30  # a clean close does not move it either
        again = Log.open(
            d,
            LogConfig(flush_mode=mode),
            topic="t",
            partition=0,
            hw_managed_externally=True,
            high_watermark=25,
        )
        assert again.high_watermark == 25
        again.close()
        again = Log.open(
            d,
            LogConfig(flush_mode=mode),
            topic="t",
            partition=0,
            hw_managed_externally=True,
            high_watermark=99,
        )
        assert again.high_watermark == 30  # clamped to the log end
        again.close()
        again = Log.open(d, LogConfig(flush_mode=mode), topic="t", partition=0, hw_managed_externally=True)
        assert again.high_watermark == 0  # default: the log start
        again.close()


def test_single_node_log_refuses_set_high_watermark(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(flush_mode="interval"), topic="t", partition=0)
    log.append(batch(0, 2, 0))
    assert log.high_watermark == 2 and not log.hw_managed_externally
    with pytest.raises(InvalidRequestError, match="hw_managed_externally"):
        log.set_high_watermark(1)
    log.close()


def test_replicated_restore_starts_committed(tmp_path: Path) -> None:
    log = Log.create_at(
        tmp_path / "t-0",
        LogConfig(),
        topic="t",
        partition=0,
        log_start_offset=10,
        next_offset=50,
        hw_managed_externally=True,
    )
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (10, 50, 50)
    log.close()


# --- kill -9 in the middle of truncations -----------------------------------------------------------


def check_recovered(d: Path) -> Log:
    """Open a log left by a killed child: it must be consistent in every respect."""
    log = Log.open(d, CRASH_CONFIG, topic="t", partition=0, hw_managed_externally=True)
    data = raw(log)
    batches = batch_list(data)
    assert_layout(log)
    if batches:
        assert batches[0][1] == log.local_log_start_offset
        assert batches[-1][2] == log.log_end_offset
        epochs = [e for _, _, _, e in batches]
        assert epochs == sorted(epochs)
    for b in decode_batches(data):
        for r in b:
            assert r.key == b"k%d" % r.offset
            assert r.value == payload(r.offset, b.header.partition_leader_epoch)
    entries = list(log.leader_epochs())
    if entries and batches and entries[0].start_offset < log.log_start_offset:
        raise AssertionError(f"epoch entry below the log start: {entries}")
    assert entries == expected_epochs(data)
    # Producer state from the snapshots equals a rebuild from the batches alone.
    copy = d.parent / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(d, copy)
    for name in os.listdir(copy):
        if name.endswith(".snapshot"):
            os.unlink(copy / name)
    rebuilt = Log.open(copy, CRASH_CONFIG, topic="t", partition=0)
    assert producers(rebuilt) == producers(log)
    rebuilt.close(clean=False)
    shutil.rmtree(copy)
    return log


def child_batches(log: Log, rnd: random.Random, epoch: int, count: int) -> None:
    for _ in range(count):
        leo = log.log_end_offset
        n = rnd.randint(1, 4)
        pid = rnd.choice((-1, 21, 22))
        log.append_as_follower(batch(leo, n, epoch, pid=pid, seq=leo % 1000, producer_epoch=0))


def child_main(log_dir: str, seed: int, kill_at: int | None) -> None:
    import hot.local_log as hot_local_log  # every fsync_dir of truncation resolves there

    rnd = random.Random(seed)
    log = Log.open(log_dir, CRASH_CONFIG, topic="t", partition=0, hw_managed_externally=True)
    out = sys.stdout
    if kill_at is not None:
        real: Callable[[str | Path], None] = hot_local_log.fsync_dir
        calls = 0

        def fsync_dir(path: str | Path) -> None:
            nonlocal calls
            calls += 1
            if calls == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            real(path)

        hot_local_log.fsync_dir = fsync_dir  # type: ignore[assignment]
        if seed % 2:
            log.truncate_fully_and_start_at(log.log_end_offset + 3)
        else:
            log.truncate_to(log.log_start_offset + (log.log_end_offset - log.log_start_offset) // 3)
        out.write(f"done {calls}\n")
        out.flush()
        return
    epoch = log.latest_epoch + 1
    out.write("ready\n")
    out.flush()
    while True:
        child_batches(log, rnd, epoch, rnd.randint(3, 40))
        leo = log.log_end_offset
        if rnd.random() < 0.05:
            log.truncate_fully_and_start_at(leo + rnd.randint(0, 5))
        else:
            log.truncate_to(rnd.randint(max(log.log_start_offset, leo - 150), leo))
        epoch += 1
        out.write(f"{log.log_end_offset}\n")
        out.flush()


def run_child(d: Path, seed: int, kill_at: int | None = None) -> subprocess.Popen[bytes]:
    args = [sys.executable, str(Path(__file__).resolve()), str(d), str(seed)]
    if kill_at is not None:
        args.append(str(kill_at))
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def prepare_crash_log(d: Path, seed: int) -> None:
    log = Log.open(d, CRASH_CONFIG, topic="t", partition=0, hw_managed_externally=True)
    rnd = random.Random(seed)
    for epoch in range(1, 6):
        child_batches(log, rnd, epoch, 25)
    assert len(log.segments()) >= 6
    log.close(clean=False)


@pytest.mark.parametrize("seed", [0, 1])
def test_kill9_at_every_durability_step_of_a_truncation(tmp_path: Path, seed: int) -> None:
    """seed 0: truncate_to across several segments; seed 1: truncate_fully_and_start_at."""
    base = tmp_path / "base" / "t-0"
    prepare_crash_log(base, seed)
    first = Log.open(base, CRASH_CONFIG, topic="t", partition=0, hw_managed_externally=True)
    before = raw(first)
    first.close(clean=False)
    deadline = time.monotonic() + 120
    killed = 0
    for k in range(1, 100):
        assert time.monotonic() < deadline, "children too slow"
        d = tmp_path / f"k{k}" / "t-0"
        shutil.copytree(base, d)
        proc = run_child(d, seed, k)
        out, err = proc.communicate(timeout=60)
        log = check_recovered(d)
        after = raw(log)
        if proc.returncode == -signal.SIGKILL:
            killed += 1
            # A crash leaves the old log or a prefix of it (or, fully truncated, an empty one).
            assert before.startswith(after)
            log.close()
            shutil.rmtree(d.parent)
            continue
        assert proc.returncode == 0, err.decode()
        assert out.startswith(b"done")
        log.close()
        break
    assert killed >= 4  # the truncation had that many crash points


def test_kill9_at_random_moments_of_truncating_followers(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    deadline = time.monotonic() + 60
    rnd = random.Random(99)
    for round_no in range(6):
        proc = run_child(d, round_no)
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        lines = 0
        want = rnd.randint(2, 12)
        buf = b""
        try:
            while lines < want:
                assert time.monotonic() < deadline, "child too slow"
                if not sel.select(timeout=1.0):
                    assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                assert chunk, proc.stderr.read().decode() if proc.stderr else "child exited"
                buf += chunk
                lines = buf.count(b"\n")
            time.sleep(rnd.random() * 0.05)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            sel.close()
            proc.stdout.close()
            if proc.stderr:
                proc.stderr.close()
        log = check_recovered(d)
        log.close(clean=False)


if __name__ == "__main__":
    child_main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None)
