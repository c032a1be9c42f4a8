"""A full disk says so, and an idempotent producer gets through once space returns.

A real broker on a small tmpfs (mounting needs root: skipped otherwise) whose free space is
taken by a filler file, once with the default high-water mark (95%: appends are refused
before the disk is full) and once with it off (the writes themselves fail with ENOSPC).
Either way: one ERROR line naming the directory, ``/v1/status`` degraded with the reason,
the ``strata_disk_*`` gauges; the producer's batches are refused with a retriable error
(nothing stored); freeing the space brings one recovery line, status ok, and every record
in order, once.
"""

from __future__ import annotations

import errno
import json
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)

TOPIC = "diskfull"
RECORDS = 20


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path: Path) -> None:
    """Take every free byte of ``path``'s filesystem."""
    with open(path, "wb", buffering=0) as fh:
        for size in (1 << 20, 4096, 512):
            block = b"\0" * size
            while True:
                try:
                    fh.write(block)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        data: bytes = resp.read()
    return data


def _status(broker: BrokerProcess) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_get(f"{broker.http_url}/v1/status"))
    return doc


def _gauge(broker: BrokerProcess, name: str) -> float:
    for line in _get(f"{broker.http_url}/metrics").decode().splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exported")


def _wait(what: str, cond: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("limit", ["high_water", "enospc"])
def test_disk_full_is_reported_and_recovered(
    broker_factory: Callable[..., BrokerProcess], small_fs: Path, limit: str
) -> None:
    env = {"STRATA_TIERING_DISK_HIGH_WATER_PERCENT": "0"} if limit == "enospc" else {}
    data_dir = small_fs / "data"
    broker = broker_factory(data_dir=data_dir, env=env)
    create_topic(broker.bootstrap, TOPIC, 1)
    entered = "is above its high-water mark" if limit == "high_water" else "is full"
    left = "is below its high-water mark again" if limit == "high_water" else "has space again"

    delivered: list[int] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(int(msg.key() or b"-2"))

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 0,
            "delivery.timeout.ms": 120_000,
        }
    )
    producer.produce(TOPIC, key=b"-1", value=b"before", partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0 and delivered == [-1]  # producer id allocated, connections up
    assert _status(broker)["status"] == "ok"

    filler = small_fs / "filler"
    _fill(filler)
    for i in range(RECORDS):
        producer.produce(TOPIC, key=str(i).encode(), value=b"x" * 4000, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    _wait("the ERROR line", lambda: entered in broker.output())
    doc = _status(broker)
    assert doc["status"] == "degraded", doc
    assert doc["disk"]["directory"] == str(data_dir)
    assert doc["disk"]["high_water" if limit == "high_water" else "full"] is True
    reason = "high-water mark" if limit == "high_water" else "no space left on device"
    assert any(reason in r for r in doc["degraded_reasons"]), doc
    assert _gauge(broker, "strata_disk_appends_refused") == 1
    assert _gauge(broker, "strata_disk_high_water" if limit == "high_water" else "strata_disk_full") == 1
    assert _gauge(broker, "strata_disk_total_bytes") == 32 * 1024 * 1024
    assert _gauge(broker, "strata_disk_free_bytes") < 2 * 1024 * 1024
    producer.poll(1)  # a few retries refused meanwhile: still one line
    assert delivered == [-1] and not errors  # refused, retried, nothing given up

    filler.unlink()
    _wait("the recovery", lambda: _status(broker)["status"] == "ok")
    assert producer.flush(60) == 0
    assert not errors and delivered == [-1, *range(RECORDS)]
    out = broker.output()
    assert out.count(entered) == 1 and out.count(left) == 1, out
    error_line = next(line for line in out.splitlines() if entered in line)
    assert "ERROR" in error_line and str(data_dir) in error_line and "bytes free" in error_line
    assert _status(broker)["degraded_reasons"] == []
    assert _gauge(broker, "strata_disk_appends_refused") == 0

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    keys: list[int] = []
    deadline = time.monotonic() + 30
    while len(keys) < RECORDS + 1 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            keys.append(int(m.key() or b"-2"))
    consumer.close()
    assert keys == [-1, *range(RECORDS)]  # in order, none twice
