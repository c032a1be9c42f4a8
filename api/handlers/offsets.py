"""ListOffsets and OffsetForLeaderEpoch, answered by the partition's leader only.

ListOffsets resolves timestamps -1 (LATEST: the high watermark), -2 (EARLIEST), -3
(MAX_TIMESTAMP) and -4 (EARLIEST_LOCAL, KIP-405) and real timestamps, with the leader
epoch (KIP-320). OffsetForLeaderEpoch gives a follower or consumer the end offset of an
epoch from the leader epoch cache (hot.log) so it can truncate after a leader change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hot.errors import StrataError
from kwire import RequestHeader
from kwire.error_table import kafka_code
from kwire.messages.fetch import READ_COMMITTED
from kwire.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kwire.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_list_offsets(
    conn: Connection, header: RequestHeader, req: ListOffsetsRequest
) -> ListOffsetsResponse:
    broker = conn.broker
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                offset, ts, epoch = await broker.list_offset_with_epoch(
                    t.name,
                    p.partition_index,
                    p.timestamp,
                    current_leader_epoch=p.current_leader_epoch,
                    replica_id=req.replica_id,
                    read_committed=req.isolation_level == READ_COMMITTED,
                )
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, timestamp=ts, offset=offset, leader_epoch=epoch
                    )
                )
            except StrataError as exc:
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=kafka_code(exc)
                    )
                )
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return ListOffsetsResponse(topics=tuple(topics))


async def handle_offset_for_leader_epoch(
    conn: Connection, header: RequestHeader, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    broker = conn.broker
    out = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                epoch, end = broker.end_offset_for_epoch(
                    t.topic, p.partition, p.leader_epoch, current_leader_epoch=p.current_leader_epoch
                )
                parts.append(
                    OffsetForLeaderPartitionResult(partition=p.partition, leader_epoch=epoch, end_offset=end)
                )
            except StrataError as exc:
                parts.append(
                    OffsetForLeaderPartitionResult(partition=p.partition, error_code=kafka_code(exc))
                )
        out.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=tuple(parts)))
    return OffsetForLeaderEpochResponse(topics=tuple(out))
