"""Kafka wire codec: round trips of every API at every advertised version, golden bytes
against kafka-python's independent implementation, and fuzzing of the request decoder."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kwire import (
    APIS,
    ApiKey,
    ProtocolError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kwire.messages.fetch import SEGMENT_BASES_TAG as STRATA_PRIVATE_TAGS
from kwire.primitives import Reader, Writer
from kwire.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    Kind,
    Prim,
    Struct,
    wire_fields,
)

SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=12,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

VERSIONS = [
    (key, v) for key, spec in sorted(APIS.items()) for v in range(spec.min_version, spec.max_version + 1)
]
VERSION_IDS = [f"{APIS[k].name}-v{v}" for k, v in VERSIONS]

# --- strategies generated from the schema tables -------------------------------------------

_PRIM: dict[Prim, st.SearchStrategy[Any]] = {
    INT8: st.integers(-(2**7), 2**7 - 1),
    INT16: st.integers(-(2**15), 2**15 - 1),
    UINT16: st.integers(0, 2**16 - 1),
    INT32: st.integers(-(2**31), 2**31 - 1),
    UINT32: st.integers(0, 2**32 - 1),
    INT64: st.integers(-(2**63), 2**63 - 1),
    FLOAT64: st.floats(allow_nan=False),
    BOOL: st.booleans(),
    UUID: st.uuids() | st.just(uuid.UUID(int=0)),
    STRING: st.text(max_size=12),
    BYTES: st.binary(max_size=16),
    RECORDS: st.binary(max_size=40),
}


def _value(kind: Kind, nullable: bool, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if isinstance(kind, Prim):
        base = _PRIM[kind]
    elif isinstance(kind, Array):
        base = st.lists(_value(kind.elem, False, version, flexible), max_size=3).map(tuple)
    elif isinstance(kind, Struct):
        base = struct_strategy(kind.cls, version, flexible)
    else:
        raise AssertionError(kind)
    return st.none() | base if nullable else base


def struct_strategy(cls: type, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for fi in wire_fields(cls):
        if not fi.present_in(version):
            continue
        if fi.tagged_in(version) and fi.tag is not None and fi.tag >= STRATA_PRIVATE_TAGS:
            continue  # Strata's own (replica fetches): not Kafka's, kafka-python cannot know it
        if fi.tagged_in(version) and isinstance(fi.kind, Struct):
            # absent (None) or a struct that differs from its defaults (else it is not written)
            s = struct_strategy(fi.kind.cls, version, flexible)
            kwargs[fi.name] = st.none() | s.filter(_differs_from(fi.kind.cls()))
        else:
            kwargs[fi.name] = _value(fi.kind, fi.nullable_in(version), version, flexible)
    return st.builds(cls, **kwargs)


def _differs_from(default: object) -> Callable[[object], bool]:
    return lambda v: bool(v != default)


def request_strategy(key: int, version: int) -> st.SearchStrategy[Any]:
    spec = APIS[key]
    return struct_strategy(spec.request.cls, version, spec.is_flexible(version))


def response_strategy(key: int, version: int) -> st.SearchStrategy[Any]:
    spec = APIS[key]
    return struct_strategy(spec.response.cls, version, spec.is_flexible(version))


def expected_request(key: int, version: int, obj: Any) -> Any:
    spec = APIS[key]
    if spec.before_encode_request is not None:
        obj = spec.before_encode_request(version, obj)
    if spec.after_decode_request is not None:
        obj = spec.after_decode_request(version, obj)
    return obj


def body_bytes(schema_codec: Any, obj: Any) -> bytes:
    w = Writer()
    schema_codec.encode(w, obj)
    return w.getvalue()


# --- round trips --------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@SETTINGS
@given(data=st.data())
def test_request_round_trip(key: int, version: int, data: st.DataObject) -> None:
    obj = data.draw(request_strategy(key, version))
    client_id = data.draw(st.none() | st.text(max_size=10))
    frame = encode_request(key, version, 12345, client_id, obj)
    header, decoded = decode_request(frame, strict=True)
    assert header == RequestHeader(key, version, 12345, client_id)
    assert decoded == expected_request(key, version, obj)
    # Re-encoding what we decoded gives the same bytes (memoryviews encode like bytes).
    assert encode_request(key, version, 12345, client_id, decoded) == frame


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@SETTINGS
@given(data=st.data())
def test_response_round_trip(key: int, version: int, data: st.DataObject) -> None:
    obj = data.draw(response_strategy(key, version))
    if key == ApiKey.API_VERSIONS:
        assume(obj.error_code != 35)  # that code means "decode as v0" to a client
    header = RequestHeader(key, version, -7, "c")
    parts = encode_response(header, obj)
    assert len(parts) == 1 and isinstance(parts[0], bytes)
    correlation_id, decoded = decode_response(key, version, parts[0], strict=True)
    assert correlation_id == -7
    assert decoded == obj


def test_every_version_has_compiled_codecs() -> None:
    # codecs compile on first use (import stays fast): compile every one here, so a table
    # error is still caught by the suite, not by the first client of that version
    for key, spec in APIS.items():
        assert spec.api_key == key
        for v in range(spec.min_version, spec.max_version + 1):
            assert v in spec.request.codecs and v in spec.response.codecs
            assert spec.request.codec(v) is spec.request.codecs[v] and spec.response.codec(v) is not None
        assert spec.max_version + 1 not in spec.request.codecs
        with pytest.raises(KeyError):
            spec.request.codecs[spec.max_version + 1]
            assert spec.request.is_flexible(v) == (spec.flexible_from is not None and v >= spec.flexible_from)


def test_advertised_ranges_are_exactly_the_brief() -> None:
    ranges = {k: (s.min_version, s.max_version, s.flexible_from) for k, s in APIS.items()}
    assert ranges == {
        18: (0, 3, 3),
        3: (0, 13, 9),
        0: (3, 11, 9),
        1: (4, 17, 12),
        2: (1, 10, 6),
        19: (2, 7, 5),
        20: (1, 6, 4),
        32: (0, 4, 4),
        22: (0, 4, 2),
        23: (0, 4, 4),
        33: (0, 2, 2),
        44: (0, 1, 1),
        37: (0, 3, 2),
        8: (0, 9, 8),
        9: (0, 9, 6),
        10: (0, 4, 3),
        11: (0, 9, 6),
        12: (0, 4, 4),
        13: (0, 5, 4),
        14: (0, 5, 4),
        15: (0, 6, 5),
        16: (0, 5, 3),
        42: (0, 2, 2),
        47: (0, 0, None),
        45: (0, 0, 0),
        46: (0, 0, 0),
        17: (0, 1, None),
        36: (0, 2, 2),
        29: (0, 3, 2),
        30: (0, 3, 2),
        31: (0, 3, 2),
        48: (0, 1, 1),
        49: (0, 1, 1),
        61: (0, 0, 0),  # DescribeProducers (KIP-664)
        27: (1, 2, 1),  # WriteTxnMarkers (v0 removed in Kafka 4.0)
        28: (0, 4, 3),  # TxnOffsetCommit (v5 belongs to transaction version 2)
        # the transaction coordinator; EndTxn v5 (Transactions V2) not served
        24: (0, 5, 3),
        25: (0, 4, 3),
        26: (0, 4, 3),
        65: (0, 0, 0),
        66: (0, 2, 0),
        68: (0, 1, 0),  # KIP-848
        69: (0, 1, 0),
        21: (0, 2, 2),  # DeleteRecords (KIP-107)
        50: (0, 0, 0),  # DescribeUserScramCredentials (KIP-554)
        51: (0, 0, 0),  # AlterUserScramCredentials
        35: (1, 4, 2),  # DescribeLogDirs (v0 removed in Kafka 4.0)
        75: (0, 0, 0),  # DescribeTopicPartitions (KIP-966)
        76: (1, 1, 1),  # ShareGroupHeartbeat (KIP-932; v0 was Kafka 4.0's early access)
        77: (1, 1, 1),  # ShareGroupDescribe
        78: (1, 2, 1),  # ShareFetch (v2: KIP-1206, KIP-1222)
        79: (1, 2, 1),  # ShareAcknowledge
        84: (0, 0, 0),  # ReadShareGroupState (between brokers)
        85: (0, 0, 0),  # WriteShareGroupState
        86: (0, 0, 0),  # DeleteShareGroupState
        90: (0, 0, 0),  # DescribeShareGroupOffsets
        91: (0, 0, 0),  # AlterShareGroupOffsets
        92: (0, 0, 0),  # DeleteShareGroupOffsets
        43: (0, 2, 2),  # ElectLeaders (KIP-460)
    }


# --- golden bytes against kafka-python's JSON-driven implementation -------------------------

kp_admin = pytest.importorskip("kafka.protocol.admin")
kp_consumer = pytest.importorskip("kafka.protocol.consumer")
kp_metadata = pytest.importorskip("kafka.protocol.metadata")
kp_producer = pytest.importorskip("kafka.protocol.producer")
kp_sasl = pytest.importorskip("kafka.protocol.sasl")

KP: dict[int, tuple[Any, Any]] = {
    0: (kp_producer.ProduceRequest, kp_producer.ProduceResponse),
    1: (kp_consumer.FetchRequest, kp_consumer.FetchResponse),
    2: (kp_consumer.ListOffsetsRequest, kp_consumer.ListOffsetsResponse),
    3: (kp_metadata.MetadataRequest, kp_metadata.MetadataResponse),
    18: (kp_metadata.ApiVersionsRequest, kp_metadata.ApiVersionsResponse),
    19: (kp_admin.CreateTopicsRequest, kp_admin.CreateTopicsResponse),
    20: (kp_admin.DeleteTopicsRequest, kp_admin.DeleteTopicsResponse),
    22: (kp_producer.InitProducerIdRequest, kp_producer.InitProducerIdResponse),
    23: (kp_consumer.OffsetForLeaderEpochRequest, kp_consumer.OffsetForLeaderEpochResponse),
    32: (kp_admin.DescribeConfigsRequest, kp_admin.DescribeConfigsResponse),
    33: (kp_admin.AlterConfigsRequest, kp_admin.AlterConfigsResponse),
    44: (kp_admin.IncrementalAlterConfigsRequest, kp_admin.IncrementalAlterConfigsResponse),
    37: (kp_admin.CreatePartitionsRequest, kp_admin.CreatePartitionsResponse),
    45: (kp_admin.AlterPartitionReassignmentsRequest, kp_admin.AlterPartitionReassignmentsResponse),
    46: (kp_admin.ListPartitionReassignmentsRequest, kp_admin.ListPartitionReassignmentsResponse),
    48: (kp_admin.DescribeClientQuotasRequest, kp_admin.DescribeClientQuotasResponse),
    49: (kp_admin.AlterClientQuotasRequest, kp_admin.AlterClientQuotasResponse),
    17: (kp_sasl.SaslHandshakeRequest, kp_sasl.SaslHandshakeResponse),
    36: (kp_sasl.SaslAuthenticateRequest, kp_sasl.SaslAuthenticateResponse),
    29: (kp_admin.DescribeAclsRequest, kp_admin.DescribeAclsResponse),
    30: (kp_admin.CreateAclsRequest, kp_admin.CreateAclsResponse),
    31: (kp_admin.DeleteAclsRequest, kp_admin.DeleteAclsResponse),
    21: (kp_admin.DeleteRecordsRequest, kp_admin.DeleteRecordsResponse),
    50: (kp_admin.DescribeUserScramCredentialsRequest, kp_admin.DescribeUserScramCredentialsResponse),
    51: (kp_admin.AlterUserScramCredentialsRequest, kp_admin.AlterUserScramCredentialsResponse),
    35: (kp_admin.DescribeLogDirsRequest, kp_admin.DescribeLogDirsResponse),
    75: (kp_admin.DescribeTopicPartitionsRequest, kp_admin.DescribeTopicPartitionsResponse),
    43: (kp_admin.ElectLeadersRequest, kp_admin.ElectLeadersResponse),
}

# The group-coordinator APIs are checked against kafka-python at every version, both
# directions, in test_protocol_groups.py (their JSON classes need a few field renames).
GOLDEN_VERSIONS = [(k, v) for k, v in VERSIONS if k in KP]
GOLDEN_IDS = [f"{APIS[k].name}-v{v}" for k, v in GOLDEN_VERSIONS]


def _bitset(v: int) -> set[int]:
    return {b for b in range(32) if (v & 0xFFFFFFFF) >> b & 1}


def to_kafka_python(kp_cls: Any, kp_struct: Any, obj: Any, version: int) -> Any:
    """Our dataclass -> the equivalent kafka-python object, field by field."""
    ours = {fi.name: fi for fi in wire_fields(type(obj))}
    kwargs: dict[str, Any] = {}
    for kf in kp_struct._fields:
        if not kf.for_version_q(version):
            continue
        name = kf.name
        if name not in ours:  # kafka-python renames Metadata's *_authorized_operations
            (name,) = [n for n in ours if n.endswith(kf.name)]
        fi = ours[name]
        v = getattr(obj, name)
        if kf.tagged_field_q(version) and (v is None or v == fi.default or (isinstance(v, tuple) and not v)):
            continue  # we do not write it; make kafka-python not write it either
        if kf.is_struct_array():
            v = None if v is None else [to_kafka_python(kf.data_class, kf.array_of, x, version) for x in v]
        elif kf.is_struct():
            v = None if v is None else to_kafka_python(kf.data_class, kf, v, version)
        elif kf.name == "authorized_operations":
            v = _bitset(v)
        elif isinstance(v, tuple):
            v = list(v)
        kwargs[kf.name] = v
    return kp_cls(version=version, **kwargs)


@pytest.mark.parametrize(("key", "version"), GOLDEN_VERSIONS, ids=GOLDEN_IDS)
@settings(SETTINGS, max_examples=8)
@given(data=st.data())
def test_golden_request_body_matches_kafka_python(key: int, version: int, data: st.DataObject) -> None:
    spec = APIS[key]
    obj = data.draw(request_strategy(key, version))
    obj = expected_request(key, version, obj)
    if key == ApiKey.METADATA and version == 0 and obj.topics is None:
        obj = dataclasses.replace(obj, topics=())
    ours = body_bytes(spec.request.codecs[version], obj)
    kp_cls = KP[key][0]
    theirs = to_kafka_python(kp_cls, kp_cls._struct, obj, version).encode(version=version)
    assert ours == theirs
    decoded = spec.request.codecs[version].decode(Reader(theirs))
    if spec.after_decode_request is not None:  # part of decoding (decode_request applies it)
        decoded, obj = spec.after_decode_request(version, decoded), spec.after_decode_request(version, obj)
    assert decoded == obj


@pytest.mark.parametrize(("key", "version"), GOLDEN_VERSIONS, ids=GOLDEN_IDS)
@settings(SETTINGS, max_examples=8)
@given(data=st.data())
def test_golden_response_body_matches_kafka_python(key: int, version: int, data: st.DataObject) -> None:
    spec = APIS[key]
    obj = data.draw(response_strategy(key, version))
    ours = body_bytes(spec.response.codecs[version], obj)
    kp_cls = KP[key][1]
    theirs = to_kafka_python(kp_cls, kp_cls._struct, obj, version).encode(version=version)
    assert ours == theirs
    assert spec.response.codecs[version].decode(Reader(theirs)) == obj


@pytest.mark.parametrize(("key", "version"), [(0, 9), (1, 12), (3, 12), (3, 1), (18, 3), (18, 0), (2, 7)])
def test_golden_request_with_header_matches_kafka_python(key: int, version: int) -> None:
    obj = _sample_request(key, version)
    kp_cls = KP[key][0]
    kp_obj = to_kafka_python(kp_cls, kp_cls._struct, obj, version)
    kp_obj.with_header(correlation_id=99, client_id="strata-test")
    assert encode_request(key, version, 99, "strata-test", obj) == kp_obj.encode(header=True)


@pytest.mark.parametrize(("key", "version"), [(18, 3), (18, 0), (1, 12), (0, 8), (3, 9)])
def test_golden_response_with_header_matches_kafka_python(key: int, version: int) -> None:
    obj = _sample_response(key, version)
    kp_cls = KP[key][1]
    kp_obj = to_kafka_python(kp_cls, kp_cls._struct, obj, version)
    kp_obj.with_header(correlation_id=5)
    (ours,) = encode_response(RequestHeader(key, version, 5, "x"), obj)
    assert ours == kp_obj.encode(header=True)


def _sample_request(key: int, version: int) -> Any:
    from kwire import (
        ApiVersionsRequest,
        FetchPartition,
        FetchRequest,
        FetchTopic,
        ListOffsetsPartition,
        ListOffsetsRequest,
        ListOffsetsTopic,
        MetadataRequest,
        MetadataRequestTopic,
        ProducePartitionData,
        ProduceRequest,
        ProduceTopicData,
    )

    samples: dict[int, Any] = {
        0: ProduceRequest(
            acks=-1,
            timeout_ms=30000,
            topic_data=(
                ProduceTopicData(name="t", partition_data=(ProducePartitionData(index=2, records=b"xyz"),)),
            ),
        ),
        1: FetchRequest(
            max_wait_ms=500,
            min_bytes=1,
            topics=(
                FetchTopic(
                    topic="t",
                    partitions=(FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1 << 20),),
                ),
            ),
            rack_id="r1",
            cluster_id="abc",
        ),
        2: ListOffsetsRequest(
            topics=(
                ListOffsetsTopic(
                    name="t", partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)
                ),
            )
        ),
        3: MetadataRequest(topics=(MetadataRequestTopic(name="a"), MetadataRequestTopic(name="b"))),
        18: ApiVersionsRequest(client_software_name="librdkafka", client_software_version="2.3.0"),
    }
    return samples[key]


def _sample_response(key: int, version: int) -> Any:
    from kwire import (
        FetchableTopicResponse,
        FetchPartitionData,
        FetchResponse,
        LeaderIdAndEpoch,
        MetadataResponse,
        MetadataResponseBroker,
        ProducePartitionResponse,
        ProduceResponse,
        ProduceTopicResponse,
        api_versions_response,
    )

    samples: dict[int, Any] = {
        18: api_versions_response(),
        1: FetchResponse(
            responses=(
                FetchableTopicResponse(
                    topic="t",
                    partitions=(
                        FetchPartitionData(
                            partition_index=0,
                            high_watermark=10,
                            records=b"\x00" * 7,
                            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
                        ),
                    ),
                ),
            )
        ),
        0: ProduceResponse(
            responses=(
                ProduceTopicResponse(
                    name="t", partition_responses=(ProducePartitionResponse(index=0, base_offset=100),)
                ),
            )
        ),
        3: MetadataResponse(
            brokers=(MetadataResponseBroker(node_id=1, host="h", port=9092),), cluster_id="c"
        ),
    }
    return samples[key]


# --- fuzzing: decode_request raises ProtocolError and nothing else ---------------------------


def _valid_frames() -> list[bytes]:
    frames = []
    for key, version in VERSIONS:
        obj = struct_example(key, version)
        frames.append(encode_request(key, version, 1, "fuzz", obj))
    return frames


def struct_example(key: int, version: int) -> Any:
    """A deterministic, non-trivial request (every array has one element, strings non-empty)."""
    spec = APIS[key]
    return _fill(spec.request.cls, version, spec.is_flexible(version))


def _fill(cls: type, version: int, flexible: bool) -> Any:
    kwargs: dict[str, Any] = {}
    for fi in wire_fields(cls):
        if not fi.present_in(version):
            continue
        kwargs[fi.name] = _fill_value(fi.kind, version, flexible)
    return cls(**kwargs)


def _fill_value(kind: Kind, version: int, flexible: bool) -> Any:
    if isinstance(kind, Struct):
        return _fill(kind.cls, version, flexible)
    if isinstance(kind, Array):
        return (_fill_value(kind.elem, version, flexible),)
    if kind is STRING:
        return "topic-é"
    if kind in (BYTES, RECORDS):
        return b"\x00\x01records\xff"
    if kind is UUID:
        return uuid.UUID(int=0x1234)
    if kind is BOOL:
        return True
    return 3


VALID_FRAMES = _valid_frames()


def _decode_only_protocol_errors(frame: bytes) -> None:
    try:
        decode_request(frame)
    except ProtocolError:
        pass


@SETTINGS
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(frame: bytes) -> None:
    _decode_only_protocol_errors(frame)


@settings(SETTINGS, max_examples=300)
@given(
    idx=st.integers(0, len(VALID_FRAMES) - 1),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), max_size=4),
    cut=st.none() | st.integers(0, 10_000),
)
def test_fuzz_mutated_valid_frames(idx: int, flips: list[tuple[int, int]], cut: int | None) -> None:
    frame = bytearray(VALID_FRAMES[idx])
    for pos, bit in flips:
        frame[pos % len(frame)] ^= 1 << bit
    if cut is not None:
        del frame[cut % (len(frame) + 1) :]
    _decode_only_protocol_errors(bytes(frame))


@pytest.mark.parametrize("idx", range(len(VALID_FRAMES)))
def test_every_truncation_of_a_valid_frame_is_a_protocol_error(idx: int) -> None:
    frame = VALID_FRAMES[idx]
    decode_request(frame, strict=True)
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut], strict=True)


@SETTINGS
@given(
    key_version=st.sampled_from(VERSIONS),
    junk=st.binary(max_size=64),
)
def test_fuzz_body_after_a_valid_header(key_version: tuple[int, int], junk: bytes) -> None:
    key, version = key_version
    header = encode_request(key, version, 1, "fuzz", struct_example(key, version))
    # keep the header, replace the body with junk
    r = Reader(header)
    from kwire.header import decode_request_header

    decode_request_header(r, APIS[key].request_header_version(version))
    _decode_only_protocol_errors(header[: r.pos] + junk)


# --- golden bytes against kafka-python's older hand-written struct classes -------------------


def _old_pairs() -> list[tuple[str, int, int, Any, Any]]:
    """(label, api key, version, our request/response, the same built with kafka.protocol.old)."""
    from kwire import (
        AbortedTransaction,
        CreatableReplicaAssignment,
        CreatableTopic,
        CreatableTopicConfig,
        CreateTopicsRequest,
        DeleteTopicsRequest,
        DescribeConfigsRequest,
        DescribeConfigsResource,
        FetchableTopicResponse,
        FetchPartition,
        FetchPartitionData,
        FetchRequest,
        FetchResponse,
        FetchTopic,
        InitProducerIdRequest,
        ListOffsetsPartition,
        ListOffsetsRequest,
        ListOffsetsTopic,
        MetadataRequest,
        MetadataRequestTopic,
        ProducePartitionData,
        ProduceRequest,
        ProduceTopicData,
    )

    old_admin = pytest.importorskip("kafka.protocol.old.admin")
    old_fetch = pytest.importorskip("kafka.protocol.old.fetch")
    old_ipi = pytest.importorskip("kafka.protocol.old.init_producer_id")
    old_lo = pytest.importorskip("kafka.protocol.old.list_offsets")
    old_md = pytest.importorskip("kafka.protocol.old.metadata")
    old_produce = pytest.importorskip("kafka.protocol.old.produce")
    return [
        ("metadata-v1-all", 3, 1, MetadataRequest(topics=None), old_md.MetadataRequest_v1(None)),
        (
            "metadata-v4",
            3,
            4,
            MetadataRequest(
                topics=(MetadataRequestTopic(name="a"), MetadataRequestTopic(name="bb")),
                allow_auto_topic_creation=False,
            ),
            old_md.MetadataRequest_v4(["a", "bb"], False),
        ),
        (
            "produce-v3",
            0,
            3,
            ProduceRequest(
                transactional_id="tx",
                acks=-1,
                timeout_ms=1500,
                topic_data=(
                    ProduceTopicData(
                        name="t", partition_data=(ProducePartitionData(index=4, records=b"AB"),)
                    ),
                ),
            ),
            old_produce.ProduceRequest_v3("tx", -1, 1500, [("t", [(4, b"AB")])]),
        ),
        (
            "fetch-v4",
            1,
            4,
            FetchRequest(
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=1,
                topics=(
                    FetchTopic(
                        topic="t",
                        partitions=(FetchPartition(partition=2, fetch_offset=77, partition_max_bytes=999),),
                    ),
                ),
            ),
            old_fetch.FetchRequest_v4(-1, 500, 1, 1 << 20, 1, [("t", [(2, 77, 999)])]),
        ),
        (
            "fetch-response-v4",
            1,
            4,
            FetchResponse(
                throttle_time_ms=3,
                responses=(
                    FetchableTopicResponse(
                        topic="t",
                        partitions=(
                            FetchPartitionData(
                                partition_index=2,
                                error_code=0,
                                high_watermark=100,
                                last_stable_offset=90,
                                aborted_transactions=(AbortedTransaction(producer_id=5, first_offset=80),),
                                records=b"batch",
                            ),
                        ),
                    ),
                ),
            ),
            old_fetch.FetchResponse_v4(3, [("t", [(2, 0, 100, 90, [(5, 80)], b"batch")])]),
        ),
        (
            "list-offsets-v1",
            2,
            1,
            ListOffsetsRequest(
                topics=(
                    ListOffsetsTopic(
                        name="t", partitions=(ListOffsetsPartition(partition_index=1, timestamp=-2),)
                    ),
                )
            ),
            old_lo.ListOffsetsRequest_v1(-1, [("t", [(1, -2)])]),
        ),
        (
            "init-producer-id-v0",
            22,
            0,
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
            old_ipi.InitProducerIdRequest_v0(None, 60000),
        ),
        (
            "create-topics-v2",
            19,
            2,
            CreateTopicsRequest(
                topics=(
                    CreatableTopic(
                        name="t",
                        num_partitions=-1,
                        replication_factor=-1,
                        assignments=(CreatableReplicaAssignment(partition_index=0, broker_ids=(1, 2)),),
                        configs=(CreatableTopicConfig(name="cleanup.policy", value="compact"),),
                    ),
                ),
                timeout_ms=1000,
                validate_only=True,
            ),
            old_admin.CreateTopicsRequest_v2(
                [("t", -1, -1, [(0, [1, 2])], [("cleanup.policy", "compact")])], 1000, True
            ),
        ),
        (
            "delete-topics-v1",
            20,
            1,
            DeleteTopicsRequest(topic_names=("a", "b"), timeout_ms=5),
            old_admin.DeleteTopicsRequest_v1(["a", "b"], 5),
        ),
        (
            "describe-configs-v1",
            32,
            1,
            DescribeConfigsRequest(
                resources=(
                    DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=None),
                    DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=("x",)),
                ),
                include_synonyms=True,
            ),
            old_admin.DescribeConfigsRequest_v1([(2, "t", None), (4, "1", ["x"])], True),
        ),
    ]


@pytest.mark.parametrize("pair", _old_pairs(), ids=lambda p: p[0])
def test_golden_body_matches_kafka_python_old_structs(pair: tuple[str, int, int, Any, Any]) -> None:
    _, key, version, ours, old = pair
    spec = APIS[key]
    schema = spec.request if type(ours) is spec.request.cls else spec.response
    data = body_bytes(schema.codecs[version], ours)
    assert data == old.encode()
    assert schema.codecs[version].decode(Reader(data)) == ours


def test_fallback_response_decodes_with_kafka_python_old_api_versions_v0() -> None:
    from kwire import api_versions_fallback_response

    old_av = pytest.importorskip("kafka.protocol.old.api_versions")
    (frame,) = api_versions_fallback_response(RequestHeader(18, 9, 1, None))
    assert isinstance(frame, bytes)
    decoded = old_av.ApiVersionsResponse_v0.decode(frame[4:])  # after the v0 response header
    assert decoded.error_code == 35
    assert sorted(tuple(k) for k in decoded.api_keys) == sorted(
        (s.api_key, s.advertised_min, s.max_version) for s in APIS.values()
    )


def _valid_response_frames() -> list[tuple[int, int, bytes]]:
    out = []
    for key, version in VERSIONS:
        spec = APIS[key]
        obj = _fill(spec.response.cls, version, spec.is_flexible(version))
        (frame,) = encode_response(RequestHeader(key, version, 1, None), obj)
        assert isinstance(frame, bytes)
        out.append((key, version, frame))
    return out


VALID_RESPONSE_FRAMES = _valid_response_frames()


@settings(SETTINGS, max_examples=300)
@given(
    idx=st.integers(0, len(VALID_RESPONSE_FRAMES) - 1),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), max_size=4),
    cut=st.none() | st.integers(0, 10_000),
)
def test_fuzz_mutated_valid_responses(idx: int, flips: list[tuple[int, int]], cut: int | None) -> None:
    """The replication fetcher decodes other brokers' responses: same guarantee as requests."""
    key, version, valid = VALID_RESPONSE_FRAMES[idx]
    assert decode_response(key, version, valid, strict=True)[0] == 1
    frame = bytearray(valid)
    for pos, bit in flips:
        frame[pos % len(frame)] ^= 1 << bit
    if cut is not None:
        del frame[cut % (len(frame) + 1) :]
    try:
        decode_response(key, version, bytes(frame))
    except ProtocolError:
        pass


def test_operations_doc_lists_every_api_and_its_versions() -> None:
    """docs/operations.md's table of served APIs is APIS, row for row."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\d+(?:-\d+)?) \|$", doc, re.M)
    want = [
        (
            str(k),
            s.name,
            str(s.min_version) if s.min_version == s.max_version else f"{s.min_version}-{s.max_version}",
        )
        for k, s in sorted(APIS.items())
    ]
    assert rows == want
