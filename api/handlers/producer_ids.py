"""Producer ids and producer state: InitProducerId and DescribeProducers.

InitProducerId for idempotent producers: an id unique across the cluster and its epoch.
Ids come from this broker's producer-id allocator with the broker id in the low bits
(``broker.producer_ids``); a producer passing its id and epoch back gets the epoch bumped
(KIP-360). With a transactional id, the request is the transaction coordinator's
(``api.handlers.txn_coordinator``).

DescribeProducers (KIP-664), on a partition's leader: the producers with state in the
partition (hot.producer_state), each with its epoch, last sequence and timestamp, the
coordinator epoch of its last marker and its ongoing transaction's first offset (-1: none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.handlers.txn_coordinator import handle_transactional_init_producer_id
from broker.producer_ids import init_producer
from hot.errors import StrataError
from kwire import RequestHeader
from kwire import error_table as E
from kwire.error_table import kafka_code
from kwire.messages.describe_producers import (
    DescribeProducersPartitionResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeProducersTopicResponse,
    ProducerState,
)
from kwire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_init_producer_id(
    conn: Connection, header: RequestHeader, req: InitProducerIdRequest
) -> InitProducerIdResponse:
    """Idempotent producers: the single-node handler's rules with cluster-wide unique ids;
    transactional ones go to the transaction coordinator (api.handlers.txn_coordinator)."""
    if req.transactional_id is not None:
        return await handle_transactional_init_producer_id(conn, header, req)
    if (req.producer_id == -1) != (req.producer_epoch == -1):
        return InitProducerIdResponse(error_code=E.INVALID_REQUEST)
    try:
        pid, epoch = init_producer(
            conn.broker.manager.producer_ids, conn.broker.node_id, req.producer_id, req.producer_epoch
        )
    except StrataError as exc:
        return InitProducerIdResponse(error_code=kafka_code(exc))
    return InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)


async def handle_describe_producers(
    conn: Connection, header: RequestHeader, req: DescribeProducersRequest
) -> DescribeProducersResponse:
    replicas = conn.broker.replicas
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partition_indexes:
            try:
                entries = replicas.leader_replica(t.name, p).log.producer_entries()
            except StrataError as exc:
                parts.append(
                    DescribeProducersPartitionResponse(
                        partition_index=p, error_code=kafka_code(exc), error_message=str(exc)
                    )
                )
                continue
            parts.append(
                DescribeProducersPartitionResponse(
                    partition_index=p,
                    active_producers=tuple(
                        ProducerState(
                            producer_id=e.producer_id,
                            producer_epoch=e.epoch,
                            last_sequence=e.last_seq,
                            last_timestamp=e.batches[-1].timestamp if e.batches else -1,
                            coordinator_epoch=e.coordinator_epoch,
                            current_txn_start_offset=e.current_txn_first_offset,
                        )
                        for e in sorted(entries.values(), key=lambda e: e.producer_id)
                    ),
                )
            )
        topics.append(DescribeProducersTopicResponse(name=t.name, partitions=tuple(parts)))
    return DescribeProducersResponse(topics=tuple(topics))
