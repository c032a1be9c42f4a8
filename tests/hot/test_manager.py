"""LogManager: topics and their directories, clean / unclean reopen, the lock, background work."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hot.config import LogConfig
from hot.errors import CorruptLogError, StorageError, UnknownTopicOrPartitionError
from hot.log import RECOVERY_POINT_FILE
from hot.manager import CLEAN_SHUTDOWN_FILE, PARTITION_METADATA_FILE, LogManager
from tests.hot.hotlib import batch_at, decode


def append(m: LogManager, topic: str, partition: int, count: int = 3) -> int:
    log = m.get_log(topic, partition)
    info = log.append(batch_at(log.log_end_offset, count))
    log.high_watermark_future(info.next_offset).result(timeout=30)
    return info.next_offset


def offsets(m: LogManager, topic: str, partition: int) -> list[int]:
    log = m.get_log(topic, partition)
    return [r[0] for r in decode(log.read(log.log_start_offset, 1 << 30).read())]


def wait_for(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll a condition reached by a background thread (bounded; not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "background work did not happen"
        time.sleep(0.01)


def test_create_list_delete(tmp_path: Path) -> None:
    with LogManager(tmp_path) as m:
        info = m.create_topic("orders", 3, {"retention.ms": "1000"})
        m.create_topic("users", 1)
        assert [t.name for t in m.topics()] == ["orders", "users"]
        assert m.topic("orders") == info and m.log_config("orders").retention_ms == 1000
        assert m.get_log("orders", 2).config.retention_ms == 1000
        for p in range(3):
            d = tmp_path / "logs" / f"orders-{p}"
            assert d.is_dir()
            assert str(info.topic_id) in (d / PARTITION_METADATA_FILE).read_text()
        assert len(m.logs()) == 4
        with pytest.raises(UnknownTopicOrPartitionError):
            m.get_log("orders", 3)
        with pytest.raises(UnknownTopicOrPartitionError):
            m.get_log("nope", 0)
        with pytest.raises(UnknownTopicOrPartitionError):
            m.topic("nope")
        assert append(m, "orders", 1) == 3
        m.delete_topic("orders")
        assert [t.name for t in m.topics()] == ["users"]
        assert not any(n.startswith("orders") for n in os.listdir(tmp_path / "logs"))
        with pytest.raises(UnknownTopicOrPartitionError):
            m.get_log("orders", 1)
        # Re-creating the name gives a fresh, empty topic.
        again = m.create_topic("orders", 1)
        assert again.topic_id != info.topic_id and m.get_log("orders", 0).log_end_offset == 0


def test_reopen_after_clean_close(tmp_path: Path) -> None:
    m = LogManager(tmp_path).open()
    m.create_topic("t", 2)
    append(m, "t", 0)
    append(m, "t", 0)
    append(m, "t", 1)
    m.close()
    assert (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()
    m = LogManager(tmp_path).open()
    assert m.was_clean_shutdown
    assert not (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()  # removed before any write
    assert offsets(m, "t", 0) == list(range(6)) and offsets(m, "t", 1) == [0, 1, 2]
    assert append(m, "t", 1) == 6
    m.close()


def test_reopen_after_unclean_close(tmp_path: Path) -> None:
    m = LogManager(tmp_path, LogConfig(segment_bytes=1024)).open()
    m.create_topic("t", 1)
    for _ in range(20):
        append(m, "t", 0)
    last = m.get_log("t", 0).active_segment.log_path
    m.close(clean=False)
    assert not (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()
    with open(last, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x01torn")  # a torn write after the last batch
    m = LogManager(tmp_path, LogConfig(segment_bytes=1024)).open()
    assert not m.was_clean_shutdown
    assert offsets(m, "t", 0) == list(range(60))
    m.close()


def test_lock_refuses_a_second_manager(tmp_path: Path) -> None:
    m = LogManager(tmp_path).open()
    with pytest.raises(StorageError, match="already in use"):
        LogManager(tmp_path).open()
    m.close()
    LogManager(tmp_path).open().close()  # released on close


def test_directories_of_unregistered_topics_are_removed(tmp_path: Path) -> None:
    with LogManager(tmp_path) as m:
        m.create_topic("keep", 1)
        m.create_topic("stale", 1)
        append(m, "keep", 0)
    logs = tmp_path / "logs"
    (logs / "gone-0").mkdir()  # a crash during delete_topic
    (logs / "keep-7").mkdir()  # beyond the partition count
    (logs / "keep-0.abc123-delete").mkdir()  # an interrupted Log.delete
    (logs / "stale-0" / PARTITION_METADATA_FILE).write_text(
        "version: 0\ntopic_id: 00000000-0000-4000-8000-000000000000\n"
    )  # an older topic of the same name
    (logs / "stale-0" / "00000000000000000000.log").write_bytes(b"old data")
    with LogManager(tmp_path) as m:
        assert sorted(os.listdir(logs)) == ["keep-0", "stale-0"]
        assert offsets(m, "keep", 0) == [0, 1, 2]
        assert m.get_log("stale", 0).size == 0


def test_a_partition_that_cannot_be_removed_does_not_stop_a_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry forgets the topic first; a directory left behind (here: a failing
    rename) neither stops the other partitions nor the listeners (remote deletion)."""
    from hot.log import Log

    real_delete = Log.delete

    def failing_delete(log: Log) -> None:
        if log.partition == 1:
            log.close(clean=False)
            raise StorageError("cannot delete log directory: simulated")
        real_delete(log)

    monkeypatch.setattr(Log, "delete", failing_delete)
    deleted: list[str] = []
    with LogManager(tmp_path) as m:
        m.add_delete_listener(lambda info: deleted.append(info.name))
        m.create_topic("doomed", 3)
        assert m.delete_topic("doomed").name == "doomed"
        assert deleted == ["doomed"] and m.topics() == []
        assert sorted(os.listdir(tmp_path / "logs")) == ["doomed-1"]
    monkeypatch.undo()
    with LogManager(tmp_path) as m:  # an unregistered topic's directory goes at open
        assert os.listdir(tmp_path / "logs") == []


def test_missing_registry_with_data_is_refused(tmp_path: Path) -> None:
    with LogManager(tmp_path) as m:
        m.create_topic("t", 1)
    (tmp_path / "meta" / "topics.json").unlink()
    with pytest.raises(StorageError, match="missing"):
        LogManager(tmp_path).open()
    # The failed open released the lock.
    os.rename(tmp_path / "logs" / "t-0", tmp_path / "t-0.saved")
    LogManager(tmp_path).open().close()


def test_corrupt_partition_is_refused_not_served(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1024)
    with LogManager(tmp_path, cfg) as m:
        m.create_topic("t", 2)
        for _ in range(20):
            append(m, "t", 0)
        append(m, "t", 1)
        sealed = m.get_log("t", 0).segments()[0].log_path
    raw = bytearray(Path(sealed).read_bytes())
    raw[100] ^= 0xFF
    Path(sealed).write_bytes(bytes(raw))
    (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).unlink()
    (tmp_path / "logs" / "t-0" / RECOVERY_POINT_FILE).unlink()
    m = LogManager(tmp_path, cfg).open()
    with pytest.raises(CorruptLogError) as e:
        m.get_log("t", 0)
    assert e.value.path == sealed
    assert ("t", 0) in m.failed_partitions()
    assert offsets(m, "t", 1) == [0, 1, 2]  # the other partition is served
    m.close()
    assert not (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()  # never trust it next time
    m = LogManager(tmp_path, cfg).open()
    with pytest.raises(CorruptLogError):
        m.get_log("t", 0)
    m.close()


def test_alter_configs_and_add_partitions(tmp_path: Path) -> None:
    with LogManager(tmp_path) as m:
        m.create_topic("t", 1)
        m.alter_topic_configs("t", {"retention.ms": "1234"})
        assert m.get_log("t", 0).config.retention_ms == 1234
        m.add_partitions("t", 3)
        assert m.topic("t").partitions == 3
        assert append(m, "t", 2) == 3
    with LogManager(tmp_path) as m:
        assert m.get_log("t", 2).config.retention_ms == 1234
        assert offsets(m, "t", 2) == [0, 1, 2]


def test_apply_retention(tmp_path: Path) -> None:
    with LogManager(tmp_path, LogConfig(segment_bytes=1024, retention_ms=1000)) as m:
        m.create_topic("t", 1)
        log = m.get_log("t", 0)
        for _ in range(20):
            log.append(batch_at(log.log_end_offset, 3, ts=0))
        log.flush()
        n = len(log.segments())
        deleted = m.apply_retention(now_ms=10_000)
        assert len(deleted[("t", 0)]) == n - 1
        assert log.log_start_offset == log.active_segment.base_offset


def test_background_threads(tmp_path: Path) -> None:
    m = LogManager(tmp_path, LogConfig(segment_bytes=1024), retention_check_interval_ms=20).open()
    m.create_topic("gone", 1, {"retention.ms": "0"})
    m.create_topic("lazy", 1, {"strata.flush.mode": "interval", "flush.ms": "10"})
    m.start_background()
    gone = m.get_log("gone", 0)
    for _ in range(20):
        gone.append(batch_at(gone.log_end_offset, 3, ts=0))
    lazy = m.get_log("lazy", 0)
    lazy.append(batch_at(0, 2))
    assert lazy.high_watermark == 2  # interval mode: visible at once
    wait_for(lambda: lazy.recovery_point == 2)  # flushed by the interval flusher
    wait_for(lambda: len(gone.segments()) == 1)  # expired segments removed by the retention thread
    assert gone.log_start_offset == gone.active_segment.base_offset > 0
    m.close()


def test_interval_flusher_looks_only_at_interval_logs_and_sees_an_alter(tmp_path: Path) -> None:
    """The interval flusher walks the interval-mode logs only (listed again when the
    generation moves): a topic altered from fsync to interval mode after the start is
    flushed by it."""
    m = LogManager(tmp_path, LogConfig(segment_bytes=1024)).open()
    m.create_topic("strict", 3)  # fsync mode (the default)
    m.start_background()
    try:
        assert m._interval_logs() == []
        m.alter_topic_configs("strict", {"strata.flush.mode": "interval", "flush.ms": "10"})
        log = m.get_log("strict", 1)
        assert log in m._interval_logs() and len(m._interval_logs()) == 3
        log.append(batch_at(0, 2))
        wait_for(lambda: log.recovery_point == 2)  # flushed by the interval flusher
    finally:
        m.close()


def test_new_partitions_are_built_without_per_file_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating a topic (and adding partitions) does no per-file fsync: the directories
    are built under core.disk.deferred_sync and made durable by one syncfs before the
    registry names them, and opened under another."""
    import core.disk

    fsyncs: list[int] = []
    syncs: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    real_syncfs = core.disk.sync_filesystem
    monkeypatch.setattr(core.disk, "sync_filesystem", lambda p: (syncs.append(str(p)), real_syncfs(p))[1])
    with LogManager(tmp_path) as m:
        fsyncs.clear()
        m.create_topic("many", 50)
        # topics.json's own atomic write: its temp file and its directory
        assert len(fsyncs) <= 2
        assert len(syncs) == 2
        m.add_partitions("many", 60)
        assert len(syncs) == 4
        assert append(m, "many", 55) == 3
    with LogManager(tmp_path) as m:
        assert m.topic("many").partitions == 60
        assert offsets(m, "many", 55) == [0, 1, 2]
        for p in range(60):
            assert (
                (m.partition_dir("many", p) / PARTITION_METADATA_FILE)
                .read_text()
                .endswith(f"topic_id: {m.topic('many').topic_id}\n")
            )


def test_a_crash_before_registration_leaves_no_topic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Directories first, registry second: a crash between them (the registry write
    fails here) leaves directories that the next open removes, never a topic."""
    from hot.topics import TopicRegistry

    with LogManager(tmp_path) as m:
        m.create_topic("kept", 1)

        def crash(*args: object, **kwargs: object) -> None:
            raise SystemExit("crash")

        monkeypatch.setattr(TopicRegistry, "create", crash)
        with pytest.raises(SystemExit):
            m.create_topic("half", 5)
        monkeypatch.undo()
        assert m.partition_dir("half", 0).exists()
        m.close(clean=False)
    with LogManager(tmp_path) as m:
        assert [t.name for t in m.topics()] == ["kept"]
        assert not m.partition_dir("half", 0).exists()
        m.create_topic("half", 5)
        assert append(m, "half", 4) == 3
