"""DeleteRecords v0-2 (KIP-107): each partition's log start offset moved up by its leader
(broker.delete_records), the partitions of a request in parallel, each answered with its
low watermark or its error. DELETE on the topic is checked by the guard
(api.security.guards)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.delete_records import delete_records
from hot.errors import StrataError
from kwire import RequestHeader
from kwire.error_table import kafka_code
from kwire.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_delete_records(
    conn: Connection, header: RequestHeader, req: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    broker = conn.broker

    async def one(topic: str, partition: int, offset: int) -> DeleteRecordsPartitionResult:
        try:
            low = await delete_records(broker, topic, partition, offset, req.timeout_ms)
        except StrataError as exc:
            return DeleteRecordsPartitionResult(partition_index=partition, error_code=kafka_code(exc))
        return DeleteRecordsPartitionResult(partition_index=partition, low_watermark=low)

    topics = []
    for t in req.topics:
        results = await asyncio.gather(*(one(t.name, p.partition_index, p.offset) for p in t.partitions))
        topics.append(DeleteRecordsTopicResult(name=t.name, partitions=tuple(results)))
    return DeleteRecordsResponse(topics=tuple(topics))
