"""A consumer's incremental fetch session looks at what changed (broker.consumer_marks), on
a real broker: records appended to one partition reach a kafka-python consumer of many
partitions while its idle partitions are not looked at (the broker's count of session
partitions looked at, less its safety walks); a moved high watermark, a log start moved
by DeleteRecords and a deleted topic still reach the session's next fetch."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from tests.api.test_fetch_sessions import _metric, _produce
from tests.brokers import BrokerProcess, create_topic

PARTS = 200


def _counter(broker: BrokerProcess, name: str) -> float:
    import httpx

    text = httpx.get(f"{broker.http_url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(f"{name}_total "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not exposed")


def _not_walked(broker: BrokerProcess, partitions: int) -> float:
    """Session partitions looked at by consumers' incremental fetches, less their walks."""
    looked = _counter(broker, "strata_fetch_session_partitions_looked")
    return looked - partitions * _counter(broker, "strata_fetch_session_walks")


def test_a_kafka_python_consumer_costs_what_it_gets(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = f"marks-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, PARTS)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTS)])
        for _ in range(50):  # until the session is open and fetched incrementally
            consumer.poll(timeout_ms=100)
            if _metric(broker, "strata_fetch_sessions", "consumer") >= 1 and _counter(
                broker, "strata_fetch_session_walks"
            ):
                break
        else:
            raise AssertionError("no incremental consumer session")
        before = _not_walked(broker, PARTS)
        got: list[bytes] = []
        for rnd in range(5):
            _produce(broker.bootstrap, topic, 3, 4)
            for _ in range(100):
                for records in consumer.poll(timeout_ms=100).values():
                    got.extend(r.value for r in records)
                if len(got) >= 4 * (rnd + 1):
                    break
            # Idle polls in between: each an incremental fetch with nothing marked.
            for _ in range(3):
                assert consumer.poll(timeout_ms=100) == {}
        assert got == [b"v%d" % i for _ in range(5) for i in range(4)]
        assert consumer.highwater(TopicPartition(topic, 3)) == 20  # the HW reached it
        # Every fetch above looked at partition 3 at most (and what a request named), not
        # at the 199 idle ones: a look at each would be 200 per fetch.
        looked = _not_walked(broker, PARTS) - before
        assert 1 <= looked < PARTS, looked  # (at least once: the session was incremental)
    finally:
        consumer.close()


def _answered(resp: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in resp.responses for p in t.partitions}


def _fetch(
    client: KafkaClient, sid: int, epoch: int, topics: tuple[FetchTopic, ...] = (), wait_ms: int = 0
) -> Any:
    req = FetchRequest(max_wait_ms=wait_ms, min_bytes=1, session_id=sid, session_epoch=epoch, topics=topics)
    return client._call(ApiKey.FETCH, 12, req)


def test_marks_reach_the_session_hw_log_start_and_deletion(broker: BrokerProcess) -> None:
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient

    topic = f"marks-raw-{uuid.uuid4().hex[:6]}"
    n = 20
    create_topic(broker.bootstrap, topic, n)
    parts = tuple(FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 16) for p in range(n))
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        full = _fetch(client, 0, 0, (FetchTopic(topic=topic, partitions=parts),))
        sid = full.session_id
        assert sid != 0 and len(_answered(full)) == n
        assert _answered(_fetch(client, sid, 1)) == {}  # idle, answered at once (max_wait 0)

        # A parked fetch (one waiter for the session) woken by an append to partition 7.
        out: list[Any] = []
        t = threading.Thread(target=lambda: out.append(_fetch(client, sid, 2, wait_ms=20_000)))
        t.start()
        _produce(broker.bootstrap, topic, 7, 5)
        t.join(30)
        assert not t.is_alive()
        news = _answered(out[0])
        assert list(news) == [7] and news[7].high_watermark == 5 and news[7].records
        moved = FetchPartition(partition=7, fetch_offset=5, partition_max_bytes=1 << 16)
        assert _answered(_fetch(client, sid, 3, (FetchTopic(topic=topic, partitions=(moved,)),))) == {}

        # An idle long poll answers at max_wait_ms with no partitions.
        assert _answered(_fetch(client, sid, 4, wait_ms=200)) == {}

        # DeleteRecords moves the log start: the next fetch carries it.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.delete_records([CTP(topic, 7, 3)]).values():
            f.result(timeout=30)
        start = _answered(_fetch(client, sid, 5))
        assert list(start) == [7] and start[7].log_start_offset == 3 and start[7].high_watermark == 5
        assert _answered(_fetch(client, sid, 6)) == {}

        # The topic deleted: every partition of it answers an error (once the broker has
        # dropped its replicas, which the deletion's answer may precede: a few fetches).
        for f in admin.delete_topics([topic]).values():
            f.result(timeout=30)
        gone: dict[int, Any] = {}
        for epoch in range(7, 107):
            gone.update(_answered(_fetch(client, sid, epoch, wait_ms=50)))
            if len(gone) == n:
                break
        assert sorted(gone) == list(range(n))
        assert {p.error_code for p in gone.values()} <= {E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_ID}
        assert E.NONE not in {p.error_code for p in gone.values()}


def test_a_read_committed_session_sees_the_last_stable_offset_move(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    topic = f"marks-txn-{uuid.uuid4().hex[:6]}"
    n = 20
    create_topic(broker.bootstrap, topic, n)
    parts = tuple(FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 16) for p in range(n))

    def fetch(client: KafkaClient, sid: int, epoch: int, topics: tuple[FetchTopic, ...] = ()) -> Any:
        req = FetchRequest(
            max_wait_ms=0, min_bytes=1, isolation_level=1, session_id=sid, session_epoch=epoch, topics=topics
        )
        return client._call(ApiKey.FETCH, 12, req)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        sid = fetch(client, 0, 0, (FetchTopic(topic=topic, partitions=parts),)).session_id
        assert sid != 0
        assert _answered(fetch(client, sid, 1)) == {}
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, value=b"t%d" % i, partition=4)
        assert producer.flush(30) == 0
        open_txn = _answered(fetch(client, sid, 2))
        # The HW moved (3), the LSO not (0): answered, without records.
        assert list(open_txn) == [4]
        assert open_txn[4].high_watermark == 3 and open_txn[4].last_stable_offset == 0
        assert not open_txn[4].records
        producer.commit_transaction(30)
        epoch = 3
        seen: dict[int, Any] = {}
        for _ in range(100):
            seen = _answered(fetch(client, sid, epoch))
            epoch += 1
            if 4 in seen and seen[4].last_stable_offset == 4:
                break
        assert list(seen) == [4] and seen[4].last_stable_offset == 4 and seen[4].records
