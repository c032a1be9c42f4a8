"""KIP-848 consumer groups: the coordinator's state machine for ConsumerGroupHeartbeat.

Pure: no I/O; time comes from an injectable ``Clock`` and deadlines are ``Timers`` of the
coordinator's heap (broker.groups.timers), topics from a ``TopicsImage`` the caller hands
in with each heartbeat. The rules, as Kafka 4's GroupMetadataManager runs them:

* The **group epoch** counts changes of what the assignment depends on: a member
  joining, leaving or being fenced, a subscription (names, regular expression, assignor)
  changing, the partition count of a subscribed topic changing (or a subscribed topic
  appearing or disappearing). The **target assignment** is recomputed by the server
  assignor (broker.groups.assignors) when the group epoch passed the **assignment
  epoch**, which then takes the group epoch.
* Each member converges on its target incrementally (Kafka's CurrentAssignmentBuilder):
  partitions it must give up are first revoked (state ``UNREVOKED_PARTITIONS``, its epoch
  unchanged) until a heartbeat reports it no longer owns them; then it takes the target
  epoch and the target partitions no other member still holds (``UNRELEASED_PARTITIONS``
  while some are held, ``STABLE`` once it has them all). A partition is never owned by
  two members at once.
* Member epochs: 0 joins, -1 leaves, -2 is a static member's temporary leave (it keeps
  its assignment until its session expires or its ``group.instance.id`` rejoins). A
  heartbeat with an epoch above the member's is fenced (FENCED_MEMBER_EPOCH); one with
  the member's previous epoch is accepted when the partitions it owns are within its
  assignment (a lost response), otherwise fenced.
* A member whose heartbeats stop for ``group.consumer.session.timeout.ms`` is removed;
  one that has not revoked within its rebalance timeout is removed too.
* Regular-expression subscriptions use RE2 syntax (google-re2), matched against every
  topic name except internal ones (``__`` prefix), as Kafka matches them.

Pure here: broker.groups.coordinator owns the groups and writes each change as Kafka's
ConsumerGroup* records (broker.groups.consumer_records) before answering; the offsets
manager keeps their committed offsets.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import re2  # type: ignore[import-untyped]  # google-re2 ships no stubs

from broker.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, MemberSubscription
from broker.groups.config import GroupConfig
from broker.groups.timers import Clock, Timer, Timers
from hot.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)

JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1
STATIC_LEAVE_EPOCH: Final = -2

# topic name -> partitions
Assignment = dict[str, frozenset[int]]


class TopicsImage(Protocol):
    """The topics the coordinator sees (the cluster's metadata view)."""

    def partition_count(self, topic: str) -> int | None:
        """Partitions of ``topic``, None when there is no such topic."""
        ...

    def topic_names(self) -> Iterable[str]: ...


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatCall:
    """A ConsumerGroupHeartbeat, topics by name (the handler maps topic ids);
    None fields did not change since the member's previous heartbeat."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[str, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # None: unchanged, not sent


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    state: str
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment
    classic: bool = False  # a classic-protocol member (broker.groups.classic_bridge)


@dataclass(frozen=True, slots=True)
class ConsumerGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[MemberView, ...]


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """What a classic-protocol member of a consumer group joined with (Kafka's
    ClassicMemberMetadata): its session timeout and its (protocol name, metadata)
    list, in its order of preference (broker.groups.classic_bridge)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    revoking: Assignment = field(default_factory=dict)
    session_timer: Timer | None = None
    rebalance_timer: Timer | None = None
    # Set for a member of the classic protocol (JoinGroup/SyncGroup/Heartbeat) that the
    # group keeps through an online upgrade (broker.groups.classic_bridge).
    classic: ClassicMetadata | None = None
    sync_timer: Timer | None = None  # a classic member's SyncGroup deadline after its JoinGroup


class ConsumerGroup:
    """One consumer group's state (rules: module docstring)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}
        self.subscribed_partitions: dict[str, int] = {}  # what the current epoch saw
        self.assignor = DEFAULT_ASSIGNOR

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.assignment_epoch < self.group_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def consumer_protocol_members(self) -> list[ConsumerMember]:
        """The members that speak ConsumerGroupHeartbeat (not the classic ones)."""
        return [m for m in self.members.values() if m.classic is None]

    def subscribed_topics(self, image: TopicsImage) -> set[str]:
        return {t for m in self.members.values() for t in _member_topics(m, image)}

    def held_by_others(self, member_id: str) -> set[tuple[str, int]]:
        """Partitions another member still has (assigned or being revoked)."""
        out: set[tuple[str, int]] = set()
        for mid, m in self.members.items():
            if mid == member_id:
                continue
            for part in (m.assigned, m.revoking):
                out.update((t, p) for t, ps in part.items() for p in ps)
        return out

    def view(self) -> ConsumerGroupView:
        return ConsumerGroupView(
            group_id=self.group_id,
            state=self.state.value,
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            assignor=self.assignor,
            members=tuple(
                MemberView(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    state=m.state.value,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_topic_names,
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=dict(m.assigned),
                    target_assignment=dict(self.target.get(m.member_id, {})),
                    classic=m.classic is not None,
                )
                for m in sorted(self.members.values(), key=lambda m: m.member_id)
            ),
        )


_REGEX_CACHE: dict[str, Any] = {}


def compile_regex(pattern: str) -> Any:
    """An RE2 pattern, compiled once; InvalidRegularExpressionError if it is not one."""
    compiled = _REGEX_CACHE.get(pattern)
    if compiled is None:
        try:
            compiled = re2.compile(pattern)
        except re2.error as e:
            raise InvalidRegularExpressionError(f"SubscribedTopicRegex {pattern!r} is invalid: {e}") from None
        if len(_REGEX_CACHE) > 1024:
            _REGEX_CACHE.clear()
        _REGEX_CACHE[pattern] = compiled
    return compiled


def _member_topics(m: ConsumerMember, image: TopicsImage) -> set[str]:
    topics = set(m.subscribed_topic_names)
    if m.subscribed_topic_regex:
        rx = compile_regex(m.subscribed_topic_regex)
        topics.update(t for t in image.topic_names() if not t.startswith("__") and rx.fullmatch(t))
    return topics


def _minus(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Assignment:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _intersect(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> Assignment:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _subset(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> bool:
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


def _overlaps(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> bool:
    return any(ps & b.get(t, frozenset()) for t, ps in a.items())


def validate(call: HeartbeatCall) -> None:
    """Kafka's request checks (INVALID_REQUEST with its messages, UNSUPPORTED_ASSIGNOR)."""
    if not call.group_id:
        raise InvalidRequestError("GroupId can't be empty.")
    if call.instance_id is not None and not call.instance_id:
        raise InvalidRequestError("InstanceId can't be empty.")
    if call.rack_id is not None and not call.rack_id:
        raise InvalidRequestError("RackId can't be empty.")
    epoch = call.member_epoch
    # v1+ (KIP-1082): the client makes its member id, in every heartbeat.
    if (call.api_version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH) and not call.member_id:
        raise InvalidRequestError("MemberId can't be empty.")
    if epoch == JOIN_EPOCH:
        if call.rebalance_timeout_ms == -1:
            raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
        if call.owned is None or any(call.owned.values()):
            raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
        if call.subscribed_topic_names is None and call.subscribed_topic_regex is None:
            raise InvalidRequestError(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif epoch == STATIC_LEAVE_EPOCH:
        if call.instance_id is None:
            raise InvalidRequestError("InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise InvalidRequestError(f"MemberEpoch {epoch} is invalid.")
    if call.subscribed_topic_regex:
        compile_regex(call.subscribed_topic_regex)
    if call.server_assignor is not None and call.server_assignor not in ASSIGNORS:
        raise UnsupportedAssignorError(
            f"ServerAssignor {call.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(ASSIGNORS)}."
        )


class ConsumerGroups:
    """Every KIP-848 group of one coordinator (rules: module docstring)."""

    def __init__(self, config: GroupConfig, clock: Clock, timers: Timers) -> None:
        self.config = config
        self._clock = clock
        self._timers = timers
        self.groups: dict[str, ConsumerGroup] = {}
        # Called with the group id after a timer removed a member (persistence).
        self.on_change: Callable[[str], None] | None = None

    def adopt(self, group: ConsumerGroup) -> None:
        """Take over a group restored from its records (a coordinator loading its
        partition): every member gets a new session deadline, and a member revoking
        partitions its rebalance deadline, as Kafka's coordinator arms them on load."""
        old = self.groups.get(group.group_id)
        if old is not None:
            self.drop(old.group_id)
        self.groups[group.group_id] = group
        for m in group.members.values():
            self._arm_session(group, m)
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                self._arm_rebalance(group, m)

    # --- the heartbeat ------------------------------------------------------------------------

    def heartbeat(self, call: HeartbeatCall, image: TopicsImage) -> HeartbeatResult:
        validate(call)
        group = self.groups.get(call.group_id)
        if group is None:
            if call.member_epoch != JOIN_EPOCH:
                raise UnknownMemberIdError(f"member {call.member_id} is not in group {call.group_id}")
            group = self.groups[call.group_id] = ConsumerGroup(call.group_id)
        if call.member_epoch == LEAVE_EPOCH:
            return self._leave(group, call)
        if call.member_epoch == STATIC_LEAVE_EPOCH:
            return self._static_leave(group, call)
        before: Assignment | None
        if call.member_epoch == JOIN_EPOCH:
            member = self._join(group, call)
            before = None
        else:
            member = self._known_member(group, call)
            before = dict(member.assigned)
        before_epoch = member.member_epoch
        self._update_member(group, member, call, image)
        self._refresh_metadata(group, image)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, image)
        self._reconcile(group, member, call.owned)
        self._arm_session(group, member)
        changed = before is None or before != member.assigned or before_epoch != member.member_epoch
        return HeartbeatResult(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms,
            assignment=dict(member.assigned) if changed or call.owned is not None else None,
        )

    def _join(self, group: ConsumerGroup, call: HeartbeatCall) -> ConsumerMember:
        if call.instance_id is not None:
            held = group.static_members.get(call.instance_id)
            if held is not None:
                old = group.members[held]
                # Kafka: a consumer member replacing a consumer member must wait for it to
                # leave; a classic member (the online migration's) is replaced at once.
                if old.classic is None and old.member_epoch != STATIC_LEAVE_EPOCH:
                    raise UnreleasedInstanceIdError(
                        f"static member {call.instance_id} of group {group.group_id} has not left "
                        f"(member {held} holds it)"
                    )
                return self._replace_static(group, old, call)
        if call.member_id in group.members:
            # A known member rejoining with epoch 0 (fenced, or restarted with its id):
            # it starts again from nothing.
            self._remove(group, group.members[call.member_id])
        if len(group.members) >= self.config.consumer_max_size:
            raise GroupMaxSizeReachedError(
                f"group {group.group_id} has reached its maximum size {self.config.consumer_max_size}"
            )
        member_id = call.member_id or str(uuid.uuid4())
        member = ConsumerMember(member_id=member_id, instance_id=call.instance_id)
        group.members[member_id] = member
        if call.instance_id is not None:
            group.static_members[call.instance_id] = member_id
        group.group_epoch += 1
        return member

    def _replace_static(
        self, group: ConsumerGroup, old: ConsumerMember, call: HeartbeatCall
    ) -> ConsumerMember:
        """A static member's new incarnation takes over its predecessor's assignment and
        target, without a new group epoch."""
        self._cancel_timers(old)
        del group.members[old.member_id]
        member_id = call.member_id or str(uuid.uuid4())
        member = ConsumerMember(
            member_id=member_id,
            instance_id=call.instance_id,
            subscribed_topic_names=old.subscribed_topic_names,
            subscribed_topic_regex=old.subscribed_topic_regex,
            server_assignor=old.server_assignor,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            member_epoch=old.previous_member_epoch,
            previous_member_epoch=old.previous_member_epoch,
            assigned=dict(old.assigned),
            revoking=dict(old.revoking),
            state=old.state,
        )
        group.members[member_id] = member
        assert call.instance_id is not None
        group.static_members[call.instance_id] = member_id
        if old.member_id in group.target:
            group.target[member_id] = group.target.pop(old.member_id)
        return member

    def _known_member(self, group: ConsumerGroup, call: HeartbeatCall) -> ConsumerMember:
        member = group.members.get(call.member_id)
        if member is None:
            raise UnknownMemberIdError(f"member {call.member_id} is not in group {group.group_id}")
        if call.instance_id is not None and member.instance_id != call.instance_id:
            raise FencedInstanceIdError(
                f"member {call.member_id} has instance id {member.instance_id}, not {call.instance_id}"
            )
        received = call.member_epoch
        if received > member.member_epoch:
            raise FencedMemberEpochError(
                f"member {call.member_id} epoch {received} is ahead of the coordinator's "
                f"{member.member_epoch}: rejoin"
            )
        if received < member.member_epoch:
            # The response that gave the member its new epoch may have been lost: accept
            # the previous epoch while what the member owns is still its own.
            owned = call.owned
            if not (
                received == member.previous_member_epoch
                and owned is not None
                and _subset(owned, member.assigned)
            ):
                raise FencedMemberEpochError(
                    f"member {call.member_id} epoch {received} is stale "
                    f"(current {member.member_epoch}): rejoin"
                )
        return member

    def _update_member(
        self, group: ConsumerGroup, member: ConsumerMember, call: HeartbeatCall, image: TopicsImage
    ) -> None:
        changed = False
        if call.client_id:
            member.client_id = call.client_id
        if call.client_host:
            member.client_host = call.client_host
        if call.rack_id is not None:
            member.rack_id = call.rack_id
        if call.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = call.rebalance_timeout_ms
        if call.subscribed_topic_names is not None:
            names = tuple(sorted(set(call.subscribed_topic_names)))
            changed |= names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if call.subscribed_topic_regex is not None:
            regex = call.subscribed_topic_regex or None
            changed |= regex != member.subscribed_topic_regex
            member.subscribed_topic_regex = regex
        if call.server_assignor is not None:
            changed |= call.server_assignor != member.server_assignor
            member.server_assignor = call.server_assignor
        if changed:
            group.group_epoch += 1

    def _refresh_metadata(self, group: ConsumerGroup, image: TopicsImage) -> None:
        """A subscribed topic created, deleted or grown bumps the group epoch."""
        seen: dict[str, int] = {}
        for t in sorted(group.subscribed_topics(image)):
            n = image.partition_count(t)
            if n is not None:
                seen[t] = n
        if seen != group.subscribed_partitions:
            group.subscribed_partitions = seen
            group.group_epoch += 1

    def _compute_target(self, group: ConsumerGroup, image: TopicsImage) -> None:
        names = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        group.assignor = names.most_common(1)[0][0] if names else DEFAULT_ASSIGNOR
        subs = [
            MemberSubscription(
                member_id=m.member_id,
                topics=frozenset(_member_topics(m, image)),
                previous=group.target.get(m.member_id, {}),
            )
            for m in group.members.values()
        ]
        group.target = ASSIGNORS[group.assignor](subs, group.subscribed_partitions)
        group.assignment_epoch = group.group_epoch

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Mapping[str, frozenset[int]] | None
    ) -> None:
        """One step of Kafka's CurrentAssignmentBuilder (module docstring)."""
        target = group.target.get(member.member_id, {})
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _overlaps(owned, member.revoking):
                return  # still revoking
            member.revoking = {}
        elif member.member_epoch == group.assignment_epoch and member.state is MemberState.STABLE:
            return
        revoke = _minus(member.assigned, target)
        if revoke:
            member.assigned = _intersect(member.assigned, target)
            member.revoking = revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            self._arm_rebalance(group, member)
            return
        held = group.held_by_others(member.member_id)
        wanted = _minus(target, member.assigned)
        free = {t: frozenset(p for p in ps if (t, p) not in held) for t, ps in wanted.items()}
        free = {t: ps for t, ps in free.items() if ps}
        assigned = dict(member.assigned)
        for t, ps in free.items():
            assigned[t] = assigned.get(t, frozenset()) | ps
        member.assigned = assigned
        member.state = MemberState.STABLE if free == wanted else MemberState.UNRELEASED_PARTITIONS
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None

    # --- leaving and timeouts -------------------------------------------------------------------

    def _leave(self, group: ConsumerGroup, call: HeartbeatCall) -> HeartbeatResult:
        member = group.members.get(call.member_id)
        if member is None and call.instance_id is not None:
            held = group.static_members.get(call.instance_id)
            member = group.members.get(held) if held is not None else None
        if member is None:
            raise UnknownMemberIdError(f"member {call.member_id} is not in group {group.group_id}")
        self._remove(group, member)
        return HeartbeatResult(call.member_id, LEAVE_EPOCH, self.config.consumer_heartbeat_interval_ms, None)

    def _static_leave(self, group: ConsumerGroup, call: HeartbeatCall) -> HeartbeatResult:
        assert call.instance_id is not None
        held = group.static_members.get(call.instance_id)
        member = group.members.get(held) if held is not None else None
        if member is None:
            raise UnknownMemberIdError(f"static member {call.instance_id} is not in group {group.group_id}")
        if member.member_id != call.member_id:
            raise FencedInstanceIdError(
                f"instance {call.instance_id} is held by member {member.member_id}, not {call.member_id}"
            )
        # Kept with its assignment until its session expires or its instance rejoins.
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = STATIC_LEAVE_EPOCH
        self._arm_session(group, member)
        return HeartbeatResult(
            call.member_id, STATIC_LEAVE_EPOCH, self.config.consumer_heartbeat_interval_ms, None
        )

    def _remove(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self._cancel_timers(member)
        group.members.pop(member.member_id, None)
        group.target.pop(member.member_id, None)
        if (
            member.instance_id is not None
            and group.static_members.get(member.instance_id) == member.member_id
        ):
            del group.static_members[member.instance_id]
        group.group_epoch += 1

    def fence(self, group_id: str, member_id: str) -> bool:
        """Remove a member (session or rebalance timeout); False if it is gone already."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return False
        self._remove(group, member)
        return True

    @staticmethod
    def _cancel_timers(member: ConsumerMember) -> None:
        for t in (member.session_timer, member.rebalance_timer, member.sync_timer):
            if t is not None:
                t.cancel()
        member.session_timer = member.rebalance_timer = member.sync_timer = None

    def _arm_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        gid, mid = group.group_id, member.member_id
        # A classic member keeps the session timeout it joined with, as in Kafka.
        timeout = (
            member.classic.session_timeout_ms
            if member.classic is not None
            else self.config.consumer_session_timeout_ms
        )
        member.session_timer = self._timers.call_later(timeout, lambda: self._expire(gid, mid, "session"))

    def _arm_rebalance(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.rebalance_timer is not None:
            return  # the deadline runs from the start of the revocation
        gid, mid = group.group_id, member.member_id
        member.rebalance_timer = self._timers.call_later(
            member.rebalance_timeout_ms, lambda: self._expire(gid, mid, "rebalance")
        )

    def arm_sync(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A classic member must send SyncGroup within its rebalance timeout after its
        JoinGroup, or it is removed (Kafka's consumer group sync timeout)."""
        if member.sync_timer is not None:
            member.sync_timer.cancel()
        gid, mid = group.group_id, member.member_id
        member.sync_timer = self._timers.call_later(
            member.rebalance_timeout_ms, lambda: self._expire(gid, mid, "sync")
        )

    def _expire(self, group_id: str, member_id: str, why: str) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return
        if why == "rebalance" and member.state is not MemberState.UNREVOKED_PARTITIONS:
            return
        self.fence(group_id, member_id)
        if self.on_change is not None:
            self.on_change(group_id)

    # --- offsets and reading --------------------------------------------------------------------

    def validate_offset_commit(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit: without a member epoch only while
        the group has no members; otherwise the member must exist and commit with its
        current epoch (older: STALE_MEMBER_EPOCH, newer: FENCED_MEMBER_EPOCH), with
        OffsetCommit v9+."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {group_id}")
        if member.classic is not None:
            # A classic member commits with its generation, any version; a mismatch is
            # the classic protocol's ILLEGAL_GENERATION, as Kafka answers it.
            if member_epoch != member.member_epoch:
                raise IllegalGenerationError(
                    f"generation {member_epoch} is not member {member_id}'s {member.member_epoch}"
                )
            return
        if api_version < 9:
            raise UnsupportedVersionError(
                "OffsetCommit version 9 or above must be used by members using the consumer group protocol"
            )
        if member_epoch > member.member_epoch:
            raise FencedMemberEpochError(
                f"member {member_id} epoch {member_epoch} is ahead of the coordinator's {member.member_epoch}"
            )
        if member_epoch < member.member_epoch:
            raise StaleMemberEpochError(
                f"member {member_id} epoch {member_epoch} is older than its current {member.member_epoch}"
            )

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch: a fetch without member id and epoch
        (admin tools) is accepted; otherwise the member's current epoch is required."""
        group = self.groups[group_id]
        if member_id is None and member_epoch < 0:
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {group_id}")
        if member_epoch != member.member_epoch:
            if member.classic is not None:
                raise IllegalGenerationError(
                    f"generation {member_epoch} is not member {member_id}'s {member.member_epoch}"
                )
            raise StaleMemberEpochError(
                f"member {member_id} epoch {member_epoch} is not its current {member.member_epoch}"
            )

    def drop(self, group_id: str) -> None:
        """Forget a group (deleted, or converted to a classic group); members' timers stop."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            for m in group.members.values():
                self._cancel_timers(m)

    def is_empty(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is None or not group.members

    def active_topics(self, group_id: str) -> set[str] | None:
        """The topics a group with members subscribes to (as last resolved), None for a
        group without members or no group (offset expiry)."""
        group = self.groups.get(group_id)
        if group is None or not group.members:
            return None
        names = {t for m in group.members.values() for t in m.subscribed_topic_names}
        return names | set(group.subscribed_partitions)

    def subscribed_topics(self, group_id: str, image: TopicsImage) -> set[str]:
        group = self.groups.get(group_id)
        return group.subscribed_topics(image) if group is not None else set()
