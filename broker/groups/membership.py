"""Kafka's classic group membership protocol: the state machine of every group.

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

Pure state and timers: ``GroupMembership`` does no I/O. Its deadlines are timers of the
shared heap (broker.groups.timers) over the injectable clock, and the two things it needs
persisted go through ``GroupPersistence`` (broker.groups.offset_manager): the group's
metadata when a join phase completes, and forgetting a group that has become Empty with
nothing left. Callers (the GroupCoordinator façade) have checked beforehand that this
node coordinates the group and that the offsets are loaded.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Final, Protocol

from broker.groups.config import GroupConfig
from broker.groups.group import Completing, Dead, Empty, Group, Member, Preparing, Stable
from broker.groups.timers import Clock, Timers
from broker.groups.types import (
    UNKNOWN_MEMBER_ID,
    GroupDescription,
    GroupListing,
    GroupState,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveResult,
    MemberIdentity,
    MemberIdRequired,
    SyncGroupRequest,
    SyncGroupResult,
)
from hot.errors import (
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    RebalanceInProgressError,
    StrataError,
    UnknownMemberIdError,
)

logger = logging.getLogger("strata.groups")

NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 300_000


class GroupPersistence(Protocol):
    """What the state machine needs written (implemented by the offsets manager)."""

    def store_group(self, group: Group) -> None:
        """Persist the group's generation, protocol and leader (in the background)."""
        ...

    def maybe_drop(self, group: Group) -> None:
        """Forget ``group`` if it is Empty with no members and no offsets left."""
        ...


class GroupMembership:
    """Every group this node coordinates, and the JoinGroup / SyncGroup / Heartbeat /
    LeaveGroup protocol over them (rules: module docstring). All on the event loop."""

    def __init__(
        self, config: GroupConfig, clock: Clock, timers: Timers, persistence: GroupPersistence
    ) -> None:
        self.config = config
        self._clock = clock
        self._timers = timers
        self._persistence = persistence
        self.groups: dict[str, Group] = {}

    # --- the groups ---------------------------------------------------------------------------

    def adopt(self, group: Group) -> None:
        """Take over a group loaded from the offsets log, unless one is known by its id."""
        self.groups.setdefault(group.group_id, group)

    def unload(self, owned: Callable[[str], bool], error: Callable[[str], StrataError]) -> int:
        """Forget every group for which ``owned(group_id)`` holds; their parked requests
        fail with ``error(group_id)``. Returns how many."""
        doomed = [g for gid, g in self.groups.items() if owned(gid)]
        for g in doomed:
            g.cancel_timers()
            for m in list(g.members.values()):
                m.fail_waiters(error(g.group_id))
            del self.groups[g.group_id]
        return len(doomed)

    def detach_members(self, group: Group, error: StrataError) -> None:
        """The group became a consumer group (an online upgrade, broker.groups.classic_bridge):
        its members move there; this group stays Empty, the holder of its offsets. Parked
        JoinGroup/SyncGroup requests fail with ``error`` (their clients rejoin, through
        the bridge), as Kafka completes them with REBALANCE_IN_PROGRESS."""
        group.cancel_timers()
        for m in list(group.members.values()):
            m.fail_waiters(error)
            group.remove(m)
        group.pending_sync.clear()
        group.initial_delay = False
        group.leader_id = None
        self._transition(group, Empty)

    def adopt_converted(
        self,
        group_id: str,
        generation: int,
        members: Sequence[tuple[JoinGroupRequest, bytes]],
        *,
        rebalance: bool = True,
    ) -> Group:
        """A consumer group whose last consumer-protocol member left becomes classic again
        (an online downgrade): its classic members, with ``generation`` and their current
        assignments, in a Stable group that starts a rebalance at once, as Kafka's (not
        when ``rebalance`` is false: a static member's join replaced the last
        consumer-protocol member, after which Kafka keeps the group Stable)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.new_group(group_id)
        group.cancel_timers()
        for m in list(group.members.values()):
            group.remove(m)
        group.generation = generation
        now = self._clock.monotonic()
        for req, assignment in members:
            member = Member(req.member_id, req, now)
            member.assignment = assignment
            member.is_new = False
            group.add(member)
            self.touch(group, member)
        group.protocol_type = members[0][0].protocol_type if members else None
        group.protocol_name = group.select_protocol() if group.members else None
        self._transition(group, Stable)
        if rebalance:
            self._prepare_rebalance(group, "the group was downgraded to the classic protocol")
        return group

    def rebalance(self, group: Group, reason: str) -> None:
        self._prepare_rebalance(group, reason)

    def fail_all(self, error: StrataError) -> None:
        """Shutting down: stop every group's timers and fail the parked requests."""
        for g in self.groups.values():
            g.cancel_timers()
            for m in g.members.values():
                m.fail_waiters(error)

    def list_groups(self, states: Collection[str | GroupState] | None = None) -> list[GroupListing]:
        """Every group, optionally only those in ``states`` (state names compare
        case-insensitively; unknown names match nothing), sorted by id."""
        wanted: set[str] | None = None
        if states:
            wanted = {(s.value if isinstance(s, GroupState) else s).lower() for s in states}
        return [
            GroupListing(g.group_id, g.protocol_type or "", g.state)
            for gid, g in sorted(self.groups.items())
            if wanted is None or g.state.value.lower() in wanted
        ]

    def describe_group(self, group_id: str) -> GroupDescription:
        """The group as it is now. GroupIdNotFoundError if there is no such group."""
        group = self.groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        return group.describe()

    # --- helpers (also the offsets manager's view of the groups) -------------------------------

    def _now_ms(self) -> int:
        return self._clock.time_ms()

    def new_group(self, group_id: str) -> Group:
        """A new Empty group (a first join, or a simple consumer's first commit)."""
        g = Group(group_id, self._now_ms())
        self.groups[group_id] = g
        return g

    def _transition(self, group: Group, state: GroupState) -> None:
        group.state = state
        group.state_timestamp_ms = self._now_ms()

    def current(self, group: Group) -> bool:
        """Whether ``group`` is still the one known by its id (a timer may outlive it)."""
        return self.groups.get(group.group_id) is group

    def drop(self, group: Group) -> None:
        """Empty -> Dead: forget the group."""
        group.cancel_timers()
        self._transition(group, Dead)
        if self.current(group):
            del self.groups[group.group_id]

    def validate_member(self, group: Group, member_id: str, instance_id: str | None) -> Member:
        """The member a request names; FENCED_INSTANCE_ID when its group.instance.id now
        belongs to another member id, UNKNOWN_MEMBER_ID when there is no such member."""
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

    def touch(self, group: Group, member: Member) -> None:
        """A sign of life: push the member's session deadline out."""
        member.deadline = self._clock.monotonic() + member.session_timeout_ms / 1000.0
        if member.timer is None or member.timer.cancelled or member.timer.deadline > member.deadline:
            self._arm(group, member, member.deadline)

    def _arm(self, group: Group, member: Member, deadline: float) -> None:
        if member.timer is not None:
            member.timer.cancel()
        member.timer = self._timers.call_at(deadline, lambda: self._on_member_timer(group, member))

    def _check_size(self, group: Group, member_id: str) -> None:
        if member_id not in group.members and len(group.members) >= self.config.max_size:
            raise GroupMaxSizeReachedError(
                f"group {group.group_id!r} already has group.max.size={self.config.max_size} members"
            )

    # --- JoinGroup ----------------------------------------------------------------------------

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResult:
        """Join (or rejoin) a group; returns when the join phase completes (or at once when
        nothing needs to change). Raises MemberIdRequired (with the id) for new dynamic
        members of v4+ clients, and the other JoinGroup errors."""
        if not req.group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session timeout {req.session_timeout_ms} ms is outside [{cfg.min_session_timeout_ms}, "
                f"{cfg.max_session_timeout_ms}] (group.min/max.session.timeout.ms)"
            )
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id != UNKNOWN_MEMBER_ID:
                raise UnknownMemberIdError(f"group {req.group_id!r} does not exist")
            group = self.new_group(req.group_id)
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
                self._persistence.maybe_drop(group)  # created for a join that failed at once
        return await fut

    def _join_new(self, group: Group, req: JoinGroupRequest, fut: asyncio.Future[JoinGroupResult]) -> None:
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

    def _join_known(self, group: Group, req: JoinGroupRequest, fut: asyncio.Future[JoinGroupResult]) -> None:
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
        member = self.validate_member(group, mid, req.group_instance_id)
        self.touch(group, member)
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
        self, group: Group, req: JoinGroupRequest, new_id: str, fut: asyncio.Future[JoinGroupResult]
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
        self.touch(group, member)
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
        self, group: Group, req: JoinGroupRequest, member_id: str, fut: asyncio.Future[JoinGroupResult]
    ) -> None:
        member = Member(member_id, req, self._clock.monotonic())
        member.join_future = fut
        if group.state is Preparing and group.initial_delay:
            group.new_member_added = True
        group.add(member)
        self._arm(group, member, member.deadline)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinGroupRequest, fut: asyncio.Future[JoinGroupResult]
    ) -> None:
        member.update(req)
        if member.join_future is not None and not member.join_future.done():
            # A retried JoinGroup: the earlier one is answered, not left hanging.
            member.join_future.set_exception(RebalanceInProgressError("superseded by a newer JoinGroup"))
        member.join_future = fut
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _join_result(self, group: Group, member: Member, *, with_members: bool = True) -> JoinGroupResult:
        leader = group.leader_id or ""
        return JoinGroupResult(
            member_id=member.member_id,
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=leader,
            members=group.join_members() if with_members and member.member_id == leader else (),
        )

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is None:
            return
        logger.info("group %s: pending member %s never rejoined", group.group_id, member_id)
        if group.state is Preparing:
            self._try_complete_join(group)
        if group.generation == 0 and group.protocol_type is None:
            self._persistence.maybe_drop(group)

    # --- rebalancing ----------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state in (Stable, Completing, Empty):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
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

    def _on_initial_delay(self, group: Group, remaining: int) -> None:
        if not self.current(group) or group.state is not Preparing:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.join_timer = self._timers.call_later(
                delay, lambda: self._on_initial_delay(group, remaining - delay)
            )
            return
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.state is Preparing and not group.initial_delay and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if not self.current(group) or group.state is not Preparing:
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
        self._persistence.store_group(group)
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
                self.touch(group, m)
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

    def _on_sync_timeout(self, group: Group, generation: int) -> None:
        if (
            not self.current(group)
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

    def _remove_member_and_update(self, group: Group, member: Member, reason: str) -> None:
        logger.info("group %s: removing member %s: %s", group.group_id, member.member_id, reason)
        member.fail_waiters(UnknownMemberIdError(f"member removed: {reason}"))
        group.remove(member)
        if group.state in (Stable, Completing):
            self._prepare_rebalance(group, f"member {member.member_id} left: {reason}")
        elif group.state is Preparing:
            self._try_complete_join(group)

    def _on_member_timer(self, group: Group, member: Member) -> None:
        member.timer = None
        if not self.current(group) or group.members.get(member.member_id) is not member:
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
        if not req.group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        group = self.groups.get(req.group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {req.group_id!r} does not exist")
        member = self.validate_member(group, req.member_id, req.group_instance_id)
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
        self.touch(group, member)
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
        if not group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        group = self.groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {group_id!r} does not exist")
        member = self.validate_member(group, member_id, group_instance_id)
        if generation_id != group.generation:
            raise IllegalGenerationError(
                f"generation {generation_id} is not group {group_id!r}'s {group.generation}"
            )
        self.touch(group, member)
        if group.state is Preparing:
            raise RebalanceInProgressError(f"group {group_id!r} is rebalancing: rejoin")

    def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> list[LeaveResult]:
        """Remove members (by member id, or by group.instance.id with an empty member id);
        one result per identity, in order."""
        if not group_id:
            raise InvalidGroupIdError("the group id must not be empty")
        group = self.groups.get(group_id)
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
