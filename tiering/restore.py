"""Rebuild a broker's topics from the bucket (a lost or new data directory).

For every topic manifest (``topics/<topic>.json``) the topic is recreated with its topic
id, partition count and config overrides, and every partition is created empty at
``(log_start_offset, next_offset)`` of its partition manifest: the history stays in the
bucket (the remote reader serves it) and new appends continue at the next offset, so no
offset is ever reused. The producer-state snapshot uploaded with the partition's last
remote segment (the state right after it, named by ``next_offset``) is installed as
``<next_offset:020d>.snapshot`` so idempotent producers keep their deduplication state and
transactions open at that offset stay open (version 2 snapshots carry each one's first
offset: the last stable offset stays below them until they end; a warning names them).
The segments' transaction indexes stay in the bucket with their segments: the remote
reader serves read_committed fetches of the restored history from them
(``RemoteReader.search_aborted_transactions``), as it serves the data.

Two entry points:

- ``restore_data_dir``: the complete, offline procedure (``strata restore``, or a server
  before it opens its log manager): open a LogManager on the directory, create the
  topics, close it, install the producer snapshots, so the next open loads them.
- ``restore_missing_topics``: for a server start-up; restores only into an empty
  registry. Given a manager that is not open yet it runs the offline procedure;
  given an open one it creates the topics in place (producer snapshots then need the
  ``producer_snapshots`` hook of ``LogManager.create_topic``; without it they are
  skipped with a warning: data is complete, only idempotent deduplication state is lost).

Crash behaviour: topic creation is the LogManager's (registry first, then directories
built under a temporary name and renamed); a crash before the snapshots are installed
leaves the topics restored without producer state, which a second restore cannot add
(the topics exist): the warning in the log says so. Nothing in the bucket is modified.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hot.config import LogConfig
from hot.errors import CorruptLogError, ObjectNotFoundError, StrataError, TopicExistsError
from hot.manager import LogManager
from hot.producer_state import ProducerSnapshotFile, snapshot_name
from hot.topics import TOPICS_FILE, TopicRegistry
from tiering.manifest import ManifestError, ObjectPart, RemoteSegment, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.service import PENDING_DELETES_FILE, PendingDeletes
from tiering.store import ObjectStore

logger = logging.getLogger(__name__)


class RestoreError(StrataError):
    """A topic could not be restored (the message names the topic and why)."""


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    partition: int
    log_start_offset: int
    next_offset: int
    remote_segments: int
    remote_bytes: int
    snapshot: ObjectPart | None  # producer snapshot as of ``next_offset``, if uploaded


@dataclass(frozen=True, slots=True)
class TopicPlan:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str]
    parts: tuple[PartitionPlan, ...]


@dataclass(frozen=True, slots=True)
class RestoredTopic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    next_offsets: dict[int, int]
    # partition -> snapshot bytes still to install (offline procedure); empty when done
    pending_snapshots: dict[int, bytes] = field(default_factory=dict)
    snapshots_installed: int = 0
    skipped: str | None = None  # why the topic was left alone (already present)


@dataclass(frozen=True, slots=True)
class RestoreEvent:
    """Progress report: ``done`` of ``total`` partitions; ``topic``/``message`` say what happened."""

    topic: str
    done: int
    total: int
    message: str


Progress = Callable[[RestoreEvent], None]


# --- planning (reads the bucket only) ----------------------------------------------------------


def _last_segment(all_segments: Sequence[RemoteSegment]) -> RemoteSegment | None:
    copied = [s for s in all_segments if s.state is SegmentState.COPIED]
    return copied[-1] if copied else None


async def plan_topic(manifests: ManifestStore, name: str) -> TopicPlan:
    """What restoring topic ``name`` means, from its topic and partition manifests."""
    try:
        doc = await manifests.load_topic_manifest(name)
    except ManifestError as e:
        raise RestoreError(f"topic {name!r}: {e}") from None
    if doc is None:
        raise RestoreError(f"topic {name!r} has no topic manifest in {manifests.store.url}")
    topic_id = uuid.UUID(doc["topic_id"])
    partitions = int(doc["partitions"])

    async def part(p: int) -> PartitionPlan:
        try:
            m, _ = await manifests.load(name, topic_id, p)
            if m is None:
                return PartitionPlan(p, 0, 0, 0, 0, None)
            segs = await manifests.all_segments(m)
        except ManifestError as e:
            raise RestoreError(f"topic {name!r} partition {p}: {e}") from None
        nxt = m.next_offset()
        last = _last_segment(segs)
        snap = None
        if last is not None and last.last_offset + 1 == nxt:
            snap = last.snapshot_part()
        copied = [s for s in segs if s.state is SegmentState.COPIED]
        return PartitionPlan(p, m.log_start_offset, nxt, len(copied), sum(s.size for s in copied), snap)

    parts = await asyncio.gather(*(part(p) for p in range(partitions)))
    return TopicPlan(name, topic_id, partitions, dict(doc["configs"]), tuple(parts))


async def plan_restore(manifests: ManifestStore, topics: Sequence[str] | None = None) -> list[TopicPlan]:
    """Plans for ``topics`` (default: every topic with a topic manifest), by name."""
    names = sorted(set(topics)) if topics else await manifests.list_topics()
    return [await plan_topic(manifests, n) for n in names]


async def _snapshot(store: ObjectStore, plan: TopicPlan, pp: PartitionPlan) -> bytes | None:
    """The validated producer snapshot of a partition, None if absent or damaged."""
    if pp.snapshot is None:
        return None
    try:
        data = await pp.snapshot.get(store)
        entries = ProducerSnapshotFile.decode(data, pp.next_offset, pp.snapshot.name)
    except ObjectNotFoundError:
        logger.warning("%s-%d: producer snapshot %s is missing", plan.name, pp.partition, pp.snapshot.name)
        return None
    except CorruptLogError as e:
        logger.warning("%s-%d: ignoring damaged producer snapshot: %s", plan.name, pp.partition, e)
        return None
    open_txns = sorted(
        (e.current_txn_first_offset, e.producer_id) for e in entries if e.current_txn_first_offset >= 0
    )
    if open_txns:
        # Their markers lay in the part of the log that was never uploaded: the LSO stays
        # at the first of them until each is ended (by its coordinator, its timeout, or an
        # operator's abort), exactly as for a hanging transaction in Kafka.
        logger.warning(
            "%s-%d: %d transaction(s) were open at the restore point %d (producer id, first offset: %s); "
            "read_committed consumers wait at offset %d until they are ended",
            plan.name,
            pp.partition,
            len(open_txns),
            pp.next_offset,
            ", ".join(f"{pid} at {first}" for first, pid in open_txns),
            open_txns[0][0],
        )
    return data


# --- restoring ---------------------------------------------------------------------------------


def _supports_snapshot_hook(manager: LogManager) -> bool:
    return "producer_snapshots" in inspect.signature(manager.create_topic).parameters


async def restore_topics(
    manager: LogManager,
    store: ObjectStore,
    *,
    topics: Sequence[str] | None = None,
    progress: Progress | None = None,
    manifests: ManifestStore | None = None,
    exclude_ids: Collection[uuid.UUID] = (),
) -> list[RestoredTopic]:
    """Recreate ``topics`` (default: all in the bucket) in an open ``manager``.

    A topic already present with the same id is skipped; with another id it is a
    RestoreError (two different topics share the name). Producer snapshots are installed
    through the manager's hook when it has one, else returned in ``pending_snapshots``
    (``install_producer_snapshots`` writes them while the manager is closed). Topics
    whose id is in ``exclude_ids`` (deleted locally, remote deletion pending) are skipped."""
    manifests = manifests or ManifestStore(store)
    plans = await plan_restore(manifests, topics)
    total = sum(p.partitions for p in plans)
    done = 0
    hook = _supports_snapshot_hook(manager)
    out: list[RestoredTopic] = []
    for plan in plans:
        if plan.topic_id in exclude_ids:
            done += plan.partitions
            out.append(
                RestoredTopic(plan.name, plan.topic_id, plan.partitions, {}, skipped="deletion pending")
            )
            if progress:
                progress(
                    RestoreEvent(plan.name, done, total, "deleted locally, remote deletion pending: skipped")
                )
            continue
        existing = next((t for t in manager.topics() if t.name == plan.name), None)
        if existing is not None:
            if existing.topic_id != plan.topic_id:
                raise RestoreError(
                    f"topic {plan.name!r} exists locally with topic id {existing.topic_id}, the bucket "
                    f"holds topic id {plan.topic_id}: delete the local topic first"
                )
            done += plan.partitions
            out.append(
                RestoredTopic(plan.name, plan.topic_id, plan.partitions, {}, skipped="already present")
            )
            if progress:
                progress(RestoreEvent(plan.name, done, total, "already present, skipped"))
            continue
        snaps = await asyncio.gather(*(_snapshot(store, plan, pp) for pp in plan.parts))
        snapshots = {pp.partition: s for pp, s in zip(plan.parts, snaps, strict=True) if s is not None}
        starts = {pp.partition: (pp.log_start_offset, pp.next_offset) for pp in plan.parts}
        kwargs: dict[str, object] = {"topic_id": plan.topic_id, "start_offsets": starts}
        if hook:
            kwargs["producer_snapshots"] = snapshots
        try:
            await asyncio.to_thread(
                manager.create_topic,
                plan.name,
                plan.partitions,
                plan.configs,
                **kwargs,  # type: ignore[arg-type]
            )
        except TopicExistsError as e:
            raise RestoreError(f"topic {plan.name!r}: {e}") from None
        done += plan.partitions
        remote = sum(pp.remote_bytes for pp in plan.parts)
        if progress:
            progress(
                RestoreEvent(
                    plan.name,
                    done,
                    total,
                    f"{plan.partitions} partitions, {remote} remote bytes, "
                    f"{len(snapshots)} producer snapshots",
                )
            )
        logger.info(
            "restored topic %s (id %s, %d partitions) from %s at next offsets %s",
            plan.name,
            plan.topic_id,
            plan.partitions,
            store.url,
            {pp.partition: pp.next_offset for pp in plan.parts},
        )
        out.append(
            RestoredTopic(
                plan.name,
                plan.topic_id,
                plan.partitions,
                {pp.partition: pp.next_offset for pp in plan.parts},
                pending_snapshots={} if hook else snapshots,
                snapshots_installed=len(snapshots) if hook else 0,
            )
        )
    return out


def install_producer_snapshots(manager: LogManager, restored: Sequence[RestoredTopic]) -> list[RestoredTopic]:
    """Write the pending snapshots into the partition directories of a CLOSED manager's
    data dir (replacing the empty-state snapshot its close wrote at the same offset), so
    the next open loads them. Returns the topics with ``pending_snapshots`` emptied."""
    out = []
    for t in restored:
        for p, data in t.pending_snapshots.items():
            nxt = t.next_offsets[p]
            path = manager.partition_dir(t.name, p) / snapshot_name(nxt)
            entries = ProducerSnapshotFile.decode(data, nxt, str(path))
            ProducerSnapshotFile.write(str(path), nxt, entries)
        out.append(
            RestoredTopic(
                t.name,
                t.topic_id,
                t.partitions,
                t.next_offsets,
                snapshots_installed=t.snapshots_installed + len(t.pending_snapshots),
                skipped=t.skipped,
            )
        )
    return out


async def restore_data_dir(
    data_dir: str | os.PathLike[str],
    store: ObjectStore,
    *,
    topics: Sequence[str] | None = None,
    progress: Progress | None = None,
    defaults: LogConfig | None = None,
    exclude_ids: Collection[uuid.UUID] = (),
) -> list[RestoredTopic]:
    """The complete offline restore into ``data_dir`` (no broker may be running on it)."""
    manager = LogManager(Path(data_dir), defaults)
    await asyncio.to_thread(manager.open)
    try:
        restored = await restore_topics(
            manager, store, topics=topics, progress=progress, exclude_ids=exclude_ids
        )
    finally:
        await asyncio.to_thread(manager.close)
    return await asyncio.to_thread(install_producer_snapshots, manager, restored)


def _is_open(manager: LogManager) -> bool:
    try:
        manager.registry  # noqa: B018 - raises StorageError when the manager is not open
    except StrataError:
        return False
    return True


def _pending_deletes(manager: LogManager) -> set[uuid.UUID]:
    """Ids of topics deleted locally whose remote data the tiering service has yet to delete."""
    return {t.topic_id for t in PendingDeletes(manager.meta_dir / PENDING_DELETES_FILE).list()}


@dataclass(frozen=True, slots=True)
class StartupRestore:
    """What a broker brought back from the bucket when it started on a new or lost data dir
    (the console's tiering page shows it): the topics, from where, when and how long."""

    topics: tuple[str, ...]
    source: str
    finished_ms: int
    seconds: float


async def restore_missing_topics(
    manager: LogManager,
    store: ObjectStore,
    *,
    progress: Progress | None = None,
) -> list[str]:
    """Restore the bucket's topics into a new or lost data dir; returns the restored names.

    Given a manager that is not open yet (what ``api/server.py`` does, for full fidelity:
    producer snapshots installed), it restores only when the data dir has no topic
    registry at all: an existing registry, even an empty one, means topics were deleted
    on purpose, and resurrecting them from a bucket whose deletion is still in flight
    would be wrong. Given an open manager it restores when its registry is empty, topics
    awaiting remote deletion excepted. The local check comes first, so a broker with a
    registry starts without touching the bucket."""
    is_open = _is_open(manager)
    if is_open:
        if manager.topics():
            return []
    elif TopicRegistry(manager.meta_dir / TOPICS_FILE, defaults=manager.defaults).exists_on_disk:
        return []
    manifests = ManifestStore(store)
    names = await manifests.list_topics()
    if not names:
        return []
    pending = _pending_deletes(manager)
    if not is_open:
        restored = await restore_data_dir(
            manager.data_dir,
            store,
            topics=names,
            progress=progress,
            defaults=manager.defaults,
            exclude_ids=pending,
        )
    else:
        restored = await restore_topics(
            manager, store, topics=names, progress=progress, manifests=manifests, exclude_ids=pending
        )
        lost = [f"{t.name}-{p}" for t in restored for p in t.pending_snapshots]
        if lost:
            logger.warning(
                "producer state of %s not installed: LogManager.create_topic has no producer_snapshots "
                "hook and the manager is open (restore before opening it to keep it)",
                ", ".join(lost),
            )
    return [t.name for t in restored if t.skipped is None]


__all__ = [
    "PartitionPlan",
    "RestoreError",
    "RestoreEvent",
    "RestoredTopic",
    "StartupRestore",
    "TopicPlan",
    "install_producer_snapshots",
    "plan_restore",
    "plan_topic",
    "restore_data_dir",
    "restore_missing_topics",
    "restore_topics",
]
