"""Beyond this machine (issue 35): the controller's work and a failover at 100,000
partitions, simulated against a real etcd.

    python -m bench.bench_partitions_sim [--partitions 10000,100000] [--brokers 6]
        [--topics 10] [--steady-seconds 30]

For each partition count P, a fresh etcd (Debian etcd-server, single member, etcd's own
default raft timings: heartbeat 100 ms, election timeout 1,000 ms, not the tests'
shortened 25/250 ms; default limits: --max-request-bytes 1.5 MiB, --max-txn-ops 128,
--quota-backend-bytes 2 GiB) and, in this process:

- the real ``MetadataClient`` + ``Controller`` of broker 1 (it watches the whole cluster
  prefix into its ``ClusterView``, as every broker does);
- N-1 stand-in brokers 2..N: a ``MetadataClient`` each, on its own etcd channel, that only
  registers (the real registration transaction, lease TTL 10 s as
  broker.session.timeout.ms' default) and keeps its lease alive (the real keeper: a
  thread each, ``broker.etcd_lease``): no log, no Kafka listener, and no watch (the
  watch fan-out to the other brokers is accounted on paper from the bytes the
  controller's own watch receives).

Phases, each printed:

  create    ``--topics`` topics of P/topics partitions, RF 3, through the real create path
            (``broker.controller.create_topic``: placement, then the topic key and the
            partition states in transactions of max_txn_ops); wall time, etcd
            transactions and operations, etcd's key count, db size and keys/bytes per
            partition (etcd's /metrics and /v3/maintenance/status)
  steady    ``--steady-seconds`` with nothing happening: etcd puts/s, txns/s and bytes/s
            received, the controller's reconcile passes and this process's CPU
  failover  stand-in N's keeper stopped without revoking (a crash): its lease expires
            after the TTL; from the expiry (its key gone from the controller's view) to
            every partition led by a live broker, and to the dead broker out of every ISR;
            etcd transactions, puts, bytes in and out, and CPU for it
  listing   a fresh ``MetadataClient.start`` (what a starting broker does, and a watch
            whose revision was compacted): the time to a ready view (the whole cluster
            prefix read in ranges of 2,048 keys at one revision, decoded a chunk at a time
            on the event loop) and its bytes

Each phase also prints the event loop's longest stall (the lease keepers refresh from
threads of their own since issue 35's round 6; before, they shared the loop).

This process's CPU includes the stand-ins' keep-alives (a few per second, negligible) and
the controller's watch decoding. Wall times are this machine's (2 shared cores): print the
load average with them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from broker.controller import Controller, create_topic  # noqa: E402
from broker.etcd import EtcdClient  # noqa: E402
from broker.keys import KeyLayout  # noqa: E402
from broker.metadata import MetadataClient  # noqa: E402
from broker.metadata_store import Compare, Op, Put, TxnResult  # noqa: E402
from tests.broker.etcdlib import EtcdProcess  # noqa: E402

LEASE_TTL_S = 10  # broker.session.timeout.ms default
RF = 3
CLUSTER = "sim"

METRICS = (
    "etcd_mvcc_put_total",
    "etcd_mvcc_txn_total",
    "etcd_mvcc_range_total",
    "etcd_debugging_mvcc_keys_total",
    "etcd_mvcc_db_total_size_in_bytes",
    "etcd_network_client_grpc_received_bytes_total",
    "etcd_network_client_grpc_sent_bytes_total",
)


class CountingEtcd(EtcdClient):
    """The real etcd client, counting the transactions this process sends."""

    txns = 0
    failed = 0
    ops = 0
    put_bytes = 0
    max_txn_bytes = 0

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult:
        size = sum(len(op.key) + len(op.value) for op in success if isinstance(op, Put))
        size += sum(len(c.key) + 16 for c in compare)
        self.txns += 1
        self.ops += len(success)
        self.put_bytes += size
        self.max_txn_bytes = max(self.max_txn_bytes, size)
        res = await super().txn(compare, success, failure)
        if not res.succeeded:
            self.failed += 1
        return res

    def counts(self) -> dict[str, float]:
        return {
            "txns": self.txns,
            "failed": self.failed,
            "ops": self.ops,
            "put_bytes": self.put_bytes,
        }


def etcd_metrics(etcd: EtcdProcess) -> dict[str, float]:
    with urllib.request.urlopen(f"{etcd.client_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        base = name.split("{", 1)[0]
        if base in METRICS:
            out[base] = out.get(base, 0.0) + float(value)
    return out


def etcd_status(etcd: EtcdProcess) -> dict[str, int]:
    req = urllib.request.Request(f"{etcd.client_url}/v3/maintenance/status", data=b"{}", method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        raw = json.loads(resp.read())
    return {k: int(raw.get(k, 0)) for k in ("dbSize", "dbSizeInUse")}


def diff(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: b.get(k, 0.0) - a.get(k, 0.0) for k in b}


@dataclass
class Passes:
    """The controller's reconcile passes: count, wall seconds inside them, states written."""

    count: int = 0
    wall: float = 0.0
    written: int = 0
    longest: float = 0.0
    log: list[tuple[float, float, int]] = field(default_factory=list)


def time_reconcile(ctl: Controller, passes: Passes) -> None:
    inner: Callable[..., Awaitable[int]] = ctl.reconcile

    async def timed(token: object) -> int:
        t = time.monotonic()
        n = await inner(token)
        dt = time.monotonic() - t
        passes.count += 1
        passes.wall += dt
        passes.written += n
        passes.longest = max(passes.longest, dt)
        passes.log.append((t, dt, n))
        return n

    ctl.reconcile = timed  # type: ignore[method-assign,assignment]


async def wait_until(pred: Callable[[], bool], timeout: float, every: float = 0.02) -> float:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached in time")
        await asyncio.sleep(every)
    return time.monotonic()


class StallMonitor:
    """The event loop's longest stall: a task that sleeps 50 ms and records how late it
    woke. The lease keepers ran on this loop before they had threads of their own: a
    stall over TTL - refresh interval (10 - 3.3 s) lost every registration of the
    process. Now a stall loses none unless it exceeds three TTLs (``broker.etcd_lease``)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.05)
            self.longest = max(self.longest, time.monotonic() - t - 0.05)

    def take(self) -> float:
        """The longest stall since the last take."""
        out, self.longest = self.longest, 0.0
        return out

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def cpu() -> float:
    return time.process_time()


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def count_repairs(client: MetadataClient) -> list[int]:
    """Count the controller's ``create_partition_state_if_absent`` calls (tried, written)."""
    counts = [0, 0]
    inner = client.create_partition_state_if_absent

    async def counted(*args: Any, **kwargs: Any) -> bool:
        counts[0] += 1
        ok = await inner(*args, **kwargs)
        counts[1] += ok
        return ok

    client.create_partition_state_if_absent = counted  # type: ignore[method-assign]
    return counts


async def simulate(
    partitions: int, brokers: int, topics: int, steady_s: float, work: Path, *, late_controller: bool
) -> None:
    etcd = EtcdProcess(work / "etcd", heartbeat_ms=100, election_ms=1000).start()
    layout = KeyLayout(CLUSTER)
    clients: list[MetadataClient] = []
    stores: list[EtcdClient] = []
    ctl: Controller | None = None
    stalls = StallMonitor()
    try:
        store = await CountingEtcd(etcd.endpoint).connect()
        stores.append(store)
        assert isinstance(store, CountingEtcd)
        main = MetadataClient(store, layout, lease_ttl=LEASE_TTL_S)
        clients.append(main)
        await main.start()
        await main.register("127.0.0.1", 9092, 8080, broker_id=1)
        repairs = count_repairs(main)
        passes = Passes()

        async def start_controller() -> Controller:
            c = Controller(main)
            time_reconcile(c, passes)
            c.start()
            await asyncio.wait_for(c.active.wait(), 30)
            return c

        if not late_controller:
            ctl = await start_controller()
        standins: dict[int, MetadataClient] = {}
        for b in range(2, brokers + 1):
            s = await EtcdClient(etcd.endpoint).connect()
            stores.append(s)
            c = MetadataClient(s, layout, lease_ttl=LEASE_TTL_S)
            await c.register("127.0.0.1", 9092 + b, 8080 + b, broker_id=b)
            clients.append(c)
            standins[b] = c
        view = main.view
        await wait_until(lambda: len(view.brokers) == brokers, 30)

        # --- create ---------------------------------------------------------------------
        per = partitions // topics
        m0, s0, c0, k0 = etcd_metrics(etcd), etcd_status(etcd), store.counts(), cpu()
        t0 = time.monotonic()
        for i in range(topics):
            await create_topic(main, f"t{i}", per, RF)
        t_written = time.monotonic()
        await wait_until(lambda: len(view.partitions) == per * topics, 1800)
        t_seen = time.monotonic()
        if ctl is None:
            ctl = await start_controller()
        # Let the controller's passes over the new topics finish before measuring.
        await asyncio.sleep(2.0)
        m1, s1, c1, k1 = etcd_metrics(etcd), etcd_status(etcd), store.counts(), cpu()
        dm, dc = diff(m0, m1), diff(c0, c1)
        total = per * topics
        topic_key = layout.topic("t0")
        topic_bytes = len(topic_key) + len(view.topics["t0"].value.to_json())
        st = view.partitions[("t0", 0)].value
        state_bytes = len(layout.partition_state("t0", 0)) + len(st.to_json())
        print(f"\n== P={total:,} ({topics} topics x {per:,}, RF {RF}, {brokers} brokers), load {load()}")
        print(
            f"create    {t_written - t0:7.2f} s written, {t_seen - t0:7.2f} s in the controller's view;"
            f" {dc['txns']:.0f} txns ({dc['failed']:.0f} failed), {dc['ops']:.0f} ops,"
            f" largest txn {store.max_txn_bytes / 1024:.1f} KiB; process CPU {k1 - k0:.2f} s;"
            f" controller's repairs of missing states {repairs[0]:,} ({repairs[1]:,} written)"
            + (" [controller started after the creation]" if late_controller else "")
        )
        print(
            f"          etcd: +{dm.get('etcd_debugging_mvcc_keys_total', 0):.0f} keys,"
            f" {dm.get('etcd_mvcc_put_total', 0):.0f} puts, {dm.get('etcd_mvcc_txn_total', 0):.0f} txns;"
            f" db {s0['dbSize'] / 2**20:.1f} -> {s1['dbSize'] / 2**20:.1f} MiB"
            f" (in use {s1['dbSizeInUse'] / 2**20:.1f} MiB);"
            f" received {dm.get('etcd_network_client_grpc_received_bytes_total', 0) / 2**20:.1f} MiB,"
            f" sent {dm.get('etcd_network_client_grpc_sent_bytes_total', 0) / 2**20:.1f} MiB"
        )
        print(
            f"          per partition: {dm.get('etcd_debugging_mvcc_keys_total', 0) / total:.3f} keys,"
            f" state key+value {state_bytes} B, topic key {topic_bytes / per:.1f} B"
            f" ({topic_bytes / 1024:.1f} KiB per {per:,}-partition topic),"
            f" db {(s1['dbSizeInUse'] - s0['dbSizeInUse']) / total:.0f} B in use"
        )
        print(
            f"          controller passes so far {passes.count}, longest {passes.longest * 1000:.0f} ms;"
            f" event loop's longest stall {stalls.take():.2f} s"
        )

        # --- steady ---------------------------------------------------------------------
        p0 = Passes(passes.count, passes.wall, passes.written)
        m0, c0, k0 = etcd_metrics(etcd), store.counts(), cpu()
        t0 = time.monotonic()
        await asyncio.sleep(steady_s)
        dt = time.monotonic() - t0
        m1, c1, k1 = etcd_metrics(etcd), store.counts(), cpu()
        dm = diff(m0, m1)
        print(
            f"steady    {dt:.0f} s: etcd {dm.get('etcd_mvcc_put_total', 0) / dt:.2f} puts/s,"
            f" {dm.get('etcd_mvcc_txn_total', 0) / dt:.2f} txns/s,"
            f" {dm.get('etcd_mvcc_range_total', 0) / dt:.2f} ranges/s,"
            f" received {dm.get('etcd_network_client_grpc_received_bytes_total', 0) / dt:.0f} B/s,"
            f" sent {dm.get('etcd_network_client_grpc_sent_bytes_total', 0) / dt:.0f} B/s"
        )
        n = passes.count - p0.count
        print(
            f"          controller: {n} passes ({(passes.wall - p0.wall) / max(n, 1) * 1000:.0f} ms each),"
            f" {passes.written - p0.written} states written;"
            f" process CPU {(k1 - k0) / dt * 100:.1f} % of a core; event loop's longest stall"
            f" {stalls.take():.2f} s"
        )

        # --- failover -------------------------------------------------------------------
        victim = brokers
        led = sum(1 for v in view.partitions.values() if v.value.leader == victim)
        in_isr = sum(1 for v in view.partitions.values() if victim in v.value.isr)
        pending_lead = {k for k, v in view.partitions.items() if v.value.leader == victim}
        pending_isr = {k for k, v in view.partitions.items() if victim in v.value.isr}
        # Counted from before the kill (nothing is written at steady state), so that the
        # controller's first batches right after the expiry are in.
        p0 = Passes(passes.count, passes.wall, passes.written)
        m0, c0 = etcd_metrics(etcd), store.counts()
        await standins[victim].close(deregister=False)  # a crash: the lease runs out
        t_kill = time.monotonic()
        t_exp = await wait_until(lambda: victim not in view.brokers, LEASE_TTL_S + 30)
        k0 = cpu()
        e0 = ctl.elections

        def led_done() -> bool:
            done = [k for k in pending_lead if (s := view.partitions.get(k)) and s.value.leader != victim]
            pending_lead.difference_update(done)
            return not pending_lead

        def isr_done() -> bool:
            done = [k for k in pending_isr if (s := view.partitions.get(k)) and victim not in s.value.isr]
            pending_isr.difference_update(done)
            return not pending_isr

        t_led = await wait_until(led_done, 600, 0.05)
        t_isr = await wait_until(isr_done, 600, 0.05)
        m1, c1, k1 = etcd_metrics(etcd), store.counts(), cpu()
        dm, dc = diff(m0, m1), diff(c0, c1)
        n = passes.count - p0.count
        print(
            f"failover  broker {victim} led {led:,} and was in {in_isr:,} ISRs; lease expired"
            f" {t_exp - t_kill:.1f} s after the kill; expiry -> all led by live brokers"
            f" {t_led - t_exp:.2f} s, -> out of every ISR {t_isr - t_exp:.2f} s"
        )
        print(
            f"          {dc['txns']:.0f} txns ({dc['failed']:.0f} failed), {dc['ops']:.0f} puts sent,"
            f" {dc['put_bytes'] / 2**20:.2f} MiB in them; etcd {dm.get('etcd_mvcc_put_total', 0):.0f} puts,"
            f" received {dm.get('etcd_network_client_grpc_received_bytes_total', 0) / 2**20:.2f} MiB,"
            f" sent {dm.get('etcd_network_client_grpc_sent_bytes_total', 0) / 2**20:.2f} MiB"
            f" (the controller's watch: each other broker's watch receives as much)"
        )
        print(
            f"          controller: {ctl.elections - e0:,} elections, {n} passes"
            f" ({(passes.wall - p0.wall):.2f} s inside them, longest {passes.longest * 1000:.0f} ms);"
            f" process CPU {k1 - k0:.2f} s; load {load()}; event loop's longest stall"
            f" {stalls.take():.2f} s"
        )
        s2 = etcd_status(etcd)
        print(
            f"          etcd db after the failover {s2['dbSize'] / 2**20:.1f} MiB"
            f" (in use {s2['dbSizeInUse'] / 2**20:.1f} MiB; nothing compacts etcd's history)"
        )
        # --- listing: what a (re)starting broker reads --------------------------------------
        m0, k0 = etcd_metrics(etcd), cpu()
        t0 = time.monotonic()
        fresh_store = await EtcdClient(etcd.endpoint, timeout=30.0).connect()
        stores.append(fresh_store)
        fresh = MetadataClient(fresh_store, layout, lease_ttl=LEASE_TTL_S)
        await fresh.start(timeout=120)
        t1 = time.monotonic()
        m1, k1 = etcd_metrics(etcd), cpu()
        await fresh.close(deregister=False)
        sent = diff(m0, m1).get("etcd_network_client_grpc_sent_bytes_total", 0)
        print(
            f"listing   a starting broker's watch (the whole prefix in ranges of 2,048 keys, then"
            f" the watch): {t1 - t0:.2f} s to a ready view of {len(fresh.view.partitions):,} partitions,"
            f" {sent / 2**20:.1f} MiB sent by etcd, process CPU {k1 - k0:.2f} s;"
            f" event loop's longest stall {stalls.take():.2f} s"
        )

        lost = {c.broker_id: c.reregistrations for c in clients if c.reregistrations}
        print(
            f"leases    registrations lost (lease expired, registered again) by live brokers over the"
            f" run: {lost or 'none'}"
        )
        if lost:
            # etcd's own view of why: slow applies and lease revocations, from its log.
            lines = etcd.log_tail(100000).splitlines()
            slow = [ln for ln in lines if "took too long" in ln or "apply request" in ln]
            print(f"          etcd log: {len(lines)} lines, {len(slow)} 'took too long' warnings; last:")
            for ln in lines[-5:]:
                print(f"            {ln[:300]}")
    finally:
        if ctl is not None:
            await ctl.stop(resign=False)
        for c in clients:
            with contextlib.suppress(Exception):
                await c.close(deregister=False)
        for s in stores:
            with contextlib.suppress(Exception):
                await s.close()
        await stalls.stop()
        etcd.kill()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--partitions", default="10000,100000", help="comma-separated partition counts")
    ap.add_argument("--brokers", type=int, default=6)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--steady-seconds", type=float, default=30.0)
    ap.add_argument(
        "--late-controller",
        action="store_true",
        help="start the controller only after the topics are created (the creation's cost without"
        " the controller's concurrent repairs of states not written yet)",
    )
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.partitions.split(",") if x.strip()]
    if args.brokers < RF + 1:
        ap.error(f"--brokers must be at least {RF + 1} (RF {RF} after one dies)")
    for p in counts:
        if p % args.topics or not 1 <= p // args.topics <= 10000:
            ap.error(f"{p} partitions do not split into {args.topics} topics of 1..10,000")
    start = time.monotonic()
    for p in counts:
        work = Path(tempfile.mkdtemp(prefix="strata-sim-"))
        try:
            asyncio.run(
                simulate(
                    p,
                    args.brokers,
                    args.topics,
                    args.steady_seconds,
                    work,
                    late_controller=args.late_controller,
                )
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\ntotal {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
