"""Tiered-storage soak: the broker's RSS under a steady produce / tail / replay mix.

    python -m bench.bench_tiering_soak [--minutes 60] [--warmup-minutes 10] [--rate 2000]

The shape of issue 39's soak: moto's S3 server in its own process, a ``strata serve``
subprocess tiering one topic (``segment.bytes`` 2 MiB, ``local.retention.ms`` 30 s), two
idempotent ``acks=all`` producers at ``--rate`` messages/s each, a consumer group tailing
the topic, and a reader that replays the topic from offset 0 every ``--replay-minutes``
(so from the bucket, once local retention has moved past it), each replay read up to the
high watermark it started at. The broker's RSS (``/proc/<pid>/status`` VmRSS) is sampled
every ``--sample-s`` seconds and printed with the tiering memory gauges from
``/metrics``; at the end: messages acknowledged against those the tail read, every
replay's count and time, and RSS at the end over RSS after the warm-up (flat: <= 1.2).

Bounded: every thread stops at the deadline, every wait has a timeout, the processes are
stopped (SIGTERM, then SIGKILL) whatever happens.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.bench_tiering import BUCKET, MIB, Broker, MotoServer, create_topic

TOPIC = "tiered"  # bench_tiering's create_topic makes this one
_GAUGES = (
    "strata_tiering_upload_memory_bytes",
    "strata_tiering_s3_read_buffer_bytes",
    "strata_tiering_cache_size_bytes",
    "strata_tiering_upload_lag_bytes",
)


def rss_mib(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    m = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) / 1024 if m else 0.0


def gauges(http_port: int) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for name in _GAUGES:
        total = 0.0
        for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M):
            total += float(m.group(1))
        out[name] = total
    return out


class Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked = 0
        self.failed = 0
        self.tailed = 0
        self.replays: list[tuple[float, int, int, float]] = []  # (start s, target, read, seconds)


def producer(bootstrap: str, rate: int, size: int, stop: threading.Event, c: Counters, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "client.id": f"soak-producer-{n}",
        }
    )

    def done(err: Any, msg: Any) -> None:
        with c.lock:
            if err is None:
                c.acked += 1
            else:
                c.failed += 1

    value = b"x" * size
    t0 = time.monotonic()
    sent = 0
    while not stop.is_set():
        due = int((time.monotonic() - t0) * rate)
        while sent < due and not stop.is_set():
            try:
                p.produce(TOPIC, value, b"%d-%d" % (n, sent), on_delivery=done)
                sent += 1
            except BufferError:
                p.poll(0.05)
        p.poll(0.01)
    p.flush(30)


def tail(bootstrap: str, stop: threading.Event, c: Counters) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "soak-tail", "auto.offset.reset": "latest"}
    )
    consumer.subscribe([TOPIC])
    try:
        while not stop.is_set():
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    with c.lock:
                        c.tailed += 1
    finally:
        consumer.close()


def replay(bootstrap: str, t0: float, stop: threading.Event, c: Counters, timeout: float) -> None:
    """Read partition 0 from offset 0 up to its high watermark at the start (the bucket
    serves what local retention removed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"soak-replay-{time.monotonic_ns()}",
            "enable.auto.commit": False,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        start = time.monotonic()
        read = 0
        pos = 0
        while pos < high and not stop.is_set() and time.monotonic() - start < timeout:
            for msg in consumer.consume(5000, 0.5):
                if msg.error() is None:
                    read += 1
                    pos = (msg.offset() or 0) + 1
        with c.lock:
            c.replays.append((start - t0, high, read, time.monotonic() - start))
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--warmup-minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=2000, help="messages/s of each of the two producers")
    ap.add_argument("--record-bytes", type=int, default=512)
    ap.add_argument("--replay-minutes", type=float, default=2.0)
    ap.add_argument("--sample-s", type=float, default=60.0)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="strata-bench-soak-"))
    moto: MotoServer | None = None
    broker: Broker | None = None
    stop = threading.Event()
    threads: list[threading.Thread] = []
    c = Counters()
    samples: list[tuple[float, float, dict[str, float]]] = []
    try:
        # moto keeps objects under 5 MiB in memory: an hour of 2 MiB segments is 7 GiB of
        # its RSS. Spooled to files above 256 KiB instead (inherited by its process).
        os.environ.setdefault("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", str(256 << 10))
        moto = MotoServer()
        moto.client().create_bucket(Bucket=BUCKET)
        broker = Broker(work / "data", moto.env).start()
        create_topic(
            broker.bootstrap,
            {"segment.bytes": str(2 * MIB), "local.retention.ms": "30000", "remote.storage.enable": "true"},
        )
        print(
            f"{args.minutes:g} min: 2 producers x {args.rate} msg/s of {args.record_bytes} B, "
            f"a tailing group, a replay from 0 every {args.replay_minutes:g} min; "
            f"RSS every {args.sample_s:g} s",
            flush=True,
        )
        t0 = time.monotonic()
        for n in range(2):
            threads.append(
                threading.Thread(
                    target=producer,
                    args=(broker.bootstrap, args.rate, args.record_bytes, stop, c, n),
                    daemon=True,
                )
            )
        threads.append(threading.Thread(target=tail, args=(broker.bootstrap, stop, c), daemon=True))
        for t in threads:
            t.start()
        deadline = t0 + args.minutes * 60
        next_sample = t0 + args.sample_s
        next_replay = t0 + args.replay_minutes * 60
        replays: list[threading.Thread] = []
        while time.monotonic() < deadline:
            now = time.monotonic()
            if now >= next_sample:
                rss = rss_mib(broker.pid)
                g = gauges(broker.http_port)
                samples.append((now - t0, rss, g))
                shown = ", ".join(
                    f"{k.removeprefix('strata_tiering_')} {v / MIB:.1f} MiB" for k, v in g.items()
                )
                with c.lock:
                    acked, tailed, done = c.acked, c.tailed, len(c.replays)
                print(
                    f"{(now - t0) / 60:5.1f} min  RSS {rss:6.1f} MiB  acked {acked:,}  tailed {tailed:,}  "
                    f"replays done {done}  ({shown})",
                    flush=True,
                )
                next_sample += args.sample_s
            if now >= next_replay:
                r = threading.Thread(
                    target=replay, args=(broker.bootstrap, t0, stop, c, args.replay_minutes * 60), daemon=True
                )
                r.start()
                replays.append(r)
                next_replay += args.replay_minutes * 60
            time.sleep(0.2)
        stop.set()
        for t in threads + replays:
            t.join(60)
        print(f"acknowledged {c.acked:,}, failed {c.failed:,}, tailed {c.tailed:,}")
        for at, target, read, secs in c.replays:
            print(
                f"replay at {at / 60:.1f} min: {read:,} of {target:,} messages in {secs:.1f} s"
                f"{'' if read >= target else '  INCOMPLETE'}"
            )
        warm = [rss for at, rss, _ in samples if at >= args.warmup_minutes * 60]
        if warm:
            print(
                f"RSS after warm-up ({args.warmup_minutes:g} min) {warm[0]:.1f} MiB, "
                f"at the end {warm[-1]:.1f} MiB, max {max(warm):.1f} MiB: "
                f"end / warm-up {warm[-1] / warm[0]:.2f} (flat: <= 1.2)"
            )
        return 0
    finally:
        stop.set()
        if broker is not None:
            broker.stop()
        if moto is not None:
            moto.stop()
        if args.keep:
            print(f"work directory kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
