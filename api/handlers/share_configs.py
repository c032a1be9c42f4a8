"""A group's configs on the GROUP config resource (type 32): DescribeConfigs and
IncrementalAlterConfigs of the share-group settings (KIP-932: ``share.auto.offset.reset``,
``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
``share.isolation.level``, ``share.session.timeout.ms``, ``share.heartbeat.interval.ms``,
and the dead-letter topic ``errors.deadletterqueue.topic.name`` after KIP-1191).
A name outside them is INVALID_CONFIG; a value outside the broker's bounds too.
"""

from __future__ import annotations

from typing import Final

from api.handlers.share import code_of
from broker.broker import Broker
from broker.share.config import (
    DELIVERY_LIMIT,
    HEARTBEAT_INTERVAL,
    LOCK_DURATION,
    SESSION_TIMEOUT,
)
from hot.errors import InvalidRequestError, StrataError
from kwire.messages.alter_configs import (
    OP_DELETE,
    OP_SET,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResource,
)
from kwire.messages.describe_configs import DescribeConfigsResourceResult

SOURCE_GROUP_CONFIG: Final = 8  # Kafka's ConfigSource.GROUP_CONFIG
SOURCE_DEFAULT_CONFIG: Final = 5
TYPE_STRING: Final = 2
TYPE_INT: Final = 3
_INTS: Final = frozenset({DELIVERY_LIMIT, HEARTBEAT_INTERVAL, LOCK_DURATION, SESSION_TIMEOUT})


async def describe_group_configs(
    broker: Broker, group_id: str, keys: set[str] | None
) -> list[DescribeConfigsResourceResult]:
    if not group_id:
        raise InvalidRequestError("a group's configs need the group id as the resource name")
    await broker.shares.refresh_configs()
    return [
        DescribeConfigsResourceResult(
            name=name,
            value=value,
            is_default=is_default,
            config_source=SOURCE_DEFAULT_CONFIG if is_default else SOURCE_GROUP_CONFIG,
            config_type=TYPE_INT if name in _INTS else TYPE_STRING,
        )
        for name, (value, is_default) in sorted(broker.shares.describe_configs(group_id).items())
        if keys is None or name in keys
    ]


async def alter_group_configs(
    broker: Broker, res: IncrementalAlterConfigsResource, validate_only: bool
) -> AlterConfigsResourceResponse:
    try:
        if not res.resource_name:
            raise InvalidRequestError("a group's configs need the group id as the resource name")
        changes: dict[str, str | None] = {}
        for c in res.configs:
            if c.config_operation == OP_SET:
                if c.value is None:
                    raise InvalidRequestError(f"SET of {c.name} needs a value")
                changes[c.name] = c.value
            elif c.config_operation == OP_DELETE:
                changes[c.name] = None
            else:
                raise InvalidRequestError(f"{c.name}: only SET and DELETE apply to group configs")
        await broker.shares.alter_configs(res.resource_name, changes, validate_only=validate_only)
    except StrataError as exc:
        return AlterConfigsResourceResponse(
            error_code=code_of(exc),
            error_message=str(exc),
            resource_type=res.resource_type,
            resource_name=res.resource_name,
        )
    return AlterConfigsResourceResponse(resource_type=res.resource_type, resource_name=res.resource_name)
