"""Confluent REST v3 consumer groups, their consumers, assignments and lag.

    GET /v3/clusters/{id}/consumer-groups
    GET /v3/clusters/{id}/consumer-groups/{g}
    GET /v3/clusters/{id}/consumer-groups/{g}/consumers[/{consumer}[/assignments]]
    GET /v3/clusters/{id}/consumer-groups/{g}/lags[/{topic}/partitions/{p}]
    GET /v3/clusters/{id}/consumer-groups/{g}/lag-summary

Lag is broker.group_lag's (the same numbers as ``/v1/groups/{g}/lag`` and the Prometheus
gauges): per partition with a committed offset or an owner, the high watermark minus the
committed offset, never negative; ``current_offset`` is the committed offset (null when none
is) and ``lag`` null when either end is unknown. A partition with no owner has
``consumer_id`` and ``client_id`` "" (Confluent's fields are not nullable). The summary's
``max_lag`` is the largest known lag (0 and null fields for a group without partitions),
``total_lag`` their sum.

Every broker answers for the whole cluster: the list merges the groups each live broker
coordinates (asked of them over HTTP, api.rest.peers; a broker that does not answer is
left out), and a named group's routes are answered by its coordinator, the request relayed
there as it came (``AnsweredBy``) unless it was relayed already. ``state`` is Kafka's
state in Confluent's spelling (STABLE, EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE,
DEAD); ``is_simple`` is true for groups that only commit offsets. ``type`` (CLASSIC or CONSUMER)
and a consumer's ``member_epoch`` show KIP-848 consumer groups (broker.groups.consumer_group),
whose state is also ASSIGNING or RECONCILING and whose ``partition_assignor`` is the server
assignor.

Authorization as ``/v1/groups``: the list shows the groups the user may DESCRIBE, a named
group needs DESCRIBE (403 whether it exists or not), lag rows only of topics it may DESCRIBE.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from api.rest.authz import group_visible, require, topic_filter
from api.rest.codec import JSONBody, RestError
from api.rest.models_v3 import (
    ConsumerAssignmentListV3,
    ConsumerAssignmentV3,
    ConsumerGroupLagSummaryV3,
    ConsumerGroupListV3,
    ConsumerGroupV3,
    ConsumerLagListV3,
    ConsumerLagV3,
    ConsumerListV3,
    ConsumerV3,
)
from api.rest.peers import Peers, answered_at_coordinator, group_coordinator_id, with_peers_listing
from api.rest.v3 import V3Context
from broker.group_lag import GroupLag, PartitionLag, coordinator_of, group_lag, manager_end_offsets
from hot.config import INT32_MAX
from hot.errors import StrataError
from kwire.acl import Operation, ResourceType

if TYPE_CHECKING:
    from broker.groups.types import GroupDescription, MemberDescription


def v3_groups_router(ctx: V3Context, peers: Peers) -> APIRouter:
    router = APIRouter(tags=["v3"])
    broker = ctx.broker
    end_offsets = manager_end_offsets(broker.manager)

    def group_v3(request: Request, d: GroupDescription) -> dict[str, Any]:
        g = d.group_id
        return {
            **ctx.resource("KafkaConsumerGroup", request, ["consumer-groups", g], [("consumer-group", g)]),
            "consumer_group_id": g,
            "is_simple": d.protocol_type == "",
            "partition_assignor": d.protocol_name,
            "state": d.state.name,
            "type": d.group_type.upper(),
            "coordinator": ctx.related(request, "brokers", group_coordinator_id(broker, g)),
            "consumers": ctx.related(request, "consumer-groups", g, "consumers"),
            "lag_summary": ctx.related(request, "consumer-groups", g, "lag-summary"),
        }

    def consumer_v3(request: Request, g: str, m: MemberDescription) -> dict[str, Any]:
        parts = ["consumer-groups", g, "consumers", m.member_id]
        return {
            **ctx.resource(
                "KafkaConsumer", request, parts, [("consumer-group", g), ("consumer", m.member_id)]
            ),
            "consumer_group_id": g,
            "consumer_id": m.member_id,
            "instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "member_epoch": m.member_epoch if m.member_epoch >= 0 else None,
            "assignments": ctx.related(request, *parts, "assignments"),
        }

    def lag_v3(request: Request, g: str, p: PartitionLag) -> dict[str, Any]:
        parts = ["consumer-groups", g, "lags", p.topic, "partitions", p.partition]
        crn = [("consumer-group", g), ("lag", p.topic), ("partition", p.partition)]
        return {
            **ctx.resource("KafkaConsumerLag", request, parts, crn),
            "consumer_group_id": g,
            "topic_name": p.topic,
            "partition_id": p.partition,
            "current_offset": p.committed_offset,
            "log_end_offset": p.log_end_offset,
            "lag": p.lag,
            "consumer_id": p.member_id or "",
            "instance_id": p.group_instance_id,
            "client_id": p.client_id or "",
        }

    async def described(request: Request, cluster_id: str, group: str) -> GroupDescription:
        ctx.check(cluster_id)
        require(broker, request, Operation.DESCRIBE, ResourceType.GROUP, group)
        answered_at_coordinator(broker, request, group)
        await broker.prepare_group(group)  # what FindCoordinator does for a Kafka client
        return coordinator_of(broker).describe_group(group)

    async def lag_of(request: Request, cluster_id: str, group: str) -> GroupLag:
        ctx.check(cluster_id)
        require(broker, request, Operation.DESCRIBE, ResourceType.GROUP, group)
        answered_at_coordinator(broker, request, group)
        await broker.prepare_group(group)
        lag = group_lag(coordinator_of(broker), end_offsets, group)
        visible = topic_filter(broker, request)
        return dataclasses.replace(lag, partitions=tuple(p for p in lag.partitions if visible(p.topic)))

    def member(d: GroupDescription, consumer: str) -> MemberDescription:
        for m in d.members:
            if m.member_id == consumer:
                return m
        raise RestError(404, 404, f"group {d.group_id!r} has no consumer {consumer!r}")

    @router.get("/v3/clusters/{cluster_id}/consumer-groups", response_model=ConsumerGroupListV3)
    async def list_groups(request: Request, cluster_id: str) -> Response:
        ctx.check(cluster_id)
        coordinator = coordinator_of(broker)
        data = []
        for listing in sorted(coordinator.list_groups(), key=lambda g: g.group_id):
            if not group_visible(broker, request, listing.group_id):
                continue
            try:
                data.append(group_v3(request, coordinator.describe_group(listing.group_id)))
            except StrataError:
                continue  # deleted (or moved) since the listing
        # the groups the other brokers coordinate, each answered for the same principal
        data = await with_peers_listing(peers, request, data, "consumer_group_id")
        return ctx.listing("KafkaConsumerGroupList", request, ["consumer-groups"], data)

    @router.get("/v3/clusters/{cluster_id}/consumer-groups/{group}", response_model=ConsumerGroupV3)
    async def get_group(request: Request, cluster_id: str, group: str) -> Response:
        return JSONBody(group_v3(request, await described(request, cluster_id, group)))

    @router.get("/v3/clusters/{cluster_id}/consumer-groups/{group}/consumers", response_model=ConsumerListV3)
    async def list_consumers(request: Request, cluster_id: str, group: str) -> Response:
        d = await described(request, cluster_id, group)
        data = [consumer_v3(request, group, m) for m in sorted(d.members, key=lambda m: m.member_id)]
        return ctx.listing("KafkaConsumerList", request, ["consumer-groups", group, "consumers"], data)

    @router.get(
        "/v3/clusters/{cluster_id}/consumer-groups/{group}/consumers/{consumer}", response_model=ConsumerV3
    )
    async def get_consumer(request: Request, cluster_id: str, group: str, consumer: str) -> Response:
        d = await described(request, cluster_id, group)
        return JSONBody(consumer_v3(request, group, member(d, consumer)))

    def assignments(
        request: Request, group: str, m: MemberDescription, only: tuple[str, int] | None = None
    ) -> list[dict[str, Any]]:
        visible = topic_filter(broker, request)
        base = ["consumer-groups", group, "consumers", m.member_id, "assignments"]
        out = []
        for tp in sorted(m.assigned_partitions):
            if not visible(tp.topic) or (only is not None and only != (tp.topic, tp.partition)):
                continue
            crn: list[tuple[str, object]] = [("consumer-group", group), ("consumer", m.member_id)]
            crn += [("assignment", tp.topic), ("partition", tp.partition)]
            parts = [*base, tp.topic, "partitions", tp.partition]
            out.append(
                {
                    **ctx.resource("KafkaConsumerAssignment", request, parts, crn),
                    "consumer_group_id": group,
                    "consumer_id": m.member_id,
                    "topic_name": tp.topic,
                    "partition_id": tp.partition,
                    "partition": ctx.related(request, "topics", tp.topic, "partitions", tp.partition),
                    "lag": ctx.related(
                        request, "consumer-groups", group, "lags", tp.topic, "partitions", tp.partition
                    ),
                }
            )
        return out

    @router.get(
        "/v3/clusters/{cluster_id}/consumer-groups/{group}/consumers/{consumer}/assignments",
        response_model=ConsumerAssignmentListV3,
    )
    async def list_assignments(request: Request, cluster_id: str, group: str, consumer: str) -> Response:
        m = member(await described(request, cluster_id, group), consumer)
        base = ["consumer-groups", group, "consumers", consumer, "assignments"]
        return ctx.listing("KafkaConsumerAssignmentList", request, base, assignments(request, group, m))

    @router.get(
        "/v3/clusters/{cluster_id}/consumer-groups/{group}/consumers/{consumer}/assignments/{topic}"
        "/partitions/{partition}",
        response_model=ConsumerAssignmentV3,
    )
    async def get_assignment(
        request: Request,
        cluster_id: str,
        group: str,
        consumer: str,
        topic: str,
        partition: int = Path(ge=0, le=INT32_MAX),
    ) -> Response:
        m = member(await described(request, cluster_id, group), consumer)
        require(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, topic)
        found = assignments(request, group, m, (topic, partition))
        if not found:
            raise RestError(404, 404, f"consumer {consumer!r} is not assigned {topic}-{partition}")
        return JSONBody(found[0])

    @router.get("/v3/clusters/{cluster_id}/consumer-groups/{group}/lags", response_model=ConsumerLagListV3)
    async def list_lags(request: Request, cluster_id: str, group: str) -> Response:
        lag = await lag_of(request, cluster_id, group)
        data = [lag_v3(request, group, p) for p in lag.partitions]
        return ctx.listing("KafkaConsumerLagList", request, ["consumer-groups", group, "lags"], data)

    @router.get(
        "/v3/clusters/{cluster_id}/consumer-groups/{group}/lags/{topic}/partitions/{partition}",
        response_model=ConsumerLagV3,
    )
    async def get_lag(
        request: Request, cluster_id: str, group: str, topic: str, partition: int = Path(ge=0, le=INT32_MAX)
    ) -> Response:
        ctx.check(cluster_id)
        require(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, topic)
        for p in (await lag_of(request, cluster_id, group)).partitions:
            if (p.topic, p.partition) == (topic, partition):
                return JSONBody(lag_v3(request, group, p))
        raise RestError(404, 404, f"group {group!r} has no offset or owner for {topic}-{partition}")

    @router.get(
        "/v3/clusters/{cluster_id}/consumer-groups/{group}/lag-summary",
        response_model=ConsumerGroupLagSummaryV3,
    )
    async def get_lag_summary(request: Request, cluster_id: str, group: str) -> Response:
        lag = await lag_of(request, cluster_id, group)
        known = [p for p in lag.partitions if p.lag is not None]
        top = max(known, key=lambda p: p.lag or 0, default=lag.partitions[0] if lag.partitions else None)
        parts = ["consumer-groups", group, "lag-summary"]
        out: dict[str, Any] = {
            **ctx.resource("KafkaConsumerGroupLagSummary", request, parts, [("consumer-group", group)]),
            "consumer_group_id": group,
            "max_lag_consumer_id": (top.member_id if top else None) or "",
            "max_lag_instance_id": top.group_instance_id if top else None,
            "max_lag_client_id": (top.client_id if top else None) or "",
            "max_lag_topic_name": top.topic if top else None,
            "max_lag_partition_id": top.partition if top else None,
            "max_lag": (top.lag if top else None) or 0,
            "total_lag": lag.total_lag,
            "max_lag_consumer": (
                ctx.related(request, "consumer-groups", group, "consumers", top.member_id)
                if top is not None and top.member_id
                else None
            ),
            "max_lag_partition": (
                ctx.related(request, "topics", top.topic, "partitions", top.partition)
                if top is not None
                else None
            ),
        }
        return JSONBody(out)

    return router
