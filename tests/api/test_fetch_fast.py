"""The Fetch fast path (api.handlers.fetch_fast) answers byte for byte as the general path
(decode, ACL guard, quota wrapper, ``handle_fetch``, ``encode_response``) for the same log
state and request, and leaves everything it does not handle to the general path.

One broker in process (module-scoped) with plain, transactional (aborted and open
transactions: read_committed stops at the LSO) and empty partitions over several small
segments; requests encoded with kwire as clients send them, at every Fetch version."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.kafka_server import KafkaServer
from broker.broker import Broker
from broker.config import BrokerConfig
from hot.records import ControlType, RecordInput, build_batch
from hot.region import FileRegion
from kwire import ApiKey, decode_request, decode_response, encode_request, encode_response
from kwire.framing import frame_bytes
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from tests.inprocess import ThreadedBroker, create_topic

PLAIN, TXN, EMPTY = "plain", "txn", "empty"
VERSIONS = range(4, 18)


def _batch(n: int, size: int, *, pid: int = -1, seq: int = -1, transactional: bool = False) -> bytes:
    recs = [RecordInput(b"k%d" % i, b"v" * size, timestamp=1000) for i in range(n)]
    return build_batch(
        recs,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        transactional=transactional,
    )


async def _setup(broker: Broker) -> None:
    small = {"segment.bytes": "1024", "strata.flush.mode": "interval"}
    await create_topic(broker, PLAIN, 3, small)
    await create_topic(broker, TXN, 1, small)
    await create_topic(broker, EMPTY, 1)

    def append(
        topic: str, partition: int, data: bytes, *, marker: tuple[int, ControlType] | None = None
    ) -> None:
        rep = broker.replicas.writable_leader(topic, partition, 1)
        if marker is None:
            rep.log.append(data, leader_epoch=rep.leader_epoch, transactional=True)
        else:
            rep.log.append_marker(marker[0], 0, marker[1], 0, leader_epoch=rep.leader_epoch)
        rep.log.flush()
        broker.replicas.maybe_advance_hw(rep)

    for p in range(3):
        for i in range(12 + 4 * p):
            append(PLAIN, p, _batch(1 + i % 4, 20 + 17 * i))
    # producer 1 aborted, 2 committed, 3 still open: read_committed stops at 3's first offset
    for seq in (0, 2):
        append(TXN, 0, _batch(2, 40, pid=1, seq=seq, transactional=True))
        append(TXN, 0, _batch(1, 60, pid=2, seq=seq // 2, transactional=True))
    append(TXN, 0, b"", marker=(1, ControlType.ABORT))
    append(TXN, 0, _batch(3, 30))
    append(TXN, 0, b"", marker=(2, ControlType.COMMIT))
    append(TXN, 0, _batch(2, 50, pid=3, seq=0, transactional=True))
    append(TXN, 0, _batch(2, 50))


@pytest.fixture(scope="module")
def tb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    config = BrokerConfig(data_dir=Path(tmp_path_factory.mktemp("fetch-fast")) / "data")
    with ThreadedBroker(config) as threaded:
        assert threaded.broker is not None
        threaded.call(_setup(threaded.broker))
        yield threaded


def _conn(broker: Broker, *, copy: bool = True) -> Any:
    """A connection's view for the handlers; ``copy``: small record data copied into the
    answer (the listener's setting), else every region passed through as the encoder does."""
    server = KafkaServer(broker)
    if not copy:
        server.fetch_fast.copy_below = 0
    return SimpleNamespace(broker=broker, server=server, principal=None, ever_throttled=False)


def _flat(parts: list[Any]) -> list[Any]:
    """Parts comparable across calls: bytes as they are, file regions by where they point."""
    return [p if isinstance(p, bytes) else (p.path, p.position, p.length) for p in parts]


def _bytes(parts: list[Any]) -> bytes:
    return b"".join(p.read() if isinstance(p, FileRegion) else bytes(p) for p in parts)


def _served(broker: Broker) -> list[list[int]]:
    """[records, bytes] served so far, per topic (``BrokerMetrics.fetched``)."""
    return [list(broker.metrics.fetched(t)) for t in (PLAIN, TXN, EMPTY)]


async def _both(conn: Any, frame: bytes) -> tuple[list[Any] | None, list[Any]]:
    """(the fast path's parts or None, the general path's parts) for ``frame``; each counts
    the same records and bytes served."""
    broker = conn.broker
    before = _served(broker)
    fast = conn.server.fetch_fast.answer_frame(conn, frame, time.perf_counter())
    between = _served(broker)
    header, request = decode_request(frame)
    response = await conn.server.handlers[ApiKey.FETCH](conn, header, request)
    general = encode_response(header, response)
    if fast is None:
        return None, general
    assert fast[0] == header
    after = _served(broker)
    for b, m, a in zip(before, between, after, strict=True):
        assert [m[0] - b[0], m[1] - b[1]] == [a[0] - m[0], a[1] - m[1]]
    return fast[1], general


def _frame(version: int, request: FetchRequest, correlation_id: int = 7) -> bytes:
    return encode_request(ApiKey.FETCH, version, correlation_id, "fast-test", request)


def _topic(broker: Broker, version: int, name: str, partitions: list[FetchPartition]) -> FetchTopic:
    if version >= 13:
        tid = broker.replicas.view.topic_id(name) or uuid.uuid4()  # an unknown id for a stranger
        return FetchTopic(topic_id=tid, partitions=tuple(partitions))
    return FetchTopic(topic=name, partitions=tuple(partitions))


def _ends(broker: Broker, name: str, partition: int) -> tuple[int, int, int]:
    lg = broker.reads.log(name, partition)
    return lg.log_start_offset, lg.high_watermark, lg.log_end_offset


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("isolation", [0, 1])
@pytest.mark.parametrize("copy", [False, True], ids=["regions", "copied"])
def test_ready_partitions_answered_fast_and_identically(
    tb: ThreadedBroker, version: int, isolation: int, copy: bool
) -> None:
    broker = tb.broker
    assert broker is not None
    conn = _conn(broker, copy=copy)
    parts = [FetchPartition(partition=p, fetch_offset=3 * p, partition_max_bytes=300) for p in (2, 0, 1)]
    req = FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=700,
        isolation_level=isolation,
        session_epoch=0 if version % 2 else -1,  # a new full session or none: both answered
        topics=(
            _topic(broker, version, PLAIN, parts[:2]),
            _topic(
                broker,
                version,
                TXN,
                [FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)],
            ),
            _topic(
                broker, version, EMPTY, [FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=100)]
            ),
            _topic(broker, version, PLAIN, parts[2:]),  # the same topic again: one topic in the answer
        ),
    )
    fast, general = tb.call(_both(conn, _frame(version, req)))
    assert fast is not None, "not answered by the fast path"
    assert _bytes(fast) == _bytes(general)
    if copy:
        assert len(fast) == 1 and isinstance(fast[0], bytes)
    else:
        assert _flat(fast) == _flat(general)


@pytest.mark.parametrize("version", VERSIONS)
def test_one_partition_answers_from_the_cached_lookups(tb: ThreadedBroker, version: int) -> None:
    """A consumer of one partition, as it fetches on (its answer from the per-(version,
    topic) head, the leader checks from the per-listener cache): the general path's bytes
    at every offset, both isolation levels, and after a role change and a fenced epoch."""
    broker = tb.broker
    assert broker is not None
    conn = _conn(broker)

    def frame(offset: int, isolation: int, epoch: int = -1) -> bytes:
        part = FetchPartition(
            partition=1, current_leader_epoch=epoch, fetch_offset=offset, partition_max_bytes=200
        )
        req = FetchRequest(
            max_wait_ms=0,
            min_bytes=1,
            isolation_level=isolation,
            topics=(_topic(broker, version, PLAIN, [part]),),
        )
        return _frame(version, req, correlation_id=offset)

    _, hw, _ = _ends(broker, PLAIN, 1)
    for offset in range(0, hw, 3):
        for isolation in (0, 1):
            fast, general = tb.call(_both(conn, frame(offset, isolation)))
            assert fast is not None and len(fast) == 1
            assert _bytes(fast) == _bytes(general)
    leader_epoch = broker.replicas.leader_replica(PLAIN, 1).leader_epoch
    tb.call(_on_loop(broker.replicas.wakeups.role_changed))  # every cached lookup dropped
    fast, general = tb.call(_both(conn, frame(0, 0, leader_epoch)))
    assert fast is not None and _bytes(fast) == _bytes(general)
    fast, general = tb.call(_both(conn, frame(0, 0, leader_epoch + 1)))  # UNKNOWN_LEADER_EPOCH (v9+)
    assert (fast is None) == (version >= 9)


async def _on_loop(call: Any) -> None:
    call()


def test_sendfile_regions_kept_for_large_reads(tb: ThreadedBroker) -> None:
    """Record data of at least ``copy_below`` stays file regions (sent zero-copy), one per
    segment read, as the general path's; below it, one bytes part (the writer would copy)."""
    broker = tb.broker
    assert broker is not None
    req = FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        topics=(
            _topic(
                broker, 12, PLAIN, [FetchPartition(partition=2, fetch_offset=0, partition_max_bytes=1 << 20)]
            ),
        ),
    )
    conn = _conn(broker)
    conn.server.fetch_fast.copy_below = 2048
    fast, general = tb.call(_both(conn, _frame(12, req)))
    assert fast is not None
    regions = [p for p in fast if isinstance(p, FileRegion)]
    assert len(regions) > 1 and sum(r.length for r in regions) >= 2048  # several 1 KiB segments
    assert _flat(fast) == _flat(general)
    conn.server.fetch_fast.copy_below = 1 << 20
    fast, general = tb.call(_both(conn, _frame(12, req)))
    assert fast is not None and len(fast) == 1 and _bytes(fast) == _bytes(general)


def _one(
    topic: str = PLAIN, *, partition: int = 0, offset: int = 0, epoch: int = -1, **fields: Any
) -> FetchRequest:
    """A v4-v12 request for one partition (``fields``: the request's own)."""
    p = FetchPartition(
        partition=partition, current_leader_epoch=epoch, fetch_offset=offset, partition_max_bytes=100
    )
    return FetchRequest(
        **{"max_wait_ms": 0, "min_bytes": 1, **fields}, topics=(FetchTopic(topic=topic, partitions=(p,)),)
    )


def _fallbacks(broker: Broker) -> dict[str, tuple[int, FetchRequest]]:
    hw = broker.reads.log(PLAIN, 0).high_watermark
    one = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=100)
    stranger = FetchTopic(topic_id=uuid.uuid4(), partitions=(one,))
    return {
        "follower": (12, _one(replica_id=1)),
        "incremental session": (12, _one(session_id=5, session_epoch=1)),
        "forgotten topics": (12, _one(forgotten_topics_data=(ForgottenTopic(topic=TXN, partitions=(0,)),))),
        "unknown topic": (12, _one("nope")),
        "unknown topic id": (13, FetchRequest(max_wait_ms=0, min_bytes=1, topics=(stranger,))),
        "no such partition": (12, _one(partition=9)),
        "newer leader epoch": (12, _one(epoch=99)),
        "offset out of range": (12, _one(offset=hw + 5)),
        "long poll without data": (12, _one(offset=hw, max_wait_ms=50)),
        "not enough data yet": (12, _one(max_wait_ms=50, min_bytes=1 << 20)),
    }  # fmt: skip


FALLBACKS = [
    "follower", "incremental session", "forgotten topics", "unknown topic", "unknown topic id",
    "no such partition", "newer leader epoch", "offset out of range",
]  # fmt: skip
PARKED = ["long poll without data", "not enough data yet"]


@pytest.mark.parametrize("case", FALLBACKS)
def test_everything_else_goes_the_general_way(tb: ThreadedBroker, case: str) -> None:
    broker = tb.broker
    assert broker is not None
    version, req = _fallbacks(broker)[case]
    conn = _conn(broker)
    assert conn.server.fetch_fast.answer_frame(conn, _frame(version, req), time.perf_counter()) is None


@pytest.mark.parametrize("case", PARKED)
def test_a_long_poll_parks_on_the_fast_path_and_answers_as_the_general_path(
    tb: ThreadedBroker, case: str
) -> None:
    """Nothing (or less than ``min_bytes``) to answer and nothing appended: at
    ``max_wait_ms`` the parked fast path answers the same bytes as the general path."""
    broker = tb.broker
    assert broker is not None
    version, req = _fallbacks(broker)[case]
    conn = _conn(broker)
    frame = _frame(version, req)

    async def both() -> tuple[list[Any] | None, list[Any]]:
        ready = conn.server.fetch_fast.answer_frame(conn, frame, time.perf_counter())
        assert ready is not None and not isinstance(ready[1], list)  # parked, not answered
        fast = await ready[1]
        header, request = decode_request(frame)
        response = await conn.server.handlers[ApiKey.FETCH](conn, header, request)
        return fast, encode_response(header, response)

    hits = conn.server.fetch_fast.hits
    fast, general = tb.call(both())
    assert fast is not None and _bytes(fast) == _bytes(general)
    assert conn.server.fetch_fast.hits == hits + 1


def _parked_fetch(broker: Broker, topic: str, partitions: int) -> bytes:
    """A sessionless long poll (librdkafka's) of every partition of ``topic`` at its end."""
    parts = [
        FetchPartition(partition=p, fetch_offset=_ends(broker, topic, p)[1], partition_max_bytes=1 << 20)
        for p in range(partitions)
    ]
    req = FetchRequest(
        max_wait_ms=30_000, min_bytes=1, topics=(FetchTopic(topic=topic, partitions=tuple(parts)),)
    )
    return _frame(12, req)


def test_a_parked_long_poll_wakes_on_an_append_and_answers_it(tb: ThreadedBroker) -> None:
    broker = tb.broker
    assert broker is not None
    topic, n = "parked-wake", 20
    tb.call(create_topic(broker, topic, n, {"strata.flush.mode": "interval"}))
    conn = _conn(broker)
    frame = _parked_fetch(broker, topic, n)
    batch = _batch(2, 30)

    async def go() -> list[Any] | None:
        ready = conn.server.fetch_fast.answer_frame(conn, frame, time.perf_counter())
        assert ready is not None and not isinstance(ready[1], list)
        task = asyncio.ensure_future(ready[1])
        await asyncio.sleep(0.05)
        assert not task.done()  # parked: nothing to answer
        rep = broker.replicas.writable_leader(topic, 7, 1)
        rep.log.append(batch, leader_epoch=rep.leader_epoch)
        broker.replicas.maybe_advance_hw(rep)
        return await asyncio.wait_for(task, 20)  # well before its 30 s

    parts = tb.call(go())
    assert parts is not None
    _, resp = decode_response(ApiKey.FETCH, 12, _bytes(parts))
    got = {p.partition_index: p for t in resp.responses for p in t.partitions}
    assert sorted(got) == list(range(n))  # sessionless: every partition answered
    records = bytes(got[7].records)
    assert len(records) == len(batch) and records[:8] == batch[:8]  # the batch, at offset 0
    assert got[7].high_watermark == 2
    assert all(not bytes(got[p].records) and got[p].high_watermark == 0 for p in got if p != 7)


def test_a_parked_long_poll_of_a_deleted_topic_goes_the_general_way(tb: ThreadedBroker) -> None:
    broker = tb.broker
    assert broker is not None
    topic = "parked-gone"
    tb.call(create_topic(broker, topic, 2))
    conn = _conn(broker)
    frame = _parked_fetch(broker, topic, 2)

    async def go() -> list[Any] | None:
        ready = conn.server.fetch_fast.answer_frame(conn, frame, time.perf_counter())
        assert ready is not None and not isinstance(ready[1], list)
        task = asyncio.ensure_future(ready[1])
        await asyncio.sleep(0.05)
        await broker.admin_delete_topic(topic)
        return await asyncio.wait_for(task, 20)

    assert tb.call(go()) is None  # the general path answers it (UNKNOWN_TOPIC_OR_PARTITION)


def test_tagged_fields_and_bad_frames_go_the_general_way(tb: ThreadedBroker) -> None:
    broker = tb.broker
    assert broker is not None
    conn = _conn(broker)
    frame = _frame(12, _one(cluster_id="c"))
    assert conn.server.fetch_fast.answer_frame(conn, frame, 0.0) is None  # cluster_id is a tag
    plain = _frame(12, _one())
    assert conn.server.fetch_fast.answer_frame(conn, plain, 0.0) is not None
    for cut in (9, 20, len(plain) - 3):  # truncated: the decoder says what is wrong
        assert conn.server.fetch_fast.answer_frame(conn, plain[:cut], 0.0) is None
    unsupported = plain[:2] + (18).to_bytes(2, "big") + plain[4:]
    assert conn.server.fetch_fast.answer_frame(conn, unsupported, 0.0) is None


def test_acls_and_quotas(tb: ThreadedBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """An authorizer that allows the principal every topic: answered fast; one that refuses
    a topic, a quota on the principal, a connection once throttled: the general way (the
    guard, the quota wrapper)."""
    import api.handlers.fetch_fast as ff

    broker = tb.broker
    assert broker is not None
    frame = _frame(12, _one())
    conn = _conn(broker)
    asked: list[str] = []

    def topic_ok(c: Any, op: Any, topic: str) -> bool:
        asked.append(topic)
        return bool(c.allow)

    monkeypatch.setattr(broker, "access", object(), raising=False)
    monkeypatch.setattr(ff, "topic_ok", topic_ok)
    conn.allow = True
    assert conn.server.fetch_fast.answer_frame(conn, frame, 0.0) is not None
    assert asked == [PLAIN]
    conn.allow = False
    assert conn.server.fetch_fast.answer_frame(conn, frame, 0.0) is None
    conn.server.inter_broker = True  # the internal listener has no guard
    assert conn.server.fetch_fast.answer_frame(conn, frame, 0.0) is not None
    monkeypatch.undo()

    conn = _conn(broker)
    monkeypatch.setattr(broker.quotas, "quota", lambda user, key: 1000.0)
    assert conn.server.fetch_fast.answer_frame(conn, frame, 0.0) is None
    monkeypatch.undo()
    assert conn.server.fetch_fast.answer_frame(conn, frame, 0.0) is not None
    conn.ever_throttled = True
    assert conn.server.fetch_fast.answer_frame(conn, frame, 0.0) is None


# --- any request: the same bytes, or the general way ---------------------------------------------


@st.composite
def _requests(
    draw: st.DrawFn,
) -> tuple[int, list[tuple[str, list[tuple[int, int, int, int]]]], dict[str, int]]:
    version = draw(st.integers(4, 17))
    topics = draw(
        st.lists(
            st.tuples(
                st.sampled_from([PLAIN, TXN, EMPTY]),
                st.lists(
                    st.tuples(
                        st.integers(0, 3),  # partition (3: none)
                        st.sampled_from([-1, -1, 0, 1]),  # current_leader_epoch
                        st.integers(-1, 60),  # fetch offset
                        st.sampled_from([0, 1, 90, 400, 1 << 20]),  # partition_max_bytes
                    ),
                    max_size=3,
                ),
            ),
            max_size=3,
        )
    )
    fields = {
        "max_bytes": draw(st.sampled_from([0, 100, 600, 1 << 20])),
        "min_bytes": draw(st.sampled_from([0, 1, 200, 1 << 20])),
        "isolation_level": draw(st.sampled_from([0, 1])),
        "session_epoch": draw(st.sampled_from([-1, 0])),
    }
    return version, topics, fields


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_requests(), st.booleans())
def test_any_request_same_bytes_or_general_way(
    tb: ThreadedBroker,
    drawn: tuple[int, list[tuple[str, list[tuple[int, int, int, int]]]], dict[str, int]],
    copy: bool,
) -> None:
    broker = tb.broker
    assert broker is not None
    version, topics, fields = drawn
    req = FetchRequest(
        max_wait_ms=0,
        topics=tuple(
            _topic(
                broker,
                version,
                name,
                [
                    FetchPartition(partition=p, current_leader_epoch=e, fetch_offset=o, partition_max_bytes=m)
                    for p, e, o, m in parts
                ],
            )
            for name, parts in topics
        ),
        **fields,  # type: ignore[arg-type]
    )
    fast, general = tb.call(_both(_conn(broker, copy=copy), _frame(version, req)))
    if fast is not None:
        assert _bytes(fast) == _bytes(general)
        if not copy:
            assert _flat(fast) == _flat(general)


# --- on a listener -------------------------------------------------------------------------------


def _exchange(sock: socket.socket, frames: list[bytes]) -> list[bytes]:
    """``frames`` pipelined in one send; their answers' bodies, in order."""
    sock.sendall(b"".join(frame_bytes(f) for f in frames))
    out = []
    for _ in frames:
        (size,) = struct.unpack(">i", _recv(sock, 4))
        out.append(_recv(sock, size))
    return out


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "the broker closed the connection"
        buf += chunk
    return buf


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "general-only"])
def test_pipelined_produce_then_fetch_sees_the_append(
    tb: ThreadedBroker, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Fetch pipelined right behind a Produce on the same connection reads what that
    Produce appended, as the general path's task (run after the Produce's) does: the fast
    path leaves a fetch to it while the connection's latest handler task is not done, and
    answers the next fetch, sent after those answers came."""
    broker = tb.broker
    assert broker is not None
    topic = f"seq-{fast}"
    tb.call(create_topic(broker, topic, 1, {"strata.flush.mode": "interval"}))
    server = KafkaServer(broker)
    if not fast:
        monkeypatch.setattr(server.fetch_fast, "answer_frame", lambda *a: None)
    # The Produce through its handler's task (the Produce fast path appends as it reads,
    # before any later frame: nothing to wait for there).
    monkeypatch.setattr(server.produce_fast, "answer", lambda *a: None)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    tb.call(server.start(sock))
    try:
        batch = _batch(1, 10)
        produce = ProduceRequest(
            acks=1,
            timeout_ms=30_000,
            topic_data=(
                ProduceTopicData(name=topic, partition_data=(ProducePartitionData(index=0, records=batch),)),
            ),
        )
        fetch = FetchRequest(
            max_wait_ms=0,
            min_bytes=1,
            topics=(
                FetchTopic(
                    topic=topic,
                    partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),),
                ),
            ),
        )

        def check(answer: bytes, correlation: int) -> None:
            got_correlation, resp = decode_response(ApiKey.FETCH, 12, answer)
            assert got_correlation == correlation
            (part,) = resp.responses[0].partitions
            assert part.error_code == 0 and part.high_watermark == 1
            records = bytes(part.records)
            assert len(records) == len(batch) and records[:8] == batch[:8]  # the batch, at offset 0

        hits = server.fetch_fast.hits
        with socket.create_connection(sock.getsockname(), timeout=30) as client:
            produced = encode_request(ApiKey.PRODUCE, 9, 1, "t", produce)
            _, first = _exchange(client, [produced, _frame(12, fetch, 2)])
            check(first, 2)
            assert server.fetch_fast.hits == hits  # behind the Produce's task: the general way
            (second,) = _exchange(client, [_frame(12, fetch, 3)])
            check(second, 3)
        assert server.fetch_fast.hits - hits == (1 if fast else 0)
    finally:
        tb.call(server.close())
