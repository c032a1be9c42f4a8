"""Orphan sweeper: deletes remote objects that no manifest references.

An upload records ``COPY_STARTED`` before writing any object, and deletions drop an entry
only after its objects are gone, so normally every object under a partition root is named
by the manifest. Orphans come from crashes and lost races: a copy whose entry another
uploader's recovery already dropped, a deletion whose objects were re-created by a late
upload. The sweeper lists each partition root and deletes objects that neither a segment
entry (spilled ones included), a spillover reference nor the manifest itself names, once
they are older than ``orphan_grace_ms`` (so an upload in flight, whose COPY_STARTED entry
may be newer than the manifest version the sweeper read, is never touched).
"""

from __future__ import annotations

import logging
import uuid

from hot.errors import ObjectStoreError, StrataError, UnknownTopicOrPartitionError
from hot.manager import LogManager
from tiering.config import TieringConfig
from tiering.keys import manifest_key, partition_root
from tiering.manifest_store import ManifestStore
from tiering.metrics import TieringMetrics

logger = logging.getLogger(__name__)


async def orphans(
    manifests: ManifestStore, topic: str, topic_id: uuid.UUID, partition: int, now_ms: int, grace_ms: int
) -> list[str]:
    """Keys under the partition root that nothing references and are older than ``grace_ms``."""
    m, _ = await manifests.load(topic, topic_id, partition)
    referenced = {manifest_key(topic, topic_id, partition)}
    if m is not None:
        for s in await manifests.all_segments(m):
            referenced.update(s.keys.all())
        referenced.update(r.key for r in m.spillover)
    objs = await manifests.store.list(partition_root(topic, topic_id, partition) + "/")
    return [o.key for o in objs if o.key not in referenced and now_ms - o.last_modified_ms >= grace_ms]


class OrphanSweeper:
    """Sweeps the partition roots of every local topic (see module docstring)."""

    def __init__(
        self, manager: LogManager, manifests: ManifestStore, config: TieringConfig, metrics: TieringMetrics
    ) -> None:
        self.manager = manager
        self.manifests = manifests
        self.config = config
        self.metrics = metrics

    async def sweep_partition(self, topic: str, topic_id: uuid.UUID, partition: int, now_ms: int) -> int:
        doomed = await orphans(
            self.manifests, topic, topic_id, partition, now_ms, self.config.orphan_grace_ms
        )
        if doomed:
            logger.info("%s-%d: deleting %d orphaned object(s)", topic, partition, len(doomed))
            await self.manifests.store.delete_many(doomed)
            self.metrics.orphans_deleted.inc(len(doomed))
        return len(doomed)

    async def sweep(self, now_ms: int) -> int:
        """One pass over every partition of every local topic; returns objects deleted.
        Object-store errors propagate (the caller retries later)."""
        total = 0
        for info in self.manager.topics():
            for p in range(info.partitions):
                try:
                    total += await self.sweep_partition(info.name, info.topic_id, p, now_ms)
                except UnknownTopicOrPartitionError:
                    break
                except ObjectStoreError:
                    raise
                except StrataError as e:
                    logger.error("orphan sweep of %s-%d failed: %s", info.name, p, e)
        return total
