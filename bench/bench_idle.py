"""What an idle broker costs per partition it holds, and how long a restart takes to lead
them all again (issue 35).

    python -m bench.bench_idle [--partitions 1000,2000] [--seconds 20] [--rounds 2]
    python -m bench.bench_idle --roots /tmp/strata-before,. --partitions 2000

For each code tree and partition count: a single node (``strata serve``, product
defaults: tiered topics, fsync) gets one topic of that many partitions and a few records
in each, is restarted (the restart is timed: start to ``strata: ready``, then to every
partition led, read from Metadata), then left alone for ``--settle`` seconds, and its CPU
time (utime + stime of the process, every thread, ``/proc``) is read over ``--seconds``.
Printed per tree: idle CPU per second, per replica (µs of CPU per second), the restart
times, and the ratio of each figure to the first tree's in the same run. Trees alternate
within a round, so both see the same machine load.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_broker import start_broker, stop_broker  # noqa: E402
from bench.proc import cpu_seconds  # noqa: E402

TOPIC = "idle"


@dataclass
class Figures:
    idle_us_per_s: float  # broker CPU per wall second, µs
    per_replica_us: float  # the same per partition
    ready_s: float  # restart: start -> "strata: ready"
    led_s: float  # restart: start -> every partition led


def _create(bootstrap: str, partitions: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=partitions)])[TOPIC].result(300)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for p in range(partitions):
        producer.produce(TOPIC, b"x" * 100, partition=p)
    assert producer.flush(120) == 0


def _all_led(bootstrap: str, partitions: int, deadline: float) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(TOPIC, timeout=10)
            parts = md.topics[TOPIC].partitions
            if len(parts) == partitions and all(p.leader >= 0 and p.error is None for p in parts.values()):
                return True
        except Exception:
            pass
        time.sleep(0.2)
    return False


def run_tree(tree: Path, data: Path, partitions: int, args: argparse.Namespace) -> Figures:
    proc, port = start_broker(data, cwd=tree)
    try:
        _create(f"127.0.0.1:{port}", partitions)
    finally:
        stop_broker(proc)
    began = time.monotonic()
    proc, port = start_broker(data, cwd=tree)
    try:
        ready = time.monotonic() - began
        bootstrap = f"127.0.0.1:{port}"
        if not _all_led(bootstrap, partitions, time.monotonic() + 600):
            raise RuntimeError(f"{tree}: not every partition led 600 s after the restart")
        led = time.monotonic() - began
        time.sleep(args.settle)
        c0, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(args.seconds)
        c1, t1 = cpu_seconds(proc.pid), time.monotonic()
        per_s = (c1 - c0) / (t1 - t0) * 1e6
        return Figures(per_s, per_s / partitions, ready, led)
    finally:
        stop_broker(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="1000,2000", help="comma-separated partition counts")
    ap.add_argument("--seconds", type=float, default=20.0, help="idle window measured")
    ap.add_argument("--settle", type=float, default=15.0, help="wait after every partition is led")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--roots", default=str(ROOT), help="comma-separated code trees, run alternating")
    args = ap.parse_args()
    try:
        counts = [int(x) for x in args.partitions.split(",") if x]
    except ValueError:
        ap.error(f"--partitions: expected numbers, got {args.partitions!r}")
    trees = [Path(t).resolve() for t in args.roots.split(",") if t]
    for t in trees:
        if not (t / "api" / "cli" / "__init__.py").is_file() and not (t / "api" / "cli.py").is_file():
            ap.error(f"{t} is not a Strata code tree")
    results: dict[tuple[int, int], list[Figures]] = {}
    work = Path(tempfile.mkdtemp(prefix="strata-bench-idle-"))
    try:
        for rnd in range(args.rounds):
            for n in counts:
                for i, tree in enumerate(trees):
                    d = work / f"r{rnd}-{n}-{i}"
                    f = run_tree(tree, d, n, args)
                    results.setdefault((n, i), []).append(f)
                    print(
                        f"round {rnd + 1}, {n} partitions, tree {tree}:"
                        f" idle {f.idle_us_per_s / 1000:.1f} ms/s"
                        f" ({f.per_replica_us:.1f} us/s per replica), restart: ready {f.ready_s:.1f} s,"
                        f" every partition led {f.led_s:.1f} s",
                        flush=True,
                    )
                    shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        "\npartitions  tree  us/s per replica (min..max)  ready s  led s  ratio to tree 0 (per replica, led)"
    )
    for n in counts:
        base = results[(n, 0)]
        for i, tree in enumerate(trees):
            fs = results[(n, i)]
            per = [f.per_replica_us for f in fs]
            led = [f.led_s for f in fs]
            ratio = min(per) / min(b.per_replica_us for b in base)
            ratio_led = min(led) / min(b.led_s for b in base)
            print(
                f"{n:>10}  {i:>4}  {min(per):8.1f}..{max(per):<8.1f}  {min(f.ready_s for f in fs):7.1f}"
                f"  {min(led):5.1f}  {ratio:.2f}, {ratio_led:.2f}   ({tree})"
            )


if __name__ == "__main__":
    main()
