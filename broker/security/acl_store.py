"""The ACL store protocol and its document: one key of the metadata store
(``<prefix>security/acls``, broker.security.stored; etcd, or a single node's embedded
store) holds

    {"version": 1, "acls": [{"resource_type": "TOPIC", "resource_name": "orders",
                             "pattern_type": "LITERAL", "principal": "User:alice",
                             "host": "*", "operation": "READ", "permission": "ALLOW"}, ...]}

``bindings()`` is what every authorization check reads, so it must be cheap: the store
keeps a snapshot its watch refreshes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Protocol

from hot.errors import InvalidConfigError
from kwire.acl import AclBinding, AclError, AclFilter


class AclStore(Protocol):
    def bindings(self) -> tuple[AclBinding, ...]: ...

    async def create(self, new: Sequence[AclBinding]) -> None: ...

    async def delete(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]: ...


def encode_acls(bindings: Iterable[AclBinding]) -> bytes:
    return json.dumps({"version": 1, "acls": [b.to_json() for b in bindings]}, indent=1).encode()


def decode_acls(data: bytes, where: str) -> tuple[AclBinding, ...]:
    try:
        doc = json.loads(data)
    except ValueError:
        raise InvalidConfigError(f"{where} is not valid JSON") from None
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("acls"), list):
        raise InvalidConfigError(f"{where}: expected {{'version': 1, 'acls': [...]}}")
    try:
        return tuple(AclBinding.from_json(raw) for raw in doc["acls"])
    except AclError as exc:
        raise InvalidConfigError(f"{where}: {exc}") from None


def added(current: Sequence[AclBinding], new: Iterable[AclBinding]) -> tuple[AclBinding, ...]:
    """``current`` plus ``new``, without duplicates, in creation order."""
    out = list(current)
    seen = set(out)
    for b in new:
        if b not in seen:
            seen.add(b)
            out.append(b)
    return tuple(out)


def removed(
    current: Sequence[AclBinding], filters: Sequence[AclFilter]
) -> tuple[tuple[AclBinding, ...], list[list[AclBinding]]]:
    """What remains after deleting every binding a filter matches, and per filter the
    bindings it matched (one binding may be reported by several filters, as in Kafka)."""
    matched = [[b for b in current if f.matches(b)] for f in filters]
    gone = {b for m in matched for b in m}
    return tuple(b for b in current if b not in gone), matched
