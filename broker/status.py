"""``strata cluster status``: brokers, controller, partition leaders, ISR,
under-replicated partitions and reassignments in progress, read straight from etcd (no broker needs to be up).

``cluster_status`` is pure (a ``ClusterView`` in, a JSON-able report out); ``read_view``
loads a view with one listing of the cluster's keys.
"""

from __future__ import annotations

from typing import Any

from broker.etcd import EtcdClient
from broker.keys import KeyLayout
from broker.metadata import NO_LEADER, ClusterView
from broker.metadata_store import WatchReset
from broker.reassign import describe, format_reassignments, ongoing_reassignments


async def read_view(endpoints: str, cluster: str, *, timeout: float = 5.0) -> ClusterView:
    """One consistent snapshot of a cluster's metadata (MetadataStoreError if etcd fails)."""
    layout = KeyLayout(cluster)
    view = ClusterView(layout)
    async with EtcdClient(endpoints, timeout=timeout) as etcd:
        kvs, revision = await etcd.get_prefix(layout.prefix)
    view.apply(WatchReset(kvs, revision))
    return view


def cluster_status(view: ClusterView) -> dict[str, Any]:
    """The report: ``brokers``, ``controller``, ``partitions`` (one row each), the
    ``under_replicated`` and ``offline`` partitions and the ``reassignments`` in progress."""
    live = view.live_broker_ids()
    brokers = [
        {
            "id": bid,
            "host": b.registration.host,
            "kafka_port": b.registration.kafka_port,
            "http_port": b.registration.http_port,
            "rack": b.registration.rack,
            "epoch": b.epoch,
        }
        for bid, b in sorted(view.brokers.items())
    ]
    rows: list[dict[str, Any]] = []
    for topic, va in sorted(view.topics.items()):
        for p, replicas in enumerate(va.value.partitions):
            state = view.partition_state(topic, p)
            isr = list(state.isr) if state is not None else []
            leader = state.leader if state is not None else NO_LEADER
            rows.append(
                {
                    "topic": topic,
                    "partition": p,
                    "leader": leader,
                    "leader_epoch": state.leader_epoch if state is not None else -1,
                    "replicas": list(replicas),
                    "isr": isr,
                    "offline_replicas": [r for r in replicas if r not in live],
                    "under_replicated": len(isr) < len(replicas),
                    "offline": leader == NO_LEADER or leader not in live,
                }
            )
    controller = view.controller
    return {
        "reassignments": [describe(r) for r in ongoing_reassignments(view)],
        "controller": (
            {"id": controller.value.broker_id, "epoch": controller.value.epoch}
            if controller is not None
            else None
        ),
        "brokers": brokers,
        "partitions": rows,
        "under_replicated": [f"{r['topic']}-{r['partition']}" for r in rows if r["under_replicated"]],
        "offline": [f"{r['topic']}-{r['partition']}" for r in rows if r["offline"]],
    }


def format_status(report: dict[str, Any]) -> str:
    """The human-readable form of ``cluster_status``."""
    lines: list[str] = []
    c = report["controller"]
    lines.append("controller: none" if c is None else f"controller: broker {c['id']} (epoch {c['epoch']})")
    lines.append(f"brokers ({len(report['brokers'])}):")
    for b in report["brokers"]:
        rack = f" rack {b['rack']}" if b["rack"] else ""
        lines.append(f"  {b['id']:>6}  {b['host']}:{b['kafka_port']}  http {b['http_port']}{rack}")
    lines.append(f"partitions ({len(report['partitions'])}):")
    if report["partitions"]:
        lines.append(f"  {'partition':<30} {'leader':>6} {'epoch':>6}  {'replicas':<16} {'isr':<16} status")
    for r in report["partitions"]:
        status = "offline" if r["offline"] else ("under-replicated" if r["under_replicated"] else "ok")
        name = f"{r['topic']}-{r['partition']}"
        replicas = ",".join(map(str, r["replicas"]))
        isr = ",".join(map(str, r["isr"]))
        lines.append(
            f"  {name:<30} {r['leader']:>6} {r['leader_epoch']:>6}  {replicas:<16} {isr:<16} {status}"
        )
    if report["reassignments"]:
        lines.extend(format_reassignments(report["reassignments"]))
    lines.append(f"under-replicated: {len(report['under_replicated'])}, offline: {len(report['offline'])}")
    return "\n".join(lines)
