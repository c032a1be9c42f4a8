"""`strata tier status` end to end against a real tiered broker, and the CLI's shared
conventions (``--output/-o text|json``, one-line errors with a non-zero exit)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

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


def test_tier_sync_makes_the_bucket_current(broker_factory: Callable[..., BrokerProcess]) -> None:
    """A fresh broker holds its records in the active segment (no roll, remote.copy.max.lag.ms
    far away): the bucket has none until ``strata tier sync`` rolls and uploads them."""
    from confluent_kafka import Producer

    from hot.errors import UnknownTopicOrPartitionError
    from spark.options import ReadOptions
    from spark.plan import plan_scan

    b = broker_factory()
    create_topic(b.bootstrap, "synced", 2)
    create_topic(b.bootstrap, "untiered", 1, {"remote.storage.enable": "false"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2})
    for i in range(40):
        p.produce("synced", value=f"v{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    bucket = f"file://{b.data_dir.resolve() / 'objects'}"

    def archived_ends() -> dict[int, int]:
        try:
            plan = plan_scan(ReadOptions.parse({"subscribe": "synced"}, path=bucket))
        except UnknownTopicOrPartitionError:  # not even the topic manifest yet
            return {}
        return {r.partition: r.end for r in plan.ranges}

    assert sum(archived_ends().values()) == 0

    r = strata("tier", "sync", "synced", "--http", b.http_url, "-o", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["unreachable"] == [] and doc["uploaded_segments"] == 2
    assert [(x["topic"], x["partition"], x["rolled"], x["complete"]) for x in doc["partitions"]] == [
        ("synced", 0, True, True),
        ("synced", 1, True, True),
    ]
    assert [x["remote_next_offset"] for x in doc["partitions"]] == [20, 20]
    assert archived_ends() == {0: 20, 1: 20}

    # nothing new: every topic is already current, nothing rolled
    r = strata("tier", "sync", "--http", b.http_url)
    assert r.returncode == 0, r.stderr
    assert "0 segment(s) uploaded; 2 of 2 partition(s) complete" in r.stdout
    assert "synced" in r.stdout and "untiered" not in r.stdout

    r = strata("tier", "sync", "untiered", "--http", b.http_url)
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "topic 'untiered' is not tiered (remote.storage.enable=false)" in r.stderr
    r = strata("tier", "sync", "nosuch", "--http", b.http_url)
    assert r.returncode == 1 and "topic 'nosuch' does not exist" in r.stderr
    assert b.stop() == 0


def test_tier_sync_asks_every_leader_of_a_cluster(tmp_path: Path) -> None:
    """Two `strata serve --etcd` brokers sharing one bucket: a sync asked of one broker
    uploads the partitions each broker leads."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.broker.clusterlib import FAST_ENV
    from tests.broker.etcdlib import EtcdProcess

    bucket = f"file://{tmp_path / 'bucket'}"
    env = {**FAST_ENV, "STRATA_LOG_REMOTE_STORAGE_ENABLE": "true"}
    etcd = EtcdProcess(tmp_path / "etcd").start()
    args = ("--etcd", etcd.endpoint, "--object-store", bucket)
    brokers = [BrokerProcess(tmp_path / f"b{i}", *args, "--broker-id", str(i), env=env) for i in (1, 2)]
    try:
        for b in brokers:
            b.start()
        b1 = brokers[0]
        admin = AdminClient({"bootstrap.servers": b1.bootstrap})
        admin.create_topics([NewTopic("spread", num_partitions=4, replication_factor=1)])["spread"].result(30)
        p = Producer({"bootstrap.servers": b1.bootstrap, "linger.ms": 2})
        for i in range(40):
            p.produce("spread", value=f"v{i}".encode(), partition=i % 4)
        assert p.flush(30) == 0
        r = strata("tier", "sync", "spread", "--http", b1.http_url, "-o", "json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["unreachable"] == []
        parts = doc["partitions"]
        assert [(x["partition"], x["complete"], x["remote_next_offset"]) for x in parts] == [
            (n, True, 10) for n in range(4)
        ]
        assert {x["broker"] for x in parts} == {1, 2}  # each leader did its own
    finally:
        for b in brokers:
            b.kill()
        etcd.stop()


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
    assert {"tier status", "tier sync", "cluster status", "topic list", "groups describe"} <= set(with_output)
