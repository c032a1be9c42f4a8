"""The bucket's lag behind the log is bounded (tiering.upload_lag): a tiered partition's
active segment rolls once its data is ``remote.copy.max.lag.ms`` old, and only then (a
busy partition reaches ``segment.bytes`` first); a clean stop uploads everything. Driven
through ``TieringService.run_once`` with an injected clock; real logs, real file:// store."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hot.config import LogConfig
from hot.errors import InvalidConfigError, RetriableObjectStoreError
from hot.log import Log
from hot.manager import LogManager
from tests.hot.hotlib import batch_at
from tests.tiering.uplib import load_manifest, make_store, new_manager
from tiering.config import TieringConfig
from tiering.metrics import TieringMetrics
from tiering.service import TieringService
from tiering.upload_lag import PendingRange, ShutdownUpload

T0 = 1_800_000_000_000
BOUND = 60_000


def _service(m: LogManager, url: str, now: list[int], **config: object) -> TieringService:
    cfg = TieringConfig(**{"cache_max_bytes": 0, **config})  # type: ignore[arg-type]
    return TieringService(m, make_store(url), cfg, TieringMetrics(), clock_ms=lambda: now[0])


def _append(log: Log, n: int, at_ms: int, size: int = 40) -> None:
    log.append(batch_at(log.log_end_offset, n, size=size, ts=at_ms), now_ms=at_ms)


def _lag_rolls(svc: TieringService, topic: str) -> float:
    return svc.metrics.lag_rolls.labels(topic)._value.get()  # type: ignore[attr-defined,no-any-return]


def test_config_name_default_and_validation() -> None:
    assert LogConfig().remote_copy_max_lag_ms == 3_600_000
    assert LogConfig().to_kafka()["remote.copy.max.lag.ms"] == "3600000"
    off = LogConfig.from_kafka({"remote.copy.max.lag.ms": "-1"})
    assert off.remote_copy_max_lag_ms == -1 and off.diff(LogConfig()) == {"remote.copy.max.lag.ms": "-1"}
    for bad in ("0", "-2", "1h", ""):
        with pytest.raises(InvalidConfigError, match=r"remote\.copy\.max\.lag\.ms"):
            LogConfig.from_kafka({"remote.copy.max.lag.ms": bad})
    assert TieringConfig().shutdown_upload_grace_ms == 30_000
    assert TieringConfig().shutdown_upload_in_cluster is False
    cfg = TieringConfig.from_mapping({"shutdown_upload_grace_ms": "0", "shutdown_upload_in_cluster": "true"})
    assert cfg.shutdown_upload_grace_ms == 0 and cfg.shutdown_upload_in_cluster is True
    with pytest.raises(InvalidConfigError, match="shutdown_upload_in_cluster"):
        TieringConfig.from_mapping({"shutdown_upload_in_cluster": "maybe"})
    with pytest.raises(InvalidConfigError, match="shutdown_upload_grace_ms"):
        TieringConfig.from_mapping({"shutdown_upload_grace_ms": "-1"})


async def test_quiet_partition_rolls_and_uploads_once_its_data_reaches_the_bound(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    now = [T0]
    svc = _service(m, url, now)
    try:
        m.create_topic("quiet", 1, {"remote.copy.max.lag.ms": str(BOUND)})
        m.create_topic("off", 1, {"remote.copy.max.lag.ms": "-1"})
        m.create_topic("local", 1, {"remote.storage.enable": "false"})
        logs = {t: m.get_log(t, 0) for t in ("quiet", "off", "local")}
        for lg in logs.values():
            _append(lg, 3, T0)
        now[0] = T0 + BOUND - 1
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 0
        assert [len(lg.segments()) for lg in logs.values()] == [1, 1, 1]

        now[0] = T0 + BOUND  # the first record is BOUND old: roll and upload in the same pass
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 1
        quiet = logs["quiet"]
        assert [s.base_offset for s in quiet.segments()] == [0, 3] and quiet.active_segment.is_empty
        man = await load_manifest(url, m, "quiet")
        assert man.next_offset() == 3
        assert len(logs["off"].segments()) == 1 and len(logs["local"].segments()) == 1

        # An empty active segment never rolls, however long nothing comes.
        now[0] = T0 + 10 * BOUND
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 0
        assert len(quiet.segments()) == 2
        # The age is counted from the segment's first append, not from the last roll.
        _append(quiet, 2, T0 + 10 * BOUND)
        _append(quiet, 2, T0 + 10 * BOUND + BOUND // 2)
        now[0] = T0 + 11 * BOUND - 1
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 0
        now[0] = T0 + 11 * BOUND
        assert (await svc.run_once(retention=False, sweep=False)).uploaded == 1
        assert (await load_manifest(url, m, "quiet")).next_offset() == 7
        assert _lag_rolls(svc, "quiet") == 2 and _lag_rolls(svc, "off") == 0
    finally:
        await svc.close()
        m.close()


async def test_steady_traffic_rolls_by_size_never_by_age(tmp_path: Path) -> None:
    """One pass per simulated second, 4 KiB a second: each segment fills (16 KiB) in
    about 4 s, long before the 10 s bound, so no segment is cut short for its age."""
    url = f"file://{tmp_path / 'bucket'}"
    seg_bytes = 16384
    m = new_manager(tmp_path / "data", segment_bytes=seg_bytes)
    now = [T0]
    svc = _service(m, url, now)
    try:
        m.create_topic("busy", 1, {"remote.copy.max.lag.ms": "10000"})
        lg = m.get_log("busy", 0)
        for sec in range(60):
            now[0] = T0 + 1000 * sec
            _append(lg, 4, now[0], size=1000)
            await svc.run_once(retention=False, sweep=False)
        sealed = lg.segments()[:-1]
        assert len(sealed) >= 10
        assert _lag_rolls(svc, "busy") == 0
        assert all(s.size > seg_bytes - 4200 for s in sealed)  # full: rolled before the next batch
        assert (await load_manifest(url, m, "busy")).next_offset() == lg.active_segment.base_offset
    finally:
        await svc.close()
        m.close()


async def test_upload_at_shutdown_seals_and_uploads_everything(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    now = [T0]
    svc = _service(m, url, now)
    try:
        # remote.copy.lag.ms does not hold back the last upload; an untiered topic is left alone.
        m.create_topic("a", 2, {"remote.copy.lag.ms": "3600000"})
        m.create_topic("local", 1, {"remote.storage.enable": "false"})
        _append(m.get_log("a", 0), 5, T0)
        _append(m.get_log("a", 0), 5, T0)
        _append(m.get_log("local", 0), 5, T0)
        await svc.start()
        with caplog.at_level(logging.INFO, logger="tiering.service"):
            report = await svc.upload_before_shutdown()
        assert report.ok and report.uploaded == 1 and report.partitions == 2
        assert sorted(report.complete) == [("a-0", 10), ("a-1", 0)]
        assert (await load_manifest(url, m, "a")).next_offset() == 10
        assert len(m.get_log("local", 0).segments()) == 1
        assert "upload at shutdown: 1 segment(s) uploaded" in caplog.text
        assert "a-0 up to offset 9" in caplog.text
    finally:
        await svc.close()
        m.close()


async def test_upload_at_shutdown_gives_up_after_the_grace_period(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    now = [T0]
    svc = _service(m, url, now, shutdown_upload_grace_ms=800)
    try:
        m.create_topic("a", 1)
        _append(m.get_log("a", 0), 5, T0)
        await svc.start()

        async def down(*args: object, **kwargs: object) -> None:
            raise RetriableObjectStoreError("store down (test)")

        svc.store.put_file = down  # type: ignore[method-assign]
        with caplog.at_level(logging.INFO, logger="tiering.service"):
            report = await svc.upload_before_shutdown()
        assert not report.ok and report.uploaded == 0 and report.timed_out
        assert report.pending == [PendingRange("a-0", 0, 4)]
        assert report.error is not None and "store down" in report.error
        assert "gave up after" in caplog.text and "a-0 offsets 0..4" in caplog.text
    finally:
        await svc.close()
        m.close()


async def test_upload_at_shutdown_does_not_wait_for_the_log_cleaner(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A compacted tiered topic uploads only cleaned segments; its sealed tail is left (and
    named) at once rather than holding the stop for the cleaner's backoff or
    min.compaction.lag.ms."""
    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    now = [T0]
    svc = _service(m, url, now)
    try:
        m.create_topic("c", 1, {"cleanup.policy": "compact"})
        _append(m.get_log("c", 0), 5, T0)
        await svc.start()  # the cleaner thread is not running: nothing gets cleaned
        with caplog.at_level(logging.INFO, logger="tiering.service"):
            report = await svc.upload_before_shutdown()
        assert not report.timed_out and report.pending == [
            PendingRange("c-0", 0, 4, "waits for the log cleaner")
        ]
        assert "upload at shutdown ended after" in caplog.text
        assert "c-0 offsets 0..4 (waits for the log cleaner)" in caplog.text
    finally:
        await svc.close()
        m.close()


def test_shutdown_summary_lists_a_bounded_number_of_partitions() -> None:
    r = ShutdownUpload(grace_s=30, uploaded=3, partitions=40, elapsed_s=31.0, timed_out=True)
    r.pending = [PendingRange(f"t-{i}", 10 * i, 10 * i + 9) for i in range(25)]
    text = r.summary()
    assert text.startswith("upload at shutdown gave up after 31.0 s (grace 30 s): 3 segment(s) uploaded;")
    assert "25 of 40 tiered partition(s)" in text and "t-9 offsets 90..99" in text
    assert "t-10 " not in text and text.endswith("and 15 more")
    ok = ShutdownUpload(grace_s=30, uploaded=0, partitions=1, elapsed_s=0.01, complete=[("t-0", 0)])
    assert ok.summary() == (
        "upload at shutdown: 0 segment(s) uploaded in 0.0 s; the bucket holds every record of the 1 "
        "tiered partition(s)"
    )
