"""ACLs of the schema registry API, derived from topics (Confluent's subject ACLs belong
to its closed RBAC, and Kafka has no ``subject`` resource type): a subject named after a
topic (``<topic>-key`` / ``<topic>-value``, TopicNameStrategy's names) is guarded by
that topic: READ to read it, WRITE to register, delete or configure it. Any other
subject (the record-name strategies') by the cluster: DESCRIBE to read, ALTER to write.
The global compatibility level and mode: anyone authenticated reads them, ALTER on the
cluster changes them. A schema by id: READ on one of the subjects it is registered under
(what a deserializer of that topic has). Listings leave out what the principal may not
read; a refusal is 403 with Confluent's 40301. The principal is the HTTP listener's
(basic / bearer user, or the client certificate's), forwarded requests keep their
``Authorization`` header so the leader decides for the same user. With authorization
off (the default) everything is allowed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request

from broker.schema_registry.errors import RegistryError
from broker.security.authz import Principal
from kwire.acl import CLUSTER_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from broker.broker import Broker


def subject_topic(subject: str) -> str | None:
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return None


def _allowed(broker: Broker | None, request: Request, op: Operation, rtype: ResourceType, name: str) -> bool:
    access = broker.access if broker is not None else None
    if access is None:
        return True
    host = request.client.host if request.client is not None else ""
    who = Principal.of(request.scope.get("strata.principal"), host)
    return access.allowed(who, op, rtype, name, quiet=True)


def may_subject(broker: Broker | None, request: Request, subject: str, *, write: bool) -> bool:
    topic = subject_topic(subject)
    if topic is not None:
        return _allowed(
            broker, request, Operation.WRITE if write else Operation.READ, ResourceType.TOPIC, topic
        )
    op = Operation.ALTER if write else Operation.DESCRIBE
    return _allowed(broker, request, op, ResourceType.CLUSTER, CLUSTER_NAME)


def require_subject(broker: Broker | None, request: Request, subject: str, *, write: bool) -> None:
    if not may_subject(broker, request, subject, write=write):
        what = "write" if write else "read"
        raise RegistryError(403, 40301, f"User is denied operation {what} on subject: {subject}")


def require_global_write(broker: Broker | None, request: Request) -> None:
    if not _allowed(broker, request, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        raise RegistryError(403, 40301, "User is denied operation ALTER on the cluster (global settings)")
