"""OffsetForLeaderEpoch (key 23) v0-4 wire codec: hand-checked golden bytes, round trips of
every version, byte-for-byte agreement with kafka-python's two independent implementations
(the hand-written ``kafka.protocol.old`` structs for v0-4, the JSON-driven classes for
v2-4), and precise errors on truncated input."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwire import ProtocolError
from kwire.messages.offset_for_leader_epoch import (
    FLEXIBLE,
    VERSIONS,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
)
from kwire.primitives import Reader, Writer
from kwire.schema import MessageSchema, wire_fields

REQUEST = MessageSchema(OffsetForLeaderEpochRequest, VERSIONS, FLEXIBLE)
RESPONSE = MessageSchema(OffsetForLeaderEpochResponse, VERSIONS, FLEXIBLE)
ALL_VERSIONS = list(range(5))
SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow],
)


def body(schema: MessageSchema, version: int, obj: Any) -> bytes:
    w = Writer()
    schema.codec(version).encode(w, obj)
    return w.getvalue()


def decode(schema: MessageSchema, version: int, data: bytes) -> Any:
    r = Reader(data)
    obj = schema.codec(version).decode(r)
    assert r.remaining == 0
    return obj


def sample_request() -> OffsetForLeaderEpochRequest:
    return OffsetForLeaderEpochRequest(
        replica_id=2,
        topics=(
            OffsetForLeaderTopic(
                topic="t",
                partitions=(OffsetForLeaderPartition(partition=0, current_leader_epoch=5, leader_epoch=3),),
            ),
        ),
    )


def sample_response() -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(
        throttle_time_ms=7,
        topics=(
            OffsetForLeaderTopicResult(
                topic="t",
                partitions=(
                    OffsetForLeaderPartitionResult(error_code=0, partition=0, leader_epoch=3, end_offset=100),
                    OffsetForLeaderPartitionResult(error_code=74, partition=1),
                ),
            ),
        ),
    )


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


# --- golden bytes written out by hand from the protocol guide -----------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # topics[1] { "t", partitions[1] { partition 0, leader_epoch 3 } }
        (0, i32(1) + i16(1) + b"t" + i32(1) + i32(0) + i32(3)),
        (1, i32(1) + i16(1) + b"t" + i32(1) + i32(0) + i32(3)),
        # + current_leader_epoch 5 before leader_epoch
        (2, i32(1) + i16(1) + b"t" + i32(1) + i32(0) + i32(5) + i32(3)),
        # + replica_id 2 first
        (3, i32(2) + i32(1) + i16(1) + b"t" + i32(1) + i32(0) + i32(5) + i32(3)),
        # flexible: compact arrays/strings (length + 1 as a varint), empty tag sections
        (4, i32(2) + b"\x02" + b"\x02t" + b"\x02" + i32(0) + i32(5) + i32(3) + b"\x00" + b"\x00" + b"\x00"),
    ],
)
def test_request_golden_bytes(version: int, expected: bytes) -> None:
    req = sample_request()
    assert body(REQUEST, version, req) == expected
    want = req
    if version < 3:
        want = OffsetForLeaderEpochRequest(topics=req.topics)  # replica_id takes its default -2
    if version < 2:
        want = OffsetForLeaderEpochRequest(
            topics=(
                OffsetForLeaderTopic(
                    topic="t", partitions=(OffsetForLeaderPartition(partition=0, leader_epoch=3),)
                ),
            )
        )
    assert decode(REQUEST, version, expected) == want


# Response partitions: {error 0, partition 0, leader_epoch 3, end 100} and
# {error 74 FENCED_LEADER_EPOCH, partition 1, leader_epoch -1, end -1}.
P0_V0 = i16(0) + i32(0) + i64(100)
P1_V0 = i16(74) + i32(1) + i64(-1)
P0 = i16(0) + i32(0) + i32(3) + i64(100)
P1 = i16(74) + i32(1) + i32(-1) + i64(-1)
TOPIC = i16(1) + b"t"


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # v0: no leader_epoch, no throttle time
        (0, i32(1) + TOPIC + i32(2) + P0_V0 + P1_V0),
        # v1: + leader_epoch after the partition
        (1, i32(1) + TOPIC + i32(2) + P0 + P1),
        # v2/v3: + throttle_time_ms first
        (2, i32(7) + i32(1) + TOPIC + i32(2) + P0 + P1),
        (3, i32(7) + i32(1) + TOPIC + i32(2) + P0 + P1),
        # flexible: compact arrays/strings, a tag section after each struct
        (4, i32(7) + b"\x02" + b"\x02t" + b"\x03" + P0 + b"\x00" + P1 + b"\x00" + b"\x00" + b"\x00"),
    ],
)
def test_response_golden_bytes(version: int, expected: bytes) -> None:
    resp = sample_response()
    assert body(RESPONSE, version, resp) == expected
    want = resp
    if version < 2:
        want = OffsetForLeaderEpochResponse(topics=resp.topics)
    if version < 1:
        want = OffsetForLeaderEpochResponse(
            topics=(
                OffsetForLeaderTopicResult(
                    topic="t",
                    partitions=(
                        OffsetForLeaderPartitionResult(partition=0, end_offset=100),
                        OffsetForLeaderPartitionResult(error_code=74, partition=1),
                    ),
                ),
            )
        )
    assert decode(RESPONSE, version, expected) == want


def test_defaults_follow_kafkas_json() -> None:
    assert OffsetForLeaderEpochRequest().replica_id == -2
    assert OffsetForLeaderPartition(partition=0, leader_epoch=1).current_leader_epoch == -1
    result = OffsetForLeaderPartitionResult(partition=0)
    assert (result.error_code, result.leader_epoch, result.end_offset) == (0, -1, -1)


# --- round trips ---------------------------------------------------------------------------------

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
name = st.text(max_size=10)


def requests(version: int) -> st.SearchStrategy[OffsetForLeaderEpochRequest]:
    part = st.builds(
        OffsetForLeaderPartition,
        partition=int32,
        current_leader_epoch=int32 if version >= 2 else st.just(-1),
        leader_epoch=int32,
    )
    topic = st.builds(OffsetForLeaderTopic, topic=name, partitions=st.lists(part, max_size=3).map(tuple))
    return st.builds(
        OffsetForLeaderEpochRequest,
        replica_id=int32 if version >= 3 else st.just(-2),
        topics=st.lists(topic, max_size=3).map(tuple),
    )


def responses(version: int) -> st.SearchStrategy[OffsetForLeaderEpochResponse]:
    part = st.builds(
        OffsetForLeaderPartitionResult,
        error_code=st.integers(-(2**15), 2**15 - 1),
        partition=int32,
        leader_epoch=int32 if version >= 1 else st.just(-1),
        end_offset=int64,
    )
    topic = st.builds(
        OffsetForLeaderTopicResult, topic=name, partitions=st.lists(part, max_size=3).map(tuple)
    )
    return st.builds(
        OffsetForLeaderEpochResponse,
        throttle_time_ms=int32 if version >= 2 else st.just(0),
        topics=st.lists(topic, max_size=3).map(tuple),
    )


@pytest.mark.parametrize("version", ALL_VERSIONS)
@settings(SETTINGS)
@given(data=st.data())
def test_round_trip(version: int, data: st.DataObject) -> None:
    req = data.draw(requests(version))
    assert decode(REQUEST, version, body(REQUEST, version, req)) == req
    resp = data.draw(responses(version))
    assert decode(RESPONSE, version, body(RESPONSE, version, resp)) == resp


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_every_truncation_is_a_protocol_error(version: int) -> None:
    for schema, obj in ((REQUEST, sample_request()), (RESPONSE, sample_response())):
        full = body(schema, version, obj)
        for cut in range(len(full)):
            with pytest.raises(ProtocolError):
                schema.codec(version).decode(Reader(full[:cut]))


def test_v4_skips_unknown_tagged_fields() -> None:
    plain = body(REQUEST, 4, sample_request())
    # Replace the top-level (last) empty tag section with one unknown tag 9 of 2 bytes.
    tagged = plain[:-1] + b"\x01" + b"\x09" + b"\x02" + b"ab"
    assert decode(REQUEST, 4, tagged) == sample_request()


# --- kafka-python's implementations ---------------------------------------------------------------

old = pytest.importorskip("kafka.protocol.old.offset_for_leader_epoch")


def to_old(obj: Any, version: int) -> Any:
    """Our dataclass -> the same message as kafka-python's hand-written structs."""
    if isinstance(obj, OffsetForLeaderEpochRequest):
        tags: tuple[dict[int, bytes], ...] = ({},) if version >= 4 else ()

        def part(p: OffsetForLeaderPartition) -> tuple[Any, ...]:
            head = (p.partition, p.current_leader_epoch) if version >= 2 else (p.partition,)
            return (*head, p.leader_epoch, *tags)

        topics = [(t.topic, [part(p) for p in t.partitions], *tags) for t in obj.topics]
        args: tuple[Any, ...] = ((obj.replica_id,) if version >= 3 else ()) + (topics, *tags)
        return getattr(old, f"OffsetForLeaderEpochRequest_v{version}")(*args)
    tags = ({},) if version >= 4 else ()

    def result(p: OffsetForLeaderPartitionResult) -> tuple[Any, ...]:
        epoch = (p.leader_epoch,) if version >= 1 else ()
        return (p.error_code, p.partition, *epoch, p.end_offset, *tags)

    rtopics = [(t.topic, [result(p) for p in t.partitions], *tags) for t in obj.topics]
    rargs: tuple[Any, ...] = ((obj.throttle_time_ms,) if version >= 2 else ()) + (rtopics, *tags)
    return getattr(old, f"OffsetForLeaderEpochResponse_v{version}")(*rargs)


@pytest.mark.parametrize("version", ALL_VERSIONS)
@settings(SETTINGS, max_examples=25)
@given(data=st.data())
def test_bytes_match_kafka_python_old_structs(version: int, data: st.DataObject) -> None:
    req = data.draw(requests(version))
    theirs = to_old(req, version).encode()
    assert body(REQUEST, version, req) == theirs
    assert decode(REQUEST, version, theirs) == req
    resp = data.draw(responses(version))
    theirs = to_old(resp, version).encode()
    assert body(RESPONSE, version, resp) == theirs
    assert decode(RESPONSE, version, theirs) == resp


def to_json_class(kp_cls: Any, kp_struct: Any, obj: Any, version: int) -> Any:
    """Our dataclass -> kafka-python's JSON-driven message, field by field."""
    ours = {fi.name for fi in wire_fields(type(obj))}
    kwargs: dict[str, Any] = {}
    for kf in kp_struct._fields:
        if not kf.for_version_q(version):
            continue
        assert kf.name in ours, kf.name
        v = getattr(obj, kf.name)
        if kf.is_struct_array():
            v = [to_json_class(kf.data_class, kf.array_of, x, version) for x in v]
        kwargs[kf.name] = v
    return kp_cls(version=version, **kwargs)


@pytest.mark.parametrize("version", [2, 3, 4])
@settings(SETTINGS, max_examples=25)
@given(data=st.data())
def test_bytes_match_kafka_python_json_classes(version: int, data: st.DataObject) -> None:
    kp = pytest.importorskip("kafka.protocol.consumer")
    for schema, cls, obj in (
        (REQUEST, kp.OffsetForLeaderEpochRequest, data.draw(requests(version))),
        (RESPONSE, kp.OffsetForLeaderEpochResponse, data.draw(responses(version))),
    ):
        theirs = to_json_class(cls, cls._struct, obj, version).encode(version=version)
        assert body(schema, version, obj) == theirs
        assert decode(schema, version, theirs) == obj
