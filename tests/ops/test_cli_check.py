"""`strata check` on a data directory holding a batch with a correct CRC but malformed
records (stored the way a follower stores what its leader wrote), and what a real broker
does with that batch: REST names it (503) and the broker log warns once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from api.cli import main
from hot.manager import LogManager
from tests.brokers import ROOT, BrokerProcess
from tests.hot.badbatch import REASON, malformed_batch
from tests.hot.hotlib import batch_at

TOPIC = "events"
V2_BINARY = "application/vnd.kafka.binary.v2+json"


def build_data_dir(d: Path) -> tuple[int, bytes]:
    """Topic ``events`` (2 partitions, small segments); partition 0 holds a malformed batch
    in a sealed segment. Returns its base offset and bytes."""
    with LogManager(d) as m:
        m.create_topic(TOPIC, 2, {"segment.bytes": "1024"})
        log = m.get_log(TOPIC, 0)
        for i in range(12):
            log.append(batch_at(0, 1 + i % 3))
        base = log.log_end_offset
        bad = malformed_batch(base)
        log.append_as_follower(bad)
        for i in range(12):
            log.append(batch_at(0, 1 + i % 3))
        log.flush()
        other = m.get_log(TOPIC, 1)
        for _ in range(3):
            other.append(batch_at(0, 2))
        other.flush()
    return base, bad


def check(*args: str) -> tuple[int, Any]:
    r = CliRunner().invoke(main, ["check", *args])
    if "json" in args:
        return r.exit_code, json.loads(r.stdout)
    return r.exit_code, r.output


def test_check_names_the_bad_batch_and_exits_1(tmp_path: Path) -> None:
    d = tmp_path / "data"
    base, bad = build_data_dir(d)
    [seg] = [p for p in (d / "logs" / f"{TOPIC}-0").glob("*.log") if bad in p.read_bytes()]
    code, doc = check("--data-dir", str(d), "-o", "json")
    assert code == 1 and doc["clean"] is False
    assert doc["problems"] == [
        {
            "topic": TOPIC,
            "partition": 0,
            "source": "local",
            "kind": "bad_batch",
            "segment": seg.name,
            "position": seg.read_bytes().index(bad),
            "size": len(bad),
            "base_offset": base,
            "last_offset": base + 2,
            "expected_offset": base,
            "skip_to": base + 3,
            "below_log_start": False,
            "reason": doc["problems"][0]["reason"],
        }
    ]
    assert REASON in doc["problems"][0]["reason"]
    summary = doc["summary"]
    assert summary["partitions"] == 2 and summary["bad_batches"] == 1
    assert summary["torn_tails"] == summary["unreadable"] == summary["below_log_start"] == 0
    assert summary["batches"] == 12 + 1 + 12 + 3 and summary["records"] == 2 * 24 + 3 * 2
    assert summary["segments"] == sum(p["segments"] for p in doc["partitions"]) > 3
    assert [(p["topic"], p["partition"], p["problems"]) for p in doc["partitions"]] == [
        (TOPIC, 0, 1),
        (TOPIC, 1, 0),
    ]

    code, text = check("--data-dir", str(d), f"{TOPIC}:0")
    assert code == 1 and f"{base}-{base + 2}" in text and seg.name in text and "Checking a partition" in text
    code, doc = check("--data-dir", str(d), f"{TOPIC}:1", "-o", "json")
    assert code == 0 and doc["clean"] is True and doc["problems"] == []

    # A torn tail (a crash in the middle of an append) is listed but is no failure.
    last = sorted((d / "logs" / f"{TOPIC}-1").glob("*.log"))[-1]
    with open(last, "ab") as f:
        f.write(batch_at(0, 3)[:40])
    code, doc = check("--data-dir", str(d), f"{TOPIC}:1", "-o", "json")
    assert code == 0 and doc["clean"] is True and doc["summary"]["torn_tails"] == 1
    [torn] = doc["problems"]
    assert torn["kind"] == "torn_tail" and torn["segment"] == last.name and torn["size"] == 40


def test_check_usage_errors_exit_2(tmp_path: Path) -> None:
    d = tmp_path / "data"
    build_data_dir(d)
    for args, fragment in [
        ([f"{TOPIC}:2"], "has 2 partitions, no partition 2"),
        ([f"{TOPIC}:x"], "partition must be a number"),
        (["--object-store", "file:///tmp"], "--object-store only applies with --remote"),
    ]:
        code, text = check("--data-dir", str(d), *args)
        assert code == 2 and fragment in text, (args, text)
    code, text = check("--data-dir", str(d), "nosuch")  # as every command says it
    assert code == 2 and text == "strata: error: topic 'nosuch' does not exist\n", text
    code, text = check("--data-dir", str(tmp_path / "missing"))
    assert code == 2 and "does not exist" in text
    code, text = check("--data-dir", str(tmp_path))
    assert code == 2 and "is not a Strata data directory" in text


def wait_uploaded(http: str, partition: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        doc = httpx.get(f"{http}/v1/partitions", timeout=10).json()
        [p] = [
            p
            for t in doc["topics"]
            if t["topic"] == TOPIC
            for p in t["partitions"]
            if p["partition"] == partition
        ]
        if p["remote_segments"] > 0 and p["upload_lag_segments"] == 0:
            return
        assert time.monotonic() < deadline, f"segments of {TOPIC}-{partition} not uploaded: {p}"
        time.sleep(0.2)


def test_broker_names_the_bad_batch_over_rest_and_warns_once(
    tmp_path: Path, broker_factory: Callable[..., BrokerProcess]
) -> None:
    d = tmp_path / "data"
    base, bad = build_data_dir(d)
    b = broker_factory(data_dir=d, env={"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100"})
    url = f"{b.http_url}/topics/{TOPIC}/partitions/0/records"

    def fetch(offset: int) -> httpx.Response:
        return httpx.get(
            url, params={"offset": offset, "timeout": 0}, headers={"Accept": V2_BINARY}, timeout=30
        )

    r = fetch(0)  # every record before the bad batch, then it stops there
    assert r.status_code == 200 and r.json()[-1]["offset"] == base - 1
    for _ in range(3):
        r = fetch(base)
        assert r.status_code == 503
        message = r.json()["message"]
        assert f"stored batch of {TOPIC}-0 at offsets {base}-{base + 2} failed to decode" in message
        assert f"resume at offset {base + 3}" in message and f"`strata check {TOPIC}:0`" in message
    r = fetch(base + 3)
    assert r.status_code == 200 and r.json()[0]["offset"] == base + 3

    # Read-only beside the running broker, the bucket's copy included.
    wait_uploaded(b.http_url, 0)
    r2 = subprocess.run(
        [
            sys.executable,
            "-m",
            "api.cli",
            "check",
            "--data-dir",
            str(d),
            "--remote",
            f"{TOPIC}:0",
            "-o",
            "json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r2.returncode == 1, r2.stderr
    doc = json.loads(r2.stdout)
    remote = [p for p in doc["problems"] if p["source"] == "remote"]
    assert doc["object_store"].startswith("file://")
    assert [(p["kind"], p["base_offset"], p["last_offset"], p["size"]) for p in remote] == [
        ("bad_batch", base, base + 2, len(bad))
    ]
    assert remote[0]["segment"].endswith(".log") and f"/{TOPIC}-" in remote[0]["segment"]

    assert b.stop() == 0
    warnings = [line for line in b.output().splitlines() if "WARNING api.stored_batches" in line]
    assert len(warnings) == 1, warnings
    assert f"{TOPIC}-0: the stored batch at offsets {base}-{base + 2}" in warnings[0]
