"""`strata topic alter-config|add-partitions|trim` and the config sources of `topic
describe`, run as a user runs them (subprocesses of the CLI) against a real broker, checked
with a real Kafka admin client (confluent-kafka) where the broker's state is the point."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient, ConfigResource

from tests.brokers import ROOT, BrokerProcess, create_topic


def strata(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, r.stderr
    return r.stdout


def one_line_error(r: subprocess.CompletedProcess[str], text: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("strata: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert text in r.stderr, r.stderr


def _configs(bootstrap: str, topic: str) -> dict[str, tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(timeout=30)
    return {k: (e.value, e.source) for k, e in entries.items()}


def test_alter_config_and_describe_sources(broker: BrokerProcess) -> None:
    topic = "admin-configs"
    bs = ("-b", broker.bootstrap)
    ok(strata("topic", "create", topic, *bs, "-c", "retention.ms=86400000", "-c", "cleanup.policy=delete"))

    out = ok(
        strata(
            "topic",
            "alter-config",
            topic,
            *bs,
            "--set",
            "retention.bytes=1048576",
            "--delete",
            "retention.ms",
        )
    )
    assert out == f"altered topic {topic}: retention.bytes=1048576, delete retention.ms\n"
    # -c / --config as topic create takes them: the same as --set
    out = ok(
        strata("topic", "alter-config", topic, *bs, "-c", "segment.ms=3600000", "--config", "flush.ms=5000")
    )
    assert out == f"altered topic {topic}: segment.ms=3600000, flush.ms=5000\n"
    seen = _configs(broker.bootstrap, topic)
    assert seen["segment.ms"][0] == "3600000" and seen["flush.ms"][0] == "5000"
    ok(strata("topic", "alter-config", topic, *bs, "--append", "cleanup.policy=compact"))
    seen = _configs(broker.bootstrap, topic)
    assert seen["retention.bytes"][0] == "1048576" and seen["retention.ms"][0] == "604800000"
    assert sorted(seen["cleanup.policy"][0].split(",")) == ["compact", "delete"]
    # --dry-run validates only
    out = ok(
        strata("topic", "alter-config", topic, *bs, "--set", "retention.bytes=5", "--dry-run", "-o", "json")
    )
    assert json.loads(out)["dry_run"] is True
    assert _configs(broker.bootstrap, topic)["retention.bytes"][0] == "1048576"

    # describe: each config's source, in text and JSON
    info = json.loads(ok(strata("topic", "describe", topic, *bs, "-o", "json")))
    assert info["config_sources"]["retention.bytes"] == "topic"
    assert info["config_sources"]["retention.ms"] == "default"
    text = ok(strata("topic", "describe", topic, *bs))
    assert "  retention.bytes=1048576  (topic)\n" in text and "  retention.ms=604800000  (default)\n" in text

    one_line_error(
        strata("topic", "alter-config", topic, *bs, "--set", "segment.bytes=huge"), "segment.bytes"
    )
    one_line_error(strata("topic", "alter-config", topic, *bs, "--set", "novalue"), "--set expects KEY=VALUE")
    one_line_error(strata("topic", "alter-config", topic, *bs), "give at least one of --set")
    one_line_error(
        strata("topic", "alter-config", topic, *bs, "--set", "a=1", "--delete", "a"),
        "a config may change once",
    )


def test_add_partitions_and_trim(broker: BrokerProcess) -> None:
    topic = "admin-trim"
    bs = ("-b", broker.bootstrap)
    create_topic(broker.bootstrap, topic, 2)
    assert (
        ok(strata("topic", "add-partitions", topic, *bs, "-n", "2")) == f"topic {topic}: 2 -> 4 partitions\n"
    )
    info = json.loads(ok(strata("topic", "describe", topic, *bs, "-o", "json")))
    assert [p["partition"] for p in info["partitions"]] == [0, 1, 2, 3]
    for p in range(4):
        ok(strata("produce", topic, *bs, "-p", str(p), stdin="".join(f"r{i}\n" for i in range(10))))

    # one partition to an offset; the prompt is answered on stdin
    r = strata("topic", "trim", topic, *bs, "-p", "1", "--offset", "4", stdin="y\n")
    assert ok(r).split()[-4:] == [topic, "1", "4", "-"], r.stdout
    # every partition to the end, JSON; rpk's name works too
    rows = json.loads(
        ok(
            strata(
                "topic",
                "trim-prefix",
                topic,
                *bs,
                "-p",
                "2,3",
                "--offset",
                "end",
                "--no-confirm",
                "-o",
                "json",
            )
        )
    )
    assert [(r["partition"], r["log_start_offset"]) for r in rows] == [(2, 10), (3, 10)]
    starts = {
        p["partition"]: p["log_start_offset"]
        for p in json.loads(ok(strata("topic", "describe", topic, *bs, "-o", "json")))["partitions"]
    }
    assert starts == {0: 0, 1: 4, 2: 10, 3: 10}
    assert ok(strata("consume", topic, *bs, "-p", "1", "-o", "beginning", "-e", "-f", r"%o\n")).split() == [
        str(i) for i in range(4, 10)
    ]
    # a refused prompt changes nothing
    r = strata("topic", "trim", topic, *bs, "--offset", "end", stdin="n\n")
    assert r.returncode == 1 and "Aborted" in r.stderr
    # past the high watermark: the partition's error, exit 1
    r = strata("topic", "trim", topic, *bs, "-p", "0", "--offset", "99", "--no-confirm")
    one_line_error(r, "1 of 1 partitions of admin-trim not trimmed: OFFSET_OUT_OF_RANGE")

    # @TIME: the first record at or after it (none: the end)
    future = str(int(time.time() * 1000) + 3_600_000)
    r = strata("topic", "trim", topic, *bs, "-p", "0", "--offset", "@" + future, "--no-confirm", "-o", "json")
    assert [(r["partition"], r["log_start_offset"]) for r in json.loads(ok(r))] == [(0, 10)]

    one_line_error(
        strata("topic", "trim", topic, *bs, "-p", "7", "--offset", "1"), "partition 7 out of range"
    )
    one_line_error(
        strata("topic", "trim", topic, *bs, "--offset", "soon"), "--offset: expected an offset, end or @"
    )

    # --partitions N: the new total, as kafka-topics.sh; at or below the count: Kafka's error
    assert ok(strata("topic", "add-partitions", topic, *bs, "--partitions", "6")) == (
        f"topic {topic}: 4 -> 6 partitions\n"
    )
    one_line_error(strata("topic", "add-partitions", topic, *bs, "--partitions", "6"), "INVALID_PARTITIONS")
    for args in ((), ("-n", "1", "--partitions", "8")):
        one_line_error(strata("topic", "add-partitions", topic, *bs, *args), "give one of -n/--num")


def test_unknown_topic_reads_the_same_everywhere(broker: BrokerProcess) -> None:
    bs = ("-b", broker.bootstrap)
    for args in (
        ("topic", "describe", "nope"),
        ("topic", "delete", "nope"),
        ("topic", "alter-config", "nope", "--set", "retention.ms=1"),
        ("topic", "add-partitions", "nope", "-n", "1"),
        ("topic", "trim", "nope", "--offset", "1", "--no-confirm"),
        ("consume", "nope", "-e"),
        ("transactions", "producers", "nope"),
        ("produce", "nope"),
    ):
        one_line_error(strata(*args, *bs, stdin="x\n"), "topic 'nope' does not exist")
