"""hot.record_validation: every rule on golden bytes, truncation at every byte, the leader's
append (maxTimestamp rewrite, nothing stored on refusal, followers not re-judging), and a
fuzzer against kafka-python's reader."""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KafkaBatch

from hot import record_validation
from hot.batch import HEADER, HEADER_SIZE, Compression, TimestampType, parse_header, validate_batch
from hot.compression import compress
from hot.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    StrataError,
    UnsupportedCompressionError,
)
from hot.record_validation import check_batch, check_records, iter_client_batches, uses_zstd
from hot.records import Header, RecordInput, build_batch, decode_batch, encode_varint, encode_varlong
from kwire.error_table import INVALID_RECORD, INVALID_TIMESTAMP, kafka_code
from tests.hot.hotlib import open_log

BASE_TS = 1_700_000_000_000


@pytest.fixture(autouse=True, scope="module", params=["c", "python"])
def record_walk(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test runs with the C walk (what the append uses when hot/_recordwalk.c is built;
    tests/hot/test_record_walk_native.py fails in CI when it is not) and with the Python one."""
    saved = record_validation._native, record_validation.NATIVE
    if request.param == "python":
        record_validation._native, record_validation.NATIVE = None, False
    elif not record_validation.NATIVE:
        pytest.skip("hot._recordwalk is not built (pip install -e .)")
    yield request.param
    record_validation._native, record_validation.NATIVE = saved


# --- raw building blocks -------------------------------------------------------------------


def overlong(value: int, size: int) -> bytes:
    """``value`` as a zigzag varint padded to ``size`` bytes with continuation bits."""
    u = (value << 1) ^ (value >> 63)
    out = bytearray()
    for _ in range(size - 1):
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def field(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def record(
    off: int,
    *,
    ts: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: Sequence[tuple[bytes, bytes | None]] = (),
    attributes: bytes = b"\x00",
    body: bytes | None = None,
    length_delta: int = 0,
) -> bytes:
    if body is None:
        body = attributes + encode_varlong(ts) + encode_varint(off) + field(key) + field(value)
        body += encode_varint(len(headers)) + b"".join(field(k) + field(v) for k, v in headers)
    return encode_varint(len(body) + length_delta) + body


def seal(
    payload: bytes,
    *,
    count: int,
    lod: int | None = None,
    attributes: int = 0,
    base_ts: int = BASE_TS,
    max_ts: int = BASE_TS,
    producer: tuple[int, int, int] = (-1, -1, -1),
    base_offset: int = 0,
) -> bytes:
    """A batch around any records payload, with a correct CRC."""
    head = bytearray(
        HEADER.pack(
            base_offset, 49 + len(payload), -1, 2, 0, attributes, count - 1 if lod is None else lod,
            base_ts, max_ts, *producer, count,
        )
    )  # fmt: skip
    struct.pack_into(">I", head, 17, crc32c(payload, crc32c(bytes(head[21:]))))
    return bytes(head) + payload


def check(raw: bytes, **kw: Any) -> Any:
    (pos, h), *_ = iter_client_batches(raw, max_size=None)
    return check_batch(raw, pos, h, **kw)


def refused(raw: bytes, fragment: str, *, index: int | None = None, **kw: Any) -> StrataError:
    with pytest.raises(StrataError) as info:
        check(raw, **kw)
    exc = info.value
    assert fragment in str(exc), str(exc)
    if index is not None:
        assert isinstance(exc, InvalidRecordError)
        assert [e.batch_index for e in exc.record_errors] == [index]
        assert kafka_code(exc) == INVALID_RECORD
    return exc


# --- golden bytes, one rule each -------------------------------------------------------------


GOOD = record(0, ts=5) + record(1, ts=-3, key=None, headers=[(b"h", b"x"), (b"n", None)]) + record(2, ts=9)


def test_a_valid_batch_gives_its_max_timestamp() -> None:
    c = check(seal(GOOD, count=3, max_ts=-1))
    assert c.max_timestamp == BASE_TS + 9 and c.rewrite
    c = check(seal(GOOD, count=3, max_ts=BASE_TS + 9))
    assert c.max_timestamp == BASE_TS + 9 and not c.rewrite
    # Kafka's maxTimestamp never goes below NO_TIMESTAMP (-1)
    early = record(0, ts=-5) + record(1, ts=-9)
    assert check(seal(early, count=2, base_ts=0, max_ts=0)).max_timestamp == -1


@pytest.mark.parametrize(
    ("payload", "count", "fragment", "index"),
    [
        # the reproduction: header count 3, two records, a 6-byte key length varint
        (
            record(0) + record(1, body=b"\x00\x00\x02" + overlong(1, 6) + b"k" + field(b"v") + b"\x00"),
            3,
            "longer than 5 bytes",
            1,
        ),
        (record(0, length_delta=-1) + b"\x00", 1, "declared length", 0),
        (record(0, length_delta=+1), 1, "length 9 invalid", 0),
        (encode_varint(5) + b"\x00" * 12, 1, "length 5 invalid", 0),
        (record(0) + record(1, attributes=b"\x80"), 2, "attributes 0x80", 1),
        (record(0, attributes=b"\x01"), 1, "attributes 0x01", 0),
        (
            record(0, body=b"\x00\x00\x00" + b"\xff\xff\xff\xff\x7f" + b"k\x02v\x00"),
            1,
            "overflows 32 bits",
            0,
        ),
        (record(0, body=b"\x00" + b"\x80" * 10 + b"\x00\x00\x02k\x02v\x00"), 1, "longer than 10 bytes", 0),
        (record(0) + record(2), 2, "offsetDelta 2", 1),
        (record(0) + record(0), 2, "offsetDelta 0", 1),
        (record(1) + record(0), 2, "offsetDelta 1 where 0", 0),
        (record(-1) + record(1), 2, "offsetDelta -1", 0),
        (record(0, body=b"\x00\x00\x00" + encode_varint(-2) + b"\x02v\x00"), 1, "key length -2", 0),
        (record(0, body=b"\x00\x00\x00\x02k" + encode_varint(-2) + b"\x00"), 1, "value length -2", 0),
        (
            record(0, body=b"\x00\x00\x00" + encode_varint(40) + b"k\x02v\x00") + b"\x00" * 40,
            1,
            "key length 40",
            0,
        ),
        (
            record(0, body=b"\x00\x00\x00\x02k" + encode_varint(9) + b"v\x00") + b"\x00" * 9,
            1,
            "value length 9",
            0,
        ),
        (record(0, body=b"\x00\x00\x00\x02k\x02v" + encode_varint(-1)), 1, "header count -1", 0),
        (
            record(0, body=b"\x00\x00\x00\x02k\x02v\x02" + encode_varint(-1) + b"\x00"),
            1,
            "header key length -1",
            0,
        ),
        (record(0, headers=[(b"\xff\xfe", b"x")]), 1, "not valid UTF-8", 0),
        (
            record(0, body=b"\x00\x00\x00\x02k\x02v\x02\x02h" + encode_varint(-2)),
            1,
            "header value length -2",
            0,
        ),
        (record(0, body=b"\x00\x00\x00\x02k\x02v\x02\x02h" + encode_varint(5) + b"ab"), 1, "header value", 0),
        (record(0, value=b"v" * 9) + record(1, value=b"v" * 9), 3, "runs past the end", 2),
        (record(0) + record(1) + b"\x00", 2, "trailing bytes", 1),
        (record(0) + b"", 2, "cannot fit", 0),
    ],
)
def test_each_rule_refuses_the_batch(payload: bytes, count: int, fragment: str, index: int) -> None:
    raw = seal(payload, count=count)
    validate_batch(raw)  # the CRC is right: only the records are wrong
    refused(raw, fragment, index=index)


def test_sparse_offset_deltas_only_increase() -> None:
    # A cleaned batch (recordsCount < lastOffsetDelta + 1) is never a client's, but the walk
    # handles it: deltas increase within [0, lastOffsetDelta].
    h = parse_header(seal(record(0) + record(3), count=2, lod=5))
    assert check_records(record(0) + record(3), h) == BASE_TS
    assert check_records(record(2, ts=4) + record(5), h) == BASE_TS + 4
    for bad in (record(3) + record(3), record(3) + record(1), record(0) + record(6)):
        with pytest.raises(InvalidRecordError, match="offsetDelta"):
            check_records(bad, h)


def test_timestamp_overflow_and_compacted_keys() -> None:
    refused(seal(record(0, ts=1 << 62), count=1, base_ts=1 << 62), "overflows int64", index=0)
    raw = seal(record(0) + record(1, key=None) + record(2, key=None), count=3)
    assert not check(raw).rewrite  # a non-compacted topic takes records without keys
    exc = refused(raw, "without a key", require_keys=True)
    assert isinstance(exc, InvalidRecordError)
    assert [e.batch_index for e in exc.record_errors] == [1, 2]


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (seal(GOOD, count=3, lod=3), InvalidRecordError),  # count != lastOffsetDelta + 1
        (seal(GOOD, count=3, attributes=0x20), InvalidRecordError),  # control batch
        (seal(GOOD, count=3, producer=(7, 0, -1)), InvalidRecordError),  # producer without sequence
        (seal(GOOD, count=3, attributes=5), UnsupportedCompressionError),
        (seal(b"\x01\x02\x03" * 9, count=3, attributes=int(Compression.GZIP)), CorruptRecordError),
        (seal(GOOD, count=3)[:-1], CorruptRecordError),
    ],
)
def test_batch_rules(raw: bytes, error: type[StrataError]) -> None:
    with pytest.raises(error):
        check(raw)


def test_crc_is_checked_before_the_records() -> None:
    raw = bytearray(seal(GOOD, count=3, lod=7))
    raw[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        check(bytes(raw))
    with pytest.raises(RecordTooLargeError):
        list(iter_client_batches(seal(GOOD, count=3), max_size=70))


def test_log_append_time_bit_from_a_client() -> None:
    lat = int(TimestampType.LOG_APPEND_TIME) << 3
    exc = refused(seal(GOOD, count=3, attributes=lat, max_ts=-1), "LogAppendTime")
    assert isinstance(exc, InvalidTimestampError) and kafka_code(exc) == INVALID_TIMESTAMP
    refused(seal(GOOD, count=3, attributes=lat, max_ts=77), "LogAppendTime", log_append_time=True)
    # A CreateTime topic keeps it as CreateTime with the client's maxTimestamp (Kafka's setMaxTimestamp).
    c = check(seal(GOOD, count=3, attributes=lat, max_ts=77))
    assert (c.max_timestamp, c.attributes, c.rewrite) == (77, 0, True)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_truncation_at_every_byte_is_refused(codec: Compression) -> None:
    recs = [
        RecordInput(
            b"key-%d" % i, b"v" * (i * 40), (Header("trace", b"%d" % i), Header("n", None)), BASE_TS + i
        )
        for i in range(4)
    ]
    raw = build_batch(recs, compression=codec)
    h = parse_header(raw)
    data = build_batch(recs)[HEADER_SIZE:]
    assert check_records(data, h) == BASE_TS + 3
    for cut in range(len(data)):
        with pytest.raises(InvalidRecordError):
            check_records(data[:cut], h)
    with pytest.raises(InvalidRecordError):
        check_records(data + b"\x00", h)
    assert not check(raw).rewrite


def test_uses_zstd() -> None:
    plain = build_batch([RecordInput(None, b"x")])
    zstd = build_batch([RecordInput(None, b"x")], compression=Compression.ZSTD)
    assert not uses_zstd(plain) and uses_zstd(zstd) and uses_zstd(plain + zstd)
    assert not uses_zstd(b"\x00" * 10)


# --- the leader's append ---------------------------------------------------------------------


def test_leader_append_stores_the_records_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    try:
        raw = seal(GOOD, count=3, max_ts=-1)
        info = log.append(raw)
        assert info.max_timestamp == BASE_TS + 9
        end = log.log_end_offset
        stored = log.read(0, 1 << 20, max_offset=end).read()
        batch = decode_batch(stored)  # the rewritten header has a correct CRC
        assert batch.max_timestamp == BASE_TS + 9
        assert [r.timestamp for r in batch] == [BASE_TS + 5, BASE_TS - 3, BASE_TS + 9]
        assert stored[HEADER_SIZE:] == raw[HEADER_SIZE:]  # records untouched
        assert log.offset_for_timestamp(BASE_TS + 6, max_offset=end) == (2, BASE_TS + 9)
        assert log.offset_for_timestamp(BASE_TS + 10, max_offset=end) is None
    finally:
        log.close()


def test_one_bad_batch_stores_nothing_and_followers_do_not_rejudge(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p")
    try:
        good = build_batch([RecordInput(b"k", b"v")])
        bad = seal(record(0, attributes=b"\x05"), count=1)
        with pytest.raises(InvalidRecordError):
            log.append(good + bad)
        assert log.log_end_offset == 0
        log.append(good)
        assert log.log_end_offset == 1
    finally:
        log.close()
    follower = open_log(tmp_path / "f")
    try:  # what a leader stored before validation existed is replicated as it is
        follower.append_as_follower(seal(record(0, attributes=b"\x05"), count=1))
        assert follower.log_end_offset == 1
    finally:
        follower.close()


# --- fuzzing against kafka-python ------------------------------------------------------------


def _rows(records: Any) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return [
        (
            r.offset,
            r.timestamp,
            None if r.key is None else bytes(r.key),
            None if r.value is None else bytes(r.value),
            [(h[0], None if h[1] is None else bytes(h[1])) if isinstance(h, tuple) else (h.key, h.value)
             for h in r.headers],
        )
        for r in records
    ]  # fmt: skip


_record = st.builds(
    RecordInput,
    st.none() | st.binary(max_size=12),
    st.none() | st.binary(max_size=40),
    st.lists(st.builds(Header, st.text(max_size=4), st.none() | st.binary(max_size=6)), max_size=2).map(
        tuple
    ),
    st.integers(BASE_TS - 5000, BASE_TS + 5000),
)
_mutation = st.tuples(
    st.sampled_from(["set", "insert", "delete"]), st.integers(0, 1 << 16), st.integers(0, 255)
)
_header_edit = st.sampled_from([None, "count+1", "count-1", "lod+1", "lat", "max=-1", "base_ts"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_record, min_size=1, max_size=5),
    mutations=st.lists(_mutation, min_size=0, max_size=3),
    header_edit=_header_edit,
    codec=st.sampled_from([Compression.NONE, Compression.NONE, Compression.GZIP, Compression.LZ4]),
)
def test_fuzz_every_batch_is_refused_or_decodes_as_kafka_python_reads_it(
    records: list[RecordInput],
    mutations: list[tuple[str, int, int]],
    header_edit: str | None,
    codec: Compression,
) -> None:
    clean = build_batch(records)
    h = parse_header(clean)
    data = bytearray(clean[HEADER_SIZE:])
    for op, where, byte in mutations:
        at = where % (len(data) + 1)
        if op == "set" and at < len(data):
            data[at] = byte
        elif op == "insert":
            data.insert(at, byte)
        elif op == "delete" and at < len(data):
            del data[at]
    count, lod, attrs, max_ts, base_ts = (
        h.records_count,
        h.last_offset_delta,
        int(codec),
        h.max_timestamp,
        h.base_timestamp,
    )
    if header_edit == "count+1":
        count, lod = count + 1, lod + 1
    elif header_edit == "count-1":
        count, lod = count - 1, lod - 1
    elif header_edit == "lod+1":
        lod += 1
    elif header_edit == "lat":
        attrs |= 0x08
    elif header_edit == "max=-1":
        max_ts = -1
    elif header_edit == "base_ts":
        base_ts -= 1000
    raw = seal(
        compress(codec, bytes(data)) if data or codec is Compression.NONE else b"",
        count=count, lod=lod, attributes=attrs, base_ts=base_ts, max_ts=max_ts,
    )  # fmt: skip
    try:
        c = check(raw)
    except (CorruptRecordError, InvalidRecordError, InvalidTimestampError, UnsupportedCompressionError):
        event("refused")
        return  # refused: nothing of it would be stored
    event("accepted, mutated" if mutations or header_edit else "accepted, as built")
    ours = decode_batch(raw)
    theirs = list(KafkaBatch(raw))
    assert _rows(ours.records) == _rows(theirs)
    if not attrs & 0x08:
        assert c.max_timestamp == max(-1, *(r.timestamp for r in ours.records))
