"""ACL enforcement of the consumer-group APIs (see api.security.guards for how guards work).

Kafka's rules: FindCoordinator DESCRIBE on the group (on the transactional id for key type
TRANSACTION); JoinGroup, SyncGroup, Heartbeat,
LeaveGroup READ on the group; OffsetCommit READ on the group and on each topic;
OffsetFetch DESCRIBE on the group and on each topic (topics it may not describe are
left out of a whole-group answer); OffsetDelete DELETE on the group and READ on each
topic; DescribeGroups DESCRIBE and DeleteGroups DELETE on each group; ListGroups lists
every group to DESCRIBE on the cluster, else the groups the principal may DESCRIBE.
TxnOffsetCommit (KafkaApis.handleTxnOffsetCommitRequest): WRITE on the transactional id
(else TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition), READ on the group (else
GROUP_AUTHORIZATION_FAILED on every partition), READ on each topic (else
TOPIC_AUTHORIZATION_FAILED on its partitions).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Final

from api.security.conn_authz import allowed, allowed_cluster, authorized_operations
from api.security.guards import Guard, Handler, topic_ok
from kwire import ApiKey, RequestHeader
from kwire import error_table as E
from kwire.acl import Operation, ResourceType
from kwire.messages.consumer_group_describe import ConsumerGroupDescribed, ConsumerGroupDescribeResponse
from kwire.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from kwire.messages.delete_groups import DeletableGroupResult, DeleteGroupsResponse
from kwire.messages.describe_groups import DescribedGroup, DescribeGroupsResponse
from kwire.messages.find_coordinator import (
    KEY_TYPE_GROUP,
    KEY_TYPE_TRANSACTION,
    Coordinator,
    FindCoordinatorResponse,
)
from kwire.messages.heartbeat import HeartbeatResponse
from kwire.messages.join_group import JoinGroupResponse
from kwire.messages.leave_group import LeaveGroupResponse
from kwire.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kwire.messages.offset_delete import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kwire.messages.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kwire.messages.sync_group import SyncGroupResponse
from kwire.messages.txn_offset_commit import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection

GAF: Final = E.GROUP_AUTHORIZATION_FAILED
TAF: Final = E.TOPIC_AUTHORIZATION_FAILED


def group_ok(conn: Connection, op: Operation, group: str) -> bool:
    return allowed(conn, op, ResourceType.GROUP, group)


async def guard_find_coordinator(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    """DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or, for key type TRANSACTION, on
    the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    if req.key_type == KEY_TYPE_TRANSACTION:
        resource, code, what = (
            ResourceType.TRANSACTIONAL_ID,
            E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "transactional id",
        )
    elif req.key_type == KEY_TYPE_GROUP:
        resource, code, what = ResourceType.GROUP, GAF, "group"
    else:
        return await inner(conn, header, req)  # an unknown key type: INVALID_REQUEST from the handler
    message = f"not authorized to DESCRIBE the {what}"

    def ok(key: str) -> bool:
        return allowed(conn, Operation.DESCRIBE, resource, key)

    if header.api_version < 4:
        if ok(req.key):
            return await inner(conn, header, req)
        return FindCoordinatorResponse(error_code=code, error_message=message)
    allowed_keys = [k for k in req.coordinator_keys if ok(k)]
    refused = tuple(
        Coordinator(key=k, error_code=code, error_message=message)
        for k in req.coordinator_keys
        if k not in allowed_keys
    )
    if not allowed_keys:
        return FindCoordinatorResponse(coordinators=refused)
    resp = await inner(conn, header, dataclasses.replace(req, coordinator_keys=tuple(allowed_keys)))
    return dataclasses.replace(resp, coordinators=(*resp.coordinators, *refused))


def _member_guard(refusal: Any) -> Guard:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group, else one error code."""

    async def guard_member(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
        if group_ok(conn, Operation.READ, req.group_id):
            return await inner(conn, header, req)
        return refusal(header.api_version, req)

    return guard_member


def _join_refused(version: int, req: Any) -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=GAF, member_id=req.member_id, protocol_name=None if version >= 7 else ""
    )


async def guard_offset_commit(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    group_refused = not group_ok(conn, Operation.READ, req.group_id)
    ok = [] if group_refused else [t for t in req.topics if topic_ok(conn, Operation.READ, t.name)]
    no = [t for t in req.topics if t not in ok]
    if not no:
        return await inner(conn, header, req)
    code = GAF if group_refused else TAF
    refused = tuple(
        OffsetCommitResponseTopic(
            name=t.name,
            partitions=tuple(
                OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                for p in t.partitions
            ),
        )
        for t in no
    )
    if not ok:
        return OffsetCommitResponse(topics=refused)
    resp = await inner(conn, header, dataclasses.replace(req, topics=tuple(ok)))
    return dataclasses.replace(resp, topics=(*resp.topics, *refused))


async def guard_txn_offset_commit(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    code = 0
    if not allowed(conn, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not group_ok(conn, Operation.READ, req.group_id):
        code = GAF
    ok = [] if code else [t for t in req.topics if topic_ok(conn, Operation.READ, t.name)]
    no = [t for t in req.topics if t not in ok]
    if not no:
        return await inner(conn, header, req)
    refused = tuple(
        TxnOffsetCommitResponseTopic(
            name=t.name,
            partitions=tuple(
                TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code or TAF)
                for p in t.partitions
            ),
        )
        for t in no
    )
    if not ok:
        return TxnOffsetCommitResponse(topics=refused)
    resp = await inner(conn, header, dataclasses.replace(req, topics=tuple(ok)))
    return dataclasses.replace(resp, topics=(*resp.topics, *refused))


def _refused_topics(topics: Any, code: int) -> tuple[OffsetFetchResponseTopic, ...]:
    return tuple(
        OffsetFetchResponseTopic(
            name=t.name,
            partitions=tuple(
                OffsetFetchResponsePartition(partition_index=p, metadata="", error_code=code)
                for p in t.partition_indexes
            ),
        )
        for t in topics or ()
    )


def _visible(conn: Connection, topics: Any) -> tuple[Any, ...]:
    return tuple(t for t in topics if topic_ok(conn, Operation.DESCRIBE, t.name))


async def guard_offset_fetch(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    v = header.api_version
    if v >= 8:
        groups_ok = [g for g in req.groups if group_ok(conn, Operation.DESCRIBE, g.group_id)]
        refused_groups = [
            OffsetFetchResponseGroup(group_id=g.group_id, error_code=GAF)
            for g in req.groups
            if g not in groups_ok
        ]
        asked = {
            g.group_id: [t for t in g.topics if not topic_ok(conn, Operation.DESCRIBE, t.name)]
            for g in groups_ok
            if g.topics is not None
        }
        trimmed = tuple(
            g if g.topics is None else dataclasses.replace(g, topics=_visible(conn, g.topics))
            for g in groups_ok
        )
        if not trimmed:
            return OffsetFetchResponse(groups=tuple(refused_groups))
        resp = await inner(conn, header, dataclasses.replace(req, groups=trimmed))
        merged = tuple(
            dataclasses.replace(
                g,
                topics=(*_visible(conn, g.topics), *_refused_topics(asked.get(g.group_id), TAF)),
            )
            for g in resp.groups
        )
        return dataclasses.replace(resp, groups=(*merged, *refused_groups))
    if not group_ok(conn, Operation.DESCRIBE, req.group_id):
        if v >= 2:
            return OffsetFetchResponse(error_code=GAF)
        return OffsetFetchResponse(topics=_refused_topics(req.topics, GAF))
    hidden = (
        []
        if req.topics is None
        else [t for t in req.topics if not topic_ok(conn, Operation.DESCRIBE, t.name)]
    )
    if req.topics is not None:
        req = dataclasses.replace(req, topics=_visible(conn, req.topics))
    resp = await inner(conn, header, req)
    return dataclasses.replace(resp, topics=(*_visible(conn, resp.topics), *_refused_topics(hidden, TAF)))


async def guard_offset_delete(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if not group_ok(conn, Operation.DELETE, req.group_id):
        return OffsetDeleteResponse(error_code=GAF)
    ok = [t for t in req.topics if topic_ok(conn, Operation.READ, t.name)]
    no = [t for t in req.topics if t not in ok]
    if not no:
        return await inner(conn, header, req)
    refused = tuple(
        OffsetDeleteResponseTopic(
            name=t.name,
            partitions=tuple(
                OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=TAF)
                for p in t.partitions
            ),
        )
        for t in no
    )
    if not ok:
        return OffsetDeleteResponse(topics=refused)
    resp = await inner(conn, header, dataclasses.replace(req, topics=tuple(ok)))
    return dataclasses.replace(resp, topics=(*resp.topics, *refused))


async def guard_list_groups(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    resp = await inner(conn, header, req)
    if allowed_cluster(conn, Operation.DESCRIBE):
        return resp
    return dataclasses.replace(
        resp, groups=tuple(g for g in resp.groups if group_ok(conn, Operation.DESCRIBE, g.group_id))
    )


async def guard_describe_groups(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    ok = [g for g in req.groups if group_ok(conn, Operation.DESCRIBE, g)]
    if len(ok) == len(req.groups):
        resp = await inner(conn, header, req)
        return dataclasses.replace(resp, groups=tuple(_with_operations(conn, req, d) for d in resp.groups))
    refused = {g: DescribedGroup(error_code=GAF, group_id=g) for g in req.groups if g not in ok}
    described: dict[str, DescribedGroup] = {}
    if ok:
        resp = await inner(conn, header, dataclasses.replace(req, groups=tuple(ok)))
        described = {d.group_id: _with_operations(conn, req, d) for d in resp.groups}
    return DescribeGroupsResponse(groups=tuple(described.get(g) or refused[g] for g in req.groups))


def _with_operations(conn: Connection, req: Any, d: Any) -> Any:
    """The principal's own operations on the group, where the request asked for them."""
    if not req.include_authorized_operations or d.error_code:
        return d
    return dataclasses.replace(
        d, authorized_operations=authorized_operations(conn, ResourceType.GROUP, d.group_id)
    )


async def guard_delete_groups(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    ok = [g for g in req.groups_names if group_ok(conn, Operation.DELETE, g)]
    no = [g for g in req.groups_names if g not in ok]
    if not no:
        return await inner(conn, header, req)
    refused = tuple(DeletableGroupResult(group_id=g, error_code=GAF) for g in no)
    if not ok:
        return DeleteGroupsResponse(results=refused)
    resp = await inner(conn, header, dataclasses.replace(req, groups_names=tuple(ok)))
    return dataclasses.replace(resp, results=(*resp.results, *refused))


async def guard_consumer_group_describe(
    inner: Handler, conn: Connection, header: RequestHeader, req: Any
) -> Any:
    """DESCRIBE on each group (KIP-848), else GROUP_AUTHORIZATION_FAILED for it."""
    ok = [g for g in req.group_ids if group_ok(conn, Operation.DESCRIBE, g)]
    described: dict[str, Any] = {}
    if ok:
        resp = await inner(conn, header, dataclasses.replace(req, group_ids=tuple(ok)))
        described = {d.group_id: _with_operations(conn, req, d) for d in resp.groups}
    return ConsumerGroupDescribeResponse(
        groups=tuple(
            described.get(g)
            or ConsumerGroupDescribed(
                error_code=GAF, error_message=f"not authorized to DESCRIBE group {g}", group_id=g
            )
            for g in req.group_ids
        )
    )


GROUP_GUARDS: Final[dict[int, Guard]] = {
    ApiKey.FIND_COORDINATOR: guard_find_coordinator,
    ApiKey.JOIN_GROUP: _member_guard(_join_refused),
    ApiKey.SYNC_GROUP: _member_guard(lambda v, req: SyncGroupResponse(error_code=GAF)),
    ApiKey.HEARTBEAT: _member_guard(lambda v, req: HeartbeatResponse(error_code=GAF)),
    ApiKey.LEAVE_GROUP: _member_guard(lambda v, req: LeaveGroupResponse(error_code=GAF)),
    ApiKey.OFFSET_COMMIT: guard_offset_commit,
    ApiKey.OFFSET_FETCH: guard_offset_fetch,
    ApiKey.OFFSET_DELETE: guard_offset_delete,
    ApiKey.TXN_OFFSET_COMMIT: guard_txn_offset_commit,
    ApiKey.LIST_GROUPS: guard_list_groups,
    ApiKey.DESCRIBE_GROUPS: guard_describe_groups,
    ApiKey.DELETE_GROUPS: guard_delete_groups,
    # KIP-848: READ on the group to heartbeat, DESCRIBE to describe it
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _member_guard(
        lambda v, req: ConsumerGroupHeartbeatResponse(
            error_code=GAF, error_message=f"not authorized to READ group {req.group_id}"
        )
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: guard_consumer_group_describe,
}
