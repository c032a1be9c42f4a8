"""End to end across the tier boundary: a broker subprocess tiers to a real S3 endpoint
(moto), local retention deletes the uploaded segments, and real clients (kcat,
confluent-kafka, the REST API) read offset 0..end identically; ListOffsets by time lands
in the remote tier; a new broker on an empty data dir restores the topic from the bucket
and continues at the right offset."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.brokers import BrokerProcess, S3Endpoint, create_topic
from tiering.manifest_store import ManifestStore
from tiering.store import open_store

TOPIC = "tiered"
N = 4000
TS0 = 1_700_000_000_000
Rec = tuple[int, int, bytes, bytes]  # offset, timestamp, key, value
FORMAT = "%o %T %k %s\n"  # kcat output: values are ASCII without spaces


def _value(i: int) -> bytes:
    filler = hashlib.sha256(b"%d" % i).hexdigest().encode()
    return b"v%06d-" % i + (filler * 32)[: 900 + i % 200]


def _expected(n: int, first: int = 0) -> list[Rec]:
    return [(i, TS0 + i, b"k%d" % i, _value(i)) for i in range(first, n)]


def _produce(bootstrap: str, first: int, count: int) -> list[int]:
    from confluent_kafka import Producer

    offsets: list[int] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})

    def done(err: object, msg: object) -> None:
        assert err is None, err
        offsets.append(msg.offset())  # type: ignore[attr-defined]

    for i in range(first, first + count):
        p.produce(TOPIC, _value(i), b"k%d" % i, partition=0, timestamp=TS0 + i, on_delivery=done)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    return sorted(offsets)


def _local_bases(data_dir: Path) -> list[int]:
    d = data_dir / "logs" / f"{TOPIC}-0"
    return sorted(int(p.name[:-4]) for p in d.glob("*.log"))


def _wait(what: str, cond: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _remote_next(url: str) -> int:
    async def go() -> int:
        store = open_store(url)
        try:
            manifests = ManifestStore(store)
            doc = await manifests.load_topic_manifest(TOPIC)
            if doc is None:
                return -1
            m, _ = await manifests.load(TOPIC, uuid.UUID(doc["topic_id"]), 0)
            return -1 if m is None else m.next_offset()
        finally:
            await store.close()

    return asyncio.run(go())


def _consume(bootstrap: str, start: int, end: int) -> list[Rec]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(TOPIC, 0, start)])
    out: list[Rec] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < end - start and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.offset() or 0, msg.timestamp()[1], msg.key() or b"", msg.value() or b""))
    finally:
        c.close()
    return out


def _kcat(bootstrap: str) -> list[Rec]:
    proc = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-q", "-f", FORMAT],
        capture_output=True,
        check=True,
        timeout=120,
    )
    out = []
    for line in proc.stdout.splitlines():
        off, ts, key, value = line.split(b" ")
        out.append((int(off), int(ts), key, value))
    return out


def _rest(http_url: str, end: int) -> list[Rec]:
    out: list[Rec] = []
    offset = 0
    while offset < end:
        req = urllib.request.Request(
            f"{http_url}/topics/{TOPIC}/partitions/0/records?offset={offset}&max_bytes=300000&timeout=0",
            headers={"Accept": "application/vnd.kafka.binary.v2+json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            records = json.loads(r.read())
        assert records, f"no records at offset {offset}"
        for rec in records:
            out.append(
                (
                    rec["offset"],
                    rec["timestamp"],
                    base64.b64decode(rec["key"]),
                    base64.b64decode(rec["value"]),
                )
            )
        offset = out[-1][0] + 1
    return out


def _offsets_for_times(bootstrap: str, ts: int) -> tuple[int, int, int]:
    """(offset for ``ts``, low watermark, high watermark) through confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        [tp] = c.offsets_for_times([TopicPartition(TOPIC, 0, ts)], timeout=30)
        low, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
        return tp.offset, low, high
    finally:
        c.close()


def _alter(bootstrap: str, **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        TOPIC,
        incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_reads_restore_across_tiers(
    broker_factory: Callable[..., BrokerProcess], s3_endpoint: S3Endpoint, s3_bucket: str, tmp_path: Path
) -> None:
    url = f"s3://{s3_bucket}/strata"
    env = {**s3_endpoint.env, "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100"}
    b1 = broker_factory("--object-store", url, env=env, data_dir=tmp_path / "b1")
    create_topic(
        b1.bootstrap,
        TOPIC,
        1,
        {"segment.bytes": "65536", "local.retention.bytes": "131072", "index.interval.bytes": "4096"},
    )
    assert _produce(b1.bootstrap, 0, N) == list(range(N))

    # uploads run and local retention removes what was uploaded
    _wait("local segments to be tiered", lambda: (_local_bases(b1.data_dir) or [0])[0] > N // 2)
    local_start = _local_bases(b1.data_dir)[0]
    assert local_start <= _remote_next(url)

    expected = _expected(N)
    assert _kcat(b1.bootstrap) == expected
    assert _consume(b1.bootstrap, 0, N) == expected
    assert _rest(b1.http_url, N) == expected
    # a consumer starting in the middle of the remote tier
    assert _consume(b1.bootstrap, 123, N) == expected[123:]

    for i in (0, 10, local_start - 1, local_start, N - 1):
        assert _offsets_for_times(b1.bootstrap, TS0 + i) == (i, 0, N)

    # seal the active segment (segment.ms) with one more record, so everything before it
    # gets uploaded; then lose the data dir
    _alter(b1.bootstrap, segment_ms="1")
    assert _produce(b1.bootstrap, N, 1) == [N]
    _wait("the last full segment to be uploaded", lambda: _remote_next(url) == N)
    assert b1.stop() == 0

    b2 = broker_factory("--object-store", url, env=env, data_dir=tmp_path / "b2")
    assert f"restored topic {TOPIC}" in b2.output()
    # the console's tiering page says what was restored at start-up
    restore = httpx.get(f"{b2.http_url}/console/api/tiering", timeout=30).json()["startup_restore"]
    assert restore["topics"] == [TOPIC] and restore["source"] == url and restore["seconds"] >= 0
    # the clean stop sealed and uploaded the active segment too (tiering.upload_lag), so
    # record N, in no full segment, survived the loss of b1's disk
    expected = _expected(N + 1)
    assert _offsets_for_times(b2.bootstrap, TS0 + 5) == (5, 0, N + 1)
    assert _consume(b2.bootstrap, 0, N + 1) == expected
    assert _kcat(b2.bootstrap) == expected
    # appends continue at the next offset
    assert _produce(b2.bootstrap, N + 1, 3) == [N + 1, N + 2, N + 3]
    assert _consume(b2.bootstrap, N - 2, N + 4) == expected[-3:] + _expected(N + 4, N + 1)
