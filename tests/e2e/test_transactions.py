"""Transactions end to end on a real broker with real clients (KIP-98, KIP-447):
confluent-kafka's transactional producer commits and aborts across partitions and topics,
read_committed consumers see only committed records (read_uncommitted ones see all), and
so do aiokafka's and kafka-python's transactional producers and consumers; a
fenced zombie's records never become visible, and a consume-transform-produce loop with
send_offsets_to_transaction moves every input record to the output exactly once; ``strata
transactions`` shows an open transaction and its end."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)
BOUND_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-broker")).start()
    yield b
    b.kill()


def _producer(broker: BrokerProcess, tid: str) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": 60000,
            "linger.ms": 5,
        }
    )
    p.init_transactions(BOUND_S)
    return p


def _read(broker: BrokerProcess, topics: list[str], isolation: str, expect: int | None = None) -> list[bytes]:
    """Every record of ``topics`` from the start, as ``isolation`` sees them: until
    ``expect`` records (or, without it, until the end offsets are reached)."""
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"r-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        c.subscribe(topics)
        out: list[bytes] = []
        deadline = time.monotonic() + BOUND_S
        idle = 0
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                idle += 1
                if expect is None and out and idle >= 6:
                    break
                if expect is not None and len(out) >= expect and idle >= 2:
                    break
                continue
            assert m.error() is None, m.error()
            idle = 0
            out.append(m.value() or b"")
        return out
    finally:
        c.close()


def test_commit_and_abort_across_partitions_and_topics(broker: BrokerProcess) -> None:
    a, b = f"txa-{uuid.uuid4().hex[:6]}", f"txb-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, a, 3)
    create_topic(broker.bootstrap, b, 2)
    p = _producer(broker, f"tid-{uuid.uuid4().hex[:6]}")
    for round_, commit in enumerate((True, False, True, False, True)):
        p.begin_transaction()
        for i in range(20):
            p.produce(a, value=b"a%d-%d" % (round_, i), partition=i % 3)
            p.produce(b, value=b"b%d-%d" % (round_, i), partition=i % 2)
        p.flush(BOUND_S)  # in the log before the end: an abort must filter, not just purge
        if commit:
            p.commit_transaction(BOUND_S)
        else:
            p.abort_transaction(BOUND_S)
    committed = {b"%s%d-%d" % (t, r, i) for t in (b"a", b"b") for r in (0, 2, 4) for i in range(20)}
    seen = _read(broker, [a, b], "read_committed", expect=len(committed))
    assert sorted(seen) == sorted(committed)  # each exactly once, nothing aborted
    everything = _read(broker, [a, b], "read_uncommitted", expect=200)
    assert len(everything) == 200 and set(everything) >= committed


def test_a_fenced_zombie_never_makes_records_visible(broker: BrokerProcess) -> None:
    topic = f"txz-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    zombie = _producer(broker, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(BOUND_S)
    successor = _producer(broker, tid)  # fences the zombie and aborts its transaction
    with pytest.raises(KafkaException):
        zombie.produce(topic, value=b"zombie-2")
        zombie.commit_transaction(BOUND_S)
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(BOUND_S)
    assert _read(broker, [topic], "read_committed", expect=1) == [b"successor"]


def test_consume_transform_produce_moves_every_record_exactly_once(broker: BrokerProcess) -> None:
    src, dst = f"txin-{uuid.uuid4().hex[:6]}", f"txout-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        plain.produce(src, value=b"%d" % i, partition=i % 2)
    plain.flush(BOUND_S)

    group = f"ctp-{uuid.uuid4().hex[:6]}"

    def run(stop_after: int | None, abort_last: bool) -> int:
        """Process input in transactions of 10; the last one aborted if ``abort_last``."""
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        p = _producer(broker, f"ctp-{group}")
        c.subscribe([src])
        done = 0
        deadline = time.monotonic() + BOUND_S
        try:
            while time.monotonic() < deadline and (stop_after is None or done < stop_after):
                msgs = c.consume(10, 1.0)
                if not msgs:
                    if stop_after is None and done and c.assignment():
                        break
                    continue
                p.begin_transaction()
                for m in msgs:
                    assert m.error() is None
                    p.produce(dst, value=b"out-" + (m.value() or b""), partition=m.partition())
                p.flush(BOUND_S)
                offsets = [TopicPartition(m.topic(), m.partition(), m.offset() + 1) for m in msgs]
                p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), BOUND_S)
                last = stop_after is not None and done + len(msgs) >= stop_after
                if last and abort_last:
                    p.abort_transaction(BOUND_S)
                else:
                    p.commit_transaction(BOUND_S)
                done += len(msgs)
            return done
        finally:
            c.close()

    run(stop_after=40, abort_last=True)  # the last batch aborted: its input is read again
    run(stop_after=None, abort_last=False)
    out = _read(broker, [dst], "read_committed", expect=100)
    assert sorted(out) == sorted(b"out-%d" % i for i in range(100))


def _strata(*args: str) -> Any:
    r = subprocess.run(
        [sys.executable, "-m", "api.cli", *args, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_strata_transactions_shows_an_open_transaction_and_its_end(broker: BrokerProcess) -> None:
    topic = f"txcli-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    tid = f"cli-{uuid.uuid4().hex[:6]}"
    p = _producer(broker, tid)
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=1)
    p.flush(BOUND_S)
    b = ["-b", broker.bootstrap]

    (listed,) = [t for t in _strata("transactions", "list", *b) if t["transactional_id"] == tid]
    assert listed["state"] == "Ongoing"
    assert [t["transactional_id"] for t in _strata("transactions", "list", *b, "--state", "Ongoing")].count(
        tid
    ) == 1
    (described,) = _strata("transactions", "describe", tid, *b)
    assert described["state"] == "Ongoing" and described["partitions"] == [[topic, 1]]
    (producer,) = _strata("transactions", "producers", topic, *b, "--partition", "1")
    assert producer["producer_id"] == listed["producer_id"] and producer["current_txn_start_offset"] == 0

    p.commit_transaction(BOUND_S)
    (described,) = _strata("transactions", "describe", tid, *b)
    assert described["state"] == "CompleteCommit" and described["partitions"] == []
    (producer,) = _strata("transactions", "producers", topic, *b)
    assert producer["current_txn_start_offset"] == -1

    bad = subprocess.run(
        [sys.executable, "-m", "api.cli", "transactions", "describe", "no-such-id", *b],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "no-such-id" in bad.stderr


def test_aiokafka_transactions_with_read_committed_consumer(broker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = f"txaio-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)

    async def run() -> tuple[list[bytes], list[bytes]]:
        p = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id=f"aio-{uuid.uuid4().hex[:6]}"
        )
        await p.start()
        try:
            async with p.transaction():
                for i in range(10):
                    await p.send(topic, b"c%d" % i, partition=i % 2)
            await p.begin_transaction()
            for i in range(10):
                await p.send(topic, b"a%d" % i, partition=i % 2)
            await p.flush()
            await p.abort_transaction()
        finally:
            await p.stop()

        async def read(isolation: str, n: int) -> list[bytes]:
            c = AIOKafkaConsumer(
                topic,
                bootstrap_servers=broker.bootstrap,
                auto_offset_reset="earliest",
                isolation_level=isolation,
                enable_auto_commit=False,
            )
            await c.start()
            try:
                out: list[bytes] = []
                deadline = time.monotonic() + BOUND_S
                while len(out) < n and time.monotonic() < deadline:
                    for records in (await c.getmany(timeout_ms=500)).values():
                        out += [r.value or b"" for r in records]
                return out
            finally:
                await c.stop()

        return await read("read_committed", 10), await read("read_uncommitted", 20)

    committed, everything = asyncio.run(run())
    assert sorted(committed) == sorted(b"c%d" % i for i in range(10))
    assert len(everything) == 20


def test_kafka_python_transactions_with_read_committed_consumer(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"txkp-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(10):
            p.send(topic, b"c%d" % i, partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(10):
            p.send(topic, b"a%d" % i, partition=i % 2)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    c = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    try:
        seen = [m.value for m in c]
    finally:
        c.close()
    assert sorted(seen) == sorted(b"c%d" % i for i in range(10))


def test_rest_consumers_with_isolation_level(broker: BrokerProcess) -> None:
    """A REST v2 consumer instance created with ``isolation.level`` read_committed gets only
    committed transactions' records; read_uncommitted (the default) gets them all; a bad
    value is refused (422)."""
    import base64

    import httpx

    from tests.api.groups.helpers import JSON_HEADERS, V2_BINARY, poll_records

    topic = f"txrest-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    p = _producer(broker, f"rest-{uuid.uuid4().hex[:6]}")
    for n, commit in ((3, True), (4, False), (2, True)):
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, value=b"%s%d" % (b"c" if commit else b"a", i))
        p.flush(BOUND_S)
        if commit:
            p.commit_transaction(BOUND_S)
        else:
            p.abort_transaction(BOUND_S)
    group = f"rest-{uuid.uuid4().hex[:6]}"
    with httpx.Client(base_url=broker.http_url, timeout=60) as http:
        bad = http.post(f"/consumers/{group}", json={"isolation.level": "serializable"}, headers=JSON_HEADERS)
        assert bad.status_code == 422, bad.text

        def values(isolation: str | None, want: int) -> list[bytes]:
            name = f"i{uuid.uuid4().hex[:6]}"
            body = {"name": name, "auto.offset.reset": "earliest", "auto.commit.enable": "false"}
            if isolation is not None:
                body["isolation.level"] = isolation
            r = http.post(f"/consumers/{group}", json=body, headers=JSON_HEADERS)
            assert r.status_code == 200, r.text
            base = f"/consumers/{group}/instances/{name}"
            try:
                r = http.post(f"{base}/subscription", json={"topics": [topic]}, headers=JSON_HEADERS)
                assert r.status_code == 204, r.text
                got = poll_records(http, base, want, accept=V2_BINARY, timeout=BOUND_S)
                extra = http.get(f"{base}/records", params={"timeout": 500}, headers={"Accept": V2_BINARY})
                return [base64.b64decode(g["value"]) for g in got + extra.json()]
            finally:
                http.delete(base)

        assert values("read_committed", 5) == [b"c0", b"c1", b"c2", b"c0", b"c1"]
        assert len(values(None, 9)) == 9


_VANISHING_PRODUCER = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[3],
              "transaction.timeout.ms": 3000})
p.init_transactions(30)
p.begin_transaction()
p.produce(sys.argv[2], value=b"hanging")
p.flush(30)
print("open", flush=True)
time.sleep(600)
"""


def test_a_vanished_producers_transaction_is_aborted_by_timeout_and_unblocks_readers(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """kill -9 of a producer mid-transaction: read_committed consumers stay below its first
    offset until the coordinator aborts it after transaction.timeout.ms, then read on."""
    env = {"STRATA_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": "200"}
    b = BrokerProcess(tmp_path_factory.mktemp("txn-timeout"), env=env).start()
    try:
        topic, gone = f"txto-{uuid.uuid4().hex[:6]}", f"gone-{uuid.uuid4().hex[:6]}"
        create_topic(b.bootstrap, topic, 1)
        child = subprocess.Popen(
            [sys.executable, "-c", _VANISHING_PRODUCER, b.bootstrap, topic, gone],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "open"
        finally:
            child.kill()
            child.wait()
        # The open transaction holds the last stable offset at its first offset (0).
        assert _latest(b, topic, isolation_level=1) == 0 < _latest(b, topic, isolation_level=0)
        p = _producer(b, f"after-{uuid.uuid4().hex[:6]}")
        p.begin_transaction()
        p.produce(topic, value=b"committed")
        p.commit_transaction(BOUND_S)
        # Held back by the open transaction at offset 0, then released by its abort.
        started = time.monotonic()
        assert _read(b, [topic], "read_committed", expect=1) == [b"committed"]
        assert time.monotonic() - started < BOUND_S
        aborted = _strata("transactions", "list", "-b", b.bootstrap, "--state", "CompleteAbort")
        assert [t["transactional_id"] for t in aborted] == [gone]
    finally:
        b.kill()


def _latest(broker: BrokerProcess, topic: str, *, isolation_level: int, partition: int = 0) -> int:
    """ListOffsets LATEST of a partition: the high watermark, or the LSO for read_committed."""
    from kclient import KafkaClient
    from kwire import ApiKey
    from kwire.address import HostPort
    from kwire.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

    latest = ListOffsetsPartition(partition_index=partition, timestamp=-1)
    req = ListOffsetsRequest(
        isolation_level=isolation_level,
        topics=(ListOffsetsTopic(name=topic, partitions=(latest,)),),
    )
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        return int(client.call(ApiKey.LIST_OFFSETS, req).topics[0].partitions[0].offset)


def test_the_leader_verifies_a_transactional_batch_with_the_coordinator(broker: BrokerProcess) -> None:
    """KIP-890 part 1, spoken raw: a transactional batch for a partition the transaction has
    not added is INVALID_TXN_STATE and writes nothing; after the abort, a late batch of the
    ended transaction (same producer epoch: Transactions V1 keep it) is refused too, so
    it cannot open a transaction no marker would close and the last stable offset stays at
    the high watermark."""
    from hot.records import RecordInput, build_batch
    from kclient import KafkaClient
    from kwire import ApiKey
    from kwire import error_table as E
    from kwire.address import HostPort
    from kwire.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
    from kwire.messages.end_txn import EndTxnRequest
    from kwire.messages.find_coordinator import FindCoordinatorRequest
    from kwire.messages.init_producer_id import InitProducerIdRequest
    from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData

    topic, tid = f"txv-{uuid.uuid4().hex[:6]}", f"raw-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        deadline = time.monotonic() + BOUND_S
        while True:  # the first FindCoordinator creates __transaction_state: as clients, retry
            fc = client.call(
                ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key_type=1, coordinator_keys=(tid,))
            )
            if fc.coordinators[0].error_code == 0:
                break
            assert time.monotonic() < deadline, "no transaction coordinator"
            time.sleep(0.1)
        init = client.call(
            ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000)
        )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        seq = {0: 0, 1: 0}

        def produce(partition: int, version: int = 9) -> int:
            batch = build_batch(
                [RecordInput(key=None, value=b"v%d" % seq[partition])],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq[partition],
                transactional=True,
            )
            req = ProduceRequest(
                transactional_id=tid,
                acks=-1,
                timeout_ms=10000,
                topic_data=(
                    ProduceTopicData(
                        name=topic, partition_data=(ProducePartitionData(index=partition, records=batch),)
                    ),
                ),
            )
            (p,) = client._call(ApiKey.PRODUCE, version, req).responses[0].partition_responses
            if p.error_code == 0:
                seq[partition] += 1
            return int(p.error_code)

        def add(partition: int) -> None:
            req = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(partition,)),),
            )
            resp = client._call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, req)
            assert [
                r.partition_error_code
                for t in resp.results_by_topic_v3_and_below
                for r in t.results_by_partition
            ] == [0]

        assert produce(0) == E.INVALID_TXN_STATE  # not added: nothing written
        add(0)
        assert produce(0) == 0 and produce(0) == 0
        assert produce(1) == E.INVALID_TXN_STATE  # partition 1 is not in the transaction
        assert produce(1, version=11) == E.TRANSACTION_ABORTABLE  # KIP-890: v11 may say so
        end = client.call(
            ApiKey.END_TXN,
            EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=False),
        )
        assert end.error_code == 0
        deadline = time.monotonic() + BOUND_S
        while _latest(broker, topic, isolation_level=1) != _latest(broker, topic, isolation_level=0):
            assert time.monotonic() < deadline, "the abort marker was not written"
            time.sleep(0.05)
        high = _latest(broker, topic, isolation_level=0)
        assert high == 3  # two records and the marker
        assert produce(0) == E.INVALID_TXN_STATE  # a late batch of the aborted transaction
        assert _latest(broker, topic, isolation_level=1) == _latest(broker, topic, isolation_level=0) == high
        assert _latest(broker, topic, isolation_level=0, partition=1) == 0  # nothing reached it


def test_the_transaction_state_topic_is_internal(broker: BrokerProcess) -> None:
    """As in Kafka: Metadata marks ``__transaction_state`` internal and clients cannot produce to it."""
    p = _producer(broker, f"int-{uuid.uuid4().hex[:6]}")  # creates __transaction_state
    p.begin_transaction()
    p.abort_transaction(BOUND_S)
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=BOUND_S)
    assert "__transaction_state" in md.topics
    plain = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000})
    errors: list[Any] = []
    plain.produce("__transaction_state", value=b"x", partition=0, on_delivery=lambda e, m: errors.append(e))
    plain.flush(BOUND_S)
    assert errors and errors[0] is not None and errors[0].name() == "TOPIC_EXCEPTION", errors  # code 17
