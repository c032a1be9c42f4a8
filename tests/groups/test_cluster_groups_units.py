"""Pure parts of cluster-mode groups (cluster.groups): Kafka's group -> partition formula
and the mapping of replication failures to group errors."""

from __future__ import annotations

from pathlib import Path

from cluster.groups import java_string_hash, offsets_topic_configs, partition_for, replication_error
from hot.errors import (
    CoordinatorNotAvailableError,
    LogClosedError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    RequestTimedOutError,
)


def test_java_string_hash_matches_java() -> None:
    # Values of java.lang.String.hashCode().
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello World") == -862545276
    assert java_string_hash("polygenelubricants") == -(2**31)
    # UTF-16 code units: a character outside the BMP counts as its surrogate pair.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    assert java_string_hash("é") == 233


def test_partition_for_is_kafkas_formula() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("Hello World", 50) == (-862545276 & 0x7FFFFFFF) % 50
    for g in ("", "billing", "group-1", "ünïcödé"):
        assert 0 <= partition_for(g, 8) < 8
        assert partition_for(g, 1) == 0


def test_offsets_topic_configs() -> None:
    assert offsets_topic_configs(3, 1 << 20)["min.insync.replicas"] == "2"
    assert offsets_topic_configs(2, 1 << 20)["min.insync.replicas"] == "1"
    c = offsets_topic_configs(1, 1 << 20)
    assert c["retention.ms"] == "-1" and c["remote.storage.enable"] == "false"


def test_replication_errors_become_group_errors() -> None:
    assert isinstance(replication_error(NotLeaderError("x")), NotCoordinatorError)
    assert isinstance(replication_error(LogClosedError("x")), NotCoordinatorError)
    for exc in (
        NotEnoughReplicasError("x"),
        NotEnoughReplicasAfterAppendError("x"),
        RequestTimedOutError("x"),
        TimeoutError(),
    ):
        assert isinstance(replication_error(exc), CoordinatorNotAvailableError)
    same = NotCoordinatorError("x")
    assert replication_error(same) is same


def test_partition_state_applies_acknowledged_writes_in_log_order() -> None:
    from typing import Any, cast

    from api.groups.offsets import encode_ops
    from api.groups.offsets_codec import GroupKey, OffsetKey
    from api.groups.types import OffsetAndMetadata, StoredGroup, TopicPartition
    from cluster.groups import _Partition, _Write

    part = _Partition(0, cast(Any, None), 1)
    k = OffsetKey("g", "t", 0)
    first, second, failed = (
        _Write(encode_ops([(k, OffsetAndMetadata(10, -1, "", 1))])),
        _Write(encode_ops([(k, OffsetAndMetadata(20, -1, "", 2))])),
        _Write(encode_ops([(GroupKey("g"), StoredGroup("consumer", 3, "range", "m", 5))])),
    )
    for w in (first, second, failed):
        for op in w.ops:
            part.apply_latest(op)
        part.pending.append(w)
    assert part.offset_keys == {"g": {k}} and part.group_keys == {"g"}  # log order, in flight
    second.done = second.ok = True
    part.drain()
    assert part.offsets == {}  # the earlier write is not acknowledged yet
    first.done = first.ok = True
    failed.done = True
    part.drain()
    assert part.offsets == {"g": {TopicPartition("t", 0): OffsetAndMetadata(20, -1, "", 2)}}
    assert part.groups == {} and not part.pending  # the failed write applied nothing
    tomb = encode_ops([(k, None)])
    part.apply_latest(tomb[0])
    part.apply_durable(tomb[0])
    assert part.offsets == {} and part.offset_keys == {}


def test_producer_ids_are_disjoint_across_brokers(tmp_path: Path) -> None:
    import pytest

    from cluster.producer_ids import MAX_BROKER_ID, init_producer, scoped_producer_id
    from hot.errors import InvalidConfigError
    from hot.producer_ids import ProducerIdAllocator

    seen: set[int] = set()
    for broker in (1, 2, 1001):
        alloc = ProducerIdAllocator(tmp_path / f"pids-{broker}")
        for _ in range(3):
            pid, epoch = init_producer(alloc, broker)
            assert epoch == 0 and pid not in seen
            seen.add(pid)
        # KIP-360: an id this broker issued keeps its id with the epoch bumped ...
        assert init_producer(alloc, broker, pid, 4) == (pid, 5)
    # ... one issued elsewhere (or never) gets a new id.
    alloc = ProducerIdAllocator(tmp_path / "pids-x")
    other = scoped_producer_id(0, 2)
    new, epoch = init_producer(alloc, 1, other, 0)
    assert new != other and epoch == 0 and new & MAX_BROKER_ID == 1
    with pytest.raises(InvalidConfigError):
        scoped_producer_id(0, MAX_BROKER_ID + 1)
