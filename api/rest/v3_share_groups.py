"""Confluent REST v3 share groups (KIP-932), in the shapes of Confluent's Share Group (v3)
API, and their share partitions' start offsets, in-flight records and lag.

    GET /v3/clusters/{id}/share-groups
    GET, DELETE /v3/clusters/{id}/share-groups/{g}
    GET /v3/clusters/{id}/share-groups/{g}/assigned-topic-partitions/{topic}/{p}
    GET /v3/clusters/{id}/share-groups/{g}/consumers[/{consumer}[/assignments[/{topic}/partitions/{p}]]]
    GET /v3/clusters/{id}/share-groups/{g}/lags[/{topic}/partitions/{p}]     (Strata's)

Confluent's resources and fields (``share_group_id``, ``state``, ``consumer_count``,
``partition_count``, ``assigned_topic_partitions``; a consumer's ``group_id``, ``consumer_id``,
``client_id``, ``assignments``); Strata adds ``partition_assignor``, ``group_epoch``,
``assignment_epoch`` and ``lags`` to a group, ``member_epoch`` and ``host`` to a consumer, and
the ``lags`` resources, which Confluent's API has not: per share partition its start offset
(``start_offset``, -1 with no state yet), ``in_flight`` (records of the window not yet
acknowledged), ``acquired`` (held by a consumer now; null where the figures come from the
persisted state), ``log_end_offset`` and ``lag`` (broker.share.describe).

Every broker answers for the whole cluster, as for consumer groups: the list merges the
share groups each live broker coordinates (asked over HTTP, api.rest.peers); a named group is
answered by its coordinator (the request relayed there). A share partition's figures live
on the partition's leader: the coordinator reads the persisted state and asks the other
brokers for the share partitions they serve (``?held=true``, answered from memory and never
forwarded), whose figures win. A group this broker does not know as a share group is a 404
(Confluent's error body).

A share consumer's id may hold ``/`` (librdkafka's are base64): the consumer routes take
the rest of the path as the id, the more specific ones (assignments) matched first.

Authorization as ShareGroupDescribe: the list shows the groups the user may DESCRIBE, a
named group needs DESCRIBE (403 whether it exists or not), the assignments and lag rows
show only topics it may DESCRIBE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from api.rest.authz import group_visible, require, topic_filter
from api.rest.codec import JSONBody, RestError
from api.rest.models_v3 import (
    ShareConsumerAssignmentListV3,
    ShareConsumerAssignmentV3,
    ShareConsumerListV3,
    ShareConsumerV3,
    ShareGroupLagListV3,
    ShareGroupLagV3,
    ShareGroupListV3,
    ShareGroupTopicPartitionV3,
    ShareGroupV3,
)
from api.rest.peers import Peers, answered_at_coordinator, forwarded, group_coordinator_id, with_peers_listing
from api.rest.v3 import V3Context
from broker.group_lag import manager_end_offsets
from broker.share.describe import (
    ASSIGNOR,
    ShareGroupView,
    ShareMemberView,
    SharePartitionView,
    describe_group,
    held_views,
    partition_views,
)
from hot.config import INT32_MAX
from kwire.acl import Operation, ResourceType

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.share.service import ShareService


def shares_of(broker: Broker) -> ShareService | None:
    return getattr(broker, "shares", None)


def _view_of(row: dict[str, Any]) -> SharePartitionView | None:
    """A ``held`` row another broker answered, back as a view (None: not one)."""
    try:
        return SharePartitionView(
            topic=str(row["topic_name"]),
            partition=int(row["partition_id"]),
            start_offset=int(row["start_offset"]),
            in_flight=row["in_flight"],
            acquired=row["acquired"],
            log_end_offset=row["log_end_offset"],
            lag=row["lag"],
            served_here=True,
        )
    except (KeyError, TypeError, ValueError):
        return None


async def share_partitions(
    broker: Broker, peers: Peers, request: Request, cluster_id: str, group: str
) -> list[SharePartitionView]:
    """The group's share partitions as its coordinator (this broker) sees them, with the
    figures of those another broker serves taken from that broker (module docstring)."""
    svc = shares_of(broker)
    if svc is None:
        return []
    end_offsets = manager_end_offsets(broker.manager)
    path = f"/v3/clusters/{quote(cluster_id, safe='')}/share-groups/{quote(group, safe='')}/lags?held=true"
    answers, _ = await peers.json_of_each(request, path)
    theirs: dict[tuple[str, int], SharePartitionView] = {}
    for doc in answers.values():
        for row in doc.get("data", []) if isinstance(doc, dict) else []:
            v = _view_of(row) if isinstance(row, dict) else None
            if v is not None:
                theirs[(v.topic, v.partition)] = v
    views = await partition_views(svc, group, end_offsets, theirs)
    # this broker's own copy wins where it serves the partition (it is the leader)
    return [v if v.served_here else theirs.get((v.topic, v.partition), v) for v in views]


def v3_share_groups_router(ctx: V3Context, peers: Peers) -> APIRouter:
    router = APIRouter(tags=["v3"])
    broker = ctx.broker
    end_offsets = manager_end_offsets(broker.manager)

    def group_v3(request: Request, g: ShareGroupView) -> dict[str, Any]:
        gid = g.group_id
        visible = topic_filter(broker, request)
        assigned = [tp for tp in g.assigned if visible(tp[0])]
        return {
            **ctx.resource("KafkaShareGroup", request, ["share-groups", gid], [("share-group", gid)]),
            "share_group_id": gid,
            "state": g.state.upper(),
            "coordinator": ctx.related(request, "brokers", group_coordinator_id(broker, gid)),
            "consumers": ctx.related(request, "share-groups", gid, "consumers"),
            "consumer_count": len(g.members),
            "partition_count": len(assigned),
            "assigned_topic_partitions": [topic_partition_v3(request, gid, t, p) for t, p in assigned],
            "partition_assignor": ASSIGNOR,
            "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch,
            "lags": ctx.related(request, "share-groups", gid, "lags"),
        }

    def topic_partition_v3(request: Request, gid: str, topic: str, partition: int) -> dict[str, Any]:
        parts = ["share-groups", gid, "assigned-topic-partitions", topic, partition]
        crn = [("share-group", gid), ("topic-partition", f"{topic}:{partition}")]
        return {
            **ctx.resource("KafkaShareGroupTopicPartition", request, parts, crn),
            "topic_name": topic,
            "partition_id": partition,
            "partition": ctx.related(request, "topics", topic, "partitions", partition),
        }

    def consumer_v3(request: Request, gid: str, m: ShareMemberView) -> dict[str, Any]:
        parts = ["share-groups", gid, "consumers", m.member_id]
        return {
            **ctx.resource(
                "KafkaShareGroupConsumer", request, parts, [("share-group", gid), ("consumer", m.member_id)]
            ),
            "group_id": gid,
            "consumer_id": m.member_id,
            "client_id": m.client_id,
            "member_epoch": m.member_epoch,
            "host": m.client_host,
            "assignments": ctx.related(request, *parts, "assignments"),
        }

    def assignments_v3(
        request: Request, gid: str, m: ShareMemberView, only: tuple[str, int] | None = None
    ) -> list[dict[str, Any]]:
        visible = topic_filter(broker, request)
        out = []
        for topic, partition in m.assignment:
            if not visible(topic) or (only is not None and only != (topic, partition)):
                continue
            parts: list[object] = ["share-groups", gid, "consumers", m.member_id, "assignments"]
            parts += [topic, "partitions", partition]
            crn: list[tuple[str, object]] = [("share-group", gid), ("consumer", m.member_id)]
            crn += [("assignment", topic), ("partition", partition)]
            out.append(
                {
                    **ctx.resource("KafkaShareGroupConsumerAssignment", request, parts, crn),
                    "group_id": gid,
                    "consumer_id": m.member_id,
                    "topic_name": topic,
                    "partition_id": partition,
                    "partition": ctx.related(request, "topics", topic, "partitions", partition),
                    "lag": ctx.related(request, "share-groups", gid, "lags", topic, "partitions", partition),
                }
            )
        return out

    def lag_v3(request: Request, gid: str, v: SharePartitionView) -> dict[str, Any]:
        parts = ["share-groups", gid, "lags", v.topic, "partitions", v.partition]
        crn = [("share-group", gid), ("lag", v.topic), ("partition", v.partition)]
        return {
            **ctx.resource("KafkaShareGroupLag", request, parts, crn),
            "group_id": gid,
            "topic_name": v.topic,
            "partition_id": v.partition,
            "start_offset": v.start_offset,
            "in_flight": v.in_flight,
            "acquired": v.acquired,
            "log_end_offset": v.log_end_offset,
            "lag": v.lag,
            "partition": ctx.related(request, "topics", v.topic, "partitions", v.partition),
        }

    async def described(request: Request, cluster_id: str, group: str) -> ShareGroupView:
        ctx.check(cluster_id)
        require(broker, request, Operation.DESCRIBE, ResourceType.GROUP, group)
        answered_at_coordinator(broker, request, group)
        svc = shares_of(broker)
        g = None if svc is None else describe_group(svc, group)
        if g is None:
            raise RestError(404, 404, f"share group {group!r} not found")
        return g

    def member(g: ShareGroupView, consumer: str) -> ShareMemberView:
        for m in g.members:
            if m.member_id == consumer:
                return m
        raise RestError(404, 404, f"share group {g.group_id!r} has no consumer {consumer!r}")

    @router.get("/v3/clusters/{cluster_id}/share-groups", response_model=ShareGroupListV3)
    async def list_groups(request: Request, cluster_id: str) -> Response:
        ctx.check(cluster_id)
        svc = shares_of(broker)
        data = []
        if svc is not None:
            svc.expire()
            for gid in sorted(svc.groups):
                g = describe_group(svc, gid)
                if g is not None and group_visible(broker, request, gid):
                    data.append(group_v3(request, g))
        # the share groups the other brokers coordinate
        data = await with_peers_listing(peers, request, data, "share_group_id")
        return ctx.listing("KafkaShareGroupList", request, ["share-groups"], data)

    @router.get("/v3/clusters/{cluster_id}/share-groups/{group}", response_model=ShareGroupV3)
    async def get_group(request: Request, cluster_id: str, group: str) -> Response:
        return JSONBody(group_v3(request, await described(request, cluster_id, group)))

    @router.delete("/v3/clusters/{cluster_id}/share-groups/{group}", status_code=204)
    async def delete_group(request: Request, cluster_id: str, group: str) -> Response:
        """DeleteGroups of a share group (DELETE on the group): its state on
        ``__share_group_state`` goes too; 409 while it has members."""
        ctx.check(cluster_id)
        require(broker, request, Operation.DELETE, ResourceType.GROUP, group)
        answered_at_coordinator(broker, request, group)
        svc = shares_of(broker)
        if svc is None or group not in svc.groups:
            raise RestError(404, 404, f"share group {group!r} not found")
        svc.expire()
        await svc.delete_group(group)
        return Response(status_code=204)

    @router.get(
        "/v3/clusters/{cluster_id}/share-groups/{group}/assigned-topic-partitions/{topic}/{partition}",
        response_model=ShareGroupTopicPartitionV3,
    )
    async def get_assigned(
        request: Request, cluster_id: str, group: str, topic: str, partition: int = Path(ge=0, le=INT32_MAX)
    ) -> Response:
        g = await described(request, cluster_id, group)
        require(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, topic)
        if (topic, partition) not in g.assigned:
            raise RestError(404, 404, f"share group {group!r} has no member assigned {topic}-{partition}")
        return JSONBody(topic_partition_v3(request, group, topic, partition))

    @router.get(
        "/v3/clusters/{cluster_id}/share-groups/{group}/consumers", response_model=ShareConsumerListV3
    )
    async def list_consumers(request: Request, cluster_id: str, group: str) -> Response:
        g = await described(request, cluster_id, group)
        data = [consumer_v3(request, group, m) for m in g.members]
        return ctx.listing("KafkaShareConsumerList", request, ["share-groups", group, "consumers"], data)

    @router.get(
        "/v3/clusters/{cluster_id}/share-groups/{group}/consumers/{consumer:path}/assignments/{topic}"
        "/partitions/{partition}",
        response_model=ShareConsumerAssignmentV3,
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
        found = assignments_v3(request, group, m, (topic, partition))
        if not found:
            raise RestError(404, 404, f"consumer {consumer!r} is not assigned {topic}-{partition}")
        return JSONBody(found[0])

    @router.get(
        "/v3/clusters/{cluster_id}/share-groups/{group}/consumers/{consumer:path}/assignments",
        response_model=ShareConsumerAssignmentListV3,
    )
    async def list_assignments(request: Request, cluster_id: str, group: str, consumer: str) -> Response:
        m = member(await described(request, cluster_id, group), consumer)
        base = ["share-groups", group, "consumers", consumer, "assignments"]
        return ctx.listing(
            "KafkaShareGroupConsumerAssignmentList", request, base, assignments_v3(request, group, m)
        )

    @router.get(
        "/v3/clusters/{cluster_id}/share-groups/{group}/consumers/{consumer:path}",
        response_model=ShareConsumerV3,
    )
    async def get_consumer(request: Request, cluster_id: str, group: str, consumer: str) -> Response:
        g = await described(request, cluster_id, group)
        return JSONBody(consumer_v3(request, group, member(g, consumer)))

    async def lags_of(request: Request, cluster_id: str, group: str, held: bool) -> list[SharePartitionView]:
        ctx.check(cluster_id)
        require(broker, request, Operation.DESCRIBE, ResourceType.GROUP, group)
        visible = topic_filter(broker, request)
        svc = shares_of(broker)
        if held and forwarded(request):  # a coordinator asking for what this broker serves
            views = [] if svc is None else held_views(svc, group, end_offsets)
        else:
            await described(request, cluster_id, group)
            views = await share_partitions(broker, peers, request, cluster_id, group)
        return [v for v in views if visible(v.topic)]

    @router.get("/v3/clusters/{cluster_id}/share-groups/{group}/lags", response_model=ShareGroupLagListV3)
    async def list_lags(request: Request, cluster_id: str, group: str, held: bool = False) -> Response:
        data = [lag_v3(request, group, v) for v in await lags_of(request, cluster_id, group, held)]
        return ctx.listing("KafkaShareGroupLagList", request, ["share-groups", group, "lags"], data)

    @router.get(
        "/v3/clusters/{cluster_id}/share-groups/{group}/lags/{topic}/partitions/{partition}",
        response_model=ShareGroupLagV3,
    )
    async def get_lag(
        request: Request, cluster_id: str, group: str, topic: str, partition: int = Path(ge=0, le=INT32_MAX)
    ) -> Response:
        ctx.check(cluster_id)
        require(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, topic)
        for v in await lags_of(request, cluster_id, group, False):
            if (v.topic, v.partition) == (topic, partition):
                return JSONBody(lag_v3(request, group, v))
        raise RestError(404, 404, f"share group {group!r} has no share partition {topic}-{partition}")

    return router
