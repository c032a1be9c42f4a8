"""Producer acknowledgement and end-to-end latency at a fixed offered rate.

    python -m bench.bench_latency [--rates 20000,100000] [--seconds 8] [--modes interval,fsync]
                                  [--linger-ms 5]

Starts a real ``strata serve`` subprocess; for each flush mode creates a 4-partition topic
(``strata.flush.mode``) and runs, each in its own process so that no GIL couples them:

  producer   one confluent-kafka (librdkafka) producer, librdkafka's defaults (acks=all,
             idempotence off) with linger.ms=5 (``--linger-ms``); 100-byte records whose first 8 bytes are
             the send time (time.monotonic_ns, one clock for the whole machine), paced on a
             schedule: every record due is produced, then ``poll(0)``. Acknowledgement
             latency = delivery-callback time minus the produce() call's time.
  consumer   one confluent-kafka consumer assigned all 4 partitions at their end, with
             fetch.wait.max.ms 100 and fetch.min.bytes 1 (a parked fetch is answered as
             soon as records arrive, in both flush modes: hot.log high-watermark waiters).
             End-to-end latency = receive time minus the send time in the record.

The first second of each point is warm-up and not counted. Printed per point: offered and
achieved rate, p50/p99/p999/max of both latencies, the broker's CPU per record and the
load average. Targets (issue 24): ack p99 <= 5 ms in interval mode and <= 10 ms in fsync
mode, end-to-end p99 <= 20 ms.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_broker import start_broker, stop_broker  # noqa: E402
from bench.proc import cpu_seconds  # noqa: E402

_STAMP = struct.Struct(">q")
WARMUP_S = 1.0


def _producer(bootstrap: str, topic: str, rate: int, seconds: float, linger: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": linger, "queue.buffering.max.messages": 2_000_000}
    )
    lat: list[int] = []
    pad = b"x" * (100 - _STAMP.size)
    warm_until = time.monotonic_ns() + int(WARMUP_S * 1e9)

    def delivered(err: object, msg: object) -> None:
        if err is None:
            sent = _STAMP.unpack_from(msg.value())[0]  # type: ignore[attr-defined]
            if sent >= warm_until:
                lat.append(time.monotonic_ns() - sent)

    total = int(rate * (seconds + WARMUP_S))
    start = time.monotonic_ns()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic_ns() - start) * rate / 1e9) + 1)
        while sent < due:
            p.produce(topic, _STAMP.pack(time.monotonic_ns()) + pad, on_delivery=delivered)
            sent += 1
        p.poll(0)
    p.flush(60)
    elapsed = (time.monotonic_ns() - start) / 1e9
    out.put(("ack", sent / elapsed, lat))


def _consumer(bootstrap: str, topic: str, seconds: float, ready: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{topic}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
        }
    )
    c.assign([TopicPartition(topic, p, OFFSET_END) for p in range(4)])
    c.consume(1, timeout=1.0)  # joins the partitions before the producer starts
    ready.set()
    lat: list[int] = []
    warm_until = time.monotonic_ns() + int(WARMUP_S * 1e9)
    deadline = time.monotonic() + seconds + WARMUP_S + 10
    idle_since = time.monotonic()
    while time.monotonic() < deadline:
        # poll(), not consume(n, timeout): consume waits for n records or the whole timeout,
        # which would add its own wait to what is measured.
        m = c.poll(0.1)
        if m is None:
            if time.monotonic() - idle_since > 3 and lat:
                break  # the producer is done
            continue
        now = time.monotonic_ns()
        idle_since = time.monotonic()
        if m.error() is None:
            sent = _STAMP.unpack_from(m.value())[0]  # type: ignore[arg-type]
            if sent >= warm_until:
                lat.append(now - sent)
    c.close()
    out.put(("e2e", 0.0, lat))


def _pct(values: list[int], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))] / 1e6


def _summary(values: list[int]) -> str:
    if not values:
        return "no samples"
    values.sort()
    return (
        f"p50 {_pct(values, 0.5):.2f}  p99 {_pct(values, 0.99):.2f}  p999 {_pct(values, 0.999):.2f}  "
        f"max {values[-1] / 1e6:.2f} ms ({len(values):,} samples)"
    )


def run_point(bootstrap: str, pid: int, mode: str, rate: int, seconds: float, linger: int = 5) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"lat-{mode}-{rate}-{int(time.time() * 1000)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=4, config={"strata.flush.mode": mode})])[
        topic
    ].result(30)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    ready = ctx.Event()
    cons = ctx.Process(target=_consumer, args=(bootstrap, topic, seconds, ready, out))
    cons.start()
    ready.wait(30)
    c0 = cpu_seconds(pid)
    prod = ctx.Process(target=_producer, args=(bootstrap, topic, rate, seconds, linger, out))
    prod.start()
    results = {}
    for _ in range(2):
        kind, achieved, lat = out.get(timeout=seconds + 120)
        results[kind] = (achieved, lat)
    cpu = cpu_seconds(pid) - c0
    prod.join(30)
    cons.join(30)
    achieved, ack = results["ack"]
    e2e = results["e2e"][1]
    records = int(rate * (seconds + WARMUP_S))
    load = os.getloadavg()[0]
    print(
        f"{mode:>8} {rate:>7,} msg/s offered (linger.ms {linger}), {achieved:>9,.0f} achieved, "
        f"broker {cpu * 1e6 / records:.2f} CPU-us/record, load {load:.2f}\n"
        f"         ack: {_summary(ack)}\n"
        f"         end-to-end: {_summary(e2e)}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="20000,100000")
    ap.add_argument("--seconds", type=float, default=8.0, help="measured seconds per point (after warm-up)")
    ap.add_argument("--modes", default="interval,fsync")
    ap.add_argument("--linger-ms", type=int, default=5, help="the producer's linger.ms")
    args = ap.parse_args()
    data = Path(tempfile.mkdtemp(prefix="strata-bench-latency-"))
    proc, port = start_broker(data)
    try:
        print(f"broker pid {proc.pid} on 127.0.0.1:{port}; {os.cpu_count()} cores", flush=True)
        for mode in args.modes.split(","):
            for rate in (int(r) for r in args.rates.split(",")):
                run_point(f"127.0.0.1:{port}", proc.pid, mode, rate, args.seconds, args.linger_ms)
    finally:
        stop_broker(proc)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
