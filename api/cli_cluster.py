"""``strata cluster status|reassign|reassignments``: a replicated cluster's view and its
partition reassignments, read from and requested through etcd (broker.status,
broker.reassign)."""

from __future__ import annotations

import click

from api.cli_common import (
    emit,
    fail,
    output_option,
)
from hot.errors import StrataError


@click.group()
def cluster() -> None:
    """Inspect a replicated cluster and move partitions (metadata in etcd)."""


@cluster.command("status")
@click.option("--etcd", required=True, metavar="HOST:PORT,...", help="The cluster's etcd endpoints.")
@click.option("--cluster-name", default="strata-local", show_default=True, help="The brokers' cluster id.")
@output_option
def cluster_status_cmd(etcd: str, cluster_name: str, output: str) -> None:
    """Brokers, controller, partition leaders and ISR, under-replicated partitions."""
    import asyncio

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
