"""ACL checks of the REST API: the same decision as the Kafka listener (broker.security.authz),
for the basic-auth user of the request (``User:<name>``; ``User:ANONYMOUS`` without basic
auth). A refusal is an AuthorizationError, which the one error table turns into 403 with
the usual JSON error body; a missing or wrong password stays 401 (api.security.basic_auth).

Routes: produce WRITE, fetch READ, topic metadata DESCRIBE (listings show only what the
user may describe), topic creation CREATE (cluster or topic), deletion DELETE; consumer
instances READ on their group (and READ on each subscribed topic); group listings and lag
DESCRIBE on the group. Every listing and per-topic figure (``/topics``, ``/v1/partitions``,
``/v1/status``, ``/v1/groups``, the partitions of a group's lag, committed offsets) leaves
out what the user may not DESCRIBE, as Kafka's Metadata and OffsetFetch do; a named topic or
group it may not describe is 403 whether it exists or not, so a refusal never tells that
it does. ``/metrics`` needs DESCRIBE on the cluster.

Listings ask quietly (Kafka's authorizer does not log what a listing leaves out): a
dashboard polling every 2 s would otherwise log a line per hidden topic each time.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request

from broker.broker import Broker
from broker.security.authz import Principal, denied
from hot.errors import TopicAuthorizationFailedError
from kwire.acl import CLUSTER_NAME, Operation, ResourceType


def allowed(
    broker: Broker,
    request: Request,
    op: Operation,
    rtype: ResourceType,
    name: str,
    *,
    quiet: bool = False,
) -> bool:
    access = broker.access
    if access is None:
        return True
    host = request.client.host if request.client is not None else ""
    who = Principal.of(request.scope.get("strata.principal"), host)
    return access.allowed(who, op, rtype, name, quiet=quiet)


def require(broker: Broker, request: Request, op: Operation, rtype: ResourceType, name: str) -> None:
    if not allowed(broker, request, op, rtype, name):
        raise denied(op, rtype, name)


def require_topic(broker: Broker, request: Request, op: Operation, topic: str) -> None:
    require(broker, request, op, ResourceType.TOPIC, topic)


def topic_visible(broker: Broker, request: Request, topic: str) -> bool:
    """May a listing show this topic (DESCRIBE, or READ/WRITE/DELETE/ALTER which imply it)?"""
    return allowed(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, topic, quiet=True)


def group_visible(broker: Broker, request: Request, group: str) -> bool:
    return allowed(broker, request, Operation.DESCRIBE, ResourceType.GROUP, group, quiet=True)


def topic_filter(broker: Broker, request: Request) -> Callable[[str], bool]:
    """``topic_visible`` for one request, each topic asked once (a group's lag names a
    topic once per partition)."""
    if broker.access is None:
        return lambda _topic: True
    seen: dict[str, bool] = {}

    def visible(topic: str) -> bool:
        ok = seen.get(topic)
        if ok is None:
            ok = seen[topic] = topic_visible(broker, request, topic)
        return ok

    return visible


def require_cluster(broker: Broker, request: Request, op: Operation) -> None:
    require(broker, request, op, ResourceType.CLUSTER, CLUSTER_NAME)


def may_create(broker: Broker, request: Request, topic: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka's rule for CreateTopics and auto-creation)."""
    return allowed(broker, request, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or allowed(
        broker, request, Operation.CREATE, ResourceType.TOPIC, topic
    )


def require_create(broker: Broker, request: Request, topic: str) -> None:
    if not may_create(broker, request, topic):
        raise denied(Operation.CREATE, ResourceType.TOPIC, topic)


def denied_pattern() -> TopicAuthorizationFailedError:
    return TopicAuthorizationFailedError(
        "with authorization on, subscribe by topic names: a topic_pattern cannot be checked topic by topic"
    )
