"""The one authorization check every Kafka handler and REST route calls.

``AccessControl`` joins the decision (broker.security.acl.Authorizer) to where the bindings
live (broker.security.acl_store); the broker holds one when ``[authorization] enabled``
(``Broker.access``), None otherwise, and then every check passes.

Principals: a SASL user is ``User:<name>``, a client certificate's subject
``User:CN=...`` (broker.security.tls.peer_principal), anyone else ``User:ANONYMOUS``; REST
basic auth users are ``User:<name>`` too. The internal listener (``internal_listen``,
replication between brokers, plaintext) is the inter-broker principal: like Kafka's
inter-broker super user, nothing on it is checked, which is why it must stay on a
private network.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from api.protocol.acl import CLUSTER_NAME, Operation, ResourceType
from broker.security.acl import ANONYMOUS, Authorizer
from broker.security.acl_store import AclStore
from hot.errors import (
    AuthorizationError,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)

if TYPE_CHECKING:
    from api.kafka_server import Connection

log = logging.getLogger("strata.authorizer")

_ERRORS: Final[dict[ResourceType, type[AuthorizationError]]] = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
}
_WHAT: Final = {
    ResourceType.TOPIC: "topic",
    ResourceType.GROUP: "group",
    ResourceType.CLUSTER: "cluster",
    ResourceType.TRANSACTIONAL_ID: "transactional id",
}


class AccessControl:
    def __init__(self, authorizer: Authorizer, store: AclStore) -> None:
        self.authorizer = authorizer
        self.store = store

    def allowed(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        *,
        quiet: bool = False,
    ) -> bool:
        ok = self.authorizer.authorize(self.store.bindings(), principal, host, operation, resource_type, name)
        if not ok and not quiet:  # Kafka's authorizer log: who was refused what
            log.info(
                "denied %s %s on %s %r from %s", principal, operation.name, _WHAT[resource_type], name, host
            )
        return ok

    def allowed_on_some(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        bindings = self.store.bindings()
        return self.authorizer.authorize_on_some(bindings, principal, host, operation, resource_type)


def user_principal(name: str | None) -> str:
    """``User:<name>`` for an authenticated name (SASL user, certificate subject), else ANONYMOUS."""
    return f"User:{name}" if name else ANONYMOUS


def denied(operation: Operation, resource_type: ResourceType, name: str) -> AuthorizationError:
    """The error for a refused operation: TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED."""
    cls = _ERRORS.get(resource_type, AuthorizationError)
    target = "the cluster" if resource_type == ResourceType.CLUSTER else f"{_WHAT[resource_type]} {name!r}"
    return cls(f"not authorized to {operation.name} {target}")


def allowed(
    conn: Connection, operation: Operation, resource_type: ResourceType, name: str, *, quiet: bool = False
) -> bool:
    """May this connection's principal do ``operation`` on the resource? (Kafka handlers.)
    ``quiet``: a question, not a request (authorized-operations fields): not logged."""
    access: AccessControl | None = getattr(conn.broker, "access", None)
    if access is None or conn.server.inter_broker:
        return True
    principal = user_principal(conn.principal)
    return access.allowed(principal, conn.host, operation, resource_type, name, quiet=quiet)


# What Kafka reports in authorized-operations fields, per resource type (KIP-430).
SUPPORTED_OPERATIONS: Final[dict[ResourceType, tuple[Operation, ...]]] = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
    ),
}


def authorized_operations(conn: Connection, resource_type: ResourceType, name: str) -> int:
    """The bit set (1 << operation code) of what the principal may do on the resource."""
    return sum(
        1 << op
        for op in SUPPORTED_OPERATIONS[resource_type]
        if allowed(conn, op, resource_type, name, quiet=True)
    )


def require(conn: Connection, operation: Operation, resource_type: ResourceType, name: str) -> None:
    if not allowed(conn, operation, resource_type, name):
        raise denied(operation, resource_type, name)


def allowed_cluster(conn: Connection, operation: Operation) -> bool:
    return allowed(conn, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def require_cluster(conn: Connection, operation: Operation) -> None:
    require(conn, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def topic_allowed(conn: Connection, operation: Operation, topic: str) -> bool:
    return allowed(conn, operation, ResourceType.TOPIC, topic)


def require_topic(conn: Connection, operation: Operation, topic: str) -> None:
    require(conn, operation, ResourceType.TOPIC, topic)


def require_group(conn: Connection, operation: Operation, group: str) -> None:
    require(conn, operation, ResourceType.GROUP, group)
