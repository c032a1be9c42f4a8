"""Spark scan of archived segments vs Spark's own Parquet reader on the same rows, same run.

    python -m bench.bench_spark [--records 2000000] [--batch-bytes 16384] [--codec none]
                                [--rounds 3] [--dir /tmp] [--s3]

1. Writes ``--records`` records of 100-byte random values (null keys, increasing
   timestamps) through a real ``hot.log.Log`` in ``--batch-bytes`` producer batches, and
   tiers the sealed segments to a bucket exactly as the uploader does (``file://`` by
   default; ``--s3`` uses moto's S3 server on loopback).
2. ``strata export`` (api.export) writes the same rows as Parquet: the baseline.
3. In one local SparkSession (all cores), alternating, best of ``--rounds``:
   ``spark.read.format("strata").load(url)`` and ``spark.read.parquet(dir)``, each
   (a) materializing every column (``write.format("noop")``) and (b) aggregating over
   every column, after one warm-up (a count) each.

Prints rows/s of both, the ratio strata/parquet (target >= 0.5) and strata rows/s per core.
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


def build_topic(path: Path, url: str, records: int, batch_bytes: int, codec: str) -> int:
    """Write and tier ``records`` records; returns the number archived (sealed segments only)."""
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
    rnd = os.urandom(100 * per_batch + 4096)
    written = 0
    while written < records:
        n = min(per_batch, records - written)
        shift = (written * 7) % 4096
        recs = [
            RecordInput(None, rnd[shift + 100 * i : shift + 100 * i + 100], timestamp=TS0 + written + i)
            for i in range(n)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000, help="records to archive (up to 5 M)")
    ap.add_argument("--batch-bytes", type=int, default=16384, help="producer batch size")
    ap.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="scratch directory [a temp dir]")
    ap.add_argument("--s3", action="store_true", help="tier to moto's S3 server instead of file://")
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
        archived = build_topic(scratch, url, args.records, args.batch_bytes, args.codec)
        print(f"wrote and tiered {archived:,} records in {time.perf_counter() - t0:.1f} s ({url})")

        from api.export import export, parse_options

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
        best = {(s, q): float("inf") for s in sources for q in queries}
        for _ in range(args.rounds):
            for q, run in queries.items():
                for s, make in sources.items():
                    t0 = time.perf_counter()
                    run(make())
                    best[(s, q)] = min(best[(s, q)], time.perf_counter() - t0)
        spark.stop()
        print(
            f"{archived:,} records, 100 B values, {args.codec}, {args.batch_bytes} B batches, {cores} cores"
        )
        print(f"best of {args.rounds} rounds, alternating; rows/s")
        print(f"{'query':10s} {'strata':>12s} {'parquet':>12s} {'ratio':>6s} {'strata/core':>12s}")
        for q in queries:
            rs = archived / best[("strata", q)]
            rp = archived / best[("parquet", q)]
            print(f"{q:10s} {rs:12,.0f} {rp:12,.0f} {rs / rp:6.2f} {rs / cores:12,.0f}")
        print("target: ratio strata/parquet >= 0.5")
    finally:
        if endpoint is not None:
            endpoint.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
