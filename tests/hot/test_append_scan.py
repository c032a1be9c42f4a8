"""The leader's one-call batch check in C (``hot/_recordwalk.c`` ``scan``) against the
Python path it short-cuts (``hot.log_append.validate_batches`` without it).

For valid payloads (one to three batches, any records, idempotent and transactional
producers, every codec, both timestamp types) and damaged ones (a byte changed with and
without the CRC fixed up, cut short, bytes appended), under topic configurations that
differ in max.message.bytes, timestamp type and compaction: both paths give the same
batches, or the same error (type, text, record errors). The scan only accepts; whatever it
declines the Python path judges, so the errors come from one place. Skipped without the
extension, except in CI.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot import log_append, record_validation
from hot.batch import CRC_START, Compression, TimestampType
from hot.config import LogConfig
from hot.errors import StrataError
from hot.records import Header, RecordInput, build_batch

try:
    from hot import _recordwalk
except ImportError:
    _recordwalk = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    _recordwalk is None and os.environ.get("CI") != "true", reason="hot._recordwalk is not built"
)


def test_the_scan_is_loaded() -> None:
    assert _recordwalk is not None
    assert record_validation._native_scan is _recordwalk.scan


@given(st.binary(max_size=3000))
def test_crc32c_is_the_libraries(data: bytes) -> None:
    assert _recordwalk is not None
    assert _recordwalk.crc32c(data) == crc32c(data)
    assert _recordwalk.crc32c(memoryview(data)[1:]) == crc32c(data[1:])


def _outcome(mv: memoryview, config: LogConfig) -> Any:
    try:
        batches, idempotent = log_append.validate_batches(mv, config, leader=True)
    except StrataError as exc:
        return (
            "error",
            type(exc).__name__,
            str(exc),
            [(e.batch_index, e.message) for e in getattr(exc, "record_errors", ())],
        )
    return ("ok", [dataclasses.astuple(b) for b in batches], idempotent)


_records = st.lists(
    st.builds(
        RecordInput,
        st.none() | st.binary(max_size=8),
        st.none() | st.binary(max_size=40),
        st.lists(st.builds(Header, st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2).map(
            tuple
        ),
        st.none() | st.integers(1_600_000_000_000, 1_800_000_000_000),
    ),
    min_size=1,
    max_size=6,
)


@st.composite
def _batch(draw: st.DrawFn) -> bytes:
    producer = draw(st.sampled_from(["none", "idempotent", "transactional"]))
    kw: dict[str, Any] = {}
    if producer != "none":
        kw = {
            "producer_id": draw(st.integers(0, 10)),
            "producer_epoch": 0,
            "base_sequence": draw(st.integers(0, 5)),
        }
    return build_batch(
        draw(_records),
        compression=draw(
            st.sampled_from([Compression.NONE, Compression.NONE, Compression.NONE, Compression.GZIP])
        ),
        timestamp_type=draw(
            st.sampled_from(
                [TimestampType.CREATE_TIME, TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]
            )
        ),
        transactional=producer == "transactional",
        **kw,
    )


def _fix_crcs(data: bytearray) -> None:
    """Recompute the CRC of every batch that still frames (so record damage is walked)."""
    pos = 0
    while pos + 61 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + 12
        if size < 61 or pos + size > len(data):
            return
        data[pos + 17 : pos + 21] = crc32c(bytes(data[pos + CRC_START : pos + size])).to_bytes(4, "big")
        pos += size


@st.composite
def _payloads(draw: st.DrawFn) -> bytes:
    data = bytearray(b"".join(draw(st.lists(_batch(), min_size=1, max_size=3))))
    damage = draw(st.sampled_from(["none", "none", "byte", "byte-crc", "cut", "extra", "max-ts"]))
    if damage in ("byte", "byte-crc"):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
        if damage == "byte-crc":
            _fix_crcs(data)
    elif damage == "cut":
        del data[draw(st.integers(1, len(data) - 1)) :]
    elif damage == "extra":
        data += draw(st.binary(min_size=1, max_size=70))
    elif damage == "max-ts":  # a client maxTimestamp that is not its records' largest
        data[35:43] = draw(st.integers(-1, 2**40)).to_bytes(8, "big", signed=True)
        _fix_crcs(data)
    return bytes(data)


@given(
    _payloads(),
    st.sampled_from([1048588, 200, 100]),
    st.sampled_from(["CreateTime", "LogAppendTime"]),
    st.sampled_from(["delete", "compact"]),
)
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_scan_and_python_path_agree(payload: bytes, max_bytes: int, ts_type: str, policy: str) -> None:
    config = LogConfig(max_message_bytes=max_bytes, message_timestamp_type=ts_type, cleanup_policy=policy)
    mv = memoryview(payload)
    with_scan = _outcome(mv, config)
    saved = record_validation._native_scan
    record_validation._native_scan = None
    try:
        python = _outcome(mv, config)
    finally:
        record_validation._native_scan = saved
    assert with_scan == python


def test_the_scan_accepts_what_producers_send() -> None:
    """Uncompressed batches, plain and idempotent, with a maxTimestamp to correct: the C
    call takes them itself (the Python path would give the same, above)."""
    records = [RecordInput(b"k", b"v", timestamp=1_700_000_000_000 + i) for i in range(3)]
    plain = build_batch(records)
    idem = build_batch(records, producer_id=7, producer_epoch=1, base_sequence=3)
    stale = bytearray(plain)
    stale[35:43] = (-1).to_bytes(8, "big", signed=True)
    _fix_crcs(stale)
    config = LogConfig()
    for payload in (plain, plain + idem, bytes(stale)):
        got = record_validation.scan_client_batches(
            memoryview(payload), max_size=config.max_message_bytes, log_append_time=False, require_keys=False
        )
        assert got is not None
        assert [b[4] for b in got][-1] == 1_700_000_000_002  # the records' largest timestamp
    got = record_validation.scan_client_batches(
        memoryview(bytes(stale)), max_size=None, log_append_time=False, require_keys=False
    )
    assert got is not None and got[0][13] == 0  # attributes to store: the header is rewritten
