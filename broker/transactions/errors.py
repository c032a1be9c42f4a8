"""The transaction coordinator's errors that ``hot.errors`` does not have yet.

The coordinator raises the existing classes where Kafka's error has one
(``InvalidProducerEpochError``, ``ProducerFencedError``, ``InvalidProducerIdMappingError``,
``NotCoordinatorError``, ``CoordinatorLoadInProgressError``, ``InvalidRequestError``) and
these for the rest. Each carries its Kafka error code as ``kafka_error_code``: they have no
row in ``hot.errors.ERROR_TABLE`` yet (that table is shared; the rows are to be added where
the handlers are wired), so ``error_code`` below is the one place that maps any error the
coordinator raises to the code its response carries.
"""

from __future__ import annotations

from typing import ClassVar, Final

from hot.errors import StrataError, kafka_code

INVALID_TXN_STATE: Final = 48
INVALID_TRANSACTION_TIMEOUT: Final = 50
CONCURRENT_TRANSACTIONS: Final = 51
TRANSACTIONAL_ID_NOT_FOUND: Final = 105
TRANSACTION_ABORTABLE: Final = 120


class TransactionError(StrataError):
    """Base of the errors below; ``kafka_error_code`` is what the response carries."""

    kafka_error_code: ClassVar[int]


class InvalidTxnStateError(TransactionError):
    """The request does not fit the transaction's state (EndTxn commit of an empty or
    aborted transaction, abort of a committing one)."""

    kafka_error_code = INVALID_TXN_STATE


class InvalidTransactionTimeoutError(TransactionError):
    """A ``transaction.timeout.ms`` of 0 or less, or above ``transaction.max.timeout.ms``."""

    kafka_error_code = INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(TransactionError):
    """The previous transaction is still being completed (markers in flight, or a state
    write pending): the client backs off and retries."""

    kafka_error_code = CONCURRENT_TRANSACTIONS
    retriable = True


class TransactionalIdNotFoundError(TransactionError):
    """DescribeTransactions of an id the coordinator does not know (or is expiring)."""

    kafka_error_code = TRANSACTIONAL_ID_NOT_FOUND


class TransactionAbortableError(TransactionError):
    """A transactional write to a partition the transaction has not added (KIP-890
    verification, KIP-1050): the producer must abort the transaction."""

    kafka_error_code = TRANSACTION_ABORTABLE


def error_code(exc: BaseException) -> int:
    """The Kafka error code of any error the coordinator raises."""
    if isinstance(exc, TransactionError):
        return exc.kafka_error_code
    return kafka_code(exc)
