"""Where ACL bindings live: ``<data_dir>/meta/acls.json`` on a single node (here), one etcd
key in cluster mode (broker.security.etcd_documents), both holding the same document:

    {"version": 1, "acls": [{"resource_type": "TOPIC", "resource_name": "orders",
                             "pattern_type": "LITERAL", "principal": "User:alice",
                             "host": "*", "operation": "READ", "permission": "ALLOW"}, ...]}

``bindings()`` is what every authorization check reads, so it must be cheap: the file
store re-reads the file only when it changed (inode, mtime, size), the etcd store keeps a
snapshot its watch refreshes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from api.protocol.acl import AclBinding, AclError, AclFilter
from broker.security.files import stat_version, write_atomic
from hot.errors import InvalidConfigError, StorageError


class AclStore(Protocol):
    def bindings(self) -> tuple[AclBinding, ...]: ...

    async def create(self, new: Sequence[AclBinding]) -> None: ...

    async def delete(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]: ...


def acls_path(data_dir: Path) -> Path:
    return data_dir / "meta" / "acls.json"


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


class FileAclStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._bindings: tuple[AclBinding, ...] = ()
        self._version: tuple[int, int, int] | None = None

    def bindings(self) -> tuple[AclBinding, ...]:
        version = stat_version(self.path)
        if version != self._version:
            if version is None:
                self._bindings = ()
            else:
                try:
                    data = self.path.read_bytes()
                except OSError as exc:
                    raise StorageError(f"cannot read {self.path}: {exc.strerror}") from None
                self._bindings = decode_acls(data, str(self.path))
            self._version = version
        return self._bindings

    def _save(self, bindings: tuple[AclBinding, ...]) -> None:
        write_atomic(self.path, encode_acls(bindings))
        self._bindings = bindings
        self._version = stat_version(self.path)

    async def create(self, new: Sequence[AclBinding]) -> None:
        self._save(added(self.bindings(), new))

    async def delete(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        remaining, matched = removed(self.bindings(), filters)
        if len(remaining) != len(self._bindings):
            self._save(remaining)
        return matched
