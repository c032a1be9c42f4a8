"""The column-oriented decoder agrees with the reference codec (hot.records), record for
record and error for error, on generated and on damaged input."""

from __future__ import annotations

import random
import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot.batch import Compression, TimestampType, parse_header, peek_size
from hot.errors import CorruptRecordError, StrataError
from hot.records import Header, RecordInput, build_batch, build_control_batch, decode_batch
from spark.columnar import INT64_MAX, BatchDecodeError, decode_columns, frame
from spark.schema import ARROW_SCHEMA

Row = tuple[int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...] | None]

_CONTROL = 0x20  # control batches are never rows; transactional data is (read_uncommitted)

headers_st = st.lists(
    st.builds(Header, st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=12))), max_size=3
).map(tuple)
record_st = st.builds(
    RecordInput,
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=8200, max_size=8300)),
    headers_st,
    st.one_of(st.none(), st.integers(-(10**12), 10**13)),
)
batch_st = st.tuples(
    st.lists(record_st, min_size=1, max_size=12),
    st.sampled_from(list(Compression)),
    st.sampled_from(list(TimestampType)),
    st.sampled_from(["data", "data", "data", "transactional", "control"]),
)


def build(specs: list[Any]) -> bytes:
    out = []
    off = 0
    for recs, codec, ts_type, kind in specs:
        if kind == "control":
            out.append(build_control_batch(1, producer_id=7, producer_epoch=0, base_offset=off, timestamp=5))
            off += 1
            continue
        out.append(
            build_batch(
                recs,
                base_offset=off,
                compression=codec,
                base_timestamp=1_700_000_000_000,
                timestamp_type=ts_type,
                transactional=kind == "transactional",
                producer_id=9 if kind == "transactional" else -1,
                producer_epoch=0 if kind == "transactional" else -1,
            )
        )
        off += len(recs)
    return b"".join(out)


_MAX_MS = ((1 << 63) - 1) // 1000


def reference(buf: bytes, start: int, end: int, *, verify_crc: bool) -> list[Row]:
    """hot.records' rows of the data batches of ``buf`` in [start, end) (whole batches only,
    decoded when they overlap the range); timestamps beyond what microseconds in an int64
    can hold are clamped, as the reader does."""
    rows: list[Row] = []
    pos = 0
    while (size := peek_size(buf, pos)) is not None and pos + size <= len(buf):
        h = parse_header(buf, pos)
        # Batches outside the range are not decoded (their CRC still covers them).
        wanted = h.last_offset >= start and h.base_offset < end
        if not h.attributes & _CONTROL and h.records_count and wanted:
            b = decode_batch(buf, pos, verify_crc=verify_crc)
            ts_type = int(b.timestamp_type)
            for r in b.records:
                if start <= r.offset < end:
                    hs = tuple((x.key, x.value) for x in r.headers) or None
                    ts = min(max(r.timestamp, -_MAX_MS), _MAX_MS)
                    rows.append((r.offset, ts, ts_type, r.key, r.value, hs))
        pos += size
    if peek_size(buf, pos) is not None and len(buf) - pos > 16 and buf[pos + 16] != 2:
        # A partial batch whose magic byte is already wrong is refused early (as BatchFramer does).
        raise CorruptRecordError(f"record batch magic {buf[pos + 16]} is not supported (need 2)")
    return rows


def columnar(batch: pa.RecordBatch) -> list[Row]:
    assert batch.schema.equals(ARROW_SCHEMA)
    out: list[Row] = []
    ts_us = batch.column("timestamp").cast(pa.int64()).to_pylist()
    plain = batch.drop_columns(["timestamp"])  # to_pylist cannot make datetimes of every int64
    for d, us in zip(plain.to_pylist(), ts_us, strict=True):
        assert d["topic"] == "t" and d["partition"] == 3
        assert us % 1000 == 0
        hs = None if d["headers"] is None else tuple((h["key"], h["value"]) for h in d["headers"])
        out.append((d["offset"], us // 1000, d["timestampType"], d["key"], d["value"], hs))
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch_st, min_size=1, max_size=6), st.integers(0, 40), st.integers(0, 80))
def test_matches_reference_decoder(specs: list[Any], start: int, length: int) -> None:
    buf = build(specs)
    end = start + length
    got = decode_columns(buf, topic="t", partition=3, start_offset=start, end_offset=end)
    assert got.consumed == len(buf)
    assert columnar(got.batch) == reference(buf, start, end, verify_crc=True)


def test_many_batches_take_the_vectorized_chain() -> None:
    """Hundreds of equal batches (the across-batches chain) and one huge one (the per-record loop)."""
    rng = random.Random(5)
    specs = []
    for _ in range(300):
        recs = [
            RecordInput(None if rng.random() < 0.2 else b"k", rng.randbytes(rng.randint(0, 150)), timestamp=i)
            for i in range(rng.randint(20, 40))
        ]
        specs.append((recs, Compression.NONE, TimestampType.CREATE_TIME, "data"))
    specs.append(
        (
            [RecordInput(b"x", b"y" * 70, timestamp=1)] * 5000,
            Compression.LZ4,
            TimestampType.CREATE_TIME,
            "data",
        )
    )
    buf = build(specs)
    got = decode_columns(buf, topic="t", partition=3)
    assert columnar(got.batch) == reference(buf, 0, 1 << 62, verify_crc=True)


def test_partial_tail_is_left_for_the_next_read() -> None:
    recs = [RecordInput(b"k%d" % i, b"v" * i) for i in range(5)]
    a = build_batch(recs, base_offset=0)
    b = build_batch(recs, base_offset=5)
    got = decode_columns(a + b[:-3], topic="t", partition=3)
    assert got.consumed == len(a)
    assert got.batch.column("offset").to_pylist() == [0, 1, 2, 3, 4]
    assert len(frame(a + b[:30])) == 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(batch_st, min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_damage_is_refused_exactly_like_the_reference(specs: list[Any], flips: list[tuple[int, int]]) -> None:
    """With the CRC off (so record parsing is exercised), damaged bytes give the same rows
    or an error in both decoders, never different rows."""
    buf = bytearray(build(specs))
    for at, value in flips:
        buf[at % len(buf)] = value
    data = bytes(buf)
    try:
        expected: list[Row] | None = reference(data, 0, INT64_MAX, verify_crc=False)
    except StrataError:
        expected = None
    try:
        got: list[Row] | None = columnar(decode_columns(data, topic="t", partition=3, verify_crc=False).batch)
    except StrataError as e:
        assert isinstance(e, BatchDecodeError)
        got = None
    assert got == expected


def test_crc_damage_names_the_batch() -> None:
    a = build_batch([RecordInput(b"k", b"v")], base_offset=0)
    b = bytearray(build_batch([RecordInput(b"k", b"v" * 30)], base_offset=1))
    b[-3] ^= 0xFF
    with pytest.raises(BatchDecodeError, match="CRC mismatch") as info:
        decode_columns(a + bytes(b), topic="t", partition=3)
    assert info.value.position == len(a)
    assert info.value.base_offset == 1


def test_errors_are_the_reference_codecs() -> None:
    good = build_batch([RecordInput(b"key", b"value")], base_offset=0)
    # A header key that is not UTF-8: rebuild the record by hand with a valid CRC.
    rec = build_batch([RecordInput(b"k", b"v", (Header("\u00e9", b"x"),))], base_offset=1)
    bad = bytearray(rec)
    i = bytes(bad).index("\u00e9".encode())
    bad[i] = 0xFF
    from hot.batch import compute_crc

    struct.pack_into(">I", bad, 17, compute_crc(bad, 0, len(bad)))
    with pytest.raises(BatchDecodeError, match="not valid UTF-8") as info:
        decode_columns(good + bytes(bad), topic="t", partition=3)
    assert info.value.base_offset == 1


def test_nothing_wanted_gives_an_empty_batch_of_the_schema() -> None:
    buf = build_batch([RecordInput(b"k", b"v")] * 3, base_offset=10)
    got = decode_columns(buf, topic="t", partition=3, start_offset=0, end_offset=10)
    assert got.batch.num_rows == 0 and got.batch.schema.equals(ARROW_SCHEMA)
    assert decode_columns(b"", topic="t", partition=3).batch.num_rows == 0


def test_large_inputs_are_decoded_in_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Payloads beyond MAX_GROUP_BYTES are decoded group by group (int32 Arrow offsets)."""
    import spark.columnar as columnar_module

    specs = [
        (
            [RecordInput(b"k%d" % i, b"v" * (i % 300), (Header("h", b"x"),)) for i in range(40)],
            c,
            TimestampType.CREATE_TIME,
            "data",
        )
        for c in (Compression.NONE, Compression.ZSTD, Compression.NONE, Compression.GZIP)
    ]
    buf = build(specs)
    whole = decode_columns(buf, topic="t", partition=3, start_offset=7, end_offset=150).batch
    monkeypatch.setattr(columnar_module, "MAX_GROUP_BYTES", 2000)
    grouped = decode_columns(buf, topic="t", partition=3, start_offset=7, end_offset=150).batch
    assert grouped.equals(whole)
    assert columnar(grouped) == reference(buf, 7, 150, verify_crc=True)


# --- the C decoder (spark._decode) against the vectorized Python path -------------------------

bare_record_st = st.builds(
    RecordInput,
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=8200, max_size=8300)),
    st.just(()),
    st.one_of(st.none(), st.integers(-(10**12), 10**13), st.integers(-(2**62), 2**62)),
)
bare_batch_st = st.tuples(
    st.lists(bare_record_st, min_size=1, max_size=12),
    st.sampled_from(list(Compression)),
    st.sampled_from(list(TimestampType)),
    st.sampled_from(["data", "data", "data", "transactional", "control"]),
)


def _both(data: bytes, start: int, end: int, *, verify_crc: bool = True) -> tuple[Any, Any]:
    """decode_columns with the C decoder and without it: each a RecordBatch or the error."""
    import spark.columnar as columnar_module

    c_module = columnar_module._decode
    if c_module is None:
        pytest.skip("spark._decode is not built (python setup.py build_ext --inplace)")
    out: list[Any] = []
    for decoder in (c_module, None):
        columnar_module._decode = decoder
        try:
            out.append(
                decode_columns(
                    data, topic="t", partition=3, start_offset=start, end_offset=end, verify_crc=verify_crc
                ).batch
            )
        except StrataError as e:
            out.append((type(e), str(e), getattr(e, "position", None)))
        finally:
            columnar_module._decode = c_module
    return out[0], out[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bare_batch_st, min_size=1, max_size=6), st.integers(0, 40), st.integers(0, 80))
def test_c_decoder_matches_the_vectorized_path(specs: list[Any], start: int, length: int) -> None:
    """Records without headers take the C path: the same Arrow batch as the Python one."""
    buf = build(specs)
    c, py = _both(buf, start, start + length)
    assert isinstance(c, pa.RecordBatch) and c.equals(py)
    assert c.schema.equals(ARROW_SCHEMA)
    assert columnar(c) == reference(buf, start, start + length, verify_crc=True)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(bare_batch_st, min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_c_decoder_refuses_damage_like_the_vectorized_path(
    specs: list[Any], flips: list[tuple[int, int]]
) -> None:
    """Damaged records (CRC off): the C path gives the same rows or the same error."""
    buf = bytearray(build(specs))
    for at, value in flips:
        buf[at % len(buf)] = value
    c, py = _both(bytes(buf), 0, INT64_MAX, verify_crc=False)
    if isinstance(py, pa.RecordBatch):
        assert isinstance(c, pa.RecordBatch) and c.equals(py)
    else:
        assert c == py


def test_c_decoder_golden_chunk() -> None:
    """A chunk like the benchmark's (null keys, 100-byte values, many batches), one batch
    with headers (that group goes the Python way), LogAppendTime and a partial range."""
    rng = random.Random(7)
    specs: list[Any] = [
        (
            [RecordInput(None, rng.randbytes(100), timestamp=1_700_000_000_000 + i) for i in range(148)],
            Compression.NONE,
            TimestampType.CREATE_TIME,
            "data",
        )
        for _ in range(40)
    ]
    specs.append(([RecordInput(b"k", None)] * 3, Compression.ZSTD, TimestampType.LOG_APPEND_TIME, "data"))
    buf = build(specs)
    for start, end in ((0, INT64_MAX), (100, 5000)):
        c, py = _both(buf, start, end)
        assert isinstance(c, pa.RecordBatch) and c.equals(py)
        assert columnar(c) == reference(buf, start, end, verify_crc=True)
    with_headers = build(
        [
            (
                [RecordInput(b"k", b"v", (Header("h", b"x"),))],
                Compression.NONE,
                TimestampType.CREATE_TIME,
                "data",
            )
        ]
    )
    c, py = _both(with_headers, 0, INT64_MAX)
    assert isinstance(c, pa.RecordBatch) and c.equals(py)
    assert c.column("headers").to_pylist() == [[{"key": "h", "value": b"x"}]]
