"""KIP-848's online migration: classic-protocol members inside a consumer group.

Kafka 4 converts a group between the protocols while it has members, as
``group.consumer.migration.policy`` allows (GroupMetadataManager's
``classicGroup*ToConsumerGroup`` and the conversions of ConsumerGroup/ClassicGroup).
Pure state, no I/O, over the state machine of broker.groups.consumer_group:

* **Upgrade** (``from_classic``): a ConsumerGroupHeartbeat joining a classic group with
  members (policy ``bidirectional`` or ``upgrade``, the group of the ``consumer``
  protocol type, below ``group.consumer.max.size``) turns it into a consumer group whose
  epoch and assignment epoch are the classic generation; each classic member stays, as
  a *classic member* with that epoch, its subscription (its ConsumerProtocolSubscription)
  and its last assignment (its ConsumerProtocolAssignment) as current and target.
* **The bridge** (``ClassicBridge``): a classic member's JoinGroup updates it as a
  heartbeat would (its subscription, its owned partitions from the subscription) and
  reconciles it; the answer is at once: generation = its member epoch, the protocol its
  first, no leader (every classic member is a follower: the coordinator assigns).
  A classic member revokes before it rejoins, so the partitions it no longer declares are
  released in the same join. SyncGroup returns its current assignment as
  ConsumerProtocolAssignment bytes; Heartbeat answers REBALANCE_IN_PROGRESS while its
  assignment must change (its epoch is behind the group's, or it is not yet stable);
  generations that are not its epoch get ILLEGAL_GENERATION, and LeaveGroup removes it.
  A classic member joining with the ``group.instance.id`` of a member, of either protocol,
  replaces it (its assignment and epochs), as Kafka's static membership does.
  It keeps its own session timeout, and is removed when it does not send SyncGroup within
  its rebalance timeout after a JoinGroup (Kafka's sync timeout).
* **Downgrade** (``downgradable`` / ``to_classic``): when the last member of the
  consumer protocol leaves (or is fenced) and classic members remain (policy
  ``bidirectional`` or ``downgrade``, no more than ``group.max.size``), the group is a
  classic group again, the members' generation its generation, each member's current
  assignment its assignment; the caller starts a rebalance, which the members learn of
  at their next heartbeat (REBALANCE_IN_PROGRESS), as in Kafka.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from broker.groups.consumer_group import (
    Assignment,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerGroups,
    ConsumerMember,
    HeartbeatCall,
    MemberState,
    TopicsImage,
)
from broker.groups.group import Group
from broker.groups.types import (
    UNKNOWN_MEMBER_ID,
    GroupProtocol,
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
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    RebalanceInProgressError,
    StrataError,
    UnknownMemberIdError,
)
from kwire.consumer_protocol import (
    ASSIGNMENT_VERSION,
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from kwire.consumer_protocol import Assignment as ProtocolAssignment

# The ConsumerProtocolAssignment version the bridge writes (the highest, as Kafka).
_ASSIGNMENT_VERSION = ASSIGNMENT_VERSION


def _owned(parts: Sequence[TopicPartitions]) -> Assignment:
    out: dict[str, frozenset[int]] = {}
    for tp in parts:
        out[tp.topic] = out.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return {t: ps for t, ps in out.items() if ps}


def encode_member_assignment(assigned: Assignment) -> bytes:
    """A member's partitions as ConsumerProtocolAssignment bytes (SyncGroup)."""
    parts = tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assigned.items()) if ps)
    return encode_assignment(ProtocolAssignment(_ASSIGNMENT_VERSION, parts))


# --- upgrade ------------------------------------------------------------------------------


def upgrade_refusal(classic: Group, max_size: int, enabled: bool) -> str | None:
    """Why ``classic`` cannot be upgraded online, None when it can (Kafka's
    validateOnlineUpgrade)."""
    if not enabled:
        return "the online upgrade is disabled"
    if classic.protocol_type != PROTOCOL_TYPE:
        return "the group does not use the consumer embedded protocol"
    if len(classic.members) >= max_size:
        return f"the group's {len(classic.members)} members would exceed group.consumer.max.size"
    for m in classic.members.values():
        try:
            decode_subscription(m.metadata(classic.protocol_name or m.protocol_names[0]))
        except (ConsumerProtocolError, IndexError):
            return f"member {m.member_id}'s subscription does not parse"
    return None


def from_classic(classic: Group, image: TopicsImage) -> ConsumerGroup:
    """The consumer group a classic group becomes (checked by ``upgrade_refusal``)."""
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = group.assignment_epoch = classic.generation
    taken: set[tuple[str, int]] = set()
    for m in classic.members.values():
        sub = decode_subscription(m.metadata(classic.protocol_name or m.protocol_names[0]))
        assigned: Assignment = {}
        if m.assignment:
            try:
                assigned = _owned(decode_assignment(m.assignment).partitions)
            except ConsumerProtocolError:
                assigned = {}
        # Never two owners: a partition claimed twice (assignments of different
        # generations) stays with the first.
        assigned = {t: frozenset(p for p in ps if (t, p) not in taken) for t, ps in assigned.items()}
        assigned = {t: ps for t, ps in assigned.items() if ps}
        taken.update((t, p) for t, ps in assigned.items() for p in ps)
        member = ConsumerMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rack_id=sub.rack_id,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(sub.topics))),
            member_epoch=classic.generation,
            previous_member_epoch=classic.generation,
            state=MemberState.STABLE,
            assigned=assigned,
            classic=ClassicMetadata(m.session_timeout_ms, tuple((p.name, p.metadata) for p in m.protocols)),
        )
        group.members[m.member_id] = member
        if m.instance_id is not None:
            group.static_members[m.instance_id] = m.member_id
        group.target[m.member_id] = dict(assigned)
    for t in sorted(group.subscribed_topics(image)):
        n = image.partition_count(t)
        if n is not None:
            group.subscribed_partitions[t] = n
    return group


# --- downgrade ----------------------------------------------------------------------------


def downgradable(group: ConsumerGroup, max_size: int, enabled: bool) -> bool:
    """Whether a group whose consumer-protocol members are gone goes back to classic
    (Kafka's validateOnlineDowngrade)."""
    return (
        enabled
        and bool(group.members)
        and not group.consumer_protocol_members()
        and len(group.members) <= max_size
    )


@dataclass(frozen=True, slots=True)
class ClassicMember:
    """A member as the classic group takes it back (broker.groups.membership.adopt_converted)."""

    request: JoinGroupRequest  # what it joined with, as the classic state machine keeps it
    assignment: bytes


def to_classic(group: ConsumerGroup) -> tuple[int, list[ClassicMember]]:
    """The generation (the members' most common epoch, so that their heartbeats are
    answered REBALANCE_IN_PROGRESS, not ILLEGAL_GENERATION) and the members of the
    classic group ``group`` becomes."""
    epochs = Counter(m.member_epoch for m in group.members.values())
    generation = epochs.most_common(1)[0][0] if epochs else group.group_epoch
    out = []
    for m in group.members.values():
        assert m.classic is not None
        req = JoinGroupRequest(
            group_id=group.group_id,
            member_id=m.member_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=tuple(GroupProtocol(n, md) for n, md in m.classic.protocols),
            session_timeout_ms=m.classic.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            group_instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
        )
        out.append(ClassicMember(req, encode_member_assignment(m.assigned)))
    return generation, out


# --- the bridge ---------------------------------------------------------------------------


class ClassicBridge:
    """JoinGroup / SyncGroup / Heartbeat / LeaveGroup of classic members in a consumer
    group (rules: module docstring)."""

    def __init__(self, groups: ConsumerGroups) -> None:
        self._groups = groups

    def _member(self, group_id: str, member_id: str, instance_id: str | None) -> ConsumerMember:
        group = self._groups.groups[group_id]
        if instance_id is not None:
            held = group.static_members.get(instance_id)
            if held is not None and held != member_id:
                raise FencedInstanceIdError(
                    f"group.instance.id {instance_id!r} is now member {held}, not {member_id}"
                )
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {group_id!r}")
        if member.classic is None:
            raise UnknownMemberIdError(f"member {member_id!r} uses the consumer protocol")
        return member

    def join(self, req: JoinGroupRequest, image: TopicsImage) -> JoinGroupResult:
        cg = self._groups
        cfg = cg.config
        group = cg.groups[req.group_id]
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session timeout {req.session_timeout_ms} ms is outside [{cfg.min_session_timeout_ms}, "
                f"{cfg.max_session_timeout_ms}] (group.min/max.session.timeout.ms)"
            )
        if req.protocol_type != PROTOCOL_TYPE or not req.protocols:
            raise InconsistentGroupProtocolError(
                f"group {req.group_id!r} is a consumer group: protocol type {req.protocol_type!r} "
                "or no protocol is not supported"
            )
        try:
            sub = decode_subscription(req.protocols[0].metadata)
        except ConsumerProtocolError as e:
            raise InconsistentGroupProtocolError(f"the subscription does not parse: {e}") from None
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        member_id = str(uuid.uuid4()) if unknown else req.member_id
        if member_id not in group.members and len(group.members) >= cfg.consumer_max_size:
            raise GroupMaxSizeReachedError(
                f"group {group.group_id} has reached its maximum size {cfg.consumer_max_size}"
            )
        if unknown and req.group_instance_id is None and req.require_known_member_id:
            raise MemberIdRequired(member_id)
        member = self._join_member(group, req, member_id, unknown)
        owned = _owned(sub.owned_partitions)
        call = HeartbeatCall(
            group_id=req.group_id,
            member_id=member_id,
            member_epoch=member.member_epoch,
            instance_id=req.group_instance_id,
            rack_id=sub.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms
            if req.rebalance_timeout_ms >= 0
            else req.session_timeout_ms,
            subscribed_topic_names=tuple(sub.topics),
            owned=owned,
            client_id=req.client_id,
            client_host=req.client_host,
        )
        member.classic = ClassicMetadata(
            req.session_timeout_ms, tuple((p.name, p.metadata) for p in req.protocols)
        )
        cg._update_member(group, member, call, image)
        cg._refresh_metadata(group, image)
        if group.group_epoch > group.assignment_epoch:
            cg._compute_target(group, image)
        cg._reconcile(group, member, owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            # A classic member revoked what it no longer declares before rejoining.
            cg._reconcile(group, member, owned)
        cg._arm_session(group, member)
        cg.arm_sync(group, member)
        return JoinGroupResult(
            member_id=member_id,
            generation_id=member.member_epoch,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=req.protocols[0].name,
            leader_id="",
        )

    def _join_member(
        self, group: ConsumerGroup, req: JoinGroupRequest, member_id: str, unknown: bool
    ) -> ConsumerMember:
        iid = req.group_instance_id
        if iid is not None:
            held = group.static_members.get(iid)
            if held is not None and held != member_id:
                if not unknown:
                    raise FencedInstanceIdError(
                        f"group.instance.id {iid!r} is member {held}, not {member_id}"
                    )
                old = group.members[held]
                # The static member's new incarnation takes its place and assignment, also
                # when the old one used the consumer protocol (Kafka's
                # getOrMaybeSubscribeStaticConsumerGroupMember: only a consumer member
                # replacing a consumer member must wait for it to leave); it is a classic
                # member from this join on, and the caller downgrades the group when it
                # replaced the last consumer-protocol member.
                self._groups._cancel_timers(old)
                del group.members[held]
                old.member_id = member_id
                group.members[member_id] = old
                group.static_members[iid] = member_id
                if held in group.target:
                    group.target[member_id] = group.target.pop(held)
                return old
        member = group.members.get(member_id)
        if member is not None:
            if member.classic is None:
                raise UnknownMemberIdError(f"member {member_id!r} uses the consumer protocol")
            return member
        # A new member (the id MEMBER_ID_REQUIRED handed out, which Kafka does not keep
        # either) joins.
        member = ConsumerMember(member_id=member_id, instance_id=iid)
        group.members[member_id] = member
        if iid is not None:
            group.static_members[iid] = member_id
        group.group_epoch += 1
        return member

    def sync(self, req: SyncGroupRequest) -> SyncGroupResult:
        member = self._member(req.group_id, req.member_id, req.group_instance_id)
        if req.generation_id != member.member_epoch:
            raise IllegalGenerationError(
                f"generation {req.generation_id} is not member {req.member_id}'s {member.member_epoch}"
            )
        assert member.classic is not None
        names = [n for n, _ in member.classic.protocols]
        if req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE:
            raise InconsistentGroupProtocolError(f"protocol type {req.protocol_type!r} is not 'consumer'")
        if req.protocol_name is not None and req.protocol_name not in names:
            raise InconsistentGroupProtocolError(f"protocol {req.protocol_name!r} is not the member's")
        group = self._groups.groups[req.group_id]
        self._groups._arm_session(group, member)
        if member.sync_timer is not None:
            member.sync_timer.cancel()
            member.sync_timer = None
        return SyncGroupResult(
            PROTOCOL_TYPE, req.protocol_name or names[0], encode_member_assignment(member.assigned)
        )

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, instance_id: str | None) -> None:
        member = self._member(group_id, member_id, instance_id)
        if generation_id != member.member_epoch:
            raise IllegalGenerationError(
                f"generation {generation_id} is not member {member_id}'s {member.member_epoch}"
            )
        group = self._groups.groups[group_id]
        self._groups._arm_session(group, member)
        if member.state is not MemberState.STABLE or member.member_epoch < group.group_epoch:
            raise RebalanceInProgressError(f"group {group_id!r} is rebalancing: rejoin")

    def leave(self, group_id: str, members: Sequence[MemberIdentity]) -> list[LeaveResult]:
        group = self._groups.groups[group_id]
        out = []
        for ident in members:
            try:
                mid = ident.member_id
                if ident.group_instance_id is not None:
                    held = group.static_members.get(ident.group_instance_id)
                    if held is None:
                        raise UnknownMemberIdError(
                            f"no member with group.instance.id {ident.group_instance_id!r}"
                        )
                    if mid == UNKNOWN_MEMBER_ID:
                        mid = held
                member = self._member(group_id, mid, ident.group_instance_id)
                self._groups._remove(group, member)
                out.append(LeaveResult(ident.member_id, ident.group_instance_id, None))
            except StrataError as e:
                out.append(LeaveResult(ident.member_id, ident.group_instance_id, e))
        return out
