"""FindCoordinator and the consumer-group APIs: wire messages <-> the coordinator's values.

FindCoordinator names the leader of the group's ``__consumer_offsets`` partition
(``broker.groups.replicated_offsets``, Kafka's ``abs(hash) % partitions``), creating the topic first if
needed; COORDINATOR_NOT_AVAILABLE while that partition has no live leader. A transactional
id's coordinator is the leader of its ``__transaction_state`` partition
(``api.handlers.txn_coordinator``), found the same way. JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, ListGroups,
DescribeGroups and DeleteGroups only translate, version quirks included: the behaviour
(group state machine, rebalances, offsets) lives in broker.groups.coordinator and its
offsets store (broker.groups.replicated_offsets.ClusterOffsetStore), errors mapped through ERROR_TABLE.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol

from api.handlers.share import delete_share_groups, listed_share_groups
from api.handlers.txn_coordinator import find_transaction_coordinator
from broker.groups.coordinator import GroupCoordinator
from broker.groups.replicated_offsets import ClusterOffsetStore
from broker.groups.types import (
    GroupProtocol,
    GroupState,
    MemberIdentity,
    MemberIdRequired,
    OffsetAndMetadata,
    OffsetCommitRequest,
    TopicPartition,
    TxnOffsetCommitRequest,
)
from broker.groups.types import JoinGroupRequest as JoinGroupCall
from broker.groups.types import SyncGroupRequest as SyncGroupCall
from hot.errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    InvalidGroupIdError,
    InvalidRequestError,
    StrataError,
    UnstableOffsetCommitError,
)
from kwire import RequestHeader
from kwire import error_table as E
from kwire.error_table import kafka_code
from kwire.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from kwire.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kwire.messages.find_coordinator import (
    KEY_TYPE_GROUP,
    KEY_TYPE_TRANSACTION,
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kwire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kwire.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember
from kwire.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse
from kwire.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from kwire.messages.metadata import NO_AUTHORIZED_OPERATIONS
from kwire.messages.offset_commit import OffsetCommitRequest as OffsetCommitWire
from kwire.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kwire.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kwire.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kwire.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kwire.messages.txn_offset_commit import TxnOffsetCommitRequest as TxnOffsetCommitWire
from kwire.messages.txn_offset_commit import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection

# Kafka's AclOperation codes a group supports (READ 3, DELETE 6, DESCRIBE 8): without
# authorization every one of them is allowed.
GROUP_AUTHORIZED_OPERATIONS: Final = (1 << 3) | (1 << 6) | (1 << 8)


async def handle_find_coordinator(
    conn: Connection, header: RequestHeader, req: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    """FindCoordinator in cluster mode (all versions, batched v4+): the leader of each
    group's offsets partition (transactional id's ``__transaction_state`` partition), from
    the etcd view (creating the topic first if needed); COORDINATOR_NOT_AVAILABLE when that
    partition has no live leader."""
    v = header.api_version
    keys = list(req.coordinator_keys) if v >= 4 else [req.key]
    found: list[Coordinator] = []
    coord: GroupCoordinator | None = getattr(conn.broker, "groups", None)
    store = coord.store if coord is not None else None
    for key in keys:
        try:
            if req.key_type == KEY_TYPE_TRANSACTION:
                node = await find_transaction_coordinator(conn, key)
            elif req.key_type != KEY_TYPE_GROUP:
                raise InvalidRequestError(f"unknown coordinator key type {req.key_type}")
            elif not isinstance(store, ClusterOffsetStore):
                raise CoordinatorNotAvailableError("this broker runs no group coordinator")
            else:
                await store.ensure_topic()
                node = store.leader_for(key)
            live = conn.broker.replicas.view.brokers.get(node)
            if live is None:
                raise CoordinatorNotAvailableError(f"coordinator broker {node} is not registered")
            host, port = live.registration.client_address(conn.server.external)
            found.append(Coordinator(key=key, node_id=node, host=host, port=port))
        except StrataError as exc:
            found.append(Coordinator(key=key, error_code=kafka_code(exc), error_message=str(exc)))
    if v >= 4:
        return FindCoordinatorResponse(coordinators=tuple(found))
    c = found[0]
    return FindCoordinatorResponse(
        error_code=c.error_code, error_message=c.error_message, node_id=c.node_id, host=c.host, port=c.port
    )


def _coordinator(conn: Connection) -> GroupCoordinator:
    coord: GroupCoordinator | None = getattr(conn.broker, "groups", None)
    if coord is None:
        raise CoordinatorNotAvailableError("this broker runs no group coordinator")
    return coord


def _client_host(conn: Connection) -> str:
    peer = conn.peer
    if isinstance(peer, tuple) and peer:
        return f"/{peer[0]}"  # Kafka's InetAddress.toString() form
    return ""


async def handle_join_group(
    conn: Connection, header: RequestHeader, req: JoinGroupRequest
) -> JoinGroupResponse:
    v = header.api_version
    no_protocol = None if v >= 7 else ""
    try:
        coord = _coordinator(conn)
        if coord.topics is None:
            # A classic member may join a consumer group (KIP-848's online migration):
            # the coordinator resolves its subscription against the cluster's topics.
            from api.handlers.group_topics import ViewTopics

            coord.topics = ViewTopics(conn.broker.replicas.view)
        r = await coord.join_group(
            JoinGroupCall(
                group_id=req.group_id,
                member_id=req.member_id,
                protocol_type=req.protocol_type,
                protocols=tuple(GroupProtocol(p.name, bytes(p.metadata)) for p in req.protocols),
                session_timeout_ms=req.session_timeout_ms,
                rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else -1,
                group_instance_id=req.group_instance_id,
                client_id=header.client_id or "",
                client_host=_client_host(conn),
                require_known_member_id=v >= 4,
                supports_skip_assignment=v >= 9,
                reason=req.reason,
            )
        )
    except MemberIdRequired as exc:
        return JoinGroupResponse(
            error_code=E.MEMBER_ID_REQUIRED, member_id=exc.member_id, protocol_name=no_protocol
        )
    except StrataError as exc:
        return JoinGroupResponse(
            error_code=kafka_code(exc), member_id=req.member_id, protocol_name=no_protocol
        )
    return JoinGroupResponse(
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name if r.protocol_name is not None else no_protocol,
        leader=r.leader_id,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=tuple(
            JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in r.members
        ),
    )


async def handle_sync_group(
    conn: Connection, header: RequestHeader, req: SyncGroupRequest
) -> SyncGroupResponse:
    try:
        r = await _coordinator(conn).sync_group(
            SyncGroupCall(
                group_id=req.group_id,
                generation_id=req.generation_id,
                member_id=req.member_id,
                group_instance_id=req.group_instance_id,
                protocol_type=req.protocol_type,
                protocol_name=req.protocol_name,
                assignments=tuple((a.member_id, bytes(a.assignment)) for a in req.assignments),
            )
        )
    except StrataError as exc:
        return SyncGroupResponse(error_code=kafka_code(exc))
    return SyncGroupResponse(
        protocol_type=r.protocol_type, protocol_name=r.protocol_name, assignment=r.assignment
    )


async def handle_heartbeat(
    conn: Connection, header: RequestHeader, req: HeartbeatRequest
) -> HeartbeatResponse:
    try:
        _coordinator(conn).heartbeat(req.group_id, req.member_id, req.generation_id, req.group_instance_id)
    except StrataError as exc:
        return HeartbeatResponse(error_code=kafka_code(exc))
    return HeartbeatResponse()


async def handle_leave_group(
    conn: Connection, header: RequestHeader, req: LeaveGroupRequest
) -> LeaveGroupResponse:
    v = header.api_version
    if v >= 3:
        identities = [MemberIdentity(m.member_id, m.group_instance_id, m.reason) for m in req.members]
    else:
        identities = [MemberIdentity(req.member_id)]
    try:
        results = _coordinator(conn).leave_group(req.group_id, identities)
    except StrataError as exc:
        return LeaveGroupResponse(error_code=kafka_code(exc))
    if v < 3:
        error = results[0].error
        return LeaveGroupResponse(error_code=kafka_code(error) if error is not None else 0)
    return LeaveGroupResponse(
        members=tuple(
            MemberResponse(
                member_id=r.member_id,
                group_instance_id=r.group_instance_id,
                error_code=kafka_code(r.error) if r.error is not None else 0,
            )
            for r in results
        )
    )


async def handle_offset_commit(
    conn: Connection, header: RequestHeader, req: OffsetCommitWire
) -> OffsetCommitResponse:
    v = header.api_version
    offsets = _offsets(req.topics)
    results: dict[TopicPartition, StrataError | None]
    try:
        results = await _coordinator(conn).commit_offsets(
            OffsetCommitRequest(
                group_id=req.group_id,
                offsets=offsets,
                generation_id=req.generation_id_or_member_epoch,
                member_id=req.member_id,
                group_instance_id=req.group_instance_id,
                retention_time_ms=req.retention_time_ms if 2 <= v <= 4 else -1,
            ),
            api_version=v,
        )
    except StrataError as exc:
        results = dict.fromkeys((o[0] for o in offsets), exc)
    return OffsetCommitResponse(
        topics=tuple(
            OffsetCommitResponseTopic(
                name=name,
                partitions=tuple(
                    OffsetCommitResponsePartition(partition_index=i, error_code=code) for i, code in codes
                ),
            )
            for name, codes in _answers(req.topics, results)
        )
    )


async def handle_txn_offset_commit(
    conn: Connection, header: RequestHeader, req: TxnOffsetCommitWire
) -> TxnOffsetCommitResponse:
    """TxnOffsetCommit v0-4 (KIP-98; v3+ carries the consumer's group metadata, KIP-447):
    the producer's offsets become pending transactional offsets of the group, committed by
    its transaction's COMMIT marker (broker.groups.offset_manager). v5 (transaction
    version 2, where this request also adds the partition to the transaction) is not
    served: the transaction coordinator here runs transaction version 1 (AddOffsetsToTxn)."""
    offsets = _offsets(req.topics)
    results: dict[TopicPartition, StrataError | None]
    try:
        if not req.group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        results = await _coordinator(conn).commit_transactional_offsets(
            TxnOffsetCommitRequest(
                group_id=req.group_id,
                producer_id=req.producer_id,
                producer_epoch=req.producer_epoch,
                offsets=offsets,
                generation_id=req.generation_id,
                member_id=req.member_id,
                group_instance_id=req.group_instance_id,
            )
        )
    except StrataError as exc:
        results = dict.fromkeys((o[0] for o in offsets), exc)
    return TxnOffsetCommitResponse(
        topics=tuple(
            TxnOffsetCommitResponseTopic(
                name=name,
                partitions=tuple(
                    TxnOffsetCommitResponsePartition(partition_index=i, error_code=code) for i, code in codes
                ),
            )
            for name, codes in _answers(req.topics, results)
        )
    )


def _code(error: StrataError | None) -> int:
    return kafka_code(error) if error is not None else 0


class _CommittedPartition(Protocol):
    @property
    def partition_index(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_leader_epoch(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


class _CommittedTopic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[_CommittedPartition]: ...


def _offsets(
    topics: Sequence[_CommittedTopic],
) -> tuple[tuple[TopicPartition, int, int, str | None], ...]:
    """OffsetCommit's and TxnOffsetCommit's offsets: (partition, offset, leader epoch, metadata)."""
    return tuple(
        (
            TopicPartition(t.name, p.partition_index),
            p.committed_offset,
            p.committed_leader_epoch,
            p.committed_metadata,
        )
        for t in topics
        for p in t.partitions
    )


def _answers(
    topics: Sequence[_CommittedTopic], results: dict[TopicPartition, StrataError | None]
) -> list[tuple[str, list[tuple[int, int]]]]:
    """Each requested topic's (partition, error code) in request order."""
    out: list[tuple[str, list[tuple[int, int]]]] = []
    for t in topics:
        indexes = [p.partition_index for p in t.partitions]
        out.append((t.name, [(i, _code(results.get(TopicPartition(t.name, i)))) for i in indexes]))
    return out


_UNSTABLE: Final = kafka_code(UnstableOffsetCommitError("pending"))


def _fetched(
    committed: dict[TopicPartition, OffsetAndMetadata],
    topics: tuple[OffsetFetchRequestTopic, ...] | None,
    unstable: set[TopicPartition] | frozenset[TopicPartition] = frozenset(),
) -> tuple[OffsetFetchResponseTopic, ...]:
    """The response topics for requested ``topics`` (None: every committed partition).
    ``unstable``: partitions answered UNSTABLE_OFFSET_COMMIT (require_stable, KIP-447:
    a transactional commit of theirs awaits its marker), as Kafka answers them."""
    wanted: dict[str, list[int]] = {}
    if topics is None:
        for tp in sorted(committed):
            wanted.setdefault(tp.topic, []).append(tp.partition)
    else:
        for t in topics:
            wanted.setdefault(t.name, []).extend(t.partition_indexes)
    out = []
    for name, partitions in wanted.items():
        parts = []
        for p in partitions:
            o = committed.get(TopicPartition(name, p))
            if TopicPartition(name, p) in unstable:
                parts.append(
                    OffsetFetchResponsePartition(
                        partition_index=p, committed_offset=-1, metadata="", error_code=_UNSTABLE
                    )
                )
            elif o is None:
                parts.append(
                    OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, metadata="")
                )
            else:
                parts.append(
                    OffsetFetchResponsePartition(
                        partition_index=p,
                        committed_offset=o.offset,
                        committed_leader_epoch=o.leader_epoch,
                        metadata=o.metadata,
                    )
                )
        out.append(OffsetFetchResponseTopic(name=name, partitions=tuple(parts)))
    return tuple(out)


def _fetch_group(
    coord: GroupCoordinator | None,
    group_id: str,
    topics: tuple[OffsetFetchRequestTopic, ...] | None,
    require_stable: bool = False,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[tuple[OffsetFetchResponseTopic, ...], StrataError | None]:
    try:
        if coord is None:
            raise CoordinatorNotAvailableError("this broker runs no group coordinator")
        committed = coord.committed_offsets(group_id, member_id=member[0], member_epoch=member[1])
        unstable = coord.pending_transactional(group_id) if require_stable else set()
        return _fetched(committed, topics, unstable), None
    except StrataError as exc:
        return (), exc


async def handle_offset_fetch(
    conn: Connection, header: RequestHeader, req: OffsetFetchRequest
) -> OffsetFetchResponse:
    v = header.api_version
    coord: GroupCoordinator | None = getattr(conn.broker, "groups", None)
    if v >= 8:
        groups = []
        for g in req.groups:
            topics, error = _fetch_group(
                coord,
                g.group_id,
                None if g.topics is None else tuple(g.topics),
                req.require_stable,
                (g.member_id, g.member_epoch),
            )
            groups.append(
                OffsetFetchResponseGroup(group_id=g.group_id, topics=topics, error_code=_code(error))
            )
        return OffsetFetchResponse(groups=tuple(groups))
    asked = None if req.topics is None else tuple(req.topics)
    topics, error = _fetch_group(coord, req.group_id, asked, v >= 7 and req.require_stable)
    if error is None:
        return OffsetFetchResponse(topics=topics)
    if v >= 2:
        return OffsetFetchResponse(error_code=kafka_code(error))
    # v0-1 have no top-level error: every requested partition carries it.
    code = kafka_code(error)
    return OffsetFetchResponse(
        topics=tuple(
            OffsetFetchResponseTopic(
                name=t.name,
                partitions=tuple(
                    OffsetFetchResponsePartition(partition_index=p, metadata="", error_code=code)
                    for p in t.partition_indexes
                ),
            )
            for t in asked or ()
        )
    )


async def handle_offset_delete(
    conn: Connection, header: RequestHeader, req: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    partitions = [TopicPartition(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    try:
        results = await _coordinator(conn).delete_offsets(req.group_id, partitions)
    except StrataError as exc:
        return OffsetDeleteResponse(error_code=kafka_code(exc))
    return OffsetDeleteResponse(
        topics=tuple(
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=tuple(
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=_code(results.get(TopicPartition(t.name, p.partition_index))),
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        )
    )


async def handle_list_groups(
    conn: Connection, header: RequestHeader, req: ListGroupsRequest
) -> ListGroupsResponse:
    """Classic groups (type "classic"), KIP-848 consumer groups (type "consumer",
    protocol type "consumer") and share groups (type "share"), filtered by state and
    (v5+) type, case-insensitively."""
    types = {t.lower() for t in req.types_filter}
    states = {s.lower() for s in req.states_filter}
    try:
        coord = _coordinator(conn)
        listed = [
            (g.group_id, g.protocol_type, g.state.value, g.group_type)
            for g in coord.list_groups()
            if not types or g.group_type in types
        ]
    except StrataError as exc:
        return ListGroupsResponse(error_code=kafka_code(exc))
    return ListGroupsResponse(
        groups=tuple(
            ListedGroup(group_id=gid, protocol_type=ptype, group_state=state, group_type=gtype)
            for gid, ptype, state, gtype in sorted(listed)
            if not states or state.lower() in states
        )
        # KIP-932 share groups (api.handlers.share), type "share" under the same filter
        + tuple(listed_share_groups(conn, req.states_filter) if not types or "share" in types else ())
    )


async def handle_describe_groups(
    conn: Connection, header: RequestHeader, req: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    ops = GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else NO_AUTHORIZED_OPERATIONS
    out = []
    for gid in req.groups:
        try:
            coord = _coordinator(conn)
            if coord.is_consumer_group(gid):  # answered by ConsumerGroupDescribe, as Kafka's
                raise GroupIdNotFoundError(f"Group {gid} is not a classic group.")
            d = coord.describe_group(gid)
        except GroupIdNotFoundError as exc:
            # DescribeGroups v0-5 answer an unknown group (or a KIP-848 consumer group) as
            # a Dead one without error; v6 says GROUP_ID_NOT_FOUND, as Kafka 4.
            v6 = header.api_version >= 6
            out.append(
                DescribedGroup(
                    error_code=kafka_code(exc) if v6 else 0,
                    error_message=str(exc) if v6 else None,
                    group_id=gid,
                    group_state=GroupState.DEAD.value,
                    authorized_operations=ops,
                )
            )
            continue
        except StrataError as exc:
            out.append(
                DescribedGroup(
                    error_code=kafka_code(exc),
                    error_message=str(exc) if header.api_version >= 6 else None,
                    group_id=gid,
                    authorized_operations=ops,
                )
            )
            continue
        # As Kafka: metadata, assignments and the protocol only once the group is Stable.
        stable = d.state is GroupState.STABLE
        out.append(
            DescribedGroup(
                group_id=gid,
                group_state=d.state.value,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_name if stable else "",
                members=tuple(
                    DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata if stable else b"",
                        member_assignment=m.assignment if stable else b"",
                    )
                    for m in d.members
                ),
                authorized_operations=ops,
            )
        )
    return DescribeGroupsResponse(groups=tuple(out))


async def handle_delete_groups(
    conn: Connection, header: RequestHeader, req: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    shares = await delete_share_groups(conn, req.groups_names)  # KIP-932 (api.handlers.share)
    others = [g for g in req.groups_names if g not in shares]
    try:
        results = await _coordinator(conn).delete_groups(others) if others else {}
    except StrataError as exc:
        results = dict.fromkeys(others, exc)
    results = {**results, **shares}
    return DeleteGroupsResponse(
        results=tuple(
            DeletableGroupResult(group_id=g, error_code=_code(results.get(g))) for g in req.groups_names
        )
    )
