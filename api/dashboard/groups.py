"""The console's consumer groups: the list, one group, and resetting an empty group's offsets.

``GET /console/api/groups``             every group the principal may DESCRIBE with its state,
                                        members, topics and total lag, in one request (the
                                        old dashboard asked once per group per refresh)
``GET /console/api/groups/{group}``     members with their assignments, lag per partition and
                                        total, lag in time, and the group's lag history
``POST /console/api/groups/reset``      ``{"group", "topic" (optional), "to": "earliest" |
                                        "latest" | "timestamp" | "offset", "value"}``

Lag is broker.group_lag's (committed offset against the high watermark) restricted to the
topics the principal may DESCRIBE, as ``/v1/groups/{g}/lag`` does. Lag in time is the age
of the first record not consumed yet (now minus its timestamp) for up to ``TIME_LAG_PARTITIONS``
lagging partitions, read through the broker's fetch (remote tier included); it is what
Kafka's lag exporters estimate, measured rather than interpolated.

A reset is an OffsetCommit without member or generation, which the coordinator accepts only
while the group is Empty; it is refused up front (409) while the group has members, as
``kafka-consumer-groups --reset-offsets`` refuses. It needs READ on the group and on each
topic, Kafka's OffsetCommit rule. ``earliest`` is the log start (the remote tier included),
``latest`` the high watermark, ``timestamp`` the first offset at or after it (the high
watermark when none is), ``offset`` is clamped into [log start, high watermark] as Kafka's
tool does; a named topic means all its partitions, none every partition the group committed.

Share groups (KIP-932) are listed too (``type`` "share", their lag the records not yet
acknowledged); a share group's page has its members with their assignments and epochs and,
per share partition, the start offset, the records in flight and acquired, the log end
offset and the lag (api.rest.v3_share_groups.share_partitions: the partitions' leaders'
figures in a cluster). Share groups have no committed offsets to reset.

In a cluster the list merges the groups every broker coordinates, and a group's page and
its reset are answered by its coordinator (api.rest.peers).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from api.rest.authz import allowed, require, topic_filter
from api.rest.codec import JSONBody, RestError, check_partition, parse_body, read_records
from api.rest.peers import Peers, forwarded, group_coordinator_id
from api.rest.v3_share_groups import share_partitions, shares_of
from broker.broker import EARLIEST_TIMESTAMP as EARLIEST
from broker.broker import LATEST_TIMESTAMP as LATEST
from broker.group_lag import GroupLag, all_group_lags, coordinator_of, group_lag, manager_end_offsets
from broker.groups.types import GroupState, OffsetCommitRequest, TopicPartition
from broker.metrics_history import MetricsHistory
from broker.read_path import FetchRequestPartition
from broker.share.describe import (
    ASSIGNOR,
    ShareGroupView,
    SharePartitionView,
    describe_group,
    partition_views,
)
from hot.errors import StrataError
from kwire.acl import Operation, ResourceType

if TYPE_CHECKING:
    from broker.broker import Broker

TIME_LAG_PARTITIONS = 32


class ResetRequest(BaseModel):
    group: str = Field(min_length=1)
    topic: str | None = None
    to: str = Field(pattern="^(earliest|latest|timestamp|offset)$")
    value: int | None = Field(default=None, description="the timestamp (ms) or the offset")


def _visible_lag(lag: GroupLag, visible: Any) -> GroupLag:
    return dataclasses.replace(lag, partitions=tuple(p for p in lag.partitions if visible(p.topic)))


def groups_console_router(broker: Broker, history: MetricsHistory, peers: Peers) -> APIRouter:
    router = APIRouter(prefix="/console/api", tags=["console"], include_in_schema=False)
    end_offsets = manager_end_offsets(broker.manager)
    limit = broker.config.max_request_bytes

    def group_allowed(request: Request, op: Operation, group: str) -> bool:
        return allowed(broker, request, op, ResourceType.GROUP, group, quiet=True)

    @router.get("/groups")
    async def groups(request: Request) -> Response:
        out: list[dict[str, Any]] = []
        unreachable: list[int] = []
        if not forwarded(request):  # the groups other brokers coordinate
            answers, unreachable = await peers.json_of_each(request, "/console/api/groups")
            for doc in answers.values():
                out.extend(doc["groups"])
        if broker.groups is None:
            out += await share_rows(request)
            return JSONBody({"broker_id": broker.node_id, "groups": out, "unreachable": unreachable})
        coordinator = coordinator_of(broker)
        visible = topic_filter(broker, request)
        listings = [
            g for g in coordinator.list_groups() if group_allowed(request, Operation.DESCRIBE, g.group_id)
        ]
        local: list[dict[str, Any]] = []
        for lag in all_group_lags(coordinator, end_offsets, listings):
            lag = _visible_lag(lag, visible)
            d = lag.description
            local.append(
                {
                    "group_id": d.group_id,
                    "state": d.state.value,
                    "type": d.group_type,
                    "protocol_type": d.protocol_type,
                    "protocol": d.protocol_name,
                    "members": len(d.members),
                    "topics": sorted({p.topic for p in lag.partitions}),
                    "partitions": len(lag.partitions),
                    "total_lag": lag.total_lag,
                }
            )
        local += await share_rows(request)
        # A group moving between coordinators may be listed twice: this broker's answer stays.
        unique: dict[str, dict[str, Any]] = {}
        for g in local + out:
            unique.setdefault(g["group_id"], g)
        rows = [unique[k] for k in sorted(unique)]
        return JSONBody({"broker_id": broker.node_id, "groups": rows, "unreachable": unreachable})

    async def share_rows(request: Request) -> list[dict[str, Any]]:
        """The share groups this broker coordinates, as the list shows them."""
        svc = shares_of(broker)
        if svc is None:
            return []
        svc.expire()
        visible = topic_filter(broker, request)
        rows = []
        for gid in sorted(svc.groups):
            g = describe_group(svc, gid)
            if g is None or not group_allowed(request, Operation.DESCRIBE, gid):
                continue
            views = [v for v in await partition_views(svc, gid, end_offsets) if visible(v.topic)]
            rows.append(
                {
                    "group_id": gid,
                    "state": g.state,
                    "type": "share",
                    "protocol_type": "share",
                    "protocol": ASSIGNOR,
                    "members": len(g.members),
                    "topics": sorted({v.topic for v in views}),
                    "partitions": len(views),
                    "total_lag": sum(v.lag or 0 for v in views),
                }
            )
        return rows

    def share_page(request: Request, g: ShareGroupView, views: list[SharePartitionView]) -> dict[str, Any]:
        visible = topic_filter(broker, request)
        return {
            "broker_id": broker.node_id,
            "group_id": g.group_id,
            "state": g.state,
            "type": "share",
            "protocol_type": "share",
            "protocol": ASSIGNOR,
            "generation_id": g.group_epoch,
            "assignment_epoch": g.assignment_epoch,
            "leader_id": None,
            "total_lag": sum(v.lag or 0 for v in views),
            "total_in_flight": sum(v.in_flight or 0 for v in views),
            "max_time_lag_ms": None,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": None,
                    "client_id": m.client_id,
                    "host": m.client_host,
                    "assignments": [f"{t}-{p}" for t, p in m.assignment if visible(t)],
                    "member_epoch": m.member_epoch,
                    "target": [],
                }
                for m in g.members
            ],
            "partitions": [
                {
                    "topic": v.topic,
                    "partition": v.partition,
                    "start_offset": v.start_offset,
                    "in_flight": v.in_flight,
                    "acquired": v.acquired,
                    "log_end_offset": v.log_end_offset,
                    "lag": v.lag,
                }
                for v in views
            ],
            "history": [],
            "may_reset": False,
        }

    async def first_timestamp(topic: str, partition: int, offset: int) -> int | None:
        try:
            [f] = await broker.reads.fetch(
                [FetchRequestPartition(topic, partition, offset, 16384)],
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=16384,
            )
        except StrataError:
            return None
        if f.error is not None or not f.size:
            return None
        records = await asyncio.to_thread(read_records, f, offset)
        return next((r.timestamp for r in records if r.offset >= offset), None)

    @router.get("/groups/{group:path}")
    async def group(request: Request, group: str) -> Response:
        require(broker, request, Operation.DESCRIBE, ResourceType.GROUP, group)
        await broker.prepare_group(group)
        owner = group_coordinator_id(broker, group)
        if owner != broker.node_id and not forwarded(request):
            return await peers.relay(request, owner)
        svc = shares_of(broker)
        shared = None if svc is None else describe_group(svc, group)
        if shared is not None:
            views = await share_partitions(broker, peers, request, broker.config.cluster_id, group)
            visible = topic_filter(broker, request)
            return JSONBody(share_page(request, shared, [v for v in views if visible(v.topic)]))
        lag = _visible_lag(
            group_lag(coordinator_of(broker), end_offsets, group), topic_filter(broker, request)
        )
        d = lag.description
        now_ms = int(time.time() * 1000)
        lagging = [p for p in lag.partitions if p.lag and p.committed_offset is not None]
        lagging.sort(key=lambda p: -(p.lag or 0))
        ages: dict[tuple[str, int], int] = {}
        for p in lagging[:TIME_LAG_PARTITIONS]:
            ts = await first_timestamp(p.topic, p.partition, p.committed_offset or 0)
            if ts is not None and ts > 0:
                ages[(p.topic, p.partition)] = max(0, now_ms - ts)
        return JSONBody(
            {
                "broker_id": broker.node_id,
                "group_id": d.group_id,
                "state": d.state.value,
                "protocol_type": d.protocol_type,
                "protocol": d.protocol_name,
                "generation_id": d.generation_id,
                "type": d.group_type,  # "consumer": KIP-848, generation_id is the group epoch
                "assignment_epoch": d.assignment_epoch,
                "leader_id": d.leader_id,
                "total_lag": lag.total_lag,
                "max_time_lag_ms": max(ages.values()) if ages else (0 if not lagging else None),
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "assignments": [f"{tp.topic}-{tp.partition}" for tp in m.assigned_partitions],
                        "member_epoch": m.member_epoch if d.group_type == "consumer" else None,
                        "target": [f"{tp.topic}-{tp.partition}" for tp in m.target_partitions],
                    }
                    for m in d.members
                ],
                "partitions": [
                    {
                        "topic": p.topic,
                        "partition": p.partition,
                        "committed_offset": p.committed_offset,
                        "log_end_offset": p.log_end_offset,
                        "lag": p.lag,
                        "time_lag_ms": ages.get((p.topic, p.partition)),
                        "member_id": p.member_id,
                        "client_id": p.client_id,
                    }
                    for p in lag.partitions
                ],
                "history": [{"t": t, "lag": v} for t, v in history.group_series(group)],
                "may_reset": group_allowed(request, Operation.READ, group),
            }
        )

    @router.post("/groups/reset")
    async def reset(request: Request) -> Response:
        req = await parse_body(request, limit, ResetRequest)
        group = req.group
        require(broker, request, Operation.READ, ResourceType.GROUP, group)
        if req.to in ("timestamp", "offset") and req.value is None:
            raise RestError(422, 422, f"resetting to a {req.to} needs a value")
        await broker.prepare_group(group)
        owner = group_coordinator_id(broker, group)
        if owner != broker.node_id and not forwarded(request):
            return await peers.relay(request, owner, method="POST", body=req.model_dump_json().encode())
        coordinator = coordinator_of(broker)
        try:
            d = coordinator.describe_group(group)
        except StrataError:
            d = None
        if d is not None and (d.members or d.state not in (GroupState.EMPTY, GroupState.DEAD)):
            raise RestError(
                409,
                40900,
                f"group {group!r} is {d.state.value} with {len(d.members)} member(s): "
                "offsets can be reset only while the group is empty (stop its consumers first)",
            )
        # As kafka-consumer-groups: a named topic is all of its partitions, otherwise every
        # partition the group has committed.
        if req.topic is not None:
            require(broker, request, Operation.READ, ResourceType.TOPIC, req.topic)
            targets = [TopicPartition(req.topic, p) for p in range(broker.topic(req.topic).partitions)]
        else:
            targets = sorted(coordinator.committed_offsets(group))
        if not targets:
            raise RestError(422, 422, f"group {group!r} has no committed offsets to reset; name a topic")
        for t in sorted({tp.topic for tp in targets}):
            require(broker, request, Operation.READ, ResourceType.TOPIC, t)
        offsets = []
        for tp in targets:
            check_partition(broker.topic(tp.topic), tp.partition)
            start, _ = await broker.list_offset(tp.topic, tp.partition, EARLIEST)
            end, _ = await broker.list_offset(tp.topic, tp.partition, LATEST)
            if req.to == "earliest":
                off = start
            elif req.to == "latest":
                off = end
            elif req.to == "timestamp":
                found, _ = await broker.list_offset(tp.topic, tp.partition, req.value or 0)
                off = end if found < 0 else found
            else:
                off = min(max(req.value or 0, start), end)
            offsets.append((tp, off, -1, None))
        results = await coordinator.commit_offsets(OffsetCommitRequest(group, tuple(offsets)))
        errors = {f"{tp.topic}-{tp.partition}": str(e) for tp, e in results.items() if e is not None}
        if errors:
            raise RestError(409, 40901, "; ".join(f"{k}: {v}" for k, v in sorted(errors.items())))
        return JSONBody(
            {
                "group": group,
                "offsets": [
                    {"topic": tp.topic, "partition": tp.partition, "offset": o} for tp, o, _, _ in offsets
                ],
            }
        )

    return router
