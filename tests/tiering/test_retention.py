"""Local and total retention of tiered topics, DeleteRecords, disabled tiering, deletion of a
deleted topic's remote data, the orphan sweeper, and crash recovery of deletions."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from hot.errors import OffsetMovedToTieredStorageError, OffsetOutOfRangeError
from hot.manager import LogManager
from tests.tiering.uplib import (
    ROOT,
    load_manifest,
    make_store,
    new_manager,
    new_service,
    object_keys,
    produce,
    referenced,
    root_of,
    segment_objects,
    store_url,
)
from tiering.keys import manifest_key, segment_keys, topic_manifest_key
from tiering.manifest import SegmentState
from tiering.manifest_store import ManifestStore
from tiering.service import PENDING_DELETES_FILE, PendingDeletes


async def one_pass(m: LogManager, url: str, *, retention: bool) -> None:
    svc = new_service(m, url)
    try:
        await svc.run_once(retention=retention, sweep=False)
    finally:
        await svc.close()


@pytest.fixture(params=["file", "s3"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url(request.param, tmp_path, request)


async def test_local_retention_deletes_only_uploaded_segments(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        m.create_topic("t", 1, {"local.retention.bytes": "0", "retention.ms": "-1"})
        log = m.get_log("t", 0)
        produce(log, 3 * 65536)
        await svc.run_once(retention=False, sweep=False)
        uploaded = svc.uploaded("t", 0)
        assert log.local_log_start_offset == uploaded == log.active_segment.base_offset
        produce(log, 3 * 65536)  # new sealed segments, not uploaded yet
        pending = [s.base_offset for s in log.segments()]
        assert await svc.uploader.apply_local_retention(log, int(time.time() * 1000) + 10**9) == []
        assert [s.base_offset for s in log.segments()] == pending
        assert log.log_start_offset == 0
        with pytest.raises(OffsetMovedToTieredStorageError):
            log.read(0, 1000)
        await svc.run_once(retention=False, sweep=False)
        assert log.local_log_start_offset == svc.uploaded("t", 0) == log.active_segment.base_offset
    finally:
        await svc.close()
        m.close()


async def test_local_retention_by_time(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        m.create_topic("t", 1, {"local.retention.ms": "60000", "retention.ms": "-1"})
        log = m.get_log("t", 0)
        now = int(time.time() * 1000)
        produce(log, 3 * 65536, ts=now - 3_600_000)  # an hour old: beyond local, within total
        await svc.run_once(retention=True, sweep=False)
        assert log.segments() == [log.active_segment]
        man = await load_manifest(url, m, "t")
        assert man.next_offset() == log.local_log_start_offset and log.log_start_offset == 0
    finally:
        await svc.close()
        m.close()


async def test_total_retention_by_bytes_deletes_remote_first(tmp_path: Path, url: str) -> None:
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        m.create_topic("t", 1, {"retention.bytes": str(3 * 65536), "local.retention.bytes": "65536"})
        log = m.get_log("t", 0)
        produce(log, 8 * 65536)
        await svc.run_once(retention=False, sweep=False)
        before = await load_manifest(url, m, "t")
        local_only = sum(s.size for s in log.segments() if s.next_offset > before.next_offset())
        assert before.remote_size() + local_only > 3 * 65536
        result = await svc.run_once(retention=True, sweep=False)
        assert result.remote_deleted > 0
        after = await load_manifest(url, m, "t")
        gone = before.segments[: result.remote_deleted]
        assert [s.segment_id for s in after.segments] == [s.segment_id for s in before.segments[len(gone) :]]
        # Kafka's rule over remote + local: the rest is still >= retention.bytes, and one
        # more deletion would have gone below it.
        local_only = sum(s.size for s in log.segments() if s.next_offset > after.next_offset())
        total = after.remote_size() + local_only
        assert total >= 3 * 65536 > total - after.segments[0].size
        start = gone[-1].last_offset + 1
        assert after.log_start_offset == log.log_start_offset == start == after.segments[0].base_offset
        with pytest.raises(OffsetOutOfRangeError):
            log.read(0, 100)
        keys = set(await object_keys(url, root_of(m, "t")))
        for s in gone:
            assert not keys & set(s.keys.all())
        assert referenced(after) <= keys
    finally:
        await svc.close()
        m.close()


async def test_total_retention_by_time_and_restart(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    now = int(time.time() * 1000)
    try:
        m.create_topic("t", 1, {"retention.ms": "600000", "local.retention.ms": "60000"})
        log = m.get_log("t", 0)
        produce(log, 3 * 65536, ts=now - 3_600_000)  # expired
        old_end = log.log_end_offset
        log.roll()
        produce(log, 2 * 65536, ts=now)  # recent
        await svc.run_once(retention=False, sweep=False)
        await svc.run_once(retention=True, sweep=False)
        man = await load_manifest(url, m, "t")
        assert man.log_start_offset == log.log_start_offset == old_end
        assert man.segments[0].base_offset == old_end
        assert log.segments()[0].base_offset >= old_end
    finally:
        await svc.close()
        m.close()
    m = new_manager(tmp_path / "data")
    try:
        assert m.get_log("t", 0).log_start_offset == old_end  # persisted
    finally:
        m.close()


async def test_delete_records_below_remote_data(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        m.create_topic("t", 1, {"local.retention.bytes": "0", "retention.ms": "-1"})
        log = m.get_log("t", 0)
        produce(log, 4 * 65536)
        await svc.run_once(retention=False, sweep=False)
        man = await load_manifest(url, m, "t")
        cut = man.segments[1].base_offset + 3  # inside the second remote segment
        log.delete_records(cut)
        await svc.run_once(retention=True, sweep=False)
        after = await load_manifest(url, m, "t")
        assert after.log_start_offset == cut
        assert [s.segment_id for s in after.segments] == [s.segment_id for s in man.segments[1:]]
    finally:
        await svc.close()
        m.close()


async def test_disabled_topic_is_not_tiered_and_keeps_manager_retention(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        svc.attach()
        m.create_topic("plain", 1, {"remote.storage.enable": "false", "retention.bytes": "65536"})
        log = m.get_log("plain", 0)
        produce(log, 3 * 65536)
        await svc.run_once(retention=True, sweep=False)
        assert svc.uploaded("plain", 0) == 0
        assert not await object_keys(url, root_of(m, "plain"))
        assert not await object_keys(url, topic_manifest_key("plain"))
        first = log.segments()[0]
        assert m.apply_retention()[("plain", 0)][0] == first.base_offset  # the manager's pass applies
        assert log.size >= 65536 > log.size - log.segments()[0].size
        await one_pass(m, url, retention=True)  # a moved log start creates no manifest
        assert not await object_keys(url, root_of(m, "plain"))
    finally:
        await svc.close()
        m.close()


async def test_deleted_topic_remote_data_is_deleted(tmp_path: Path, url: str) -> None:
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        svc.attach()
        m.create_topic("gone", 2)
        m.create_topic("kept", 1)
        for name, p in (("gone", 0), ("gone", 1), ("kept", 0)):
            produce(m.get_log(name, p), 2 * 65536)
        await svc.run_once(retention=False, sweep=False)
        roots = [root_of(m, "gone", p) for p in (0, 1)]
        for r in roots:
            assert await object_keys(url, r)
        kept = await object_keys(url, root_of(m, "kept"))
        m.delete_topic("gone")
        pending = PendingDeletes(m.meta_dir / PENDING_DELETES_FILE)  # durable before any remote work
        assert [t.name for t in pending.list()] == ["gone"]
        result = await svc.run_once(retention=False, sweep=False)
        assert result.topics_deleted == 1
        for r in roots:
            assert await object_keys(url, r) == []
        assert await object_keys(url, topic_manifest_key("gone")) == []
        assert await object_keys(url, root_of(m, "kept")) == kept
        assert PendingDeletes(m.meta_dir / PENDING_DELETES_FILE).list() == []
    finally:
        await svc.close()
        m.close()


def test_crash_during_remote_deletion_is_finished_on_restart(tmp_path: Path) -> None:
    """The child dies right after DELETE_STARTED was recorded; the next run finishes."""
    import os
    import subprocess
    import sys

    from tiering.uploader import FAULT_ENV, FAULT_EXIT_CODE

    url = f"file://{tmp_path / 'bucket'}"
    data = tmp_path / "data"
    m = new_manager(data)
    m.create_topic("t", 1, {"retention.bytes": "65536", "local.retention.bytes": "65536"})
    produce(m.get_log("t", 0), 4 * 65536)
    asyncio.run(one_pass(m, url, retention=False))
    root = root_of(m, "t")
    m.close()
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from hot.manager import LogManager\n"
        "from tests.tiering.uplib import new_service\n"
        "async def main():\n"
        "    m = LogManager(Path(sys.argv[1])).open()\n"
        "    svc = new_service(m, sys.argv[2])\n"
        "    await svc.run_once(retention=True, sweep=False)\n"
        "    await svc.close(); m.close()\n"
        "asyncio.run(main())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), FAULT_ENV: "after_delete_started"}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(data), url], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert proc.returncode == FAULT_EXIT_CODE, proc.stderr
    m = new_manager(data)
    try:
        man = asyncio.run(load_manifest(url, m, "t"))
        assert SegmentState.DELETE_STARTED in {s.state for s in man.segments}
        asyncio.run(one_pass(m, url, retention=True))
        man = asyncio.run(load_manifest(url, m, "t"))
        assert {s.state for s in man.segments} <= {SegmentState.COPIED}
        assert set(segment_objects(asyncio.run(object_keys(url, root)), root)) == referenced(man)
        assert m.get_log("t", 0).log_start_offset == man.log_start_offset > 0
    finally:
        m.close()


async def test_orphan_sweeper(tmp_path: Path, url: str) -> None:
    import uuid

    m = new_manager(tmp_path / "data")
    svc = new_service(m, url, orphan_grace_ms=0)
    try:
        m.create_topic("t", 1)
        produce(m.get_log("t", 0), 2 * 65536)
        await svc.run_once(retention=False, sweep=False)
        tid = m.topic("t").topic_id
        stray = segment_keys("t", tid, 0, 0, uuid.uuid4())
        store = make_store(url)
        try:
            await store.put(stray.log, b"left by a crashed upload")
            await store.put(stray.index, b"")
        finally:
            await store.close()
        man = await load_manifest(url, m, "t")
        # Within the grace period nothing goes.
        assert await svc.sweeper.sweep_partition("t", tid, 0, now_ms=0) == 0
        result = await svc.run_once(retention=False, sweep=True)
        assert result.orphans_deleted == 2
        keys = set(await object_keys(url, root_of(m, "t")))
        assert keys == referenced(man) | {manifest_key("t", tid, 0)}
        store = make_store(url)
        try:
            assert await ManifestStore(store).list_topics() == ["t"]
        finally:
            await store.close()
    finally:
        await svc.close()
        m.close()
