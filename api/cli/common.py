"""What the ``strata`` commands share: the one-line error exit, text/JSON output, the
``--bootstrap`` and ``--output`` options, a Kafka client for a command, tables, and a
broker REST GET."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, Final, NoReturn, TypeVar

import click

FC = TypeVar("FC", bound=Callable[..., Any])

# Said when a listener closes the connection on a client that spoke neither TLS nor SASL:
# that is what a SASL or TLS listener does to a plaintext client.
SECURITY_HINT: Final = (
    " (the listener may need TLS or SASL: give -X security.protocol=SASL_PLAINTEXT|SASL_SSL|SSL "
    "with -X sasl.mechanism=... -X sasl.username=... and $STRATA_SASL_PASSWORD, or --command-config FILE)"
)
_CLOSED: Final = ("closed the connection", "Connection reset by peer", "Broken pipe", "EOF occurred")
# Whether the command's Kafka client speaks TLS or SASL (set by api.cli.connect).
SECURED: list[bool] = [False]


def explain(message: str) -> str:
    """``message``, with the hint that the listener may want TLS/SASL when a plaintext
    client's connection was closed or reset."""
    if not SECURED[0] and any(s in message for s in _CLOSED) and SECURITY_HINT not in message:
        return message + SECURITY_HINT
    return message


def fail(message: str) -> NoReturn:
    click.echo(f"strata: error: {explain(message)}", err=True)
    sys.exit(1)


def no_topic(name: str) -> str:
    """The one wording of an unknown topic, for every command."""
    return f"topic {name!r} does not exist"


def default_object_store(data_dir: str | os.PathLike[str]) -> str:
    """The object store a broker uses by default: ``file://<data-dir>/objects`` (as
    spark.export's, without importing pyarrow: ``check`` and ``restore`` need no extra)."""
    from pathlib import Path

    return f"file://{Path(data_dir).resolve() / 'objects'}"


def check_store_url(url: str, option: str = "--object-store") -> None:
    """Fail before any work (and any progress bar) on a URL no object store reads."""
    if not url.startswith(("s3://", "file://")):
        fail(f"{option}: expected s3://bucket/prefix or file:///absolute/path, got {url!r}")


def emit(output: str, data: Any, human: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        click.echo(human)


bootstrap_option = click.option(
    "--bootstrap", "-b", default="127.0.0.1:9092", show_default=True, metavar="HOST:PORT", help="Broker."
)  # commands that open a Kafka client take api.cli.connect.connection_options instead
output_option = click.option(
    "--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True
)


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


def http_json(
    url: str,
    context: Any = None,
    headers: dict[str, str] | None = None,
    *,
    method: str = "GET",
    timeout: float = 30,
) -> Any:
    """GET (or ``method``) ``url`` as JSON, with ``context`` (an ssl.SSLContext) for
    https:// and extra ``headers`` (Authorization); every failure is one line saying what
    was expected."""
    import http.client
    import ssl
    import urllib.error
    import urllib.request

    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in ("http", "https"):
        fail(f"--http: expected an http:// or https:// URL of the broker's HTTP listener, got {url!r}")
    data = b"" if method == "POST" else None
    headers = dict(headers or {})
    if data is not None:
        # Writes take JSON only (api.security.same_origin); urllib would label the empty
        # body a form.
        headers.setdefault("Content-Type", "application/json")
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(
            request, timeout=timeout, context=context if scheme == "https" else None
        ) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message", exc.reason)
        except ValueError:
            message = exc.reason
        hint = ""
        if exc.code == 401:
            hint = " (give --sasl-user with $STRATA_SASL_PASSWORD, or --token / $STRATA_TOKEN)"
        fail(f"{url}: HTTP {exc.code}: {message}{hint}")
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ssl.SSLError):
            why = getattr(reason, "reason", None) or str(reason)
            if why == "WRONG_VERSION_NUMBER":
                fail(f"cannot reach {url}: the listener does not speak TLS (expected http:// for it)")
            fail(
                f"cannot reach {url}: TLS handshake failed: {why} (--tls-ca names the CA of its certificate)"
            )
        fail(f"cannot reach {url}: {getattr(reason, 'strerror', None) or reason}")
    except (http.client.RemoteDisconnected, ConnectionResetError, http.client.BadStatusLine):
        fail(
            f"{url}: the listener closed the connection without an HTTP answer (expected the broker's "
            "HTTP listener: an https:// one needs https://, and the Kafka port is not it)"
        )
    except ValueError:
        fail(f"{url}: the answer is not JSON (is this a Strata HTTP listener?)")


def topic_specs_option(*, required: bool = False) -> Callable[[FC], FC]:
    """The ``--topic T[:P,...]`` option (repeatable, as ``topics``) that ``partition_specs``
    reads: the commands that move or delete a group's offsets take it."""
    return click.option(
        "--topic",
        "-t",
        "topics",
        multiple=True,
        required=required,
        metavar="T[:P,...]",
        help="Topic (or some of its partitions).",
    )


def partition_specs(
    client: Any, group: str, specs: tuple[str, ...], all_topics: bool
) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of ``--topic T`` / ``--topic T:0,2`` or, with
    ``--all-topics``, of every topic the group has committed offsets for."""
    from hot.errors import UnknownTopicOrPartitionError

    if all_topics == bool(specs):
        fail("give --topic T[:P,...] (repeatable) or --all-topics")
    if all_topics:
        return sorted(client.committed_offsets(group))
    out: list[tuple[str, int]] = []
    for spec in specs:
        name, sep, plist = spec.partition(":")
        try:
            count = client.partition_count(name)
        except UnknownTopicOrPartitionError:
            fail(no_topic(name))
        if not sep:
            out.extend((name, p) for p in range(count))
            continue
        try:
            chosen = [int(x) for x in plist.split(",")]
        except ValueError:
            fail(f"--topic: expected TOPIC or TOPIC:P[,P...], got {spec!r}")
        for p in chosen:
            if not 0 <= p < count:
                fail(f"--topic {spec}: partition {p} out of range: {name} has partitions 0 to {count - 1}")
        out.extend((name, p) for p in chosen)
    return sorted(set(out))
