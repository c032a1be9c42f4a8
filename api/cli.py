"""The ``strata`` command line.

Errors are one clear line on stderr and a non-zero exit; ``--output json`` gives
machine-readable output where a command prints data.
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from typing import Any

import click

from api.cli_acl import acl as acl_group
from api.cli_acl import connect, security_options
from api.cli_check import check as check_cmd
from hot.errors import StrataError


def _fail(message: str) -> None:
    click.echo(f"strata: error: {message}", err=True)
    sys.exit(1)


@click.group()
def main() -> None:
    """Strata: a Kafka-compatible log service with tiered storage."""


@main.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="TOML config file.")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Data directory [./strata-data].")
@click.option("--kafka-listen", metavar="HOST:PORT", help="Kafka listener [127.0.0.1:9092].")
@click.option("--http-listen", metavar="HOST:PORT", help="HTTP listener [127.0.0.1:8080].")
@click.option("--advertised-listener", metavar="HOST:PORT", help="Address given to Kafka clients.")
@click.option("--object-store", metavar="URL", help="Object store URL [file://<data-dir>/objects].")
@click.option(
    "--auto-create-topics/--no-auto-create-topics", default=None, help="Create unknown topics on use [off]."
)
@click.option(
    "--log-cleaner/--no-log-cleaner",
    default=None,
    help="Compact topics with cleanup.policy=compact (log.cleaner.enable) [on].",
)
@click.option("--etcd", metavar="HOST:PORT,...", help="Join the replicated cluster on this etcd.")
@click.option("--broker-id", type=int, help="Broker id [assigned through etcd in cluster mode].")
@click.option(
    "--inter-broker-listener", metavar="HOST:PORT", help="Address followers fetch from [the Kafka listener]."
)
@click.option("--tls-cert", metavar="PEM", help="TLS certificate chain: TLS on the Kafka and HTTP listeners.")
@click.option("--tls-key", metavar="PEM", help="TLS private key (with --tls-cert).")
@click.option("--tls-ca", metavar="PEM", help="CA bundle client certificates are checked against.")
@click.option(
    "--tls-client-auth", type=click.Choice(["none", "requested", "required"]), help="Mutual TLS [none]."
)
@click.option(
    "--sasl-mechanisms", metavar="MECH,...", help="SASL on the Kafka listener, e.g. SCRAM-SHA-512,PLAIN."
)
@click.option(
    "--rest-auth",
    metavar="none|basic|bearer|basic,bearer",
    help="REST authentication: basic (strata users), bearer (strata tokens) [none].",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    help="Log level of the broker's stderr log.",
)
def serve(
    config_file: str | None,
    data_dir: str | None,
    kafka_listen: str | None,
    http_listen: str | None,
    advertised_listener: str | None,
    object_store: str | None,
    auto_create_topics: bool | None,
    log_cleaner: bool | None,
    etcd: str | None,
    broker_id: int | None,
    inter_broker_listener: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_ca: str | None,
    tls_client_auth: str | None,
    sasl_mechanisms: str | None,
    rest_auth: str | None,
    log_level: str,
) -> None:
    """Start a broker on this machine.

    Settings: flags over STRATA_* environment variables over the --config TOML.
    """
    from api.config import load_config
    from api.server import run

    try:
        rest: dict[str, object] = {}
        if rest_auth is not None:
            schemes = {x.strip().lower() for x in rest_auth.split(",") if x.strip()} - {"none"}
            if schemes - {"basic", "bearer"}:
                raise click.BadParameter(f"unknown scheme in {rest_auth!r}", param_hint="--rest-auth")
            rest = {"rest_basic_auth": "basic" in schemes, "rest_bearer_auth": "bearer" in schemes}
        config = load_config(
            config_file=config_file,
            overrides={
                "data_dir": data_dir,
                "kafka_listen": kafka_listen,
                "http_listen": http_listen,
                "advertised_listener": advertised_listener,
                "object_store": object_store,
                "auto_create_topics": auto_create_topics,
                "broker_id": broker_id,
                "cleaner": {"log.cleaner.enable": log_cleaner},
                "cluster": {"etcd": etcd, "inter.broker.listener": inter_broker_listener},
                "tls": {"cert": tls_cert, "key": tls_key, "ca": tls_ca, "client_auth": tls_client_auth},
                "sasl": {"mechanisms": sasl_mechanisms, **rest},
            },
        )
        sys.exit(run(config, log_level=log_level.upper()))
    except StrataError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.strerror or exc} ({exc.filename or 'listener'})")


def _emit(output: str, data: Any, human: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        click.echo(human)


_bootstrap = click.option(
    "--bootstrap", "-b", default="127.0.0.1:9092", show_default=True, metavar="HOST:PORT", help="Broker."
)
_output = click.option(
    "--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True
)


@main.group()
def topic() -> None:
    """Create, list, describe and delete topics on a running broker."""


def _client(bootstrap: str) -> Any:
    from api.client import KafkaClient
    from api.config import HostPort

    try:
        return KafkaClient.connect(HostPort.parse(bootstrap, setting="--bootstrap"))
    except StrataError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot connect to {bootstrap}: {exc.strerror or exc}")


@topic.command("create")
@click.argument("name")
@click.option("--partitions", "-p", type=int, default=1, show_default=True)
@click.option("--replication-factor", "-r", type=int, default=1, show_default=True)
@click.option(
    "--config", "-c", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (repeatable)."
)
@_bootstrap
@_output
def topic_create(
    name: str, partitions: int, replication_factor: int, configs: tuple[str, ...], bootstrap: str, output: str
) -> None:
    """Create a topic."""
    parsed: dict[str, str] = {}
    for item in configs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"--config expects KEY=VALUE, got {item!r}")
        parsed[key] = value
    with _client(bootstrap) as client:
        try:
            client.create_topic(name, partitions, replication_factor, parsed)
        except StrataError as exc:
            _fail(str(exc))
    _emit(
        output, {"topic": name, "partitions": partitions}, f"created topic {name} ({partitions} partitions)"
    )


@topic.command("list")
@_bootstrap
@_output
def topic_list(bootstrap: str, output: str) -> None:
    """List topics."""
    with _client(bootstrap) as client:
        try:
            topics = client.list_topics()
        except StrataError as exc:
            _fail(str(exc))
    names = sorted(t["name"] for t in topics)
    _emit(output, names, "\n".join(names))


@topic.command("describe")
@click.argument("name")
@_bootstrap
@_output
def topic_describe(name: str, bootstrap: str, output: str) -> None:
    """Show partitions, offsets and configuration of a topic."""
    with _client(bootstrap) as client:
        try:
            info = client.describe_topic(name)
        except StrataError as exc:
            _fail(str(exc))
    lines = [f"topic {info['name']}  id {info['topic_id']}  partitions {len(info['partitions'])}"]
    for p in info["partitions"]:
        lines.append(
            f"  partition {p['partition']}: leader {p['leader']}  log start {p['log_start_offset']}"
            f"  high watermark {p['high_watermark']}"
        )
    for key, value in sorted(info["configs"].items()):
        lines.append(f"  {key}={value}")
    _emit(output, info, "\n".join(lines))


@topic.command("delete")
@click.argument("name")
@_bootstrap
@_output
def topic_delete(name: str, bootstrap: str, output: str) -> None:
    """Delete a topic and all its data."""
    with _client(bootstrap) as client:
        try:
            client.delete_topic(name)
        except StrataError as exc:
            _fail(str(exc))
    _emit(output, {"deleted": name}, f"deleted topic {name}")


@main.group()
def groups() -> None:
    """List, describe (with lag) and delete consumer groups on a running broker."""


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def _print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(v) for v in row))
    Console(width=max(160, len(columns) * 16), soft_wrap=True).print(table)


@groups.command("list")
@click.option(
    "--state", "states", multiple=True, metavar="STATE", help="Only groups in this state (repeatable)."
)
@_bootstrap
@_output
def groups_list(states: tuple[str, ...], bootstrap: str, output: str) -> None:
    """List groups with their state, protocol, members and total lag."""
    from api.group_lag import partition_lag

    with _client(bootstrap) as client:
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
            _fail(str(exc))
    if output == "json":
        _emit(output, data, "")
        return
    if not data:
        click.echo("no consumer groups")
        return
    _print_table(
        None,
        ["GROUP", "STATE", "PROTOCOL-TYPE", "PROTOCOL", "MEMBERS", "LAG"],
        [
            [g["group_id"], g["state"], g["protocol_type"], g["protocol"], g["members"], g["total_lag"]]
            for g in data
        ],
    )


@groups.command("describe")
@click.argument("group")
@_bootstrap
@_output
def groups_describe(group: str, bootstrap: str, output: str) -> None:
    """Per-partition committed offset, log end offset (high watermark) and lag, with the
    owning member, as kafka-consumer-groups --describe shows them; then the members."""
    with _client(bootstrap) as client:
        try:
            info = client.describe_group_lag(group)
        except StrataError as exc:
            _fail(str(exc))
    if output == "json":
        _emit(output, info, "")
        return
    click.echo(
        f"group {info['group_id']}  state {info['state']}  protocol {_cell(info['protocol'])}  "
        f"members {len(info['members'])}  total lag {info['total_lag']}"
    )
    _print_table(
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
        _print_table(
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
@_bootstrap
@_output
def groups_delete(group: str, bootstrap: str, output: str) -> None:
    """Delete a group without members and its committed offsets."""
    with _client(bootstrap) as client:
        try:
            client.delete_groups([group])
        except StrataError as exc:
            _fail(str(exc))
    _emit(output, {"deleted": group}, f"deleted group {group}")


@main.command()
@click.option(
    "--data-dir", required=True, type=click.Path(file_okay=False), help="Data directory to restore into."
)
@click.option(
    "--object-store", "object_store", required=True, metavar="URL", help="s3://bucket/prefix or file:///path."
)
@click.option(
    "--topic", "-t", "topics", multiple=True, metavar="NAME", help="Restore only this topic (repeatable)."
)
@_output
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
        _fail(str(exc))
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
    _emit(output, data, "\n".join(lines) if lines else "no topics in the object store")


@main.command("export")
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
@_bootstrap
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
@_output
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
    output: str,
) -> None:
    """Write a topic's archived rows as Parquet, read straight from the object store.

    Rows and columns are those of the Spark data source (Spark's Kafka source schema plus
    headers), so spark.read.parquet(OUT) returns what spark.read.format("strata") does."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from api.export import default_object_store, export, parse_options

    opts: dict[str, str] = {}
    for item in extra:
        name, sep, value = item.partition("=")
        if not sep or not name:
            _fail(f"--option expects NAME=VALUE, got {item!r}")
        opts[name] = value
    if starting_offsets:
        opts["startingOffsets"] = starting_offsets
    if ending_offsets:
        opts["endingOffsets"] = ending_offsets
    if include_hot:
        opts["includeHot"] = "true"
        opts.setdefault("broker", bootstrap)
    url = object_store or default_object_store(data_dir)
    bar = Progress(
        TextColumn("[bold]export[/bold] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[rows]:,} rows"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=output == "json",
    )
    task = bar.add_task(topics, total=None, rows=0)

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
            )
    except StrataError as exc:
        _fail(str(exc))
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
    _emit(output, data, f"exported {result.rows:,} rows to {out_dir} ({len(result.files)} {fmt} files)")


@main.group()
def tier() -> None:
    """Tiered storage of a running broker (read through its REST API)."""


def _http_json(url: str) -> Any:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message", exc.reason)
        except ValueError:
            message = exc.reason
        _fail(f"{url}: HTTP {exc.code}: {message}")
    except urllib.error.URLError as exc:
        _fail(f"cannot reach {url}: {getattr(exc.reason, 'strerror', None) or exc.reason}")
    except ValueError:
        _fail(f"{url}: the answer is not JSON (is this a Strata HTTP listener?)")


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
@_output
def tier_status(http_url: str, topics: tuple[str, ...], output: str) -> None:
    """Per partition: log start, local log start, high watermark, log end, local and remote
    bytes, upload lag; and whether the object store is reachable."""
    base = http_url.rstrip("/")
    status = _http_json(f"{base}/v1/status")
    listed = _http_json(f"{base}/v1/partitions")["topics"]
    known = {t["topic"] for t in listed}
    missing = [t for t in topics if t not in known]
    if missing:
        _fail(f"unknown topic {missing[0]!r}")
    chosen = [t for t in listed if not topics or t["topic"] in topics]
    lag = sum(p["upload_lag_bytes"] for t in chosen for p in t["partitions"])
    data = {
        "object_store": status["object_store"],
        "object_store_available": status["object_store_available"],
        "upload_lag_bytes": lag,
        "topics": chosen,
    }
    if output == "json":
        _emit(output, data, "")
        return
    reach = "reachable" if status["object_store_available"] else "FAILING"
    click.echo(f"object store {status['object_store']} ({reach}); upload lag {_size(lag)}")
    _print_table(
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


@main.group()
def cluster() -> None:
    """Inspect a replicated cluster and move partitions (metadata in etcd)."""


@cluster.command("status")
@click.option("--etcd", required=True, metavar="HOST:PORT,...", help="The cluster's etcd endpoints.")
@click.option("--cluster-name", default="strata-local", show_default=True, help="The brokers' cluster id.")
@_output
def cluster_status_cmd(etcd: str, cluster_name: str, output: str) -> None:
    """Brokers, controller, partition leaders and ISR, under-replicated partitions."""
    import asyncio

    from cluster.status import cluster_status, format_status, read_view

    try:
        report = cluster_status(asyncio.run(read_view(etcd, cluster_name)))
    except StrataError as exc:
        _fail(str(exc))
    _emit(output, report, format_status(report))


def _replica_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in text.split(","))
    except ValueError:
        _fail(f"--replicas: expected comma-separated broker ids like 2,3,1, got {text!r}")
    if any(i < 0 for i in ids):
        _fail(f"--replicas: broker ids are non-negative, got {text!r}")
    return ids


@cluster.command("reassign")
@click.option("--etcd", required=True, metavar="HOST:PORT,...", help="The cluster's etcd endpoints.")
@click.option("--cluster-name", default="strata-local", show_default=True, help="The brokers' cluster id.")
@click.option("--topic", required=True, help="Topic of the partition to move.")
@click.option("--partition", required=True, type=click.IntRange(min=0), help="Partition to move.")
@click.option("--replicas", metavar="ID,ID,...", help="Target replica list, preferred leader first.")
@click.option("--cancel", is_flag=True, help="Cancel the partition's reassignment instead.")
@click.option("--wait", is_flag=True, help="Return once the controller has completed it.")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds --wait waits.")
@_output
def cluster_reassign_cmd(
    etcd: str,
    cluster_name: str,
    topic: str,
    partition: int,
    replicas: str | None,
    cancel: bool,
    wait: bool,
    timeout: float,
    output: str,
) -> None:
    """Move a partition's replicas to other brokers (or cancel the move).

    New replicas catch up as followers; the controller switches to the target once
    they are all in sync. Written straight to etcd: no broker needs to be reachable.
    """
    import asyncio

    from cluster.reassign import request

    if cancel == (replicas is not None):
        _fail("give exactly one of --replicas and --cancel")
    target = None if replicas is None else _replica_ids(replicas)
    try:
        result = asyncio.run(
            request(etcd, cluster_name, topic, partition, target, wait=timeout if wait else None)
        )
    except TimeoutError:
        _fail(f"{topic}-{partition}: the reassignment did not complete within {timeout:g} s (it goes on)")
    except StrataError as exc:
        _fail(str(exc))
    replica_text = ",".join(map(str, result["replicas"]))  # type: ignore[call-overload]
    if result["in_progress"]:
        human = f"{topic}-{partition}: reassignment in progress, replicas {replica_text}"
    else:
        human = f"{topic}-{partition}: replicas {replica_text}"
    _emit(output, result, human)


@cluster.command("reassignments")
@click.option("--etcd", required=True, metavar="HOST:PORT,...", help="The cluster's etcd endpoints.")
@click.option("--cluster-name", default="strata-local", show_default=True, help="The brokers' cluster id.")
@_output
def cluster_reassignments_cmd(etcd: str, cluster_name: str, output: str) -> None:
    """The partition reassignments in progress."""
    import asyncio

    from cluster.reassign import describe, format_reassignments, ongoing_reassignments
    from cluster.status import read_view

    try:
        rows = [describe(r) for r in ongoing_reassignments(asyncio.run(read_view(etcd, cluster_name)))]
    except StrataError as exc:
        _fail(str(exc))
    _emit(output, rows, "\n".join(format_reassignments(rows)))


# --- users (SASL credentials: a single node's users.json, or a cluster's etcd) ---------------

_users_data_dir = click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    envvar="STRATA_DATA_DIR",
    default="./strata-data",
    show_default=True,
    help="The broker's data directory (credentials in <data-dir>/meta/users.json).",
)
_users_etcd = click.option(
    "--etcd",
    metavar="HOST:PORT,...",
    envvar="STRATA_ETCD",
    help="Cluster mode: the cluster's etcd endpoints (credentials in etcd, not --data-dir).",
)
_users_cluster = click.option(
    "--cluster-name", default="strata-local", show_default=True, help="With --etcd: the brokers' cluster id."
)


@main.group()
def users() -> None:
    """Add, delete and list SASL users (PLAIN, SCRAM-SHA-256/512): salted and hashed in
    <data-dir>/meta/users.json on a single node, in etcd in cluster mode (--etcd)."""


@users.command("add")
@click.argument("name")
@click.option(
    "--password-stdin", is_flag=True, help="Read the password from the first line of stdin [prompt]."
)
@_users_data_dir
@_users_etcd
@_users_cluster
@_output
def users_add(
    name: str, password_stdin: bool, data_dir: str, etcd: str | None, cluster_name: str, output: str
) -> None:
    """Add a user, or set a user's password. Running brokers pick it up at the next login."""
    import asyncio
    from pathlib import Path

    from api.security.users import UserStore, check_username, users_path

    try:
        check_username(name)
        if password_stdin:
            password = sys.stdin.readline().rstrip("\r\n")
        else:
            password = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
        if etcd:
            from cluster.security import etcd_set_password

            existed = asyncio.run(etcd_set_password(etcd, cluster_name, name, password))
        else:
            store = UserStore(users_path(Path(data_dir)))
            existed = name in store.reload().names()
            store.set_password(name, password)
    except StrataError as exc:
        _fail(str(exc))
    verb = "updated" if existed else "added"
    _emit(output, {"user": name, "status": verb}, f"{verb} user {name} (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN)")


@users.command("delete")
@click.argument("name")
@_users_data_dir
@_users_etcd
@_users_cluster
@_output
def users_delete(name: str, data_dir: str, etcd: str | None, cluster_name: str, output: str) -> None:
    """Delete a user; connections already authenticated stay open."""
    import asyncio
    from pathlib import Path

    from api.security.users import UserStore, users_path

    try:
        if etcd:
            from cluster.security import etcd_delete_user

            found = asyncio.run(etcd_delete_user(etcd, cluster_name, name))
        else:
            found = UserStore(users_path(Path(data_dir))).delete(name)
    except StrataError as exc:
        _fail(str(exc))
    if not found:
        _fail(f"no user named {name!r}")
    _emit(output, {"user": name, "status": "deleted"}, f"deleted user {name}")


@users.command("list")
@_users_data_dir
@_users_etcd
@_users_cluster
@_output
def users_list(data_dir: str, etcd: str | None, cluster_name: str, output: str) -> None:
    """The users and their SCRAM mechanisms (never any secret)."""
    import asyncio
    from pathlib import Path

    from api.security.users import UserStore, UserTable, users_path

    try:
        store: UserTable
        if etcd:
            from cluster.security import etcd_users

            store = asyncio.run(etcd_users(etcd, cluster_name))
        else:
            store = UserStore(users_path(Path(data_dir))).reload()
    except StrataError as exc:
        _fail(str(exc))
    rows = [{"user": n, "mechanisms": store.mechanisms(n)} for n in store.names()]
    _emit(output, rows, "\n".join(f"{r['user']}\t{','.join(r['mechanisms'])}" for r in rows))


# -- ACLs (logic in api.cli_acl) ----------------------------------------------------------------

main.add_command(acl_group)

# -- stored batches (api.cli_check) --------------------------------------------------------------

main.add_command(check_cmd)

# --- quotas (client byte-rate quotas, AlterClientQuotas/DescribeClientQuotas) ----------------


@main.group()
def quotas() -> None:
    """Show and change runtime user quotas on a running broker (security options as `strata acl`)."""


@quotas.command("describe")
@security_options
def quotas_describe(**kw: Any) -> None:
    """Runtime quotas per user; <default> is the default user (TOML quotas are not shown)."""
    output = kw["output"]
    try:
        with connect(kw) as c:
            rows = c.describe_client_quotas()
    except StrataError as exc:
        _fail(str(exc))
    human = "\n".join(
        f"{r['user'] or '<default>'}\t" + ",".join(f"{k}={v:g}" for k, v in sorted(r["quotas"].items()))
        for r in rows
    )
    _emit(output, rows, human)


@quotas.command("alter")
@click.option("--user", help="The user (SASL, REST or certificate principal name).")
@click.option("--default", "default_user", is_flag=True, help="The default user instead.")
@click.option("--producer-byte-rate", type=float, help="Bytes/s a user may produce.")
@click.option("--consumer-byte-rate", type=float, help="Bytes/s a user may fetch.")
@click.option(
    "--remove",
    multiple=True,
    type=click.Choice(["producer_byte_rate", "consumer_byte_rate"]),
    help="Remove this quota (repeatable).",
)
@security_options
def quotas_alter(
    user: str | None,
    default_user: bool,
    producer_byte_rate: float | None,
    consumer_byte_rate: float | None,
    remove: tuple[str, ...],
    **kw: Any,
) -> None:
    """Set or remove quotas of --user or --default (kept by the broker, or in etcd)."""
    if (user is None) == (not default_user):
        _fail("give --user NAME or --default")
    changes: dict[str, float | None] = {k: None for k in remove}
    if producer_byte_rate is not None:
        changes["producer_byte_rate"] = producer_byte_rate
    if consumer_byte_rate is not None:
        changes["consumer_byte_rate"] = consumer_byte_rate
    if not changes:
        _fail("nothing to change: give --producer-byte-rate, --consumer-byte-rate or --remove")
    try:
        with connect(kw) as c:
            c.alter_client_quotas(user, changes)
    except StrataError as exc:
        _fail(str(exc))
    click.echo(f"altered quotas of {user or '<default>'}")


# --- tokens (REST bearer tokens of a broker) -------------------------------------------------


@main.group()
def tokens() -> None:
    """Create, list and revoke REST bearer tokens (serve with --rest-auth bearer)."""


def _token_row(t: Any, now: float) -> dict[str, Any]:
    import datetime

    def iso(ts: float | None) -> str | None:
        return (
            None
            if ts is None
            else datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat(timespec="seconds")
        )

    return {
        "id": t.id,
        "user": t.user,
        "created": iso(t.created),
        "expires": iso(t.expires),
        "expired": t.expired(now),
    }


@tokens.command("create")
@click.option("--user", required=True, help="The principal the token acts as.")
@click.option("--ttl", default="24h", show_default=True, help="Lifetime: 3600, 30m, 12h, 30d or never.")
@_users_data_dir
@_output
def tokens_create(user: str, ttl: str, data_dir: str, output: str) -> None:
    """Create a token; it is printed once and only its SHA-256 is kept."""
    import time
    from pathlib import Path

    from api.security.tokens import TokenStore, parse_ttl, tokens_path

    try:
        token, info = TokenStore(tokens_path(Path(data_dir))).create(user, parse_ttl(ttl))
    except StrataError as exc:
        _fail(str(exc))
    _emit(output, {**_token_row(info, time.time()), "token": token}, token)


@tokens.command("list")
@_users_data_dir
@_output
def tokens_list(data_dir: str, output: str) -> None:
    """The tokens' ids, users and expiry (never a token)."""
    import time
    from pathlib import Path

    from api.security.tokens import TokenStore, tokens_path

    try:
        rows = [_token_row(t, time.time()) for t in TokenStore(tokens_path(Path(data_dir))).infos()]
    except StrataError as exc:
        _fail(str(exc))
    human = "\n".join(
        f"{r['id']}\t{r['user']}\t{r['expires'] or 'never'}{' (expired)' if r['expired'] else ''}"
        for r in rows
    )
    _emit(output, rows, human)


@tokens.command("revoke")
@click.argument("token_id", required=False)
@click.option("--user", help="Revoke every token of this user instead.")
@_users_data_dir
@_output
def tokens_revoke(token_id: str | None, user: str | None, data_dir: str, output: str) -> None:
    """Revoke the token with TOKEN_ID (from `list`), or all tokens of --user."""
    import time
    from pathlib import Path

    from api.security.tokens import TokenStore, tokens_path

    if (token_id is None) == (user is None):
        _fail("give a token id or --user, not both")
    try:
        gone = TokenStore(tokens_path(Path(data_dir))).revoke(token_id=token_id, user=user)
    except StrataError as exc:
        _fail(str(exc))
    if not gone:
        _fail(f"no token {token_id!r}" if token_id is not None else f"no token of user {user!r}")
    rows = [_token_row(t, time.time()) for t in gone]
    _emit(output, rows, "\n".join(f"revoked {r['id']} ({r['user']})" for r in rows))


# -- records: produce, consume, bench (logic in api.cli_records) ------------------------------


def _partitions_of(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """The topic's partitions (offsets included) from the first bootstrap broker; one-line
    errors for an unknown topic or an unreachable broker."""
    from hot.errors import UnknownTopicOrPartitionError

    with _client(bootstrap.split(",")[0]) as client:
        try:
            parts: list[dict[str, Any]] = client.describe_topic(topic)["partitions"]
        except UnknownTopicOrPartitionError:
            _fail(f"unknown topic {topic!r}")
        except StrataError as exc:
            _fail(str(exc))
    return parts


def _check_partition(topic: str, parts: list[dict[str, Any]], partition: int | None) -> None:
    if partition is not None and not 0 <= partition < len(parts):
        _fail(f"partition {partition} out of range: {topic} has partitions 0 to {len(parts) - 1}")


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


@main.command("produce")
@click.argument("topic_name", metavar="TOPIC")
@click.option("--file", "-f", "path", type=click.Path(dir_okay=False), help="Read lines from FILE [stdin].")
@click.option("--key-separator", "-K", metavar="SEP", help="Split each line into KEY SEP VALUE.")
@click.option("--partition", "-p", type=int, help="Produce to this partition [by key / sticky].")
@click.option(
    "--header", "-H", "header_items", multiple=True, metavar="KEY=VALUE", help="Header (repeatable)."
)
@_acks
@_bootstrap
@_output
def produce_cmd(
    topic_name: str,
    path: str | None,
    key_separator: str | None,
    partition: int | None,
    header_items: tuple[str, ...],
    acks: str,
    bootstrap: str,
    output: str,
) -> None:
    """Produce one record per input line; prints a one-line summary."""
    from api.cli_records import CliError, parse_lines, produce

    if key_separator == "":
        _fail("--key-separator must not be empty")
    headers: list[tuple[str, bytes]] = []
    for item in header_items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"--header expects KEY=VALUE, got {item!r}")
        headers.append((key, value.encode()))
    parts = _partitions_of(bootstrap, topic_name)
    _check_partition(topic_name, parts, partition)
    try:
        if path is not None:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
            source = path
        else:
            lines = sys.stdin.readlines()
            source = "stdin"
    except OSError as exc:
        _fail(f"cannot read {path}: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        _fail(f"{path or 'stdin'} is not UTF-8 text: {exc.reason} at byte {exc.start}")
    try:
        records = list(parse_lines(lines, key_separator, source=source))
        bar = _progress(f"produce {topic_name}")
        task = bar.add_task("produce", total=len(records))
        with bar:
            summary = produce(
                bootstrap,
                topic_name,
                records,
                acks=acks,
                partition=partition,
                headers=headers,
                progress=lambda n: bar.update(task, completed=n),
            )
    except CliError as exc:
        _fail(str(exc))
    _emit(output, summary.to_json(), summary.text())


@main.command("consume")
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
@_bootstrap
@_output
def consume_cmd(
    topic_name: str,
    partition: int | None,
    offset_text: str | None,
    from_beginning: bool,
    count: int | None,
    group: str | None,
    idle_timeout: float | None,
    print_key: bool,
    bootstrap: str,
    output: str,
) -> None:
    """Print records: one value per line, or with -o json one JSON object per record
    (topic, partition, offset, timestamp, key, value, headers)."""
    from api.cli_records import CliError, consume, parse_offset, record_json

    if from_beginning and offset_text is not None:
        _fail("give at most one of --offset and --from-beginning")
    if idle_timeout is not None and idle_timeout <= 0:
        _fail(f"--timeout must be positive, got {idle_timeout:g}")
    try:
        start = (
            parse_offset(offset_text) if offset_text is not None else ("earliest" if from_beginning else None)
        )
    except CliError as exc:
        _fail(str(exc))
    parts = _partitions_of(bootstrap, topic_name)
    _check_partition(topic_name, parts, partition)
    chosen = [p for p in parts if partition is None or p["partition"] == partition]
    if isinstance(start, int):
        for p in chosen:
            lo, hi = p["log_start_offset"], p["high_watermark"]
            if not lo <= start <= hi:
                _fail(f"--offset {start} is outside {topic_name}-{p['partition']} (offsets {lo} to {hi})")
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
                bootstrap,
                topic_name,
                {p["partition"]: start for p in chosen},
                group=group,
                count=count,
                idle_timeout=idle_timeout,
                on_record=emit,
            )
    except CliError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        pass


@main.command("bench")
@click.option("--records", "-n", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--record-size", type=click.IntRange(min=0), default=100, show_default=True, help="Bytes.")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True)
@_acks
@_bootstrap
@_output
def bench_cmd(
    records: int, record_size: int, partitions: int, acks: str, bootstrap: str, output: str
) -> None:
    """Produce records to a scratch topic, fetch them back, print the rates; the topic is
    deleted afterwards. A quick health check, not bench/bench_broker.py."""
    from api.cli_records import CliError, bench

    name = f"strata-bench-{uuid.uuid4().hex[:8]}"
    with _client(bootstrap.split(",")[0]) as client:
        try:
            client.create_topic(name, partitions, -1, {})
        except StrataError as exc:
            _fail(f"cannot create the scratch topic {name}: {exc}")
    bar = _progress("bench")
    tasks = {"produce": bar.add_task("produce", total=records), "fetch": bar.add_task("fetch", total=records)}
    try:
        with bar:
            result = bench(
                bootstrap,
                name,
                partitions,
                records,
                record_size,
                acks=acks,
                progress=lambda phase, n: bar.update(tasks[phase], completed=n),
            )
    except CliError as exc:
        _fail(str(exc))
    finally:
        with _client(bootstrap.split(",")[0]) as client, contextlib.suppress(StrataError):
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
    _emit(output, data, human)


if __name__ == "__main__":
    main()
