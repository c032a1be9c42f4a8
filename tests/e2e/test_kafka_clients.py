"""Real Kafka clients against a real broker subprocess: kcat, confluent-kafka, kafka-python, aiokafka."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import time
import uuid
from collections import defaultdict

import httpx
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from api.partitioner import partition_for_key
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(300)


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consume_exact(
    bootstrap: str, topic: str, partitions: int, expected_total: int, timeout: float = 120.0
) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    """Consume with assign() from offset 0 until `expected_total` records arrived; per partition lists."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",  # assign() without commits; librdkafka requires a group id anyway
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[tuple[int, bytes | None, bytes | None]]] = defaultdict(list)
    n = 0
    deadline = time.monotonic() + timeout
    try:
        while n < expected_total and time.monotonic() < deadline:
            msgs = c.consume(num_messages=10000, timeout=0.5)
            for m in msgs:
                if m.error():
                    raise KafkaException(m.error())
                got[m.partition()].append((m.offset(), m.key(), m.value()))
                n += 1
        # a little more to prove nothing extra (duplicates) arrives
        for m in c.consume(num_messages=10000, timeout=0.5):
            if not m.error():
                got[m.partition()].append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return got


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (tests/run-all.sh installs it)")
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_round_trip(broker: BrokerProcess, codec: str) -> None:
    topic = _topic(f"kcat-{codec}")
    create_topic(broker.bootstrap, topic, 1)
    lines = [f"{i}:value-{i}-" + "x" * (i % 50) for i in range(500)]
    subprocess.run(
        [
            "kcat",
            "-b",
            broker.bootstrap,
            "-t",
            topic,
            "-P",
            "-K:",
            "-X",
            f"compression.codec={codec}",
            "-p",
            "0",
        ],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        timeout=60,
    )
    out = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-t", topic, "-C", "-e", "-o", "beginning", "-f", "%o|%k|%s\n"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()
    assert out == [f"{i}|{line.split(':', 1)[0]}|{line.split(':', 1)[1]}" for i, line in enumerate(lines)]
    # The batch really is stored compressed: librdkafka before 2.10 silently sends gzip,
    # snappy and lz4 uncompressed unless the advertised Produce range starts at v0.
    # librdkafka sends a batch uncompressed when compressing would not make it smaller (a
    # batch of one short record, which a loaded machine's linger can leave first): look at
    # every batch of the segment, not only the first.
    log = (broker.data_dir / "logs" / f"{topic}-0" / f"{0:020d}.log").read_bytes()
    codecs: list[int] = []
    pos = 0
    while pos + 23 <= len(log):
        length = struct.unpack_from(">i", log, pos + 8)[0]  # batch header: length at byte 8
        codecs.append(struct.unpack_from(">h", log, pos + 21)[0] & 0x7)  # attributes at 21
        pos += 12 + length
    expected = ["none", "gzip", "snappy", "lz4", "zstd"].index(codec)
    assert expected in codecs and set(codecs) <= {0, expected}, codecs


def test_confluent_100k_exact_across_partitions(broker: BrokerProcess) -> None:
    topic = _topic("ck")
    parts = 4
    total = 100_000
    create_topic(broker.bootstrap, topic, parts)
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
            "enable.idempotence": False,
            "partitioner": "murmur2_random",
        }
    )
    acked: dict[int, list[tuple[int, bytes, bytes]]] = defaultdict(list)
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.partition()].append((msg.offset(), msg.key(), msg.value()))  # type: ignore[attr-defined]

    for i in range(total):
        key = f"key-{i % 997}".encode()
        p.produce(topic, key=key, value=f"v{i}".encode() * 3, on_delivery=on_delivery)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    assert not errors, errors[:5]
    assert sum(len(v) for v in acked.values()) == total
    # murmur2_random placement is Kafka's murmur2 — the same function REST uses
    for part, recs in acked.items():
        for _, key, _ in recs[:200]:
            assert partition_for_key(key, parts) == part

    got = consume_exact(broker.bootstrap, topic, parts, total)
    for part in range(parts):
        expected = sorted(acked[part])
        assert got[part] == expected, f"partition {part} differs"
        assert [o for o, _, _ in got[part]] == list(range(len(expected)))


def test_rest_keyed_placement_matches_murmur2_clients(broker: BrokerProcess) -> None:
    topic = _topic("place")
    create_topic(broker.bootstrap, topic, 6)
    keys = [f"user-{i}" for i in range(60)]
    records = [{"key": base64(k.encode()), "value": base64(b"r")} for k in keys]
    resp = httpx.post(
        f"{broker.http_url}/topics/{topic}",
        json={"records": records},
        headers={"Content-Type": "application/vnd.kafka.binary.v2+json"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    rest_parts = [o["partition"] for o in resp.json()["offsets"]]
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", "acks": "all"})
    placed: dict[str, int] = {}

    def cb(err: object, msg: object) -> None:
        assert err is None
        placed[msg.key().decode()] = msg.partition()  # type: ignore[attr-defined]

    for k in keys:
        p.produce(topic, key=k.encode(), value=b"c", on_delivery=cb)
    assert p.flush(30) == 0
    assert [placed[k] for k in keys] == rest_parts


def base64(b: bytes) -> str:
    import base64 as b64

    return b64.b64encode(b).decode()


def test_rest_produce_kafka_consume_and_back(broker: BrokerProcess) -> None:
    topic = _topic("rest")
    create_topic(broker.bootstrap, topic, 1)
    resp = httpx.post(
        f"{broker.http_url}/topics/{topic}/partitions/0",
        json={"records": [{"key": {"id": i}, "value": {"n": i, "s": "é"}} for i in range(20)]},
        headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    assert [o["offset"] for o in resp.json()["offsets"]] == list(range(20))
    got = consume_exact(broker.bootstrap, topic, 1, 20)
    assert [json.loads(v) for _, _, v in got[0]] == [{"n": i, "s": "é"} for i in range(20)]

    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(5):
        p.produce(topic, key=b"bin-key", value=bytes([i, 0, 255]), partition=0, headers=[("h", b"v")])
    assert p.flush(30) == 0
    resp = httpx.get(
        f"{broker.http_url}/topics/{topic}/partitions/0/records",
        params={"offset": 20, "timeout": 1000},
        headers={"Accept": "application/vnd.kafka.binary.v2+json"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [r["offset"] for r in body] == [20, 21, 22, 23, 24]
    import base64 as b64

    assert [b64.b64decode(r["value"]) for r in body] == [bytes([i, 0, 255]) for i in range(5)]
    assert all(b64.b64decode(r["key"]) == b"bin-key" for r in body)


def test_admin_create_delete(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = _topic("adm")
    admin.create_topics([NewTopic(name, num_partitions=3, config={"retention.ms": "3600000"})])[name].result(
        30
    )
    md = admin.list_topics(timeout=10)
    assert name in md.topics and len(md.topics[name].partitions) == 3
    with pytest.raises(KafkaException) as ei:
        admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
    assert "TOPIC_ALREADY_EXISTS" in str(ei.value) or "already exists" in str(ei.value)
    with pytest.raises(KafkaException):
        admin.create_topics([NewTopic("bad/name", num_partitions=1)])["bad/name"].result(30)
    admin.delete_topics([name])[name].result(30)
    deadline = time.monotonic() + 10
    while name in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert name not in admin.list_topics(timeout=10).topics


def test_kafka_python_round_trip(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = _topic("kp")
    create_topic(broker.bootstrap, topic, 2)
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="gzip", linger_ms=5)
    futs = [prod.send(topic, key=f"k{i}".encode(), value=f"val{i}".encode()) for i in range(2000)]
    prod.flush(60)
    metas = [f.get(timeout=30) for f in futs]
    prod.close()
    by_part: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for i, md in enumerate(metas):
        by_part[md.partition].append((md.offset, f"val{i}".encode()))
    cons = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    cons.assign([KTP(topic, 0), KTP(topic, 1)])
    cons.seek_to_beginning()
    got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for msg in cons:
        got[msg.partition].append((msg.offset, msg.value))
    cons.close()
    assert {k: sorted(v) for k, v in by_part.items()} == dict(got)


async def test_aiokafka_round_trip(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    topic = _topic("aio")
    create_topic(broker.bootstrap, topic, 1)
    prod = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="zstd")
    await prod.start()
    try:
        offsets = [
            (await prod.send_and_wait(topic, f"m{i}".encode(), partition=0)).offset for i in range(300)
        ]
    finally:
        await prod.stop()
    assert offsets == list(range(300))
    cons = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    await cons.start()
    try:
        cons.assign([ATP(topic, 0)])
        await cons.seek_to_beginning(ATP(topic, 0))
        got: list[bytes] = []
        while len(got) < 300:
            batch = await cons.getmany(timeout_ms=2000)
            if not batch:
                break
            for msgs in batch.values():
                got.extend(m.value for m in msgs)
    finally:
        await cons.stop()
    assert got == [f"m{i}".encode() for i in range(300)]


def test_long_poll_wakes_on_append(broker: BrokerProcess) -> None:
    """A consumer parked in a long poll (max wait 20 s) gets a new record long before the wait ends."""
    topic = _topic("poll")
    create_topic(broker.bootstrap, topic, 1)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 20000,
            "fetch.min.bytes": 1,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    assert c.poll(1.0) is None  # now parked in a long poll
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    p.produce(topic, value=b"wake", partition=0)
    assert p.flush(10) == 0
    sent = time.monotonic()
    msg = None
    while msg is None and time.monotonic() - sent < 15:
        msg = c.poll(0.2)
    elapsed = time.monotonic() - sent
    c.close()
    assert msg is not None and msg.value() == b"wake"
    # bounded: well under the 20 s max wait, so the append woke the parked fetch
    assert elapsed < 10, elapsed


def test_list_offsets_earliest_latest_by_time(broker: BrokerProcess) -> None:
    topic = _topic("lo")
    create_topic(broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        p.produce(topic, value=f"{i}".encode(), partition=0, timestamp=base + i * 1000)
        p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (lo, hi) == (0, 10)
    found = c.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
    assert found[0].offset == 5
    found = c.offsets_for_times([TopicPartition(topic, 0, base + 99_000)], timeout=10)
    assert found[0].offset in (-1, 10)  # no record at/after: end of log
    c.close()
