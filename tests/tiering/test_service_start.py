"""TieringService.start prepares the store's client, and starts even when that fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from hot.config import LogConfig
from hot.manager import LogManager
from tiering.config import TieringConfig
from tiering.metrics import TieringMetrics
from tiering.service import TieringService
from tiering.store import S3Store, open_store


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
