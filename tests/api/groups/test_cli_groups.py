"""``strata groups list|describe|delete`` as subprocesses against a real broker process,
with confluent-kafka members holding and committing a group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from tests.api.groups.helpers import MEMBER_CONFIG, produce, rest, wait_for
from tests.brokers import ROOT, BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)


def strata(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def consumer(bootstrap: str, group: str) -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.id": "cli-test",
            **MEMBER_CONFIG,
        }
    )


def test_groups_list_describe_delete(gbroker: BrokerProcess) -> None:
    topic, group = "cli-t", "cli-g"
    b = gbroker.bootstrap
    create_topic(b, topic, 2)
    produce(b, topic, [(None, b"x", i % 2) for i in range(20)])
    c1, c2 = consumer(b, group), consumer(b, group)
    try:
        c1.subscribe([topic])
        c2.subscribe([topic])

        def both_assigned() -> bool:
            c1.poll(0.05)
            c2.poll(0.05)
            return len(c1.assignment()) == 1 and len(c2.assignment()) == 1

        wait_for("both members to own a partition", both_assigned)
        owner = {c.assignment()[0].partition: c for c in (c1, c2)}
        owner[0].commit(offsets=[CkTopicPartition(topic, 0, 4)], asynchronous=False)
        owner[1].commit(offsets=[CkTopicPartition(topic, 1, 10)], asynchronous=False)

        r = strata("groups", "list", "-b", b, "-o", "json")
        assert r.returncode == 0, r.stderr
        listed = {g["group_id"]: g for g in json.loads(r.stdout)}
        assert listed[group] == {
            "group_id": group,
            "type": "classic",
            "state": "Stable",
            "protocol_type": "consumer",
            "protocol": "range",
            "members": 2,
            "total_lag": 6,
        }
        r = strata("groups", "list", "-b", b)
        assert r.returncode == 0, r.stderr
        assert "GROUP" in r.stdout and "LAG" in r.stdout
        row = next(line.split() for line in r.stdout.splitlines() if line.startswith(group + " "))
        assert row == [group, "classic", "Stable", "consumer", "range", "2", "6"]

        r = strata("groups", "describe", group, "-b", b, "-o", "json")
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert (info["state"], info["protocol"], info["total_lag"]) == ("Stable", "range", 6)
        assert [
            (
                p["partition"],
                p["committed_offset"],
                p["log_end_offset"],
                p["lag"],
                p["member_id"],
                p["client_id"],
            )
            for p in info["partitions"]
        ] == [
            (0, 4, 10, 6, owner[0].memberid(), "cli-test"),
            (1, 10, 10, 0, owner[1].memberid(), "cli-test"),
        ]
        assert sorted(m["member_id"] for m in info["members"]) == sorted(c.memberid() for c in (c1, c2))
        assert sorted(m["partitions"] for m in info["members"]) == [[[topic, 0]], [[topic, 1]]]

        r = strata("groups", "describe", group, "-b", b)
        assert r.returncode == 0, r.stderr
        assert "CURRENT-OFFSET" in r.stdout and "LOG-END-OFFSET" in r.stdout
        rows = {
            int(cols[1]): cols
            for cols in (line.split() for line in r.stdout.splitlines())
            if cols and cols[0] == topic
        }
        assert rows[0][2:6] == ["4", "10", "6", owner[0].memberid()]
        assert rows[1][2:6] == ["10", "10", "0", owner[1].memberid()]

        r = strata("groups", "delete", group, "-b", b)
        assert r.returncode == 1
        assert r.stderr.strip() == f"strata: error: group '{group}': the group still has members"
    finally:
        c1.close()
        c2.close()

    http = rest(gbroker.http_url)
    wait_for("an empty group", lambda: http.get(f"/v1/groups/{group}/lag").json()["state"] == "Empty")
    r = strata("groups", "delete", group, "-b", b)
    assert (r.returncode, r.stdout.strip()) == (0, f"deleted group {group}"), r.stderr
    r = strata("groups", "list", "-b", b, "-o", "json")
    assert group not in {g["group_id"] for g in json.loads(r.stdout)}
    r = strata("groups", "describe", group, "-b", b)
    assert r.returncode == 1
    assert r.stderr.strip() == f"strata: error: group '{group}' does not exist"
    r = strata("groups", "delete", group, "-b", b)
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_groups_reset_offsets_and_delete_offsets(gbroker: BrokerProcess) -> None:
    topic, group = "rs-t", "rs-g"
    b = gbroker.bootstrap
    create_topic(b, topic, 2)
    produce(b, topic, [(None, b"x", i % 2) for i in range(20)])  # offsets 0-9 in each partition

    def committed() -> dict[int, int]:
        r = strata("groups", "describe", group, "-b", b, "-o", "json")
        assert r.returncode == 0, r.stderr
        return {p["partition"]: p["committed_offset"] for p in json.loads(r.stdout)["partitions"]}

    def reset(*args: str) -> Any:
        r = strata("groups", "reset-offsets", group, "-b", b, "-o", "json", *args)
        assert r.returncode == 0, r.stderr
        return {p["partition"]: p["new_offset"] for p in json.loads(r.stdout)["partitions"]}

    c = consumer(b, group)
    try:
        c.subscribe([topic])
        wait_for("an assignment", lambda: c.poll(0.05) is not None or len(c.assignment()) == 2)
        c.commit(offsets=[CkTopicPartition(topic, 0, 4), CkTopicPartition(topic, 1, 10)], asynchronous=False)
        r = strata("groups", "reset-offsets", group, "-b", b, "--topic", topic, "--to-earliest", "--execute")
        assert r.returncode == 1 and r.stderr.count("\n") == 1
        assert "offsets can be reset only while it is inactive" in r.stderr
    finally:
        c.close()
    http = rest(gbroker.http_url)
    wait_for("an empty group", lambda: http.get(f"/v1/groups/{group}/lag").json()["state"] == "Empty")

    assert reset("--topic", topic, "--to-earliest") == {0: 0, 1: 0}  # a dry run: nothing committed
    assert committed() == {0: 4, 1: 10}
    assert reset("--topic", f"{topic}:0", "--shift-by", "-2", "--execute") == {0: 2}
    assert committed() == {0: 2, 1: 10}
    assert reset("--all-topics", "--to-offset", "100", "--execute") == {0: 10, 1: 10}  # kept in the log
    assert reset("--topic", topic, "--to-datetime", "2000-01-01T00:00:00+00:00", "--execute") == {0: 0, 1: 0}
    assert reset("--topic", topic, "--to-datetime", "2999-01-01T00:00:00+00:00") == {0: 10, 1: 10}
    assert reset("--topic", f"{topic}:1", "--to-latest", "--execute") == {1: 10}
    assert committed() == {0: 0, 1: 10}
    text = strata("groups", "reset-offsets", group, "-b", b, "--topic", topic, "--to-latest")
    assert "NEW-OFFSET" in text.stdout and "dry run: nothing committed" in text.stdout
    for bad, says in (
        (("--topic", topic, "--to-latest", "--to-earliest"), "exactly one of"),
        (("--topic", "nope", "--to-latest"), "topic 'nope' does not exist"),
        (("--topic", f"{topic}:7", "--to-latest"), "partition 7 out of range"),
        (("--to-latest",), "--all-topics"),
    ):
        r = strata("groups", "reset-offsets", group, "-b", b, *bad)
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and says in r.stderr, (bad, r.stderr)

    r = strata("groups", "delete-offsets", group, "-b", b, "--topic", f"{topic}:1", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"topic": topic, "partition": 1, "error": None}]
    assert committed() == {0: 0}
