"""The Fetch fast path's C parse (hot/_recordwalk.c ``fetch_one``) answers as its Python
reference (api.handlers.fetch_fast ``_Request._parse``).

``_Request`` takes a one-partition request in one C call and everything else through
``_parse``: for every frame (random requests of every version 4-17: replica ids, sessions,
isolation levels, topics by name with multi-byte characters or by id, one or more topics
and partitions, forgotten topics, racks, cluster ids and replica directory ids as tags;
then cut short, extended, or with one byte changed anywhere) it must give the fields
``_parse`` gives, or fail as it fails (the fast path then leaves the frame to the general
path). tests/api/test_fetch_fast.py checks the answers themselves against the general path.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.handlers.fetch_fast import _c_parse, _Fallback, _Request
from kwire import ApiKey, encode_request
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic, ReplicaState

pytestmark = pytest.mark.skipif(_c_parse is None, reason="hot._recordwalk not built")

VERSIONS = range(4, 18)
_REFUSED = (_Fallback, struct.error, IndexError, UnicodeDecodeError)  # what answer_frame catches


def _fields(frame: bytes, one: Any) -> Any:
    try:
        r = _Request(frame, one)
    except _REFUSED:
        return "refused"
    return (r.header, r.version, r.max_wait_ms, r.min_bytes, r.max_bytes, r.read_committed, r.topics)


def _same(frame: bytes) -> None:
    assert _fields(frame, _c_parse) == _fields(frame, None)


_INT32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def _frames(draw: st.DrawFn) -> bytes:
    version = draw(st.sampled_from(VERSIONS))
    one = draw(st.integers(0, 3)) > 0  # mostly what the C call takes
    by_id = version >= 13
    odd = draw(st.integers(0, 2)) == 0  # a follower's, a session's, tags: the Python parse's

    def rare(common: Any, *others: Any) -> Any:
        return draw(st.sampled_from([common, *others])) if odd else common

    def partition() -> FetchPartition:
        return FetchPartition(
            partition=draw(_INT32),
            current_leader_epoch=draw(st.sampled_from([-1, 0, 7])),
            fetch_offset=draw(st.integers(-1, 2**62)),
            last_fetched_epoch=draw(st.sampled_from([-1, 3])),
            log_start_offset=draw(st.sampled_from([-1, 0, 9])),
            partition_max_bytes=draw(_INT32),
            replica_directory_id=rare(uuid.UUID(int=0), uuid.UUID(int=5)),
        )

    def topic() -> FetchTopic:
        parts = tuple(partition() for _ in range(1 if one else draw(st.integers(0, 3))))
        if by_id:
            return FetchTopic(
                topic_id=uuid.UUID(bytes=draw(st.binary(min_size=16, max_size=16))), partitions=parts
            )
        return FetchTopic(topic=draw(st.text("ab-é\u4e2d", max_size=5)), partitions=parts)

    topics = tuple(topic() for _ in range(1 if one else draw(st.integers(0, 3))))
    forgotten = draw(
        st.sampled_from([(), (ForgottenTopic(topic="f", topic_id=uuid.UUID(int=1), partitions=(0,)),)])
    )
    req = FetchRequest(
        cluster_id=rare(None, "c"),
        replica_id=rare(-1, -2, 0, 3),
        replica_state=rare(None, ReplicaState(replica_id=1, replica_epoch=2)),
        max_wait_ms=draw(_INT32),
        min_bytes=draw(_INT32),
        max_bytes=draw(_INT32),
        isolation_level=draw(st.sampled_from([0, 1, 2, -1])),
        session_id=rare(0, 5),
        session_epoch=draw(st.sampled_from([-1, 0])) if not odd else draw(st.sampled_from([-1, 0, 1])),
        topics=topics,
        forgotten_topics_data=rare((), forgotten),
        rack_id=draw(st.sampled_from(["", "", "rack-é"])),
    )
    client = draw(st.none() | st.text("cé", max_size=4))
    return encode_request(ApiKey.FETCH, version, draw(st.integers(0, 2**31 - 1)), client, req)


@given(_frames())
@settings(max_examples=500, deadline=None)
def test_the_c_parse_is_the_python_parse(frame: bytes) -> None:
    _same(frame)


@given(_frames(), st.data())
@settings(max_examples=500, deadline=None)
def test_the_c_parse_is_the_python_parse_on_damaged_frames(frame: bytes, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(frame) - 1))
    _same(frame[:at])  # cut short
    _same(frame + data.draw(st.binary(min_size=1, max_size=3)))  # trailing bytes
    changed = bytearray(frame)
    changed[at] = data.draw(st.integers(0, 255))
    _same(bytes(changed))  # one byte changed: a length, a count, a tag, a varint, a version


def test_a_one_partition_request_is_parsed_in_c() -> None:
    assert _c_parse is not None
    part = FetchPartition(partition=2, fetch_offset=5, partition_max_bytes=100)
    for version in VERSIONS:
        topic = (
            FetchTopic(topic_id=uuid.UUID(int=9), partitions=(part,))
            if version >= 13
            else FetchTopic(topic="xy", partitions=(part,))
        )
        req = FetchRequest(max_wait_ms=500, min_bytes=1, topics=(topic,))
        frame = encode_request(ApiKey.FETCH, version, 3, "c", req)
        got = _c_parse(frame)
        assert got is not None and got[9:] == (
            (None, uuid.UUID(int=9).bytes) if version >= 13 else ("xy", b"")
        ) + (2, -1, 5, 100)
        _same(frame)
        two = encode_request(
            ApiKey.FETCH, version, 3, "c", FetchRequest(max_wait_ms=500, min_bytes=1, topics=(topic, topic))
        )
        assert _c_parse(two) is None and _fields(two, None) != "refused"  # two topics: the Python parse's
        if version < 13:  # a name that is not UTF-8: refused by both
            bad = frame.replace(b"xy", b"\xff\xfe")
            assert _c_parse(bad) is None and _fields(bad, None) == "refused"
