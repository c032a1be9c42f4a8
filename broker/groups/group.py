"""One consumer group's in-memory state: its members and what they joined with.

``Group`` and ``Member`` are plain state with the small queries the state machine
(broker.groups.membership) and the offsets manager (broker.groups.offset_manager) ask of them:
protocol support and selection, the JoinGroup member list, the topics the members
subscribe to, the DescribeGroups view. They change only through the state machine.
Members are not persisted (a restarted coordinator has every group Empty); the group's
generation and protocol are, by the offsets manager, when a join phase completes.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

from broker.groups.timers import Timer
from broker.groups.types import (
    GroupDescription,
    GroupProtocol,
    GroupState,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResult,
    MemberDescription,
    SyncGroupResult,
    TopicPartition,
)
from hot.errors import StrataError
from kwire.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
)

Empty, Preparing, Completing, Stable, Dead = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


class Member:
    """A member that joined: what it supports, its session, its parked requests."""

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
        self.timer: Timer | None = None

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


class Group:
    """A group's state, generation, protocol, leader and members (by member id, and the
    static ones by group.instance.id), with the timers of its join and sync phases."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = Empty
        self.state_timestamp_ms = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static: dict[str, str] = {}  # group.instance.id -> member id
        self.pending: dict[str, Timer] = {}  # KIP-394 member ids handed out, not yet joined
        self.pending_sync: set[str] = set()
        self.join_timer: Timer | None = None
        self.sync_timer: Timer | None = None
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

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member: Member) -> None:
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

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to; None if unknown (not a consumer group, or a
        subscription that does not parse), which callers treat as "every topic", as
        Kafka does."""
        if self.protocol_type != PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            names = [self.protocol_name] if self.protocol_name is not None else list(m.protocol_names)
            for name in names:
                try:
                    topics.update(decode_subscription(m.metadata(name)).topics)
                except ConsumerProtocolError:
                    return None
        return topics

    def describe(self) -> GroupDescription:
        """The DescribeGroups view of the group as it is now; a consumer group's members
        also list their assigned partitions (when the assignment parses)."""
        members = []
        for m in self.members.values():
            assigned: tuple[TopicPartition, ...] = ()
            if self.protocol_type == PROTOCOL_TYPE and m.assignment:
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
                    metadata=m.metadata(self.protocol_name),
                    assignment=m.assignment,
                    assigned_partitions=assigned,
                )
            )
        return GroupDescription(
            group_id=self.group_id,
            state=self.state,
            protocol_type=self.protocol_type or "",
            protocol_name=self.protocol_name or "",
            generation_id=self.generation,
            leader_id=self.leader_id or "",
            members=tuple(members),
        )
