"""The transaction coordinator in cluster mode: ``__transaction_state`` replicated (RF 3,
acks=all) and each transactional id coordinated by the leader of its partition.

Real etcd, three real brokers: every broker names the same coordinator; a transaction's
state written there survives a kill -9 of the coordinator (the new leader of the partition
loads it, in a higher coordinator epoch), the producer goes on with it at the new
coordinator, and once the old one is back exactly one broker answers for the id.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker.transactions.partitioner import TRANSACTION_STATE_TOPIC, partition_for
from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kwire.messages.describe_transactions import DescribeTransactionsRequest
from kwire.messages.find_coordinator import KEY_TYPE_TRANSACTION, FindCoordinatorRequest
from kwire.messages.init_producer_id import InitProducerIdRequest
from tests.broker.clusterlib import WAIT, Cluster, started_cluster, wait_until

TOPIC = "txn-data"
TID = "payments-1"
STATE_PARTITIONS = 8  # transaction.state.log.num.partitions' default


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-txn")
    with started_cluster(root) as c:
        yield c


def _client(cluster: Cluster, broker_id: int) -> KafkaClient:
    return KafkaClient.connect(HostPort("127.0.0.1", cluster.nodes[broker_id].kafka_port), timeout=30)


def _code(resp: Any) -> int:
    """The error of an answer about the one id (or its one partition)."""
    if hasattr(resp, "transaction_states"):
        return int(resp.transaction_states[0].error_code)
    if hasattr(resp, "results_by_topic_v3_and_below"):
        return int(resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
    return int(resp.error_code)


def _call_until_served(
    cluster: Cluster, broker_id: int, api_key: int, req: Any, version: int | None = None
) -> Any:
    """Ask the coordinator until it has loaded the id's partition (bounded)."""
    deadline = time.monotonic() + WAIT
    while True:
        with _client(cluster, broker_id) as c:
            resp = c.call(api_key, req) if version is None else c._call(api_key, version, req)
        if _code(resp) not in (
            E.COORDINATOR_LOAD_IN_PROGRESS,
            E.NOT_COORDINATOR,
            E.COORDINATOR_NOT_AVAILABLE,
        ):
            return resp
        assert time.monotonic() < deadline, f"{broker_id} did not serve {req}: {resp}"
        time.sleep(0.1)


def _coordinators(cluster: Cluster) -> set[int]:
    found = set()
    for b, node in cluster.nodes.items():
        if not node.running:
            continue
        with _client(cluster, b) as c:
            r = c.call(
                ApiKey.FIND_COORDINATOR,
                FindCoordinatorRequest(key_type=KEY_TYPE_TRANSACTION, coordinator_keys=(TID,)),
            )
        (co,) = r.coordinators
        found.add(co.node_id if co.error_code == E.NONE else -co.error_code)
    return found


def _describe(cluster: Cluster, broker_id: int) -> Any:
    resp = _call_until_served(
        cluster,
        broker_id,
        ApiKey.DESCRIBE_TRANSACTIONS,
        DescribeTransactionsRequest(transactional_ids=(TID,)),
    )
    (state,) = resp.transaction_states
    return state


def test_transaction_state_survives_a_coordinator_kill(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 2, rf=3, min_isr=2)
    wait_until(
        lambda: len(_coordinators(cluster)) == 1 and min(_coordinators(cluster)) > 0, "one coordinator"
    )
    (coordinator,) = _coordinators(cluster)
    p = partition_for(TID, STATE_PARTITIONS)
    assert cluster.leader(TRANSACTION_STATE_TOPIC, p) == coordinator
    cluster.wait_fully_replicated(TRANSACTION_STATE_TOPIC)
    # transaction.state.log.min.isr (Kafka's default, 2) is the state topic's min.insync.replicas.
    assert cluster.view().topics[TRANSACTION_STATE_TOPIC].value.configs["min.insync.replicas"] == "2"

    init = _call_until_served(
        cluster,
        coordinator,
        ApiKey.INIT_PRODUCER_ID,
        InitProducerIdRequest(transactional_id=TID, transaction_timeout_ms=60000),
    )
    assert (init.error_code, init.producer_epoch) == (E.NONE, 0)
    pid = init.producer_id

    def add(broker_id: int, partition: int) -> int:
        req = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TID,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=(AddPartitionsToTxnTopic(name=TOPIC, partitions=(partition,)),),
        )
        resp = _call_until_served(cluster, broker_id, ApiKey.ADD_PARTITIONS_TO_TXN, req, version=3)
        return int(resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    assert add(coordinator, 0) == E.NONE
    before = _describe(cluster, coordinator)
    assert (before.transaction_state, before.producer_id) == ("Ongoing", pid)

    epoch = cluster.state(TRANSACTION_STATE_TOPIC, p).leader_epoch
    cluster.nodes[coordinator].kill()
    try:
        new = cluster.wait_new_leader(TRANSACTION_STATE_TOPIC, p, coordinator, epoch)
        wait_until(lambda: _coordinators(cluster) == {new}, "the survivors name the new coordinator")
        after = _describe(cluster, new)
        assert (after.error_code, after.transaction_state, after.producer_id, after.producer_epoch) == (
            E.NONE,
            "Ongoing",
            pid,
            0,
        )
        assert [(t.topic, tuple(t.partitions)) for t in after.topics] == [(TOPIC, (0,))]
        # The producer goes on with its transaction at the new coordinator.
        assert add(new, 1) == E.NONE
        assert [(t.topic, tuple(t.partitions)) for t in _describe(cluster, new).topics] == [(TOPIC, (0, 1))]
    finally:
        cluster.nodes[coordinator].start()
    # With the old coordinator back (a follower, or the leader again after a preferred
    # election), every broker names one coordinator and it holds the same transaction.
    cluster.wait_fully_replicated(TRANSACTION_STATE_TOPIC)

    def others_refuse() -> bool:
        coordinators = _coordinators(cluster)
        if len(coordinators) != 1 or min(coordinators) <= 0:
            return False
        for b in cluster.nodes:
            if b not in coordinators:
                with _client(cluster, b) as c:
                    r = c.call(
                        ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=(TID,))
                    )
                if r.transaction_states[0].error_code != E.NOT_COORDINATOR:
                    return False
        return True

    wait_until(others_refuse, "one coordinator, the others answering NOT_COORDINATOR")
    (now,) = _coordinators(cluster)
    state = _describe(cluster, now)
    assert (state.transaction_state, state.producer_id) == ("Ongoing", pid)
    assert [(t.topic, tuple(t.partitions)) for t in state.topics] == [(TOPIC, (0, 1))]
