"""Broker memory per connection: idle connections, producer connections, and after they close.

    python -m bench.bench_connections [--connections 1000] [--batch-kib 1024] [--hold 10000]

Starts a real ``strata serve`` subprocess and opens raw loopback connections to it, each
answered once (ApiVersions) so that the broker has set the connection up completely, then
reads the broker's RSS (/proc/<pid>/status) at each step:

  1. ``--connections`` idle connections: RSS delta per connection; then all closed.
  2. First, as a control, that many Produce requests over one connection (what the data
     itself costs); then the same number of producer connections: each sends one Produce request carrying a
     ``--batch-kib`` record batch (librdkafka's batch.size default is 1 MiB), is answered,
     then stays idle: RSS delta per connection; then all closed: what is returned.
  3. ``--librdkafka`` confluent-kafka producers (librdkafka, as clients really connect):
     each sends 5,000 records (linger 5), then idles, then closes.
  4. ``--hold`` idle connections at once (RLIMIT_NOFILE of this process and of the broker
     raised to the hard limit first; the broker's limit as it runs is printed): how many
     the broker holds, and its RSS per connection.

RSS after close says whether memory goes back: Python's allocator and glibc's keep freed
blocks for reuse, so "returned" here means "reusable by the next connections" at least
(step 2 runs after step 1 closed its connections) and, at best, given back to the OS.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_broker import start_broker, stop_broker  # noqa: E402
from bench.bench_request_cost import _recv_frame_size, create_topics, produce_frame  # noqa: E402
from bench.proc import rss_bytes  # noqa: E402


def api_versions_frame() -> bytes:
    from kwire import ApiKey, encode_request
    from kwire.messages.api_versions import ApiVersionsRequest

    body = encode_request(
        ApiKey.API_VERSIONS,
        3,
        1,
        "bench-conn",
        ApiVersionsRequest(client_software_name="b", client_software_version="1"),
    )
    return struct.pack(">i", len(body)) + body


def open_connections(port: int, n: int, first: bytes) -> list[socket.socket]:
    """``n`` connections, each sent ``first`` and answered; stops early (printed) on failure."""
    socks: list[socket.socket] = []
    batch = 200  # send to many, then read their answers: accept and answer overlap
    try:
        for start in range(0, n, batch):
            group = []
            for _ in range(min(batch, n - start)):
                s = socket.create_connection(("127.0.0.1", port), timeout=60)
                s.sendall(first)
                group.append(s)
            for s in group:
                _recv_frame_size(s)
            socks.extend(group)
    except OSError as exc:
        print(f"  opened {len(socks):,} of {n:,} connections, then: {exc}", flush=True)
    return socks


def settle_rss(pid: int, seconds: float = 2.0) -> int:
    time.sleep(seconds)
    return rss_bytes(pid)


def close_all(socks: list[socket.socket]) -> None:
    for s in socks:
        s.close()
    socks.clear()


def nofile_of(pid: int) -> str:
    with open(f"/proc/{pid}/limits") as fh:
        for line in fh:
            if line.startswith("Max open files"):
                return " ".join(line.split()[3:5])
    return "?"


_PRODUCERS_CHILD = r"""
import sys
from confluent_kafka import Producer
ps = [Producer({"bootstrap.servers": sys.argv[1], "linger.ms": 5}) for _ in range(int(sys.argv[3]))]
for p in ps:
    for i in range(5000):
        p.produce(sys.argv[2], b"x" * 100)
        if i % 500 == 0:
            p.poll(0)
    p.flush(30)
print("ready", flush=True)
sys.stdin.readline()
"""


def librdkafka_producers(pid: int, bootstrap: str, n: int) -> None:
    """Step 4: ``n`` librdkafka producers (confluent-kafka, 10 per child process), each
    sending 5,000 100-byte records (linger.ms 5, a 4-partition topic in fsync mode), then
    idle, then closed: the broker's RSS per producer as clients really use it."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"conn-rdkafka-{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=4)])[topic].result(30)
    before = settle_rss(pid)
    kids = []
    for i in range(0, n, 10):
        kids.append(
            subprocess.Popen(
                [sys.executable, "-c", _PRODUCERS_CHILD, bootstrap, topic, str(min(10, n - i))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for k in kids:
            assert k.stdout is not None
            k.stdout.readline()
        busy = settle_rss(pid)
        print(
            f"{n} librdkafka producers ({n * 5000:,} records sent, then idle): RSS "
            f"+{(busy - before) / 2**20:,.1f} MiB = {(busy - before) / n / 1024:,.1f} KiB per producer",
            flush=True,
        )
    finally:
        for k in kids:
            with contextlib.suppress(OSError):
                assert k.stdin is not None
                k.stdin.write("\n")
                k.stdin.flush()
            try:
                k.wait(30)
            except subprocess.TimeoutExpired:
                k.kill()
    closed = settle_rss(pid)
    print(
        f"  closed: RSS {closed / 2**20:,.1f} MiB ({(closed - before) / 2**20:+,.1f} MiB vs before them)",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument(
        "--batch-kib", type=int, default=1024, help="record batch size of each producer connection"
    )
    ap.add_argument("--hold", type=int, default=10_000, help="idle connections held at once (0: skip)")
    ap.add_argument(
        "--librdkafka", type=int, default=50, help="confluent-kafka producers, 10 per child process (0: skip)"
    )
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # inherited by the broker
    data = Path(tempfile.mkdtemp(prefix="strata-bench-conn-"))
    proc, port = start_broker(data)
    n = args.connections
    try:
        names = create_topics(f"127.0.0.1:{port}", "conn")
        print(f"broker pid {proc.pid}, open files limit {nofile_of(proc.pid)} (this process: {hard})")
        base = settle_rss(proc.pid)
        print(f"broker RSS at start: {base / 2**20:,.1f} MiB", flush=True)

        socks = open_connections(port, n, api_versions_frame())
        idle = settle_rss(proc.pid)
        print(
            f"{len(socks):,} idle connections: RSS +{(idle - base) / 2**20:,.1f} MiB = "
            f"{(idle - base) / max(1, len(socks)) / 1024:,.1f} KiB per connection",
            flush=True,
        )
        close_all(socks)
        after = settle_rss(proc.pid)
        print(
            f"  closed: RSS {after / 2**20:,.1f} MiB ({(after - base) / 2**20:+,.1f} MiB vs start)",
            flush=True,
        )

        records = max(1, args.batch_kib * 1024 // 110)
        frame = produce_frame(names["interval"], records)
        # Control: the same Produce requests over one connection, one after another: what
        # the data costs (indexes, allocator) apart from the connections carrying it.
        with socket.create_connection(("127.0.0.1", port), timeout=60) as one:
            for _ in range(n):
                one.sendall(frame)
                _recv_frame_size(one)
        control = settle_rss(proc.pid)
        print(
            f"control: {n:,} such Produce requests over one connection: RSS "
            f"{(control - after) / 2**20:+,.1f} MiB",
            flush=True,
        )
        after = control
        socks = open_connections(port, n, frame)
        prod = settle_rss(proc.pid)
        print(
            f"{len(socks):,} producer connections (one {len(frame) >> 10:,} KiB Produce each, then idle): "
            f"RSS +{(prod - after) / 2**20:,.1f} MiB = {(prod - after) / max(1, len(socks)) / 1024:,.1f} KiB "
            "per connection",
            flush=True,
        )
        close_all(socks)
        closed = settle_rss(proc.pid)
        print(
            f"  closed: RSS {closed / 2**20:,.1f} MiB ({(closed - after) / 2**20:+,.1f} MiB vs before them)",
            flush=True,
        )
        if args.librdkafka:
            librdkafka_producers(proc.pid, f"127.0.0.1:{port}", args.librdkafka)
        if args.hold:
            t0 = time.perf_counter()
            socks = open_connections(port, args.hold, api_versions_frame())
            held = settle_rss(proc.pid)
            print(
                f"held {len(socks):,} of {args.hold:,} idle connections (opened in "
                f"{time.perf_counter() - t0:.1f} s): RSS {held / 2**20:,.1f} MiB, "
                f"{(held - closed) / max(1, len(socks)) / 1024:,.1f} KiB per connection",
                flush=True,
            )
            close_all(socks)
    finally:
        stop_broker(proc)
        shutil.rmtree(data, ignore_errors=True)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


if __name__ == "__main__":
    main()
