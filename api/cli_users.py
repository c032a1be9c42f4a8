"""Credentials: ``strata users add|delete|list`` (SASL users, salted and hashed in
<data-dir>/meta/users.json on a single node, in etcd in cluster mode; broker.security.users)
and ``strata tokens create|list|revoke`` (REST bearer tokens; broker.security.tokens). Listing
never shows a secret."""

from __future__ import annotations

import sys
from typing import Any

import click

from api.cli_common import (
    emit,
    fail,
    output_option,
)
from hot.errors import StrataError

# --- users (SASL credentials: a single node's users.json, or a cluster's etcd) ---------------

_users_data_dir = click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    envvar="STRATA_DATA_DIR",
    default="./strata-data",
    show_default=True,
    help="The broker's data directory (credentials in <data-dir>/meta/users.json).",
)
_users_etcd = click.option(
    "--etcd",
    metavar="HOST:PORT,...",
    envvar="STRATA_ETCD",
    help="Cluster mode: the cluster's etcd endpoints (credentials in etcd, not --data-dir).",
)
_users_cluster = click.option(
    "--cluster-name", default="strata-local", show_default=True, help="With --etcd: the brokers' cluster id."
)


@click.group()
def users() -> None:
    """Add, delete and list SASL users (PLAIN, SCRAM-SHA-256/512): salted and hashed in
    <data-dir>/meta/users.json on a single node, in etcd in cluster mode (--etcd)."""


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
    name: str, password_stdin: bool, data_dir: str, etcd: str | None, cluster_name: str, output: str
) -> None:
    """Add a user, or set a user's password. Running brokers pick it up at the next login."""
    import asyncio
    from pathlib import Path

    from broker.security.users import UserStore, check_username, users_path

    try:
        check_username(name)
        if password_stdin:
            password = sys.stdin.readline().rstrip("\r\n")
        else:
            password = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
        if etcd:
            from broker.security.etcd_documents import etcd_set_password

            existed = asyncio.run(etcd_set_password(etcd, cluster_name, name, password))
        else:
            store = UserStore(users_path(Path(data_dir)))
            existed = name in store.reload().names()
            store.set_password(name, password)
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
def users_delete(name: str, data_dir: str, etcd: str | None, cluster_name: str, output: str) -> None:
    """Delete a user; connections already authenticated stay open."""
    import asyncio
    from pathlib import Path

    from broker.security.users import UserStore, users_path

    try:
        if etcd:
            from broker.security.etcd_documents import etcd_delete_user

            found = asyncio.run(etcd_delete_user(etcd, cluster_name, name))
        else:
            found = UserStore(users_path(Path(data_dir))).delete(name)
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
def users_list(data_dir: str, etcd: str | None, cluster_name: str, output: str) -> None:
    """The users and their SCRAM mechanisms (never any secret)."""
    import asyncio
    from pathlib import Path

    from broker.security.users import UserStore, UserTable, users_path

    try:
        store: UserTable
        if etcd:
            from broker.security.etcd_documents import etcd_users

            store = asyncio.run(etcd_users(etcd, cluster_name))
        else:
            store = UserStore(users_path(Path(data_dir))).reload()
    except StrataError as exc:
        fail(str(exc))
    rows = [{"user": n, "mechanisms": store.mechanisms(n)} for n in store.names()]
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
