"""hot.records against independent v2 codecs: kafka-python and aiokafka (C extension and pure Python).

Bytes built by each side must decode identically on the other, for every codec, with CRCs that
validate on both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kafka.codec
import pytest
from aiokafka.record import default_records as aio_default
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER
from aiokafka.record.control_record import ControlRecord as AioControlRecord
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import ControlRecord as KafkaControlRecord
from kafka.record.default_records import DefaultRecordBatch as KafkaBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaBuilder
from kafka.record.memory_records import MemoryRecords as KafkaMemoryRecords
from kafka.record.memory_records import MemoryRecordsBuilder as KafkaMemoryRecordsBuilder
from kafka.record.util import calc_crc32c

from hot.batch import Compression, TimestampType
from hot.records import (
    ControlType,
    Header,
    Record,
    RecordInput,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_batches,
    parse_control_record,
)

# (key, value, headers, timestamp) as the foreign libraries take and return them.
Row = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]

AIO_BUILDERS: dict[str, Any] = {
    "aiokafka-c": aio_default.DefaultRecordBatchBuilder,
    "aiokafka-py": aio_default._DefaultRecordBatchBuilderPy,
}
AIO_READERS: dict[str, Any] = {
    "aiokafka-c": aio_default.DefaultRecordBatch,
    "aiokafka-py": aio_default._DefaultRecordBatchPy,
}


def kafka_python_has(codec: Compression) -> bool:
    # kafka-python's snappy goes through the optional python-snappy package.
    return codec is not Compression.SNAPPY or kafka.codec.has_snappy()


def need_codec(codec: Compression) -> None:
    if not kafka_python_has(codec):
        pytest.skip("kafka-python has no snappy codec (python-snappy not installed)")


def sample_rows(n: int = 40) -> list[Row]:
    rows: list[Row] = []
    for i in range(n):
        key = None if i % 7 == 3 else b"key-%d" % (i % 5)
        value = None if i % 11 == 5 else b"value %d " % i * (1 + i % 9)
        headers: list[tuple[str, bytes | None]] = [("trace", b"%d" % i)] if i % 3 == 0 else []
        if i % 4 == 1:
            headers += [("ünï", None), ("empty", b"")]
        rows.append((key, value, headers, 1_700_000_000_000 + (i * 37) % 500 - 100))
    return rows


def to_inputs(rows: list[Row]) -> list[RecordInput]:
    return [RecordInput(k, v, tuple(Header(hk, hv) for hk, hv in h), ts) for k, v, h, ts in rows]


def ours_as_rows(records: tuple[Record, ...]) -> list[tuple[int, Row]]:
    return [(r.offset, (r.key, r.value, [(h.key, h.value) for h in r.headers], r.timestamp)) for r in records]


def foreign_as_rows(records: Any) -> list[tuple[int, Row]]:
    return [
        (
            r.offset,
            (
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                [(hk, None if hv is None else bytes(hv)) for hk, hv in r.headers],
                r.timestamp,
            ),
        )
        for r in records
    ]


def compressible_rows() -> list[Row]:
    # Foreign builders silently fall back to no compression when it does not pay off.
    return sample_rows()


# --- foreign builders -> our decoder -------------------------------------------------------


def build_kafka_python(rows: list[Row], codec: Compression, base_offset: int) -> bytes:
    b = KafkaMemoryRecordsBuilder(magic=2, compression_type=int(codec), batch_size=1 << 24)
    for k, v, h, ts in rows:
        assert b.append(ts, k, v, h) is not None
    b.close()
    return with_base_offset(b.buffer(), base_offset)


def with_base_offset(raw: bytes | bytearray, base_offset: int) -> bytes:
    """Producers leave baseOffset 0 for the broker to assign (outside the CRC); do what the broker does."""
    return base_offset.to_bytes(8, "big") + bytes(raw[8:])


def build_aio(name: str, rows: list[Row], codec: Compression, base_offset: int) -> bytes:
    b = AIO_BUILDERS[name](
        magic=2,
        compression_type=int(codec),
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for i, (k, v, h, ts) in enumerate(rows):
        assert b.append(i, ts, k, v, h) is not None
    return with_base_offset(b.build(), base_offset)


FOREIGN_BUILDERS: dict[str, Callable[[list[Row], Compression, int], bytes]] = {
    "kafka-python": build_kafka_python,
    **{name: (lambda rows, c, o, name=name: build_aio(name, rows, c, o)) for name in AIO_BUILDERS},
}


def read_kafka_python(raw: bytes) -> list[list[tuple[int, Row]]]:
    out = []
    mr = KafkaMemoryRecords(raw)
    while (batch := mr.next_batch()) is not None:
        assert batch.validate_crc()
        out.append(foreign_as_rows(batch))
    return out


def read_aio(name: str, raw: bytes) -> list[list[tuple[int, Row]]]:
    out = []
    pos = 0
    for b in decode_batches(raw):  # our framing, their decoding of each batch
        batch = AIO_READERS[name](raw[pos : pos + b.size])
        assert batch.validate_crc()
        out.append(foreign_as_rows(batch))
        pos += b.size
    return out


def read_aio_memory_records(raw: bytes) -> list[list[tuple[int, Row]]]:
    out = []
    mr = AioMemoryRecords(raw)
    while (batch := mr.next_batch()) is not None:
        assert batch.validate_crc()
        out.append(foreign_as_rows(batch))
    return out


FOREIGN_READERS: dict[str, Callable[[bytes], list[list[tuple[int, Row]]]]] = {
    "kafka-python": read_kafka_python,
    "aiokafka-memoryrecords": read_aio_memory_records,
    **{name: (lambda raw, name=name: read_aio(name, raw)) for name in AIO_READERS},
}


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("builder", list(FOREIGN_BUILDERS))
def test_foreign_built_decodes_identically(builder: str, codec: Compression) -> None:
    if builder == "kafka-python":
        need_codec(codec)
    rows = compressible_rows()
    raw = FOREIGN_BUILDERS[builder](rows, codec, 500)
    batch = decode_batch(raw)
    assert batch.compression is codec  # the foreign builder really compressed
    assert batch.size == len(raw) and batch.base_offset == 500 and batch.last_offset == 500 + len(rows) - 1
    assert batch.max_timestamp == max(ts for *_, ts in rows)
    expected = [(500 + i, row) for i, row in enumerate(rows)]
    assert ours_as_rows(batch.records) == expected
    # ... and the foreign readers agree with both us and the builder.
    for name, reader in FOREIGN_READERS.items():
        if name == "kafka-python" and not kafka_python_has(codec):
            continue
        assert reader(raw) == [expected], name


@pytest.mark.parametrize("codec", list(Compression))
def test_ours_decodes_identically_abroad(codec: Compression) -> None:
    rows = compressible_rows()
    raws = [
        build_batch(to_inputs(rows[:25]), base_offset=10, compression=codec),
        build_batch(to_inputs(rows[25:]), base_offset=35, compression=codec, base_timestamp=0),
    ]
    stream = b"".join(raws)
    expected = [
        [(10 + i, row) for i, row in enumerate(rows[:25])],
        [(35 + i, row) for i, row in enumerate(rows[25:])],
    ]
    assert [ours_as_rows(b.records) for b in decode_batches(stream)] == expected
    for name, reader in FOREIGN_READERS.items():
        if name == "kafka-python" and not kafka_python_has(codec):
            continue
        assert reader(stream) == expected, name
    # Header fields as seen by kafka-python's batch object.
    kb = KafkaBatch(raws[1])
    assert (kb.base_offset, kb.last_offset_delta, kb.compression_type) == (35, len(rows) - 26, int(codec))
    assert (kb.first_timestamp, kb.max_timestamp) == (0, max(ts for *_, ts in rows[25:]))


@pytest.mark.parametrize("codec", list(Compression))
def test_producer_state_both_ways(codec: Compression) -> None:
    need_codec(codec)
    rows = compressible_rows()[:20]
    # ours -> kafka-python
    raw = build_batch(
        to_inputs(rows),
        compression=codec,
        producer_id=77,
        producer_epoch=3,
        base_sequence=1000,
        transactional=True,
        partition_leader_epoch=9,
    )
    kb = KafkaBatch(raw)
    assert kb.validate_crc()
    assert (kb.producer_id, kb.producer_epoch, kb.base_sequence, kb.is_transactional) == (77, 3, 1000, True)
    assert (kb.leader_epoch, kb.is_control_batch, kb.timestamp_type) == (9, False, 0)
    # kafka-python -> ours
    kbuilder = KafkaBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=True,
        producer_id=88,
        producer_epoch=4,
        base_sequence=2000,
        batch_size=1 << 24,
    )
    for i, (k, v, h, ts) in enumerate(rows):
        kbuilder.append(i, ts, k, v, h)
    ours = decode_batch(bytes(kbuilder.build()))
    assert (ours.producer_id, ours.producer_epoch, ours.base_sequence) == (88, 4, 2000)
    assert ours.is_transactional and not ours.is_control and ours.compression is codec


def test_log_append_time_both_ways() -> None:
    rows = compressible_rows()[:5]
    raw = build_batch(to_inputs(rows), timestamp_type=TimestampType.LOG_APPEND_TIME)
    max_ts = max(ts for *_, ts in rows)
    assert [r.timestamp for r in KafkaBatch(raw)] == [max_ts] * 5
    assert [r.timestamp for r in aio_default.DefaultRecordBatch(raw)] == [max_ts] * 5
    assert [r.timestamp for r in decode_batch(raw)] == [max_ts] * 5


@pytest.mark.parametrize("kind", list(ControlType))
def test_control_batches_both_ways(kind: ControlType) -> None:
    raw = build_control_batch(kind, producer_id=5, producer_epoch=1, coordinator_epoch=12, base_offset=99)
    kb = KafkaBatch(raw)
    assert kb.validate_crc() and kb.is_control_batch and kb.is_transactional
    (rec,) = list(kb)
    assert isinstance(rec, KafkaControlRecord)
    assert (rec.offset, rec.version, rec.type, rec.commit) == (99, 0, int(kind), kind is ControlType.COMMIT)
    ab = aio_default.DefaultRecordBatch(raw)
    assert ab.validate_crc() and ab.is_control_batch
    (arec,) = list(ab)
    assert AioControlRecord.parse(bytes(arec.key)) == (
        COMMIT_MARKER if kind is ControlType.COMMIT else ABORT_MARKER
    )
    # A control batch as a Java coordinator writes it, built here with kafka-python's primitives.
    builder = KafkaBuilder(
        magic=2, compression_type=0, is_transactional=True, producer_id=5, producer_epoch=1, base_sequence=-1,
        batch_size=1 << 20,
    )  # fmt: skip
    builder.append(0, 1234, KafkaControlRecord.KEY_STRUCT.pack(0, int(kind)), b"\x00\x00\x00\x00\x00\x0c", [])
    foreign = bytearray(builder.build())
    foreign[22] |= 0x20  # control bit (kafka-python never sets it itself): fix the CRC after
    foreign[17:21] = calc_crc32c(bytes(foreign[21:])).to_bytes(4, "big")
    ours = decode_batch(bytes(foreign))
    assert ours.is_control
    marker = parse_control_record(ours.records[0])
    assert (marker.type, marker.coordinator_epoch) == (int(kind), 12)


# --- randomised, both directions ------------------------------------------------------------

row_st = st.tuples(
    st.none() | st.binary(max_size=30),
    st.none() | st.binary(max_size=30) | st.just(b"abc" * 200),
    st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=10)), max_size=3),
    st.integers(0, 10**13),
)


@settings(derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(row_st, min_size=1, max_size=10),
    codec=st.sampled_from(list(Compression)),
    builder=st.sampled_from(sorted(FOREIGN_BUILDERS)),
)
def test_random_both_ways(rows: list[Row], codec: Compression, builder: str) -> None:
    if builder == "kafka-python" and not kafka_python_has(codec):
        builder = "aiokafka-c"
    expected = [(i, (k, v, h, ts)) for i, (k, v, h, ts) in enumerate(rows)]
    # foreign -> ours (the builder may have fallen back to no compression; content must match)
    assert ours_as_rows(decode_batch(FOREIGN_BUILDERS[builder](rows, codec, 0)).records) == expected
    # ours -> foreign
    raw = build_batch(to_inputs(rows), compression=codec)
    for name, reader in FOREIGN_READERS.items():
        if name == "kafka-python" and not kafka_python_has(codec):
            continue
        assert reader(raw) == [expected], name
