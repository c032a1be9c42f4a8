"""ACLs, SASL credentials and runtime client quotas in the metadata store, so that every
broker of a cluster enforces the same set, and a single node keeps them the same way in
its embedded store (``broker.embedded_store``): one code path, any ``MetadataStore``.

Keys (broker.keys): ``<prefix>security/acls`` holds the document of broker.security.acl_store,
``<prefix>security/users`` the one of broker.security.users (salted SCRAM keys, never a
password), ``<prefix>quotas`` the runtime quota table of broker.security.quotas. Each
broker keeps the current values in memory: the security keys through one watch of
``<prefix>security/`` (``SecurityDocuments``), the quotas through the metadata view; an
authorization check, SASL exchange or quota lookup reads that memory, never the store.
Writes are compare-and-swap on the key's mod revision, retried on a lost race, so two
admins adding ACLs through two brokers both land.

``set_password``, ``delete_user`` and ``read_users`` are what ``strata users`` runs, over
etcd (``--etcd``) or over a single node's store (``--data-dir``: the embedded store opened
directly, or the running broker's through its local admin socket, broker.store_socket).
A single node's files from before the embedded store (``meta/acls.json``, ``users.json``,
``quotas.json``) are adopted into these keys once (broker.security.adopt).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Final

from broker.keys import KeyLayout
from broker.metadata import ClusterView
from broker.metadata_store import MetadataStore, WatchEvent, WatchEventType, WatchReset, cas_update
from broker.security.acl_store import added, decode_acls, encode_acls, removed
from broker.security.quotas import QuotaTable
from broker.security.users import UserTable
from hot.errors import InvalidConfigError, MetadataStoreError
from kwire.acl import AclBinding, AclFilter

log = logging.getLogger("strata.cluster.security")

CAS_ATTEMPTS: Final = 20
# How long a quota change waits for this broker's own view to show it (read-your-writes).
VIEW_TIMEOUT: Final = 10.0


class SecurityDocuments:
    """The current bytes of the security keys, kept fresh by a watch."""

    def __init__(self, store: MetadataStore, layout: KeyLayout) -> None:
        self.store = store
        self.layout = layout
        self.values: dict[bytes, bytes] = {}
        self.revisions: dict[bytes, int] = {}  # key -> mod revision of the value held
        self._task: asyncio.Task[None] | None = None
        self._loaded = asyncio.Event()

    async def start(self, timeout: float = 10.0) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="security-watch")
        try:
            await asyncio.wait_for(self._loaded.wait(), timeout)
        except TimeoutError:
            raise MetadataStoreError("cannot read the ACLs and users from the metadata store") from None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _watch(self) -> None:
        watch = self.store.watch_prefix(self.layout.security_prefix)
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
        await update_key(self.store, key, change, self)


async def update_key(
    store: MetadataStore,
    key: bytes,
    change: Callable[[bytes | None], bytes],
    docs: SecurityDocuments | None = None,
) -> None:
    """Replace ``key``'s value by ``change(old)`` with compare-and-swap (retried on a race);
    ``docs`` sees the write at once (read-your-writes before its watch catches up)."""
    new, revision = await cas_update(store, key, change, attempts=CAS_ATTEMPTS)
    if docs is not None and revision >= docs.revisions.get(key, 0):
        docs.values[key] = new
        docs.revisions[key] = revision


class StoredAcls:
    """The ACL bindings of ``<prefix>security/acls`` (what every authorization check reads)."""

    def __init__(self, docs: SecurityDocuments) -> None:
        self.docs = docs
        self.key = docs.layout.acls
        self._seen: tuple[bytes | None, tuple[AclBinding, ...]] = (None, ())

    def bindings(self) -> tuple[AclBinding, ...]:
        raw = self.docs.values.get(self.key)
        if raw is not self._seen[0]:
            self._seen = (raw, decode_acls(raw, "stored acls") if raw else ())
        return self._seen[1]

    async def create(self, new: Sequence[AclBinding]) -> None:
        await self.docs.update(
            self.key, lambda old: encode_acls(added(decode_acls(old, "stored acls") if old else (), new))
        )

    async def delete(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        matched: list[list[AclBinding]] = []

        def change(old: bytes | None) -> bytes:
            remaining, found = removed(decode_acls(old, "stored acls") if old else (), filters)
            matched[:] = found
            return encode_acls(remaining)

        await self.docs.update(self.key, change)
        return matched


class StoredUsers(UserTable):
    """The broker's view of ``<prefix>security/users`` (what SASL and REST basic auth check)."""

    def __init__(self, docs: SecurityDocuments) -> None:
        super().__init__()
        self.docs = docs
        self.key = docs.layout.users
        self._raw: bytes | None = None

    def reload(self) -> StoredUsers:
        raw = self.docs.values.get(self.key)
        if raw is not self._raw:
            self.load_document(raw, "stored users")
            self._raw = raw
        return self

    @property
    def version(self) -> tuple[int, int, int] | None:
        rev = self.docs.revisions.get(self.key)
        return None if rev is None else (rev, 0, 0)


class StoredQuotas:
    """Runtime client quotas of ``<prefix>quotas``, read from the metadata view (no I/O on
    the request path); ``alter`` writes with compare-and-swap, then waits until this
    broker's own view has the change (read-your-writes)."""

    def __init__(self, store: MetadataStore, layout: KeyLayout, view: ClusterView) -> None:
        self.store = store
        self.key = layout.quotas
        self.view = view
        self._table = QuotaTable()
        self._revision = 0

    def table(self) -> QuotaTable:
        kv = self.view.quotas
        revision = kv.mod_revision if kv is not None else 0
        if revision != self._revision:
            self._table = QuotaTable() if kv is None else parse_quotas(kv.value, str(self.key))
            self._revision = revision
        return self._table

    async def alter(self, changes: list[tuple[str | None, str, float | None]]) -> None:
        def change(old: bytes | None) -> bytes:
            current = QuotaTable() if old is None else parse_quotas(old, str(self.key))
            return json.dumps(current.altered(changes).to_json(), sort_keys=True).encode()

        _, revision = await cas_update(self.store, self.key, change, attempts=CAS_ATTEMPTS)
        await self.view.wait_for_revision(revision, VIEW_TIMEOUT)


def parse_quotas(data: bytes, where: str) -> QuotaTable:
    try:
        doc = json.loads(data)
    except ValueError:
        raise InvalidConfigError(f"{where} is not valid JSON") from None
    return QuotaTable.from_json(doc, where)


# --- `strata users`: the credentials of a cluster or a single node, edited in place ----------


def _table(raw: bytes | None) -> UserTable:
    table = UserTable()
    table.load_document(raw, "stored users")
    return table


async def set_password(store: MetadataStore, layout: KeyLayout, user: str, password: str) -> bool:
    """Salt and hash ``password`` for every mechanism into the store; True if the user existed."""
    existed = False

    def change(old: bytes | None) -> bytes:
        nonlocal existed
        table = _table(old)
        existed = user in table.names()
        table.put_password(user, password)
        return table.document()

    await update_key(store, layout.users, change)
    return existed


async def delete_user(store: MetadataStore, layout: KeyLayout, user: str) -> bool:
    """Remove ``user``'s credentials; False if there was no such user (nothing written)."""
    kv = await store.get(layout.users)
    if kv is None or user not in _table(kv.value).names():
        return False
    found = False

    def change(old: bytes | None) -> bytes:
        nonlocal found
        table = _table(old)
        found = table.remove(user)
        return table.document()

    await update_key(store, layout.users, change)
    return found


async def read_users(store: MetadataStore, layout: KeyLayout) -> UserTable:
    kv = await store.get(layout.users)
    return _table(kv.value if kv is not None else None)
