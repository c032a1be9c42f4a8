"""Pieces of cluster mode that need no etcd: settings, the high-watermark checkpoint file,
the replicated log manager, the status report, and the truncation rule KIP-279 needs."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from broker.cluster_config import ENV_NAMES, ClusterConfig
from broker.hw_checkpoint import CHECKPOINT_FILE, HighWatermarkCheckpoint, decode, encode
from broker.keys import KeyLayout
from broker.log_manager import ClusterLogManager
from broker.metadata import (
    BrokerRegistration,
    ClusterView,
    ControllerRecord,
    PartitionState,
    TopicAssignment,
)
from broker.metadata_store import KeyValue, WatchReset
from broker.status import cluster_status, format_status
from hot.config import LogConfig
from hot.errors import InvalidConfigError
from hot.log import Log
from hot.records import RecordInput, build_batch

# --- settings ----------------------------------------------------------------------------------


def test_cluster_config_from_kafka_names() -> None:
    cfg = ClusterConfig.from_kafka(
        {
            "etcd": "10.0.0.1:2379,10.0.0.2",
            "replica.lag.time.max.ms": "5000",
            "broker.session.timeout.ms": 2500,
            "inter.broker.listener": "10.0.0.9:9093",
            "etcd.compaction.interval.ms": "0",
        }
    )
    assert cfg.etcd == "10.0.0.1:2379,10.0.0.2"
    assert cfg.replica_lag_time_max_ms == 5000
    assert cfg.lease_ttl_s == 3  # rounded up to whole seconds
    assert cfg.inter_broker_listener == "10.0.0.9:9093"
    assert cfg.broker_id is None
    assert ENV_NAMES["STRATA_REPLICA_LAG_TIME_MAX_MS"] == "replica.lag.time.max.ms"
    assert cfg.compaction_interval_ms == 0 and ClusterConfig("h:1").compaction_interval_ms == 300_000


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replica.lag.time.max.ms": "5000"}, "without 'etcd'"),
        ({"etcd": "h:1", "replica.lag.time.max.ms": "0"}, "replica.lag.time.max.ms"),
        ({"etcd": "h:1", "replica.fetch.wait.max.ms": "soon"}, "expected an integer"),
        ({"etcd": "h:1", "no.such.setting": "1"}, "unknown cluster setting"),
        ({"etcd": "h:99999"}, "bad port"),
        ({"etcd": "h:1", "etcd.compaction.interval.ms": "-1"}, "etcd.compaction.interval.ms"),
        ({"etcd": "h:1", "inter.broker.listener": "nohost"}, "HOST:PORT"),
        ({"etcd": "h:1", "default.replication.factor": True}, "expected a string or an integer"),
    ],
)
def test_cluster_config_refuses_bad_settings(values: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        ClusterConfig.from_kafka(values)


# --- the high-watermark checkpoint -----------------------------------------------------------------


def test_checkpoint_round_trip_and_layout(tmp_path: Path) -> None:
    entries = {("orders", 0): 42, ("orders", 1): 0, ("a.b_c-d", 7): 1 << 40}
    data = encode(entries)
    assert data.startswith(b"0\n3\n") and data.endswith(b"\n")
    assert decode(data) == entries
    ckpt = HighWatermarkCheckpoint(tmp_path)
    assert ckpt.read() == {}
    ckpt.write(entries)
    assert (tmp_path / CHECKPOINT_FILE).read_bytes() == data
    assert ckpt.read() == entries


@pytest.mark.parametrize(
    "data",
    [
        b"1\n0\n",  # unknown version
        b"0\n2\norders 0 5\n",  # count does not match
        b"0\n1\norders 0 5",  # truncated: no final newline
        b"0\n1\norders x 5\n",
        b"0\n1\nbad/name 0 5\n",
        b"0\n2\norders 0 5\norders 0 6\n",
        b"\xff\n",
    ],
)
def test_damaged_checkpoint_is_ignored(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(ValueError):
        decode(data)
    (tmp_path / CHECKPOINT_FILE).write_bytes(data)
    assert HighWatermarkCheckpoint(tmp_path).read() == {}


# --- the replicated log manager ----------------------------------------------------------------------


def _batch(n: int = 1) -> bytes:
    return build_batch([RecordInput(None, b"v%d" % i) for i in range(n)])


def test_log_manager_replicated_logs_and_checkpoint(tmp_path: Path) -> None:
    flushed: list[str] = []
    done = threading.Event()

    def on_flushed(logs: list[Log]) -> None:
        flushed.extend(lg.name for lg in logs)
        done.set()

    mgr = ClusterLogManager(tmp_path, LogConfig())
    mgr.on_flushed = on_flushed
    mgr.open()
    mgr.create_topic("orders", 2, {})
    lg = mgr.get_log("orders", 0)
    assert lg.hw_managed_externally
    lg.append(_batch(3), leader_epoch=4)
    assert done.wait(10), "the replica committer never reported the flush"
    assert flushed == ["orders-0"] and lg.recovery_point == 3
    assert lg.high_watermark == 0  # only its owner moves it
    lg.set_high_watermark(2)
    mgr.close()
    assert HighWatermarkCheckpoint(tmp_path / "meta").read() == {("orders", 0): 2, ("orders", 1): 0}

    again = ClusterLogManager(tmp_path, LogConfig()).open()
    try:
        lg = again.get_log("orders", 0)
        assert (lg.high_watermark, lg.log_end_offset, lg.latest_epoch) == (2, 3, 4)
    finally:
        again.close()


def test_periodic_hw_checkpoint_is_written_only_when_something_changed(tmp_path: Path) -> None:
    mgr = ClusterLogManager(tmp_path, LogConfig(flush_mode="interval")).open()
    try:
        mgr.create_topic("orders", 3, {})
        cp = tmp_path / "meta" / CHECKPOINT_FILE
        mgr.checkpoint_high_watermarks(if_changed=True)
        inode = cp.stat().st_ino  # a rewrite is a new file renamed over it (atomic_write)
        mgr.checkpoint_high_watermarks(if_changed=True)  # idle: not rewritten
        assert cp.stat().st_ino == inode
        mgr.get_log("orders", 1).append(_batch(2), leader_epoch=0)
        mgr.get_log("orders", 1).set_high_watermark(2)
        mgr.checkpoint_high_watermarks(if_changed=True)
        assert cp.stat().st_ino != inode
        assert HighWatermarkCheckpoint(tmp_path / "meta").read()[("orders", 1)] == 2
        # A removed partition leaves the file at the next periodic write.
        assert mgr.remove_partition("orders", 2)
        mgr.checkpoint_high_watermarks(if_changed=True)
        assert ("orders", 2) not in HighWatermarkCheckpoint(tmp_path / "meta").read()
    finally:
        mgr.close()


def test_truncation_at_log_end_drops_an_empty_epoch(tmp_path: Path) -> None:
    """KIP-279: a replica that took epoch 5 as leader and wrote nothing must lose that entry
    when it truncates as a follower, or it would ask for epoch 5 forever."""
    lg = Log.open(tmp_path / "t-0", LogConfig(), topic="t", partition=0, hw_managed_externally=True)
    try:
        lg.append(_batch(2), leader_epoch=3)
        lg.assign_leader_epoch(5)
        assert [e.epoch for e in lg.leader_epochs()] == [3, 5]
        lg.truncate_to(lg.log_end_offset)
        assert [e.epoch for e in lg.leader_epochs()] == [3]
        assert lg.log_end_offset == 2
    finally:
        lg.close()


# --- the status report -----------------------------------------------------------------------------


def test_status_report_flags_under_replicated_and_offline() -> None:
    layout = KeyLayout("c1")
    kvs = [
        KeyValue(layout.broker(1), BrokerRegistration(1, "h1", 9092, 8080).to_json(), 5, 5, 1, 7),
        KeyValue(layout.broker(2), BrokerRegistration(2, "h2", 9092, 8080).to_json(), 6, 6, 1, 8),
        KeyValue(layout.controller, ControllerRecord(1, 3).to_json(), 9, 9, 1, 7),
        KeyValue(
            layout.topic("t"),
            TopicAssignment("00000000-0000-4000-8000-000000000001", 2, ((1, 2), (2, 3), (3, 1))).to_json(),
            10,
            10,
            1,
            0,
        ),
        KeyValue(layout.partition_state("t", 0), PartitionState(1, 4, (1, 2)).to_json(), 11, 11, 1, 0),
        KeyValue(layout.partition_state("t", 1), PartitionState(2, 1, (2,)).to_json(), 11, 11, 1, 0),
        KeyValue(layout.partition_state("t", 2), PartitionState(-1, 2, (3,)).to_json(), 11, 11, 1, 0),
    ]
    view = ClusterView(layout)
    view.apply(WatchReset(tuple(kvs), 12))
    report = cluster_status(view)
    assert report["controller"] == {"id": 1, "epoch": 3}
    assert [b["id"] for b in report["brokers"]] == [1, 2]
    assert report["under_replicated"] == ["t-1", "t-2"]
    assert report["offline"] == ["t-2"]
    assert report["partitions"][0] == {
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "leader_epoch": 4,
        "replicas": [1, 2],
        "isr": [1, 2],
        "offline_replicas": [],
        "under_replicated": False,
        "offline": False,
    }
    text = format_status(report)
    assert "controller: broker 1 (epoch 3)" in text
    assert "t-2" in text and "offline" in text and "under-replicated: 2, offline: 1" in text


def test_follower_segments_roll_where_the_leader_rolled(tmp_path: Path) -> None:
    """A fetch of many batches is appended so the follower's segment boundaries equal the
    leader's (which rolled per produce request): tiering continues after a failover."""
    from broker.fetcher import _append_aligned

    cfg = LogConfig(segment_bytes=1024)
    leader = Log.open(tmp_path / "leader", cfg, topic="t", partition=0, hw_managed_externally=True)
    follower = Log.open(tmp_path / "follower", cfg, topic="t", partition=0, hw_managed_externally=True)
    try:
        for i in range(40):
            leader.append(_batch(1 + i % 7), leader_epoch=0)
        data = b"".join(r.read() for r in leader.read(0, 1 << 20, max_offset=leader.log_end_offset).regions)
        # Fetches of arbitrary sizes, cut at batch boundaries.
        pos = 0
        for size in (3000, 1, 5000, 2500, 1 << 20):
            chunk = data[pos : pos + size]
            cut = 0
            while cut < len(chunk) and (
                nxt := cut + 12 + int.from_bytes(chunk[cut + 8 : cut + 12], "big")
            ) <= len(chunk):
                cut = nxt
            if cut:
                _append_aligned(follower, memoryview(chunk[:cut]))
            pos += cut
        assert follower.log_end_offset == leader.log_end_offset
        assert [s.base_offset for s in follower.segments()] == [s.base_offset for s in leader.segments()]
        assert len(leader.segments()) > 3
    finally:
        leader.close()
        follower.close()
