"""Values the group coordinator and the offset store take and return (not wire classes:
api.handlers.groups translates between these and the Kafka messages)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from hot.errors import MemberIdRequiredError, StrataError

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_LEADER_EPOCH = -1


class GroupState(enum.Enum):
    """Kafka's group states; the values are the names Kafka reports. A classic group is
    never Assigning or Reconciling, a KIP-848 consumer group (broker.groups.consumer_group)
    never PreparingRebalance or CompletingRebalance."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset as stored."""

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = -1
    # Set only by OffsetCommit v2-v4 with an explicit retention time.
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class StoredGroup:
    """What the offset store keeps of a group besides its offsets (memberships are not
    persisted: after a restart every group is Empty and its members rejoin)."""

    protocol_type: str
    generation_id: int
    protocol_name: str | None  # None: the group was Empty when this was stored
    leader_id: str | None
    state_timestamp_ms: int  # wall clock of the last state change


# --- requests ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str  # UNKNOWN_MEMBER_ID ("") for a member joining for the first time
    protocol_type: str
    protocols: tuple[GroupProtocol, ...]  # in the member's order of preference
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1  # -1 (JoinGroup v0): same as the session timeout
    group_instance_id: str | None = None  # static membership (KIP-345)
    client_id: str = ""
    client_host: str = ""
    # JoinGroup v4+ (KIP-394): a new dynamic member first gets MEMBER_ID_REQUIRED.
    require_known_member_id: bool = True
    # JoinGroup v9+ (KIP-814): a static leader rejoining a stable group gets the members
    # with skip_assignment instead of being told it is a follower.
    supports_skip_assignment: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    member_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()  # only for the leader

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id


class MemberIdRequired(MemberIdRequiredError):
    """MEMBER_ID_REQUIRED, carrying the member id the client must rejoin with (KIP-394)."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        super().__init__(f"rejoin with member id {member_id}")


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None  # SyncGroup v5+: checked against the group's
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()  # the leader's (member id, assignment)


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    member_id: str
    group_instance_id: str | None
    error: StrataError | None


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    offsets: tuple[tuple[TopicPartition, int, int, str | None], ...]  # (tp, offset, leader epoch, metadata)
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # OffsetCommit v2-v4; -1 = the broker's retention


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    """TxnOffsetCommit (KIP-98; v3+ with the consumer's group metadata, KIP-447)."""

    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[tuple[TopicPartition, int, int, str | None], ...]  # (tp, offset, leader epoch, metadata)
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None


# --- descriptions (the public read API) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str  # "" for groups that only commit offsets
    state: GroupState
    group_type: str = "classic"  # or "consumer" (KIP-848)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[GroupProtocol, ...]
    # The member's metadata for the group's selected protocol (b"" until one is selected).
    metadata: bytes
    # The assignment the leader gave it in the current generation (b"" until SyncGroup).
    assignment: bytes
    # Decoded from ``assignment`` for protocol type "consumer"; () if none or undecodable.
    assigned_partitions: tuple[TopicPartition, ...] = ()
    # KIP-848 consumer groups only: the member's epoch and target assignment.
    member_epoch: int = -1
    target_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str  # "" unless a protocol is selected
    generation_id: int
    leader_id: str  # "" if none
    members: tuple[MemberDescription, ...] = field(default=())
    # KIP-848 consumer groups: "consumer", with the group and target assignment epochs
    # (``generation_id`` is the group epoch, ``protocol_name`` the server assignor).
    group_type: str = "classic"
    assignment_epoch: int = -1
