"""TopicRegistry and LogConfig: validation, persistence, atomic replacement."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from hot.config import KAFKA_NAMES, LogConfig
from hot.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from hot.topics import TopicRegistry, validate_topic_name

# --- LogConfig ----------------------------------------------------------------------------------


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.to_kafka()["segment.bytes"] == "1073741824"
    assert c.to_kafka()["retention.ms"] == "604800000"
    assert c.to_kafka()["max.message.bytes"] == "1048588"
    assert c.to_kafka()["strata.flush.mode"] == "fsync"
    assert set(c.to_kafka()) == set(KAFKA_NAMES)
    assert LogConfig.from_kafka(c.to_kafka()) == c
    assert c.effective_local_retention_ms == c.retention_ms


def test_from_kafka_parses_and_overrides() -> None:
    c = LogConfig.from_kafka(
        {"segment.bytes": " 4096 ", "retention.ms": "-1", "cleanup.policy": "delete,compact"}
    )
    assert (c.segment_bytes, c.retention_ms, c.cleanup_policy) == (4096, -1, "compact,delete")
    d = c.overrides({"strata.flush.mode": "interval", "flush.messages": "10"})
    assert (d.segment_bytes, d.flush_mode, d.flush_messages, d.fsync_mode) == (4096, "interval", 10, False)
    assert d.diff(LogConfig()) == {
        "segment.bytes": "4096",
        "retention.ms": "-1",
        "cleanup.policy": "compact,delete",
        "strata.flush.mode": "interval",
        "flush.messages": "10",
    }


@pytest.mark.parametrize(
    ("configs", "needle"),
    [
        ({"no.such.config": "1"}, "no.such.config"),
        ({"segment.bytes": "abc"}, "segment.bytes"),
        ({"segment.bytes": "1_000_000"}, "segment.bytes"),
        ({"segment.bytes": "100"}, "segment.bytes"),
        ({"segment.bytes": str(1 << 31)}, "segment.bytes"),
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"message.timestamp.type": "WallClock"}, "message.timestamp.type"),
        ({"strata.flush.mode": "never"}, "strata.flush.mode"),
        ({"cleanup.policy": "shred"}, "cleanup.policy"),
        ({"flush.messages": "0"}, "flush.messages"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"retention.ms": "1000", "local.retention.ms": "5000"}, "local.retention.ms"),
    ],
)
def test_invalid_configs(configs: dict[str, str], needle: str) -> None:
    with pytest.raises(InvalidConfigError, match=needle.replace(".", r"\.")):
        LogConfig.from_kafka(configs)


# --- topic names --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "orders", "Orders.v2_x-y", "x" * 249, "__consumer_offsets"])
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "é", "a:b", "a\n"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


# --- registry ---------------------------------------------------------------------------------------


def test_create_get_list_delete_persist(tmp_path: Path) -> None:
    path = tmp_path / "meta" / "topics.json"
    reg = TopicRegistry(path)
    a = reg.create("alpha", 3, {"retention.ms": "1000"})
    b = reg.create("beta", 1)
    assert isinstance(a.topic_id, uuid.UUID) and a.topic_id != b.topic_id
    assert [t.name for t in reg.list()] == ["alpha", "beta"]
    assert reg.get("gamma") is None
    assert reg.config("alpha").retention_ms == 1000
    assert reg.config("beta") == LogConfig()
    again = TopicRegistry(path)
    assert again.get("alpha") == a and again.get("beta") == b
    assert again.delete("alpha") == a
    assert [t.name for t in TopicRegistry(path).list()] == ["beta"]
    assert not (tmp_path / "meta" / "topics.json.tmp").exists()
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and doc["topics"]["beta"]["topic_id"] == str(b.topic_id)


def test_create_validation(tmp_path: Path) -> None:
    reg = TopicRegistry(tmp_path / "topics.json")
    reg.create("a.b", 1)
    with pytest.raises(TopicExistsError):
        reg.create("a.b", 1)
    with pytest.raises(InvalidTopicError, match="collides"):
        reg.create("a_b", 1)
    with pytest.raises(InvalidTopicError):
        reg.create("bad name", 1)
    for n in (0, -1, 10001):
        with pytest.raises(InvalidPartitionsError):
            reg.create("p", n)
    with pytest.raises(InvalidConfigError, match="bogus"):
        reg.create("c", 1, {"bogus": "1"})
    assert [t.name for t in reg.list()] == ["a.b"]
    with pytest.raises(UnknownTopicOrPartitionError):
        reg.delete("nope")


def test_alter_configs_and_add_partitions(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    reg = TopicRegistry(path, defaults=LogConfig(retention_ms=5000))
    t = reg.create("t", 2, {"segment.bytes": "4096"})
    reg.alter_configs("t", {"retention.ms": "100"})
    assert reg.get("t").configs == {"segment.bytes": "4096", "retention.ms": "100"}  # type: ignore[union-attr]
    reg.alter_configs("t", {"segment.bytes": None})
    assert reg.config("t").segment_bytes == LogConfig().segment_bytes
    reg.alter_configs("t", {"cleanup.policy": "compact"}, replace=True)
    assert reg.get("t").configs == {"cleanup.policy": "compact"}  # type: ignore[union-attr]
    assert reg.config("t").retention_ms == 5000  # the broker default
    with pytest.raises(InvalidConfigError):
        reg.alter_configs("t", {"retention.ms": "soon"})
    assert reg.add_partitions("t", 5).partitions == 5
    with pytest.raises(InvalidPartitionsError):
        reg.add_partitions("t", 5)
    loaded = TopicRegistry(path).get("t")
    assert loaded is not None and loaded.partitions == 5 and loaded.topic_id == t.topic_id


def test_unreadable_registry_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_text("{not json")
    with pytest.raises(StorageError, match="unreadable"):
        TopicRegistry(path)


def test_stale_tmp_file_does_not_matter(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    reg.create("t", 1)
    (tmp_path / "topics.json.tmp").write_text("half-written garbage")  # a crash mid-write
    assert [t.name for t in TopicRegistry(path).list()] == ["t"]
    reg.create("u", 1)  # the next write replaces the stale tmp file
    assert [t.name for t in TopicRegistry(path).list()] == ["t", "u"]
