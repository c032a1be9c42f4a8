"""Idempotent producers (KIP-98) against a real broker: clients with their default
``enable.idempotence=true`` work unmodified, retries are deduplicated (also across a
kill -9), and the protocol answers duplicates, gaps and fencing as Kafka does."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from hot.batch import BatchHeader, iter_batches
from hot.records import RecordInput, build_batch
from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.describe_producers import DescribeProducersRequest, DescribeProducersTopicRequest
from kwire.messages.init_producer_id import InitProducerIdRequest
from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consume_all(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0
) -> dict[int, list[bytes]]:
    """Every value of every partition from offset 0, in offset order, until ``expected``
    arrived (plus a short grace period, so duplicates would show)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = defaultdict(list)
    n = 0
    deadline = time.monotonic() + timeout
    try:
        while n < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=10000, timeout=0.5):
                if m.error():
                    raise KafkaException(m.error())
                got[m.partition()].append(m.value())
                n += 1
        for m in c.consume(num_messages=10000, timeout=0.5):
            if not m.error():
                got[m.partition()].append(m.value())
    finally:
        c.close()
    return got


def batches_on_disk(data_dir: Path, topic: str, partition: int) -> list[BatchHeader]:
    """Headers of every batch in the partition's segment files (read beside the broker)."""
    out: list[BatchHeader] = []
    for path in sorted((data_dir / "logs" / f"{topic}-{partition}").glob("*.log")):
        out.extend(h for _, h in iter_batches(path.read_bytes()))
    return out


def test_kafka_python_default_producer_is_idempotent_and_exactly_once(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = _topic("kp-idem")
    create_topic(broker.bootstrap, topic, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)  # defaults otherwise
    assert producer.config["enable_idempotence"]
    futures = [producer.send(topic, value=b"v-%05d" % i, partition=i % 2) for i in range(3000)]
    producer.flush(60)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    for p in range(2):
        assert offsets[p::2] == list(range(1500))
    got = consume_all(broker.bootstrap, topic, 2, 3000)
    for p in range(2):
        assert got[p] == [b"v-%05d" % i for i in range(p, 3000, 2)]
        headers = batches_on_disk(broker.data_dir, topic, p)
        assert headers and all(h.producer_id >= 0 and h.producer_epoch >= 0 for h in headers)


def test_confluent_idempotent_producer_50k_records_exactly_once_in_order(broker: BrokerProcess) -> None:
    topic = _topic("ck-idem")
    parts, total = 3, 50_000
    create_topic(broker.bootstrap, topic, parts)
    errors: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 500,
        }
    )

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)

    for i in range(total):
        while True:
            try:
                producer.produce(topic, value=b"r-%06d" % i, partition=i % parts, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    got = consume_all(broker.bootstrap, topic, parts, total)
    for p in range(parts):
        assert got[p] == [b"r-%06d" % i for i in range(p, total, parts)]
    pids = {h.producer_id for p in range(parts) for h in batches_on_disk(broker.data_dir, topic, p)}
    assert len(pids) == 1 and min(pids) >= 0


def test_idempotent_producer_across_kill9_has_no_duplicates(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    b = broker_factory(data_dir=tmp_path / "data")
    topic = _topic("kill-idem")
    parts = 2
    create_topic(b.bootstrap, topic, parts)
    acked: set[bytes] = set()
    failed: list[object] = []
    lock = threading.Lock()
    stop = threading.Event()
    producer = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 45000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 250,
        }
    )

    def on_delivery(err: object, msg: object) -> None:
        with lock:
            if err is None:
                acked.add(msg.value())  # type: ignore[attr-defined]
            else:
                failed.append(err)

    sent = 0

    def produce_loop() -> None:
        nonlocal sent
        while not stop.is_set() and sent < 400_000:
            try:
                producer.produce(
                    topic, value=b"rec-%09d" % sent, partition=sent % parts, on_delivery=on_delivery
                )
                sent += 1
            except BufferError:
                producer.poll(0.01)
            if sent % 500 == 0:
                producer.poll(0)

    t = threading.Thread(target=produce_loop, daemon=True)
    t.start()
    deadline = time.monotonic() + 15
    while len(acked) < 10_000 and time.monotonic() < deadline:
        time.sleep(0.02)
    b.kill()  # SIGKILL mid-load: requests in flight, some written but never acknowledged
    time.sleep(0.3)  # the producer keeps queueing and retrying against a dead broker
    b.start()  # same data dir and ports
    time.sleep(0.5)
    stop.set()
    t.join(10)
    assert producer.flush(30) == 0
    assert not failed, failed[:5]
    assert len(acked) == sent and len(acked) > 10_000
    got = consume_all(b.bootstrap, topic, parts, sent, timeout=30)
    values = [v for p in range(parts) for v in got[p]]
    assert len(values) == len(set(values)), "duplicates in the log"
    assert set(values) == acked
    for p in range(parts):  # and each partition is in production order
        assert got[p] == sorted(got[p])


def test_kafka_python_default_producer_across_kill9_has_no_duplicates(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    from kafka import KafkaProducer

    b = broker_factory(data_dir=tmp_path / "data")
    topic = _topic("kp-kill")
    create_topic(b.bootstrap, topic, 2)
    producer = KafkaProducer(
        bootstrap_servers=b.bootstrap, linger_ms=2, reconnect_backoff_max_ms=300, request_timeout_ms=5000
    )
    acked: set[bytes] = set()
    failed: list[BaseException] = []
    stop = threading.Event()
    sent = 0

    def produce_loop() -> None:
        nonlocal sent
        while not stop.is_set() and sent < 200_000:
            value = b"kp-%08d" % sent
            fut = producer.send(topic, value=value, partition=sent % 2)
            fut.add_callback(lambda _md, v=value: acked.add(v))
            fut.add_errback(failed.append)
            sent += 1

    t = threading.Thread(target=produce_loop, daemon=True)
    t.start()
    deadline = time.monotonic() + 15
    while len(acked) < 5000 and time.monotonic() < deadline:
        time.sleep(0.02)
    b.kill()
    time.sleep(0.3)
    b.start()
    time.sleep(0.5)
    stop.set()
    t.join(10)
    producer.flush(30)
    producer.close(5)
    assert not failed, failed[:5]
    assert len(acked) == sent and len(acked) > 5000
    got = consume_all(b.bootstrap, topic, 2, sent, timeout=30)
    values = [v for p in range(2) for v in got[p]]
    assert len(values) == len(set(values)), "duplicates in the log"
    assert set(values) == acked


# --- the protocol, request by request -----------------------------------------------------------------


def _produce(client: KafkaClient, topic: str, batch: bytes) -> tuple[int, int]:
    req = ProduceRequest(
        acks=-1,
        timeout_ms=10000,
        topic_data=(
            ProduceTopicData(name=topic, partition_data=(ProducePartitionData(index=0, records=batch),)),
        ),
    )
    part = client.call(ApiKey.PRODUCE, req).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def _batch(pid: int, epoch: int, seq: int, n: int = 3) -> bytes:
    return build_batch(
        [RecordInput(None, b"s%d" % (seq + i)) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def test_protocol_duplicates_gaps_and_fencing(broker: BrokerProcess) -> None:
    topic = _topic("raw-idem")
    create_topic(broker.bootstrap, topic, 1)
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        init = client.call(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(transaction_timeout_ms=60000))
        assert init.error_code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
        pid = init.producer_id
        other = client.call(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(transaction_timeout_ms=60000))
        assert other.producer_id != pid

        assert _produce(client, topic, _batch(pid, 0, 0)) == (0, 0)
        assert _produce(client, topic, _batch(pid, 0, 3)) == (0, 3)
        # The same batch again (a retry): success with the original offset, no new copy.
        assert _produce(client, topic, _batch(pid, 0, 0)) == (0, 0)
        assert _produce(client, topic, _batch(pid, 0, 3)) == (0, 3)
        assert len(batches_on_disk(broker.data_dir, topic, 0)) == 2
        # A gap in the sequence.
        code, _ = _produce(client, topic, _batch(pid, 0, 7))
        assert code == E.OUT_OF_ORDER_SEQUENCE_NUMBER == 45

        # KIP-360 epoch bump keeps the id; the old epoch is then fenced.
        bump = client.call(
            ApiKey.INIT_PRODUCER_ID,
            InitProducerIdRequest(transaction_timeout_ms=60000, producer_id=pid, producer_epoch=0),
        )
        assert (bump.error_code, bump.producer_id, bump.producer_epoch) == (0, pid, 1)
        assert _produce(client, topic, _batch(pid, 1, 0)) == (0, 6)
        code, _ = _produce(client, topic, _batch(pid, 0, 6))
        assert code == E.INVALID_PRODUCER_EPOCH == 47
        assert len(batches_on_disk(broker.data_dir, topic, 0)) == 3

        # A transactional id is the transaction coordinator's (tests/e2e/test_txn_coordinator.py):
        # this broker is not it until FindCoordinator made __transaction_state exist.
        tx = client.call(
            ApiKey.INIT_PRODUCER_ID,
            InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000),
        )
        assert tx.error_code == E.NOT_COORDINATOR


def test_describe_producers_reports_each_producers_state(broker: BrokerProcess) -> None:
    """DescribeProducers (KIP-664) on the leader: epoch, last sequence and timestamp, no
    ongoing transaction; Kafka's per-partition errors."""
    topic = _topic("describe-producers")
    create_topic(broker.bootstrap, topic, 1)
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        pids = []
        for n in (3, 5):
            init = client.call(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(transaction_timeout_ms=60000))
            pids.append(init.producer_id)
            assert _produce(client, topic, _batch(init.producer_id, 0, 0, n))[0] == 0
        req = DescribeProducersRequest(
            topics=(
                DescribeProducersTopicRequest(name=topic, partition_indexes=(0, 7)),
                DescribeProducersTopicRequest(name=_topic("nope"), partition_indexes=(0,)),
            )
        )
        resp = client.call(ApiKey.DESCRIBE_PRODUCERS, req)
    (p0, p7), (missing,) = (t.partitions for t in resp.topics)
    assert p0.error_code == 0 and p7.error_code == missing.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    states = {s.producer_id: s for s in p0.active_producers}
    assert set(states) == set(pids)
    for pid, n in zip(pids, (3, 5), strict=True):
        s = states[pid]
        assert (s.producer_epoch, s.last_sequence, s.current_txn_start_offset) == (0, n - 1, -1)
        assert s.last_timestamp > 0


def test_producer_ids_are_not_reused_after_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()

    def new_id() -> int:
        with KafkaClient.connect(HostPort("127.0.0.1", b.kafka_port)) as client:
            r = client.call(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(transaction_timeout_ms=60000))
            assert r.error_code == 0
            return int(r.producer_id)

    before = [new_id() for _ in range(3)]
    b.kill()
    b.start()
    after = new_id()
    assert after > max(before)
