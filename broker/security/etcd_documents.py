"""ACLs and SASL credentials in etcd, so every broker of a cluster enforces the same set.

Keys (broker.keys): ``<prefix>security/acls`` holds the document of broker.security.acl_store,
``<prefix>security/users`` the one of broker.security.users (salted SCRAM keys, never a
password). Each broker keeps the current values in memory through one watch of
``<prefix>security/``; an authorization check or SASL exchange reads that memory, never
etcd. Writes are compare-and-swap on the key's mod revision, retried on a lost race, so
two admins adding ACLs through two brokers both land.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from api.protocol.acl import AclBinding, AclFilter
from broker.etcd import EtcdClient
from broker.keys import KeyLayout
from broker.metadata_store import MetadataStore, WatchEvent, WatchEventType, WatchReset, cas_update
from broker.security.acl_store import added, decode_acls, encode_acls, removed
from broker.security.users import UserTable
from hot.errors import MetadataStoreError

log = logging.getLogger("strata.cluster.security")

CAS_ATTEMPTS = 20
T = TypeVar("T")


class SecurityDocuments:
    """The current bytes of the security keys, kept fresh by a watch."""

    def __init__(self, etcd: MetadataStore, layout: KeyLayout) -> None:
        self.etcd = etcd
        self.layout = layout
        self.values: dict[bytes, bytes] = {}
        self.revisions: dict[bytes, int] = {}  # key -> mod revision of the value held
        self._task: asyncio.Task[None] | None = None
        self._loaded = asyncio.Event()

    async def start(self, timeout: float = 10.0) -> None:
        self._task = asyncio.create_task(self._watch(), name="security-watch")
        try:
            await asyncio.wait_for(self._loaded.wait(), timeout)
        except TimeoutError:
            raise MetadataStoreError("cannot read the cluster's ACLs and users from etcd") from None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _watch(self) -> None:
        watch = self.etcd.watch_prefix(self.layout.security_prefix)
        async with contextlib.aclosing(watch):
            async for update in watch:
                if isinstance(update, WatchReset):
                    self.values = {kv.key: kv.value for kv in update.kvs}
                    self.revisions = {kv.key: kv.mod_revision for kv in update.kvs}
                    self._loaded.set()
                elif isinstance(update, WatchEvent):
                    self._apply(update)

    def _apply(self, event: WatchEvent) -> None:
        key = event.kv.key
        if event.kv.mod_revision < self.revisions.get(key, 0):
            return  # older than what a local write already installed
        if event.type is WatchEventType.DELETE:
            self.values.pop(key, None)
        else:
            self.values[key] = event.kv.value
        self.revisions[key] = event.kv.mod_revision

    async def update(self, key: bytes, change: Callable[[bytes | None], bytes]) -> None:
        await update_key(self.etcd, key, change, self)


async def update_key(
    etcd: MetadataStore,
    key: bytes,
    change: Callable[[bytes | None], bytes],
    docs: SecurityDocuments | None = None,
) -> None:
    """Replace ``key``'s value by ``change(old)`` with compare-and-swap (retried on a race);
    ``docs`` sees the write at once (read-your-writes before its watch catches up)."""
    new, revision = await cas_update(etcd, key, change, attempts=CAS_ATTEMPTS)
    if docs is not None and revision >= docs.revisions.get(key, 0):
        docs.values[key] = new
        docs.revisions[key] = revision


class EtcdAclStore:
    def __init__(self, docs: SecurityDocuments) -> None:
        self.docs = docs
        self.key = docs.layout.acls
        self._seen: tuple[bytes | None, tuple[AclBinding, ...]] = (None, ())

    def bindings(self) -> tuple[AclBinding, ...]:
        raw = self.docs.values.get(self.key)
        if raw is not self._seen[0]:
            self._seen = (raw, decode_acls(raw, "etcd acls") if raw else ())
        return self._seen[1]

    async def create(self, new: Sequence[AclBinding]) -> None:
        await self.docs.update(
            self.key, lambda old: encode_acls(added(decode_acls(old, "etcd acls") if old else (), new))
        )

    async def delete(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        matched: list[list[AclBinding]] = []

        def change(old: bytes | None) -> bytes:
            remaining, found = removed(decode_acls(old, "etcd acls") if old else (), filters)
            matched[:] = found
            return encode_acls(remaining)

        await self.docs.update(self.key, change)
        return matched


class EtcdUserStore(UserTable):
    """The broker's view of ``<prefix>security/users`` (what SASL and REST basic auth check)."""

    def __init__(self, docs: SecurityDocuments) -> None:
        super().__init__()
        self.docs = docs
        self.key = docs.layout.users
        self._raw: bytes | None = None

    def reload(self) -> EtcdUserStore:
        raw = self.docs.values.get(self.key)
        if raw is not self._raw:
            self.load_document(raw, "etcd users")
            self._raw = raw
        return self

    @property
    def version(self) -> tuple[int, int, int] | None:
        rev = self.docs.revisions.get(self.key)
        return None if rev is None else (rev, 0, 0)


# --- `strata users --etcd`: the cluster's credentials, edited in place -------------------------


async def _with_etcd(endpoints: str, fn: Callable[[EtcdClient], Awaitable[T]]) -> T:
    async with EtcdClient(endpoints) as etcd:
        return await fn(etcd)


def _table(raw: bytes | None) -> UserTable:
    table = UserTable()
    table.load_document(raw, "etcd users")
    return table


async def etcd_set_password(endpoints: str, cluster_name: str, user: str, password: str) -> bool:
    """Salt and hash ``password`` for every mechanism into etcd; True if the user existed."""
    existed = False

    def change(old: bytes | None) -> bytes:
        nonlocal existed
        table = _table(old)
        existed = user in table.names()
        table.put_password(user, password)
        return table.document()

    key = KeyLayout(cluster_name).users
    await _with_etcd(endpoints, lambda etcd: update_key(etcd, key, change))
    return existed


async def etcd_delete_user(endpoints: str, cluster_name: str, user: str) -> bool:
    found = False

    def change(old: bytes | None) -> bytes:
        nonlocal found
        table = _table(old)
        found = table.remove(user)
        return table.document()

    key = KeyLayout(cluster_name).users
    await _with_etcd(endpoints, lambda etcd: update_key(etcd, key, change))
    return found


async def etcd_users(endpoints: str, cluster_name: str) -> UserTable:
    key = KeyLayout(cluster_name).users

    async def read(etcd: EtcdClient) -> UserTable:
        kv = await etcd.get(key)
        return _table(kv.value if kv is not None else None)

    return await _with_etcd(endpoints, read)
