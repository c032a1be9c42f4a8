"""Hot log engine benchmark: our append and read paths vs raw syscalls on the same bytes, same run.

    python -m bench.bench_hot [--seconds-per-case 2] [--dir /tmp]

For each (record size, batch size) it prints records/s and MB/s of:
  * Log.append with no fsync (interval mode)    vs  os.write of the same batches
  * Log.append + group commit (fsync mode)      vs  os.write + fsync at the same cadence
  * Log.read -> FileRegion.read (region API)     vs  os.pread of the same byte ranges
and the ratio ours/raw. Ratios, not absolute numbers, are what to compare across machines.

Group-commit cadence: the producer appends a group of batches (about 1 MiB) and then waits
for the high watermark to cover them, as a pipelining client would; the baseline writes the
same group and fsyncs once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hot.config import LogConfig
from hot.flush import GroupCommitter
from hot.log import Log
from hot.records import RecordInput, build_batch

GROUP_BYTES = 1 << 20


@dataclass
class Result:
    records: int
    nbytes: int
    seconds: float

    @property
    def rps(self) -> float:
        return self.records / self.seconds

    @property
    def mbps(self) -> float:
        return self.nbytes / self.seconds / 1e6


def make_batches(record_size: int, batch_bytes: int, total_bytes: int) -> tuple[list[bytes], int]:
    value = os.urandom(record_size)
    # per-record overhead is ~10 bytes of varints; aim for batch_bytes per batch
    per_batch = max(1, batch_bytes // (record_size + 10))
    batch = build_batch([RecordInput(None, value, timestamp=1_700_000_000_000)] * per_batch)
    count = max(1, total_bytes // len(batch))
    return [batch] * count, per_batch


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = fn()
    return time.perf_counter() - t0, n


def bench_append(
    workdir: Path, batches: list[bytes], per_batch: int, fsync: bool, rounds: int
) -> tuple[Result, Result]:
    """Best of ``rounds`` for each side, alternating ours/raw on fresh files each round.

    Alternating and deleting between rounds keeps page-cache state and disk write-back
    from favouring whichever side runs second.
    """
    group = max(1, GROUP_BYTES // len(batches[0]))
    cfg = LogConfig.from_kafka(
        {
            "strata.flush.mode": "fsync" if fsync else "interval",
            "segment.bytes": str(1 << 30),
            "max.message.bytes": str(4 << 20),
        }
    )
    total_bytes = sum(len(b) for b in batches)
    best_ours = best_raw = float("inf")
    for rnd in range(rounds):
        d = workdir / f"log-{rnd}"
        committer = GroupCommitter() if fsync else None
        log = Log.open(d, cfg, topic="bench", partition=0, flusher=committer)

        def ours(log: Log = log) -> int:
            for i in range(0, len(batches), group):
                last = -1
                for b in batches[i : i + group]:
                    last = log.append(b).last_offset
                if fsync:
                    log.high_watermark_future(last + 1).result()
            return len(batches)

        secs, _ = timed(ours)
        best_ours = min(best_ours, secs)
        log.close()
        if committer:
            committer.close()
        shutil.rmtree(d)

        path = workdir / f"raw-{rnd}.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

        def raw(fd: int = fd) -> int:
            for i in range(0, len(batches), group):
                for b in batches[i : i + group]:
                    os.write(fd, b)
                if fsync:
                    os.fsync(fd)
            return len(batches)

        secs, _ = timed(raw)
        best_raw = min(best_raw, secs)
        os.close(fd)
        path.unlink()
    recs = len(batches) * per_batch
    return Result(recs, total_bytes, best_ours), Result(recs, total_bytes, best_raw)


def bench_read(
    workdir: Path, batches: list[bytes], per_batch: int, fetch_bytes: int
) -> tuple[Result, Result]:
    cfg = LogConfig.from_kafka(
        {"strata.flush.mode": "interval", "segment.bytes": str(1 << 30), "max.message.bytes": str(4 << 20)}
    )
    d = workdir / "log-read"
    log = Log.open(d, cfg, topic="bench", partition=0)
    for b in batches:
        log.append(b)
    end = log.log_end_offset
    ranges: list[tuple[int, int]] = []
    nbytes = 0

    def ours() -> int:
        nonlocal nbytes
        offset = 0
        n = 0
        while offset < end:
            res = log.read(offset, fetch_bytes)
            for r in res.regions:
                data = r.read()
                nbytes += len(data)
                ranges.append((r.position, r.length))
            offset = res.next_offset
            n += 1
        return n

    secs_ours, _ = timed(ours)
    files = sorted(p for p in d.iterdir() if p.suffix == ".log")
    assert len(files) == 1, "the read case expects one segment"
    fd = os.open(files[0], os.O_RDONLY)

    def raw() -> int:
        for pos, length in ranges:
            os.pread(fd, length, pos)
        return len(ranges)

    secs_raw, _ = timed(raw)
    os.close(fd)
    log.close()
    recs = len(batches) * per_batch
    return Result(recs, nbytes, secs_ours), Result(recs, nbytes, secs_raw)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--mib", type=int, default=256, help="MiB written per case")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per case (best of)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="strata-bench-", dir=args.dir))
    print(f"scratch dir {base}; {args.mib} MiB per case, best of {args.rounds} rounds")
    header = f"{'case':42} {'ours rec/s':>12} {'ours MB/s':>10} {'raw MB/s':>10} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    try:
        for record_size in (100, 1024):
            for batch_bytes in (16 << 10, 1 << 20):
                batches, per_batch = make_batches(record_size, batch_bytes, args.mib << 20)
                for fsync in (False, True):
                    work = base / f"a-{record_size}-{batch_bytes}-{fsync}"
                    work.mkdir()
                    ours, raw = bench_append(work, batches, per_batch, fsync, args.rounds)
                    name = f"append {record_size}B rec, {batch_bytes >> 10}KiB batch" + (
                        ", fsync group" if fsync else ""
                    )
                    print(
                        f"{name:42} {ours.rps:12,.0f} {ours.mbps:10.0f} {raw.mbps:10.0f} "
                        f"{raw.seconds / ours.seconds:6.2f}",
                        flush=True,
                    )
                    shutil.rmtree(work)
                work = base / f"r-{record_size}-{batch_bytes}"
                work.mkdir()
                ours, raw = bench_read(work, batches, per_batch, 1 << 20)
                name = f"read {record_size}B rec, {batch_bytes >> 10}KiB batch (1MiB fetch)"
                print(
                    f"{name:42} {ours.rps:12,.0f} {ours.mbps:10.0f} {raw.mbps:10.0f} "
                    f"{raw.seconds / ours.seconds:6.2f}",
                    flush=True,
                )
                shutil.rmtree(work)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
