"""Topic names at Kafka's limit (249 characters, 11 partitions, so ``<name>-10`` directories
of 252 bytes) through a real broker with the file:// object store: create, produce, tier,
compact (remote compaction rewrites the remote segments), delete (no KAFKA_STORAGE_ERROR,
nothing left on disk or in the bucket), ``strata restore`` onto an empty data directory
and ``strata export``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from spark.export import export, parse_options
from tests.brokers import ROOT, BrokerProcess, create_topic
from tests.ops.settle import partitions
from tiering.manifest_store import ManifestStore
from tiering.store import open_store

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 11
TIERED = ("tiered.topic-" * 20)[:249]
COMPACTED = ("compacted_topic-" * 20)[:249]
KEYS = 8
ROUNDS = 12
ENV = {
    "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100",
    "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "200",
    "STRATA_TIERING_REMOTE_COMPACTION_INTERVAL_MS": "300",
    "STRATA_TIERING_REMOTE_COMPACTION_GRACE_MS": "0",
    "STRATA_LOG_CLEANER_BACKOFF_MS": "200",
}


def _wait(what: str, check: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.3)


def _produce(
    bootstrap: str, topic: str, rounds: list[list[tuple[int, bytes, bytes]]]
) -> dict[int, tuple[bytes, bytes]]:
    """Rounds of records (partition, key, value), each flushed on its own (one batch per
    partition and round, so 1 KiB segments roll); returns partition 10's {offset: (key, value)}."""
    acked: dict[int, tuple[bytes, bytes]] = {}
    errors: list[object] = []

    def report(err: object, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        elif msg.partition() == 10:
            acked[msg.offset()] = (msg.key(), msg.value())

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for records in rounds:
        for part, key, value in records:
            p.produce(topic, key=key, value=value, partition=part, on_delivery=report)
        assert p.flush(30) == 0 and not errors, errors
    return acked


def _read_partition_10(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    try:
        tp = TopicPartition(topic, 10)
        _, high = c.get_watermark_offsets(tp, timeout=30)
        c.assign([TopicPartition(topic, 10, 0)])
        out: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                o, k, v = msg.offset(), msg.key(), msg.value()
                assert o is not None and k is not None and v is not None
                out.append((o, k, v))
        assert not out or out[-1][0] >= high - 1, f"read up to {out[-1][0]}, high watermark {high}"
        return out
    finally:
        c.close()


def _check_compacted(
    read: list[tuple[int, bytes, bytes]], acked: dict[int, tuple[bytes, bytes]], end: int
) -> None:
    """What is read below ``end`` is a compaction of what was acknowledged: original
    offsets and bytes, and the latest version of every key."""
    assert [o for o, _, _ in read] == sorted({o for o, _, _ in read})
    for o, k, v in read:
        assert acked[o] == (k, v)
    latest = {k: (o, v) for o, (k, v) in sorted(acked.items()) if o < end}
    seen = {k: (o, v) for o, k, v in read if o < end}
    assert seen == latest


def _bucket_names(bucket: Path) -> list[str]:
    return [
        os.path.join(d, n) for d, dirs, files in os.walk(bucket) for n in dirs + files if ".strata" not in d
    ]


async def _remote_p10(url: str, topic: str) -> tuple[int, int] | None:
    """(next offset, cleaned offset) of partition 10's remote manifest."""
    store = open_store(url)
    try:
        ms = ManifestStore(store)
        doc = await ms.load_topic_manifest(topic)
        if doc is None:
            return None
        m, _ = await ms.load(topic, uuid.UUID(doc["topic_id"]), 10)
        return None if m is None else (m.next_offset(), m.cleaned_offset)
    finally:
        await store.close()


def test_249_character_topics_through_their_whole_life(tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    url = f"file://{bucket}"
    data = tmp_path / "data"
    b = BrokerProcess(data, "--object-store", url, env=ENV).start()
    try:
        tiny = {"segment.bytes": "1024", "local.retention.bytes": "1024"}
        create_topic(b.bootstrap, TIERED, PARTITIONS, tiny)
        create_topic(
            b.bootstrap,
            COMPACTED,
            PARTITIONS,
            {**tiny, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"},
        )
        assert {len(n) for n in os.listdir(data / "logs") if n.endswith("-10")} == {252}
        _produce(b.bootstrap, TIERED, [[(p, b"k", b"v" * 400) for p in range(PARTITIONS)] for _ in range(6)])
        acked = _produce(
            b.bootstrap,
            COMPACTED,
            [
                [(10, b"key-%d" % k, b"value-%d-%d-" % (k, r) + b"x" * 40) for k in range(KEYS)]
                for r in range(ROUNDS)
            ],
        )

        # Tiered: every partition has sealed segments in the bucket.
        _wait(
            "tiered upload",
            lambda: all(
                p["remote_segments"] > 0 and p["upload_lag_segments"] == 0
                for p in partitions(b.http_url, TIERED)
            ),
        )
        # Compacted: the remote compaction rewrote partition 10's remote segments.
        remote = _wait(
            "remote compaction", lambda: (r := asyncio.run(_remote_p10(url, COMPACTED))) and r[1] > 0 and r
        )
        _check_compacted(_read_partition_10(b.bootstrap, COMPACTED), acked, max(acked) + 1)

        # Delete: no error, no directory (nor *-delete leftover), no registry entry, no object.
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.delete_topics([TIERED])[TIERED].result(timeout=30)
        assert TIERED not in admin.list_topics(timeout=10).topics
        assert not [
            n for n in os.listdir(data / "logs") if n.startswith(TIERED[:200]) or n.endswith("-delete")
        ]
        _wait("remote deletion", lambda: not [n for n in _bucket_names(bucket) if TIERED[:200] in n])
        assert b.stop() == 0
    finally:
        b.kill()
    assert "File name too long" not in b.output() and "KAFKA_STORAGE_ERROR" not in b.output()

    # Restore onto an empty data directory: the compacted topic comes back, the deleted does not.
    restored = tmp_path / "restored"
    r = subprocess.run(
        [sys.executable, "-m", "api.cli", "restore", "--data-dir", str(restored), "--object-store", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert COMPACTED in r.stdout and TIERED not in r.stdout
    b2 = BrokerProcess(restored, "--object-store", url, env=ENV).start()
    try:
        assert set(AdminClient({"bootstrap.servers": b2.bootstrap}).list_topics(timeout=10).topics) >= {
            COMPACTED
        }
        next_offset, _ = asyncio.run(_remote_p10(url, COMPACTED)) or remote
        read = _read_partition_10(b2.bootstrap, COMPACTED)
        assert read and read[-1][0] < next_offset
        _check_compacted(read, acked, next_offset)
        assert b2.stop() == 0
    finally:
        b2.kill()

    # strata export names its files after the topic: they fit, and hold the same rows.
    result = export(parse_options(url, COMPACTED), tmp_path / "export")
    assert result.rows == len(read) and [f.partition for f in result.files] == [10]
    [name] = os.listdir(tmp_path / "export")
    assert len(name) <= 251 and name.endswith(".parquet")
