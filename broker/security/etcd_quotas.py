"""Runtime client quotas of a cluster, in etcd, so that every broker enforces the same.

One key (``KeyLayout.quotas``) holds the whole table as JSON, the same document a single
node keeps in ``meta/quotas.json``. Brokers read it from the metadata watch (no I/O on the
request path); AlterClientQuotas on any broker rewrites it with a compare-and-swap on its
mod revision, then waits until its own view has the change (read-your-writes).
"""

from __future__ import annotations

import json

from broker.keys import KeyLayout
from broker.metadata import ClusterView
from broker.metadata_store import MetadataStore, cas_update
from broker.security.quotas import QuotaTable
from hot.errors import InvalidConfigError

CAS_ATTEMPTS = 10
VIEW_TIMEOUT = 10.0


class EtcdQuotaStore:
    def __init__(self, etcd: MetadataStore, layout: KeyLayout, view: ClusterView) -> None:
        self.etcd = etcd
        self.key = layout.quotas
        self.view = view
        self._table = QuotaTable()
        self._revision = 0

    def table(self) -> QuotaTable:
        kv = self.view.quotas
        revision = kv.mod_revision if kv is not None else 0
        if revision != self._revision:
            self._table = QuotaTable() if kv is None else _parse(kv.value, str(self.key))
            self._revision = revision
        return self._table

    async def alter(self, changes: list[tuple[str | None, str, float | None]]) -> None:
        def change(old: bytes | None) -> bytes:
            current = QuotaTable() if old is None else _parse(old, str(self.key))
            return json.dumps(current.altered(changes).to_json(), sort_keys=True).encode()

        _, revision = await cas_update(self.etcd, self.key, change, attempts=CAS_ATTEMPTS)
        await self.view.wait_for_revision(revision, VIEW_TIMEOUT)


def _parse(data: bytes, where: str) -> QuotaTable:
    try:
        doc = json.loads(data)
    except ValueError:
        raise InvalidConfigError(f"{where} is not valid JSON") from None
    return QuotaTable.from_json(doc, where)
