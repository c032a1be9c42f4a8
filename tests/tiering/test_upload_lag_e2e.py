"""Recovery points of a single broker's bucket (docs/tiering.md): after a clean stop
(SIGTERM) the bucket holds every acknowledged record; after kill -9, every record older
than ``remote.copy.max.lag.ms``. Each case is checked by restoring the bucket into a new
broker on an empty data dir and reading the partition from offset 0 with confluent-kafka."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess, create_topic
from tiering.keys import manifest_key, topic_manifest_key

ck = pytest.importorskip("confluent_kafka")

TOPIC = "quiet"


def _produce(bootstrap: str, first: int, count: int) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    errors: list[object] = []

    def done(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for i in range(first, first + count):
        p.produce(TOPIC, b"v%06d" % i, b"k%d" % i, partition=0, on_delivery=done)
    assert p.flush(30) == 0
    assert not errors, errors[:3]


def _consume_all(bootstrap: str, expect_at_least: int, timeout: float = 30.0) -> list[bytes]:
    """Every value of partition 0 from offset 0 to the log end (bounded wait)."""
    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}", "enable.auto.commit": False}
    )
    try:
        c.assign([ck.TopicPartition(TOPIC, 0, 0)])
        _, end = c.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=10)
        assert end >= expect_at_least, f"restored log ends at {end}, expected at least {expect_at_least}"
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(out) < end:
            assert time.monotonic() < deadline, f"read {len(out)} of {end} records"
            for m in c.consume(500, timeout=1.0):
                assert m.error() is None, m.error()
                assert m.offset() == len(out)
                out.append(m.value())
        return out
    finally:
        c.close()


def _remote_next_offset(bucket: Path) -> int:
    """The manifest's next offset of partition 0 (0 while nothing is uploaded)."""
    try:
        doc = json.loads((bucket / topic_manifest_key(TOPIC)).read_bytes())
        man = json.loads((bucket / manifest_key(TOPIC, uuid.UUID(doc["topic_id"]), 0)).read_bytes())
    except FileNotFoundError:
        return 0
    copied = [s for s in man["segments"] if s["state"] == "COPIED"]
    return int(copied[-1]["last_offset"]) + 1 if copied else 0


def _restore(broker_factory: Callable[..., BrokerProcess], tmp_path: Path, store: str) -> BrokerProcess:
    b = broker_factory("--object-store", store, data_dir=tmp_path / "restored")
    assert f"strata: restored topic {TOPIC}" in b.output()
    return b


def test_clean_stop_leaves_every_record_in_the_bucket(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """A quiet topic (default bound of an hour, 1 GiB segments: nothing is sealed while it
    runs): SIGTERM seals and uploads its active segment before the broker exits."""
    store = f"file://{tmp_path / 'bucket'}"
    b = broker_factory("--object-store", store)
    create_topic(b.bootstrap, TOPIC, 1)
    _produce(b.bootstrap, 0, 300)
    assert _remote_next_offset(tmp_path / "bucket") == 0
    assert b.stop() == 0
    assert "upload at shutdown: 1 segment(s) uploaded" in b.output(), b.output()[-3000:]
    assert "quiet-0 up to offset 299" in b.output()
    assert "Traceback" not in b.output()
    assert _remote_next_offset(tmp_path / "bucket") == 300

    r = _restore(broker_factory, tmp_path, store)
    assert _consume_all(r.bootstrap, 300) == [b"v%06d" % i for i in range(300)]
    _produce(r.bootstrap, 300, 1)  # the restored partition continues at the next offset
    assert _consume_all(r.bootstrap, 301)[-1] == b"v000300"


def test_kill_9_loses_nothing_older_than_the_bound(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    store = f"file://{tmp_path / 'bucket'}"
    env = {"STRATA_LOG_REMOTE_COPY_MAX_LAG_MS": "1500", "STRATA_TIERING_UPLOAD_INTERVAL_MS": "200"}
    b = broker_factory("--object-store", store, env=env)
    create_topic(b.bootstrap, TOPIC, 1)
    _produce(b.bootstrap, 0, 200)
    # Bounded wait for the roll by age and its upload (not a timing assertion).
    deadline = time.monotonic() + 30
    while _remote_next_offset(tmp_path / "bucket") < 200:
        assert time.monotonic() < deadline, "the records older than the bound were not uploaded"
        time.sleep(0.1)
    _produce(b.bootstrap, 200, 5)  # younger than the bound: may be lost by kill -9
    b.kill()

    r = _restore(broker_factory, tmp_path, store)
    values = _consume_all(r.bootstrap, 200)
    assert 200 <= len(values) <= 205
    assert values == [b"v%06d" % i for i in range(len(values))]
