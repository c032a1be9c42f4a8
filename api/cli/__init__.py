"""The ``strata`` command line: the root group; each command family is its own module.

Errors are one clear line on stderr and a non-zero exit; ``--output json`` gives
machine-readable output where a command prints data. Shared options and helpers are
``api.cli.common``. ``COMMANDS`` names each command's module (logic of produce/consume/
bench: api.cli.records); a module is imported only when its command runs, and each imports
its heavy dependencies (kwire, confluent_kafka, rich) inside its commands, so
``strata --version``, ``strata -h`` and every command start fast (bench/bench_cli_startup.py).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import click

# Every command by name: where it lives ("module:attribute") and its one-line help for
# ``strata -h``. A command's module is imported only when that command runs (or its own
# help is asked for), so ``strata --version``, ``strata -h`` and each command start without
# the others' imports (issue 32).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("api.cli.serve:serve", "Start a broker on this machine."),
    "topic": ("api.cli.topics:topic", "Create, list, describe, alter and delete topics."),
    "groups": ("api.cli.groups:groups", "List, describe (with lag) and delete consumer groups."),
    "restore": ("api.cli.tier:restore", "Recreate topics from the object store into a data dir."),
    "export": ("api.cli.tier:export_cmd", "Write a topic's archived rows as Parquet."),
    "iceberg": ("api.cli.iceberg:iceberg", "Iceberg tables of topics: status."),
    "tier": ("api.cli.tier:tier", "Tiered storage of a running broker (its REST API)."),
    "cluster": ("api.cli.cluster:cluster", "A cluster's health and layout; etcd view and moves."),
    "users": ("api.cli.users:users", "Add, delete and list SASL users."),
    "acl": ("api.cli.acl:acl", "Add, remove and list ACLs."),
    "check": ("api.cli.check:check", "Check stored record batches, local or in a bucket."),
    "quotas": ("api.cli.quotas:quotas", "Show and change runtime user quotas."),
    "transactions": ("api.cli.transactions:transactions", "Transactional ids, their state, producers."),
    "tokens": ("api.cli.users:tokens", "Create, list and revoke REST bearer tokens."),
    "produce": ("api.cli.records_commands:produce_cmd", "Produce records, one per input line."),
    "consume": ("api.cli.records_commands:consume_cmd", "Print a topic's records (kcat's offsets)."),
    "bench": ("api.cli.records_commands:bench_cmd", "Produce and fetch back a scratch topic: rates."),
    "schemas": ("api.cli.schemas:schemas", "List, get, register, delete and test schemas (registry)."),
}

# Optional modules a command may need, and the extra of pyproject.toml that brings them.
EXTRAS = {"pyarrow": "spark", "pyspark": "spark", "numpy": "spark"}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # only for --version

    try:
        return version("strata")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _install_hint(extra: str) -> str:
    """How to add ``extra`` to this install: from a checkout (the README's way) its editable
    install with the path, else from the package index."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]  # api/cli/__init__.py -> the checkout
    if (root / "pyproject.toml").is_file():
        return f"pip install -e '{root}[{extra}]'"
    return f"pip install 'strata[{extra}]'"


def _one_line(exc: BaseException) -> str | None:
    """The one line to print for an exception that escaped a command, or None for a bug
    (which keeps its traceback)."""
    from hot.errors import StrataError

    if isinstance(exc, ModuleNotFoundError):
        name = (exc.name or "").split(".")[0]
        extra = EXTRAS.get(name)
        if extra is None:
            return None
        return f"this command needs {name}, from the {extra} extra: {_install_hint(extra)}"
    if isinstance(exc, StrataError):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"input is not UTF-8 text: {exc.reason} at byte {exc.start}"
    if isinstance(exc, OSError):
        where = exc.filename or ""
        return f"{exc.strerror or exc}{f': {where}' if where else ''}"
    return None


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"strata {_version()}")
        ctx.exit()


class StrataGroup(click.Group):
    """The root group: commands load from ``COMMANDS`` by name, when needed; an error that
    escapes a command is one line on stderr and exit 1; ``--debug`` or ``STRATA_DEBUG=1``
    keeps the traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, _, attr = where[0].partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # the registry's one-liners: listing the commands imports none of them
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

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
@click.option(
    "--version",
    "-V",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
@click.option("--debug", is_flag=True, help="Show the traceback of an error [$STRATA_DEBUG].")
def main(debug: bool) -> None:
    """Strata: a Kafka-compatible log service with tiered storage."""
