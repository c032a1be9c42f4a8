"""The Produce fast path (api.handlers.produce_fast) answers exactly as the general path.

Two brokers of one in this process, fed the same requests in the same order: one through
the fast path (falling back to the general path where it must), the other through the
general path only (decode, ``handle_produce``, encode). Every answer must be the same
bytes, and the partitions' logs the same bytes, for random requests: versions 3-11, acks
-1/0/1, several topics and partitions, unknown topics and partitions, batches the append
refuses (a bad CRC), idempotent producers in and out of sequence, transactional ids
(which only the general path takes), flush modes interval and fsync.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.handlers.produce import handle_produce
from api.handlers.produce_fast import NO_ANSWER, FastProduce, encode_one, encode_success, parse
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.produce_path import ProduceOrder
from hot.records import RecordInput, build_batch
from kwire import ApiKey, decode_request, encode_request, encode_response
from kwire.messages.produce import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ProduceTopicResponse,
)
from tests.inprocess import broker_of_one, create_topic

VERSIONS = range(3, 12)
TOPICS = {"eq-interval": ("interval", 2), "eq-fsync": ("fsync", 1)}


class _Listener:
    external = False
    inter_broker = False


class _Conn:
    """What the produce paths use of a connection."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.server = _Listener()
        self.sasl = None
        self.raw_sasl = None
        self.principal = None
        self.ever_throttled = False
        self.produce_order = ProduceOrder()
        self.general_produce: asyncio.Future[Any] | None = None
        self.peer = ("127.0.0.1", 1)
        self.host = "127.0.0.1"


def _frame(version: int, req: ProduceRequest, correlation: int = 7) -> bytes:
    return encode_request(ApiKey.PRODUCE, version, correlation, "eq-client", req)


def _bytes(parts: Any) -> bytes:
    return b"".join(bytes(p) for p in parts)


# --- the codec side: parse and encode_success against kwire ------------------------------------


@st.composite
def _requests(draw: st.DrawFn) -> tuple[int, ProduceRequest]:
    version = draw(st.sampled_from(VERSIONS))
    names = draw(st.lists(st.text("abc-", min_size=1, max_size=5), min_size=1, max_size=3, unique=True))
    topics = tuple(
        ProduceTopicData(
            name=n,
            partition_data=tuple(
                ProducePartitionData(index=i, records=draw(st.binary(min_size=1, max_size=40)))
                for i in draw(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=3))
            ),
        )
        for n in names
    )
    req = ProduceRequest(
        transactional_id=draw(st.none() | st.just("txn")),
        acks=draw(st.sampled_from([-1, 0, 1, 2])),
        timeout_ms=draw(st.integers(-(2**31), 2**31 - 1)),
        topic_data=topics,
    )
    return version, req


@given(_requests())
@settings(max_examples=300, deadline=None)
def test_parse_reads_what_the_codec_decodes(case: tuple[int, ProduceRequest]) -> None:
    version, req = case
    frame = _frame(version, req)
    parsed = parse(frame, {})
    if req.transactional_id is not None or req.acks not in (-1, 0, 1):
        assert parsed is None
        return
    assert parsed is not None
    _, decoded = decode_request(frame)
    assert parsed[:3] == (version, decoded.acks, decoded.timeout_ms)
    assert [(n, [(i, bytes(r)) for i, r in ps]) for n, ps in parsed[3]] == [
        (t.name, [(p.index, bytes(p.records or b"")) for p in t.partition_data]) for t in decoded.topic_data
    ]


def test_parse_refuses_the_unusual() -> None:
    batch = build_batch([RecordInput(None, b"v")])
    plain = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=(
            ProduceTopicData(name="t", partition_data=(ProducePartitionData(index=0, records=batch),)),
        ),
    )
    assert parse(_frame(9, plain), {}) is not None
    null = dataclasses.replace(
        plain,
        topic_data=(
            ProduceTopicData(name="t", partition_data=(ProducePartitionData(index=0, records=None),)),
        ),
    )
    twice = dataclasses.replace(plain, topic_data=(*plain.topic_data, *plain.topic_data))
    for version, req in [(9, null), (3, null), (9, twice), (8, twice)]:
        assert parse(_frame(version, req), {}) is None
    frame = _frame(9, plain)
    assert parse(frame + b"\x00", {}) is None  # trailing bytes
    assert parse(frame[:-3], {}) is None  # cut short
    assert parse(frame[:2] + struct.pack(">h", 2) + frame[4:], {}) is None  # v2: not decodable


@given(
    st.sampled_from(VERSIONS),
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=8),
            st.lists(
                st.tuples(
                    st.integers(0, 2**31 - 1),
                    st.integers(0, 2**62),
                    st.integers(-1, 2**41),
                    st.integers(0, 2**62),
                ),
                min_size=1,
                max_size=4,
            ),
        ),
        min_size=1,
        max_size=3,
        unique_by=lambda t: t[0],
    ),
    st.integers(-(2**31), 2**31 - 1),
)
@settings(max_examples=300, deadline=None)
def test_encode_success_is_the_codecs_answer(version: int, topics: Any, correlation: int) -> None:
    from kwire import RequestHeader

    response = ProduceResponse(
        responses=tuple(
            ProduceTopicResponse(
                name=name,
                partition_responses=tuple(
                    ProducePartitionResponse(index=i, base_offset=b, log_append_time_ms=t, log_start_offset=s)
                    for i, b, t, s in parts
                ),
            )
            for name, parts in topics
        )
    )
    want = _bytes(encode_response(RequestHeader(ApiKey.PRODUCE, version, correlation, None), response))
    names: dict[tuple[str, bool], bytes] = {}
    for _ in range(2):  # the second time from the names' cache
        assert encode_success(version, struct.pack(">i", correlation), topics, names) == want
    if len(topics) == 1 and len(topics[0][1]) == 1:  # a producer's one partition: its template
        templates: dict[tuple[int, str], tuple[bytes, bytes]] = {}
        for _ in range(2):
            got = encode_one(
                version, struct.pack(">i", correlation), topics[0][0], topics[0][1][0], templates
            )
            assert got == want


# --- the brokers: fast path against the general path -------------------------------------------


@dataclasses.dataclass
class _Pair:
    loop: asyncio.AbstractEventLoop
    fast: Broker
    general: Broker
    fast_conn: _Conn
    general_conn: _Conn
    path: FastProduce
    dirs: tuple[Path, Path]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Pair]:
    loop = asyncio.new_event_loop()
    base = tmp_path_factory.mktemp("produce-fast")
    dirs = (base / "fast", base / "general")
    contexts = [broker_of_one(BrokerConfig(data_dir=d)) for d in dirs]
    brokers: list[Broker] = []
    try:
        for ctx in contexts:
            b = loop.run_until_complete(ctx.__aenter__())
            brokers.append(b)
            for name, (mode, partitions) in TOPICS.items():
                loop.run_until_complete(create_topic(b, name, partitions, {"strata.flush.mode": mode}))
        yield _Pair(loop, brokers[0], brokers[1], _Conn(brokers[0]), _Conn(brokers[1]), FastProduce(), dirs)
    finally:
        for ctx in reversed(contexts[: len(brokers)]):
            loop.run_until_complete(ctx.__aexit__(None, None, None))
        loop.close()


async def _via_fast(pair: _Pair, frame: bytes) -> bytes | None:
    conn = pair.fast_conn
    got = pair.path.answer(conn, frame, 0.0)  # type: ignore[arg-type]
    if got is None:
        return await _via_general(conn, frame)
    if got is NO_ANSWER:
        return None
    _, answer = got  # type: ignore[misc]
    parts = answer if isinstance(answer, list) else await answer
    return _bytes(parts)


async def _via_general(conn: _Conn, frame: bytes) -> bytes | None:
    header, req = decode_request(frame)
    resp = await handle_produce(conn, header, req)  # type: ignore[arg-type]
    return None if resp is None else _bytes(encode_response(header, resp))


def _logs(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*.log"))
        if p.parent.name.startswith("eq-")
    }


_BATCH_KINDS = ("plain", "three", "bad-crc", "idempotent", "idempotent-gap")


def _batch(kind: str, seq: dict[int, int], pid: int) -> bytes:
    records = [RecordInput(b"k", b"value-" + kind.encode(), timestamp=1_700_000_000_000)]
    if kind == "three":
        records = records * 3
    if kind.startswith("idempotent"):
        base = seq.get(pid, 0) + (5 if kind == "idempotent-gap" else 0)
        if kind == "idempotent":
            seq[pid] = base + 1
        return build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=base)
    data = bytearray(build_batch(records))
    if kind == "bad-crc":
        data[-1] ^= 0xFF
    return bytes(data)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[int, int, str | None, list[tuple[str, list[tuple[int, str]]]], int]:
    version = draw(st.sampled_from(VERSIONS))
    acks = draw(st.sampled_from([-1, 0, 1]))
    txn = draw(st.sampled_from([None, None, None, "eq-txn"]))
    names = draw(
        st.lists(
            st.sampled_from(["eq-interval", "eq-fsync", "eq-missing"]), min_size=1, max_size=3, unique=True
        )
    )
    topics = [
        (
            n,
            [
                (draw(st.integers(0, 2)), draw(st.sampled_from(_BATCH_KINDS)))
                for _ in range(draw(st.integers(1, 2)))
            ],
        )
        for n in names
    ]
    pid = draw(st.integers(1000, 1003))
    return version, acks, txn, topics, pid


_SEQ: dict[int, int] = {}
_TAKEN = {True: 0, False: 0}  # random cases the fast path took, and those it left


@given(_cases())
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fast_path_answers_and_writes_as_the_general_path(pair: _Pair, case: Any) -> None:
    version, acks, txn, topics, pid = case
    req = ProduceRequest(
        transactional_id=txn,
        acks=acks,
        timeout_ms=5000,
        topic_data=tuple(
            ProduceTopicData(
                name=name,
                partition_data=tuple(
                    ProducePartitionData(index=i, records=_batch(k, _SEQ, pid)) for i, k in parts
                ),
            )
            for name, parts in topics
        ),
    )
    frame = _frame(version, req)
    taken = pair.path.taken
    fast = pair.loop.run_until_complete(_via_fast(pair, frame))
    _TAKEN[pair.path.taken > taken] += 1
    general = pair.loop.run_until_complete(_via_general(pair.general_conn, frame))
    assert fast == general
    assert _logs(pair.dirs[0]) == _logs(pair.dirs[1])


def test_the_fast_path_took_most_requests(pair: _Pair) -> None:
    """(After the random cases.) The plain requests were the fast path's: one-record
    Produce requests to both flush modes, each answered there and equal to the general's."""
    before = pair.path.taken
    for version in VERSIONS:
        for name in TOPICS:
            req = ProduceRequest(
                acks=1,
                timeout_ms=5000,
                topic_data=(
                    ProduceTopicData(
                        name=name,
                        partition_data=(ProducePartitionData(index=0, records=_batch("plain", _SEQ, 0)),),
                    ),
                ),
            )
            frame = _frame(version, req, correlation=version)
            fast = pair.loop.run_until_complete(_via_fast(pair, frame))
            general = pair.loop.run_until_complete(_via_general(pair.general_conn, frame))
            assert fast == general
    assert pair.path.taken - before == 2 * len(VERSIONS)
    logs = _logs(pair.dirs[0])
    assert len(logs) == 3 and logs == _logs(pair.dirs[1])
    assert _TAKEN[True] > 10 and _TAKEN[False] > 10, _TAKEN


def test_fsync_waits_share_one_future_per_round(pair: _Pair) -> None:
    """Requests of one loop iteration waiting for the same flush share one future; the
    next iteration opens a new one."""

    async def burst() -> None:
        frames = [
            _frame(
                9,
                ProduceRequest(
                    acks=1,
                    timeout_ms=5000,
                    topic_data=(
                        ProduceTopicData(
                            name="eq-fsync",
                            partition_data=(ProducePartitionData(index=0, records=_batch("plain", _SEQ, 0)),),
                        ),
                    ),
                ),
                correlation=c,
            )
            for c in range(5)
        ]
        waits = []
        for f in frames:
            got = pair.path.answer(pair.fast_conn, f, 0.0)  # type: ignore[arg-type]
            assert got is not None and got is not NO_ANSWER
            waits.append(got[1])  # type: ignore[index]
        pending = [w for w in waits if not isinstance(w, list)]
        futures = {id(f) for w in pending for _, f in w._waits}
        assert len(futures) <= 1  # all in one round (or already flushed)
        answers = [w if isinstance(w, list) else await w for w in waits]
        offsets = [
            struct.unpack_from(">q", _bytes(a), 4 + 1 + 1 + 1 + len("eq-fsync") + 1 + 4 + 2)[0]
            for a in answers
        ]
        assert offsets == sorted(offsets) and len(set(offsets)) == 5
        # keep the general broker's log the same for the other tests
        for f in frames:
            await _via_general(pair.general_conn, f)

    pair.loop.run_until_complete(burst())
    assert _logs(pair.dirs[0]) == _logs(pair.dirs[1])
