"""Consumer-group end-to-end latency at a steady produce rate, against a same-run baseline.

    python -m bench.bench_groups [--rate 2000] [--seconds 20] [--partitions 4] [--rounds 1]

Setup: a real ``strata serve`` subprocess (default flush mode: fsync group commit) and
three separate processes (no GIL shared between them): one confluent-kafka (librdkafka)
producer sending ``--rate`` msg/s for ``--seconds`` with ``acks=all, linger.ms=5``, each
value carrying its send time (``time.time_ns()``, one clock: same machine), and two
consumers. Latency of a record = the consumer's time when ``poll`` returned it - its send
time: produce, durability (fsync), long-poll wake-up and fetch included.

  1. Group: the two consumers ``subscribe()`` in one group (range assignor, auto-commit
     every 5 s as Kafka's default, heartbeats every 3 s): the full group machinery.
  2. Baseline: the same two consumer processes with ``assign()`` of the same partition
     split (half each), no group membership, no commits.

With ``--rebalance`` it measures rebalances instead (KIP-848 against classic, same run):
``--members`` (10) consumers of one process join a fresh topic's group at once, the time
until every partition is owned by exactly one member and every member owns one is the
join time; then one member closes (leaves) and the time until the others own every
partition again is the leave time. Classic: confluent-kafka's default eager ``range``
assignor, ``heartbeat.interval.ms`` 3000 (Kafka's defaults); KIP-848: ``group.protocol=
consumer``, the broker's ``uniform`` assignor and ``group.consumer.heartbeat.interval.ms``
(``--cg-heartbeat-ms``, Kafka's 5000 by default). Prints each round and the median ratios
KIP-848/classic.

Each run uses a fresh topic and starts producing only once both consumers own their
partitions. The first second of sends is dropped (connection set-up, first metadata).
The producer's own send -> acknowledgement latency is printed too: the floor under both.
Prints p50/p99/p99.9/max of each and the group/baseline ratios; ``--rounds N`` alternates
the two N times (baseline first), prints every round and the median of the ratios (on a
shared machine the produce path's fsync latency moves a lot between runs: compare within
a round).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_VALUE = struct.Struct(">qq")  # send time (ns since the epoch), sequence number
_PAD = b"x" * 84  # 100-byte values, as bench_broker


def start_broker(data_dir: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "api.cli",
            "serve",
            "--data-dir",
            str(data_dir),
            "--kafka-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--schema-registry-listen",
            "none",
        ],
        cwd=ROOT,
        env={
            # no schema registry: its default port (8081) would clash with any other broker
            "STRATA_SCHEMA_REGISTRY_LISTEN": "none",
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS": "500",
            **(env or {}),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    port = 0
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        m = re.search(r"strata: kafka listener on 127.0.0.1:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "strata: ready" in line:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("broker did not start")
    if port == 0:
        raise RuntimeError("the broker exited before it listened")
    out = proc.stdout
    threading.Thread(target=lambda: [None for _ in out], daemon=True).start()
    return proc, f"127.0.0.1:{port}"


def stop_broker(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions)])[name].result(30)


# --- the consumer process -----------------------------------------------------------------------


def consume(
    bootstrap: str,
    topic: str,
    group: str | None,
    partitions: list[int],
    ready: Any,
    done: Any,
    results: Any,
) -> None:
    """Consume until ``done`` is set and nothing arrived for 2 s; send back (sequence
    number, send time ns, receive time ns) of every record. ``group``: subscribe in it;
    None: assign ``partitions``."""
    from confluent_kafka import Consumer, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 500,
    }
    if group is not None:
        conf.update({"group.id": group, "enable.auto.commit": True, "session.timeout.ms": 10000})
    else:
        conf.update({"group.id": "bench-unused", "enable.auto.commit": False})
    c = Consumer(conf)
    if group is not None:
        c.subscribe([topic])
    else:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
    signalled = False
    samples: list[tuple[int, int, int]] = []
    last = time.monotonic()
    while True:
        m = c.poll(0.1)  # one record at a time: consume(n, t) would wait to fill n
        now = time.time_ns()
        if not signalled and (group is None or c.assignment()):
            ready.set()
            signalled = True
        if m is not None and m.error() is None:
            sent, seq = _VALUE.unpack_from(m.value())
            samples.append((seq, sent, now))
            last = time.monotonic()
        elif done.is_set() and time.monotonic() - last > 2.0:
            break
    c.close()
    results.put(samples)


# --- one run ------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


@dataclass(frozen=True)
class RunResult:
    name: str
    sent: int
    received: int
    latencies_ms: list[float]  # end to end (send -> poll), sorted
    acks_ms: list[float]  # send -> acks=all acknowledgement, sorted

    def pct(self, q: float) -> float:
        return pct(self.latencies_ms, q)


def run(bootstrap: str, *, grouped: bool, rate: int, seconds: float, partitions: int) -> RunResult:
    from confluent_kafka import Producer

    name = "group" if grouped else "assign"
    topic = f"bench-{name}-{time.time_ns()}"
    create_topic(bootstrap, topic, partitions)
    ctx = mp.get_context("spawn")
    done = ctx.Event()
    results = ctx.Queue()
    halves = [list(range(partitions))[: partitions // 2], list(range(partitions))[partitions // 2 :]]
    group = f"bench-group-{time.time_ns()}" if grouped else None
    readies = [ctx.Event() for _ in halves]
    procs = [
        ctx.Process(target=consume, args=(bootstrap, topic, group, half, ready, done, results))
        for half, ready in zip(halves, readies, strict=True)
    ]
    for p in procs:
        p.start()
    for r in readies:
        if not r.wait(60):
            raise TimeoutError("consumers did not get their partitions")
    # In a group, both are ready once the (second) rebalance gave each a share.
    time.sleep(1.0 if grouped else 0.2)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    total = int(rate * seconds)
    acks: list[float] = []

    def acked(err: Any, _msg: Any, sent: float, seq: int) -> None:
        if err is None and seq >= rate:  # past the first second
            acks.append((time.perf_counter() - sent) * 1000)

    t0 = time.perf_counter()
    i = 0
    while i < total:
        # Send what is due, then sleep in poll() (serving acknowledgements) until the next
        # is: no busy-waiting, which would take a core from the broker on a 2-core machine.
        due = min(total, int((time.perf_counter() - t0) * rate) + 1)
        while i < due:
            sent = time.perf_counter()
            producer.produce(
                topic,
                _VALUE.pack(time.time_ns(), i) + _PAD,
                partition=i % partitions,
                on_delivery=lambda e, m, s=sent, i=i: acked(e, m, s, i),
            )
            i += 1
        producer.poll(max(0.001, t0 + i / rate - time.perf_counter()))
    producer.flush(60)
    done.set()
    samples: list[tuple[int, int, int]] = []
    for _ in procs:
        samples += results.get(timeout=120)
    for p in procs:
        p.join(60)
    first = min((sent for _, sent, _ in samples), default=0)
    warm = [(got - sent) / 1e6 for _, sent, got in samples if sent - first >= 1_000_000_000]
    return RunResult(name, total, len(samples), sorted(warm), sorted(acks))


# --- rebalance time (KIP-848 against classic) ------------------------------------------------------


def rebalance_run(bootstrap: str, protocol: str, members: int, partitions: int) -> tuple[float, float]:
    """(join seconds, leave seconds) of ``members`` consumers of a fresh topic's group."""
    from confluent_kafka import Consumer

    topic = f"rb-{protocol}-{time.time_ns()}"
    create_topic(bootstrap, topic, partitions)
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"g-{topic}",
        "enable.auto.commit": False,
        "group.protocol": protocol,
    }
    owned: list[set[int]] = [set() for _ in range(members)]
    stop = [threading.Event() for _ in range(members)]
    lock = threading.Lock()

    def member(i: int) -> None:
        c = Consumer(config)
        c.subscribe([topic])
        try:
            while not stop[i].is_set():
                c.poll(0.05)
                mine = {tp.partition for tp in c.assignment()}
                with lock:
                    owned[i] = mine
        finally:
            c.close()
            with lock:
                owned[i] = set()

    def settled(live: list[int]) -> bool:
        with lock:
            sets = [owned[i] for i in live]
        union = set().union(*sets)
        return sum(len(x) for x in sets) == partitions and len(union) == partitions and all(sets)

    def wait(live: list[int]) -> float:
        start = time.monotonic()
        while not settled(live):
            if time.monotonic() - start > 300:
                raise TimeoutError(f"{protocol}: no settled assignment after 300 s")
            time.sleep(0.01)
        return time.monotonic() - start

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    live = list(range(members))
    wait(live)
    join = time.monotonic() - t0  # from the first member's start
    stop[0].set()
    threads[0].join(60)
    t1 = time.monotonic()
    wait(live[1:])
    leave = time.monotonic() - t1
    for e in stop:
        e.set()
    for t in threads:
        t.join(60)
    return join, leave


def rebalance_bench(bootstrap: str, members: int, partitions: int, rounds: int) -> None:
    print(f"rebalance: {members} members, {partitions} partitions, {rounds} round(s)", flush=True)
    ratios: list[tuple[float, float]] = []
    for rnd in range(1, rounds + 1):
        cj, cl = rebalance_run(bootstrap, "classic", members, partitions)
        kj, kl = rebalance_run(bootstrap, "consumer", members, partitions)
        ratios.append((kj / cj, kl / cl))
        print(
            f"round {rnd}: classic join {cj:.2f} s, leave {cl:.2f} s; KIP-848 join {kj:.2f} s, "
            f"leave {kl:.2f} s; KIP-848/classic join {ratios[-1][0]:.2f}x, leave {ratios[-1][1]:.2f}x",
            flush=True,
        )
    js, ls = sorted(r[0] for r in ratios), sorted(r[1] for r in ratios)
    print(
        f"median KIP-848/classic: join {js[len(js) // 2]:.2f}x, leave {ls[len(ls) // 2]:.2f}x",
        flush=True,
    )


def report(r: RunResult) -> str:
    return (
        f"{r.name:>6}: {r.received:,}/{r.sent:,} received, "
        f"p50 {r.pct(0.5):.2f} ms, p99 {r.pct(0.99):.2f} ms, "
        f"p99.9 {r.pct(0.999):.2f} ms, max {r.latencies_ms[-1]:.2f} ms; "
        f"(producer's own acks=all: p50 {pct(r.acks_ms, 0.5):.2f} ms, p99 {pct(r.acks_ms, 0.99):.2f} ms)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=2000, help="messages per second")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rebalance", action="store_true", help="rebalance time: KIP-848 against classic")
    ap.add_argument("--members", type=int, default=10, help="with --rebalance")
    ap.add_argument("--cg-heartbeat-ms", type=int, default=5000, help="group.consumer.heartbeat.interval.ms")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="strata-bench-groups-") as tmp:
        env = {"STRATA_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": str(args.cg_heartbeat_ms)}
        proc, bootstrap = start_broker(Path(tmp) / "data", env)
        try:
            if args.rebalance:
                rebalance_bench(bootstrap, args.members, max(args.partitions, args.members * 2), args.rounds)
                return
            print(
                f"{args.rate:,} msg/s for {args.seconds:g} s, {args.partitions} partitions, 100-byte values, "
                f"acks=all, 2 consumer processes",
                flush=True,
            )
            ratios: list[tuple[float, float]] = []
            for rnd in range(1, args.rounds + 1):
                base = run(
                    bootstrap, grouped=False, rate=args.rate, seconds=args.seconds, partitions=args.partitions
                )
                grp = run(
                    bootstrap, grouped=True, rate=args.rate, seconds=args.seconds, partitions=args.partitions
                )
                ratios.append((grp.pct(0.5) / base.pct(0.5), grp.pct(0.99) / base.pct(0.99)))
                print(f"round {rnd}", flush=True)
                print("  " + report(base), flush=True)
                print("  " + report(grp), flush=True)
                print(f"  group/assign: p50 {ratios[-1][0]:.2f}x, p99 {ratios[-1][1]:.2f}x", flush=True)
            if len(ratios) > 1:
                p50s, p99s = sorted(r[0] for r in ratios), sorted(r[1] for r in ratios)
                print(
                    f"median over {len(ratios)} rounds, group/assign: p50 {p50s[len(p50s) // 2]:.2f}x, "
                    f"p99 {p99s[len(p99s) // 2]:.2f}x",
                    flush=True,
                )
        finally:
            stop_broker(proc)


if __name__ == "__main__":
    main()
