"""The transaction coordinator on a real broker: the wire APIs (FindCoordinator TRANSACTION,
InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions, ListTransactions) with Kafka's errors, and confluent-kafka's
transactional producer: init_transactions, empty transactions committed and aborted, and
zombie fencing of a second instance with the same transactional.id."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kwire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kwire.messages.describe_transactions import DescribeTransactionsRequest
from kwire.messages.end_txn import EndTxnRequest
from kwire.messages.find_coordinator import KEY_TYPE_TRANSACTION, FindCoordinatorRequest
from kwire.messages.init_producer_id import InitProducerIdRequest
from kwire.messages.list_transactions import ListTransactionsRequest
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)
BOUND_S = 30.0


def _until_loaded(client: KafkaClient, api_key: int, req: Any) -> Any:
    """Call until the coordinator has loaded its partition (bounded)."""
    deadline = time.monotonic() + BOUND_S
    while True:
        resp = client.call(api_key, req)
        if resp.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR):
            return resp
        assert time.monotonic() < deadline, f"coordinator not ready: {resp}"
        time.sleep(0.05)


def test_the_coordinator_apis_on_the_wire(broker: BrokerProcess) -> None:
    topic = f"txn-wire-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 3)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        fc = client.call(
            ApiKey.FIND_COORDINATOR,
            FindCoordinatorRequest(key_type=KEY_TYPE_TRANSACTION, coordinator_keys=(tid,)),
        )
        assert [(c.error_code, c.port) for c in fc.coordinators] == [(0, broker.kafka_port)]
        init = _until_loaded(
            client,
            ApiKey.INIT_PRODUCER_ID,
            InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000),
        )
        assert (init.error_code, init.producer_epoch) == (0, 0)
        pid = init.producer_id
        bad = client.call(
            ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=10**9)
        )
        assert bad.error_code == E.INVALID_TRANSACTION_TIMEOUT

        def add(*topics: AddPartitionsToTxnTopic, epoch: int = 0) -> dict[tuple[str, int], int]:
            resp = client._call(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                3,
                AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=tid,
                    v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=topics,
                ),
            )
            return {
                (t.name, p.partition_index): p.partition_error_code
                for t in resp.results_by_topic_v3_and_below
                for p in t.results_by_partition
            }

        # An unknown partition fails the request; the others are not attempted.
        assert add(AddPartitionsToTxnTopic(name=topic, partitions=(0, 5))) == {
            (topic, 0): E.OPERATION_NOT_ATTEMPTED,
            (topic, 5): E.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert add(AddPartitionsToTxnTopic(name=topic, partitions=(0, 1))) == {(topic, 0): 0, (topic, 1): 0}
        assert add(AddPartitionsToTxnTopic(name=topic, partitions=(0,)), epoch=7) == {
            (topic, 0): E.PRODUCER_FENCED
        }
        # The partition leader's check (KIP-890, v4+): added or not; TRANSACTION_ABORTABLE from v5.
        for version, not_added in ((5, E.TRANSACTION_ABORTABLE), (4, E.INVALID_TXN_STATE)):
            verify = client._call(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                version,
                AddPartitionsToTxnRequest(
                    transactions=(
                        AddPartitionsToTxnTransaction(
                            transactional_id=tid,
                            producer_id=pid,
                            producer_epoch=0,
                            verify_only=True,
                            topics=(AddPartitionsToTxnTopic(name=topic, partitions=(0, 2)),),
                        ),
                    )
                ),
            )
            (txn,) = verify.results_by_transaction
            assert (verify.error_code, txn.transactional_id) == (0, tid)
            codes = {
                (t.name, p.partition_index): p.partition_error_code
                for t in txn.topic_results
                for p in t.results_by_partition
            }
            assert codes == {(topic, 0): 0, (topic, 2): not_added}
        offsets = client.call(
            ApiKey.ADD_OFFSETS_TO_TXN,
            AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=0, group_id="g"),
        )
        assert offsets.error_code == 0

        (state,) = client.call(
            ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=(tid,))
        ).transaction_states
        assert (state.error_code, state.transaction_state, state.producer_id) == (0, "Ongoing", pid)
        assert {(t.topic, tuple(t.partitions)) for t in state.topics if t.topic == topic} == {(topic, (0, 1))}
        (missing,) = client.call(
            ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=("nope",))
        ).transaction_states
        assert missing.error_code in (E.TRANSACTIONAL_ID_NOT_FOUND, E.NOT_COORDINATOR)

        listed = client.call(
            ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest(transactional_id_pattern="tx-.*")
        )
        assert (tid, pid, "Ongoing") in {
            (t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states
        }
        nothing = client.call(
            ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest(state_filters=("CompleteCommit",))
        )
        assert tid not in {t.transactional_id for t in nothing.transaction_states}
        regex = client.call(ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest(transactional_id_pattern="(["))
        assert regex.error_code == E.INVALID_REGULAR_EXPRESSION

        # A stale epoch: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for clients before KIP-588.
        stale = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=3, committed=True)
        assert client._call(ApiKey.END_TXN, 3, stale).error_code == E.PRODUCER_FENCED
        assert client._call(ApiKey.END_TXN, 1, stale).error_code == E.INVALID_PRODUCER_EPOCH
        other = EndTxnRequest(transactional_id=tid, producer_id=pid + 1, producer_epoch=0, committed=True)
        assert client.call(ApiKey.END_TXN, other).error_code == E.INVALID_PRODUCER_ID_MAPPING
    metrics = httpx.get(f"{broker.http_url}/metrics", timeout=30).text
    assert 'strata_transactions{state="Ongoing"}' in metrics
    assert "strata_transactions_oldest_open_seconds" in metrics


def _producer(broker: BrokerProcess, tid: str) -> Producer:
    return Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000}
    )


def test_confluent_kafka_transactions_and_zombie_fencing(broker: BrokerProcess) -> None:
    tid = f"ck-{uuid.uuid4().hex[:8]}"
    first = _producer(broker, tid)
    first.init_transactions(BOUND_S)
    first.begin_transaction()
    first.abort_transaction(BOUND_S)
    first.begin_transaction()
    first.commit_transaction(BOUND_S)

    # A second instance with the same transactional.id fences the first.
    second = _producer(broker, tid)
    second.init_transactions(BOUND_S)
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        (state,) = client.call(
            ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=(tid,))
        ).transaction_states
        assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Empty", 1)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{tid}"})
    try:
        first.begin_transaction()
        with pytest.raises(KafkaException) as fenced:
            first.send_offsets_to_transaction(
                [TopicPartition("t", 0, 1)], consumer.consumer_group_metadata(), BOUND_S
            )
        err = fenced.value.args[0]
        assert err.fatal() and err.name() == "_FENCED", err
    finally:
        consumer.close()
    second.begin_transaction()
    second.abort_transaction(BOUND_S)


def test_aiokafka_and_kafka_python_transactional_producers_start(broker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    async def aio() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id=f"aio-{uuid.uuid4().hex[:8]}"
        )
        await p.start()  # InitProducerId through the transaction coordinator
        try:
            async with p.transaction():
                pass
            await p.begin_transaction()
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(aio())
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:8]}")
    try:
        kp.init_transactions()
        kp.begin_transaction()
        kp.commit_transaction()
        kp.begin_transaction()
        kp.abort_transaction()
    finally:
        kp.close()
