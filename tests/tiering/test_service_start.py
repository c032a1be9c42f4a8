"""TieringService.start prepares the store's client, and starts even when that fails."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hot.config import LogConfig
from hot.manager import LogManager
from tests.tiering.tierlib import CountingStore
from tests.tiering.uplib import load_manifest, new_manager, new_service, produce, run_child, store_url
from tiering.config import TieringConfig
from tiering.manifest import SegmentState
from tiering.metrics import TieringMetrics
from tiering.s3_store import S3Store
from tiering.service import TieringService
from tiering.store import open_store


async def test_start_creates_the_s3_client(tmp_path: Path, s3_bucket: str) -> None:
    manager = LogManager(tmp_path / "data", LogConfig()).open()
    store = open_store(f"s3://{s3_bucket}/strata")
    assert isinstance(store, S3Store)
    svc = TieringService(manager, store, TieringConfig(cache_max_bytes=0), TieringMetrics())
    try:
        await svc.start()
        task = store._client_task
        assert task is not None and task.done() and task.exception() is None
    finally:
        await svc.close()
        manager.close()


async def test_start_survives_a_failing_client_set_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = LogManager(tmp_path / "data", LogConfig()).open()
    store = open_store("s3://bucket/p", endpoint_url="http://127.0.0.1:9", region="bad region!")
    svc = TieringService(manager, store, TieringConfig(cache_max_bytes=0), TieringMetrics())
    try:
        await svc.start()
        assert "client set-up failed" in caplog.text
        assert svc._task is not None and not svc._task.done()
    finally:
        await svc.close()
        manager.close()


@pytest.mark.parametrize("kind", ["file", "s3"])
async def test_start_recovers_every_partition_and_primes_the_reader(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    url = store_url(kind, tmp_path, request)
    data = tmp_path / "data"
    m = new_manager(data)
    m.create_topic("t", 2, {"segment.bytes": "65536"})
    for p in (0, 1):
        produce(m.get_log("t", p), 3 * 65536)
    m.create_topic("hot-only", 1, {"remote.storage.enable": "false"})
    m.close()
    run_child(data, url, fault="after_log_upload")  # a COPY_STARTED leftover in the bucket
    m = LogManager(data).open()
    svc = new_service(m, url)
    # The first pass (uploads, manifest writes) waits until the checks below are done.
    first_pass = asyncio.Event()
    run_once = svc.run_once

    async def held_run_once() -> object:
        await first_pass.wait()
        return await run_once()

    svc.run_once = held_run_once  # type: ignore[method-assign]
    try:
        await svc.start()
        # Before the first pass: every tiered partition recovered, its manifest with the reader.
        for p in (0, 1):
            st = svc.uploader.cached_state("t", p)
            assert st is not None and st.recovered and st.manifest is not None
        assert svc.uploader.cached_state("hot-only", 0) is None
        leftovers = 0
        for p in (0, 1):
            st = svc.uploader.cached_state("t", p)
            assert st is not None and st.manifest is not None
            if st.manifest.revision == 0:
                continue  # the child died before it touched this partition
            man = await load_manifest(url, m, "t", p)
            leftovers += sum(1 for s in man.segments if s.state is SegmentState.COPY_STARTED)
            loads = svc.reader.manifest_loads
            got = await svc.reader.manifest("t", m.topic("t").topic_id, p)
            assert got is not None and got.revision == man.revision
            assert svc.reader.manifest_loads == loads  # no GET: the recovery handed it over
        assert leftovers == 0
        first_pass.set()
    finally:
        await svc.close()
        m.close()


class _HeldManifests(CountingStore):
    """A real store whose manifest reads wait for ``gate``: a store that hangs."""

    async def get_with_etag(self, key: str) -> tuple[bytes, str]:
        assert self.gate is not None
        await self.gate.wait()
        return await super().get_with_etag(key)


def _service_with_held_manifests(tmp_path: Path) -> tuple[LogManager, _HeldManifests, TieringService]:
    """A tiered partition with sealed segments, and a service whose manifest reads hang."""
    m = new_manager(tmp_path / "data")
    m.create_topic("t", 1, {"segment.bytes": "65536"})
    produce(m.get_log("t", 0), 2 * 65536)
    store = _HeldManifests(open_store(f"file://{tmp_path / 'bucket'}"))
    store.gate = asyncio.Event()
    return m, store, TieringService(m, store, TieringConfig(cache_max_bytes=0), TieringMetrics())


async def test_start_does_not_wait_for_a_recovery_that_hangs(tmp_path: Path) -> None:
    m, store, svc = _service_with_held_manifests(tmp_path)
    try:
        await svc.start()  # returns after the bounded wait
        recovery = svc._recovery
        assert recovery is not None and not recovery.done()
        st = svc.uploader.cached_state("t", 0)
        assert st is not None and not st.recovered
        assert svc._task is not None and not svc._task.done()  # waits for the recovery
        store.gate.set()
        await recovery
        assert st.recovered and st.manifest is not None
    finally:
        await svc.close()
        m.close()


async def test_close_stops_a_recovery_in_progress(tmp_path: Path) -> None:
    m, _, svc = _service_with_held_manifests(tmp_path)
    try:
        await svc.start()
        recovery = svc._recovery
        assert recovery is not None and not recovery.done()
    finally:
        await svc.close()
        m.close()
    assert recovery.cancelled()
