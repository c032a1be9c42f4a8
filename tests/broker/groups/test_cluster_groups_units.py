"""Pure parts of cluster-mode groups (broker.groups.replicated_offsets): Kafka's group -> partition formula
and the mapping of replication failures to group errors."""

from __future__ import annotations

from pathlib import Path

from broker.groups.replicated_offsets import (
    java_string_hash,
    offsets_topic_configs,
    partition_for,
    replication_error,
)
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

    from broker.groups.offsets import encode_ops
    from broker.groups.offsets_codec import GroupKey, OffsetKey
    from broker.groups.replicated_offsets import _Partition, _Write
    from broker.groups.types import OffsetAndMetadata, StoredGroup, TopicPartition

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

    from broker.producer_ids import MAX_BROKER_ID, init_producer, scoped_producer_id
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


def test_replay_is_the_same_whatever_part_of_a_compaction_survived(tmp_path: Path) -> None:
    """Failover in the middle of a compaction (broker.groups.replicated_offsets): the new leader holds the old
    records and any prefix of the dump (the log start offset has not moved), or, once the
    dump is acknowledged, the log start offset may be at the dump. Replaying a real log
    from its log start gives the same committed state in every case, deleted keys stay
    deleted (their tombstones go only together with every older value), and records
    written after the dump win over it."""
    from typing import Any, cast

    from broker.groups.offsets import Op, build_batches, encode_ops, offsets_log_config, read_ops
    from broker.groups.offsets_codec import GroupKey, OffsetKey
    from broker.groups.replicated_offsets import _Partition
    from broker.groups.types import OffsetAndMetadata, StoredGroup
    from hot.log import Log

    def om(offset: int) -> OffsetAndMetadata:
        return OffsetAndMetadata(offset, -1, "", 1000 + offset)

    a0, a1, b0 = OffsetKey("a", "t", 0), OffsetKey("a", "t", 1), OffsetKey("b", "t", 0)
    history = encode_ops(
        [
            (a0, om(1)),
            (a1, om(2)),
            (b0, om(3)),
            (GroupKey("a"), StoredGroup("consumer", 4, "range", "m-1", 7)),
            (a0, om(10)),
            (b0, None),  # OffsetDelete: b has nothing left
            (GroupKey("b"), StoredGroup("consumer", 1, "range", "m-2", 8)),
            (GroupKey("b"), None),  # DeleteGroups
            (a1, om(20)),
        ]
    )
    later = encode_ops([(a1, None), (a0, om(30))])  # written after the dump

    def replayed(dump: list[Op], after: list[Op], *, move_start: bool) -> _Partition:
        d = tmp_path / f"case-{len(list(tmp_path.iterdir()))}"
        lg = Log.open(d, offsets_log_config(None, 1 << 20), topic="__consumer_offsets", partition=0)
        try:
            lg.append(build_batches(history, 0))
            lg.roll()  # the dump starts a segment, one batch per record here
            dump_start = lg.log_end_offset
            for op in dump:
                lg.append(build_batches([op], 0))
            if after:
                lg.append(build_batches(after, 0))
            lg.flush()
            if move_start:
                lg.advance_log_start_offset(dump_start)
                lg.apply_retention()
                assert lg.segments()[0].base_offset == dump_start
            part = _Partition(0, cast(Any, None), 1)
            for ops in read_ops(lg, lg.log_start_offset, lg.log_end_offset):
                part.replay(ops)
            return part
        finally:
            lg.close()

    reference = _Partition(0, cast(Any, None), 1)
    reference.replay(history)
    dump = reference.dump()
    assert {op[0] for op in dump} == {a0, a1, GroupKey("a")}  # tombstoned keys are not dumped
    expected = (reference.offsets, reference.groups)
    # The leader died after appending part of the dump (whole batches reach followers).
    for k in range(len(dump) + 1):
        part = replayed(dump[:k], [], move_start=False)
        assert (part.offsets, part.groups) == expected, f"dump cut after {k} records"
        assert part.latest == reference.latest
    # The dump is acknowledged and writes followed it: from the old start or the new one.
    after = _Partition(0, cast(Any, None), 1)
    after.replay([*history, *later])
    for move_start in (False, True):
        part = replayed(dump, later, move_start=move_start)
        assert (part.offsets, part.groups) == (after.offsets, after.groups)
        assert part.group_ids() == {"a"}
        assert part.latest == after.latest
