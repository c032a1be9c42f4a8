"""The one error hierarchy of Strata.

Every layer raises these (or subclasses of them); library exceptions (OSError,
botocore, ...) are converted into them at the boundary where they occur. What each class
means on the wire (its Kafka error code and HTTP status) is not decided here but in the
one table beside the wire codec, ``kwire.error_table``: hot knows no Kafka codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class StrataError(Exception):
    """Base class. ``retriable`` tells a caller whether the same request may succeed later."""

    retriable: bool = False


# --- client input ----------------------------------------------------------------------


class InvalidRequestError(StrataError):
    """A request that is malformed or asks for something nonsensical."""


class CorruptRecordError(StrataError):
    """A record batch whose bytes fail validation (CRC, lengths, varints)."""


class UnsupportedMagicError(StrataError):
    """A batch in a message format other than magic 2."""


class RecordTooLargeError(StrataError):
    """A batch larger than ``max.message.bytes``."""


@dataclass(frozen=True, slots=True)
class RecordError:
    """One refused record of a produced batch: Produce v8+ answers these (KIP-467)."""

    batch_index: int  # the record's index within its batch
    message: str | None


class _RecordErrors(StrataError):
    """An error that may name the records of the batch that caused it."""

    def __init__(self, *args: object, record_errors: Sequence[RecordError] = ()) -> None:
        super().__init__(*args)
        self.record_errors: tuple[RecordError, ...] = tuple(record_errors)


class InvalidRecordError(_RecordErrors):
    """A batch that is well formed but not acceptable (e.g. non-monotonic offsets), or one of
    its records is malformed."""


class InvalidTimestampError(_RecordErrors):
    """A timestamp outside what the topic accepts."""


class UnsupportedCompressionError(StrataError):
    """A compression codec this build cannot handle."""


class InvalidTopicError(StrataError):
    """A topic name that is not legal."""


class PolicyViolationError(StrataError):
    """A request a topic's policy does not allow (DeleteRecords on a compacted topic)."""


class InvalidPartitionsError(StrataError):
    """A partition count that is not legal."""


class InvalidReplicationFactorError(StrataError):
    """A replication factor that cannot be satisfied."""


class InvalidConfigError(StrataError):
    """A configuration name or value that is not legal."""


class TopicExistsError(StrataError):
    """Creating a topic that already exists."""


class UnknownTopicOrPartitionError(StrataError):
    """Naming a topic or partition that does not exist."""


class OffsetOutOfRangeError(StrataError):
    """Fetching an offset outside [log start offset, log end offset]."""


class OffsetMovedToTieredStorageError(OffsetOutOfRangeError):
    """The offset is in the log (at or above the log start offset) but no longer on local
    disk: it lies below the local log start offset and must be read from the object store.

    A subclass of OffsetOutOfRangeError so that callers unaware of tiering still treat it
    as "not readable here"; the remote reader catches it and serves the offset instead.
    """

    def __init__(self, offset: int, local_log_start_offset: int, message: str | None = None) -> None:
        self.offset = offset
        self.local_log_start_offset = local_log_start_offset
        super().__init__(
            message
            or f"offset {offset} moved to tiered storage (local log start offset {local_log_start_offset})"
        )


# --- idempotent producers (KIP-98) --------------------------------------------------------


class OutOfOrderSequenceError(StrataError):
    """An idempotent batch whose sequence does not follow the producer's last one."""


class DuplicateSequenceError(StrataError):
    """An idempotent batch already written whose offsets are no longer known."""


class InvalidProducerEpochError(StrataError):
    """An idempotent batch from an epoch older than the producer's current one (fenced)."""


class InvalidProducerIdMappingError(StrataError):
    """A producer id this broker does not know for the request."""


class UnknownProducerIdError(StrataError):
    """A producer whose state this broker no longer has."""


class ProducerFencedError(StrataError):
    """A newer producer instance with the same id has taken over."""


class TransactionalIdAuthorizationError(StrataError):
    """Transactional records without a transactional id the principal may WRITE (Kafka's
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""


# --- transactions (KIP-98), the partition log's side ----------------------------------------


class InvalidTxnStateError(StrataError):
    """A producer's write that its transaction's state does not allow (a non-transactional
    batch while its transaction is ongoing)."""


class TransactionCoordinatorFencedError(StrataError):
    """A transaction marker from a coordinator epoch older than one already seen (a zombie
    coordinator)."""


# --- transactions (KIP-98), the coordinator's side ------------------------------------------


class InvalidTransactionTimeoutError(StrataError):
    """A ``transaction.timeout.ms`` of 0 or less, or above ``transaction.max.timeout.ms``."""


class ConcurrentTransactionsError(StrataError):
    """The previous transaction is still being completed (markers in flight, or a state
    write pending): the client backs off and retries."""

    retriable = True


class TransactionalIdNotFoundError(StrataError):
    """DescribeTransactions of an id the coordinator does not know (or is expiring)."""


class TransactionAbortableError(StrataError):
    """A transactional write to a partition the transaction has not added (KIP-890
    verification, KIP-1050): the producer must abort the transaction."""


# --- consumer groups ---------------------------------------------------------------------


class GroupError(StrataError):
    """Base of the group coordinator's errors."""


class InvalidGroupIdError(GroupError):
    """An empty or otherwise illegal group id."""


class CoordinatorNotAvailableError(GroupError):
    """No coordinator can serve the group right now (starting, or metadata unavailable)."""

    retriable = True


class CoordinatorLoadInProgressError(GroupError):
    """The coordinator is still loading the group's committed offsets."""

    retriable = True


class NotCoordinatorError(GroupError):
    """This broker is not the group's coordinator; the client must look it up again."""

    retriable = True


class IllegalGenerationError(GroupError):
    """A member spoke for a generation the group has left behind."""


class InconsistentGroupProtocolError(GroupError):
    """The member's protocol type or protocols share nothing with the group's."""


class UnknownMemberIdError(GroupError):
    """The member id is not (or no longer) in the group."""


class InvalidSessionTimeoutError(GroupError):
    """A session timeout outside the broker's allowed range."""


class RebalanceInProgressError(GroupError):
    """The group is rebalancing; the member must rejoin."""


class MemberIdRequiredError(GroupError):
    """KIP-394: a new dynamic member must rejoin with the member id it was given."""


class FencedInstanceIdError(GroupError):
    """KIP-345: another member now holds this ``group.instance.id``."""


class GroupMaxSizeReachedError(GroupError):
    """The group already has ``group.max.size`` members."""


class GroupIdNotFoundError(GroupError):
    """Describing or deleting a group that does not exist."""


class NonEmptyGroupError(GroupError):
    """Deleting a group that still has members."""


class GroupSubscribedToTopicError(GroupError):
    """OffsetDelete of a topic the group's live members still consume."""


class OffsetMetadataTooLargeError(GroupError):
    """Committed-offset metadata longer than ``offset.metadata.max.bytes``."""


class UnstableOffsetCommitError(GroupError):
    """OffsetFetch with ``require_stable`` (KIP-447) for a partition whose transactional
    offset commit is still pending; the client retries once the transaction completed."""

    retriable = True


# KIP-848 consumer groups (broker.groups.consumer_group)
class FencedMemberEpochError(GroupError):
    """A consumer-group member's epoch is not the coordinator's: it must rejoin with epoch 0."""


class StaleMemberEpochError(GroupError):
    """OffsetCommit/OffsetFetch with an older member epoch than the member's current one."""


class UnreleasedInstanceIdError(GroupError):
    """A static member joined while the member holding its instance id has not left."""


class UnsupportedAssignorError(GroupError):
    """A consumer-group member named a server assignor the coordinator does not have."""


class InvalidRegularExpressionError(GroupError):
    """A subscription's regular expression (RE2 syntax) does not compile."""


class UnsupportedVersionError(StrataError):
    """A request version the state it addresses cannot take (OffsetCommit below v9 from a
    KIP-848 consumer-group member)."""


# --- security ----------------------------------------------------------------------------


class AuthenticationError(StrataError):
    """Credentials were refused. Messages never contain the secret that was offered."""


class UnsupportedSaslMechanismError(StrataError):
    """A SASL mechanism this listener does not enable."""


class PreferredLeaderNotAvailableError(StrataError):
    """ElectLeaders: the preferred replica is not alive or not in sync."""


class EligibleLeadersNotAvailableError(StrataError):
    """ElectLeaders (unclean): no live replica could lead."""


class ElectionNotNeededError(StrataError):
    """ElectLeaders: the partition already has the leader asked for."""


class ResourceNotFoundError(StrataError):
    """A named resource that does not exist (a SCRAM credential to delete or describe)."""


class DuplicateResourceError(StrataError):
    """A resource named twice in one request."""


class UnacceptableCredentialError(StrataError):
    """A SCRAM credential Kafka would not store (empty user, too few or many iterations)."""


class IllegalSaslStateError(StrataError):
    """A SASL request out of order (authenticate before handshake, handshake twice)."""


class TlsError(StrataError):
    """A certificate, key or CA file that cannot be loaded (converted from ssl/OSError)."""


class AuthorizationError(StrataError):
    """The principal is authenticated but no ACL allows the operation (broker.security.acl)."""


class TopicAuthorizationFailedError(AuthorizationError):
    """No ACL allows the operation on the topic."""


class GroupAuthorizationFailedError(AuthorizationError):
    """No ACL allows the operation on the consumer group."""


class ClusterAuthorizationFailedError(AuthorizationError):
    """No ACL allows the operation on the cluster resource."""


class SecurityDisabledError(StrataError):
    """An ACL request to a broker whose authorization is off."""


# --- server side -----------------------------------------------------------------------


class StorageError(StrataError):
    """Local disk I/O failed (converted from OSError)."""

    retriable = True


class CorruptLogError(StorageError):
    """Data already on disk failed validation where truncation is not a safe repair.

    The partition is refused (taken offline) rather than served.
    """

    retriable = False

    def __init__(self, path: str, offset_or_position: int, reason: str, *, what: str = "position") -> None:
        self.path = path
        self.position = offset_or_position
        self.reason = reason
        super().__init__(f"corrupt log {path} at {what} {offset_or_position}: {reason}")


class LogClosedError(StorageError):
    """The log was closed (shutdown, deletion) while a request was using it."""


class DiskHighWaterError(StorageError):
    """The data directory is above its high-water mark: appends are refused until tiered
    storage has uploaded (and local retention removed) enough segments. Refusing the
    append is the alternative to deleting data that exists nowhere else (KAFKA-19952)."""


class NotLeaderError(StrataError):
    """This broker is not the leader for the partition."""

    retriable = True


class NotEnoughReplicasError(StrataError):
    """Fewer than ``min.insync.replicas`` replicas are in sync, before the append."""

    retriable = True


class NotEnoughReplicasAfterAppendError(NotEnoughReplicasError):
    """The ISR shrank below ``min.insync.replicas`` after the leader appended."""


class LeaderNotAvailableError(StrataError):
    """The partition has no leader right now (an election is under way)."""

    retriable = True


class FencedLeaderEpochError(StrataError):
    """A request carried a leader epoch older than the partition's current one."""

    retriable = True


class UnknownLeaderEpochError(StrataError):
    """A request carried a leader epoch newer than this replica knows."""

    retriable = True


class StaleControllerEpochError(StrataError):
    """A change made by a controller that has since been replaced."""


class BrokerNotAvailableError(StrataError):
    """The broker named by a request is not alive."""

    retriable = True


class InvalidReplicaAssignmentError(StrataError):
    """A replica list naming no broker, a broker twice, or a broker the cluster does not have."""


class NoReassignmentInProgressError(StrataError):
    """Cancelling a partition reassignment when none is running."""


class MetadataStoreError(StrataError):
    """The cluster metadata store (etcd) failed or is unreachable; converted at its client."""

    retriable = True


class RequestTimedOutError(StrataError):
    retriable = True


class ObjectStoreError(StrataError):
    """The object store failed; ``retriable`` says whether to try again."""


class RetriableObjectStoreError(ObjectStoreError):
    retriable = True


class ObjectNotFoundError(ObjectStoreError):
    pass


class PreconditionFailedError(ObjectStoreError):
    """A conditional write lost its compare-and-swap."""
