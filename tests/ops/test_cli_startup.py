"""What `strata` imports to start (issue 32): `--version` and `-h` load no command module,
and no command's `-h` loads the protocol codec, the Kafka client libraries or rich.
Structural checks of sys.modules in a fresh interpreter; the times themselves are
bench/bench_cli_startup.py's (no timed assertion here)."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from api.cli import COMMANDS, main
from tests.brokers import ROOT

# Modules that cost a start-up their import time and that no help or version needs.
HEAVY = ("kwire", "kclient", "confluent_kafka", "rich", "broker", "pyarrow", "aiohttp")

_RUN = """
import json, sys
sys.argv = ["strata", *sys.argv[1:]]
import api.cli
try:
    api.cli.main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def modules_after(*args: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-c", _RUN, *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    loaded: list[str] = json.loads(r.stderr.splitlines()[-1])
    return loaded


def heavy(loaded: list[str]) -> list[str]:
    return [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]


def test_version_and_help_load_no_command() -> None:
    for args in (("--version",), ("-h",)):
        loaded = modules_after(*args)
        assert not heavy(loaded), (args, heavy(loaded))
        commands = {where.split(":")[0] for where, _ in COMMANDS.values()}
        assert not commands & set(loaded), (args, sorted(commands & set(loaded)))


@pytest.mark.parametrize("command", ["topic", "produce", "consume", "groups", "serve", "transactions"])
def test_a_command_s_help_loads_only_its_module(command: str) -> None:
    loaded = modules_after(command, "-h")
    assert not heavy(loaded), heavy(loaded)
    module = COMMANDS[command][0].split(":")[0]
    assert module in loaded


def test_the_registry_names_every_command_with_its_short_help() -> None:
    ctx = click.Context(main)
    for name, (where, short) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name, where
        assert short.endswith(".") and len(short) <= 60, (name, short)  # one line in `strata -h`
    assert main.get_command(ctx, "nosuch") is None
    listing = subprocess.run(
        [sys.executable, "-m", "api.cli", "-h"], cwd=ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    for name, (_, short) in COMMANDS.items():
        assert f"  {name}" in listing and short in listing, name
