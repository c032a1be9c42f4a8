"""CoordinatorLog: one coordinator's state on its replicated internal topic (mechanism:
the package docstring). Everything here runs on the broker's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, Generic, TypeVar

from broker.controller import create_topic, machines_of
from broker.coordinator_runtime.records import (
    build_batches,
    build_transactional_batch,
    partition_for,
    read_entries,
)
from broker.coordinator_runtime.shard import (
    CoordinatorShard,
    Producer,
    StateTopic,
    Write,
    coordinator_error,
    state_topic_configs,
)
from broker.partition_replica import PartitionReplica, Role
from broker.replica_manager import ReplicaManager
from broker.replication.leader_state import ACKS_ALL
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    StrataError,
    TopicExistsError,
)

OpT = TypeVar("OpT")
ShardT = TypeVar("ShardT", bound=CoordinatorShard[Any])

# Replica roles change after the view does: the watch wakes on either
# (ReplicaWakeups.wait_roles_changed), and looks again this often regardless (a lease's
# certainty can change with neither).
POLL_S: Final = 1.0
HW_POLL_S: Final = 0.02  # while a new leader waits for its high watermark
CREATE_VISIBLE_S: Final = 5.0
COMPACTION_ACK_S: Final = 60.0  # least wait for a compaction's dump to be replicated


class CoordinatorLog(Generic[OpT, ShardT]):
    """The partitions of ``topic`` this broker leads, each a loaded ``ShardT`` (made by
    ``new_shard(number, replica, epoch)``), and their writes and compactions.

    ``on_load(shard)`` runs once a newly led partition is loaded (before it serves),
    ``on_unload(shard)`` once it is lost (returns how many entities it dropped, for the
    log), ``on_watch()`` on every look at the leaders (view change or ``POLL_S``), before
    the partitions are synced. Logs go to ``logger`` (the coordinator's)."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        topic: StateTopic,
        new_shard: Callable[[int, PartitionReplica, int], ShardT],
        *,
        logger: logging.Logger,
        on_load: Callable[[ShardT], None] | None = None,
        on_unload: Callable[[ShardT], int] | None = None,
        on_watch: Callable[[], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.view = replicas.view
        self.topic = topic
        self._new_shard = new_shard
        self._log = logger
        self._on_load = on_load
        self._on_unload = on_unload
        self._on_watch = on_watch
        self._parts: dict[int, ShardT] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._dropping: set[int] = set()  # partitions whose compacted segments are being deleted
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._create_lock = asyncio.Lock()
        self._closed = False
        self.loads = 0  # partitions loaded since start (tests, logs)
        self.compactions = 0  # compactions done since start (tests, logs)

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start following the topic's partitions' leaders."""
        self._task = asyncio.get_running_loop().create_task(self._watch(), name=self.topic.naming.watch_task)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for t in [*([self._task] if self._task else []), *self._loading.values(), *self._background]:
            t.cancel()
        self._parts.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- the topic -----------------------------------------------------------------------------

    def partition_count(self) -> int | None:
        va = self.view.topics.get(self.topic.name)
        return va.value.partition_count if va is not None else None

    async def ensure_topic(self) -> None:
        """Create the topic if etcd has no such topic (any broker may; a concurrent
        creator wins and that is fine). CoordinatorNotAvailableError when it cannot be
        created now (no live broker, etcd unreachable)."""
        name = self.topic.name
        if name in self.view.topics:
            return
        async with self._create_lock:
            if name in self.view.topics:
                return
            # Machines, not processes: a node of several processes is one machine, and
            # replicas never share one (broker.controller.place_replicas).
            live = len(set(machines_of(self.view.brokers).values()))
            wanted = self.topic.replication_factor
            rf = min(wanted, live)
            if rf < 1:
                raise CoordinatorNotAvailableError(
                    f"no live broker to place the {self.topic.naming.records} topic on"
                )
            if rf < wanted:
                # A cluster of one (the embedded store) can never meet it: that is its
                # design, not a fault to warn about; a cluster short of live brokers is.
                self._log.log(
                    logging.INFO if self.replicas.config.etcd is None else logging.WARNING,
                    "creating %s with replication factor %d: %s is %d but only %d machines are live",
                    name,
                    rf,
                    self.topic.naming.replication_factor_setting,
                    wanted,
                    live,
                )
            n = self.topic.partitions
            configs = state_topic_configs(rf, self.topic.segment_bytes, self.topic.min_isr)
            try:
                created = await create_topic(self.replicas.client, name, n, rf, configs)
                self._log.info("created %s: %d partitions, replication factor %d", name, n, rf)
                with contextlib.suppress(TimeoutError):
                    await self.view.wait_for_revision(created.mod_revision, CREATE_VISIBLE_S)
            except TopicExistsError:
                pass
            except StrataError as exc:
                raise CoordinatorNotAvailableError(f"cannot create {name}: {exc}") from exc

    def leader_for(self, key: str) -> int:
        """The broker id etcd names leader of the key's partition (FindCoordinator);
        CoordinatorNotAvailableError when the topic is missing or the partition has no
        live leader, or when that is this broker and it cannot confirm its lease (cut off
        from etcd, its view may be stale: clients should ask another broker)."""
        node = self._etcd_leader(key)
        if node == self.broker_id and not self.replicas.lease_alive():
            raise CoordinatorNotAvailableError(f"broker {self.broker_id} cannot confirm its cluster lease")
        return node

    def _etcd_leader(self, key: str) -> int:
        name = self.topic.name
        n = self.partition_count()
        if n is None:
            raise CoordinatorNotAvailableError(f"{name} does not exist yet")
        p = partition_for(key, n)
        leader = self.view.leader_of(name, p)
        if leader is None:
            raise CoordinatorNotAvailableError(f"{name}-{p} has no leader")
        return leader.broker_id

    def coordinator_for(self, key: str) -> int:
        """This broker when it leads and has loaded the key's partition; otherwise the
        leader etcd names (NOT_COORDINATOR follows), COORDINATOR_LOAD_IN_PROGRESS when
        that is this broker but loading is not done, NOT_COORDINATOR when it is this
        broker but its lease is in doubt (another may lead already)."""
        if self.shard_for(key) is not None:
            return self.broker_id
        node = self._etcd_leader(key)
        if node == self.broker_id:
            if not self.replicas.lease_alive():
                raise NotCoordinatorError(f"broker {self.broker_id} cannot confirm its cluster lease")
            raise CoordinatorLoadInProgressError(
                f"loading the {self.topic.naming.entities} of {self.topic.name}"
            )
        return node

    # --- the partitions led here ---------------------------------------------------------------

    def shard_for(self, key: str) -> ShardT | None:
        """The loaded partition of ``key`` when this broker still leads it."""
        n = self.partition_count()
        return self.shard(partition_for(key, n)) if n is not None else None

    def shard(self, p: int) -> ShardT | None:
        """Partition ``p`` when loaded and still led here (unloaded at once otherwise)."""
        part = self._parts.get(p)
        if part is None:
            return None
        if not self._leading(part.rep, part.epoch):
            self._unload(p)
            return None
        return part

    def shards(self) -> list[ShardT]:
        """The loaded partitions, as last synced (leadership not checked again)."""
        return list(self._parts.values())

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

    async def _watch(self) -> None:
        view = self.view
        while True:
            seq, roles = view.seq, self.replicas.wakeups.roles_seq
            try:
                if self._on_watch is not None:
                    self._on_watch()
                self.sync()
            except Exception:
                self._log.exception("following the leaders of %s failed", self.topic.name)
            await self.replicas.wakeups.wait_roles_changed(seq, roles, POLL_S)

    def sync(self) -> None:
        """Unload partitions no longer led here; start loading newly led ones; delete the
        segments a compaction left below the log start offset."""
        for p in list(self._parts):
            self.shard(p)
        n = self.partition_count() or 0
        for p in range(n):
            self._drop_compacted(p)
            if p in self._parts or p in self._loading:
                continue
            rep = self.replicas.replicas.get((self.topic.name, p))
            if rep is not None and self._leading(rep, rep.leader_epoch):
                self._loading[p] = asyncio.get_running_loop().create_task(
                    self._load(p, rep, rep.leader_epoch), name=f"{self.topic.naming.task_prefix}-load-{p}"
                )

    def _drop_compacted(self, p: int) -> None:
        """Delete this replica's segments entirely below its log start offset. A follower
        moves its log start offset with the leader's (a compaction there) from fetch
        responses; the broker's retention pass would delete the segments only every
        retention check interval (5 minutes), and loading replays from the log start
        anyway, so this is about disk space: done here, at once."""
        name = self.topic.name
        rep = self.replicas.replicas.get((name, p))
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
                self._log.warning("%s-%d: cannot delete compacted segments: %s", name, p, exc)
            finally:
                self._dropping.discard(p)

        self._spawn(drop(), f"{self.topic.naming.task_prefix}-drop-compacted-{p}")

    async def _load(self, p: int, rep: PartitionReplica, epoch: int) -> None:
        name = self.topic.name
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
                await asyncio.sleep(HW_POLL_S)
            part = self._new_shard(p, rep, epoch)
            for entries in read_entries(lg, lg.log_start_offset, target, part.decode):
                part.replay_entries(entries)
                await asyncio.sleep(0)
                if not self._leading(rep, epoch):
                    return
            if not self._leading(rep, epoch):
                return
            self._parts[p] = part
            self.loads += 1
            if self._on_load is not None:
                self._on_load(part)
            self._log.info(
                "%s-%d: coordinator in epoch %d, loaded %d %s from offsets [%d, %d) in %.3f s",
                name,
                p,
                epoch,
                part.count(),
                self.topic.naming.entities,
                lg.log_start_offset,
                target,
                time.monotonic() - started,
            )
        except StrataError as exc:
            self._log.error("%s-%d: cannot load its %s: %s", name, p, self.topic.naming.entities, exc)
        finally:
            self._loading.pop(p, None)

    def _unload(self, p: int) -> None:
        part = self._parts.pop(p, None)
        if part is None:
            return
        count = self._on_unload(part) if self._on_unload is not None else 0
        self._log.info(
            "%s-%d: no longer coordinator (epoch %d), unloaded %d %s",
            self.topic.name,
            p,
            part.epoch,
            count,
            self.topic.naming.entities,
        )

    # --- writing -------------------------------------------------------------------------------

    def append(
        self, part: ShardT, ops: list[OpT], *, producer: Producer | None = None
    ) -> asyncio.Future[None]:
        """Append ``ops`` to the partition now (call order is log order) and apply them to
        its log-order state; the future completes once acknowledged (acks=all), after the
        durable state has them. The coordinator error Kafka gives, raised at once, when
        the append is not possible; through the future when it is not acknowledged.

        ``producer``: a transactional write (Kafka's scheduleTransactionalWriteOperation):
        one batch with the producer's id and epoch, base sequence -1, appended with origin
        COORDINATOR (a fenced epoch is INVALID_PRODUCER_EPOCH); its ops stay the
        transaction's until the producer's marker (``CoordinatorShard.apply_marker``)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if not ops:
            fut.set_result(None)
            return fut
        first, end = self._append_now(part, ops, producer)
        for i, op in enumerate(ops):
            part.apply_latest_at(op, first + i, producer)
        w = Write(ops, first_offset=first, end=end, producer=producer)
        part.pending.append(w)
        self._spawn(
            self._await_acks(part, w, end, fut), f"{self.topic.naming.task_prefix}-acks-{part.number}"
        )
        self._maybe_compact(part)
        return fut

    def _append_now(self, part: ShardT, ops: list[OpT], producer: Producer | None = None) -> tuple[int, int]:
        """Append ``ops`` to the partition as its leader in its epoch (in ``producer``'s
        transaction when given); returns the first offset and the end offset of the
        append. The coordinator error Kafka gives when that is not possible."""
        replicas = self.replicas
        name = self.topic.name
        try:
            rep = replicas.writable_leader(name, part.number, ACKS_ALL)
            if rep is not part.rep or rep.leader_epoch != part.epoch:
                raise NotCoordinatorError(f"{name}-{part.number} changed leadership")
            now_ms = time.time_ns() // 1_000_000
            records = (part.record(op) for op in ops)
            if producer is None:
                info = rep.log.append(build_batches(records, now_ms), leader_epoch=part.epoch)
            else:
                data = build_transactional_batch(records, now_ms, *producer)
                info = rep.log.append(data, leader_epoch=part.epoch, origin_coordinator=True)
        except StrataError as exc:
            raise coordinator_error(exc, self.topic.naming.records) from exc
        replicas.appended(rep)
        return info.first_offset, info.last_offset + 1

    def settle_acknowledged(self, part: ShardT) -> None:
        """Count as acknowledged every write of ``part`` the high watermark has passed,
        before its acknowledgement task ran, and apply them: a transaction marker that
        was acknowledged (after them) must find the durable state with them in it."""
        hw = part.rep.log.high_watermark
        for w in part.pending:
            if not w.done and 0 <= w.end <= hw:
                w.done = w.ok = True
        part.drain()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _await_acks(self, part: ShardT, w: Write[OpT], end: int, fut: asyncio.Future[None]) -> None:
        timeout = self.topic.commit_timeout_ms / 1000
        error: StrataError | None = None
        try:
            await self.replicas.wait_for_acks(part.rep, part.epoch, end, ACKS_ALL, timeout)
            w.ok = True
        except (StrataError, TimeoutError) as exc:
            error = coordinator_error(exc, self.topic.naming.records)
        finally:
            if not w.ok and error is None:  # cancelled: the broker is shutting down
                error = CoordinatorNotAvailableError(f"the {self.topic.naming.coordinator} is shutting down")
            w.done = True
            part.drain()
            if not fut.done():
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)

    # --- compaction ------------------------------------------------------------------------------

    def _maybe_compact(self, part: ShardT) -> None:
        """Start compacting the partition when it holds more than
        ``max(segment bytes, 2 x live bytes)`` (the single-node offsets log's rule)."""
        if part.compaction is not None or self._closed:
            return
        threshold = max(self.topic.segment_bytes, 2 * part.live_size(), part.retry_above)
        if part.rep.log.size <= threshold or not part.compactable():
            return
        task = self._spawn(
            self._compact_logged(part), f"{self.topic.naming.task_prefix}-compaction-{part.number}"
        )
        part.compaction = task

        def finished(_: asyncio.Task[None]) -> None:
            part.compaction = None

        task.add_done_callback(finished)

    async def _compact_logged(self, part: ShardT) -> None:
        try:
            await self.compact(part)
            part.retry_above = 0
        except StrataError as exc:
            # The dump, whole or in part, stays in the log and is harmless (package docstring);
            # try again once another segment's worth was written.
            part.retry_above = part.rep.log.size + self.topic.segment_bytes
            self._log.warning("%s-%d: compaction abandoned: %s", self.topic.name, part.number, exc)

    async def compact(self, part: ShardT) -> bool:
        """Compact one partition this broker leads (mechanism and failover safety: package
        docstring). False when leadership changed before the log start offset could move;
        a coordinator error (as for writes) when the dump cannot be written or acknowledged."""
        lg = part.rep.log
        before = lg.size
        records = self.topic.naming.records
        # From the roll to the append nothing awaits: no write can land inside the dump,
        # and every replica starts a segment at the dump's first offset (segment bases).
        if not self._leading(part.rep, part.epoch) or not part.compactable():
            return False
        try:
            lg.roll()
        except StrataError as exc:
            raise coordinator_error(exc, records) from exc
        start = end = lg.log_end_offset
        ops: list[OpT] = []
        for producer, chunk in part.dump_writes():
            if chunk:
                end = self._append_now(part, chunk, producer)[1]
                ops += chunk
        try:
            # A dump can be much bigger than a write: more time than a write gets.
            timeout = max(self.topic.commit_timeout_ms / 1000, COMPACTION_ACK_S)
            await self.replicas.wait_for_acks(part.rep, part.epoch, end, ACKS_ALL, timeout)
        except (StrataError, TimeoutError) as exc:
            raise coordinator_error(exc, records) from exc
        if not self._leading(part.rep, part.epoch):
            return False
        try:
            # The high watermark passed the dump: every replica that can lead holds it all.
            await asyncio.to_thread(lg.advance_log_start_offset, start)
            await asyncio.to_thread(lg.apply_retention)
        except StrataError as exc:
            raise coordinator_error(exc, records) from exc
        part.compactions += 1
        self.compactions += 1
        self._log.info(
            "%s-%d: compacted: %d live keys, %d -> %d bytes, log start offset %d",
            self.topic.name,
            part.number,
            len(ops),
            before,
            lg.size,
            start,
        )
        return True


def all_of(futs: list[asyncio.Future[None]]) -> asyncio.Future[None]:
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
