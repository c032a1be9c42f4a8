"""Wire codec of AlterPartitionReassignments (key 45) and ListPartitionReassignments
(key 46), version 0, flexible: hand-checked layouts (null replicas = cancel, null topics =
all), agreement with kafka-python's JSON-driven classes (also covered for every version
in test_protocol.py), precise errors for truncated or malformed bodies, fuzzing; and a
single-node broker answering them as a one-broker Kafka does, through kafka-python's
admin client. Cluster mode is tested in tests/broker/test_cluster_reassign.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire import APIS, ApiKey, ProtocolError
from kwire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopic,
    ReassignableTopicResponse,
)
from kwire.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopics,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kwire.primitives import Reader, Writer
from tests.brokers import BrokerProcess, create_topic
from tests.kwire.test_protocol import SETTINGS, to_kafka_python

ALTER, LIST = int(ApiKey.ALTER_PARTITION_REASSIGNMENTS), int(ApiKey.LIST_PARTITION_REASSIGNMENTS)


def encode(key: int, obj: Any) -> bytes:
    spec = APIS[key]
    schema = spec.request if type(obj) is spec.request.cls else spec.response
    w = Writer()
    schema.codecs[0].encode(w, obj)
    return w.getvalue()


def decode(key: int, data: bytes, kind: str = "request") -> Any:
    spec = APIS[key]
    schema = spec.request if kind == "request" else spec.response
    r = Reader(data)
    try:
        obj = schema.codecs[0].decode(r)
        if r.pos != r.end:
            raise ProtocolError(f"{r.end - r.pos} trailing bytes after the body at offset {r.pos}")
    except ProtocolError as e:
        e.where = f"{spec.name} v0 {kind}"
        raise
    return obj


def test_registered_as_kafka_defines_them() -> None:
    assert (ALTER, LIST) == (45, 46)
    for key, name in ((ALTER, "AlterPartitionReassignments"), (LIST, "ListPartitionReassignments")):
        spec = APIS[key]
        assert (spec.name, spec.min_version, spec.max_version, spec.flexible_from) == (name, 0, 0, 0)
        assert spec.request_header_version(0) == 2 and spec.response_header_version(0) == 1


ALTER_REQUEST = AlterPartitionReassignmentsRequest(
    timeout_ms=60000,
    topics=(
        ReassignableTopic(
            name="t",
            partitions=(
                ReassignablePartition(partition_index=0, replicas=(1, 2)),
                ReassignablePartition(partition_index=1, replicas=None),
            ),
        ),
    ),
)
ALTER_REQUEST_HEX = (
    "0000ea60"  # timeout_ms
    "02"  # topics: compact array, 1 + 1
    "0274"  # name "t": compact string, 1 + 1
    "03"  # partitions: 2 + 1
    "00000000"  # partition_index 0
    "03"
    "00000001"
    "00000002"  # replicas [1, 2]
    "00"  # partition tags
    "00000001"  # partition_index 1
    "00"  # replicas null: cancel
    "00"  # partition tags
    "00"  # topic tags
    "00"  # request tags
)
ALTER_RESPONSE = AlterPartitionReassignmentsResponse(
    responses=(
        ReassignableTopicResponse(
            name="t",
            partitions=(
                ReassignablePartitionResponse(partition_index=1, error_code=85, error_message="none"),
            ),
        ),
    ),
)
ALTER_RESPONSE_HEX = (
    "00000000"  # throttle_time_ms
    "0000"  # error_code
    "00"  # error_message null
    "02"
    "0274"
    "02"  # responses: one topic "t", one partition
    "00000001"
    "0055"
    "056e6f6e65"  # partition 1, NO_REASSIGNMENT_IN_PROGRESS, "none"
    "00"
    "00"
    "00"
)
LIST_REQUEST_ALL_HEX = "0000ea600000"  # timeout, topics null (all), tags
LIST_RESPONSE = ListPartitionReassignmentsResponse(
    topics=(
        OngoingTopicReassignment(
            name="t",
            partitions=(
                OngoingPartitionReassignment(
                    partition_index=0, replicas=(4, 2, 1), adding_replicas=(4,), removing_replicas=(1,)
                ),
            ),
        ),
    ),
)
LIST_RESPONSE_HEX = (
    "00000000"
    "0000"
    "00"  # throttle, error, message null
    "02"
    "0274"
    "02"  # one topic "t", one partition
    "00000000"  # partition 0
    "04"
    "00000004"
    "00000002"
    "00000001"  # replicas
    "02"
    "00000004"  # adding
    "02"
    "00000001"  # removing
    "00"
    "00"
    "00"
)

LAYOUTS: list[tuple[str, int, str, Any, str]] = [
    ("alter-request", ALTER, "request", ALTER_REQUEST, ALTER_REQUEST_HEX),
    ("alter-response", ALTER, "response", ALTER_RESPONSE, ALTER_RESPONSE_HEX),
    ("list-request-all", LIST, "request", ListPartitionReassignmentsRequest(), LIST_REQUEST_ALL_HEX),
    (
        "list-request-some",
        LIST,
        "request",
        ListPartitionReassignmentsRequest(
            timeout_ms=5, topics=(ListPartitionReassignmentsTopics(name="t", partition_indexes=(3,)),)
        ),
        "0000000502027402000000030000",
    ),
    ("list-response", LIST, "response", LIST_RESPONSE, LIST_RESPONSE_HEX),
]


@pytest.mark.parametrize("case", LAYOUTS, ids=lambda c: c[0])
def test_hand_checked_layouts_agree_with_kafka_python(case: tuple[str, int, str, Any, str]) -> None:
    from kafka.protocol import admin as kp_admin

    _, key, kind, obj, hexed = case
    data = bytes.fromhex(hexed)
    assert encode(key, obj) == data
    assert decode(key, data, kind) == obj
    name = APIS[key].name + ("Request" if kind == "request" else "Response")
    kp_cls = getattr(kp_admin, name)
    assert bytes(to_kafka_python(kp_cls, kp_cls._struct, obj, 0).encode(version=0)) == data


@pytest.mark.parametrize("case", LAYOUTS, ids=lambda c: c[0])
def test_every_truncation_is_a_protocol_error_naming_the_message(
    case: tuple[str, int, str, Any, str],
) -> None:
    _, key, kind, _, hexed = case
    data = bytes.fromhex(hexed)
    for cut in range(len(data)):
        with pytest.raises(ProtocolError) as info:
            decode(key, data[:cut], kind)
        assert str(info.value).startswith(f"{APIS[key].name} v0 {kind}")


@pytest.mark.parametrize(
    ("key", "hexed", "message"),
    [
        (
            ALTER,
            "0000ea6002027402000000000500000001",
            r"partitions\[0\]\.replicas: array count 4 .* cannot fit",
        ),
        (ALTER, "0000ea600000", r"topics: non-nullable compact array is null"),
        (LIST, "0000ea6002000000", r"topics\[0\]\.name: non-nullable compact string is null"),
        (LIST, "0000ea600000ff", r"1 trailing bytes"),
    ],
    ids=["alter-short-replicas", "alter-null-topics", "list-null-name", "list-trailing"],
)
def test_malformed_bodies_get_precise_errors(key: int, hexed: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode(key, bytes.fromhex(hexed))


@settings(SETTINGS, max_examples=200)
@given(
    idx=st.integers(0, len(LAYOUTS) - 1),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1, max_size=4),
)
def test_fuzz_mutated_bodies_raise_only_protocol_errors(idx: int, flips: list[tuple[int, int]]) -> None:
    _, key, kind, _, hexed = LAYOUTS[idx]
    data = bytearray.fromhex(hexed)
    for pos, bit in flips:
        data[pos % len(data)] ^= 1 << bit
    try:
        obj = decode(key, bytes(data), kind)
    except ProtocolError:
        return
    assert decode(key, encode(key, obj), kind) == obj


# --- a single-node broker ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("single-reassign")).start()
    yield b
    b.kill()


def test_single_node_answers_as_a_one_broker_kafka(single: BrokerProcess) -> None:
    kafka_admin = pytest.importorskip("kafka.admin")
    from kafka import TopicPartition
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    topic = f"r-{uuid.uuid4().hex[:8]}"
    create_topic(single.bootstrap, topic, 2)
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=single.bootstrap)
    try:
        (broker,) = admin.describe_cluster()["brokers"]
        node = broker.get("node_id", broker.get("broker_id"))
        assert isinstance(node, int), broker
        results = admin.alter_partition_reassignments(
            {
                TopicPartition(topic, 0): [node],  # where it is already: accepted, nothing moves
                TopicPartition(topic, 1): [node, node + 1],
                TopicPartition("no-such-topic", 0): [node],
                TopicPartition(topic, 5): [node],
            }
        )
        assert results == {
            TopicPartition(topic, 0): None,
            TopicPartition(topic, 1): InvalidReplicationAssignmentError,
            TopicPartition("no-such-topic", 0): UnknownTopicOrPartitionError,
            TopicPartition(topic, 5): UnknownTopicOrPartitionError,
        }
        cancel = admin.alter_partition_reassignments({TopicPartition(topic, 0): None})
        assert cancel == {TopicPartition(topic, 0): NoReassignmentInProgressError}
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
