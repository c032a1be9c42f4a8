"""This broker's replicas: leader or follower of each partition, as etcd says, and the
leader's bookkeeping (high watermark, ISR changes, acks).

Everything here runs on the broker's event loop; ``Log`` calls are synchronous (page
cache) except the follower's flush, which the fetcher runs in a thread.

Roles follow the watched ``ClusterView``. For each partition with a replica here:

* the state names this broker leader: become leader in that epoch (Kafka's makeLeader):
  record the epoch in the log's leader-epoch cache at the log end, start a fresh
  ``LeaderState`` (HW = min over the ISR, caught-up rule, acks checks). A state written
  before this broker's current registration (``mod_revision`` below its broker epoch)
  names a previous incarnation: the broker first takes a new epoch by compare-and-swap,
  so nothing of the previous incarnation's epoch survives un-fenced;
* another broker leads: follow it (``broker.fetcher``), truncating by leader epoch
  first; a partition without leader (-1) is not fetched;
* the topic is gone, or this broker is no longer a replica: drop the replica.

The local topic registry mirrors etcd's topics that have a replica here (same topic id,
partition count and log configs, so admin changes made through etcd reach the local
logs); logs exist only for the partitions placed here (``hosts``, the log manager's
``hosted``). A topic deleted (or recreated) in etcd is deleted locally. A local topic
etcd never showed since this broker started is kept, with a warning: an etcd that lost
its data must not make every broker delete everything.

ISR changes (Kafka's AlterPartition, written by the leader): every
``replica.lag.time.max.ms`` / 2 the leader proposes to drop followers out of sync for
longer than that; a follower outside the ISR whose fetch reaches the high watermark and
this epoch's start is proposed for addition. Each proposal is written to etcd with a
compare on the state's revision and the leader epoch (``update_partition_state``); the
high watermark waits for the proposed ISR until the write is settled.

Leading needs a live registration lease: when this broker cannot be sure its lease is
alive (``LeaseKeeper.alive_until`` passed, or etcd said it is gone) it stops accepting
writes (NOT_LEADER_OR_FOLLOWER), since the controller may by then have elected another
leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from broker.cluster_config import ClusterConfig
from broker.fetcher import ReplicaFetcher
from broker.inter_broker import InterBrokerClient
from broker.isr_writer import IsrWriter
from broker.local_topics import LocalTopics
from broker.log_manager import ClusterLogManager
from broker.metadata import NO_LEADER, MetadataClient, PartitionState, TopicAssignment, Versioned
from broker.new_epochs import NewEpochs
from broker.partition_replica import PartitionReplica, Role
from broker.replica_wakeups import ReplicaWakeups
from broker.replication.leader_state import (
    ACKS_ALL,
    LeaderState,
    check_current_leader_epoch,
)
from hot import log_write
from hot.errors import (
    LogClosedError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderError,
    RequestTimedOutError,
    StrataError,
    UnknownTopicOrPartitionError,
)
from hot.log import Log
from hot.tasks import cancel_and_wait

# An idle broker's reconcile pass with nothing changed, as a safety net (seconds); sooner
# when the last pass left something to retry (a log it could not open, an epoch it could
# not take): a clean idle pass over 1,000 replicas every 5 s was most of an idle broker.
RECONCILE_IDLE_S = 60.0
RECONCILE_RETRY_S = 5.0
# Partitions reconciled between two hand-backs of the event loop (reconcile_yielding).
RECONCILE_CHUNK = 64

log = logging.getLogger("strata.cluster.replicas")

TopicPartition = tuple[str, int]


class ReplicaManager:
    """This broker's replicas (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        client: MetadataClient,
        manager: ClusterLogManager,
        config: ClusterConfig,
    ) -> None:
        self.broker_id = broker_id
        self.client = client
        self.view = client.view
        self.manager = manager
        self.config = config
        self.replicas: dict[TopicPartition, PartitionReplica] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        # How followers connect to leaders (broker.inter_broker); None: plaintext.
        self.security: InterBrokerClient | None = None
        self.shutting_down = False
        self._by_log: dict[int, PartitionReplica] = {}
        self._seen_topics: set[str] = set()  # in etcd at some point since start
        self._kept_unknown: set[str] = set()
        self._seq = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._reconciling = asyncio.Lock()
        self.retry_reconcile = False  # set by a failure a later pass should retry
        # A restarted leader's new epochs, written in batches (broker.new_epochs).
        self.new_epochs = NewEpochs(broker_id, client, self._spawn, self._retry_soon)
        # This leader's ISR changes, written in batches (broker.isr_writer).
        self.isr_writer = IsrWriter(self)
        # Parked replica fetches and role-change waiters (coordinators).
        self.wakeups = ReplicaWakeups(self.view)
        # Led partitions the ISR check looks at (issue 35): appended to, led anew, their
        # ISR or replicas changed, or a follower in the ISR still short of the log end at
        # the last check. A partition whose ISR followers are all at its log end cannot
        # shrink until an append moves that end (LeaderState.shrink_candidates), so an
        # idle partition costs the check nothing.
        self._isr_watch: set[PartitionReplica] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Metric hook (broker.cluster_metrics): (topic, partition, old ISR, new ISR) per ISR
        # change this leader wrote to etcd.
        self.on_isr_change: Callable[[str, int, tuple[int, ...], tuple[int, ...]], None] = (
            lambda topic, partition, old, new: None
        )
        manager.hosted = self.hosts
        self.local = LocalTopics(broker_id, self.view, manager, self._spawn, self._reconcile_built)

    def hosts(self, topic: str, partition: int) -> bool:
        """Whether the cluster metadata places a replica of the partition on this broker."""
        va = self.view.topics.get(topic)
        if va is None or not 0 <= partition < va.value.partition_count:
            return False
        return self.broker_id in va.value.partitions[partition]

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.manager.on_flushed = self._flushed_threadsafe
        # A burst of appends in one loop iteration wakes the flush thread once, after it.
        self.manager.defer_flush_wakes(self._loop.call_soon)
        # The loop's own appends: fdatasync off the GIL, the round reported on the loop.
        self.manager.flush_on_loop(self._loop, self._flushed_all)
        self._tasks = [
            self._loop.create_task(self._reconcile_loop(), name="replicas-reconcile"),
            self._loop.create_task(self._isr_loop(), name="replicas-isr"),
            self._loop.create_task(self._checkpoint_loop(), name="replicas-hw-checkpoint"),
        ]

    def begin_shutdown(self) -> None:
        """Stop leading: refuse new writes (waiting acks may still complete)."""
        self.shutting_down = True

    async def drain(self, timeout: float) -> None:
        """Give waiting acks=all requests up to ``timeout`` to complete (followers still fetch)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(r.ack_waiters or r.flush_waiters for r in self.replicas.values()):
                return
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self.shutting_down = True
        self.manager.on_flushed = None
        self.manager.defer_flush_wakes(None)
        self.manager.flush_on_loop(None, None)
        for t in [*self._tasks, *self._background]:
            with contextlib.suppress(Exception):
                await cancel_and_wait(t)
        self._tasks = []
        for f in list(self.fetchers.values()):
            await f.stop()
        self.fetchers.clear()
        for rep in self.replicas.values():
            self._fail_waiters(rep, NotLeaderError(f"{rep.name}: broker {self.broker_id} is shutting down"))
        self.wakeups.role_changed()

    def _retry_soon(self) -> None:
        self.retry_reconcile = True

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- leases ------------------------------------------------------------------------------

    def leads(self, topic: str, partition: int) -> bool:
        """Whether this broker has taken the partition's leadership (its replica's role)."""
        rep = self.replicas.get((topic, partition))
        return rep is not None and rep.role is Role.LEADER

    def lease_alive(self) -> bool:
        """Whether this broker's registration lease is certainly alive right now."""
        keeper = self.client.keeper
        if keeper is None or keeper.lost.is_set() or self.client.lease_id is None:
            return False
        return time.monotonic() < keeper.alive_until

    # --- reconciling with the view ------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        # On every view change; otherwise only when the lease's certainty changed (a
        # leader in doubt takes a new epoch once it is sure again, _apply) or after
        # RECONCILE_IDLE_S: an idle broker does not walk every replica every second.
        last: tuple[int, bool] | None = None
        since = 0.0
        while True:
            seq = self.view.seq
            state = (seq, self.lease_alive())
            retry = self.retry_reconcile or self.local.failed or self.local.creating
            idle_s = RECONCILE_RETRY_S if retry else RECONCILE_IDLE_S
            if state != last or time.monotonic() - since >= idle_s:
                last, since = state, time.monotonic()
                self.retry_reconcile = self.local.failed = False
                try:
                    self.local.create_missing()
                    await self.reconcile_yielding()
                except Exception:
                    self.retry_reconcile = True
                    log.exception("reconciling replicas with the cluster metadata failed")
            await self.view.wait_changed(seq, 1.0)

    async def _reconcile_built(self) -> None:
        if not self.shutting_down:
            await self.reconcile_yielding()

    async def reconcile_yielding(self) -> None:
        """Bring local topics and replica roles in line with the view, handing the event
        loop back every ``RECONCILE_CHUNK`` partitions:
        taking the roles of thousands of new replicas is seconds of work that must not hold
        up the loop's etcd lease renewals, heartbeats and requests (a broker whose loop
        stalls past the session timeout loses its registration). One at a time."""
        async with self._reconciling:
            for _ in self._reconcile_steps():
                await asyncio.sleep(0)

    def _reconcile_steps(self) -> Iterator[None]:
        if not self.view.ready:
            return
        me = self.broker_id
        wanted: dict[str, Versioned[TopicAssignment]] = {
            name: va for name, va in self.view.topics.items() if any(me in r for r in va.value.partitions)
        }
        self._seen_topics.update(self.view.topics)
        for info in self.manager.topics():
            va = wanted.get(info.name)
            if va is not None and info.topic_id == uuid.UUID(va.value.topic_id):
                continue
            if va is None and info.name not in self._seen_topics:
                # Never seen in etcd since this broker started: an etcd that lost its data,
                # or the wrong cluster name. Keep the data; an operator decides.
                if info.name not in self._kept_unknown:
                    self._kept_unknown.add(info.name)
                    log.warning("local topic %s is unknown to cluster etcd; keeping its data", info.name)
                continue
            self._drop_topic(info.name)
            log.info("deleting local replicas of topic %s (deleted, or recreated, in the cluster)", info.name)
            self.manager.delete_topic(info.name)
        seen = 0
        for name, va in wanted.items():
            if name in self.local.creating:
                continue  # being built in a thread (broker.local_topics)
            self.local.mirror(name, va.value)
            for p, replicas in enumerate(va.value.partitions):
                seen += 1
                if seen % RECONCILE_CHUNK == 0:
                    yield
                key = (name, p)
                if me not in replicas:
                    self._remove_replica(key)
                    continue
                vs = self.view.partitions.get(key)
                if vs is None:
                    continue  # state not written yet (multi-step creation)
                rep = self._replica(name, p)
                if rep is not None:
                    self._apply(rep, replicas, vs)

    def _replica(self, topic: str, partition: int) -> PartitionReplica | None:
        key = (topic, partition)
        try:
            lg = self.manager.ensure_log(topic, partition)
        except StrataError as exc:
            log.warning("%s-%d: no usable local log: %s", topic, partition, exc)
            self.retry_reconcile = True
            self._drop_replica(key)
            return None
        rep = self.replicas.get(key)
        if rep is not None and rep.log is lg:
            return rep
        if rep is not None:
            self._drop_replica(key)
        rep = PartitionReplica(topic, partition, lg)
        self.replicas[key] = rep
        self._by_log[id(lg)] = rep
        return rep

    def _drop_topic(self, topic: str) -> None:
        for key in [k for k in self.replicas if k[0] == topic]:
            self._drop_replica(key)

    def _remove_replica(self, key: TopicPartition) -> None:
        """This broker is not (or no longer) a replica of ``key``: stop, and delete the
        local log if it held one (reassigned away; or left over from before a crash).
        Empty logs of partitions never hosted here are the topic's and stay."""
        was_replica = key in self.replicas
        self._drop_replica(key)
        try:
            lg = self.manager.get_log(*key)
        except StrataError:
            lg = None
        if not was_replica and (lg is None or lg.log_end_offset == 0):
            return
        try:
            if self.manager.remove_partition(*key):
                log.info("%s-%d: deleted the local replica (no longer assigned here)", *key)
                self._spawn(self._checkpoint_now(), f"hw-checkpoint-{key[0]}-{key[1]}")
        except StrataError as exc:
            log.error("%s-%d: cannot delete the local replica: %s", key[0], key[1], exc)
            self.retry_reconcile = True

    async def _checkpoint_now(self) -> None:
        try:
            await asyncio.to_thread(self.manager.checkpoint_high_watermarks)
        except StrataError as exc:
            log.error("high-watermark checkpoint failed: %s", exc)

    def _drop_replica(self, key: TopicPartition) -> None:
        rep = self.replicas.pop(key, None)
        if rep is None:
            return
        self._by_log.pop(id(rep.log), None)
        self._stop_following(rep)
        rep.role = Role.NONE
        rep.leader = None
        self._follow_end(rep)
        self._fail_waiters(rep, NotLeaderError(f"{rep.name}: no longer a replica on broker {self.broker_id}"))
        self.wakeups.role_changed(rep)

    def _apply(self, rep: PartitionReplica, replicas: tuple[int, ...], vs: Versioned[PartitionState]) -> None:
        s = vs.value
        rep.replicas = replicas
        if s.leader == self.broker_id:
            if vs.mod_revision < self.client.broker_epoch or not self.lease_alive():
                # Written for a previous incarnation of this broker (or our lease is in
                # doubt): take a fresh epoch before leading.
                if rep.role is Role.LEADER and rep.leader_epoch == s.leader_epoch:
                    return  # ours: the lease check on writes covers the doubt
                self._resign(rep, s.leader_epoch)
                if self.lease_alive() and not rep.taking_epoch:
                    self.new_epochs.queue(rep, vs)  # written in batches (broker.new_epochs)
                return
            if rep.role is Role.LEADER and rep.leader_epoch == s.leader_epoch and rep.leader is not None:
                self._sync_leader(rep, replicas, vs)
            else:
                self._become_leader(rep, replicas, s)
        else:
            if rep.role is Role.FOLLOWER and rep.leader_id == s.leader and rep.leader_epoch == s.leader_epoch:
                return
            self._become_follower(rep, s.leader, s.leader_epoch)

    def _resign(self, rep: PartitionReplica, epoch: int) -> None:
        self._stop_following(rep)
        if rep.role is Role.LEADER:
            self._fail_waiters(
                rep, NotLeaderError(f"{rep.name}: leadership of epoch {epoch} is being renewed")
            )
        rep.role = Role.NONE
        rep.leader = None
        self._follow_end(rep)
        rep.leader_id = NO_LEADER
        rep.leader_epoch = epoch
        self.wakeups.role_changed(rep)

    def _become_leader(self, rep: PartitionReplica, replicas: tuple[int, ...], s: PartitionState) -> None:
        self._stop_following(rep)
        lg = rep.log
        try:
            lg.assign_leader_epoch(s.leader_epoch)
        except StrataError as exc:
            log.error("%s: cannot lead in epoch %d: %s", rep.name, s.leader_epoch, exc)
            self.retry_reconcile = True
            self._resign(rep, s.leader_epoch)
            return
        rep.leader = LeaderState(
            leader_id=self.broker_id,
            leader_epoch=s.leader_epoch,
            replicas=replicas,
            isr=tuple(r for r in s.isr if r in replicas),
            leader_epoch_start_offset=lg.log_end_offset,
            high_watermark=lg.high_watermark,
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
            min_insync_replicas=lg.config.min_insync_replicas,
            is_eligible=self._eligible,
        )
        rep.role = Role.LEADER
        rep.leader_id = self.broker_id
        rep.leader_epoch = s.leader_epoch
        rep.isr_writing = False
        rep.roll_before_append = lg.config.remote_storage_enable
        self._isr_watch.add(rep)  # its followers have yet to fetch in this epoch
        log.info(
            "%s: leader in epoch %d (isr %s, log end %d, hw %d)",
            rep.name,
            s.leader_epoch,
            list(s.isr),
            lg.log_end_offset,
            lg.high_watermark,
        )
        self.wakeups.role_changed(rep)
        self.maybe_advance_hw(rep)
        self._follow_end(rep)

    def _eligible(self, broker: int) -> bool:
        return broker in self.view.brokers

    def _sync_leader(
        self, rep: PartitionReplica, replicas: tuple[int, ...], vs: Versioned[PartitionState]
    ) -> None:
        leader = rep.leader
        assert leader is not None
        s = vs.value
        if replicas != leader.replicas:
            leader.update_replicas(replicas)
            self._follow_end(rep)
            self._isr_watch.add(rep)
        # A replica reassigned away leaves the ISR with it (the controller removes it
        # from etcd's ISR too, should a racing ISR write have put it back).
        isr = tuple(r for r in s.isr if r in replicas)
        if (
            leader.pending_isr is None
            and frozenset(isr) != leader.isr
            and vs.mod_revision >= rep.isr_revision
        ):
            # Changed by the controller (a dead follower removed) within our epoch. A view
            # older than our own last ISR write must not undo it: an expansion undone
            # would let the HW pass records an ISR member in etcd lacks.
            leader.commit_isr(isr)
            self._isr_watch.add(rep)
            self.maybe_advance_hw(rep)
        min_isr = rep.log.config.min_insync_replicas
        if leader.min_insync_replicas != min_isr:
            leader.min_insync_replicas = min_isr

    def _become_follower(self, rep: PartitionReplica, leader_id: int, epoch: int) -> None:
        was_leader = rep.role is Role.LEADER
        self._stop_following(rep)
        if was_leader:
            self._fail_waiters(rep, NotLeaderError(f"{rep.name}: leadership moved to broker {leader_id}"))
        rep.leader = None
        rep.role = Role.FOLLOWER if leader_id != NO_LEADER else Role.NONE
        self._follow_end(rep)
        rep.leader_id = leader_id
        rep.leader_epoch = epoch
        self.wakeups.role_changed(rep)
        if leader_id == NO_LEADER:
            log.info("%s: offline (no leader) in epoch %d", rep.name, epoch)
            return
        log.info("%s: following broker %d in epoch %d", rep.name, leader_id, epoch)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(self, leader_id)
        fetcher.add(rep, epoch)

    def _stop_following(self, rep: PartitionReplica) -> None:
        if rep.role is not Role.FOLLOWER:
            return
        fetcher = self.fetchers.get(rep.leader_id)
        if fetcher is not None:
            fetcher.remove(rep)
            if fetcher.idle:
                self.fetchers.pop(rep.leader_id, None)
                self._spawn(fetcher.stop(), f"stop-fetcher-{rep.leader_id}")

    def following(self, rep: PartitionReplica, leader_id: int, epoch: int) -> bool:
        """Whether ``rep`` still follows ``leader_id`` in ``epoch`` (checked by fetchers
        after every await)."""
        return (
            self.replicas.get((rep.topic, rep.partition)) is rep
            and rep.role is Role.FOLLOWER
            and rep.leader_id == leader_id
            and rep.leader_epoch == epoch
        )

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        """Where followers reach ``broker_id`` (its inter-broker listener), if registered."""
        live = self.view.brokers.get(broker_id)
        if live is None:
            return None
        return live.registration.replica_address

    # --- leader side: requests ------------------------------------------------------------------

    def leader_replica(self, topic: str, partition: int, current_leader_epoch: int = -1) -> PartitionReplica:
        """The replica if this broker leads the partition now; otherwise the error a
        client must see (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
        FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a stale / newer epoch)."""
        rep = self.replicas.get((topic, partition))
        if rep is None:
            if topic not in self.view.topics:
                raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
            va = self.view.topics[topic].value
            if not 0 <= partition < va.partition_count:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
            raise NotLeaderError(f"broker {self.broker_id} has no replica of {topic}-{partition}")
        # Epoch first, as Kafka does: a client with stale metadata learns it is stale.
        if rep.leader_epoch >= 0:
            check_current_leader_epoch(current_leader_epoch, rep.leader_epoch)
        if rep.role is not Role.LEADER or rep.leader is None:
            raise NotLeaderError(f"broker {self.broker_id} is not the leader of {rep.name}")
        return rep

    def writable_leader(self, topic: str, partition: int, acks: int) -> PartitionReplica:
        """``leader_replica`` for a produce: also refuses while shutting down or when the
        lease is in doubt, and checks min.insync.replicas for acks=all."""
        rep = self.leader_replica(topic, partition)
        if self.shutting_down:
            raise NotLeaderError(f"broker {self.broker_id} is shutting down")
        if not self.lease_alive():
            raise NotLeaderError(
                f"broker {self.broker_id} cannot confirm its cluster lease; refusing writes to {rep.name}"
            )
        assert rep.leader is not None
        rep.leader.check_before_append(acks)
        return rep

    def appended(self, rep: PartitionReplica) -> None:
        """After a leader append: wake parked follower fetches; in interval mode the HW
        may move at once (an ISR of one)."""
        lg = rep.log
        if lg.hw_follows_end and not lg.config.fsync_mode:
            # Led alone (``_follow_end``): the append moved the HW to the log end in its own
            # lock section (hot.log_write) and there is no follower to wake or walk for.
            leader = rep.leader
            if leader is not None:
                leader.follow_high_watermark(lg.high_watermark)
                if rep.ack_waiters:
                    self._complete_ack_waiters(rep)
            return
        self.wakeups.appended(rep)
        leader = rep.leader
        if leader is not None:
            self._isr_watch.add(rep)
            for b, offset in leader.end_moved(lg.log_end_offset):
                # A follower last recorded at the old end long ago: when its session last
                # stated that offset (an idle partition's fetches are not recorded).
                at = self.wakeups.stated_at(b, (rep.topic, rep.partition), offset, rep.leader_epoch)
                if at is not None:
                    leader.restate(b, offset, at)
        if not lg.config.fsync_mode:
            self.maybe_advance_hw(rep)

    async def wait_for_acks(
        self, rep: PartitionReplica, epoch: int, required: int, acks: int, timeout: float
    ) -> None:
        """Until the append ending before ``required`` is acknowledged per ``acks``:
        acks=all once the high watermark passes it (NotEnoughReplicasAfterAppendError
        when the ISR shrank below min.insync.replicas meanwhile), acks=1 once the leader
        has it (flushed, in fsync mode). TimeoutError after ``timeout``; NotLeaderError if
        leadership moves first."""
        moved = rep.role is not Role.LEADER or rep.leader_epoch != epoch or rep.leader is None
        if moved and acks == ACKS_ALL:
            # Even a high watermark past the offset proves nothing now: as a follower this
            # replica may have truncated the record and taken another at the same offset.
            raise NotLeaderError(f"{rep.name}: leadership moved while the append waited")
        if acks != ACKS_ALL and not rep.log.config.fsync_mode:
            return  # acks=1 in interval mode: the append itself was the acknowledgement
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if acks == ACKS_ALL:
            heapq.heappush(rep.ack_waiters, (required, next(self._seq), fut))
            self._complete_ack_waiters(rep)
        else:
            heapq.heappush(rep.flush_waiters, (required, next(self._seq), fut))
            self._complete_flush_waiters(rep)
        if fut.done():
            fut.result()
            return
        # A timer on the future itself, not asyncio.wait_for: that wraps the future in a
        # second one with its own callbacks (~8 µs of a fsync-mode produce at depth 32).
        expiry = loop.call_later(timeout, _expire, fut)
        try:
            await fut
        finally:
            expiry.cancel()

    def ack_round(
        self, rep: PartitionReplica, epoch: int, required: int, acks: int, timeout: float
    ) -> asyncio.Future[None] | None:
        """``wait_for_acks`` for the Produce fast path (api.handlers.produce_fast): None
        when the append ending before ``required`` is acknowledged already (raising what
        ``wait_for_acks`` would), else a future that completes (or fails) when it is.

        The future is shared: every request of one event-loop iteration that waits on this
        replica with the same acks, epoch and timeout gets the same one, its threshold
        raised to the last append's end (appends only move forward, and the future is the
        last pushed waiter, a leaf of the heap, so raising its key keeps the heap). One
        future, one timer and one completion per flush round instead of one per request;
        the group committer covers a burst handled in one iteration in one flush
        (``hot.flush.GroupCommitter.defer_wakes``), so sharing delays nobody beyond the
        flush that covers the iteration's last append. The round is sealed at the end of
        the iteration (``call_soon``), so a stream of requests cannot keep raising it."""
        moved = rep.role is not Role.LEADER or rep.leader_epoch != epoch or rep.leader is None
        if moved and acks == ACKS_ALL:
            raise NotLeaderError(f"{rep.name}: leadership moved while the append waited")
        if acks == ACKS_ALL:
            leader = rep.leader
            assert leader is not None
            if rep.log.high_watermark >= required:
                leader.acks_all_complete(required)  # NotEnoughReplicasAfterAppendError
                return None
            heap = rep.ack_waiters
            rnd = rep.ack_round
        else:
            if not rep.log.config.fsync_mode or rep.log.recovery_point >= required:
                return None
            heap = rep.flush_waiters
            rnd = rep.flush_round
        if rnd is not None and heap and heap[-1][2] is rnd[0] and rnd[1] == epoch and rnd[2] == timeout:
            last = heap[-1]
            if required > last[0]:
                heap[-1] = (required, last[1], last[2])
            return rnd[0]
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        heapq.heappush(heap, (required, next(self._seq), fut))
        expiry = loop.call_later(timeout, _expire, fut)
        fut.add_done_callback(lambda _: expiry.cancel())
        opened = (fut, epoch, timeout)
        if acks == ACKS_ALL:
            rep.ack_round = opened
        else:
            rep.flush_round = opened
        loop.call_soon(_seal_round, rep, fut)
        return fut

    def _fail_waiters(self, rep: PartitionReplica, exc: StrataError) -> None:
        for heap in (rep.ack_waiters, rep.flush_waiters):
            waiters = list(heap)
            heap.clear()
            for _, _, fut in waiters:
                if not fut.done():
                    fut.set_exception(exc)
                    fut.exception()  # the waiter may have timed out: never "not retrieved"

    def _complete_ack_waiters(self, rep: PartitionReplica) -> None:
        leader = rep.leader
        if leader is None:
            return
        hw = rep.log.high_watermark
        heap = rep.ack_waiters
        while heap and heap[0][0] <= hw:
            required, _, fut = heapq.heappop(heap)
            if fut.done():
                continue
            try:
                leader.acks_all_complete(required)
            except NotEnoughReplicasAfterAppendError as exc:
                fut.set_exception(exc)
                continue
            fut.set_result(None)

    def _complete_flush_waiters(self, rep: PartitionReplica) -> None:
        rp = rep.log.recovery_point
        heap = rep.flush_waiters
        while heap and heap[0][0] <= rp:
            _, _, fut = heapq.heappop(heap)
            if not fut.done():
                fut.set_result(None)

    def maybe_advance_hw(self, rep: PartitionReplica) -> None:
        leader = rep.leader
        if leader is None or rep.role is not Role.LEADER:
            return
        new = leader.maybe_increment_high_watermark(rep.leader_end_for_hw())
        if new is not None:
            try:
                rep.log.set_high_watermark(new)
            except StrataError as exc:
                log.error("%s: cannot advance the high watermark: %s", rep.name, exc)
                self._fail_waiters(rep, exc)
                return
            self.wakeups.mark(rep)  # the followers hear of it in their next fetch
        self._complete_ack_waiters(rep)

    def _follow_end(self, rep: PartitionReplica) -> None:
        """Let the log's appends move its HW to the log end (hot.log_write.follow_log_end)
        while this broker leads the partition with no follower: the log end is then the
        minimum over the ISR and no follower about to join can hold the HW (issue 34).
        Called wherever the role or the replica set changes."""
        leader = rep.leader
        alone = rep.role is Role.LEADER and leader is not None and len(leader.replicas) == 1
        if rep.log.hw_follows_end != alone:
            log_write.follow_log_end(rep.log, alone)
            if alone:
                self.maybe_advance_hw(rep)  # the leader's own HW follows the log's
            else:
                self.wakeups.mark(rep)

    def _flushed_threadsafe(self, logs: list[Log]) -> None:
        """On the committer's thread after a round of flushes: one wake-up of the loop for
        all of them (issue 34 §2: one hand-off per flush round, not one per log)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._flushed_all, logs)

    def _flushed_all(self, logs: list[Log]) -> None:
        for lg in logs:
            self._flushed(lg)

    def _flushed(self, lg: Log) -> None:
        rep = self._by_log.get(id(lg))
        if rep is None or rep.log is not lg:
            return
        if not lg.is_online:
            err = lg.offline_error
            self._fail_waiters(rep, err if err is not None else LogClosedError(f"log {lg.name} is closed"))
            return
        self._complete_flush_waiters(rep)
        self.maybe_advance_hw(rep)

    # --- leader side: follower fetches ---------------------------------------------------------------

    def follower_fetch(
        self, rep: PartitionReplica, follower_id: int, fetch_offset: int, follower_log_start: int
    ) -> None:
        """Record a follower's fetch (its log end), then move the HW and propose adding
        it to the ISR if it caught up. NotLeaderError for a broker that is not a replica."""
        leader = rep.leader
        assert leader is not None
        if not leader.record_fetch(
            follower_id, fetch_offset, rep.log.log_end_offset, follower_log_start_offset=follower_log_start
        ):
            raise NotLeaderError(f"broker {follower_id} is not a follower of {rep.name}")
        self.maybe_advance_hw(rep)
        if rep.low_watermark_waiters:
            waiters, rep.low_watermark_waiters = rep.low_watermark_waiters, set()
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
        if not rep.isr_writing and leader.pending_isr is None and leader.can_join_isr(follower_id):
            self._propose_isr(rep, leader.isr | {follower_id}, f"broker {follower_id} caught up")

    def low_watermark(self, rep: PartitionReplica) -> int:
        """The lowest log start offset of the partition's leader (this broker) and its live
        followers, as each last reported it in a Fetch (Kafka's lowWatermarkIfLeader); -1
        while a live follower has not fetched yet."""
        leader = rep.leader
        if rep.role is not Role.LEADER or leader is None:
            raise NotLeaderError(f"broker {self.broker_id} no longer leads {rep.name}")
        low = rep.log.log_start_offset
        for broker, state in leader.followers().items():
            if broker in self.view.brokers and state.log_start_offset < low:
                low = state.log_start_offset
        return low

    async def wait_for_low_watermark(
        self, rep: PartitionReplica, epoch: int, offset: int, timeout: float
    ) -> int:
        """Until every live replica's log start offset reached ``offset`` (DeleteRecords'
        purgatory); returns the low watermark. RequestTimedOutError after ``timeout``,
        NotLeaderError if leadership moves first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if rep.leader_epoch != epoch:
                raise NotLeaderError(f"{rep.name}: leadership moved while records were deleted")
            low = self.low_watermark(rep)
            if low >= offset:
                return low
            left = deadline - loop.time()
            if left <= 0:
                raise RequestTimedOutError(
                    f"{rep.name}: the replicas' log start offsets did not reach {offset} in time (low {low})"
                )
            fut: asyncio.Future[None] = loop.create_future()
            rep.low_watermark_waiters.add(fut)
            self.wakeups.mark(rep)  # the followers' next fetches carry the new log start
            # A follower that stopped fetching wakes nobody: look again at least every second.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(fut, min(left, 1.0))
            rep.low_watermark_waiters.discard(fut)

    # --- ISR changes ---------------------------------------------------------------------------------

    async def _isr_loop(self) -> None:
        # Kafka's isr-expiration period: half of replica.lag.time.max.ms (a 5 s cap walked
        # every led partition three times as often for nothing, issue 35).
        period = max(self.config.replica_lag_time_max_ms / 2000.0, 0.05)
        while True:
            await asyncio.sleep(period)
            self.check_isr()

    def check_isr(self) -> None:
        """Kafka's ISR expiry check over the watched partitions (``_isr_watch``): propose
        dropping the ISR followers out of sync for longer than replica.lag.time.max.ms.
        A partition leaves the watch once every follower of its maximal ISR is at its
        log end (in sync until the next append, which watches it again)."""
        watch, self._isr_watch = self._isr_watch, set()
        for rep in watch:
            leader = rep.leader
            if rep.role is not Role.LEADER or leader is None:
                continue
            if rep.isr_writing:
                self._isr_watch.add(rep)  # its write's outcome decides: look again
                continue
            try:
                end = rep.log.log_end_offset
                out = leader.shrink_candidates(end)
            except StrataError:
                self._isr_watch.add(rep)
                continue
            if out:
                self._propose_isr(rep, leader.isr - out, f"out of sync: {sorted(out)}")
            if rep.isr_writing or not leader.at_end(end):
                self._isr_watch.add(rep)

    def _propose_isr(self, rep: PartitionReplica, isr: frozenset[int], why: str) -> None:
        leader = rep.leader
        assert leader is not None
        if not self.lease_alive():
            return
        leader.propose_isr(isr)
        rep.isr_writing = True
        # Watched until the write's outcome is known (check_isr keeps a writing partition),
        # then looked at once more.
        self._isr_watch.add(rep)
        self.isr_writer.propose(rep, leader, isr, why)

    # --- HW checkpoint -------------------------------------------------------------------------------

    async def _checkpoint_loop(self) -> None:
        period = self.config.hw_checkpoint_interval_ms / 1000.0
        while True:
            await asyncio.sleep(period)
            try:
                await asyncio.to_thread(self.manager.checkpoint_high_watermarks, if_changed=True)
            except StrataError as exc:
                log.error("high-watermark checkpoint failed: %s", exc)


def _seal_round(rep: PartitionReplica, fut: asyncio.Future[None]) -> None:
    """The end of the loop iteration that opened ``fut`` (``ack_round``): later requests
    get a round of their own."""
    if rep.ack_round is not None and rep.ack_round[0] is fut:
        rep.ack_round = None
    if rep.flush_round is not None and rep.flush_round[0] is fut:
        rep.flush_round = None


def _expire(fut: asyncio.Future[None]) -> None:
    """``wait_for_acks``'s timeout: the waiting append gets TimeoutError."""
    if not fut.done():
        fut.set_exception(TimeoutError())
