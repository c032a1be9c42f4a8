"""Transactions under faults, three real brokers on a real etcd (RF 3, acks=all):

* kill -9 of the transaction coordinator right after it answered EndTxn (PrepareCommit or
  PrepareAbort durable, its markers possibly not all written): the new leader of the
  ``__transaction_state`` partition loads it and finishes the markers, so the transaction is
  visible to read_committed consumers whole (commit) or not at all (abort), never in part;
* kill -9 of a data partition's leader between a transaction's records and its commit: the
  markers reach the partition's new leader and the transaction is visible whole;
* kill -9 of a data partition's leader while its marker is being written (frozen before
  EndTxn, so the marker sent to it is unanswered, killed once EndTxn is answered): the
  coordinator writes the marker to the new leader, the transaction is visible whole;
* a consume-transform-produce loop over a leader's kill -9: every input record exactly once
  in the output.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from broker.transactions.partitioner import TRANSACTION_STATE_TOPIC, partition_for
from tests.broker.clusterlib import WAIT, Cluster, started_cluster, wait_until

pytestmark = pytest.mark.timeout(240)
STATE_PARTITIONS = 8  # transaction.state.log.num.partitions' default
PARTITIONS = 3
BOUND_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-txn-faults")
    with started_cluster(root) as c:
        yield c


def _producer(cluster: Cluster, tid: str) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": 60000,
            "message.timeout.ms": 60000,
        }
    )
    p.init_transactions(BOUND_S)
    return p


def _committed(cluster: Cluster, topic: str, expect: int) -> list[bytes]:
    """What a read_committed consumer reads of ``topic`` from the start (until ``expect``
    records, then a little longer to catch any extra, bounded)."""
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"r-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        c.subscribe([topic])
        out: list[bytes] = []
        deadline = time.monotonic() + BOUND_S
        settle = None
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value() or b"")
            if len(out) >= expect:
                settle = settle or time.monotonic() + 2.0
                if time.monotonic() > settle:
                    break
        return out
    finally:
        c.close()


def _txn(p: Producer, topic: str, tag: bytes, n: int) -> set[bytes]:
    p.begin_transaction()
    values = {b"%s-%d" % (tag, i) for i in range(n)}
    for i, v in enumerate(sorted(values)):
        p.produce(topic, value=v, partition=i % PARTITIONS)
    p.flush(BOUND_S)
    return values


def _coordinator(cluster: Cluster, tid: str) -> int:
    p = partition_for(tid, STATE_PARTITIONS)
    wait_until(lambda: TRANSACTION_STATE_TOPIC in cluster.view().topics, "the transaction state topic")
    cluster.wait_fully_replicated(TRANSACTION_STATE_TOPIC)
    return cluster.leader(TRANSACTION_STATE_TOPIC, p)


def _data_leader_not_coordinating(cluster: Cluster, prefix: str) -> tuple[str, Producer, int]:
    """A new RF-3 topic, a transactional producer, and a broker that leads one of the topic's
    partitions but is not the producer's transaction coordinator."""
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, PARTITIONS, rf=3, min_isr=2)
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    p = _producer(cluster, tid)
    coordinator = _coordinator(cluster, tid)
    victim = next(
        (b for b in (cluster.leader(topic, q) for q in range(PARTITIONS)) if b != coordinator), None
    )
    if victim is None:
        pytest.skip("the coordinator leads every partition")  # not with round-robin placement
    return topic, p, victim


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_coordinator_killed_after_answering_end_txn(cluster: Cluster, commit: bool) -> None:
    topic = f"txf-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, PARTITIONS, rf=3, min_isr=2)
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    p = _producer(cluster, tid)
    first = _txn(p, topic, b"first", 30)
    p.commit_transaction(BOUND_S)
    coordinator = _coordinator(cluster, tid)

    second = _txn(p, topic, b"second", 60)
    if commit:
        p.commit_transaction(BOUND_S)
    else:
        p.abort_transaction(BOUND_S)
    cluster.nodes[coordinator].kill()  # its markers may not all be written yet
    try:
        expected = first | second if commit else first
        seen = _committed(cluster, topic, len(expected))
        assert sorted(seen) == sorted(expected)  # whole, exactly once, nothing aborted
        # The producer goes on at the new coordinator.
        third = _txn(p, topic, b"third", 9)
        p.commit_transaction(BOUND_S)
        seen = _committed(cluster, topic, len(expected | third))
        assert sorted(seen) == sorted(expected | third)
    finally:
        cluster.nodes[coordinator].start()
        cluster.wait_registered()


def test_data_leader_killed_before_the_commit(cluster: Cluster) -> None:
    topic, p, victim = _data_leader_not_coordinating(cluster, "txl")
    values = _txn(p, topic, b"v", 60)  # acknowledged by all in-sync replicas
    cluster.nodes[victim].kill()
    try:
        p.commit_transaction(BOUND_S)  # markers go to the new leaders
        assert sorted(_committed(cluster, topic, len(values))) == sorted(values)
    finally:
        cluster.nodes[victim].start()
        cluster.wait_registered()
    wait_until(lambda: cluster.fully_replicated(topic), "replicas back", timeout=WAIT)


def test_consume_transform_produce_over_a_leader_kill_is_exactly_once(cluster: Cluster) -> None:
    """Kafka's exactly-once loop (read_committed consumer, transactional producer,
    send_offsets_to_transaction) over a kill -9 of a partition leader mid-run: every input
    record appears exactly once in the output. An abortable error aborts the transaction
    and rewinds the consumer to its committed offsets, as an EOS application does."""
    from confluent_kafka import KafkaException, TopicPartition

    src, dst = f"ctpin-{uuid.uuid4().hex[:6]}", f"ctpout-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(src, PARTITIONS, rf=3, min_isr=2)
    cluster.create_topic(dst, PARTITIONS, rf=3, min_isr=2)
    n = 600
    plain = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i in range(n):
        plain.produce(src, value=b"%d" % i, partition=i % PARTITIONS)
    plain.flush(BOUND_S)

    group = f"ctp-{uuid.uuid4().hex[:6]}"
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    p = _producer(cluster, f"ctp-{group}")
    c.subscribe([src])
    victim = cluster.leader(dst, 0)
    killed = False
    done = 0
    deadline = time.monotonic() + 2 * BOUND_S
    try:
        while done < n and time.monotonic() < deadline:
            msgs = [m for m in c.consume(50, 1.0) if m.error() is None]
            if not msgs:
                continue
            try:
                p.begin_transaction()
                for m in msgs:
                    p.produce(dst, value=b"out-" + (m.value() or b""), partition=m.partition())
                if not killed and done >= n // 3:
                    cluster.nodes[victim].kill()  # mid-transaction, records in flight
                    killed = True
                offsets = [TopicPartition(m.topic(), m.partition(), m.offset() + 1) for m in msgs]
                p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), BOUND_S)
                p.commit_transaction(BOUND_S)
                done += len(msgs)
            except KafkaException as exc:
                err = exc.args[0]
                assert err.txn_requires_abort() or err.retriable(), err
                p.abort_transaction(BOUND_S)
                # Rewind to what the group committed: the aborted batch is read again.
                committed = c.committed(c.assignment(), BOUND_S)
                for tp in committed:
                    c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
    finally:
        c.close()
        if killed:
            cluster.nodes[victim].start()
            cluster.wait_registered()
    assert killed and done >= n
    out = _committed(cluster, dst, n)
    assert sorted(out) == sorted(b"out-%d" % i for i in range(n))


def test_data_leader_killed_while_its_marker_is_written(cluster: Cluster) -> None:
    topic, p, victim = _data_leader_not_coordinating(cluster, "txm")
    values = _txn(p, topic, b"m", 60)  # acknowledged by all in-sync replicas
    node = cluster.nodes[victim]
    node.pause()  # from here the victim answers nothing: its marker stays unanswered
    try:
        # PrepareCommit waits out the victim's ISR removal if it follows the state partition.
        p.commit_transaction(BOUND_S)
        assert node.proc is not None
        os.killpg(node.proc.pid, signal.SIGKILL)  # still frozen: killed mid marker write
        node.kill()
        assert sorted(_committed(cluster, topic, len(values))) == sorted(values)
        later = _txn(p, topic, b"later", 9)
        p.commit_transaction(BOUND_S)
        assert sorted(_committed(cluster, topic, len(values | later))) == sorted(values | later)
    finally:
        node.start()
        cluster.wait_registered()
    wait_until(lambda: cluster.fully_replicated(topic), "replicas back", timeout=WAIT)
    # The restarted victim's replicas agree: read again with it back in the cluster.
    assert sorted(_committed(cluster, topic, len(values) + 9)) == sorted(values | later)
