"""Whole-message behaviour of the Kafka codec: hand-written golden vectors, version
negotiation, zero-copy records, file-region pass-through, tagged fields and error precision."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import pytest

from hot.errors import InvalidRequestError
from kwire import (
    APIS,
    ApiVersionsRequest,
    ApiVersionsResponse,
    EncodeError,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    LeaderIdAndEpoch,
    MetadataRequest,
    MetadataRequestTopic,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ProduceTopicResponse,
    ProtocolError,
    RequestHeader,
    UnknownApiKeyError,
    UnsupportedVersionError,
    api_versions_fallback_response,
    decode_request,
    decode_response,
    encode_frame,
    encode_request,
    encode_response,
    supported_api_versions,
)
from kwire.apis import api_versions_response
from kwire.error_table import kafka_code

# --- hand-written golden vectors ------------------------------------------------------------

# ApiVersions v3 request as librdkafka 2.3.0 sends it (after the size prefix).
LIBRDKAFKA_API_VERSIONS_V3 = bytes.fromhex(
    "0012"  # api_key 18
    "0003"  # api_version 3
    "00000001"  # correlation_id 1
    "0007"  # client_id length 7: NULLABLE_STRING, not compact even in header v2
    "72646b61666b61"  # "rdkafka"
    "00"  # header tagged fields: none
    "0b"  # client_software_name: COMPACT_STRING, length + 1 = 11
    "6c696272646b61666b61"  # "librdkafka"
    "06"  # client_software_version length + 1
    "322e332e30"  # "2.3.0"
    "00"  # body tagged fields: none
)

# Metadata v12 request for all topics.
METADATA_V12_ALL_TOPICS = bytes.fromhex(
    "0003"  # api_key 3
    "000c"  # api_version 12
    "00000007"  # correlation_id 7
    "0007"  # client_id length
    "72646b61666b61"  # "rdkafka"
    "00"  # header tagged fields
    "00"  # topics: COMPACT_ARRAY null (0)
    "01"  # allow_auto_topic_creation true
    "00"  # include_topic_authorized_operations false
    "00"  # tagged fields
)


def test_librdkafka_api_versions_v3_request() -> None:
    header, body = decode_request(LIBRDKAFKA_API_VERSIONS_V3, strict=True)
    assert header == RequestHeader(18, 3, 1, "rdkafka")
    assert body == ApiVersionsRequest(client_software_name="librdkafka", client_software_version="2.3.0")
    assert encode_request(18, 3, 1, "rdkafka", body) == LIBRDKAFKA_API_VERSIONS_V3


def test_metadata_v12_null_topics_request() -> None:
    header, body = decode_request(METADATA_V12_ALL_TOPICS, strict=True)
    assert header == RequestHeader(3, 12, 7, "rdkafka")
    assert body == MetadataRequest(topics=None, allow_auto_topic_creation=True)
    assert encode_request(3, 12, 7, "rdkafka", body) == METADATA_V12_ALL_TOPICS


def test_produce_v3_request_layout() -> None:
    req = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=1500,
        topic_data=(
            ProduceTopicData(name="t", partition_data=(ProducePartitionData(index=0, records=b"AB"),)),
        ),
    )
    expected = bytes.fromhex(
        "0000"  # header v1: api_key 0
        "0003"  # api_version 3
        "00000009"  # correlation_id 9
        "ffff"  # client_id null
        "ffff"  # transactional_id null
        "0001"  # acks 1
        "000005dc"  # timeout_ms 1500
        "00000001"  # 1 topic
        "0001"  # name length 1
        "74"  # "t"
        "00000001"  # 1 partition
        "00000000"  # index 0
        "00000002"  # records: NULLABLE_BYTES length 2
        "4142"  # "AB"
    )
    assert encode_request(0, 3, 9, None, req) == expected
    assert decode_request(expected, strict=True)[1] == req


def _only_bytes(parts: list[bytes | object]) -> bytes:
    (frame,) = parts
    assert isinstance(frame, bytes)
    return frame


def test_api_versions_response_header_is_always_v0() -> None:
    v3 = _only_bytes(encode_response(RequestHeader(18, 3, 0x01020304, "c"), api_versions_response()))
    # correlation id then directly error_code 0: no header tag byte despite v3 being flexible
    assert v3[:6] == bytes.fromhex("010203040000")
    v2 = _only_bytes(encode_response(RequestHeader(18, 2, 1, "c"), api_versions_response()))
    assert v2[4:6] == b"\x00\x00"
    # other flexible responses do get response header v1 (a tag byte after the correlation id)
    meta = _only_bytes(encode_response(RequestHeader(3, 9, 1, "c"), APIS[3].response.cls()))
    assert meta[:5] == bytes.fromhex("0000000100")


def test_api_versions_response_v3_lists_our_ranges() -> None:
    frame = _only_bytes(
        encode_response(RequestHeader(18, 3, 4, None), api_versions_response(throttle_time_ms=5))
    )
    corr, body = decode_response(18, 3, frame, strict=True)
    assert corr == 4
    assert body.error_code == 0 and body.throttle_time_ms == 5
    assert {(k.api_key, k.min_version, k.max_version) for k in body.api_keys} == {
        (s.api_key, s.advertised_min, s.max_version) for s in APIS.values()
    }


def test_produce_is_advertised_from_v0_but_v0_to_2_are_refused() -> None:
    """Kafka 4.0's KAFKA-18659: advertised 0-11 so librdkafka < 2.10 compresses, served 3-11."""
    advertised = {k.api_key: (k.min_version, k.max_version) for k in supported_api_versions()}
    assert advertised[0] == (0, APIS[0].max_version)
    for version in (0, 1, 2):
        frame = struct.pack(">hhih", 0, version, 9, 3) + b"cli" + struct.pack(">hii", 1, 100, 0)
        with pytest.raises(UnsupportedVersionError):
            decode_request(frame)


# --- version negotiation --------------------------------------------------------------------


def _api_versions_request(version: int, correlation_id: int = 3) -> bytes:
    # A client newer than us: header v2 (flexible), body we cannot know.
    return (
        struct.pack(">hhi", 18, version, correlation_id)
        + struct.pack(">h", 3)
        + b"cli"
        + b"\x00"  # header tags
        + b"\x0bsomething\x00"  # body we must not need to parse
    )


def test_api_versions_above_ours_gets_the_v0_fallback() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(_api_versions_request(4))
    err = info.value
    assert err.header == RequestHeader(18, 4, 3, "cli")
    assert (err.min_version, err.max_version) == (0, 3)
    assert isinstance(err, ProtocolError) and isinstance(err, InvalidRequestError)

    (frame,) = api_versions_fallback_response(err.header)
    assert isinstance(frame, bytes)
    assert frame[:4] == struct.pack(">i", 3)  # response header v0: just the correlation id
    assert frame[4:6] == struct.pack(">h", 35)  # UNSUPPORTED_VERSION
    (count,) = struct.unpack_from(">i", frame, 6)  # v0 body: INT32 array count, not compact
    assert count == len(APIS)
    # A client that asked v3 decodes this as v0 because of the error code.
    corr, body = decode_response(18, 3, frame, strict=True)
    assert corr == 3
    assert body == ApiVersionsResponse(error_code=35, api_keys=supported_api_versions())
    # encode_response does the same for an unsupported ApiVersions version.
    assert encode_response(err.header, api_versions_response(error_code=35)) == [frame]


@pytest.mark.parametrize(
    ("key", "version"), [(0, 2), (0, 12), (1, 3), (1, 18), (2, 0), (3, 14), (19, 1), (22, 5)]
)
def test_unsupported_versions_carry_the_parsed_header(key: int, version: int) -> None:
    spec = APIS[key]
    hv = spec.request_header_version(version)
    frame = (
        struct.pack(">hhi", key, version, 77) + struct.pack(">h", 2) + b"id" + (b"\x00" if hv == 2 else b"")
    )
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame + b"\x00" * 8)
    assert info.value.header == RequestHeader(key, version, 77, "id")


def test_unknown_api_key() -> None:
    frame = struct.pack(">hhi", 1000, 0, 5) + b"\xff\xff"
    with pytest.raises(UnknownApiKeyError) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (1000, 0, 5)
    assert kafka_code(info.value) == 42  # INVALID_REQUEST via the shared error table


@pytest.mark.parametrize("size", range(8))
def test_frames_shorter_than_the_header_prefix(size: int) -> None:
    with pytest.raises(ProtocolError, match="shorter than the 8-byte header prefix"):
        decode_request(LIBRDKAFKA_API_VERSIONS_V3[:size])


def test_trailing_bytes_are_ignored_like_kafka_unless_strict() -> None:
    frame = METADATA_V12_ALL_TOPICS + b"junk"
    assert decode_request(frame)[1] == MetadataRequest(topics=None)
    with pytest.raises(ProtocolError, match="4 trailing bytes"):
        decode_request(frame, strict=True)


def test_metadata_v0_empty_array_means_all_topics() -> None:
    frame = encode_request(3, 0, 1, "c", MetadataRequest(topics=None))
    assert frame.endswith(b"\x00\x00\x00\x00")  # v0 has no null: an empty array
    assert decode_request(frame)[1].topics is None
    one = encode_request(3, 0, 1, "c", MetadataRequest(topics=(MetadataRequestTopic(name="a"),)))
    assert decode_request(one)[1].topics == (MetadataRequestTopic(name="a"),)
    # v1+: an empty array is "no topics", distinct from null
    assert decode_request(encode_request(3, 1, 1, "c", MetadataRequest(topics=())))[1].topics == ()


# --- records: zero-copy in, regions out -----------------------------------------------------


def test_produce_records_are_zero_copy_views_of_the_frame() -> None:
    batch = bytes(range(256)) * 4
    req = ProduceRequest(
        acks=-1,
        timeout_ms=1,
        topic_data=(
            ProduceTopicData(name="t", partition_data=(ProducePartitionData(index=0, records=batch),)),
        ),
    )
    for version in (3, 8, 9):
        frame = encode_request(0, version, 1, "c", req)
        _, body = decode_request(frame)
        records = body.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview)
        assert records.obj is frame  # a slice of the frame, not a copy
        assert records == batch


def test_null_records() -> None:
    req = ProduceRequest(
        acks=0,
        timeout_ms=1,
        topic_data=(ProduceTopicData(name="t", partition_data=(ProducePartitionData(index=0),)),),
    )
    for version in (8, 9):
        assert decode_request(encode_request(0, version, 1, None, req))[1] == req


@dataclass(frozen=True)
class Region:
    """Stand-in for a file region: the server sends ``length`` bytes of a file itself."""

    data: bytes

    @property
    def length(self) -> int:
        return len(self.data)


def _fetch_response(*records: object) -> FetchResponse:
    return FetchResponse(
        responses=(
            FetchableTopicResponse(
                topic="t",
                partitions=tuple(
                    FetchPartitionData(partition_index=i, high_watermark=100, records=r)  # type: ignore[arg-type]
                    for i, r in enumerate(records)
                ),
            ),
        )
    )


def _materialise(parts: list[bytes | object]) -> bytes:
    return b"".join(p if isinstance(p, bytes) else p.data for p in parts)  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", [11, 12])
def test_fetch_response_passes_regions_through_after_their_length_prefix(version: int) -> None:
    a, b, c = Region(b"A" * 300), Region(b"B" * 5), Region(b"C" * 7)
    resp = _fetch_response(a, [b, b"inline", c], None, b"plain")
    parts = encode_response(RequestHeader(1, version, 9, "c"), resp)

    assert [type(p) for p in parts] == [bytes, Region, bytes, Region, bytes, Region, bytes]
    assert parts[1] is a and parts[3] is b and parts[5] is c
    head, between = parts[0], parts[2]
    assert isinstance(head, bytes) and isinstance(between, bytes)
    if version == 11:  # NULLABLE_BYTES: INT32 length just before the region
        assert head[-4:] == struct.pack(">i", 300)
        assert between[-4:] == struct.pack(">i", 5 + 6 + 7)
    else:  # COMPACT_NULLABLE_BYTES: uvarint(length + 1)
        assert head[-2:] == bytes([(301 & 0x7F) | 0x80, 301 >> 7])
        assert between[-1:] == bytes([5 + 6 + 7 + 1])
    assert parts[4] == b"inline"  # bytes between regions stay one merged part

    # Sending the regions' bytes in their places yields a frame any client can decode.
    frame = _materialise(parts)
    corr, decoded = decode_response(1, version, frame, strict=True)
    assert corr == 9
    got = [p.records for p in decoded.responses[0].partitions]
    assert got == [a.data, b.data + b"inline" + c.data, None, b"plain"]

    framed = encode_frame(parts)
    assert framed[0][:4] == struct.pack(">i", len(frame))  # type: ignore[index]
    assert [type(p) for p in framed] == [type(p) for p in parts]


def test_fetch_region_length_is_validated() -> None:
    class Bad:
        length = -1

    with pytest.raises(EncodeError, match=r"responses\[0\]\.partitions\[0\]\.records"):
        encode_response(RequestHeader(1, 12, 1, None), _fetch_response(Bad()))


# --- tagged fields --------------------------------------------------------------------------


def test_fetch_v12_tagged_fields_round_trip_and_defaults_are_omitted() -> None:
    resp = FetchResponse(
        responses=(
            FetchableTopicResponse(
                topic="t",
                partitions=(
                    FetchPartitionData(
                        partition_index=0,
                        diverging_epoch=EpochEndOffset(epoch=3, end_offset=99),
                        current_leader=LeaderIdAndEpoch(),  # all defaults: not written, like Kafka
                    ),
                ),
            ),
        )
    )
    (frame,) = encode_response(RequestHeader(1, 12, 1, None), resp)
    assert isinstance(frame, bytes)
    _, decoded = decode_response(1, 12, frame, strict=True)
    part = decoded.responses[0].partitions[0]
    assert part.diverging_epoch == EpochEndOffset(epoch=3, end_offset=99)
    assert part.current_leader is None
    assert part.snapshot_id is None


def _fetch_v12_request_with_top_level_tags(tags: bytes) -> bytes:
    req = FetchRequest(
        max_wait_ms=1,
        min_bytes=1,
        topics=(
            FetchTopic(
                topic="t", partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1),)
            ),
        ),
    )
    frame = encode_request(1, 12, 1, "c", req)
    assert frame.endswith(b"\x00")  # empty top-level tag section is the last byte
    return frame[:-1] + tags


def test_unknown_tags_are_skipped_and_known_ones_parsed() -> None:
    tags = b"\x02" + b"\x00\x04\x04abc" + b"\x07\x02zz"  # tag 0 cluster_id "abc", unknown tag 7
    _, body = decode_request(_fetch_v12_request_with_top_level_tags(tags), strict=True)
    assert body.cluster_id == "abc"


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        (b"\x01\x00\x05\x04abc", "overruns"),  # declared size beyond the frame
        (b"\x01\x00\x05\x04abcd", "1 unread bytes"),  # known tag with trailing bytes inside
        (b"\x02\x07\x00\x07\x00", "duplicate tag 7"),
        (b"\x05\x00", "cannot fit"),  # 5 tags in 1 byte
        (b"\x01\x00\x01\x05", "cluster_id"),  # string longer than its tag
    ],
)
def test_malformed_tag_sections(tags: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_request(_fetch_v12_request_with_top_level_tags(tags))


# --- error precision ------------------------------------------------------------------------


def test_decode_errors_name_the_message_and_the_field() -> None:
    req = ProduceRequest(
        acks=1,
        timeout_ms=1,
        topic_data=(
            ProduceTopicData(name="t", partition_data=(ProducePartitionData(index=0, records=b"x" * 10),)),
        ),
    )
    frame = encode_request(0, 7, 1, "c", req)
    with pytest.raises(ProtocolError) as info:
        decode_request(frame[:-3])
    text = str(info.value)
    assert text.startswith("Produce v7 request topic_data[0].partition_data[0].records: ")
    assert "overruns the frame" in text
    assert info.value.path == "topic_data[0].partition_data[0].records"


def test_decode_error_on_a_merged_fixed_width_run_names_the_field() -> None:
    frame = encode_request(1, 4, 1, "c", FetchRequest(max_wait_ms=1, min_bytes=1))
    # header v1 = 8 + 2 + 1 bytes; the body starts with replica_id, max_wait_ms, min_bytes, max_bytes...
    cut = 8 + 2 + 1 + 4 + 4 + 2
    with pytest.raises(ProtocolError, match=r"Fetch v4 request min_bytes: truncated int32"):
        decode_request(frame[:cut])


def test_negative_lengths_and_counts() -> None:
    base = struct.pack(">hhi", 20, 1, 1) + b"\xff\xff"  # DeleteTopics v1, null client_id
    with pytest.raises(ProtocolError, match="invalid count -2"):
        decode_request(base + struct.pack(">i", -2))
    with pytest.raises(ProtocolError, match="non-nullable array is null"):
        decode_request(base + struct.pack(">i", -1))
    with pytest.raises(ProtocolError, match=r"array count 1000000 .* cannot fit"):
        decode_request(base + struct.pack(">i", 1_000_000))
    with pytest.raises(ProtocolError, match="non-nullable string has length -1"):
        decode_request(base + struct.pack(">ih", 1, -1))
    with pytest.raises(ProtocolError, match="not valid UTF-8"):
        decode_request(base + struct.pack(">ih", 1, 1) + b"\xff" + struct.pack(">i", 0))


def test_encode_errors_name_the_field() -> None:
    bad = ProduceResponse(responses=(_produce_topic_with_offset(2**63),))
    with pytest.raises(
        EncodeError, match=r"Produce v9 response responses\[0\]\.partition_responses\[0\]\.base_offset"
    ):
        encode_response(RequestHeader(0, 9, 1, None), bad)
    with pytest.raises(EncodeError, match="null is not allowed"):
        no_name = ProduceTopicData(name=None)  # type: ignore[arg-type]
        encode_request(0, 9, 1, None, ProduceRequest(acks=1, timeout_ms=1, topic_data=(no_name,)))
    with pytest.raises(EncodeError, match="must be ProduceResponse"):
        encode_response(RequestHeader(0, 9, 1, None), FetchResponse())
    with pytest.raises(EncodeError, match="expected ProduceTopicData"):
        wrong: Any = (FetchTopic(topic="x"),)
        encode_request(0, 9, 1, None, ProduceRequest(acks=1, timeout_ms=1, topic_data=wrong))
    with pytest.raises(EncodeError, match="not a supported version"):
        encode_request(0, 2, 1, None, ProduceRequest(acks=1, timeout_ms=1))


def _produce_topic_with_offset(offset: int) -> ProduceTopicResponse:
    return ProduceTopicResponse(
        name="t", partition_responses=(ProducePartitionResponse(index=0, base_offset=offset),)
    )
