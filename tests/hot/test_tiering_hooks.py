"""The hot log's hooks for tiered storage: local vs whole-log start offsets, local retention
of uploaded segments only, creation at a remote position, upload candidates, the disk
high-water mark, and the manager leaving tiered topics' retention to tiering."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from hot.config import LogConfig
from hot.errors import (
    DiskHighWaterError,
    InvalidConfigError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
)
from hot.log import Log
from hot.manager import LogManager
from hot.segment import Segment
from kwire.error_table import classify
from tests.hot.hotlib import batch_at, decode, open_log


def fill(log: Log, batches: int, *, records: int = 3, size: int = 60, ts: int | None = None) -> None:
    for _ in range(batches):
        log.append(batch_at(log.log_end_offset, records, size=size, ts=ts))


def test_topic_configs_for_tiering() -> None:
    c = LogConfig()
    assert c.remote_storage_enable is True and c.remote_copy_lag_ms == 0
    assert c.to_kafka()["remote.storage.enable"] == "true"
    off = LogConfig.from_kafka({"remote.storage.enable": "False", "remote.copy.lag.ms": "500"})
    assert off.remote_storage_enable is False and off.remote_copy_lag_ms == 500
    assert off.diff(c) == {"remote.storage.enable": "false", "remote.copy.lag.ms": "500"}
    assert LogConfig.from_kafka({"segment.bytes": "65536"}).segment_bytes == 65536
    with pytest.raises(InvalidConfigError):
        LogConfig.from_kafka({"remote.storage.enable": "yes"})
    with pytest.raises(InvalidConfigError):
        LogConfig.from_kafka({"retention.bytes": "1000", "local.retention.bytes": "2000"})
    with pytest.raises(InvalidConfigError):
        LogConfig.from_kafka({"retention.ms": "1000", "local.retention.ms": "-1"})
    ok = LogConfig.from_kafka({"retention.bytes": "1000", "local.retention.bytes": "100"})
    assert ok.effective_local_retention_bytes == 100
    assert LogConfig.from_kafka({"retention.bytes": "1000"}).effective_local_retention_bytes == 1000


def test_offset_moved_to_tiered_storage_error_maps_like_out_of_range() -> None:
    e = OffsetMovedToTieredStorageError(5, 10)
    assert isinstance(e, OffsetOutOfRangeError)
    assert (e.offset, e.local_log_start_offset) == (5, 10)
    assert classify(e) == classify(OffsetOutOfRangeError("x"))
    assert classify(DiskHighWaterError("full"))[0] == 56  # KAFKA_STORAGE_ERROR


def test_local_retention_deletes_only_uploaded_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, local_retention_ms=1000, flush_mode="interval")
    fill(log, 30, ts=0)
    segs = log.segments()
    assert len(segs) > 4
    uploaded_until = segs[2].next_offset
    deleted = log.apply_local_retention(10**6, lambda s: s.next_offset <= uploaded_until)
    assert deleted == [s.base_offset for s in segs[:3]]
    assert log.log_start_offset == 0  # the whole log still starts at 0 (remote)
    assert log.local_log_start_offset == uploaded_until
    with pytest.raises(OffsetMovedToTieredStorageError) as info:
        log.read(0, 100)
    assert info.value.local_log_start_offset == uploaded_until
    assert decode(log.read(uploaded_until, 100).read())[0][0] == uploaded_until
    # Nothing more is uploaded: nothing more is deleted, however old.
    assert log.apply_local_retention(10**9, lambda s: s.next_offset <= uploaded_until) == []
    log.close()
    for clean in (True, False):
        again = open_log(tmp_path / "t-0", clean=clean, segment_bytes=1024, flush_mode="interval")
        assert (again.log_start_offset, again.local_log_start_offset) == (0, uploaded_until)
        again.close()


def test_local_retention_by_bytes_and_below_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, local_retention_bytes=2500, flush_mode="interval")
    fill(log, 40)
    assert log.apply_local_retention(0, lambda s: True)
    assert log.size >= 2500 > log.size - log.segments()[0].size
    # Segments entirely below the log start go even if never uploaded.
    segs = log.segments()
    log.advance_log_start_offset(segs[2].base_offset)
    assert log.local_log_start_offset == segs[2].base_offset
    assert log.apply_local_retention(0, lambda s: False) == [segs[0].base_offset, segs[1].base_offset]
    log.close()


def test_local_retention_never_deletes_the_active_segment_or_above_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, local_retention_ms=0)  # fsync mode, no flusher
    fill(log, 30, ts=0)
    active = log.active_segment
    log.apply_local_retention(10**6, lambda s: True)
    assert log.segments() == [active]
    log.close()


def test_advance_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    fill(log, 20)
    log.advance_log_start_offset(7)
    log.advance_log_start_offset(3)  # never backwards
    assert log.log_start_offset == 7 == log.local_log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start_offset(log.high_watermark + 1)
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(6, 100)
    assert not isinstance(info.value, OffsetMovedToTieredStorageError)
    log.close()
    again = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    assert again.log_start_offset == 7
    again.close()


def test_sealed_segments_for_upload(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    fill(log, 30)
    segs = log.segments()
    candidates = log.sealed_segments_for_upload(log.log_end_offset)
    assert candidates == segs[:-1]
    assert log.sealed_segments_for_upload(segs[2].next_offset) == segs[:3]
    assert log.sealed_segments_for_upload(10**9, from_offset=segs[1].base_offset) == segs[1:-1]
    assert log.sealed_segments_for_upload(10**9, from_offset=segs[1].base_offset + 1) == segs[1:-1]
    for s in candidates:
        assert s.verify() == s.size
    # The producer snapshot written at each roll is what gets uploaded with a segment.
    snap = log.producer_snapshot_after(segs[0])
    assert snap is not None and os.path.exists(snap)
    assert log.producer_snapshot_after(log.active_segment) is None
    log.close()


def test_create_at_remote_position(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, flush_mode="interval")
    log = Log.create_at(tmp_path / "t-0", cfg, topic="t", partition=0, log_start_offset=100, next_offset=250)
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset) == (100, 250, 250)
    assert log.high_watermark == 250
    with pytest.raises(OffsetMovedToTieredStorageError):
        log.read(120, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(99, 100)
    assert log.read(250, 100).size == 0
    info = log.append(batch_at(0, 3))
    assert info.first_offset == 250
    log.close()
    again = Log.open(tmp_path / "t-0", cfg, topic="t", partition=0)
    assert (again.log_start_offset, again.local_log_start_offset, again.log_end_offset) == (100, 250, 253)
    again.close()
    assert not [n for n in os.listdir(tmp_path) if n.endswith("-delete")]


def test_manager_create_topic_with_id_and_start_offsets(tmp_path: Path) -> None:
    tid = uuid.uuid4()
    with LogManager(tmp_path, LogConfig(segment_bytes=1024)) as m:
        info = m.create_topic("r", 2, {}, topic_id=tid, start_offsets={1: (10, 40)})
        assert info.topic_id == tid
        assert m.get_log("r", 0).log_end_offset == 0
        lg = m.get_log("r", 1)
        assert (lg.log_start_offset, lg.local_log_start_offset, lg.log_end_offset) == (10, 40, 40)
    with LogManager(tmp_path, LogConfig(segment_bytes=1024)) as m:
        assert m.topic("r").topic_id == tid
        lg = m.get_log("r", 1)
        assert (lg.log_start_offset, lg.local_log_start_offset, lg.log_end_offset) == (10, 40, 40)


def test_manager_retention_skips_logs_owned_by_tiering(tmp_path: Path) -> None:
    with LogManager(tmp_path, LogConfig(segment_bytes=1024, retention_ms=1000)) as m:
        m.create_topic("tiered", 1)
        m.create_topic("plain", 1, {"remote.storage.enable": "false"})
        for name in ("tiered", "plain"):
            lg = m.get_log(name, 0)
            fill(lg, 20, ts=0)
            lg.flush()
        m.set_retention_owner(lambda lg: lg.config.remote_storage_enable)
        deleted = m.apply_retention(now_ms=10**6)
        assert list(deleted) == [("plain", 0)]
        assert m.get_log("tiered", 0).segments()[0].base_offset == 0


def test_manager_retention_sees_a_topic_become_tiered_between_look_and_deletion(tmp_path: Path) -> None:
    # The race CI can hit: the pass looks at the owner (not tiered yet), then the topic is
    # altered to remote.storage.enable with a small retention.bytes; the deletion must ask
    # again under the log's lock, or it deletes segments the bucket never got.
    with LogManager(tmp_path, LogConfig(segment_bytes=1024, retention_ms=-1)) as m:
        m.create_topic("t", 1, {"remote.storage.enable": "false"})
        lg = m.get_log("t", 0)
        fill(lg, 20, ts=0)
        lg.flush()
        looks: list[bool] = []

        def owner(log: Log) -> bool:
            tiered = log.config.remote_storage_enable
            if not looks:  # the first look: the alter lands right after it
                log.update_config(replace(log.config, remote_storage_enable=True, retention_bytes=1))
            looks.append(tiered)
            return tiered

        m.set_retention_owner(owner)
        assert m.apply_retention(now_ms=10**6) == {}
        assert looks == [False, True]
        assert (lg.log_start_offset, lg.segments()[0].base_offset) == (0, 0)


def test_disk_high_water_refuses_appends_and_deletes_nothing(tmp_path: Path) -> None:
    with LogManager(tmp_path, LogConfig(segment_bytes=1024, flush_mode="interval")) as m:
        m.create_topic("t", 1)
        lg = m.get_log("t", 0)
        fill(lg, 10)
        used = lg.size
        m.set_disk_high_water(max_log_bytes=used + 2000)
        appended = 0
        with pytest.raises(DiskHighWaterError, match="disk above high-water mark; uploads pending"):
            for _ in range(100):
                fill(lg, 1)
                appended += 1
        assert 0 < appended < 100
        end = lg.log_end_offset
        assert lg.size <= used + 2000
        assert decode(lg.read(0, 1 << 30).read())[-1][0] == end - 1  # everything still there
        m.set_disk_high_water()  # removed: appends work again
        fill(lg, 1)
        # The filesystem check: a fraction no filesystem can be under refuses everything.
        m.set_disk_high_water(max_used_fraction=0.0)
        with pytest.raises(DiskHighWaterError):
            fill(lg, 1)


def test_segment_verify_finds_corruption(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1024, flush_mode="interval")
    fill(log, 10)
    seg: Segment = log.segments()[0]
    with open(seg.log_path, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    from hot.errors import CorruptLogError

    with pytest.raises(CorruptLogError):
        seg.verify()
    log.close()
