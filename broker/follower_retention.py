"""Local retention on followers of tiered partitions.

Only a partition's leader uploads segments and writes its manifest
(``tiering.service.TieringService.is_leader``). Its followers hold the same records at
the same offsets, so once the leader has uploaded a range, a follower's local copy of it
is as redundant as the leader's: like Kafka's followers, which consult the remote log
metadata, ours read the partition's manifest from the shared bucket (read-only: never
written here) and apply local retention (``local.retention.ms`` / ``local.retention.bytes``)
to what it covers.

Every ``interval`` (the tiering upload interval), for each partition this broker follows
whose topic has ``remote.storage.enable`` (a list kept until a role, a log or a topic's
configuration changes), and whose local data exceeds a local-retention
limit: load the manifest and run ``Log.apply_local_retention`` with "uploaded" meaning
"ends at or below the manifest's next offset" (the remote data is contiguous). That
call only ever deletes whole sealed segments (never the active one), oldest first, each
entirely below this replica's high watermark, so nothing that is not in the bucket and
nothing uncommitted goes. The deleted offsets stay readable from the bucket, and a
follower that becomes leader carries on from its local log start as the old leader did.

Total retention (deleting remote data, moving the log start offset) stays the leader's;
a follower moves its log start offset with the leader's from Fetch responses
(``broker.fetcher``), and local retention then drops segments entirely below it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable

from broker.partition_replica import PartitionReplica, Role
from broker.replica_manager import ReplicaManager
from hot.errors import ObjectStoreError, StrataError
from hot.log import Log
from hot.tasks import cancel_and_wait
from tiering.manifest_store import ManifestStore

log = logging.getLogger("strata.cluster.follower_retention")

# The followed replicas are listed again when a role changes (``roles_seq``) or a replica
# comes or goes, and at least this often (a safety net).
RELIST_EVERY_S = 60.0


def _now_ms() -> int:
    return int(time.time() * 1000)


def over_local_limit(lg: Log, now_ms: int) -> bool:
    """Whether local retention could delete a sealed segment of ``lg`` if everything were
    uploaded (spares a manifest read when it could not)."""
    segs = lg.segments()
    if len(segs) < 2:
        return False
    if segs[0].next_offset <= lg.log_start_offset:
        return True
    cfg = lg.config
    keep_bytes = cfg.effective_local_retention_bytes
    if keep_bytes >= 0 and lg.size - segs[0].size >= keep_bytes:
        return True
    keep_ms = cfg.effective_local_retention_ms
    return keep_ms >= 0 and now_ms - segs[0].largest_timestamp() > keep_ms


class FollowerRetention:
    """The follower-side local retention loop (see the module docstring)."""

    def __init__(
        self,
        replicas: ReplicaManager,
        manifests: ManifestStore,
        interval_s: float,
        *,
        clock_ms: Callable[[], int] = _now_ms,
        on_deleted: Callable[[], None] | None = None,
    ) -> None:
        self.replicas = replicas
        self.manifests = manifests
        self.interval_s = max(interval_s, 0.05)
        self.deleted_segments = 0
        self._clock_ms = clock_ms
        self._on_deleted = on_deleted
        self._task: asyncio.Task[None] | None = None
        self._store_failing = False
        # The followed tiered replicas, listed again only when a role, a log or a topic's
        # configuration changes, or every RELIST_EVERY_S (issues 35 and 39: an idle broker
        # looked at every replica it holds every second to refuse all but these; a single
        # node follows none).
        self._listed: list[PartitionReplica] = []
        self._listed_key: tuple[int, int, int] | None = None
        self._relist_at = 0.0

    def start(self) -> FollowerRetention:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="follower-retention")
        return self

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(Exception):
                await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.run_once()
            except Exception:
                log.exception("follower local retention pass failed")

    async def run_once(self) -> int:
        """One pass over the followed tiered partitions; the number of segments deleted."""
        deleted = 0
        for rep in self._tiered_followers():
            # A replica listed that stopped following, or whose topic stopped tiering,
            # since the listing is refused here, without a coroutine per replica.
            if rep.role is not Role.FOLLOWER or not rep.log.config.remote_storage_enable:
                continue
            try:
                deleted += await self._one(rep)
            except ObjectStoreError as exc:
                if not self._store_failing:
                    log.warning("object store failing (%s): followers keep their local data", exc)
                self._store_failing = True
                return deleted
        self._store_failing = False
        return deleted

    def _tiered_followers(self) -> list[PartitionReplica]:
        """The replicas this broker follows whose topic has ``remote.storage.enable``, as
        of the last role change (``ReplicaWakeups.roles_seq``), log opened or removed, or
        topic created, altered or grown (``LogManager.generation``), or ``RELIST_EVERY_S``
        ago at most; the caller still checks each one's role and config."""
        rm = self.replicas
        key = (rm.wakeups.roles_seq, rm.manager.generation, len(rm.replicas))
        now = time.monotonic()
        if key != self._listed_key or now >= self._relist_at:
            self._listed = [
                rep
                for rep in rm.replicas.values()
                if rep.role is Role.FOLLOWER and rep.log.config.remote_storage_enable
            ]
            self._listed_key = key
            self._relist_at = now + RELIST_EVERY_S
        return list(self._listed)

    async def _one(self, rep: PartitionReplica) -> int:
        lg = rep.log
        if rep.role is not Role.FOLLOWER or not lg.config.remote_storage_enable or not lg.is_online:
            return 0
        now = self._clock_ms()
        if not over_local_limit(lg, now):
            return 0
        va = self.replicas.view.topics.get(rep.topic)
        if va is None:
            return 0
        try:
            m, _ = await self.manifests.load(rep.topic, uuid.UUID(va.value.topic_id), rep.partition)
        except ObjectStoreError:
            raise
        except StrataError as exc:
            log.error("%s: cannot read the manifest: %s", rep.name, exc)
            return 0
        if m is None or rep.role is not Role.FOLLOWER or rep.log is not lg:
            return 0
        remote_next = m.next_offset()
        try:
            gone = await asyncio.to_thread(
                lg.apply_local_retention, now, lambda seg: seg.next_offset <= remote_next
            )
        except StrataError as exc:
            log.error("%s: follower local retention failed: %s", rep.name, exc)
            return 0
        if gone:
            self.deleted_segments += len(gone)
            log.info(
                "%s: deleted %d local segment(s) the leader uploaded (local log start now %d)",
                rep.name,
                len(gone),
                lg.local_log_start_offset,
            )
            if self._on_deleted is not None:
                self._on_deleted()
        return len(gone)
