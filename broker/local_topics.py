"""The local topic registry kept in line with etcd's topics that have a replica here.

``ReplicaManager`` owns the replicas' roles; this module owns the topics under them: same
topic id, partition count and log configs as etcd says (admin changes made through etcd
reach the local logs). A topic that gains many new local partitions at once (a
10,000-partition CreateTopics) is built in a thread: thousands of partition directories
take seconds of disk work that must not stop the event loop (its etcd calls, heartbeats
and requests), nor hold up the other topics' reconciling. A few partitions (an internal
topic's 50) are built on the loop at once, as a produce or a coordinator load right after
the creation expects.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any

from broker.controller import CLUSTER_TOPIC_CONFIGS
from broker.log_manager import ClusterLogManager
from broker.metadata import ClusterView, TopicAssignment
from hot.errors import StrataError, UnknownTopicOrPartitionError

log = logging.getLogger("strata.cluster.replicas")

# New local partitions up to this many are built on the event loop (milliseconds each,
# one syncfs for all: hot.manager); more, in a thread.
INLINE_BUILD_PARTITIONS = 64


def log_configs(configs: dict[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """A topic's etcd configs without those only the cluster layer interprets."""
    items = configs.items() if isinstance(configs, dict) else configs
    return {k: v for k, v in items if k not in CLUSTER_TOPIC_CONFIGS}


class LocalTopics:
    """Creates, grows and re-configures the local topics of ``view`` placed on ``broker_id``.

    ``spawn`` starts a background task (the replica manager's, so it is cancelled on stop);
    ``built`` runs after a threaded build (the replica manager's reconcile: the new
    replicas take their roles at once, not at the loop's next turn)."""

    def __init__(
        self,
        broker_id: int,
        view: ClusterView,
        manager: ClusterLogManager,
        spawn: Callable[[Coroutine[Any, Any, None], str], None],
        built: Callable[[], Awaitable[None]],
    ) -> None:
        self.broker_id = broker_id
        self.view = view
        self.manager = manager
        self._spawn = spawn
        self._built = built
        self.creating: set[str] = set()  # topics being built in a thread
        self.failed = False  # a creation failed: the replica manager's next pass comes soon

    def create_missing(self) -> None:
        """Create (or grow) the local topics the view places replicas of here."""
        me = self.broker_id
        for name, va in list(self.view.topics.items()):
            a = va.value
            if name in self.creating or not any(me in r for r in a.partitions):
                continue
            try:
                info = self.manager.topic(name)
            except UnknownTopicOrPartitionError:
                info = None
            if info is not None and (
                info.topic_id != uuid.UUID(a.topic_id) or info.partitions >= a.partition_count
            ):
                continue  # in place, or recreated in the cluster (reconcile deletes it first)
            new = a.partition_count - (info.partitions if info is not None else 0)
            if new <= INLINE_BUILD_PARTITIONS:
                try:
                    self.mirror(name, a)
                except StrataError as exc:
                    log.warning("creating local replicas of topic %s failed: %s", name, exc)
                    self.failed = True
                continue
            self.creating.add(name)
            self._spawn(self._build(name, a), f"create-local-{name}")

    async def _build(self, name: str, a: TopicAssignment) -> None:
        try:
            await asyncio.to_thread(self.mirror, name, a)
        except StrataError as exc:
            log.warning("creating local replicas of topic %s failed: %s", name, exc)
            self.failed = True
        finally:
            self.creating.discard(name)
        try:
            await self._built()
        except Exception:
            log.exception("reconciling replicas with the cluster metadata failed")

    def mirror(self, name: str, a: TopicAssignment) -> None:
        """The local topic ``name`` as ``a`` says: created, grown, configs replaced."""
        configs = log_configs(dict(a.configs))
        tid = uuid.UUID(a.topic_id)
        try:
            info = self.manager.topic(name)
        except UnknownTopicOrPartitionError:
            log.info("creating local replicas of topic %s (%d partitions)", name, a.partition_count)
            self.manager.create_topic(name, a.partition_count, configs, topic_id=tid)
            return
        if info.partitions < a.partition_count:
            self.manager.add_partitions(name, a.partition_count)
        if dict(info.configs) != configs:
            self.manager.alter_topic_configs(name, configs, replace=True)
