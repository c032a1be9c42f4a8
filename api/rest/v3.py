"""Confluent REST v3 cluster resources: clusters, topics, partitions, replicas, partition
reassignments, brokers and ACLs (configs: api.rest.v3_configs; consumer groups:
api.rest.v3_groups; produce: api.rest.v3_records).

Every answer describes the whole cluster as this broker's view of the metadata store sees
it, whichever broker serves the request: leaders, replicas and in-sync replicas come from
the partition states, brokers from their registrations. Every ``related`` link a v3
resource carries answers 200 here (tests/api/test_rest_v3.py walks them), including a
partition's ``reassignment`` when none runs: its adding/removing lists are then empty
(Confluent answers 404 there).

Authorization (api.rest.authz): a topic and its partitions, replicas and reassignments need
DESCRIBE on the topic (listings leave out what the user may not describe); brokers are
shown to anyone, as Kafka's Metadata shows them; the cluster-wide reassignment list and the
ACLs need DESCRIBE on the cluster. With authorization off there are no ACLs: the list is
empty (Kafka's DescribeAcls answers SECURITY_DISABLED; a REST listing of none says the same
without failing the clients that walk the links).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from api.rest.authz import require_cluster, require_create, require_topic, topic_filter, topic_visible
from api.rest.codec import (
    JSON,
    JSONBody,
    RestError,
    check_partition,
    media_type_of,
    parse_body,
    request_body_spec,
)
from api.rest.models import ClusterListV3, ClusterV3, CreateTopicRequest, TopicListV3, TopicV3
from api.rest.models_v3 import (
    AclListV3,
    BrokerListV3,
    BrokerV3,
    PartitionListV3,
    PartitionV3,
    ReassignmentListV3,
    ReassignmentV3,
    ReplicaListV3,
    ReplicaV3,
)
from hot.config import INT32_MAX
from hot.errors import UnknownTopicOrPartitionError
from hot.topics import TopicInfo
from kwire.acl import AclError, AclFilter, Operation, PatternType, Permission, ResourceType

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.metadata import TopicAssignment

# A path segment of "-" means "every": Confluent's /topics/-/partitions/-/reassignment.
ALL = "-"


class V3Context:
    """The URLs, CRNs and envelopes every v3 resource shares, and the cluster check."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @property
    def cluster_id(self) -> str:
        return self.broker.config.cluster_id

    def check(self, cluster_id: str) -> None:
        if cluster_id != self.cluster_id:
            raise RestError(404, 404, f"cluster {cluster_id!r} not found")

    def url(self, request: Request, *parts: object) -> str:
        """``/v3/clusters/{id}/<parts>`` on the host the client asked (segments quoted)."""
        base = str(request.base_url).rstrip("/") + "/v3/clusters/" + quote(self.cluster_id, safe="")
        return "/".join([base, *(quote(str(p), safe="-") for p in parts)])

    def related(self, request: Request, *parts: object) -> dict[str, str]:
        return {"related": self.url(request, *parts)}

    def resource(
        self, kind: str, request: Request, parts: Iterable[object], crn: Iterable[tuple[str, object]]
    ) -> dict[str, Any]:
        """``kind``, ``metadata`` and ``cluster_id`` of one resource."""
        name = "/".join([f"kafka={self.cluster_id}", *(f"{k}={v}" for k, v in crn)])
        return {
            "kind": kind,
            "metadata": {"self": self.url(request, *parts), "resource_name": f"crn:///{name}"},
            "cluster_id": self.cluster_id,
        }

    def listing(
        self, kind: str, request: Request, parts: Iterable[object], data: list[dict[str, Any]]
    ) -> JSONBody:
        self_url = self.url(request, *parts)
        if request.url.query:
            self_url += "?" + request.url.query
        return JSONBody({"kind": kind, "metadata": {"self": self_url, "next": None}, "data": data})

    # -- the cluster's metadata -------------------------------------------------------------

    def assignment(self, topic: str) -> TopicAssignment:
        va = self.broker.replicas.view.topics.get(topic)
        if va is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
        return va.value

    def controller_id(self) -> int:
        controller = self.broker.replicas.view.controller
        return controller.value.broker_id if controller is not None else self.broker.node_id

    def leader(self, topic: str, partition: int) -> int | None:
        state = self.broker.replicas.view.partition_state(topic, partition)
        return state.leader if state is not None and state.has_leader else None

    def isr(self, topic: str, partition: int) -> tuple[int, ...]:
        state = self.broker.replicas.view.partition_state(topic, partition)
        return state.isr if state is not None else ()


def _topics_of(ctx: V3Context, request: Request, topic: str) -> Iterator[str]:
    """One topic (DESCRIBE required) or, for ``-``, every topic the user may describe."""
    if topic != ALL:
        require_topic(ctx.broker, request, Operation.DESCRIBE, topic)
        ctx.assignment(topic)
        yield topic
        return
    visible = topic_filter(ctx.broker, request)
    yield from (t for t in sorted(ctx.broker.replicas.view.topics) if visible(t))


def v3_router(ctx: V3Context) -> APIRouter:
    router = APIRouter(tags=["v3"])
    broker = ctx.broker
    limit = broker.config.max_request_bytes

    # -- clusters ---------------------------------------------------------------------------

    def cluster_v3(request: Request) -> dict[str, Any]:
        return {
            **ctx.resource("KafkaCluster", request, [], []),
            "controller": ctx.related(request, "brokers", ctx.controller_id()),
            "acls": ctx.related(request, "acls"),
            "brokers": ctx.related(request, "brokers"),
            "broker_configs": ctx.related(request, "broker-configs"),
            "consumer_groups": ctx.related(request, "consumer-groups"),
            "topics": ctx.related(request, "topics"),
            "partition_reassignments": ctx.related(request, "topics", ALL, "partitions", ALL, "reassignment"),
        }

    @router.get("/v3/clusters", response_model=ClusterListV3)
    async def list_clusters(request: Request) -> Response:
        url = str(request.base_url).rstrip("/") + "/v3/clusters"
        return JSONBody(
            {
                "kind": "KafkaClusterList",
                "metadata": {"self": url, "next": None},
                "data": [cluster_v3(request)],
            }
        )

    @router.get("/v3/clusters/{cluster_id}", response_model=ClusterV3)
    async def get_cluster(request: Request, cluster_id: str) -> Response:
        ctx.check(cluster_id)
        return JSONBody(cluster_v3(request))

    # -- topics -----------------------------------------------------------------------------

    def topic_v3(request: Request, info: TopicInfo, replication_factor: int | None = None) -> dict[str, Any]:
        name = info.name
        return {
            **ctx.resource("KafkaTopic", request, ["topics", name], [("topic", name)]),
            "topic_name": name,
            "is_internal": name.startswith("__"),
            "replication_factor": replication_factor or broker.replication_factor(name),
            "partitions_count": info.partitions,
            "partitions": ctx.related(request, "topics", name, "partitions"),
            "configs": ctx.related(request, "topics", name, "configs"),
            "partition_reassignments": ctx.related(
                request, "topics", name, "partitions", ALL, "reassignment"
            ),
            "authorized_operations": [],
        }

    @router.get("/v3/clusters/{cluster_id}/topics", response_model=TopicListV3)
    async def list_topics(request: Request, cluster_id: str) -> Response:
        ctx.check(cluster_id)
        topics = sorted(
            (t for t in broker.topics() if topic_visible(broker, request, t.name)), key=lambda t: t.name
        )
        return ctx.listing("KafkaTopicList", request, ["topics"], [topic_v3(request, t) for t in topics])

    @router.post(
        "/v3/clusters/{cluster_id}/topics",
        response_model=TopicV3,
        status_code=201,
        openapi_extra=request_body_spec((JSON, CreateTopicRequest)),
    )
    async def create_topic(request: Request, cluster_id: str) -> Response:
        ctx.check(cluster_id)
        media = media_type_of(request)
        if media != JSON and not (media.startswith("application/") and media.endswith("+json")):
            raise RestError(415, 415, f"unsupported Content-Type {media or '(none)'!r}: use {JSON}")
        req = await parse_body(request, limit, CreateTopicRequest)
        require_create(broker, request, req.topic_name)
        configs = {c.name: c.value for c in req.configs if c.value is not None}
        partitions = -1 if req.partitions_count is None else req.partitions_count
        replication = -1 if req.replication_factor is None else req.replication_factor
        info = await broker.admin_create_topic(
            req.topic_name, partitions, replication, configs, validate_only=req.validate_only
        )
        # validate_only: nothing exists to ask; answer what was asked for.
        asked = (replication if replication != -1 else None) if req.validate_only else None
        return JSONBody(topic_v3(request, info, asked or (1 if req.validate_only else None)), status_code=201)

    @router.get("/v3/clusters/{cluster_id}/topics/{topic}", response_model=TopicV3)
    async def get_topic(request: Request, cluster_id: str, topic: str) -> Response:
        ctx.check(cluster_id)
        require_topic(broker, request, Operation.DESCRIBE, topic)
        return JSONBody(topic_v3(request, broker.topic(topic)))

    @router.delete("/v3/clusters/{cluster_id}/topics/{topic}", status_code=204, response_class=Response)
    async def delete_topic(request: Request, cluster_id: str, topic: str) -> Response:
        ctx.check(cluster_id)
        require_topic(broker, request, Operation.DELETE, topic)
        broker.topic(topic)
        await broker.admin_delete_topic(topic)  # on the loop: it wakes fetch waiters
        return Response(status_code=204)

    # -- reassignments (literal "-" routes first: "-" is not a partition number) -------------

    def reassignment_v3(request: Request, topic: str, p: int, a: TopicAssignment) -> dict[str, Any]:
        parts = ["topics", topic, "partitions", p, "reassignment"]
        return {
            **ctx.resource("KafkaReassignment", request, parts, [("topic", topic), ("partition", p)]),
            "topic_name": topic,
            "partition_id": p,
            "adding_replicas": list(a.adding.get(p, ())),
            "removing_replicas": list(a.removing.get(p, ())),
            "replicas": ctx.related(request, "topics", topic, "partitions", p, "replicas"),
        }

    def reassignments(request: Request, topic: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for t in _topics_of(ctx, request, topic):
            a = ctx.assignment(t)
            out.extend(reassignment_v3(request, t, p, a) for p in a.reassigning)
        return out

    @router.get(
        "/v3/clusters/{cluster_id}/topics/-/partitions/-/reassignment", response_model=ReassignmentListV3
    )
    async def list_all_reassignments(request: Request, cluster_id: str) -> Response:
        ctx.check(cluster_id)
        require_cluster(broker, request, Operation.DESCRIBE)  # Kafka's ListPartitionReassignments
        parts = ["topics", ALL, "partitions", ALL, "reassignment"]
        return ctx.listing("KafkaReassignmentList", request, parts, reassignments(request, ALL))

    @router.get(
        "/v3/clusters/{cluster_id}/topics/{topic}/partitions/-/reassignment",
        response_model=ReassignmentListV3,
    )
    async def list_topic_reassignments(request: Request, cluster_id: str, topic: str) -> Response:
        ctx.check(cluster_id)
        parts = ["topics", topic, "partitions", ALL, "reassignment"]
        return ctx.listing("KafkaReassignmentList", request, parts, reassignments(request, topic))

    # -- partitions and replicas ------------------------------------------------------------

    def partition_v3(request: Request, topic: str, p: int) -> dict[str, Any]:
        leader = ctx.leader(topic, p)
        base = ["topics", topic, "partitions", p]
        return {
            **ctx.resource("KafkaPartition", request, base, [("topic", topic), ("partition", p)]),
            "topic_name": topic,
            "partition_id": p,
            "leader": None if leader is None else ctx.related(request, *base, "replicas", leader),
            "replicas": ctx.related(request, *base, "replicas"),
            "reassignment": ctx.related(request, *base, "reassignment"),
        }

    def replica_v3(request: Request, topic: str, p: int, broker_id: int) -> dict[str, Any]:
        parts = ["topics", topic, "partitions", p, "replicas", broker_id]
        crn = [("topic", topic), ("partition", p), ("replica", broker_id)]
        return {
            **ctx.resource("KafkaReplica", request, parts, crn),
            "topic_name": topic,
            "partition_id": p,
            "broker_id": broker_id,
            "is_leader": ctx.leader(topic, p) == broker_id,
            "is_in_sync": broker_id in ctx.isr(topic, p),
            "broker": ctx.related(request, "brokers", broker_id),
        }

    def described_partition(request: Request, cluster_id: str, topic: str, p: int) -> TopicAssignment:
        ctx.check(cluster_id)
        require_topic(broker, request, Operation.DESCRIBE, topic)
        check_partition(broker.topic(topic), p)
        return ctx.assignment(topic)

    @router.get("/v3/clusters/{cluster_id}/topics/{topic}/partitions", response_model=PartitionListV3)
    async def list_partitions(request: Request, cluster_id: str, topic: str) -> Response:
        ctx.check(cluster_id)
        require_topic(broker, request, Operation.DESCRIBE, topic)
        count = broker.topic(topic).partitions
        data = [partition_v3(request, topic, p) for p in range(count)]
        return ctx.listing("KafkaPartitionList", request, ["topics", topic, "partitions"], data)

    partition_id = Path(ge=0, le=INT32_MAX)

    @router.get("/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition}", response_model=PartitionV3)
    async def get_partition(
        request: Request, cluster_id: str, topic: str, partition: int = partition_id
    ) -> Response:
        described_partition(request, cluster_id, topic, partition)
        return JSONBody(partition_v3(request, topic, partition))

    @router.get(
        "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition}/reassignment",
        response_model=ReassignmentV3,
    )
    async def get_reassignment(
        request: Request, cluster_id: str, topic: str, partition: int = partition_id
    ) -> Response:
        a = described_partition(request, cluster_id, topic, partition)
        return JSONBody(reassignment_v3(request, topic, partition, a))

    @router.get(
        "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition}/replicas",
        response_model=ReplicaListV3,
    )
    async def list_replicas(
        request: Request, cluster_id: str, topic: str, partition: int = partition_id
    ) -> Response:
        a = described_partition(request, cluster_id, topic, partition)
        data = [replica_v3(request, topic, partition, b) for b in a.replicas(partition)]
        parts = ["topics", topic, "partitions", partition, "replicas"]
        return ctx.listing("KafkaReplicaList", request, parts, data)

    @router.get(
        "/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition}/replicas/{broker_id}",
        response_model=ReplicaV3,
    )
    async def get_replica(
        request: Request,
        cluster_id: str,
        topic: str,
        partition: int = partition_id,
        broker_id: int = Path(ge=0, le=INT32_MAX),
    ) -> Response:
        a = described_partition(request, cluster_id, topic, partition)
        if broker_id not in a.replicas(partition):
            raise RestError(404, 404, f"broker {broker_id} holds no replica of {topic}-{partition}")
        return JSONBody(replica_v3(request, topic, partition, broker_id))

    # -- brokers ----------------------------------------------------------------------------

    def broker_ids() -> list[int]:
        view = broker.replicas.view
        return sorted({*view.brokers, broker.node_id})

    def broker_v3(request: Request, broker_id: int) -> dict[str, Any]:
        live = broker.replicas.view.brokers.get(broker_id)
        reg = live.registration if live is not None else None
        return {
            **ctx.resource("KafkaBroker", request, ["brokers", broker_id], [("broker", broker_id)]),
            "broker_id": broker_id,
            "host": reg.host if reg is not None else None,
            "port": reg.kafka_port if reg is not None else None,
            "rack": reg.rack if reg is not None else None,
            "configs": ctx.related(request, "brokers", broker_id, "configs"),
            "partition_replicas": ctx.related(request, "brokers", broker_id, "partition-replicas"),
        }

    def known_broker(broker_id: int) -> None:
        if broker_id not in broker_ids():
            raise RestError(404, 404, f"broker {broker_id} not found")

    @router.get("/v3/clusters/{cluster_id}/brokers", response_model=BrokerListV3)
    async def list_brokers(request: Request, cluster_id: str) -> Response:
        ctx.check(cluster_id)
        return ctx.listing(
            "KafkaBrokerList", request, ["brokers"], [broker_v3(request, b) for b in broker_ids()]
        )

    broker_path = Path(ge=0, le=INT32_MAX)

    @router.get("/v3/clusters/{cluster_id}/brokers/{broker_id}", response_model=BrokerV3)
    async def get_broker(request: Request, cluster_id: str, broker_id: int = broker_path) -> Response:
        ctx.check(cluster_id)
        known_broker(broker_id)
        return JSONBody(broker_v3(request, broker_id))

    @router.get(
        "/v3/clusters/{cluster_id}/brokers/{broker_id}/partition-replicas", response_model=ReplicaListV3
    )
    async def list_broker_replicas(
        request: Request, cluster_id: str, broker_id: int = broker_path
    ) -> Response:
        ctx.check(cluster_id)
        known_broker(broker_id)
        visible = topic_filter(broker, request)
        data = []
        for topic, va in sorted(broker.replicas.view.topics.items()):
            if not visible(topic):
                continue
            for p in range(va.value.partition_count):
                if broker_id in va.value.replicas(p):
                    data.append(replica_v3(request, topic, p, broker_id))
        return ctx.listing("KafkaReplicaList", request, ["brokers", broker_id, "partition-replicas"], data)

    # -- ACLs -------------------------------------------------------------------------------

    def enum_query(cls: type[Any], value: str | None, default: Any) -> Any:
        if value is None:
            return default
        try:
            return cls[value.upper()]
        except KeyError:
            raise RestError(400, 40002, f"unknown {cls.__name__} {value!r}") from None

    @router.get("/v3/clusters/{cluster_id}/acls", response_model=AclListV3)
    async def list_acls(
        request: Request,
        cluster_id: str,
        resource_type: str | None = Query(None, description="TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ANY"),
        resource_name: str | None = None,
        pattern_type: str | None = Query(None, description="LITERAL, PREFIXED, MATCH, ANY"),
        principal: str | None = None,
        host: str | None = None,
        operation: str | None = None,
        permission: str | None = Query(None, description="ALLOW, DENY, ANY"),
    ) -> Response:
        ctx.check(cluster_id)
        require_cluster(broker, request, Operation.DESCRIBE)  # Kafka's DescribeAcls
        try:
            flt = AclFilter(
                enum_query(ResourceType, resource_type, ResourceType.ANY),
                resource_name,
                enum_query(PatternType, pattern_type, PatternType.ANY),
                principal,
                host,
                enum_query(Operation, operation, Operation.ANY),
                enum_query(Permission, permission, Permission.ANY),
            ).validate()
        except AclError as exc:
            raise RestError(400, 40002, str(exc)) from None
        bindings = broker.access.store.bindings() if broker.access is not None else []
        data = []
        for b in bindings:
            if not flt.matches(b):
                continue
            fields = {
                "resource_type": ResourceType(b.resource_type).name,
                "resource_name": b.resource_name,
                "pattern_type": PatternType(b.pattern_type).name,
                "principal": b.principal,
                "host": b.host,
                "operation": Operation(b.operation).name,
                "permission": Permission(b.permission).name,
            }
            item = ctx.resource("KafkaAcl", request, ["acls"], [])
            item["metadata"] = {"self": ctx.url(request, "acls") + "?" + urlencode(fields)}
            data.append({**item, **fields})
        return ctx.listing("KafkaAclList", request, ["acls"], data)

    return router
