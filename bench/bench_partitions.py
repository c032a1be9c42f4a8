"""Partitions at scale (issue 35): creation, idle CPU, failover and rejoin of a 3-broker
cluster on a real etcd, at several partition counts.

    python -m bench.bench_partitions [--partitions 1000,3000,10000] [--idle-seconds 10]
    python -m bench.bench_partitions --roots /tmp/strata-before,. --partitions 1000

For each code tree and partition count, a fresh etcd and three ``strata serve --etcd``
brokers (product defaults: broker.session.timeout.ms 10 s, etcd.timeout.ms 5 s,
replica.lag.time.max.ms 30 s; only tiering is off, as in bench_cluster, so that uploads
do not compete for the two cores) and one topic of that many partitions, RF=3,
min.insync.replicas 2:

  create    CreateTopics sent (confluent-kafka AdminClient) -> answered, and -> every
            partition led with its full ISR (read from etcd)
  idle      each broker's CPU (utime + stime, every thread, /proc) per wall second over
            ``--idle-seconds``, after ``--settle`` seconds; printed as % of a core and
            as µs per second per replica it holds
  failover  kill -9 of the controller (it leads about a third of the partitions) ->
            no partition offline or led by the dead broker; printed from the kill and
            from the session timeout's expiry (the kill + broker.session.timeout.ms)
  rejoin    the killed broker restarted (process start) -> back in every ISR

Figures are wall seconds measured on the machine at hand; ``--roots`` runs several code
trees in turn, at each count, and prints each figure's ratio to the first tree's.

    python -m bench.bench_partitions --single [--partitions 1000,3000] [--roots A,B]

``--single``: the single node instead (``strata serve`` on its embedded store, product
defaults, tiering on: one topic of that many partitions with ``remote.storage.enable``,
a few records in each so every partition has data and a manifest), its CPU per wall
second over ``--idle-seconds`` after ``--settle`` seconds, as % of a core and µs per
second per partition, then its open descriptors (``/proc/PID/fd``), its CPU per
``/metrics`` scrape (five scrapes), the partitions a
Metadata answer shows without a leader and those whose record was not acknowledged;
with ``--rounds`` the trees alternate that many times. (A tree runs its own copy of this
module: to compare descriptors with an older tree, copy this file into it.)

    python -m bench.bench_partitions --early-producer [--partitions 3000,10000] [--roots A,B] [--rounds N]

``--early-producer``: the single node (as ``--single``) creating one topic while a
confluent-kafka producer (acks=all, ``--message-timeout-ms``, 60 s) sends one record to
each partition the moment CreateTopics answers: when CreateTopics answered, how many
records were acknowledged and how many timed out, and when the last was acknowledged
(from the CreateTopics request), per tree and round, with the load average before and
after. (Copy this file into an older tree to run it there.)

    python -m bench.bench_partitions --single --consumer [--partitions 1000] [--roots A,B]

``--consumer``: then an idle confluent-kafka (librdkafka) consumer assigned every
partition at its end (``fetch.wait.max.ms`` 500, its default: a sessionless full Fetch of
every partition each poll, as librdkafka sends), and the broker's CPU per wall second over
another ``--idle-seconds``: printed as the consumer's extra µs/s per partition, with the
Fetch requests per second it made.

    python -m bench.bench_partitions --single --consumer --consumer-client kafka-python \
        [--consumer-rate 100] [--partitions 1000,3000] [--roots A,B]

``--consumer-client kafka-python``: a kafka-python consumer instead (``fetch_max_wait_ms``
500, its default), which opens a KIP-227 fetch session as the Java client does: printed
with the consumer sessions the broker held at the end (``strata_fetch_sessions``) and, on
a tree that counts them, the session partitions its incremental fetches looked at per
second. ``--consumer-rate N``: a producer sends N records/s (100 bytes) to partition 0
through both windows (with and without the consumer), so the consumer's extra CPU is what
it costs to receive them plus what its idle partitions cost.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.proc import cpu_seconds  # noqa: E402

TOPIC = "scale"
SESSION_TIMEOUT_S = 10.0

# The product's defaults, spelled out: tests/broker/clusterlib's FAST_ENV shortens them.
PRODUCT_ENV = {
    "STRATA_BROKER_SESSION_TIMEOUT_MS": str(int(SESSION_TIMEOUT_S * 1000)),
    "STRATA_REPLICA_LAG_TIME_MAX_MS": "30000",
    "STRATA_REPLICA_FETCH_WAIT_MAX_MS": "500",
    "STRATA_REPLICA_FETCH_BACKOFF_MS": "1000",
    "STRATA_REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS": "5000",
    "STRATA_ETCD_TIMEOUT_MS": "5000",
    "STRATA_LOG_SEGMENT_BYTES": str(1 << 30),
    "STRATA_LOG_REMOTE_STORAGE_ENABLE": "false",
}


@dataclass
class Figures:
    answered_s: float = float("nan")
    in_sync_s: float = float("nan")
    idle_pct: tuple[float, ...] = ()
    idle_us_per_replica: tuple[float, ...] = ()
    failover_s: float = float("nan")
    rejoin_s: float = float("nan")
    scrape_ms: float = float("nan")
    consumer_us_per_partition: float = float("nan")
    consumer_fetches_per_s: float = float("nan")
    consumer_sessions: float = float("nan")  # consumer fetch sessions held after the window
    consumer_looked_per_s: float = float("nan")  # session partitions looked at per second
    consumer_received: int = -1  # records the consumer received in the window (--consumer-rate)
    fetches_per_s: tuple[float, ...] = ()  # cluster: Fetch requests each broker answered
    error: str = ""
    fds: int = -1  # --single: the broker's open descriptors after the idle window
    offline: int = -1  # --single: partitions without a leader in a Metadata answer then
    unwritable: int = -1  # --single: partitions whose one record was not acknowledged


def _measure(tree: Path, partitions: int, args: argparse.Namespace, *, single: bool = False) -> Figures:
    """Run one tree at one count in a child process whose sys.path starts at the tree (the
    brokers it starts run that tree's code)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.bench_partitions",
            "--one-single" if single else "--one",
            str(partitions),
            "--idle-seconds",
            str(args.idle_seconds),
            "--settle",
            str(args.settle),
            *(["--consumer"] if getattr(args, "consumer", False) else []),
            *(
                ["--consumer-client", args.consumer_client, "--consumer-rate", str(args.consumer_rate)]
                if getattr(args, "consumer", False)
                and (args.consumer_client != "confluent" or args.consumer_rate)
                else []
            ),
            *(["--no-failover"] if getattr(args, "no_failover", False) else []),
            *(["--profile", str(Path(args.profile).resolve())] if getattr(args, "profile", "") else []),
        ],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=args.timeout,
    )
    for line in out.stdout.splitlines():
        if line.startswith("FIGURES "):
            return eval(line[len("FIGURES ") :], {"Figures": Figures, "nan": float("nan")})
    return Figures(error=(out.stderr.strip().splitlines() or ["no figures"])[-1][:200])


def one(
    partitions: int, idle_seconds: float, settle: float, failover: bool = True, profile: str = ""
) -> Figures:
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.broker.clusterlib import Cluster, wait_until
    from tests.broker.etcdlib import EtcdProcess

    fig = Figures()
    with tempfile.TemporaryDirectory(prefix="bench-partitions-") as tmp:
        root = Path(tmp)
        etcd = EtcdProcess(root / "etcd").start()
        cluster = Cluster(root, etcd, env=PRODUCT_ENV, proxied=False)
        try:
            cluster.start()
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            t0 = time.monotonic()
            topic = NewTopic(
                TOPIC, num_partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"}
            )
            try:
                admin.create_topics([topic], request_timeout=120)[TOPIC].result(timeout=180)
            except Exception as exc:
                fig.error = f"CreateTopics: {exc}"
                return fig
            fig.answered_s = time.monotonic() - t0
            wait_until(lambda: cluster.fully_replicated(TOPIC), "in sync", timeout=300, step=0.25)
            fig.in_sync_s = time.monotonic() - t0

            time.sleep(settle)
            pids = {i: n.proc.pid for i, n in cluster.nodes.items() if n.proc is not None}
            # Fetch counts from /metrics before and after the window (a scrape costs the
            # broker CPU: outside the window).
            f0 = {i: _fetch_count(cluster.nodes[i].http_url) for i in pids}
            before = {i: cpu_seconds(p) for i, p in pids.items()}
            w0 = time.monotonic()
            time.sleep(idle_seconds)
            wall = time.monotonic() - w0
            used = {i: cpu_seconds(p) - before[i] for i, p in pids.items()}
            w1 = time.monotonic()
            fig.fetches_per_s = tuple(
                round((_fetch_count(cluster.nodes[i].http_url) - f0[i]) / (w1 - w0), 1) for i in sorted(pids)
            )
            if profile:
                _profile(pids, cluster.controller(), idle_seconds, profile)
            replicas = {i: 0 for i in pids}
            for r in cluster.view().topics[TOPIC].value.partitions:
                for b in r:
                    replicas[b] += 1
            fig.idle_pct = tuple(round(100 * used[i] / wall, 2) for i in sorted(pids))
            fig.idle_us_per_replica = tuple(
                round(1e6 * used[i] / wall / max(replicas[i], 1), 2) for i in sorted(pids)
            )

            if not failover:
                return fig
            victim = cluster.controller()
            t_kill = time.monotonic()
            cluster.nodes[victim].kill()

            def led() -> bool:
                view = cluster.view()
                va = view.topics[TOPIC].value
                for p in range(len(va.partitions)):
                    s = view.partition_state(TOPIC, p)
                    if s is None or s.leader == victim or s.leader not in view.brokers:
                        return False
                return True

            wait_until(led, "every partition led again", timeout=300, step=0.25)
            fig.failover_s = time.monotonic() - t_kill

            t_start = time.monotonic()
            cluster.nodes[victim].start(timeout=300)
            wait_until(lambda: cluster.fully_replicated(TOPIC), "rejoined", timeout=300, step=0.25)
            fig.rejoin_s = time.monotonic() - t_start
        finally:
            cluster.close()
            etcd.kill()
    return fig


def _profile(pids: dict[int, int], controller: int, seconds: float, out: str) -> None:
    """py-spy (500 Hz, without pausing the process) of one idle broker that is not the
    controller, after the measured window (py-spy's own CPU would disturb the figure),
    written as raw folded stacks to ``out``."""
    pid = next(p for i, p in sorted(pids.items()) if i != controller)
    cmd = ["py-spy", "record", "--nonblocking", "-r", "500", "-d", str(int(seconds)), "--pid", str(pid)]
    try:
        done = subprocess.run(
            [*cmd, "-o", out, "-f", "raw"], capture_output=True, text=True, timeout=seconds + 60
        )
    except subprocess.TimeoutExpired:
        print("py-spy did not finish", file=sys.stderr, flush=True)
        return
    if done.returncode != 0:
        print(f"py-spy failed: {done.stderr.strip()[-300:]}", file=sys.stderr, flush=True)


def _scrape_ms(http_url: str, pid: int, scrapes: int = 5) -> float:
    """The broker's CPU per ``/metrics`` scrape (a Prometheus every 15 s pays it 4 times a
    minute; its per-partition gauges grow with the partition count)."""
    import urllib.request

    c0 = cpu_seconds(pid)
    for _ in range(scrapes):
        urllib.request.urlopen(f"{http_url}/metrics", timeout=60).read()
    return round(1000 * (cpu_seconds(pid) - c0) / scrapes, 1)


def _metric_value(http_url: str, prefix: str) -> float:
    """The first sample of ``/metrics`` whose line starts with ``prefix`` (nan: none)."""
    import urllib.request

    text = urllib.request.urlopen(f"{http_url}/metrics", timeout=30).read().decode()
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


def _fetch_count(http_url: str) -> float:
    """Fetch requests the broker answered so far (its request latency histogram's count)."""
    n = _metric_value(http_url, 'strata_request_latency_seconds_count{api="Fetch"}')
    return 0.0 if n != n else n


def _looked(http_url: str) -> float:
    """Session partitions consumers' incremental fetches looked at (nan: a tree without it)."""
    return _metric_value(http_url, "strata_fetch_session_partitions_looked_total ")


class _Producer:
    """``rate`` records/s (100 bytes) to partition 0 from a thread, until ``stop``."""

    def __init__(self, bootstrap: str, rate: float) -> None:
        import threading

        from confluent_kafka import Producer

        self.rate = rate
        self._prod = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 0})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        if rate > 0:
            self._thread.start()

    def _run(self) -> None:
        period = 1 / self.rate
        due = time.monotonic()
        while not self._stop.is_set():
            self._prod.produce(TOPIC, b"y" * 100, partition=0)
            self._prod.poll(0)
            due += period
            time.sleep(max(0.0, due - time.monotonic()))

    def stop(self) -> None:
        if self.rate > 0:
            self._stop.set()
            self._thread.join()
            self._prod.flush(30)


def _idle_consumer(
    b: object,
    partitions: int,
    idle_seconds: float,
    settle: float,
    fig: Figures,
    client: str = "confluent",
    rate: float = 0.0,
) -> None:
    """A consumer of every partition, at its end (librdkafka: sessionless full fetches;
    kafka-python: a fetch session), idle or receiving ``rate`` records/s in partition 0:
    the broker's extra CPU."""
    import threading

    from tests.brokers import BrokerProcess

    assert isinstance(b, BrokerProcess) and b.proc is not None
    pid = b.proc.pid
    producer = _Producer(b.bootstrap, rate)
    try:
        time.sleep(settle if rate else 0)
        c0, w0 = cpu_seconds(pid), time.monotonic()
        time.sleep(idle_seconds)
        without = (cpu_seconds(pid) - c0) / (time.monotonic() - w0)
        received = [0]
        if client == "kafka-python":
            from kafka import KafkaConsumer
            from kafka import TopicPartition as KTP

            kc = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
            tps = [KTP(TOPIC, p) for p in range(partitions)]
            kc.assign(tps)
            kc.seek_to_end(*tps)

            def poll_once() -> None:
                received[0] += sum(len(r) for r in kc.poll(timeout_ms=200).values())

            close = kc.close
        else:
            from confluent_kafka import OFFSET_END, Consumer, TopicPartition

            settings = {
                "bootstrap.servers": b.bootstrap,
                "group.id": "bench-idle",
                "enable.auto.commit": False,
            }
            cc = Consumer({**settings, "log_level": 0})
            cc.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in range(partitions)])

            def poll_once() -> None:
                m = cc.poll(0.2)
                if m is not None and m.error() is None:
                    received[0] += 1

            close = cc.close
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                poll_once()

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            time.sleep(settle)
            f0, l0, r0 = _fetch_count(b.http_url), _looked(b.http_url), received[0]
            c0, w0 = cpu_seconds(pid), time.monotonic()
            time.sleep(idle_seconds)
            wall = time.monotonic() - w0
            with_consumer = (cpu_seconds(pid) - c0) / wall
            fig.consumer_fetches_per_s = round((_fetch_count(b.http_url) - f0) / wall, 2)
            fig.consumer_looked_per_s = round((_looked(b.http_url) - l0) / wall, 1)
            fig.consumer_received = received[0] - r0
            fig.consumer_sessions = _metric_value(b.http_url, 'strata_fetch_sessions{kind="consumer"} ')
        finally:
            stop.set()
            poller.join()
            close()
    finally:
        producer.stop()
    fig.consumer_us_per_partition = round(1e6 * (with_consumer - without) / partitions, 2)


@contextmanager
def _single_node_topic(
    partitions: int, prefix: str, request_timeout: int
) -> Iterator[tuple[Any, float, float]]:
    """A fresh single node (``strata serve``, embedded store, product defaults, tiering on)
    with topic ``TOPIC`` of ``partitions`` created: (the broker, when CreateTopics was sent
    (``time.monotonic``), seconds until it answered). The broker is killed on exit."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.brokers import BrokerProcess

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        b = BrokerProcess(Path(tmp) / "data", env={"STRATA_LOG_REMOTE_STORAGE_ENABLE": "true"})
        b.start(timeout=120)
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
            t0 = time.monotonic()
            topic = NewTopic(TOPIC, num_partitions=partitions, replication_factor=1)
            created = admin.create_topics([topic], request_timeout=request_timeout)[TOPIC]
            created.result(timeout=request_timeout + 60)
            answered_s = time.monotonic() - t0
            del admin, created  # no admin client's connection during what the caller measures
            yield b, t0, answered_s
        finally:
            b.kill()


def one_single(
    partitions: int,
    idle_seconds: float,
    settle: float,
    consumer: bool = False,
    client: str = "confluent",
    rate: float = 0.0,
) -> Figures:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    fig = Figures()
    with _single_node_topic(partitions, "bench-partitions-single-", 120) as (b, t0, answered_s):
        fig.answered_s = answered_s
        prod = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "log_level": 0,
                "linger.ms": 50,
                "message.timeout.ms": 60_000,
            }
        )
        failed: set[int] = set()

        def delivered(err: object, msg: Any) -> None:
            if err is not None:
                failed.add(msg.partition())

        for p in range(partitions):
            prod.produce(TOPIC, b"x" * 100, partition=p, on_delivery=delivered)
        prod.flush(120)
        fig.unwritable = len(failed)
        fig.in_sync_s = time.monotonic() - t0
        del prod
        time.sleep(settle)
        assert b.proc is not None
        c0, w0 = cpu_seconds(b.proc.pid), time.monotonic()
        time.sleep(idle_seconds)
        used, wall = cpu_seconds(b.proc.pid) - c0, time.monotonic() - w0
        fig.idle_pct = (round(100 * used / wall, 2),)
        fig.idle_us_per_replica = (round(1e6 * used / wall / partitions, 2),)
        fig.fds = len(os.listdir(f"/proc/{b.proc.pid}/fd"))
        fig.scrape_ms = _scrape_ms(b.http_url, b.proc.pid)
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
        meta = admin.list_topics(TOPIC, timeout=60)
        parts = meta.topics[TOPIC].partitions
        fig.offline = partitions - len(parts) + sum(1 for m in parts.values() if m.leader < 0 or m.error)
        if consumer:
            _idle_consumer(b, partitions, idle_seconds, settle, fig, client, rate)
    return fig


def _single(trees: list[Path], args: argparse.Namespace) -> None:
    print(
        f"single node, tiering on, product defaults; idle {args.idle_seconds:.0f} s after {args.settle:.0f} s"
    )
    for n in (int(x) for x in args.partitions.split(",")):
        for r in range(args.rounds):
            for tree in trees:
                f = _measure(tree, n, args, single=True)
                name = tree.name or str(tree)
                if f.error:
                    print(f"{n:>6} partitions  round {r + 1} {name}: {f.error}")
                    continue
                load = os.getloadavg()[0]
                what = "an idle" if not args.consumer_rate else f"a {args.consumer_rate:g} records/s"
                consumer = (
                    f"; {what} {args.consumer_client} consumer of every partition adds "
                    f"{f.consumer_us_per_partition:.1f} µs/s per partition ({f.consumer_fetches_per_s:.1f} "
                    f"Fetch/s, {f.consumer_sessions:.0f} sessions, {f.consumer_looked_per_s:.0f} session "
                    f"partitions looked at/s, {f.consumer_received} records received)"
                    if args.consumer
                    else ""
                )
                print(
                    f"{n:>6} partitions  round {r + 1} {name}: created {f.answered_s:.1f} s; idle "
                    f"{f.idle_pct[0]:.2f} % of a core ({f.idle_us_per_replica[0]:.1f} µs/s per partition), "
                    f"{f.fds} open files, {f.offline} partitions without a leader, "
                    f"{f.unwritable} not writable, {f.scrape_ms:.0f} ms of CPU per /metrics scrape"
                    f"{consumer}, load {load:.1f}",
                    flush=True,
                )


# --- --early-producer (issue 35, round 7) ---------------------------------------------------


@dataclass
class Early:
    answered_s: float = float("nan")  # CreateTopics sent -> answered
    acked: int = 0
    timed_out: int = 0  # records that failed (message.timeout.ms passed, or another error)
    all_acked_s: float = float("nan")  # CreateTopics sent -> the last record acknowledged
    error: str = ""


def one_early(partitions: int, message_timeout_ms: int) -> Early:
    """A fresh single node (``strata serve``, embedded store, product defaults, tiering on
    as ``--single``), one topic of ``partitions``, and a confluent-kafka producer (acks=all)
    that sends one record to each partition the moment CreateTopics answers."""
    from confluent_kafka import Producer

    e = Early()
    with _single_node_topic(partitions, "bench-partitions-early-", 180) as (b, t0, answered_s):
        e.answered_s = answered_s
        prod = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "log_level": 0,
                "acks": "all",
                "linger.ms": 50,
                "message.timeout.ms": message_timeout_ms,
            }
        )
        last = [t0]

        def delivered(err: object, msg: Any) -> None:
            if err is not None:
                e.timed_out += 1
            else:
                e.acked += 1
                last[0] = time.monotonic()

        for p in range(partitions):
            prod.produce(TOPIC, b"x" * 100, partition=p, on_delivery=delivered)
        prod.flush(message_timeout_ms / 1000 + 60)
        if e.acked == partitions:
            e.all_acked_s = last[0] - t0
    return e


def _early(trees: list[Path], args: argparse.Namespace) -> None:
    print(
        "single node, product defaults, tiering on; a producer (acks=all, message.timeout.ms "
        f"{args.message_timeout_ms}) sends one record per partition when CreateTopics answers"
    )
    for n in (int(x) for x in args.partitions.split(",")):
        for r in range(args.rounds):
            for tree in trees:
                load = os.getloadavg()[0]
                out = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "bench.bench_partitions",
                        "--one-early",
                        str(n),
                        "--message-timeout-ms",
                        str(args.message_timeout_ms),
                    ],
                    cwd=tree,
                    env={**os.environ, "PYTHONPATH": str(tree)},
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                )
                e = next(
                    (
                        eval(line[len("EARLY ") :], {"Early": Early, "nan": float("nan")})
                        for line in out.stdout.splitlines()
                        if line.startswith("EARLY ")
                    ),
                    Early(error=(out.stderr.strip().splitlines() or ["no figures"])[-1][:200]),
                )
                name = tree.name or str(tree)
                if e.error:
                    print(f"{n:>6} partitions  round {r + 1} {name}: {e.error}", flush=True)
                    continue
                print(
                    f"{n:>6} partitions  round {r + 1} {name}: CreateTopics answered {e.answered_s:.1f} s; "
                    f"{e.acked} acked, {e.timed_out} timed out; all acked at {e.all_acked_s:.1f} s; "
                    f"load {load:.1f} -> {os.getloadavg()[0]:.1f}",
                    flush=True,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="1000,3000,10000")
    ap.add_argument("--roots", default=str(ROOT), help="comma-separated code trees (first = baseline)")
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=900.0, help="bound of one tree at one count")
    ap.add_argument("--single", action="store_true", help="the single node's idle CPU instead")
    ap.add_argument("--rounds", type=int, default=1, help="--single: alternations of the trees")
    ap.add_argument("--consumer", action="store_true", help="--single: then an idle consumer's extra CPU")
    ap.add_argument("--consumer-client", choices=("confluent", "kafka-python"), default="confluent")
    ap.add_argument("--consumer-rate", type=float, default=0.0, help="--consumer: records/s to partition 0")
    ap.add_argument("--no-failover", action="store_true", help="cluster: creation and idle only")
    ap.add_argument("--profile", default="", help="cluster: py-spy stacks of an idle follower")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--one-single", type=int, help=argparse.SUPPRESS)
    # --early-producer (issue 35, round 7)
    ap.add_argument("--early-producer", action="store_true", help="single node: a producer at creation")
    ap.add_argument("--message-timeout-ms", type=int, default=60_000, help="--early-producer's producer")
    ap.add_argument("--one-early", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_early:
        print("EARLY", repr(one_early(args.one_early, args.message_timeout_ms)), flush=True)
        return
    if args.early_producer:
        _early([Path(r).resolve() for r in args.roots.split(",")], args)
        return
    if args.one:
        fig = one(args.one, args.idle_seconds, args.settle, not args.no_failover, args.profile)
        print("FIGURES", repr(fig), flush=True)
        return
    if args.one_single:
        fig = one_single(
            args.one_single,
            args.idle_seconds,
            args.settle,
            args.consumer,
            args.consumer_client,
            args.consumer_rate,
        )
        print("FIGURES", repr(fig), flush=True)
        return
    trees = [Path(r).resolve() for r in args.roots.split(",")]
    if args.single:
        _single(trees, args)
        return
    print(
        f"3 brokers on etcd, RF=3, product defaults (session timeout {SESSION_TIMEOUT_S:.0f} s), no tiering"
    )
    for n in (int(x) for x in args.partitions.split(",")):
        base: Figures | None = None
        for tree in trees:
            f = _measure(tree, n, args)
            name = tree.name or str(tree)
            if f.error:
                print(f"{n:>6} partitions  {name}: {f.error}")
                continue
            fo_after = f.failover_s - SESSION_TIMEOUT_S
            print(
                f"{n:>6} partitions  {name}: create answered {f.answered_s:.1f} s, in sync "
                f"{f.in_sync_s:.1f} s; idle {'/'.join(f'{x:.1f}' for x in f.idle_pct)} % of a core "
                f"({'/'.join(f'{x:.1f}' for x in f.idle_us_per_replica)} µs/s per replica); "
                f"failover {f.failover_s:.1f} s from the kill ({fo_after:.1f} s after the session "
                f"timeout); rejoin {f.rejoin_s:.1f} s; Fetch/s while idle "
                f"{'/'.join(f'{x:.1f}' for x in f.fetches_per_s)}; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            if base is None:
                base = f
            else:
                print(
                    f"{'':>17} ratios to {trees[0].name}: in sync {f.in_sync_s / base.in_sync_s:.2f}, "
                    f"failover {f.failover_s / base.failover_s:.2f}, rejoin {f.rejoin_s / base.rejoin_s:.2f}"
                )


if __name__ == "__main__":
    main()
