"""The uploader on a real LogManager and real stores (file:// and S3 via moto): order and
content of uploads, the manifest state machine, outages, the disk high-water mark, crashes
at every step (child processes killed mid-upload), concurrent uploaders, corrupt segments."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from hot.errors import DiskHighWaterError, ObjectStoreError, OffsetMovedToTieredStorageError
from hot.manager import LogManager
from tests.brokers import S3Endpoint
from tests.tiering.uplib import (
    assert_contiguous_copied,
    load_manifest,
    make_store,
    new_manager,
    new_service,
    object_keys,
    produce,
    referenced,
    root_of,
    run_child,
    sample,
    segment_objects,
    sha256_file,
    store_url,
)
from tiering.config import TieringConfig
from tiering.keys import topic_manifest_key
from tiering.manifest import PartitionManifest, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.service import TieringService
from tiering.uploader import FAULT_POINTS, ByteBudget, PartitionState, PartitionStoppedError


@pytest.fixture(params=["file", "s3"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url(request.param, tmp_path, request)


def local_ranges(manager: LogManager, topic: str) -> tuple[list[int], list[int]]:
    segs = manager.get_log(topic, 0).segments()[:-1]
    return [s.base_offset for s in segs], [s.next_offset for s in segs]


async def test_segments_uploaded_in_order_byte_identical(tmp_path: Path, url: str) -> None:
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url, upload_segments_in_flight=2)
    writes: list[int] = []
    update = svc.uploader.manifests.update

    async def counting_update(*args: Any, **kwargs: Any) -> PartitionManifest:
        writes.append(1)
        return await update(*args, **kwargs)

    svc.uploader.manifests.update = counting_update  # type: ignore[method-assign]
    try:
        m.create_topic("orders", 1, {"retention.ms": "-1"})
        log = m.get_log("orders", 0)
        produce(log, 5 * 65536)
        log.roll()  # the last segment is sealed by a roll, found by the scan (KAFKA-15272)
        sealed = log.segments()[:-1]
        assert len(sealed) >= 5
        result = await svc.run_once(retention=False, sweep=False)
        assert result.uploaded == len(sealed)
        # One manifest write per batch of two (each batch's COPY_STARTED carries the previous
        # batch's COPIED), and the last batch's COPIED.
        assert len(writes) == (len(sealed) + 1) // 2 + 1
        man = await load_manifest(url, m, "orders")
        assert_contiguous_copied(man, *local_ranges(m, "orders"))
        assert svc.uploaded("orders", 0) == sealed[-1].next_offset == man.next_offset()
        store = make_store(url)
        try:
            for seg, remote in zip(sealed, man.segments, strict=True):
                assert remote.size == seg.size and remote.log_sha256 == sha256_file(seg.log_path)
                with open(seg.log_path, "rb") as f:
                    assert remote.log_crc32c == crc32c(f.read())
                assert remote.max_timestamp == seg.max_timestamp
                assert remote.record_count == seg.next_offset - seg.base_offset
                with open(seg.log_path, "rb") as f:
                    assert await store.get(remote.keys.log) == f.read()
                # The indexes and the snapshot, in one object (``.indexes``).
                with open(seg.index_path, "rb") as f:
                    assert await remote.index_part().get(store) == f.read()
                with open(seg.timeindex_path, "rb") as f:
                    assert await remote.timeindex_part().get(store) == f.read()
                snap = log.producer_snapshot_after(seg)
                assert remote.has_producer_snapshot == (snap is not None)
                part = remote.snapshot_part()
                if snap is not None:
                    assert part is not None
                    with open(snap, "rb") as f:
                        assert await part.get(store) == f.read()
                assert remote.indexes_size == len(await store.get(remote.keys.indexes))
                assert not await store.exists(remote.keys.index)
            topic_doc = await ManifestStore(store).load_topic_manifest("orders")
            assert topic_doc == {
                "name": "orders",
                "topic_id": str(m.topic("orders").topic_id),
                "partitions": 1,
                "configs": {"retention.ms": "-1"},
            }
            assert await store.exists(topic_manifest_key("orders"))
        finally:
            await store.close()
        # Idempotent: another pass changes nothing.
        again = await svc.run_once(retention=False, sweep=False)
        assert again.uploaded == 0
        assert (await load_manifest(url, m, "orders")).revision == man.revision
        # Local data stays: local retention defaults to total retention (7 days).
        assert log.local_log_start_offset == 0
    finally:
        await svc.close()
        m.close()


async def test_config_change_rewrites_topic_manifest_and_disable_stops_uploads(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        m.create_topic("t", 1)
        log = m.get_log("t", 0)
        produce(log, 2 * 65536)
        await svc.run_once(retention=False, sweep=False)
        uploaded = svc.uploaded("t", 0)
        assert uploaded > 0
        m.alter_topic_configs("t", {"remote.storage.enable": "false"})
        produce(log, 2 * 65536)
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 0
        assert svc.uploaded("t", 0) == uploaded
        m.alter_topic_configs("t", {"remote.storage.enable": "true", "retention.ms": "12345"})
        assert (await svc.run_once(retention=False, sweep=False)).uploaded > 0
        store = make_store(url)
        try:
            doc = await ManifestStore(store).load_topic_manifest("t")
        finally:
            await store.close()
        assert doc is not None and doc["configs"]["retention.ms"] == "12345"
    finally:
        await svc.close()
        m.close()


async def test_copy_lag_delays_uploads(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    now = [0]
    svc = TieringService(m, make_store(url), TieringConfig(cache_max_bytes=0), clock_ms=lambda: now[0])
    try:
        m.create_topic("t", 1, {"remote.copy.lag.ms": "3600000"})
        log = m.get_log("t", 0)
        produce(log, 2 * 65536)
        sealed = log.segments()[0]
        now[0] = sealed.file.mtime_ms() + 1000
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 0
        now[0] = sealed.file.mtime_ms() + 3_600_000 + 1000
        assert (await svc.run_once(retention=False, sweep=False)).uploaded >= 1
    finally:
        await svc.close()
        m.close()


async def test_s3_outage_keeps_local_data_and_catches_up(
    tmp_path: Path, s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    url = f"s3://{s3_bucket}/outage"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        m.create_topic("t", 1, {"local.retention.bytes": "0"})
        log = m.get_log("t", 0)
        produce(log, 2 * 65536)
        await svc.run_once(retention=False, sweep=False)
        before = svc.uploaded("t", 0)
        assert before > 0 and log.local_log_start_offset == before  # uploaded ones went
        s3_endpoint.stop()
        try:
            produce(log, 3 * 65536)  # appends continue during the outage
            bases = [s.base_offset for s in log.segments()]
            await asyncio.sleep(0.05)
            for _ in range(2):
                with pytest.raises(ObjectStoreError):
                    await svc.run_once(retention=True, sweep=False)
            # The lag's age grows with every failed pass (what an alert on a stuck upload reads).
            age = sample(svc, "strata_tiering_upload_lag_seconds", topic="t", partition="0")
            assert age >= 0.05
            # Nothing that is not uploaded was deleted.
            assert [s.base_offset for s in log.segments()] == bases
            assert log.local_log_start_offset == before
        finally:
            s3_endpoint.start()
        result = await svc.run_once(retention=True, sweep=False)
        assert result.uploaded == len(bases) - 1
        man = await load_manifest(url, m, "t")
        assert [s.state for s in man.segments] == [SegmentState.COPIED] * len(man.segments)
        assert man.next_offset() == log.active_segment.base_offset
        assert log.segments() == [log.active_segment]
        with pytest.raises(OffsetMovedToTieredStorageError):
            log.read(0, 100)
    finally:
        await svc.close()
        m.close()


async def test_disk_high_water_refuses_produce_and_deletes_nothing(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    m.create_topic("t", 1, {"local.retention.bytes": "0"})
    log = m.get_log("t", 0)
    produce(log, 2 * 65536)
    svc = new_service(m, url, disk_high_water_bytes=log.size + 3 * 65536, disk_high_water_percent=0)
    try:
        svc.attach()  # uploads are "pending": the service does not run yet
        with pytest.raises(DiskHighWaterError, match="disk above high-water mark; uploads pending"):
            for _ in range(1000):
                produce(log, 16000)
        bases = [s.base_offset for s in log.segments()]
        assert bases[0] == 0
        assert m.apply_retention(now_ms=10**15) == {}  # the manager leaves tiered topics alone
        assert [s.base_offset for s in log.segments()] == bases
        # Uploads + local retention free the disk: produce works again.
        result = await svc.run_once(retention=False, sweep=False)
        assert result.uploaded == len(bases) - 1 and result.local_deleted == len(bases) - 1
        produce(log, 16000)
    finally:
        await svc.close()
        m.close()


@pytest.mark.parametrize("fault", FAULT_POINTS[:3])
def test_crash_during_upload_leaves_no_duplicates_or_holes(tmp_path: Path, fault: str) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    _crash_and_resume(tmp_path, url, fault, env=None)


def test_crash_during_upload_s3(tmp_path: Path, s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    _crash_and_resume(tmp_path, f"s3://{s3_bucket}/crash", "after_log_upload", env=s3_endpoint.env)


def _crash_and_resume(tmp_path: Path, url: str, fault: str, env: dict[str, str] | None) -> None:
    data = tmp_path / "data"
    m = new_manager(data)
    m.create_topic("t", 1, {"segment.bytes": "65536"})
    produce(m.get_log("t", 0), 4 * 65536)
    bases, ends = local_ranges(m, "t")
    root = root_of(m, "t")
    m.close()

    run_child(data, url, fault=fault, env=env)
    m = LogManager(data).open()
    try:
        man = asyncio.run(load_manifest(url, m, "t"))
        # One batch (``upload_segments_in_flight``): one COPY_STARTED write, one COPIED write.
        assert 1 <= len(man.segments) <= TieringConfig().upload_segments_in_flight
        assert man.segments[0].base_offset == 0
        expected = SegmentState.COPIED if fault == "after_copied" else SegmentState.COPY_STARTED
        assert all(s.state is expected for s in man.segments)
        assert [s.base_offset for s in m.get_log("t", 0).segments()[:-1]] == bases  # nothing local deleted
    finally:
        m.close()

    out = run_child(data, url, env=env)
    assert "done" in out
    m = LogManager(data).open()
    try:
        man = asyncio.run(load_manifest(url, m, "t"))
        assert_contiguous_copied(man, bases, ends)  # exactly once each, no holes, no leftovers
        keys = segment_objects(asyncio.run(object_keys(url, root)), root)
        assert set(keys) == referenced(man)  # the interrupted copy's objects were removed
    finally:
        m.close()


async def test_concurrent_uploaders_never_record_overlaps(tmp_path: Path, url: str) -> None:
    m = new_manager(tmp_path / "data")
    a = new_service(m, url)
    b = new_service(m, url, orphan_grace_ms=0)
    try:
        m.create_topic("t", 1)
        log = m.get_log("t", 0)
        for _ in range(3):
            produce(log, 2 * 65536)
            await asyncio.gather(
                a.run_once(retention=False, sweep=False), b.run_once(retention=False, sweep=False)
            )
        for _ in range(3):  # let both finish whatever the races left to do
            await a.run_once(retention=False, sweep=False)
            await b.run_once(retention=False, sweep=False)
        man = await load_manifest(url, m, "t")
        assert_contiguous_copied(man, *local_ranges(m, "t"))
        root = root_of(m, "t")
        await b.sweeper.sweep(10**15)  # losers' leftovers, if any, are orphans
        assert set(segment_objects(await object_keys(url, root), root)) == referenced(man)
    finally:
        await a.close()
        await b.close()
        m.close()


async def test_uploader_behind_another_writer_catches_up(tmp_path: Path, url: str) -> None:
    """A cached manifest older than the bucket's (a deposed leader finished its pass after
    the new leader loaded it): the first segment it picks is already COPIED. It must take
    the newer manifest and upload what follows it, not pick that segment again forever."""
    m = new_manager(tmp_path / "data")
    new_leader = new_service(m, url)
    old_leader = new_service(m, url)
    try:
        m.create_topic("t", 1)
        log = m.get_log("t", 0)
        produce(log, 2 * 65536)
        await new_leader.run_once(retention=False, sweep=False)  # caches the manifest
        produce(log, 3 * 65536)
        assert (await old_leader.run_once(retention=False, sweep=False)).uploaded >= 2
        produce(log, 2 * 65536)
        result = await new_leader.run_once(retention=False, sweep=False)  # one pass suffices
        assert result.uploaded >= 1
        man = await load_manifest(url, m, "t")
        assert_contiguous_copied(man, *local_ranges(m, "t"))
        assert new_leader.uploaded("t", 0) == man.next_offset() == log.segments()[-1].base_offset
    finally:
        await new_leader.close()
        await old_leader.close()
        m.close()


async def test_uploads_stop_when_leadership_moves_mid_pass(tmp_path: Path) -> None:
    """Cluster mode: a pass uploads only while this broker leads in the epoch it started
    in; not led here, it uploads nothing (the new leader does)."""
    m = new_manager(tmp_path / "data")
    # One segment per batch, so the pass has a COPIED write to stop after.
    svc = new_service(m, f"file://{tmp_path / 'bucket'}", upload_segments_in_flight=1)
    led = {"epoch": -1}
    svc.uploader.leader_epoch = lambda topic, partition: led["epoch"]
    try:
        m.create_topic("t", 1)
        produce(m.get_log("t", 0), 4 * 65536)
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 0
        recovered_in: list[int | None] = []
        recover = svc.uploader.recover

        async def counting_recover(st: PartitionState) -> None:
            recovered_in.append(st.term)
            await recover(st)

        svc.uploader.recover = counting_recover  # type: ignore[method-assign]
        led["epoch"] = 3
        # The epoch changes (to 4) as soon as the first segment is COPIED: in the write that
        # starts the second batch, which the pass still finishes, and starts no third.
        svc.uploader.leader_epoch = lambda topic, partition: 3 if svc.uploaded("t", 0) == 0 else 4
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 2
        st = svc.uploader.cached_state("t", 0)
        assert st is not None and st.term == 3
        assert (await svc.run_once(retention=False, sweep=False)).uploaded >= 2
        assert recovered_in == [3, 4]  # each term starts with a recovery (a fresh manifest)
        man = await load_manifest(f"file://{tmp_path / 'bucket'}", m, "t")
        assert man.leader_epoch == 4
        assert_contiguous_copied(man, *local_ranges(m, "t"))
    finally:
        await svc.close()
        m.close()


async def test_deposed_leader_is_fenced_by_its_successor(tmp_path: Path) -> None:
    """A write by a broker that no longer leads (an upload it had in flight) claims the
    epoch it led in, so a successor that wrote in a later epoch refuses it."""
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    old, new = new_service(m, url), new_service(m, url)
    led = {"old": 1, "new": -1}
    old.uploader.leader_epoch = lambda topic, partition: led["old"]
    new.uploader.leader_epoch = lambda topic, partition: led["new"]
    try:
        m.create_topic("t", 1)
        log = m.get_log("t", 0)
        produce(log, 2 * 65536)
        assert (await old.run_once(retention=False, sweep=False)).uploaded >= 1
        led.update(old=-1, new=2)
        produce(log, 2 * 65536)
        assert (await new.run_once(retention=False, sweep=False)).uploaded >= 1
        st = old.uploader.cached_state("t", 0)
        assert st is not None
        with pytest.raises(PartitionStoppedError, match="epoch"):
            await old.uploader._update(st, lambda cur: cur.advance_log_start(1))
        man = await load_manifest(url, m, "t")
        assert man.leader_epoch == 2 and man.log_start_offset == 0
    finally:
        await old.close()
        await new.close()
        m.close()


async def test_corrupt_segment_is_never_uploaded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        m.create_topic("t", 1, {"local.retention.bytes": "0"})
        log = m.get_log("t", 0)
        produce(log, 4 * 65536)
        bases = [s.base_offset for s in log.segments()]
        bad = log.segments()[2]
        pos = bad.batches()[1].position + 100  # inside the records of the second batch
        with open(bad.log_path, "r+b") as f:  # flip a byte of a sealed segment
            f.seek(pos)
            byte = f.read(1)
            f.seek(pos)
            f.write(bytes([byte[0] ^ 0x5A]))
        with caplog.at_level(logging.ERROR, logger="tiering.uploader"):
            result = await svc.run_once(retention=False, sweep=False)
        assert result.uploaded == 2
        man = await load_manifest(url, m, "t")
        assert [s.base_offset for s in man.segments] == bases[:2]
        assert svc.uploaded("t", 0) == bad.base_offset
        assert any("corrupt" in r.getMessage() and bad.log_path in r.getMessage() for r in caplog.records)
        assert sample(svc, "strata_tiering_upload_errors_total", topic="t", kind="corrupt") == 1
        assert sample(svc, "strata_tiering_partition_stopped", topic="t", partition="0") == 1
        # The corrupt segment stays local; later ones are not uploaded past it (no hole).
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 0
        assert os.path.exists(bad.log_path)
        keys = await object_keys(url, root_of(m, "t"))
        assert not [k for k in keys if f"/{bad.base_offset:020d}-" in k]
    finally:
        await svc.close()
        m.close()


async def test_gap_between_remote_and_local_stops_the_partition(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        tid = None
        m.create_topic("t", 1)
        tid = m.topic("t").topic_id
        produce(m.get_log("t", 0), 2 * 65536)
        await svc.run_once(retention=False, sweep=False)
        remote_next = svc.uploaded("t", 0)
        m.delete_topic("t")
        await svc.run_once(retention=False, sweep=False)  # its remote data is deleted too
        # A partition whose local data starts beyond the remote end, same topic id.
        m.create_topic("t", 1, topic_id=tid, start_offsets={0: (0, remote_next + 1000)})
        store = make_store(url)
        try:
            await ManifestStore(store).update("t", tid, 0, lambda man: man)  # empty manifest
        finally:
            await store.close()
        log = m.get_log("t", 0)
        produce(log, 2 * 65536)
        # The new log starts at remote_next + 1000 with log start 0: offsets [0, +1000)
        # exist nowhere, so uploading would leave a hole.
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 0
        assert sample(svc, "strata_tiering_upload_errors_total", topic="t", kind="gap") == 1
    finally:
        await svc.close()
        m.close()


async def test_bandwidth_cap_still_uploads_everything(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url, upload_bytes_per_second=50 * 1024 * 1024)
    try:
        m.create_topic("t", 1)
        produce(m.get_log("t", 0), 3 * 65536)
        await svc.run_once(retention=False, sweep=False)
        assert_contiguous_copied(await load_manifest(url, m, "t"), *local_ranges(m, "t"))
    finally:
        await svc.close()
        m.close()


async def test_upload_memory_budget_bounds_bodies_in_flight() -> None:
    """``ByteBudget`` (``upload_memory_bytes``): holders wait until their bytes fit; a body
    larger than the budget counts as all of it (it goes up alone); the gauge follows."""
    seen: list[int] = []
    budget = ByteBudget(100, seen.append)
    order: list[str] = []

    async def hold(name: str, n: int, release: asyncio.Event) -> None:
        async with budget.hold(n):
            order.append(name)
            await release.wait()

    a, b, c = asyncio.Event(), asyncio.Event(), asyncio.Event()
    ta = asyncio.create_task(hold("a", 60, a))
    tb = asyncio.create_task(hold("b", 60, b))  # does not fit beside a
    tc = asyncio.create_task(hold("c", 500, c))  # more than the budget: alone
    await asyncio.sleep(0.05)
    assert order == ["a"] and budget.used == 60
    a.set()
    await asyncio.sleep(0.05)
    assert order == ["a", "b"] and budget.used == 60
    b.set()
    await asyncio.sleep(0.05)
    assert order == ["a", "b", "c"] and budget.used == 100
    c.set()
    await asyncio.gather(ta, tb, tc)
    assert budget.used == 0 and max(seen) == 100 and seen[-1] == 0


async def test_failed_batch_after_a_merged_write_counts_each_segment_once(tmp_path: Path) -> None:
    """A batch's COPIED rides on the next batch's COPY_STARTED write; when that next batch's
    upload then fails, the first stays COPIED (counted once), the failed one is cleaned up
    on the next visit, and the partition catches up."""
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url, upload_segments_in_flight=1)
    put = svc.uploader.store.put_file_checked
    try:
        m.create_topic("t", 1)
        log = m.get_log("t", 0)
        produce(log, 4 * 65536)
        sealed = log.segments()[:-1]
        assert len(sealed) >= 3
        third = f"/{sealed[2].base_offset:020d}-"  # the third segment's .log fails

        async def failing_third(key: str, *args: Any, **kwargs: Any) -> str:
            if third in key:
                raise ObjectStoreError(f"injected failure of {key}")
            return await put(key, *args, **kwargs)

        svc.uploader.store.put_file_checked = failing_third  # type: ignore[method-assign]
        tid = m.topic("t").topic_id
        with pytest.raises(ObjectStoreError, match="injected"):
            await svc.uploader.upload_partition(log, tid, min_age_ms=0)
        man = await load_manifest(url, m, "t")
        assert [(s.base_offset, s.state) for s in man.segments] == [
            (sealed[0].base_offset, SegmentState.COPIED),
            (sealed[1].base_offset, SegmentState.COPIED),
            (sealed[2].base_offset, SegmentState.COPY_STARTED),
        ]
        assert sample(svc, "strata_tiering_uploaded_segments_total", topic="t") == 2
        svc.uploader.store.put_file_checked = put  # type: ignore[method-assign]
        assert await svc.uploader.upload_partition(log, tid, min_age_ms=0) == len(sealed) - 2
        man = await load_manifest(url, m, "t")
        assert_contiguous_copied(man, *local_ranges(m, "t"))
        assert sample(svc, "strata_tiering_uploaded_segments_total", topic="t") == len(sealed)
        root = root_of(m, "t")
        assert set(segment_objects(await object_keys(url, root), root)) == referenced(man)
    finally:
        await svc.close()
        m.close()
