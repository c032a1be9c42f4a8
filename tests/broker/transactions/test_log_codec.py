"""``__transaction_state`` records: golden bytes from Kafka's schemas, round trips, malformed
input, the replay of a partition, and the partitioner."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.groups.types import TopicPartition
from broker.transactions.log_codec import (
    TxnLogRecordError,
    UnknownKey,
    decode_key,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from broker.transactions.partitioner import TRANSACTION_STATE_TOPIC, partition_for
from broker.transactions.replay import replay
from broker.transactions.state import MAX_EPOCH, TransactionMetadata, TransactionState
from hot.errors import InvalidRequestError

S = TransactionState

ONGOING = TransactionMetadata(
    transactional_id="tx",
    producer_id=1000,
    producer_epoch=5,
    timeout_ms=60_000,
    state=S.ONGOING,
    partitions=frozenset({TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)}),
    txn_last_update_timestamp_ms=1700,
    txn_start_timestamp_ms=1600,
    previous_producer_id=999,
    client_transaction_version=2,
)
EMPTY = dataclasses.replace(
    ONGOING,
    state=S.EMPTY,
    partitions=frozenset(),
    txn_start_timestamp_ms=-1,
    previous_producer_id=-1,
    client_transaction_version=0,
)


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


# The bytes below are written out by hand from TransactionLogKey.json and
# TransactionLogValue.json (field order, types, tags), not produced by the encoder.
KEY_TX = h("0000 0002 7478")  # version 0, STRING "tx"
COMMON = h(
    """
    00000000000003e8  0005  0000ea60  01
    """
)  # producer id 1000, epoch 5, timeout 60000, status Ongoing
TIMES = h("00000000000006a4 0000000000000640")  # last update 1700, start 1600
VALUE_V0 = (
    h("0000")
    + COMMON
    + h(
        """
        00000002
        0001 61  00000002 00000000 00000002
        0001 62  00000001 00000001
        """
    )
    + TIMES
)
VALUE_V1 = (
    h("0001")
    + COMMON
    + h(
        """
        03
        02 61  03 00000000 00000002  00
        02 62  02 00000001  00
        """
    )
    + TIMES
    + h(
        """
        02
        00 08 00000000000003e7
        02 02 0002
        """
    )
)  # tagged: previous producer id 999 (tag 0), client transaction version 2 (tag 2)
EMPTY_V0 = h("0000 00000000000003e8 0005 0000ea60 00 ffffffff 00000000000006a4 ffffffffffffffff")
EMPTY_V1 = h("0001 00000000000003e8 0005 0000ea60 00 00 00000000000006a4 ffffffffffffffff 00")


def test_key_golden_bytes() -> None:
    assert encode_key("tx") == KEY_TX
    assert decode_key(KEY_TX) == "tx"
    assert decode_key(h("0001 0002 7478")) == UnknownKey(1)


def test_value_golden_bytes_v0_and_v1() -> None:
    assert encode_value(ONGOING, 0) == VALUE_V0
    assert encode_value(ONGOING, 1) == VALUE_V1
    assert encode_value(EMPTY, 0) == EMPTY_V0
    assert encode_value(EMPTY, 1) == EMPTY_V1
    # v0 has no previous producer id nor client transaction version
    assert decode_value("tx", VALUE_V0) == dataclasses.replace(
        ONGOING, previous_producer_id=-1, client_transaction_version=0
    )
    assert decode_value("tx", VALUE_V1) == ONGOING
    assert decode_value("tx", EMPTY_V0) == EMPTY == decode_value("tx", EMPTY_V1)


def test_next_producer_id_is_tag_1() -> None:
    m = dataclasses.replace(ONGOING, state=S.PREPARE_COMMIT, next_producer_id=0x1234, previous_producer_id=-1,
                            client_transaction_version=0)  # fmt: skip
    raw = encode_value(m, 1)
    assert raw.endswith(h("01 01 08 0000000000001234"))
    assert decode_value("tx", raw) == m


def test_unknown_tags_are_skipped_and_partitions_of_empty_ignored() -> None:
    future = VALUE_V1[: -1 - 14] + h("03 00 08 00000000000003e7 02 02 0002 05 03 aabbcc")
    assert decode_value("tx", future) == ONGOING
    # a v0 Empty value that lists partitions anyway reads as none
    with_parts = h("0000 00000000000003e8 0005 0000ea60 00 00000001 0001 61 00000001 00000000") + TIMES
    assert decode_value("tx", with_parts).partitions == frozenset()


def test_record_of_dead_is_a_tombstone() -> None:
    assert encode_record(dataclasses.replace(EMPTY, state=S.DEAD)) == (KEY_TX, None)
    assert encode_record(EMPTY, 0) == (KEY_TX, EMPTY_V0)


def test_encoding_refuses_impossible_metadata() -> None:
    with pytest.raises(ValueError, match="Empty"):
        encode_value(dataclasses.replace(EMPTY, partitions=ONGOING.partitions))
    with pytest.raises(ValueError, match="version"):
        encode_value(EMPTY, 2)
    for state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        with pytest.raises(ValueError, match="never written"):
            encode_value(dataclasses.replace(ONGOING, state=state))
    with pytest.raises(InvalidRequestError):
        encode_key("x" * 40_000)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        VALUE_V1[:-1],  # truncated
        VALUE_V1 + b"\x00",  # trailing
        VALUE_V0[:-3],
        h("0002") + VALUE_V1[2:],  # unknown version
        h("0000 00000000000003e8 0005 0000ea60 09 ffffffff") + TIMES,  # unknown status
        h("0000 00000000000003e8 0005 0000ea60 06 ffffffff") + TIMES,  # Dead: a tombstone instead
        h("0000 00000000000003e8 0005 0000ea60 07 ffffffff") + TIMES,  # PrepareEpochFence
        h("0001 00000000000003e8 0005 0000ea60 01 02 00") + TIMES + h("00"),  # null topic
        h("0001 00000000000003e8 0005 0000ea60 01 02 02 61 00 00") + TIMES + h("00"),  # null ids
        h("0000 00000000000003e8 0005 0000ea60 01 fffffffe") + TIMES,  # count -2
        VALUE_V1[:-14] + h("00 08 00000000000003e7 00 02 0002"),  # tags out of order
        VALUE_V1[:-14] + h("00 04 00000000 02 02 0002"),  # wrong size of a known tag
        h("0001 00000000000003e8 0005 0000ea60 01 02 02 ff 01 00") + TIMES + h("00"),  # not UTF-8
        h("0001 00000000000003e8 0005 0000ea60 01 ffffffffff01"),  # varint too long
    ],
)
def test_malformed_values_are_refused(raw: bytes) -> None:
    with pytest.raises(TxnLogRecordError):
        decode_value("tx", raw)


def test_malformed_keys_are_refused() -> None:
    for raw in (b"\x00", h("0000 0005 7478"), h("0000 0002 747878")):
        with pytest.raises(TxnLogRecordError):
            decode_key(raw)


topics = st.text(alphabet="abc.-_é", min_size=1, max_size=5)
metadata = st.builds(
    TransactionMetadata,
    transactional_id=st.text(min_size=1, max_size=10),
    producer_id=st.integers(0, 2**63 - 1),
    timeout_ms=st.integers(1, 2**31 - 1),
    state=st.sampled_from([s for s in S if s not in (S.EMPTY, S.DEAD, S.PREPARE_EPOCH_FENCE)]),
    txn_last_update_timestamp_ms=st.integers(-1, 2**62),
    producer_epoch=st.integers(0, MAX_EPOCH),
    previous_producer_id=st.integers(-1, 2**63 - 1),
    next_producer_id=st.integers(-1, 2**63 - 1),
    partitions=st.frozensets(st.builds(TopicPartition, topics, st.integers(0, 2**31 - 1)), max_size=6),
    txn_start_timestamp_ms=st.integers(-1, 2**62),
    client_transaction_version=st.integers(0, 2),
)


@given(metadata)
def test_values_round_trip(meta: TransactionMetadata) -> None:
    assert decode_value(meta.transactional_id, encode_value(meta, 1)) == meta
    v0 = dataclasses.replace(meta, previous_producer_id=-1, next_producer_id=-1, client_transaction_version=0)
    assert decode_value(meta.transactional_id, encode_value(meta, 0)) == v0
    assert decode_key(encode_key(meta.transactional_id)) == meta.transactional_id


# --- replay -------------------------------------------------------------------------------------------


def test_replay_keeps_the_latest_record_forgets_tombstones_and_finishes_prepared_ones() -> None:
    prepared = dataclasses.replace(ONGOING, transactional_id="p", state=S.PREPARE_COMMIT)
    aborting = dataclasses.replace(
        ONGOING, transactional_id="q", state=S.PREPARE_ABORT, client_transaction_version=0
    )
    records: list[tuple[bytes | None, bytes | None]] = [
        (encode_key("tx"), encode_value(EMPTY)),
        (encode_key("gone"), encode_value(dataclasses.replace(EMPTY, transactional_id="gone"))),
        (encode_key("tx"), encode_value(ONGOING)),
        (h("0001 0002 7478"), b"whatever a newer record type is"),
        (encode_key("gone"), None),
        (encode_key("p"), encode_value(dataclasses.replace(prepared, state=S.ONGOING))),
        (encode_key("p"), encode_value(prepared)),
        (encode_key("q"), encode_value(aborting, 0)),
        (encode_key("never"), None),
    ]
    loaded = replay(records, now_ms=5000)
    assert set(loaded.transactions) == {"tx", "p", "q"}
    assert loaded.transactions["tx"] == ONGOING and loaded.unknown_keys == 1
    by_id = {t.before.transactional_id: t for t in loaded.completions}
    assert set(by_id) == {"p", "q"}
    p = by_id["p"]
    assert loaded.transactions["p"] is p.before and p.before.pending_state is S.COMPLETE_COMMIT
    assert p.before.partitions == prepared.partitions  # the markers go to these
    assert p.after.state is S.COMPLETE_COMMIT and p.after.txn_last_update_timestamp_ms == 5000
    assert by_id["q"].after.state is S.COMPLETE_ABORT


def test_replay_refuses_a_record_without_key_or_with_a_bad_value() -> None:
    with pytest.raises(TxnLogRecordError, match="no key"):
        replay([(None, b"")], now_ms=0)
    with pytest.raises(TxnLogRecordError):
        replay([(encode_key("tx"), b"\x00")], now_ms=0)


# --- partitioner -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tid", "partitions", "expected"),
    [
        ("", 50, 0),  # hashCode 0
        ("hello", 50, 99162322 % 50),  # "hello".hashCode() = 99162322
        ("Aa", 7, 2112 % 7),  # "Aa" and "BB" collide in Java
        ("BB", 7, 2112 % 7),
        ("polygenelubricants", 50, 0),  # hashCode Integer.MIN_VALUE: Kafka's abs gives 0
        ("é", 50, 233 % 50),  # UTF-16 code unit 0xe9
    ],
)
def test_partition_for_is_kafkas(tid: str, partitions: int, expected: int) -> None:
    assert partition_for(tid, partitions) == expected
    assert TRANSACTION_STATE_TOPIC == "__transaction_state"


def test_partition_for_needs_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for("x", 0)
