"""The Produce fast path's C codec (hot/_recordwalk.c ``produce_one``, ``produce_answer``)
answers as its Python reference (api.handlers.produce_fast ``parse``, ``encode_one``).

``parse_fast`` takes a one-partition request in one C call and everything else through
``parse``: for every frame (random requests of every version, acks, transactional ids,
names with multi-byte characters, one or more topics and partitions; then cut short,
extended, or with one byte changed anywhere) it must return what ``parse`` returns. The
answer's bytes must be ``encode_one``'s Python bytes for every version and offset, and
those the codec's (tests/api/test_produce_fast.py checks ``encode_one`` against kwire).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.handlers.produce_fast import _c_answer, _c_parse, encode_one, parse, parse_fast
from hot.records import RecordInput, build_batch
from kwire import ApiKey, encode_request
from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData

pytestmark = pytest.mark.skipif(_c_parse is None, reason="hot._recordwalk not built")

VERSIONS = range(3, 12)


def produce_frame(topic: str, partitions: int = 1) -> bytes:
    """A Produce v9 request frame with its size prefix (as bench.bench_request_cost's)."""
    batch = build_batch([RecordInput(None, b"v" * 100)])
    parts = tuple(ProducePartitionData(index=i, records=batch) for i in range(partitions))
    req = ProduceRequest(
        acks=1, timeout_ms=30000, topic_data=(ProduceTopicData(name=topic, partition_data=parts),)
    )
    body = encode_request(ApiKey.PRODUCE, 9, 1, "bench", req)
    return len(body).to_bytes(4, "big") + body


def _plain(parsed: Any) -> Any:
    """``parse``'s answer with the record views as bytes (comparable)."""
    if parsed is None:
        return None
    version, acks, timeout_ms, topics = parsed
    return version, acks, timeout_ms, [(n, [(i, bytes(r)) for i, r in ps]) for n, ps in topics]


def _same(frame: bytes) -> None:
    assert _plain(parse_fast(frame, {})) == _plain(parse(frame, {}))


@st.composite
def _frames(draw: st.DrawFn) -> bytes:
    version = draw(st.sampled_from(VERSIONS))
    one = draw(st.booleans())  # mostly what the C call takes
    names = draw(
        st.lists(
            st.text("ab-é\u4e2d", min_size=0, max_size=5),
            min_size=1,
            max_size=1 if one else 3,
            unique=True,
        )
    )
    topics = tuple(
        ProduceTopicData(
            name=n,
            partition_data=tuple(
                ProducePartitionData(index=i, records=draw(st.none() | st.binary(min_size=0, max_size=300)))
                for i in draw(
                    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=1 if one else 3)
                )
            ),
        )
        for n in names
    )
    req = ProduceRequest(
        transactional_id=draw(st.none() | st.just("txn")),
        acks=draw(st.sampled_from([-1, 0, 1, 2, -2])),
        timeout_ms=draw(st.integers(-(2**31), 2**31 - 1)),
        topic_data=topics,
    )
    client = draw(st.none() | st.text("cl", max_size=4))
    return encode_request(ApiKey.PRODUCE, version, draw(st.integers(0, 2**31 - 1)), client, req)


@given(_frames())
@settings(max_examples=400, deadline=None)
def test_parse_fast_is_parse(frame: bytes) -> None:
    _same(frame)


@given(_frames(), st.data())
@settings(max_examples=400, deadline=None)
def test_parse_fast_is_parse_on_damaged_frames(frame: bytes, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(frame) - 1))
    _same(frame[:at])  # cut short
    _same(frame + data.draw(st.binary(min_size=1, max_size=3)))  # trailing bytes
    changed = bytearray(frame)
    changed[at] = data.draw(st.integers(0, 255))
    _same(bytes(changed))  # one byte changed: a length, a count, a tag, a varint


def test_parse_fast_takes_a_one_partition_request_in_c() -> None:
    frame = produce_frame("t")[4:]
    got = _c_parse(frame)  # type: ignore[misc]
    assert got is not None and got[3] == b"t" and got[4] == 0
    two = produce_frame("t", partitions=2)[4:]
    assert _c_parse(two) is None  # type: ignore[misc]
    assert _plain(parse_fast(two, {})) == _plain(parse(two, {})) is not None
    bad = b"\xff\xfe"  # a name that is not UTF-8: parse refuses it, so must the C path
    req = ProduceRequest(
        acks=1,
        timeout_ms=5,
        topic_data=(
            ProduceTopicData(name="xy", partition_data=(ProducePartitionData(index=0, records=b"r"),)),
        ),
    )
    for version in VERSIONS:
        raw = encode_request(ApiKey.PRODUCE, version, 1, None, req).replace(b"xy", bad)
        assert _c_parse(raw) is not None  # type: ignore[misc]
        assert parse_fast(raw, {}) is None and parse(raw, {}) is None


@given(
    st.sampled_from(VERSIONS),
    st.text(min_size=1, max_size=8),
    st.integers(0, 2**31 - 1),
    st.integers(-1, 2**62),
    st.integers(-1, 2**41),
    st.integers(-1, 2**62),
    st.binary(min_size=4, max_size=4),
)
@settings(max_examples=400, deadline=None)
def test_produce_answer_is_encode_one(
    version: int, name: str, index: int, base: int, lat: int, lso: int, correlation: bytes
) -> None:
    in_c = encode_one(version, correlation, name, (index, base, lat, lso), {})
    in_python = encode_one(version, correlation, name, (index, base, lat, lso), {}, c_answer=None)
    assert in_c == in_python
    assert _c_answer is not None
