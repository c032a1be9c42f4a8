"""Reader/Writer for Kafka primitive types: encodings, bounds and error precision."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire import EncodeError, ProtocolError
from kwire.primitives import Reader, Writer

SETTINGS = settings(derandomize=True, database=None, deadline=None, max_examples=200)


def _bytes(fn_name: str, value: object) -> bytes:
    w = Writer()
    getattr(w, fn_name)(value)
    return w.getvalue()


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**32 - 1, "ffffffff0f")],
)
def test_uvarint_vectors(value: int, encoded: str) -> None:
    assert _bytes("uvarint", value).hex() == encoded
    r = Reader(bytes.fromhex(encoded))
    assert r.uvarint() == value and r.remaining == 0


@pytest.mark.parametrize(("value", "encoded"), [(0, "00"), (-1, "01"), (1, "02"), (-64, "7f"), (64, "8001")])
def test_zigzag_varint_vectors(value: int, encoded: str) -> None:
    assert _bytes("varint", value).hex() == encoded
    assert Reader(bytes.fromhex(encoded)).varint() == value


@SETTINGS
@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**32 - 1))
def test_varint_round_trips(v32: int, v64: int, u32: int) -> None:
    w = Writer()
    w.varint(v32)
    w.varlong(v64)
    w.uvarint(u32)
    r = Reader(w.getvalue())
    assert (r.varint(), r.varlong(), r.uvarint()) == (v32, v64, u32)
    assert r.remaining == 0


def test_varint_errors() -> None:
    with pytest.raises(ProtocolError, match="longer than 5 bytes"):
        Reader(b"\x80\x80\x80\x80\x80\x01").uvarint()
    with pytest.raises(ProtocolError, match="does not fit in 32 bits"):
        Reader(b"\xff\xff\xff\xff\x7f").uvarint()
    with pytest.raises(ProtocolError, match="truncated unsigned varint at offset 0"):
        Reader(b"\x80\x80").uvarint()
    with pytest.raises(ProtocolError, match="longer than 10 bytes"):
        Reader(b"\x80" * 10 + b"\x01").varlong()
    with pytest.raises(EncodeError):
        Writer().uvarint(-1)
    with pytest.raises(EncodeError):
        Writer().varint(2**31)


@SETTINGS
@given(
    st.integers(-(2**7), 2**7 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.uuids(),
    st.booleans(),
)
def test_fixed_width_round_trips(
    i8: int, i16: int, i32: int, i64: int, f: float, u: uuid.UUID, b: bool
) -> None:
    w = Writer()
    w.int8(i8)
    w.int16(i16)
    w.int32(i32)
    w.int64(i64)
    w.float64(f)
    w.uuid(u)
    w.boolean(b)
    w.uint16(i16 & 0xFFFF)
    w.uint32(i32 & 0xFFFFFFFF)
    data = w.getvalue()
    assert len(data) == 1 + 2 + 4 + 8 + 8 + 16 + 1 + 2 + 4
    r = Reader(data)
    got = (
        r.int8(),
        r.int16(),
        r.int32(),
        r.int64(),
        r.float64(),
        r.uuid(),
        r.boolean(),
        r.uint16(),
        r.uint32(),
    )
    assert got == (i8, i16, i32, i64, f, u, b, i16 & 0xFFFF, i32 & 0xFFFFFFFF)


def test_boolean_is_any_nonzero_byte_like_kafka() -> None:
    assert Reader(b"\x02").boolean() is True


@pytest.mark.parametrize(
    "method", ["int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "uuid", "boolean"]
)
def test_fixed_width_truncation(method: str) -> None:
    r = Reader(b"\x00" * 20, pos=19, end=20)
    if method in ("int8", "boolean"):
        r = Reader(b"", 0, 0)
    with pytest.raises(ProtocolError, match="truncated"):
        getattr(r, method)()


@SETTINGS
@given(st.text(max_size=50), st.none() | st.text(max_size=50))
def test_string_round_trips(s: str, ns: str | None) -> None:
    w = Writer()
    w.string(s)
    w.nullable_string(ns)
    w.compact_string(s)
    w.compact_nullable_string(ns)
    r = Reader(w.getvalue())
    assert (r.string(), r.nullable_string(), r.compact_string(), r.compact_nullable_string()) == (
        s,
        ns,
        s,
        ns,
    )
    assert r.remaining == 0


def test_string_encodings() -> None:
    assert _bytes("string", "ab").hex() == "00026162"
    assert _bytes("nullable_string", None).hex() == "ffff"
    assert _bytes("compact_string", "ab").hex() == "036162"
    assert _bytes("compact_nullable_string", None).hex() == "00"
    assert _bytes("compact_string", "").hex() == "01"


def test_string_errors() -> None:
    with pytest.raises(ProtocolError, match="non-nullable string has length -1 at offset 0"):
        Reader(b"\xff\xff").string()
    with pytest.raises(ProtocolError, match="invalid length -2"):
        Reader(b"\xff\xfe").nullable_string()
    with pytest.raises(ProtocolError, match="non-nullable compact string is null"):
        Reader(b"\x00").compact_string()
    with pytest.raises(
        ProtocolError, match=r"string of length 5 at offset 2 overruns the frame \(2 bytes left\)"
    ):
        Reader(b"\x00\x05ab").string()
    with pytest.raises(ProtocolError, match="not valid UTF-8"):
        Reader(b"\x00\x02\xc3\x28").string()
    with pytest.raises(EncodeError, match="exceeds the 32767-byte limit"):
        Writer().string("x" * 32768)
    with pytest.raises(EncodeError, match="expected str"):
        Writer().string(5)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="not encodable"):
        Writer().string("\ud800")


@SETTINGS
@given(st.binary(max_size=100), st.none() | st.binary(max_size=100))
def test_bytes_round_trips_as_zero_copy_views(b: bytes, nb: bytes | None) -> None:
    w = Writer()
    w.bytes(b)
    w.nullable_bytes(nb)
    w.compact_bytes(b)
    w.compact_nullable_bytes(nb)
    data = w.getvalue()
    r = Reader(data)
    got = [r.bytes(), r.nullable_bytes(), r.compact_bytes(), r.compact_nullable_bytes()]
    assert got == [b, nb, b, nb]
    assert all(v is None or (isinstance(v, memoryview) and v.obj is data) for v in got)


def test_bytes_errors() -> None:
    with pytest.raises(ProtocolError, match="non-nullable bytes have length -1"):
        Reader(b"\xff\xff\xff\xff").bytes()
    with pytest.raises(ProtocolError, match="invalid length -3"):
        Reader(b"\xff\xff\xff\xfd").nullable_bytes()
    with pytest.raises(ProtocolError, match="overruns"):
        Reader(b"\x7f\xff\xff\xff").nullable_bytes()
    with pytest.raises(ProtocolError, match="overruns"):
        Reader(b"\xff\xff\xff\xff\x0f").compact_nullable_bytes()


def test_array_counts() -> None:
    assert Reader(b"\xff\xff\xff\xff").array_count(True, 4) is None
    assert Reader(b"\x00").compact_array_count(True, 4) is None
    assert Reader(b"\x00\x00\x00\x02" + b"\x00" * 8).array_count(False, 4) == 2
    with pytest.raises(ProtocolError, match="cannot fit"):
        Reader(b"\x00\x00\x00\x03" + b"\x00" * 8).array_count(False, 4)
    with pytest.raises(ProtocolError, match="cannot fit"):
        Reader(b"\x04" + b"\x00" * 2).compact_array_count(False, 1)
    with pytest.raises(ProtocolError, match="non-nullable compact array is null"):
        Reader(b"\x00").compact_array_count(False, 1)


def test_tagged_fields_section() -> None:
    w = Writer()
    w.tagged_fields([(0, b"ab"), (300, b"")])
    data = w.getvalue()
    assert data.hex() == "0200026162ac0200"
    assert Reader(data).tagged_fields() == {0: (3, 5), 300: (8, 8)}
    assert Reader(b"\x00").tagged_fields() == {}


def test_sub_reader_is_bounded_and_reports_frame_offsets() -> None:
    r = Reader(b"\x00\x00\x00\x01\x00\x00\x00\x02")
    sub = r.sub(2)
    assert r.pos == 2
    with pytest.raises(ProtocolError, match="need 4 bytes at offset 0, only 2 left"):
        sub.int32()


def test_writer_regions_and_merging() -> None:
    w = Writer()
    w.int8(1)
    w.raw(b"ab")
    region = object()
    w.region(region)
    w.region(region)
    w.int8(2)
    assert w.finish() == [b"\x01ab", region, region, b"\x02"]
    w2 = Writer()
    w2.region(region)
    with pytest.raises(EncodeError, match="pass-through regions"):
        w2.getvalue()
    assert Writer().finish() == [b""]


def test_reader_accepts_non_byte_memoryviews() -> None:
    import array

    a = array.array("H", [1])
    assert Reader(memoryview(a)).remaining == 2
