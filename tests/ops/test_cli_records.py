"""`strata produce`, `strata consume` and `strata bench` end to end against a real broker
(subprocesses of the CLI, as an operator runs them), including bad input: one line on
stderr, exit 1, nothing on stdout."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from api.cli import COMMANDS
from tests.brokers import ROOT, BrokerProcess, create_topic

TOPIC = "cli-records"


def strata(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line_error(r: subprocess.CompletedProcess[str], text: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith("strata: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert text in r.stderr, r.stderr


def test_produce_then_consume_round_trip(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, TOPIC, 2)

    # stdin, keyed lines, one partition, a header; the summary is JSON
    lines = "".join(f"k{i}:value {i}\n" for i in range(5))
    r = strata(
        "produce", TOPIC, "-b", b.bootstrap, "-K", ":", "-p", "1", "-H", "src=cli", "-o", "json", stdin=lines
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["records"] == 5 and summary["topic"] == TOPIC
    assert summary["partitions"] == {"1": {"first_offset": 0, "last_offset": 4, "records": 5}}

    # a file, unkeyed, to partition 0, acks=1; one-line text summary
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i}\n" for i in range(300)))
    r = strata("produce", TOPIC, "-b", b.bootstrap, "--file", str(path), "-p", "0", "--acks", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("produced 300 records ") and r.stdout.count("\n") == 1, r.stdout

    # consume partition 1 from the beginning as JSON, one object per record
    r = strata("consume", TOPIC, "-b", b.bootstrap, "-p", "1", "--from-beginning", "-n", "5", "-J")
    assert r.returncode == 0, r.stderr
    docs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(d["partition"], d["offset"], d["key"], d["value"]) for d in docs] == [
        (1, i, f"k{i}", f"value {i}") for i in range(5)
    ]
    assert all(d["headers"] == [{"key": "src", "value": "cli"}] and d["timestamp"] > 0 for d in docs)

    # --offset N on partition 0, text output
    r = strata("consume", TOPIC, "-b", b.bootstrap, "-p", "0", "--offset", "297", "-n", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["line 297", "line 298", "line 299"]

    # a group: starts where it committed, commits what it read
    r = strata(
        "consume",
        TOPIC,
        "-b",
        b.bootstrap,
        "-g",
        "cli-g",
        "--from-beginning",
        "-n",
        "305",
        "--output",
        "json",
    )
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 305
    r = strata("groups", "describe", "cli-g", "-b", b.bootstrap, "-o", "json")
    assert r.returncode == 0, r.stderr
    r = strata("produce", TOPIC, "-b", b.bootstrap, "-p", "0", stdin="after\n")
    assert r.returncode == 0, r.stderr
    # one record, said so; stderr stays empty (no progress bar off a terminal, no blank line)
    assert r.stdout.startswith(f"produced 1 record (5 bytes) to {TOPIC}: partition 0 offsets 300-300"), (
        r.stdout
    )
    assert r.stderr == ""
    r = strata("consume", TOPIC, "-b", b.bootstrap, "-g", "cli-g", "-n", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "after\n"

    # without --count: --timeout ends the read once nothing more arrives (5 s: a bound
    # generous enough for a loaded machine to serve the first fetch)
    r = strata(
        "consume", TOPIC, "-b", b.bootstrap, "-p", "1", "--offset", "3", "--timeout", "5", "--print-key"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["k3\tvalue 3", "k4\tvalue 4"]

    # acks=0: sent, offsets unknown to the producer, and still appended
    r = strata("produce", TOPIC, "-b", b.bootstrap, "-p", "1", "--acks", "0", "-o", "json", stdin="fire\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["partitions"] == {
        "1": {"first_offset": None, "last_offset": None, "records": 1}
    }
    r = strata("consume", TOPIC, "-b", b.bootstrap, "-p", "1", "--offset", "5", "-n", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "fire\n"
    assert b.stop() == 0


def test_bad_input_is_one_line_with_exit_1(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, TOPIC, 1)
    bs = ("-b", b.bootstrap)
    _one_line_error(strata("produce", "nosuch", *bs, stdin="x\n"), "topic 'nosuch' does not exist")
    _one_line_error(strata("consume", "nosuch", *bs, "-n", "1"), "topic 'nosuch' does not exist")
    _one_line_error(strata("consume", TOPIC, *bs, "--offset", "abc"), "--offset: expected an offset")
    _one_line_error(
        strata("consume", TOPIC, *bs, "--offset", "7", "-n", "1"), f"outside {TOPIC}-0 (offsets 0 to 0)"
    )
    _one_line_error(strata("consume", TOPIC, *bs, "-p", "4", "-n", "1"), "partition 4 out of range")
    _one_line_error(strata("produce", TOPIC, *bs, "-K", ":", stdin="a:b\nno-separator\n"), "stdin line 2")
    _one_line_error(strata("produce", TOPIC, *bs, "-f", str(tmp_path / "missing")), "cannot read")
    _one_line_error(strata("produce", TOPIC, *bs, "-H", "novalue", stdin="x\n"), "--header expects KEY=VALUE")
    # nothing of the rejected input was produced
    r = strata("consume", TOPIC, *bs, "--from-beginning", "--timeout", "1")
    assert r.returncode == 0 and r.stdout == "", (r.stdout, r.stderr)
    assert b.stop() == 0

    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
        for args in (("produce", TOPIC), ("consume", TOPIC, "-n", "1"), ("bench", "-n", "10")):
            _one_line_error(strata(*args, "-b", dead, stdin="x\n"), f"cannot connect to {dead}")


def test_bench_prints_rates_and_cleans_up(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    r = strata("bench", "-b", b.bootstrap, "-n", "2000", "--partitions", "2", "-o", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["records"] == 2000 and doc["partitions"] == 2 and doc["acks"] == "all"
    for key in (
        "produce_records_per_s",
        "fetch_records_per_s",
        "produce_mib_per_s",
        "fetch_to_produce_ratio",
    ):
        assert doc[key] > 0
    r = strata("bench", "-b", b.bootstrap, "-n", "500", "--acks", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("produce: 500 records of 100 B") and out[1].startswith("fetch:   500 records")
    assert out[2].startswith("fetch/produce throughput ratio: ")
    r = strata("topic", "list", "-b", b.bootstrap, "-o", "json")  # the scratch topics are gone
    assert r.returncode == 0, r.stderr
    assert not [t for t in json.loads(r.stdout) if t.startswith("strata-bench-")], r.stdout  # a list of names
    assert b.stop() == 0


def test_the_issue_s_subcommands_exist() -> None:
    wanted = {
        "serve",
        "topic",
        "produce",
        "consume",
        "groups",
        "cluster",
        "tier",
        "restore",
        "export",
        "bench",
    }
    assert wanted <= set(COMMANDS)


def test_ctrl_c_ends_a_group_read_and_commits_what_was_printed(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    import os
    import signal
    import threading

    b = broker_factory()
    create_topic(b.bootstrap, TOPIC, 1)
    r = strata("produce", TOPIC, "-b", b.bootstrap, stdin="".join(f"r{i}\n" for i in range(5)))
    assert r.returncode == 0, r.stderr
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "api.cli",
            "consume",
            TOPIC,
            "-b",
            b.bootstrap,
            "-g",
            "ctrl-c",
            "--from-beginning",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(60, proc.kill)  # bounds the reads below if it never stops
    watchdog.start()
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()  # blocks until the first record is printed
        proc.send_signal(signal.SIGINT)
        # Through the same buffered reader: readline() may have buffered later lines.
        rest = proc.stdout.read()
        err = proc.stderr.read()
        proc.wait()
    finally:
        watchdog.cancel()
        proc.kill()
    assert proc.returncode == 0, err
    printed = (first + rest).splitlines()
    assert printed and printed == [f"r{i}" for i in range(len(printed))]
    # The group resumes exactly after what was printed (a last record bounds the read).
    r = strata("produce", TOPIC, "-b", b.bootstrap, stdin="end\n")
    assert r.returncode == 0, r.stderr
    left = 5 - len(printed) + 1
    r = strata("consume", TOPIC, "-b", b.bootstrap, "-g", "ctrl-c", "-n", str(left))
    assert r.returncode == 0, r.stderr
    assert printed + r.stdout.splitlines() == [*(f"r{i}" for i in range(5)), "end"]
    assert b.stop() == 0
