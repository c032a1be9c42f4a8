"""Tiered storage from the command line: ``strata tier status`` and ``strata tier sync``
(a running broker's REST API), ``strata restore`` (topics from the object store into a data directory,
tiering.restore) and ``strata export`` (topics to Parquet files as the Spark data source
reads them, spark.export)."""

from __future__ import annotations

from typing import Any

import click

from api.cli.common import (
    check_store_url,
    default_object_store,
    emit,
    fail,
    http_json,
    no_topic,
    output_option,
    print_table,
)
from api.cli.connect import connection_options, http_access, http_options
from hot.errors import StrataError


@click.command()
@click.option(
    "--data-dir", required=True, type=click.Path(file_okay=False), help="Data directory to restore into."
)
@click.option(
    "--object-store", "object_store", required=True, metavar="URL", help="s3://bucket/prefix or file:///path."
)
@click.option(
    "--topic", "-t", "topics", multiple=True, metavar="NAME", help="Restore only this topic (repeatable)."
)
@output_option
def restore(data_dir: str, object_store: str, topics: tuple[str, ...], output: str) -> None:
    """Recreate topics from the object store into a data directory (no broker may run on it).

    History stays in the bucket and is served from there; new appends continue after the
    last remote offset of every partition."""
    import asyncio
    from pathlib import Path

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tiering.restore import RestoredTopic, RestoreEvent, restore_data_dir
    from tiering.store import open_store

    check_store_url(object_store)
    console = Console(stderr=True)
    bar = Progress(
        TextColumn("[bold]restore[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("partitions"),
        TimeElapsedColumn(),
        console=console,
        transient=output == "json",
    )
    task = bar.add_task("reading manifests", total=None)

    def on_progress(ev: RestoreEvent) -> None:
        bar.update(task, total=ev.total, completed=ev.done, description=ev.topic)
        bar.console.print(f"  {ev.topic}: {ev.message}")

    async def go() -> list[RestoredTopic]:
        store = open_store(object_store)
        try:
            return await restore_data_dir(Path(data_dir), store, topics=topics or None, progress=on_progress)
        finally:
            await store.close()

    try:
        with bar:
            restored = asyncio.run(go())
    except StrataError as exc:
        fail(str(exc))
    data = [
        {
            "topic": t.name,
            "topic_id": str(t.topic_id),
            "partitions": t.partitions,
            "next_offsets": {str(p): o for p, o in sorted(t.next_offsets.items())},
            "producer_snapshots": t.snapshots_installed,
            "skipped": t.skipped,
        }
        for t in restored
    ]
    lines = [
        f"{t.name}: {t.skipped}"
        if t.skipped
        else f"restored {t.name} ({t.partitions} partitions, next offsets "
        + ", ".join(f"{p}:{o}" for p, o in sorted(t.next_offsets.items()))
        + ")"
        for t in restored
    ]
    emit(output, data, "\n".join(lines) if lines else "no topics in the object store")


@click.command("export")
@click.option("--topic", "-t", "topics", required=True, metavar="NAME[,NAME...]", help="Topic(s) to export.")
@click.option("--format", "fmt", type=click.Choice(["parquet"]), default="parquet", show_default=True)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option(
    "--object-store",
    "object_store",
    metavar="URL",
    help="s3://bucket/prefix or file:///path [file://<data-dir>/objects].",
)
@click.option(
    "--data-dir",
    default="./strata-data",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Broker data directory, for the default object store.",
)
@click.option("--partitions", metavar="0,1,...", help="Only these partitions.")
@click.option(
    "--starting-offsets", metavar="earliest|JSON", help='As Spark\'s Kafka source: {"topic":{"0":100}}.'
)
@click.option("--ending-offsets", metavar="latest|JSON", help="Exclusive; as Spark's Kafka source.")
@click.option(
    "--include-hot", is_flag=True, help="Also export the not-yet-tiered tail, fetched from --bootstrap."
)
@connection_options
@click.option(
    "--option",
    "extra",
    multiple=True,
    metavar="NAME=VALUE",
    help="Any option of the Spark data source, e.g. --option startingTimestamp=1700000000000 (repeatable).",
)
@click.option(
    "--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 64), help="Parallel tasks."
)
@click.option("--overwrite", is_flag=True, help="Replace a non-empty --out directory (else refused).")
@output_option
def export_cmd(
    topics: str,
    fmt: str,
    out_dir: str,
    object_store: str | None,
    data_dir: str,
    partitions: str | None,
    starting_offsets: str | None,
    ending_offsets: str | None,
    include_hot: bool,
    bootstrap: str,
    extra: tuple[str, ...],
    jobs: int,
    overwrite: bool,
    output: str,
    **conn: Any,
) -> None:
    """Write a topic's archived rows as Parquet, read straight from the object store.

    Rows and columns are those of the Spark data source (Spark's Kafka source schema plus
    headers), so spark.read.parquet(OUT) returns what spark.read.format("strata") does.
    All or nothing: written beside OUT and renamed to it when complete; a non-empty OUT is
    refused unless --overwrite. Records not archived yet are left out unless --include-hot
    (a note on stderr says how many, when the --bootstrap broker can tell)."""
    from pathlib import Path

    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from spark.export import check_target, export, parse_options

    opts: dict[str, str] = {}
    for item in extra:
        name, sep, value = item.partition("=")
        if not sep or not name:
            fail(f"--option expects NAME=VALUE, got {item!r}")
        opts[name] = value
    if starting_offsets:
        opts["startingOffsets"] = starting_offsets
    if ending_offsets:
        opts["endingOffsets"] = ending_offsets
    if include_hot:
        opts["includeHot"] = "true"
        opts.setdefault("broker", bootstrap)
        # the connection options, as the data source's kafka.* options (spark.options)
        from api.cli.connect import client_properties

        props = client_properties({"bootstrap": bootstrap, **conn})
        props.pop("_source")
        for key, value in props.items():
            opts.setdefault(f"kafka.{key}", value)
    url = object_store or default_object_store(data_dir)
    check_store_url(url)
    try:
        check_target(Path(out_dir), overwrite)  # before the progress bar: a refusal is one line
    except StrataError as exc:
        fail(str(exc))
    bar = Progress(
        TextColumn("[bold]export[/bold] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[rows]:,} rows, {task.fields[written]} written"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,  # the summary line says what was done; an error leaves only its line
    )
    task = bar.add_task(topics, total=None, rows=0, written=_size(0))

    def on_progress(done: int, total: int, rows: int) -> None:
        bar.update(task, completed=done, total=total or None, rows=rows)

    try:
        with bar:
            result = export(
                parse_options(url, topics, opts, partitions=partitions),
                out_dir,
                fmt=fmt,
                jobs=jobs,
                progress=on_progress,
                written=lambda n: bar.update(task, written=_size(n)),
                overwrite=overwrite,
            )
    except StrataError as exc:
        fail(str(exc))
    explicit_end = ending_offsets or any(k.startswith("ending") for k in opts)
    if not include_hot and not explicit_end:
        note = _tail_note(result.plan.ranges, {"bootstrap": bootstrap, **conn})
        if note:
            click.echo(f"strata: note: {note}", err=True)
    data = {
        "rows": result.rows,
        "files": [
            {"path": str(f.path), "topic": f.topic, "partition": f.partition, "rows": f.rows}
            for f in result.files
        ],
        "ranges": [
            {"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end}
            for r in result.plan.ranges
        ],
    }
    emit(output, data, f"exported {result.rows:,} rows to {out_dir} ({len(result.files)} {fmt} files)")


def _tail_note(ranges: Any, kw: dict[str, Any]) -> str | None:
    """What an export without --include-hot left out: the records above the archived end
    of each partition, by the --bootstrap broker's high watermarks (spark.tail, as the
    data source warns), or, when no broker answers, that it could not tell."""
    from api.cli.connect import Connection
    from spark.tail import per_topic, unarchived

    if not ranges:
        return None
    conn = Connection(kw)
    counts = unarchived(ranges, str(conn.addr), conn.security)
    if counts is None:
        return (
            f"only archived records were exported; no broker answered at {conn.addr} to tell whether "
            "newer ones exist (--include-hot adds them from a running broker)"
        )
    topics = per_topic(counts)
    missing = sum(n for n, _ in topics.values())
    if not missing:
        return None
    parts = sum(p for _, p in topics.values())
    return (
        f"{missing:,} records in {parts} partition(s) are not archived yet and were not exported "
        "(--include-hot adds them from the broker, `strata tier sync` uploads them now)"
    )


@click.group()
def tier() -> None:
    """Tiered storage of a running broker, through its REST API: status, and sync (upload now)."""


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


@tier.command("status")
@click.option(
    "--http",
    "http_url",
    default="http://127.0.0.1:8080",
    show_default=True,
    metavar="URL",
    help="Broker REST.",
)
@click.option("--topic", "-t", "topics", multiple=True, metavar="NAME", help="Only this topic (repeatable).")
@http_options
@output_option
def tier_status(http_url: str, topics: tuple[str, ...], output: str, **conn: Any) -> None:
    """Per partition: log start, local log start, high watermark, log end, local and remote
    bytes, upload lag; and whether the object store is reachable. An https:// listener
    takes the TLS properties (--tls-ca, -X ssl.*), one with authentication a user
    (--sasl-user, password from $STRATA_SASL_PASSWORD) or a bearer --token."""
    base = http_url.rstrip("/")
    context, headers = http_access(conn)
    status = http_json(f"{base}/v1/status", context, headers)
    listed = http_json(f"{base}/v1/partitions", context, headers)["topics"]
    known = {t["topic"] for t in listed}
    missing = [t for t in topics if t not in known]
    if missing:
        fail(no_topic(missing[0]))
    chosen = [t for t in listed if not topics or t["topic"] in topics]
    lag = sum(p["upload_lag_bytes"] for t in chosen for p in t["partitions"])
    data = {
        "object_store": status["object_store"],
        "object_store_available": status["object_store_available"],
        "upload_lag_bytes": lag,
        "topics": chosen,
    }
    if output == "json":
        emit(output, data, "")
        return
    reach = "reachable" if status["object_store_available"] else "FAILING"
    click.echo(f"object store {status['object_store']} ({reach}); upload lag {_size(lag)}")
    print_table(
        None,
        ["TOPIC", "PARTITION", "LOG-START", "LOCAL-START", "HW", "LOG-END", "LOCAL", "REMOTE", "UPLOAD-LAG"],
        [
            [
                t["topic"],
                p["partition"],
                p["log_start_offset"],
                p["local_log_start_offset"],
                p["high_watermark"],
                p["log_end_offset"],
                f"{_size(p['local_bytes'])} / {p['local_segments']} seg",
                f"{_size(p['remote_bytes'])} / {p['remote_segments']} seg" if t["remote_storage"] else "off",
                f"{_size(p['upload_lag_bytes'])} / {p['upload_lag_segments']} seg",
            ]
            for t in chosen
            for p in t["partitions"]
        ],
    )


@tier.command("sync")
@click.argument("topic", required=False)
@click.option(
    "--http",
    "http_url",
    default="http://127.0.0.1:8080",
    show_default=True,
    metavar="URL",
    help="Broker REST (any broker of a cluster: it asks the others).",
)
@click.option(
    "--timeout",
    "timeout_s",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0, 600),
    help="Seconds each broker waits for its uploads.",
)
@http_options
@output_option
def tier_sync(topic: str | None, http_url: str, timeout_s: float, output: str, **conn: Any) -> None:
    """Make the bucket current now, for TOPIC or every tiered topic: roll the active
    segments that hold data, upload them (ignoring remote.copy.lag.ms) and wait until the
    manifests show them; prints per partition what was done. Every leader of a cluster
    does its partitions. Exits 1 when a partition is not complete in the bucket (its
    reason is printed). Needs ALTER on the cluster (or on TOPIC) when ACLs are on."""
    from urllib.parse import urlencode

    base = http_url.rstrip("/")
    context, headers = http_access(conn)
    query = {"timeout_ms": str(int(timeout_s * 1000))}
    if topic is not None:
        query["topic"] = topic
    doc = http_json(
        f"{base}/v1/tier/sync?{urlencode(query)}", context, headers, method="POST", timeout=timeout_s + 30
    )
    parts = doc["partitions"]
    incomplete = [p for p in parts if not p["complete"]]
    if output == "json":
        emit(output, doc, "")
    else:
        print_table(
            None,
            ["TOPIC", "PARTITION", "BROKER", "ROLLED", "LOG-END", "IN-BUCKET-TO", "STATE"],
            [
                [
                    p["topic"],
                    p["partition"],
                    p["broker"],
                    "yes" if p["rolled"] else "no",
                    p["target"],
                    p["remote_next_offset"],
                    "complete" if p["complete"] else f"PENDING: {p['pending']}",
                ]
                for p in parts
            ],
        )
        what = f"topic {topic}" if topic is not None else "every tiered topic"
        summary = (
            f"tier sync of {what}: {doc['uploaded_segments']} segment(s) uploaded; "
            f"{len(parts) - len(incomplete)} of {len(parts)} partition(s) complete in the bucket"
        )
        if doc["unreachable"]:
            summary += "; brokers not answering: " + ", ".join(str(b) for b in doc["unreachable"])
        click.echo(summary)
    if incomplete or doc["unreachable"]:
        raise SystemExit(1)
