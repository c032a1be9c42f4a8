"""Replication benchmark: acks=all on a 3-way replicated topic against acks=1 on an
unreplicated one, same cluster, same run.

    python -m bench.bench_cluster [--seconds 8] [--size 100] [--rate 2000] [--rounds 2]

Setup: a real etcd and three `strata serve --etcd` brokers on loopback (the harness of
tests/broker, without its TCP proxies: brokers connect directly), default broker
settings except that tiering is off (no uploads competing for the two cores). Topic
``rf3`` has replication factor 3 and min.insync.replicas 2, topic ``rf1`` replication
factor 1; one partition each, both led by the same broker.

  1. Throughput: one confluent-kafka (librdkafka) producer sends 100-byte records as fast
     as it can for ``--seconds`` (linger.ms 5), acks=all to ``rf3`` / acks=1 to ``rf1``;
     records acknowledged per second, from the first send to the last acknowledgement.
  2. Latency: the same producer at a fixed ``--rate`` records/s (below both
     throughputs), each record's time from ``produce()`` to its delivery callback;
     p50 / p99 / max.

``--flush-mode`` sets ``strata.flush.mode`` for both topics: ``fsync`` (the default:
acknowledged records are fsynced on the leader and, for acks=all, on every in-sync
follower before its next fetch) or ``interval`` (Kafka's page-cache durability).

Rounds alternate rf3 and rf1 so both see the same machine load; the best throughput and
the median latencies over the rounds are reported, each with the rf3/rf1 ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.broker.clusterlib import Cluster, wait_until  # noqa: E402
from tests.broker.etcdlib import EtcdProcess  # noqa: E402

BENCH_ENV = {
    # Production-like timings; only tiering is off and the segments are Kafka's 1 GiB.
    "STRATA_BROKER_SESSION_TIMEOUT_MS": "10000",
    "STRATA_REPLICA_LAG_TIME_MAX_MS": "30000",
    "STRATA_REPLICA_FETCH_WAIT_MAX_MS": "500",
    "STRATA_REPLICA_FETCH_BACKOFF_MS": "1000",
    "STRATA_REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS": "5000",
    "STRATA_LOG_SEGMENT_BYTES": str(1 << 30),
    "STRATA_LOG_REMOTE_STORAGE_ENABLE": "false",
}


def _producer(bootstrap: str, acks: str) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1 << 20,
        }
    )


def throughput(bootstrap: str, topic: str, acks: str, seconds: float, size: int) -> float:
    """Acknowledged records per second while producing flat out."""
    p = _producer(bootstrap, acks)
    value = b"x" * size
    done = 0
    errors = 0

    def cb(err: Any, msg: Any) -> None:
        nonlocal done, errors
        if err is None:
            done += 1
        else:
            errors += 1

    start = time.perf_counter()
    stop = start + seconds
    sent = 0
    while time.perf_counter() < stop:
        try:
            for _ in range(1000):
                p.produce(topic, value=value, partition=0, on_delivery=cb)
            sent += 1000
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{errors} of {sent} records failed on {topic}")
    return done / elapsed


def latencies(bootstrap: str, topic: str, acks: str, rate: float, seconds: float, size: int) -> list[float]:
    """Per-record produce latencies (seconds) at a fixed rate."""
    p = _producer(bootstrap, acks)
    value = b"x" * size
    out: list[float] = []
    lock = threading.Lock()

    def cb(err: Any, msg: Any, sent_at: float) -> None:
        if err is None:
            with lock:
                out.append(time.perf_counter() - sent_at)

    start = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            p.poll(min(due - now, 0.005))
        t = time.perf_counter()
        p.produce(topic, value=value, partition=0, on_delivery=lambda e, m, t=t: cb(e, m, t))
        p.poll(0)
    p.flush(120)
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--flush-mode", choices=["fsync", "interval"], default="fsync")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        root = Path(tmp)
        etcd = EtcdProcess(root / "etcd").start()
        env = {**BENCH_ENV, "STRATA_LOG_STRATA_FLUSH_MODE": args.flush_mode}
        cluster = Cluster(root, etcd, env=env, proxied=False)
        try:
            cluster.start()
            cluster.create_topic("rf3", 1, rf=3, min_isr=2)
            leader = cluster.leader("rf3")
            # rf1 on the same leader: explicit placement through the admin API.
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin.create_topics([NewTopic("rf1", num_partitions=1, replica_assignment=[[leader]])])[
                "rf1"
            ].result(timeout=30)
            wait_until(lambda: cluster.fully_replicated("rf1"), "rf1 ready")
            bootstrap = cluster.bootstrap
            # Warm-up: connections, metadata, first segments.
            throughput(bootstrap, "rf3", "all", 1.0, args.size)
            throughput(bootstrap, "rf1", "1", 1.0, args.size)
            tput: dict[str, list[float]] = {"rf3": [], "rf1": []}
            lat: dict[str, list[list[float]]] = {"rf3": [], "rf1": []}
            for _ in range(args.rounds):
                for topic, acks in (("rf3", "all"), ("rf1", "1")):
                    tput[topic].append(throughput(bootstrap, topic, acks, args.seconds, args.size))
                for topic, acks in (("rf3", "all"), ("rf1", "1")):
                    lat[topic].append(latencies(bootstrap, topic, acks, args.rate, args.seconds, args.size))
            best = {t: max(v) for t, v in tput.items()}
            p50 = {t: statistics.median(pct(x, 0.50) for x in v) * 1000 for t, v in lat.items()}
            p99 = {t: statistics.median(pct(x, 0.99) for x in v) * 1000 for t, v in lat.items()}
            mx = {t: max(max(x) for x in v) * 1000 for t, v in lat.items()}
            print(
                f"records of {args.size} bytes, {args.seconds:.0f} s per run, {args.rounds} rounds, "
                f"strata.flush.mode={args.flush_mode}"
            )
            print(f"{'':28} {'acks=all RF=3':>14} {'acks=1 RF=1':>14} {'ratio':>7}")
            print(
                f"{'throughput (records/s)':28} {best['rf3']:>14,.0f} {best['rf1']:>14,.0f} "
                f"{best['rf3'] / best['rf1']:>7.2f}"
            )
            at = f"@ {args.rate:.0f}/s"
            print(
                f"{'latency p50 (ms) ' + at:28} {p50['rf3']:>14.2f} {p50['rf1']:>14.2f} "
                f"{p50['rf3'] / p50['rf1']:>7.2f}"
            )
            print(
                f"{'latency p99 (ms) ' + at:28} {p99['rf3']:>14.2f} {p99['rf1']:>14.2f} "
                f"{p99['rf3'] / p99['rf1']:>7.2f}"
            )
            print(f"{'latency max (ms)':28} {mx['rf3']:>14.2f} {mx['rf1']:>14.2f}")
            print("all throughput runs:", {t: [round(x) for x in v] for t, v in tput.items()})
        finally:
            cluster.close()
            etcd.kill()


if __name__ == "__main__":
    main()
