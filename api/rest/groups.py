"""REST routes of consumer groups: the group list and per-partition lag.

``GET /v1/groups`` lists every group with its state, protocol and member count;
``GET /v1/groups/{group}/lag`` gives, per topic and partition, the committed offset, the
log end offset (the high watermark, as Kafka's tools report it), the lag and the member
that owns the partition (definitions in broker.group_lag). An unknown group is 404 with the
usual error body (GroupIdNotFoundError through kwire.error_table.ERROR_TABLE).

With authorization on, the list shows the groups the user may DESCRIBE; a group's lag
needs DESCRIBE on it (403 otherwise, known group or not) and lists only the partitions of
topics the user may DESCRIBE, ``total_lag`` summing those: Kafka's OffsetFetch leaves the
others out the same way.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from api.rest.authz import group_visible, require, topic_filter
from api.rest.codec import JSONBody
from broker.group_lag import coordinator_of, group_lag, manager_end_offsets
from hot.errors import StrataError
from kwire.acl import Operation, ResourceType

if TYPE_CHECKING:
    from broker.broker import Broker


class GroupSummaryV1(BaseModel):
    group_id: str
    state: str = Field(description="Empty, PreparingRebalance, CompletingRebalance, Stable or Dead")
    protocol_type: str = Field(description='"consumer" for Kafka consumers; "" for offsets-only groups')
    protocol: str = Field(description="the selected assignor, or empty")
    generation_id: int
    members: int


class GroupListV1(BaseModel):
    groups: list[GroupSummaryV1]


class GroupMemberV1(BaseModel):
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    partitions: int = Field(description="partitions assigned to it")


class PartitionLagV1(BaseModel):
    topic: str
    partition: int
    committed_offset: int | None = Field(description="null when nothing is committed")
    log_end_offset: int | None = Field(description="high watermark; null if not served by this broker")
    lag: int | None = Field(description="log_end_offset - committed_offset, never negative")
    member_id: str | None
    client_id: str | None
    host: str | None


class GroupLagV1(BaseModel):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    generation_id: int
    total_lag: int
    members: list[GroupMemberV1]
    partitions: list[PartitionLagV1]


def groups_router(broker: Broker) -> APIRouter:
    router = APIRouter(tags=["groups"])
    end_offsets = manager_end_offsets(broker.manager)

    @router.get("/v1/groups", response_model=GroupListV1)
    async def list_groups(request: Request) -> Response:
        coordinator = coordinator_of(broker)
        out = []
        for listing in coordinator.list_groups():
            if not group_visible(broker, request, listing.group_id):
                continue
            try:
                d = coordinator.describe_group(listing.group_id)
            except StrataError:
                continue  # deleted (or moved) since the listing
            out.append(
                {
                    "group_id": d.group_id,
                    "state": d.state.value,
                    "protocol_type": d.protocol_type,
                    "protocol": d.protocol_name,
                    "generation_id": d.generation_id,
                    "members": len(d.members),
                }
            )
        return JSONBody({"groups": out})

    @router.get("/v1/groups/{group}/lag", response_model=GroupLagV1)
    async def get_group_lag(request: Request, group: str) -> Response:
        require(broker, request, Operation.DESCRIBE, ResourceType.GROUP, group)
        await broker.prepare_group(group)  # what FindCoordinator does for a Kafka client
        lag = group_lag(coordinator_of(broker), end_offsets, group)
        visible = topic_filter(broker, request)
        lag = dataclasses.replace(lag, partitions=tuple(p for p in lag.partitions if visible(p.topic)))
        d = lag.description
        return JSONBody(
            {
                "group_id": d.group_id,
                "state": d.state.value,
                "protocol_type": d.protocol_type,
                "protocol": d.protocol_name,
                "generation_id": d.generation_id,
                "total_lag": lag.total_lag,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "partitions": len(m.assigned_partitions),
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
                        "member_id": p.member_id,
                        "client_id": p.client_id,
                        "host": p.client_host,
                    }
                    for p in lag.partitions
                ],
            }
        )

    return router
