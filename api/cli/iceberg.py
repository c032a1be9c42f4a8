"""``strata iceberg status``: the Iceberg tables of topics (docs/iceberg.md)."""

from __future__ import annotations

import time
from typing import Any

import click

from api.cli.common import cell, fail


@click.group("iceberg")
def iceberg() -> None:
    """Iceberg tables of topics with iceberg.mode set."""


@iceberg.command("status")
@click.argument("topic", required=False)
@click.option("--data-dir", default="./strata-data", show_default=True, type=click.Path(file_okay=False))
@click.option(
    "--object-store", metavar="URL", help="s3://bucket/prefix or file:///path [file://<data-dir>/objects]."
)
@click.option(
    "--config", "config_file", type=click.Path(dir_okay=False), help="Broker TOML (its [iceberg] catalog)."
)
@click.option(
    "--bootstrap",
    "-b",
    default="127.0.0.1:9092",
    show_default=True,
    metavar="HOST:PORT",
    help="A broker, for the lag (last stable offsets); unreachable: lag unknown.",
)
@click.option(
    "--format",
    "--output",
    "-o",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
)
def status(
    topic: str | None,
    data_dir: str,
    object_store: str | None,
    config_file: str | None,
    bootstrap: str,
    fmt: str,
) -> None:
    """Per table: its catalog (as pyiceberg's load_catalog takes it), identifier, committed
    offset per partition, lag in records and seconds, last snapshot."""
    import json
    from pathlib import Path

    from broker.config import load_config
    from hot.errors import StrataError
    from spark.iceberg.catalog import catalog_properties, open_catalog, public_properties
    from spark.iceberg.translate import table_status

    try:
        cfg = load_config(
            config_file=config_file, overrides={"data_dir": data_dir, "object_store": object_store}
        )
    except StrataError as e:
        fail(str(e))
    props = catalog_properties(cfg.iceberg, Path(data_dir), cfg.object_store_url)
    catalog = open_catalog(props)
    ns = cfg.iceberg.namespace
    try:
        names = [topic] if topic else sorted(t[-1] for t in catalog.list_tables(ns))
    except Exception:
        names = []
    out: list[dict[str, Any]] = []
    now = int(time.time() * 1000)
    for name in names:
        try:
            table = catalog.load_table((ns, name))
        except Exception as e:
            fail(f"no Iceberg table {ns}.{name} in the catalog: {type(e).__name__}")
        st = table_status(table)
        committed: dict[int, int] = st["committed_offsets"]
        lag: int | None = None
        try:
            from spark.plan import BrokerClient

            parts = sorted(committed) or [0]
            ends = BrokerClient(bootstrap).list_offsets(name, parts, -1, isolation_level=1)
            lag = sum(max(0, e - committed.get(p, 0)) for p, e in ends.items())
        except Exception:
            pass
        snap = st["last_snapshot"]
        lag_s = (
            None
            if lag is None
            else (0.0 if lag == 0 or snap is None else (now - snap["timestamp_ms"]) / 1000)
        )
        out.append(
            {
                "topic": name,
                "catalog": public_properties(props),
                "identifier": f"{ns}.{name}",
                "location": st["location"],
                "metadata_location": st["metadata_location"],
                "committed_offsets": {str(p): o for p, o in sorted(committed.items())},
                "lag_records": lag,
                "lag_seconds": lag_s,
                "last_snapshot": snap,
            }
        )
    if fmt == "json":
        click.echo(json.dumps(out if topic is None else out[0], indent=2, sort_keys=True))
        return
    if not out:
        click.echo("no Iceberg tables")
        return
    for item in out:
        snap = item["last_snapshot"]
        offsets = " ".join(f"{p}:{o}" for p, o in item["committed_offsets"].items()) or "-"
        click.echo(
            f"{item['identifier']}  offsets {offsets}  lag {cell(item['lag_records'])} records"
            f" / {cell(item['lag_seconds'])} s  snapshot {cell(snap and snap['snapshot_id'])}"
            f"  {item['metadata_location']}"
        )
