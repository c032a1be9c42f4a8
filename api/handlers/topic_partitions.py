"""DescribeTopicPartitions v0 (KIP-966): topics and their partitions in name order, at most
``response_partition_limit`` partitions (and this broker's 2,000) per answer, resumed from a
cursor, what Kafka 3.8+ admin clients send to describe topics. The partition states are
Metadata's (``api.handlers.topics``); an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, one whose
partition states are still being written in steps LEADER_NOT_AVAILABLE. DESCRIBE
on each topic is checked by the guard (api.security.guards)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from api.handlers.topics import metadata_partitions
from broker.admin import is_internal
from kwire import RequestHeader
from kwire import error_table as E
from kwire.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kwire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from api.handlers.context import Connection

# Kafka's max.request.partition.size.limit: the most partitions one answer carries.
MAX_PARTITIONS_PER_ANSWER: Final = 2000


async def handle_describe_topic_partitions(
    conn: Connection, header: RequestHeader, req: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    broker = conn.broker
    view = broker.replicas.view
    # A topic still being written in steps is not described, as in Metadata.
    names = (
        sorted({t.name for t in req.topics})
        if req.topics
        else sorted(n for n in view.topics if view.is_whole(n))
    )
    start_partition = 0
    if req.cursor is not None:
        names = [n for n in names if n >= req.cursor.topic_name]
        if names and names[0] == req.cursor.topic_name:
            start_partition = max(0, req.cursor.partition_index)
    budget = min(max(1, req.response_partition_limit), MAX_PARTITIONS_PER_ANSWER)
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: Cursor | None = None
    for i, name in enumerate(names):
        va = view.topics.get(name)
        if va is None or not view.is_whole(name):
            code = E.UNKNOWN_TOPIC_OR_PARTITION if va is None else E.LEADER_NOT_AVAILABLE
            topics.append(
                DescribeTopicPartitionsResponseTopic(error_code=code, name=name, topic_id=ZERO_UUID)
            )
            continue
        first = start_partition if i == 0 else 0
        parts = metadata_partitions(broker, name, va.value)[first:]
        if len(parts) > budget:
            next_cursor = Cursor(topic_name=name, partition_index=parts[budget].partition_index)
            parts = parts[:budget]
        budget -= len(parts)
        topics.append(
            DescribeTopicPartitionsResponseTopic(
                name=name,
                topic_id=view.topic_id(name) or ZERO_UUID,
                is_internal=is_internal(name),
                partitions=tuple(
                    DescribeTopicPartitionsResponsePartition(
                        error_code=p.error_code,
                        partition_index=p.partition_index,
                        leader_id=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=p.replica_nodes,
                        isr_nodes=p.isr_nodes,
                        offline_replicas=p.offline_replicas,
                    )
                    for p in parts
                ),
            )
        )
        if next_cursor is not None:
            break
        if budget == 0 and i + 1 < len(names):
            next_cursor = Cursor(topic_name=names[i + 1], partition_index=0)
            break
    return DescribeTopicPartitionsResponse(topics=tuple(topics), next_cursor=next_cursor)
