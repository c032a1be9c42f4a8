"""ACL checks of the REST API: the same decision as the Kafka listener (api.security.authz),
for the basic-auth user of the request (``User:<name>``; ``User:ANONYMOUS`` without basic
auth). A refusal is an AuthorizationError, which the one error table turns into 403 with
the usual JSON error body; a missing or wrong password stays 401 (api.security.basic_auth).

Routes: produce WRITE, fetch READ, topic metadata DESCRIBE (listings show only what the
user may describe), topic creation CREATE (cluster or topic), deletion DELETE; consumer
instances READ on their group (and READ on each subscribed topic); group listings and lag
DESCRIBE on the group.
"""

from __future__ import annotations

from fastapi import Request

from api.broker import Broker
from api.security.acl import CLUSTER_NAME, Operation, ResourceType
from api.security.authz import denied, user_principal
from hot.errors import TopicAuthorizationFailedError


def allowed(broker: Broker, request: Request, op: Operation, rtype: ResourceType, name: str) -> bool:
    access = broker.access
    if access is None:
        return True
    principal = user_principal(request.scope.get("strata.principal"))
    host = request.client.host if request.client is not None else ""
    return access.allowed(principal, host, op, rtype, name)


def require(broker: Broker, request: Request, op: Operation, rtype: ResourceType, name: str) -> None:
    if not allowed(broker, request, op, rtype, name):
        raise denied(op, rtype, name)


def require_topic(broker: Broker, request: Request, op: Operation, topic: str) -> None:
    require(broker, request, op, ResourceType.TOPIC, topic)


def topic_visible(broker: Broker, request: Request, topic: str) -> bool:
    return allowed(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, topic)


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
