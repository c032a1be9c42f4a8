"""A node of N broker processes against one process (issue 34): small-request and batched
Produce throughput, and what it costs in CPU.

    python -m bench.bench_cores [--processes 1,2] [--rounds 3] [--seconds 10] [--depth 32]
    python -m bench.bench_cores --processes 1,2,4,8,16 --generators 16      # a many-core host

It starts, for each N in ``--processes``, a node ``strata serve --processes N`` on a
fresh data dir (ports 0; N=1 is the plain single process; tiering uploads off) and keeps
every node up for the whole run; on each it creates a topic of P = 2 x max(N) partitions
(RF 1) through the node's address with confluent-kafka's AdminClient and reads each
partition's leader and that leader's own address from Metadata. Then, in every round, for
every workload, it drives each node in turn for ``--seconds`` (N order reversed every
other round: 1 2, 2 1, ...), so that the runs compared are seconds apart on a machine
whose other load moves; the idle nodes cost ~0.01 core each:

  produce-interval   one-record Produce v9 requests, acks=1, strata.flush.mode=interval
                     (page-cache durability: the fsync rate does not cap the rate)
  produce-fsync      the same on a topic with strata.flush.mode=fsync (the default)
  produce-100        100 records per Produce (interval): records/s with batching
  produce-1000       1,000 records per Produce (interval)

The load: ``--generators`` G processes (default: one per core), each holding one
connection to every process of the node (its own port, as a Kafka client routes by
leader) and pipelining pre-encoded Produce requests (bench.bench_request_cost's frames
and ``pipeline``, ``--depth`` in flight per connection) to one of the partitions that
process leads. Responses are counted, never decoded. Over the measured window (after a
warm-up, all generators start together):

  req/s            responses per wall second, all connections together
  broker cores     CPU seconds of every process of the node (utime + stime of each
                   worker and of the supervisor, /proc/<pid>/stat) per wall second
  busiest          the cores of the busiest broker process
  generator cores  CPU seconds of the load generators (getrusage) per wall second
  machine busy     busy cores of the whole machine (/proc/stat; other work included)
  CPU-us/req       broker CPU microseconds per request

and against N=1 of the same round:

  wall ratio       req/s(N) / req/s(1): what this machine delivered, generators included
  efficiency       requests per broker-CPU-second, N against 1 (the cost of the extra
                   processes: supervisor, more connections, smaller batches per process)
  capacity ratio   by CPU time: requests per broker-CPU-second x min(N, cores - generator
                   cores), N against 1: the rate if the load generators had the cores they
                   used and each broker process a core of its own out of the rest, nothing
                   else running; an extrapolation, not a measured rate
  busiest ratio    the same extrapolation limited by the busiest process: req/s per core
                   of the busiest process x min(1, (cores - generator cores) / N) (counts an
                   uneven spread over the processes)

The limit stated per round: ``machine`` when the machine's cores are all busy (the
generators and other work compete with the brokers), ``broker`` when the busiest broker
process uses a whole core, ``generators`` when the generators each use a whole core,
else ``latency`` (the pipeline depth and round trips bound the rate).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_request_cost import pipeline, produce_frame  # noqa: E402
from bench.proc import cpu_seconds  # noqa: E402

# name -> (records per request, topic flush mode)
WORKLOADS: dict[str, tuple[int, str]] = {
    "produce-interval": (1, "interval"),
    "produce-fsync": (1, "fsync"),
    "produce-100": (100, "interval"),
    "produce-1000": (1000, "interval"),
}
START_TIMEOUT_S = 300.0  # a node of several processes on a loaded 2-core machine
STOP_TIMEOUT_S = 90.0
CHUNK_S = 0.1  # a generator re-checks the deadline about this often
LISTENER = re.compile(r"^strata(?:\[(\d+)\])?: kafka listener on ([^\s:]+):(\d+)")


# -- the node ------------------------------------------------------------------------------


@dataclass
class Node:
    """A running ``strata serve --processes N`` and what its output and /proc said."""

    proc: subprocess.Popen[str]
    processes: int
    address: tuple[str, int]  # the node's address
    own_ports: dict[int, int]  # process index -> its own Kafka port
    worker_pids: dict[int, int]  # process index -> pid (N=1: the one process)
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=200))

    @property
    def pids(self) -> list[int]:
        """Every process of the node: the workers and, for N > 1, the supervisor."""
        pids = list(self.worker_pids.values())
        return pids if self.processes == 1 else [self.proc.pid, *pids]


def _workers_of(supervisor: int) -> dict[int, int]:
    """The supervisor's worker processes by index, from their ``--worker`` JSON spec."""
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            if ppid != supervisor:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().decode(errors="replace").split("\0")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if "--worker" in argv:
            spec = json.loads(argv[argv.index("--worker") + 1])
            found[int(spec["index"])] = int(entry)
    return found


# Runs the node's command line after PR_SET_PDEATHSIG = SIGTERM (kept across execve): the
# node stops when the benchmark's main thread, which starts every node, dies (kill -9
# included), as the supervisor's processes do with it. A launcher rather than preexec_fn:
# no Python code between fork and exec in a process with threads (librdkafka's, readers).
_LAUNCH = """
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):  # the benchmark died before the line above
    sys.exit(1)
os.execv(sys.argv[2], sys.argv[2:])
"""


def start_node(data: Path, processes: int, env: dict[str, str]) -> Node:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _LAUNCH,
            str(os.getpid()),
            sys.executable,
            "-m",
            "api.cli",
            "serve",
            "--processes",
            str(processes),
            "--data-dir",
            str(data),
            "--kafka-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # its own process group: Ctrl-C reaches the benchmark only, which stops the node
        # itself (and can kill the whole group if it does not stop)
        start_new_session=True,
    )
    node = Node(proc, processes, ("", 0), {}, {})
    ready = threading.Event()
    assert proc.stdout is not None
    out = proc.stdout

    def read() -> None:  # drains the pipe for the node's whole life
        for raw in out:
            line = raw.rstrip("\n")
            node.lines.append(line)
            m = LISTENER.match(line)
            if m and m.group(1):
                node.own_ports[int(m.group(1))] = int(m.group(3))
            elif m:
                node.address = (m.group(2), int(m.group(3)))
            if line == "strata: ready":
                ready.set()
        ready.set()  # the node exited: the waiter sees it below

    threading.Thread(target=read, daemon=True).start()
    try:
        if not ready.wait(START_TIMEOUT_S) or proc.poll() is not None:
            tail = "\n".join(list(node.lines)[-20:])
            raise RuntimeError(f"node of {processes} did not start:\n{tail}")
        if processes == 1:
            node.own_ports = {1: node.address[1]}
            node.worker_pids = {1: proc.pid}
        else:
            node.worker_pids = _workers_of(proc.pid)
        if sorted(node.worker_pids) != list(range(1, processes + 1)) or len(node.own_ports) != processes:
            raise RuntimeError(f"node of {processes}: found pids {node.worker_pids}, ports {node.own_ports}")
    except BaseException:
        stop_node(node)
        raise
    return node


def stop_node(node: Node) -> None:
    """SIGTERM to the node (the supervisor stops its processes), then SIGKILL to its whole
    process group and to every worker pid seen, whatever is left."""
    proc = node.proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in node.worker_pids.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def create_topic(bootstrap: str, name: str, partitions: int, flush_mode: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})  # no info lines at exit
    config = {"strata.flush.mode": flush_mode}
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)
    admin.create_topics([topic])[name].result(120)


def leaders(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[str, int, list[int]]]:
    """Broker id -> (host, its own port, the partitions it leads), from Metadata through
    the node's address; waits until every partition has a leader."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})  # no info lines at exit
    deadline = time.monotonic() + 60
    while True:
        md = admin.list_topics(topic, timeout=30)
        t = md.topics.get(topic)
        led = {p.id: p.leader for p in t.partitions.values()} if t is not None and t.error is None else {}
        if len(led) == partitions and all(b in md.brokers for b in led.values()):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: not every partition has a leader: {led}")
        time.sleep(0.5)
    out: dict[int, tuple[str, int, list[int]]] = {}
    for p, b in sorted(led.items()):
        broker = md.brokers[b]
        out.setdefault(b, (str(broker.host), int(broker.port), []))[2].append(p)
    return out


# -- the load generators -------------------------------------------------------------------


@dataclass
class GenResult:
    responses: int
    cpu_s: float
    end: float  # time.monotonic() (one clock for every process of the machine)


def generator(
    targets: list[tuple[str, int, bytes]],
    depth: int,
    warmup: int,
    results: Any,
    start: EventType,
    deadline: Any,
) -> None:
    """One load-generator process: a connection per target (one process of the node), a
    thread per connection pipelining its frame ``depth`` deep until the shared deadline."""
    try:
        socks = []
        for host, port, _ in targets:
            sock = socket.create_connection((host, port), timeout=60)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            socks.append(sock)
        chunks: list[int] = []
        for sock, (_, _, frame) in zip(socks, targets, strict=True):
            wall = pipeline(sock, frame, warmup, depth)  # first segment, caches
            # requests per pipeline() call: about CHUNK_S of work, so that the deadline is
            # overrun by little and the drain between calls costs little
            chunks.append(max(depth, int(warmup / max(wall, 1e-6) * CHUNK_S)))
        results.put(("ready", None))
        if not start.wait(300):
            return
        end_at = deadline.value
        counts = [0] * len(socks)

        def drive(i: int) -> None:
            while time.monotonic() < end_at:
                pipeline(socks[i], targets[i][2], chunks[i], depth)
                counts[i] += chunks[i] + 1  # pipeline() learns the answer size from one more

        r0 = resource.getrusage(resource.RUSAGE_SELF)
        threads = [threading.Thread(target=drive, args=(i,)) for i in range(len(socks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        end = time.monotonic()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        for sock in socks:
            sock.close()
        results.put(("done", GenResult(sum(counts), cpu, end)))
    except BaseException as exc:  # the parent reports it and stops the run
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def machine_busy_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of every core, from /proc/stat."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is counted in user already
    return total - idle, total


@dataclass
class Sample:
    """One workload on one node in one round."""

    processes: int
    rate: float  # requests/s
    records: int  # per request
    broker_cores: float
    per_process: list[float]  # cores of each worker, by index
    supervisor_cores: float
    generator_cores: float
    machine_busy: float
    cores: int
    generators: int

    @property
    def cpu_us(self) -> float:
        return self.broker_cores / self.rate * 1e6 if self.rate else float("inf")

    @property
    def efficiency(self) -> float:
        """Requests per broker-CPU-second."""
        return self.rate / self.broker_cores if self.broker_cores else 0.0

    @property
    def broker_room(self) -> float:
        """Cores the broker processes could have: one each, out of what the load
        generators leave of the machine."""
        return min(float(self.processes), self.cores - self.generator_cores)

    @property
    def capacity(self) -> float:
        return self.efficiency * self.broker_room

    @property
    def busiest_capacity(self) -> float:
        busiest = max(self.per_process)
        return self.rate / busiest * self.broker_room / self.processes if busiest else 0.0

    @property
    def limit(self) -> str:
        if self.machine_busy >= 0.9 * self.cores:
            return "machine"
        if max(self.per_process) >= 0.85:
            return "broker"
        if self.generator_cores >= 0.85 * self.generators:
            return "generators"
        return "latency"


def drive(
    node: Node,
    routes: dict[int, tuple[str, int, list[int]]],
    topic: str,
    records: int,
    args: argparse.Namespace,
) -> Sample:
    """Runs the G generators against the node for ``args.seconds``; measures."""
    targets: list[list[tuple[str, int, bytes]]] = [[] for _ in range(args.generators)]
    for host, port, parts in routes.values():
        for g in range(args.generators):
            part = parts[g % len(parts)]
            targets[g].append((host, port, produce_frame(topic, records, partitions=1, first=part)))
    ctx = mp.get_context("spawn")  # no fork of a process holding librdkafka's threads
    queue = ctx.Queue()  # each generator's "ready", then its "done" (or "error")
    start = ctx.Event()
    deadline = ctx.Value("d", 0.0)
    warmup = 500 if records == 1 else max(20, 5000 // records)
    gens = [
        ctx.Process(
            target=generator, args=(targets[g], args.depth, warmup, queue, start, deadline), daemon=True
        )
        for g in range(args.generators)
    ]
    try:
        for p in gens:
            p.start()
        for _ in gens:
            kind, detail = queue.get(timeout=180)
            if kind == "error":
                raise RuntimeError(f"load generator: {detail}")
        pids = node.pids
        c0 = [cpu_seconds(pid) for pid in pids]
        m0 = machine_busy_ticks()
        t0 = time.monotonic()
        deadline.value = t0 + args.seconds
        start.set()
        done: list[GenResult] = []
        for _ in gens:
            kind, detail = queue.get(timeout=args.seconds + 120)
            if kind == "error":
                raise RuntimeError(f"load generator: {detail}")
            done.append(detail)
        c1 = [cpu_seconds(pid) for pid in pids]
        m1 = machine_busy_ticks()
        now = _workers_of(node.proc.pid) if node.processes > 1 else node.worker_pids
        if now != node.worker_pids or node.proc.poll() is not None or _alive(pids) != pids:
            raise RuntimeError("a process of the node restarted or exited during the measurement")
        wall = max(r.end for r in done) - t0
        cpu = [b - a for a, b in zip(c0, c1, strict=True)]
        sup = cpu[0] if node.processes > 1 else 0.0
        per = cpu[1:] if node.processes > 1 else cpu
        return Sample(
            processes=node.processes,
            rate=sum(r.responses for r in done) / wall,
            records=records,
            broker_cores=sum(cpu) / wall,
            per_process=[c / wall for c in per],
            supervisor_cores=sup / wall,
            generator_cores=sum(r.cpu_s for r in done) / wall,
            machine_busy=(m1[0] - m0[0]) / (m1[1] - m0[1]) * args.cores,
            cores=args.cores,
            generators=args.generators,
        )
    finally:
        start.set()  # a generator still waiting goes away
        for p in gens:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if os.path.exists(f"/proc/{pid}")]


# -- the run -------------------------------------------------------------------------------


Routes = dict[int, tuple[str, int, list[int]]]  # broker id -> (host, own port, partitions led)


@dataclass
class Prepared:
    """A started node with its topics (one per flush mode) and where their leaders are."""

    node: Node
    topics: dict[str, tuple[str, Routes]]  # flush mode -> (topic, routes)
    spread: str  # partitions led by each process, by index: "2/2"


def prepare(n: int, partitions: int, data: Path, args: argparse.Namespace) -> Prepared:
    node = start_node(data, n, {"STRATA_LOG_REMOTE_STORAGE_ENABLE": "false"})  # no uploads competing
    try:
        bootstrap = f"{node.address[0]}:{node.address[1]}"
        topics: dict[str, tuple[str, Routes]] = {}
        for mode in sorted({WORKLOADS[w][1] for w in args.workloads}):
            name = f"cores-{mode}-{n}"
            create_topic(bootstrap, name, partitions, mode)
            routes = leaders(bootstrap, name, partitions)
            if len(routes) != n:
                led = {b: len(r[2]) for b, r in routes.items()}
                raise RuntimeError(f"{name}: {partitions} partitions led by {len(routes)} of {n}: {led}")
            topics[mode] = (name, routes)
    except BaseException:
        stop_node(node)
        raise
    by_port = {r[1]: len(r[2]) for r in topics[WORKLOADS[args.workloads[0]][1]][1].values()}
    spread = "/".join(str(by_port.get(port, 0)) for _, port in sorted(node.own_ports.items()))
    return Prepared(node, topics, spread)


def measure(prep: Prepared, w: str, args: argparse.Namespace) -> Sample:
    records, mode = WORKLOADS[w]
    name, routes = prep.topics[mode]
    s = drive(prep.node, routes, name, records, args)
    print(
        f"  N={prep.node.processes} {w}: {s.rate:,.0f} req/s ({s.rate * records:,.0f} msg/s), broker "
        f"{s.broker_cores:.2f} cores (processes {'/'.join(f'{c:.2f}' for c in s.per_process)}, "
        f"supervisor {s.supervisor_cores:.2f}; partitions led {prep.spread}), generators "
        f"{s.generator_cores:.2f}, machine busy {s.machine_busy:.2f} of {args.cores} (other work "
        f"{max(0.0, s.machine_busy - s.broker_cores - s.generator_cores):.2f}), "
        f"{s.cpu_us:.0f} broker CPU-us/req, limit: {s.limit}",
        flush=True,
    )
    return s


def _span(xs: list[float], fmt: str) -> str:
    lo, hi = min(xs), max(xs)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{format(lo, fmt)}..{format(hi, fmt)}"


def _row(n: int, ss: list[Sample], bs: list[Sample], records: int) -> str:
    """One N's line: medians over the rounds, ratios to the baseline of each round."""

    def med(f: Callable[[Sample], float]) -> float:
        return statistics.median(f(s) for s in ss)

    def ratio(f: Callable[[Sample], float]) -> str:
        return _span([f(s) / f(b) if f(b) else 0.0 for s, b in zip(ss, bs, strict=True)], ".2f")

    return (
        f"{n:>3}{med(lambda s: s.rate):>10,.0f}{med(lambda s: s.rate) * records:>11,.0f}"
        f"{med(lambda s: s.broker_cores):>13.2f}{med(lambda s: max(s.per_process)):>8.2f}"
        f"{med(lambda s: s.generator_cores):>10.2f}{med(lambda s: s.machine_busy):>8.2f}"
        f"{med(lambda s: s.cpu_us):>11.0f}{ratio(lambda s: s.rate):>12}"
        f"{ratio(lambda s: s.efficiency):>12}{ratio(lambda s: s.capacity):>12}"
        f"{ratio(lambda s: s.busiest_capacity):>14}  {','.join(sorted({s.limit for s in ss}))}"
    )


def report(results: list[dict[int, dict[str, Sample]]], args: argparse.Namespace) -> None:
    base = args.processes[0]
    for w in args.workloads:
        records = WORKLOADS[w][0]
        print(f"\n== {w} ({records} record(s) per request), {len(results)} round(s): median, ratios min..max")
        head = (
            "N",
            "req/s",
            "msg/s",
            "broker cores",
            "busiest",
            "gen cores",
            "machine",
            "CPU-us/req",
            "wall ratio",
            "efficiency",
            "capacity",
            "busiest ratio",
            "limit",
        )
        print(
            f"{head[0]:>3}{head[1]:>10}{head[2]:>11}{head[3]:>13}{head[4]:>8}{head[5]:>10}{head[6]:>8}"
            f"{head[7]:>11}{head[8]:>12}{head[9]:>12}{head[10]:>12}{head[11]:>14}  {head[12]}"
        )
        for n in args.processes:
            print(_row(n, [r[n][w] for r in results], [r[base][w] for r in results], records))
    print(
        f"\nratios against N={base} of the same round. wall ratio: measured req/s (the load generators"
        f"\nshare the {args.cores} cores). efficiency: requests per broker-CPU-second. capacity: efficiency x"
        "\nmin(N, cores - generator cores), the rate if each broker process had a core of what the"
        "\ngenerators leave (CPU-time extrapolation, not measured). busiest ratio: the same from the"
        "\nbusiest process's req/s per core (an uneven spread counted)."
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", default="1,2", help="node sizes N, comma-separated; the first: baseline")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each over every N in order")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per workload")
    ap.add_argument("--depth", type=int, default=32, help="requests in flight per connection")
    ap.add_argument("--generators", type=int, default=0, help="load-generator processes [one per core]")
    ap.add_argument(
        "--workloads", default="produce-interval,produce-100", help=f"comma-separated: {', '.join(WORKLOADS)}"
    )
    args = ap.parse_args()
    try:
        args.processes = [int(x) for x in args.processes.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--processes: expected counts like 1,2,4, got {args.processes!r}")
    if not args.processes or min(args.processes) < 1:
        ap.error("--processes: counts of 1 or more")
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown or not args.workloads:
        ap.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    if args.rounds < 1 or args.seconds <= 0 or args.depth < 1 or args.generators < 0:
        ap.error("--rounds, --seconds and --depth must be positive, --generators not negative")
    args.cores = len(os.sched_getaffinity(0))
    args.generators = args.generators or args.cores
    partitions = 2 * max(args.processes)
    # SIGTERM ends the run as Ctrl-C does: the finally blocks stop every node and generator
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(
        f"{args.cores} cores, load average {os.getloadavg()[0]:.1f}; N in {args.processes}, "
        f"{partitions} partitions, "
        f"{args.generators} generators x depth {args.depth} per connection, {args.seconds:g} s per workload, "
        f"{args.rounds} round(s)",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="strata-bench-cores-"))
    results: list[dict[int, dict[str, Sample]]] = []
    nodes: dict[int, Prepared] = {}
    try:
        # Every node runs for the whole benchmark (an idle one costs ~0.01 core), so that
        # the N=1 and N=2 runs of one workload are seconds apart, not a node start apart:
        # on a machine shared with other work, the load moves within a minute.
        for n in args.processes:
            (work / f"n{n}").mkdir()
            nodes[n] = prepare(n, partitions, work / f"n{n}", args)
        for rnd in range(args.rounds):
            order = args.processes if rnd % 2 == 0 else args.processes[::-1]  # A B, B A, ...
            print(f"round {rnd + 1}", flush=True)
            res: dict[int, dict[str, Sample]] = {n: {} for n in args.processes}
            for w in args.workloads:
                for n in order:
                    res[n][w] = measure(nodes[n], w, args)
            results.append(res)
    finally:
        for prep in nodes.values():
            stop_node(prep.node)
        shutil.rmtree(work, ignore_errors=True)
    report(results, args)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted: every node and load generator stopped")
