"""A share group's membership (KIP-932's ShareGroupHeartbeat), as Kafka's share-group
coordinator keeps it: members with epochs, subscriptions and assignments.

Unlike a consumer group, a share group has no revocation phase: a partition may be
assigned to several members at once (records, not partitions, are what members share), so
a member moves to the group's newest assignment at its next heartbeat. Every change of
membership, subscriptions or the subscribed topics' partition counts bumps the group
epoch and recomputes the assignment with ``assign``, which gives every subscribed
partition to at least one member and every member at least one partition where the topics
have any: with more members than partitions, partitions are shared (Kafka's simple
share assignor does the same).

Pure: the clock is injected (milliseconds); partition counts come from a callable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.share.errors import FencedMemberEpochError
from hot.errors import GroupMaxSizeReachedError, InvalidRequestError, UnknownMemberIdError

Clock = Callable[[], float]
PartitionCounts = Callable[[str], int]  # 0: no such topic
Assignment = dict[str, tuple[int, ...]]

LEAVE_EPOCH = -1
JOIN_EPOCH = 0


@dataclass(slots=True)
class ShareMember:
    member_id: str
    subscribed: tuple[str, ...]
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    member_epoch: int = 0
    previous_epoch: int = -1
    last_seen: float = 0.0
    assignment: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    # None: unchanged since the member's last heartbeat (the wire's null Assignment).
    assignment: Assignment | None


def assign(members: Mapping[str, Sequence[str]], counts: Mapping[str, int]) -> dict[str, Assignment]:
    """Each topic's partitions over the members subscribed to it: round robin when the
    members are no more than the partitions; otherwise member i gets partition i mod n, so
    that every member has one and each partition is shared by several."""
    out: dict[str, Assignment] = {m: {} for m in members}
    for topic in sorted({t for subs in members.values() for t in subs}):
        n = counts.get(topic, 0)
        subs = sorted(m for m, ts in members.items() if topic in ts)
        if n <= 0 or not subs:
            continue
        per: dict[str, list[int]] = {m: [] for m in subs}
        if len(subs) <= n:
            for p in range(n):
                per[subs[p % len(subs)]].append(p)
        else:
            for i, m in enumerate(subs):
                per[m].append(i % n)
        for m, ps in per.items():
            if ps:
                out[m][topic] = tuple(ps)
    return out


class ShareGroup:
    """One share group's members (module docstring)."""

    def __init__(
        self,
        group_id: str,
        clock: Clock,
        *,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 5_000,
        max_size: int = 200,
    ) -> None:
        self.group_id = group_id
        self.clock = clock
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        self.members: dict[str, ShareMember] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self._counts: dict[str, int] = {}

    @property
    def state(self) -> str:
        """Kafka's share-group states as ListGroups and ShareGroupDescribe name them."""
        if not self.members:
            return "Empty"
        return "Stable"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        subscribed: Sequence[str] | None,
        counts: PartitionCounts,
        *,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        """One ShareGroupHeartbeat: join (epoch 0), stay (the member's epoch, or the one
        before it when a response was lost), or leave (epoch -1)."""
        self.expire_members()
        if not member_id:
            raise InvalidRequestError("MemberId can't be empty")
        if member_epoch == LEAVE_EPOCH:
            self.leave(member_id)
            return HeartbeatResult(member_id, LEAVE_EPOCH, self.heartbeat_interval_ms, None)
        now = self.clock()
        member = self.members.get(member_id)
        send_assignment = False
        if member_epoch == JOIN_EPOCH:
            if not subscribed:
                raise InvalidRequestError("SubscribedTopicNames must be set in first request")
            if member is None:
                if len(self.members) >= self.max_size:
                    raise GroupMaxSizeReachedError(
                        f"share group {self.group_id} has reached its maximum size of {self.max_size}"
                    )
                member = ShareMember(member_id, tuple(sorted(set(subscribed))))
                self.members[member_id] = member
                self.group_epoch += 1
            send_assignment = True
        else:
            if member is None:
                raise UnknownMemberIdError(f"member {member_id} is not in share group {self.group_id}")
            if member_epoch not in (member.member_epoch, member.previous_epoch):
                raise FencedMemberEpochError(
                    f"member {member_id} epoch {member_epoch} is not the group's {member.member_epoch}"
                )
            if member_epoch != member.member_epoch:
                send_assignment = True  # it missed our last answer
        if subscribed is not None and tuple(sorted(set(subscribed))) != member.subscribed:
            member.subscribed = tuple(sorted(set(subscribed)))
            self.group_epoch += 1
        member.last_seen = now
        member.client_id = client_id or member.client_id
        member.client_host = client_host or member.client_host
        if rack_id is not None:
            member.rack_id = rack_id
        self._refresh(counts)
        if member.member_epoch != self.assignment_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
            send_assignment = True
        return HeartbeatResult(
            member_id,
            member.member_epoch,
            self.heartbeat_interval_ms,
            dict(member.assignment) if send_assignment else None,
        )

    def leave(self, member_id: str) -> bool:
        if self.members.pop(member_id, None) is None:
            return False
        self.group_epoch += 1
        return True

    def expire_members(self) -> list[str]:
        """Members silent for the session timeout are removed (the group rebalances)."""
        deadline = self.clock() - self.session_timeout_ms
        gone = [m for m, mem in self.members.items() if mem.last_seen < deadline]
        for m in gone:
            del self.members[m]
        if gone:
            self.group_epoch += 1
        return gone

    def _refresh(self, counts: PartitionCounts) -> None:
        now_counts = {t: counts(t) for t in self.subscribed_topics()}
        if now_counts != self._counts:
            self._counts = now_counts
            if self.group_epoch == self.assignment_epoch:  # one bump per change
                self.group_epoch += 1
        if self.assignment_epoch == self.group_epoch:
            return
        target = assign({m: mem.subscribed for m, mem in self.members.items()}, self._counts)
        for m, mem in self.members.items():
            mem.assignment = target[m]
        self.assignment_epoch = self.group_epoch
