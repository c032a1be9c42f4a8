"""The share-group APIs (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and
ShareAcknowledge, wire messages <-> broker.share.

ShareFetch runs in this order, as Kafka's broker does: the share session (epoch 0 opens,
-1 closes, otherwise the next epoch), the piggybacked acknowledgements (an error goes to
the partition's ``acknowledge_error_code``), then the fetch over the session's partitions
(none when closing). Topics travel by id; an id no topic has is UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from broker.groups.replicated_offsets import ClusterOffsetStore
from broker.share.errors import InvalidShareSessionEpochError, ShareError
from broker.share.partition import Acquired
from broker.share.service import ShareService
from broker.share.sessions import CLOSE_EPOCH, OPEN_EPOCH, ShareSession
from hot.errors import InvalidRequestError, NotCoordinatorError, StrataError, UnknownTopicOrPartitionError
from kwire import RequestHeader
from kwire import error_table as E
from kwire.error_table import kafka_code
from kwire.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from kwire.messages.list_groups import ListedGroup
from kwire.messages.share_acknowledge import (
    ShareAcknowledgePartitionData,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from kwire.messages.share_fetch import (
    AcknowledgementBatch,
    AcquiredRecords,
    ShareFetchableTopicResponse,
    ShareFetchPartitionData,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareLeaderIdAndEpoch,
)
from kwire.messages.share_group_describe import (
    DescribedAssignment,
    DescribedShareGroup,
    DescribedShareMember,
    DescribedTopicPartitions,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from kwire.messages.share_group_heartbeat import (
    ShareAssignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareTopicPartitions,
)
from kwire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from api.handlers.context import Connection

SHARE_ASSIGNOR = "simple"
RENEW = 4  # ShareFetch/ShareAcknowledge v2's RENEW acknowledge type (KIP-1222)


def code_of(exc: BaseException) -> int:
    return exc.kafka_code if isinstance(exc, ShareError) else kafka_code(exc)


def shares(conn: Connection) -> ShareService:
    svc: ShareService | None = getattr(conn.broker, "shares", None)
    if svc is None:
        raise InvalidRequestError("this broker serves no share groups")
    return svc


def listed_share_groups(conn: Connection, states: Sequence[str]) -> list[ListedGroup]:
    """ListGroups' share groups (protocol type ``share``), in the states asked for (all
    when none; Kafka matches states case-insensitively)."""
    svc: ShareService | None = getattr(conn.broker, "shares", None)
    if svc is None:
        return []
    svc.expire()
    wanted = {s.lower() for s in states}
    return [
        ListedGroup(group_id=gid, protocol_type="share", group_state=g.state, group_type="share")
        for gid, g in sorted(svc.groups.items())
        if not wanted or g.state.lower() in wanted
    ]


async def delete_share_groups(conn: Connection, names: Sequence[str]) -> dict[str, StrataError | None]:
    """DeleteGroups of the names that are share groups here (NON_EMPTY_GROUP with members);
    the others are left to the group coordinator."""
    svc: ShareService | None = getattr(conn.broker, "shares", None)
    out: dict[str, StrataError | None] = {}
    if svc is None:
        return out
    for name in names:
        if name in svc.groups:
            try:
                await svc.delete_group(name)
                out[name] = None
            except StrataError as exc:
                out[name] = exc
    return out


def _client_host(conn: Connection) -> str:
    peer = conn.peer
    if isinstance(peer, tuple) and peer:
        return f"/{peer[0]}"
    return ""


async def check_coordinator(conn: Connection, group_id: str) -> None:
    """NOT_COORDINATOR unless this broker coordinates ``group_id`` (the group requests:
    heartbeat, describe, describe/alter/delete offsets; ShareFetch and ShareAcknowledge go
    to the partitions' leaders)."""
    coord = getattr(conn.broker, "groups", None)
    if coord is None:
        return
    if isinstance(coord.store, ClusterOffsetStore):
        await coord.store.ensure_topic()  # as FindCoordinator: the first group request creates it
    node = coord.find_coordinator(group_id)
    if node != coord.node_id:
        raise NotCoordinatorError(f"share group {group_id!r} is coordinated by broker {node}")


async def handle_share_group_heartbeat(
    conn: Connection, header: RequestHeader, req: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    try:
        if not req.group_id:
            raise InvalidRequestError("GroupId can't be empty")
        # Membership lives on the group's coordinator, as Kafka's (its clients find it
        # with FindCoordinator); any other broker answers NOT_COORDINATOR.
        await check_coordinator(conn, req.group_id)
        svc = shares(conn)
        await svc.refresh_configs()
        r = svc.heartbeat(
            req.group_id,
            req.member_id,
            req.member_epoch,
            req.subscribed_topic_names,
            rack_id=req.rack_id,
            client_id=header.client_id or "",
            client_host=_client_host(conn),
        )
    except StrataError as exc:
        return ShareGroupHeartbeatResponse(error_code=code_of(exc), error_message=str(exc))
    assignment = None
    if r.assignment is not None:
        view = conn.broker.replicas.view
        assignment = ShareAssignment(
            topic_partitions=tuple(
                ShareTopicPartitions(topic_id=tid, partitions=ps)
                for t, ps in sorted(r.assignment.items())
                if (tid := view.topic_id(t)) is not None
            )
        )
    return ShareGroupHeartbeatResponse(
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment,
    )


async def handle_share_group_describe(
    conn: Connection, header: RequestHeader, req: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    svc = shares(conn)
    view = conn.broker.replicas.view
    out = []
    for gid in req.group_ids:
        try:
            await check_coordinator(conn, gid)
        except StrataError as exc:
            out.append(DescribedShareGroup(group_id=gid, error_code=code_of(exc), error_message=str(exc)))
            continue
        group = svc.groups.get(gid)
        if group is None:
            out.append(
                DescribedShareGroup(
                    group_id=gid,
                    error_code=E.GROUP_ID_NOT_FOUND,
                    error_message=f"group {gid} is not a share group",
                    group_state="Dead",
                )
            )
            continue
        group.expire_members()
        members = tuple(
            DescribedShareMember(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed,
                assignment=DescribedAssignment(
                    topic_partitions=tuple(
                        DescribedTopicPartitions(
                            topic_id=view.topic_id(t) or ZERO_UUID, topic_name=t, partitions=ps
                        )
                        for t, ps in sorted(m.assignment.items())
                    )
                ),
            )
            for m in group.members.values()
        )
        out.append(
            DescribedShareGroup(
                group_id=gid,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=SHARE_ASSIGNOR,
                members=members,
            )
        )
    return ShareGroupDescribeResponse(groups=tuple(out))


def _check_ids(req: ShareFetchRequest | ShareAcknowledgeRequest) -> tuple[str, str]:
    if not req.group_id:
        raise InvalidRequestError("GroupId can't be empty")
    if not req.member_id:
        raise InvalidRequestError("MemberId can't be empty")
    return req.group_id, req.member_id


async def _acks(
    svc: ShareService,
    group: str,
    member: str,
    topic: str,
    partition: int,
    batches: Sequence[AcknowledgementBatch],
    *,
    renew: bool = False,
) -> tuple[int, str | None, bool]:
    """Apply one partition's acknowledgements in memory: (error code, message, whether
    the share partition may have changed and must be persisted before the answer).
    RENEW (KIP-1222) only where ``renew``: ShareAcknowledge v2 (ShareFetch answers it
    INVALID_REQUEST, since a renewal that fetches would hand out more records)."""
    prev = -1
    converted = []
    for b in batches:
        if b.first_offset <= prev or b.last_offset < b.first_offset:
            return E.INVALID_REQUEST, "acknowledgement batches must be ascending and not overlap", False
        prev = b.last_offset
        if RENEW in b.acknowledge_types and not renew:
            return E.INVALID_REQUEST, "the RENEW acknowledge type needs ShareAcknowledge v2", False
        converted.append((b.first_offset, b.last_offset, b.acknowledge_types))
    try:
        error = await svc.apply_acks(group, member, topic, partition, converted)
    except StrataError as exc:
        return code_of(exc), str(exc), False
    if error is not None:
        return code_of(error), str(error), True
    return 0, None, True


async def _persist(
    svc: ShareService, group: str, changed: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], StrataError]:
    """Persist the acknowledged share partitions concurrently (their state writes share
    the coordinator log's group commits): the failures, by partition."""
    return await _persisted(changed, [svc.persist_now(group, t, p) for t, p in changed])


async def _persisted(
    changed: Sequence[tuple[str, int]], started: Sequence[asyncio.Future[None]]
) -> dict[tuple[str, int], StrataError]:
    """The failures, by partition, of the state writes ``started`` (``persist_now``)."""
    results = await asyncio.gather(*started, return_exceptions=True)
    out: dict[tuple[str, int], StrataError] = {}
    for tp, r in zip(changed, results, strict=True):
        if isinstance(r, StrataError):
            out[tp] = r
        elif isinstance(r, BaseException):
            raise r
    return out


async def handle_share_fetch(
    conn: Connection, header: RequestHeader, req: ShareFetchRequest
) -> ShareFetchResponse:
    broker = conn.broker
    view = broker.replicas.view
    try:
        group, member = _check_ids(req)
        svc = shares(conn)
        if req.share_acquire_mode not in (0, 1):
            raise InvalidRequestError(f"unknown share acquire mode {req.share_acquire_mode}")
        session = svc.sessions.check(group, member, req.share_session_epoch)
        if req.share_session_epoch == OPEN_EPOCH and any(
            p.acknowledgement_batches for t in req.topics for p in t.partitions
        ):
            raise InvalidRequestError("a ShareFetch opening a share session can't acknowledge")
    except StrataError as exc:
        return ShareFetchResponse(error_code=code_of(exc), error_message=str(exc))
    settings = svc.settings(group)
    partitions: dict[tuple[uuid.UUID, int], ShareFetchPartitionData] = {}
    names: dict[uuid.UUID, str] = {}
    requested: list[tuple[str, int]] = []
    changed: list[tuple[str, int]] = []  # partitions whose acknowledgements must be persisted
    for t in req.topics:
        name = view.topic_name(t.topic_id)
        for p in t.partitions:
            key = (t.topic_id, p.partition_index)
            if name is None:
                partitions[key] = ShareFetchPartitionData(
                    partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_ID, records=b""
                )
                continue
            names[t.topic_id] = name
            requested.append((name, p.partition_index))
            ack_code, ack_msg = 0, None
            if p.acknowledgement_batches:
                ack_code, ack_msg, must_persist = await _acks(
                    svc, group, member, name, p.partition_index, p.acknowledgement_batches
                )
                if must_persist:
                    changed.append((name, p.partition_index))
            partitions[key] = ShareFetchPartitionData(
                partition_index=p.partition_index,
                acknowledge_error_code=ack_code,
                acknowledge_error_message=ack_msg,
                records=b"",
            )
    forgotten = [
        (n, p) for f in req.forgotten_topics_data if (n := view.topic_name(f.topic_id)) for p in f.partitions
    ]
    # The acknowledgements are persisted while the fetch runs; the answer waits for both.
    # Their state is appended now, and one yield lets the flush round start (its fdatasync
    # on the flush threads) before the fetch takes the loop.
    persisting = None
    if changed:
        started = [svc.persist_now(group, t, p) for t, p in changed]
        persisting = asyncio.ensure_future(_persisted(changed, started))
        await asyncio.sleep(0)
    try:
        if req.share_session_epoch == CLOSE_EPOCH:
            assert session is not None
            svc.release(group, member, session.partitions)
            svc.sessions.close(group, member)
        else:
            ids = {name: tid for tid, name in names.items()}

            def topic_id(name: str) -> uuid.UUID:
                return ids.get(name) or view.topic_id(name) or ZERO_UUID

            await _fetch_into(svc, req, session, group, member, requested, forgotten, topic_id, partitions)
    finally:
        failed = await persisting if persisting is not None else {}
    for (name, index), err in failed.items():
        tid = view.topic_id(name) or ZERO_UUID
        partitions[(tid, index)] = dataclasses.replace(
            partitions[(tid, index)], acknowledge_error_code=code_of(err), acknowledge_error_message=str(err)
        )
    return _fetch_answer(partitions, settings.lock_ms)


async def _fetch_into(
    svc: ShareService,
    req: ShareFetchRequest,
    session: ShareSession | None,
    group: str,
    member: str,
    requested: list[tuple[str, int]],
    forgotten: list[tuple[str, int]],
    topic_id: Callable[[str], uuid.UUID],
    partitions: dict[tuple[uuid.UUID, int], ShareFetchPartitionData],
) -> None:
    """ShareFetch's fetch over the member's share session (opened or advanced here): the
    answers go into ``partitions``."""
    if session is None:
        session = svc.sessions.open(group, member, [tp for tp in requested if tp not in forgotten])
    else:
        svc.sessions.advance(session, requested, forgotten)
    if forgotten:
        svc.release(group, member, forgotten)
    fetched = await svc.fetch(
        group,
        member,
        list(session.partitions),
        max_wait_ms=req.max_wait_ms,
        min_bytes=req.min_bytes,
        max_bytes=req.max_bytes,
        max_records=req.max_records if req.max_records > 0 else 500,
    )
    for f in fetched:
        key = (topic_id(f.topic), f.partition)
        prev = partitions.get(key)
        if f.error is None and not f.acquired and prev is None:
            continue  # a session partition with nothing new: left out, as Kafka does
        data = prev or ShareFetchPartitionData(partition_index=f.partition, records=b"")
        if f.error is not None:
            code = code_of(f.error)
            if isinstance(f.error, UnknownTopicOrPartitionError):
                code = E.UNKNOWN_TOPIC_OR_PARTITION
            partitions[key] = _replace(data, error_code=code, error_message=str(f.error))
        else:
            partitions[key] = _replace(data, records=tuple(f.records), acquired=f.acquired)


def _replace(
    d: ShareFetchPartitionData,
    *,
    error_code: int = 0,
    error_message: str | None = None,
    records: tuple[bytes, ...] | bytes = b"",
    acquired: Sequence[Acquired] = (),
) -> ShareFetchPartitionData:
    return ShareFetchPartitionData(
        partition_index=d.partition_index,
        error_code=error_code,
        error_message=error_message,
        acknowledge_error_code=d.acknowledge_error_code,
        acknowledge_error_message=d.acknowledge_error_message,
        current_leader=ShareLeaderIdAndEpoch(),
        records=records,
        acquired_records=tuple(
            AcquiredRecords(first_offset=a.first, last_offset=a.last, delivery_count=a.delivery_count)
            for a in acquired
        ),
    )


def _fetch_answer(
    partitions: dict[tuple[uuid.UUID, int], ShareFetchPartitionData], lock_ms: int
) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[ShareFetchPartitionData]] = {}
    for (tid, _), d in partitions.items():
        by_topic.setdefault(tid, []).append(d)
    return ShareFetchResponse(
        acquisition_lock_timeout_ms=lock_ms,
        responses=tuple(
            ShareFetchableTopicResponse(topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
    )


async def handle_share_acknowledge(
    conn: Connection, header: RequestHeader, req: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    view = conn.broker.replicas.view
    try:
        group, member = _check_ids(req)
        svc = shares(conn)
        if req.share_session_epoch == OPEN_EPOCH:
            raise InvalidShareSessionEpochError("ShareAcknowledge can't open a share session (epoch 0)")
        session = svc.sessions.check(group, member, req.share_session_epoch)
    except StrataError as exc:
        return ShareAcknowledgeResponse(error_code=code_of(exc), error_message=str(exc))
    lock_ms = svc.settings(group).lock_ms
    answers: list[tuple[uuid.UUID, str | None, list[tuple[int, int, str | None]]]] = []
    changed: list[tuple[str, int]] = []
    for t in req.topics:
        name = view.topic_name(t.topic_id)
        parts: list[tuple[int, int, str | None]] = []
        for p in t.partitions:
            if name is None:
                parts.append((p.partition_index, E.UNKNOWN_TOPIC_ID, None))
                continue
            code, msg, must_persist = await _acks(
                svc,
                group,
                member,
                name,
                p.partition_index,
                p.acknowledgement_batches,
                renew=header.api_version >= 2,
            )
            if must_persist:
                changed.append((name, p.partition_index))
            parts.append((p.partition_index, code, msg))
        answers.append((t.topic_id, name, parts))
    failed = await _persist(svc, group, changed) if changed else {}
    responses = []
    for tid, name, parts in answers:
        out = []
        for index, code, msg in parts:
            err = failed.get((name, index)) if name is not None else None
            if err is not None:
                code, msg = code_of(err), str(err)
            out.append(
                ShareAcknowledgePartitionData(partition_index=index, error_code=code, error_message=msg)
            )
        responses.append(ShareAcknowledgeTopicResponse(topic_id=tid, partitions=tuple(out)))
    assert session is not None
    if req.share_session_epoch == CLOSE_EPOCH:
        svc.release(group, member, session.partitions)
        svc.sessions.close(group, member)
    else:
        svc.sessions.advance(session, (), ())
    return ShareAcknowledgeResponse(acquisition_lock_timeout_ms=lock_ms, responses=tuple(responses))


async def handle_describe_share_group_offsets(
    conn: Connection, header: RequestHeader, req: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    """Each share partition's start offset (KIP-932); ``topics`` None: every partition the
    group has state for. A group this broker knows nothing of is GROUP_ID_NOT_FOUND."""
    svc = shares(conn)
    view = conn.broker.replicas.view
    out = []
    for g in req.groups:
        try:
            await check_coordinator(conn, g.group_id)
        except StrataError as exc:
            out.append(
                DescribeShareGroupOffsetsResponseGroup(
                    group_id=g.group_id, error_code=code_of(exc), error_message=str(exc)
                )
            )
            continue
        if g.topics is None:
            if not svc.known(g.group_id):
                out.append(
                    DescribeShareGroupOffsetsResponseGroup(
                        group_id=g.group_id,
                        error_code=E.GROUP_ID_NOT_FOUND,
                        error_message=f"group {g.group_id} is not a share group",
                    )
                )
                continue
            wanted: dict[str, list[int]] = {}
            for t, p in svc.group_partitions(g.group_id):
                wanted.setdefault(t, []).append(p)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        topics = []
        for name, parts in wanted.items():
            tid = view.topic_id(name)
            answers = []
            for p in parts:
                try:
                    if tid is None or not 0 <= p < svc.partition_count(name):
                        raise UnknownTopicOrPartitionError(f"unknown topic-partition {name}-{p}")
                    start = await svc.start_offset(g.group_id, name, p)
                    answers.append(
                        DescribeShareGroupOffsetsResponsePartition(partition_index=p, start_offset=start)
                    )
                except StrataError as exc:
                    answers.append(
                        DescribeShareGroupOffsetsResponsePartition(
                            partition_index=p, error_code=code_of(exc), error_message=str(exc)
                        )
                    )
            topics.append(
                DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name, topic_id=tid or ZERO_UUID, partitions=tuple(answers)
                )
            )
        out.append(DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=tuple(topics)))
    return DescribeShareGroupOffsetsResponse(groups=tuple(out))
