"""``strata produce|consume|bench``: the click commands; the logic (record parsing,
the produce/consume loops, the benchmark) is api.cli.records."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import uuid
from typing import Any

import click

from api.cli.common import (
    emit,
    fail,
    no_topic,
    output_option,
)
from api.cli.connect import connect, connection_options, librdkafka_config
from hot.errors import StrataError

# -- records: produce, consume, bench (logic in api.cli.records) ------------------------------


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

    console = Console(stderr=True)
    return Progress(
        TextColumn(f"[bold]{what}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,  # stdout carries the data; the bar is gone once done
        # only on a terminal: elsewhere rich would leave an empty line on stderr
        disable=not console.is_terminal,
    )


_acks = click.option(
    "--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True, help="Producer acks."
)


@click.command("produce")
@click.argument("topic_name", metavar="TOPIC")
@click.option("--file", "-f", "path", type=click.Path(dir_okay=False), help="Read FILE [stdin].")
@click.option("--raw", is_flag=True, help="The whole input is one record, bytes as they are (binary data).")
@click.option(
    "--delimiter", "-D", metavar="DELIM", help="Record delimiter, kcat's escapes (\\n \\t \\xNN) [\\n]."
)
@click.option("--key-separator", "-K", metavar="SEP", help="Split each record into KEY SEP VALUE.")
@click.option("--key", "-k", "fixed_key", metavar="KEY", help="This key for every record without one.")
@click.option("--partition", "-p", type=int, help="Produce to this partition [by key / sticky].")
@click.option(
    "--header", "-H", "header_items", multiple=True, metavar="KEY=VALUE", help="Header (repeatable)."
)
@click.option(
    "--compression",
    "-z",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
    help="Batch compression.",
)
@_acks
@connection_options
@output_option
def produce_cmd(
    topic_name: str,
    path: str | None,
    raw: bool,
    delimiter: str | None,
    key_separator: str | None,
    fixed_key: str | None,
    partition: int | None,
    header_items: tuple[str, ...],
    compression: str,
    acks: str,
    output: str,
    **conn: Any,
) -> None:
    """Produce one record per input line (or per --delimiter, or the whole input with
    --raw), bytes as given in any encoding; prints a one-line summary."""
    from api.cli.records import CliError, OutRecord, parse_records, produce, split_input, unescape

    if raw and delimiter is not None:
        fail("--raw sends the whole input as one record: it cannot go with --delimiter")
    try:
        delim = None if raw else unescape(delimiter if delimiter is not None else "\\n", option="--delimiter")
        key_sep = None if key_separator is None else unescape(key_separator, option="--key-separator")
    except CliError as exc:
        fail(str(exc))
    if delim == b"":
        fail("--delimiter must not be empty")
    if key_sep == b"":
        fail("--key-separator must not be empty")
    headers: list[tuple[str, bytes]] = []
    for item in header_items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--header expects KEY=VALUE, got {item!r}")
        headers.append((key, os.fsencode(value)))  # argv's bytes, UTF-8 or not
    parts = _partitions_of(conn, topic_name)
    config = librdkafka_config(conn)
    _check_partition(topic_name, parts, partition)
    try:
        if path is not None:
            with open(path, "rb") as f:
                data = f.read()
            source = path
        else:
            data = sys.stdin.buffer.read()  # bytes: records need not be UTF-8
            source = "stdin"
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    what = "line" if delim == b"\n" else "record"
    try:
        records = list(parse_records(split_input(data, delim), key_sep, source=source, what=what))
        if fixed_key is not None:
            records = [
                r if r.key is not None else OutRecord(os.fsencode(fixed_key), r.value) for r in records
            ]
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
                compression=compression,
                progress=lambda n: bar.update(task, completed=n),
            )
    except CliError as exc:
        fail(str(exc))
    emit(output, summary.to_json(), summary.text())


# consume's output formats. They are no longer spelled -o (kcat's and rpk's start offset;
# -o json was strata's first spelling): --output FMT and -J (kcat's JSON envelope) replace it.
_OUTPUTS = ("json", "text")


def _consume_options(
    o_values: tuple[str, ...],
    offset_text: str | None,
    from_beginning: bool,
    output: str | None,
    json_flag: bool,
) -> tuple[str | None, str, str | None, str]:
    """consume's ``-o`` (repeatable, as kcat's): a start offset or ``e@TIME`` where to stop;
    ``-o json``/``-o text`` still choose the output for one release, with a note on stderr.
    Returns (start offset, the option that gave it, stop time, output)."""
    option = "--offset"
    stop: str | None = None
    for value in o_values:
        if value in _OUTPUTS:
            flag = "-J (or --output json)" if value == "json" else "--output text"
            note = f"strata: note: -o {value} is deprecated: -o is the start offset; use {flag}"
            click.echo(note, err=True)
            if output is not None and output != value:
                fail(f"-o {value} and --output {output} disagree")
            output = value
        elif value.startswith("e@"):
            if stop is not None:
                fail("give at most one -o e@TIME")
            stop = value[2:]
        else:
            if offset_text is not None:
                fail("give at most one start offset (-o OFFSET or --offset)")
            offset_text, option = value, "-o"
    if json_flag:
        if output == "text":
            fail("-J is JSON output: it cannot go with text output")
        output = "json"
    if from_beginning and offset_text is not None:
        fail("give at most one of --offset and --from-beginning")
    return ("beginning" if from_beginning else offset_text), option, stop, output or "text"


@click.command("consume")
@click.argument("topic_name", metavar="TOPIC")
@click.option("--partition", "-p", type=int, help="Only this partition [all].")
@click.option(
    "-o",
    "o_values",
    multiple=True,
    metavar="OFFSET|e@TIME",
    help="Start offset as kcat's -o (N, -N: N before the end, s@MS or s@ISO, beginning, end, stored) "
    "[beginning; with --group its committed offsets]; e@MS or e@ISO: stop before the first record "
    "at or after that time. (-o json|text is deprecated: use -J or --output.)",
)
@click.option("--offset", "offset_text", metavar="OFFSET", help="Start here, as -o.")
@click.option("--from-beginning", is_flag=True, help="Same as --offset beginning (the default).")
@click.option("--count", "-n", "-c", type=click.IntRange(min=1), help="Stop after N records.")
@click.option("--exit-at-end", "-e", is_flag=True, help="Stop once every partition is read to its end.")
@click.option("--group", "-g", help="Consumer group: start at its committed offsets, commit at the end.")
@click.option("--timeout", "idle_timeout", type=float, help="Stop after SECONDS without a record [never].")
@click.option("--print-key", is_flag=True, help="Text output: KEY<TAB>VALUE.")
@click.option(
    "--key-delimiter", "-K", metavar="DELIM", help="Print KEY DELIM VALUE, bytes as they are (kcat's -K)."
)
@click.option(
    "--delimiter", "-D", metavar="DELIM", help="End each record with DELIM, not a newline (kcat's -D)."
)
@click.option("--format", "-f", "fmt", metavar="FMT", help="kcat's -f format, e.g. '%k=%s (%p/%o)\\n'.")
@click.option(
    "--output", type=click.Choice(_OUTPUTS), help="Output [text]; no -o short form here: -o is the offset."
)
@click.option("-J", "json_flag", is_flag=True, help="JSON output, one object per record (kcat's -J).")
@connection_options
def consume_cmd(
    topic_name: str,
    partition: int | None,
    o_values: tuple[str, ...],
    offset_text: str | None,
    from_beginning: bool,
    count: int | None,
    exit_at_end: bool,
    group: str | None,
    idle_timeout: float | None,
    print_key: bool,
    key_delimiter: str | None,
    delimiter: str | None,
    fmt: str | None,
    output: str | None,
    json_flag: bool,
    **conn: Any,
) -> None:
    """Print records from the beginning (as kcat and rpk; with --group from its committed
    offsets): one value per line, with -f in kcat's format, or with -J one JSON object per
    record (topic, partition, offset, timestamp, key, value, headers; bytes
    that are not UTF-8 also as key_base64 / value_base64)."""
    from api.cli.records import (
        CliError,
        Start,
        compile_format,
        consume,
        parse_offset,
        record_json,
        render,
        resolve_start,
        timestamp_ms,
    )

    offset_text, option, stop_text, out = _consume_options(
        o_values, offset_text, from_beginning, output, json_flag
    )
    if idle_timeout is not None and idle_timeout <= 0:
        fail(f"--timeout must be positive, got {idle_timeout:g}")
    if key_delimiter is not None or delimiter is not None:
        if fmt is not None:
            fail("-f gives the whole record: it takes no -K or -D (put the delimiters in it)")
        # as kcat: -K and -D are a format, key and value written byte for byte
        key_part = "" if key_delimiter is None else "%k" + key_delimiter.replace("%", "%%")
        fmt = key_part + "%s" + ("\\n" if delimiter is None else delimiter.replace("%", "%%"))
    if fmt is not None and (out == "json" or print_key):
        fail("-f, -K and -D give the whole record: they cannot go with JSON output or --print-key")
    try:
        start = parse_offset(offset_text, option=option) if offset_text is not None else None
        stop_ms = timestamp_ms(stop_text, option="-o e@") if stop_text is not None else None
        compiled = compile_format(fmt) if fmt is not None else None
    except CliError as exc:
        fail(str(exc))
    # as kcat and rpk: from the beginning; a group from its committed offsets, and from the
    # beginning where it has none (rpk's default; an explicit -o stored keeps librdkafka's
    # auto.offset.reset=latest, as kcat)
    reset = "latest"
    if start is None:
        start, reset = Start("stored" if group is not None else "earliest"), "earliest"
    if start.kind == "stored" and group is None:
        fail("-o stored starts at a group's committed offsets: give --group")
    parts = _partitions_of(conn, topic_name)
    config = librdkafka_config(conn)
    _check_partition(topic_name, parts, partition)
    chosen = [p for p in parts if partition is None or p["partition"] == partition]
    by_time: dict[int, int] = {}
    if start.kind == "time":
        with connect(conn) as client:
            try:
                found = client.list_offsets([(topic_name, p["partition"]) for p in chosen], start.value)
            except StrataError as exc:
                fail(str(exc))
        by_time = {p: o for (_, p), o in found.items()}
    try:
        starts = {p["partition"]: resolve_start(start, topic_name, p, by_time) for p in chosen}
    except CliError as exc:
        fail(str(exc))
    raw = sys.stdout.buffer

    def emit(msg: Any) -> None:
        if compiled is not None:
            raw.write(render(compiled, msg))
        elif out == "json":
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
                starts,
                group=group,
                count=count,
                idle_timeout=idle_timeout,
                on_record=emit,
                exit_at_end=exit_at_end,
                stop_ms=stop_ms,
                reset=reset,
            )
    except CliError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, as kcat does; nothing is committed
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    try:
        raw.flush()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


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
    from api.cli.records import CliError, bench

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
