"""``strata topic create|list|describe|delete``: topics of a running broker, through its
Kafka listener (api.client)."""

from __future__ import annotations

from typing import Any

import click

from api.cli_common import (
    emit,
    fail,
    no_topic,
    output_option,
)
from api.cli_connect import connect, connection_options
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
    parsed: dict[str, str] = {}
    for item in configs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--config expects KEY=VALUE, got {item!r}")
        parsed[key] = value
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
    for key, value in sorted(info["configs"].items()):
        lines.append(f"  {key}={value}")
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
