"""Streaming read (``readStream``, Trigger.AvailableNow) vs the batch read of the same
archived backlog, in one SparkSession, same run.

    python -m bench.bench_spark_stream [--records 200000] [--rounds 3] [--min-partitions 2]
                                       [--max-offsets-per-trigger N] [--dir /tmp]

1. Writes ``--records`` records of 100-byte random values (null keys) through a real
   ``hot.log.Log`` and tiers every segment to a ``file://`` bucket exactly as the uploader
   does (``bench.bench_spark.build_topic``). The issue's size is 2,000,000 records.
2. In one local SparkSession (all cores), alternating, best of ``--rounds`` after one
   warm-up each: the batch read ``spark.read.format("strata").load(url)`` written to the
   ``noop`` sink, and the stream ``spark.readStream.format("strata")`` from the earliest
   offset with ``trigger(availableNow=True)`` to the ``noop`` sink (a fresh checkpoint per
   run), timed from ``start()`` to its termination: offset resolution, the offset and
   commit logs and the query's start and stop are part of the streaming cost.

Prints rows/s of both and the ratio stream/batch (issue 21's target: >= 0.8). Also the
fixed cost of any Python streaming query in this session (a trivial source yielding one
row, availableNow, same sink), and the stream's rate with that cost taken out: the
difference between the two ratios is Spark's per-query cost, not the source's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="backlog size (the issue's: 2000000)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-partitions", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=0, help="0: one batch for the backlog")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench.bench_spark import TOPIC, build_topic

    scratch = Path(tempfile.mkdtemp(prefix="bench-spark-stream-", dir=args.dir))
    try:
        url = f"file://{scratch / 'bucket'}"
        t0 = time.perf_counter()
        rows = build_topic(scratch, url, args.records, 16384, "none")
        print(f"backlog: {rows:,} records archived in {time.perf_counter() - t0:.1f}s ({url})")

        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        from pyspark.sql import SparkSession

        from spark import StrataDataSource

        spark = (
            SparkSession.builder.master("local[*]")
            .appName("bench-spark-stream")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.memory", "4g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(StrataDataSource)
        options = {"subscribe": TOPIC, "minPartitions": str(args.min_partitions)}
        runs = 0

        def batch() -> float:
            t = time.perf_counter()
            spark.read.format("strata").options(**options).load(url).write.format("noop").mode(
                "overwrite"
            ).save()
            return time.perf_counter() - t

        def stream() -> float:
            nonlocal runs
            runs += 1
            opts = {**options, "startingOffsets": "earliest"}
            if args.max_offsets_per_trigger:
                opts["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
            t = time.perf_counter()
            q = (
                spark.readStream.format("strata")
                .options(**opts)
                .load(url)
                .writeStream.format("noop")
                .option("checkpointLocation", str(scratch / f"ck{runs}"))
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination()
            elapsed = time.perf_counter() - t
            if q.exception() is not None:
                raise RuntimeError(f"stream failed: {q.exception()}")
            progress = q.recentProgress
            got = sum(p["numInputRows"] for p in progress)
            assert got == rows, f"the stream read {got:,} rows, expected {rows:,}"
            return elapsed

        spark.dataSource.register(_trivial_source())

        def floor() -> float:
            nonlocal runs
            runs += 1
            t = time.perf_counter()
            q = (
                spark.readStream.format("trivial")
                .load()
                .writeStream.format("noop")
                .option("checkpointLocation", str(scratch / f"ck{runs}"))
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination()
            return time.perf_counter() - t

        batch()
        stream()  # warm-up
        floor()
        best_b = best_s = best_f = float("inf")
        for _ in range(args.rounds):
            best_b = min(best_b, batch())
            best_s = min(best_s, stream())
            best_f = min(best_f, floor())
        rb, rs = rows / best_b, rows / best_s
        rn = rows / max(best_s - best_f, 1e-9)
        print(f"cores: {os.cpu_count()}, rounds: {args.rounds} (best of), records: {rows:,}")
        print(f"batch  read (noop sink):             {best_b:7.2f}s  {rb:12,.0f} rows/s")
        print(f"stream availableNow (noop sink):     {best_s:7.2f}s  {rs:12,.0f} rows/s")
        print(f"empty Python streaming query (fixed cost): {best_f:7.2f}s")
        print(f"stream without that fixed cost:      {best_s - best_f:7.2f}s  {rn:12,.0f} rows/s")
        print(f"ratio stream/batch: {rs / rb:.2f} (target >= 0.8); without the fixed cost: {rn / rb:.2f}")
        spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _trivial_source() -> type:
    """A Python streaming source with one row: what any such query costs in Spark."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def initialOffset(self) -> dict[str, int]:
            return {"o": 0}

        def prepareForTriggerAvailableNow(self) -> None:
            pass

        def latestOffset(self, start: dict[str, int], limit: object) -> dict[str, int]:
            return {"o": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(0)] if start["o"] < end["o"] else []

        def read(self, partition: InputPartition) -> object:
            yield (1,)

    class Trivial(DataSource):
        @classmethod
        def name(cls) -> str:
            return "trivial"

        def schema(self) -> str:
            return "v int"

        def streamReader(self, schema: object) -> DataSourceStreamReader:
            return Reader()

    return Trivial


if __name__ == "__main__":
    main()
