"""The one authorization check every Kafka handler and REST route calls.

``AccessControl`` joins the decision (broker.security.acl.Authorizer) to where the bindings
live (broker.security.acl_store); the broker holds one when ``[authorization] enabled``
(``Broker.access``), None otherwise, and then every check passes. Checks are made on a
``Principal`` (who, from which host), which the doors build from a Kafka connection
(api.security.conn_authz) or a REST request (api.rest.authz).

Principals: a SASL user is ``User:<name>``, a client certificate's subject
``User:CN=...`` (broker.security.tls.peer_principal), anyone else ``User:ANONYMOUS``; REST
basic auth users are ``User:<name>`` too. The internal listener (``internal_listen``,
replication between brokers, plaintext) is the inter-broker principal: like Kafka's
inter-broker super user, nothing on it is checked, which is why it must stay on a
private network.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from broker.security.acl import ANONYMOUS, Authorizer
from broker.security.acl_store import AclStore
from hot.errors import (
    AuthorizationError,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from kwire.acl import CLUSTER_NAME, Operation, ResourceType

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


@dataclass(frozen=True, slots=True)
class Principal:
    """Who asks, as every check sees it (Kafka's request context): the principal string
    (``User:<name>`` or ``User:ANONYMOUS``), the client's host, and whether it is the
    inter-broker principal of the internal listener, which nothing checks. The doors build
    it (a Kafka connection, a REST request); the domain never sees a connection."""

    name: str
    host: str
    inter_broker: bool = False

    @classmethod
    def of(cls, user: str | None, host: str, *, inter_broker: bool = False) -> Principal:
        """The principal of an authenticated name (SASL user, certificate subject, REST
        basic-auth user), or ANONYMOUS without one."""
        return cls(user_principal(user), host, inter_broker)


class AccessControl:
    def __init__(self, authorizer: Authorizer, store: AclStore) -> None:
        self.authorizer = authorizer
        self.store = store

    def allowed(
        self,
        who: Principal,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        *,
        quiet: bool = False,
    ) -> bool:
        if who.inter_broker:
            return True
        ok = self.authorizer.authorize(
            self.store.bindings(), who.name, who.host, operation, resource_type, name
        )
        if not ok and not quiet:  # Kafka's authorizer log: who was refused what
            what = _WHAT[resource_type]
            log.info("denied %s %s on %s %r from %s", who.name, operation.name, what, name, who.host)
        return ok

    def generation(self) -> object:
        """What the decisions depend on that can change (the authorizer's settings do
        not): the store's bindings, the same tuple until the ACLs change (the store keeps
        its decoded document until the stored one is replaced, broker.security.stored). A
        cache keyed by it compares with ``is``: a store answering a new tuple every time
        only costs the cache its hits."""
        return self.store.bindings()

    def allowed_on_some(self, who: Principal, operation: Operation, resource_type: ResourceType) -> bool:
        if who.inter_broker:
            return True
        bindings = self.store.bindings()
        return self.authorizer.authorize_on_some(bindings, who.name, who.host, operation, resource_type)


def user_principal(name: str | None) -> str:
    """``User:<name>`` for an authenticated name (SASL user, certificate subject), else ANONYMOUS."""
    return f"User:{name}" if name else ANONYMOUS


def denied(operation: Operation, resource_type: ResourceType, name: str) -> AuthorizationError:
    """The error for a refused operation: TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED."""
    cls = _ERRORS.get(resource_type, AuthorizationError)
    target = "the cluster" if resource_type == ResourceType.CLUSTER else f"{_WHAT[resource_type]} {name!r}"
    return cls(f"not authorized to {operation.name} {target}")


def allowed(
    access: AccessControl | None,
    who: Principal,
    operation: Operation,
    resource_type: ResourceType,
    name: str,
    *,
    quiet: bool = False,
) -> bool:
    """May ``who`` do ``operation`` on the resource? Everything passes without an authorizer
    (``[authorization]`` off). ``quiet``: a question, not a request (authorized-operations
    fields): not logged."""
    return access is None or access.allowed(who, operation, resource_type, name, quiet=quiet)


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


def authorized_operations(
    access: AccessControl | None, who: Principal, resource_type: ResourceType, name: str
) -> int:
    """The bit set (1 << operation code) of what ``who`` may do on the resource."""
    return sum(
        1 << op
        for op in SUPPORTED_OPERATIONS[resource_type]
        if allowed(access, who, op, resource_type, name, quiet=True)
    )


def require(
    access: AccessControl | None, who: Principal, operation: Operation, resource_type: ResourceType, name: str
) -> None:
    if not allowed(access, who, operation, resource_type, name):
        raise denied(operation, resource_type, name)


def allowed_cluster(access: AccessControl | None, who: Principal, operation: Operation) -> bool:
    return allowed(access, who, operation, ResourceType.CLUSTER, CLUSTER_NAME)
