"""A 3-broker cluster on a real etcd (`strata serve --etcd`): placement and metadata through
Kafka's AdminClient, replication to byte-identical followers, the acks settings and
NOT_ENOUGH_REPLICAS, ISR shrink and expansion, leader-only serving with
NOT_LEADER_OR_FOLLOWER / UNKNOWN_LEADER_EPOCH, OffsetForLeaderEpoch, and
`strata cluster status`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hot.records import RecordInput, build_batch
from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kwire.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from tests.broker.clusterlib import CLUSTER_NAME, Cluster, wait_until
from tests.broker.etcdlib import EtcdProcess
from tests.brokers import ROOT

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-basic")
    etcd = EtcdProcess(root / "etcd").start()
    c = Cluster(
        root, etcd, env={"STRATA_AUTO_CREATE_TOPICS": "true", "STRATA_DEFAULT_REPLICATION_FACTOR": "3"}
    )
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def _client(cluster: Cluster, broker_id: int) -> KafkaClient:
    return KafkaClient.connect(HostPort("127.0.0.1", cluster.nodes[broker_id].kafka_port), timeout=30)


def _produce(client: KafkaClient, topic: str, acks: int, value: bytes = b"raw") -> int:
    req = ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=(
            ProduceTopicData(
                name=topic,
                partition_data=(
                    ProducePartitionData(index=0, records=build_batch([RecordInput(None, value)])),
                ),
            ),
        ),
    )
    resp = client.call(ApiKey.PRODUCE, req)
    return int(resp.responses[0].partition_responses[0].error_code)


def _fetch_error(client: KafkaClient, topic: str, epoch: int) -> int:
    req = FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=0, current_leader_epoch=epoch, fetch_offset=0, partition_max_bytes=1 << 20
                    ),
                ),
            ),
        ),
    )
    part = client.call(ApiKey.FETCH, req).responses[0].partitions[0]
    assert part.records is not None  # empty on errors, never null: librdkafka cannot parse null
    return int(part.error_code)


def _produce_values(cluster: Cluster, topic: str, values: list[bytes], acks: str = "all") -> list[int]:
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, "linger.ms": 5})
    offsets: list[int] = []

    def done(err: object, msg: object) -> None:
        assert err is None, err
        offsets.append(msg.offset())  # type: ignore[attr-defined]

    for v in values:
        producer.produce(topic, value=v, partition=0, on_delivery=done)
    assert producer.flush(60) == 0
    return offsets


def _consume(cluster: Cluster, topic: str, n: int) -> list[bytes]:
    consumer = ck.Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "basic", "enable.auto.commit": False}
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        got: list[bytes] = []
        wait_until(lambda: _poll_into(consumer, got) >= n, f"{n} records of {topic}", step=0)
        return got
    finally:
        consumer.close()


def _poll_into(consumer: object, got: list[bytes]) -> int:
    for msg in consumer.consume(500, 0.2):  # type: ignore[attr-defined]
        if msg.error() is None:
            got.append(msg.value())
    return len(got)


def test_placement_and_metadata_from_etcd(cluster: Cluster) -> None:
    cluster.create_topic("placed", 3, rf=3, min_isr=2)
    cluster.create_topic("single", 3, rf=1, min_isr=1)
    admin = ck.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    md = admin.list_topics(timeout=30)
    assert sorted(md.brokers) == [1, 2, 3]
    assert md.controller_id == cluster.controller()
    placed = md.topics["placed"].partitions
    # Round-robin: each broker leads one partition, every partition has all three replicas.
    assert sorted(p.leader for p in placed.values()) == [1, 2, 3]
    for p in placed.values():
        assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3]
        assert p.leader == p.replicas[0]
    single = md.topics["single"].partitions
    assert sorted(p.leader for p in single.values()) == [1, 2, 3]
    assert all(len(p.replicas) == 1 for p in single.values())
    # The leader epochs come from etcd as well.
    with _client(cluster, 1) as c:
        from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic

        resp = c.call(ApiKey.METADATA, MetadataRequest(topics=(MetadataRequestTopic(name="placed"),)))
        for p in resp.topics[0].partitions:
            s = cluster.state("placed", p.partition_index)
            assert (p.leader_id, p.leader_epoch, tuple(p.isr_nodes)) == (s.leader, s.leader_epoch, s.isr)
    # Too few brokers for the replication factor.
    futures = admin.create_topics([ck.admin.NewTopic("too-wide", num_partitions=1, replication_factor=4)])
    with pytest.raises(ck.KafkaException) as info:
        futures["too-wide"].result(timeout=30)
    assert info.value.args[0].code() == ck.KafkaError.INVALID_REPLICATION_FACTOR


def test_replication_leader_only_serving_and_epochs(cluster: Cluster) -> None:
    cluster.create_topic("repl", 1, rf=3, min_isr=2)
    values = [b"r%04d" % i for i in range(200)]
    offsets = _produce_values(cluster, "repl", values)
    assert sorted(offsets) == list(range(200))
    assert _consume(cluster, "repl", 200) == values
    cluster.wait_replicas_identical("repl", 1, {0: 200})

    s = cluster.state("repl", 0)
    follower = next(b for b in (1, 2, 3) if b != s.leader)
    with _client(cluster, follower) as c:
        assert _produce(c, "repl", -1) == E.NOT_LEADER_OR_FOLLOWER
        assert _fetch_error(c, "repl", -1) == E.NOT_LEADER_OR_FOLLOWER
    with _client(cluster, s.leader) as c:
        assert _fetch_error(c, "repl", s.leader_epoch) == E.NONE
        assert _fetch_error(c, "repl", s.leader_epoch + 1) == E.UNKNOWN_LEADER_EPOCH
        req = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=(
                OffsetForLeaderTopic(
                    topic="repl",
                    partitions=(
                        OffsetForLeaderPartition(
                            partition=0, current_leader_epoch=s.leader_epoch, leader_epoch=s.leader_epoch
                        ),
                    ),
                ),
            ),
        )
        answer = c.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, req).topics[0].partitions[0]
        assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (0, s.leader_epoch, 200)


def test_acks_min_insync_and_isr_shrink_expand(cluster: Cluster) -> None:
    cluster.create_topic("acks", 1, rf=3, min_isr=3)
    s = cluster.state("acks", 0)
    with _client(cluster, s.leader) as c:
        assert _produce(c, "acks", -1, b"first") == E.NONE
    follower = next(b for b in (1, 2, 3) if b != s.leader)
    node = cluster.nodes[follower]
    node.kill()
    # Its lease expires, the controller drops it from the ISR: 2 < min.insync.replicas.
    wait_until(lambda: follower not in cluster.state("acks", 0).isr, "the dead follower to leave the ISR")
    with _client(cluster, s.leader) as c:
        # Until the leader learns of the smaller ISR, an acks=all append waits and then
        # fails with NOT_ENOUGH_REPLICAS_AFTER_APPEND (the record stays, unacknowledged).
        codes: list[int] = []
        wait_until(
            lambda: codes.append(_produce(c, "acks", -1, b"refused")) or codes[-1] == E.NOT_ENOUGH_REPLICAS,
            "NOT_ENOUGH_REPLICAS for acks=all",
        )
        assert set(codes[:-1]) <= {E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT}
        assert _produce(c, "acks", 1, b"acks-1") == E.NONE
    # acks=0: no answer, but the record is written.
    _produce_values(cluster, "acks", [b"acks-0"], acks="0")
    node.start()
    wait_until(lambda: set(cluster.state("acks", 0).isr) == {1, 2, 3}, "the follower to rejoin the ISR")
    with _client(cluster, s.leader) as c:
        assert _produce(c, "acks", -1, b"last") == E.NONE
    got = _consume(cluster, "acks", 4 + len(codes) - 1)
    assert got == [b"first", *[b"refused"] * (len(codes) - 1), b"acks-1", b"acks-0", b"last"]
    cluster.wait_fully_replicated("acks")
    cluster.wait_replicas_identical("acks", 1, {0: len(got)})


def test_auto_created_topic_is_replicated(cluster: Cluster) -> None:
    # auto.create.topics.enable: the first Metadata request creates the topic in etcd with
    # default.replication.factor, answering LEADER_NOT_AVAILABLE until leaders are elected.
    offsets = _produce_values(cluster, "auto-created", [b"a", b"b"])
    assert sorted(offsets) == [0, 1]
    a = cluster.view().topics["auto-created"].value
    assert a.replication_factor == 3 and a.partition_count == 1
    cluster.wait_fully_replicated("auto-created")
    cluster.wait_replicas_identical("auto-created", 1, {0: 2})


def test_cluster_status_command(cluster: Cluster) -> None:
    cluster.create_topic("status", 2, rf=3, min_isr=2)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "api.cli",
            "cluster",
            "status",
            "--etcd",
            cluster.etcd.endpoint,
            "--cluster-name",
            CLUSTER_NAME,
            "--output",
            "json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert [b["id"] for b in report["brokers"]] == [1, 2, 3]
    rows = [r for r in report["partitions"] if r["topic"] == "status"]
    assert len(rows) == 2 and all(len(r["isr"]) == 3 and not r["under_replicated"] for r in rows)
    human = subprocess.run(
        [
            sys.executable,
            "-m",
            "api.cli",
            "cluster",
            "status",
            "--etcd",
            cluster.etcd.endpoint,
            "--cluster-name",
            CLUSTER_NAME,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert human.returncode == 0 and "status-1" in human.stdout and "under-replicated: " in human.stdout


def test_data_dir_layout_has_hw_checkpoint(cluster: Cluster) -> None:
    path: Path = cluster.nodes[1].data_dir / "meta" / "replication-offset-checkpoint"
    wait_until(path.exists, "the high-watermark checkpoint")
    assert path.read_text().startswith("0\n")


@pytest.mark.parametrize("mode", ["interval", "fsync"])
def test_parked_consumer_fetch_is_woken_when_the_high_watermark_moves(cluster: Cluster, mode: str) -> None:
    """In a cluster the high watermark moves when the followers have fetched a record:
    that, not ``fetch.wait.max.ms`` (500), answers a consumer parked at the log end."""
    from tests.e2e.test_fetch_wakeup import median_delivery_seconds

    topic = f"wake-{mode}"
    cluster.create_topic(topic, 1, rf=3, min_isr=2, configs={"strata.flush.mode": mode})
    median = median_delivery_seconds(cluster.bootstrap, topic, records=20)
    assert median < 0.1, f"median delivery {median * 1000:.0f} ms: parked fetches are not woken ({mode})"


def test_strata_topic_create_leaves_the_replication_factor_to_the_cluster(cluster: Cluster) -> None:
    # Without -r the CLI sends -1, so default.replication.factor (3 here) applies.
    def create(name: str, *extra: str) -> None:
        bootstrap = cluster.bootstrap.split(",")[0]
        r = subprocess.run(
            [sys.executable, "-m", "api.cli", "topic", "create", name, "-b", bootstrap, *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr

    create("cli-default-rf")
    create("cli-rf-2", "-r", "2")
    topics = cluster.view().topics
    assert topics["cli-default-rf"].value.replication_factor == 3
    assert topics["cli-rf-2"].value.replication_factor == 2
