"""DeleteRecords (KIP-107) with real admin clients, on a real broker: the log start offset
moves, readers start there, errors as Kafka answers them, and on a tiered topic the remote
segments wholly below the new start are deleted from the bucket. Also the offsets of the
two tiers that ListOffsets v8+/v9+ name (EARLIEST_LOCAL, LATEST_TIERED)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.brokers import BrokerProcess, create_topic
from tiering.manifest import SegmentState
from tiering.manifest_store import ManifestStore
from tiering.store import open_store

BOUND_S = 60.0


def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int, size: int = 100) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 50})
    for i in range(per_partition):
        for q in range(partitions):
            p.produce(topic, value=b"%06d:" % i + os.urandom(size), partition=q)
    assert p.flush(BOUND_S) == 0


def _delete(
    bootstrap: str, offsets: dict[tuple[str, int], int]
) -> dict[tuple[str, int], int | KafkaException]:
    """confluent-kafka's AdminClient.delete_records: the low watermark or the error per partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records(
        [TopicPartition(t, p, o) for (t, p), o in offsets.items()], request_timeout=30
    )
    out: dict[tuple[str, int], int | KafkaException] = {}
    for tp, fut in futures.items():
        try:
            out[(tp.topic, tp.partition)] = fut.result(BOUND_S).low_watermark
        except KafkaException as exc:
            out[(tp.topic, tp.partition)] = exc
    return out


def _code(err: object) -> str:
    assert isinstance(err, KafkaException), err
    return str(err.args[0].name())


def _first_offset(bootstrap: str, topic: str, partition: int) -> int:
    """The offset a consumer starting at the earliest offset reads first."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    try:
        low, _ = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=BOUND_S)
        c.assign([TopicPartition(topic, partition, -2)])  # OFFSET_BEGINNING
        deadline = time.monotonic() + BOUND_S
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                assert m.offset() == low
                return int(m.offset())
        raise AssertionError("nothing to consume")
    finally:
        c.close()


def test_delete_records_moves_the_log_start_and_answers_as_kafka(broker: BrokerProcess) -> None:
    topic, compacted = f"dr-{uuid.uuid4().hex[:6]}", f"drc-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    create_topic(broker.bootstrap, compacted, 1, {"cleanup.policy": "compact"})
    _produce(broker.bootstrap, topic, 2, 100)
    got = _delete(broker.bootstrap, {(topic, 0): 40, (topic, 1): -1})  # -1: up to the high watermark
    assert got == {(topic, 0): 40, (topic, 1): 100}
    assert _first_offset(broker.bootstrap, topic, 0) == 40
    # Deleting below the current start changes nothing; the answer is the start.
    assert _delete(broker.bootstrap, {(topic, 0): 10}) == {(topic, 0): 40}
    errors = _delete(
        broker.bootstrap,
        {(topic, 0): 101, (compacted, 0): 0, ("__consumer_offsets", 0): 0},
    )
    assert _code(errors[(topic, 0)]) == "OFFSET_OUT_OF_RANGE"
    assert _code(errors[(compacted, 0)]) == "POLICY_VIOLATION"
    assert _code(errors[("__consumer_offsets", 0)]) == "TOPIC_EXCEPTION"  # librdkafka's name of 17
    # kafka-python's admin client speaks it too.
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTopicPartition

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        res = kp.delete_records({KTopicPartition(topic, 0): 60})
        assert {tp.partition: r["low_watermark"] for tp, r in res.items()} == {0: 60}
    finally:
        kp.close()
    assert _first_offset(broker.bootstrap, topic, 0) == 60


def _remote(url: str, topic: str) -> tuple[int, list[tuple[int, int]]]:
    """Partition 0's manifest: (log start offset, [(base, last) of its COPIED segments])."""

    async def go() -> tuple[int, list[tuple[int, int]]]:
        store = open_store(url)
        try:
            ms = ManifestStore(store)
            doc = await ms.load_topic_manifest(topic)
            if doc is None:
                return 0, []
            m, _ = await ms.load(topic, uuid.UUID(doc["topic_id"]), 0)
            if m is None:
                return 0, []
            segs = [(s.base_offset, s.last_offset) for s in m.copied() if s.state is SegmentState.COPIED]
            return m.log_start_offset, segs
        finally:
            await store.close()

    return asyncio.run(go())


def _wait(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_delete_records_on_a_tiered_topic_deletes_the_remote_segments_below(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    env = {"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100", "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "200"}
    b = broker_factory("--object-store", url, env=env)
    topic = f"drt-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic, 1, {"segment.bytes": "4096", "local.retention.bytes": "8192"})
    _produce(b.bootstrap, topic, 1, 400)
    _wait(lambda: len(_remote(url, topic)[1]) >= 4, "segments uploaded")
    _, segs = _remote(url, topic)
    cut = segs[2][0] + 1  # inside the third segment: the first two are wholly below it
    assert _delete(b.bootstrap, {(topic, 0): cut}) == {(topic, 0): cut}
    _wait(lambda: _remote(url, topic)[0] >= cut, "the manifest's log start to follow")
    start, left = _remote(url, topic)
    assert start == cut and all(last >= cut for _, last in left), left
    assert left[0][0] == segs[2][0]  # the segment holding the new start stays
    assert _first_offset(b.bootstrap, topic, 0) == cut
    # The deleted segments' objects are gone from the bucket.
    bases = {int(p.name.split("-")[0]) for p in (tmp_path / "bucket").rglob("*.log")}
    assert segs[0][0] not in bases and segs[1][0] not in bases and segs[2][0] in bases, bases


def test_list_offsets_earliest_local_and_latest_tiered(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """ListOffsets v8+ EARLIEST_LOCAL (-4, KIP-405) and v9+ LATEST_TIERED (-5, KIP-1005) on a
    tiered topic: the first offset still on local disk, and the last offset in the bucket
    (-1 while nothing is uploaded, and for a topic that is not tiered)."""
    from kclient import KafkaClient
    from kwire import ApiKey
    from kwire.address import HostPort
    from kwire.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

    url = f"file://{tmp_path / 'bucket'}"
    env = {"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100", "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "200"}
    b = broker_factory("--object-store", url, env=env)
    topic, plain = f"lo-{uuid.uuid4().hex[:6]}", f"lop-{uuid.uuid4().hex[:6]}"
    create_topic(b.bootstrap, topic, 1, {"segment.bytes": "4096", "local.retention.bytes": "8192"})
    create_topic(b.bootstrap, plain, 1, {"remote.storage.enable": "false"})

    def offsets(name: str, *stamps: int) -> list[int]:
        out = []
        with KafkaClient.connect(HostPort("127.0.0.1", b.kafka_port)) as client:
            for s in stamps:
                req = ListOffsetsRequest(
                    topics=(
                        ListOffsetsTopic(
                            name=name, partitions=(ListOffsetsPartition(partition_index=0, timestamp=s),)
                        ),
                    )
                )
                (p,) = client._call(ApiKey.LIST_OFFSETS, 9, req).topics[0].partitions
                assert p.error_code == 0
                out.append(p.offset)
        return out

    assert offsets(topic, -5, -4, -2) == [-1, 0, 0]  # nothing uploaded yet
    _produce(b.bootstrap, topic, 1, 400)
    _produce(b.bootstrap, plain, 1, 10)
    _wait(lambda: len(_remote(url, topic)[1]) >= 4, "segments uploaded")
    _wait(lambda: offsets(topic, -4)[0] > 0, "local retention of uploaded segments")
    latest_tiered, earliest_local, earliest = offsets(topic, -5, -4, -2)
    _, segs = _remote(url, topic)
    assert earliest == 0 < earliest_local <= latest_tiered + 1
    assert latest_tiered >= segs[-1][1]  # at least what this reading of the manifest holds
    assert offsets(plain, -5, -4) == [-1, 0]


def test_describe_log_dirs_shows_partition_sizes(broker: BrokerProcess) -> None:
    """DescribeLogDirs (what admin UIs show as topic sizes) with kafka-python's admin client:
    the broker's log directory, each partition's local size, the volume's bytes (v4)."""
    from kafka.admin import KafkaAdminClient

    topic = f"ld-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    _produce(broker.bootstrap, topic, 2, 50, size=200)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        resp = admin.describe_log_dirs()
    finally:
        admin.close()
    ((only,),) = [b["log_dirs"] for b in resp]  # one broker, one log directory
    assert only["log_dir"] == str((broker.data_dir / "logs").resolve())
    assert only["error_code"] == 0 and 0 < only["usable_bytes"] <= only["total_bytes"]
    (mine,) = [t for t in only["topics"] if t["name"] == topic]
    sizes = sorted(p["partition_size"] for p in mine["partitions"])
    assert len(sizes) == 2 and all(s > 50 * 200 for s in sizes), sizes
