"""ACL enforcement of the share-group APIs (KIP-932; see api.security.guards for how guards
work), by Kafka's rules: ShareGroupHeartbeat READ on the group; ShareGroupDescribe and
DescribeShareGroupOffsets DESCRIBE on each group (the offsets: and DESCRIBE on each
topic); ShareFetch and ShareAcknowledge READ on the group (else GROUP_AUTHORIZATION_FAILED
for the whole request) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED on its
partitions, the others served). ReadShareGroupState and WriteShareGroupState (between
brokers, and DeleteShareGroupState): CLUSTER_ACTION on the cluster, else
CLUSTER_AUTHORIZATION_FAILED on every partition. AlterShareGroupOffsets: READ on the group
and on each topic; DeleteShareGroupOffsets: DELETE on the group (as OffsetDelete) and READ
on each topic.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Final

from api.security.conn_authz import allowed, allowed_cluster
from api.security.guards import Guard, Handler, refused_topics, topic_ok, with_refused
from kwire import ApiKey, RequestHeader
from kwire import error_table as E
from kwire.acl import Operation, ResourceType
from kwire.messages.describe_share_group_offsets import DescribeShareGroupOffsetsResponseGroup
from kwire.messages.share_acknowledge import (
    ShareAcknowledgePartitionData,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from kwire.messages.share_fetch import (
    ShareFetchableTopicResponse,
    ShareFetchPartitionData,
    ShareFetchResponse,
)
from kwire.messages.share_group_describe import DescribedShareGroup, ShareGroupDescribeResponse
from kwire.messages.share_group_heartbeat import ShareGroupHeartbeatResponse
from kwire.messages.share_group_offsets import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from kwire.messages.share_group_state import (
    DeleteShareGroupStateResponse,
    DeleteStatePartitionResult,
    DeleteStateResult,
    ReadShareGroupStateResponse,
    ReadStatePartitionResult,
    ReadStateResult,
    WriteShareGroupStateResponse,
    WriteStatePartitionResult,
    WriteStateResult,
)
from kwire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from api.handlers.context import Connection

GAF: Final = E.GROUP_AUTHORIZATION_FAILED
TAF: Final = E.TOPIC_AUTHORIZATION_FAILED
CAF: Final = E.CLUSTER_AUTHORIZATION_FAILED


def _group_ok(conn: Connection, op: Operation, group: str | None) -> bool:
    return group is not None and allowed(conn, op, ResourceType.GROUP, group)


async def guard_heartbeat(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if _group_ok(conn, Operation.READ, req.group_id):
        return await inner(conn, header, req)
    return ShareGroupHeartbeatResponse(error_code=GAF, error_message="not authorized to READ the group")


async def guard_describe(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    ok = [g for g in req.group_ids if _group_ok(conn, Operation.DESCRIBE, g)]
    refused = tuple(
        DescribedShareGroup(group_id=g, error_code=GAF, error_message="not authorized to DESCRIBE the group")
        for g in req.group_ids
        if g not in ok
    )
    if not ok:
        return ShareGroupDescribeResponse(groups=refused)
    resp = await inner(conn, header, dataclasses.replace(req, group_ids=tuple(ok)))
    return dataclasses.replace(resp, groups=(*resp.groups, *refused))


def _topic_readable(conn: Connection, topic_id: Any) -> bool:
    name = conn.broker.replicas.view.topic_name(topic_id)
    return name is None or topic_ok(conn, Operation.READ, name)  # unknown ids: the handler's error


async def guard_share_fetch(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if not _group_ok(conn, Operation.READ, req.group_id):
        return ShareFetchResponse(error_code=GAF, error_message="not authorized to READ the group")
    ok = [t for t in req.topics if _topic_readable(conn, t.topic_id)]
    refused = refused_topics(
        (t for t in req.topics if t not in ok),
        lambda t: t.partitions,
        lambda t, ps: ShareFetchableTopicResponse(topic_id=t.topic_id, partitions=ps),
        lambda p: ShareFetchPartitionData(partition_index=p.partition_index, error_code=TAF, records=b""),
    )
    return await with_refused(
        inner, conn, header, req, ok=ok, refused=refused, request_field="topics", response_field="responses"
    )


async def guard_share_acknowledge(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if not _group_ok(conn, Operation.READ, req.group_id):
        return ShareAcknowledgeResponse(error_code=GAF, error_message="not authorized to READ the group")
    ok = [t for t in req.topics if _topic_readable(conn, t.topic_id)]
    refused = refused_topics(
        (t for t in req.topics if t not in ok),
        lambda t: t.partitions,
        lambda t, ps: ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=ps),
        lambda p: ShareAcknowledgePartitionData(partition_index=p.partition_index, error_code=TAF),
    )
    return await with_refused(
        inner, conn, header, req, ok=ok, refused=refused, request_field="topics", response_field="responses"
    )


async def guard_read_state(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if allowed_cluster(conn, Operation.CLUSTER_ACTION):
        return await inner(conn, header, req)
    return ReadShareGroupStateResponse(
        results=refused_topics(
            req.topics,
            lambda t: t.partitions,
            lambda t, ps: ReadStateResult(topic_id=t.topic_id, partitions=ps),
            lambda p: ReadStatePartitionResult(partition=p.partition, error_code=CAF),
        )
    )


async def guard_write_state(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if allowed_cluster(conn, Operation.CLUSTER_ACTION):
        return await inner(conn, header, req)
    return WriteShareGroupStateResponse(
        results=refused_topics(
            req.topics,
            lambda t: t.partitions,
            lambda t, ps: WriteStateResult(topic_id=t.topic_id, partitions=ps),
            lambda p: WriteStatePartitionResult(partition=p.partition, error_code=CAF),
        )
    )


async def guard_describe_offsets(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    """DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for the group) and on each topic
    named (TOPIC_AUTHORIZATION_FAILED for its partitions)."""
    resp = await inner(
        conn,
        header,
        dataclasses.replace(
            req, groups=tuple(g for g in req.groups if _group_ok(conn, Operation.DESCRIBE, g.group_id))
        ),
    )
    refused = tuple(
        DescribeShareGroupOffsetsResponseGroup(
            group_id=g.group_id, error_code=GAF, error_message="not authorized to DESCRIBE the group"
        )
        for g in req.groups
        if not _group_ok(conn, Operation.DESCRIBE, g.group_id)
    )

    def visible(t: Any) -> Any:
        if topic_ok(conn, Operation.DESCRIBE, t.topic_name):
            return t
        return dataclasses.replace(
            t,
            partitions=tuple(
                dataclasses.replace(p, start_offset=-1, error_code=TAF, error_message=None)
                for p in t.partitions
            ),
        )

    groups = tuple(dataclasses.replace(g, topics=tuple(visible(t) for t in g.topics)) for g in resp.groups)
    return dataclasses.replace(resp, groups=(*groups, *refused))


async def guard_delete_state(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if allowed_cluster(conn, Operation.CLUSTER_ACTION):
        return await inner(conn, header, req)
    return DeleteShareGroupStateResponse(
        results=refused_topics(
            req.topics,
            lambda t: t.partitions,
            lambda t, ps: DeleteStateResult(topic_id=t.topic_id, partitions=ps),
            lambda p: DeleteStatePartitionResult(partition=p.partition, error_code=CAF),
        )
    )


async def guard_alter_offsets(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    """READ on the group (else GROUP_AUTHORIZATION_FAILED for the request and each
    partition) and on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions)."""
    if not _group_ok(conn, Operation.READ, req.group_id):
        return AlterShareGroupOffsetsResponse(
            error_code=GAF,
            error_message="not authorized to READ the group",
            responses=_refused_alter(req.topics, GAF),
        )
    ok = [t for t in req.topics if topic_ok(conn, Operation.READ, t.topic_name)]
    refused = _refused_alter((t for t in req.topics if t not in ok), TAF)
    resp = await inner(conn, header, dataclasses.replace(req, topics=tuple(ok)))
    return dataclasses.replace(resp, responses=(*resp.responses, *refused))


def _refused_alter(topics: Any, code: int) -> tuple[Any, ...]:
    return refused_topics(
        topics,
        lambda t: t.partitions,
        lambda t, ps: AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=ZERO_UUID, partitions=ps
        ),
        lambda p: AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index, error_code=code),
    )


async def guard_delete_offsets(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    """DELETE on the group (as Kafka's OffsetDelete; else GROUP_AUTHORIZATION_FAILED for
    the request and each topic) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED)."""
    if not _group_ok(conn, Operation.DELETE, req.group_id):
        return DeleteShareGroupOffsetsResponse(
            error_code=GAF,
            error_message="not authorized to DELETE the group",
            responses=tuple(
                DeleteShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name, topic_id=ZERO_UUID, error_code=GAF
                )
                for t in req.topics
            ),
        )
    ok = [t for t in req.topics if topic_ok(conn, Operation.READ, t.topic_name)]
    refused = tuple(
        DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=ZERO_UUID, error_code=TAF)
        for t in req.topics
        if t not in ok
    )
    resp = await inner(conn, header, dataclasses.replace(req, topics=tuple(ok)))
    return dataclasses.replace(resp, responses=(*resp.responses, *refused))


SHARE_GUARDS: Final[dict[int, Guard]] = {
    ApiKey.SHARE_GROUP_HEARTBEAT: guard_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: guard_describe,
    ApiKey.SHARE_FETCH: guard_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: guard_share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: guard_describe_offsets,
    ApiKey.READ_SHARE_GROUP_STATE: guard_read_state,
    ApiKey.WRITE_SHARE_GROUP_STATE: guard_write_state,
    ApiKey.DELETE_SHARE_GROUP_STATE: guard_delete_state,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: guard_alter_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: guard_delete_offsets,
}
