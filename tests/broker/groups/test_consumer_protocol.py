"""The consumer protocol's subscription and assignment bytes, cross-checked against
kafka-python's implementation of Kafka's JSON schemas and aiokafka's structs."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from kwire.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

topic = st.text(min_size=1, max_size=20)
partitions = st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)
owned = st.lists(st.builds(TopicPartitions, topic, partitions), max_size=4).map(tuple)
user_data = st.none() | st.binary(max_size=30)


@st.composite
def subscriptions(draw: st.DrawFn) -> Subscription:
    version = draw(st.integers(0, 3))
    return Subscription(
        version,
        tuple(draw(st.lists(topic, max_size=5))),
        draw(user_data),
        draw(owned) if version >= 1 else (),
        draw(st.integers(-1, 2**31 - 1)) if version >= 2 else -1,
        draw(st.none() | topic) if version >= 3 else None,
    )


def _kp_subscription(s: Subscription) -> bytes:
    kp = ConsumerProtocolSubscription(
        version=s.version,
        topics=list(s.topics),
        user_data=s.user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic=o.topic, partitions=list(o.partitions))
            for o in s.owned_partitions
        ],
        generation_id=s.generation_id,
        rack_id=s.rack_id,
    )
    return bytes(kp.encode(version=s.version))


@settings(max_examples=200, deadline=None)
@given(subscriptions())
def test_subscription_matches_kafka_python(s: Subscription) -> None:
    ours = encode_subscription(s)
    assert ours == _kp_subscription(s)
    assert decode_subscription(ours) == s


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1), owned, user_data)
def test_assignment_matches_kafka_python(
    version: int, parts: tuple[TopicPartitions, ...], ud: bytes | None
) -> None:
    a = Assignment(version, parts, ud)
    ours = encode_assignment(a)
    kp = ConsumerProtocolAssignment(
        version=version,
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=p.topic, partitions=list(p.partitions))
            for p in parts
        ],
        user_data=ud,
    )
    assert ours == bytes(kp.encode(version=version))
    assert decode_assignment(ours) == a


def test_aiokafka_metadata_decodes() -> None:
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

    raw = ConsumerProtocolMemberMetadata(0, ["x", "y"], b"").encode()
    assert decode_subscription(raw) == Subscription(0, ("x", "y"), b"")
    raw = ConsumerProtocolMemberAssignment(0, [("x", [0, 2])], b"").encode()
    assert decode_assignment(raw).partitions == (TopicPartitions("x", (0, 2)),)


def test_newer_versions_read_with_the_newest_known_layout() -> None:
    v3 = encode_subscription(Subscription(3, ("t",), None, (), 4, "rack"))
    v9 = struct.pack(">h", 9) + v3[2:] + b"future fields"
    assert decode_subscription(v9) == Subscription(9, ("t",), None, (), 4, "rack")
    assert decode_assignment(b"") == Assignment(0, ())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00", "truncated in version"),
        (b"\x00\x00\x00\x00\x00\x02\x00\x01t", "topics claims 2 items with 3 bytes left"),
        (b"\x00\x00\x00\x00\x00\x01\x00\x05t", "truncated in topics"),
        (b"\x00\x00\x7f\xff\xff\xff", "claims"),
        (b"\xff\xff", "version -1"),
        (b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe", "UTF-8"),
        (b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff", "truncated in owned_partitions"),
    ],
)
def test_bad_subscriptions_are_precise_errors(data: bytes, message: str) -> None:
    with pytest.raises(ConsumerProtocolError, match=message):
        decode_subscription(data)


def test_bad_assignments_and_unwritable_versions() -> None:
    with pytest.raises(ConsumerProtocolError, match="assigned_partitions claims 1 items"):
        decode_assignment(b"\x00\x00\x00\x00\x00\x01")
    with pytest.raises(ConsumerProtocolError, match="truncated in user_data"):
        decode_assignment(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05")
    with pytest.raises(ConsumerProtocolError):
        encode_subscription(Subscription(4, ()))
    with pytest.raises(ConsumerProtocolError):
        encode_assignment(Assignment(2, ()))
