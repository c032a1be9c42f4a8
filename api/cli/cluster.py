"""``strata cluster health|info``: any Kafka-compatible cluster's health and layout from
Metadata through its Kafka listener (kclient.topic_admin), as ``rpk cluster health`` and
``rpk cluster info``; ``strata cluster status|reassign|reassignments``: a replicated Strata
cluster's view and its partition reassignments, read from and requested through etcd
(broker.status, broker.reassign)."""

from __future__ import annotations

import time
from typing import Any

import click

from api.cli.common import (
    emit,
    fail,
    output_option,
    print_table,
)
from api.cli.connect import connect, connection_options
from hot.errors import StrataError


@click.group()
def cluster() -> None:
    """A cluster's health and layout (any broker), and a Strata cluster's etcd view and moves."""


def _health(conn: dict[str, Any]) -> dict[str, Any]:
    from kclient.topic_admin import cluster_health, cluster_metadata

    with connect(conn) as client:
        try:
            return cluster_health(cluster_metadata(client))
        except StrataError as exc:
            fail(str(exc))
    raise AssertionError


def _reasons(report: dict[str, Any]) -> list[str]:
    """rpk's names of what makes a cluster unhealthy."""
    reasons = []
    if report["controller_id"] is None:
        reasons.append("no_elected_controller")
    if report["down_brokers"]:
        reasons.append("nodes_down")
    if report["offline"]:
        reasons.append("leaderless_partitions")
    if report["under_replicated"]:
        reasons.append("under_replicated_partitions")
    return reasons


def _names(rows: list[dict[str, Any]]) -> str:
    return "[" + " ".join(f"{r['topic']}/{r['partition']}" for r in rows) + "]"


@cluster.command("health")
@click.option("--fail-if-unhealthy", is_flag=True, help="Exit 1 when the cluster is not healthy.")
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Ask again until healthy, for at most SECONDS; exit 1 if it never is.",
)
@connection_options
@output_option
def cluster_health_cmd(fail_if_unhealthy: bool, wait_s: float | None, output: str, **conn: Any) -> None:
    """Healthy or not, as rpk cluster health: the controller, the brokers, brokers a replica
    is assigned to that are down, leaderless and under-replicated partitions (ISR smaller
    than the replicas). Works against any Kafka-compatible broker (Metadata)."""
    report = _health(conn)
    if wait_s is not None:
        deadline = time.monotonic() + wait_s
        while not report["healthy"] and time.monotonic() < deadline:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            report = _health(conn)
    report["unhealthy_reasons"] = _reasons(report)
    nodes = "[" + " ".join(str(b["node_id"]) for b in report["brokers"]) + "]"
    controller = report["controller_id"] if report["controller_id"] is not None else -1
    offline, under = report["offline"], report["under_replicated"]
    human = "\n".join(
        [
            "CLUSTER HEALTH OVERVIEW",
            "=======================",
            f"Healthy:                          {str(report['healthy']).lower()}",
            f"Unhealthy reasons:                [{' '.join(report['unhealthy_reasons'])}]",
            f"Controller ID:                    {controller}",
            f"All nodes:                        {nodes}",
            f"Nodes down:                       [{' '.join(map(str, report['down_brokers']))}]",
            f"Leaderless partitions ({len(offline)}):        {_names(offline)}",
            f"Under-replicated partitions ({len(under)}):  {_names(under)}",
        ]
    )
    emit(output, report, human)
    if not report["healthy"] and (fail_if_unhealthy or wait_s is not None):
        raise SystemExit(1)


@cluster.command("info")
@connection_options
@output_option
def cluster_info_cmd(output: str, **conn: Any) -> None:
    """The cluster id, controller, brokers and topics, as rpk cluster info (Metadata)."""
    from kclient.topic_admin import cluster_metadata

    with connect(conn) as client:
        try:
            md = cluster_metadata(client)
        except StrataError as exc:
            fail(str(exc))
    topics = [
        {
            "name": t.name,
            "partitions": len(t.partitions),
            "replicas": max((len(p.replica_nodes) for p in t.partitions), default=0),
            "internal": t.is_internal,
        }
        for t in sorted(md.topics, key=lambda t: t.name or "")
        if not t.error_code
    ]
    data = {
        "cluster_id": md.cluster_id,
        "controller_id": md.controller_id if md.controller_id >= 0 else None,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in sorted(md.brokers, key=lambda b: b.node_id)
        ],
        "topics": topics,
    }
    if output == "json":
        emit(output, data, "")
        return
    click.echo(f"CLUSTER\n=======\n{md.cluster_id or '-'}\n\nBROKERS\n=======")
    print_table(
        None,
        ["ID", "HOST", "PORT", "RACK"],
        [
            [
                f"{b['node_id']}*" if b["node_id"] == md.controller_id else b["node_id"],
                b["host"],
                b["port"],
                b["rack"],
            ]
            for b in data["brokers"]
        ],
    )
    click.echo("\nTOPICS\n======")
    print_table(
        None,
        ["NAME", "PARTITIONS", "REPLICAS"],
        [[t["name"], t["partitions"], t["replicas"]] for t in topics],
    )


@cluster.command("status")
@click.option("--etcd", metavar="HOST:PORT,...", help="The cluster's etcd endpoints (required).")
@click.option("--cluster-name", default="strata-local", show_default=True, help="The brokers' cluster id.")
@output_option
def cluster_status_cmd(etcd: str | None, cluster_name: str, output: str) -> None:
    """Brokers, controller, partition leaders and ISR, under-replicated partitions, read
    from a Strata cluster's etcd (cluster health / info ask any broker instead)."""
    import asyncio

    if not etcd:
        fail(
            "cluster status reads the cluster's etcd: give --etcd HOST:PORT, or ask a broker with "
            "`strata cluster health` / `strata cluster info`"
        )
    from broker.status import cluster_status, format_status, read_view

    try:
        report = cluster_status(asyncio.run(read_view(etcd, cluster_name)))
    except StrataError as exc:
        fail(str(exc))
    emit(output, report, format_status(report))


def _replica_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in text.split(","))
    except ValueError:
        fail(f"--replicas: expected comma-separated broker ids like 2,3,1, got {text!r}")
    if any(i < 0 for i in ids):
        fail(f"--replicas: broker ids are non-negative, got {text!r}")
    return ids


@cluster.command("reassign")
@click.option("--etcd", required=True, metavar="HOST:PORT,...", help="The cluster's etcd endpoints.")
@click.option("--cluster-name", default="strata-local", show_default=True, help="The brokers' cluster id.")
@click.option("--topic", required=True, help="Topic of the partition to move.")
@click.option("--partition", required=True, type=click.IntRange(min=0), help="Partition to move.")
@click.option("--replicas", metavar="ID,ID,...", help="Target replica list, preferred leader first.")
@click.option("--cancel", is_flag=True, help="Cancel the partition's reassignment instead.")
@click.option("--wait", is_flag=True, help="Return once the controller has completed it.")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds --wait waits.")
@output_option
def cluster_reassign_cmd(
    etcd: str,
    cluster_name: str,
    topic: str,
    partition: int,
    replicas: str | None,
    cancel: bool,
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Move a partition's replicas to other brokers (or cancel the move).

    New replicas catch up as followers; the controller switches to the target once
    they are all in sync. Written straight to etcd: no broker needs to be reachable.
    """
    import asyncio

    from broker.reassign import request

    if cancel == (replicas is not None):
        fail("give exactly one of --replicas and --cancel")
    target = None if replicas is None else _replica_ids(replicas)
    try:
        result = asyncio.run(
            request(etcd, cluster_name, topic, partition, target, wait=timeout if wait else None)
        )
    except TimeoutError:
        fail(f"{topic}-{partition}: the reassignment did not complete within {timeout:g} s (it goes on)")
    except StrataError as exc:
        fail(str(exc))
    replica_text = ",".join(map(str, result["replicas"]))  # type: ignore[call-overload]
    if result["in_progress"]:
        human = f"{topic}-{partition}: reassignment in progress, replicas {replica_text}"
    else:
        human = f"{topic}-{partition}: replicas {replica_text}"
    emit(output, result, human)


@cluster.command("reassignments")
@click.option("--etcd", required=True, metavar="HOST:PORT,...", help="The cluster's etcd endpoints.")
@click.option("--cluster-name", default="strata-local", show_default=True, help="The brokers' cluster id.")
@output_option
def cluster_reassignments_cmd(etcd: str, cluster_name: str, output: str) -> None:
    """The partition reassignments in progress."""
    import asyncio

    from broker.reassign import describe, format_reassignments, ongoing_reassignments
    from broker.status import read_view

    try:
        rows = [describe(r) for r in ongoing_reassignments(asyncio.run(read_view(etcd, cluster_name)))]
    except StrataError as exc:
        fail(str(exc))
    emit(output, rows, "\n".join(format_reassignments(rows)))
