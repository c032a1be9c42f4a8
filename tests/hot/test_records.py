"""hot.records: golden bytes, varints, round trips, framing and corruption detection."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot.batch import HEADER, HEADER_SIZE, Compression, TimestampType, parse_header
from hot.compression import compress, decompress
from hot.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    StrataError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from hot.records import (
    BatchFramer,
    ControlType,
    Header,
    Record,
    RecordBatch,
    RecordInput,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_batches,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    parse_control_record,
    varint_size,
)

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)


def crc32c_reference(data: bytes) -> int:
    """Bitwise CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), independent of the crc32c package."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def seal(
    payload: bytes,
    *,
    records_count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    magic: int = 2,
    base_offset: int = 0,
    base_timestamp: int = 1000,
) -> bytes:
    """A batch around an arbitrary (possibly malformed) records payload, with a *correct* CRC."""
    lod = records_count - 1 if last_offset_delta is None else last_offset_delta
    head = bytearray(
        HEADER.pack(
            base_offset, 49 + len(payload), -1, magic, 0, attributes, lod, base_timestamp, base_timestamp,
            -1, -1, -1, records_count,
        )
    )  # fmt: skip
    struct.pack_into(">I", head, 17, crc32c_reference(bytes(head[21:]) + payload))
    return bytes(head) + payload


def test_crc_reference_check_value() -> None:
    assert crc32c_reference(b"123456789") == 0xE3069283  # the standard CRC-32C check value


# --- golden bytes --------------------------------------------------------------------------

GOLDEN_RECORDS = [
    RecordInput(b"k", b"v", timestamp=1000),
    RecordInput(None, b"hello", (Header("h", b"x"), Header("n", None)), timestamp=1005),
]
# Hand-checked field by field against the protocol guide's RecordBatch / Record layout.
GOLDEN_HEX = (
    "0000000000000005"  # baseOffset 5
    "0000004d"  # batchLength 77 = 89 bytes total - 12
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic 2
    "ace4b2e0"  # crc: CRC-32C of everything from attributes on (asserted below by a bitwise CRC)
    "0000"  # attributes: no codec, CREATE_TIME, not transactional, not control
    "00000001"  # lastOffsetDelta 1
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003ed"  # maxTimestamp 1005
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000002"  # recordsCount 2
    # record 0
    "10"  # length zigzag(8): the 8 bytes that follow
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "02" "6b"  # keyLength 1, b"k"
    "02" "76"  # valueLength 1, b"v"
    "00"  # headers count 0
    # record 1
    "24"  # length zigzag(18)
    "00"  # attributes
    "0a"  # timestampDelta zigzag(5): 1005 - 1000
    "02"  # offsetDelta zigzag(1)
    "01"  # keyLength zigzag(-1): null key
    "0a" "68656c6c6f"  # valueLength 5, b"hello"
    "04"  # headers count 2
    "02" "68" "02" "78"  # header key "h", value b"x"
    "02" "6e" "01"  # header key "n", null value
)  # fmt: skip


def test_golden_batch() -> None:
    raw = build_batch(GOLDEN_RECORDS, base_offset=5)
    assert raw.hex() == GOLDEN_HEX
    assert struct.unpack_from(">I", raw, 17)[0] == crc32c_reference(raw[21:])
    batch = decode_batch(bytes.fromhex(GOLDEN_HEX))
    assert batch.records == (
        Record(5, 1000, b"k", b"v", ()),
        Record(6, 1005, None, b"hello", (Header("h", b"x"), Header("n", None))),
    )
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (5, 6, 7)
    assert (batch.base_timestamp, batch.max_timestamp, batch.size) == (1000, 1005, 89)
    assert batch.compression is Compression.NONE and batch.timestamp_type is TimestampType.CREATE_TIME
    assert not batch.is_control and not batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.partition_leader_epoch == -1 and batch.crc == 0xACE4B2E0
    assert len(batch) == 2 and list(batch) == list(batch.records)


# --- varints -------------------------------------------------------------------------------

VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (INT32[1], "feffffff0f"),
    (INT32[0], "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "hexed"), VARINT_VECTORS)
def test_varint_vectors(value: int, hexed: str) -> None:
    assert encode_varint(value).hex() == hexed
    assert encode_varlong(value).hex() == hexed
    assert decode_varint(bytes.fromhex(hexed)) == (value, len(hexed) // 2)
    assert decode_varlong(bytes.fromhex("ff" + hexed), 1) == (value, len(hexed) // 2 + 1)
    assert varint_size(value) == len(hexed) // 2


def test_varlong_extremes() -> None:
    assert encode_varlong(INT64[1]).hex() == "feffffffffffffffff01"
    assert encode_varlong(INT64[0]).hex() == "ffffffffffffffffff01"
    assert decode_varlong(bytes.fromhex("ffffffffffffffffff01")) == (INT64[0], 10)


@settings(derandomize=True)
@given(st.integers(*INT32), st.binary(max_size=3))
def test_varint_round_trip(value: int, tail: bytes) -> None:
    enc = encode_varint(value)
    assert len(enc) == varint_size(value) <= 5
    assert decode_varint(enc + tail) == (value, len(enc))
    assert decode_varlong(enc) == (value, len(enc))


@settings(derandomize=True)
@given(st.integers(*INT64))
def test_varlong_round_trip(value: int) -> None:
    enc = encode_varlong(value)
    assert len(enc) == varint_size(value) <= 10
    assert decode_varlong(memoryview(enc)) == (value, len(enc))


@pytest.mark.parametrize(
    ("hexed", "message"),
    [
        ("", "truncated"),
        ("80", "truncated"),
        ("ffffff", "truncated"),
        ("808080808000", "longer than 5"),
        ("ffffffff1f", "overflows 32 bits"),
    ],
)
def test_bad_varints(hexed: str, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_varint(bytes.fromhex(hexed))


def test_bad_varlongs() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        decode_varlong(b"\x80" * 10 + b"\x00")
    with pytest.raises(CorruptRecordError, match="overflows 64 bits"):
        decode_varlong(b"\xff" * 9 + b"\x03")
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varlong(b"\x80" * 4)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varlong(b"\x00", 1)


def test_encode_out_of_range() -> None:
    with pytest.raises(InvalidRecordError):
        encode_varint(INT32[1] + 1)
    with pytest.raises(InvalidRecordError):
        encode_varint(INT32[0] - 1)
    with pytest.raises(InvalidRecordError):
        encode_varlong(INT64[1] + 1)


# --- round trips ---------------------------------------------------------------------------

nullable_bytes = st.none() | st.binary(max_size=40)
headers_st = st.lists(st.builds(Header, st.text(max_size=8), nullable_bytes), max_size=3).map(tuple)
record_st = st.builds(
    RecordInput,
    key=nullable_bytes,
    value=nullable_bytes | st.just(b"z" * 300),
    headers=headers_st,
    timestamp=st.none() | st.integers(-(10**12), 10**13),
)
records_st = st.lists(record_st, min_size=1, max_size=12)


def expected(records: list[RecordInput], base_offset: int, base_ts: int) -> tuple[Record, ...]:
    return tuple(
        Record(base_offset + i, base_ts if r.timestamp is None else r.timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    )


@settings(derandomize=True, max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_st,
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(0, 1 << 40),
    base_ts=st.integers(0, 10**13),
)
def test_round_trip(records: list[RecordInput], codec: Compression, base_offset: int, base_ts: int) -> None:
    raw = build_batch(records, base_offset=base_offset, compression=codec, base_timestamp=base_ts)
    batch = decode_batch(raw)
    assert batch.records == expected(records, base_offset, base_ts)
    assert batch.compression is codec
    assert batch.size == len(raw)
    assert batch.header.records_count == len(records) == batch.header.last_offset_delta + 1
    assert batch.max_timestamp == max(r.timestamp for r in batch.records)
    assert batch.base_timestamp == base_ts


def test_producer_fields_and_flags() -> None:
    raw = build_batch(
        [RecordInput(b"a", b"1"), RecordInput(b"b", b"2")],
        base_offset=100,
        compression=Compression.ZSTD,
        producer_id=4242,
        producer_epoch=7,
        base_sequence=55,
        transactional=True,
        partition_leader_epoch=3,
        base_timestamp=123,
    )
    b = decode_batch(raw)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.partition_leader_epoch) == (4242, 7, 55, 3)
    assert b.is_transactional and not b.is_control and b.header.has_producer_id
    assert [r.timestamp for r in b] == [123, 123]


def test_default_timestamps() -> None:
    b = decode_batch(
        build_batch([RecordInput(None, b"x", timestamp=None), RecordInput(None, b"y", timestamp=7)])
    )
    now_ish = b.base_timestamp
    assert now_ish > 1_600_000_000_000  # wall-clock ms were taken
    assert [r.timestamp for r in b] == [now_ish, 7]
    assert b.max_timestamp == max(now_ish, 7)
    # The first record's timestamp is the default base timestamp; later ones may go backwards.
    b = decode_batch(
        build_batch([RecordInput(None, b"x", timestamp=50), RecordInput(None, b"y", timestamp=10)])
    )
    assert (b.base_timestamp, b.max_timestamp, [r.timestamp for r in b]) == (50, 50, [50, 10])


def test_log_append_time_uses_max_timestamp() -> None:
    raw = build_batch(
        [RecordInput(b"a", b"1", timestamp=10), RecordInput(b"b", b"2", timestamp=30)],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
    )
    b = decode_batch(raw)
    assert b.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in b] == [30, 30]


def test_big_values_and_many_records() -> None:
    big = bytes(range(256)) * 2000
    recs = [RecordInput(str(i).encode(), big if i % 100 == 0 else b"v%d" % i) for i in range(1000)]
    for codec in Compression:
        b = decode_batch(build_batch(recs, compression=codec, base_timestamp=0))
        assert [r.value for r in b] == [r.value for r in recs]
        assert b.last_offset == 999


def test_build_rejects_bad_input() -> None:
    with pytest.raises(InvalidRecordError, match="at least one"):
        build_batch([])
    with pytest.raises(InvalidRecordError, match="key must be bytes"):
        build_batch([RecordInput("text", b"v")])  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match="header"):
        build_batch([RecordInput(b"k", b"v", (("a", b"b"),))])  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match="header value"):
        build_batch([RecordInput(b"k", b"v", (Header("a", "b"),))])  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match="RecordInput"):
        build_batch([(b"k", b"v")])  # type: ignore[list-item]
    with pytest.raises(InvalidRecordError, match="out of range"):
        build_batch([RecordInput(b"k", b"v")], producer_epoch=1 << 20)
    with pytest.raises(InvalidRecordError, match="varlong"):
        build_batch(
            [RecordInput(b"k", b"v", timestamp=-(1 << 63)), RecordInput(b"k", b"v", timestamp=1 << 62)]
        )
    with pytest.raises(UnsupportedCompressionError):
        build_batch([RecordInput(b"k", b"v")], compression=6)  # type: ignore[arg-type]


def test_control_batches() -> None:
    for kind in ControlType:
        raw = build_control_batch(kind, producer_id=9, producer_epoch=2, coordinator_epoch=17, base_offset=40)
        b = decode_batch(raw)
        assert b.is_control and b.is_transactional and b.base_sequence == -1
        assert (b.producer_id, b.producer_epoch, b.base_offset, len(b)) == (9, 2, 40, 1)
        rec = b.records[0]
        assert rec.key == struct.pack(">hh", 0, kind) and rec.value == struct.pack(">hi", 0, 17)
        marker = parse_control_record(rec)
        assert (marker.type, marker.coordinator_epoch) == (kind, 17)
        assert marker.is_commit == (kind is ControlType.COMMIT) and marker.is_abort == (
            kind is ControlType.ABORT
        )
    other = parse_control_record(Record(0, 0, struct.pack(">hh", 0, 2), b"whatever"))
    assert (other.type, other.coordinator_epoch) == (2, None)
    for key, value in [
        (None, b""),
        (b"\x00", b""),
        (b"\xff\xff\x00\x01", b"\x00" * 6),
        (b"\x00\x00\x00\x01", b"\x00"),
    ]:
        with pytest.raises(CorruptRecordError):
            parse_control_record(Record(0, 0, key, value))


def test_empty_batch_without_payload() -> None:
    # What Kafka's log cleaner leaves behind to keep a producer's state: no records at all.
    raw = seal(b"", records_count=0, last_offset_delta=4, base_offset=10)
    b = decode_batch(raw)
    assert b.records == () and b.last_offset == 14


# --- several batches, framing --------------------------------------------------------------


@st.composite
def batch_streams(draw: st.DrawFn) -> tuple[bytes, list[tuple[Record, ...]]]:
    n = draw(st.integers(1, 5))
    raws: list[bytes] = []
    expects: list[tuple[Record, ...]] = []
    offset = draw(st.integers(0, 1000))
    for _ in range(n):
        recs = draw(st.lists(record_st, min_size=1, max_size=4))
        codec = draw(st.sampled_from(list(Compression)))
        raws.append(build_batch(recs, base_offset=offset, compression=codec, base_timestamp=77))
        expects.append(expected(recs, offset, 77))
        offset += len(recs)
    return b"".join(raws), expects


@settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=batch_streams(), data=st.data())
def test_decode_batches_and_partial_tail(
    stream: tuple[bytes, list[tuple[Record, ...]]], data: st.DataObject
) -> None:
    raw, expects = stream
    assert [b.records for b in decode_batches(raw)] == expects
    assert [b.records for b in decode_batches(raw, allow_partial_tail=False)] == expects
    cut = data.draw(st.integers(0, len(raw)))
    got = decode_batches(raw[:cut])
    sizes = [b.size for b in decode_batches(raw)]
    whole = 0
    while whole < len(sizes) and sum(sizes[: whole + 1]) <= cut:
        whole += 1
    assert [b.records for b in got] == expects[:whole]
    if sum(sizes[:whole]) != cut:
        with pytest.raises(CorruptRecordError, match="partial batch"):
            decode_batches(raw[:cut], allow_partial_tail=False)


@settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=batch_streams(), data=st.data())
def test_framer_random_chunkings(stream: tuple[bytes, list[tuple[Record, ...]]], data: st.DataObject) -> None:
    raw, expects = stream
    framer = BatchFramer()
    out: list[bytes] = []
    pos = 0
    while pos < len(raw):
        step = data.draw(st.integers(1, 200))
        framer.feed(raw[pos : pos + step])
        pos += step
        out.extend(framer)
    assert not framer.has_partial() and framer.buffered == 0
    assert b"".join(out) == raw
    assert [decode_batch(b).records for b in out] == expects


def test_framer_one_byte_at_a_time() -> None:
    recs = [RecordInput(b"k%d" % i, b"v" * i, (Header("i", b"%d" % i),), timestamp=i) for i in range(30)]
    raws = [
        build_batch(recs[i : i + 7], base_offset=i, compression=Compression(i % 5)) for i in range(0, 30, 7)
    ]
    stream = b"".join(raws)
    framer = BatchFramer()
    out: list[bytes] = []
    for i in range(len(stream)):
        framer.feed(stream[i : i + 1])
        batch = framer.next_batch()
        if batch is not None:
            out.append(batch)
            assert framer.next_batch() is None
        assert framer.has_partial() == (framer.buffered > 0)
    assert out == raws
    assert not framer.has_partial()
    framer.feed(raws[0][:30])
    assert framer.next_batch() is None and framer.buffered == 30 and framer.has_partial()


def test_framer_rejects_bad_streams() -> None:
    raw = build_batch([RecordInput(b"k", b"v" * 100)])
    small = BatchFramer(max_batch_size=100)
    small.feed(raw[:12])
    with pytest.raises(CorruptRecordError, match="framing limit 100"):
        small.next_batch()
    with pytest.raises(CorruptRecordError):  # stays failed
        small.feed(b"more")
    framer = BatchFramer()
    framer.feed(raw[:8] + struct.pack(">i", 10))
    with pytest.raises(CorruptRecordError, match="below minimum"):
        framer.next_batch()
    framer = BatchFramer()
    framer.feed(raw[:16] + b"\x01")
    with pytest.raises(UnsupportedMagicError):
        list(framer)
    with pytest.raises(UnsupportedMagicError):
        framer.next_batch()


# --- corruption ----------------------------------------------------------------------------


def test_every_bit_flip_is_detected() -> None:
    for raw in (bytes.fromhex(GOLDEN_HEX), build_batch(GOLDEN_RECORDS, compression=Compression.GZIP)):
        good = decode_batch(raw)
        for bit in range(len(raw) * 8):
            flipped = bytearray(raw)
            flipped[bit // 8] ^= 1 << (bit % 8)
            try:
                got = decode_batch(bytes(flipped))
            except (CorruptRecordError, UnsupportedMagicError):
                continue
            # Only baseOffset and partitionLeaderEpoch sit outside the CRC, by design (the broker
            # rewrites them); a flip there must change exactly that field.
            byte = bit // 8
            assert byte < 8 or 12 <= byte < 16, f"flip of bit {bit} went undetected"
            field = "base_offset" if byte < 8 else "partition_leader_epoch"
            assert got.header == dataclasses.replace(good.header, **{field: getattr(got.header, field)})
            assert getattr(got.header, field) != getattr(good.header, field)
            assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
                (r.key, r.value, r.headers, r.timestamp) for r in good
            ]


def test_every_truncation_is_detected() -> None:
    raw = build_batch(GOLDEN_RECORDS, compression=Compression.LZ4)
    for cut in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:cut])
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:cut], verify_crc=False)
        assert decode_batches(raw[:cut]) == []


def test_decode_at_position_ignores_neighbours() -> None:
    raw = build_batch(GOLDEN_RECORDS)
    buf = b"\xff" * 7 + raw + b"garbage"
    assert decode_batch(buf, 7).records == decode_batch(raw).records


def test_wrong_magic() -> None:
    raw = bytearray(build_batch(GOLDEN_RECORDS))
    for magic in (0, 1, 3):
        raw[16] = magic
        with pytest.raises(UnsupportedMagicError, match=f"magic {magic}"):
            decode_batch(bytes(raw))
        with pytest.raises(UnsupportedMagicError):
            decode_batches(bytes(raw))


def rec(body: bytes) -> bytes:
    """A record: zigzag length (single byte, short bodies only) + body."""
    assert len(body) < 64
    return bytes([len(body) << 1]) + body


GOOD_RECORD = rec(bytes.fromhex("00 00 00 02 6b 02 76 00"))  # key b"k", value b"v", no headers


@pytest.mark.parametrize(
    ("payload", "count", "message"),
    [
        (GOOD_RECORD + b"\x00", 1, "1 trailing bytes after 1 records"),
        (GOOD_RECORD, 2, "cannot fit"),
        (GOOD_RECORD * 2, 1, "trailing bytes"),
        (GOOD_RECORD + GOOD_RECORD[:5] + b"\x00" * 8, 2, "record 1"),
        (bytes([0x80] * 6) + b"\x00" * 10, 1, "varint longer than 5"),
        (rec(bytes.fromhex("00 00 00 02 6b 02 76 00 00")), 1, "declared length 9 but its fields span 8"),
        (rec(bytes.fromhex("00 00 00 04 6b 02 76 00")), 1, "value length 59 overruns"),
        (rec(bytes.fromhex("00 00 00 0a 6b 02 76 00")), 1, "key length 5 overruns"),
        (rec(bytes.fromhex("00 00 00 08 6b 02 76 00")), 1, "record 0 of 1 runs past the end of the 9-byte"),
        (rec(bytes.fromhex("00 00 00 01 02 76 00 00")), 1, "declared length 8 but its fields span 7"),
        (
            bytes([24]) + bytes.fromhex("00 00 00 02 6b 02 76 00") + b"\x00\x00",
            1,
            "length 12 invalid with 10 bytes",
        ),
        (rec(bytes.fromhex("00 00 00 03 02 76 00")), 1, "key length -2"),
        (rec(bytes.fromhex("00 00 00 01 03 00")), 1, "value length -2"),
        (rec(bytes.fromhex("00 00 02 01 01 00")), 1, r"offsetDelta 1 outside \[0, lastOffsetDelta 0\]"),
        (rec(bytes.fromhex("00 00 01 01 01 00")), 1, "offsetDelta -1"),
        (rec(bytes.fromhex("00 00 00 01 01 01")), 1, "header count -1"),
        (rec(bytes.fromhex("00 00 00 01 01 7e 00 00")), 1, "header count 63"),
        (rec(bytes.fromhex("00 00 00 01 01 02 01 00")), 1, "header key length -1"),
        (rec(bytes.fromhex("00 00 00 01 01 02 02 ff 00")), 1, "not valid UTF-8"),
        (rec(bytes.fromhex("00 00 00 01 01 02 02 61 03")), 1, "header value length -2"),
        (rec(bytes.fromhex("00 00 00 01 01 02 02 61 08 00")), 1, "header value length 4"),
        (rec(bytes.fromhex("00 ff ff ff ff ff ff ff ff ff ff 00 00 01 01 00")), 1, "varlong longer than 10"),
        (
            rec(bytes.fromhex("00 ff ff ff ff ff ff ff ff ff 7f 00 01 01 00")),
            1,
            "varlong at byte 2 overflows",
        ),
        (GOOD_RECORD + rec(bytes.fromhex("00 00 01 01")), 2, "record 1: length 4 invalid"),
    ],
)
def test_malformed_records(payload: bytes, count: int, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_batch(seal(payload, records_count=count, last_offset_delta=max(count - 1, 0)))


def test_good_record_helper_is_good() -> None:
    assert decode_batch(seal(GOOD_RECORD, records_count=1)).records == (Record(0, 1000, b"k", b"v"),)


def test_header_inconsistencies() -> None:
    with pytest.raises(CorruptRecordError, match="recordsCount 3 exceeds"):
        decode_batch(seal(GOOD_RECORD, records_count=3, last_offset_delta=0))
    with pytest.raises(UnsupportedCompressionError, match="codec id 5"):
        decode_batch(seal(GOOD_RECORD, records_count=1, attributes=5))
    with pytest.raises(CorruptRecordError, match="corrupt zstd"):
        decode_batch(seal(GOOD_RECORD, records_count=1, attributes=int(Compression.ZSTD)))
    # Compressed payload that holds valid records plus garbage.
    payload = compress(Compression.SNAPPY, GOOD_RECORD + b"\x00\x00")
    with pytest.raises(CorruptRecordError, match="2 trailing bytes"):
        decode_batch(seal(payload, records_count=1, attributes=int(Compression.SNAPPY)))


def test_crc_mismatch_and_skip() -> None:
    raw = bytearray(build_batch(GOLDEN_RECORDS))
    raw[-1] ^= 0x02  # null header value -> zigzag(-2) ... and the CRC no longer matches
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        decode_batch(bytes(raw))
    with pytest.raises(CorruptRecordError, match="header value length -2"):
        decode_batch(bytes(raw), verify_crc=False)


def test_bomb_limit_in_batch() -> None:
    raw = build_batch([RecordInput(None, bytes(4 << 20))], compression=Compression.ZSTD)
    assert len(raw) < 1000
    with pytest.raises(RecordTooLargeError):
        decode_batch(raw, max_uncompressed=1 << 20)
    with pytest.raises(RecordTooLargeError):
        decode_batches(raw + raw, max_uncompressed=1 << 20)
    assert decode_batch(raw, max_uncompressed=5 << 20).records[0].value == bytes(4 << 20)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), verify=st.booleans())
def test_fuzz_random_bytes(data: bytes, verify: bool) -> None:
    for buf in (data, bytes.fromhex(GOLDEN_HEX)[:61] + data):
        try:
            decode_batch(buf, verify_crc=verify)
        except StrataError:
            pass
        try:
            decode_batches(buf, verify_crc=verify)
        except StrataError:
            pass


@settings(derandomize=True, max_examples=300, deadline=None)
@given(data=st.data(), codec=st.sampled_from(list(Compression)))
def test_fuzz_mutated_payload_with_valid_crc(data: st.DataObject, codec: Compression) -> None:
    """Past the CRC: the record decoder itself must reject garbage with a StrataError."""
    raw = build_batch(GOLDEN_RECORDS * 2, compression=codec)
    h = parse_header(raw)
    payload = raw[HEADER_SIZE:]
    if codec is Compression.NONE or data.draw(st.booleans()):
        # Garbage records inside well-formed compression.
        body = bytearray(decompress(codec, payload))
        for _ in range(data.draw(st.integers(1, 6))):
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
        payload = compress(codec, bytes(body[: data.draw(st.integers(0, len(body)))]))
    else:
        # Garbage compressed stream.
        mutable = bytearray(payload)
        for _ in range(data.draw(st.integers(1, 4))):
            mutable[data.draw(st.integers(0, len(mutable) - 1))] = data.draw(st.integers(0, 255))
        payload = bytes(mutable[: data.draw(st.integers(0, len(mutable)))])
    mutated = seal(
        payload,
        records_count=data.draw(st.sampled_from([h.records_count, 0, 1, 5, 1 << 30])),
        last_offset_delta=data.draw(st.sampled_from([h.last_offset_delta, 0, 10, (1 << 31) - 1])),
        attributes=data.draw(st.sampled_from([h.attributes, h.attributes | 0x08, 7])),
    )
    try:
        batch = decode_batch(mutated)
    except StrataError:
        return
    assert isinstance(batch, RecordBatch)
    assert len(batch.records) == batch.header.records_count
