"""Spark scan of archived segments vs Spark's own Parquet reader on the same rows, same run.

    python -m bench.bench_spark [--records 2000000] [--batch-bytes 16384] [--codec none]
                                [--rounds 5] [--dir /tmp] [--s3] [--pooled-values]

1. Writes ``--records`` records of 100-byte random values, each drawn anew
   (``--pooled-values``: windows of one small random pool, about 4,700 distinct values
   that Parquet dictionary-encodes, as this benchmark's first runs had), null keys and
   increasing timestamps, through a real ``hot.log.Log`` in ``--batch-bytes`` producer
   batches, and tiers the sealed segments to a bucket exactly as the uploader does
   (``file://`` by default; ``--s3`` uses moto's S3 server on loopback).
2. ``strata export`` (spark.export) writes the same rows as Parquet: the baseline.
3. In one local SparkSession (all cores), alternating, best of ``--rounds``:
   ``spark.read.format("strata").load(url)`` and ``spark.read.parquet(dir)``, each
   (a) materializing every column (``write.format("noop")``) and (b) aggregating over
   every column, after one warm-up (a count) each.

Prints rows/s of both and the ratio strata/parquet (target >= 0.8, issue 39); rows/s per core (rows/s
over the session's cores); and rows per CPU-second: rows over the CPU time the query took
in this process tree (the JVM and its Python workers), the least run of each, a ratio that
other load on the machine disturbs far less than the wall-clock one. The load average is
printed before and after: compare runs made under similar load only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "bench"
TS0 = 1_700_000_000_000
AGGREGATE = (
    "count(*)",
    "sum(length(key))",
    "sum(length(value))",
    "max(offset)",
    "max(timestamp)",
    "max(timestampType)",
    "count(headers)",
    "max(topic)",
    "max(partition)",
)


def build_topic(
    path: Path, url: str, records: int, batch_bytes: int, codec: str, *, pooled: bool = False
) -> int:
    """Write and tier ``records`` records; returns the number archived (sealed segments only).
    Values are random bytes drawn anew for each record; ``pooled``: 100-byte windows of one
    small random pool (the data of this benchmark's first runs): distinct within a batch, but
    only about 4,700 distinct values in all, so Parquet stores a dictionary and an index
    per row."""
    from hot.batch import Compression
    from hot.config import LogConfig
    from hot.log import Log
    from hot.records import RecordInput, build_batch
    from tests.spark.sparklib import put_topic, tier_log
    from tiering.store import open_store

    compression = Compression[codec.upper()]
    per_batch = max(1, batch_bytes // 110)
    log = Log.open(
        path / "log",
        LogConfig.from_kafka({"segment.bytes": str(128 << 20), "strata.flush.mode": "interval"}),
        topic=TOPIC,
        partition=0,
    )
    pool = os.urandom(100 * per_batch + 4096)
    written = 0
    while written < records:
        n = min(per_batch, records - written)
        if pooled:
            shift = (written * 7) % 4096
            values = pool[shift : shift + 100 * n]
        else:
            values = os.urandom(100 * n)
        recs = [
            RecordInput(None, values[100 * i : 100 * i + 100], timestamp=TS0 + written + i) for i in range(n)
        ]
        log.append(build_batch(recs, compression=compression))
        written += n
    log.roll()  # seal the tail so every record is archived
    log.flush()
    topic_id = uuid.uuid4()

    async def tier() -> int:
        store = open_store(url)
        try:
            segs = await tier_log(store, log, TOPIC, topic_id, 0)
            await put_topic(store, TOPIC, topic_id, 1)
            return sum(s.last_offset - s.base_offset + 1 for s in segs)
        finally:
            await store.close()

    archived = asyncio.run(tier())
    log.close()
    return archived


def tree_cpu_seconds(root: int) -> float:
    """CPU time (user + system) of ``root`` and every live descendant, plus what reaped
    children left in their parents' counters, from /proc (Linux)."""
    hz = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # exited meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
        ticks[int(entry)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    total = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / hz


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000, help="records to archive (up to 5 M)")
    ap.add_argument("--batch-bytes", type=int, default=16384, help="producer batch size")
    ap.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="scratch directory [a temp dir]")
    ap.add_argument("--s3", action="store_true", help="tier to moto's S3 server instead of file://")
    ap.add_argument(
        "--pooled-values",
        action="store_true",
        help="cut values from one small random pool, as this benchmark's first runs did (about "
        "4,700 distinct values: Parquet dictionary-encodes them) instead of drawing each anew",
    )
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="strata-bench-spark-", dir=args.dir))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    endpoint = None
    try:
        if args.s3:
            from tests.brokers import S3Endpoint

            endpoint = S3Endpoint()
            os.environ.update(endpoint.env)
            url = f"s3://{endpoint.create_bucket('bench-spark')}/archive"
        else:
            url = f"file://{scratch / 'bucket'}"
        t0 = time.perf_counter()
        archived = build_topic(
            scratch, url, args.records, args.batch_bytes, args.codec, pooled=args.pooled_values
        )
        print(f"wrote and tiered {archived:,} records in {time.perf_counter() - t0:.1f} s ({url})")

        from spark.export import export, parse_options

        t0 = time.perf_counter()
        result = export(parse_options(url, TOPIC), scratch / "parquet", jobs=2)
        took = time.perf_counter() - t0
        print(f"strata export: {result.rows:,} rows in {len(result.files)} Parquet files, {took:.1f} s")

        from pyspark.sql import DataFrame, SparkSession

        spark = (
            SparkSession.builder.master("local[*]")
            .appName("bench_spark")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.memory", "4g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        cores = spark.sparkContext.defaultParallelism
        from spark import StrataDataSource

        spark.dataSource.register(StrataDataSource)
        sources: dict[str, Callable[[], DataFrame]] = {
            "strata": lambda: spark.read.format("strata").option("topic", TOPIC).load(url),
            "parquet": lambda: spark.read.parquet(str(scratch / "parquet")),
        }
        queries: dict[str, Callable[[DataFrame], object]] = {
            # every column materialized by the scan, nothing computed
            "noop": lambda df: df.write.format("noop").mode("overwrite").save(),
            # every column read by an aggregate
            "aggregate": lambda df: df.selectExpr(*AGGREGATE).collect(),
        }
        counts = {name: make().count() for name, make in sources.items()}
        if set(counts.values()) != {archived}:
            raise SystemExit(f"row counts differ: {counts}, archived {archived}")
        load_before = os.getloadavg()
        best = {(s, q): float("inf") for s in sources for q in queries}
        cpu = {(s, q): float("inf") for s in sources for q in queries}
        me = os.getpid()
        for _ in range(args.rounds):
            for q, run in queries.items():
                for s, make in sources.items():
                    c0 = tree_cpu_seconds(me)
                    t0 = time.perf_counter()
                    run(make())
                    best[(s, q)] = min(best[(s, q)], time.perf_counter() - t0)
                    cpu[(s, q)] = min(cpu[(s, q)], tree_cpu_seconds(me) - c0)
        spark.stop()
        load_after = os.getloadavg()
        print(
            f"{archived:,} records, 100 B values, {args.codec}, {args.batch_bytes} B batches, {cores} cores"
        )
        print(
            f"best of {args.rounds} rounds, alternating; load average {load_before[0]:.2f} before, "
            f"{load_after[0]:.2f} after"
        )
        print(
            f"{'query':10s} {'strata':>12s} {'parquet':>12s} {'ratio':>6s} {'strata/core':>12s}"
            f" {'strata/cpu-s':>13s} {'parquet/cpu-s':>13s} {'ratio':>6s}"
        )
        for q in queries:
            rs = archived / best[("strata", q)]
            rp = archived / best[("parquet", q)]
            cs = archived / cpu[("strata", q)]
            cp = archived / cpu[("parquet", q)]
            print(
                f"{q:10s} {rs:12,.0f} {rp:12,.0f} {rs / rp:6.2f} {rs / cores:12,.0f}"
                f" {cs:13,.0f} {cp:13,.0f} {cs / cp:6.2f}"
            )
        print("rows/s: wall clock; per cpu-s: rows over the CPU time of the JVM and its Python workers")
        print("target: ratio strata/parquet >= 0.8 by wall clock (issue 39)")
    finally:
        if endpoint is not None:
            endpoint.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
