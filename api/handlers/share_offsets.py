"""AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932), wire messages <->
broker.share: an administrator setting a share group's start offsets (persisted through the
share coordinator with nothing in flight) or deleting its state for whole topics. As Kafka:
only while the group has no members (NON_EMPTY_GROUP, for the request and each entry), a
topic or partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION for its entry.
Both are group-coordinator requests: a broker that does not coordinate the group (the
leader of its ``__consumer_offsets`` partition, where its members' heartbeats land and
so where "no members" can be known) answers NOT_COORDINATOR, as Kafka's does; a state
write from a share partition's copy the change made stale is fenced at the share
coordinator (FENCED_STATE_EPOCH, broker.share.state_store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.handlers.share import check_coordinator, code_of, shares
from hot.errors import (
    GroupIdNotFoundError,
    InvalidGroupIdError,
    StrataError,
    UnknownTopicOrPartitionError,
)
from kwire import RequestHeader
from kwire.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from kwire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from api.handlers.context import Connection


async def handle_alter_share_group_offsets(
    conn: Connection, header: RequestHeader, req: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    view = conn.broker.replicas.view
    top: StrataError | None = None
    try:
        if not req.group_id:
            raise InvalidGroupIdError("GroupId can't be empty")
        await check_coordinator(conn, req.group_id)
        svc = shares(conn)
        svc.check_empty(req.group_id)
    except StrataError as exc:
        top = exc
    topics = []
    for t in req.topics:
        tid = view.topic_id(t.topic_name)
        answers = []
        for p in t.partitions:
            try:
                if top is not None:
                    raise top
                if tid is None or not 0 <= p.partition_index < svc.partition_count(t.topic_name):
                    raise UnknownTopicOrPartitionError(
                        f"unknown topic-partition {t.topic_name}-{p.partition_index}"
                    )
                await svc.alter_start(req.group_id, t.topic_name, p.partition_index, p.start_offset)
                answers.append(AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index))
            except StrataError as exc:
                answers.append(
                    AlterShareGroupOffsetsResponsePartition(
                        partition_index=p.partition_index, error_code=code_of(exc), error_message=str(exc)
                    )
                )
        topics.append(
            AlterShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=tid or ZERO_UUID, partitions=tuple(answers)
            )
        )
    return AlterShareGroupOffsetsResponse(
        error_code=0 if top is None else code_of(top),
        error_message=None if top is None else str(top),
        responses=tuple(topics),
    )


async def handle_delete_share_group_offsets(
    conn: Connection, header: RequestHeader, req: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    view = conn.broker.replicas.view
    top: StrataError | None = None
    try:
        if not req.group_id:
            raise InvalidGroupIdError("GroupId can't be empty")
        await check_coordinator(conn, req.group_id)
        svc = shares(conn)
        if req.group_id not in svc.groups:
            raise GroupIdNotFoundError(f"group {req.group_id} is not a share group")
        svc.check_empty(req.group_id)
    except StrataError as exc:
        top = exc
    topics = []
    for t in req.topics:
        tid = view.topic_id(t.topic_name)
        try:
            if top is not None:
                raise top
            if tid is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {t.topic_name}")
            for p in range(svc.partition_count(t.topic_name)):
                await svc.delete_state(req.group_id, t.topic_name, p)
            topics.append(DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=tid))
        except StrataError as exc:
            topics.append(
                DeleteShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name,
                    topic_id=tid or ZERO_UUID,
                    error_code=code_of(exc),
                    error_message=str(exc),
                )
            )
    return DeleteShareGroupOffsetsResponse(
        error_code=0 if top is None else code_of(top),
        error_message=None if top is None else str(top),
        responses=tuple(topics),
    )
