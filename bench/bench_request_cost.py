"""Broker CPU per request: what one small Produce, Fetch or Metadata request costs the broker.

    python -m bench.bench_request_cost [--requests 20000] [--rounds 3] [--depth 32]
    python -m bench.bench_request_cost --roots /tmp/strata-before,. --rounds 3

Starts a real ``strata serve`` subprocess and drives it with a raw-socket client that
pipelines pre-encoded requests (kwire's codec, encoded once): ``depth`` requests in
flight on one connection, responses counted by their byte size (every answer to the same
request has the same size), never decoded. That keeps the load generator far cheaper than
the broker, so the broker's own CPU time is what is measured: utime + stime of the broker
process (all its threads, the group-commit fsync thread included) from /proc/<pid>/stat,
before and after each workload, divided by requests and by records.

The broker's ceiling is stated by CPU-time extrapolation: ``1 / CPU-seconds per request``
requests per second on one core, assuming nothing but CPU limits it (true for interval
mode; in fsync mode the disk's fsync rate caps pipelined acks=1 throughput separately). It
is an extrapolation, not a measured rate: on this 2-core machine shared with other work,
wall-clock throughput measures the machine. Wall-clock rates are printed too, for reference.

Workloads (each on its own topic, one partition):
  produce-fsync      one-record Produce v9, acks=1, strata.flush.mode=fsync (the default)
  produce-interval   the same, strata.flush.mode=interval
  produce-100        100 records per Produce (interval mode): CPU per record with batching
  fetch              Fetch v12 of one partition from offset 0, max_wait 0, 1 KiB max:
                     one one-record batch per answer (its own topic, seeded with one
                     one-record Produce; sent from a copy below COPY_REGIONS_BELOW)
  metadata           Metadata v12 for that one topic

``--roots A,B`` runs brokers from several code trees (e.g. a ``git archive`` of the
commit before a change, and the working tree) in alternating rounds A B A B ..., so that
both see the same machine load; every figure is printed per tree as min..max over rounds.
A tree may carry environment settings for its broker: ``.@STRATA_EVENT_LOOP=asyncio``.

Fan-out (``--fanout``), interval mode, CPU per record compared:
  produce-1000       1,000 records in one batch of one partition per request
  fanout-1000        one record for each of 1,000 partitions per request (as a producer
                     with linger 0-5 spreads over many partitions)
  conns-1, conns-50  one-record Produce requests over 1 and over 50 connections (a client
                     thread each, 5 in flight per connection, as librdkafka's idempotent
                     producer keeps)
The ratios fanout-1000 / produce-1000 and conns-50 / conns-1 of CPU per record are the
throughput ratios by CPU-time extrapolation. ``--acks -1`` sends every Produce with
acks=all (the issue's fan-out target is stated for acks=all); acks=1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_broker import start_broker, stop_broker  # noqa: E402
from bench.proc import cpu_seconds  # noqa: E402

WORKLOADS = ("produce-fsync", "produce-interval", "produce-100", "fetch", "metadata")
FANOUT = ("produce-1000", "fanout-1000", "conns-1", "conns-50")
WIDE = 1000  # partitions of the fan-out topic


def _frame(api_key: int, version: int, request: object, correlation_id: int = 1) -> bytes:
    from kwire import encode_request

    body = encode_request(api_key, version, correlation_id, "bench-cost", request)
    return struct.pack(">i", len(body)) + body


def produce_frame(topic: str, records: int, acks: int = 1, partitions: int = 1, first: int = 0) -> bytes:
    """A Produce v9 request: ``records`` 100-byte records in one batch for each of
    ``partitions`` partitions (``first``, ``first`` + 1, ...)."""
    from hot.records import RecordInput, build_batch
    from kwire import ApiKey
    from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData

    batch = build_batch([RecordInput(None, b"x" * 100) for _ in range(records)])
    req = ProduceRequest(
        acks=acks,
        timeout_ms=30000,
        topic_data=(
            ProduceTopicData(
                name=topic,
                partition_data=tuple(
                    ProducePartitionData(index=first + i, records=batch) for i in range(partitions)
                ),
            ),
        ),
    )
    return _frame(ApiKey.PRODUCE, 9, req)


def fetch_frame(topic: str) -> bytes:
    from kwire import ApiKey
    from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic

    req = FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1024,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),),
            ),
        ),
    )
    return _frame(ApiKey.FETCH, 12, req)


def metadata_frame(topic: str) -> bytes:
    from kwire import ApiKey
    from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic

    req = MetadataRequest(topics=(MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False)
    return _frame(ApiKey.METADATA, 12, req)


def _recv_frame_size(sock: socket.socket) -> int:
    """Reads one whole response frame; returns its size including the prefix."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        head += chunk
    n: int = struct.unpack(">i", head)[0]
    left = n
    while left:
        chunk = sock.recv(min(left, 1 << 16))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        left -= len(chunk)
    return n + 4


def pipeline(sock: socket.socket, frame: bytes, n: int, depth: int) -> float:
    """Sends ``frame`` ``n`` times keeping at most ``depth`` unanswered; returns wall seconds.

    The first answer is read frame by frame to learn its size; the rest are counted in bytes.
    """
    size = _recv_size_after(sock, frame)
    chunk_frames = max(1, depth // 2)
    chunk = frame * chunk_frames
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    sent = 0
    got_bytes = 0
    total_bytes = n * size
    t0 = time.perf_counter()
    while got_bytes < total_bytes:
        answered = got_bytes // size
        while sent < n and sent - answered + chunk_frames <= depth:
            k = min(chunk_frames, n - sent)
            sock.sendall(chunk if k == chunk_frames else frame * k)
            sent += k
        r = sock.recv_into(view)
        if not r:
            raise ConnectionError("broker closed the connection")
        got_bytes += r
    return time.perf_counter() - t0


def _recv_size_after(sock: socket.socket, frame: bytes) -> int:
    sock.sendall(frame)
    return _recv_frame_size(sock)


@dataclass
class Cost:
    cpu_us_per_request: float
    cpu_us_per_record: float
    wall_rate: float  # requests/s seen by the client (machine-dependent)


def measure(pid: int, port: int, frame: bytes, requests: int, records: int, depth: int) -> Cost:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pipeline(sock, frame, min(2000, requests), depth)  # warm-up: caches, first segment
        c0 = cpu_seconds(pid)
        wall = pipeline(sock, frame, requests, depth)
        cpu = cpu_seconds(pid) - c0
    return Cost(cpu * 1e6 / requests, cpu * 1e6 / (requests * records), requests / wall)


def measure_connections(
    pid: int, port: int, frame: bytes, requests: int, connections: int, depth: int
) -> Cost:
    """``requests`` spread over ``connections`` connections, each pipelined ``depth`` deep
    from its own client thread."""
    import threading

    socks = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(connections)]
    per = max(1, requests // connections)
    for sock in socks:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pipeline(sock, frame, min(200, per), depth)

    def drive(sock: socket.socket) -> None:
        pipeline(sock, frame, per, depth)

    threads = [threading.Thread(target=drive, args=(sock,)) for sock in socks]
    c0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - c0
    for sock in socks:
        sock.close()
    n = per * connections
    return Cost(cpu * 1e6 / n, cpu * 1e6 / n, n / wall)


def seed(port: int, frame: bytes) -> None:
    """Appends the fetch workload's one one-record batch (one Produce, answered)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        _recv_size_after(sock, frame)


def create_topics(bootstrap: str, tag: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, NewTopic

    names = {
        "fsync": f"cost-fsync-{tag}",
        "interval": f"cost-interval-{tag}",
        "batch": f"cost-batch-{tag}",
        "wide": f"cost-wide-{tag}",
        "fetch": f"cost-fetch-{tag}",
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(names["fsync"], num_partitions=1, config={"strata.flush.mode": "fsync"}),
        NewTopic(names["interval"], num_partitions=1, config={"strata.flush.mode": "interval"}),
        NewTopic(names["batch"], num_partitions=1, config={"strata.flush.mode": "interval"}),
        NewTopic(names["wide"], num_partitions=WIDE, config={"strata.flush.mode": "interval"}),
        NewTopic(names["fetch"], num_partitions=1, config={"strata.flush.mode": "interval"}),
    ]
    for f in admin.create_topics(topics).values():
        f.result(120)  # a 1,000-partition topic on a loaded 2-core machine
    return names


def run_tree(
    root: Path, extra_env: dict[str, str], data: Path, args: argparse.Namespace, tag: str
) -> dict[str, Cost]:
    env = {"PYTHONPATH": str(root), **extra_env}
    proc, port = start_broker(data, env, cwd=root)
    try:
        names = create_topics(f"127.0.0.1:{port}", tag)
        acks = args.acks
        plan: dict[str, tuple[Callable[[], bytes], int, int]] = {
            "produce-fsync": (lambda: produce_frame(names["fsync"], 1, acks), args.requests, 1),
            "produce-interval": (lambda: produce_frame(names["interval"], 1, acks), args.requests, 1),
            "produce-100": (
                lambda: produce_frame(names["batch"], 100, acks),
                max(1, args.requests // 10),
                100,
            ),
            "fetch": (lambda: fetch_frame(names["fetch"]), args.requests, 1),
            "metadata": (lambda: metadata_frame(names["interval"]), args.requests, 1),
            "produce-1000": (
                lambda: produce_frame(names["batch"], WIDE, acks),
                max(1, args.requests // 50),
                WIDE,
            ),
            "fanout-1000": (
                lambda: produce_frame(names["wide"], 1, acks, partitions=WIDE),
                max(1, args.requests // 50),
                WIDE,
            ),
            "conns-1": (lambda: produce_frame(names["interval"], 1, acks), args.requests, 1),
            "conns-50": (lambda: produce_frame(names["interval"], 1, acks), args.requests, 1),
        }
        out: dict[str, Cost] = {}
        if "fetch" in args.workloads:
            seed(port, produce_frame(names["fetch"], 1))
        for name in args.workloads:
            build, n, records = plan[name]
            if name.startswith("conns-"):
                conns = int(name.split("-")[1])
                out[name] = measure_connections(proc.pid, port, build(), n, conns, min(args.depth, 5))
            else:
                out[name] = measure(proc.pid, port, build(), n, records, args.depth)
        return out
    finally:
        stop_broker(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20_000, help="requests per workload and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--depth", type=int, default=32, help="requests in flight on the connection")
    ap.add_argument("--roots", default=str(ROOT), help="comma-separated code trees, run alternating")
    ap.add_argument(
        "--workloads", default=",".join(WORKLOADS), help=f"also: {','.join(FANOUT)} (--fanout: those)"
    )
    ap.add_argument("--fanout", action="store_true", help="the fan-out workloads instead")
    ap.add_argument(
        "--acks", type=int, default=1, choices=(-1, 1), help="of every Produce (-1: acks=all; default 1)"
    )
    args = ap.parse_args()
    args.workloads = list(FANOUT) if args.fanout else [w for w in args.workloads.split(",") if w]
    unknown = [w for w in args.workloads if w not in WORKLOADS + FANOUT]
    if unknown:
        ap.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    roots: list[tuple[str, Path, dict[str, str]]] = []
    for spec in args.roots.split(","):
        path, *env_items = spec.split("@")
        tree = Path(path).resolve()
        # api/cli.py before issue 33 moved the CLI into a package: older trees compare too
        if not any((tree / "api" / p).is_file() for p in ("cli/__init__.py", "cli.py")):
            ap.error(f"{tree} is not a Strata code tree (no api/cli/__init__.py)")
        roots.append((spec, tree, dict(item.split("=", 1) for item in env_items)))
    results: dict[str, list[dict[str, Cost]]] = {spec: [] for spec, _, _ in roots}
    work = Path(tempfile.mkdtemp(prefix="strata-bench-cost-"))
    print(
        f"{os.cpu_count()} cores; {args.requests:,} requests per workload, depth {args.depth}, "
        f"{args.rounds} rounds over {len(roots)} tree(s)",
        flush=True,
    )
    try:
        for rnd in range(args.rounds):
            for i, (root, tree, env) in enumerate(roots):
                d = work / f"r{rnd}-t{i}"
                d.mkdir()
                res = run_tree(tree, env, d, args, f"{rnd}-{i}-{int(time.time())}")
                results[root].append(res)
                line = ", ".join(f"{k} {v.cpu_us_per_request:.0f}" for k, v in res.items())
                print(f"round {rnd + 1} tree {root}: CPU-us/request {line}", flush=True)
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for root, _, _ in roots:
        print(f"\n== {root} ({args.rounds} rounds, min..max)")
        head = ("workload", "CPU-us/request", "CPU-us/record", "ceiling req/s/core", "wall req/s")
        print(f"{head[0]:<18}{head[1]:>18}{head[2]:>18}{head[3]:>22}{head[4]:>18}")
        for name in args.workloads:
            costs = [r[name] for r in results[root]]
            req = [c.cpu_us_per_request for c in costs]
            rec = [c.cpu_us_per_record for c in costs]
            wall = [c.wall_rate for c in costs]
            ceil = [1e6 / x for x in req if x > 0]
            print(
                f"{name:<18}{min(req):>9.1f}..{max(req):<7.1f}{min(rec):>9.2f}..{max(rec):<7.2f}"
                f"{min(ceil):>12,.0f}..{max(ceil):<9,.0f}{min(wall):>9,.0f}..{max(wall):<8,.0f}"
            )
    print("\nceiling = 1 / broker CPU-seconds per request: a CPU-time extrapolation, not a measured rate")


if __name__ == "__main__":
    main()
