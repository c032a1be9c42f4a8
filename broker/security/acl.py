"""The authorization decision, with Kafka's semantics (AclAuthorizer / StandardAuthorizer),
over the ACL bindings of kwire.acl. Pure.

* super users are allowed everything;
* a DENY binding for the operation (or ALL) wins over any ALLOW;
* an ALLOW for the operation or ALL allows it; DESCRIBE is also allowed by READ, WRITE,
  DELETE or ALTER, and DESCRIBE_CONFIGS by ALTER_CONFIGS;
* a resource no binding matches at all is denied, unless
  ``allow_everyone_if_no_acl_found`` (then allowed, as Kafka's option of that name).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from kwire.acl import (
    WILDCARD,
    AclBinding,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

ANONYMOUS: Final = "User:ANONYMOUS"

# Operations whose ALLOW also allows the key (Kafka's implied operations).
IMPLIED_BY: Final[dict[Operation, frozenset[Operation]]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER, Operation.DESCRIBE}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS}),
}


def resource_matches(b: AclBinding, resource_type: ResourceType, name: str) -> bool:
    """Does binding ``b`` apply to the concrete resource (type, name)?"""
    if b.resource_type != resource_type:
        return False
    if b.pattern_type == PatternType.PREFIXED:
        return name.startswith(b.resource_name)
    return b.resource_name in (name, WILDCARD)


def parse_principals(text: str | Iterable[str]) -> frozenset[str]:
    """``"User:admin,User:CN=ops,O=acme"`` (or ``;``-separated, Kafka's super.users, or a
    list) -> the set. A comma item not starting with ``User:`` continues the previous one,
    so a certificate's distinguished name keeps its commas."""
    items = [text] if isinstance(text, str) else list(text)
    out: list[str] = []
    for chunk in items:
        for item in chunk.replace(";", "\0").replace(",", "\0,").split("\0"):
            piece = item.strip()
            if not piece or piece == ",":
                continue
            if piece.startswith(","):
                piece = piece[1:].strip()
                if not piece.startswith("User:") and out:
                    out[-1] += "," + piece
                    continue
            if not piece.startswith("User:"):
                raise AclError(f"principal {piece!r} must be User:<name>")
            out.append(piece)
    return frozenset(out)


class Authorizer:
    """The decision for one request, over a snapshot of bindings."""

    def __init__(self, super_users: Iterable[str] = (), *, allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl

    def authorize(
        self,
        bindings: Iterable[AclBinding],
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        allowing = IMPLIED_BY.get(operation, frozenset({operation})) | {Operation.ALL}
        any_acl = False
        allowed = False
        for b in bindings:
            if not resource_matches(b, resource_type, name):
                continue
            any_acl = True
            if b.principal not in (principal, "User:*") or b.host not in (host, WILDCARD):
                continue
            if b.permission == Permission.DENY:
                if b.operation in (operation, Operation.ALL):
                    return False  # DENY wins, whatever else allows
            elif b.operation in allowing:
                allowed = True
        if not any_acl:
            return self.allow_if_no_acl
        return allowed

    def authorize_on_some(
        self,
        bindings: Iterable[AclBinding],
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool:
        """May the principal do ``operation`` on at least one resource of the type? (Kafka's
        authorizeByResourceType, e.g. InitProducerId with WRITE on some topic.) An ALLOW
        counts unless a DENY of the same operation covers every name (literal ``*``)."""
        if principal in self.super_users:
            return True
        allowing = IMPLIED_BY.get(operation, frozenset({operation})) | {Operation.ALL}
        mine = [
            b
            for b in bindings
            if b.resource_type == resource_type
            and b.principal in (principal, "User:*")
            and b.host in (host, WILDCARD)
        ]
        for b in mine:
            if (
                b.permission == Permission.DENY
                and b.operation in (operation, Operation.ALL)
                and b.pattern_type == PatternType.LITERAL
                and b.resource_name == WILDCARD
            ):
                return False
        return any(b.permission == Permission.ALLOW and b.operation in allowing for b in mine)
