"""Broker benchmark: produce throughput, produce latency and fetch throughput over loopback.

    python -m bench.bench_broker [--messages 2000000] [--producers 2]

Starts a real `strata serve` subprocess on free loopback ports and drives it with
librdkafka (confluent-kafka) producer processes, the C-speed load generator.

  1. Produce throughput, 100-byte records, acks=1 and acks=all (fsync group commit),
     while a lagging consumer reads the same topic from offset 0.
  2. Produce latency p50/p99 at half the measured acks=all rate.
  3. Fetch throughput: a raw Fetch loop (responses are read, not parsed, like a replica
     would) against the sendfile loopback limit measured in the same run: a thread that
     os.sendfile()s the same cached segment file to a socket.

Every figure is printed with the baseline it is compared to; each produce run also prints
the broker's CPU time per record (/proc/<pid>/stat), since on a small machine the load
generators share its cores. What a small *request* costs the broker (one-record Produce,
Fetch, Metadata over a pipelined raw-socket client) is bench/bench_request_cost.py.

    python -m bench.bench_broker --validation-cost [--rounds 3] [--codec none]

instead measures what validating every produced record costs (hot.record_validation):
acks=1 produce throughput against a broker with the C record walk (hot/_recordwalk.c), one
started with the benchmark-only STRATA_RECORD_WALK=python (the pure-Python walk) and one with
STRATA_BENCH_SKIP_RECORD_VALIDATION=1 (no record walk), alternating, in one run; first, the
walk's in-process cost per 100-byte record in C and in Python.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = b"x" * 100


def start_broker(
    data_dir: Path, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> tuple[subprocess.Popen[str], int]:
    """A ``strata serve`` subprocess from the code tree ``cwd`` (this one by default)."""
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
            "none",  # its default port (8081) may be taken on a shared machine
        ],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(cwd), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    port = 0
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        m = re.search(r"kafka listener on 127.0.0.1:(\d+)", line)
        if m:
            port = int(m.group(1))
        m = re.search(r"http listener on http://127.0.0.1:(\d+)", line)
        if m:
            HTTP_PORTS[proc.pid] = int(m.group(1))
        if "strata: ready" in line:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("broker did not start")
    out = proc.stdout
    threading.Thread(target=lambda: [None for _ in out], daemon=True).start()
    return proc, port


HTTP_PORTS: dict[int, int] = {}  # broker pid -> its HTTP listener (``/metrics``)


def produce_requests(pid: int) -> int:
    """Produce requests the broker ``pid`` has answered (its ``/metrics``), -1 if unknown."""
    import urllib.request

    port = HTTP_PORTS.get(pid)
    if port is None:
        return -1
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'^strata_request_latency_seconds_count\{api="Produce"\} (\S+)$', text, re.M)
    return int(float(m.group(1))) if m else 0  # no Produce answered yet


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions)])[name].result(30)


def lagging_consumer(
    bootstrap: str, topic: str, partitions: int, stop: threading.Event, counter: list[int]
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    while not stop.is_set():
        msgs = c.consume(10000, timeout=0.2)
        counter[0] += len(msgs)
    c.close()


def bench_produce(
    bootstrap: str,
    acks: str,
    total: int,
    producers: int,
    partitions: int,
    workdir: Path,
    codec: str = "none",
    broker_pid: int | None = None,
) -> float:
    """kcat (librdkafka, pure C) producers reading 100-byte lines; a lagging consumer reads along.

    With ``broker_pid`` the broker's CPU time over the run is printed per record too (the
    lagging consumer's fetches included): the load generators share the machine's cores, so
    msg/s measures the machine, CPU-us per record the broker."""
    from bench.proc import cpu_seconds

    topic = f"bench-{acks}-{int(time.time() * 1000)}"
    create_topic(bootstrap, topic, partitions)
    lines = workdir / "records.txt"
    if not lines.exists():
        with open(lines, "wb") as fh:
            fh.write((b"x" * 99 + b"\n") * (total // producers))
    stop = threading.Event()
    consumed = [0]
    cons = threading.Thread(target=lagging_consumer, args=(bootstrap, topic, partitions, stop, consumed))
    cons.start()
    cmd = [
        "kcat", "-b", bootstrap, "-t", topic, "-P", "-l", "-X", f"acks={acks}", "-X", "linger.ms=5",
        "-X", "batch.size=1000000", "-X", "queue.buffering.max.messages=1000000",
        "-X", "enable.idempotence=false", "-X", f"compression.codec={codec}", str(lines),
    ]  # fmt: skip
    c0 = cpu_seconds(broker_pid) if broker_pid else 0.0
    r0 = produce_requests(broker_pid) if broker_pid else -1
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd) for _ in range(producers)]
    codes = [pr.wait(600) for pr in procs]
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(broker_pid) - c0 if broker_pid else 0.0
    requests = produce_requests(broker_pid) - r0 if broker_pid and r0 >= 0 else 0
    stop.set()
    cons.join(30)
    sent = (total // producers) * producers
    rate = sent / wall
    if broker_pid:
        print(
            f"broker CPU {cpu:.2f} s over {wall:.2f} s ({cpu / wall:.2f} cores) = "
            f"{cpu * 1e6 / sent:.2f} CPU-us per record; ceiling by CPU-time extrapolation "
            f"{sent / cpu:,.0f} msg/s per core",
            flush=True,
        )
        if requests > 0:
            print(
                f"  {requests:,} Produce requests ({sent / requests:,.0f} records each): "
                f"{cpu * 1e6 / requests:,.0f} CPU-us per request (the consumer's fetches included)",
                flush=True,
            )
    print(
        f"produce acks={acks:>3} codec={codec}: {sent:,} x 100 B by {producers} kcat in {wall:.2f} s "
        f"= {rate:,.0f} msg/s "
        f"({rate * 100 / 1e6:.0f} MB/s payload), kcat exit codes {codes}, "
        f"lagging consumer read {consumed[0]:,}",
        flush=True,
    )
    return rate


def bench_latency(bootstrap: str, rate: float, seconds: float = 5.0) -> None:
    from confluent_kafka import Producer

    topic = f"bench-lat-{int(time.time() * 1000)}"
    create_topic(bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1, "enable.idempotence": False})
    lat: list[float] = []

    def cb(err: object, _msg: object, sent: float) -> None:
        if err is None:
            lat.append(time.perf_counter() - sent)

    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        target = t0 + i / rate
        now = time.perf_counter()
        if target > now:
            if target - now > 0.001:
                p.poll(target - now)
            while time.perf_counter() < target:
                pass
        sent = time.perf_counter()
        p.produce(topic, RECORD, on_delivery=lambda e, m, s=sent: cb(e, m, s))
        if i % 100 == 0:
            p.poll(0)
    p.flush(60)
    lat.sort()
    if not lat:
        print("latency: no deliveries")
        return
    p50 = lat[len(lat) // 2] * 1000
    p99 = lat[int(len(lat) * 0.99)] * 1000
    print(
        f"produce latency acks=all at {rate:,.0f} msg/s (single producer): p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    )


def _recv_exact(sock: socket.socket, n: int, buf: bytearray) -> None:
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:n])
        if not k:
            raise ConnectionError("closed")
        got += k


def bench_fetch(bootstrap: str, data_dir: Path, seconds: float = 5.0) -> None:
    """Raw Fetch v11 loop over one partition filled with ~512 MiB, vs sendfile of the same file."""
    from confluent_kafka import Producer

    from kwire import encode_request
    from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic

    topic = f"bench-fetch-{int(time.time() * 1000)}"
    create_topic(bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20, "batch.size": 1_000_000})
    target = 512 << 20
    value = os.urandom(1000)
    for _ in range(target // 1000):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(300)
    n_records = target // 1000
    seg = sorted((data_dir / "logs" / f"{topic}-0").glob("*.log"))[0]
    size = seg.stat().st_size

    host, port = bootstrap.split(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    buf = bytearray(64 << 20)
    fetch_bytes = 8 << 20
    total = 0
    corr = 0
    t0 = time.perf_counter()
    offset = 0
    while time.perf_counter() - t0 < seconds:
        corr += 1
        req = FetchRequest(
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=fetch_bytes,
            topics=(
                FetchTopic(
                    topic=topic,
                    partitions=(
                        FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=fetch_bytes),
                    ),
                ),
            ),
        )
        payload = encode_request(1, 11, corr, "bench", req)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        _recv_exact(sock, 4, buf)
        (n,) = struct.unpack_from(">i", buf)
        _recv_exact(sock, n, buf)
        total += n
        # walk the cached log ~7 MB at a time and wrap around (no record parsing on our side)
        offset = (offset + 7000) % (n_records - 7000)
    ours = total / (time.perf_counter() - t0)
    sock.close()

    # baseline: sendfile of the same cached file over loopback, same chunk size
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    sent_total = [0]
    stop = threading.Event()

    def serve() -> None:
        conn, _ = srv.accept()
        fd = os.open(seg, os.O_RDONLY)
        pos = 0
        while not stop.is_set():
            k = os.sendfile(conn.fileno(), fd, pos, min(fetch_bytes, size - pos))
            pos = 0 if pos + k >= size else pos + k
            sent_total[0] += k
        os.close(fd)
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    cli = socket.create_connection(srv.getsockname())
    cli.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    got = 0
    t0 = time.perf_counter()
    view = memoryview(buf)
    while time.perf_counter() - t0 < seconds:
        got += cli.recv_into(view[: 8 << 20])
    limit = got / (time.perf_counter() - t0)
    stop.set()
    cli.close()
    srv.close()
    print(
        f"fetch: {ours / 1e6:,.0f} MB/s vs sendfile loopback limit {limit / 1e6:,.0f} MB/s "
        f"= {ours / limit:.2f} of the limit (segment {size >> 20} MiB, {fetch_bytes >> 20} MiB fetches)"
    )


def stop_broker(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def bench_record_walk() -> None:
    """The record walk alone, in process: best of 20 walks of one 1.1 MB batch of 10,000
    100-byte records (as kcat sends them), in C and in Python."""
    from hot import record_validation
    from hot.batch import HEADER_SIZE, parse_header
    from hot.records import RecordInput, build_batch

    n = 10_000
    raw = build_batch([RecordInput(None, os.urandom(100)) for _ in range(n)])
    h = parse_header(raw)
    data = raw[HEADER_SIZE:]
    walks = {"python": record_validation._check_records_py}
    if record_validation._native is not None:
        walks["C"] = record_validation.check_records
    for name, walk in walks.items():
        best = float("inf")
        for _ in range(20):
            t0 = time.perf_counter()
            walk(data, h)
            best = min(best, time.perf_counter() - t0)
        print(f"record walk in process, {name}: {best * 1e6 / n:.3f} us per 100-byte record", flush=True)


def bench_validation_cost(args: argparse.Namespace, data: Path) -> None:
    """acks=1 produce throughput with the C record walk, the Python one and none, alternating
    brokers (C, Python, off, C, ...) so that all see the same machine load."""
    from hot import record_validation

    print(f"record walk in C (hot._recordwalk) built: {record_validation.NATIVE}", flush=True)
    bench_record_walk()
    envs = {
        "C": {},
        "python": {"STRATA_RECORD_WALK": "python"},
        "off": {"STRATA_BENCH_SKIP_RECORD_VALIDATION": "1"},
    }
    if not record_validation.NATIVE:
        del envs["C"]  # brokers would run the Python walk: nothing to compare
    rates: dict[str, list[float]] = {mode: [] for mode in envs}
    for rnd in range(args.rounds):
        for mode, env in envs.items():
            d = data / f"validation-{mode}-{rnd}"
            d.mkdir()
            proc, port = start_broker(d, env)
            try:
                print(f"round {rnd + 1}, validation {mode}:", end=" ", flush=True)
                rate = bench_produce(
                    f"127.0.0.1:{port}", "1", args.messages, args.producers, args.partitions, data, args.codec
                )
                rates[mode].append(rate)
            finally:
                stop_broker(proc)
    off = statistics.median(rates["off"])
    for mode in envs:
        if mode != "off":
            med = statistics.median(rates[mode])
            print(
                f"validation cost, codec={args.codec}, walk in {mode}: median {med:,.0f} msg/s, "
                f"{off:,.0f} msg/s without validation: ratio {med / off:.3f} "
                f"({args.rounds} alternating rounds each)",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--validation-cost", action="store_true", help="measure record validation only")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds for --validation-cost")
    ap.add_argument("--codec", default="none", help="producer compression for --validation-cost")
    args = ap.parse_args()
    data = Path(tempfile.mkdtemp(prefix="strata-bench-broker-"))
    if args.validation_cost:
        try:
            bench_validation_cost(args, data)
        finally:
            import shutil

            shutil.rmtree(data, ignore_errors=True)
        return
    proc, port = start_broker(data)
    bootstrap = f"127.0.0.1:{port}"
    print(f"broker on {bootstrap}, data {data}; {os.cpu_count()} cores")
    try:
        pid = proc.pid
        bench_produce(bootstrap, "1", args.messages, args.producers, args.partitions, data, broker_pid=pid)
        rate_all = bench_produce(
            bootstrap, "all", args.messages, args.producers, args.partitions, data, broker_pid=pid
        )
        bench_latency(bootstrap, rate_all / 2 if rate_all / 2 < 200_000 else 200_000)
        bench_fetch(bootstrap, data)
    finally:
        stop_broker(proc)
        import shutil

        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
