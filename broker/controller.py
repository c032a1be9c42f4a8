"""Replica placement, leader election, and the elected cluster controller.

The decisions are pure functions (``place_replicas``, ``elect_leader``): from a
partition's state, its replicas, the live brokers and the topic's config to a new
state, testable without etcd. ``Controller`` applies them.

Election of the controller: the key ``controller`` is created only if absent
(``create_revision == 0``), bound to the broker's registration lease, in the same
transaction that increments ``controller-epoch``. The winner holds a
``ControllerToken``; each of its writes also compares the controller key's
``create_revision``, so once its lease is gone (and with it the key) any write it still
attempts fails with ``StaleControllerEpochError`` instead of overwriting its successor.

What the controller does: whenever the set of live brokers changes (a broker's lease
expired or was revoked, so its key is gone; or a broker registered), every partition is
re-examined with ``elect_leader``. A partition whose leader died gets a new leader from
its ISR, with the leader epoch bumped; dead followers leave the ISR (which is never
emptied). With no live ISR member the partition goes offline (leader -1, epoch bumped,
which fences the old leader) unless the topic sets
``unclean.leader.election.enable=true``, in which case a live out-of-sync replica is
elected and becomes the whole ISR. Each change is a compare-and-swap on the partition
state's mod_revision.

Partition reassignments (``broker.replication.reassignment``) are completed here: once
every target replica of a moving partition is in the ISR, the controller writes the
target replica list and the new partition state (ISR ∩ target; a new leader with a
bumped epoch if the old one's replica leaves) in one transaction. An ISR member that is
no longer a replica is dropped like a dead one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Final

from broker.etcd_compaction import CompactionSchedule
from broker.metadata import (
    NO_LEADER,
    ClusterView,
    Conflict,
    ControllerRecord,
    ControllerToken,
    CorruptMetadataError,
    LiveBroker,
    MetadataClient,
    PartitionState,
    TopicAssignment,
    Versioned,
    initial_state,
)
from broker.metadata_store import Compare, Delete, Put
from broker.replication.reassignment import PartitionReplicas
from broker.replication.reassignment import complete as complete_reassignment
from hot.config import LogConfig
from hot.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    MetadataStoreError,
    StaleControllerEpochError,
)
from hot.tasks import cancel_and_wait
from hot.topics import MAX_PARTITIONS, validate_topic_name

# An idle controller's pass with nothing changed in the view, as a safety net (seconds).
# Its decisions depend on the view alone (live brokers included), and a pass that wrote
# something or failed is followed by another within ``poll_interval``: a safety net every
# 5 s walked 10,000 partitions for nothing (issue 35).
IDLE_PASS_S: Final = 60.0
# A topic whose partition states are still being written (a creation in steps) is left to
# its creator while the count of missing states moves; the controller fills in what is
# missing only after it stood still this long (the creator died), in batches.
REPAIR_GRACE_S: Final = 5.0
# Passes at most this often: a creation in steps or a failover changes the view once per
# batch, and each pass looks at every partition.
PASS_MIN_GAP_S: Final = 0.2
# Partitions looked at between two hand-backs of the event loop in a pass.
PASS_YIELD_EVERY: Final = 1024
# Election batches written concurrently by one pass.
ELECTION_BATCHES_IN_FLIGHT: Final = 8

log = logging.getLogger("strata.cluster.controller")

UNCLEAN_LEADER_ELECTION: Final = "unclean.leader.election.enable"
# Topic configs the cluster layer interprets itself; every other one is a log config.
CLUSTER_TOPIC_CONFIGS: Final = frozenset({UNCLEAN_LEADER_ELECTION})

# --- pure decisions ---------------------------------------------------------------------------


def unclean_election_enabled(configs: Mapping[str, str]) -> bool:
    raw = configs.get(UNCLEAN_LEADER_ELECTION)
    if raw is None:
        return False
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(f"{UNCLEAN_LEADER_ELECTION}: must be true or false, got {raw!r}")
    return text == "true"


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """InvalidConfigError for any unknown name or bad value."""
    unclean_election_enabled(configs)
    LogConfig.from_kafka({k: v for k, v in configs.items() if k not in CLUSTER_TOPIC_CONFIGS})


def machines_of(live: Mapping[int, LiveBroker]) -> dict[int, str]:
    """Each live broker's machine: the one its registration names (a process of a
    multi-process node, ``strata serve --processes``), else a machine of its own."""
    return {bid: lb.registration.machine or f"broker {bid}" for bid, lb in live.items()}


def check_machines(ids: Sequence[int], machines: Mapping[int, str], what: str) -> None:
    """``InvalidReplicaAssignmentError`` when two of ``ids`` are processes of one machine:
    they share its data dir (one partition directory), and one machine's failure would
    take both copies. Brokers missing from ``machines`` (not live) count as their own."""
    seen: dict[str, int] = {}
    for b in ids:
        m = machines.get(b, f"broker {b}")
        if m in seen:
            raise InvalidReplicaAssignmentError(
                f"{what} {list(ids)} places brokers {seen[m]} and {b} on one machine ({m}):"
                " replicas of a partition must be on different machines"
            )
        seen[m] = b


def place_replicas(
    partitions: int,
    replication_factor: int,
    brokers: Iterable[int],
    *,
    start_index: int = 0,
    machines: Mapping[int, str] | None = None,
) -> tuple[tuple[int, ...], ...]:
    """Round-robin replica placement over the live ``brokers``, never two replicas of a
    partition on one machine (``machines``: broker id -> machine, for the processes of
    multi-process nodes; absent ids, or no map, are machines of their own).

    Partition p's first replica (its preferred leader) is broker
    ``(start_index + p) mod n`` of the sorted ids, so leaders spread evenly (over every
    process of every machine). Followers are the brokers at distinct offsets 1..n-1 after
    it; the offsets shift each time the partitions wrap around the brokers, so followers
    of the same leader differ. With machines, a follower on a machine the partition
    already uses is skipped for the next broker in that order.
    """
    ids = sorted(set(brokers))
    n = len(ids)
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise InvalidPartitionsError(
            f"number of partitions must be in [1, {MAX_PARTITIONS}], got {partitions}"
        )
    if replication_factor < 1:
        raise InvalidReplicationFactorError(
            f"replication factor must be at least 1, got {replication_factor}"
        )
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {n} live broker(s)"
        )
    machine = {b: (machines or {}).get(b, f"broker {b}") for b in ids}
    count = len(set(machine.values()))
    if replication_factor > count:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {count} machine(s) of the"
            f" {n} live brokers (replicas of a partition are never placed on one machine)"
        )
    start = start_index % n
    out: list[tuple[int, ...]] = []
    for p in range(partitions):
        first = (start + p) % n
        shift = start + p // n  # grows at every wrap-around
        replicas = [ids[first]]
        if count == n:  # every broker its own machine: the plain round-robin
            for j in range(replication_factor - 1):
                replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
        else:
            used = {machine[ids[first]]}
            step = 0
            while len(replicas) < replication_factor:
                b = ids[(first + 1 + (shift + step) % (n - 1)) % n]
                step += 1
                if machine[b] not in used:
                    replicas.append(b)
                    used.add(machine[b])
        out.append(tuple(replicas))
    return tuple(out)


def elect_leader(
    state: PartitionState,
    replicas: Sequence[int],
    live: Collection[int],
    *,
    unclean: bool,
    controller_epoch: int,
) -> PartitionState | None:
    """The partition's next state given which brokers are alive, or None if unchanged.

    - leader alive (and in the ISR): keep it; only drop dead followers from the ISR;
    - otherwise the first live ISR member in replica order leads (clean election), and
      the ISR keeps its live members;
    - no live ISR member: with ``unclean`` the first live replica leads with ISR = [it]
      (it may lack acknowledged records); without it the partition is offline (leader
      -1) and the ISR is kept, so its last members can come back as clean leaders.

    Every leader change bumps ``leader_epoch``; the ISR is never emptied.
    """
    alive = set(live)
    live_isr = tuple(r for r in state.isr if r in alive)
    if state.leader != NO_LEADER and state.leader in alive and state.leader in state.isr:
        if live_isr == state.isr:
            return None
        return PartitionState(
            state.leader, state.leader_epoch, live_isr, controller_epoch, state.partition_epoch
        )
    ordered = [r for r in replicas if r in state.isr] + [r for r in state.isr if r not in replicas]
    candidates = [r for r in ordered if r in alive]
    epoch = state.leader_epoch + 1
    if candidates:
        return PartitionState(candidates[0], epoch, live_isr, controller_epoch, state.partition_epoch)
    if unclean:
        live_replicas = [r for r in replicas if r in alive]
        if live_replicas:
            leader = live_replicas[0]
            return PartitionState(leader, epoch, (leader,), controller_epoch, state.partition_epoch)
    if state.leader == NO_LEADER:
        return None  # offline already; nothing to fence
    return PartitionState(NO_LEADER, epoch, state.isr, controller_epoch, state.partition_epoch)


async def create_topic(
    client: MetadataClient,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str] | None = None,
) -> Versioned[TopicAssignment]:
    """Validate, place replicas round-robin across the brokers live now, and create the
    topic atomically. Any broker may call this (as in Kafka, the controller then watches
    the result); ``InvalidReplicationFactorError`` when there are too few live brokers."""
    validate_topic_name(name)
    cfg = dict(configs or {})
    validate_topic_configs(cfg)
    live = await client.live_brokers()
    start = zlib.crc32(name.encode()) % max(len(live), 1)
    replicas = place_replicas(
        partitions, replication_factor, live, start_index=start, machines=machines_of(live)
    )
    controller = client.view.controller
    epoch = controller.value.epoch if controller is not None else 0
    return await client.create_topic(name, replicas, cfg, controller_epoch=epoch)


# --- the controller ---------------------------------------------------------------------------


def _parse_epoch(raw: bytes) -> int:
    try:
        epoch = int(raw)
    except ValueError:
        epoch = -1
    if epoch < 0:
        raise CorruptMetadataError(f"controller epoch key holds {raw!r}")
    return epoch


def _controller_replaced(create_revision: int) -> Callable[[ClusterView], bool]:
    return lambda v: v.controller is None or v.controller.create_revision != create_revision


class Controller:
    """Campaigns for the controller role with the broker's registration lease and, while
    it holds it, keeps partition leadership in line with the live brokers.

    ``active`` is set while this broker is the controller; ``token`` then proves it.
    ``elections`` counts partition leader changes this controller has written.
    ``compaction_interval_s`` > 0: while it leads, it compacts the store's history
    (``broker.etcd_compaction``); ``compactions`` counts them.
    """

    def __init__(
        self, client: MetadataClient, *, poll_interval: float = 1.0, compaction_interval_s: float = 0.0
    ) -> None:
        self.client = client
        self.poll_interval = poll_interval
        self.compaction = CompactionSchedule(compaction_interval_s)
        self.compactions = 0
        self._compacting: asyncio.Task[None] | None = None
        self.active = asyncio.Event()
        self.token: ControllerToken | None = None
        self.elections = 0
        self.reassignments_completed = 0
        # Topics with partition states missing: ((topic revision, missing count), since).
        self._creating: dict[str, tuple[tuple[int, int], float]] = {}
        # Metric hooks (broker.cluster_metrics): ISR changes and leader elections written here.
        self.on_isr_change: Callable[[str, int, tuple[int, ...], tuple[int, ...]], None] = (
            lambda topic, partition, old, new: None
        )
        self.on_election: Callable[[str, int, bool], None] = lambda topic, partition, clean: None
        self._task: asyncio.Task[None] | None = None

    @property
    def is_active(self) -> bool:
        return self.active.is_set()

    def start(self) -> Controller:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="controller")
        return self

    async def stop(self, *, resign: bool = True) -> None:
        """Stop; with ``resign`` delete the controller key (only if still ours) so another
        broker takes over at once instead of after the lease TTL."""
        token = self.token  # read first: the task clears it as it ends
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        self.token = None
        self.active.clear()
        if resign and token is not None:
            key = self.client.layout.controller
            with contextlib.suppress(MetadataStoreError):
                await self.client.etcd.txn(
                    [Compare.create_revision(key, token.create_revision)], [Delete(key)]
                )

    async def _run(self) -> None:
        delay = 0.05
        while True:
            try:
                token = await self._campaign()
                delay = 0.05
                self.token = token
                self.active.set()
                log.info("broker %d is the controller (epoch %d)", token.broker_id, token.epoch)
                try:
                    await self._lead(token)
                finally:
                    self.token = None
                    self.active.clear()
                    if self._compacting is not None:
                        await cancel_and_wait(self._compacting)
                        self._compacting = None
                log.info("broker %d is no longer the controller (epoch %d)", token.broker_id, token.epoch)
            except (MetadataStoreError, StaleControllerEpochError) as exc:
                log.warning("controller: %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _campaign(self) -> ControllerToken:
        """Return once this broker has won an election (or finds it already holds the key)."""
        c = self.client
        key, epoch_key = c.layout.controller, c.layout.controller_epoch
        while True:
            seq = c.view.seq
            lease = c.lease_id
            if lease is None:  # re-registering after a lost lease
                await c.view.wait_changed(seq, self.poll_interval)
                continue
            current = await c.etcd.get(key)
            if current is None:
                epoch_kv = await c.etcd.get(epoch_key)
                last = _parse_epoch(epoch_kv.value) if epoch_kv is not None else 0
                record = ControllerRecord(c.broker_id, last + 1)
                res = await c.etcd.txn(
                    [
                        Compare.absent(key),
                        Compare.mod_revision(epoch_key, epoch_kv.mod_revision if epoch_kv else 0),
                    ],
                    [Put(key, record.to_json(), lease), Put(epoch_key, str(record.epoch).encode())],
                )
                if res.succeeded:
                    return ControllerToken(record.broker_id, record.epoch, res.revision)
                continue
            if current.lease == lease:
                held = ControllerRecord.from_json(current.value)
                return ControllerToken(held.broker_id, held.epoch, current.create_revision)
            # Someone else leads: wait until the watch shows the key gone or replaced, and
            # re-check etcd now and then in case the view lags.
            with contextlib.suppress(TimeoutError):
                await c.view.wait_for(
                    _controller_replaced(current.create_revision),
                    self.poll_interval,
                )

    async def _lead(self, token: ControllerToken) -> None:
        """Reconcile on every view change (and every ``poll_interval``) until deposed.

        Deposed means: the controller key is gone or another's (seen in the view and
        confirmed with etcd, or refused by a fenced write), or the registration lease
        the key was bound to is no longer this broker's. etcd being unreachable is not
        deposition: the key lives as long as the lease, so the controller retries.
        """
        c = self.client
        view = c.view
        won_with = c.lease_id
        settled_at: tuple[int, float] | None = None  # (seq, when) of a pass that wrote nothing
        last_pass: float | None = None
        while True:
            if c.lease_id != won_with:
                return
            controller = view.controller
            if controller is not None and controller.create_revision != token.create_revision:
                return
            self._compact_when_due(view.revision)
            seq = view.seq
            # Nothing changed since a pass that had nothing to write: no pass (an idle
            # controller does not walk every partition every second), but one every
            # IDLE_PASS_S as a safety net.
            if (
                settled_at is not None
                and settled_at[0] == seq
                and time.monotonic() - settled_at[1] < IDLE_PASS_S
            ):
                await view.wait_changed(seq, self.poll_interval)
                continue
            settled_at = None
            if last_pass is not None:
                # Coalesce a burst of view changes (a creation's batches) into fewer passes.
                await asyncio.sleep(max(0.0, last_pass + PASS_MIN_GAP_S - time.monotonic()))
            last_pass = time.monotonic()
            try:
                if controller is None and view.ready and view.revision > token.create_revision:
                    # Gone from the watched view: confirm with etcd before stepping down.
                    kv = await c.etcd.get(c.layout.controller)
                    if kv is None or kv.create_revision != token.create_revision:
                        return
                # Settled: nothing written and no repair waiting out its grace period.
                if await self.reconcile(token) == 0 and not self._creating:
                    settled_at = (seq, time.monotonic())
            except StaleControllerEpochError as exc:
                log.info("controller epoch %d deposed: %s", token.epoch, exc)
                return
            except MetadataStoreError as exc:
                log.warning("controller epoch %d: %s; retrying", token.epoch, exc)
            await view.wait_changed(seq, self.poll_interval)

    def _compact_when_due(self, revision: int) -> None:
        """Compact the store's history when due, beside the passes (a physical compaction
        of 100,000 keys must not hold up a failover's elections)."""
        if self._compacting is not None and not self._compacting.done():
            return
        target = self.compaction.due(revision, time.monotonic())
        if target is not None:
            loop = asyncio.get_running_loop()
            self._compacting = loop.create_task(self._compact(target), name="compaction")

    async def _compact(self, target: int) -> None:
        """One compaction; a failure waits for the next mark."""
        try:
            await self.client.etcd.compact(target)
        except MetadataStoreError as exc:
            if "compacted" not in str(exc):  # else: compacted further already (a predecessor)
                log.warning("controller: compacting the history below revision %d failed: %s", target, exc)
                return
        self.compaction.done(target)
        self.compactions += 1
        log.info("compacted the metadata store's history below revision %d", target)

    async def reconcile(self, token: ControllerToken) -> int:
        """One pass over every partition in the view; returns the number of states written.

        Elections are decided for every partition first, then written in batches, one
        etcd transaction per ``max_txn_ops - 1`` partitions (a broker's death changes
        thousands of states at once: one write and one view update per batch, not per
        partition); a batch that meets a conflict is written partition by partition."""
        c = self.client
        view = c.view
        live = view.live_broker_ids()
        written = 0
        decided: list[tuple[str, int, Versioned[PartitionState], PartitionState, tuple[int, ...], bool]] = []
        looked = 0
        for topic, assignment in list(view.topics.items()):
            try:
                unclean = unclean_election_enabled(assignment.value.configs)
            except InvalidConfigError as exc:
                log.warning("topic %s: %s; treating it as false", topic, exc)
                unclean = False
            reassigning = assignment.value.reassigning
            missing: list[tuple[int, PartitionState]] = []
            for p, replicas in enumerate(assignment.value.partitions):
                looked += 1
                if looked % PASS_YIELD_EVERY == 0:
                    # Hand the loop back (lease renewals, requests): a pass over 100,000
                    # partitions is seconds of work. Decisions stay safe: each write compares
                    # the state's revision it was decided on.
                    await asyncio.sleep(0)
                current = view.partitions.get((topic, p))
                if current is None:
                    missing.append((p, initial_state(replicas, token.epoch)))
                    continue
                if p in reassigning and await self._complete_reassignment(
                    token, topic, p, assignment, current, live
                ):
                    written += 1
                    break  # this topic's record changed: its other partitions next pass
                # An ISR member that is no longer a replica (a leader's ISR write racing a
                # completed reassignment) is dropped like a dead one, and never elected.
                eligible = live & set(replicas)
                new = elect_leader(
                    current.value, replicas, eligible, unclean=unclean, controller_epoch=token.epoch
                )
                if new is not None:
                    decided.append((topic, p, current, new, replicas, unclean))
            if missing:
                written += await self._repair(token, topic, assignment, missing)
            else:
                self._creating.pop(topic, None)
        for topic in [t for t in self._creating if t not in view.topics]:
            del self._creating[topic]  # deleted while being created
        # etcd bounds each of a transaction's lists (compares, puts) by --max-txn-ops, not
        # their sum: a state's compare and put, plus the controller's compare.
        step = max(1, c.max_txn_ops - 1)
        batches = [decided[i : i + step] for i in range(0, len(decided), step)]
        # Several batches in flight: each compares only its own partitions' revisions, so
        # they commute, and a failover's time is no longer its batch count times etcd's
        # commit latency (50,000 states: 394 transactions one after another took 14 s).
        sem = asyncio.Semaphore(ELECTION_BATCHES_IN_FLIGHT)

        async def write(
            batch: list[tuple[str, int, Versioned[PartitionState], PartitionState, tuple[int, ...], bool]],
        ) -> int:
            async with sem:
                if len(batch) > 1 and await c.update_partition_states(
                    [(t, p, cur, new) for t, p, cur, new, _, _ in batch], controller=token
                ):
                    for t, p, cur, new, _, _ in batch:
                        self._written(t, p, cur.value, new)
                    return len(batch)
                done = 0
                for t, p, cur, new, replicas, unclean in batch:
                    done += await self._elect_one(token, t, p, cur, new, replicas, unclean, live)
                return done

        results = await asyncio.gather(*(write(b) for b in batches), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r  # deposed, or etcd failing: the pass ends as a sequential one would
            written += r
        return written

    async def _repair(
        self,
        token: ControllerToken,
        topic: str,
        assignment: Versioned[TopicAssignment],
        missing: list[tuple[int, PartitionState]],
    ) -> int:
        """Fill in the partition states a creation left out, once the creator stopped:
        the count of missing states unchanged for ``REPAIR_GRACE_S`` (before, the creator's
        own batches would meet the controller's one-partition writes and both fall back to
        a transaction per partition). In batches; a batch that meets a conflict, one by one."""
        now = time.monotonic()
        seen = self._creating.get(topic)
        if seen is None or seen[0] != (assignment.mod_revision, len(missing)):
            self._creating[topic] = ((assignment.mod_revision, len(missing)), now)
            return 0
        if now - seen[1] < REPAIR_GRACE_S:
            return 0
        c = self.client
        written = 0
        step = max(1, c.max_txn_ops - 2)  # the compares: the topic, the controller, each state
        for i in range(0, len(missing), step):
            batch = missing[i : i + step]
            if len(batch) > 1 and await c.create_partition_states_if_absent(topic, batch, assignment, token):
                written += len(batch)
                continue
            for p, state in batch:
                if await c.create_partition_state_if_absent(topic, p, assignment, state, token):
                    written += 1
        if written:
            log.info("topic %s: filled in %d partition states its creation left out", topic, written)
        return written

    async def _elect_one(
        self,
        token: ControllerToken,
        topic: str,
        p: int,
        current: Versioned[PartitionState],
        new: PartitionState | None,
        replicas: tuple[int, ...],
        unclean: bool,
        live: frozenset[int],
    ) -> int:
        """One partition's election written alone, retried against fresher state on a
        conflict; 1 if written."""
        eligible = live & set(replicas)
        for _ in range(5):
            if new is None:
                return 0
            res = await self.client.update_partition_state(topic, p, current, new, controller=token)
            if res.ok:
                self._written(topic, p, current.value, new)
                return 1
            if res.conflict is Conflict.DELETED or res.state is None:
                return 0
            current = res.state
            new = elect_leader(
                current.value, replicas, eligible, unclean=unclean, controller_epoch=token.epoch
            )
        return 0

    def _written(self, topic: str, p: int, old: PartitionState, new: PartitionState) -> None:
        if new.isr != old.isr:
            self.on_isr_change(topic, p, old.isr, new.isr)
        if new.leader != old.leader:
            self.elections += 1
            if new.leader != NO_LEADER:  # going offline elects nobody
                self.on_election(topic, p, new.leader in old.isr)
            log.info(
                "%s-%d: leader %d -> %d (epoch %d), isr %s",
                topic,
                p,
                old.leader,
                new.leader,
                new.leader_epoch,
                list(new.isr),
            )

    async def _complete_reassignment(
        self,
        token: ControllerToken,
        topic: str,
        partition: int,
        assignment: Versioned[TopicAssignment],
        current: Versioned[PartitionState],
        live: frozenset[int],
    ) -> bool:
        """Switch ``topic``-``partition`` to its reassignment's target once every target
        replica is in sync (``broker.replication.reassignment.complete``): assignment and
        state in one transaction. True if written."""
        rs = assignment.value.replica_set(partition)
        s = current.value
        done = complete_reassignment(rs, leader=s.leader, leader_epoch=s.leader_epoch, isr=s.isr, live=live)
        if done is None:
            return False
        new_topic = assignment.value.with_replica_set(partition, PartitionReplicas(done.replicas))
        new_state = PartitionState(done.leader, done.leader_epoch, done.isr, token.epoch, s.partition_epoch)
        ok = await self.client.complete_reassignment(
            topic, partition, assignment, new_topic, current, new_state, token
        )
        if ok:
            self.reassignments_completed += 1
            if done.isr != s.isr:
                self.on_isr_change(topic, partition, s.isr, done.isr)
            if done.leader != s.leader and done.leader != NO_LEADER:
                self.on_election(topic, partition, done.leader in s.isr)
            log.info(
                "%s-%d: reassignment complete: replicas %s -> %s, leader %d (epoch %d), isr %s",
                topic,
                partition,
                list(rs.replicas),
                list(done.replicas),
                done.leader,
                done.leader_epoch,
                list(done.isr),
            )
        return ok
