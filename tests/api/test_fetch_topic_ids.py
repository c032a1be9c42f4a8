"""Fetch v13-v17 (KIP-516 topic ids, KIP-903 replica state, KIP-951 node endpoints),
spoken raw to a real broker: topics named by id are served and answered with their ids,
an id no topic has is UNKNOWN_TOPIC_ID, and a consumer using them reads what v12 reads.
librdkafka consumers use v16 themselves (every confluent-kafka consumer test runs it)."""

from __future__ import annotations

import uuid

import pytest

from hot.records import decode_batches
from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.brokers import BrokerProcess, create_topic


def _produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0


@pytest.mark.parametrize("version", [12, 13, 15, 16, 17])
def test_fetch_by_topic_id(broker: BrokerProcess, version: int) -> None:
    topic = f"tid-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    _produce(broker.bootstrap, topic, 5)
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:
        md = client.call(ApiKey.METADATA, MetadataRequest(topics=(MetadataRequestTopic(name=topic),)))
        topic_id = md.topics[0].topic_id
        assert topic_id != uuid.UUID(int=0)
        stranger = uuid.uuid4()
        part = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        req = FetchRequest(
            max_wait_ms=100,
            min_bytes=1,
            topics=(
                FetchTopic(topic=topic, topic_id=topic_id, partitions=(part,)),
                FetchTopic(topic="nope", topic_id=stranger, partitions=(part,)),
            ),
        )
        resp = client._call(ApiKey.FETCH, version, req)
    got = {(r.topic, r.topic_id): r.partitions[0] for r in resp.responses}
    if version < 13:
        assert got[(topic, uuid.UUID(int=0))].error_code == E.NONE
        assert got[("nope", uuid.UUID(int=0))].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        data = got[(topic, uuid.UUID(int=0))]
    else:  # names are not on the wire: the answer carries the ids
        assert got[("", stranger)].error_code == E.UNKNOWN_TOPIC_ID
        data = got[("", topic_id)]
        assert data.error_code == E.NONE
    assert data.high_watermark == 5
    values = [r.value for b in decode_batches(bytes(data.records or b"")) for r in b.records]
    assert values == [b"v%d" % i for i in range(5)]
