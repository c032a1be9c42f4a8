"""Kafka's classic group coordinator (the pre-KIP-848 protocol every client speaks).

State machine of one group (Kafka's GroupMetadata states)::

    Empty ──join──► PreparingRebalance ──all members joined, or rebalance timeout──►
      CompletingRebalance ──leader's SyncGroup──► Stable
    Stable / CompletingRebalance ──join, leave, member expiry, new leader join──►
      PreparingRebalance
    PreparingRebalance ──nobody rejoined──► Empty         (generation bumped either way)
    Empty ──DeleteGroups, or no offsets left after expiry──► Dead (removed)

* JoinGroup: a new dynamic member of a v4+ client first gets MEMBER_ID_REQUIRED with its
  id (KIP-394) and counts as "pending" until it rejoins or its session times out. The join
  phase ends when every known member (pending ones included) has rejoined, or after the
  group's rebalance timeout (the largest of its members'), which removes the dynamic
  members that did not rejoin. The first rebalance of an Empty group waits
  ``group.initial.rebalance.delay.ms`` and again for each newcomer, up to the rebalance
  timeout. The leader (first member, re-elected among the rejoined ones) receives every
  member's metadata for the selected protocol.
* Protocol selection: the candidates are the protocols every member supports; each
  member votes for its most preferred candidate; most votes wins, ties going to the
  leader's preference order (Kafka leaves ties to hash order).
* SyncGroup: followers wait; the leader's assignment is handed to everyone and the group
  becomes Stable. Members that do not sync within the rebalance timeout are removed.
* Heartbeat: REBALANCE_IN_PROGRESS during PreparingRebalance tells members to rejoin.
  A member is removed when its session times out, except while its JoinGroup or
  SyncGroup is parked here (that request proves it alive); a new member parked in the
  join phase gets at most 5 minutes (Kafka's NewMemberJoinTimeoutMs).
* Static membership (KIP-345): a join with a known ``group.instance.id`` and an unknown
  member id takes over the old member (its parked requests fail FENCED_INSTANCE_ID; later
  requests with the old id too). In a Stable group whose selected protocol would not
  change this happens without a rebalance; the static member keeps its assignment.
* Offsets: commits are checked against the member and generation; generation -1 commits
  ("simple" consumers, admin tools) are accepted while the group is Empty. They are
  acknowledged once durable in the OffsetStore. Offsets of an Empty group expire
  ``offsets.retention.minutes`` after it became Empty (KIP-211), those of a simple group
  that long after their commit, those of a Stable consumer group only for topics it no
  longer subscribes to.

Everything runs on one asyncio loop: no locks. Timers (session expiry, join and sync
deadlines, offset expiry) sit in a heap driven by an injectable monotonic clock; ``start``
runs a task that fires them on time, and tests call ``tick()`` after moving a fake clock.

The seams for cluster mode: a ``CoordinatorLocator`` says which node coordinates a group
(NOT_COORDINATOR when it is not this one) and the ``OffsetStore`` (api.groups.offsets)
says where offsets live; opening it happens in ``start`` (COORDINATOR_LOAD_IN_PROGRESS
meanwhile). In cluster mode (cluster.groups) both are the replicated offsets topic's
store, which hands groups over with ``load_groups`` when this broker takes the lead of
their partition and takes them back with ``unload_groups`` when it loses it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from api.groups.config import GroupConfig
from api.groups.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
)
from api.groups.offsets import OffsetStore
from api.groups.types import (
    UNKNOWN_MEMBER_ID,
    GroupDescription,
    GroupListing,
    GroupProtocol,
    GroupState,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveResult,
    MemberDescription,
    MemberIdentity,
    MemberIdRequired,
    OffsetAndMetadata,
    OffsetCommitRequest,
    StoredGroup,
    SyncGroupRequest,
    SyncGroupResult,
    TopicPartition,
)
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    RequestTimedOutError,
    StrataError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from hot.tasks import cancel_and_wait

if TYPE_CHECKING:
    from hot.manager import LogManager

logger = logging.getLogger("strata.groups")

NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 300_000

Empty, Preparing, Completing, Stable, Dead = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

# (topic, partition) -> does it exist? OffsetCommit/OffsetDelete of others is refused.
PartitionCheck = Callable[[str, int], bool]


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds, for deadlines."""
        ...

    def time_ms(self) -> int:
        """Wall clock, for commit timestamps and offset expiry."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000


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


# --- timers ---------------------------------------------------------------------------------


class _Timer:
    __slots__ = ("cancelled", "deadline", "fn")

    def __init__(self, deadline: float, fn: Callable[[], None]) -> None:
        self.deadline = deadline
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Timers:
    def __init__(self, clock: Clock, changed: Callable[[], None]) -> None:
        self._clock = clock
        self._changed = changed
        self._heap: list[tuple[float, int, _Timer]] = []
        self._seq = itertools.count()

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> _Timer:
        return self.call_at(self._clock.monotonic() + delay_ms / 1000.0, fn)

    def call_at(self, deadline: float, fn: Callable[[], None]) -> _Timer:
        t = _Timer(deadline, fn)
        heapq.heappush(self._heap, (deadline, next(self._seq), t))
        self._changed()
        return t

    def next_deadline(self) -> float | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def run_due(self) -> int:
        n = 0
        while self._heap and self._heap[0][0] <= self._clock.monotonic():
            t = heapq.heappop(self._heap)[2]
            if t.cancelled:
                continue
            t.cancelled = True
            n += 1
            try:
                t.fn()
            except Exception:
                logger.exception("group coordinator timer failed")
        return n

    def clear(self) -> None:
        for _, _, t in self._heap:
            t.cancel()
        self._heap.clear()


# --- members and groups -----------------------------------------------------------------------


class _Member:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "deadline",
        "instance_id",
        "is_new",
        "join_future",
        "joined_at",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "sync_future",
        "timer",
    )

    def __init__(self, member_id: str, req: JoinGroupRequest, now: float) -> None:
        self.member_id = member_id
        self.instance_id = req.group_instance_id
        self.client_id = req.client_id
        self.client_host = req.client_host
        self.protocol_type = req.protocol_type
        self.protocols: tuple[GroupProtocol, ...] = req.protocols
        self.session_timeout_ms = req.session_timeout_ms
        self.rebalance_timeout_ms = _rebalance_timeout(req)
        self.assignment = b""
        self.join_future: asyncio.Future[JoinGroupResult] | None = None
        self.sync_future: asyncio.Future[SyncGroupResult] | None = None
        self.is_new = True
        self.joined_at = now
        self.deadline = now + req.session_timeout_ms / 1000.0
        self.timer: _Timer | None = None

    def update(self, req: JoinGroupRequest) -> None:
        self.protocols = req.protocols
        self.session_timeout_ms = req.session_timeout_ms
        self.rebalance_timeout_ms = _rebalance_timeout(req)
        self.client_id = req.client_id
        self.client_host = req.client_host

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.protocols)

    def metadata(self, protocol: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return b""

    def matches(self, protocols: Sequence[GroupProtocol]) -> bool:
        return self.protocols == tuple(protocols)

    def fail_waiters(self, error: StrataError) -> None:
        for fut in (self.join_future, self.sync_future):
            if fut is not None and not fut.done():
                fut.set_exception(error)
        self.join_future = None
        self.sync_future = None


def _rebalance_timeout(req: JoinGroupRequest) -> int:
    return req.rebalance_timeout_ms if req.rebalance_timeout_ms >= 0 else req.session_timeout_ms


class _Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = Empty
        self.state_timestamp_ms = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, _Member] = {}
        self.static: dict[str, str] = {}  # group.instance.id -> member id
        self.pending: dict[str, _Timer] = {}  # KIP-394 member ids handed out, not yet joined
        self.pending_sync: set[str] = set()
        self.join_timer: _Timer | None = None
        self.sync_timer: _Timer | None = None
        self.initial_delay = False
        self.new_member_added = False

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return not self.pending and all(m.join_future is not None for m in self.members.values())

    def supports(self, protocol_type: str, protocols: Sequence[GroupProtocol]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        return bool(self._candidates() & {p.name for p in protocols})

    def _candidates(self) -> set[str]:
        it = iter(self.members.values())
        common = set(next(it).protocol_names)
        for m in it:
            common &= set(m.protocol_names)
        return common

    def select_protocol(self) -> str:
        candidates = self._candidates()
        members = list(self.members.values())
        if not candidates:  # cannot happen: joins are checked with supports()
            return members[0].protocols[0].name
        votes = Counter(next(n for n in m.protocol_names if n in candidates) for m in members)
        best = max(votes.values())
        leader = self.members.get(self.leader_id or "", members[0])
        for name in leader.protocol_names:
            if votes.get(name) == best:
                return name
        return max(votes, key=lambda n: votes[n])  # unreachable: the leader supports every candidate

    def add(self, member: _Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member: _Member) -> None:
        if member.timer is not None:
            member.timer.cancel()
            member.timer = None
        self.members.pop(member.member_id, None)
        if member.instance_id is not None and self.static.get(member.instance_id) == member.member_id:
            del self.static[member.instance_id]
        self.pending_sync.discard(member.member_id)
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    def join_members(self) -> tuple[JoinGroupMember, ...]:
        return tuple(
            JoinGroupMember(m.member_id, m.instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def cancel_timers(self) -> None:
        for t in (self.join_timer, self.sync_timer, *self.pending.values()):
            if t is not None:
                t.cancel()
        for m in self.members.values():
            if m.timer is not None:
                m.timer.cancel()
        self.join_timer = self.sync_timer = None
        self.pending.clear()


# --- the coordinator ----------------------------------------------------------------------------


class GroupCoordinator:
    """Consumer groups of one node (behaviour: module docstring).

    Public API (all on the event loop):

    * lifecycle: ``await start()``, ``await close()``, ``tick()`` (fire due timers by hand)
    * protocol: ``join_group``, ``sync_group``, ``heartbeat``, ``leave_group``,
      ``commit_offsets``, ``committed_offsets``, ``delete_groups``, ``delete_offsets``,
      ``find_coordinator``
    * reading: ``list_groups``, ``describe_group``, ``committed_offsets``
    * housekeeping: ``expire_offsets``, ``on_topic_deleted``

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
        self._partition_exists: PartitionCheck = partition_exists or (lambda topic, partition: True)
        self._clock: Clock = clock or SystemClock()
        self._store: OffsetStore | None = None
        self._failure: StrataError | None = None
        self._closing = False
        self._groups: dict[str, _Group] = {}
        self._wakeup = asyncio.Event()
        self._timers = _Timers(self._clock, self._wakeup.set)
        self._timer_task: asyncio.Task[None] | None = None
        self._expiry_timer: _Timer | None = None
        self._background_writes: set[asyncio.Future[None]] = set()

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
        self._store = store
        self.load_groups(store.groups())
        logger.info("group coordinator loaded %d groups", len(self._groups))
        self._schedule_expiry()
        if run_timers:
            self._timer_task = asyncio.get_running_loop().create_task(
                self._run_timers(), name="strata-groups-timers"
            )

    def load_groups(self, group_ids: Iterable[str]) -> None:
        """Take over the groups the store now holds under ``group_ids`` as Empty (start-up;
        in cluster mode, when this broker becomes leader of their offsets partition).
        Groups already known here are left alone."""
        store = self._store
        if store is None:
            return
        now_ms = self._clock.time_ms()
        for gid in sorted(group_ids):
            if gid in self._groups:
                continue
            g = _Group(gid, now_ms)
            meta = store.group_metadata(gid)
            if meta is not None:
                g.protocol_type = meta.protocol_type or None
                g.generation = meta.generation_id
                # Stored while Empty: it has been Empty since then. Stored while it had
                # members: they are gone (not persisted), so it is Empty from now on.
                if meta.protocol_name is None and meta.state_timestamp_ms >= 0:
                    g.state_timestamp_ms = meta.state_timestamp_ms
            else:
                g.state_timestamp_ms = -1  # offsets only: they expire by commit time
            self._groups[gid] = g

    def unload_groups(self, owned: Callable[[str], bool]) -> int:
        """Forget every group for which ``owned(group_id)`` holds (cluster mode: this broker
        stopped leading their offsets partition). Parked JoinGroup/SyncGroup requests fail
        with NOT_COORDINATOR, so their clients look the coordinator up again. Nothing is
        written: the new coordinator has the groups' offsets and metadata in its log."""
        doomed = [g for gid, g in self._groups.items() if owned(gid)]
        for g in doomed:
            g.cancel_timers()
            for m in list(g.members.values()):
                m.fail_waiters(NotCoordinatorError(f"group {g.group_id!r} moved to another coordinator"))
            del self._groups[g.group_id]
        return len(doomed)

    async def close(self) -> None:
        """Fail parked requests with COORDINATOR_NOT_AVAILABLE (clients look the
        coordinator up again) and close the offset store (writes already appended are
        flushed first). Idempotent."""
        if self._closing:
            return
        self._closing = True
        if self._timer_task is not None:
            await cancel_and_wait(self._timer_task)
            self._timer_task = None
        self._timers.clear()
        for g in self._groups.values():
            g.cancel_timers()
            for m in g.members.values():
                m.fail_waiters(CoordinatorNotAvailableError("the group coordinator is shutting down"))
        if self._store is not None:
            self._store.close()

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
        return self._store

    def _ready(self) -> OffsetStore:
        if self._failure is not None:
            raise CoordinatorNotAvailableError(f"the group coordinator is unavailable: {self._failure}")
        if self._closing:
            raise CoordinatorNotAvailableError("the group coordinator is shutting down")
        if self._store is None:
            raise CoordinatorLoadInProgressError("the group coordinator is loading")
        return self._store

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

    # --- small helpers ------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return self._clock.time_ms()

    def _new_group(self, group_id: str) -> _Group:
        g = _Group(group_id, self._now_ms())
        self._groups[group_id] = g
        return g

    def _transition(self, group: _Group, state: GroupState) -> None:
        group.state = state
        group.state_timestamp_ms = self._now_ms()

    def _current(self, group: _Group) -> bool:
        return self._groups.get(group.group_id) is group

    def _background(self, fut: asyncio.Future[None], what: str) -> None:
        """Keep a write nobody waits for, and log its failure."""
        self._background_writes.add(fut)

        def done(f: asyncio.Future[None]) -> None:
            self._background_writes.discard(f)
            if not f.cancelled() and f.exception() is not None:
                logger.error("%s failed: %s", what, f.exception())

        fut.add_done_callback(done)

    def _store_group(self, group: _Group) -> None:
        store = self._store
        if store is None or group.protocol_type is None:
            return
        value = StoredGroup(
            group.protocol_type,
            group.generation,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp_ms,
        )
        try:
            self._background(store.store_group(group.group_id, value), f"storing group {group.group_id}")
        except StrataError as e:
            logger.error("cannot store group %s: %s", group.group_id, e)

    def _drop(self, group: _Group) -> None:
        """Empty -> Dead: forget the group."""
        group.cancel_timers()
        self._transition(group, Dead)
        if self._current(group):
            del self._groups[group.group_id]

    def _maybe_drop(self, group: _Group) -> None:
        """Forget an Empty group that has nothing left (and tombstone its metadata)."""
        store = self._store
        if (
            store is None
            or not self._current(group)
            or group.state is not Empty
            or group.members
            or group.pending
            or store.has_offsets(group.group_id)
        ):
            return
        self._drop(group)
        try:
            self._background(store.delete_group(group.group_id), f"deleting group {group.group_id}")
        except StrataError as e:
            logger.error("cannot delete group %s: %s", group.group_id, e)

    def _validate_member(self, group: _Group, member_id: str, instance_id: str | None) -> _Member:
        if instance_id is not None:
            current = group.static.get(instance_id)
            if current is None:
                raise UnknownMemberIdError(
                    f"no member with group.instance.id {instance_id!r} in group {group.group_id!r}"
                )
            if current != member_id:
                raise FencedInstanceIdError(
                    f"group.instance.id {instance_id!r} is now member {current}, not {member_id}"
                )
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {group.group_id!r}")
        return member

    def _touch(self, group: _Group, member: _Member) -> None:
        """A sign of life: push the member's session deadline out."""
        member.deadline = self._clock.monotonic() + member.session_timeout_ms / 1000.0
        if member.timer is None or member.timer.cancelled or member.timer.deadline > member.deadline:
            self._arm(group, member, member.deadline)

    def _arm(self, group: _Group, member: _Member, deadline: float) -> None:
        if member.timer is not None:
            member.timer.cancel()
        member.timer = self._timers.call_at(deadline, lambda: self._on_member_timer(group, member))

    def _check_size(self, group: _Group, member_id: str) -> None:
        if member_id not in group.members and len(group.members) >= self.config.max_size:
            raise GroupMaxSizeReachedError(
                f"group {group.group_id!r} already has group.max.size={self.config.max_size} members"
            )

    # --- JoinGroup ----------------------------------------------------------------------------

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResult:
        """Join (or rejoin) a group; returns when the join phase completes (or at once when
        nothing needs to change). Raises MemberIdRequired (with the id) for new dynamic
        members of v4+ clients, and the other JoinGroup errors."""
        self._serving(req.group_id)
        if not req.group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session timeout {req.session_timeout_ms} ms is outside [{cfg.min_session_timeout_ms}, "
                f"{cfg.max_session_timeout_ms}] (group.min/max.session.timeout.ms)"
            )
        group = self._groups.get(req.group_id)
        if group is None:
            if req.member_id != UNKNOWN_MEMBER_ID:
                raise UnknownMemberIdError(f"group {req.group_id!r} does not exist")
            group = self._new_group(req.group_id)
        fut: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        try:
            if req.member_id == UNKNOWN_MEMBER_ID:
                self._join_new(group, req, fut)
            else:
                self._join_known(group, req, fut)
        finally:
            if group.state is Preparing:
                self._try_complete_join(group)
            if group.generation == 0 and group.protocol_type is None:
                self._maybe_drop(group)  # created for a join that failed at once
        return await fut

    def _join_new(self, group: _Group, req: JoinGroupRequest, fut: asyncio.Future[JoinGroupResult]) -> None:
        if not group.supports(req.protocol_type, req.protocols):
            raise InconsistentGroupProtocolError(
                f"protocol type {req.protocol_type!r} / protocols {[p.name for p in req.protocols]} are "
                f"incompatible with group {group.group_id!r}"
            )
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        member_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            self._join_static(group, req, member_id, fut)
        elif req.require_known_member_id:
            self._check_size(group, member_id)
            group.pending[member_id] = self._timers.call_later(
                req.session_timeout_ms, lambda: self._expire_pending(group, member_id)
            )
            raise MemberIdRequired(member_id)
        else:
            self._check_size(group, member_id)
            self._add_member_and_rebalance(group, req, member_id, fut)

    def _join_known(self, group: _Group, req: JoinGroupRequest, fut: asyncio.Future[JoinGroupResult]) -> None:
        if not group.supports(req.protocol_type, req.protocols):
            raise InconsistentGroupProtocolError(
                f"protocols {[p.name for p in req.protocols]} share nothing with group {group.group_id!r}"
            )
        mid = req.member_id
        if mid in group.pending:
            self._check_size(group, mid)
            group.pending.pop(mid).cancel()
            self._add_member_and_rebalance(group, req, mid, fut)
            return
        member = self._validate_member(group, mid, req.group_instance_id)
        self._touch(group, member)
        state = group.state
        if state is Preparing:
            self._update_member_and_rebalance(group, member, req, fut)
        elif state is Completing:
            if member.matches(req.protocols):
                # It lost the JoinGroup response: answer it again.
                fut.set_result(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, req, fut)
        elif state is Stable:
            if mid == group.leader_id or not member.matches(req.protocols):
                # The leader rejoins to rebalance (e.g. its metadata changed).
                self._update_member_and_rebalance(group, member, req, fut)
            else:
                fut.set_result(self._join_result(group, member, with_members=False))
        else:
            raise UnknownMemberIdError(f"member {mid!r} is not in group {group.group_id!r}")

    def _join_static(
        self, group: _Group, req: JoinGroupRequest, new_id: str, fut: asyncio.Future[JoinGroupResult]
    ) -> None:
        assert req.group_instance_id is not None
        old_id = group.static.get(req.group_instance_id)
        if old_id is None:
            self._check_size(group, new_id)
            self._add_member_and_rebalance(group, req, new_id, fut)
            return
        member = group.members[old_id]
        leader_before = group.leader_id or ""
        member.fail_waiters(
            FencedInstanceIdError(f"group.instance.id {req.group_instance_id!r} rejoined as {new_id}")
        )
        del group.members[old_id]
        member.member_id = new_id
        group.members[new_id] = member
        group.static[req.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        member.update(req)
        self._touch(group, member)
        logger.info(
            "group %s: static member %s replaced %s with %s",
            group.group_id,
            req.group_instance_id,
            old_id,
            new_id,
        )
        state = group.state
        if state is Stable and group.select_protocol() == group.protocol_name:
            # Nothing changes for the others: no rebalance; it keeps its assignment.
            skip = new_id == group.leader_id and req.supports_skip_assignment
            fut.set_result(
                JoinGroupResult(
                    member_id=new_id,
                    generation_id=group.generation,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    # Without KIP-814 a rejoining leader must not think it leads: a Stable
                    # group would not pass on a new assignment from it.
                    leader_id=(group.leader_id or "") if skip else leader_before,
                    skip_assignment=skip,
                    members=group.join_members() if skip else (),
                )
            )
            return
        member.join_future = fut
        if state is not Preparing:
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")

    def _add_member_and_rebalance(
        self, group: _Group, req: JoinGroupRequest, member_id: str, fut: asyncio.Future[JoinGroupResult]
    ) -> None:
        member = _Member(member_id, req, self._clock.monotonic())
        member.join_future = fut
        if group.state is Preparing and group.initial_delay:
            group.new_member_added = True
        group.add(member)
        self._arm(group, member, member.deadline)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _update_member_and_rebalance(
        self, group: _Group, member: _Member, req: JoinGroupRequest, fut: asyncio.Future[JoinGroupResult]
    ) -> None:
        member.update(req)
        if member.join_future is not None and not member.join_future.done():
            # A retried JoinGroup: the earlier one is answered, not left hanging.
            member.join_future.set_exception(RebalanceInProgressError("superseded by a newer JoinGroup"))
        member.join_future = fut
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _join_result(self, group: _Group, member: _Member, *, with_members: bool = True) -> JoinGroupResult:
        leader = group.leader_id or ""
        return JoinGroupResult(
            member_id=member.member_id,
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=leader,
            members=group.join_members() if with_members and member.member_id == leader else (),
        )

    def _expire_pending(self, group: _Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is None:
            return
        logger.info("group %s: pending member %s never rejoined", group.group_id, member_id)
        if group.state is Preparing:
            self._try_complete_join(group)
        if group.generation == 0 and group.protocol_type is None:
            self._maybe_drop(group)

    # --- rebalancing ----------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: _Group, reason: str) -> None:
        if group.state in (Stable, Completing, Empty):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: _Group, reason: str) -> None:
        if group.state is Completing:
            for m in group.members.values():
                m.assignment = b""
                if m.sync_future is not None:
                    if not m.sync_future.done():
                        m.sync_future.set_exception(RebalanceInProgressError(f"rebalancing: {reason}"))
                    m.sync_future = None
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        if group.join_timer is not None:
            group.join_timer.cancel()
        initial = group.state is Empty
        self._transition(group, Preparing)
        logger.info("group %s: rebalancing (generation %d): %s", group.group_id, group.generation, reason)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            group.initial_delay = True
            group.new_member_added = False
            group.join_timer = self._timers.call_later(
                delay, lambda: self._on_initial_delay(group, remaining)
            )
        else:
            group.join_timer = self._timers.call_later(
                group.rebalance_timeout_ms, lambda: self._complete_join(group)
            )
            self._try_complete_join(group)

    def _on_initial_delay(self, group: _Group, remaining: int) -> None:
        if not self._current(group) or group.state is not Preparing:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.join_timer = self._timers.call_later(
                delay, lambda: self._on_initial_delay(group, remaining - delay)
            )
            return
        self._complete_join(group)

    def _try_complete_join(self, group: _Group) -> None:
        if group.state is Preparing and not group.initial_delay and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: _Group) -> None:
        if not self._current(group) or group.state is not Preparing:
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay = False
        for m in list(group.members.values()):
            if m.join_future is None and m.instance_id is None:
                logger.info("group %s: member %s did not rejoin in time", group.group_id, m.member_id)
                m.fail_waiters(UnknownMemberIdError("removed: did not rejoin in time"))
                group.remove(m)
        joined = [m for m in group.members.values() if m.join_future is not None]
        if group.members and not joined:
            # Only static members that have not rejoined (yet): give them another round.
            group.join_timer = self._timers.call_later(
                group.rebalance_timeout_ms, lambda: self._complete_join(group)
            )
            return
        leader = group.members.get(group.leader_id or "")
        if leader is None or leader.join_future is None:
            group.leader_id = joined[0].member_id if joined else None
        group.generation += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            self._transition(group, Completing)
        else:
            group.protocol_name = None
            group.leader_id = None
            self._transition(group, Empty)
        self._store_group(group)
        logger.info(
            "group %s: generation %d, %d members, protocol %s, leader %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        if group.state is Empty:
            return
        members = group.join_members()
        for m in group.members.values():
            fut = m.join_future
            if fut is not None:
                m.join_future = None
                m.is_new = False
                self._touch(group, m)
                if not fut.done():
                    fut.set_result(
                        JoinGroupResult(
                            member_id=m.member_id,
                            generation_id=group.generation,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            leader_id=group.leader_id or "",
                            members=members if m.member_id == group.leader_id else (),
                        )
                    )
        group.pending_sync = set(group.members)
        generation = group.generation
        group.sync_timer = self._timers.call_later(
            group.rebalance_timeout_ms, lambda: self._on_sync_timeout(group, generation)
        )

    def _on_sync_timeout(self, group: _Group, generation: int) -> None:
        if (
            not self._current(group)
            or group.generation != generation
            or group.state not in (Completing, Stable)
            or not group.pending_sync
        ):
            return
        for mid in sorted(group.pending_sync):
            m = group.members.get(mid)
            if m is not None:
                logger.info("group %s: member %s did not sync in time", group.group_id, mid)
                m.fail_waiters(UnknownMemberIdError("removed: did not sync in time"))
                group.remove(m)
        self._prepare_rebalance(group, "members did not send SyncGroup in time")

    def _remove_member_and_update(self, group: _Group, member: _Member, reason: str) -> None:
        logger.info("group %s: removing member %s: %s", group.group_id, member.member_id, reason)
        member.fail_waiters(UnknownMemberIdError(f"member removed: {reason}"))
        group.remove(member)
        if group.state in (Stable, Completing):
            self._prepare_rebalance(group, f"member {member.member_id} left: {reason}")
        elif group.state is Preparing:
            self._try_complete_join(group)

    def _on_member_timer(self, group: _Group, member: _Member) -> None:
        member.timer = None
        if not self._current(group) or group.members.get(member.member_id) is not member:
            return
        now = self._clock.monotonic()
        session = member.session_timeout_ms / 1000.0
        if member.join_future is not None:
            if member.is_new:
                limit = member.joined_at + NEW_MEMBER_JOIN_TIMEOUT_MS / 1000.0
                if now >= limit:
                    self._remove_member_and_update(group, member, "new member did not complete its join")
                    return
                self._arm(group, member, min(now + session, limit))
            else:
                self._arm(group, member, now + session)
        elif member.sync_future is not None:
            self._arm(group, member, now + session)
        elif now < member.deadline:
            self._arm(group, member, member.deadline)
        else:
            self._remove_member_and_update(group, member, "session timed out")

    # --- SyncGroup ----------------------------------------------------------------------------

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResult:
        """The member's assignment for the current generation; followers wait for the
        leader's SyncGroup."""
        self._serving(req.group_id)
        if not req.group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        group = self._groups.get(req.group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {req.group_id!r} does not exist")
        member = self._validate_member(group, req.member_id, req.group_instance_id)
        if req.generation_id != group.generation:
            raise IllegalGenerationError(
                f"generation {req.generation_id} is not group {group.group_id!r}'s {group.generation}"
            )
        if req.protocol_type is not None and req.protocol_type != group.protocol_type:
            raise InconsistentGroupProtocolError(
                f"protocol type {req.protocol_type!r} is not the group's {group.protocol_type!r}"
            )
        if req.protocol_name is not None and req.protocol_name != group.protocol_name:
            raise InconsistentGroupProtocolError(
                f"protocol {req.protocol_name!r} is not the group's {group.protocol_name!r}"
            )
        state = group.state
        if state is Preparing:
            raise RebalanceInProgressError(f"group {group.group_id!r} is rebalancing")
        self._touch(group, member)
        group.pending_sync.discard(member.member_id)
        if state is Stable:
            return SyncGroupResult(group.protocol_type, group.protocol_name, member.assignment)
        if state is not Completing:
            raise UnknownMemberIdError(f"member {req.member_id!r} is not in group {group.group_id!r}")
        fut: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_exception(RebalanceInProgressError("superseded by a newer SyncGroup"))
        member.sync_future = fut
        if member.member_id == group.leader_id:
            given = dict(req.assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            self._transition(group, Stable)
            for m in group.members.values():
                f = m.sync_future
                if f is not None:
                    m.sync_future = None
                    if not f.done():
                        f.set_result(SyncGroupResult(group.protocol_type, group.protocol_name, m.assignment))
            logger.info("group %s: generation %d is stable", group.group_id, group.generation)
        return await fut

    # --- Heartbeat and LeaveGroup ---------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None = None
    ) -> None:
        """Keep the member alive. RebalanceInProgressError: rejoin."""
        self._serving(group_id)
        if not group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {group_id!r} does not exist")
        member = self._validate_member(group, member_id, group_instance_id)
        if generation_id != group.generation:
            raise IllegalGenerationError(
                f"generation {generation_id} is not group {group_id!r}'s {group.generation}"
            )
        self._touch(group, member)
        if group.state is Preparing:
            raise RebalanceInProgressError(f"group {group_id!r} is rebalancing: rejoin")

    def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> list[LeaveResult]:
        """Remove members (by member id, or by group.instance.id with an empty member id);
        one result per identity, in order."""
        self._serving(group_id)
        if not group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        group = self._groups.get(group_id)
        out: list[LeaveResult] = []
        for ident in members:
            try:
                if group is None:
                    raise UnknownMemberIdError(f"group {group_id!r} does not exist")
                mid = ident.member_id
                if ident.group_instance_id is not None:
                    current = group.static.get(ident.group_instance_id)
                    if current is None:
                        raise UnknownMemberIdError(
                            f"no member with group.instance.id {ident.group_instance_id!r}"
                        )
                    if mid == UNKNOWN_MEMBER_ID:
                        mid = current
                    elif mid != current:
                        raise FencedInstanceIdError(
                            f"group.instance.id {ident.group_instance_id!r} is member {current}, not {mid}"
                        )
                if mid in group.pending:
                    group.pending.pop(mid).cancel()
                    if group.state is Preparing:
                        self._try_complete_join(group)
                else:
                    member = group.members.get(mid)
                    if member is None:
                        raise UnknownMemberIdError(f"member {mid!r} is not in group {group_id!r}")
                    why = f"left the group ({ident.reason})" if ident.reason else "left the group"
                    self._remove_member_and_update(group, member, why)
                out.append(LeaveResult(ident.member_id, ident.group_instance_id, None))
            except StrataError as e:
                out.append(LeaveResult(ident.member_id, ident.group_instance_id, e))
        return out

    # --- offsets ------------------------------------------------------------------------------------

    async def commit_offsets(self, req: OffsetCommitRequest) -> dict[TopicPartition, StrataError | None]:
        """Commit offsets; returns each partition's outcome once the valid ones are durable.
        Raises for request-level failures (unknown member, illegal generation, rebalance
        in progress, coordinator not available), which apply to every partition."""
        store = self._serving(req.group_id)
        group = self._groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                raise IllegalGenerationError(f"group {req.group_id!r} does not exist")
            group = self._new_group(req.group_id)
        member: _Member | None = None
        if req.generation_id >= 0 or req.member_id != UNKNOWN_MEMBER_ID or req.group_instance_id is not None:
            member = self._validate_member(group, req.member_id, req.group_instance_id)
            if req.generation_id != group.generation:
                raise IllegalGenerationError(
                    f"generation {req.generation_id} is not group {group.group_id!r}'s {group.generation}"
                )
        elif group.state is not Empty:
            raise UnknownMemberIdError(
                f"group {group.group_id!r} has members: commits without a member id and generation "
                "are accepted only while it is empty"
            )
        if group.state is Completing:
            raise RebalanceInProgressError(f"group {group.group_id!r} is completing a rebalance")
        if member is not None:
            self._touch(group, member)
        now = self._now_ms()
        expire = now + req.retention_time_ms if req.retention_time_ms >= 0 else None
        results: dict[TopicPartition, StrataError | None] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, offset, epoch, metadata in req.offsets:
            md = metadata or ""
            if len(md) > limit:
                results[tp] = OffsetMetadataTooLargeError(
                    f"metadata of {len(md)} characters exceeds offset.metadata.max.bytes={limit}"
                )
            elif not self._partition_exists(tp.topic, tp.partition):
                results[tp] = UnknownTopicOrPartitionError(f"unknown partition {tp.topic}-{tp.partition}")
            else:
                valid[tp] = OffsetAndMetadata(offset, epoch, md, now, expire)
                results[tp] = None
        if valid:
            error = await self._durable(lambda: store.commit(group.group_id, valid), "commit")
            if error is not None:
                for tp in valid:
                    results[tp] = error
        return results

    async def _durable(self, write: Callable[[], asyncio.Future[None]], what: str) -> StrataError | None:
        """Run a store write and wait (at most offsets.commit.timeout.ms) until it is
        durable; the error to report, if any."""
        try:
            fut = write()
        except StrataError as e:
            return e
        return await self._wait_durable(fut, what)

    async def _wait_durable(self, fut: asyncio.Future[None], what: str) -> StrataError | None:
        timeout = self.config.offsets_commit_timeout_ms / 1000.0
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            return RequestTimedOutError(
                f"{what} not durable within offsets.commit.timeout.ms={self.config.offsets_commit_timeout_ms}"
            )
        except StrataError as e:
            return e
        return None

    def committed_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's durable committed offsets: all of them, or those of ``partitions``
        that have one (OffsetFetch; an unknown group has none)."""
        store = self._serving(group_id)
        offsets = store.committed(group_id)
        if partitions is None:
            return offsets
        return {tp: offsets[tp] for tp in partitions if tp in offsets}

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, StrataError | None]:
        """OffsetDelete: every partition of an Empty group; of a consumer group with
        members, those of topics no member subscribes to (others get
        GROUP_SUBSCRIBED_TO_TOPIC). Raises GroupIdNotFoundError, NonEmptyGroupError."""
        store = self._serving(group_id)
        group = self._groups.get(group_id)
        if group is None or group.state is Dead:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        subscribed: set[str] | None = None
        if group.state is not Empty:
            if group.protocol_type != PROTOCOL_TYPE:
                raise NonEmptyGroupError(
                    f"group {group_id!r} has members and protocol type {group.protocol_type!r}; "
                    "its offsets can be deleted only when it is empty"
                )
            subscribed = self._subscribed_topics(group)
        results: dict[TopicPartition, StrataError | None] = {}
        eligible: list[TopicPartition] = []
        for tp in partitions:
            if not self._partition_exists(tp.topic, tp.partition):
                results[tp] = UnknownTopicOrPartitionError(f"unknown partition {tp.topic}-{tp.partition}")
            elif group.state is not Empty and (subscribed is None or tp.topic in subscribed):
                results[tp] = GroupSubscribedToTopicError(
                    f"a member of group {group_id!r} subscribes to topic {tp.topic!r}"
                )
            else:
                eligible.append(tp)
                results[tp] = None
        if eligible:
            error = await self._durable(lambda: store.delete_offsets(group_id, eligible), "offset deletion")
            if error is not None:
                for tp in eligible:
                    results[tp] = error
        self._maybe_drop(group)
        return results

    def _subscribed_topics(self, group: _Group) -> set[str] | None:
        """Topics the members subscribe to; None if unknown (a subscription that does not
        parse), which callers treat as "every topic", as Kafka does."""
        if group.protocol_type != PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for m in group.members.values():
            names = [group.protocol_name] if group.protocol_name is not None else list(m.protocol_names)
            for name in names:
                try:
                    topics.update(decode_subscription(m.metadata(name)).topics)
                except ConsumerProtocolError:
                    return None
        return topics

    # --- groups as a whole ----------------------------------------------------------------------------

    def list_groups(self, states: Collection[str | GroupState] | None = None) -> list[GroupListing]:
        """Every group, optionally only those in ``states`` (state names compare
        case-insensitively; unknown names match nothing), sorted by id."""
        self._ready()
        wanted: set[str] | None = None
        if states:
            wanted = {(s.value if isinstance(s, GroupState) else s).lower() for s in states}
        return [
            GroupListing(g.group_id, g.protocol_type or "", g.state)
            for gid, g in sorted(self._groups.items())
            if wanted is None or g.state.value.lower() in wanted
        ]

    def describe_group(self, group_id: str) -> GroupDescription:
        """The group as it is now. GroupIdNotFoundError if there is no such group."""
        self._serving(group_id)
        group = self._groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        members = []
        for m in group.members.values():
            assigned: tuple[TopicPartition, ...] = ()
            if group.protocol_type == PROTOCOL_TYPE and m.assignment:
                try:
                    assigned = tuple(
                        TopicPartition(tp.topic, p)
                        for tp in decode_assignment(m.assignment).partitions
                        for p in tp.partitions
                    )
                except ConsumerProtocolError:
                    pass
            members.append(
                MemberDescription(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout_ms=m.session_timeout_ms,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    protocols=m.protocols,
                    metadata=m.metadata(group.protocol_name),
                    assignment=m.assignment,
                    assigned_partitions=assigned,
                )
            )
        return GroupDescription(
            group_id=group.group_id,
            state=group.state,
            protocol_type=group.protocol_type or "",
            protocol_name=group.protocol_name or "",
            generation_id=group.generation,
            leader_id=group.leader_id or "",
            members=tuple(members),
        )

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, StrataError | None]:
        """DeleteGroups: each Empty group is forgotten and its offsets deleted; others get
        NON_EMPTY_GROUP / GROUP_ID_NOT_FOUND / NOT_COORDINATOR."""
        results: dict[str, StrataError | None] = {}
        writes: dict[str, asyncio.Future[None]] = {}
        for gid in group_ids:
            try:
                store = self._serving(gid)
                group = self._groups.get(gid)
                if group is None or group.state is Dead:
                    raise GroupIdNotFoundError(f"group {gid!r} does not exist")
                if group.state is not Empty:
                    raise NonEmptyGroupError(f"group {gid!r} has members (state {group.state.value})")
                self._drop(group)
                writes[gid] = store.delete_group(gid)
                results[gid] = None
            except StrataError as e:
                results[gid] = e
        for gid, fut in writes.items():
            results[gid] = await self._wait_durable(fut, f"deletion of group {gid}")
        return results

    # --- housekeeping --------------------------------------------------------------------------

    def _schedule_expiry(self) -> None:
        def run() -> None:
            try:
                self.expire_offsets()
            finally:
                if not self._closing:
                    self._schedule_expiry()

        self._expiry_timer = self._timers.call_later(self.config.offsets_retention_check_interval_ms, run)

    def expire_offsets(self) -> int:
        """Delete expired offsets (rules: module docstring) and forget Empty groups left
        with nothing; returns how many offsets were deleted."""
        store = self._store
        if store is None or self._closing:
            return 0
        now = self._now_ms()
        retention = self.config.offsets_retention_ms

        def expired(o: OffsetAndMetadata, base_ms: int) -> bool:
            if o.expire_timestamp_ms is not None:
                return now >= o.expire_timestamp_ms
            return now - base_ms >= retention

        removed = 0
        for group in list(self._groups.values()):
            offsets = store.committed(group.group_id)
            doomed: list[TopicPartition] = []
            if group.protocol_type is not None and group.state is Empty:
                for tp, o in offsets.items():
                    base = (
                        group.state_timestamp_ms if group.state_timestamp_ms >= 0 else o.commit_timestamp_ms
                    )
                    if expired(o, base):
                        doomed.append(tp)
            elif group.protocol_type == PROTOCOL_TYPE and group.state is Stable:
                subscribed = self._subscribed_topics(group)
                if subscribed is not None:
                    doomed = [
                        tp
                        for tp, o in offsets.items()
                        if tp.topic not in subscribed and expired(o, o.commit_timestamp_ms)
                    ]
            elif group.protocol_type is None:
                doomed = [tp for tp, o in offsets.items() if expired(o, o.commit_timestamp_ms)]
            if doomed:
                logger.info("group %s: %d committed offsets expired", group.group_id, len(doomed))
                try:
                    self._background(
                        store.delete_offsets(group.group_id, doomed), f"expiring offsets of {group.group_id}"
                    )
                    removed += len(doomed)
                except StrataError as e:
                    logger.error("cannot expire offsets of group %s: %s", group.group_id, e)
            self._maybe_drop(group)
        return removed

    def on_topic_deleted(self, topic: str) -> None:
        """A topic was deleted: delete every group's offsets of it, as Kafka does."""
        store = self._store
        if store is None or self._closing:
            return
        try:
            self._background(store.delete_topic(topic), f"deleting offsets of topic {topic}")
        except StrataError as e:
            logger.error("cannot delete offsets of topic %s: %s", topic, e)
            return
        for group in list(self._groups.values()):
            self._maybe_drop(group)
