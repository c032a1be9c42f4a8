"""Consumer groups in cluster mode: offsets in the replicated ``__consumer_offsets`` topic.

As in Kafka, group ``g`` belongs to partition ``(String.hashCode(g) & 0x7fffffff) % N`` of
the internal topic ``__consumer_offsets`` (N = its partition count, fixed once the topic
exists), and that partition's leader is the group's coordinator.

* The topic is created through etcd like any other (``broker.controller.create_topic``),
  on the first FindCoordinator that finds it missing: ``offsets.topic.num.partitions``
  partitions, ``offsets.topic.replication.factor`` replicas capped at the live brokers
  (with a warning), ``min.insync.replicas`` 2 when there are 3 replicas or more, no time
  or size retention, never tiered. It is replicated by the normal replication.
* Records are the single-node offsets log's (``broker.groups.offsets``: Kafka's own
  ``__consumer_offsets`` key and value schemas, uncompressed v2 batches without producer
  id), appended by the partition's leader in its epoch. A write is acknowledged once the
  high watermark passed it (acks=all); ``min.insync.replicas`` is checked before the
  append. Replication failures become the group errors Kafka gives:
  NOT_LEADER_OR_FOLLOWER and storage errors -> NOT_COORDINATOR; not enough replicas,
  timeouts and anything else -> COORDINATOR_NOT_AVAILABLE. A record whose write failed
  after the append stays in the log (as in Kafka) and counts on the next load.
* Loading: when this broker becomes leader of an offsets partition (seen by a watch of
  the replica roles, on every metadata change and every 100 ms), it waits until the high
  watermark reaches the log end it found (the previous leaders' records are committed),
  then replays the partition from its log start and hands its groups to the coordinator
  (Empty, as after a single-node restart). Until then the groups' requests get
  COORDINATOR_LOAD_IN_PROGRESS. Losing the lead (another leader or epoch, the replica
  dropped) unloads the partition's groups: parked JoinGroup/SyncGroup requests and later
  requests get NOT_COORDINATOR, and clients find the new coordinator.
* Readers see only acknowledged state (applied in log order as acknowledgements arrive);
  ``has_offsets`` also counts writes in flight, as in the single-node store.
* Compaction (Kafka's log cleaner keeps the latest record per key; here, as on a single
  node, the live keys are written again): when the partition holds more than
  ``max(offsets.topic.segment.bytes, 2 x live bytes)``, the leader rolls its active
  segment, appends every live key's latest record again (the dump, in its epoch, like a
  commit), waits until the high watermark passes the dump (acks=all), then moves the log
  start offset to the dump's first offset and deletes the segments below it. Followers
  follow: fetch responses carry the leader's log start offset and its segment bases
  (``broker.fetcher``), so they start a segment where the dump starts, move their log
  start offset there (never past their own high watermark), and the watch of the
  offsets partitions deletes the same segments at once (``_drop_compacted``). Crash and
  failover safety: the log start offset only ever moves to the first offset of a dump
  acknowledged in full, so every replica that can become leader holds, from its log
  start, either the old records followed by whatever part of the dump it has, or the
  whole dump. A replay (latest record of a key wins, in log order) gives the same state
  in both cases: a dump record restates a key's value as of the dump, which is what the
  replay has reached at that point, and a tombstone is never dropped alone: everything
  below the dump goes together, so no older value of a deleted key survives it.

Everything here runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Coroutine, Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any, Final

from broker.controller import create_topic
from broker.groups.config import GroupConfig
from broker.groups.coordinator import GroupCoordinator
from broker.groups.offsets import (
    OFFSETS_TOPIC,
    RECORD_OVERHEAD,
    Op,
    Value,
    build_batches,
    encode_ops,
    read_ops,
)
from broker.groups.offsets_codec import GroupKey, OffsetKey, RecordKey, encode_key
from broker.groups.types import OffsetAndMetadata, StoredGroup, TopicPartition
from broker.replica_manager import PartitionReplica, ReplicaManager, Role
from broker.replication.leader_state import ACKS_ALL
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    NotLeaderError,
    StorageError,
    StrataError,
    TopicExistsError,
)

log = logging.getLogger("strata.cluster.groups")

_POLL_S: Final = 0.1  # replica roles change after the view does: look again this often
_HW_POLL_S: Final = 0.02  # while a new leader waits for its high watermark
_CREATE_VISIBLE_S: Final = 5.0
MAX_MESSAGE_BYTES: Final = 8 << 20  # our batches are cut at about 1 MiB
_COMPACTION_ACK_S: Final = 60.0  # least wait for a compaction's dump to be replicated


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The offsets partition of a group: Kafka's ``Utils.abs(hashCode) % partitions``."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partitions


def offsets_topic_configs(replication_factor: int, segment_bytes: int) -> dict[str, str]:
    """Topic configs of ``__consumer_offsets``: kept until compacted (no retention), never
    tiered, acks=all needing two replicas when there are three or more."""
    return {
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "remote.storage.enable": "false",
        "segment.bytes": str(segment_bytes),
        "max.message.bytes": str(MAX_MESSAGE_BYTES),
        "min.insync.replicas": "2" if replication_factor >= 3 else "1",
    }


def replication_error(exc: BaseException) -> StrataError:
    """A replication failure of an offsets write as the group error Kafka answers."""
    if isinstance(exc, NotCoordinatorError | CoordinatorNotAvailableError | CoordinatorLoadInProgressError):
        return exc
    if isinstance(exc, NotLeaderError | StorageError):
        return NotCoordinatorError(f"not the coordinator any more: {exc}")
    if isinstance(exc, TimeoutError):
        return CoordinatorNotAvailableError("offsets not replicated in time")
    return CoordinatorNotAvailableError(f"offsets not replicated: {exc}")


@dataclass(eq=False)
class _Write:
    ops: list[Op]
    done: bool = False
    ok: bool = False


@dataclass(eq=False)
class _Partition:
    """The groups of one offsets partition this broker leads (in ``epoch``, on ``log``)."""

    number: int
    rep: PartitionReplica
    epoch: int
    # Log order, writes in flight included: what a replay would rebuild, and the dump.
    offset_keys: dict[str, set[OffsetKey]] = field(default_factory=dict)
    group_keys: set[str] = field(default_factory=set)
    latest: dict[RecordKey, bytes] = field(default_factory=dict)  # live key -> its value
    live_bytes: int = 0  # about the size of a dump of every live key
    # Acknowledged state: what readers see.
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, StoredGroup] = field(default_factory=dict)
    pending: deque[_Write] = field(default_factory=deque)
    compaction: asyncio.Task[None] | None = None
    compactions: int = 0
    # After a failed compaction: not again before the log is this big (no dump per write).
    retry_above: int = 0

    def apply_latest(self, op: Op) -> None:
        key, k, raw, _ = op
        old = self.latest.pop(key, None)
        if old is not None:
            self.live_bytes -= len(k) + len(old) + RECORD_OVERHEAD
        if raw is not None:
            self.latest[key] = raw
            self.live_bytes += len(k) + len(raw) + RECORD_OVERHEAD
        if isinstance(key, OffsetKey):
            keys = self.offset_keys.setdefault(key.group, set())
            if raw is None:
                keys.discard(key)
                if not keys:
                    del self.offset_keys[key.group]
            else:
                keys.add(key)
        elif raw is None:
            self.group_keys.discard(key.group)
        else:
            self.group_keys.add(key.group)

    def apply_durable(self, op: Op) -> None:
        key, _, _, value = op
        if isinstance(key, OffsetKey):
            if isinstance(value, OffsetAndMetadata):
                self.offsets.setdefault(key.group, {})[key.topic_partition] = value
            else:
                offsets = self.offsets.get(key.group)
                if offsets is not None:
                    offsets.pop(key.topic_partition, None)
                    if not offsets:
                        del self.offsets[key.group]
        elif isinstance(value, StoredGroup):
            self.groups[key.group] = value
        else:
            self.groups.pop(key.group, None)

    def replay(self, ops: Iterable[Op]) -> None:
        """Apply committed records read from the log (loading), in log order."""
        for op in ops:
            self.apply_latest(op)
            self.apply_durable(op)

    def drain(self) -> None:
        """Apply acknowledged writes in log order (a failed one applies nothing)."""
        while self.pending and self.pending[0].done:
            w = self.pending.popleft()
            if w.ok:
                for op in w.ops:
                    self.apply_durable(op)

    def group_ids(self) -> Set[str]:
        return self.offsets.keys() | self.groups.keys()

    def dump(self) -> list[Op]:
        """Every live key's latest record (log order state), to append again."""
        return [(key, encode_key(key), raw, None) for key, raw in self.latest.items()]


class ClusterOffsetStore:
    """The ``OffsetStore`` and ``CoordinatorLocator`` of a cluster-mode broker (behaviour:
    module docstring). ``attach`` it to its coordinator, which then owns it (``close``)."""

    def __init__(self, broker_id: int, replicas: ReplicaManager, config: GroupConfig) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.view = replicas.view
        self.config = config
        self._coordinator: GroupCoordinator | None = None
        self._parts: dict[int, _Partition] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._dropping: set[int] = set()  # partitions whose compacted segments are being deleted
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._create_lock = asyncio.Lock()
        self._closed = False
        self._topics: set[str] | None = None  # the cluster's topics when last looked at
        self.loads = 0  # partitions loaded since start (tests, logs)
        self.compactions = 0  # compactions done since start (tests, logs)

    # --- life cycle ----------------------------------------------------------------------------

    def attach(self, coordinator: GroupCoordinator) -> None:
        """Serve ``coordinator`` and start watching the offsets partitions' leaders."""
        self._coordinator = coordinator
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="groups-offsets-leaders")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for t in [*([self._task] if self._task else []), *self._loading.values(), *self._background]:
            t.cancel()
        self._parts.clear()

    # --- the topic -----------------------------------------------------------------------------

    def partition_count(self) -> int | None:
        va = self.view.topics.get(OFFSETS_TOPIC)
        return va.value.partition_count if va is not None else None

    async def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` if etcd has no such topic (any broker may; a
        concurrent creator wins and that is fine). CoordinatorNotAvailableError when it
        cannot be created now (no live broker, etcd unreachable)."""
        if OFFSETS_TOPIC in self.view.topics:
            return
        async with self._create_lock:
            if OFFSETS_TOPIC in self.view.topics:
                return
            live = len(self.view.live_broker_ids())
            wanted = self.config.offsets_topic_replication_factor
            rf = min(wanted, live)
            if rf < 1:
                raise CoordinatorNotAvailableError("no live broker to place the offsets topic on")
            if rf < wanted:
                log.warning(
                    "creating %s with replication factor %d: offsets.topic.replication.factor is %d "
                    "but only %d brokers are live",
                    OFFSETS_TOPIC,
                    rf,
                    wanted,
                    live,
                )
            n = self.config.offsets_topic_num_partitions
            configs = offsets_topic_configs(rf, self.config.offsets_segment_bytes)
            try:
                created = await create_topic(self.replicas.client, OFFSETS_TOPIC, n, rf, configs)
                log.info("created %s: %d partitions, replication factor %d", OFFSETS_TOPIC, n, rf)
                with contextlib.suppress(TimeoutError):
                    await self.view.wait_for_revision(created.mod_revision, _CREATE_VISIBLE_S)
            except TopicExistsError:
                pass
            except StrataError as exc:
                raise CoordinatorNotAvailableError(f"cannot create {OFFSETS_TOPIC}: {exc}") from exc

    def leader_for(self, group_id: str) -> int:
        """The broker id etcd names leader of the group's offsets partition (FindCoordinator);
        CoordinatorNotAvailableError when the topic is missing or the partition has no
        live leader, or when that is this broker and it cannot confirm its lease (cut off
        from etcd, its view may be stale: clients should ask another broker)."""
        node = self._etcd_leader(group_id)
        if node == self.broker_id and not self.replicas.lease_alive():
            raise CoordinatorNotAvailableError(f"broker {self.broker_id} cannot confirm its cluster lease")
        return node

    def _etcd_leader(self, group_id: str) -> int:
        n = self.partition_count()
        if n is None:
            raise CoordinatorNotAvailableError(f"{OFFSETS_TOPIC} does not exist yet")
        p = partition_for(group_id, n)
        leader = self.view.leader_of(OFFSETS_TOPIC, p)
        if leader is None:
            raise CoordinatorNotAvailableError(f"{OFFSETS_TOPIC}-{p} has no leader")
        return leader.broker_id

    # --- CoordinatorLocator --------------------------------------------------------------------

    def coordinator_for(self, group_id: str) -> int:
        """This broker when it leads and has loaded the group's partition; otherwise the
        leader etcd names (NOT_COORDINATOR follows), COORDINATOR_LOAD_IN_PROGRESS when
        that is this broker but loading is not done, NOT_COORDINATOR when it is this
        broker but its lease is in doubt (another may lead already)."""
        n = self.partition_count()
        if n is not None and self._part(partition_for(group_id, n)) is not None:
            return self.broker_id
        node = self._etcd_leader(group_id)
        if node == self.broker_id:
            if not self.replicas.lease_alive():
                raise NotCoordinatorError(f"broker {self.broker_id} cannot confirm its cluster lease")
            raise CoordinatorLoadInProgressError(f"loading the groups of {OFFSETS_TOPIC}")
        return node

    def partition_exists(self, topic: str, partition: int) -> bool:
        """OffsetCommit's check, against the cluster's topics (not just local replicas)."""
        va = self.view.topics.get(topic)
        return va is not None and 0 <= partition < va.value.partition_count

    # --- watching leadership ---------------------------------------------------------------------

    def _leading(self, rep: PartitionReplica, epoch: int) -> bool:
        return (
            not self._closed
            and self.replicas.replicas.get((rep.topic, rep.partition)) is rep
            and rep.role is Role.LEADER
            and rep.leader is not None
            and rep.leader_epoch == epoch
            # A broker unsure of its lease may have been replaced already: no stale reads.
            and self.replicas.lease_alive()
        )

    def _part(self, p: int) -> _Partition | None:
        part = self._parts.get(p)
        if part is None:
            return None
        if not self._leading(part.rep, part.epoch):
            self._unload(p)
            return None
        return part

    async def _watch(self) -> None:
        view = self.view
        while True:
            seq = view.seq
            try:
                self._forget_deleted_topics()
                self.sync()
            except Exception:
                log.exception("following the leaders of %s failed", OFFSETS_TOPIC)
            await view.wait_changed(seq, _POLL_S)

    def _forget_deleted_topics(self) -> None:
        """Tombstone the offsets of topics deleted from the cluster, as Kafka does (the
        local delete listener only fires on brokers holding a replica of the topic)."""
        if not self.view.ready:
            return
        topics = set(self.view.topics)
        gone = self._topics - topics if self._topics is not None else set()
        self._topics = topics
        if self._coordinator is not None:
            for topic in sorted(gone):
                self._coordinator.on_topic_deleted(topic)

    def sync(self) -> None:
        """Unload partitions no longer led here; start loading newly led ones; delete the
        segments a compaction left below the log start offset."""
        for p in list(self._parts):
            self._part(p)
        n = self.partition_count() or 0
        for p in range(n):
            self._drop_compacted(p)
            if p in self._parts or p in self._loading:
                continue
            rep = self.replicas.replicas.get((OFFSETS_TOPIC, p))
            if rep is not None and self._leading(rep, rep.leader_epoch):
                self._loading[p] = asyncio.get_running_loop().create_task(
                    self._load(p, rep, rep.leader_epoch), name=f"groups-load-{p}"
                )

    def _drop_compacted(self, p: int) -> None:
        """Delete this replica's segments entirely below its log start offset. A follower
        moves its log start offset with the leader's (a compaction there) from fetch
        responses; the broker's retention pass would delete the segments only every
        retention check interval (5 minutes), and loading replays from the log start
        anyway, so this is about disk space: done here, at once."""
        rep = self.replicas.replicas.get((OFFSETS_TOPIC, p))
        if rep is None or p in self._dropping:
            return
        lg = rep.log
        segs = lg.segments()
        if len(segs) < 2 or segs[0].next_offset > min(lg.log_start_offset, lg.high_watermark):
            return
        self._dropping.add(p)

        async def drop() -> None:
            try:
                await asyncio.to_thread(lg.apply_retention)
            except StrataError as exc:
                log.warning("%s-%d: cannot delete compacted segments: %s", OFFSETS_TOPIC, p, exc)
            finally:
                self._dropping.discard(p)

        self._spawn(drop(), f"groups-drop-compacted-{p}")

    async def _load(self, p: int, rep: PartitionReplica, epoch: int) -> None:
        try:
            lg = rep.log
            target = lg.log_end_offset
            started = time.monotonic()
            if lg.config.fsync_mode and lg.recovery_point < target:
                # The HW counts only what the leader flushed, and no append will flush
                # the tail it fetched as a follower (nothing is written before the load).
                await asyncio.to_thread(lg.flush)
                self.replicas.maybe_advance_hw(rep)
            # Earlier leaders' records count once committed: wait for the HW to reach them.
            while lg.high_watermark < target:
                if not self._leading(rep, epoch):
                    return
                await asyncio.sleep(_HW_POLL_S)
            part = _Partition(p, rep, epoch)
            for ops in read_ops(lg, lg.log_start_offset, target):
                part.replay(ops)
                await asyncio.sleep(0)
                if not self._leading(rep, epoch):
                    return
            if not self._leading(rep, epoch):
                return
            self._parts[p] = part
            self.loads += 1
            if self._coordinator is not None:
                self._coordinator.load_groups(part.group_ids())
            log.info(
                "%s-%d: coordinator in epoch %d, loaded %d groups from offsets [%d, %d) in %.3f s",
                OFFSETS_TOPIC,
                p,
                epoch,
                len(part.group_ids()),
                lg.log_start_offset,
                target,
                time.monotonic() - started,
            )
        except StrataError as exc:
            log.error("%s-%d: cannot load its groups: %s", OFFSETS_TOPIC, p, exc)
        finally:
            self._loading.pop(p, None)

    def _unload(self, p: int) -> None:
        part = self._parts.pop(p, None)
        if part is None:
            return
        n = self.partition_count()
        count = 0
        if self._coordinator is not None:
            # The partition count never changes once the topic exists.
            count = self._coordinator.unload_groups(lambda gid: n is not None and partition_for(gid, n) == p)
        log.info(
            "%s-%d: no longer coordinator (epoch %d), unloaded %d groups", OFFSETS_TOPIC, p, part.epoch, count
        )

    # --- OffsetStore: reading --------------------------------------------------------------------

    def _of(self, group: str) -> _Partition | None:
        n = self.partition_count()
        return self._part(partition_for(group, n)) if n is not None else None

    def groups(self) -> Set[str]:
        out: set[str] = set()
        for part in self._parts.values():
            out |= part.group_ids()
        return out

    def group_metadata(self, group: str) -> StoredGroup | None:
        part = self._of(group)
        return part.groups.get(group) if part is not None else None

    def committed(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        part = self._of(group)
        return dict(part.offsets.get(group, {})) if part is not None else {}

    def has_offsets(self, group: str) -> bool:
        part = self._of(group)
        return part is not None and bool(part.offset_keys.get(group))

    # --- OffsetStore: writing --------------------------------------------------------------------

    def commit(self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> asyncio.Future[None]:
        return self._write(
            group, [(OffsetKey(group, tp.topic, tp.partition), v) for tp, v in offsets.items()]
        )

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> asyncio.Future[None]:
        part = self._serving(group)
        keys = part.offset_keys.get(group, set())
        doomed = [k for tp in partitions if (k := OffsetKey(group, tp.topic, tp.partition)) in keys]
        return self._write(group, [(k, None) for k in doomed])

    def delete_group(self, group: str) -> asyncio.Future[None]:
        part = self._serving(group)
        ops: list[tuple[RecordKey, Value | None]] = [
            (k, None) for k in sorted(part.offset_keys.get(group, ()))
        ]
        if group in part.group_keys:
            ops.append((GroupKey(group), None))
        return self._write(group, ops)

    def store_group(self, group: str, value: StoredGroup) -> asyncio.Future[None]:
        return self._write(group, [(GroupKey(group), value)])

    def delete_topic(self, topic: str) -> asyncio.Future[None]:
        futs: list[asyncio.Future[None]] = []
        for part in list(self._parts.values()):
            doomed = sorted(k for keys in part.offset_keys.values() for k in keys if k.topic == topic)
            if doomed:
                futs.append(self._append(part, [(k, None) for k in doomed]))
        return _all(futs)

    def _serving(self, group: str) -> _Partition:
        part = self._of(group)
        if part is None:
            raise NotCoordinatorError(f"broker {self.broker_id} does not coordinate group {group!r}")
        return part

    def _write(self, group: str, items: list[tuple[RecordKey, Value | None]]) -> asyncio.Future[None]:
        return self._append(self._serving(group), items)

    def _append(self, part: _Partition, items: list[tuple[RecordKey, Value | None]]) -> asyncio.Future[None]:
        """Append now (call order is log order); the future completes once acknowledged."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        ops = encode_ops(items)
        if not ops:
            fut.set_result(None)
            return fut
        end = self._append_now(part, ops)
        for op in ops:
            part.apply_latest(op)
        w = _Write(ops)
        part.pending.append(w)
        self._spawn(self._await_acks(part, w, end, fut), f"groups-acks-{part.number}")
        self._maybe_compact(part)
        return fut

    def _append_now(self, part: _Partition, ops: list[Op]) -> int:
        """Append ``ops`` to the partition as its leader in its epoch; returns the end
        offset of the append. The group error Kafka gives when that is not possible."""
        replicas = self.replicas
        try:
            rep = replicas.writable_leader(OFFSETS_TOPIC, part.number, ACKS_ALL)
            if rep is not part.rep or rep.leader_epoch != part.epoch:
                raise NotCoordinatorError(f"{OFFSETS_TOPIC}-{part.number} changed leadership")
            info = rep.log.append(build_batches(ops, time.time_ns() // 1_000_000), leader_epoch=part.epoch)
        except StrataError as exc:
            raise replication_error(exc) from exc
        replicas.appended(rep)
        return info.last_offset + 1

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _await_acks(self, part: _Partition, w: _Write, end: int, fut: asyncio.Future[None]) -> None:
        timeout = self.config.offsets_commit_timeout_ms / 1000
        error: StrataError | None = None
        try:
            await self.replicas.wait_for_acks(part.rep, part.epoch, end, ACKS_ALL, timeout)
            w.ok = True
        except (StrataError, TimeoutError) as exc:
            error = replication_error(exc)
        finally:
            if not w.ok and error is None:  # cancelled: the broker is shutting down
                error = CoordinatorNotAvailableError("the group coordinator is shutting down")
            w.done = True
            part.drain()
            if not fut.done():
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)

    # --- compaction ------------------------------------------------------------------------------

    def _maybe_compact(self, part: _Partition) -> None:
        """Start compacting the partition when it holds more than
        ``max(offsets.topic.segment.bytes, 2 x live bytes)`` (the single-node rule)."""
        if part.compaction is not None or self._closed:
            return
        threshold = max(self.config.offsets_segment_bytes, 2 * part.live_bytes, part.retry_above)
        if part.rep.log.size <= threshold:
            return
        task = self._spawn(self._compact_logged(part), f"groups-compaction-{part.number}")
        part.compaction = task

        def finished(_: asyncio.Task[None]) -> None:
            part.compaction = None

        task.add_done_callback(finished)

    async def _compact_logged(self, part: _Partition) -> None:
        try:
            await self.compact(part)
            part.retry_above = 0
        except StrataError as exc:
            # The dump, whole or in part, stays in the log and is harmless (module docstring);
            # try again once another segment's worth was written.
            part.retry_above = part.rep.log.size + self.config.offsets_segment_bytes
            log.warning("%s-%d: compaction abandoned: %s", OFFSETS_TOPIC, part.number, exc)

    async def compact(self, part: _Partition) -> bool:
        """Compact one partition this broker leads (mechanism and failover safety: module
        docstring). False when leadership changed before the log start offset could move;
        a group error (as for commits) when the dump cannot be written or acknowledged."""
        lg = part.rep.log
        before = lg.size
        # From the roll to the append nothing awaits: no write can land inside the dump,
        # and every replica starts a segment at the dump's first offset (segment bases).
        if not self._leading(part.rep, part.epoch):
            return False
        try:
            lg.roll()
        except StrataError as exc:
            raise replication_error(exc) from exc
        start = lg.log_end_offset
        ops = part.dump()
        end = self._append_now(part, ops) if ops else start
        try:
            # A dump can be much bigger than a commit: more time than a commit gets.
            timeout = max(self.config.offsets_commit_timeout_ms / 1000, _COMPACTION_ACK_S)
            await self.replicas.wait_for_acks(part.rep, part.epoch, end, ACKS_ALL, timeout)
        except (StrataError, TimeoutError) as exc:
            raise replication_error(exc) from exc
        if not self._leading(part.rep, part.epoch):
            return False
        try:
            # The high watermark passed the dump: every replica that can lead holds it all.
            await asyncio.to_thread(lg.advance_log_start_offset, start)
            await asyncio.to_thread(lg.apply_retention)
        except StrataError as exc:
            raise replication_error(exc) from exc
        part.compactions += 1
        self.compactions += 1
        log.info(
            "%s-%d: compacted: %d live keys, %d -> %d bytes, log start offset %d",
            OFFSETS_TOPIC,
            part.number,
            len(ops),
            before,
            lg.size,
            start,
        )
        return True


def _all(futs: list[asyncio.Future[None]]) -> asyncio.Future[None]:
    """One future for several writes: done when all are, failing with the first error."""
    loop = asyncio.get_running_loop()
    out: asyncio.Future[None] = loop.create_future()
    if not futs:
        out.set_result(None)
        return out
    remaining = [len(futs)]

    def done(f: asyncio.Future[None]) -> None:
        remaining[0] -= 1
        if out.done():
            return
        if not f.cancelled() and f.exception() is not None:
            out.set_exception(f.exception())  # type: ignore[arg-type]
        elif remaining[0] == 0:
            out.set_result(None)

    for f in futs:
        f.add_done_callback(done)
    return out
