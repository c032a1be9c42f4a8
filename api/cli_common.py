"""What the ``strata`` commands share: the one-line error exit, text/JSON output, the
``--bootstrap`` and ``--output`` options, a Kafka client for a command, tables, and a
broker REST GET."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from hot.errors import StrataError


def fail(message: str) -> None:
    click.echo(f"strata: error: {message}", err=True)
    sys.exit(1)


def emit(output: str, data: Any, human: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        click.echo(human)


bootstrap_option = click.option(
    "--bootstrap", "-b", default="127.0.0.1:9092", show_default=True, metavar="HOST:PORT", help="Broker."
)
output_option = click.option(
    "--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True
)


def kafka_client(bootstrap: str) -> Any:
    from api.client import KafkaClient
    from api.protocol.address import HostPort

    try:
        return KafkaClient.connect(HostPort.parse(bootstrap, setting="--bootstrap"))
    except StrataError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot connect to {bootstrap}: {exc.strerror or exc}")


def cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*(cell(v) for v in row))
    Console(width=max(160, len(columns) * 16), soft_wrap=True).print(table)


def http_json(url: str) -> Any:
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
        fail(f"{url}: HTTP {exc.code}: {message}")
    except urllib.error.URLError as exc:
        fail(f"cannot reach {url}: {getattr(exc.reason, 'strerror', None) or exc.reason}")
    except ValueError:
        fail(f"{url}: the answer is not JSON (is this a Strata HTTP listener?)")
