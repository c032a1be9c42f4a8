"""``strata groups list|describe|delete|reset-offsets|delete-offsets``: consumer groups of a
running broker, with their lag (kclient.lag), through its Kafka listener."""

from __future__ import annotations

import sys
from typing import Any

import click

from api.cli.common import (
    cell,
    emit,
    fail,
    output_option,
    partition_specs,
    print_table,
    topic_specs_option,
)
from api.cli.connect import connect, connection_options
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
    from kclient.lag import partition_lag

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
                        "type": g.get("type", "classic"),
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
        ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "PROTOCOL", "MEMBERS", "LAG"],
        [
            [
                g["group_id"],
                g["type"],
                g["state"],
                g["protocol_type"],
                g["protocol"],
                g["members"],
                g["total_lag"],
            ]
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
    epochs = ""
    if info.get("type") == "consumer":  # KIP-848: the assignor is the protocol
        epochs = f"  group epoch {info['group_epoch']}  assignment epoch {info['assignment_epoch']}"
    click.echo(
        f"group {info['group_id']}  type {info.get('type', 'classic')}  state {info['state']}  "
        f"protocol {cell(info['protocol'])}  members {len(info['members'])}  total lag {info['total_lag']}"
        f"{epochs}"
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
            [
                "CONSUMER-ID",
                "INSTANCE-ID",
                "HOST",
                "CLIENT-ID",
                "EPOCH",
                "#PARTITIONS",
                "ASSIGNMENT",
                "TARGET",
            ],
            [
                [
                    m["member_id"],
                    m["group_instance_id"],
                    m["host"],
                    m["client_id"],
                    m.get("member_epoch"),
                    len(m["partitions"]),
                    ", ".join(f"{t}-{p}" for t, p in m["partitions"]),
                    ", ".join(f"{t}-{p}" for t, p in m.get("target_partitions", m["partitions"])),
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


def _timestamp_ms(text: str) -> int:
    from api.cli.records import CliError, timestamp_ms

    try:
        return timestamp_ms(text, option="--to-datetime")
    except CliError as exc:
        fail(str(exc))
    raise AssertionError  # fail exits


@groups.command("reset-offsets")
@click.argument("group")
@topic_specs_option()
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The log end offset (high watermark).")
@click.option("--to-offset", type=click.IntRange(min=0), help="This offset (kept within the log).")
@click.option("--to-datetime", metavar="ISO", help="The first offset at or after this time [local time].")
@click.option("--shift-by", type=int, help="The committed offset plus N (N may be negative).")
@click.option("--dry-run/--execute", default=True, help="Show the new offsets [default], or commit them.")
@connection_options
@output_option
def groups_reset_offsets(
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    dry_run: bool,
    output: str,
    **conn: Any,
) -> None:
    """Move a group's committed offsets, as kafka-consumer-groups --reset-offsets: a dry
    run unless --execute; refused while the group has members. New offsets are kept
    between each partition's log start and log end."""
    given = [to_earliest, to_latest, to_offset is not None, to_datetime is not None, shift_by is not None]
    if sum(given) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by")
    with connect(conn) as client:
        try:
            state = client.describe_groups([group])[0]
            if state["members"] or state["state"] not in ("Empty", "Dead"):
                fail(
                    f"group {group!r} has {len(state['members'])} member(s) (state {state['state']}): "
                    "offsets can be reset only while it is inactive; stop its consumers first"
                )
            parts = partition_specs(client, group, topics, all_topics)
            current = client.committed_offsets(group)
            earliest = client.list_offsets(parts, -2)
            latest = client.list_offsets(parts, -1)
            by_time = client.list_offsets(parts, _timestamp_ms(to_datetime)) if to_datetime else {}
            rows: list[dict[str, Any]] = []
            for key in parts:
                lo, hi = earliest.get(key), latest.get(key)
                if lo is None or hi is None:
                    fail(f"{key[0]}-{key[1]}: the broker gave no offsets for it")
                assert lo is not None and hi is not None
                if to_earliest:
                    new = lo
                elif to_latest:
                    new = hi
                elif to_offset is not None:
                    new = to_offset
                elif to_datetime is not None:
                    found = by_time.get(key, -1)
                    new = hi if found < 0 else found  # no record at or after it: the end
                else:
                    if key not in current:
                        fail(f"{key[0]}-{key[1]}: group {group!r} has no committed offset to shift")
                    new = current[key] + (shift_by or 0)
                rows.append(
                    {
                        "group": group,
                        "topic": key[0],
                        "partition": key[1],
                        "current_offset": current.get(key),
                        "new_offset": min(max(new, lo), hi),
                    }
                )
            if not dry_run and rows:
                client.commit_offsets(group, {(r["topic"], r["partition"]): r["new_offset"] for r in rows})
        except StrataError as exc:
            fail(str(exc))
    if output == "json":
        emit(output, {"executed": not dry_run, "partitions": rows}, "")
        return
    print_table(
        None,
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
        [[r["group"], r["topic"], r["partition"], r["current_offset"], r["new_offset"]] for r in rows],
    )
    if dry_run:
        click.echo("dry run: nothing committed (--execute commits these offsets)")


@groups.command("delete-offsets")
@click.argument("group")
@topic_specs_option(required=True)
@connection_options
@output_option
def groups_delete_offsets(group: str, topics: tuple[str, ...], output: str, **conn: Any) -> None:
    """Delete a group's committed offsets of some topics (OffsetDelete, as
    kafka-consumer-groups --delete-offsets); refused per partition while a member of the
    group consumes the topic."""
    with connect(conn) as client:
        try:
            parts = partition_specs(client, group, topics, False)
            codes = client.delete_offsets(group, parts)
        except StrataError as exc:
            fail(str(exc))
    rows = [
        {"topic": t, "partition": p, "error": None if code == 0 else client.error_name(code)}
        for (t, p), code in sorted(codes.items())
    ]
    if output == "json":
        emit(output, rows, "")
    else:
        print_table(
            None,
            ["TOPIC", "PARTITION", "STATUS"],
            [[r["topic"], r["partition"], r["error"] or "Successful"] for r in rows],
        )
    if any(r["error"] for r in rows):
        sys.exit(1)


# The share-group commands join this group (their module does not import this one).
from api.cli import share_groups  # noqa: E402

groups.add_command(share_groups.groups_reset_share_offsets)
groups.add_command(share_groups.groups_delete_share_offsets)
groups.add_command(share_groups.groups_describe_share)
