"""Issue 18 §1 end to end: a batch with a correct CRC but malformed records is refused as
Kafka refuses it, nothing of it is stored, the connection stays usable, and a consumer reads
every good record behind it. Also Produce v8+ record errors, zstd before Produce v7, and the
maxTimestamp of a batch sent with -1 (ListOffsets by timestamp)."""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from crc32c import crc32c

from hot.batch import HEADER
from hot.records import RecordInput, build_batch, encode_varint, encode_varlong
from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)

BASE_TS = 1_700_000_000_000


def sealed(payload: bytes, *, count: int, max_ts: int, base_ts: int = BASE_TS) -> bytes:
    head = bytearray(
        HEADER.pack(0, 49 + len(payload), -1, 2, 0, 0, count - 1, base_ts, max_ts, -1, -1, -1, count)
    )
    struct.pack_into(">I", head, 17, crc32c(payload, crc32c(bytes(head[21:]))))
    return bytes(head) + payload


def _record(off: int, key_length: bytes, key: bytes, value: bytes, ts_delta: int = 0) -> bytes:
    body = b"\x00" + encode_varlong(ts_delta) + encode_varint(off) + key_length + key
    body += encode_varint(len(value)) + value + b"\x00"
    return encode_varint(len(body)) + body


def malformed_batch() -> bytes:
    """The issue's reproduction: header count 3, two records, the second with a 6-byte
    key-length varint; the CRC is correct."""
    first = _record(0, encode_varint(3), b"bad", b"never stored")
    second = _record(1, b"\x86\x80\x80\x80\x80\x00", b"bad", b"never stored")  # 3, in 6 bytes
    return sealed(first + second, count=3, max_ts=BASE_TS)


def produce_raw(client: KafkaClient, version: int, topic: str, records: bytes) -> object:
    req = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=(
            ProduceTopicData(name=topic, partition_data=(ProducePartitionData(index=0, records=records),)),
        ),
    )
    return client._call(ApiKey.PRODUCE, version, req).responses[0].partition_responses[0]


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for v in values:
        p.produce(topic, v, partition=0)
        p.flush(30)  # one batch each
    assert p.flush(30) == 0


def consume_all(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < expect and time.monotonic() < deadline:
            for m in c.consume(100, timeout=0.5):
                assert m.error() is None, m.error()
                out.append(m.value())
        # nothing more follows
        out += [m.value() for m in c.consume(100, timeout=1.0) if m.error() is None]
    finally:
        c.close()
    return out


def check_refusal_and_recovery(bootstrap: str, leader: str, topic: str) -> None:
    """Produce 3, the malformed batch on a raw connection to the partition leader (then a good
    batch on the same connection), 3 more; a consumer from offset 0 reads exactly the good ones."""
    produce(bootstrap, topic, [b"a0", b"a1", b"a2"])
    with KafkaClient.connect(HostPort.parse(leader)) as c:
        r = produce_raw(c, 3, topic, malformed_batch())
        assert r.error_code == E.INVALID_RECORD  # type: ignore[attr-defined]
        r = produce_raw(c, 9, topic, malformed_batch())
        assert r.error_code == E.INVALID_RECORD  # type: ignore[attr-defined]
        assert r.record_errors and r.record_errors[0].batch_index == 1  # type: ignore[attr-defined]
        assert "longer than 5 bytes" in r.record_errors[0].batch_index_error_message  # type: ignore[attr-defined]
        assert "record 1" in r.error_message  # type: ignore[attr-defined]
        corrupt = bytearray(malformed_batch())
        corrupt[-1] ^= 1
        assert produce_raw(c, 3, topic, bytes(corrupt)).error_code == E.CORRUPT_MESSAGE  # type: ignore[attr-defined]
        r = produce_raw(c, 3, topic, build_batch([RecordInput(None, b"same-connection")]))
        assert (r.error_code, r.base_offset) == (0, 3)  # type: ignore[attr-defined]
    produce(bootstrap, topic, [b"b0", b"b1", b"b2"])
    assert consume_all(bootstrap, topic, 7) == [b"a0", b"a1", b"a2", b"same-connection", b"b0", b"b1", b"b2"]


def test_malformed_records_are_refused_and_the_partition_stays_readable(broker: BrokerProcess) -> None:
    topic = f"valid-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    check_refusal_and_recovery(broker.bootstrap, broker.bootstrap, topic)


def test_zstd_needs_produce_v7_and_max_timestamp_is_stored(broker: BrokerProcess) -> None:
    topic = f"zstd-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    zstd = build_batch([RecordInput(None, b"z")], compression=4)  # type: ignore[arg-type]
    with KafkaClient.connect(HostPort.parse(broker.bootstrap)) as c:
        # an old client's batch: maxTimestamp -1, records at BASE_TS + 0, 10, 20
        records = b"".join(_record(i, encode_varint(1), b"k", b"v", ts_delta=10 * i) for i in range(3))
        r = produce_raw(c, 3, topic, sealed(records, count=3, max_ts=-1))
        assert (r.error_code, r.base_offset) == (0, 0)  # type: ignore[attr-defined]
        assert c.list_offsets([(topic, 0)], BASE_TS + 15) == {(topic, 0): 2}
        assert c.list_offsets([(topic, 0)], BASE_TS + 21) == {(topic, 0): -1}
        assert produce_raw(c, 6, topic, zstd).error_code == E.UNSUPPORTED_COMPRESSION_TYPE  # type: ignore[attr-defined]
        r = produce_raw(c, 7, topic, zstd)
        assert (r.error_code, r.base_offset) == (0, 3)  # type: ignore[attr-defined]
