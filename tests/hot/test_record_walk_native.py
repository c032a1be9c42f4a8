"""The C record walk (hot/_recordwalk.c) against the Python one it reimplements.

``hot.record_validation._check_records_py`` is the reference. For valid batches and for
every kind of damage to their record bytes, the C walk must give the same max timestamp, or
raise the same InvalidRecordError: same text, same record index(es). Skipped where the
extension is not built, except in CI (CI=true), which must exercise the C path.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot import record_validation
from hot.batch import HEADER_SIZE, BatchHeader, parse_header
from hot.errors import InvalidRecordError
from hot.records import Header, RecordInput, build_batch, encode_varint, encode_varlong

try:
    from hot import _recordwalk
except ImportError:  # built by pip install -e . (setup.py); optional without a compiler
    _recordwalk = None  # type: ignore[assignment]

needs_native = pytest.mark.skipif(
    _recordwalk is None, reason="hot._recordwalk is not built (pip install -e .)"
)

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def test_the_c_walk_is_built_and_used_in_ci() -> None:
    if os.environ.get("CI") != "true" and _recordwalk is None:
        pytest.skip("hot._recordwalk is not built and this is not CI")
    assert _recordwalk is not None, "CI must build hot/_recordwalk.c (pip install -e . with a C compiler)"
    assert record_validation.NATIVE
    assert record_validation._native is _recordwalk.walk


# --- the two walks, side by side ---------------------------------------------------------------


Outcome = tuple[Any, ...]


def _run(fn: Any, *args: Any, **kw: Any) -> Outcome:
    try:
        return ("ok", fn(*args, **kw))
    except InvalidRecordError as exc:
        return ("invalid", str(exc), [(e.batch_index, e.message) for e in exc.record_errors])


def agree(data: bytes, h: BatchHeader, *, require_keys: bool = False) -> Outcome:
    """Both walks' outcome on ``data``, asserted equal; the C walk reads a memoryview, a
    bytearray and bytes alike."""
    expected = _run(record_validation._check_records_py, data, h, require_keys=require_keys)
    for buf in (data, memoryview(data), bytearray(data), memoryview(b"\xff" + data + b"\xff")[1:-1]):
        got = _run(record_validation.check_records, buf, h, require_keys=require_keys)
        assert got == expected, (data.hex(), h)
    return expected


def header_of(raw: bytes, **changes: int) -> BatchHeader:
    return dataclasses.replace(parse_header(raw), **changes)


def raw_record(
    off: int,
    ts: bytes | int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: Sequence[tuple[bytes, bytes | None]] = (),
) -> bytes:
    """One record with any header key bytes (build_batch only writes valid UTF-8)."""

    def field(b: bytes | None) -> bytes:
        return encode_varint(-1) if b is None else encode_varint(len(b)) + b

    body = b"\x00" + (encode_varlong(ts) if isinstance(ts, int) else ts) + encode_varint(off)
    body += field(key) + field(value) + encode_varint(len(headers))
    body += b"".join(field(k) + field(v) for k, v in headers)
    return encode_varint(len(body)) + body


# --- hand-picked cases -----------------------------------------------------------------------


@needs_native
@pytest.mark.parametrize(
    "key",
    [
        b"",
        b"plain",
        "caf\u00e9 \U0001f600".encode(),
        b"\xed\xa0\x80",  # a surrogate, which Python's utf-8 codec refuses
        b"\xed\x9f\xbf",  # U+D7FF, the last code point before them
        b"\xc0\x80",  # overlong NUL
        b"\xf4\x8f\xbf\xbf",  # U+10FFFF
        b"\xf4\x90\x80\x80",  # above U+10FFFF
        b"\xe2\x82",  # truncated sequence
        b"a\x80",
        b"\xff",
    ],
)
def test_header_keys_are_utf8_exactly_as_python_decodes_them(key: bytes) -> None:
    data = raw_record(0, headers=[(key, b"v")]) + raw_record(1, headers=[(b"x", None), (key, None)])
    raw = build_batch([RecordInput(b"k", b"v"), RecordInput(b"k", b"v")])
    h = header_of(raw, base_timestamp=10)
    agree(data, h)


@needs_native
@pytest.mark.parametrize(
    ("ts", "base"),
    [
        (encode_varlong(INT64_MAX), 1),
        (encode_varlong(INT64_MAX), 0),
        (encode_varlong(INT64_MIN), -1),
        (encode_varlong(INT64_MIN), 0),
        (encode_varlong(-5), 3),
        (b"\xff" * 9 + b"\x01", 0),  # 10 bytes, the largest unsigned value that fits
        (b"\xff" * 9 + b"\x02", 0),  # overflows 64 bits
        (b"\x80" * 9 + b"\x7f", 0),
        (b"\x80" * 10 + b"\x00", 0),  # 11 bytes
    ],
)
def test_timestamp_deltas_at_the_int64_edges(ts: bytes, base: int) -> None:
    data = raw_record(0, ts=ts)
    h = header_of(build_batch([RecordInput(b"k", b"v")]), base_timestamp=base)
    agree(data, h)


@needs_native
def test_keyless_records_of_a_compacted_topic_are_all_named() -> None:
    data = b"".join(raw_record(i, key=None if i % 3 else b"k") for i in range(8))
    h = header_of(build_batch([RecordInput(b"k", b"v")] * 8))
    outcome = agree(data, h, require_keys=True)
    assert outcome[0] == "invalid" and [i for i, _ in outcome[2]] == [1, 2, 4, 5, 7]
    assert agree(data, h)[0] == "ok"


@needs_native
@pytest.mark.parametrize(
    ("count", "lod", "size"),
    [(0, -1, 0), (0, -1, 7), (-3, 0, 0), (-3, 0, 9), (1, 0, 0), (5, 4, 34), (2, 7, 14), (3, 1, 21)],
)
def test_counts_that_no_client_batch_has(count: int, lod: int, size: int) -> None:
    # check_records is also the reference for headers iter_client_batches would refuse first.
    data = b"".join(raw_record(i) for i in range(3))[:size]
    h = header_of(build_batch([RecordInput(b"k", b"v")]), records_count=count, last_offset_delta=lod)
    agree(data, h)


@needs_native
def test_the_request_buffer_is_read_in_place() -> None:
    raw = build_batch([RecordInput(b"k", b"v" * 100)] * 1000)
    request = bytearray(b"\x00" * 7 + raw)
    view = memoryview(request)[7:]
    result = record_validation.check_batch(view, 0, parse_header(raw))
    assert result.max_timestamp == parse_header(raw).max_timestamp
    # The C walk holds no export of the request once it returns: the buffer can be resized.
    view.release()
    request.extend(b"\x00")


@needs_native
def test_every_single_byte_damage_to_a_batch() -> None:
    # Deterministic and exhaustive where the fuzzer is random: every truncation, every
    # one-byte deletion, and each byte position set to values that change a varint's meaning.
    data = (
        raw_record(0, ts=-300, key=None, value=b"", headers=[(b"h", b"x" * 130), ("\u00e9".encode(), None)])
        + raw_record(1, ts=1 << 40, key=b"k" * 200, value=None)
        + raw_record(2, ts=7, headers=[(b"", b"")])
    )
    h = header_of(build_batch([RecordInput(b"k", b"v")] * 3), base_timestamp=1_700_000_000_000)
    outcomes = {agree(data, h)[0]}
    for at in range(len(data) + 1):
        outcomes.add(agree(data[:at], h)[0])
        outcomes.add(agree(data[:at] + data[at + 1 :], h)[0])
        for b in (0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF):
            outcomes.add(agree(data[:at] + bytes([b]) + data[at + 1 :], h, require_keys=True)[0])
    assert outcomes == {"ok", "invalid"}


# --- fuzzing ---------------------------------------------------------------------------------


blobs = st.one_of(st.none(), st.just(b""), st.binary(max_size=40))
records_st = st.lists(
    st.builds(
        RecordInput,
        key=blobs,
        value=blobs,
        headers=st.lists(st.builds(Header, key=st.text(max_size=8), value=blobs), max_size=3).map(tuple),
        timestamp=st.one_of(st.none(), st.integers(0, 1 << 45)),
    ),
    min_size=1,
    max_size=12,
)
# Varints a mutation splices in: edges of int32 / int64, negatives, overlong and oversize encodings.
special = st.one_of(
    st.sampled_from([0, 1, -1, -2, 5, 6, INT32_MAX, INT32_MIN, INT32_MAX - 1, 1 << 30]).map(encode_varint),
    st.sampled_from([INT64_MAX, INT64_MIN, 1 << 62, -(1 << 62), (1 << 31) + 7]).map(encode_varlong),
    st.sampled_from(
        [
            b"\x80",
            b"\xff\xff",
            b"\x80" * 5 + b"\x00",
            b"\xff" * 4 + b"\x1f",
            b"\xff" * 4 + b"\x0f",
            b"\xff" * 10 + b"\x01",
            b"\x81\x00",
            b"\x83\x80\x00",
            b"\xed\xa0\x80",
        ]
    ),
)
mutation = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.integers(0, 10_000), st.integers(1, 4)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("splice"), st.integers(0, 10_000), special),
    st.tuples(st.just("overwrite"), st.integers(0, 10_000), special),
)


def mutate(data: bytes, op: tuple[str, int, Any]) -> bytes:
    kind, at, arg = op
    at = at % (len(data) + 1)
    if kind == "set":
        return data[:at] + bytes([arg]) + data[at + 1 :] if at < len(data) else data + bytes([arg])
    if kind in ("insert", "splice"):
        return data[:at] + bytes(arg) + data[at:]
    if kind == "delete":
        return data[:at] + data[at + arg :]
    if kind == "truncate":
        return data[:at]
    return data[:at] + bytes(arg) + data[at + len(arg) :]


@needs_native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_st,
    mutations=st.lists(mutation, max_size=3),
    base_ts=st.one_of(
        st.integers(-5, 5), st.sampled_from([INT64_MAX, INT64_MIN, INT64_MAX - (1 << 40)]), st.none()
    ),
    count_change=st.sampled_from([0, 0, 0, 1, -1]),
    sparse_lod=st.one_of(st.none(), st.integers(0, 40)),
    require_keys=st.booleans(),
)
def test_fuzz_the_c_walk_agrees_with_the_python_walk(
    records: list[RecordInput],
    mutations: list[tuple[str, int, Any]],
    base_ts: int | None,
    count_change: int,
    sparse_lod: int | None,
    require_keys: bool,
) -> None:
    raw = build_batch(records)
    data = raw[HEADER_SIZE:]
    for op in mutations:
        data = mutate(data, op)
    h = parse_header(raw)
    changes = {"records_count": h.records_count + count_change}
    if base_ts is not None:
        changes["base_timestamp"] = base_ts
    if sparse_lod is not None:
        changes["last_offset_delta"] = sparse_lod
    agree(data, dataclasses.replace(h, **changes), require_keys=require_keys)
