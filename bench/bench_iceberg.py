"""Iceberg translation vs ``strata export`` of the same records, and the lag of a table
under a steady produce rate; same run, same machine.

    python -m bench.bench_iceberg [--records 500000] [--rounds 3] [--rate 20000]
                                  [--seconds 30] [--lag-ms 10000] [--skip-lag] [--skip-throughput]

1. Throughput: ``--records`` records of 100-byte random values tiered into a ``file://``
   bucket (bench.bench_spark.build_topic); ``--rounds`` rounds, each ``strata export``
   (spark.export, Parquet, one job) and one translation pass into a fresh, empty table
   (spark.iceberg.translate: read, Parquet data files through the store, pyiceberg commit),
   in turn, the export first in odd rounds and second in even ones. The table is created
   (once in a topic's life, not per record) before the pass is timed; its creation time
   is printed beside.
   Prints each round's records/s of both, by wall and per CPU second of the process (all
   threads), with the load average, then the median of the rounds' translate/export ratios
   (target >= 0.8) and the best-of ratio: on a loaded machine two rounds differ more than
   the two sides of one round.
2. Lag: a broker (``strata serve``) with a key_value topic of ``iceberg.target.lag.ms =
   --lag-ms``; a producer at ``--rate`` msg/s for ``--seconds``; every 0.5 s the table's
   committed offsets are read with pyiceberg. Prints the produced rate reached, the highest
   lag in records and in seconds (age of the oldest record not in the table) and whether it
   stayed within the target lag.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def throughput(base: Path, records: int, rounds: int) -> list[dict[str, float]]:
    """Per round (an export and a translation pass, in turn): records/s of both, by wall
    and per CPU second of this process (all threads), and the load average. Compared round
    by round: on a loaded machine the figures move between rounds far more than within one."""
    from bench.bench_spark import TOPIC, build_topic
    from hot.config import LogConfig
    from hot.topics import TopicInfo
    from tiering.store import SyncObjectStore

    url = f"file://{base / 'bucket'}"
    (base / "bucket").mkdir(parents=True, exist_ok=True)
    archived = build_topic(base / "src", url, records, 16384, "none")
    store = SyncObjectStore.open(url)
    doc = json.loads(store.get(f"topics/{TOPIC}.json"))
    info = TopicInfo(TOPIC, 1, {}, uuid.UUID(doc["topic_id"]))
    config = LogConfig.from_kafka({"iceberg.mode": "key_value"})
    out: list[dict[str, float]] = []
    try:
        for r in range(rounds):
            export_dir, meta_dir = base / f"export-{r}", base / f"meta-{r}"
            if r % 2 == 0:  # (a dict display runs its parts left to right)
                timed = {
                    **_time_export(url, export_dir, archived),
                    **_time_translation(store, info, config, url, meta_dir, archived),
                }
            else:
                timed = {
                    **_time_translation(store, info, config, url, meta_dir, archived),
                    **_time_export(url, export_dir, archived),
                }
            out.append(
                {
                    "export": archived / timed["export"],
                    "translate": archived / timed["translate"],
                    "export_cpu": archived / timed["export_cpu"],
                    "translate_cpu": archived / timed["translate_cpu"],
                    "create_s": timed["create"],
                    "load": os.getloadavg()[0],
                }
            )
    finally:
        store.close()
    return out


def _time_export(url: str, dest: Path, archived: int) -> dict[str, float]:
    from bench.bench_spark import TOPIC
    from spark.export import export, parse_options

    t0, c0 = time.perf_counter(), time.process_time()
    result = export(parse_options(url, TOPIC), dest, jobs=1)
    timed = {"export": time.perf_counter() - t0, "export_cpu": time.process_time() - c0}
    assert result.rows == archived, (result.rows, archived)
    shutil.rmtree(dest)
    return timed


def _time_translation(
    store: Any, info: Any, config: Any, url: str, data_dir: Path, archived: int
) -> dict[str, float]:
    from spark.iceberg.catalog import catalog_properties, open_catalog
    from spark.iceberg.translate import Translator
    from tiering.iceberg_config import IcebergConfig
    from tiering.keys import iceberg_table_root

    root = iceberg_table_root(info.name, info.topic_id)
    keys = [i.key for i in store.list(f"{root}/")]
    if keys:
        store.delete_many(keys)
    catalog = open_catalog(catalog_properties(IcebergConfig(), data_dir, url))
    translator = Translator(store, catalog, namespace="strata", broker=None)
    t0 = time.perf_counter()
    translator.table(info, config, create=True)
    created = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    passed = translator.run_pass(info, config)
    timed = {"translate": time.perf_counter() - t0, "translate_cpu": time.process_time() - c0}
    assert passed.rows == archived, (passed.rows, archived)
    return {**timed, "create": created}


def lag(base: Path, rate: int, seconds: float, lag_ms: int) -> dict[str, float]:
    from confluent_kafka import Producer

    from spark.iceberg.catalog import catalog_properties, open_catalog
    from spark.iceberg.translate import committed_offsets
    from tests.brokers import BrokerProcess, create_topic
    from tiering.iceberg_config import IcebergConfig

    data = base / "broker"
    broker = BrokerProcess(data, env={"STRATA_ICEBERG_CHECK_INTERVAL_MS": "200"}).start()
    produced_at: list[tuple[int, float]] = []  # (records acknowledged, when)
    stop = threading.Event()
    try:
        create_topic(
            broker.bootstrap, "steady", 1, {"iceberg.mode": "key_value", "iceberg.target.lag.ms": str(lag_ms)}
        )
        acked = [0]

        def delivered(err: object, msg: object) -> None:
            if err is None:
                acked[0] += 1

        def produce() -> None:
            p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "enable.idempotence": True})
            value = os.urandom(100)
            start = time.monotonic()
            sent = 0
            while not stop.is_set():
                due = int((time.monotonic() - start) * rate)
                while sent < due:
                    try:
                        p.produce("steady", value, on_delivery=delivered)
                        sent += 1
                    except BufferError:
                        p.poll(0.01)
                p.poll(0.001)
                produced_at.append((acked[0], time.monotonic()))
                time.sleep(0.005)
            p.flush(30)

        thread = threading.Thread(target=produce, daemon=True)
        catalog = open_catalog(
            catalog_properties(IcebergConfig(), data, f"file://{(data / 'objects').resolve()}")
        )
        t0 = time.monotonic()
        thread.start()
        max_lag_records = 0
        max_lag_s = 0.0
        while time.monotonic() - t0 < seconds:
            time.sleep(0.5)
            try:
                committed = committed_offsets(catalog.load_table(("strata", "steady"))).get(0, 0)
            except Exception:
                committed = 0
            now = time.monotonic()
            done = acked[0]
            max_lag_records = max(max_lag_records, done - committed)
            # the oldest record not in the table: acknowledged when the count first passed it
            oldest = next((t for n, t in produced_at if n > committed), now)
            if done > committed:
                max_lag_s = max(max_lag_s, now - oldest)
        stop.set()
        thread.join(60)
        elapsed = time.monotonic() - t0
        return {"rate": acked[0] / elapsed, "max_lag_records": max_lag_records, "max_lag_s": max_lag_s}
    finally:
        stop.set()
        broker.stop()


def report(rounds: list[dict[str, float]], records: int) -> None:
    print(f"throughput, {records:,} records of 100 B, {len(rounds)} rounds (export, translate):")
    print(
        "  round  load  export rec/s  translate rec/s  ratio  | per CPU s: export  translate  ratio"
        "  | table created in"
    )
    for i, r in enumerate(rounds):
        wall = r["translate"] / r["export"]
        cpu_ratio = r["translate_cpu"] / r["export_cpu"]
        print(
            f"  {i + 1:5d} {r['load']:5.1f} {r['export']:13,.0f} {r['translate']:16,.0f} {wall:6.2f}  "
            f"| {r['export_cpu']:17,.0f} {r['translate_cpu']:10,.0f} {cpu_ratio:6.2f}"
            f"  | {r['create_s'] * 1000:8.0f} ms"
        )
    ratios = sorted(r["translate"] / r["export"] for r in rounds)
    cpu = sorted(r["translate_cpu"] / r["export_cpu"] for r in rounds)
    best = max(r["translate"] for r in rounds) / max(r["export"] for r in rounds)
    # all rounds' time together: one slow moment of the machine weighs as much as it lasted
    total = sum(1 / r["export"] for r in rounds) / sum(1 / r["translate"] for r in rounds)
    print(
        f"  translate/export: median {statistics.median(ratios):.2f} of rounds, best-of {best:.2f}, "
        f"of the rounds' total time {total:.2f}"
    )
    print(f"  translate/export per CPU second: median {statistics.median(cpu):.2f}   (target >= 0.8)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--lag-ms", type=int, default=10_000)
    ap.add_argument("--skip-lag", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-iceberg-", dir=args.dir))
    try:
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        if not args.skip_throughput:
            report(throughput(base / "tp", args.records, args.rounds), args.records)
        if not args.skip_lag:
            r = lag(base / "lag", args.rate, args.seconds, args.lag_ms)
            print(
                f"lag at {args.rate:,} msg/s for {args.seconds:.0f} s, iceberg.target.lag.ms={args.lag_ms}:"
            )
            print(f"  produced                  {r['rate']:12,.0f} msg/s")
            print(f"  highest lag               {r['max_lag_records']:12,.0f} records")
            print(f"  highest lag               {r['max_lag_s']:12.1f} s")
            within = r["max_lag_s"] * 1000 <= args.lag_ms
            print(f"  within the target lag     {'yes' if within else 'no':>12}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
