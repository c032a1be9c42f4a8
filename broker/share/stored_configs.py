"""Share groups' own settings (``share.*``) in the cluster's metadata store (etcd, or a
single node's embedded store), where Kafka keeps group configs too (its metadata log):
one key, ``<prefix>share-group-configs``, a JSON object group -> {name: value}, changed
with compare-and-swap. Every broker reads it (the leaders of a group's partitions need
its lock duration, delivery limit, isolation level and offset reset), cached for
``REFRESH_S``: a change reaches the other brokers within that.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Final

from broker.keys import KeyLayout
from broker.metadata_store import MetadataStore, cas_update
from hot.errors import CorruptRecordError

REFRESH_S: Final = 1.0
CAS_ATTEMPTS: Final = 8

Configs = dict[str, dict[str, str]]


def _parse(data: bytes | None) -> Configs:
    if data is None:
        return {}
    try:
        doc = json.loads(data)
        return {str(g): {str(k): str(v) for k, v in c.items()} for g, c in doc.items()}
    except (ValueError, AttributeError) as exc:
        raise CorruptRecordError(f"bad share-group configs in the metadata store: {exc}") from exc


class StoredShareConfigs:
    def __init__(
        self, store: MetadataStore, layout: KeyLayout, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.key = layout.prefix + b"share-group-configs"
        self.clock = clock
        self._read_at = float("-inf")

    def stale(self) -> bool:
        return self.clock() - self._read_at >= REFRESH_S

    async def load(self) -> Configs:
        kv = await self.store.get(self.key)
        self._read_at = self.clock()
        return _parse(kv.value if kv is not None else None)

    async def put(self, group_id: str, configs: dict[str, str]) -> Configs:
        """Replace the group's settings (none: forget the group); returns them all."""

        def change(old: bytes | None) -> bytes:
            current = _parse(old)
            if configs:
                current[group_id] = dict(configs)
            else:
                current.pop(group_id, None)
            return json.dumps(current, sort_keys=True).encode()

        new, _ = await cas_update(self.store, self.key, change, attempts=CAS_ATTEMPTS)
        self._read_at = self.clock()
        return _parse(new)
