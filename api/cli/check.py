"""``strata check``: name every stored batch a consumer cannot read past.

The scan itself is hot.check (local segments) and tiering.check (``--remote``: the
bucket's segments); this module picks the partitions, drives the scans and prints the
result. Exit status: 0 nothing bad, 1 bad batches or unreadable data found, 2 a usage
error or a check that could not run (no such data directory, unreadable registry,
bucket unreachable).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

import click

if TYPE_CHECKING:
    from hot.check import PartitionCheck, Problem
    from hot.topics import TopicRegistry

EXIT_CLEAN: Final = 0
EXIT_BAD: Final = 1
EXIT_ERROR: Final = 2

Selection = dict[str, list[int] | None]  # topic -> partitions (None: all)


def _usage(message: str) -> NoReturn:
    click.echo(f"strata: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def parse_selection(args: Sequence[str]) -> Selection:
    """``TOPIC`` or ``TOPIC:PARTITION`` arguments (topic names cannot contain ':')."""
    out: Selection = {}
    for arg in args:
        topic, sep, part = arg.partition(":")
        if not topic:
            raise click.BadParameter(f"{arg!r} names no topic", param_hint="TOPIC[:PARTITION]")
        if not sep:
            out[topic] = None
            continue
        if not part.isdigit() or not part.isascii():
            raise click.BadParameter(f"{arg!r}: partition must be a number", param_hint="TOPIC[:PARTITION]")
        chosen = out.setdefault(topic, [])
        if chosen is not None and int(part) not in chosen:
            chosen.append(int(part))
    return out


def resolve(registry: TopicRegistry, selection: Selection) -> list[tuple[str, int]]:
    """The (topic, partition) pairs to check, every registered one when nothing is chosen."""
    if not selection:
        return [(t.name, p) for t in registry.list() for p in range(t.partitions)]
    out: list[tuple[str, int]] = []
    for topic, parts in selection.items():
        info = registry.get(topic)
        if info is None:
            from api.cli.common import no_topic

            _usage(no_topic(topic))  # the one wording of every command (exit 2: 1 means damage)
        for p in sorted(parts) if parts is not None else range(info.partitions):
            if p >= info.partitions:
                raise click.BadParameter(
                    f"topic {topic!r} has {info.partitions} partitions, no partition {p}",
                    param_hint="TOPIC[:PARTITION]",
                )
            out.append((topic, p))
    return sorted(out)


# --- the checks -----------------------------------------------------------------------------------


def check_local(
    data_dir: Path,
    registry: TopicRegistry,
    chosen: Sequence[tuple[str, int]],
    progress: Callable[[int], None],
) -> list[PartitionCheck]:
    from hot.check import check_partition_dir
    from hot.manager import LogManager

    layout = LogManager(data_dir)  # not opened: only its partition-directory naming is used
    return [
        check_partition_dir(
            layout.partition_dir(topic, p),
            topic,
            p,
            compact=registry.config(topic).compact,
            progress=progress,
        )
        for topic, p in chosen
    ]


async def check_bucket(
    url: str,
    data_dir: Path,
    registry: TopicRegistry,
    chosen: Sequence[tuple[str, int]],
    progress: Callable[[int], None],
) -> list[PartitionCheck]:
    from hot.log import LOG_START_OFFSET_FILE, read_offset_file
    from hot.manager import LogManager
    from tiering.check import check_remote_partition
    from tiering.manifest_store import ManifestStore
    from tiering.store import open_store

    layout = LogManager(data_dir)
    store = open_store(url)
    try:
        manifests = ManifestStore(store)
        out = []
        for topic, p in chosen:
            info = registry.get(topic)
            assert info is not None  # resolved against this registry
            local_start = read_offset_file(str(layout.partition_dir(topic, p) / LOG_START_OFFSET_FILE))
            out.append(
                await check_remote_partition(
                    manifests,
                    topic,
                    info.topic_id,
                    p,
                    compact=registry.config(topic).compact,
                    log_start_offset=local_start,
                    progress=progress,
                )
            )
        return out
    finally:
        await store.close()


# --- output -----------------------------------------------------------------------------------------


def problem_json(pc: PartitionCheck, p: Problem) -> dict[str, Any]:
    return {
        "topic": pc.topic,
        "partition": pc.partition,
        "source": pc.source,
        "kind": str(p.kind),
        "segment": p.segment,
        "position": p.position,
        "size": p.size,
        "base_offset": p.base_offset,
        "last_offset": p.last_offset,
        "expected_offset": p.expected_offset,
        "skip_to": p.skip_to,
        "below_log_start": p.below_log_start,
        "reason": p.reason,
    }


def report(
    data_dir: Path, object_store: str | None, checks: Sequence[PartitionCheck], elapsed: float
) -> dict[str, Any]:
    """The JSON document ``-o json`` prints (the text output shows the same)."""
    from hot.check import ProblemKind

    problems = [(pc, p) for pc in checks for p in pc.problems]

    def count(kind: ProblemKind) -> int:
        return sum(1 for _, p in problems if p.kind is kind and not p.below_log_start)

    summary = {
        "partitions": len({(pc.topic, pc.partition) for pc in checks}),
        "segments": sum(len(pc.segments) for pc in checks),
        "batches": sum(pc.batches for pc in checks),
        "records": sum(pc.records for pc in checks),
        "bytes": sum(pc.bytes for pc in checks),
        "bad_batches": count(ProblemKind.BAD_BATCH),
        "unreadable": count(ProblemKind.UNREADABLE),
        "torn_tails": count(ProblemKind.TORN_TAIL),
        "below_log_start": sum(1 for _, p in problems if p.below_log_start),
        "elapsed_s": round(elapsed, 3),
    }
    return {
        "data_dir": str(data_dir.resolve()),
        "object_store": object_store,
        "clean": not any(p.counts for _, p in problems),
        "summary": summary,
        "partitions": [
            {
                "topic": pc.topic,
                "partition": pc.partition,
                "source": pc.source,
                "log_start_offset": pc.log_start_offset,
                "segments": len(pc.segments),
                "batches": pc.batches,
                "records": pc.records,
                "bytes": pc.bytes,
                "problems": len(pc.problems),
                "note": pc.note,
            }
            for pc in checks
        ],
        "problems": [problem_json(pc, p) for pc, p in problems],
    }


def _offsets(p: dict[str, Any]) -> str:
    if p["base_offset"] is None:
        return f"from {p['expected_offset']}"
    return f"{p['base_offset']}-{p['last_offset']}"


def print_text(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160, soft_wrap=True)
    s = doc["summary"]
    console.print(
        f"checked {s['partitions']} partitions: {s['segments']} segments, {s['batches']:,} batches, "
        f"{s['records']:,} records, {s['bytes']:,} bytes in {s['elapsed_s']:.1f} s"
        + (f" (object store {doc['object_store']})" if doc["object_store"] else ""),
        highlight=False,
    )
    notes = Counter(p["note"] for p in doc["partitions"] if p["note"])
    for note, n in sorted(notes.items()):
        console.print(f"  {n} partition(s): {note}", highlight=False)
    if doc["problems"]:
        table = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("partition", "kind", "segment", "position", "offsets", "bytes", "resume at", "reason"):
            table.add_column(col, overflow="fold")
        for p in doc["problems"]:
            kind = p["kind"] + (" (below log start)" if p["below_log_start"] else "")
            where = f"{p['topic']}-{p['partition']}" + (" remote" if p["source"] == "remote" else "")
            resume = "-" if p["skip_to"] is None else str(p["skip_to"])
            table.add_row(
                where,
                kind,
                p["segment"],
                str(p["position"]),
                _offsets(p),
                str(p["size"]),
                resume,
                p["reason"],
            )
        console.print(table, highlight=False)
    if s["torn_tails"]:
        console.print(
            f"{s['torn_tails']} torn tail(s): the end of a partition's last segment holds a partial write. "
            "The broker truncates it when it recovers after a crash; on a running broker it can be an "
            "append in progress (check again).",
            highlight=False,
        )
    if doc["clean"]:
        console.print("clean: no bad batches", highlight=False)
    else:
        console.print(
            f"[bold red]{s['bad_batches']} bad batch(es), {s['unreadable']} unreadable region(s)[/]: "
            "consumers stop there. Resume past each at its 'resume at' offset; see docs/operations.md, "
            '"Checking a partition".',
            highlight=False,
        )


# --- the command ------------------------------------------------------------------------------------


@click.command("check")
@click.argument("selection", nargs=-1, metavar="[TOPIC[:PARTITION]]...")
@click.option(
    "--data-dir",
    default="./strata-data",
    show_default=True,
    envvar="STRATA_DATA_DIR",
    show_envvar=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The broker's data directory.",
)
@click.option(
    "--remote", is_flag=True, help="Also check the chosen partitions' segments in the object store."
)
@click.option(
    "--object-store",
    metavar="URL",
    envvar="STRATA_OBJECT_STORE",
    help="With --remote: s3://bucket/prefix or file:///path [file://<data-dir>/objects].",
)
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
def check(
    selection: tuple[str, ...], data_dir: Path, remote: bool, object_store: str | None, output: str
) -> None:
    """Check stored record batches and name every one a consumer cannot read past.

    Decodes every batch of every segment of the chosen partitions (default: all) as a
    reader would (header, CRC-32C, decompression, every record) and lists each bad one:
    partition, segment file, byte position, offsets, size, the reason, and the offset to
    resume at. A torn tail (a partial write at the end of a partition's last segment,
    which recovery truncates) is listed but does not fail the check.

    Read-only: it opens files read-only and takes no lock, so it may run while the
    broker serves the data directory (then the end of an active segment can show an
    append in progress as a torn tail; stop the broker for an exact picture).

    Exit status: 0 no bad batch, 1 bad batches or unreadable data, 2 usage error or the
    check could not run.
    """
    from hot.errors import StrataError
    from hot.topics import TOPICS_FILE, TopicRegistry

    if object_store is not None and not remote:
        raise click.UsageError("--object-store only applies with --remote")
    if not data_dir.is_dir():
        _usage(f"data directory {data_dir} does not exist")
    registry_path = data_dir / "meta" / TOPICS_FILE
    if not registry_path.is_file():
        _usage(f"{data_dir} is not a Strata data directory: {registry_path} is missing")
    try:
        registry = TopicRegistry(registry_path)
    except StrataError as exc:
        _usage(str(exc))
    chosen = resolve(registry, parse_selection(selection))
    url = None
    if remote:
        from api.cli.common import default_object_store

        url = object_store or default_object_store(data_dir)
    started = time.monotonic()
    try:
        checks = _run(data_dir, registry, chosen, url)
    except StrataError as exc:
        _usage(f"check could not run: {exc}")
    doc = report(data_dir, url, checks, time.monotonic() - started)
    if output == "json":
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print_text(doc)
    sys.exit(EXIT_CLEAN if doc["clean"] else EXIT_BAD)


def _run(
    data_dir: Path, registry: TopicRegistry, chosen: Sequence[tuple[str, int]], url: str | None
) -> list[PartitionCheck]:
    import asyncio

    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    from hot.check import segment_files
    from hot.manager import LogManager

    console = Console(stderr=True)
    layout = LogManager(data_dir)
    total = 0
    for topic, p in chosen:
        try:
            total += sum(
                Path(path).stat().st_size for _, path in segment_files(layout.partition_dir(topic, p))
            )
        except OSError:
            pass  # the scan reports what it cannot read
    bar = Progress(
        TextColumn("[bold]check[/bold] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    with bar:
        task = bar.add_task("local segments", total=total)
        checks = check_local(data_dir, registry, chosen, lambda n: bar.advance(task, n))
        if url is not None:
            remote = bar.add_task("remote segments", total=None)
            checks += asyncio.run(
                check_bucket(url, data_dir, registry, chosen, lambda n: bar.advance(remote, n))
            )
    return checks
