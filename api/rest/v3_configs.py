"""Confluent REST v3 configs: a topic's configs (read, alter one, alter a batch, reset), a
broker's static configs and the cluster-wide dynamic broker configs.

    GET    /v3/clusters/{id}/topics/{t}/configs             every config of the topic
    GET    /v3/clusters/{id}/topics/-/configs               of every topic
    GET    /v3/clusters/{id}/topics/{t}/configs/{name}      one
    PUT    /v3/clusters/{id}/topics/{t}/configs/{name}      {"value": ".."}: set it (204)
    DELETE /v3/clusters/{id}/topics/{t}/configs/{name}      back to the default (204)
    POST   /v3/clusters/{id}/topics/{t}/configs:alter       {"data": [{"name", "value", "operation"}]}
    GET    /v3/clusters/{id}/brokers/{b}/configs[/{name}]   the broker's static configs
    GET    /v3/clusters/{id}/broker-configs                 cluster-wide dynamic ones: none

A topic config's ``source`` is DYNAMIC_TOPIC_CONFIG for the topic's overrides, otherwise
STATIC_BROKER_CONFIG when the broker's ``[log]`` section changes the built-in default and
DEFAULT_CONFIG when it does not; ``synonyms`` lists the override (if any) then the broker
default under its broker name (``log.<name>``, the name DescribeConfigs gives broker
configs). Alterations go through ``Broker.admin_alter_topic_configs`` (IncrementalAlterConfigs'
path: validated as Kafka does, written with compare-and-swap, every broker follows);
operations are SET (default), DELETE, APPEND and SUBTRACT (list values), as
IncrementalAlterConfigs applies them (api.handlers.configs.incremental_changes).

A broker's configs are its static ones; another broker's are answered by that broker (the
request relayed to its REST listener, api.rest.peers), since this broker does not know them.
Broker configs cannot be altered (Strata has no dynamic broker configs).

Authorization: DESCRIBE_CONFIGS on the topic to read, ALTER_CONFIGS to change (Kafka's
DescribeConfigs / IncrementalAlterConfigs); DESCRIBE_CONFIGS on the cluster for broker configs.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from api.handlers.configs import broker_config_values, incremental_changes
from api.rest.authz import allowed, require, require_cluster
from api.rest.codec import JSON, JSONBody, RestError, media_type_of, parse_body, request_body_spec
from api.rest.models_v3 import (
    AlterConfigsRequest,
    BrokerConfigListV3,
    BrokerConfigV3,
    ClusterConfigListV3,
    TopicConfigListV3,
    TopicConfigV3,
    UpdateConfigRequest,
)
from api.rest.peers import AnsweredBy, forwarded
from api.rest.v3 import V3Context
from hot.config import INT32_MAX, LogConfig
from kwire.acl import Operation, ResourceType
from kwire.messages.alter_configs import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, AlterableConfigOp

_OPERATIONS = {"SET": OP_SET, "DELETE": OP_DELETE, "APPEND": OP_APPEND, "SUBTRACT": OP_SUBTRACT}
_BUILT_IN = LogConfig().to_kafka()
_NO_CONTENT: dict[int | str, dict[str, Any]] = {204: {"description": "Done"}}


def _check_json(request: Request) -> None:
    media = media_type_of(request)
    if media != JSON and not (media.startswith("application/") and media.endswith("+json")):
        raise RestError(415, 415, f"unsupported Content-Type {media or '(none)'!r}: use {JSON}")


def v3_configs_router(ctx: V3Context) -> APIRouter:
    router = APIRouter(tags=["v3"])
    broker = ctx.broker
    limit = broker.config.max_request_bytes

    # -- topic configs ----------------------------------------------------------------------

    def topic_configs(topic: str) -> list[dict[str, Any]]:
        """Name, value, source and synonyms of every config of ``topic``."""
        defaults = broker.manager.defaults.to_kafka()
        out = []
        for c in broker.topic_configs(topic):
            default = defaults.get(c.name, c.value if c.is_default else None)
            changed = c.name in _BUILT_IN and _BUILT_IN[c.name] != default
            default_source = "STATIC_BROKER_CONFIG" if changed else "DEFAULT_CONFIG"
            synonyms = [{"name": f"log.{c.name}", "value": default, "source": default_source}]
            source = default_source
            if not c.is_default:
                source = "DYNAMIC_TOPIC_CONFIG"
                synonyms.insert(0, {"name": c.name, "value": c.value, "source": source})
            out.append(
                {
                    "name": c.name,
                    "value": c.value,
                    "is_default": c.is_default,
                    "source": source,
                    "synonyms": synonyms,
                }
            )
        return out

    def topic_config_v3(request: Request, topic: str, c: dict[str, Any]) -> dict[str, Any]:
        parts = ["topics", topic, "configs", c["name"]]
        return {
            **ctx.resource("KafkaTopicConfig", request, parts, [("topic", topic), ("config", c["name"])]),
            "topic_name": topic,
            "name": c["name"],
            "value": c["value"],
            "is_default": c["is_default"],
            "is_read_only": False,
            "is_sensitive": False,
            "source": c["source"],
            "synonyms": c["synonyms"],
        }

    def readable(request: Request, cluster_id: str, topic: str) -> list[dict[str, Any]]:
        ctx.check(cluster_id)
        require(broker, request, Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic)
        return topic_configs(topic)

    async def alter(
        request: Request, cluster_id: str, topic: str, ops: list[AlterableConfigOp], validate_only: bool
    ) -> Response:
        ctx.check(cluster_id)
        require(broker, request, Operation.ALTER_CONFIGS, ResourceType.TOPIC, topic)
        current = {c.name: c.value for c in broker.topic_configs(topic)}
        changes = incremental_changes(current, ops)
        await broker.admin_alter_topic_configs(topic, changes, replace=False, validate_only=validate_only)
        return Response(status_code=204)

    # "-": every topic the user may DESCRIBE_CONFIGS (registered before the {topic} route)
    @router.get("/v3/clusters/{cluster_id}/topics/-/configs", response_model=TopicConfigListV3)
    async def list_all_topic_configs(request: Request, cluster_id: str) -> Response:
        ctx.check(cluster_id)
        data: list[dict[str, Any]] = []
        for topic in sorted(broker.replicas.view.topics):
            if allowed(broker, request, Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic, quiet=True):
                data.extend(topic_config_v3(request, topic, c) for c in topic_configs(topic))
        return ctx.listing("KafkaTopicConfigList", request, ["topics", "-", "configs"], data)

    @router.get("/v3/clusters/{cluster_id}/topics/{topic}/configs", response_model=TopicConfigListV3)
    async def list_topic_configs(request: Request, cluster_id: str, topic: str) -> Response:
        data = [topic_config_v3(request, topic, c) for c in readable(request, cluster_id, topic)]
        return ctx.listing("KafkaTopicConfigList", request, ["topics", topic, "configs"], data)

    # registered before /configs/{name}: the literal ":alter" would otherwise be a name
    @router.post(
        "/v3/clusters/{cluster_id}/topics/{topic}/configs:alter",
        status_code=204,
        response_class=Response,
        responses=_NO_CONTENT,
        openapi_extra=request_body_spec((JSON, AlterConfigsRequest)),
    )
    async def alter_topic_configs(request: Request, cluster_id: str, topic: str) -> Response:
        ctx.check(cluster_id)
        _check_json(request)
        req = await parse_body(request, limit, AlterConfigsRequest)
        ops = []
        for item in req.data:
            name = (item.operation or "SET").upper()
            if name not in _OPERATIONS:
                raise RestError(400, 40002, f"unknown operation {item.operation!r} of config {item.name!r}")
            ops.append(
                AlterableConfigOp(name=item.name, config_operation=_OPERATIONS[name], value=item.value)
            )
        return await alter(request, cluster_id, topic, ops, req.validate_only)

    @router.get("/v3/clusters/{cluster_id}/topics/{topic}/configs/{name}", response_model=TopicConfigV3)
    async def get_topic_config(request: Request, cluster_id: str, topic: str, name: str) -> Response:
        for c in readable(request, cluster_id, topic):
            if c["name"] == name:
                return JSONBody(topic_config_v3(request, topic, c))
        raise RestError(404, 404, f"topic {topic!r} has no config {name!r}")

    @router.put(
        "/v3/clusters/{cluster_id}/topics/{topic}/configs/{name}",
        status_code=204,
        response_class=Response,
        responses=_NO_CONTENT,
        openapi_extra=request_body_spec((JSON, UpdateConfigRequest)),
    )
    async def update_topic_config(request: Request, cluster_id: str, topic: str, name: str) -> Response:
        ctx.check(cluster_id)
        _check_json(request)
        req = await parse_body(request, limit, UpdateConfigRequest)
        op = AlterableConfigOp(name=name, config_operation=OP_SET, value=req.value)
        return await alter(request, cluster_id, topic, [op], False)

    @router.delete(
        "/v3/clusters/{cluster_id}/topics/{topic}/configs/{name}",
        status_code=204,
        response_class=Response,
        responses=_NO_CONTENT,
    )
    async def reset_topic_config(request: Request, cluster_id: str, topic: str, name: str) -> Response:
        op = AlterableConfigOp(name=name, config_operation=OP_DELETE)
        return await alter(request, cluster_id, topic, [op], False)

    # -- broker configs ---------------------------------------------------------------------

    def broker_configs(request: Request, cluster_id: str, broker_id: int) -> list[dict[str, Any]]:
        ctx.check(cluster_id)
        require_cluster(broker, request, Operation.DESCRIBE_CONFIGS)
        if broker_id != broker.node_id:
            live = broker.replicas.view.brokers.get(broker_id)
            if live is None:
                raise RestError(404, 404, f"broker {broker_id} not found")
            if forwarded(request):  # relayed here for another broker: never relay again
                raise RestError(421, 421, f"this is broker {broker.node_id}, not broker {broker_id}")
            raise AnsweredBy(broker_id)
        out = []
        for name, value in sorted(broker_config_values(broker.config).items()):
            parts = ["brokers", broker_id, "configs", name]
            out.append(
                {
                    **ctx.resource(
                        "KafkaBrokerConfig", request, parts, [("broker", broker_id), ("config", name)]
                    ),
                    "broker_id": broker_id,
                    "name": name,
                    "value": value,
                    "is_default": False,
                    "is_read_only": True,
                    "is_sensitive": False,
                    "source": "STATIC_BROKER_CONFIG",
                    "synonyms": [{"name": name, "value": value, "source": "STATIC_BROKER_CONFIG"}],
                }
            )
        return out

    broker_path = Path(ge=0, le=INT32_MAX)

    @router.get("/v3/clusters/{cluster_id}/brokers/{broker_id}/configs", response_model=BrokerConfigListV3)
    async def list_broker_configs(
        request: Request, cluster_id: str, broker_id: int = broker_path
    ) -> Response:
        data = broker_configs(request, cluster_id, broker_id)
        return ctx.listing("KafkaBrokerConfigList", request, ["brokers", broker_id, "configs"], data)

    @router.get("/v3/clusters/{cluster_id}/brokers/{broker_id}/configs/{name}", response_model=BrokerConfigV3)
    async def get_broker_config(
        request: Request, cluster_id: str, name: str, broker_id: int = broker_path
    ) -> Response:
        for c in broker_configs(request, cluster_id, broker_id):
            if c["name"] == name:
                return JSONBody(c)
        raise RestError(404, 404, f"broker {broker_id} has no config {name!r}")

    @router.get("/v3/clusters/{cluster_id}/broker-configs", response_model=ClusterConfigListV3)
    async def list_cluster_configs(request: Request, cluster_id: str) -> Response:
        ctx.check(cluster_id)
        require_cluster(broker, request, Operation.DESCRIBE_CONFIGS)
        return ctx.listing("KafkaClusterConfigList", request, ["broker-configs"], [])

    return router
