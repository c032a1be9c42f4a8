"""``strata groups reset-share-offsets|delete-share-offsets``: a share group's start offsets
(KIP-932), as kafka-share-groups --reset-offsets / --delete-offsets: AlterShareGroupOffsets
and DeleteShareGroupOffsets through the broker's Kafka listener, refused by the broker
(NON_EMPTY_GROUP) while the group has members."""

from __future__ import annotations

import sys
from typing import Any

import click

from api.cli.common import emit, fail, output_option, partition_specs, print_table, topic_specs_option
from api.cli.connect import connect, connection_options
from hot.errors import StrataError

# Registered on `strata groups` by api.cli.groups (add_command), which this module does not
# import at load time; the wire codec is imported inside the commands, so `strata groups
# --help` loads neither (tests/ops/test_cli_startup.py).


@click.command("reset-share-offsets")
@click.argument("group")
@topic_specs_option(required=True)
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The log end offset (high watermark).")
@click.option("--to-offset", type=click.IntRange(min=0), help="This offset (kept within the log).")
@click.option("--dry-run/--execute", default=True, help="Show the new start offsets [default], or set them.")
@connection_options
@output_option
def groups_reset_share_offsets(
    group: str,
    topics: tuple[str, ...],
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    dry_run: bool,
    output: str,
    **conn: Any,
) -> None:
    """Set a share group's start offsets (nothing in flight from there), as
    kafka-share-groups --reset-offsets: a dry run unless --execute; the broker refuses
    while the group has members."""
    from kwire import ApiKey
    from kwire.messages.share_group_offsets import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsRequestPartition,
        AlterShareGroupOffsetsRequestTopic,
    )

    if sum([to_earliest, to_latest, to_offset is not None]) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset")
    with connect(conn) as client:
        try:
            parts = partition_specs(client, group, topics, False)
            earliest = client.list_offsets(parts, -2)
            latest = client.list_offsets(parts, -1)
            rows: list[dict[str, Any]] = []
            for key in parts:
                lo, hi = earliest.get(key), latest.get(key)
                if lo is None or hi is None:
                    fail(f"{key[0]}-{key[1]}: the broker gave no offsets for it")
                assert lo is not None and hi is not None
                new = lo if to_earliest else hi if to_latest else (to_offset or 0)
                rows.append(
                    {
                        "group": group,
                        "topic": key[0],
                        "partition": key[1],
                        "new_offset": min(max(new, lo), hi),
                    }
                )
            errors: dict[tuple[str, int], str] = {}
            if not dry_run and rows:
                by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
                for r in rows:
                    by_topic.setdefault(r["topic"], []).append(
                        AlterShareGroupOffsetsRequestPartition(
                            partition_index=r["partition"], start_offset=r["new_offset"]
                        )
                    )
                req = AlterShareGroupOffsetsRequest(
                    group_id=group,
                    topics=tuple(
                        AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
                        for t, ps in by_topic.items()
                    ),
                )
                with client.at_coordinator(group) as coord:  # answered there only
                    resp = coord.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, req)
                if resp.error_code:
                    fail(_top_error(client, group, resp))
                errors = {
                    (t.topic_name, p.partition_index): client.error_name(p.error_code)
                    for t in resp.responses
                    for p in t.partitions
                    if p.error_code
                }
            for r in rows:
                r["error"] = errors.get((r["topic"], r["partition"]))
        except StrataError as exc:
            fail(str(exc))
    if output == "json":
        emit(output, {"executed": not dry_run, "partitions": rows}, "")
    else:
        print_table(
            None,
            ["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET", "STATUS"],
            [
                [
                    r["group"],
                    r["topic"],
                    r["partition"],
                    r["new_offset"],
                    r["error"] or ("dry run" if dry_run else "Successful"),
                ]
                for r in rows
            ],
        )
        if dry_run:
            click.echo("dry run: nothing set (--execute sets these start offsets)")
    if any(r["error"] for r in rows):
        sys.exit(1)


@click.command("delete-share-offsets")
@click.argument("group")
@click.option(
    "--topic", "-t", "topics", multiple=True, required=True, metavar="TOPIC", help="Topic (repeatable)."
)
@connection_options
@output_option
def groups_delete_share_offsets(group: str, topics: tuple[str, ...], output: str, **conn: Any) -> None:
    """Delete a share group's state of whole topics (DeleteShareGroupOffsets, as
    kafka-share-groups --delete-offsets): the group starts them again where
    share.auto.offset.reset says. Refused while the group has members."""
    from kwire import ApiKey
    from kwire.messages.share_group_offsets import (
        DeleteShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsRequestTopic,
    )

    with connect(conn) as client:
        try:
            req = DeleteShareGroupOffsetsRequest(
                group_id=group,
                topics=tuple(DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics),
            )
            with client.at_coordinator(group) as coord:  # answered there only
                resp = coord.call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, req)
        except StrataError as exc:
            fail(str(exc))
    if resp.error_code:
        fail(
            f"group {group!r}: {client.error_name(resp.error_code)}: {resp.error_message or ''}".rstrip(": ")
        )
    rows = [
        {"topic": t.topic_name, "error": client.error_name(t.error_code) if t.error_code else None}
        for t in resp.responses
    ]
    if output == "json":
        emit(output, rows, "")
    else:
        print_table(None, ["TOPIC", "STATUS"], [[r["topic"], r["error"] or "Successful"] for r in rows])
    if any(r["error"] for r in rows):
        sys.exit(1)


def _top_error(client: Any, group: str, resp: Any) -> str:
    text = f"group {group!r}: {client.error_name(resp.error_code)}"
    return f"{text}: {resp.error_message}" if resp.error_message else text


@click.command("describe-share")
@click.argument("group")
@connection_options
@output_option
def groups_describe_share(group: str, output: str, **conn: Any) -> None:
    """A share group (KIP-932), as kafka-share-groups --describe: per partition its start
    offset (-1: no state yet), log end offset and lag (records from the start offset to
    the end: in flight or not yet delivered), then the members and their assignments."""
    from kwire import ApiKey
    from kwire.messages.describe_share_group_offsets import (
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequestGroup,
    )
    from kwire.messages.share_group_describe import ShareGroupDescribeRequest

    with connect(conn) as client:
        try:
            with client.at_coordinator(group) as coord:  # the group requests are answered there
                described = coord.call(
                    ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(group_ids=(group,))
                ).groups[0]
                if described.error_code:
                    fail(_top_error(client, group, described))
                offsets = coord.call(
                    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                    DescribeShareGroupOffsetsRequest(
                        groups=(DescribeShareGroupOffsetsRequestGroup(group_id=group),)
                    ),
                ).groups[0]
            starts = {
                (t.topic_name, p.partition_index): p.start_offset
                for t in offsets.topics
                for p in t.partitions
                if not p.error_code
            }
            ends = client.list_offsets(starts, -1)
        except StrataError as exc:
            fail(str(exc))
    partitions = [
        {
            "topic": t,
            "partition": p,
            "start_offset": start,
            "log_end_offset": ends.get((t, p)),
            "lag": None if start < 0 or (t, p) not in ends else max(0, ends[(t, p)] - start),
        }
        for (t, p), start in sorted(starts.items())
    ]
    members = [
        {
            "member_id": m.member_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "host": m.client_host,
            "partitions": [(tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions],
        }
        for m in described.members
    ]
    info = {
        "group_id": group,
        "type": "share",
        "state": described.group_state,
        "group_epoch": described.group_epoch,
        "members": members,
        "partitions": partitions,
    }
    if output == "json":
        emit(output, info, "")
        return
    click.echo(
        f"group {group}  type share  state {described.group_state}  members {len(members)}  "
        f"group epoch {described.group_epoch}"
    )
    print_table(
        None,
        ["TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG"],
        [[r["topic"], r["partition"], r["start_offset"], r["log_end_offset"], r["lag"]] for r in partitions],
    )
    if members:
        print_table(
            "members",
            ["MEMBER-ID", "EPOCH", "HOST", "CLIENT-ID", "ASSIGNMENT"],
            [
                [
                    m["member_id"],
                    m["member_epoch"],
                    m["host"],
                    m["client_id"],
                    ", ".join(f"{t}-{p}" for t, p in m["partitions"]),
                ]
                for m in members
            ],
        )
