"""DescribeTopicPartitions v0 (KIP-966) spoken raw to a real broker: topics in name order,
their partitions as Metadata gives them, pagination by partition count with a cursor, an
unknown topic's error, and every topic when none is named."""

from __future__ import annotations

import uuid

from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from tests.brokers import BrokerProcess, create_topic


def test_describe_topic_partitions_pages_through_topics(broker: BrokerProcess) -> None:
    tag = uuid.uuid4().hex[:6]
    a, b, missing = f"dtp-a-{tag}", f"dtp-b-{tag}", f"dtp-c-{tag}"
    create_topic(broker.bootstrap, a, 3)
    create_topic(broker.bootstrap, b, 2)
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as client:

        def ask(limit: int, cursor: Cursor | None = None, *names: str):  # type: ignore[no-untyped-def]
            req = DescribeTopicPartitionsRequest(
                topics=tuple(TopicRequest(name=n) for n in names),
                response_partition_limit=limit,
                cursor=cursor,
            )
            return client.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, req)

        first = ask(4, None, missing, b, a)
        got = [(t.name, [p.partition_index for p in t.partitions]) for t in first.topics]
        assert got == [(a, [0, 1, 2]), (b, [0])]
        assert first.next_cursor == Cursor(topic_name=b, partition_index=1)
        assert all(p.leader_id == 0 and p.replica_nodes == (0,) for t in first.topics for p in t.partitions)
        assert first.topics[0].topic_id != uuid.UUID(int=0)
        rest = ask(4, first.next_cursor, missing, b, a)
        got = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in rest.topics]
        assert got == [(b, 0, [1]), (missing, E.UNKNOWN_TOPIC_OR_PARTITION, [])]
        assert rest.next_cursor is None
        every = ask(2000)
        assert {a, b} <= {t.name for t in every.topics} and every.next_cursor is None
