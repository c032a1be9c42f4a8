"""The log manager of a cluster-mode broker: every log replicated, high watermarks checkpointed.

Same data directory layout as ``hot.manager.LogManager`` plus
``meta/replication-offset-checkpoint`` (``broker.hw_checkpoint``). The differences:

* every partition log is opened with ``hw_managed_externally``: its high watermark is
  set by the replica manager (the leader: minimum over the ISR; a follower: what its
  leader reports), starting from the checkpointed value;
* flushes requested by the logs run on a ``ReplicaCommitter``, which reports each
  round of completed flushes (every log it flushed, at once): in ``fsync`` flush mode a
  leader counts only its flushed records towards the high watermark, so a flush can
  move it;
* the topic registry is a mirror of the cluster's topics in etcd, kept by the replica
  manager (``create_topic`` with the etcd topic id, ``delete_topic``...);
* a partition gets a log only where it has a replica (``hosted``, from the cluster
  metadata): the registry knows every partition of a mirrored topic, but no empty log
  is created for one placed on other brokers (``get_log`` answers NotLeaderError for
  it); a directory already on disk is opened whatever the metadata says, since it may
  hold data. ``ensure_log`` creates the log of a replica this broker takes on.

Crash behaviour is the base manager's; the checkpoint is written on clean close (and
periodically by the replica manager), so after a crash it may lag, which only delays
consumers until the leader advances the high watermark again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from broker.hw_checkpoint import HighWatermarkCheckpoint, TopicPartition
from hot import loop_flush
from hot.config import LogConfig
from hot.errors import (
    NotLeaderError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from hot.flush import GroupCommitter
from hot.log import Log, fsync_dir
from hot.manager import LogManager
from hot.topics import TopicInfo

log = logging.getLogger("strata.cluster.logs")

FlushListener = Callable[[list[Log]], None]
HostedPredicate = Callable[[str, int], bool]


class ReplicaCommitter(GroupCommitter):
    """Group commit (``hot.flush.GroupCommitter``) that calls ``on_flushed(logs)`` on its
    worker thread once after each round of flushes, successful or not, with every log
    the round flushed."""

    def __init__(self, on_flushed: FlushListener, *, workers: int = 1) -> None:
        self._on_flushed = on_flushed  # before the workers start
        self._on_loop: loop_flush.LoopFlush | None = None
        super().__init__(workers=workers, name="strata-replica-commit")

    def flushed(self, logs: list[Log]) -> None:
        self._on_flushed(logs)

    def request(self, log: Log) -> None:
        # On the event loop's thread, with hot._syncer built: the loop's own group commit.
        on_loop = self._on_loop
        if on_loop is not None and threading.get_ident() == on_loop.thread:
            on_loop.request(log)
        else:
            super().request(log)

    def flush_on_loop(self, loop: asyncio.AbstractEventLoop | None, on_flushed: FlushListener | None) -> None:
        """From now on (``loop`` None: no longer) the appends made on ``loop``'s thread
        (called there) are flushed by ``hot.loop_flush.LoopFlush``, which reports each
        round to ``on_flushed`` on the loop; other threads' appends still go to this
        committer's worker. No-op where hot._syncer is not built."""
        old, self._on_loop = self._on_loop, None
        if old is not None:
            for lg in old.close():
                super().request(lg)  # still wanting a flush: the worker's now
        if loop is not None and on_flushed is not None and loop_flush.available():
            self._on_loop = loop_flush.LoopFlush(loop, on_flushed, super().request)

    def close(self) -> None:
        self.flush_on_loop(None, None)
        super().close()


class ClusterLogManager(LogManager):
    """``LogManager`` whose logs are replicated (see the module docstring)."""

    def __init__(
        self,
        data_dir: Path,
        defaults: LogConfig | None = None,
        *,
        flush_workers: int = 1,
        **kwargs: int,
    ) -> None:
        super().__init__(data_dir, defaults, flush_workers=flush_workers, **kwargs)
        self.hw_checkpoint = HighWatermarkCheckpoint(self.meta_dir)
        self.on_flushed: FlushListener | None = None
        self._checkpointed: dict[TopicPartition, int] = {}
        self._written: dict[TopicPartition, int] | None = None
        self._replica_committer: ReplicaCommitter | None = None
        self._replica_flush_workers = flush_workers
        # Whether this broker holds a replica of (topic, partition), per the cluster
        # metadata; None: every partition of a registered topic (as a single node).
        self.hosted: HostedPredicate | None = None

    def open(self) -> ClusterLogManager:
        self._checkpointed = self.hw_checkpoint.read()
        self._replica_committer = ReplicaCommitter(self._flushed, workers=self._replica_flush_workers)
        try:
            super().open()
        except BaseException:
            self._replica_committer.close()
            self._replica_committer = None
            raise
        return self

    def defer_flush_wakes(self, schedule: Callable[[Callable[[], None]], object] | None) -> None:
        """``hot.flush.GroupCommitter.defer_wakes`` of the replica committer (on the event
        loop's thread, with ``loop.call_soon``; None to undo)."""
        if self._replica_committer is not None:
            self._replica_committer.defer_wakes(schedule)

    def flush_on_loop(self, loop: asyncio.AbstractEventLoop | None, on_flushed: FlushListener | None) -> None:
        """``ReplicaCommitter.flush_on_loop`` (fsync-mode flushes driven by the event loop)."""
        if self._replica_committer is not None:
            self._replica_committer.flush_on_loop(loop, on_flushed)

    def _flushed(self, logs: list[Log]) -> None:
        listener = self.on_flushed
        if listener is not None:
            listener(logs)

    def _hosts_new(self, topic: str, partition: int) -> bool:
        hosted = self.hosted
        return hosted is None or hosted(topic, partition)

    def _open_partition(
        self,
        info: TopicInfo,
        partition: int,
        *,
        clean: bool,
        refuse: bool = True,
        built: LogConfig | None = None,
    ) -> Log | None:
        hosted = self.hosted
        if (
            hosted is not None
            and not hosted(info.name, partition)
            and not self.partition_dir(info.name, partition).exists()
        ):
            return None  # not a replica here: no empty log (an existing one holds data: opened)
        return super()._open_partition(info, partition, clean=clean, refuse=refuse, built=built)

    def _open_log(
        self, path: Path, info: TopicInfo, partition: int, *, clean: bool, config: LogConfig | None = None
    ) -> Log:
        # Replicated: the replica committer flushes, and the HW comes from replication.
        return Log.open(
            path,
            config if config is not None else self.registry.config(info.name),
            topic=info.name,
            partition=partition,
            flusher=self._replica_committer,
            clean_shutdown=clean,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            hw_managed_externally=True,
            high_watermark=self._checkpointed.get((info.name, partition)),
        )

    def remove_partition(self, topic: str, partition: int) -> bool:
        """Close and delete this broker's replica of one partition (it was reassigned
        away) and forget its checkpointed high watermark; the topic stays registered.
        False if there was nothing to remove. StorageError if the directory stays."""
        key = (topic, partition)
        with self._lock:
            self._require_open()
            lg = self._logs.pop(key, None)
            self._failed.pop(key, None)
            self._checkpointed.pop(key, None)
            self.generation += 1
            path = self.partition_dir(topic, partition)
            if lg is not None:
                lg.delete()
            elif path.exists():
                self._remove_dir(path, "of a replica reassigned away")
            else:
                return False
            fsync_dir(self.logs_dir)
            return True

    def get_log(self, topic: str, partition: int) -> Log:
        """The partition's log; NotLeaderError for a partition of a registered topic that
        has no replica here (Kafka's NOT_LEADER_OR_FOLLOWER)."""
        try:
            return super().get_log(topic, partition)
        except UnknownTopicOrPartitionError:
            info = self.topic(topic)
            if 0 <= partition < info.partitions:
                raise NotLeaderError(f"this broker has no replica of {topic}-{partition}") from None
            raise

    def ensure_log(self, topic: str, partition: int) -> Log:
        """The log of a partition this broker now holds a replica of, created (empty) if
        it has none yet; a refused partition's StorageError is raised."""
        with self._lock:
            lg = self._logs.get((topic, partition))
            if lg is not None:
                return lg
            failed = self._failed.get((topic, partition))
            if failed is not None:
                raise failed
            info = self.topic(topic)
            if not 0 <= partition < info.partitions:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
            created = self._open_partition(info, partition, clean=False, refuse=False)
            if created is None:
                raise NotLeaderError(f"this broker has no replica of {topic}-{partition}")
            fsync_dir(self.logs_dir)
            return created

    def checkpoint_high_watermarks(self, *, if_changed: bool = False) -> None:
        """Write every open log's high watermark to the checkpoint (StorageError on failure);
        ``if_changed`` (the periodic write): not when every entry is as last written, so an
        idle broker does not rewrite and fsync a file of every partition each interval."""
        entries = {(lg.topic, lg.partition): lg.high_watermark for lg in self.logs() if not lg.closed}
        if if_changed and entries == self._written:
            return
        self.hw_checkpoint.write(entries)
        self._checkpointed = entries
        self._written = dict(entries)  # what the file holds (_checkpointed loses removed keys)

    def close(self, clean: bool = True) -> None:
        committer, self._replica_committer = self._replica_committer, None
        if committer is not None:
            committer.close()  # flushes what is still requested
        if clean and self._registry is not None:
            try:
                self.checkpoint_high_watermarks()
            except StorageError as e:
                log.error("cannot write the high-watermark checkpoint: %s", e)
        super().close(clean)
