"""Consumer groups in cluster mode: offsets in the replicated ``__consumer_offsets`` topic,
each group coordinated by the leader of its partition (broker.groups.replicated_offsets).

Real etcd, three real brokers, real clients: confluent-kafka consumers in one group
commit by hand after processing, while the coordinator is killed with SIGKILL. The
checker proves that every committed offset survived (a consumer taking a partition over
starts at or after the last commit acknowledged to any consumer), that no record was
skipped, and that records were processed twice only when no acknowledged commit covered
them yet. Also: FindCoordinator agreement (v3 and batched v4), the internal topic's
guards and Metadata flag, group lag over REST, kafka-python and aiokafka groups, and an idempotent
producer's retry deduplicated by the new leader after a failover (KIP-98).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from broker.groups.replicated_offsets import partition_for
from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kwire.messages.create_topics import CreatableTopic, CreateTopicsRequest
from kwire.messages.delete_topics import DeleteTopicsRequest
from kwire.messages.find_coordinator import FindCoordinatorRequest
from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.broker.clusterlib import WAIT, Cluster, wait_until
from tests.broker.etcdlib import EtcdProcess

pytest.importorskip("confluent_kafka")

log = logging.getLogger(__name__)
OFFSETS = "__consumer_offsets"
TOPIC = "orders"
PARTITIONS = 4
RECORDS = 2400


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-groups")
    etcd = EtcdProcess(root / "etcd").start()
    # Shorter waits than Kafka's defaults keep rebalances quick; the offsets topic is the
    # default one (8 partitions, RF 3, min.insync.replicas 2).
    c = Cluster(
        root,
        etcd,
        env={
            "STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
            "STRATA_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "500",
        },
    )
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def _client(cluster: Cluster, broker_id: int) -> KafkaClient:
    return KafkaClient.connect(HostPort("127.0.0.1", cluster.nodes[broker_id].kafka_port), timeout=30)


def _find(cluster: Cluster, broker_id: int, groups: list[str]) -> dict[str, tuple[int, int]]:
    """FindCoordinator answers of one broker: group -> (error code, node id), asked with
    v3 for the first group and batched v4 for all."""
    out: dict[str, tuple[int, int]] = {}
    with _client(cluster, broker_id) as c:
        r3 = c._call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=groups[0]))
        r4 = c._call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(coordinator_keys=tuple(groups)))
    for co in r4.coordinators:
        out[co.key] = (co.error_code, co.node_id)
    assert (r3.error_code, r3.node_id) == out[groups[0]]
    return out


def _coordinator(cluster: Cluster, group: str) -> int:
    va = cluster.view().topics[OFFSETS]
    return cluster.leader(OFFSETS, partition_for(group, va.value.partition_count))


def _produce(cluster: Cluster, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        p.produce(topic, value=b"%06d" % i, partition=i % PARTITIONS)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def _end_offsets(cluster: Cluster, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "end-offsets"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)
        }
    finally:
        c.close()


@dataclass
class GroupRun:
    """Consumers of one group, each committing synchronously after every few records."""

    bootstrap: str
    group: str
    topic: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    # partition -> highest offset a commit acknowledged to any consumer
    acked: dict[int, int] = field(default_factory=dict)
    # (partition, offset, acked commit of the partition when it was processed)
    processed: list[tuple[int, int, int]] = field(default_factory=list)
    # (partition, first offset processed after an assignment, acked commit at that moment)
    resumed: list[tuple[int, int, int]] = field(default_factory=list)
    commit_errors: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)
    protocol: str = "classic"  # or "consumer" (KIP-848: the coordinator's heartbeat interval)
    # (monotonic time, consumer, partitions) of every revocation or loss
    revoked: list[tuple[float, int, list[int]]] = field(default_factory=list)

    def start(self, consumers: int) -> GroupRun:
        for i in range(consumers):
            t = threading.Thread(target=self._run, args=(i,), daemon=True, name=f"group-consumer-{i}")
            t.start()
            self.threads.append(t)
        return self

    def _run(self, index: int) -> None:
        from confluent_kafka import Consumer

        fresh: set[int] = set()

        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            fresh.update(tp.partition for tp in partitions)

        def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            with self.lock:
                self.revoked.append((time.monotonic(), index, [tp.partition for tp in partitions]))
            if self.protocol == "consumer" and partitions:
                # KIP-848 members still own what they revoke: commit it for the next owner
                self._commit(consumer, 1)

        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": f"c{index}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
            "fetch.wait.max.ms": 100,
            "socket.connection.setup.timeout.ms": 3000,
            "reconnect.backoff.max.ms": 500,
            "max.poll.interval.ms": 30000,
        }
        if self.protocol == "classic":
            config |= {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
        else:
            config["group.protocol"] = self.protocol
        consumer = Consumer(config)
        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        since_commit = 0
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.1)
                if msg is None or msg.error() is not None:
                    if since_commit and msg is None:  # idle: commit what was processed
                        since_commit = self._commit(consumer, since_commit)
                    continue
                p, o = msg.partition(), msg.offset()
                assert p is not None and o is not None
                with self.lock:
                    acked = self.acked.get(p, 0)
                    if p in fresh:
                        fresh.discard(p)
                        self.resumed.append((p, o, acked))
                    self.processed.append((p, o, acked))
                time.sleep(0.002)  # "processing": the run lasts long enough to kill mid-way
                since_commit += 1
                if since_commit >= 20:
                    since_commit = self._commit(consumer, since_commit)
            self._commit(consumer, 1)  # the final position
        finally:
            consumer.close()

    def _commit(self, consumer: Any, since_commit: int) -> int:
        """Commit the consumed positions synchronously; how many records remain uncommitted."""
        from confluent_kafka import KafkaException

        failed = False
        try:
            for tp in consumer.commit(asynchronous=False) or []:
                if tp.error is not None:
                    failed = True
                elif tp.offset >= 0:
                    with self.lock:
                        self.acked[tp.partition] = max(self.acked.get(tp.partition, 0), tp.offset)
        except KafkaException as exc:
            with self.lock:
                self.commit_errors.append(str(exc))
            return since_commit
        return since_commit if failed else 0

    def processed_count(self) -> int:
        with self.lock:
            return len({(p, o) for p, o, _ in self.processed})

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=WAIT)


def test_coordinator_failover_keeps_committed_offsets(cluster: Cluster) -> None:
    group = "billing"
    cluster.create_topic(TOPIC, PARTITIONS, rf=3, min_isr=2)
    _produce(cluster, TOPIC, RECORDS)
    end = _end_offsets(cluster, TOPIC)
    assert sum(end.values()) == RECORDS

    # The first FindCoordinator creates the offsets topic; then every broker names the
    # same coordinator: the leader of the group's partition.
    wait_until(
        lambda: all(_find(cluster, b, [group])[group][0] == E.NONE for b in cluster.nodes),
        "FindCoordinator answered by every broker",
    )
    cluster.wait_fully_replicated(OFFSETS)
    va = cluster.view().topics[OFFSETS].value
    assert va.partition_count == 8 and va.replication_factor == 3
    assert va.configs["min.insync.replicas"] == "2"
    groups = [group, "other-1", "other-2", "other-3", ""]
    answers = [_find(cluster, b, groups) for b in cluster.nodes]
    assert answers[0] == answers[1] == answers[2]
    for g in groups:
        assert answers[0][g] == (E.NONE, _coordinator(cluster, g))

    run = GroupRun(cluster.bootstrap, group, TOPIC).start(consumers=2)
    try:
        wait_until(lambda: run.processed_count() >= RECORDS // 4, "the group to process a quarter")
        victim = _coordinator(cluster, group)
        p_off = partition_for(group, 8)
        epoch = cluster.state(OFFSETS, p_off).leader_epoch
        with run.lock:
            acked_before = dict(run.acked)
        log.info("killing coordinator %d (acked commits %s)", victim, acked_before)
        cluster.nodes[victim].kill()
        new = cluster.wait_new_leader(OFFSETS, p_off, victim, epoch)
        log.info("coordinator %d -> %d", victim, new)
        wait_until(lambda: run.processed_count() >= RECORDS, "every record processed", timeout=WAIT * 2)

        def committed_to_end() -> bool:
            with run.lock:
                return all(run.acked.get(p, 0) >= end[p] for p in range(PARTITIONS))

        wait_until(committed_to_end, "commits acknowledged up to the end of every partition")
    finally:
        run.close()
    cluster.nodes[victim].start()

    with run.lock:
        processed = list(run.processed)
        resumed = list(run.resumed)
        acked = dict(run.acked)
    log.info(
        "processed %d (%d distinct), %d resumptions, commit errors %d: %s",
        len(processed),
        len({(p, o) for p, o, _ in processed}),
        len(resumed),
        len(run.commit_errors),
        sorted(set(run.commit_errors))[:5],
    )
    # No record skipped.
    for p in range(PARTITIONS):
        assert {o for q, o, _ in processed if q == p} == set(range(end[p])), f"partition {p}: records skipped"
    # Nothing committed was lost: whoever took a partition over started at or after the
    # last commit acknowledged for it ...
    assert resumed
    for p, first, acked_then in resumed:
        assert first >= acked_then, (
            f"partition {p}: resumed at {first} below the acknowledged commit {acked_then}"
        )
    # ... and re-processed only records no acknowledged commit covered.
    seen: set[tuple[int, int]] = set()
    duplicates = 0
    for p, o, acked_then in processed:
        if (p, o) in seen:
            duplicates += 1
            assert o >= acked_then, f"partition {p}: offset {o} processed again after a commit past it"
        seen.add((p, o))
    log.info("duplicates: %d", duplicates)
    # Everything was committed in the end, partly through the new coordinator.
    assert acked == end
    assert any(acked_before.get(p, 0) < end[p] for p in range(PARTITIONS))

    # The new coordinator holds the group's offsets; the lag is zero there.
    coordinator = _coordinator(cluster, group)
    assert coordinator != victim or cluster.state(OFFSETS, partition_for(group, 8)).leader_epoch > epoch
    url = cluster.nodes[coordinator].http_url

    def lag_ready() -> bool:
        return httpx.get(f"{url}/v1/groups/{group}/lag", timeout=10).status_code == 200

    wait_until(lag_ready, "lag served by the coordinator")
    body = httpx.get(f"{url}/v1/groups/{group}/lag", timeout=10).json()
    log.info("lag: %s", body)
    rows = {r["partition"]: r for r in body["partitions"]}
    assert {p: rows[p]["committed_offset"] for p in range(PARTITIONS)} == end
    # The end offsets are the coordinator's replica's high watermarks: a follower's
    # catches up with the leader's on its next fetch.
    wait_until(
        lambda: httpx.get(f"{url}/v1/groups/{group}/lag", timeout=10).json()["total_lag"] == 0,
        "zero lag",
    )
    # Other brokers are not the coordinator: 421 (NOT_COORDINATOR), clients ask FindCoordinator.
    for b, node in cluster.nodes.items():
        if b != coordinator and node.running:
            r = httpx.get(f"{node.http_url}/v1/groups/{group}/lag", timeout=10)
            assert r.status_code == 421, r.text


def test_offsets_topic_is_internal(cluster: Cluster) -> None:
    with _client(cluster, 1) as c:  # the first FindCoordinator creates the topic
        c._call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="internal-check"))
    wait_until(lambda: OFFSETS in cluster.view().topics, "the offsets topic")
    with _client(cluster, 1) as c:
        md = c._call(ApiKey.METADATA, 9, MetadataRequest(topics=(MetadataRequestTopic(name=OFFSETS),)))
        assert md.topics[0].error_code == E.NONE and md.topics[0].is_internal
        created = c.call(
            ApiKey.CREATE_TOPICS,
            CreateTopicsRequest(
                topics=(CreatableTopic(name=OFFSETS, num_partitions=1, replication_factor=1),),
                timeout_ms=5000,
            ),
        )
        assert created.topics[0].error_code == E.INVALID_TOPIC_EXCEPTION
        deleted = c._call(
            ApiKey.DELETE_TOPICS, 4, DeleteTopicsRequest(topic_names=(OFFSETS,), timeout_ms=5000)
        )
        assert deleted.responses[0].error_code == E.INVALID_TOPIC_EXCEPTION
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap, "message.timeout.ms": 10000, "retries": 0})
    errors: list[Any] = []
    p.produce(OFFSETS, value=b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None, "a produce to __consumer_offsets was accepted"
    assert errors[0].code() == E.INVALID_TOPIC_EXCEPTION

    # The admin paths that go through etcd guard it too: a partition count change would
    # move every group, and REST must not create or delete it either.
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    n = cluster.view().topics[OFFSETS].value.partition_count
    grow = admin.create_partitions([NewPartitions(OFFSETS, n + 1)], request_timeout=10)[OFFSETS]
    with pytest.raises(Exception) as refused:
        grow.result(timeout=30)
    assert refused.value.args[0].code() == E.INVALID_TOPIC_EXCEPTION
    url = f"{cluster.nodes[1].http_url}/v3/clusters"
    cid = httpx.get(url, timeout=30).json()["data"][0]["cluster_id"]
    r = httpx.post(f"{url}/{cid}/topics", json={"topic_name": OFFSETS, "partitions_count": 1}, timeout=30)
    assert r.status_code in (400, 409), r.text
    r = httpx.delete(f"{url}/{cid}/topics/{OFFSETS}", timeout=30)
    assert r.status_code == 400 and "internal topic" in r.text, r.text
    assert cluster.view().topics[OFFSETS].value.partition_count == n


def test_new_leader_deduplicates_a_retried_batch(cluster: Cluster) -> None:
    """KIP-98 across a failover: a batch the old leader appended and replicated, retried by
    its producer against the new leader (same producer id, epoch and sequence), is
    answered with its original offset and not written again: the followers rebuilt the
    producer state from the batches they replicated (``append_as_follower``)."""
    from hot.records import RecordInput, build_batch
    from kwire.messages.init_producer_id import InitProducerIdRequest
    from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData

    topic = "kip98"
    cluster.create_topic(topic, 1, rf=3, min_isr=2)
    leader = cluster.leader(topic)
    # Producer ids are unique across brokers (broker.producer_ids): producers bootstrapped
    # through different brokers never share one.
    inits = {}
    for b in cluster.nodes:
        with _client(cluster, b) as c:
            inits[b] = c.call(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(transaction_timeout_ms=60000))
            assert inits[b].error_code == E.NONE
    assert len({i.producer_id for i in inits.values()}) == len(cluster.nodes)
    init = inits[leader]

    def batch(seq: int, value: bytes) -> bytes:
        return build_batch(
            [RecordInput(None, value)],
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            base_sequence=seq,
        )

    def produce(broker_id: int, data: bytes) -> tuple[int, int]:
        req = ProduceRequest(
            acks=-1,
            timeout_ms=10000,
            topic_data=(
                ProduceTopicData(name=topic, partition_data=(ProducePartitionData(index=0, records=data),)),
            ),
        )
        with _client(cluster, broker_id) as c:
            r = c.call(ApiKey.PRODUCE, req).responses[0].partition_responses[0]
        return r.error_code, r.base_offset

    assert produce(leader, batch(0, b"first")) == (E.NONE, 0)
    assert produce(leader, batch(1, b"second")) == (E.NONE, 1)
    cluster.wait_fully_replicated(topic)
    epoch = cluster.state(topic, 0).leader_epoch
    cluster.nodes[leader].kill()
    try:
        new = cluster.wait_new_leader(topic, 0, leader, epoch)
        # The retry of the last acknowledged batch: its original offset, nothing appended.
        wait_until(lambda: produce(new, batch(1, b"second"))[0] == E.NONE, "the new leader to take writes")
        assert produce(new, batch(1, b"second")) == (E.NONE, 1)
        # The next sequence goes on from there; a gap is refused.
        assert produce(new, batch(2, b"third")) == (E.NONE, 2)
        assert produce(new, batch(5, b"gap"))[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    finally:
        cluster.nodes[leader].start()
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kip98-check"})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT
        while len(values) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value() or b"")
        assert values == [b"first", b"second", b"third"]
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1] == 3
    finally:
        consumer.close()


def test_kafka_python_group_resumes_from_commit(cluster: Cluster) -> None:
    """A kafka-python consumer group against the cluster: it finds the coordinator
    (FindCoordinator v0-v3 clients), commits, and a new consumer resumes there."""
    kafka = pytest.importorskip("kafka")
    topic = "kpy"
    cluster.create_topic(topic, 1, rf=3, min_isr=2)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce(topic, value=b"%02d" % i, partition=0)
    assert p.flush(30) == 0

    def consume(count: int) -> list[bytes]:
        consumer = kafka.KafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap,
            group_id="kpy-group",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            consumer_timeout_ms=20000,
        )
        try:
            got: list[bytes] = []
            for msg in consumer:
                got.append(msg.value)
                if len(got) == count:
                    break
            consumer.commit()
            return got
        finally:
            consumer.close()

    assert consume(8) == [b"%02d" % i for i in range(8)]
    assert consume(12) == [b"%02d" % i for i in range(8, 20)]


def test_aiokafka_group_commits_and_resumes(cluster: Cluster) -> None:
    """aiokafka's group consumer against the cluster: join, commit, and a new consumer of
    the group resumes from the commit."""
    aiokafka = pytest.importorskip("aiokafka")
    topic = "aio"
    cluster.create_topic(topic, 2, rf=3, min_isr=2)
    _produce_n = 10
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(_produce_n):
        p.produce(topic, value=b"%02d" % i, partition=i % 2)
    assert p.flush(30) == 0

    async def consume(count: int) -> set[bytes]:
        consumer = aiokafka.AIOKafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap,
            group_id="aio-group",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            got: set[bytes] = set()
            async with asyncio.timeout(WAIT):
                while len(got) < count:
                    batches = await consumer.getmany(timeout_ms=500)
                    for msgs in batches.values():
                        got.update(m.value for m in msgs)
            await consumer.commit()
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(consume(_produce_n)) == {b"%02d" % i for i in range(_produce_n)}
    for i in range(_produce_n, _produce_n + 4):
        p.produce(topic, value=b"%02d" % i, partition=i % 2)
    assert p.flush(30) == 0
    # Only the records after the commit.
    assert asyncio.run(consume(4)) == {b"%02d" % i for i in range(_produce_n, _produce_n + 4)}


def _commit(cluster: Cluster, broker_id: int, group: str, topic: str, offset: int) -> int:
    """A simple consumer's OffsetCommit (generation -1) of partition 0; its error code."""
    from kwire.messages.offset_commit import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )

    part = OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
    req = OffsetCommitRequest(
        group_id=group, topics=(OffsetCommitRequestTopic(name=topic, partitions=(part,)),)
    )
    with _client(cluster, broker_id) as c:
        return int(c._call(ApiKey.OFFSET_COMMIT, 7, req).topics[0].partitions[0].error_code)


def _fetch(cluster: Cluster, broker_id: int, group: str, topic: str) -> tuple[int, int]:
    """OffsetFetch of partition 0: (error code, committed offset)."""
    from kwire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic

    req = OffsetFetchRequest(
        group_id=group, topics=(OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),)
    )
    with _client(cluster, broker_id) as c:
        r = c._call(ApiKey.OFFSET_FETCH, 7, req)
    if r.error_code:
        return int(r.error_code), -1
    p = r.topics[0].partitions[0]
    return int(p.error_code), int(p.committed_offset)


def test_cut_off_coordinator_acknowledges_nothing(cluster: Cluster) -> None:
    """A coordinator cut off from the other brokers shrinks the offsets partition's ISR to
    itself and acknowledges no commit (min.insync.replicas 2: COORDINATOR_NOT_AVAILABLE)
    while still serving what was committed; cut off from etcd too, it loses the lead, stops
    answering for the group (NOT_COORDINATOR, no stale reads) and a new coordinator serves
    the committed offset."""
    group, topic = "cut-off-group", "cut-off-topic"
    cluster.create_topic(topic, 1, rf=3, min_isr=2)
    wait_until(lambda: _find(cluster, 1, [group])[group][0] == E.NONE, "a coordinator")
    cluster.wait_fully_replicated(OFFSETS)
    p = partition_for(group, cluster.view().topics[OFFSETS].value.partition_count)
    coordinator = cluster.leader(OFFSETS, p)
    wait_until(lambda: _commit(cluster, coordinator, group, topic, 5) == E.NONE, "a first commit")
    assert _fetch(cluster, coordinator, group, topic) == (E.NONE, 5)
    node = cluster.nodes[coordinator]
    try:
        node.isolate()
        # Appended, never replicated: not acknowledged (the ISR shrinks below
        # min.insync.replicas meanwhile, or offsets.commit.timeout.ms runs out). As in Kafka
        # the record stays in the log and counts if it is ever replicated.
        assert _commit(cluster, coordinator, group, topic, 6) in (
            E.COORDINATOR_NOT_AVAILABLE,
            E.REQUEST_TIMED_OUT,
        )
        wait_until(
            lambda: cluster.state(OFFSETS, p).isr == (coordinator,), "the ISR to shrink to the coordinator"
        )
        # Refused before the append now.
        assert _commit(cluster, coordinator, group, topic, 6) == E.COORDINATOR_NOT_AVAILABLE
        assert _fetch(cluster, coordinator, group, topic) == (E.NONE, 5)
        node.reconnect()
        cluster.wait_fully_replicated(OFFSETS)
        wait_until(lambda: _commit(cluster, coordinator, group, topic, 7) == E.NONE, "commits again")

        s = cluster.state(OFFSETS, p)
        node.isolate(from_etcd=True)
        new = cluster.wait_new_leader(OFFSETS, p, coordinator, s.leader_epoch)
        # Once its lease is in doubt the old coordinator answers for the group no more.
        wait_until(
            lambda: _fetch(cluster, coordinator, group, topic)[0] == E.NOT_COORDINATOR,
            "the old one to step down",
        )
        assert _commit(cluster, coordinator, group, topic, 8) == E.NOT_COORDINATOR
        # and sends FindCoordinator elsewhere rather than naming itself from a stale view.
        assert _find(cluster, coordinator, [group])[group][0] == E.COORDINATOR_NOT_AVAILABLE
        assert all(
            _find(cluster, b, [group])[group] == (E.NONE, new) for b in cluster.nodes if b != coordinator
        )
        wait_until(
            lambda: _fetch(cluster, new, group, topic) == (E.NONE, 7),
            "the new coordinator to serve the offset",
        )
    finally:
        node.reconnect()
    cluster.wait_fully_replicated(OFFSETS)


def test_kip848_group_coordinator_failover_keeps_the_group(cluster: Cluster) -> None:
    """A ``group.protocol=consumer`` group through a kill -9 of its coordinator: the group's
    records in ``__consumer_offsets`` (epochs, members, assignments) are replicated like
    its offsets, so the new coordinator goes on with them: the group epoch and every
    member epoch stay, no partition is revoked, every record is read exactly once."""
    group, topic = "kip848-billing", "orders-kip848"
    cluster.create_topic(topic, PARTITIONS, rf=3, min_isr=2)
    _produce(cluster, topic, RECORDS)
    end = _end_offsets(cluster, topic)
    wait_until(
        lambda: all(
            _find(cluster, b, [group])[group][0] == E.NONE for b in cluster.nodes if cluster.nodes[b].running
        ),
        "FindCoordinator answered by every broker",
    )
    cluster.wait_fully_replicated(OFFSETS)
    run = GroupRun(cluster.bootstrap, group, topic, protocol="consumer").start(consumers=3)
    try:
        wait_until(lambda: run.processed_count() >= RECORDS // 4, "the group to process a quarter")
        victim = _coordinator(cluster, group)

        def described() -> Any:
            with _client(cluster, _coordinator(cluster, group)) as c:
                r = c._call(
                    ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=(group,))
                )
            return r.groups[0]

        wait_until(
            lambda: (d := described()).group_state == "Stable" and len(d.members) == 3, "a stable group of 3"
        )
        before = described()
        p_off = partition_for(group, 8)
        epoch = cluster.state(OFFSETS, p_off).leader_epoch
        killed_at = time.monotonic()
        cluster.nodes[victim].kill()
        cluster.wait_new_leader(OFFSETS, p_off, victim, epoch)
        wait_until(lambda: run.processed_count() >= RECORDS, "every record processed", timeout=WAIT * 2)

        def committed_to_end() -> bool:
            with run.lock:
                return all(run.acked.get(p, 0) >= end[p] for p in range(PARTITIONS))

        wait_until(committed_to_end, "commits acknowledged up to the end of every partition")
        after = described()
        done_at = time.monotonic()
    finally:
        run.close()
    cluster.nodes[victim].start()
    assert after.group_epoch == before.group_epoch
    epochs = {(m.member_id, m.member_epoch) for m in before.members}
    assert {(m.member_id, m.member_epoch) for m in after.members} == epochs

    def assignments(group: Any) -> set[tuple[str, str, tuple[int, ...]]]:
        return {
            (m.member_id, tp.topic_name, tuple(tp.partitions))
            for m in group.members
            for tp in m.assignment.topic_partitions
        }

    assert assignments(after) == assignments(before)
    with run.lock:
        processed, resumed, acked = list(run.processed), list(run.resumed), dict(run.acked)
        revoked = [r for r in run.revoked if killed_at <= r[0] < done_at and r[2]]
    assert not revoked, f"partitions revoked after the kill: {revoked}"
    assert len(processed) == len({(p, o) for p, o, _ in processed}), "records read more than once"
    log.info("kip848: processed %d, commit errors %s", len(processed), sorted(set(run.commit_errors))[:5])
    for p in range(PARTITIONS):
        assert {o for q, o, _ in processed if q == p} == set(range(end[p])), f"partition {p}: records skipped"
    assert resumed
    for p, first, acked_then in resumed:
        assert first >= acked_then, (
            f"partition {p}: resumed at {first} below the acknowledged commit {acked_then}"
        )
    seen: set[tuple[int, int]] = set()
    for p, o, acked_then in processed:
        if (p, o) in seen:
            assert o >= acked_then, f"partition {p}: offset {o} processed again after a commit past it"
        seen.add((p, o))
    assert acked == end
