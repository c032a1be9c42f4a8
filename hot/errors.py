"""The one error hierarchy of Strata, and the one table mapping it to the outside world.

Every layer raises these (or subclasses of them); library exceptions (OSError,
botocore, ...) are converted into them at the boundary where they occur.
The Kafka protocol server and the REST API translate them through
``ERROR_TABLE`` only, so a given failure always has the same Kafka error code
and HTTP status no matter which door the request came in by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final


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


class TransactionsNotSupportedError(StrataError):
    """A transactional producer: Strata supports idempotence but not transactions."""


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


# --- security ----------------------------------------------------------------------------


class AuthenticationError(StrataError):
    """Credentials were refused. Messages never contain the secret that was offered."""


class UnsupportedSaslMechanismError(StrataError):
    """A SASL mechanism this listener does not enable."""


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


# Kafka error codes (protocol guide "Error Codes").
NONE: Final = 0
UNKNOWN_SERVER_ERROR: Final = -1
OFFSET_OUT_OF_RANGE: Final = 1
CORRUPT_MESSAGE: Final = 2
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
LEADER_NOT_AVAILABLE: Final = 5
NOT_LEADER_OR_FOLLOWER: Final = 6
REQUEST_TIMED_OUT: Final = 7
MESSAGE_TOO_LARGE: Final = 10
INVALID_TOPIC_EXCEPTION: Final = 17
NOT_ENOUGH_REPLICAS: Final = 19
INVALID_TIMESTAMP: Final = 32
UNSUPPORTED_VERSION: Final = 35
TOPIC_ALREADY_EXISTS: Final = 36
INVALID_PARTITIONS: Final = 37
INVALID_REPLICATION_FACTOR: Final = 38
INVALID_REQUEST: Final = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT: Final = 43
INVALID_CONFIG: Final = 40
KAFKA_STORAGE_ERROR: Final = 56
UNSUPPORTED_COMPRESSION_TYPE: Final = 76
INVALID_RECORD: Final = 87
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
DUPLICATE_SEQUENCE_NUMBER: Final = 46
INVALID_PRODUCER_EPOCH: Final = 47
INVALID_PRODUCER_ID_MAPPING: Final = 49
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = 53
INVALID_TXN_STATE: Final = 48
TRANSACTION_COORDINATOR_FENCED: Final = 52
INVALID_TRANSACTION_TIMEOUT: Final = 50
CONCURRENT_TRANSACTIONS: Final = 51
TRANSACTIONAL_ID_NOT_FOUND: Final = 105
TRANSACTION_ABORTABLE: Final = 120
UNKNOWN_PRODUCER_ID: Final = 59
PRODUCER_FENCED: Final = 90
OFFSET_METADATA_TOO_LARGE: Final = 12
COORDINATOR_LOAD_IN_PROGRESS: Final = 14
COORDINATOR_NOT_AVAILABLE: Final = 15
NOT_COORDINATOR: Final = 16
NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = 20
ILLEGAL_GENERATION: Final = 22
INCONSISTENT_GROUP_PROTOCOL: Final = 23
INVALID_GROUP_ID: Final = 24
UNKNOWN_MEMBER_ID: Final = 25
INVALID_SESSION_TIMEOUT: Final = 26
REBALANCE_IN_PROGRESS: Final = 27
STALE_CONTROLLER_EPOCH: Final = 11
BROKER_NOT_AVAILABLE: Final = 8
NON_EMPTY_GROUP: Final = 68
GROUP_ID_NOT_FOUND: Final = 69
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
MEMBER_ID_REQUIRED: Final = 79
GROUP_MAX_SIZE_REACHED: Final = 81
FENCED_INSTANCE_ID: Final = 82
GROUP_SUBSCRIBED_TO_TOPIC: Final = 86
INVALID_REPLICA_ASSIGNMENT: Final = 39
NO_REASSIGNMENT_IN_PROGRESS: Final = 85
UNSUPPORTED_SASL_MECHANISM: Final = 33
ILLEGAL_SASL_STATE: Final = 34
SASL_AUTHENTICATION_FAILED: Final = 58
TOPIC_AUTHORIZATION_FAILED: Final = 29
GROUP_AUTHORIZATION_FAILED: Final = 30
CLUSTER_AUTHORIZATION_FAILED: Final = 31
SECURITY_DISABLED: Final = 54

# The one table: error class -> (Kafka error code, HTTP status).
# Lookup walks the MRO, so a subclass without its own row inherits its parent's.
ERROR_TABLE: Final[dict[type[StrataError], tuple[int, int]]] = {
    StrataError: (UNKNOWN_SERVER_ERROR, 500),
    InvalidRequestError: (INVALID_REQUEST, 400),
    CorruptRecordError: (CORRUPT_MESSAGE, 400),
    UnsupportedMagicError: (UNSUPPORTED_FOR_MESSAGE_FORMAT, 400),
    RecordTooLargeError: (MESSAGE_TOO_LARGE, 413),
    InvalidRecordError: (INVALID_RECORD, 400),
    InvalidTimestampError: (INVALID_TIMESTAMP, 400),
    UnsupportedCompressionError: (UNSUPPORTED_COMPRESSION_TYPE, 400),
    InvalidTopicError: (INVALID_TOPIC_EXCEPTION, 400),
    InvalidPartitionsError: (INVALID_PARTITIONS, 400),
    InvalidReplicationFactorError: (INVALID_REPLICATION_FACTOR, 400),
    InvalidConfigError: (INVALID_CONFIG, 400),
    TopicExistsError: (TOPIC_ALREADY_EXISTS, 409),
    UnknownTopicOrPartitionError: (UNKNOWN_TOPIC_OR_PARTITION, 404),
    OffsetOutOfRangeError: (OFFSET_OUT_OF_RANGE, 416),
    OffsetMovedToTieredStorageError: (OFFSET_OUT_OF_RANGE, 416),
    OutOfOrderSequenceError: (OUT_OF_ORDER_SEQUENCE_NUMBER, 409),
    DuplicateSequenceError: (DUPLICATE_SEQUENCE_NUMBER, 409),
    InvalidProducerEpochError: (INVALID_PRODUCER_EPOCH, 409),
    InvalidProducerIdMappingError: (INVALID_PRODUCER_ID_MAPPING, 400),
    UnknownProducerIdError: (UNKNOWN_PRODUCER_ID, 409),
    ProducerFencedError: (PRODUCER_FENCED, 409),
    # Kafka's code for "this client may not use transactional ids": fatal in every client,
    # where a retriable code would make them retry forever.
    TransactionsNotSupportedError: (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 501),
    InvalidTxnStateError: (INVALID_TXN_STATE, 409),
    TransactionCoordinatorFencedError: (TRANSACTION_COORDINATOR_FENCED, 409),
    InvalidTransactionTimeoutError: (INVALID_TRANSACTION_TIMEOUT, 400),
    ConcurrentTransactionsError: (CONCURRENT_TRANSACTIONS, 409),
    TransactionalIdNotFoundError: (TRANSACTIONAL_ID_NOT_FOUND, 404),
    TransactionAbortableError: (TRANSACTION_ABORTABLE, 409),
    AuthenticationError: (SASL_AUTHENTICATION_FAILED, 401),
    UnsupportedSaslMechanismError: (UNSUPPORTED_SASL_MECHANISM, 400),
    IllegalSaslStateError: (ILLEGAL_SASL_STATE, 400),
    TlsError: (INVALID_CONFIG, 500),
    # Authenticated but not permitted: 403, where a failed authentication is 401.
    TopicAuthorizationFailedError: (TOPIC_AUTHORIZATION_FAILED, 403),
    GroupAuthorizationFailedError: (GROUP_AUTHORIZATION_FAILED, 403),
    ClusterAuthorizationFailedError: (CLUSTER_AUTHORIZATION_FAILED, 403),
    AuthorizationError: (CLUSTER_AUTHORIZATION_FAILED, 403),  # after: error_for_code picks the first
    SecurityDisabledError: (SECURITY_DISABLED, 400),
    StorageError: (KAFKA_STORAGE_ERROR, 503),
    CorruptLogError: (KAFKA_STORAGE_ERROR, 503),
    DiskHighWaterError: (KAFKA_STORAGE_ERROR, 507),
    NotLeaderError: (NOT_LEADER_OR_FOLLOWER, 421),
    NotEnoughReplicasError: (NOT_ENOUGH_REPLICAS, 503),
    NotEnoughReplicasAfterAppendError: (NOT_ENOUGH_REPLICAS_AFTER_APPEND, 503),
    LeaderNotAvailableError: (LEADER_NOT_AVAILABLE, 503),
    FencedLeaderEpochError: (FENCED_LEADER_EPOCH, 409),
    UnknownLeaderEpochError: (UNKNOWN_LEADER_EPOCH, 409),
    StaleControllerEpochError: (STALE_CONTROLLER_EPOCH, 409),
    BrokerNotAvailableError: (BROKER_NOT_AVAILABLE, 503),
    InvalidReplicaAssignmentError: (INVALID_REPLICA_ASSIGNMENT, 400),
    NoReassignmentInProgressError: (NO_REASSIGNMENT_IN_PROGRESS, 409),
    # Clients see the metadata store's trouble as "no leader yet": retriable, and it makes
    # them refresh metadata, which is what should happen once etcd is back.
    MetadataStoreError: (LEADER_NOT_AVAILABLE, 503),
    InvalidGroupIdError: (INVALID_GROUP_ID, 400),
    CoordinatorNotAvailableError: (COORDINATOR_NOT_AVAILABLE, 503),
    CoordinatorLoadInProgressError: (COORDINATOR_LOAD_IN_PROGRESS, 503),
    NotCoordinatorError: (NOT_COORDINATOR, 421),
    IllegalGenerationError: (ILLEGAL_GENERATION, 409),
    InconsistentGroupProtocolError: (INCONSISTENT_GROUP_PROTOCOL, 409),
    UnknownMemberIdError: (UNKNOWN_MEMBER_ID, 404),
    InvalidSessionTimeoutError: (INVALID_SESSION_TIMEOUT, 400),
    RebalanceInProgressError: (REBALANCE_IN_PROGRESS, 409),
    MemberIdRequiredError: (MEMBER_ID_REQUIRED, 409),
    FencedInstanceIdError: (FENCED_INSTANCE_ID, 409),
    GroupMaxSizeReachedError: (GROUP_MAX_SIZE_REACHED, 409),
    GroupIdNotFoundError: (GROUP_ID_NOT_FOUND, 404),
    NonEmptyGroupError: (NON_EMPTY_GROUP, 409),
    GroupSubscribedToTopicError: (GROUP_SUBSCRIBED_TO_TOPIC, 409),
    OffsetMetadataTooLargeError: (OFFSET_METADATA_TOO_LARGE, 400),
    RequestTimedOutError: (REQUEST_TIMED_OUT, 504),
    ObjectStoreError: (KAFKA_STORAGE_ERROR, 502),
    ObjectNotFoundError: (KAFKA_STORAGE_ERROR, 502),
}


def classify(exc: BaseException) -> tuple[int, int]:
    """(Kafka error code, HTTP status) for any exception; unknown ones are server errors."""
    if isinstance(exc, StrataError):
        for cls in type(exc).__mro__:
            row = ERROR_TABLE.get(cls)  # type: ignore[arg-type]
            if row is not None:
                return row
    return ERROR_TABLE[StrataError]


def kafka_code(exc: BaseException) -> int:
    return classify(exc)[0]


def http_status(exc: BaseException) -> int:
    return classify(exc)[1]


def error_for_code(code: int, message: str | None = None) -> StrataError:
    """The error a client raises for a Kafka error code received from a broker."""
    for cls, (kcode, _) in ERROR_TABLE.items():
        if kcode == code and cls is not StrataError:
            return cls(message or f"{cls.__name__} (Kafka error code {code})")
    return StrataError(message or f"broker returned Kafka error code {code}")
