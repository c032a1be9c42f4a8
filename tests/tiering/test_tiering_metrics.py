"""Tiering metrics, cache counters included, are on the broker's registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from hot.errors import ObjectNotFoundError
from hot.manager import LogManager
from tiering.metrics import TieringMetrics
from tiering.service import TieringService
from tiering.store import open_store


async def test_cache_and_upload_metrics_exported(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    manager = LogManager(tmp_path / "data").open()
    store = open_store(f"file://{tmp_path / 'bucket'}")
    try:
        service = TieringService(manager, store, None, TieringMetrics(registry))
        text = generate_latest(registry).decode()
        for name in (
            "strata_tiering_cache_hits_total",
            "strata_tiering_cache_gets_total",
            "strata_tiering_cache_hit_ratio",
            "strata_tiering_cache_size_bytes",
            "strata_tiering_store_available",
        ):
            assert name in text, name
        assert service.cache.stats().hits == 0

        # The memory budgets of uploads and remote reads, and what is held against them.
        def value(name: str) -> float:
            m = re.search(rf"^{name} (\S+)$", text, re.M)
            assert m is not None, name
            return float(m.group(1))

        assert value("strata_tiering_upload_memory_limit_bytes") == service.config.upload_memory_bytes
        assert value("strata_tiering_cache_memory_limit_bytes") == service.cache.memory_bytes > 0
        assert value("strata_tiering_upload_memory_bytes") == value("strata_tiering_cache_memory_bytes") == 0
    finally:
        await store.close()
        manager.close()


async def test_s3_direct_get_metrics_exported(tmp_path: Path, s3_bucket: str) -> None:
    registry = CollectorRegistry()
    manager = LogManager(tmp_path / "data").open()
    store = open_store(f"s3://{s3_bucket}/m")
    try:
        TieringService(manager, store, None, TieringMetrics(registry))
        assert "strata_tiering_s3_direct_get_enabled 0.0" in generate_latest(registry).decode()
        await store.connect()
        await store.put("k", b"v")
        assert await store.get("k") == b"v"
        with pytest.raises(ObjectNotFoundError):
            await store.get("missing")
        text = generate_latest(registry).decode()
        assert "strata_tiering_s3_direct_get_enabled 1.0" in text
        assert "strata_tiering_s3_direct_gets_total 1.0" in text
        assert "strata_tiering_s3_direct_passed_on_total 1.0" in text
    finally:
        await store.close()
        manager.close()
