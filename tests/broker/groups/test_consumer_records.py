"""A KIP-848 group's records in ``__consumer_offsets`` (broker.groups.consumer_records):
Kafka's byte layouts, and a group taken mid-rebalance to its records and back (what a
new coordinator loads) continuing exactly where it was."""

from __future__ import annotations

import uuid

import pytest

from broker.groups.consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    ConsumerKey,
    ConsumerRecordError,
    CurrentAssignmentValue,
    GroupEpochValue,
    decode_consumer_value,
    encode_consumer_value,
    group_records,
    record_diff,
    restore_group,
)
from broker.groups.offsets import decode_op, encode_ops
from broker.groups.offsets_codec import encode_key
from tests.broker.groups.test_consumer_group import G, Harness

IDS = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}
NAMES = {v: k for k, v in IDS.items()}


def test_kafka_byte_layouts() -> None:
    # Keys: INT16 record type, then the non-flexible strings.
    assert encode_key(ConsumerKey(CURRENT_ASSIGNMENT, "g", "m")) == b"\x00\x08\x00\x01g\x00\x01m"
    assert encode_key(ConsumerKey(GROUP_METADATA, "g")) == b"\x00\x03\x00\x01g"
    # Values: INT16 version 0, flexible body, empty tagged fields.
    assert encode_consumer_value(GroupEpochValue(7)) == b"\x00\x00\x00\x00\x00\x07\x00"
    tid = IDS["t"]
    v = CurrentAssignmentValue(5, 4, 1, ((tid, (0, 2)),), ())
    raw = encode_consumer_value(v)
    assert raw == (
        b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00\x00\x00\x04" + b"\x01"
        + b"\x02" + tid.bytes + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x02" + b"\x00"
        + b"\x01" + b"\x00"
    )  # fmt: skip
    key, _, _, decoded = decode_op(b"\x00\x08\x00\x01g\x00\x01m", raw)
    assert key == ConsumerKey(CURRENT_ASSIGNMENT, "g", "m") and decoded == v
    with pytest.raises(ConsumerRecordError):
        decode_consumer_value(CURRENT_ASSIGNMENT, raw + b"x")


def test_a_group_mid_rebalance_survives_its_records() -> None:
    h = Harness(t=6, u=2)
    h.join("a", "t", "u")
    h.settle()
    h.join("b", "t")
    h.beat("a")  # a is told to revoke; b waits for the partitions
    group = h.groups.groups[G]
    records = group_records(group, IDS.get)
    # Through the log: encoded, decoded (as a replay reads them).
    ops = encode_ops(records.items())
    replayed = {op[0]: op[3] for op in (decode_op(k, raw) for _, k, raw, _ in ops)}
    restored = restore_group(G, replayed, NAMES.get)  # type: ignore[arg-type]
    assert restored is not None
    assert restored.view() == group.view()
    assert restored.subscribed_partitions == group.subscribed_partitions
    # The restored group goes on from there: the same heartbeats converge it.
    h.groups.drop(G)
    h.groups.adopt(restored)
    epoch = restored.group_epoch
    h.settle()
    after = h.groups.groups[G]
    assert after.group_epoch == epoch  # loading changed nothing the assignment depends on
    assert {m.state.value for m in after.members.values()} == {"stable"}


def test_diff_writes_changes_and_tombstones() -> None:
    k1, k2 = ConsumerKey(GROUP_METADATA, "g"), ConsumerKey(CURRENT_ASSIGNMENT, "g", "m")
    assert record_diff({}, {k1: b"a"}) == [(k1, b"a")]
    assert record_diff({k1: b"a", k2: b"b"}, {k1: b"a", k2: b"b"}) == []
    # the group's metadata tombstone comes last
    assert record_diff({k1: b"a", k2: b"b"}, {}) == [(k2, None), (k1, None)]
