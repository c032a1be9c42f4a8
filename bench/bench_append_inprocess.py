"""The Produce fast path in process: broker CPU per one-record Produce without the
listener, the socket or the load generator (issue 34 §2, round 3).

    python -m bench.bench_append_inprocess --roots /tmp/base,. --rounds 3

Each round runs every tree in turn, each in a subprocess of its own (``cwd`` and
``PYTHONPATH`` = the tree, so the tree's code and C extensions run): a broker of one
(``tests.inprocess.broker_of_one``) with one topic, and ``FastProduce.answer`` fed the same
pre-encoded Produce v9 frame over and over:

  fsync-32     one record, acks=1, strata.flush.mode=fsync, 32 answered per burst (the 32
               requests appended, then their waits awaited): CPU-µs per request of the
               whole process (the flush thread included) and fdatasyncs per 100 requests
  interval-1   one record, acks=1, interval mode: the answer is immediate
  fanout-1000  one record for each of 1,000 partitions, acks=all, interval mode: CPU-µs
               per partition
  fetch-1      ``FetchFastPath.answer_frame`` of bench_request_cost's Fetch (v12, one
               partition holding one one-record batch, from offset 0, copied into the
               answer as the listener copies it): CPU-µs per request (issue 34, round 5)

Process CPU time (``time.process_time``) over the measured requests, so the figures are
CPU, not wall time; the machine's load still inflates them: compare trees within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = {"fsync-32": 6400, "interval-1": 20000, "fanout-1000": 40, "fetch-1": 20000}


async def _fetch_worker(n: int) -> str:
    from api.handlers.fetch_fast import FetchFastPath
    from api.handlers.produce_fast import FastProduce
    from api.kafka_server import COPY_REGIONS_BELOW
    from bench.bench_request_cost import fetch_frame, produce_frame
    from broker.config import BrokerConfig
    from tests.api.test_produce_fast import _Conn
    from tests.inprocess import broker_of_one, create_topic

    with tempfile.TemporaryDirectory() as d:
        async with broker_of_one(BrokerConfig(data_dir=Path(d))) as broker:
            await create_topic(broker, "f", 1, {"strata.flush.mode": "interval"})
            conn = _Conn(broker)  # type: ignore[no-untyped-call]
            assert FastProduce().answer(conn, produce_frame("f", 1)[4:], time.perf_counter())  # type: ignore[arg-type]
            fast, frame = FetchFastPath(COPY_REGIONS_BELOW), fetch_frame("f")[4:]
            for _ in range(100):
                assert fast.answer_frame(conn, frame, time.perf_counter()) is not None  # type: ignore[arg-type]
            t0 = time.process_time()
            for _ in range(n):
                fast.answer_frame(conn, frame, time.perf_counter())  # type: ignore[arg-type]
            cpu = time.process_time() - t0
    return f"{cpu / n * 1e6:.1f} CPU-us/request"


async def _worker(mode: str, n: int) -> str:
    if mode == "fetch-1":
        return await _fetch_worker(n)
    from api.handlers.produce_fast import FastProduce
    from bench.bench_request_cost import produce_frame
    from broker.config import BrokerConfig
    from tests.api.test_produce_fast import _Conn
    from tests.inprocess import broker_of_one, create_topic

    syncs = [0]
    real = os.fdatasync

    def counting(fd: Any) -> None:
        syncs[0] += 1
        real(fd)

    os.fdatasync = counting  # the Python committer's syncs (the C thread's are counted below)
    parts = 1000 if mode == "fanout-1000" else 1
    flush = "fsync" if mode == "fsync-32" else "interval"
    depth = 32 if mode == "fsync-32" else 1
    with tempfile.TemporaryDirectory() as d:
        async with broker_of_one(BrokerConfig(data_dir=Path(d))) as broker:
            await create_topic(broker, "t", parts, {"strata.flush.mode": flush})
            frame = produce_frame("t", 1, acks=-1 if parts > 1 else 1, partitions=parts)[4:]
            fast, conn = FastProduce(), _Conn(broker)  # type: ignore[no-untyped-call]
            on_loop = getattr(broker.manager._replica_committer, "_on_loop", None)  # type: ignore[attr-defined]

            async def burst() -> None:
                answers = [fast.answer(conn, frame, time.perf_counter()) for _ in range(depth)]  # type: ignore[arg-type]
                for a in answers:
                    assert isinstance(a, tuple)
                    if not isinstance(a[1], list):
                        await a[1]

            for _ in range(5):
                await burst()
            s0, t0 = syncs[0], time.process_time()
            k0 = next(on_loop._tokens) if on_loop is not None else 0
            for _ in range(n // depth):
                await burst()
            cpu = time.process_time() - t0
            loop_syncs = next(on_loop._tokens) - k0 - 1 if on_loop is not None else 0
    per = cpu / n * 1e6
    if mode == "fanout-1000":
        return f"{per / parts:.2f} CPU-us/partition"
    if mode == "fsync-32":
        rate = (syncs[0] - s0 + loop_syncs) * 100 / n
        return f"{per:.1f} CPU-us/request, {rate:.1f} fdatasyncs/100 requests"
    return f"{per:.1f} CPU-us/request"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roots", default=".", help="comma-separated code trees, run alternating")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(asyncio.run(_worker(args.worker, MODES[args.worker])))
        return
    print(f"load average {os.getloadavg()}")
    for rnd in range(1, args.rounds + 1):
        for mode in args.modes.split(","):
            for root in args.roots.split(","):
                tree = Path(root).resolve()
                out = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), "--worker", mode],
                    cwd=tree,
                    env={**os.environ, "PYTHONPATH": str(tree)},
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                line = out.stdout.strip().splitlines()[-1] if out.returncode == 0 else out.stderr[-300:]
                print(f"round {rnd} {mode:12} {tree}: {line}", flush=True)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
