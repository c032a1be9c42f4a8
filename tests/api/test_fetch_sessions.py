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
