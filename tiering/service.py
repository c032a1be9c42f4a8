"""TieringService: the broker's tiered-storage machinery, run as asyncio tasks in its loop.

Owns the object store, the manifest store, the uploader (uploads, local and total
retention, crash recovery), the orphan sweeper and the remote reader with its chunk
cache. ``api/server.py`` starts it after the LogManager opened and closes it before the
manager closes.

On ``start`` it takes over from the hot tier what only it can do safely:

* the manager's retention thread skips topics with ``remote.storage.enable`` (their
  local retention may only delete uploaded segments, their total retention spans the
  bucket): during an object-store outage local data stays (KAFKA-19952), and produce
  continues until the disk high-water mark, where it fails with DiskHighWaterError;
* topic deletion is followed by the deletion of the topic's remote data, in the
  background, recorded first in ``PendingDeletes`` so a restart finishes it.

One loop does the work: every ``upload_interval_ms`` it scans every partition of every
tiered topic (a rolled segment is always found by the scan, not only by a roll event:
KAFKA-15272), uploads in offset order (``upload_concurrency`` partitions at once),
applies local retention, and every ``retention_check_interval_ms`` total retention; the
sweeper runs every ``orphan_sweep_interval_ms``. While the object store fails the loop
backs off with jitter (up to ``max_backoff_ms``) and resumes by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from hot.errors import (
    ObjectStoreError,
    StorageError,
    StrataError,
    UnknownTopicOrPartitionError,
)
from hot.log import Log, atomic_write
from hot.manager import LogManager
from hot.topics import TopicInfo
from tiering.cache import ChunkCache
from tiering.compactor import WORK_DIR, RemoteCompactor
from tiering.config import TieringConfig
from tiering.manifest import PartitionManifest
from tiering.manifest_preload import ManifestPreloader
from tiering.manifest_store import ManifestStore
from tiering.metrics import CacheStatsCollector, DirectGetCollector, S3RequestCollector, TieringMetrics
from tiering.pass_schedule import PassSchedule, upload_lag_due
from tiering.remote_read import RemoteReader
from tiering.s3_store import S3Store
from tiering.store import ObjectStore
from tiering.sweeper import OrphanSweeper
from tiering.upload_lag import ShutdownUpload, pending_ranges, roll_aged_segments
from tiering.uploader import PartitionState, PartitionStoppedError, Uploader

logger = logging.getLogger(__name__)

PENDING_DELETES_FILE: Final = "tiering-deletes.json"
_RECOVERY_WAIT_S: Final = 1.0  # how long ``start`` waits for the recovery of every partition
_PENDING_VERSION: Final = 1
# A quiet partition without sealed local segments is looked at again after this many
# quiet periods at the latest (a roll, its upload-lag bound or a changed set of
# partitions brings it back sooner): nothing else about it comes due with time.
QUIET_LONG_FACTOR: Final = 10


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class DeletedTopic:
    name: str
    topic_id: uuid.UUID
    partitions: int


class PendingDeletes:
    """Topics deleted locally whose remote data is not deleted yet.

    File ``<data_dir>/meta/tiering-deletes.json``, UTF-8 JSON, replaced atomically (tmp,
    fsync, rename, fsync dir)::

        {"version": 1, "topics": [{"name": "orders", "topic_id": "<uuid>", "partitions": 3}]}

    An entry is added when the manager reports a deletion and removed once the remote
    deletion finished; remote deletion is idempotent, so a crash at any point at worst
    repeats it. An unreadable file is logged and treated as empty (its topics' objects
    are then left to an operator), never a reason to refuse to start.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._topics: list[DeletedTopic] = self._load()

    def _load(self) -> list[DeletedTopic]:
        try:
            doc = json.loads(self.path.read_bytes())
            if doc.get("version") != _PENDING_VERSION:
                raise ValueError(f"unsupported version {doc.get('version')!r}")
            return [
                DeletedTopic(str(t["name"]), uuid.UUID(str(t["topic_id"])), int(t["partitions"]))
                for t in doc["topics"]
            ]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            logger.error("ignoring unreadable %s: %s", self.path, e)
            return []

    def _save(self) -> None:
        doc: dict[str, Any] = {
            "version": _PENDING_VERSION,
            "topics": [
                {"name": t.name, "topic_id": str(t.topic_id), "partitions": t.partitions}
                for t in self._topics
            ],
        }
        atomic_write(self.path, json.dumps(doc, indent=1).encode())

    def add(self, topic: DeletedTopic) -> None:
        with self._lock:
            if topic not in self._topics:
                self._topics.append(topic)
                self._save()

    def remove(self, topic: DeletedTopic) -> None:
        with self._lock:
            if topic in self._topics:
                self._topics.remove(topic)
                self._save()

    def list(self) -> list[DeletedTopic]:
        with self._lock:
            return list(self._topics)


@dataclass(frozen=True, slots=True)
class SyncedPartition:
    """One partition of a ``TieringService.sync``: whether its active segment was rolled,
    the log end it was synced to, and the remote next offset after (every offset below it
    is in the bucket); ``pending``: why the bucket still lacks offsets below ``target``."""

    topic: str
    partition: int
    rolled: bool
    target: int
    remote_next: int
    pending: str | None = None


@dataclass(frozen=True, slots=True)
class TierSync:
    partitions: list[SyncedPartition]
    uploaded: int  # segments uploaded
    elapsed_s: float
    error: str | None = None  # the last object-store error


@dataclass(slots=True)
class PassResult:
    uploaded: int = 0
    local_deleted: int = 0
    remote_deleted: int = 0
    topics_deleted: int = 0
    orphans_deleted: int = 0
    remote_compacted: int = 0
    skipped: int = 0  # partitions with nothing to do, not looked at (quiet passes)


def _nothing_to_retain(st: PartitionState, info: TopicInfo, log: Log) -> bool:
    """Whether total retention of ``log`` has nothing to do whatever the clock says: its
    recovered manifest holds no segment and no spillover (nothing remote to expire or
    trim) and records the log's start offset (nothing to write). Cheaper than the shape
    comparison: most partitions of an idle broker with many have nothing in the bucket."""
    m = st.manifest
    return (
        m is not None
        and st.recovered
        and st.topic_id == info.topic_id
        and not m.segments
        and not m.spillover
        and m.log_start_offset == log.log_start_offset
    )


class TieringService:
    """See the module docstring. ``run_once`` is one full pass (tests drive it directly;
    ``start`` runs it periodically)."""

    def __init__(
        self,
        manager: LogManager,
        store: ObjectStore,
        config: TieringConfig | None = None,
        metrics: TieringMetrics | None = None,
        *,
        manifests: ManifestStore | None = None,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.manager = manager
        self.store = store
        self.config = config if config is not None else TieringConfig()
        self.metrics = metrics if metrics is not None else TieringMetrics()
        self.manifests = manifests if manifests is not None else ManifestStore(store)
        self._clock_ms = clock_ms
        self.uploader = Uploader(manager, self.manifests, self.config, self.metrics, clock_ms=clock_ms)
        self.compactor = RemoteCompactor(
            self.uploader, manager.data_dir / WORK_DIR, manager.cleaner_config, clock_ms=clock_ms
        )
        self.sweeper = OrphanSweeper(manager, self.manifests, self.config, self.metrics)
        self.pending_deletes = PendingDeletes(manager.meta_dir / PENDING_DELETES_FILE)
        cfg = self.config
        self.cache = ChunkCache(
            store,
            cfg.cache_path(manager.data_dir),
            max_bytes=cfg.cache_max_bytes,
            chunk_bytes=cfg.cache_chunk_bytes,
            prefetch_chunks=cfg.prefetch_chunks,
            memory_bytes=cfg.read_memory_bytes,
        )
        self.reader = RemoteReader(store, self.manifests, self.cache, cfg)
        self.reader.on_read = self.metrics.remote_read
        self.reader.on_error = self.metrics.remote_read_error
        self.metrics.registry.register(CacheStatsCollector(self.cache.stats))
        if isinstance(store, S3Store):
            self.metrics.registry.register(DirectGetCollector(lambda: store.direct_get))
            store.buffers.max_free_bytes = cfg.read_memory_bytes
            self.metrics.registry.register(S3RequestCollector(store))
        self.uploader.on_manifest = self.reader.note_manifest
        # Manifests loaded when this broker comes to lead partitions (``roles_changed``).
        self._preload = ManifestPreloader(self.reader, self._all_logs)
        self._task: asyncio.Task[None] | None = None
        self._recovery: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._last_retention_ms = clock_ms()
        self._last_sweep_ms = clock_ms()
        self._last_compaction_ms = clock_ms()
        self.store_failing = False
        self._rng = random.Random()
        # One pass or one ``sync`` at a time: no two uploads of a partition at once.
        self._pass_lock = asyncio.Lock()
        # Partitions whose last visit found nothing to do: the log's shape then and until
        # when nothing time-based can come due (local retention by time). A pass skips them
        # while their shape stands still, so an idle broker's pass costs what changed, not
        # what it holds (issue 35).
        self._quiet: dict[tuple[str, int], tuple[tuple[int, ...], float]] = {}
        # Cluster mode: whether this broker leads a partition (only the leader uploads and
        # applies local and total retention; followers keep their data), and a value that
        # changes whenever that may have changed (roles, epochs, the lease).
        self.is_leader: Callable[[str, int], bool] | None = None
        self.roles_key: Callable[[], Hashable] | None = None
        # Which partitions a periodic pass looks at (tiering.pass_schedule), and those a
        # full pass found tiered and led here.
        # The full pass is only a safety net (every partition comes back by itself when
        # its quiet period ends, rolls or changes role): as seldom as the longest quiet
        # period, not every retention interval (issue 39: a walk over 10,000 partitions).
        self._schedule = PassSchedule(
            QUIET_LONG_FACTOR * self.config.retention_check_interval_ms, self._scan_key
        )
        self._tiered: dict[tuple[str, int], tuple[TopicInfo, Log]] = {}
        self._all_cache: tuple[Hashable, list[tuple[TopicInfo, Log]]] | None = None
        # Total retention: partitions whose last pass deleted nothing, with what that
        # depended on and when their oldest remote segment expires by time.
        self._retention_idle: dict[tuple[str, int], tuple[tuple[int, ...], float]] = {}

    # --- lifecycle -----------------------------------------------------------------------------

    def attach(self) -> None:
        """Install the hooks in the LogManager (idempotent; ``start`` calls it)."""
        m = self.manager
        m.set_retention_owner(lambda log: log.config.remote_storage_enable)
        cfg = self.config
        m.set_disk_high_water(
            max_used_fraction=cfg.disk_high_water_fraction,
            max_log_bytes=cfg.disk_high_water_bytes or None,
        )
        m.remove_delete_listener(self._on_topic_deleted)
        m.add_delete_listener(self._on_topic_deleted)
        m.set_roll_listener(self._schedule.rolled)

    async def start(self) -> None:
        """Attach to the manager and start the background loop."""
        if self._task is not None:
            return
        self.attach()
        await self._connect_store()
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._closing = False
        self._recovery = recovery = asyncio.create_task(self._recover_all(), name="strata-tiering-recovery")
        await asyncio.wait({recovery}, timeout=_RECOVERY_WAIT_S)
        self._task = asyncio.create_task(self._run(recovery), name="strata-tiering")

    async def _connect_store(self) -> None:
        # Client set-up costs about a second of event-loop time; paying it here keeps it off
        # the first remote fetch. Never fatal: with the store down the broker still starts,
        # and the first request creates the client again.
        try:
            await self.store.connect()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.warning("object store client set-up failed (%s); retried on first use", e)

    async def close(self) -> None:
        """Stop the loop (an upload in flight is abandoned: everything is crash-safe), and
        close the reader's cache and the store. The retention owner stays installed, so
        the manager never deletes un-uploaded data of tiered topics afterwards."""
        self._closing = True
        self.manager.remove_delete_listener(self._on_topic_deleted)
        for task in (self._task, self._recovery):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._task = self._recovery = None
        await self._preload.close()
        with contextlib.suppress(Exception):
            await self.cache.close()
        await self.store.close()

    def wake(self) -> None:
        """Run the next pass now (thread-safe)."""
        loop, ev = self._loop, self._wake
        if loop is None or ev is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(ev.set)

    def roles_changed(self) -> None:
        """This broker's roles changed (``broker.node``, debounced; event loop): load the
        manifests a first fetch of newly led partitions would wait for
        (``tiering.manifest_preload``)."""
        if not self._closing:
            self._preload.changed()

    def _on_topic_deleted(self, info: TopicInfo) -> None:
        try:
            self.pending_deletes.add(DeletedTopic(info.name, info.topic_id, info.partitions))
        except StorageError as e:
            logger.error("cannot record the deletion of %s for tiering: %s", info.name, e)
        self.wake()

    # --- queries ------------------------------------------------------------------------------

    def manifest(self, topic: str, partition: int) -> PartitionManifest | None:
        """The last manifest of the partition this broker read or wrote (None if unknown)."""
        st = self.uploader.cached_state(topic, partition)
        return st.manifest if st is not None else None

    def uploaded(self, topic: str, partition: int) -> int:
        """The remote next offset: every offset below it (and at or above the log start)
        is COPIED in the bucket. 0 when nothing is known to be uploaded."""
        st = self.uploader.cached_state(topic, partition)
        return st.remote_next_offset if st is not None and st.manifest is not None else 0

    # --- the loop ------------------------------------------------------------------------------

    async def _recover_all(self) -> None:
        """The start of the first pass, before the broker serves: crash recovery of every
        partition this broker tiers (``Uploader.recover``: interrupted uploads and deletions
        cleaned up), which loads each manifest and hands it to the remote reader, so the
        first remote fetch after a start does not wait for a manifest GET. ``start`` waits
        for it at most ``_RECOVERY_WAIT_S`` (a store that is down, or many partitions:
        the rest goes on in the background); failures are left to the first pass, which
        redoes what did not happen and reports them."""
        sem = asyncio.Semaphore(self.config.upload_concurrency)

        async def one(info: TopicInfo, log: Log) -> None:
            async with sem:
                st = self.uploader.state(info.name, log.partition, info.topic_id)
                # begin_term first: the recovery counts for this leadership term, and the
                # first pass does not redo it.
                if st.stopped is None and log.is_online and self.uploader.begin_term(st) and not st.recovered:
                    await self.uploader.recover(st)

        tiered = [(i, log) for i, log in self._all_logs() if log.config.remote_storage_enable]
        results = await asyncio.gather(*(one(i, log) for i, log in tiered), return_exceptions=True)
        for (info, log), r in zip(tiered, results, strict=True):
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                logger.debug(
                    "recovery of %s-%d at start: %s (the first pass retries)", info.name, log.partition, r
                )

    async def _run(self, recovery: asyncio.Task[None] | None = None) -> None:
        if recovery is not None:
            await asyncio.wait({recovery})  # never two recoveries of a partition at once
        backoff = 0.0
        interval = self.config.upload_interval_ms / 1000
        cap = self.config.max_backoff_ms / 1000
        assert self._wake is not None
        while not self._closing:
            delay = interval
            try:
                await self.run_once(quiet=True)
                if self.store_failing:
                    logger.warning("object store reachable again: tiering resumes")
                self.store_failing = False
                self.metrics.store_available.set(1)
                backoff = 0.0
            except ObjectStoreError as e:
                if not self.store_failing:
                    logger.warning(
                        "object store failing (%s): local data is kept, uploads retry with backoff", e
                    )
                self.store_failing = True
                self.metrics.store_available.set(0)
                backoff = min(cap, max(0.2, backoff * 2))
                delay = self._rng.uniform(backoff / 2, backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("tiering pass failed")
            if self.store_failing or backoff:
                self._schedule.invalidate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            self._wake.clear()

    async def run_once(
        self,
        now_ms: int | None = None,
        *,
        retention: bool | None = None,
        sweep: bool | None = None,
        compact: bool | None = None,
        quiet: bool = False,
    ) -> PassResult:
        """One pass: pending remote deletions, uploads + local retention of every tiered
        partition, and (when due, or when forced by the flags) total retention and the
        orphan sweep. Object-store failures propagate as ObjectStoreError after the
        partitions already done; everything else is logged per partition. ``quiet`` (the
        periodic passes): skip partitions whose last visit found nothing to do while their
        log's shape stands still, for up to ``retention_check_interval_ms``."""
        async with self._pass_lock:
            return await self._pass(now_ms, retention, sweep, compact, quiet)

    async def _pass(
        self,
        now_ms: int | None,
        retention: bool | None,
        sweep: bool | None,
        compact: bool | None,
        quiet: bool = False,
    ) -> PassResult:
        now = self._clock_ms() if now_ms is None else now_ms
        result = PassResult()
        result.topics_deleted = await self._delete_pending_topics()
        await self._upload_all(now, result, quiet=quiet)
        cfg = self.config
        if retention or (
            retention is None and now - self._last_retention_ms >= cfg.retention_check_interval_ms
        ):
            self._last_retention_ms = now
            result.remote_deleted, moved = await self._retention_all(now)
            # Total retention may have moved log starts past local segments.
            await self._local_retention_all(moved, now, result)
        if compact or (
            compact is None and now - self._last_compaction_ms >= cfg.remote_compaction_interval_ms
        ):
            self._last_compaction_ms = now
            result.remote_compacted = await self._compact_all()
        if sweep or (sweep is None and now - self._last_sweep_ms >= cfg.orphan_sweep_interval_ms):
            self._last_sweep_ms = now
            result.orphans_deleted = await self.sweeper.sweep(now)
        return result

    def _all_logs(self) -> list[tuple[TopicInfo, Log]]:
        """Every partition led here (cached while the scan key stands: listing 10,000
        partitions for each periodic duty was an idle broker's largest cost)."""
        key = self._scan_key()
        if key is not None and self._all_cache is not None and self._all_cache[0] == key:
            return self._all_cache[1]
        out = self._list_logs()
        self._all_cache = None if key is None else (key, out)
        return out

    def _list_logs(self) -> list[tuple[TopicInfo, Log]]:
        out: list[tuple[TopicInfo, Log]] = []
        leads = self.is_leader
        for info in self.manager.topics():
            for p in range(info.partitions):
                if leads is not None and not leads(info.name, p):
                    continue
                try:
                    log = self.manager.get_log(info.name, p)
                except StrataError:
                    continue  # refused partition (corrupt) or deleted meanwhile
                out.append((info, log))
        return out

    def _scan_key(self) -> Hashable | None:
        """What the set of tiered partitions led here depends on (None: unknown)."""
        gen = getattr(self.manager, "generation", None)
        if gen is None:
            return None
        return (gen, None if self.roles_key is None else self.roles_key())

    async def _upload_all(self, now: int, result: PassResult, *, quiet: bool = False) -> None:
        sched = self._schedule
        if not quiet or sched.full_due(now):
            sched.full(now)
            listed = self._list_logs()  # afresh: the full pass is also the safety net
            key = self._scan_key()
            self._all_cache = None if key is None else (key, listed)
            self._tiered = {
                (info.name, log.partition): (info, log)
                for info, log in listed
                if log.config.remote_storage_enable
            }
            tiered = list(self._tiered.values())
            partial = False
        else:
            tiered = [self._tiered[k] for k in sched.take(now) if k in self._tiered]
            partial = True
        # Before the upload scan, so a segment rolled for its age goes up in this pass.
        await roll_aged_segments((log for _, log in tiered), now, self.metrics)
        if not partial:  # a topic's creation or change bumps the scan key: a full pass
            for info in {i.name: i for i, _ in tiered}.values():
                await self.uploader.sync_topic_manifest(info)
        sem = asyncio.Semaphore(self.config.upload_concurrency)
        failure: list[ObjectStoreError] = []

        quiet_for = self.config.retention_check_interval_ms

        def still_quiet(info: TopicInfo, log: Log) -> bool:
            key = (info.name, log.partition)
            q = self._quiet.get(key) if quiet and not partial else None
            if q is not None and now < q[1] and q[0] == self._shape(log):
                result.skipped += 1
                sched.quiet(key, q[1])
                return True
            return False

        async def one(info: TopicInfo, log: Log) -> None:
            key = (info.name, log.partition)
            self._quiet.pop(key, None)
            sched.busy((key,))  # until this visit finds nothing to do
            async with sem:
                if failure:
                    return  # the store is failing: do not hammer it with every partition
                try:
                    done = await self.uploader.upload_partition(log, info.topic_id)
                    result.uploaded += done
                except ObjectStoreError as e:
                    self.metrics.upload_errors.labels(info.name, "store").inc()
                    failure.append(e)
                    return
                except PartitionStoppedError:
                    return
                except StrataError as e:
                    if log.closed or not log.is_online:
                        return
                    self.metrics.upload_errors.labels(info.name, "other").inc()
                    logger.error("upload of %s failed: %s", log.name, e)
                    return
                deleted = len(await self.uploader.apply_local_retention(log, now))
                result.local_deleted += deleted
                st = self.uploader.cached_state(info.name, log.partition)
                if st is not None and st.stopped is None:
                    try:
                        await self.uploader.delete_replaced(st, now)
                    except ObjectStoreError as e:
                        failure.append(e)
                        return
                    except PartitionStoppedError:
                        return
                    m = st.manifest
                    if (
                        done == 0
                        and deleted == 0
                        and m is not None
                        and self.uploader.pending_segments(*key) == 0
                        and not any(seg.replaced for seg in m.segments)
                    ):
                        # Local retention by time can come due only with sealed local
                        # segments; otherwise a long safety net (the roll brings it back).
                        period = quiet_for if len(log.segments()) > 1 else QUIET_LONG_FACTOR * quiet_for
                        until = min(now + period, upload_lag_due(log, now))
                        self._quiet[key] = (self._shape(log), until)
                        sched.quiet(key, until)

        # Quiet partitions are not even given a task: an idle pass costs one look each.
        await asyncio.gather(*(one(info, log) for info, log in tiered if not still_quiet(info, log)))
        if failure:
            sched.invalidate()
            raise failure[0]

    def _shape(self, log: Log) -> tuple[int, ...]:
        """What a pass's work on ``log`` depends on besides the clock: the log object (a
        recreated or reopened partition), its active segment (a roll seals one), its
        local and log start offsets (retention, DeleteRecords), this broker's leader
        epoch (a new term recovers first)."""
        epoch = self.uploader.led_epoch(log.topic, log.partition)
        return (
            id(log),
            id(log.config),  # an altered topic config (retention, lag bounds)
            log.active_segment.base_offset,
            log.local_log_start_offset,
            log.log_start_offset,
            -2 if epoch is None else epoch,
        )

    # --- upload at shutdown ----------------------------------------------------------------------

    async def upload_before_shutdown(self, grace_ms: int | None = None) -> ShutdownUpload:
        """A clean stop's last upload (tiering.upload_lag): stop the loop (a pass in
        flight finishes), seal the active segment of every tiered partition led here, and
        upload everything the bucket lacks, ignoring ``remote.copy.lag.ms``, for at most
        ``grace_ms`` (default ``shutdown_upload_grace_ms``); object-store failures are
        retried with backoff within it. Logs the outcome (INFO when the bucket holds every
        record, WARNING naming the missing offsets otherwise) and returns it. Produce must
        already be stopped; ``close`` follows. An upload cut off by the deadline leaves a
        COPY_STARTED entry that the next start's recovery removes."""
        grace = self.config.shutdown_upload_grace_ms if grace_ms is None else grace_ms
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = start + grace / 1000
        report = ShutdownUpload(grace_s=grace / 1000)
        # Nothing appends any more (produce stopped), so each log end is final: what the
        # report measures the bucket against, even if the deadline comes first.
        targets = [
            (info, log, log.log_end_offset)
            for info, log in self._all_logs()
            if log.config.remote_storage_enable and log.is_online
        ]
        report.partitions = len(targets)
        try:
            async with asyncio.timeout_at(deadline):
                await self._stop_loop()
                for _, log, _ in targets:
                    try:
                        await asyncio.to_thread(log.roll)  # a no-op when the active segment is empty
                    except StrataError as e:
                        logger.error("cannot seal %s for the upload at shutdown: %s", log.name, e)
                await self._upload_targets(targets, report)
        except TimeoutError:
            report.timed_out = True
        report.elapsed_s = loop.time() - start
        nexts = [self._remote_next(info, log) for info, log, _ in targets]
        reasons = [self._blocked(info, log, t) for info, log, t in targets]
        report.pending = pending_ranges([(log, t) for _, log, t in targets], nexts, reasons)
        missing = {p.partition for p in report.pending}
        report.complete = [
            (log.name, n) for (_, log, _), n in zip(targets, nexts, strict=True) if log.name not in missing
        ]
        if report.ok:
            logger.info("%s", report.summary())
        else:
            logger.warning("%s", report.summary())
        return report

    async def sync(self, topics: set[str] | None = None, timeout_ms: int = 30_000) -> TierSync:
        """Make the bucket current now (``strata tier sync``): roll the active segment of
        every tiered partition led here that holds data (of ``topics``, or all), upload
        every sealed segment the bucket lacks ignoring ``remote.copy.lag.ms``, and wait
        until the manifests show them, for at most ``timeout_ms``. Runs between two passes
        of the loop (never two uploads of a partition at once); the loop goes on after."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        report = ShutdownUpload(grace_s=timeout_ms / 1000)
        rolled: set[str] = set()
        targets: list[tuple[TopicInfo, Log, int]] = []
        # The deadline is checked between upload rounds: an upload is never cut off midway.
        async with self._pass_lock:
            for info, log in self._all_logs():
                if topics is not None and info.name not in topics:
                    continue
                if not (log.config.remote_storage_enable and log.is_online):
                    continue
                active = log.segments()[-1]
                try:
                    seg = await asyncio.to_thread(log.roll)  # a no-op when the active one is empty
                except StrataError as e:
                    logger.error("cannot roll %s for tier sync: %s", log.name, e)
                else:
                    if seg is not active:
                        rolled.add(log.name)
                targets.append((info, log, log.log_end_offset))
            report.partitions = len(targets)
            await self._upload_targets(targets, report, deadline=start + timeout_ms / 1000)
        report.elapsed_s = loop.time() - start
        parts: list[SyncedPartition] = []
        for info, log, target in targets:
            nxt = max(self._remote_next(info, log), log.log_start_offset)
            why = self._blocked(info, log, target) if nxt < target else None
            if nxt < target and why is None:
                why = (
                    f"offsets from {log.last_stable_offset} wait for the high watermark "
                    "or an open transaction"
                    if log.last_stable_offset < target
                    else "timed out"
                    if report.timed_out
                    else (report.error or "not uploaded")
                )
            parts.append(SyncedPartition(info.name, log.partition, log.name in rolled, target, nxt, why))
        return TierSync(parts, report.uploaded, report.elapsed_s, report.error)

    async def _stop_loop(self) -> None:
        """End the background loop after the pass it is in (uploads in flight complete)."""
        self._closing = True
        if self._wake is not None:
            self._wake.set()
        for task in (self._task, self._recovery):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.shield(task)
        self._task = self._recovery = None

    def _remote_next(self, info: TopicInfo, log: Log) -> int:
        st = self.uploader.cached_state(info.name, log.partition)
        if st is None or st.topic_id != info.topic_id or st.manifest is None:
            return 0
        return st.remote_next_offset

    async def _upload_targets(
        self,
        targets: list[tuple[TopicInfo, Log, int]],
        report: ShutdownUpload,
        *,
        deadline: float | None = None,
    ) -> None:
        """Upload rounds until every target is in the bucket, or nothing more can be
        done now (every partition left is stopped, offline or waiting for the log cleaner);
        the caller's deadline ends it otherwise (object store down, a follower not
        acknowledging)."""
        synced: set[str] = set()
        backoff = 0.05
        sem = asyncio.Semaphore(self.config.upload_concurrency)

        async def one(info: TopicInfo, log: Log) -> int:
            async with sem:
                try:
                    return await self.uploader.upload_partition(log, info.topic_id, min_age_ms=0)
                except PartitionStoppedError:
                    return 0
                except ObjectStoreError:
                    raise
                except StrataError as e:
                    if not (log.closed or not log.is_online):
                        logger.error("upload of %s at shutdown failed: %s", log.name, e)
                    return 0

        loop = asyncio.get_running_loop()
        while True:
            if deadline is not None and loop.time() >= deadline:
                report.timed_out = True
                return
            left = [
                (info, log, target)
                for info, log, target in targets
                if max(self._remote_next(info, log), log.log_start_offset) < target
            ]
            live = [(info, log) for info, log, target in left if self._blocked(info, log, target) is None]
            if not live:
                return
            progressed = False
            try:
                for info, _ in live:
                    if info.name not in synced:
                        await self.uploader.sync_topic_manifest(info)
                        synced.add(info.name)
                # Every partition's round ends before the next begins (no two uploads of one
                # partition at once), whatever failed.
                rounds = (one(info, log) for info, log in live)
                results = await asyncio.gather(*rounds, return_exceptions=True)
                for r in results:
                    if isinstance(r, int):
                        report.uploaded += r
                        progressed = progressed or r > 0
                    elif isinstance(r, ObjectStoreError):
                        report.error = str(r)
                    elif isinstance(r, BaseException):
                        raise r
            except ObjectStoreError as e:
                report.error = str(e)
            if progressed:
                backoff = 0.05
            else:
                wait = backoff if deadline is None else max(0.0, min(backoff, deadline - loop.time()))
                await asyncio.sleep(wait)
                backoff = min(1.0, backoff * 2)

    def _blocked(self, info: TopicInfo, log: Log, target: int) -> str | None:
        """Why no more of ``log`` below ``target`` can be uploaded now (None: it can). The
        log cleaner is not waited for: with min.compaction.lag.ms or its backoff that
        could take the whole grace period, and the tail stays on local disk anyway."""
        st = self.uploader.cached_state(info.name, log.partition)
        if st is not None and st.topic_id == info.topic_id and st.stopped is not None:
            return "tiering stopped"
        if log.closed or not log.is_online:
            return "offline"
        nxt = max(self._remote_next(info, log), log.log_start_offset)
        if (
            nxt < target
            and log.upload_waits_for_cleaner
            and log.first_dirty_offset < target
            and not log.sealed_segments_for_upload(target, from_offset=nxt)
        ):
            return "waits for the log cleaner"
        return None

    async def _compact_all(self, *, force: bool = False) -> int:
        """Remote compaction of every due partition led here; returns how many swapped."""
        done = 0
        for info, log in self._all_logs():
            cfg = log.config
            if not (cfg.compact and cfg.remote_storage_enable):
                continue
            try:
                stats = await self.compactor.compact_log(log, info.topic_id, force=force)
            except ObjectStoreError:
                raise
            except PartitionStoppedError:
                continue
            except (StrataError, OSError) as e:
                if not (log.closed or not log.is_online):
                    logger.error("remote compaction of %s failed: %s", log.name, e)
                continue
            if stats is not None and stats.swapped:
                done += 1
        return done

    async def _local_retention_all(self, logs: list[Log], now: int, result: PassResult) -> None:
        for log in logs:
            if log.config.remote_storage_enable:
                result.local_deleted += len(await self.uploader.apply_local_retention(log, now))

    def _retention_shape(self, info: TopicInfo, log: Log) -> tuple[int, ...]:
        """What a total-retention pass's outcome depends on besides the clock: the manifest
        (uploads, deletions), the log's start, local start and end (retention.bytes counts
        the local-only tail), the topic's configuration, this broker's leader epoch."""
        st = self.uploader.cached_state(info.name, log.partition)
        m = st.manifest if st is not None and st.topic_id == info.topic_id else None
        epoch = self.uploader.led_epoch(log.topic, log.partition)
        return (
            id(log),
            id(log.config),
            -1 if m is None else m.revision,
            log.log_start_offset,
            log.local_log_start_offset,
            log.log_end_offset,
            -2 if epoch is None else epoch,
        )

    def _retention_due(self, info: TopicInfo, log: Log) -> float:
        """When the oldest remote data of ``log`` expires by ``retention.ms`` (total
        retention deletes oldest first and stops at the first segment it keeps, so only
        the oldest one's expiry can change its outcome while nothing else does)."""
        ms = log.config.retention_ms
        st = self.uploader.cached_state(info.name, log.partition)
        m = st.manifest if st is not None else None
        if ms < 0 or m is None:
            return float("inf")
        if m.spillover:
            return m.spillover[0].max_timestamp + ms + 1
        for s in m.copied():
            return (s.max_timestamp if s.max_timestamp >= 0 else s.created_ms) + ms + 1
        return float("inf")

    async def _retention_all(self, now: int) -> tuple[int, list[Log]]:
        """Total retention of every partition led here whose outcome may have changed
        since its last pass; returns the remote segments deleted and the logs whose log
        start moved (their local segments below it go next)."""
        deleted = 0
        moved: list[Log] = []
        idle = self._retention_idle
        seen: set[tuple[str, int]] = set()
        for info, log in self._all_logs():
            key = (info.name, log.partition)
            seen.add(key)
            st = self.uploader.cached_state(info.name, log.partition)
            known_empty = (
                st is not None
                and st.topic_id == info.topic_id
                and st.manifest is not None
                and st.manifest.revision == 0
            )
            if known_empty and not log.config.remote_storage_enable:
                continue  # never tiered: nothing remote to expire
            if st is not None and _nothing_to_retain(st, info, log):
                idle.pop(key, None)
                continue
            shape = self._retention_shape(info, log)
            last = idle.get(key)
            if last is not None and last[0] == shape and now < last[1]:
                continue  # nothing it depends on changed, and nothing expired since
            start = log.log_start_offset
            try:
                n = await self.uploader.apply_total_retention(log, info.topic_id, now)
            except ObjectStoreError:
                raise
            except PartitionStoppedError:
                continue
            except StrataError as e:
                if not (log.closed or not log.is_online):
                    logger.error("total retention of %s failed: %s", log.name, e)
                continue
            deleted += n
            if log.log_start_offset != start:
                moved.append(log)
            if n == 0:
                idle[key] = (self._retention_shape(info, log), self._retention_due(info, log))
            else:
                idle.pop(key, None)
        for key in [k for k in idle if k not in seen]:
            del idle[key]
        return deleted, moved

    async def _delete_pending_topics(self) -> int:
        done = 0
        for t in self.pending_deletes.list():
            try:
                current = self.manager.topic(t.name)
            except UnknownTopicOrPartitionError:
                current = None
            if current is not None and current.topic_id == t.topic_id:
                self.pending_deletes.remove(t)  # not deleted after all
                continue
            await self.uploader.delete_topic(t.name, t.topic_id, t.partitions)
            for p in range(t.partitions):
                self.reader.forget(t.name, t.topic_id, p)
            self.pending_deletes.remove(t)
            done += 1
        return done
