"""``strata quotas describe|alter``: client byte-rate quotas through
DescribeClientQuotas / AlterClientQuotas (client security options as ``strata acl``,
api.cli.acl)."""

from __future__ import annotations

from typing import Any

import click

from api.cli.common import (
    emit,
    fail,
)
from api.cli.connect import connect, security_options
from hot.errors import StrataError

# --- quotas (client byte-rate quotas, AlterClientQuotas/DescribeClientQuotas) ----------------


@click.group()
def quotas() -> None:
    """Show and change runtime user quotas on a running broker (security options as `strata acl`)."""


@quotas.command("describe")
@security_options
def quotas_describe(**kw: Any) -> None:
    """Runtime quotas per user; <default> is the default user (TOML quotas are not shown)."""
    output = kw["output"]
    try:
        with connect(kw) as c:
            rows = c.describe_client_quotas()
    except StrataError as exc:
        fail(str(exc))
    human = "\n".join(
        f"{r['user'] or '<default>'}\t" + ",".join(f"{k}={v:g}" for k, v in sorted(r["quotas"].items()))
        for r in rows
    )
    emit(output, rows, human)


@quotas.command("alter")
@click.option("--user", help="The user (SASL, REST or certificate principal name).")
@click.option("--default", "default_user", is_flag=True, help="The default user instead.")
@click.option("--producer-byte-rate", type=float, help="Bytes/s a user may produce.")
@click.option("--consumer-byte-rate", type=float, help="Bytes/s a user may fetch.")
@click.option(
    "--remove",
    multiple=True,
    type=click.Choice(["producer_byte_rate", "consumer_byte_rate"]),
    help="Remove this quota (repeatable).",
)
@security_options
def quotas_alter(
    user: str | None,
    default_user: bool,
    producer_byte_rate: float | None,
    consumer_byte_rate: float | None,
    remove: tuple[str, ...],
    **kw: Any,
) -> None:
    """Set or remove quotas of --user or --default (kept by the broker, or in etcd)."""
    if (user is None) == (not default_user):
        fail("give --user NAME or --default")
    changes: dict[str, float | None] = {k: None for k in remove}
    if producer_byte_rate is not None:
        changes["producer_byte_rate"] = producer_byte_rate
    if consumer_byte_rate is not None:
        changes["consumer_byte_rate"] = consumer_byte_rate
    if not changes:
        fail("nothing to change: give --producer-byte-rate, --consumer-byte-rate or --remove")
    try:
        with connect(kw) as c:
            c.alter_client_quotas(user, changes)
    except StrataError as exc:
        fail(str(exc))
    click.echo(f"altered quotas of {user or '<default>'}")
