"""Transactional offsets of an offsets partition (broker.groups.replicated_offsets,
broker.groups.txn_offsets): pending per producer until its marker, COMMIT and ABORT,
interleaved producers and plain commits ordered by their records, a replay of a real
log with its markers (a transaction still open at the end stays pending), and a
compaction's dump that a replay reads back the same."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from broker.coordinator_runtime.records import build_batches, build_transactional_batch, read_entries
from broker.coordinator_runtime.shard import Producer
from broker.groups.offsets import Op, encode_ops, offsets_log_config
from broker.groups.offsets_codec import GroupKey, OffsetKey
from broker.groups.replicated_offsets import _Partition
from broker.groups.types import OffsetAndMetadata, StoredGroup, TopicPartition
from hot.errors import FencedInstanceIdError, IllegalGenerationError, UnknownMemberIdError
from hot.log import Log
from hot.records import ControlType
from tests.broker.groups.grouplib import Harness

A0, A1, B0 = OffsetKey("a", "t", 0), OffsetKey("a", "t", 1), OffsetKey("b", "t", 0)
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def om(offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "", 1000 + offset)


def shard(log: Log | None = None) -> _Partition:
    return _Partition(0, cast(Any, SimpleNamespace(log=log)), 1)


class Writer:
    """Writes ops to a shard as the runtime does (record offsets in order), acknowledged at once."""

    def __init__(self, part: _Partition) -> None:
        self.part = part
        self.offset = 0

    def write(self, items: list[tuple[Any, Any]], producer: Producer | None = None) -> None:
        for op in encode_ops(items):
            self.part.apply_latest_at(op, self.offset, producer)
            self.part.apply_durable_at(op, self.offset, producer)
            self.offset += 1

    def marker(self, pid: int, commit: bool) -> None:
        self.part.apply_marker(pid, commit)
        self.offset += 1


def committed(part: _Partition, group: str = "a") -> dict[TopicPartition, int]:
    return {tp: o.offset for tp, o in part.offsets.get(group, {}).items()}


def test_commit_applies_and_abort_drops_pending_offsets() -> None:
    part = shard()
    w = Writer(part)
    w.write([(A0, om(5))])
    w.write([(A0, om(7)), (A1, om(8))], producer=(10, 0))
    # Pending: invisible, but the group has offsets and the partitions are unstable.
    assert committed(part) == {TP0: 5}
    assert part.txn_durable.partitions("a") == {TP0, TP1} and part.txn_latest.has_group("a")
    w.marker(10, commit=True)
    assert committed(part) == {TP0: 7, TP1: 8} and not part.txn_durable.txns
    assert part.latest[A0] == encode_ops([(A0, om(7))])[0][2]  # the log-order state too
    w.write([(A0, om(9))], producer=(10, 1))
    w.marker(10, commit=False)
    assert committed(part) == {TP0: 7, TP1: 8} and not part.txn_latest.txns
    w.marker(99, commit=True)  # a marker of a producer with nothing pending changes nothing
    assert committed(part) == {TP0: 7, TP1: 8}


def test_interleaved_producers_and_plain_commits_keep_log_order() -> None:
    part = shard()
    w = Writer(part)
    w.write([(A0, om(1))], producer=(1, 0))  # offset 0
    w.write([(A0, om(2)), (A1, om(2))], producer=(2, 0))  # 1, 2
    w.write([(A1, om(3))])  # 3: a plain commit after producer 2's offset of t-1
    w.write([(B0, om(4))], producer=(1, 0))  # 4: another group, same transaction
    w.marker(2, commit=True)
    # Producer 2's t-0 is committed; its t-1 is older than the plain commit and loses.
    assert committed(part) == {TP0: 2, TP1: 3}
    assert part.txn_durable.partitions("a") == {TP0} and part.txn_durable.partitions("b") == {TP0}
    w.marker(1, commit=True)
    # Producer 1's t-0 record (offset 0) is older than producer 2's (offset 1): 2 stays.
    assert committed(part) == {TP0: 2, TP1: 3} and committed(part, "b") == {TP0: 4}
    assert part.group_ids() == {"a", "b"}


def test_a_tombstone_removes_pending_offsets_and_groups_with_only_pending_ones_count() -> None:
    part = shard()
    w = Writer(part)
    w.write([(B0, om(1))], producer=(3, 0))
    assert part.group_ids() == {"b"} and committed(part, "b") == {}
    w.write([(B0, None)])  # DeleteGroups / OffsetDelete: the pending offset goes too
    assert not part.txn_durable.has_group("b") and not part.txn_latest.has_group("b")
    w.marker(3, commit=True)
    assert committed(part, "b") == {}


def write_log(lg: Log, steps: list[tuple[str, Any]]) -> None:
    """Append steps to a real offsets log: ("plain", ops), ("txn", (pid, epoch, ops)),
    ("marker", (pid, epoch, commit))."""
    for kind, arg in steps:
        if kind == "plain":
            lg.append(build_batches(((op[1], op[2]) for op in arg), 0))
        elif kind == "txn":
            pid, epoch, ops = arg
            lg.append(
                build_transactional_batch(((op[1], op[2]) for op in ops), 0, pid, epoch),
                origin_coordinator=True,
            )
        else:
            pid, epoch, commit = arg
            lg.append_marker(pid, epoch, ControlType.COMMIT if commit else ControlType.ABORT, 0)


def replay(lg: Log) -> _Partition:
    part = shard(lg)
    for entries in read_entries(lg, lg.log_start_offset, lg.log_end_offset, part.decode):
        part.replay_entries(entries)
    return part


def open_log(d: Path) -> Log:
    return Log.open(d, offsets_log_config(None, 1 << 20), topic="__consumer_offsets", partition=0)


HISTORY: list[tuple[str, Any]] = [
    ("plain", encode_ops([(A0, om(1)), (GroupKey("a"), StoredGroup("consumer", 4, "range", "m-1", 7))])),
    ("txn", (7, 0, encode_ops([(A0, om(2)), (A1, om(2))]))),
    ("txn", (8, 3, encode_ops([(A1, om(5))]))),
    ("plain", encode_ops([(A1, om(3))])),  # after both transactions' t-1 offsets
    ("txn", (9, 0, encode_ops([(B0, om(6))]))),
    ("marker", (7, 0, True)),
    ("marker", (9, 0, False)),
    ("txn", (10, 0, encode_ops([(A0, om(11))]))),  # still open at the end
]


def test_replay_applies_markers_in_log_order_and_keeps_open_transactions(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "p")
    try:
        write_log(lg, HISTORY)
        part = replay(lg)
        assert committed(part) == {TP0: 2, TP1: 3} and committed(part, "b") == {}
        # Producers 8 (t-1, older than the plain commit) and 10 (t-0) are still open.
        assert set(part.txn_durable.txns) == set(part.txn_latest.txns) == {8, 10}
        assert part.txn_durable.partitions("a") == {TP0, TP1}
        assert part.group_ids() == {"a"}
        # Their markers come later (Broker.on_txn_marker): the same outcome as in the log.
        part.apply_marker(10, commit=True)
        part.apply_marker(8, commit=True)
        assert committed(part) == {TP0: 11, TP1: 3}
        # The log says the same once the markers are in it.
        write_log(lg, [("marker", (10, 0, True)), ("marker", (8, 3, True))])
        again = replay(lg)
        assert again.offsets == part.offsets and again.latest == part.latest
    finally:
        lg.close()


def test_a_compaction_dump_restates_pending_offsets_in_their_order(tmp_path: Path) -> None:
    """The dump (``dump_writes``) appended after a roll, the log start moved past the old
    records: the replay of what is left has the same committed and pending state, and
    the later markers end the restated transactions as they would have the originals."""
    lg = open_log(tmp_path / "p")
    try:
        write_log(lg, HISTORY)
        reference = replay(lg)
        assert reference.compactable()  # producer 8's and 10's transactions are open in the log ...
        write_log(lg, [("marker", (10, 0, True))])
        # ... but a marker written and not yet applied here holds compaction back.
        assert not reference.compactable()
        reference.apply_marker(10, commit=True)
        assert reference.compactable()
        writes = reference.dump_writes()
        assert [p for p, _ in writes] == [None, (8, 3), None]  # t-1's pending offset before the plain one
        lg.roll()
        start = lg.log_end_offset
        for producer, ops in writes:
            if producer is None:
                lg.append(build_batches(((op[1], op[2]) for op in ops), 0))
            else:
                lg.append(
                    build_transactional_batch(((op[1], op[2]) for op in ops), 0, *producer),
                    origin_coordinator=True,
                )
        lg.flush()
        lg.advance_log_start_offset(start)
        lg.apply_retention()
        dumped = replay(lg)
        assert dumped.offsets == reference.offsets and dumped.groups == reference.groups
        assert set(dumped.txn_durable.txns) == {8} and dumped.txn_durable.partitions("a") == {TP1}
        # Producer 8 commits after the compaction: its offset is still older than the plain one.
        write_log(lg, [("marker", (8, 3, True))])
        reference.apply_marker(8, commit=True)
        assert replay(lg).offsets == reference.offsets == {"a": {TP0: om(11), TP1: om(3)}}
    finally:
        lg.close()


def test_the_dump_of_a_later_transactional_offset_keeps_it_after_the_plain_one(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "p")
    try:
        history: list[tuple[str, Any]] = [
            ("plain", encode_ops([(A0, om(1))])),
            ("txn", (4, 0, encode_ops([(A0, om(2))]))),
        ]
        write_log(lg, history)
        part = replay(lg)
        writes: list[tuple[Producer | None, list[Op]]] = part.dump_writes()
        assert [p for p, _ in writes] == [None, (4, 0)]
        lg.roll()
        start = lg.log_end_offset
        for producer, ops in writes:
            if producer is None:
                lg.append(build_batches(((op[1], op[2]) for op in ops), 0))
            else:
                lg.append(
                    build_transactional_batch(((op[1], op[2]) for op in ops), 0, *producer),
                    origin_coordinator=True,
                )
        lg.advance_log_start_offset(start)
        write_log(lg, [("marker", (4, 0, True))])
        assert committed(replay(lg)) == {TP0: 2}
    finally:
        lg.close()


async def test_kip447_group_metadata_checks(h: Harness) -> None:
    """A transactional commit's group metadata is checked as Kafka's
    ClassicGroup.validateOffsetCommit checks it for transactions."""
    from broker.groups.types import TxnOffsetCommitRequest

    (member,) = await h.stable_group(1)
    manager = h.coord._offsets

    def check(**kw: Any) -> None:
        manager._txn_group(TxnOffsetCommitRequest(kw.pop("group_id", "g"), 1, 0, (), **kw))

    check(generation_id=member.generation_id, member_id=member.member_id)
    check()  # before KIP-447 producers send no group metadata: accepted in any state
    with pytest.raises(IllegalGenerationError):
        check(generation_id=member.generation_id + 1, member_id=member.member_id)
    with pytest.raises(IllegalGenerationError):
        check(member_id=member.member_id)  # a member id with generation -1 on a Stable group
    with pytest.raises(UnknownMemberIdError):
        check(generation_id=member.generation_id, member_id="someone-else")
    with pytest.raises(UnknownMemberIdError):
        check(generation_id=member.generation_id, member_id=member.member_id, group_instance_id="i-1")
    with pytest.raises(IllegalGenerationError):
        check(group_id="nobody", generation_id=1, member_id="m")  # no such group
    check(group_id="simple", member_id="m")  # a new simple group, generation -1
    assert "simple" in h.coord._groups.groups


async def test_static_member_fencing(h: Harness) -> None:
    from broker.groups.types import TxnOffsetCommitRequest

    (member,) = await h.through_initial_delay(h.join(instance="i-1"))
    await h.sync("g", member.member_id, member.generation_id, {}, instance="i-1")
    manager = h.coord._offsets
    ok = TxnOffsetCommitRequest("g", 1, 0, (), member.generation_id, member.member_id, "i-1")
    manager._txn_group(ok)
    with pytest.raises(FencedInstanceIdError):
        manager._txn_group(TxnOffsetCommitRequest("g", 1, 0, (), member.generation_id, "old-id", "i-1"))
