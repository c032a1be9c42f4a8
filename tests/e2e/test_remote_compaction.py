"""Remote compaction on a real broker over S3 (moto on loopback): a compacted tiered topic
with 1 KiB segments and a tiny local retention is written by confluent-kafka in phases,
so the bucket holds many versions of every key; the broker's remote compaction rewrites
the remote segments, the bucket shrinks, and confluent-kafka, kcat (from offset 0) and a
Spark read of the bucket see the latest value of every key at its original offset."""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.brokers import BrokerProcess, S3Endpoint, create_topic
from tests.e2e.test_compaction import KEYS, TOPIC, consume, kcat
from tiering.keys import partition_root
from tiering.manifest import PartitionManifest
from tiering.manifest_store import ManifestStore
from tiering.store import open_store

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
PHASES = 4
ROUNDS_PER_PHASE = 3


async def _remote(url: str) -> tuple[PartitionManifest | None, int]:
    """The partition manifest and the bytes of the segment objects in the bucket."""
    store = open_store(url)
    try:
        ms = ManifestStore(store)
        doc = await ms.load_topic_manifest(TOPIC)
        if doc is None:
            return None, 0
        tid = uuid.UUID(doc["topic_id"])
        m, _ = await ms.load(TOPIC, tid, 0)
        objs = await store.list(partition_root(TOPIC, tid, 0) + "/segments/")
        return m, sum(o.size for o in objs)
    finally:
        await store.close()


def _produce(p: Producer, written: dict[int, tuple[bytes, bytes | None]], phase: int) -> None:
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
            return
        written[msg.offset()] = (msg.key(), msg.value())  # type: ignore[attr-defined]

    for r in range(ROUNDS_PER_PHASE):
        for k in range(KEYS):
            value = b"value-%d-%d-%d-" % (k, phase, r) + b"x" * 30
            p.produce(TOPIC, key=b"key-%d" % k, value=value, partition=0, on_delivery=report)
        p.flush(30)
    assert not errors, errors


def test_remote_compaction_on_a_real_broker(
    tmp_path: Path, s3_bucket: str, s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"s3://{s3_bucket}/strata"
    env = {
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "200",
        "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "500",
        "STRATA_TIERING_REMOTE_COMPACTION_INTERVAL_MS": "500",
        "STRATA_TIERING_REMOTE_COMPACTION_GRACE_MS": "0",
        "STRATA_LOG_CLEANER_BACKOFF_MS": "200",
    }
    broker = BrokerProcess(tmp_path / "data", "--object-store", url, env=env).start()
    written: dict[int, tuple[bytes, bytes | None]] = {}
    try:
        create_topic(
            broker.bootstrap,
            TOPIC,
            1,
            {
                "cleanup.policy": "compact",
                "segment.bytes": "1024",
                "min.cleanable.dirty.ratio": "0.3",
                "delete.retention.ms": "3600000",
                "local.retention.bytes": "1024",
            },
        )
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "enable.idempotence": True}
        )
        deadline = time.monotonic() + 150
        peak = 0
        for phase in range(PHASES):
            _produce(producer, written, phase)
            # Each phase reaches the bucket before the next is written: every key then has
            # versions in many remote segments, which only remote compaction can remove.
            target = max(written) - 2 * KEYS
            while time.monotonic() < deadline:
                m, size = asyncio.run(_remote(url))
                peak = max(peak, size)
                if m is not None and m.next_offset() > target:
                    break
                time.sleep(0.3)
            else:
                raise AssertionError(f"phase {phase} was not uploaded")
        # Remote compaction: the manifest's cleaned offset covers the remote data, the
        # replaced objects are gone (grace 0), and the bucket is smaller than at its peak.
        while time.monotonic() < deadline:
            m, size = asyncio.run(_remote(url))
            peak = max(peak, size)
            if m is not None and m.cleaned_offset >= m.next_offset() - 4 * KEYS and size < peak // 2:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"no remote compaction: manifest {m}, {size} of {peak} bytes")
        assert m is not None
        remote_end = m.next_offset()
        assert any(s.compacted and s.cleaned_ms is not None for s in m.copied())

        latest: dict[bytes, int] = {}
        for o in sorted(written):
            latest[written[o][0]] = o
        # The cleaners may still be finishing a pass (local tail or one more remote pass):
        # compare the doors only once two reads in a row agree, so each door reads the same log.
        records = consume(broker.bootstrap)
        while time.monotonic() < deadline:
            again = consume(broker.bootstrap)
            if again == records:
                break
            records = again
            time.sleep(0.5)
        else:
            raise AssertionError("the compacted log kept changing between reads")
        offsets = [o for o, _, _ in records]
        assert offsets[0] < remote_end  # read from the bucket first
        assert offsets == sorted(set(offsets))
        for o, k, v in records:
            assert written[o] == (k, v)
        assert {latest[k] for k in latest} <= set(offsets)
        assert len(records) < len(written) // 2
        assert kcat(broker.bootstrap) == records
        assert _rest_read(broker.http_url, len(records)) == records
    finally:
        broker.stop()

    # Spark reads the bucket (rewritten segments, gaps and all): the latest value of every
    # key among the remote offsets.
    _spark_check(url, s3_endpoint, written, remote_end)


def _rest_read(http_url: str, count: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """The topic from offset 0 through a REST Proxy v2 consumer instance."""
    from tests.api.groups.helpers import JSON_HEADERS, assignment, poll_records, rest, wait_for

    http = rest(http_url)
    r = http.post(
        "/consumers/rc-rest",
        json={
            "name": "r",
            "format": "binary",
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "false",
        },
        headers=JSON_HEADERS,
    )
    assert r.status_code == 200, r.text
    base = "/consumers/rc-rest/instances/r"
    r = http.post(f"{base}/subscription", json={"topics": [TOPIC]}, headers=JSON_HEADERS)
    assert r.status_code == 204, r.text
    wait_for("an assignment", lambda: assignment(http, base) == {(TOPIC, 0)})
    got = poll_records(http, base, count)
    http.delete(base)

    def raw(v: str | None) -> bytes | None:
        return None if v is None else base64.b64decode(v)

    return [(g["offset"], raw(g["key"]), raw(g["value"])) for g in got]


def _spark_check(
    url: str, s3_endpoint: S3Endpoint, written: dict[int, tuple[bytes, bytes | None]], end: int
) -> None:
    from pyspark.sql import SparkSession

    from spark import StrataDataSource
    from tests.spark.sparklib import stop_spark

    saved = dict(os.environ)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), saved.get("PYTHONPATH", "")) if p)
    os.environ.update(s3_endpoint.env)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("strata-remote-compaction")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        session.sparkContext.setLogLevel("ERROR")
        session.dataSource.register(StrataDataSource)
        rows = (
            session.read.format("strata")
            .option("topic", TOPIC)
            .load(url)
            .select("offset", "key", "value")
            .collect()
        )
    finally:
        stop_spark(session)  # and its JVM, which keeps this test's S3 endpoint variables
        os.environ.clear()
        os.environ.update(saved)
    got = sorted((r["offset"], bytes(r["key"]), bytes(r["value"])) for r in rows)
    for o, k, v in got:
        assert written[o] == (k, v)
    latest: dict[bytes, int] = {}
    for o in sorted(written):
        if o < end:
            latest[written[o][0]] = o
    assert {latest[k] for k in latest} <= {o for o, _, _ in got}
    assert len(got) < len([o for o in written if o < end]) // 2
