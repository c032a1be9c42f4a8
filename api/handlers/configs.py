"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Topic configs are the topic's record in the metadata store: DescribeConfigs reads them
(``Broker.topic_configs``) with their source (topic override or default) and
broker configs from the static config; AlterConfigs replaces a topic's overrides and
IncrementalAlterConfigs applies SET/DELETE/APPEND/SUBTRACT (KIP-339). Both validate as
Kafka does and write with compare-and-swap (``broker.admin``); every broker applies the
change to its replicas from the watch. Broker resources cannot be altered (dynamic broker
configs are not supported).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from api.handlers.share_configs import alter_group_configs, describe_group_configs
from broker.broker import Broker
from broker.config import BrokerConfig
from hot.errors import InvalidRequestError, StrataError
from kwire import RequestHeader
from kwire.error_table import kafka_code
from kwire.messages.alter_configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterableConfigOp,
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kwire.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection

# DescribeConfigs resource types and config sources (Kafka's ConfigResource / ConfigSource).
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32  # a group's configs (KIP-932's share.* settings: api.handlers.share_configs)
SOURCE_TOPIC_CONFIG = 1
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5


def broker_config_values(cfg: BrokerConfig) -> dict[str, str]:
    """The broker's static configs by Kafka name (DescribeConfigs and REST v3 broker configs)."""
    out = {f"log.{k}" if not k.startswith("log.") else k: v for k, v in cfg.log.to_kafka().items()}
    out.update(
        {
            "broker.id": str(cfg.broker_id),
            "log.dirs": str(cfg.data_dir / "logs"),
            "auto.create.topics.enable": "true" if cfg.auto_create_topics else "false",
            "num.partitions": str(cfg.num_partitions),
            "socket.request.max.bytes": str(cfg.max_request_bytes),
            "advertised.listeners": f"{cfg.security_protocol}://{cfg.advertised}",
        }
    )
    return out


async def handle_describe_configs(
    conn: Connection, header: RequestHeader, req: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    broker = conn.broker
    results = []
    for res in req.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        try:
            if res.resource_type == RESOURCE_TOPIC:
                entries = [
                    DescribeConfigsResourceResult(
                        name=c.name,
                        value=c.value,
                        is_default=c.is_default,
                        config_source=SOURCE_DEFAULT_CONFIG if c.is_default else SOURCE_TOPIC_CONFIG,
                    )
                    for c in broker.topic_configs(res.resource_name)
                    if keys is None or c.name in keys
                ]
            elif res.resource_type == RESOURCE_BROKER:
                if res.resource_name not in ("", str(broker.node_id)):
                    raise InvalidRequestError(f"unknown broker {res.resource_name!r}")
                entries = [
                    DescribeConfigsResourceResult(
                        name=k, value=v, read_only=True, config_source=SOURCE_STATIC_BROKER_CONFIG
                    )
                    for k, v in sorted(broker_config_values(broker.config).items())
                    if keys is None or k in keys
                ]
            elif res.resource_type == RESOURCE_GROUP:
                entries = await describe_group_configs(broker, res.resource_name, keys)
            else:
                raise InvalidRequestError(f"unsupported resource type {res.resource_type}")
            results.append(
                DescribeConfigsResult(
                    resource_type=res.resource_type, resource_name=res.resource_name, configs=tuple(entries)
                )
            )
        except StrataError as exc:
            results.append(
                DescribeConfigsResult(
                    error_code=kafka_code(exc),
                    error_message=str(exc),
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                )
            )
    return DescribeConfigsResponse(results=tuple(results))


async def _alter_topic(
    broker: Broker,
    res_type: int,
    name: str,
    changes: dict[str, str | None],
    replace: bool,
    validate_only: bool,
) -> AlterConfigsResourceResponse:
    try:
        if res_type != RESOURCE_TOPIC:
            raise InvalidRequestError(f"altering resource type {res_type} is not supported; only topics")
        await broker.admin_alter_topic_configs(name, changes, replace=replace, validate_only=validate_only)
        return AlterConfigsResourceResponse(resource_type=res_type, resource_name=name)
    except StrataError as exc:
        return AlterConfigsResourceResponse(
            error_code=kafka_code(exc), error_message=str(exc), resource_type=res_type, resource_name=name
        )


async def handle_alter_configs(
    conn: Connection, header: RequestHeader, req: AlterConfigsRequest
) -> AlterConfigsResponse:
    broker = conn.broker
    out = []
    for res in req.resources:
        changes = {c.name: c.value for c in res.configs}
        out.append(
            await _alter_topic(broker, res.resource_type, res.resource_name, changes, True, req.validate_only)
        )
    return AlterConfigsResponse(responses=tuple(out))


def incremental_changes(current: dict[str, str], ops: Iterable[AlterableConfigOp]) -> dict[str, str | None]:
    """IncrementalAlterConfigs operations as changes (None: back to the default); list
    values (cleanup.policy) are comma-separated. Same rules as the single-node handler."""
    changes: dict[str, str | None] = {}
    for c in ops:
        if c.config_operation == OP_SET:
            if c.value is None:
                raise InvalidRequestError(f"SET of {c.name} needs a value")
            changes[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            changes[c.name] = None
        elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
            base = changes.get(c.name, current.get(c.name)) or ""
            items = [i for i in base.split(",") if i]
            for v in (c.value or "").split(","):
                if c.config_operation == OP_APPEND and v and v not in items:
                    items.append(v)
                elif c.config_operation == OP_SUBTRACT and v in items:
                    items.remove(v)
            changes[c.name] = ",".join(items)
        else:
            raise InvalidRequestError(f"unknown config operation {c.config_operation}")
    return changes


async def handle_incremental_alter_configs(
    conn: Connection, header: RequestHeader, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    broker = conn.broker
    out = []
    for res in req.resources:
        if res.resource_type == RESOURCE_GROUP:
            out.append(await alter_group_configs(broker, res, req.validate_only))
            continue
        try:
            current = (
                {c.name: c.value for c in broker.topic_configs(res.resource_name)}
                if res.resource_type == RESOURCE_TOPIC
                else {}
            )
            changes = incremental_changes(current, res.configs)
        except StrataError as exc:
            out.append(
                AlterConfigsResourceResponse(
                    error_code=kafka_code(exc),
                    error_message=str(exc),
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                )
            )
            continue
        out.append(
            await _alter_topic(
                broker, res.resource_type, res.resource_name, changes, False, req.validate_only
            )
        )
    return IncrementalAlterConfigsResponse(responses=tuple(out))
