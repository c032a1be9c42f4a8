"""All logs of one broker's data directory, the topic registry, and the background threads.

Layout::

    <data_dir>/.lock                         flock'ed while a LogManager has it open
    <data_dir>/meta/topics.json              topic registry (hot.topics)
    <data_dir>/meta/producer-ids             producer id block allocator (hot.producer_ids)
    <data_dir>/logs/.clean_shutdown          present only after a clean close
    <data_dir>/logs/<topic>-<partition>/     one Log (hot.log), plus ``partition.metadata``
                                             ("version: 0\\ntopic_id: <uuid>\\n"), so a
                                             directory left by an older topic of the same
                                             name is recognized as stale
    <data_dir>/logs/<dir>.<32 hex>-delete/   a partition being deleted or built (restore);
                                             ``<dir>`` cut to fit 255 bytes (hot.naming), so
                                             it is removed at open by its suffix, never parsed
    <data_dir>/meta/tiering-deletes.json     topics whose remote data is still to be deleted
                                             (owned by tiering.service.PendingDeletes)

Crash behaviour: the clean-shutdown marker is removed when the manager opens, before any
write, and written (fsynced) only after every log closed cleanly; without it every log
is recovered. Topic creation writes the registry first and then the directories (except
a topic restored at remote positions, whose directories come first); deletion writes the
registry first and then removes the directories. So a crash
leaves at worst directories of topics that are no longer registered (or stale ones),
which ``open`` removes, or registered partitions without a directory, which ``open``
creates.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Final

from core import gil
from core.disk import deferred_sync
from hot.cleaner import CleanerConfig, LogCleaner
from hot.config import LogConfig
from hot.disk_health import POLL_INTERVAL_S as DISK_HEALTH_POLL_S
from hot.disk_health import DiskHealth
from hot.errors import (
    DiskHighWaterError,
    InvalidPartitionsError,
    InvalidRequestError,
    StorageError,
    StrataError,
    UnknownTopicOrPartitionError,
)
from hot.flush import GroupCommitter, IntervalFlusher
from hot.log import Log, RetentionGuard, RollListener, atomic_write, fsync_dir
from hot.log_loader import create_directory_at
from hot.naming import is_delete_dir, parse_partition_dir, partition_dir_name
from hot.producer_ids import PRODUCER_IDS_FILE, ProducerIdAllocator
from hot.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from hot.topics import TOPICS_FILE, TopicInfo, TopicRegistry

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE: Final = ".clean_shutdown"
LOCK_FILE: Final = ".lock"
PARTITION_METADATA_FILE: Final = "partition.metadata"
# A partition directory being adopted into logs/ (adopt_partition); open() leaves it alone.
ADOPTING_SUFFIX: Final = ".adopting"
DEFAULT_RETENTION_CHECK_INTERVAL_MS: Final = 300_000
DISK_CHECK_INTERVAL_S: Final = 0.5  # how stale the disk-usage measurement may get

# Logs whose retention somebody else applies (tiering: local + total retention of tiered topics).
RetentionOwner = Callable[[Log], bool]
# Told about every deleted topic, after its local logs are gone (tiering deletes its remote data).
DeleteListener = Callable[[TopicInfo], None]


def stored_topic_id(path: Path) -> uuid.UUID | None:
    """The topic id a partition directory's ``partition.metadata`` names (None: no file,
    or no readable id): a directory left by an older topic of the same name is stale."""
    try:
        text = (path / PARTITION_METADATA_FILE).read_text("ascii")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            try:
                return uuid.UUID(value.strip())
            except ValueError:
                return None
    return None


class DiskGuard:
    """The data directory's high-water mark, checked before every append (``Log.append_guard``).

    Two limits, either may be off: ``max_used_fraction`` of the filesystem holding the data
    dir (``os.statvfs``), and ``max_log_bytes`` for the sum of every local log of the
    manager (a budget independent of other tenants of the filesystem; tests use it). Both
    are measured at most every ``DISK_CHECK_INTERVAL_S``; bytes appended since the last
    measurement are added to it, so growth is seen at once and only freed space (local
    retention after uploads) is noticed late. Crossing a limit makes appends fail with
    DiskHighWaterError instead of deleting data that was not uploaded yet.
    """

    def __init__(
        self,
        data_dir: Path,
        logs: Callable[[], list[Log]],
        *,
        max_used_fraction: float | None,
        max_log_bytes: int | None,
        check_interval_s: float = DISK_CHECK_INTERVAL_S,
    ) -> None:
        self.data_dir = data_dir
        self._logs = logs
        self.max_used_fraction = max_used_fraction
        self.max_log_bytes = max_log_bytes
        self._interval = check_interval_s
        self._lock = threading.Lock()
        self._measured_at = -1e18
        self._fs_used = 0
        self._fs_total = 0
        self._log_bytes = 0
        self._since = 0  # bytes appended since the measurement

    def _measure(self) -> None:
        if self.max_used_fraction is not None:
            try:
                st = os.statvfs(self.data_dir)
            except OSError as e:
                raise StorageError(f"cannot stat the filesystem of {self.data_dir}: {e}") from e
            self._fs_total = st.f_blocks * st.f_frsize
            self._fs_used = (st.f_blocks - st.f_bfree) * st.f_frsize
        if self.max_log_bytes is not None:
            self._log_bytes = sum(lg.size for lg in self._logs() if not lg.closed)
        self._since = 0
        self._measured_at = time.monotonic()

    def check(self, nbytes: int) -> None:
        """Raise DiskHighWaterError if an append of ``nbytes`` would go above a limit."""
        with self._lock:
            if time.monotonic() - self._measured_at >= self._interval:
                self._measure()
            pending = self._since + nbytes
            reason = self._over(pending)
            if reason is not None:
                raise DiskHighWaterError(reason)
            self._since = pending

    def exceeded(self) -> str | None:
        """Why the mark is exceeded now (measured afresh), None if it is not."""
        with self._lock:
            self._measure()
            return self._over(0)

    def _over(self, pending: int) -> str | None:
        if self.max_log_bytes is not None and self._log_bytes + pending > self.max_log_bytes:
            return (
                f"disk above high-water mark; uploads pending: local logs hold "
                f"{self._log_bytes + self._since} bytes, the limit is {self.max_log_bytes}"
            )
        if (
            self.max_used_fraction is not None
            and self._fs_total > 0
            and self._fs_used + pending > self.max_used_fraction * self._fs_total
        ):
            return (
                f"disk above high-water mark; uploads pending: {self.data_dir} is on a "
                f"filesystem {100 * (self._fs_used + self._since) / self._fs_total:.1f}% full, "
                f"the limit is {100 * self.max_used_fraction:.1f}%"
            )
        return None

    def invalidate(self) -> None:
        """Measure again at the next check (after retention freed space)."""
        with self._lock:
            self._measured_at = -1e18


def _tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (what a removal discards, for the log line)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


class LogManager:
    """Owns every ``Log`` of a data directory (layout and crash behaviour: module docstring).

    Thread-safe. ``open()`` starts the group-commit thread (fsync-mode produce requests
    complete only through it); ``start_background()`` adds the interval flusher and the
    retention thread.
    """

    def __init__(
        self,
        data_dir: Path,
        defaults: LogConfig | None = None,
        *,
        retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
        flush_workers: int = 1,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.logs_dir = self.data_dir / "logs"
        self.meta_dir = self.data_dir / "meta"
        self.defaults = defaults if defaults is not None else LogConfig()
        self.retention_check_interval_ms = retention_check_interval_ms
        self._flush_workers = flush_workers
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], Log] = {}
        # Bumped whenever a log is opened or removed or a topic is created, deleted,
        # altered or grown: periodic passes (tiering) list the partitions again only then.
        self.generation = 0
        self._roll_listener: RollListener | None = None
        self._failed: dict[tuple[str, int], StorageError] = {}
        self._registry: TopicRegistry | None = None
        self._committer: GroupCommitter | None = None
        self._interval: IntervalFlusher | None = None
        self._interval_cache: tuple[int, list[Log]] | None = None  # _interval_logs
        self._retention_thread: threading.Thread | None = None
        # Kafka's log.cleaner.* settings; replace before start_background() to change them.
        self.cleaner_config = CleanerConfig()
        self._cleaner: LogCleaner | None = None
        self._cleaner_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock_fd: int | None = None
        self._retention_guard: RetentionGuard | None = None
        self._retention_owner: RetentionOwner | None = None
        self._disk_guard: DiskGuard | None = None
        # Disk-full states, logged and reported (/v1/status, metrics): hot.disk_health.
        self.disk_health = DiskHealth(self.data_dir, high_water_check=self._high_water_exceeded)
        self._disk_health_thread: threading.Thread | None = None
        self._delete_listeners: list[DeleteListener] = []
        self._producer_ids: ProducerIdAllocator | None = None
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.was_clean_shutdown = False

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> LogManager:
        if self._registry is None:
            self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _acquire_dir_lock(self) -> None:
        path = self.data_dir / LOCK_FILE
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StorageError(f"cannot open lock file {path}: {e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StorageError(
                f"data directory {self.data_dir} is already in use by another Strata broker "
                f"(lock {path} is held)"
            ) from None
        except OSError as e:
            os.close(fd)
            raise StorageError(f"cannot lock {path}: {e}") from e
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass  # the pid is only informative
        self._lock_fd = fd

    def _release_dir_lock(self) -> None:
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            os.close(fd)  # closing drops the flock

    def open(self) -> LogManager:
        """Lock the data directory, load the registry and open (recovering if the last
        shutdown was unclean) every partition of every registered topic. A partition whose
        recovery finds corruption is refused: ``get_log`` raises its CorruptLogError."""
        with self._lock:
            if self._registry is not None:
                raise StorageError(f"log manager of {self.data_dir} is already open")
            self._acquire_dir_lock()
            try:
                self._open_locked()
            except BaseException:
                for log in self._logs.values():
                    log.close(clean=False)
                self._logs.clear()
                self._failed.clear()
                if self._committer is not None:
                    self._committer.close()
                    self._committer = None
                self._registry = None
                self._release_dir_lock()
                raise
        return self

    def _open_locked(self) -> None:
        try:
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            self.meta_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create {self.data_dir} layout: {e}") from e
        registry = TopicRegistry(self.meta_dir / TOPICS_FILE, defaults=self.defaults)
        marker = self.logs_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.was_clean_shutdown = clean
        if clean:
            try:
                marker.unlink()
            except OSError as e:
                raise StorageError(f"cannot remove {marker}: {e}") from e
            fsync_dir(self.logs_dir)
        try:
            entries = sorted(os.listdir(self.logs_dir))
        except OSError as e:
            raise StorageError(f"cannot list {self.logs_dir}: {e}") from e
        if not registry.exists_on_disk:
            if any(parse_partition_dir(n) for n in entries if (self.logs_dir / n).is_dir()):
                raise StorageError(
                    f"{registry.path} is missing but {self.logs_dir} holds partition directories; "
                    "refusing to guess which topics exist"
                )
            registry.save()
        self._registry = registry
        self._committer = GroupCommitter(workers=self._flush_workers)
        removed = False
        for name in entries:
            path = self.logs_dir / name
            if not path.is_dir():
                continue
            if is_delete_dir(name):  # its name may be truncated: never parsed
                self._remove_dir(path, "left by an interrupted delete")
                removed = True
                continue
            parsed = parse_partition_dir(name)
            if parsed is None:
                continue
            topic, partition = parsed
            info = registry.get(topic)
            if info is None or partition >= info.partitions:
                self._remove_dir(path, "of a topic partition that is not registered")
                removed = True
            elif self._stored_topic_id(path) not in (None, info.topic_id):
                self._remove_dir(path, "of an older topic with the same name")
                removed = True
        if removed:
            fsync_dir(self.logs_dir)
        for info in registry.list():
            for p in range(info.partitions):
                self._open_partition(info, p, clean=clean)
        # The floor only matters if the allocator file was lost: stay above every id in use.
        floor = max((lg.max_producer_id() for lg in self._logs.values()), default=-1) + 1
        self._producer_ids = ProducerIdAllocator(self.meta_dir / PRODUCER_IDS_FILE, floor=floor)

    def _remove_dir(self, path: Path, why: str) -> None:
        logger.warning("removing directory %s (%d bytes) %s", path, _tree_bytes(path), why)
        try:
            shutil.rmtree(path)
        except OSError as e:
            raise StorageError(f"cannot remove {path}: {e}") from e

    @staticmethod
    def _stored_topic_id(path: Path) -> uuid.UUID | None:
        return stored_topic_id(path)

    def _open_log(
        self, path: Path, info: TopicInfo, partition: int, *, clean: bool, config: LogConfig | None = None
    ) -> Log:
        """``Log.open`` of one partition (subclasses open replicated logs); ``config``: the
        topic's, if the caller has it already."""
        assert self._registry is not None
        return Log.open(
            path,
            config if config is not None else self._registry.config(info.name),
            topic=info.name,
            partition=partition,
            flusher=self._committer,
            clean_shutdown=clean,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
        )

    def _open_partition(
        self,
        info: TopicInfo,
        partition: int,
        *,
        clean: bool,
        refuse: bool = True,
        built: LogConfig | None = None,
    ) -> Log | None:
        """Open one partition's log. A StorageError refuses the partition (``get_log``
        raises it) when ``refuse``, else it is raised. ``built``: the topic's config, for a
        partition ``_build_partitions`` built just now (its ``partition.metadata`` names
        ``info.topic_id``: not read back; thousands of them in a creation)."""
        key = (info.name, partition)
        path = self.partition_dir(info.name, partition)
        try:
            log = self._open_log(path, info, partition, clean=clean, config=built)
        except StorageError as e:
            logger.error("refusing partition %s-%d: %s", info.name, partition, e)
            self._failed[key] = e
            if not refuse:
                raise
            return None
        try:
            if built is None and self._stored_topic_id(path) != info.topic_id:
                atomic_write(
                    path / PARTITION_METADATA_FILE, f"version: 0\ntopic_id: {info.topic_id}\n".encode()
                )
        except StorageError:
            log.close(clean=False)
            raise
        log.retention_guard = self._retention_guard
        log.cleaner_attached = self.cleaner_config.enable
        log.append_guard = self._guard_append if self._disk_guard is not None else None
        log.storage_error_listener = self.disk_health.storage_error
        log.roll_listener = self._roll_listener
        self._logs[key] = log
        self.generation += 1
        self._failed.pop(key, None)
        return log

    def start_background(self) -> None:
        """Start the interval flusher, the retention thread and the log cleaner (compacted
        topics, hot.cleaner; unless ``cleaner.enable`` is off) (idempotent)."""
        with self._lock:
            self._require_open()
            if self._interval is None:
                self._interval = IntervalFlusher(self._interval_logs)
            if self._retention_thread is None:
                self._stop.clear()
                self._retention_thread = threading.Thread(
                    target=self._retention_loop, name="strata-retention", daemon=True
                )
                self._retention_thread.start()
            if self._disk_health_thread is None:
                self._disk_health_thread = threading.Thread(
                    target=self._disk_health_loop, name="strata-disk-health", daemon=True
                )
                self._disk_health_thread.start()
            if self._cleaner_thread is None and self.cleaner_config.enable:
                self._cleaner = LogCleaner(self.cleaner_config)
                self._cleaner_thread = threading.Thread(
                    target=self._cleaner.run, args=(self._compacted_logs,), name="strata-cleaner", daemon=True
                )
                self._cleaner_thread.start()

    def _interval_logs(self) -> list[Log]:
        """The logs in interval mode (what the interval flusher looks at each second),
        listed again only when the generation moves (a log opened or closed, a topic's
        configuration altered): with the default fsync mode none, and walking 10,000
        logs every second to find that was an idle broker's fixed cost (issue 39). The
        key is read before the listing, so a change during it lists again next round."""
        gen = self.generation
        cached = self._interval_cache
        if cached is None or cached[0] != gen:
            cached = self._interval_cache = (gen, [lg for lg in self.logs() if not lg.config.fsync_mode])
        return cached[1]

    def _compacted_logs(self) -> list[Log]:
        # Replicated logs too, leaders and followers alike (each cleans its own copy below
        # its high watermark); a follower copies a cleaned leader's gaps (append_as_follower).
        return [log for log in self.logs() if log.config.compact and log.is_online]

    def _retention_loop(self) -> None:
        interval = max(0.001, self.retention_check_interval_ms / 1000.0)
        while not self._stop.wait(interval):
            try:
                self.apply_retention()
            except Exception:
                logger.exception("retention pass failed")

    def _disk_health_loop(self) -> None:
        # Notices (and logs) that a full disk has space again without waiting for an append.
        while not self._stop.wait(DISK_HEALTH_POLL_S):
            try:
                self.disk_health.poll()
            except Exception:
                logger.exception("disk health check failed")

    def close(self, clean: bool = True) -> None:
        """Stop the threads, flush and close every log, then write the clean-shutdown
        marker (only if every partition closed cleanly) and release the directory lock.

        ``clean=False`` (fatal errors, tests) releases everything without flushing and
        without the marker, so the next open recovers every log as after a crash."""
        with self._lock:
            if self._registry is None:
                return
            self._stop.set()
            if self._cleaner is not None:
                self._cleaner.stop.set()
            if self._retention_thread is not None:
                self._retention_thread.join()
                self._retention_thread = None
            if self._disk_health_thread is not None:
                self._disk_health_thread.join()
                self._disk_health_thread = None
            if self._cleaner_thread is not None:
                self._cleaner_thread.join()
                self._cleaner_thread = None
                self._cleaner = None
            if self._interval is not None:
                self._interval.close()
                self._interval = None
            if self._committer is not None:
                if not clean:
                    for log in self._logs.values():
                        log.close(clean=False)  # nothing left for the committer to flush
                self._committer.close()
                self._committer = None
            all_clean = clean and not self._failed
            for key, log in sorted(self._logs.items()):
                try:
                    if not log.is_online:
                        all_clean = False
                    log.close(clean=clean)
                except StrataError as e:
                    logger.error("closing %s-%d failed: %s", key[0], key[1], e)
                    all_clean = False
            self._logs.clear()
            self._failed.clear()
            try:
                if all_clean:
                    atomic_write(self.logs_dir / CLEAN_SHUTDOWN_FILE, b"")
            finally:
                self._registry = None
                self._producer_ids = None
                self._release_dir_lock()

    # --- topics ----------------------------------------------------------------------------

    def _require_open(self) -> TopicRegistry:
        if self._registry is None:
            raise StorageError(f"log manager of {self.data_dir} is not open")
        return self._registry

    @property
    def registry(self) -> TopicRegistry:
        return self._require_open()

    @property
    def producer_ids(self) -> ProducerIdAllocator:
        """The producer id allocator of this data directory (InitProducerId)."""
        self._require_open()
        assert self._producer_ids is not None
        return self._producer_ids

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.logs_dir / partition_dir_name(topic, partition)

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        topic_id: uuid.UUID | None = None,
        start_offsets: Mapping[int, tuple[int, int]] | None = None,
    ) -> TopicInfo:
        """Register the topic (validated; see TopicRegistry.create), then create its logs.

        Restore from the object store passes the topic's ``topic_id`` (kept in the registry,
        so keys in the bucket stay valid) and ``start_offsets[p] = (log_start_offset,
        next_offset)``: partition p is created empty with its active segment at
        ``next_offset``, so its history stays remote and appends continue after it."""
        starts = dict(start_offsets or {})
        for p, (lso, nxt) in starts.items():
            if not 0 <= p < partitions:
                raise InvalidPartitionsError(
                    f"start offsets given for partition {p} of a {partitions}-partition topic"
                )
            if not 0 <= lso <= nxt:
                raise InvalidRequestError(
                    f"partition {p}: log start offset {lso} must be in [0, next offset {nxt}]"
                )
        with self._lock:
            registry = self._require_open()
            # Directories first, registry second: a crash in between leaves directories
            # of an unregistered topic (removed by ``open``), never a registered
            # partition that ``open`` would find half-built or recreate at offset 0.
            registry.validate_create(name, partitions, configs)
            topic_id = topic_id or uuid.uuid4()
            config = LogConfig.from_kafka(dict(configs or {}), self.defaults)
            # Thousands of small system calls, each taking the GIL back from a loop that
            # may be busy with this topic's early clients (core.gil).
            with gil.handoff():
                self._build_partitions(name, range(partitions), config, topic_id, starts)
                info = registry.create(name, partitions, configs, topic_id=topic_id)
                self._open_new(info, range(partitions))
            return info

    def _open_new(self, info: TopicInfo, partitions: range) -> None:
        """Open partitions ``_build_partitions`` made durable just now: nothing to recover
        (``clean``), and nothing that opening writes is needed by a crash (it finds the
        built directories), so their fsyncs are one syncfs too."""
        config = self._require_open().config(info.name)  # once, not per partition
        try:
            with deferred_sync(self.logs_dir):
                for p in partitions:
                    # A partition not built here (not hosted) but found on disk: checked as usual.
                    built = config if self._hosts_new(info.name, p) else None
                    self._open_partition(info, p, clean=True, refuse=False, built=built)
        except OSError as e:
            raise StorageError(f"cannot make new partitions of {info.name} durable: {e}") from e

    def _hosts_new(self, topic: str, partition: int) -> bool:
        """Whether a new partition gets a directory here (a cluster's broker: only where
        it has a replica)."""
        return True

    def _build_partitions(
        self,
        name: str,
        partitions: range,
        config: LogConfig,
        topic_id: uuid.UUID,
        starts: Mapping[int, tuple[int, int]],
    ) -> None:
        """Build the directories of new partitions (empty; restore: starting at
        ``starts[p]``), durable on return. One ``syncfs`` makes the whole batch durable
        (core.disk.deferred_sync) instead of about ten fsyncs each: at 10,000 partitions
        those were most of a topic's creation time. Each directory is renamed into place
        only once complete (``create_directory_at``); a crash before the caller registers
        the partitions leaves directories that ``open`` removes."""
        metadata = f"version: 0\ntopic_id: {topic_id}\n".encode()
        try:
            with deferred_sync(self.logs_dir):
                for p in partitions:
                    if not self._hosts_new(name, p):
                        continue
                    path = self.partition_dir(name, p)
                    if path.exists():
                        self._remove_dir(path, "left over before the topic was created")
                    lso, nxt = starts.get(p, (0, 0))
                    create_directory_at(
                        str(path),
                        config,
                        log_start_offset=lso,
                        next_offset=nxt,
                        extra_files={PARTITION_METADATA_FILE: metadata},
                    )
        except OSError as e:  # the closing syncfs
            raise StorageError(f"cannot make new partitions of {name} durable: {e}") from e

    def adoption_dir(self, topic: str, partition: int) -> Path:
        """Where ``adopt_partition`` stages a directory (a name ``open`` leaves alone)."""
        return self.logs_dir / f"{self.partition_dir(topic, partition).name}{ADOPTING_SUFFIX}"

    def adopt_partition(
        self, name: str, partition: int, source: Path, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        """Make ``source``, a partition directory kept outside ``logs/``, partition
        ``partition`` of topic ``name`` with its data (registering the topic when needed,
        one partition): the single node's committed-offsets log ``<data_dir>/
        __consumer_offsets-0``, written before the single node became a cluster of one
        (broker.node.adopt_local_topics).

        Crash-safe in steps, each repeatable: ``source`` is renamed to
        ``adoption_dir`` (which ``open`` ignores), the topic registered, an empty log that
        ``open`` may have created for the registered partition meanwhile removed, and
        the staged directory renamed into place and opened. A crash anywhere leaves the
        data in ``source`` or in ``adoption_dir``: call again with that one."""
        with self._lock:
            registry = self._require_open()
            staged = self.adoption_dir(name, partition)
            final = self.partition_dir(name, partition)
            try:
                if source != staged:
                    os.rename(source, staged)
                    fsync_dir(source.parent)
                    fsync_dir(self.logs_dir)
            except OSError as e:
                raise StorageError(f"cannot move {source} to {staged}: {e}") from e
            info = registry.get(name)
            if info is None:
                info = registry.create(name, partition + 1, configs)
            old = self._logs.pop((name, partition), None)
            self.generation += 1
            if old is not None:
                if old.log_end_offset > old.log_start_offset:
                    raise StorageError(f"{name}-{partition} already holds data; not adopting {staged}")
                old.close()
            if final.exists():
                self._remove_dir(final, "(empty) in favour of the adopted one")
            try:
                os.rename(staged, final)
                fsync_dir(self.logs_dir)
            except OSError as e:
                raise StorageError(f"cannot move {staged} to {final}: {e}") from e
            self._open_partition(info, partition, clean=False, refuse=False)
            return info

    def delete_topic(self, name: str) -> TopicInfo:
        """Unregister the topic, then close and remove its logs (in-flight fetches keep
        reading their regions; waiting producers get LogClosedError)."""
        with self._lock:
            registry = self._require_open()
            info = registry.delete(name)
            self.generation += 1
            # The topic is gone once the registry says so: a directory that cannot be
            # removed now is one of an unregistered topic, which ``open`` and a later
            # ``create_topic`` of the same name remove. So the other partitions and the
            # listeners (remote deletion) still run, and the error is logged, not raised.
            for p in range(info.partitions):
                log = self._logs.pop((name, p), None)
                self._failed.pop((name, p), None)
                try:
                    if log is not None:
                        log.delete()
                    else:
                        path = self.partition_dir(name, p)
                        if path.exists():
                            self._remove_dir(path, "of a deleted topic")
                except StorageError as e:
                    logger.error("deleted topic %s: partition %d left on disk until restart: %s", name, p, e)
            try:
                fsync_dir(self.logs_dir)
            except StorageError as e:
                logger.error("deleted topic %s: %s", name, e)
            for listener in list(self._delete_listeners):
                try:
                    listener(info)
                except Exception:
                    logger.exception("topic deletion listener failed for %s", name)
            return info

    def topic(self, name: str) -> TopicInfo:
        info = self._require_open().get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return info

    def topics(self) -> list[TopicInfo]:
        return self._require_open().list()

    def log_config(self, topic: str) -> LogConfig:
        return self._require_open().config(topic)

    def alter_topic_configs(
        self, name: str, configs: Mapping[str, str | None], *, replace: bool = False
    ) -> TopicInfo:
        """Change a topic's overrides (see TopicRegistry.alter_configs); open logs pick
        the new configuration up at once."""
        with self._lock:
            registry = self._require_open()
            info = registry.alter_configs(name, configs, replace=replace)
            self.generation += 1
            config = registry.config(name)
            for p in range(info.partitions):
                log = self._logs.get((name, p))
                if log is not None:
                    log.update_config(config)
            # Again once the logs carry it: a list built meanwhile from their configs
            # (``_interval_logs``, without the lock) is keyed by an older generation.
            self.generation += 1
            return info

    def add_partitions(self, name: str, new_total: int) -> TopicInfo:
        with self._lock:
            registry = self._require_open()
            before = self.topic(name)
            registry.validate_add_partitions(name, new_total)
            config = registry.config(name)
            new = range(before.partitions, new_total)
            with gil.handoff():  # as create_topic
                self._build_partitions(name, new, config, before.topic_id, {})
                info = registry.add_partitions(name, new_total)
                self.generation += 1
                self._open_new(info, new)
            return info

    # --- logs --------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log:
        """The partition's log; UnknownTopicOrPartitionError if there is no such partition,
        the recovery error (a StorageError) if the partition was refused."""
        log = self._logs.get((topic, partition))
        if log is not None:
            return log
        failed = self._failed.get((topic, partition))
        if failed is not None:
            raise failed
        info = self.topic(topic)
        raise UnknownTopicOrPartitionError(
            f"topic {topic!r} has no partition {partition} (it has {info.partitions})"
        )

    def logs(self) -> list[Log]:
        # No lock: the background threads call this while close() holds the lock and joins them.
        return list(self._logs.values())

    def failed_partitions(self) -> dict[tuple[str, int], StorageError]:
        return dict(self._failed)

    def set_roll_listener(self, listener: RollListener | None) -> None:
        """Tell ``listener`` of every segment roll of every log, present and future
        (``Log.roll_listener``: called under the log's lock, keep it short)."""
        with self._lock:
            self._roll_listener = listener
            for log in self._logs.values():
                log.roll_listener = listener

    def set_retention_guard(self, guard: RetentionGuard | None) -> None:
        """Install the tiering hook on every log, present and future (see Log.apply_retention)."""
        with self._lock:
            self._retention_guard = guard
            for log in self._logs.values():
                log.retention_guard = guard

    def add_delete_listener(self, listener: DeleteListener) -> None:
        """``listener(info)`` runs (under the manager's lock: keep it short) after a topic
        was unregistered and its local logs removed."""
        with self._lock:
            self._delete_listeners.append(listener)

    def remove_delete_listener(self, listener: DeleteListener) -> None:
        with self._lock:
            if listener in self._delete_listeners:
                self._delete_listeners.remove(listener)

    def set_retention_owner(self, owner: RetentionOwner | None) -> None:
        """Hand the retention of some logs to someone else: the retention pass skips every
        log for which ``owner(log)`` is true. Tiered storage owns its topics' retention
        (local retention may only delete uploaded segments; total retention spans the
        bucket), so the plain pass must never delete their un-uploaded data."""
        with self._lock:
            self._retention_owner = owner

    def set_disk_high_water(
        self, *, max_used_fraction: float | None = None, max_log_bytes: int | None = None
    ) -> DiskGuard | None:
        """Refuse appends above a high-water mark (see DiskGuard); both None removes it."""
        with self._lock:
            guard = None
            if max_used_fraction is not None or max_log_bytes is not None:
                guard = DiskGuard(
                    self.data_dir, self.logs, max_used_fraction=max_used_fraction, max_log_bytes=max_log_bytes
                )
            self._disk_guard = guard
            for log in self._logs.values():
                log.append_guard = self._guard_append if guard is not None else None
            if guard is None:
                self.disk_health.high_water_passed()
            return guard

    def _guard_append(self, nbytes: int) -> None:
        """``Log.append_guard``: the high-water mark, its state changes told to disk_health."""
        guard = self._disk_guard
        if guard is None:
            return
        try:
            guard.check(nbytes)
        except DiskHighWaterError as e:
            self.disk_health.high_water_refused(str(e))
            raise
        self.disk_health.high_water_passed()

    def _high_water_exceeded(self) -> str | None:
        guard = self._disk_guard
        return guard.exceeded() if guard is not None else None

    @property
    def disk_guard(self) -> DiskGuard | None:
        return self._disk_guard

    def apply_retention(self, now_ms: int | None = None) -> dict[tuple[str, int], list[int]]:
        """One retention pass over every log whose retention is not owned elsewhere (see
        ``set_retention_owner``); returns the deleted segment bases per partition."""
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        deleted: dict[tuple[str, int], list[int]] = {}
        owner = self._retention_owner
        for log in self.logs():
            if owner is not None and owner(log):
                continue
            try:
                # Asked again under the log's lock: the config may change in between.
                bases = log.apply_retention(now_ms, unless=owner)
            except StrataError as e:
                logger.error("retention of %s failed: %s", log.name, e)
                continue
            if bases:
                deleted[(log.topic, log.partition)] = bases
        if deleted and self._disk_guard is not None:
            self._disk_guard.invalidate()
        return deleted

    def flush_all(self) -> None:
        for log in self.logs():
            if log.is_online:
                log.flush()
