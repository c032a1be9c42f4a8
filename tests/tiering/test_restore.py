"""Restore: topics come back from the bucket with their ids, offsets and producer state."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli import main
from hot.config import LogConfig
from hot.errors import OffsetMovedToTieredStorageError
from hot.log import Log
from hot.manager import LogManager
from tests.tiering.tierlib import make_batch, make_log, set_log_start, upload_all
from tiering.manifest import RemoteSegment
from tiering.manifest_store import ManifestStore
from tiering.restore import (
    RestoreError,
    RestoreEvent,
    plan_restore,
    restore_data_dir,
    restore_missing_topics,
    restore_topics,
)
from tiering.service import PENDING_DELETES_FILE, DeletedTopic, PendingDeletes
from tiering.store import ObjectStore, open_store

TOPIC = "orders"
TID = uuid.UUID("00112233445566778899aabbccddeeff")
PID = 4242
CONFIGS = {"retention.ms": "86400000", "segment.bytes": "4096"}


@dataclass
class Bucket:
    url: str
    store: ObjectStore
    log: Log  # partition 0 as it was produced
    segs: list[RemoteSegment]
    lso: int

    @property
    def next_offset(self) -> int:
        return self.segs[-1].last_offset + 1


@pytest.fixture
async def bucket(tmp_path: Path) -> AsyncIterator[Bucket]:
    """Topic ``orders``: partition 0 produced by an idempotent producer and uploaded (log
    start moved to the second segment), partition 1 never uploaded anything."""
    url = f"file://{tmp_path}/bucket"
    store = open_store(url)
    manifests = ManifestStore(store)
    log = make_log(tmp_path / "old", producer_id=PID, topic=TOPIC)
    segs = await upload_all(store, manifests, log, TOPIC, TID)
    lso = segs[1].base_offset
    await set_log_start(manifests, TOPIC, TID, 0, lso)
    await manifests.put_topic_manifest(
        {"name": TOPIC, "topic_id": str(TID), "partitions": 2, "configs": CONFIGS}
    )
    yield Bucket(url, store, log, segs, lso)
    log.close()
    await store.close()


def _check_restored(data_dir: Path, b: Bucket, *, producer_state: bool) -> None:
    with LogManager(data_dir, LogConfig()) as manager:
        [info] = manager.topics()
        assert (info.name, info.topic_id, info.partitions, info.configs) == (TOPIC, TID, 2, CONFIGS)
        lg = manager.get_log(TOPIC, 0)
        assert lg.log_start_offset == b.lso
        assert lg.local_log_start_offset == lg.log_end_offset == lg.high_watermark == b.next_offset
        with pytest.raises(OffsetMovedToTieredStorageError):
            lg.read(b.lso, 100)
        assert manager.get_log(TOPIC, 1).log_end_offset == 0
        entries = lg.producer_entries()
        if not producer_state:
            assert entries == {}
            return
        assert PID in entries
        # the last uploaded batch again: recognised as a duplicate, nothing written
        last = b.segs[-1]
        seg = next(s for s in b.log.segments() if s.base_offset == last.base_offset)
        tail = seg.batches()[-1]
        retry = make_batch(
            tail.base_offset, tail.next_offset - tail.base_offset, producer=(PID, 0, tail.base_offset)
        )
        dup = lg.append(retry)
        assert dup.duplicate and dup.first_offset == tail.base_offset
        # the next batch of the sequence continues at the next offset
        info2 = lg.append(make_batch(b.next_offset, 3, producer=(PID, 0, b.next_offset)))
        assert info2.first_offset == b.next_offset and not info2.duplicate


async def test_plan_reads_manifests(bucket: Bucket) -> None:
    [plan] = await plan_restore(ManifestStore(bucket.store))
    assert (plan.name, plan.topic_id, plan.partitions, plan.configs) == (TOPIC, TID, 2, CONFIGS)
    p0, p1 = plan.parts
    assert (p0.log_start_offset, p0.next_offset) == (bucket.lso, bucket.next_offset)
    assert p0.snapshot is not None and p0.snapshot.key == bucket.segs[-1].keys.producer_snapshot
    assert (p1.log_start_offset, p1.next_offset, p1.snapshot) == (0, 0, None)


async def test_restore_data_dir_keeps_offsets_and_producer_state(bucket: Bucket, tmp_path: Path) -> None:
    events: list[RestoreEvent] = []
    restored = await restore_data_dir(tmp_path / "new", bucket.store, progress=events.append)
    assert [(t.name, t.next_offsets, t.snapshots_installed) for t in restored] == [
        (TOPIC, {0: bucket.next_offset, 1: 0}, 1)
    ]
    assert events[-1].done == events[-1].total == 2
    _check_restored(tmp_path / "new", bucket, producer_state=True)
    # a second restore leaves the topic alone
    again = await restore_data_dir(tmp_path / "new", bucket.store)
    assert again[0].skipped == "already present"


async def test_restore_missing_topics_before_open(bucket: Bucket, tmp_path: Path) -> None:
    manager = LogManager(tmp_path / "new", LogConfig())
    assert await restore_missing_topics(manager, bucket.store) == [TOPIC]
    _check_restored(tmp_path / "new", bucket, producer_state=True)
    # not again: the registry is no longer empty
    assert await restore_missing_topics(LogManager(tmp_path / "new", LogConfig()), bucket.store) == []


async def test_restore_missing_topics_into_an_open_manager(bucket: Bucket, tmp_path: Path) -> None:
    with LogManager(tmp_path / "new", LogConfig()) as manager:
        assert await restore_missing_topics(manager, bucket.store) == [TOPIC]
        assert manager.get_log(TOPIC, 0).log_end_offset == bucket.next_offset
    snapshot_hook = "producer_snapshots" in LogManager.create_topic.__code__.co_varnames
    _check_restored(tmp_path / "new", bucket, producer_state=snapshot_hook)


async def test_restore_only_into_an_empty_registry(bucket: Bucket, tmp_path: Path) -> None:
    with LogManager(tmp_path / "new", LogConfig()) as manager:
        manager.create_topic("other", 1)
        assert await restore_missing_topics(manager, bucket.store) == []
        assert [t.name for t in manager.topics()] == ["other"]
    empty = open_store(f"file://{tmp_path}/empty")
    assert await restore_missing_topics(LogManager(tmp_path / "x", LogConfig()), empty) == []
    await empty.close()


async def test_same_name_other_topic_id_is_refused(bucket: Bucket, tmp_path: Path) -> None:
    with LogManager(tmp_path / "new", LogConfig()) as manager:
        manager.create_topic(TOPIC, 1)
        with pytest.raises(RestoreError, match="topic id"):
            await restore_topics(manager, bucket.store)
    with pytest.raises(RestoreError, match="no topic manifest"):
        await restore_data_dir(tmp_path / "y", bucket.store, topics=["nope"])


def test_cli_restore(bucket: Bucket, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["restore", "--data-dir", str(tmp_path / "cli"), "--object-store", bucket.url]
    r = runner.invoke(main, [*args, "--topic", TOPIC, "--output", "json"])
    assert r.exit_code == 0, r.output
    [doc] = json.loads(r.stdout)
    assert doc["topic"] == TOPIC and doc["topic_id"] == str(TID) and doc["producer_snapshots"] == 1
    assert doc["next_offsets"] == {"0": bucket.next_offset, "1": 0}
    _check_restored(tmp_path / "cli", bucket, producer_state=True)
    r = runner.invoke(main, args)
    assert r.exit_code == 0 and "already present" in r.stdout
    r = runner.invoke(main, [*args, "--topic", "missing"])
    assert r.exit_code == 1 and "no topic manifest" in r.stderr


async def test_deleted_topics_are_not_resurrected(bucket: Bucket, tmp_path: Path) -> None:
    # an existing registry, even empty, means the topics were deleted on purpose
    with LogManager(tmp_path / "d", LogConfig()):
        pass
    assert await restore_missing_topics(LogManager(tmp_path / "d", LogConfig()), bucket.store) == []
    # an open, empty manager whose remote deletion of the topic is still pending
    with LogManager(tmp_path / "e", LogConfig()) as manager:
        PendingDeletes(manager.meta_dir / PENDING_DELETES_FILE).add(DeletedTopic(TOPIC, TID, 2))
        assert await restore_missing_topics(manager, bucket.store) == []
        assert manager.topics() == []
