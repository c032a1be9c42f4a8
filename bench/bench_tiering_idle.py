"""What an idle broker with many tiered partitions costs (issue 39), trees alternating.

    python -m bench.bench_tiering_idle --roots /tmp/base,. --partitions 10000 --settle 60 --idle-seconds 60
    python -m bench.bench_tiering_idle --roots /tmp/base,. --in-process 1000,3000

Broker mode: ``bench_partitions --single``'s measurement (one ``strata serve`` on its
embedded store, tiering on, product defaults, one topic, one record per partition, the
broker's CPU per wall second after ``--settle``, then its CPU per ``/metrics`` scrape),
except that the records are produced once every partition had time to open (15 s after
CreateTopics answered) and retried until acknowledged: on a loaded machine the
bench's producer right after CreateTopics stalls the creation and leaves every partition
empty ("not writable"), which is not the idle state the target names.

``--in-process``: in one process per tree, a ``TieringService`` over N tiered partitions
with one record each after its first pass; the CPU of rendering its registry as
``/metrics`` does (``core.prom_text.exposition``) and of a pass that visits every
partition (``run_once(quiet=False)``: upload, local and total retention).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def broker_once(n: int, settle: float, idle: float) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from bench.proc import cpu_seconds
    from tests.brokers import BrokerProcess

    with tempfile.TemporaryDirectory(prefix="bench-tiering-idle-") as tmp:
        b = BrokerProcess(Path(tmp) / "data", env={"STRATA_LOG_REMOTE_STORAGE_ENABLE": "true"})
        b.start(timeout=120)
        try:
            assert b.proc is not None
            pid = b.proc.pid
            admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
            t0 = time.monotonic()
            topic = NewTopic("scale", num_partitions=n, replication_factor=1)
            admin.create_topics([topic], request_timeout=120)["scale"].result(timeout=180)
            created = time.monotonic() - t0
            time.sleep(15)
            todo = set(range(n))
            tries = 0
            while todo and tries < 6:
                tries += 1
                prod = Producer(
                    {
                        "bootstrap.servers": b.bootstrap,
                        "log_level": 0,
                        "linger.ms": 50,
                        "message.timeout.ms": 60_000,
                    }
                )
                failed: set[int] = set()

                def delivered(err: object, msg: Any, failed: set[int] = failed) -> None:
                    if err is not None:
                        failed.add(msg.partition())

                for p in sorted(todo):
                    prod.produce("scale", b"x" * 100, partition=p, on_delivery=delivered)
                prod.flush(120)
                todo = failed
            time.sleep(settle)
            c0, w0 = cpu_seconds(pid), time.monotonic()
            time.sleep(idle)
            used, wall = cpu_seconds(pid) - c0, time.monotonic() - w0
            c1 = cpu_seconds(pid)
            for _ in range(5):
                with urllib.request.urlopen(f"{b.http_url}/metrics", timeout=120) as r:
                    r.read()
            scrape_ms = 1000 * (cpu_seconds(pid) - c1) / 5
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            return (
                f"created {created:.1f} s; {len(todo)} records unacknowledged after {tries} tries; idle "
                f"{100 * used / wall:.2f} % of a core ({1e6 * used / wall / n:.2f} µs/s per partition), "
                f"{fds} open files, {scrape_ms:.0f} ms of CPU per /metrics scrape"
            )
        finally:
            b.kill()


async def in_process_once(n: int) -> str:
    from core.prom_text import exposition
    from tests.hot.hotlib import batch_at
    from tests.tiering.uplib import make_store, new_manager
    from tiering.config import TieringConfig
    from tiering.metrics import TieringMetrics
    from tiering.service import TieringService

    with tempfile.TemporaryDirectory(prefix="bench-tiering-idle-") as tmp:
        m = new_manager(Path(tmp) / "data")
        cfg = TieringConfig(cache_max_bytes=0)
        svc = TieringService(m, make_store(f"file://{tmp}/bucket"), cfg, TieringMetrics())
        svc.attach()
        try:
            m.create_topic("t", n, {"remote.storage.enable": "true"})
            for p in range(n):
                m.get_log("t", p).append(batch_at(0, 1))
            await svc.run_once(retention=True, sweep=False)
            exposition(svc.metrics.registry)
            t = time.process_time()
            for _ in range(10):
                exposition(svc.metrics.registry)
            render = (time.process_time() - t) / 10
            t = time.process_time()
            for _ in range(3):
                await svc.run_once(retention=True, sweep=False)
            visit = (time.process_time() - t) / 3
        finally:
            await svc.close()
            m.close()
    return (
        f"render of the tiering registry {1000 * render:.1f} ms of CPU, a pass visiting every "
        f"partition {1000 * visit:.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roots", default=str(ROOT), help="comma-separated code trees (first = baseline)")
    ap.add_argument("--partitions", default="10000")
    ap.add_argument("--settle", type=float, default=60.0)
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--in-process", help="partition counts of the in-process figures instead")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        kind, n = args.one.split(":")
        if kind == "broker":
            print("RESULT " + broker_once(int(n), args.settle, args.idle_seconds))
        else:
            print("RESULT " + asyncio.run(in_process_once(int(n))))
        return
    kind, counts = ("inproc", args.in_process) if args.in_process else ("broker", args.partitions)
    for n in (int(x) for x in counts.split(",")):
        for r in range(args.rounds):
            for tree in (Path(t).resolve() for t in args.roots.split(",")):
                # This file run as a script from the tree (its bench/, tests/ and code
                # first on the path), so a base tree need not have it.
                cmd = [sys.executable, str(Path(__file__).resolve()), "--one", f"{kind}:{n}"]
                cmd += ["--settle", str(args.settle), "--idle-seconds", str(args.idle_seconds)]
                out = subprocess.run(
                    cmd,
                    cwd=tree,
                    env={**os.environ, "PYTHONPATH": str(tree)},
                    capture_output=True,
                    text=True,
                    timeout=1800,
                )
                lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
                err = (out.stderr.strip().splitlines() or ["?"])[-1]
                result = lines[-1][7:] if lines else f"failed: {err}"
                load = " ".join(f"{x:.1f}" for x in os.getloadavg())
                print(f"{n:>6} partitions round {r + 1} {tree.name}: {result}, load {load}", flush=True)


if __name__ == "__main__":
    main()
