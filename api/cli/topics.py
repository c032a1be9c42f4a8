"""``strata topic create|list|describe|delete|alter-config|add-partitions|trim``: topics of
a running broker, through its Kafka listener (kclient; the admin calls of rpk's ``topic``
commands are kclient.topic_admin)."""

from __future__ import annotations

from typing import Any

import click

from api.cli.common import (
    emit,
    fail,
    no_topic,
    output_option,
    print_table,
)
from api.cli.connect import connect, connection_options
from hot.errors import StrataError, UnknownTopicOrPartitionError


@click.group()
def topic() -> None:
    """Create, list, describe and delete topics on a running broker."""


@topic.command("create")
@click.argument("name")
@click.option("--partitions", "-p", type=int, default=1, show_default=True)
@click.option(
    "--replication-factor",
    "-r",
    type=click.IntRange(min=1),
    help="Replicas per partition [the cluster's default.replication.factor].",
)
@click.option(
    "--config", "-c", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (repeatable)."
)
@connection_options
@output_option
def topic_create(
    name: str,
    partitions: int,
    replication_factor: int | None,
    configs: tuple[str, ...],
    bootstrap: str,
    output: str,
    **conn: Any,
) -> None:
    """Create a topic."""
    parsed = dict(_pairs("--config", configs))
    with connect({"bootstrap": bootstrap, **conn}) as client:
        try:
            # -1: the broker applies its default.replication.factor, as Kafka's tools leave it
            client.create_topic(name, partitions, replication_factor or -1, parsed)
        except StrataError as exc:
            fail(str(exc))
    emit(output, {"topic": name, "partitions": partitions}, f"created topic {name} ({partitions} partitions)")


@topic.command("list")
@connection_options
@output_option
def topic_list(bootstrap: str, output: str, **conn: Any) -> None:
    """List topics."""
    with connect({"bootstrap": bootstrap, **conn}) as client:
        try:
            topics = client.list_topics()
        except StrataError as exc:
            fail(str(exc))
    names = sorted(t["name"] for t in topics)
    emit(output, names, "\n".join(names))


@topic.command("describe")
@click.argument("name")
@connection_options
@output_option
def topic_describe(name: str, bootstrap: str, output: str, **conn: Any) -> None:
    """Show partitions, offsets and configuration of a topic."""
    with connect({"bootstrap": bootstrap, **conn}) as client:
        try:
            info = client.describe_topic(name)
        except UnknownTopicOrPartitionError:
            fail(no_topic(name))
        except StrataError as exc:
            fail(str(exc))
    lines = [f"topic {info['name']}  id {info['topic_id']}  partitions {len(info['partitions'])}"]
    for p in info["partitions"]:
        lines.append(
            f"  partition {p['partition']}: leader {p['leader']}  log start {p['log_start_offset']}"
            f"  high watermark {p['high_watermark']}"
        )
    sources = info.get("config_sources", {})
    for key, value in sorted(info["configs"].items()):
        lines.append(f"  {key}={value}  ({sources.get(key, 'unknown')})")
    emit(output, info, "\n".join(lines))


@topic.command("delete")
@click.argument("name")
@connection_options
@output_option
def topic_delete(name: str, bootstrap: str, output: str, **conn: Any) -> None:
    """Delete a topic and all its data."""
    with connect({"bootstrap": bootstrap, **conn}) as client:
        try:
            client.delete_topic(name)
        except UnknownTopicOrPartitionError:
            fail(no_topic(name))
        except StrataError as exc:
            fail(str(exc))
    emit(output, {"deleted": name}, f"deleted topic {name}")


def _pairs(option: str, items: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"{option} expects KEY=VALUE, got {item!r}")
        out.append((key.strip(), value))
    return out


@topic.command("alter-config")
@click.argument("name")
@click.option(
    "--set",
    "--config",
    "-c",
    "set_items",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a config (repeatable; -c as topic create's).",
)
@click.option(
    "--delete", "delete_keys", multiple=True, metavar="KEY", help="Back to the default (repeatable)."
)
@click.option("--append", "append_items", multiple=True, metavar="KEY=VALUE", help="Add to a list config.")
@click.option("--subtract", "subtract_items", multiple=True, metavar="KEY=VALUE", help="Remove from a list.")
@click.option("--dry-run", is_flag=True, help="Only validate the change (validate_only).")
@connection_options
@output_option
def topic_alter_config(
    name: str,
    set_items: tuple[str, ...],
    delete_keys: tuple[str, ...],
    append_items: tuple[str, ...],
    subtract_items: tuple[str, ...],
    dry_run: bool,
    output: str,
    **conn: Any,
) -> None:
    """Change some of a topic's configs, as rpk topic alter-config (IncrementalAlterConfigs:
    the other configs stay as they are; all changes apply or none)."""
    from kclient.topic_admin import alter_topic_configs

    ops: list[tuple[str, str, str | None]] = [("set", k, v) for k, v in _pairs("--set", set_items)]
    ops += [("delete", k.strip(), None) for k in delete_keys]
    ops += [("append", k, v) for k, v in _pairs("--append", append_items)]
    ops += [("subtract", k, v) for k, v in _pairs("--subtract", subtract_items)]
    if not ops:
        fail("give at least one of --set (-c), --delete, --append, --subtract")
    keys = [k for _, k, _ in ops]
    if len(set(keys)) != len(keys):
        fail(f"a config may change once per command: {sorted({k for k in keys if keys.count(k) > 1})}")
    with connect(conn) as client:
        try:
            alter_topic_configs(client, name, ops, validate_only=dry_run)
        except StrataError as exc:
            fail(str(exc))
    changes = [{"op": op, "key": k, "value": v} for op, k, v in ops]
    verb = "would alter" if dry_run else "altered"
    human = f"{verb} topic {name}: " + ", ".join(
        f"{k}={v}" if op == "set" else f"{op} {k}" + (f" {v}" if v is not None else "") for op, k, v in ops
    )
    emit(output, {"topic": name, "dry_run": dry_run, "changes": changes}, human)


@topic.command("add-partitions")
@click.argument("name")
@click.option("--num", "-n", type=click.IntRange(min=1), help="How many partitions to add (rpk's -n).")
@click.option(
    "--partitions",
    "total",
    type=click.IntRange(min=1),
    help="The new partition count, in all (kafka-topics.sh --alter --partitions).",
)
@connection_options
@output_option
def topic_add_partitions(name: str, num: int | None, total: int | None, output: str, **conn: Any) -> None:
    """Add partitions to a topic (CreatePartitions): -n N more, as rpk topic add-partitions,
    or --partitions N in all, as kafka-topics.sh. Keys may map to other partitions afterwards."""
    from kclient.topic_admin import create_partitions

    if (num is None) == (total is None):
        fail("give one of -n/--num (partitions to add) and --partitions (the new total)")
    with connect(conn) as client:
        try:
            before = client.partition_count(name)
            after = before + num if num is not None else int(total or 0)
            # a total at or below the count is the broker's to refuse (INVALID_PARTITIONS),
            # in Kafka's words
            create_partitions(client, name, after)
        except UnknownTopicOrPartitionError:
            fail(no_topic(name))
        except StrataError as exc:
            fail(str(exc))
    emit(
        output,
        {"topic": name, "partitions_before": before, "partitions": after},
        f"topic {name}: {before} -> {after} partitions",
    )


def _partition_list(text: str | None, count: int, name: str) -> list[int]:
    if text is None:
        return list(range(count))
    try:
        parts = sorted({int(x) for x in text.split(",")})
    except ValueError:
        fail(f"--partitions: expected comma-separated partition numbers like 0,2, got {text!r}")
    bad = [p for p in parts if not 0 <= p < count]
    if bad:
        fail(f"partition {bad[0]} out of range: {name} has partitions 0 to {count - 1}")
    return parts


@topic.command("trim")
@click.argument("name")
@click.option(
    "--offset",
    "offset_text",
    required=True,
    metavar="N|end|@TIME",
    help="The new log start offset: an offset, end (the high watermark), or the first record at or "
    "after @MS / @ISO-8601.",
)
@click.option("--partitions", "--partition", "-p", "partitions", metavar="P,...", help="Partitions [all].")
@click.option("--no-confirm", is_flag=True, help="Do not ask before deleting.")
@connection_options
@output_option
def topic_trim(
    name: str, offset_text: str, partitions: str | None, no_confirm: bool, output: str, **conn: Any
) -> None:
    """Delete the records before an offset, as rpk topic trim-prefix (DeleteRecords on each
    partition's leader): the log start offset moves up, on disk and in the object store."""
    from api.cli.connect import connect_all
    from api.cli.records import CliError, timestamp_ms
    from kclient.topic_admin import delete_records

    text = offset_text.strip()
    at_time: int | None = None
    offset = -1
    try:
        if text.startswith("@"):
            at_time = timestamp_ms(text[1:], option="--offset")
        elif text != "end":
            offset = int(text)
            if offset < 0:
                raise ValueError
    except CliError as exc:
        fail(str(exc))
    except ValueError:
        fail(f"--offset: expected an offset, end or @TIMESTAMP, got {offset_text!r}")
    client, other = connect_all(conn)
    with client:
        try:
            count = client.partition_count(name)
            chosen = _partition_list(partitions, count, name)
            if at_time is not None:
                latest = client.list_offsets([(name, p) for p in chosen], -1)
                found = client.list_offsets([(name, p) for p in chosen], at_time)
                targets = {p: found.get((name, p), -1) for p in chosen}
                targets = {p: o if o >= 0 else latest.get((name, p), -1) for p, o in targets.items()}
            else:
                targets = dict.fromkeys(chosen, offset)
            if not no_confirm:
                where = (
                    "every partition" if partitions is None else f"partitions {','.join(map(str, chosen))}"
                )
                click.confirm(
                    f"delete the records of {name} ({where}) before {offset_text}?", abort=True, err=True
                )
            results = delete_records(client, other, name, targets)
        except UnknownTopicOrPartitionError:
            fail(no_topic(name))
        except StrataError as exc:
            fail(str(exc))
    rows = [
        {
            "topic": name,
            "partition": p,
            "log_start_offset": low if not code else None,
            "error": client.error_name(code) if code else None,
        }
        for p, (low, code) in sorted(results.items())
    ]
    if output == "json":
        emit(output, rows, "")
    else:
        print_table(
            None,
            ["TOPIC", "PARTITION", "LOG-START-OFFSET", "ERROR"],
            [[r["topic"], r["partition"], r["log_start_offset"], r["error"]] for r in rows],
        )
    failed = [r for r in rows if r["error"]]
    if failed:
        fail(f"{len(failed)} of {len(rows)} partitions of {name} not trimmed: {failed[0]['error']}")


topic.add_command(topic_trim, "trim-prefix")  # rpk's name
