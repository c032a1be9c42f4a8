"""The `strata` CLI against a running broker, per-partition Kafka error codes, acks=0, auto-create."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from hot.records import RecordInput, build_batch
from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic
from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from tests.brokers import ROOT, BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)


def strata(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_topic_commands(broker: BrokerProcess) -> None:
    name = f"cli-{uuid.uuid4().hex[:6]}"
    b = ["--bootstrap", broker.bootstrap]
    r = strata("topic", "create", name, "--partitions", "3", "--config", "retention.ms=1000", *b)
    assert r.returncode == 0, r.stderr
    assert name in strata("topic", "list", *b).stdout.split()
    r = strata("topic", "describe", name, "--output", "json", *b)
    info = json.loads(r.stdout)
    assert [p["partition"] for p in info["partitions"]] == [0, 1, 2]
    assert info["configs"]["retention.ms"] == "1000"
    # errors: one clear line, non-zero exit
    r = strata("topic", "create", name, *b)
    assert r.returncode == 1 and r.stderr.startswith("strata: error:") and "exists" in r.stderr
    assert r.stderr.count("\n") == 1
    r = strata("topic", "create", "bad name!", *b)
    assert r.returncode == 1 and "illegal" in r.stderr
    r = strata("topic", "create", "x", "--config", "segment.bytes=huge", *b)
    assert r.returncode == 1 and "segment.bytes" in r.stderr
    r = strata("topic", "describe", "no-such-topic", *b)
    assert r.returncode == 1
    assert strata("topic", "delete", name, *b).returncode == 0
    assert name not in strata("topic", "list", *b).stdout.split()
    r = strata("topic", "list", "--bootstrap", "127.0.0.1:1")
    assert r.returncode == 1 and "cannot connect" in r.stderr


def test_serve_reports_bad_flags_clearly() -> None:
    r = strata("serve", "--kafka-listen", "nonsense")
    assert r.returncode == 1 and "HOST:PORT" in r.stderr and "Traceback" not in r.stderr
    # a URL where an address belongs: said so, before anything starts
    for flag in ("--kafka-listen", "--http-listen", "--advertised-listener"):
        r = strata("serve", flag, "http://127.0.0.1:9092")
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert (
            r.stderr
            == f"strata: error: {flag}: expected HOST:PORT (no URL scheme), got 'http://127.0.0.1:9092'\n"
        )


def _produce_raw(
    client: KafkaClient, topic: str, partition: int, records: bytes, acks: int = -1
) -> tuple[int, int]:
    req = ProduceRequest(
        acks=acks,
        timeout_ms=10000,
        topic_data=(
            ProduceTopicData(
                name=topic, partition_data=(ProducePartitionData(index=partition, records=records),)
            ),
        ),
    )
    resp = client.call(ApiKey.PRODUCE, req)
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def test_per_partition_error_codes(broker: BrokerProcess) -> None:
    topic = f"errs-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": "2000"})
    good = build_batch([RecordInput(b"k", b"v")])
    with KafkaClient.connect(HostPort.parse(broker.bootstrap)) as c:
        assert _produce_raw(c, topic, 0, good) == (0, 0)
        assert _produce_raw(c, topic, 7, good)[0] == E.UNKNOWN_TOPIC_OR_PARTITION
        assert _produce_raw(c, "no-such-topic", 0, good)[0] == E.UNKNOWN_TOPIC_OR_PARTITION
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF
        assert _produce_raw(c, topic, 0, bytes(corrupt))[0] == E.CORRUPT_MESSAGE
        big = build_batch([RecordInput(None, b"z" * 5000)])
        assert _produce_raw(c, topic, 0, big)[0] == E.MESSAGE_TOO_LARGE
        old_magic = bytearray(good)
        old_magic[16] = 1
        assert _produce_raw(c, topic, 0, bytes(old_magic))[0] in (
            E.UNSUPPORTED_FOR_MESSAGE_FORMAT,
            E.CORRUPT_MESSAGE,
        )
        # nothing but the first good batch was written
        assert _produce_raw(c, topic, 0, good) == (0, 1)
        # unknown topic in Metadata: auto-creation is off by default
        md = c.call(ApiKey.METADATA, MetadataRequest(topics=(MetadataRequestTopic(name="auto-" + topic),)))
        assert md.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_acks_zero_gets_no_response_but_is_stored(broker: BrokerProcess) -> None:
    topic = f"acks0-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": 0, "linger.ms": 1})
    for i in range(1000):
        p.produce(topic, str(i).encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    deadline = time.monotonic() + 30
    while (
        c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] < 1000
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 1000)
    c.close()
    # acks=0 on the raw protocol: the next request on the connection is answered, not a stale reply
    with KafkaClient.connect(HostPort.parse(broker.bootstrap)) as kc:
        kc._correlation += 1
        from kwire import encode_request

        req = ProduceRequest(
            acks=0,
            timeout_ms=1000,
            topic_data=(
                ProduceTopicData(
                    name=topic,
                    partition_data=(
                        ProducePartitionData(index=0, records=build_batch([RecordInput(None, b"z")])),
                    ),
                ),
            ),
        )
        payload = encode_request(ApiKey.PRODUCE, kc.versions[ApiKey.PRODUCE], kc._correlation, "t", req)
        import struct

        kc.sock.sendall(struct.pack(">i", len(payload)) + payload)
        assert kc.list_topics()  # correlation ids line up: no response was sent for acks=0


def test_auto_create_when_enabled(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory("--auto-create-topics")
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    p.produce("auto-made", b"hello")
    assert p.flush(30) == 0
    with KafkaClient.connect(HostPort.parse(b.bootstrap)) as c:
        assert "auto-made" in [t["name"] for t in c.list_topics()]


def test_group_commands_on_a_broker_no_group_used_yet(broker_factory: Callable[..., BrokerProcess]) -> None:
    # The group coordinator starts when first asked for (FindCoordinator, as Kafka's admin
    # client asks first): a fresh broker answers for a group nobody used, and offsets can be
    # set for it ahead of its consumers, as kafka-consumer-groups --reset-offsets allows.
    b = broker_factory()
    create_topic(b.bootstrap, "fresh", 2)
    bs = ["-b", b.bootstrap]
    r = strata("groups", "describe", "new-group", *bs)
    assert r.returncode == 1 and r.stderr == "strata: error: group 'new-group' does not exist\n", r.stderr
    r = strata("groups", "reset-offsets", "new-group", "--topic", "fresh", "--to-latest", "--execute", *bs)
    assert r.returncode == 0, r.stderr
    r = strata("groups", "describe", "new-group", *bs, "-o", "json")
    assert r.returncode == 0 and "fresh" in r.stdout, r.stderr
