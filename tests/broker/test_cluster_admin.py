"""Topic administration in a 3-broker cluster (real etcd, real brokers, real clients):
CreatePartitions, AlterConfigs / IncrementalAlterConfigs and DescribeConfigs through
confluent-kafka's AdminClient, REST v3 topic creation and deletion, no local logs for
partitions a broker does not host, and followers of a tiered topic (moto S3) deleting
the local segments the leader uploaded, with every record readable after a failover."""

from __future__ import annotations

import asyncio
import re
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kwire.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from tests.broker.clusterlib import Cluster, wait_until
from tests.broker.etcdlib import EtcdProcess
from tests.brokers import S3Endpoint
from tiering.keys import manifest_key
from tiering.manifest import PartitionManifest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

BUCKET_PREFIX = "strata"


@pytest.fixture(scope="module")
def bucket(s3_endpoint: S3Endpoint) -> str:
    return s3_endpoint.create_bucket(f"strata-admin-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, s3_endpoint: S3Endpoint, bucket: str
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-admin")
    etcd = EtcdProcess(root / "etcd").start()
    env = {
        **s3_endpoint.env,
        "STRATA_OBJECT_STORE": f"s3://{bucket}/{BUCKET_PREFIX}",
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "200",
        "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "500",
        "STRATA_DEFAULT_REPLICATION_FACTOR": "3",
    }
    c = Cluster(root, etcd, env=env)
    try:
        c.start()
        yield c
    finally:
        c.close()
        etcd.kill()


def _admin(cluster: Cluster, broker: int | None = None) -> AdminClient:
    servers = cluster.bootstrap if broker is None else cluster.nodes[broker].bootstrap
    return AdminClient({"bootstrap.servers": servers})


def _error_code(future: Any) -> int:
    exc = future.exception(timeout=30)
    assert exc is not None, "expected an error"
    return int(exc.args[0].code())


def _partition_dirs(cluster: Cluster, broker: int, topic: str) -> set[int]:
    logs = cluster.nodes[broker].data_dir / "logs"
    # Only live partition directories, not those being deleted (<topic>-<p>.<id>-delete).
    found = (re.fullmatch(rf"{re.escape(topic)}-(\d+)", p.name) for p in logs.iterdir() if p.is_dir())
    return {int(m.group(1)) for m in found if m is not None}


def _hosted(cluster: Cluster, broker: int, topic: str) -> set[int]:
    return {p for p, r in enumerate(cluster.view().topics[topic].value.partitions) if broker in r}


def _configs(cluster: Cluster, broker: int, topic: str) -> dict[str, Any]:
    res = ConfigResource("topic", topic)
    admin = _admin(cluster, broker)  # kept alive until the answer is in
    return dict(admin.describe_configs([res])[res].result(timeout=30))


def _alter(cluster: Cluster, topic: str, ops: list[tuple[str, str | None]], broker: int | None = None) -> int:
    """IncrementalAlterConfigs; the error code (0: done)."""
    entries = [
        ConfigEntry(
            k,
            v,
            incremental_operation=AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE,
        )
        for k, v in ops
    ]
    res = ConfigResource("topic", topic, incremental_configs=entries)
    admin = _admin(cluster, broker)
    exc = admin.incremental_alter_configs([res])[res].exception(timeout=30)
    return 0 if exc is None else int(exc.args[0].code())


def _produce(cluster: Cluster, topic: str, partition: int, n: int, size: int = 20) -> None:
    # Small batches: a segment rolls only between batches.
    p = ck.Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 2048}
    )
    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(n):
        p.produce(topic, value=b"%06d" % i + b"x" * size, partition=partition, on_delivery=delivered)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]


def _consume(cluster: Cluster, topic: str, partition: int, n: int) -> list[bytes]:
    c = ck.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([ck.TopicPartition(topic, partition, 0)])
    out: list[bytes] = []
    try:

        def done() -> bool:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
            return len(out) >= n

        wait_until(done, f"{n} records of {topic}-{partition}", step=0)
    finally:
        c.close()
    return out


def test_create_partitions_places_new_replicas_and_no_broker_creates_foreign_logs(cluster: Cluster) -> None:
    cluster.create_topic("grow", 2, rf=2, min_isr=1)
    admin = _admin(cluster)
    admin.create_partitions([NewPartitions("grow", 5)])["grow"].result(timeout=30)
    wait_until(lambda: cluster.fully_replicated("grow"), "grown topic fully replicated")
    a = cluster.view().topics["grow"].value
    assert a.partition_count == 5 and all(len(r) == 2 for r in a.partitions)
    # Round-robin: every broker leads at least one partition.
    assert {r[0] for r in a.partitions} == {1, 2, 3}
    for b in (1, 2, 3):
        wait_until(
            lambda b=b: _partition_dirs(cluster, b, "grow") == _hosted(cluster, b, "grow"), "local replicas"
        )

    # The new partitions take records.
    _produce(cluster, "grow", 4, 10)
    assert len(_consume(cluster, "grow", 4, 10)) == 10

    # Kafka's errors: not growing, unknown topic; validate_only changes nothing.
    assert _error_code(admin.create_partitions([NewPartitions("grow", 3)])["grow"]) == E.INVALID_PARTITIONS
    assert _error_code(admin.create_partitions([NewPartitions("grow", 5)])["grow"]) == E.INVALID_PARTITIONS
    assert (
        _error_code(admin.create_partitions([NewPartitions("nope", 4)])["nope"])
        == E.UNKNOWN_TOPIC_OR_PARTITION
    )
    admin.create_partitions([NewPartitions("grow", 9)], validate_only=True)["grow"].result(timeout=30)
    assert cluster.view().topics["grow"].value.partition_count == 5

    # Explicit assignment of the new partitions.
    admin.create_partitions([NewPartitions("grow", 6, replica_assignment=[[3, 1]])])["grow"].result(
        timeout=30
    )
    assert cluster.view().topics["grow"].value.partitions[5] == (3, 1)
    bad = admin.create_partitions([NewPartitions("grow", 7, replica_assignment=[[3, 9]])])["grow"]
    assert _error_code(bad) == E.INVALID_REPLICATION_FACTOR


def test_a_topic_too_large_to_build_inline_is_created_and_grown_in_sync(cluster: Cluster) -> None:
    # Above broker.local_topics.INLINE_BUILD_PARTITIONS each broker builds its replicas in a
    # thread (creation, then growth): the answer still comes once every replica is in sync.
    admin = _admin(cluster)
    admin.create_topics([NewTopic("wide", 100, 3)], operation_timeout=60)["wide"].result(timeout=90)
    wait_until(lambda: cluster.fully_replicated("wide"), "100 partitions fully replicated")
    admin.create_partitions([NewPartitions("wide", 200)], operation_timeout=60)["wide"].result(timeout=90)
    wait_until(lambda: cluster.fully_replicated("wide"), "200 partitions fully replicated")
    for b in (1, 2, 3):  # built in a thread: the answer does not wait for the directories
        wait_until(lambda b=b: _partition_dirs(cluster, b, "wide") == set(range(200)), "local replicas")
    for partition in (0, 99, 100, 199):  # both halves, acks=all through every replica
        _produce(cluster, "wide", partition, 3)
        assert len(_consume(cluster, "wide", partition, 3)) == 3
    admin.delete_topics(["wide"], operation_timeout=60)["wide"].result(timeout=90)


def test_a_create_retry_of_a_half_created_topic_is_answered_once_the_topic_is_whole(cluster: Cluster) -> None:
    # A creator that died between the topic key and the partition states (a large topic is
    # written in steps) leaves a topic without states; the controller fills them in, and a
    # CreateTopics retry answers TOPIC_ALREADY_EXISTS only once every one is there.
    from broker.etcd import EtcdClient
    from broker.keys import KeyLayout
    from broker.metadata import TopicAssignment
    from broker.metadata_store import Put
    from tests.broker.clusterlib import CLUSTER_NAME

    n = 40
    rotations = [(1, 2, 3), (2, 3, 1), (3, 1, 2)]
    assignment = TopicAssignment(str(uuid.uuid4()), 3, tuple(rotations[p % 3] for p in range(n)), {})

    async def claim_only() -> None:
        async with EtcdClient(cluster.etcd.endpoint) as etcd:
            await etcd.txn([], [Put(KeyLayout(CLUSTER_NAME).topic("half"), assignment.to_json())])

    asyncio.run(claim_only())
    admin = _admin(cluster)
    assert _error_code(admin.create_topics([NewTopic("half", n, 3)])["half"]) == E.TOPIC_ALREADY_EXISTS
    view = cluster.view()
    assert all(view.partition_state("half", p) is not None for p in range(n))
    wait_until(lambda: cluster.fully_replicated("half"), "the completed topic in sync")
    _produce(cluster, "half", n - 1, 3)
    assert len(_consume(cluster, "half", n - 1, 3)) == 3
    admin.delete_topics(["half"], operation_timeout=60)["half"].result(timeout=90)


def test_create_topics_with_replica_assignment(cluster: Cluster) -> None:
    """CreateTopics' explicit assignments go through the one creation path (broker.admin):
    placed as given, and Kafka's errors for a bad one."""
    admin = _admin(cluster)
    admin.create_topics([NewTopic("placed", 2, replica_assignment=[[2, 3], [3, 1]])])["placed"].result(
        timeout=30
    )
    assert cluster.view().topics["placed"].value.partitions == ((2, 3), (3, 1))
    cases = {
        "dup": ([[2, 2]], E.INVALID_REPLICA_ASSIGNMENT),
        "ragged": ([[1, 2], [3]], E.INVALID_REPLICA_ASSIGNMENT),
        "ghost": ([[1, 9]], E.INVALID_REPLICATION_FACTOR),
    }
    for name, (assignment, code) in cases.items():
        assert (
            _error_code(
                admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment)])[name]
            )
            == code
        )
        assert name not in cluster.view().topics


def test_requests_for_partitions_a_broker_does_not_host(cluster: Cluster) -> None:
    a = cluster.view().topics["grow"].value
    p, outsider = next((p, b) for p, r in enumerate(a.partitions) for b in (1, 2, 3) if b not in r)
    # The partitions added just before are created from each broker's watch: settle first.
    wait_until(
        lambda: _partition_dirs(cluster, outsider, "grow") == _hosted(cluster, outsider, "grow"),
        "the outsider's replicas",
    )
    before = _partition_dirs(cluster, outsider, "grow")
    port = cluster.nodes[outsider].kafka_port
    with KafkaClient.connect(HostPort("127.0.0.1", port), timeout=30) as c:
        fetch = FetchRequest(
            max_wait_ms=0,
            min_bytes=1,
            topics=(
                FetchTopic(
                    topic="grow",
                    partitions=(FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1024),),
                ),
            ),
        )
        assert c.call(ApiKey.FETCH, fetch).responses[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
        lo = ListOffsetsRequest(
            replica_id=-1,
            topics=(
                ListOffsetsTopic(
                    name="grow", partitions=(ListOffsetsPartition(partition_index=p, timestamp=-1),)
                ),
            ),
        )
        assert c.call(ApiKey.LIST_OFFSETS, lo).topics[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
        past = ListOffsetsRequest(
            replica_id=-1,
            topics=(
                ListOffsetsTopic(
                    name="grow", partitions=(ListOffsetsPartition(partition_index=99, timestamp=-1),)
                ),
            ),
        )
        code = c.call(ApiKey.LIST_OFFSETS, past).topics[0].partitions[0].error_code
        assert code == E.UNKNOWN_TOPIC_OR_PARTITION
    r = httpx.post(
        f"{cluster.nodes[outsider].http_url}/topics/grow/partitions/{p}",
        json={"records": [{"value": "x"}]},
        headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert r.json()["offsets"][0]["error_code"] is not None, r.text
    assert _partition_dirs(cluster, outsider, "grow") == before
    assert p not in before


def test_configs_are_altered_through_etcd_and_applied_by_every_broker(cluster: Cluster) -> None:
    cluster.create_topic("conf", 1, rf=3, min_isr=1)
    assert (
        _alter(cluster, "conf", [("retention.ms", "123456"), ("unclean.leader.election.enable", "true")]) == 0
    )
    # Every broker describes the cluster-wide values.
    for b in (1, 2, 3):
        cfg = _configs(cluster, b, "conf")
        assert cfg["retention.ms"].value == "123456" and not cfg["retention.ms"].is_default
        assert cfg["unclean.leader.election.enable"].value == "true"
        assert cfg["min.insync.replicas"].value == "1"
    assert cluster.view().topics["conf"].value.configs["retention.ms"] == "123456"

    # The leader applies min.insync.replicas from the watch: above the ISR, acks=all fails.
    assert _alter(cluster, "conf", [("min.insync.replicas", "4")], broker=2) == 0
    p = ck.Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "retries": 0, "message.timeout.ms": 10000}
    )
    errors: list[Any] = []
    p.produce("conf", b"v", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == ck.KafkaError.NOT_ENOUGH_REPLICAS
    assert _alter(cluster, "conf", [("min.insync.replicas", None)], broker=3) == 0
    _produce(cluster, "conf", 0, 5)

    # Validated as on a single node; nothing is written on an error.
    assert _alter(cluster, "conf", [("retention.ms", "soon")]) == E.INVALID_CONFIG
    assert _alter(cluster, "conf", [("no.such.config", "1")]) == E.INVALID_CONFIG
    assert _alter(cluster, "conf", [("unclean.leader.election.enable", "maybe")]) == E.INVALID_CONFIG
    assert _alter(cluster, "nope", [("retention.ms", "1")]) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.view().topics["conf"].value.configs == {
        "retention.ms": "123456",
        "unclean.leader.election.enable": "true",
    }

    # AlterConfigs replaces the whole set of overrides.
    res = ConfigResource("topic", "conf", set_config={"segment.bytes": "1048576"})
    admin = _admin(cluster)
    admin.alter_configs([res])[res].result(timeout=30)
    assert cluster.view().topics["conf"].value.configs == {"segment.bytes": "1048576"}
    wait_until(
        lambda: _configs(cluster, 1, "conf")["retention.ms"].is_default, "retention.ms back to default"
    )


def test_rest_v3_creates_and_deletes_topics_in_the_cluster(cluster: Cluster) -> None:
    url2 = f"{cluster.nodes[2].http_url}/v3/clusters"
    cid = httpx.get(url2, timeout=30).json()["data"][0]["cluster_id"]
    body = {
        "topic_name": "viarest",
        "partitions_count": 3,
        "replication_factor": 2,
        "configs": [{"name": "retention.ms", "value": "600000"}],
    }
    r = httpx.post(f"{url2}/{cid}/topics", json=body, timeout=30)
    assert r.status_code == 201, r.text
    assert r.json()["partitions_count"] == 3 and r.json()["replication_factor"] == 2
    a = cluster.view().topics["viarest"].value
    assert a.replication_factor == 2 and a.partition_count == 3 and a.configs == {"retention.ms": "600000"}
    wait_until(lambda: cluster.fully_replicated("viarest"), "REST topic replicated")
    for b in (1, 2, 3):
        wait_until(
            lambda b=b: _partition_dirs(cluster, b, "viarest") == _hosted(cluster, b, "viarest"), "replicas"
        )

    again = httpx.post(f"{url2}/{cid}/topics", json=body, timeout=30)
    assert again.status_code == 400 and again.json()["error_code"] == 40002  # Confluent: a duplicate topic
    too_many = httpx.post(
        f"{url2}/{cid}/topics",
        json={"topic_name": "wide", "partitions_count": 1, "replication_factor": 4},
        timeout=30,
    )
    assert too_many.status_code == 400, too_many.text
    assert "wide" not in cluster.view().topics
    # Kafka's '.' versus '_' collision check, through REST and CreateTopics (validate only too).
    dotted = {"topic_name": "rest.clash", "partitions_count": 1, "replication_factor": 1}
    assert httpx.post(f"{url2}/{cid}/topics", json=dotted, timeout=30).status_code == 201
    clash = httpx.post(f"{url2}/{cid}/topics", json={**dotted, "topic_name": "rest_clash"}, timeout=30)
    assert clash.status_code == 400 and "collides" in clash.text, clash.text
    admin3 = _admin(cluster, 3)  # referenced until its futures resolve
    for validate_only in (True, False):
        fut = admin3.create_topics([NewTopic("rest_clash", 1, 1)], validate_only=validate_only)
        assert _error_code(fut["rest_clash"]) == E.INVALID_TOPIC_EXCEPTION
    assert "rest_clash" not in cluster.view().topics

    url3 = f"{cluster.nodes[3].http_url}/v3/clusters/{cid}/topics/viarest"
    assert httpx.delete(url3, timeout=30).status_code == 204
    assert "viarest" not in cluster.view().topics
    for b in (1, 2, 3):
        wait_until(lambda b=b: not _partition_dirs(cluster, b, "viarest"), "local replicas deleted")
    assert httpx.delete(url3, timeout=30).status_code == 404

    # DeleteTopics through the AdminClient, against any broker.
    admin = _admin(cluster, 1)
    admin.delete_topics(["grow"])["grow"].result(timeout=30)
    assert "grow" not in cluster.view().topics
    for b in (1, 2, 3):
        wait_until(lambda b=b: not _partition_dirs(cluster, b, "grow"), "local replicas deleted")


def test_followers_roll_where_the_leader_rolled_by_time(cluster: Cluster) -> None:
    """segment.ms rolls happen on the leader's clock; a follower that was stopped while
    they happened catches up in large fetches and still cuts its segments there."""
    topic = "timed"
    admin = _admin(cluster)
    new = NewTopic(
        topic,
        num_partitions=1,
        replication_factor=3,
        config={"min.insync.replicas": "1", "segment.ms": "1000"},
    )
    admin.create_topics([new])[topic].result(timeout=30)
    cluster.wait_fully_replicated(topic)
    s = cluster.state(topic, 0)
    stopped = next(b for b in (1, 2, 3) if b != s.leader)
    cluster.nodes[stopped].pause()
    try:
        for _ in range(4):
            _produce(cluster, topic, 0, 20)
            time.sleep(1.2)  # longer than segment.ms: the leader's next append rolls
    finally:
        cluster.nodes[stopped].resume()
    # Paused past the session timeout, it lost its registration: later tests need it back.
    cluster.wait_registered()
    leader_bases = _local_bases(cluster, s.leader, topic)
    assert len(leader_bases) >= 4
    size = _local_bytes(cluster, s.leader, topic)
    for b in (1, 2, 3):
        wait_until(lambda b=b: _local_bytes(cluster, b, topic) == size, f"broker {b} caught up")
        assert _local_bases(cluster, b, topic) == leader_bases


# --- tiered topic: followers delete what the leader uploaded --------------------------------------


def _manifest(cluster: Cluster, s3: S3Endpoint, bucket: str, topic: str) -> PartitionManifest | None:
    topic_id = uuid.UUID(cluster.view().topics[topic].value.topic_id)
    key = f"{BUCKET_PREFIX}/{manifest_key(topic, topic_id, 0)}"
    try:
        obj = s3.client().get_object(Bucket=bucket, Key=key)  # type: ignore[attr-defined]
    except Exception:
        return None
    return PartitionManifest.from_json(obj["Body"].read())


def _local_bytes(cluster: Cluster, broker: int, topic: str) -> int:
    d: Path = cluster.nodes[broker].data_dir / "logs" / f"{topic}-0"
    return sum(p.stat().st_size for p in d.glob("*.log"))


def _local_bases(cluster: Cluster, broker: int, topic: str) -> list[int]:
    """The base offsets of the broker's local segments of partition 0."""
    d: Path = cluster.nodes[broker].data_dir / "logs" / f"{topic}-0"
    return sorted(int(p.stem) for p in d.glob("*.log"))


def test_followers_delete_uploaded_segments_and_a_failover_keeps_every_record(
    cluster: Cluster, s3_endpoint: S3Endpoint, bucket: str
) -> None:
    topic = "tiered"
    admin = _admin(cluster)
    new = NewTopic(
        topic,
        num_partitions=1,
        replication_factor=3,
        config={"min.insync.replicas": "1", "remote.storage.enable": "true", "segment.bytes": "16384"},
    )
    admin.create_topics([new])[topic].result(timeout=30)
    cluster.wait_fully_replicated(topic)
    n = 3000
    _produce(cluster, topic, 0, n, size=100)
    assert len(_local_bases(cluster, cluster.leader(topic), topic)) >= 10  # many sealed segments
    # Local retention switched on afterwards, through etcd: followers must apply it too.
    assert _alter(cluster, topic, [("local.retention.bytes", "32768")]) == 0
    s = cluster.state(topic, 0)
    followers = [b for b in (1, 2, 3) if b != s.leader]

    def followers_trimmed() -> bool:
        # local.retention.bytes keeps two segments, plus the active one.
        return all(len(_local_bases(cluster, b, topic)) <= 4 for b in followers)

    try:
        wait_until(followers_trimmed, "followers deleted their oldest local segments")
    except TimeoutError:
        m = _manifest(cluster, s3_endpoint, bucket, topic)
        for b in (1, 2, 3):
            print(b, _local_bases(cluster, b, topic)[:5], "".join(cluster.nodes[b].lines[-25:]))
        print("state", cluster.state(topic, 0), "manifest next", m.next_offset() if m else None)
        raise
    m = _manifest(cluster, s3_endpoint, bucket, topic)
    assert m is not None
    for b in followers:
        bases = _local_bases(cluster, b, topic)
        # Only uploaded data went: the first local segment starts at or below the
        # remote next offset, and local + remote cover the whole log.
        assert 0 < bases[0] <= m.next_offset(), (b, bases[:3], m.next_offset())
    wait_until(lambda: _local_bases(cluster, s.leader, topic)[0] > 0, "the leader's local retention")

    # Fail over to a follower: every record is still readable (remote, then local).
    cluster.nodes[s.leader].kill(signal.SIGKILL)
    new_leader = cluster.wait_new_leader(topic, 0, s.leader, s.leader_epoch)
    assert new_leader in followers
    values = _consume(cluster, topic, 0, n)
    assert [int(v[:6]) for v in values[:n]] == list(range(n))
    # The new leader tiers on where the old one stopped.
    _produce(cluster, topic, 0, 500, size=100)
    before = m.next_offset()
    wait_until(
        lambda: (
            (mm := _manifest(cluster, s3_endpoint, bucket, topic)) is not None and mm.next_offset() > before
        ),
        "the new leader uploads",
    )

    # Total retention is the leader's; the follower moves its log start offset with it.
    assert _alter(cluster, topic, [("retention.bytes", "100000")]) == 0
    follower = next(b for b in followers if b != new_leader)

    def log_start(broker: int) -> int:
        path = cluster.nodes[broker].data_dir / "logs" / f"{topic}-0" / "log-start-offset"
        return int(path.read_text()) if path.exists() else 0

    wait_until(lambda: log_start(new_leader) > 0, "the leader's total retention")
    wait_until(lambda: log_start(follower) == log_start(new_leader), "the follower's log start follows")
    mm = _manifest(cluster, s3_endpoint, bucket, topic)
    assert mm is not None and mm.log_start_offset >= log_start(follower) > 0


def test_create_partitions_beyond_the_live_brokers_is_refused(cluster: Cluster) -> None:
    # After the failover above only two brokers are live.
    wait_until(lambda: len(cluster.view().brokers) == 2, "two live brokers")
    admin = _admin(cluster)
    fut = admin.create_partitions([NewPartitions("conf", 2)])["conf"]
    assert _error_code(fut) == E.INVALID_REPLICATION_FACTOR
    assert cluster.view().topics["conf"].value.partition_count == 1


def _all_live(cluster: Cluster) -> None:
    """Bring back a broker an earlier test of the module left down (the failover above)."""
    for node in cluster.nodes.values():
        if not node.running:
            node.start()
    cluster.wait_registered()
    wait_until(lambda: len(cluster.view().brokers) == len(cluster.nodes), "every broker live")


def test_delete_records_waits_for_every_replica_to_move_its_log_start(cluster: Cluster) -> None:
    """DeleteRecords on an RF-3 partition is answered once the followers' log start offsets
    reached the new start (they learn it from the leader's Fetch answers): every replica's
    ``log-start-offset`` file holds it, and a failover keeps it."""
    _all_live(cluster)
    topic = f"dr-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, 1, rf=3, min_isr=2)
    _produce(cluster, topic, 0, 200)
    admin = _admin(cluster)
    (fut,) = admin.delete_records([ck.TopicPartition(topic, 0, 120)], request_timeout=30).values()
    assert fut.result(timeout=60).low_watermark == 120
    for b in (1, 2, 3):
        path = cluster.nodes[b].data_dir / "logs" / f"{topic}-0" / "log-start-offset"
        assert int(path.read_text()) == 120, f"broker {b}"
    leader = cluster.leader(topic, 0)
    cluster.nodes[leader].kill()
    try:
        wait_until(lambda: cluster.leader(topic, 0) not in (leader, -1), "a new leader")
        c = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
        try:
            low, high = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
        finally:
            c.close()
        assert (low, high) == (120, 200)
    finally:
        cluster.nodes[leader].start()
        cluster.wait_registered()


def test_preferred_leader_election_moves_leadership_back(cluster: Cluster) -> None:
    """ElectLeaders with confluent-kafka's AdminClient: after a failover the preferred replica
    (the first) is back in sync but not leading; a PREFERRED election makes it lead again
    (epoch bumped, every record still readable); a second one is ELECTION_NOT_NEEDED, and an
    UNCLEAN one on a partition with a leader too."""
    from confluent_kafka import ElectionType

    _all_live(cluster)
    topic = f"el-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, 1, rf=3, min_isr=2)
    preferred = cluster.view().topics[topic].value.partitions[0][0]
    wait_until(lambda: cluster.leader(topic, 0) == preferred, "the preferred replica leads")
    _produce(cluster, topic, 0, 20)
    cluster.nodes[preferred].kill()
    try:
        wait_until(lambda: cluster.leader(topic, 0) not in (preferred, -1), "a failover")
        _produce(cluster, topic, 0, 10)
    finally:
        cluster.nodes[preferred].start()
        cluster.wait_registered()
    wait_until(lambda: cluster.fully_replicated(topic), "the preferred replica back in sync")
    before = cluster.state(topic, 0)
    assert before.leader != preferred
    admin = _admin(cluster)
    tp = ck.TopicPartition(topic, 0)
    admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(timeout=30)
    wait_until(lambda: cluster.leader(topic, 0) == preferred, "the preferred replica leads again")
    assert cluster.state(topic, 0).leader_epoch > before.leader_epoch
    assert len(_consume(cluster, topic, 0, 30)) == 30
    for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        res = admin.elect_leaders(kind, [tp]).result(timeout=30)
        err = res[tp] if isinstance(res, dict) else None
        assert err is not None and err.code() == E.ELECTION_NOT_NEEDED, res
