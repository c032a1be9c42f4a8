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


async def test_per_partition_gauges_are_read_at_scrape_time(tmp_path: Path) -> None:
    """The per-partition gauges (``PartitionGauges``): the series a partition has appear
    with its first visit (lag, local bytes), manifest (remote) or stop, carry the values of
    the moment of the scrape (a segment sealed after the last pass shows as lag at once),
    and leave with a deleted topic; an idle visit sets nothing."""
    from core.prom_text import exposition
    from tests.hot.hotlib import batch_at
    from tests.tiering.uplib import new_manager
    from tiering.config import TieringConfig

    now = [1_800_000_000_000]
    m = new_manager(tmp_path / "data")
    store = open_store(f"file://{tmp_path / 'bucket'}")
    cfg = TieringConfig(cache_max_bytes=0)
    svc = TieringService(m, store, cfg, TieringMetrics(), clock_ms=lambda: now[0])
    svc.attach()
    try:
        m.create_topic("t", 2, {"remote.copy.lag.ms": "0"})
        m.create_topic("gone", 1)
        for p in range(2):
            lg = m.get_log("t", p)
            lg.append(batch_at(0, 3, ts=now[0]), now_ms=now[0])
            lg.roll()
        m.get_log("gone", 0).append(batch_at(0, 1, ts=now[0]), now_ms=now[0])
        await svc.run_once(retention=True, sweep=False)

        def series() -> dict[tuple[str, str, str], float]:
            out = {}
            for line in exposition(svc.metrics.registry).decode().splitlines():
                hit = re.match(r'^(strata_tiering_\w+)\{partition="(\d+)",topic="(\w+)"\} (\S+)$', line)
                if hit:
                    out[hit.group(1), hit.group(3), hit.group(2)] = float(hit.group(4))
            return out

        per_partition = (
            "strata_tiering_upload_lag_segments",
            "strata_tiering_upload_lag_bytes",
            "strata_tiering_upload_lag_seconds",
            "strata_tiering_local_bytes",
            "strata_tiering_remote_bytes",
            "strata_tiering_remote_segments",
        )
        s = series()
        hosted = (("t", "0"), ("t", "1"), ("gone", "0"))
        assert set(s) == {(n, t, p) for n in per_partition for t, p in hosted}
        for p in range(2):
            lg = m.get_log("t", p)
            man = svc.manifest("t", p)
            assert man is not None
            assert s["strata_tiering_local_bytes", "t", str(p)] == sum(seg.size for seg in lg.segments())
            assert s["strata_tiering_remote_bytes", "t", str(p)] == man.remote_size() > 0
            assert s["strata_tiering_remote_segments", "t", str(p)] == 1
            assert s["strata_tiering_upload_lag_segments", "t", str(p)] == 0

        # A segment sealed after the pass is lag at the next scrape, its age by the clock.
        lg = m.get_log("t", 1)
        lg.append(batch_at(3, 2, ts=now[0]), now_ms=now[0])
        sealed = lg.active_segment
        lg.roll()
        now[0] = sealed.file.mtime_ms() + 5_000
        s = series()
        assert s["strata_tiering_upload_lag_segments", "t", "1"] == 1
        assert s["strata_tiering_upload_lag_bytes", "t", "1"] == sealed.size
        assert s["strata_tiering_upload_lag_seconds", "t", "1"] == 5.0
        assert s["strata_tiering_local_bytes", "t", "1"] == sum(seg.size for seg in lg.segments())

        # A stop adds its series; a deleted topic's series go.
        svc.uploader._stop(svc.uploader.state("t", 0, m.topic("t").topic_id), "corrupt", "test")
        m.delete_topic("gone")
        await svc.run_once(retention=False, sweep=False)
        s = series()
        assert s["strata_tiering_partition_stopped", "t", "0"] == 1
        assert not [k for k in s if k[1] == "gone"]
        assert s["strata_tiering_upload_lag_segments", "t", "1"] == 0  # uploaded meanwhile
    finally:
        await svc.close()
        m.close()
