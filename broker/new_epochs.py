"""A restarted leader's new leader epochs, written to the metadata store in batches.

A broker that restarts while the view still names it leader (states written for its
previous incarnation, or while its lease was in doubt) must take a fresh epoch before it
leads again. After a restart that is thousands of partitions at once: one transaction per
partition held up the loop for seconds (issue 35), so ``ReplicaManager._apply`` queues
them here and one task writes them, ``max_txn_ops / 2`` per transaction (one etcd write and
one view update per batch); a batch that meets a conflict is written partition by
partition. The view change each write causes makes the replica manager lead them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from broker.metadata import MetadataClient, PartitionState, Versioned
from broker.partition_replica import PartitionReplica
from hot.errors import MetadataStoreError, StrataError

log = logging.getLogger("strata.cluster.replicas")


class NewEpochs:
    """The queue of partitions whose new leader epoch this broker writes (see above)."""

    def __init__(
        self,
        broker_id: int,
        client: MetadataClient,
        spawn: Callable[[Coroutine[Any, Any, None], str], object],
        on_failure: Callable[[], None],
    ) -> None:
        self.broker_id = broker_id
        self.client = client
        self._spawn = spawn
        self._on_failure = on_failure  # a partition left without its epoch: retry soon
        self._queued: dict[tuple[str, int], tuple[PartitionReplica, Versioned[PartitionState]]] = {}
        self._writing = False

    def queue(self, rep: PartitionReplica, vs: Versioned[PartitionState]) -> None:
        """Take a new epoch for ``rep`` (led in ``vs``) once this reconcile pass is done."""
        rep.taking_epoch = True
        self._queued[(rep.topic, rep.partition)] = (rep, vs)
        if not self._writing:
            self._writing = True
            self._spawn(self._write_all(), "take-epochs")

    async def _write_all(self) -> None:
        try:
            await asyncio.sleep(0)  # after the reconcile pass that queued them
            step = max(1, self.client.max_txn_ops // 2 - 1)
            while self._queued:
                queued = list(self._queued.values())
                self._queued.clear()
                for i in range(0, len(queued), step):
                    batch = queued[i : i + step]
                    changes = [(rep.topic, rep.partition, vs, self._next(vs.value)) for rep, vs in batch]
                    written = None
                    if len(batch) > 1:
                        try:
                            written = await self.client.update_partition_states(changes, controller=None)
                        except (MetadataStoreError, StrataError) as exc:
                            log.warning("could not take %d new leader epochs at once: %s", len(batch), exc)
                    if written is None:
                        for rep, vs in batch:
                            await self._write_one(rep, vs)
                        continue
                    for rep, _ in batch:
                        rep.taking_epoch = False
                    log.info(
                        "took new leader epochs of %d partitions after restarting (%s, ...)",
                        len(batch),
                        batch[0][0].name,
                    )
        finally:
            for rep, _ in self._queued.values():
                rep.taking_epoch = False
            self._queued.clear()
            self._writing = False

    def _next(self, s: PartitionState) -> PartitionState:
        return PartitionState(self.broker_id, s.leader_epoch + 1, s.isr, s.controller_epoch)

    async def _write_one(self, rep: PartitionReplica, vs: Versioned[PartitionState]) -> None:
        try:
            new = self._next(vs.value)
            res = await self.client.update_partition_state(rep.topic, rep.partition, vs, new)
            if res.ok:
                log.info("%s: took leader epoch %d after restarting", rep.name, new.leader_epoch)
        except (MetadataStoreError, StrataError) as exc:
            log.warning("%s: could not take a new leader epoch: %s", rep.name, exc)
            self._on_failure()
        finally:
            rep.taking_epoch = False
