"""Transactions benchmark: transactional produce against idempotent produce, same broker.

    python -m bench.bench_transactions [--records 20000] [--sizes 100,1000,10000]

Starts a real `strata serve` (bench.bench_broker.start_broker) and drives it with one
confluent-kafka (librdkafka) producer per run, 100-byte records, acks=all, idempotence on:

  1. Baseline, measured in the same run: an idempotent producer sends the records and
     flushes (msg/s).
  2. For each transaction size N: a transactional producer sends the same records in
     transactions of N (begin, produce N, commit), msg/s and its ratio to the baseline,
     and the commit latency (commit_transaction's duration) p50 / p99.

Runs alternate baseline and transactional per size (so drift on a shared machine hits both
alike) and print every figure with the baseline it is compared to. Each run uses its own
topic (3 partitions).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.bench_broker import RECORD, start_broker

PARTITIONS = 3


def _topic(bootstrap: str) -> str:
    name = f"bench-txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    return name


def _conf(bootstrap: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1_000_000,
    }


def idempotent(bootstrap: str, records: int) -> float:
    topic = _topic(bootstrap)
    p = Producer(_conf(bootstrap))
    # Outside the clock, as init_transactions is for the transactional producer: the
    # producer id (InitProducerId) and the connections.
    p.produce(topic, RECORD, partition=0)
    p.flush(60)
    start = time.perf_counter()
    for i in range(records):
        p.produce(topic, RECORD, partition=i % PARTITIONS)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(120)
    return records / (time.perf_counter() - start)


def transactional(bootstrap: str, records: int, per_txn: int) -> tuple[float, list[float]]:
    topic = _topic(bootstrap)
    p = Producer({**_conf(bootstrap), "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(60)
    p.begin_transaction()  # warm the connections to the partitions' leader, outside the clock
    p.produce(topic, RECORD, partition=0)
    p.commit_transaction(60)
    commits: list[float] = []
    start = time.perf_counter()
    sent = 0
    while sent < records:
        p.begin_transaction()
        n = min(per_txn, records - sent)
        for i in range(n):
            p.produce(topic, RECORD, partition=(sent + i) % PARTITIONS)
            if i % 10000 == 0:
                p.poll(0)
        t = time.perf_counter()
        p.commit_transaction(120)
        commits.append(time.perf_counter() - t)
        sent += n
    return records / (time.perf_counter() - start), commits


def _pct(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=20000, help="records per run")
    ap.add_argument("--sizes", default="100,1000,10000", help="records per transaction, comma-separated")
    ap.add_argument("--rounds", type=int, default=2, help="baseline/transactional pairs per size")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        proc, port = start_broker(Path(tmp) / "data")
        bootstrap = f"127.0.0.1:{port}"
        try:
            idempotent(bootstrap, min(args.records, 5000))  # warm-up: connections, topic creation
            for size in sizes:
                base, txn, commits = [], [], []
                for _ in range(args.rounds):
                    base.append(idempotent(bootstrap, args.records))
                    rate, lat = transactional(bootstrap, args.records, size)
                    txn.append(rate)
                    commits += lat
                b, t = statistics.median(base), statistics.median(txn)
                print(
                    f"{size:>6} records/transaction: transactional {t:,.0f} msg/s vs idempotent "
                    f"{b:,.0f} msg/s = {t / b:.2f}; commit latency p50 {_pct(commits, 50) * 1000:.1f} ms, "
                    f"p99 {_pct(commits, 99) * 1000:.1f} ms ({len(commits)} commits)",
                    flush=True,
                )
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
