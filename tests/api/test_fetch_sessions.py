"""Fetch sessions (KIP-227) on the wire: a consumer's session of many partitions answers
only what changed, forgets what it is told to, refuses a stale epoch; closing it falls
back to full fetches."""

from __future__ import annotations

import uuid

from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from tests.brokers import BrokerProcess, create_topic

PARTS = 20


def _produce(bootstrap: str, topic: str, partition: int, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=partition)
    assert p.flush(30) == 0


def _answered(resp: object) -> dict[int, object]:
    return {p.partition_index: p for t in resp.responses for p in t.partitions}  # type: ignore[attr-defined]


def test_a_consumer_session_answers_only_what_changed(broker: BrokerProcess) -> None:
    topic = f"sess-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, PARTS)
    _produce(broker.bootstrap, topic, 3, 4)
    parts = [FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20) for p in range(PARTS)]

    def fetch(
        client: KafkaClient, sid: int, epoch: int, topics: tuple[FetchTopic, ...] = (), **kw: object
    ) -> object:
        req = FetchRequest(
            max_wait_ms=0, min_bytes=0, session_id=sid, session_epoch=epoch, topics=topics, **kw
        )  # type: ignore[arg-type]
        return client._call(ApiKey.FETCH, 12, req)

    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        full = fetch(client, 0, 0, (FetchTopic(topic=topic, partitions=tuple(parts)),))
        sid = full.session_id  # type: ignore[attr-defined]
        assert sid != 0 and full.error_code == E.NONE  # type: ignore[attr-defined]
        assert sorted(_answered(full)) == list(range(PARTS))  # a full answer
        assert _answered(full)[3].high_watermark == 4  # type: ignore[attr-defined]

        # Partition 3 moved on to 4; nothing else changed: an empty answer.
        moved = FetchPartition(partition=3, fetch_offset=4, partition_max_bytes=1 << 20)
        idle = fetch(client, sid, 1, (FetchTopic(topic=topic, partitions=(moved,)),))
        assert idle.session_id == sid and _answered(idle) == {}  # type: ignore[attr-defined]

        # New records in partition 7, which the request does not name: answered.
        _produce(broker.bootstrap, topic, 7, 2)
        news = _answered(fetch(client, sid, 2))
        assert list(news) == [7] and news[7].high_watermark == 2  # type: ignore[attr-defined]

        # Forgotten: partition 7 is no longer fetched.
        _produce(broker.bootstrap, topic, 7, 1)
        forgot = fetch(client, sid, 3, forgotten_topics_data=(ForgottenTopic(topic=topic, partitions=(7,)),))
        assert _answered(forgot) == {}

        stale = fetch(client, sid, 3)
        assert stale.error_code == E.INVALID_FETCH_SESSION_EPOCH and stale.session_id == 0  # type: ignore[attr-defined]
        assert fetch(client, sid + 1, 1).error_code == E.FETCH_SESSION_ID_NOT_FOUND  # type: ignore[attr-defined]

        closed = fetch(client, sid, -1, (FetchTopic(topic=topic, partitions=tuple(parts[:2])),))
        assert closed.session_id == 0 and sorted(_answered(closed)) == [0, 1]  # type: ignore[attr-defined]
        assert fetch(client, sid, 4).error_code == E.FETCH_SESSION_ID_NOT_FOUND  # type: ignore[attr-defined]

        # A small consumer gets no session (its full requests keep the fast path).
        small = fetch(client, 0, 0, (FetchTopic(topic=topic, partitions=tuple(parts[:3])),))
        assert small.session_id == 0 and sorted(_answered(small)) == [0, 1, 2]  # type: ignore[attr-defined]


def _metric(broker: BrokerProcess, name: str, kind: str) -> float:
    import httpx

    text = httpx.get(f"{broker.http_url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(f'{name}{{kind="{kind}"}} '):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not exposed")


def test_kafka_python_consumes_through_an_incremental_session(broker: BrokerProcess) -> None:
    # kafka-python (3.x) opens a KIP-227 session as the Java client does (librdkafka does
    # not); its incremental fetches must still deliver every record, each once, in order.
    from kafka import KafkaConsumer, TopicPartition

    topic = f"kp-sess-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, PARTS)
    for p in range(PARTS):
        _produce(broker.bootstrap, topic, p, 3)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        consumer_timeout_ms=200,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTS)])
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTS)}

        def drain(until: int) -> None:
            for _ in range(100):
                for tp_records in consumer.poll(timeout_ms=200).values():
                    for r in tp_records:
                        got[r.partition].append(r.value)
                if sum(map(len, got.values())) >= until:
                    return

        drain(3 * PARTS)
        assert _metric(broker, "strata_fetch_sessions", "consumer") >= 1
        assert _metric(broker, "strata_fetch_session_partitions", "consumer") >= PARTS
        # Now the session is incremental: new records in two partitions only.
        _produce(broker.bootstrap, topic, 5, 2)
        _produce(broker.bootstrap, topic, 17, 4)
        drain(3 * PARTS + 6)
        want = {p: [b"v0", b"v1", b"v2"] for p in range(PARTS)}
        want[5] += [b"v0", b"v1"]
        want[17] += [b"v0", b"v1", b"v2", b"v3"]
        assert got == want
    finally:
        consumer.close()
