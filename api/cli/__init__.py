"""The ``strata`` command line: the root group; each command family is its own module.

Errors are one clear line on stderr and a non-zero exit; ``--output json`` gives
machine-readable output where a command prints data. Shared options and helpers are
``api.cli.common``. Modules: ``serve`` api.cli.serve; ``topic`` api.cli.topics; ``groups``
api.cli.groups; ``tier``, ``restore``, ``export`` api.cli.tier; ``cluster`` api.cli.cluster;
``users``, ``tokens`` api.cli.users; ``quotas`` api.cli.quotas; ``acl`` api.cli.acl;
``transactions`` api.cli.transactions; ``check`` api.cli.check; ``produce``, ``consume``,
``bench`` api.cli.records_commands (logic: api.cli.records). Each imports its heavy
dependencies inside its commands, so ``strata --help`` and every command start fast.
"""

from __future__ import annotations

import os
from typing import Any

import click

from api.cli.acl import acl
from api.cli.check import check
from api.cli.cluster import cluster
from api.cli.groups import groups
from api.cli.quotas import quotas
from api.cli.records_commands import bench_cmd, consume_cmd, produce_cmd
from api.cli.serve import serve
from api.cli.tier import export_cmd, restore, tier
from api.cli.topics import topic
from api.cli.transactions import transactions
from api.cli.users import tokens, users

# Optional modules a command may need, and the extra of pyproject.toml that brings them.
EXTRAS = {"pyarrow": "spark", "pyspark": "spark", "numpy": "spark"}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("strata")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _one_line(exc: BaseException) -> str | None:
    """The one line to print for an exception that escaped a command, or None for a bug
    (which keeps its traceback)."""
    from hot.errors import StrataError

    if isinstance(exc, ModuleNotFoundError):
        name = (exc.name or "").split(".")[0]
        extra = EXTRAS.get(name)
        if extra is None:
            return None
        return f"this command needs {name}, from the {extra} extra: pip install 'strata[{extra}]'"
    if isinstance(exc, StrataError):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"input is not UTF-8 text: {exc.reason} at byte {exc.start}"
    if isinstance(exc, OSError):
        where = exc.filename or ""
        return f"{exc.strerror or exc}{f': {where}' if where else ''}"
    return None


class StrataGroup(click.Group):
    """The root group: an error that escapes a command is one line on stderr and exit 1;
    ``--debug`` or ``STRATA_DEBUG=1`` keeps the traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:
            if ctx.params.get("debug") or os.environ.get("STRATA_DEBUG", "") not in ("", "0"):
                raise
            line = _one_line(exc)
            if line is None:
                line = f"{type(exc).__name__}: {exc} (a bug: rerun with --debug for the traceback)"
            from api.cli.common import fail

            fail(line)


@click.group(cls=StrataGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", "-V", prog_name="strata", message="%(prog)s %(version)s")
@click.option("--debug", is_flag=True, help="Show the traceback of an error [$STRATA_DEBUG].")
def main(debug: bool) -> None:
    """Strata: a Kafka-compatible log service with tiered storage."""


for _command in (
    serve,
    topic,
    groups,
    restore,
    export_cmd,
    tier,
    cluster,
    users,
    acl,
    check,
    quotas,
    transactions,
    tokens,
    produce_cmd,
    consume_cmd,
    bench_cmd,
):
    main.add_command(_command)
