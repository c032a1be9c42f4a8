"""`strata tier status` end to end against a real tiered broker, and the CLI's shared
conventions (``--output/-o text|json``, one-line errors with a non-zero exit)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator

import click

from api.cli import main
from tests.brokers import ROOT, BrokerProcess, create_topic
from tests.ops.settle import wait_settled

TOPIC = "tiered-cli"


def strata(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_tier_status_reports_offsets_bytes_and_upload_lag(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    from confluent_kafka import Producer

    b = broker_factory(
        env={"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100", "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "200"}
    )
    create_topic(b.bootstrap, TOPIC, 1, {"segment.bytes": "16384", "local.retention.bytes": "32768"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2, "batch.size": 4096})
    for i in range(600):
        p.produce(TOPIC, value=f"v{i}".encode() + b"t" * 300)
    assert p.flush(30) == 0
    settled = wait_settled(b.http_url, TOPIC)

    r = strata("tier", "status", "--http", b.http_url, "--topic", TOPIC, "-o", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["object_store_available"] is True and doc["object_store"].startswith("file://")
    [topic] = doc["topics"]
    assert topic["topic"] == TOPIC and topic["partitions"] == settled
    assert doc["upload_lag_bytes"] == 0

    r = strata("tier", "status", "--http", b.http_url)
    assert r.returncode == 0, r.stderr
    part = topic["partitions"][0]
    assert "reachable" in r.stdout.splitlines()[0]
    [row] = [line.split() for line in r.stdout.splitlines() if line.startswith(TOPIC)]
    assert row[:6] == [
        TOPIC,
        "0",
        str(part["log_start_offset"]),
        str(part["local_log_start_offset"]),
        str(part["high_watermark"]),
        str(part["log_end_offset"]),
    ]

    r = strata("tier", "status", "--http", b.http_url, "--topic", "nosuch")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "strata: error: topic 'nosuch' does not exist\n"
    assert b.stop() == 0


def test_tier_status_against_nothing_listening_is_one_line() -> None:
    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        r = strata("tier", "status", "--http", url)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"strata: error: cannot reach {url}/v1/status") and r.stderr.count("\n") == 1


def _commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    # list_commands/get_command, not .commands: the root group loads its commands by name
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", cmd


def test_every_output_option_is_the_same() -> None:
    with_output = []
    for name, cmd in _commands(main):
        for param in cmd.params:
            if param.name == "output" and name == "consume":
                # -o is kcat's start offset there (-o json|text: deprecated, test_cli_kcat)
                assert isinstance(param, click.Option) and param.opts == ["--output"]
                continue
            if param.name == "output":
                assert isinstance(param, click.Option)
                assert sorted(param.opts) == ["--output", "-o"], name
                assert isinstance(param.type, click.Choice) and list(param.type.choices) == ["text", "json"]
                assert param.default == "text", name
                with_output.append(name)
    assert {"tier status", "cluster status", "topic list", "groups describe"} <= set(with_output)
