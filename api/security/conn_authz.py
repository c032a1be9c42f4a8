"""The authorization check as the Kafka handlers and guards ask it: on a connection.

The domain's check (broker.security.authz) takes a ``Principal``; a connection's is its
authenticated name (SASL, client certificate) and peer host, and the internal listener's
connections are the inter-broker principal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security import authz
from broker.security.authz import Principal
from kwire.acl import Operation, ResourceType

if TYPE_CHECKING:
    from api.handlers.context import Connection


def principal(conn: Connection) -> Principal:
    return Principal.of(conn.principal, conn.host, inter_broker=conn.server.inter_broker)


def allowed(
    conn: Connection, operation: Operation, resource_type: ResourceType, name: str, *, quiet: bool = False
) -> bool:
    return authz.allowed(conn.broker.access, principal(conn), operation, resource_type, name, quiet=quiet)


def acl_generation(conn: Connection) -> object | None:
    """The ACLs in force now, as an object that stays the same (``is``) until they change
    (``AccessControl.generation``): a cache of answers keyed by it and the principal sees
    an ACL change on its next check. None: nothing is checked on this connection
    (authorization off, the internal listener)."""
    access = conn.broker.access
    if access is None or conn.server.inter_broker:
        return None
    return access.generation()


def allowed_cluster(conn: Connection, operation: Operation) -> bool:
    return authz.allowed_cluster(conn.broker.access, principal(conn), operation)


def authorized_operations(conn: Connection, resource_type: ResourceType, name: str) -> int:
    return authz.authorized_operations(conn.broker.access, principal(conn), resource_type, name)
