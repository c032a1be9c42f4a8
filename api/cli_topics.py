"""``strata topic create|list|describe|delete``: topics of a running broker, through its
Kafka listener (api.client)."""

from __future__ import annotations

import click

from api.cli_common import (
    bootstrap_option,
    emit,
    fail,
    kafka_client,
    output_option,
)
from hot.errors import StrataError


@click.group()
def topic() -> None:
    """Create, list, describe and delete topics on a running broker."""


@topic.command("create")
@click.argument("name")
@click.option("--partitions", "-p", type=int, default=1, show_default=True)
@click.option("--replication-factor", "-r", type=int, default=1, show_default=True)
@click.option(
    "--config", "-c", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (repeatable)."
)
@bootstrap_option
@output_option
def topic_create(
    name: str, partitions: int, replication_factor: int, configs: tuple[str, ...], bootstrap: str, output: str
) -> None:
    """Create a topic."""
    parsed: dict[str, str] = {}
    for item in configs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--config expects KEY=VALUE, got {item!r}")
        parsed[key] = value
    with kafka_client(bootstrap) as client:
        try:
            client.create_topic(name, partitions, replication_factor, parsed)
        except StrataError as exc:
            fail(str(exc))
    emit(output, {"topic": name, "partitions": partitions}, f"created topic {name} ({partitions} partitions)")


@topic.command("list")
@bootstrap_option
@output_option
def topic_list(bootstrap: str, output: str) -> None:
    """List topics."""
    with kafka_client(bootstrap) as client:
        try:
            topics = client.list_topics()
        except StrataError as exc:
            fail(str(exc))
    names = sorted(t["name"] for t in topics)
    emit(output, names, "\n".join(names))


@topic.command("describe")
@click.argument("name")
@bootstrap_option
@output_option
def topic_describe(name: str, bootstrap: str, output: str) -> None:
    """Show partitions, offsets and configuration of a topic."""
    with kafka_client(bootstrap) as client:
        try:
            info = client.describe_topic(name)
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
@bootstrap_option
@output_option
def topic_delete(name: str, bootstrap: str, output: str) -> None:
    """Delete a topic and all its data."""
    with kafka_client(bootstrap) as client:
        try:
            client.delete_topic(name)
        except StrataError as exc:
            fail(str(exc))
    emit(output, {"deleted": name}, f"deleted topic {name}")
