"""Log compaction benchmark: one cleaner pass vs the raw read + write of the same bytes, same run.

    python -m bench.bench_compaction [--mib 64] [--keys 10000] [--record-bytes 100]
                                     [--batch 10] [--compression none|zstd] [--dir /tmp]

Builds a compacted log of ``--mib`` MiB of sealed segments (1 MiB each), records spread
uniformly over ``--keys`` keys, then times:
  * LogCleaner.clean (map build over the dirty log, rewrite, fsync, swap)
  * raw: read every segment file twice (map pass + copy pass) and write the copy once,
    fsync it, in 1 MiB chunks - the I/O a cleaner cannot avoid
and prints MB/s of dirty log cleaned for both, and the ratio ours/raw. Ratios, not absolute
numbers, are what to compare across machines.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from hot.batch import Compression
from hot.cleaner import CleanerConfig, LogCleaner
from hot.config import LogConfig
from hot.log import Log
from hot.records import RecordInput, build_batch

CHUNK = 1 << 20


def build(path: Path, mib: int, keys: int, record_bytes: int, batch: int, compression: Compression) -> Log:
    cfg = LogConfig(
        cleanup_policy="compact", segment_bytes=1 << 20, flush_mode="interval", min_cleanable_dirty_ratio=0.0
    )
    log = Log.open(path, cfg, topic="bench", partition=0)
    rng = random.Random(1)
    payload = os.urandom(record_bytes)
    ts = int(time.time() * 1000) - 60_000
    while log.size < mib << 20:
        recs = [RecordInput(b"key-%08d" % rng.randrange(keys), payload, timestamp=ts) for _ in range(batch)]
        log.append(build_batch(recs, compression=compression))
    log.roll()
    log.flush()
    return log


def raw_copy(paths: list[str], out_dir: Path) -> float:
    start = time.perf_counter()
    for p in paths:
        with open(p, "rb") as f:
            while f.read(CHUNK):
                pass
        dst = out_dir / (os.path.basename(p) + ".copy")
        with open(p, "rb") as f, open(dst, "wb") as g:
            while chunk := f.read(CHUNK):
                g.write(chunk)
            g.flush()
            os.fsync(g.fileno())
        dst.unlink()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--record-bytes", type=int, default=100)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--compression", choices=["none", "zstd"], default="none")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    compression = Compression.ZSTD if args.compression == "zstd" else Compression.NONE
    root = Path(tempfile.mkdtemp(prefix="bench-compaction-", dir=args.dir))
    try:
        log = build(root / "bench-0", args.mib, args.keys, args.record_bytes, args.batch, compression)
        sealed = log.segments()[:-1]
        dirty = sum(s.size for s in sealed)
        paths = [s.log_path for s in sealed]
        raw_s = raw_copy(paths, root)
        cleaner = LogCleaner(CleanerConfig())
        start = time.perf_counter()
        stats = cleaner.clean(log, force=True)
        ours_s = time.perf_counter() - start
        assert stats is not None
        raw_s2 = raw_copy([s.log_path for s in log.segments()[:-1]], root)  # page cache now warm either way
        mb = dirty / 1e6
        print(
            f"dirty log {mb:.1f} MB in {len(sealed)} segments, {args.keys} keys, "
            f"{args.record_bytes} B records, {args.batch}/batch, {args.compression}"
        )
        print(
            f"cleaner: {mb / ours_s:8.1f} MB/s  ({ours_s:.2f} s; "
            f"{stats.records_kept} of {stats.records_read} records kept, "
            f"{stats.bytes_written / 1e6:.1f} MB written, "
            f"{stats.segments_in} -> {stats.segments_out} segments)"
        )
        print(f"raw read x2 + write + fsync: {mb / raw_s:8.1f} MB/s  ({raw_s:.2f} s)")
        print(f"ratio cleaner/raw: {raw_s / ours_s:.3f}   (cleaned-output raw copy took {raw_s2:.2f} s)")
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
