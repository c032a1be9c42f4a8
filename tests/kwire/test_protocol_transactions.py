"""Wire codec of the transaction APIs (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, TxnOffsetCommit, DescribeProducers, DescribeTransactions, ListTransactions)
and InitProducerId and FindCoordinator at Kafka 4.x's full ranges: round trips at every
version, golden bytes against kafka-python's JSON-driven classes at every version, Kafka's
non-ignorable field rule, and precise rejection of truncated or malformed bodies.

Hand-derived golden bytes are in test_protocol_transactions_layouts. The specs come from
``APIS`` (every transaction API is served), widened to Kafka 4.x's full ranges where the
broker serves fewer versions, and these tests go through the per-version body codecs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire import APIS, EncodeError, ProtocolError
from kwire.apis import ApiKey, ApiSpec, _api
from kwire.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from kwire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTransaction,
)
from kwire.messages.end_txn import EndTxnRequest, EndTxnResponse
from kwire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kwire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kwire.messages.list_transactions import (
    ListTransactionsRequest,
)
from kwire.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from kwire.messages.write_txn_markers import (
    WritableTxnMarker,
    WriteTxnMarkersRequest,
)
from kwire.primitives import Reader, Writer
from kwire.schema import ARRAY, INT16, INT32, STRING, MessageSchema, W
from tests.kwire.test_protocol import SETTINGS, _fill, struct_strategy, to_kafka_python

# InitProducerId and FindCoordinator at Kafka 4.x's full ranges (APIS serves 0-4 of each;
# v5 and v6 are v4 on the wire), and EndTxn's v5 (Transactions V2, not served): proves the
# tables are ready for the range change.
WIDENED: tuple[ApiSpec, ...] = (
    _api(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse, "0-5", "2+"),
    _api(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, FindCoordinatorResponse, "0-6", "3+"),
    _api(ApiKey.END_TXN, EndTxnRequest, EndTxnResponse, "0-5", "3+"),
    _api(ApiKey.TXN_OFFSET_COMMIT, TxnOffsetCommitRequest, TxnOffsetCommitResponse, "0-5", "3+"),
)
# The transaction APIs, as served.
TXN_KEYS: tuple[int, ...] = (24, 25, 26, 27, 28, 61, 65, 66)
TXN_SPECS: dict[int, ApiSpec] = {k: APIS[k] for k in TXN_KEYS}
SPECS: dict[int, ApiSpec] = {**TXN_SPECS, **{s.api_key: s for s in WIDENED}}

VERSIONS = [(k, v) for k, s in sorted(SPECS.items()) for v in range(s.min_version, s.max_version + 1)]
VERSION_IDS = [f"{SPECS[k].name}-v{v}" for k, v in VERSIONS]
TXN_VERSIONS = [(k, v) for k, v in VERSIONS if k in TXN_SPECS]
TXN_VERSION_IDS = [f"{SPECS[k].name}-v{v}" for k, v in TXN_VERSIONS]


def encode_body(key: int, version: int, obj: Any) -> bytes:
    spec = SPECS[key]
    schema = spec.request if type(obj) is spec.request.cls else spec.response
    w = Writer()
    try:
        schema.codecs[version].encode(w, obj)
    except EncodeError as e:
        e.where = f"{spec.name} v{version} {'request' if schema is spec.request else 'response'}"
        raise
    return w.getvalue()


def decode_body(key: int, version: int, data: bytes, kind: str = "request") -> Any:
    """Decode a body as ``codec.decode_request`` does (strict), naming the message on error."""
    spec = SPECS[key]
    schema = spec.request if kind == "request" else spec.response
    r = Reader(data)
    try:
        obj = schema.codecs[version].decode(r)
        if r.pos != r.end:
            raise ProtocolError(f"{r.end - r.pos} trailing bytes after the body at offset {r.pos}")
    except ProtocolError as e:
        e.where = f"{spec.name} v{version} {kind}"
        raise
    return obj


def kind_of(key: int, obj: Any) -> str:
    return "request" if type(obj) is SPECS[key].request.cls else "response"


# Hex pieces shared by the layouts here and in test_protocol_transactions_layouts.
TX = "037478"  # "tx": compact string, length + 1
TX_OLD = "00027478"  # "tx": INT16 length
T = "0274"  # "t": compact string
T_OLD = "000174"  # "t": INT16 length
PID7 = "0000000000000007"  # producer id 7
EPOCH1 = "0001"  # producer epoch 1


# --- version table --------------------------------------------------------------------------


def test_ranges_are_kafka_4x() -> None:
    ranges = {s.name: (s.api_key, s.min_version, s.max_version, s.flexible_from) for s in TXN_SPECS.values()}
    assert ranges == {
        "AddPartitionsToTxn": (24, 0, 5, 3),
        "AddOffsetsToTxn": (25, 0, 4, 3),
        "EndTxn": (26, 0, 4, 3),  # served 0-4: v5 is Transactions V2 (its codec: WIDENED)
        "WriteTxnMarkers": (27, 1, 2, 1),  # v0 removed in Kafka 4.0; v2 since 4.2
        # Served v0-4: v5 (transaction version 2, the request adding the partition to the
        # transaction) waits for a transaction coordinator on transaction version 2.
        "TxnOffsetCommit": (28, 0, 4, 3),
        "DescribeProducers": (61, 0, 0, 0),
        "DescribeTransactions": (65, 0, 0, 0),
        "ListTransactions": (66, 0, 2, 0),  # v2 since 4.1
    }
    for s in TXN_SPECS.values():
        for v in range(s.min_version, s.max_version + 1):
            assert s.request_header_version(v) == (2 if s.is_flexible(v) else 1)
            assert s.response_header_version(v) == (1 if s.is_flexible(v) else 0)


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@SETTINGS
@given(data=st.data())
def test_request_round_trip(key: int, version: int, data: st.DataObject) -> None:
    spec = SPECS[key]
    obj = data.draw(struct_strategy(spec.request.cls, version, spec.is_flexible(version)))
    raw = encode_body(key, version, obj)
    decoded = decode_body(key, version, raw)
    assert decoded == obj
    assert encode_body(key, version, decoded) == raw


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@SETTINGS
@given(data=st.data())
def test_response_round_trip(key: int, version: int, data: st.DataObject) -> None:
    spec = SPECS[key]
    obj = data.draw(struct_strategy(spec.response.cls, version, spec.is_flexible(version)))
    raw = encode_body(key, version, obj)
    decoded = decode_body(key, version, raw, "response")
    assert decoded == obj
    assert encode_body(key, version, decoded) == raw


# --- golden bytes against kafka-python's JSON-driven classes (every version) ----------------

kp_txn = pytest.importorskip("kafka.protocol.producer.transaction")
kp_admin_txn = pytest.importorskip("kafka.protocol.admin.transactions")
kp_metadata = pytest.importorskip("kafka.protocol.metadata")

KP: dict[int, tuple[Any, Any]] = {
    10: (kp_metadata.FindCoordinatorRequest, kp_metadata.FindCoordinatorResponse),
    22: (kp_txn.InitProducerIdRequest, kp_txn.InitProducerIdResponse),
    24: (kp_txn.AddPartitionsToTxnRequest, kp_txn.AddPartitionsToTxnResponse),
    25: (kp_txn.AddOffsetsToTxnRequest, kp_txn.AddOffsetsToTxnResponse),
    26: (kp_txn.EndTxnRequest, kp_txn.EndTxnResponse),
    27: (kp_txn.WriteTxnMarkersRequest, kp_txn.WriteTxnMarkersResponse),
    28: (kp_txn.TxnOffsetCommitRequest, kp_txn.TxnOffsetCommitResponse),
    61: (kp_admin_txn.DescribeProducersRequest, kp_admin_txn.DescribeProducersResponse),
    65: (kp_admin_txn.DescribeTransactionsRequest, kp_admin_txn.DescribeTransactionsResponse),
    66: (kp_admin_txn.ListTransactionsRequest, kp_admin_txn.ListTransactionsResponse),
}


def kafka_python_bytes(key: int, version: int, obj: Any) -> bytes:
    kp_cls = KP[key][0 if type(obj) is SPECS[key].request.cls else 1]
    return bytes(to_kafka_python(kp_cls, kp_cls._struct, obj, version).encode(version=version))


def test_kafka_python_knows_the_same_newest_versions() -> None:
    for key, spec in SPECS.items():
        for kp_cls in KP[key]:
            # InitProducerId v6 (KIP-939) is unstable in every Kafka 4.x release: not ours
            top = 6 if key == ApiKey.INIT_PRODUCER_ID else spec.max_version
            assert kp_cls.max_version == top, kp_cls


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@settings(SETTINGS, max_examples=8)
@given(data=st.data())
def test_golden_request_body_matches_kafka_python(key: int, version: int, data: st.DataObject) -> None:
    spec = SPECS[key]
    obj = data.draw(struct_strategy(spec.request.cls, version, spec.is_flexible(version)))
    theirs = kafka_python_bytes(key, version, obj)
    assert encode_body(key, version, obj) == theirs
    assert decode_body(key, version, theirs) == obj


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=VERSION_IDS)
@settings(SETTINGS, max_examples=8)
@given(data=st.data())
def test_golden_response_body_matches_kafka_python(key: int, version: int, data: st.DataObject) -> None:
    spec = SPECS[key]
    obj = data.draw(struct_strategy(spec.response.cls, version, spec.is_flexible(version)))
    theirs = kafka_python_bytes(key, version, obj)
    assert encode_body(key, version, obj) == theirs
    assert decode_body(key, version, theirs, "response") == obj


# --- version semantics: Kafka's ignorable rule -----------------------------------------------


def test_non_ignorable_fields_refuse_versions_that_lack_them() -> None:
    batched = AddPartitionsToTxnRequest(
        transactions=(AddPartitionsToTxnTransaction(transactional_id="tx", producer_id=7, producer_epoch=1),)
    )
    for v in range(4):
        with pytest.raises(
            EncodeError,
            match=rf"^AddPartitionsToTxn v{v} request transactions: .* lacks this non-ignorable field",
        ):
            encode_body(24, v, batched)
    client = AddPartitionsToTxnRequest(v3_and_below_transactional_id="tx", v3_and_below_producer_id=7)
    for v in (4, 5):
        with pytest.raises(
            EncodeError, match=rf"^AddPartitionsToTxn v{v} request v3_and_below_transactional_id"
        ):
            encode_body(24, v, client)
    with pytest.raises(EncodeError, match=r"^AddPartitionsToTxn v4 request v3_and_below_producer_id"):
        encode_body(24, 4, AddPartitionsToTxnRequest(v3_and_below_producer_id=7))
    with pytest.raises(EncodeError, match=r"^AddPartitionsToTxn v3 response results_by_transaction"):
        encode_body(
            24,
            3,
            AddPartitionsToTxnResponse(
                results_by_transaction=(AddPartitionsToTxnResult(transactional_id="tx"),)
            ),
        )

    # KIP-447 group metadata cannot be silently dropped below v3 ...
    fenced = TxnOffsetCommitRequest(transactional_id="tx", group_id="g", producer_id=7, producer_epoch=1)
    for field, value in (("generation_id", 4), ("member_id", "m"), ("group_instance_id", "i")):
        for v in range(3):
            with pytest.raises(EncodeError, match=rf"^TxnOffsetCommit v{v} request {field}: "):
                encode_body(28, v, TxnOffsetCommitRequest(**{**_fields(fenced), field: value}))
    # ... but its defaults (no group metadata) encode at every version
    for v in range(SPECS[28].max_version + 1):
        assert decode_body(28, v, encode_body(28, v, fenced)) == fenced

    with pytest.raises(EncodeError, match=r"^ListTransactions v0 request duration_filter"):
        encode_body(66, 0, ListTransactionsRequest(duration_filter=0))
    with pytest.raises(EncodeError, match=r"^ListTransactions v1 request transactional_id_pattern"):
        encode_body(66, 1, ListTransactionsRequest(transactional_id_pattern="tx.*"))
    assert encode_body(66, 1, ListTransactionsRequest(transactional_id_pattern=None)) == bytes.fromhex(
        "0101ffffffffffffffff00"
    )


def test_ignorable_fields_are_dropped_and_decode_as_defaults() -> None:
    bumped = EndTxnResponse(producer_id=7, producer_epoch=2)
    for v in range(5):  # a v4 client gets no new id/epoch; it does not bump per transaction
        assert decode_body(26, v, encode_body(26, v, bumped), "response") == EndTxnResponse()
    assert decode_body(26, 5, encode_body(26, 5, EndTxnResponse()), "response").producer_id == -1

    marker = WritableTxnMarker(
        producer_id=7, producer_epoch=1, transaction_result=True, coordinator_epoch=0, transaction_version=2
    )
    got = decode_body(27, 1, encode_body(27, 1, WriteTxnMarkersRequest(markers=(marker,))))
    assert got.markers[0].transaction_version == 0  # a v1 marker is read as legacy (TV0/TV1)

    err = AddPartitionsToTxnResponse(error_code=51)
    assert decode_body(24, 3, encode_body(24, 3, err), "response") == AddPartitionsToTxnResponse()

    part = TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_leader_epoch=9)
    commit = TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id="g",
        producer_id=7,
        producer_epoch=1,
        topics=(TxnOffsetCommitRequestTopic(name="t", partitions=(part,)),),
    )
    epochs = [
        decode_body(28, v, encode_body(28, v, commit)).topics[0].partitions[0].committed_leader_epoch
        for v in range(SPECS[28].max_version + 1)
    ]
    assert epochs == [-1, -1, 9, 9, 9, 9][: SPECS[28].max_version + 1]


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Inner:
    a: Annotated[int, W(INT32)]
    b: Annotated[str, W(STRING, "1+", ignorable=False)] = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Outer:
    x: Annotated[int, W(INT16, "1+")] = 0  # ignorable (W's default, the codec's old behaviour)
    inner: Annotated[tuple[_Inner, ...], W(ARRAY(_Inner))] = ()
    y: Annotated[Sequence[int], W(ARRAY(INT32), "0", ignorable=False)] = ()


def test_ignorable_rule_in_the_schema() -> None:
    schema = MessageSchema(_Outer, "0-1", "1+")

    def enc(v: int, obj: _Outer) -> bytes:
        w = Writer()
        schema.codec(v).encode(w, obj)
        return w.getvalue()

    assert enc(0, _Outer(x=5)) == bytes.fromhex("0000000000000000")  # x dropped silently
    with pytest.raises(EncodeError) as info:
        enc(0, _Outer(inner=(_Inner(a=1, b="z"),)))
    assert info.value.path == "inner[0].b"
    assert "'z' cannot be sent in v0" in str(info.value)
    with pytest.raises(EncodeError, match=r"^y: \(3,\) cannot be sent in v1"):
        enc(1, _Outer(y=(3,)))
    assert enc(1, _Outer(y=[])) == bytes.fromhex("00000100")  # an empty list is the default


# --- truncated and malformed input ----------------------------------------------------------


def _examples() -> list[tuple[str, int, int, str, bytes]]:
    out = []
    for key, version in TXN_VERSIONS:
        spec = SPECS[key]
        flexible = spec.is_flexible(version)
        for kind, cls in (("request", spec.request.cls), ("response", spec.response.cls)):
            data = encode_body(key, version, _fill(cls, version, flexible))
            out.append((f"{spec.name}-v{version}-{kind}", key, version, kind, data))
    return out


EXAMPLES = _examples()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e[0])
def test_every_truncation_is_a_protocol_error_naming_the_message(
    example: tuple[str, int, int, str, bytes],
) -> None:
    _, key, version, kind, data = example
    whole = decode_body(key, version, data, kind)
    assert encode_body(key, version, whole) == data
    where = f"{SPECS[key].name} v{version} {kind}"
    for cut in range(len(data)):
        with pytest.raises(ProtocolError) as info:
            decode_body(key, version, data[:cut], kind)
        assert str(info.value).startswith(where), (cut, str(info.value))
        assert "offset" in info.value.reason, info.value.reason  # and says where in the frame


@pytest.mark.parametrize(
    ("key", "version", "kind", "hexed", "message"),
    [
        (26, 0, "request", "0002747800", r"producer_id: truncated int64"),
        (
            26,
            3,
            "request",
            "00" + PID7 + EPOCH1 + "0100",
            r"transactional_id: non-nullable compact string is null",
        ),
        (28, 3, "request", TX + "0267" + PID7 + EPOCH1 + "00000004" + "026d" + "02ff", r"group_instance_id"),
        (65, 0, "request", "02" + "05747800", r"transactional_ids\[0\]: string of length 4 .* overruns"),
        (66, 1, "request", "0101" + "ffffffffffffffff" + "00" + "00", r"1 trailing bytes after the body"),
        (
            24,
            0,
            "request",
            TX_OLD + PID7 + EPOCH1 + "fffffffe",
            r"v3_and_below_topics: array has invalid count -2",
        ),
        (
            61,
            0,
            "response",
            "00000000" + "02" + T + "02" + "00000000" + "0000" + "00" + "0f" + "000000",
            r"partitions\[0\]\.active_producers: array count 14 .* cannot fit",
        ),
        (
            25,
            4,
            "response",
            "00000000" + "0000" + "01" + "00" + "05" + "ab",
            r"tagged field 0 of 5 bytes .* overruns",
        ),
    ],
    ids=[
        "end-txn-v0-short-producer-id",
        "end-txn-v3-null-id",
        "txn-offset-commit-v3-bad-instance-id",
        "describe-txns-v0-short-id",
        "list-txns-v1-trailing",
        "add-partitions-v0-negative-count",
        "describe-producers-short-array",
        "add-offsets-v4-tag-overrun",
    ],
)
def test_malformed_bodies_get_precise_errors(
    key: int, version: int, kind: str, hexed: str, message: str
) -> None:
    with pytest.raises(ProtocolError, match=message) as info:
        decode_body(key, version, bytes.fromhex(hexed), kind)
    assert str(info.value).startswith(f"{SPECS[key].name} v{version} {kind}")


def test_unknown_tagged_fields_are_skipped() -> None:
    """A newer peer's tags (KIP-482 forward compatibility) do not break older decoders."""
    base = bytes.fromhex("00000000005a")  # AddOffsetsToTxn v4 response: throttle, error 90
    tagged = base + bytes.fromhex("020702beef630100")  # tags 7 and 99
    assert decode_body(25, 4, tagged, "response") == AddOffsetsToTxnResponse(error_code=90)
    with pytest.raises(ProtocolError, match=r"duplicate"):
        decode_body(25, 4, base + bytes.fromhex("0207000700"), "response")


@settings(SETTINGS, max_examples=300)
@given(
    idx=st.integers(0, len(EXAMPLES) - 1),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 10_000),
)
def test_fuzz_mutated_bodies_raise_only_protocol_errors(
    idx: int, flips: list[tuple[int, int]], cut: int | None
) -> None:
    _, key, version, kind, valid = EXAMPLES[idx]
    data = bytearray(valid)
    for pos, bit in flips:
        data[pos % len(data)] ^= 1 << bit
    if cut is not None:
        del data[cut % (len(data) + 1) :]
    try:
        decode_body(key, version, bytes(data), kind)
    except ProtocolError:
        pass
