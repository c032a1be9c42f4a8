"""Credentials: ``strata users add|delete|list`` (SASL users, salted and hashed in the
metadata store: a single node's embedded store in <data-dir>/meta, or a cluster's etcd;
broker.security.stored) and ``strata tokens create|list|revoke`` (REST bearer tokens;
broker.security.tokens). Listing never shows a secret.

``users`` runs one function over a ``MetadataStore`` for every case: etcd (``--etcd``),
the data dir's store opened directly (no broker runs on it), or, while the broker runs,
the broker's own store through its admin socket ``<data-dir>/meta/store.sock``
(broker.store_socket)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from api.cli.common import (
    emit,
    fail,
    output_option,
)
from hot.errors import StrataError

if TYPE_CHECKING:
    from broker.keys import KeyLayout
    from broker.metadata_store import MetadataStore

T = TypeVar("T")

# --- users (SASL credentials: a single node's metadata store, or a cluster's etcd) -----------

_users_data_dir = click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    envvar="STRATA_DATA_DIR",
    default="./strata-data",
    show_default=True,
    help="The broker's data directory (credentials in its metadata store, <data-dir>/meta; "
    "reached through the broker while it runs).",
)
_users_etcd = click.option(
    "--etcd",
    metavar="HOST:PORT,...",
    envvar="STRATA_ETCD",
    help="Cluster mode: the cluster's etcd endpoints (credentials in etcd, not --data-dir).",
)
_users_cluster = click.option(
    "--cluster-name",
    default=None,
    help="The brokers' cluster id [default: strata-local; with --data-dir, the data dir's].",
)


def _with_store(
    data_dir: str,
    etcd: str | None,
    cluster_name: str | None,
    fn: Callable[[MetadataStore, KeyLayout], Awaitable[T]],
    *,
    create: bool,
) -> T | None:
    """Run ``fn`` over the credentials' store; None (``fn`` not run) when ``create`` is off
    and the data dir has no metadata store yet (nothing to list or delete)."""
    import asyncio
    from pathlib import Path

    from broker.etcd import EtcdClient
    from broker.keys import KeyLayout
    from broker.store_socket import DEFAULT_CLUSTER, open_data_dir_store

    async def run() -> T | None:
        if etcd:
            async with EtcdClient(etcd) as client:
                return await fn(client, KeyLayout(cluster_name or DEFAULT_CLUSTER))
        meta = Path(data_dir) / "meta"
        if not create and not meta.is_dir():
            return None
        async with open_data_dir_store(Path(data_dir), cluster_name) as (store, layout):
            return await fn(store, layout)

    return asyncio.run(run())


@click.group()
def users() -> None:
    """Add, delete and list SASL users (PLAIN, SCRAM-SHA-256/512): salted and hashed in the
    metadata store, a single node's in <data-dir>/meta (while the broker runs, through it),
    or a cluster's etcd (--etcd)."""


@users.command("add")
@click.argument("name")
@click.option(
    "--password-stdin", is_flag=True, help="Read the password from the first line of stdin [prompt]."
)
@_users_data_dir
@_users_etcd
@_users_cluster
@output_option
def users_add(
    name: str, password_stdin: bool, data_dir: str, etcd: str | None, cluster_name: str | None, output: str
) -> None:
    """Add a user, or set a user's password. Running brokers pick it up at the next login."""
    from broker.security.stored import set_password
    from broker.security.users import check_username

    try:
        check_username(name)
        if password_stdin:
            password = sys.stdin.readline().rstrip("\r\n")
        else:
            password = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
        existed = _with_store(
            data_dir,
            etcd,
            cluster_name,
            lambda store, layout: set_password(store, layout, name, password),
            create=True,
        )
    except StrataError as exc:
        fail(str(exc))
    verb = "updated" if existed else "added"
    emit(output, {"user": name, "status": verb}, f"{verb} user {name} (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN)")


@users.command("delete")
@click.argument("name")
@_users_data_dir
@_users_etcd
@_users_cluster
@output_option
def users_delete(name: str, data_dir: str, etcd: str | None, cluster_name: str | None, output: str) -> None:
    """Delete a user; connections already authenticated stay open."""
    from broker.security.stored import delete_user

    try:
        found = _with_store(
            data_dir,
            etcd,
            cluster_name,
            lambda store, layout: delete_user(store, layout, name),
            create=False,
        )
    except StrataError as exc:
        fail(str(exc))
    if not found:
        fail(f"no user named {name!r}")
    emit(output, {"user": name, "status": "deleted"}, f"deleted user {name}")


@users.command("list")
@_users_data_dir
@_users_etcd
@_users_cluster
@output_option
def users_list(data_dir: str, etcd: str | None, cluster_name: str | None, output: str) -> None:
    """The users and their SCRAM mechanisms (never any secret)."""
    from broker.security.stored import read_users
    from broker.security.users import UserTable

    try:
        table = _with_store(data_dir, etcd, cluster_name, read_users, create=False) or UserTable()
    except StrataError as exc:
        fail(str(exc))
    rows = [{"user": n, "mechanisms": table.mechanisms(n)} for n in table.names()]
    emit(output, rows, "\n".join(f"{r['user']}\t{','.join(r['mechanisms'])}" for r in rows))


# --- tokens (REST bearer tokens of a broker) -------------------------------------------------


@click.group()
def tokens() -> None:
    """Create, list and revoke REST bearer tokens (serve with --rest-auth bearer)."""


def _token_row(t: Any, now: float) -> dict[str, Any]:
    import datetime

    def iso(ts: float | None) -> str | None:
        return (
            None
            if ts is None
            else datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat(timespec="seconds")
        )

    return {
        "id": t.id,
        "user": t.user,
        "created": iso(t.created),
        "expires": iso(t.expires),
        "expired": t.expired(now),
    }


@tokens.command("create")
@click.option("--user", required=True, help="The principal the token acts as.")
@click.option("--ttl", default="24h", show_default=True, help="Lifetime: 3600, 30m, 12h, 30d or never.")
@_users_data_dir
@output_option
def tokens_create(user: str, ttl: str, data_dir: str, output: str) -> None:
    """Create a token; it is printed once and only its SHA-256 is kept."""
    import time
    from pathlib import Path

    from broker.security.tokens import TokenStore, parse_ttl, tokens_path

    try:
        token, info = TokenStore(tokens_path(Path(data_dir))).create(user, parse_ttl(ttl))
    except StrataError as exc:
        fail(str(exc))
    emit(output, {**_token_row(info, time.time()), "token": token}, token)


@tokens.command("list")
@_users_data_dir
@output_option
def tokens_list(data_dir: str, output: str) -> None:
    """The tokens' ids, users and expiry (never a token)."""
    import time
    from pathlib import Path

    from broker.security.tokens import TokenStore, tokens_path

    try:
        rows = [_token_row(t, time.time()) for t in TokenStore(tokens_path(Path(data_dir))).infos()]
    except StrataError as exc:
        fail(str(exc))
    human = "\n".join(
        f"{r['id']}\t{r['user']}\t{r['expires'] or 'never'}{' (expired)' if r['expired'] else ''}"
        for r in rows
    )
    emit(output, rows, human)


@tokens.command("revoke")
@click.argument("token_id", required=False)
@click.option("--user", help="Revoke every token of this user instead.")
@_users_data_dir
@output_option
def tokens_revoke(token_id: str | None, user: str | None, data_dir: str, output: str) -> None:
    """Revoke the token with TOKEN_ID (from `list`), or all tokens of --user."""
    import time
    from pathlib import Path

    from broker.security.tokens import TokenStore, tokens_path

    if (token_id is None) == (user is None):
        fail("give a token id or --user, not both")
    try:
        gone = TokenStore(tokens_path(Path(data_dir))).revoke(token_id=token_id, user=user)
    except StrataError as exc:
        fail(str(exc))
    if not gone:
        fail(f"no token {token_id!r}" if token_id is not None else f"no token of user {user!r}")
    rows = [_token_row(t, time.time()) for t in gone]
    emit(output, rows, "\n".join(f"revoked {r['id']} ({r['user']})" for r in rows))
