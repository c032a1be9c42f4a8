"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848): wire messages <-> the
coordinator's consumer groups (broker.groups.consumer_group, through
broker.groups.coordinator). Topics travel by id on the wire and by name in the state
machine: ids are mapped through the cluster's metadata view (an id no topic has any
more is left out of what a member says it owns; a topic deleted since is left out of
what it is told)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from api.handlers.group_topics import ViewTopics
from api.handlers.groups import GROUP_AUTHORIZED_OPERATIONS, _client_host, _coordinator
from broker.groups.consumer_group import HeartbeatCall
from hot.errors import InvalidGroupIdError, StrataError
from kwire import RequestHeader
from kwire.error_table import kafka_code
from kwire.messages.consumer_group_describe import (
    MEMBER_TYPE_CLASSIC,
    MEMBER_TYPE_CONSUMER,
    ConsumerGroupDescribed,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupMember,
    DescribedAssignment,
    DescribedTopicPartitions,
)
from kwire.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    HeartbeatTopicPartitions,
)
from kwire.messages.metadata import NO_AUTHORIZED_OPERATIONS

if TYPE_CHECKING:
    from api.handlers.context import Connection


def _by_id(view: Any, assignment: Mapping[str, frozenset[int]]) -> list[tuple[uuid.UUID, str, list[int]]]:
    out = []
    for name, parts in sorted(assignment.items()):
        tid = view.topic_id(name)
        if tid is not None:
            out.append((tid, name, sorted(parts)))
    return out


async def handle_consumer_group_heartbeat(
    conn: Connection, header: RequestHeader, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    view = conn.broker.replicas.view
    owned: dict[str, frozenset[int]] | None = None
    if req.topic_partitions is not None:
        owned = {}
        for tp in req.topic_partitions:
            name = view.topic_name(tp.topic_id)
            if name is not None:
                owned[name] = frozenset(tp.partitions)
    try:
        r = await _coordinator(conn).consumer_group_heartbeat(
            HeartbeatCall(
                group_id=req.group_id,
                member_id=req.member_id,
                member_epoch=req.member_epoch,
                instance_id=req.instance_id,
                rack_id=req.rack_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms,
                subscribed_topic_names=(
                    None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names)
                ),
                subscribed_topic_regex=req.subscribed_topic_regex,
                server_assignor=req.server_assignor,
                owned=owned,
                client_id=header.client_id or "",
                client_host=_client_host(conn),
                api_version=header.api_version,
            ),
            ViewTopics(view),
        )
    except StrataError as exc:
        return ConsumerGroupHeartbeatResponse(error_code=kafka_code(exc), error_message=str(exc))
    assignment = None
    if r.assignment is not None:
        assignment = HeartbeatAssignment(
            topic_partitions=tuple(
                HeartbeatTopicPartitions(topic_id=tid, partitions=tuple(parts))
                for tid, _, parts in _by_id(view, r.assignment)
            )
        )
    return ConsumerGroupHeartbeatResponse(
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment,
    )


def _described(view: Any, assignment: Mapping[str, frozenset[int]]) -> DescribedAssignment:
    return DescribedAssignment(
        topic_partitions=tuple(
            DescribedTopicPartitions(topic_id=tid, topic_name=name, partitions=tuple(parts))
            for tid, name, parts in _by_id(view, assignment)
        )
    )


def _member_type(classic: bool) -> int:
    return MEMBER_TYPE_CLASSIC if classic else MEMBER_TYPE_CONSUMER


async def handle_consumer_group_describe(
    conn: Connection, header: RequestHeader, req: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    view = conn.broker.replicas.view
    ops = GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else NO_AUTHORIZED_OPERATIONS
    typed = header.api_version >= 1
    out = []
    for gid in req.group_ids:
        try:
            if not gid:
                raise InvalidGroupIdError("Group ID can't be empty.")
            g = _coordinator(conn).describe_consumer_group(gid)
        except StrataError as exc:
            out.append(
                ConsumerGroupDescribed(error_code=kafka_code(exc), error_message=str(exc), group_id=gid)
            )
            continue
        out.append(
            ConsumerGroupDescribed(
                group_id=gid,
                group_state=g.state,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name=g.assignor,
                members=tuple(
                    ConsumerGroupMember(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=m.subscribed_topic_names,
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=_described(view, m.assignment),
                        target_assignment=_described(view, m.target_assignment),
                        member_type=_member_type(m.classic) if typed else -1,
                    )
                    for m in g.members
                ),
                authorized_operations=ops,
            )
        )
    return ConsumerGroupDescribeResponse(groups=tuple(out))
