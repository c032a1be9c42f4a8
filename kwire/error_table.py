"""The one table mapping Strata's errors (hot.errors) to the outside world.

Kafka error codes (the protocol guide's "Error Codes"), ``ERROR_TABLE`` from error class to
(Kafka error code, HTTP status), and the lookups both ways. The Kafka protocol server and
the REST API translate errors through ``classify`` only, so a given failure always has the
same Kafka error code and HTTP status no matter which door the request came in by; the
client (kclient) turns a code it receives back into the error with ``error_for_code``.
It lives in the codec because both the doors and the client use it; the classes it maps
stay in ``hot.errors``, which needs no Kafka code.
"""

from __future__ import annotations

from typing import Final

from hot.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerNotAvailableError,
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptLogError,
    CorruptRecordError,
    DiskHighWaterError,
    DuplicateResourceError,
    DuplicateSequenceError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FencedInstanceIdError,
    FencedLeaderEpochError,
    FencedMemberEpochError,
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    IllegalSaslStateError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    InvalidGroupIdError,
    InvalidPartitionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    InvalidRegularExpressionError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidSessionTimeoutError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    LeaderNotAvailableError,
    MemberIdRequiredError,
    MetadataStoreError,
    NonEmptyGroupError,
    NoReassignmentInProgressError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    ObjectNotFoundError,
    ObjectStoreError,
    OffsetMetadataTooLargeError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    PolicyViolationError,
    PreferredLeaderNotAvailableError,
    ProducerFencedError,
    RebalanceInProgressError,
    RecordTooLargeError,
    RequestTimedOutError,
    ResourceNotFoundError,
    SecurityDisabledError,
    StaleControllerEpochError,
    StaleMemberEpochError,
    StorageError,
    StrataError,
    TlsError,
    TopicAuthorizationFailedError,
    TopicExistsError,
    TransactionAbortableError,
    TransactionalIdAuthorizationError,
    TransactionalIdNotFoundError,
    TransactionCoordinatorFencedError,
    UnacceptableCredentialError,
    UnknownLeaderEpochError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    UnreleasedInstanceIdError,
    UnstableOffsetCommitError,
    UnsupportedAssignorError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)

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
POLICY_VIOLATION: Final = 44
KAFKA_STORAGE_ERROR: Final = 56
UNSUPPORTED_COMPRESSION_TYPE: Final = 76
INVALID_RECORD: Final = 87
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
DUPLICATE_SEQUENCE_NUMBER: Final = 46
INVALID_PRODUCER_EPOCH: Final = 47
INVALID_PRODUCER_ID_MAPPING: Final = 49
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = 53
UNKNOWN_PRODUCER_ID: Final = 59
INVALID_TXN_STATE: Final = 48
INVALID_TRANSACTION_TIMEOUT: Final = 50
CONCURRENT_TRANSACTIONS: Final = 51
TRANSACTION_COORDINATOR_FENCED: Final = 52
TRANSACTIONAL_ID_NOT_FOUND: Final = 105
TRANSACTION_ABORTABLE: Final = 120
UNKNOWN_TOPIC_ID: Final = 100  # Fetch v13+ (KIP-516): no topic has the id
PRODUCER_FENCED: Final = 90
OPERATION_NOT_ATTEMPTED: Final = 55  # AddPartitionsToTxn: another partition of the request failed
INVALID_REGULAR_EXPRESSION: Final = 128  # ListTransactions v2's transactional id pattern
OFFSET_METADATA_TOO_LARGE: Final = 12
NETWORK_EXCEPTION: Final = 13  # inter-broker: the destination could not be reached
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
FETCH_SESSION_ID_NOT_FOUND: Final = 70  # Fetch (KIP-227): top-level, no such session
INVALID_FETCH_SESSION_EPOCH: Final = 71  # Fetch (KIP-227): top-level, the session expects another epoch
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
MEMBER_ID_REQUIRED: Final = 79
GROUP_MAX_SIZE_REACHED: Final = 81
FENCED_INSTANCE_ID: Final = 82
GROUP_SUBSCRIBED_TO_TOPIC: Final = 86
UNSTABLE_OFFSET_COMMIT: Final = 88
FENCED_MEMBER_EPOCH: Final = 110  # KIP-848
UNRELEASED_INSTANCE_ID: Final = 111
UNSUPPORTED_ASSIGNOR: Final = 112
STALE_MEMBER_EPOCH: Final = 113
INVALID_REPLICA_ASSIGNMENT: Final = 39
NO_REASSIGNMENT_IN_PROGRESS: Final = 85
UNSUPPORTED_SASL_MECHANISM: Final = 33
RESOURCE_NOT_FOUND: Final = 91
PREFERRED_LEADER_NOT_AVAILABLE: Final = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE: Final = 83
ELECTION_NOT_NEEDED: Final = 84
DUPLICATE_RESOURCE: Final = 92
UNACCEPTABLE_CREDENTIAL: Final = 93
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
    PolicyViolationError: (POLICY_VIOLATION, 400),
    InvalidReplicationFactorError: (INVALID_REPLICATION_FACTOR, 400),
    InvalidConfigError: (INVALID_CONFIG, 400),
    TopicExistsError: (TOPIC_ALREADY_EXISTS, 400),  # Confluent REST v3: 400 / 40002
    UnknownTopicOrPartitionError: (UNKNOWN_TOPIC_OR_PARTITION, 404),
    OffsetOutOfRangeError: (OFFSET_OUT_OF_RANGE, 416),
    OffsetMovedToTieredStorageError: (OFFSET_OUT_OF_RANGE, 416),
    OutOfOrderSequenceError: (OUT_OF_ORDER_SEQUENCE_NUMBER, 409),
    DuplicateSequenceError: (DUPLICATE_SEQUENCE_NUMBER, 409),
    InvalidProducerEpochError: (INVALID_PRODUCER_EPOCH, 409),
    InvalidProducerIdMappingError: (INVALID_PRODUCER_ID_MAPPING, 400),
    UnknownProducerIdError: (UNKNOWN_PRODUCER_ID, 409),
    ProducerFencedError: (PRODUCER_FENCED, 409),
    # Fatal in every client: transactional records without an authorized transactional id.
    TransactionalIdAuthorizationError: (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 403),
    InvalidTxnStateError: (INVALID_TXN_STATE, 409),
    TransactionCoordinatorFencedError: (TRANSACTION_COORDINATOR_FENCED, 409),
    InvalidTransactionTimeoutError: (INVALID_TRANSACTION_TIMEOUT, 400),
    ConcurrentTransactionsError: (CONCURRENT_TRANSACTIONS, 409),
    TransactionalIdNotFoundError: (TRANSACTIONAL_ID_NOT_FOUND, 404),
    TransactionAbortableError: (TRANSACTION_ABORTABLE, 409),
    AuthenticationError: (SASL_AUTHENTICATION_FAILED, 401),
    UnsupportedSaslMechanismError: (UNSUPPORTED_SASL_MECHANISM, 400),
    ResourceNotFoundError: (RESOURCE_NOT_FOUND, 404),
    PreferredLeaderNotAvailableError: (PREFERRED_LEADER_NOT_AVAILABLE, 409),
    EligibleLeadersNotAvailableError: (ELIGIBLE_LEADERS_NOT_AVAILABLE, 409),
    ElectionNotNeededError: (ELECTION_NOT_NEEDED, 409),
    DuplicateResourceError: (DUPLICATE_RESOURCE, 400),
    UnacceptableCredentialError: (UNACCEPTABLE_CREDENTIAL, 400),
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
    UnstableOffsetCommitError: (UNSTABLE_OFFSET_COMMIT, 409),
    FencedMemberEpochError: (FENCED_MEMBER_EPOCH, 409),
    StaleMemberEpochError: (STALE_MEMBER_EPOCH, 409),
    UnreleasedInstanceIdError: (UNRELEASED_INSTANCE_ID, 409),
    UnsupportedAssignorError: (UNSUPPORTED_ASSIGNOR, 400),
    InvalidRegularExpressionError: (INVALID_REGULAR_EXPRESSION, 400),
    UnsupportedVersionError: (UNSUPPORTED_VERSION, 400),
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
