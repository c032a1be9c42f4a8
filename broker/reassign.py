"""Partition reassignment requests (KIP-455): validate, then record them in etcd.

A request is one compare-and-swap of the topic's assignment (on its ``mod_revision``),
retried against the fresh record when another writer got there first. It only adds
replicas (``broker.replication.reassignment.reassign``); the elected controller
completes the reassignment once the new replicas are in sync (``Controller.reconcile``).
Used by the Kafka handlers of cluster mode (AlterPartitionReassignments) and by
``strata cluster reassign``, which writes etcd directly like ``strata cluster status``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from broker.controller import CLUSTER_TOPIC_CONFIGS, check_machines, machines_of
from broker.etcd import EtcdClient
from broker.keys import KeyLayout
from broker.metadata import ClusterView, MetadataClient, TopicAssignment
from broker.replication.reassignment import PartitionReplicas, reassign, validate_target
from hot.config import LogConfig
from hot.errors import InvalidConfigError, MetadataStoreError, UnknownTopicOrPartitionError

# Compare-and-swap attempts before giving up under contention.
_ATTEMPTS = 20


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


def ongoing_reassignments(
    view: ClusterView, wanted: Mapping[str, Sequence[int]] | None = None
) -> list[OngoingReassignment]:
    """The reassignments in progress (of ``wanted`` topic -> partitions only, if given),
    by topic and partition. Unknown topics and partitions are simply not listed."""
    out: list[OngoingReassignment] = []
    for topic, va in sorted(view.topics.items()):
        if wanted is not None and topic not in wanted:
            continue
        a = va.value
        for p in a.reassigning:
            if wanted is not None and p not in wanted[topic]:
                continue
            rs = a.replica_set(p)
            out.append(OngoingReassignment(topic, p, rs.replicas, rs.adding, rs.removing))
    return out


def min_insync_replicas(assignment: TopicAssignment, defaults: LogConfig | None = None) -> int:
    """The topic's min.insync.replicas (its override, else ``defaults``' value)."""
    configs = {k: v for k, v in assignment.configs.items() if k not in CLUSTER_TOPIC_CONFIGS}
    try:
        return LogConfig.from_kafka(configs, defaults).min_insync_replicas
    except InvalidConfigError:
        return (defaults or LogConfig()).min_insync_replicas


async def alter_reassignment(
    client: MetadataClient,
    topic: str,
    partition: int,
    target: Sequence[int] | None,
    *,
    defaults: LogConfig | None = None,
) -> PartitionReplicas:
    """Start (or replace) the reassignment of ``topic``-``partition`` to ``target``, or
    cancel it (``target`` None). Returns the partition's replica set as written.

    Errors: UnknownTopicOrPartitionError; InvalidReplicaAssignmentError for an empty
    list, a repeated broker or one that is neither live nor a current replica;
    InvalidReplicationFactorError when ``target`` is shorter than the topic's
    min.insync.replicas; NoReassignmentInProgressError when cancelling nothing.
    """
    for _ in range(_ATTEMPTS):
        va = await client.get_topic(topic)
        if va is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
        current = va.value.replica_set(partition)
        if target is not None:
            live = await client.live_brokers()
            validate_target(
                target,
                known_brokers=set(live) | set(current.replicas),
                min_insync_replicas=min_insync_replicas(va.value, defaults),
            )
            # Processes of one machine share its data dir: never two replicas there.
            check_machines(target, machines_of(live), "the target replica list")
        new = reassign(current, target)
        if new == current:
            return current
        if await client.update_replica_sets(topic, va, va.value.with_replica_set(partition, new)) is not None:
            return new
    raise MetadataStoreError(f"{topic}-{partition}: the topic kept changing; reassignment not written")


async def wait_reassigned(client: MetadataClient, topic: str, partition: int, timeout: float) -> None:
    """Until the reassignment of ``topic``-``partition`` has completed (or was never
    running), as the client's watched view shows; TimeoutError after ``timeout``."""

    def done(view: ClusterView) -> bool:
        va = view.topics.get(topic)
        return va is None or partition not in va.value.reassigning

    await asyncio.wait_for(client.view.wait_for(done, timeout), timeout + 1.0)


def describe(r: OngoingReassignment) -> dict[str, object]:
    """One reassignment as JSON-able data (the CLI's and ``cluster status``'s)."""
    return {
        "topic": r.topic,
        "partition": r.partition,
        "replicas": list(r.replicas),
        "adding": list(r.adding),
        "removing": list(r.removing),
        "target": list(r.target),
        "original": list(r.original),
    }


def format_reassignments(rows: Sequence[Mapping[str, object]]) -> list[str]:
    """Human-readable lines for ``describe``'d reassignments."""

    def ids(v: object) -> str:
        return ",".join(map(str, v)) if isinstance(v, list) and v else "-"

    lines = [f"reassignments in progress ({len(rows)}):"]
    for r in rows:
        lines.append(
            f"  {r['topic']}-{r['partition']}: {ids(r['original'])} -> {ids(r['target'])}"
            f"  (replicas {ids(r['replicas'])}, adding {ids(r['adding'])}, removing {ids(r['removing'])})"
        )
    return lines


async def request(
    endpoints: str,
    cluster: str,
    topic: str,
    partition: int,
    target: Sequence[int] | None,
    *,
    wait: float | None = None,
    timeout: float = 5.0,
) -> dict[str, object]:
    """``strata cluster reassign``: write the request straight to etcd (no broker needed),
    then with ``wait`` watch until the controller completed it (TimeoutError after
    ``wait`` seconds). Returns the partition's replicas as written and, waited for, as
    they ended."""
    async with EtcdClient(endpoints, timeout=timeout) as etcd:
        client = MetadataClient(etcd, KeyLayout(cluster))
        try:
            written = await alter_reassignment(client, topic, partition, target)
            out: dict[str, object] = {
                "topic": topic,
                "partition": partition,
                "replicas": list(written.replicas),
                "adding": list(written.adding),
                "removing": list(written.removing),
                "in_progress": written.reassigning,
            }
            if wait is not None and written.reassigning:
                await client.start()
                await wait_reassigned(client, topic, partition, wait)
                va = client.view.topics.get(topic)
                out["in_progress"] = False
                out["replicas"] = list(va.value.partitions[partition]) if va is not None else []
                out["adding"], out["removing"] = [], []
            return out
        finally:
            await client.close(deregister=False)


__all__ = [
    "OngoingReassignment",
    "alter_reassignment",
    "describe",
    "format_reassignments",
    "min_insync_replicas",
    "ongoing_reassignments",
    "request",
    "wait_reassigned",
]
