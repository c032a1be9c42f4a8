"""``strata groups list|describe|delete``: consumer groups of a running broker, with their
lag (api.client.lag), through its Kafka listener."""

from __future__ import annotations

from typing import Any

import click

from api.cli_common import (
    cell,
    emit,
    fail,
    output_option,
    print_table,
)
from api.cli_connect import connect, connection_options
from hot.errors import StrataError


@click.group()
def groups() -> None:
    """List, describe (with lag) and delete consumer groups on a running broker."""


@groups.command("list")
@click.option(
    "--state", "states", multiple=True, metavar="STATE", help="Only groups in this state (repeatable)."
)
@connection_options
@output_option
def groups_list(states: tuple[str, ...], bootstrap: str, output: str, **conn: Any) -> None:
    """List groups with their state, protocol, members and total lag."""
    from api.client.lag import partition_lag

    with connect({"bootstrap": bootstrap, **conn}) as client:
        try:
            listed = client.list_groups(states)
            described = {d["group_id"]: d for d in client.describe_groups([g["group_id"] for g in listed])}
            data = []
            for g in listed:
                d = described.get(g["group_id"], {})
                committed = client.committed_offsets(g["group_id"])
                ends = client.list_offsets(committed, -1)
                lags = [
                    lag
                    for key, offset in committed.items()
                    if (lag := partition_lag(offset, ends.get(key))) is not None
                ]
                data.append(
                    {
                        "group_id": g["group_id"],
                        "state": g["state"] or d.get("state", ""),
                        "protocol_type": g["protocol_type"],
                        "protocol": d.get("protocol", ""),
                        "members": len(d.get("members", [])),
                        "total_lag": sum(lags),
                    }
                )
        except StrataError as exc:
            fail(str(exc))
    if output == "json":
        emit(output, data, "")
        return
    if not data:
        click.echo("no consumer groups")
        return
    print_table(
        None,
        ["GROUP", "STATE", "PROTOCOL-TYPE", "PROTOCOL", "MEMBERS", "LAG"],
        [
            [g["group_id"], g["state"], g["protocol_type"], g["protocol"], g["members"], g["total_lag"]]
            for g in data
        ],
    )


@groups.command("describe")
@click.argument("group")
@connection_options
@output_option
def groups_describe(group: str, bootstrap: str, output: str, **conn: Any) -> None:
    """Per-partition committed offset, log end offset (high watermark) and lag, with the
    owning member, as kafka-consumer-groups --describe shows them; then the members."""
    with connect({"bootstrap": bootstrap, **conn}) as client:
        try:
            info = client.describe_group_lag(group)
        except StrataError as exc:
            fail(str(exc))
    if output == "json":
        emit(output, info, "")
        return
    click.echo(
        f"group {info['group_id']}  state {info['state']}  protocol {cell(info['protocol'])}  "
        f"members {len(info['members'])}  total lag {info['total_lag']}"
    )
    print_table(
        None,
        ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
        [
            [
                p["topic"],
                p["partition"],
                p["committed_offset"],
                p["log_end_offset"],
                p["lag"],
                p["member_id"],
                p["host"],
                p["client_id"],
            ]
            for p in info["partitions"]
        ],
    )
    if info["members"]:
        print_table(
            "members",
            ["CONSUMER-ID", "INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
            [
                [
                    m["member_id"],
                    m["group_instance_id"],
                    m["host"],
                    m["client_id"],
                    len(m["partitions"]),
                    ", ".join(f"{t}-{p}" for t, p in m["partitions"]),
                ]
                for m in info["members"]
            ],
        )


@groups.command("delete")
@click.argument("group")
@connection_options
@output_option
def groups_delete(group: str, bootstrap: str, output: str, **conn: Any) -> None:
    """Delete a group without members and its committed offsets."""
    with connect({"bootstrap": bootstrap, **conn}) as client:
        try:
            client.delete_groups([group])
        except StrataError as exc:
            fail(str(exc))
    emit(output, {"deleted": group}, f"deleted group {group}")
