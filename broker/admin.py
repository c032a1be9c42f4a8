"""Topic administration in cluster mode: every change is a compare-and-swap on the topic's
etcd record, never a change of one broker's local registry.

A broker that changes a topic (any broker: as in Kafka, the request may reach any of
them) validates the change exactly as the single-node broker does, writes the new
``TopicAssignment`` with a compare on the key's ``mod_revision`` (re-reading and retrying
when another writer came first) and waits until its own view shows the write. Every
broker's replica manager then applies it from the watch: added partitions get local
replicas where they are placed, changed configs reach the local logs (retention,
segment size, ``min.insync.replicas``, ``remote.storage.enable``...), and the
controller reads ``unclean.leader.election.enable`` from the record.

New partitions are placed like those of a new topic (``place_replicas``: round-robin
over the brokers live now, same start index as at creation); their initial states are
written in the same transaction as the grown assignment, so no reader sees a partition
without a state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import zlib
from collections.abc import Mapping, Sequence

from broker.controller import (
    CLUSTER_TOPIC_CONFIGS,
    check_machines,
    machines_of,
    place_replicas,
    validate_topic_configs,
)
from broker.groups.offsets import OFFSETS_TOPIC
from broker.metadata import MetadataClient, TopicAssignment, Versioned
from broker.share.config import SHARE_STATE_TOPIC
from broker.transactions.partitioner import TRANSACTION_STATE_TOPIC
from hot.config import LogConfig
from hot.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    MetadataStoreError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from hot.topics import MAX_PARTITIONS, check_topic_collision, validate_topic_name

# Compare-and-swap attempts before giving up on a topic other writers keep changing.
_CAS_ATTEMPTS = 8
# How long a change waits for this broker's view to show it (read-your-writes).
VISIBLE_TIMEOUT_S = 5.0


# Kafka's internal topics: the coordinators' state, written by them only.
INTERNAL_TOPICS: frozenset[str] = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def refuse_internal_topic(name: str, what: str) -> None:
    """The internal topics belong to their coordinators (``broker.groups.replicated_offsets``,
    ``broker.transactions.state_log``), which create them with their own settings; a
    partition count change would move every group or transactional id."""
    if name in INTERNAL_TOPICS:
        raise InvalidTopicError(f"cannot {what} the internal topic {name}")


def merge_configs(
    current: Mapping[str, str], changes: Mapping[str, str | None], *, replace: bool
) -> dict[str, str]:
    """The overrides after ``changes`` (None removes one); ``replace``: the changes are the
    whole new set (AlterConfigs), else only the named keys change (incremental)."""
    merged: dict[str, str] = {} if replace else dict(current)
    for k, v in changes.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    return merged


def validate_configs(configs: Mapping[str, str], defaults: LogConfig) -> None:
    """InvalidConfigError for an unknown name or a bad value (the single-node rules, plus
    the configs only the cluster layer reads)."""
    validate_topic_configs(configs)
    LogConfig.from_kafka({k: v for k, v in configs.items() if k not in CLUSTER_TOPIC_CONFIGS}, defaults)


async def _current(client: MetadataClient, name: str) -> Versioned[TopicAssignment]:
    va = await client.get_topic(name)
    if va is None:
        raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
    return va


async def _visible(client: MetadataClient, revision: int) -> None:
    with contextlib.suppress(TimeoutError):
        await client.view.wait_for_revision(revision, VISIBLE_TIMEOUT_S)


def _controller_epoch(client: MetadataClient) -> int:
    c = client.view.controller
    return c.value.epoch if c is not None else 0


async def create(
    client: MetadataClient,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
    defaults: LogConfig,
    *,
    assignments: Sequence[Sequence[int]] | None = None,
    validate_only: bool = False,
) -> TopicAssignment | Versioned[TopicAssignment]:
    """Create a topic: the one validation every door goes through (CreateTopics, REST, the
    CLI). Replicas are placed round-robin over the live brokers, or as ``assignments``
    says (partition i's replicas, preferred leader first), in which case ``partitions`` and
    ``replication_factor`` must be -1 or agree with it (Kafka's rule; some clients repeat
    what the assignment implies). ``validate_only``: the assignment it would get, nothing
    written."""
    validate_topic_name(name)
    refuse_internal_topic(name, "create")
    validate_configs(configs, defaults)
    if name in client.view.topics:
        raise TopicExistsError(f"topic {name!r} already exists")
    check_topic_collision(name, client.view.topics)
    registered = await client.live_brokers()  # not the view: a broker just started counts
    live = frozenset(registered)
    machines = machines_of(registered)
    if assignments:
        placed = _manual_assignment(assignments, partitions, replication_factor, live)
        for i, ids in enumerate(placed):
            check_machines(ids, machines, f"partition {i}'s replicas")
        replication_factor = len(placed[0])
    else:
        start = zlib.crc32(name.encode()) % max(len(live), 1)
        placed = place_replicas(partitions, replication_factor, live, start_index=start, machines=machines)
    if validate_only:
        return TopicAssignment(
            "00000000-0000-0000-0000-000000000000", replication_factor, placed, dict(configs)
        )
    created = await client.create_topic(
        name, placed, dict(configs), controller_epoch=_controller_epoch(client)
    )
    await _visible(client, created.mod_revision)
    return created


def _manual_assignment(
    assignments: Sequence[Sequence[int]], partitions: int, replication_factor: int, live: frozenset[int]
) -> tuple[tuple[int, ...], ...]:
    placed = tuple(tuple(r) for r in assignments)
    if partitions not in (-1, len(placed)) or replication_factor not in (-1, len(placed[0])):
        raise InvalidRequestError("assignments contradict num_partitions or replication_factor")
    rf = len(placed[0])
    for i, ids in enumerate(placed):
        if len(ids) != rf or len(set(ids)) != len(ids) or not ids:
            raise InvalidReplicaAssignmentError(
                f"partition {i} must name {rf} distinct brokers like partition 0, got {list(ids)}"
            )
    unknown = sorted({b for r in placed for b in r} - live)
    if unknown:
        raise InvalidReplicationFactorError(f"assignment names brokers {unknown} that are not live")
    return placed


async def delete(client: MetadataClient, name: str) -> None:
    """Delete the topic and its partition states (every broker deletes its replicas)."""
    refuse_internal_topic(name, "delete")
    await _visible(client, await client.delete_topic(name))


async def alter_configs(
    client: MetadataClient,
    name: str,
    changes: Mapping[str, str | None],
    defaults: LogConfig,
    *,
    replace: bool,
    validate_only: bool = False,
) -> TopicAssignment:
    """Change the topic's overrides in etcd (AlterConfigs with ``replace``, else
    IncrementalAlterConfigs); the new assignment."""
    for _ in range(_CAS_ATTEMPTS):
        va = await _current(client, name)
        merged = merge_configs(va.value.configs, changes, replace=replace)
        validate_configs(merged, defaults)
        # replace(): a reassignment in progress (adding/removing) must survive a config change.
        new = dataclasses.replace(va.value, configs=merged)
        if validate_only or merged == dict(va.value.configs):
            return new
        done = await client.update_topic(name, va, new, controller_epoch=_controller_epoch(client))
        if done is not None:
            await _visible(client, done.mod_revision)
            return new
    raise MetadataStoreError(f"topic {name!r} kept changing; configs not altered, retry")


async def add_partitions(
    client: MetadataClient,
    name: str,
    total: int,
    *,
    assignments: Sequence[Sequence[int]] | None = None,
    validate_only: bool = False,
) -> TopicAssignment:
    """Grow the topic to ``total`` partitions (CreatePartitions). New replicas are placed
    round-robin over the live brokers, or as ``assignments`` (one replica list per new
    partition) say. INVALID_PARTITIONS when ``total`` does not grow the topic,
    INVALID_REPLICATION_FACTOR when there are fewer live brokers than replicas."""
    refuse_internal_topic(name, "add partitions to")
    for _ in range(_CAS_ATTEMPTS):
        va = await _current(client, name)
        a = va.value
        old = a.partition_count
        if total <= old:
            raise InvalidPartitionsError(
                f"topic {name!r} has {old} partitions; the new count {total} must be larger"
            )
        if total > MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"number of partitions must be at most {MAX_PARTITIONS}, got {total}"
            )
        live = client.view.live_broker_ids()
        machines = machines_of(client.view.brokers)
        if assignments is not None:
            added = _check_assignments(assignments, total - old, a.replication_factor, live)
            for i, ids in enumerate(added):
                check_machines(ids, machines, f"new partition {old + i}'s replicas")
        else:
            start = zlib.crc32(name.encode()) % max(len(live), 1)
            added = place_replicas(total, a.replication_factor, live, start_index=start, machines=machines)[
                old:
            ]
        new = dataclasses.replace(a, partitions=a.partitions + added)
        if validate_only:
            return new
        done = await client.update_topic(name, va, new, controller_epoch=_controller_epoch(client))
        if done is not None:
            await _visible(client, done.mod_revision)
            return new
    raise MetadataStoreError(f"topic {name!r} kept changing; partitions not added, retry")


def _check_assignments(
    assignments: Sequence[Sequence[int]], count: int, rf: int, live: frozenset[int]
) -> tuple[tuple[int, ...], ...]:
    if len(assignments) != count:
        raise InvalidRequestError(
            f"assignments must name every new partition ({count}), got {len(assignments)}"
        )
    out: list[tuple[int, ...]] = []
    for i, r in enumerate(assignments):
        ids = tuple(r)
        if len(ids) != rf or len(set(ids)) != len(ids):
            raise InvalidReplicationFactorError(
                f"assignment {i} must name {rf} distinct brokers (the replication factor), got {list(ids)}"
            )
        unknown = sorted(set(ids) - live)
        if unknown:
            raise InvalidReplicationFactorError(f"assignment {i} names brokers {unknown} that are not live")
        out.append(ids)
    return tuple(out)
