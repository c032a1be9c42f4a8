"""``strata acl add|remove|list``: ACLs through CreateAcls/DescribeAcls/DeleteAcls.

Connection and client security options as every command that talks to a broker
(api.cli.connect): ``-X key=value``, ``--command-config FILE``, the shorthand flags.
A password never appears in output or error messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from api.cli.common import fail
from api.cli.connect import connect, connect_all, security_options
from hot.errors import StrataError
from kwire.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

__all__ = ["acl", "connect", "connect_all", "security_options"]

OPERATIONS = [o.name for o in Operation if o not in (Operation.UNKNOWN, Operation.ANY)]


def _fail(message: str) -> None:
    fail(message)


def _resource(topic: str | None, group: str | None, cluster: bool) -> tuple[ResourceType, str | None]:
    given = [x for x in (topic is not None, group is not None, cluster) if x]
    if len(given) > 1:
        _fail("give at most one of --topic, --group, --cluster")
    if topic is not None:
        return ResourceType.TOPIC, topic
    if group is not None:
        return ResourceType.GROUP, group
    if cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def _row(b: AclBinding) -> dict[str, Any]:
    return b.to_json()


def _line(b: AclBinding) -> str:
    pattern = "" if b.pattern_type == PatternType.LITERAL else f" ({b.pattern_type.name.lower()})"
    return (
        f"{b.permission.name}\t{b.principal}\t{b.operation.name}\t"
        f"{b.resource_type.name.lower()}:{b.resource_name}{pattern}\thost={b.host}"
    )


def _emit(output: str, bindings: list[AclBinding], verb: str) -> None:
    if output == "json":
        click.echo(json.dumps([_row(b) for b in bindings], indent=2, sort_keys=True))
    elif bindings:
        click.echo("\n".join(f"{verb}{_line(b)}" for b in bindings))


_selectors = [
    click.option("--topic", help="Topic name (or prefix with --prefixed; '*' for every topic)."),
    click.option("--group", help="Consumer group name (or prefix; '*' for every group)."),
    click.option("--cluster", is_flag=True, help="The cluster resource."),
    click.option("--prefixed", is_flag=True, help="The name is a prefix (PREFIXED pattern)."),
]


def selectors(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(_selectors):
        fn = opt(fn)
    return fn


@click.group()
def acl() -> None:
    """Add, remove and list ACLs on a broker with authorization enabled."""


@acl.command("add")
@click.option("--principal", "-p", required=True, multiple=True, help="User:<name> or User:* (repeatable).")
@click.option(
    "--operation",
    "operations",
    required=True,
    multiple=True,
    type=click.Choice(OPERATIONS, case_sensitive=False),
)
@click.option("--deny", is_flag=True, help="A DENY binding (default ALLOW); DENY wins over any ALLOW.")
@click.option("--host", default="*", show_default=True, help="Client address the binding applies to.")
@selectors
@security_options
def acl_add(**kw: Any) -> None:
    """Add bindings: every principal x operation on one resource."""
    rtype, name = _resource(kw["topic"], kw["group"], kw["cluster"])
    if rtype == ResourceType.ANY or name is None:
        _fail("name the resource: --topic, --group or --cluster")
    assert name is not None
    pattern = PatternType.PREFIXED if kw["prefixed"] else PatternType.LITERAL
    permission = Permission.DENY if kw["deny"] else Permission.ALLOW
    try:
        bindings = [
            AclBinding(rtype, name, pattern, p, kw["host"], Operation[op.upper()], permission).validate()
            for p in kw["principal"]
            for op in kw["operations"]
        ]
    except AclError as exc:
        _fail(str(exc))
    with connect(kw) as client:
        try:
            client.create_acls(bindings)
        except StrataError as exc:
            _fail(str(exc))
    _emit(kw["output"], bindings, "added\t")


def _filter(kw: dict[str, Any]) -> AclFilter:
    rtype, name = _resource(kw["topic"], kw["group"], kw["cluster"])
    pattern = PatternType.PREFIXED if kw["prefixed"] else (PatternType.LITERAL if name else PatternType.ANY)
    op = Operation[kw["operation"].upper()] if kw.get("operation") else Operation.ANY
    return AclFilter(rtype, name, pattern, kw.get("principal"), None, op, Permission.ANY)


@acl.command("remove")
@click.option("--principal", "-p", help="Only this principal's bindings.")
@click.option("--operation", type=click.Choice(OPERATIONS, case_sensitive=False), help="Only this operation.")
@selectors
@security_options
def acl_remove(**kw: Any) -> None:
    """Remove every binding matching the selectors (at least one is needed)."""
    if not (kw["principal"] or kw["operation"] or kw["topic"] or kw["group"] or kw["cluster"]):
        _fail("refusing to remove every ACL: give --principal, --operation, --topic, --group or --cluster")
    with connect(kw) as client:
        try:
            removed = client.delete_acls([_filter(kw)])
        except StrataError as exc:
            _fail(str(exc))
    _emit(kw["output"], removed, "removed\t")
    if kw["output"] == "text" and not removed:
        click.echo("no matching ACLs")


@acl.command("list")
@click.option("--principal", "-p", help="Only this principal's bindings.")
@selectors
@security_options
def acl_list(**kw: Any) -> None:
    """List bindings (all, or those of a principal / resource)."""
    with connect(kw) as client:
        try:
            found = client.describe_acls(_filter(kw))
        except StrataError as exc:
            _fail(str(exc))
    _emit(kw["output"], found, "")
