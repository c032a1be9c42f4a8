"""ReadShareGroupState and WriteShareGroupState: the share coordinator's side of the
share-partition state (broker.share.state_store), asked by the brokers leading the share
partitions. A key whose state partition this broker does not lead (or is still loading)
is NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS); the asking broker follows it. A read or
write from an older leader epoch is FENCED_LEADER_EPOCH, a write with an older state
epoch FENCED_STATE_EPOCH (broker.share.state_store)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.share.errors import ShareError
from broker.share.partition import RecordState, StateBatch
from broker.share.state_store import ShareStateStore, Snapshot, state_key
from hot.errors import CoordinatorNotAvailableError, StrataError
from kwire import RequestHeader
from kwire.error_table import kafka_code
from kwire.messages.share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    DeleteStatePartitionResult,
    DeleteStateResult,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadStatePartitionResult,
    ReadStateResult,
    ShareStateBatch,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
    WriteStatePartitionResult,
    WriteStateResult,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection


def _store(conn: Connection) -> ShareStateStore:
    store = conn.broker.shares.store
    if store is None:
        raise CoordinatorNotAvailableError("this broker runs no share coordinator")
    return store


async def handle_read_share_group_state(
    conn: Connection, header: RequestHeader, req: ReadShareGroupStateRequest
) -> ReadShareGroupStateResponse:
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                snap = await _store(conn).local_read_as_leader(
                    state_key(req.group_id, t.topic_id, p.partition), p.leader_epoch
                )
            except StrataError as exc:
                parts.append(
                    ReadStatePartitionResult(
                        partition=p.partition, error_code=kafka_code(exc), error_message=str(exc)
                    )
                )
                continue
            if snap is None:
                parts.append(ReadStatePartitionResult(partition=p.partition))
                continue
            parts.append(
                ReadStatePartitionResult(
                    partition=p.partition,
                    state_epoch=snap.state_epoch,
                    start_offset=snap.start,
                    state_batches=tuple(
                        ShareStateBatch(
                            first_offset=b.first,
                            last_offset=b.last,
                            delivery_state=int(b.state),
                            delivery_count=b.delivery_count,
                        )
                        for b in snap.batches
                    ),
                )
            )
        results.append(ReadStateResult(topic_id=t.topic_id, partitions=tuple(parts)))
    return ReadShareGroupStateResponse(results=tuple(results))


async def handle_write_share_group_state(
    conn: Connection, header: RequestHeader, req: WriteShareGroupStateRequest
) -> WriteShareGroupStateResponse:
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                snap = Snapshot(
                    p.state_epoch,
                    p.start_offset,
                    tuple(
                        StateBatch(
                            b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count
                        )
                        for b in p.state_batches
                    ),
                    p.leader_epoch,
                )
                await _store(conn).local_write(state_key(req.group_id, t.topic_id, p.partition), snap)
                parts.append(WriteStatePartitionResult(partition=p.partition))
            except (StrataError, ValueError) as exc:
                if isinstance(exc, ShareError):
                    code = exc.kafka_code  # FENCED_STATE_EPOCH
                else:
                    code = kafka_code(exc) if isinstance(exc, StrataError) else 42  # INVALID_REQUEST
                parts.append(
                    WriteStatePartitionResult(partition=p.partition, error_code=code, error_message=str(exc))
                )
        results.append(WriteStateResult(topic_id=t.topic_id, partitions=tuple(parts)))
    return WriteShareGroupStateResponse(results=tuple(results))


async def handle_delete_share_group_state(
    conn: Connection, header: RequestHeader, req: DeleteShareGroupStateRequest
) -> DeleteShareGroupStateResponse:
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                await _store(conn).local_delete(state_key(req.group_id, t.topic_id, p.partition))
                parts.append(DeleteStatePartitionResult(partition=p.partition))
            except StrataError as exc:
                parts.append(
                    DeleteStatePartitionResult(
                        partition=p.partition, error_code=kafka_code(exc), error_message=str(exc)
                    )
                )
        results.append(DeleteStateResult(topic_id=t.topic_id, partitions=tuple(parts)))
    return DeleteShareGroupStateResponse(results=tuple(results))
