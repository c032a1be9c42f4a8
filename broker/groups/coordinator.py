"""Kafka's classic group coordinator (the pre-KIP-848 protocol every client speaks).

``GroupCoordinator`` is the façade the Kafka handlers, REST, metrics and cluster mode
call (as Kafka's GroupCoordinator is over its GroupMetadataManager and
OffsetMetadataManager). It owns the lifecycle, the routing checks and the timer task,
and hands the work to two parts:

* ``broker.groups.membership.GroupMembership``: the state machine of every group (JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup, rebalances, session timeouts, static members); the
  rules are in that module's docstring. ``broker.groups.group`` holds a group's state.
* ``broker.groups.offset_manager.OffsetManager``: committed offsets (OffsetCommit,
  OffsetFetch, OffsetDelete), loading the groups the offsets log holds, offset expiry,
  and every write to the ``OffsetStore`` (broker.groups.offsets), with its crash behaviour.

Everything runs on one asyncio loop: no locks. Timers (session expiry, join and sync
deadlines, offset expiry) sit in one heap (broker.groups.timers) driven by an injectable
monotonic clock; ``start`` runs a task that fires them on time, and tests call ``tick()``
after moving a fake clock.

The seams for cluster mode: a ``CoordinatorLocator`` says which node coordinates a group
(NOT_COORDINATOR when it is not this one) and the ``OffsetStore`` says where offsets
live; opening it happens in ``start`` (COORDINATOR_LOAD_IN_PROGRESS meanwhile). In
cluster mode (broker.groups.replicated_offsets) both are the replicated offsets topic's store, which hands
groups over with ``load_groups`` when this broker takes the lead of their partition and
takes them back with ``unload_groups`` when it loses it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from broker.groups.classic_bridge import (
    ClassicBridge,
    downgradable,
    from_classic,
    to_classic,
    upgrade_refusal,
)
from broker.groups.config import GroupConfig
from broker.groups.consumer_group import (
    ConsumerGroups,
    ConsumerGroupView,
    HeartbeatCall,
    HeartbeatResult,
    TopicsImage,
    validate,
)
from broker.groups.consumer_records import (
    ConsumerKey,
    ConsumerValue,
    encode_consumer_value,
    group_records,
    record_diff,
    restore_group,
)
from broker.groups.group import Dead, Empty, Group
from broker.groups.membership import GroupMembership
from broker.groups.offset_manager import OffsetManager, PartitionCheck
from broker.groups.offsets import ConsumerGroupStore, OffsetStore
from broker.groups.timers import Clock, SystemClock, Timers
from broker.groups.types import (
    GroupDescription,
    GroupListing,
    GroupState,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveResult,
    MemberDescription,
    MemberIdentity,
    OffsetAndMetadata,
    OffsetCommitRequest,
    SyncGroupRequest,
    SyncGroupResult,
    TopicPartition,
    TxnOffsetCommitRequest,
)
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotLeaderError,
    RebalanceInProgressError,
    StrataError,
    UnknownTopicOrPartitionError,
)
from hot.tasks import cancel_and_wait

if TYPE_CHECKING:
    from hot.manager import LogManager

__all__ = [
    "Clock",
    "CoordinatorLocator",
    "GroupCoordinator",
    "LocalLocator",
    "PartitionCheck",
    "SystemClock",
    "manager_partition_check",
]

logger = logging.getLogger("strata.groups")


class CoordinatorLocator(Protocol):
    def coordinator_for(self, group_id: str) -> int:
        """Node id of the broker coordinating ``group_id``."""
        ...


class LocalLocator:
    """Single node: this node coordinates every group."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id

    def coordinator_for(self, group_id: str) -> int:
        return self.node_id


def manager_partition_check(manager: LogManager) -> PartitionCheck:
    """A PartitionCheck over the topics of a LogManager."""

    def exists(topic: str, partition: int) -> bool:
        try:
            return 0 <= partition < manager.topic(topic).partitions
        except UnknownTopicOrPartitionError:
            return False

    return exists


class GroupCoordinator:
    """Consumer groups of one node (behaviour: module docstring).

    Public API (all on the event loop):

    * lifecycle: ``await start()``, ``await close()``, ``tick()`` (fire due timers by hand)
    * protocol: ``join_group``, ``sync_group``, ``heartbeat``, ``leave_group``,
      ``commit_offsets``, ``committed_offsets``, ``delete_groups``, ``delete_offsets``,
      ``find_coordinator``
    * reading: ``list_groups``, ``describe_group``, ``committed_offsets``
    * housekeeping: ``expire_offsets``, ``on_topic_deleted``; cluster mode:
      ``load_groups``, ``unload_groups``

    Request-level failures raise hot.errors group errors (mapped to Kafka codes by
    ERROR_TABLE); per-partition / per-member / per-group outcomes come back as values.
    """

    def __init__(
        self,
        config: GroupConfig,
        open_store: Callable[[], OffsetStore],
        *,
        node_id: int = 0,
        locator: CoordinatorLocator | None = None,
        partition_exists: PartitionCheck | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.node_id = node_id
        self._open_store = open_store
        self._locator: CoordinatorLocator = locator or LocalLocator(node_id)
        self._clock: Clock = clock or SystemClock()
        self._failure: StrataError | None = None
        self._closing = False
        self._wakeup = asyncio.Event()
        self._timers = Timers(self._clock, self._wakeup.set)
        self._timer_task: asyncio.Task[None] | None = None
        # The state machine persists through the offsets manager, which reads and checks
        # the groups of the state machine: built in this order, tied by this callback.
        self._groups = GroupMembership(config, self._clock, self._timers, _Persistence(self))
        self._offsets = OffsetManager(
            config,
            self._groups,
            self._timers,
            self._clock,
            partition_exists or (lambda topic, partition: True),
        )
        # KIP-848 consumer groups, beside the classic ones under the same ids: a group id
        # is one or the other (rules: the "consumer groups" section below).
        self.consumer = ConsumerGroups(config, self._clock, self._timers)
        self.consumer.on_change = self._on_consumer_timeout
        # Classic members of consumer groups (KIP-848's online migration).
        self.bridge = ClassicBridge(self.consumer)
        # The cluster's topics, for a classic member's JoinGroup to a consumer group (set
        # by the Kafka handlers; the groups' own view of their topics until then).
        self.topics: TopicsImage | None = None
        self._offsets.consumer_topics = self.consumer.active_topics
        # Each consumer group's records as last appended (encoded): what the next write diffs.
        self._consumer_written: dict[str, dict[ConsumerKey, bytes]] = {}

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self, *, run_timers: bool = True) -> None:
        """Open the offset store (in a thread) and load every group it knows as Empty.
        A store that cannot be opened leaves the coordinator answering
        COORDINATOR_NOT_AVAILABLE (with the reason logged), not the broker down.
        ``run_timers=False`` (tests with a fake clock): timers fire only in ``tick()``."""
        try:
            store = await asyncio.to_thread(self._open_store)
        except StrataError as e:
            logger.error("group coordinator unavailable: cannot open the offset store: %s", e)
            self._failure = e
            return
        self._offsets.load(store)
        logger.info("group coordinator loaded %d groups", len(self._groups.groups))
        if run_timers:
            self._timer_task = asyncio.get_running_loop().create_task(
                self._run_timers(), name="strata-groups-timers"
            )

    def load_groups(self, group_ids: Iterable[str]) -> None:
        """Take over the groups the store now holds under ``group_ids`` as Empty (start-up;
        in cluster mode, when this broker becomes leader of their offsets partition).
        Groups already known here are left alone."""
        self._offsets.load_groups(group_ids)

    def unload_groups(self, owned: Callable[[str], bool]) -> int:
        """Forget every group for which ``owned(group_id)`` holds (cluster mode: this broker
        stopped leading their offsets partition). Parked JoinGroup/SyncGroup requests fail
        with NOT_COORDINATOR, so their clients look the coordinator up again. Nothing is
        written: the new coordinator has the groups' offsets and metadata in its log."""
        for gid in [g for g in self.consumer.groups if owned(g)]:
            self.consumer.drop(gid)
        for gid in [g for g in self._consumer_written if owned(g)]:
            del self._consumer_written[gid]
        return self._groups.unload(
            owned, lambda gid: NotCoordinatorError(f"group {gid!r} moved to another coordinator")
        )

    async def close(self) -> None:
        """Fail parked requests with COORDINATOR_NOT_AVAILABLE (clients look the
        coordinator up again) and close the offset store (writes already appended are
        flushed first). Idempotent."""
        if self._closing:
            return
        self._closing = True
        self._offsets.closing = True
        if self._timer_task is not None:
            await cancel_and_wait(self._timer_task)
            self._timer_task = None
        self._timers.clear()
        self._groups.fail_all(CoordinatorNotAvailableError("the group coordinator is shutting down"))
        self._offsets.close()

    def tick(self) -> int:
        """Fire every timer that is due by the clock; returns how many fired."""
        return self._timers.run_due()

    async def _run_timers(self) -> None:
        while True:
            self._timers.run_due()
            deadline = self._timers.next_deadline()
            self._wakeup.clear()
            delay = None if deadline is None else max(0.0, deadline - self._clock.monotonic())
            try:
                await asyncio.wait_for(self._wakeup.wait(), delay)
            except TimeoutError:
                pass

    @property
    def store(self) -> OffsetStore | None:
        return self._offsets.store

    def _ready(self) -> OffsetStore:
        if self._failure is not None:
            raise CoordinatorNotAvailableError(f"the group coordinator is unavailable: {self._failure}")
        if self._closing:
            raise CoordinatorNotAvailableError("the group coordinator is shutting down")
        if self._offsets.store is None:
            raise CoordinatorLoadInProgressError("the group coordinator is loading")
        return self._offsets.store

    def _serving(self, group_id: str) -> OffsetStore:
        store = self._ready()
        node = self._locator.coordinator_for(group_id)
        if node != self.node_id:
            raise NotCoordinatorError(f"group {group_id!r} is coordinated by node {node}")
        return store

    def find_coordinator(self, group_id: str) -> int:
        """Node id coordinating ``group_id`` (FindCoordinator)."""
        if self._failure is not None or self._closing:
            self._ready()
        return self._locator.coordinator_for(group_id)

    # --- membership (GroupMembership) ---------------------------------------------------------

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResult:
        """Join (or rejoin) a group; returns when the join phase completes (or at once when
        nothing needs to change). Raises MemberIdRequired (with the id) for new dynamic
        members of v4+ clients, and the other JoinGroup errors."""
        self._serving(req.group_id)
        if req.group_id in self.consumer.groups:
            if not self.consumer.is_empty(req.group_id):
                # A classic member of a consumer group (the online migration's bridge).
                group = self.consumer.groups[req.group_id]
                result = self.bridge.join(req, self.topics or _GroupTopics(group.subscribed_partitions))
                # it may have replaced the last consumer-protocol member (same instance id)
                self._maybe_downgrade(req.group_id, joined=result)
                await self._write_consumer(req.group_id)
                return result
            self.consumer.drop(req.group_id)  # an empty consumer group becomes classic
            self._persist_in_background(req.group_id)  # its records' tombstones
        return await self._groups.join_group(req)

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResult:
        """The member's assignment for the current generation; followers wait for the
        leader's SyncGroup."""
        self._serving(req.group_id)
        if req.group_id in self.consumer.groups:
            return self.bridge.sync(req)
        return await self._groups.sync_group(req)

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None = None
    ) -> None:
        """Keep the member alive. RebalanceInProgressError: rejoin."""
        self._serving(group_id)
        if group_id in self.consumer.groups:
            self.bridge.heartbeat(group_id, member_id, generation_id, group_instance_id)
            return
        self._groups.heartbeat(group_id, member_id, generation_id, group_instance_id)

    def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> list[LeaveResult]:
        """Remove members (by member id, or by group.instance.id with an empty member id);
        one result per identity, in order."""
        self._serving(group_id)
        if group_id in self.consumer.groups:
            results = self.bridge.leave(group_id, members)
            self._maybe_downgrade(group_id)
            self._persist_in_background(group_id)
            return results
        return self._groups.leave_group(group_id, members)

    def list_groups(self, states: Collection[str | GroupState] | None = None) -> list[GroupListing]:
        """Every group, classic and consumer (KIP-848, ``group_type``), optionally only those
        in ``states`` (state names compare case-insensitively; unknown names match
        nothing), sorted by id."""
        self._ready()
        wanted: set[str] | None = None
        if states:
            wanted = {(s.value if isinstance(s, GroupState) else s).lower() for s in states}
        listed = [g for g in self._groups.list_groups(states) if g.group_id not in self.consumer.groups]
        for gid, state in self.list_consumer_groups():
            if wanted is None or state.lower() in wanted:
                listed.append(GroupListing(gid, "consumer", GroupState(state), group_type="consumer"))
        return sorted(listed, key=lambda g: g.group_id)

    def describe_group(self, group_id: str) -> GroupDescription:
        """The group as it is now, classic or consumer (KIP-848, converted: the group epoch
        as its generation, the assignor as its protocol). GroupIdNotFoundError if there is
        no such group."""
        self._serving(group_id)
        group = self.consumer.groups.get(group_id)
        if group is not None:
            return _consumer_description(group.view())
        return self._groups.describe_group(group_id)

    # --- offsets (OffsetManager) --------------------------------------------------------------

    async def commit_offsets(
        self, req: OffsetCommitRequest, api_version: int = 9
    ) -> dict[TopicPartition, StrataError | None]:
        """Commit offsets; returns each partition's outcome once the valid ones are durable.
        Raises for request-level failures (unknown member, illegal generation, rebalance
        in progress, coordinator not available), which apply to every partition. A
        consumer group (KIP-848) checks the member epoch (``api_version``: OffsetCommit's,
        v9+ for its members)."""
        self._serving(req.group_id)
        if req.group_id in self.consumer.groups:
            self.consumer.validate_offset_commit(req.group_id, req.member_id, req.generation_id, api_version)
            return await self._offsets.commit_offsets(req, member_checked=True)
        return await self._offsets.commit_offsets(req)

    def committed_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's durable committed offsets: all of them, or those of ``partitions``
        that have one (OffsetFetch; an unknown group has none). A consumer group checks
        ``member_id``/``member_epoch`` when given (OffsetFetch v9)."""
        self._serving(group_id)
        if group_id in self.consumer.groups:
            self.consumer.validate_offset_fetch(group_id, member_id, member_epoch)
        return self._offsets.committed_offsets(group_id, partitions)

    async def commit_transactional_offsets(
        self, req: TxnOffsetCommitRequest
    ) -> dict[TopicPartition, StrataError | None]:
        """TxnOffsetCommit (rules: broker.groups.offset_manager); each partition's outcome
        once the valid ones are durable, pending until the producer's marker."""
        self._serving(req.group_id)
        return await self._offsets.commit_transactional_offsets(req)

    def pending_transactional(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with transactional offsets awaiting their marker
        (OffsetFetch ``require_stable``: UNSTABLE_OFFSET_COMMIT)."""
        self._serving(group_id)
        return self._offsets.pending_transactional(group_id)

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's COMMIT or ABORT marker in ``__consumer_offsets`` partition
        ``partition`` was acknowledged here (Broker.on_txn_marker): its pending offsets
        become committed or are dropped. NOT_LEADER_OR_FOLLOWER when the partition is
        not loaded here, or the coordinator is not available (Kafka's translation of the
        coordinator errors for WriteTxnMarkers: the transaction coordinator retries)."""
        try:
            self._offsets.complete_txn(partition, producer_id, commit)
        except (CoordinatorNotAvailableError, CoordinatorLoadInProgressError, NotCoordinatorError) as e:
            raise NotLeaderError(f"the group coordinator cannot take the marker now: {e}") from e

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, StrataError | None]:
        """OffsetDelete: every partition of an Empty group; of a consumer group with
        members, those of topics no member subscribes to (others get
        GROUP_SUBSCRIBED_TO_TOPIC; a KIP-848 consumer group likewise). Raises
        GroupIdNotFoundError, NonEmptyGroupError."""
        self._serving(group_id)
        if group_id not in self.consumer.groups:
            return await self._offsets.delete_offsets(group_id, partitions)
        topics = self.consumer.active_topics(group_id) or set()
        results: dict[TopicPartition, StrataError | None] = {
            tp: GroupSubscribedToTopicError(f"a member of group {group_id!r} subscribes to {tp.topic!r}")
            for tp in partitions
            if tp.topic in topics
        }
        rest = [tp for tp in partitions if tp not in results]
        if rest and group_id in self._groups.groups:  # the holder of its offsets
            results.update(await self._offsets.delete_offsets(group_id, rest))
        else:
            results.update(dict.fromkeys(rest))  # nothing committed: nothing to delete
        return results

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, StrataError | None]:
        """DeleteGroups: each Empty group is forgotten and its offsets deleted; others get
        NON_EMPTY_GROUP / GROUP_ID_NOT_FOUND / NOT_COORDINATOR. Each result comes once the
        group's tombstones are durable."""
        results: dict[str, StrataError | None] = {}
        writes: dict[str, asyncio.Future[None]] = {}
        for gid in group_ids:
            try:
                store = self._serving(gid)
                group = self._groups.groups.get(gid)
                if gid in self.consumer.groups:
                    if not self.consumer.is_empty(gid):
                        raise NonEmptyGroupError(f"group {gid!r} has members (consumer group)")
                    self.consumer.drop(gid)
                    tombstones = self._persist_consumer(gid)
                    if group is None or group.state is Dead:
                        results[gid] = None
                        if tombstones is not None:
                            writes[gid] = tombstones
                        continue
                if group is None or group.state is Dead:
                    raise GroupIdNotFoundError(f"group {gid!r} does not exist")
                if group.state is not Empty:
                    raise NonEmptyGroupError(f"group {gid!r} has members (state {group.state.value})")
                self._groups.drop(group)
                writes[gid] = store.delete_group(gid)
                results[gid] = None
            except StrataError as e:
                results[gid] = e
        for gid, fut in writes.items():
            results[gid] = await self._offsets.wait_durable(fut, f"deletion of group {gid}")
        return results

    def expire_offsets(self) -> int:
        """Delete expired offsets (rules: broker.groups.offset_manager) and forget Empty groups
        left with nothing, consumer groups (KIP-848) included, their records tombstoned, as
        Kafka's periodic cleanup does; returns how many offsets were deleted."""
        expired = self._offsets.expire_offsets()
        store = self._offsets.store
        if store is not None:
            for gid in [g for g, group in self.consumer.groups.items() if not group.members]:
                if not store.has_offsets(gid):
                    self.consumer.drop(gid)
                    self._persist_in_background(gid)
        return expired

    def on_topic_deleted(self, topic: str) -> None:
        """A topic was deleted: delete every group's offsets of it, as Kafka does."""
        self._offsets.on_topic_deleted(topic)

    # --- consumer groups (KIP-848, broker.groups.consumer_group) -------------------------------
    #
    # A group id names a classic group or a consumer group. The classic group under the id
    # holds the committed offsets of both (an Empty classic group for a consumer group).
    # As Kafka 4 does with group.consumer.migration.policy: a consumer member joining an
    # empty classic group makes it a consumer group, a classic member joining an empty
    # consumer group makes it classic again. Groups with members convert online where the
    # policy allows (broker.groups.classic_bridge): a consumer member joining a classic
    # group upgrades it, its classic members bridged; the last consumer member leaving a
    # group of classic members downgrades it. A refused upgrade answers GROUP_ID_NOT_FOUND.

    async def consumer_group_heartbeat(self, call: HeartbeatCall, image: TopicsImage) -> HeartbeatResult:
        """ConsumerGroupHeartbeat; raises its request-level errors. What it changed is
        written to the store (Kafka's ConsumerGroup* records) and acknowledged before the
        answer, as Kafka answers once its records are committed."""
        self._serving(call.group_id)
        self.topics = image
        classic = self._groups.groups.get(call.group_id)
        if (
            call.group_id not in self.consumer.groups
            and classic is not None
            and classic.state not in (Empty, Dead)
        ):
            validate(call)
            self._upgrade(classic, image)
        try:
            result = self.consumer.heartbeat(call, image)
        except StrataError:
            self._persist_in_background(call.group_id)  # a refused heartbeat may change nothing, or a little
            raise
        if call.member_epoch < 0:
            self._maybe_downgrade(call.group_id)
        await self._write_consumer(call.group_id)
        return result

    async def _write_consumer(self, group_id: str) -> None:
        """Write what changed in a consumer group and wait until it is durable."""
        fut = self._persist_consumer(group_id)
        if fut is not None:
            error = await self._offsets.wait_durable(fut, f"group {group_id}'s state")
            if error is not None:
                raise error

    def _upgrade(self, classic: Group, image: TopicsImage) -> None:
        """A consumer-protocol member joins a classic group with members: Kafka's online
        upgrade where group.consumer.migration.policy allows it (broker.groups.classic_bridge),
        otherwise refused as Kafka refuses it."""
        gid = classic.group_id
        why = upgrade_refusal(classic, self.config.consumer_max_size, self.config.upgrade_enabled)
        if why is not None:
            logger.info("Cannot upgrade classic group %s to consumer group because %s.", gid, why)
            raise GroupIdNotFoundError(f"Group {gid} is not a consumer group")
        converted = from_classic(classic, image)
        self._groups.detach_members(classic, RebalanceInProgressError(f"group {gid!r} was upgraded: rejoin"))
        self.consumer.adopt(converted)
        logger.info(
            "classic group %s upgraded to a consumer group: epoch %d, %d classic members",
            gid,
            converted.group_epoch,
            len(converted.members),
        )

    def _maybe_downgrade(self, group_id: str, joined: JoinGroupResult | None = None) -> bool:
        """The last consumer-protocol member left a group of classic members: it becomes a
        classic group again where group.consumer.migration.policy allows (a rebalance).
        ``joined``: the downgrade comes from a classic static member's join that replaced
        the last consumer-protocol member; as Kafka, no rebalance then, when every member
        is at the classic group's generation and the joiner's protocol is the group's
        (otherwise a rebalance, which the members join at their next heartbeat)."""
        group = self.consumer.groups.get(group_id)
        if group is None or not downgradable(group, self.config.max_size, self.config.downgrade_enabled):
            return False
        generation, members = to_classic(group)
        settled = joined is not None and all(m.member_epoch == generation for m in group.members.values())
        self.consumer.drop(group_id)
        classic = self._groups.adopt_converted(
            group_id, generation, [(m.request, m.assignment) for m in members], rebalance=not settled
        )
        if settled and joined is not None and classic.protocol_name != joined.protocol_name:
            self._groups.rebalance(classic, "the joining member's protocol is not the group's")
        logger.info(
            "consumer group %s downgraded to a classic group: generation %d, %d members",
            group_id,
            generation,
            len(members),
        )
        return True

    def _on_consumer_timeout(self, group_id: str) -> None:
        """A member was removed by a timer: maybe downgrade, then write the change."""
        self._maybe_downgrade(group_id)
        self._persist_in_background(group_id)

    def load_consumer_groups(self, records: Mapping[str, Mapping[ConsumerKey, ConsumerValue]]) -> None:
        """Take over the consumer groups a loaded offsets partition holds (cluster mode:
        this broker became its leader): each as its records describe it, members,
        epochs and assignments included, with fresh session deadlines."""
        store = self._offsets.store
        if not isinstance(store, ConsumerGroupStore):
            return
        for gid, recs in sorted(records.items()):
            group = restore_group(gid, recs, store.topic_name)
            if group is None:
                continue
            self.consumer.adopt(group)
            self._consumer_written[gid] = {k: encode_consumer_value(v) for k, v in recs.items()}
            logger.info(
                "consumer group %s loaded: epoch %d, %d members", gid, group.group_epoch, len(group.members)
            )

    def _persist_consumer(self, group_id: str) -> asyncio.Future[None] | None:
        """Append what changed in the group's records since the last write (tombstones for
        a group gone); None when nothing did or the store keeps no consumer groups (the
        single-node offsets log of the unit tests)."""
        store = self._offsets.store
        if not isinstance(store, ConsumerGroupStore):
            return None
        group = self.consumer.groups.get(group_id)
        values = group_records(group, store.topic_id) if group is not None else {}
        new = {k: encode_consumer_value(v) for k, v in values.items()}
        old = self._consumer_written.get(group_id, {})
        items = [(k, values[k] if raw is not None else None) for k, raw in record_diff(old, new)]
        if not items:
            return None
        fut = store.write_consumer(group_id, items)  # raises (nothing appended): old stays
        if new:
            self._consumer_written[group_id] = new
        else:
            self._consumer_written.pop(group_id, None)
        return fut

    def _persist_in_background(self, group_id: str) -> None:
        try:
            fut = self._persist_consumer(group_id)
        except StrataError as e:
            logger.error("cannot write group %s's state: %s", group_id, e)
            return
        if fut is not None:
            self._offsets.background(fut, f"writing group {group_id}'s state")

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupView:
        """ConsumerGroupDescribe: GroupIdNotFoundError for no group or a classic one."""
        self._serving(group_id)
        group = self.consumer.groups.get(group_id)
        if group is None:
            if group_id in self._groups.groups:
                raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        return group.view()

    def list_consumer_groups(self) -> list[tuple[str, str]]:
        """Every consumer group as (group id, state name), sorted by id."""
        self._ready()
        return [(gid, g.state.value) for gid, g in sorted(self.consumer.groups.items())]

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.consumer.groups


def _consumer_description(v: ConsumerGroupView) -> GroupDescription:
    def tps(a: dict[str, frozenset[int]]) -> tuple[TopicPartition, ...]:
        return tuple(sorted(TopicPartition(t, p) for t, ps in a.items() for p in ps))

    return GroupDescription(
        group_id=v.group_id,
        state=GroupState(v.state),
        protocol_type="consumer",
        protocol_name=v.assignor,
        generation_id=v.group_epoch,
        leader_id="",
        members=tuple(
            MemberDescription(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout_ms=-1,
                rebalance_timeout_ms=-1,
                protocols=(),
                metadata=b"",
                assignment=b"",
                assigned_partitions=tps(m.assignment),
                member_epoch=m.member_epoch,
                target_partitions=tps(m.target_assignment),
            )
            for m in v.members
        ),
        group_type="consumer",
        assignment_epoch=v.assignment_epoch,
    )


class _GroupTopics:
    """A TopicsImage of the partition counts a consumer group last saw (a classic
    member's JoinGroup before the Kafka handlers set the cluster's)."""

    def __init__(self, partitions: Mapping[str, int]) -> None:
        self._partitions = dict(partitions)

    def partition_count(self, topic: str) -> int | None:
        return self._partitions.get(topic)

    def topic_names(self) -> Iterable[str]:
        return list(self._partitions)


class _Persistence:
    """The state machine's GroupPersistence: the coordinator's offsets manager (built
    after the state machine, hence looked up at call time)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._coordinator = coordinator

    def store_group(self, group: Group) -> None:
        self._coordinator._offsets.store_group(group)

    def maybe_drop(self, group: Group) -> None:
        self._coordinator._offsets.maybe_drop(group)
