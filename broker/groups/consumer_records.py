"""The records a KIP-848 consumer group is kept as in ``__consumer_offsets``, as Kafka 4
writes them (the group coordinator's ``ConsumerGroup*`` coordinator records), and a
group's state to and from them. Pure, no I/O.

Keys are not flexible: INT16 version (the record type), then GroupId STRING and, for a
member's records, MemberId STRING::

    3  ConsumerGroupMetadataKey               GroupId
    4  ConsumerGroupPartitionMetadataKey      GroupId
    5  ConsumerGroupMemberMetadataKey         GroupId, MemberId
    6  ConsumerGroupTargetAssignmentMetadataKey   GroupId
    7  ConsumerGroupTargetAssignmentMemberKey GroupId, MemberId
    8  ConsumerGroupCurrentMemberAssignmentKey    GroupId, MemberId

Values are INT16 version 0, then flexible (compact strings and arrays, tagged fields):

    3  Epoch INT32                                   (tags: MetadataHash, CreationTimeMs)
    4  Topics [TopicId UUID, TopicName, NumPartitions INT32, PartitionMetadata []]
    5  InstanceId?, RackId?, ClientId, ClientHost, SubscribedTopicNames [],
       SubscribedTopicRegex?, RebalanceTimeoutMs INT32, ServerAssignor?
                                                      (tag 0: ClassicMemberMetadata)
    6  AssignmentEpoch INT32                          (tag 0: AssignmentTimestamp)
    7  TopicPartitions [TopicId UUID, Partitions [INT32]]
    8  MemberEpoch INT32, PreviousMemberEpoch INT32, State INT8 (0 stable,
       1 unrevoked_partitions, 2 unreleased_partitions), AssignedPartitions [TopicId,
       Partitions], PartitionsPendingRevocation [TopicId, Partitions]

A null value is the key's tombstone. The only tagged field Strata writes and reads is
record 5's ClassicMemberMetadata (SessionTimeoutMs INT32, SupportedProtocols [Name,
Metadata BYTES]) of a classic member kept through an online upgrade; it skips the
others. It writes record 4 as Kafka 4.0 does (4.1 replaced it by a MetadataHash tag on
record 3, KIP-1101): it is what tells a loaded group which subscribed-topic partition
counts its epoch saw, so that loading does not bump the epoch. Kafka's regular
expression records (ConsumerGroupRegularExpression, 4.1) are not written: the
coordinator resolves a member's expression against the metadata on each heartbeat.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from broker.groups.assignors import DEFAULT_ASSIGNOR
from broker.groups.consumer_group import (
    Assignment,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from hot.errors import StrataError
from kwire.errors import ProtocolError
from kwire.primitives import Reader, Writer

GROUP_METADATA: Final = 3
PARTITION_METADATA: Final = 4
MEMBER_METADATA: Final = 5
TARGET_METADATA: Final = 6
TARGET_MEMBER: Final = 7
CURRENT_ASSIGNMENT: Final = 8
KINDS: Final = frozenset(range(GROUP_METADATA, CURRENT_ASSIGNMENT + 1))
_MEMBER_KINDS: Final = frozenset((MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT))

_STATE_CODES: Final = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}
_STATES: Final = {v: k for k, v in _STATE_CODES.items()}

# (topic id, partitions), sorted by id: how the records name an assignment.
IdAssignment = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


class ConsumerRecordError(StrataError):
    """A consumer group record of the offsets log that does not parse."""


@dataclass(frozen=True, slots=True, order=True)
class ConsumerKey:
    kind: int  # the key version: GROUP_METADATA ... CURRENT_ASSIGNMENT
    group: str
    member: str = ""  # the member's records only


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    topics: tuple[tuple[uuid.UUID, str, int], ...]  # (id, name, partition count)


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # Tag 0, ClassicMemberMetadata: (SessionTimeoutMs, SupportedProtocols [(Name,
    # Metadata)]) for a classic-protocol member (KIP-848's online migration).
    classic: tuple[int, tuple[tuple[str, bytes], ...]] | None = None


@dataclass(frozen=True, slots=True)
class TargetMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TargetMemberValue:
    partitions: IdAssignment


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: IdAssignment
    revoking: IdAssignment


ConsumerValue = (
    GroupEpochValue
    | PartitionMetadataValue
    | MemberMetadataValue
    | TargetMetadataValue
    | TargetMemberValue
    | CurrentAssignmentValue
)


# --- keys ----------------------------------------------------------------------------------


def encode_consumer_key(key: ConsumerKey) -> bytes:
    w = Writer()
    w.int16(key.kind)
    w.string(key.group)
    if key.kind in _MEMBER_KINDS:
        w.string(key.member)
    return w.getvalue()


def decode_consumer_key(kind: int, r: Reader) -> ConsumerKey:
    """The rest of a key whose version ``kind`` was read already."""
    try:
        group = r.string()
        member = r.string() if kind in _MEMBER_KINDS else ""
        if r.remaining:
            raise ConsumerRecordError(f"consumer group record key {kind}: {r.remaining} trailing bytes")
    except ProtocolError as e:
        raise ConsumerRecordError(f"consumer group record key {kind}: {e}") from None
    return ConsumerKey(kind, group, member)


# --- values --------------------------------------------------------------------------------


def _assignment(w: Writer, a: IdAssignment) -> None:
    w.compact_array_count(len(a))
    for tid, parts in a:
        w.uuid(tid)
        w.compact_array_count(len(parts))
        for p in parts:
            w.int32(p)
        w.tagged_fields([])


def _classic_metadata(classic: tuple[int, tuple[tuple[str, bytes], ...]]) -> bytes:
    w = Writer()
    w.int32(classic[0])
    w.compact_array_count(len(classic[1]))
    for name, metadata in classic[1]:
        w.compact_string(name)
        w.compact_bytes(metadata)
        w.tagged_fields([])
    w.tagged_fields([])
    return w.getvalue()


def _read_classic_metadata(data: bytes) -> tuple[int, tuple[tuple[str, bytes], ...]]:
    r = Reader(data)
    session = r.int32()
    protocols = []
    for _ in range(_read_count(r, 3)):
        name = r.compact_string()
        protocols.append((name, bytes(r.compact_bytes())))
        r.tagged_fields()
    r.tagged_fields()
    return session, tuple(protocols)


def encode_consumer_value(v: ConsumerValue) -> bytes:
    w = Writer()
    w.int16(0)
    if isinstance(v, GroupEpochValue):
        w.int32(v.epoch)
    elif isinstance(v, PartitionMetadataValue):
        w.compact_array_count(len(v.topics))
        for tid, name, count in v.topics:
            w.uuid(tid)
            w.compact_string(name)
            w.int32(count)
            w.compact_array_count(0)  # PartitionMetadata (racks): unused since 4.0
            w.tagged_fields([])
    elif isinstance(v, MemberMetadataValue):
        w.compact_nullable_string(v.instance_id)
        w.compact_nullable_string(v.rack_id)
        w.compact_string(v.client_id)
        w.compact_string(v.client_host)
        w.compact_array_count(len(v.subscribed_topic_names))
        for t in v.subscribed_topic_names:
            w.compact_string(t)
        w.compact_nullable_string(v.subscribed_topic_regex)
        w.int32(v.rebalance_timeout_ms)
        w.compact_nullable_string(v.server_assignor)
        if v.classic is not None:
            w.tagged_fields([(0, _classic_metadata(v.classic))])
            return w.getvalue()
    elif isinstance(v, TargetMetadataValue):
        w.int32(v.assignment_epoch)
    elif isinstance(v, TargetMemberValue):
        _assignment(w, v.partitions)
    else:
        w.int32(v.member_epoch)
        w.int32(v.previous_member_epoch)
        w.int8(v.state)
        _assignment(w, v.assigned)
        _assignment(w, v.revoking)
    w.tagged_fields([])
    return w.getvalue()


def _read_count(r: Reader, min_size: int) -> int:
    n = r.compact_array_count(False, min_size)
    assert n is not None
    return n


def _read_assignment(r: Reader) -> IdAssignment:
    out = []
    for _ in range(_read_count(r, 17)):
        tid = r.uuid()
        parts = tuple(r.int32() for _ in range(_read_count(r, 4)))
        r.tagged_fields()
        out.append((tid, parts))
    return tuple(out)


def decode_consumer_value(kind: int, data: bytes) -> ConsumerValue:
    """The value of a record of type ``kind``; ConsumerRecordError when it does not parse."""
    r = Reader(data)
    try:
        version = r.int16()
        if version != 0:
            raise ConsumerRecordError(f"consumer group record {kind}: value version {version} is unknown")
        v: ConsumerValue
        if kind == GROUP_METADATA:
            v = GroupEpochValue(r.int32())
        elif kind == PARTITION_METADATA:
            topics = []
            for _ in range(_read_count(r, 22)):
                tid, name, count = r.uuid(), r.compact_string(), r.int32()
                for _ in range(_read_count(r, 6)):  # racks per partition, unused
                    r.int32()
                    for _ in range(_read_count(r, 1)):
                        r.compact_string()
                    r.tagged_fields()
                r.tagged_fields()
                topics.append((tid, name, count))
            v = PartitionMetadataValue(tuple(topics))
        elif kind == MEMBER_METADATA:
            instance_id = r.compact_nullable_string()
            rack_id = r.compact_nullable_string()
            client_id = r.compact_string()
            client_host = r.compact_string()
            names = tuple(r.compact_string() for _ in range(_read_count(r, 1)))
            regex, timeout, assignor = r.compact_nullable_string(), r.int32(), r.compact_nullable_string()
            tags = r.tagged_fields()
            classic = None
            if 0 in tags:
                start, end = tags[0]
                classic = _read_classic_metadata(bytes(data[start:end]))
            v = MemberMetadataValue(
                instance_id, rack_id, client_id, client_host, names, regex, timeout, assignor, classic
            )
            if r.remaining:
                raise ConsumerRecordError(f"consumer group record {kind}: {r.remaining} trailing bytes")
            return v
        elif kind == TARGET_METADATA:
            v = TargetMetadataValue(r.int32())
        elif kind == TARGET_MEMBER:
            v = TargetMemberValue(_read_assignment(r))
        elif kind == CURRENT_ASSIGNMENT:
            epoch, previous, state = r.int32(), r.int32(), r.int8()
            v = CurrentAssignmentValue(epoch, previous, state, _read_assignment(r), _read_assignment(r))
        else:
            raise ConsumerRecordError(f"consumer group record type {kind} is unknown")
        r.tagged_fields()
        if r.remaining:
            raise ConsumerRecordError(f"consumer group record {kind}: {r.remaining} trailing bytes")
        return v
    except ProtocolError as e:
        raise ConsumerRecordError(f"consumer group record {kind}: {e}") from None


# --- a group's state <-> its records --------------------------------------------------------


def _by_id(a: Mapping[str, frozenset[int]], topic_id: Callable[[str], uuid.UUID | None]) -> IdAssignment:
    out = []
    for name, parts in a.items():
        tid = topic_id(name)
        if tid is not None and parts:
            out.append((tid, tuple(sorted(parts))))
    return tuple(sorted(out))


def _by_name(a: IdAssignment, topic_name: Callable[[uuid.UUID], str | None]) -> Assignment:
    out: Assignment = {}
    for tid, parts in a:
        name = topic_name(tid)
        if name is not None and parts:  # a topic deleted since is dropped, as in Kafka
            out[name] = frozenset(parts)
    return out


def group_records(
    group: ConsumerGroup, topic_id: Callable[[str], uuid.UUID | None]
) -> dict[ConsumerKey, ConsumerValue]:
    """Every live record of ``group``'s state (what a replay must find)."""
    gid = group.group_id
    out: dict[ConsumerKey, ConsumerValue] = {
        ConsumerKey(GROUP_METADATA, gid): GroupEpochValue(group.group_epoch),
        ConsumerKey(TARGET_METADATA, gid): TargetMetadataValue(group.assignment_epoch),
    }
    topics = []
    for name, count in sorted(group.subscribed_partitions.items()):
        tid = topic_id(name)
        if tid is not None:
            topics.append((tid, name, count))
    out[ConsumerKey(PARTITION_METADATA, gid)] = PartitionMetadataValue(tuple(topics))
    for mid, m in group.members.items():
        out[ConsumerKey(MEMBER_METADATA, gid, mid)] = MemberMetadataValue(
            m.instance_id,
            m.rack_id,
            m.client_id,
            m.client_host,
            m.subscribed_topic_names,
            m.subscribed_topic_regex,
            m.rebalance_timeout_ms,
            m.server_assignor,
            None if m.classic is None else (m.classic.session_timeout_ms, m.classic.protocols),
        )
        out[ConsumerKey(CURRENT_ASSIGNMENT, gid, mid)] = CurrentAssignmentValue(
            m.member_epoch,
            m.previous_member_epoch,
            _STATE_CODES[m.state],
            _by_id(m.assigned, topic_id),
            _by_id(m.revoking, topic_id),
        )
    for mid, target in group.target.items():
        out[ConsumerKey(TARGET_MEMBER, gid, mid)] = TargetMemberValue(_by_id(target, topic_id))
    return out


def restore_group(
    group_id: str,
    records: Mapping[ConsumerKey, ConsumerValue],
    topic_name: Callable[[uuid.UUID], str | None],
) -> ConsumerGroup | None:
    """The group ``records`` (its live records, replayed) describe; None without its
    ConsumerGroupMetadata record (deleted, or never complete)."""
    meta = records.get(ConsumerKey(GROUP_METADATA, group_id))
    if not isinstance(meta, GroupEpochValue):
        return None
    group = ConsumerGroup(group_id)
    group.group_epoch = meta.epoch
    target_meta = records.get(ConsumerKey(TARGET_METADATA, group_id))
    if isinstance(target_meta, TargetMetadataValue):
        group.assignment_epoch = target_meta.assignment_epoch
    parts = records.get(ConsumerKey(PARTITION_METADATA, group_id))
    if isinstance(parts, PartitionMetadataValue):
        for tid, name, count in parts.topics:
            if topic_name(tid) == name:  # a topic deleted (or recreated) since: the epoch moves on
                group.subscribed_partitions[name] = count
    for key, value in sorted(records.items()):
        if isinstance(value, MemberMetadataValue):
            m = ConsumerMember(
                member_id=key.member,
                instance_id=value.instance_id,
                client_id=value.client_id,
                client_host=value.client_host,
                rack_id=value.rack_id,
                rebalance_timeout_ms=value.rebalance_timeout_ms,
                subscribed_topic_names=value.subscribed_topic_names,
                subscribed_topic_regex=value.subscribed_topic_regex,
                server_assignor=value.server_assignor,
                classic=None if value.classic is None else ClassicMetadata(*value.classic),
            )
            current = records.get(ConsumerKey(CURRENT_ASSIGNMENT, group_id, key.member))
            if isinstance(current, CurrentAssignmentValue):
                m.member_epoch = current.member_epoch
                m.previous_member_epoch = current.previous_member_epoch
                m.state = _STATES.get(current.state, MemberState.STABLE)
                m.assigned = _by_name(current.assigned, topic_name)
                m.revoking = _by_name(current.revoking, topic_name)
            group.members[m.member_id] = m
            if m.instance_id is not None:
                group.static_members[m.instance_id] = m.member_id
        elif isinstance(value, TargetMemberValue):
            group.target[key.member] = _by_name(value.partitions, topic_name)
    # A target of a member without its metadata (a partial write) is no one's.
    group.target = {mid: t for mid, t in group.target.items() if mid in group.members}
    names = [m.server_assignor for m in group.members.values() if m.server_assignor]
    group.assignor = max(set(names), key=names.count) if names else DEFAULT_ASSIGNOR
    return group


def record_diff(
    old: Mapping[ConsumerKey, bytes], new: Mapping[ConsumerKey, bytes]
) -> list[tuple[ConsumerKey, bytes | None]]:
    """The records that take the log from ``old`` to ``new`` (encoded values): changed and
    new ones first, in Kafka's order (member, group epoch, target, current assignment),
    then tombstones in the reverse order, the group's metadata tombstone last."""
    upserts = [(k, v) for k, v in new.items() if old.get(k) != v]
    order = {MEMBER_METADATA: 0, PARTITION_METADATA: 1, GROUP_METADATA: 2, TARGET_MEMBER: 3}
    order |= {TARGET_METADATA: 4, CURRENT_ASSIGNMENT: 5}
    upserts.sort(key=lambda kv: (order[kv[0].kind], kv[0].member))
    gone = [k for k in old if k not in new]
    gone.sort(key=lambda k: (-order[k.kind], k.member))
    return [*upserts, *((k, None) for k in gone)]
