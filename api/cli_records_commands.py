"""``strata produce|consume|bench``: the click commands; the logic (record parsing,
the produce/consume loops, the benchmark) is api.cli_records."""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from typing import Any

import click

from api.cli_common import (
    emit,
    fail,
    no_topic,
    output_option,
)
from api.cli_connect import connect, connection_options, librdkafka_config
from hot.errors import StrataError

# -- records: produce, consume, bench (logic in api.cli_records) ------------------------------


def _partitions_of(conn: dict[str, Any], topic: str) -> list[dict[str, Any]]:
    """The topic's partitions (offsets included) from the first bootstrap broker; one-line
    errors for an unknown topic or an unreachable broker."""
    from hot.errors import UnknownTopicOrPartitionError

    with connect(conn) as client:
        try:
            parts: list[dict[str, Any]] = client.describe_topic(topic)["partitions"]
        except UnknownTopicOrPartitionError:
            fail(no_topic(topic))
        except StrataError as exc:
            fail(str(exc))
    return parts


def _check_partition(topic: str, parts: list[dict[str, Any]], partition: int | None) -> None:
    if partition is not None and not 0 <= partition < len(parts):
        fail(f"partition {partition} out of range: {topic} has partitions 0 to {len(parts) - 1}")


def _progress(what: str) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(f"[bold]{what}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,  # stdout carries the data; the bar is gone once done
    )


_acks = click.option(
    "--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True, help="Producer acks."
)


@click.command("produce")
@click.argument("topic_name", metavar="TOPIC")
@click.option("--file", "-f", "path", type=click.Path(dir_okay=False), help="Read lines from FILE [stdin].")
@click.option("--key-separator", "-K", metavar="SEP", help="Split each line into KEY SEP VALUE.")
@click.option("--partition", "-p", type=int, help="Produce to this partition [by key / sticky].")
@click.option(
    "--header", "-H", "header_items", multiple=True, metavar="KEY=VALUE", help="Header (repeatable)."
)
@_acks
@connection_options
@output_option
def produce_cmd(
    topic_name: str,
    path: str | None,
    key_separator: str | None,
    partition: int | None,
    header_items: tuple[str, ...],
    acks: str,
    output: str,
    **conn: Any,
) -> None:
    """Produce one record per input line (bytes as given, any encoding); prints a one-line
    summary."""
    from api.cli_records import CliError, parse_lines, produce

    if key_separator == "":
        fail("--key-separator must not be empty")
    headers: list[tuple[str, bytes]] = []
    for item in header_items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--header expects KEY=VALUE, got {item!r}")
        headers.append((key, value.encode()))
    parts = _partitions_of(conn, topic_name)
    config = librdkafka_config(conn)
    _check_partition(topic_name, parts, partition)
    try:
        if path is not None:
            with open(path, "rb") as f:
                lines = f.readlines()
            source = path
        else:
            lines = sys.stdin.buffer.readlines()  # bytes: records need not be UTF-8
            source = "stdin"
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    try:
        records = list(parse_lines(lines, key_separator, source=source))
        bar = _progress(f"produce {topic_name}")
        task = bar.add_task("produce", total=len(records))
        with bar:
            summary = produce(
                config,
                topic_name,
                records,
                acks=acks,
                partition=partition,
                headers=headers,
                progress=lambda n: bar.update(task, completed=n),
            )
    except CliError as exc:
        fail(str(exc))
    emit(output, summary.to_json(), summary.text())


@click.command("consume")
@click.argument("topic_name", metavar="TOPIC")
@click.option("--partition", "-p", type=int, help="Only this partition [all].")
@click.option(
    "--offset", "offset_text", metavar="N|earliest|latest", help="Start here [group's, else latest]."
)
@click.option("--from-beginning", is_flag=True, help="Same as --offset earliest.")
@click.option("--count", "-n", type=click.IntRange(min=1), help="Stop after N records.")
@click.option("--group", "-g", help="Consumer group: start at its committed offsets, commit at the end.")
@click.option("--timeout", "idle_timeout", type=float, help="Stop after SECONDS without a record [never].")
@click.option("--print-key", is_flag=True, help="Text output: KEY<TAB>VALUE.")
@connection_options
@output_option
def consume_cmd(
    topic_name: str,
    partition: int | None,
    offset_text: str | None,
    from_beginning: bool,
    count: int | None,
    group: str | None,
    idle_timeout: float | None,
    print_key: bool,
    output: str,
    **conn: Any,
) -> None:
    """Print records: one value per line, or with -o json one JSON object per record
    (topic, partition, offset, timestamp, key, value, headers)."""
    from api.cli_records import CliError, consume, parse_offset, record_json

    if from_beginning and offset_text is not None:
        fail("give at most one of --offset and --from-beginning")
    if idle_timeout is not None and idle_timeout <= 0:
        fail(f"--timeout must be positive, got {idle_timeout:g}")
    try:
        start = (
            parse_offset(offset_text) if offset_text is not None else ("earliest" if from_beginning else None)
        )
    except CliError as exc:
        fail(str(exc))
    parts = _partitions_of(conn, topic_name)
    config = librdkafka_config(conn)
    _check_partition(topic_name, parts, partition)
    chosen = [p for p in parts if partition is None or p["partition"] == partition]
    if isinstance(start, int):
        for p in chosen:
            lo, hi = p["log_start_offset"], p["high_watermark"]
            if not lo <= start <= hi:
                fail(f"--offset {start} is outside {topic_name}-{p['partition']} (offsets {lo} to {hi})")
    if start is None and group is None:
        start = "latest"

    def emit(msg: Any) -> None:
        if output == "json":
            click.echo(json.dumps(record_json(msg), sort_keys=True))
        else:
            value = (msg.value() or b"").decode("utf-8", errors="backslashreplace")
            if print_key:
                key = (msg.key() or b"").decode("utf-8", errors="backslashreplace")
                click.echo(f"{key}\t{value}")
            else:
                click.echo(value)
        if count is not None:
            bar.update(task, advance=1)

    bar = _progress(f"consume {topic_name}")
    task = bar.add_task("consume", total=count)
    try:
        with bar if count is not None else contextlib.nullcontext():
            consume(
                config,
                topic_name,
                {p["partition"]: start for p in chosen},
                group=group,
                count=count,
                idle_timeout=idle_timeout,
                on_record=emit,
            )
    except CliError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        pass


@click.command("bench")
@click.option("--records", "-n", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--record-size", type=click.IntRange(min=0), default=100, show_default=True, help="Bytes.")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True)
@_acks
@connection_options
@output_option
def bench_cmd(records: int, record_size: int, partitions: int, acks: str, output: str, **conn: Any) -> None:
    """Produce records to a scratch topic, fetch them back, print the rates; the topic is
    deleted afterwards. A quick health check, not bench/bench_broker.py."""
    from api.cli_records import CliError, bench

    name = f"strata-bench-{uuid.uuid4().hex[:8]}"
    config = librdkafka_config(conn)
    with connect(conn) as client:
        try:
            client.create_topic(name, partitions, -1, {})
        except StrataError as exc:
            fail(f"cannot create the scratch topic {name}: {exc}")
    bar = _progress("bench")
    tasks = {"produce": bar.add_task("produce", total=records), "fetch": bar.add_task("fetch", total=records)}
    try:
        with bar:
            result = bench(
                config,
                name,
                partitions,
                records,
                record_size,
                acks=acks,
                progress=lambda phase, n: bar.update(tasks[phase], completed=n),
            )
    except CliError as exc:
        fail(str(exc))
    finally:
        with connect(conn) as client, contextlib.suppress(StrataError):
            client.delete_topic(name)
    r = result.rates()
    data = {"records": records, "record_size": record_size, "partitions": partitions, "acks": acks, **r}
    human = (
        f"produce: {records:,} records of {record_size} B in {result.produce_seconds:.2f} s: "
        f"{r['produce_records_per_s']:,.0f} records/s, {r['produce_mib_per_s']:.1f} MiB/s (acks={acks})\n"
        f"fetch:   {records:,} records in {result.fetch_seconds:.2f} s: "
        f"{r['fetch_records_per_s']:,.0f} records/s, {r['fetch_mib_per_s']:.1f} MiB/s\n"
        f"fetch/produce throughput ratio: {r['fetch_to_produce_ratio']:.2f}"
    )
    emit(output, data, human)
