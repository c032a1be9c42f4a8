"""``strata transactions list|describe|producers``: what the transaction coordinators and
partition leaders know (ListTransactions from every broker, DescribeTransactions from each
id's coordinator, DescribeProducers from each partition's leader; kclient.transactions).
Client security options as ``strata acl`` (api.cli.acl)."""

from __future__ import annotations

import time
from typing import Any

import click

from api.cli.common import emit, fail
from api.cli.connect import connect_all, security_options
from hot.errors import StrataError

# Kafka's transaction states, as ListTransactions names them.
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead")


@click.group()
def transactions() -> None:
    """Transactions on a running cluster: ids, their state and partitions, open producers."""


@transactions.command("list")
@click.option(
    "--state", "states", multiple=True, type=click.Choice(STATES), help="Only these states (repeatable)."
)
@click.option("--producer-id", "producer_ids", multiple=True, type=int, help="Only these producer ids.")
@click.option("--min-duration-ms", type=int, default=-1, help="Only transactions open at least this long.")
@security_options
def transactions_list(
    states: tuple[str, ...], producer_ids: tuple[int, ...], min_duration_ms: int, **kw: Any
) -> None:
    """Every transactional id the coordinators hold, with its producer and state."""
    from kclient.transactions import list_transactions

    client, other = connect_all(kw)
    try:
        with client:
            rows = list_transactions(
                client, other, states=states, producer_ids=producer_ids, min_duration_ms=min_duration_ms
            )
    except StrataError as exc:
        fail(str(exc))
    human = "\n".join(
        f"{r['transactional_id']}\tproducer {r['producer_id']}\t{r['state']}\tcoordinator {r['coordinator']}"
        for r in rows
    )
    emit(kw["output"], rows, human or "no transactional ids")


@transactions.command("describe")
@click.argument("transactional_ids", nargs=-1, required=True)
@security_options
def transactions_describe(transactional_ids: tuple[str, ...], **kw: Any) -> None:
    """State, producer id and epoch, timeout, age and partitions of each transactional id."""
    from kclient.transactions import describe_transactions

    client, other = connect_all(kw)
    try:
        with client:
            rows = describe_transactions(client, other, transactional_ids)
    except StrataError as exc:
        fail(str(exc))
    now = int(time.time() * 1000)
    lines = []
    for r in rows:
        is_open = r["state"] in ("Ongoing", "PrepareCommit", "PrepareAbort") and r["start_time_ms"] > 0
        age = f", open {(now - r['start_time_ms']) / 1000:.1f} s" if is_open else ""
        parts = ", ".join(f"{t}-{p}" for t, p in r["partitions"]) or "none"
        lines.append(
            f"{r['transactional_id']}: {r['state']}, producer {r['producer_id']} epoch "
            f"{r['producer_epoch']}, timeout {r['timeout_ms']} ms{age}; partitions: {parts}"
        )
    emit(kw["output"], rows, "\n".join(lines))


@transactions.command("producers")
@click.argument("topic")
@click.option(
    "--partition", "partitions", multiple=True, type=int, help="Only these partitions (repeatable)."
)
@security_options
def transactions_producers(topic: str, partitions: tuple[int, ...], **kw: Any) -> None:
    """The producers with state in each partition of TOPIC (an open transaction's first
    offset holds back read_committed consumers: the last stable offset)."""
    from kclient.transactions import describe_producers

    client, other = connect_all(kw)
    try:
        with client:
            rows = describe_producers(client, other, topic, partitions or None)
    except StrataError as exc:
        fail(str(exc))
    human = "\n".join(
        f"{topic}-{r['partition']}\tproducer {r['producer_id']} epoch {r['producer_epoch']}\t"
        f"last sequence {r['last_sequence']}\t"
        + (
            f"open transaction from offset {r['current_txn_start_offset']}"
            if r["current_txn_start_offset"] >= 0
            else "no open transaction"
        )
        for r in rows
    )
    emit(kw["output"], rows, human or "no producers")
