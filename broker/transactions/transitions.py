"""The transaction coordinator's requests as pure transitions (Kafka's TransactionCoordinator).

Each function takes the cached ``TransactionMetadata`` of one transactional id (None when
the coordinator has none) and the request, and either raises the error Kafka answers,
returns ``Answer`` (nothing to write: answer at once), or returns a ``Transit``: install
``transit.before`` in the cache now, write ``transit.after`` to ``__transaction_state``
(``log_codec.encode_value``), then install ``complete(cached, transit)`` and answer — or
``abandon(cached, transit)`` and answer the write's error. Times come in as ``now_ms``;
producer ids come from ``new_producer_id`` (the broker's allocator), called only when a
new id is needed.

* InitProducerId: a new id starts at epoch 0; each call bumps the epoch (fencing the
  previous instance); an exhausted epoch (MAX-1) rotates to a new producer id at epoch 0.
  KIP-360: with the producer's current id and epoch, the epoch is bumped only if they are
  the current ones (or the last ones: a retry), else PRODUCER_FENCED. An Ongoing
  transaction is fenced: its abort is written with a bumped epoch and the request answers
  CONCURRENT_TRANSACTIONS once that write is acknowledged (``Transit.epoch_fence``; the
  markers follow), so the client retries and bumps again. A transaction in PrepareCommit
  or PrepareAbort answers CONCURRENT_TRANSACTIONS.
* AddPartitionsToTxn / AddOffsetsToTxn (the group's ``__consumer_offsets`` partition):
  Ongoing with the union of the partitions; the start time is set by the first one.
  ``verify_partitions`` is the partition leader's check of KIP-890 (AddPartitionsToTxn
  with verifyOnly).
* EndTxn: Ongoing -> PrepareCommit/PrepareAbort. A retried EndTxn of a transaction already
  completed the same way answers success; the other way, or a commit with nothing open,
  INVALID_TXN_STATE; one still completing, CONCURRENT_TRANSACTIONS. Transactions V2
  (EndTxn v5+) bump the epoch at every end and may abort with nothing open.
* ``begin_completion``: PrepareX -> CompleteX, prepared once PrepareX is written and
  written once every marker is.
* ``abort_timed_out``: an Ongoing transaction older than its timeout is fenced and aborted.
* ``expire``: an id idle for ``transactional.id.expiration.ms`` in Empty/Complete* is
  written as a tombstone (Dead while it is pending) and forgotten.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from broker.coordinator_runtime.records import partition_for as offsets_partition_for
from broker.groups.types import TopicPartition
from broker.transactions.state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TERMINAL,
    TV_0,
    TV_2,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    Transit,
    is_epoch_exhausted,
    prepare,
    supports_epoch_bump,
)
from hot.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    StrataError,
)
from kwire.error_table import TRANSACTION_ABORTABLE

S = TransactionState
OFFSETS_TOPIC: Final = "__consumer_offsets"

# Kafka API keys whose older versions answer INVALID_PRODUCER_EPOCH for PRODUCER_FENCED
# (clients before KIP-588 do not know PRODUCER_FENCED): key -> first version that knows it.
PRODUCER_FENCED_SINCE: Final[dict[int, int]] = {22: 4, 24: 2, 25: 2, 26: 2}  # InitProducerId,
# AddPartitionsToTxn, AddOffsetsToTxn, EndTxn


class TransactionResult(enum.IntEnum):
    """What EndTxn and the markers ask for (the marker's ``TransactionResult``)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class Answer:
    """Nothing to write: the request succeeds at once with this producer id and epoch."""

    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


def for_version(exc: StrataError, api_key: int, version: int) -> StrataError:
    """PRODUCER_FENCED as an older client of ``api_key`` understands it."""
    since = PRODUCER_FENCED_SINCE.get(api_key)
    if isinstance(exc, ProducerFencedError) and since is not None and version < since:
        return InvalidProducerEpochError(str(exc))
    return exc


def validate_timeout(timeout_ms: int, max_timeout_ms: int) -> None:
    """``transaction.timeout.ms`` must be in (0, ``transaction.max.timeout.ms``]."""
    if not 0 < timeout_ms <= max_timeout_ms:
        raise InvalidTransactionTimeoutError(
            f"transaction timeout {timeout_ms} ms is not in (0, {max_timeout_ms}] "
            "(transaction.max.timeout.ms)"
        )


def _require_id(transactional_id: str) -> None:
    if not transactional_id:
        raise InvalidRequestError("empty transactional id")


# --- InitProducerId --------------------------------------------------------------------


def init_producer_id(
    current: TransactionMetadata | None,
    *,
    transactional_id: str,
    timeout_ms: int,
    max_timeout_ms: int,
    now_ms: int,
    new_producer_id: Callable[[], int],
    expected: tuple[int, int] | None = None,
    server_transaction_version: int = TV_0,
) -> Transit:
    """InitProducerId with a transactional id; ``expected`` is KIP-360's (producer id,
    epoch) of a producer recovering from an error, None for a new producer."""
    _require_id(transactional_id)
    validate_timeout(timeout_ms, max_timeout_ms)
    meta = current
    if meta is None:
        meta = TransactionMetadata(
            transactional_id=transactional_id,
            producer_id=new_producer_id(),
            timeout_ms=timeout_ms,
            state=S.EMPTY,
            txn_last_update_timestamp_ms=now_ms,
        )
    if meta.pending_state is not None:
        raise ConcurrentTransactionsError(f"{transactional_id}: a state change is being written")
    if expected is not None and not _recognised(meta, *expected):
        raise ProducerFencedError(
            f"{transactional_id}: producer {expected[0]} epoch {expected[1]} has been fenced "
            f"(current producer {meta.producer_id} epoch {meta.producer_epoch})"
        )
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        raise ConcurrentTransactionsError(f"{transactional_id}: the previous transaction is completing")
    if meta.state is S.ONGOING:
        return fence_and_abort(meta, now_ms, server_transaction_version)
    if meta.state not in TERMINAL:
        raise IllegalTransitionError(f"{transactional_id}: InitProducerId in {meta.state.name}")
    if meta.is_epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
        return prepare(
            meta,
            dataclasses.replace(
                meta,
                state=S.EMPTY,
                producer_id=new_producer_id(),
                producer_epoch=0,
                last_producer_epoch=meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                partitions=frozenset(),
                txn_start_timestamp_ms=-1,
                txn_last_update_timestamp_ms=now_ms,
            ),
        )
    return prepare(meta, _bumped(meta, expected, timeout_ms, now_ms))


def _recognised(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: may this (producer id, epoch) bump the epoch? Yes for a just-created id,
    the current producer id (its epoch is checked next), or the previous producer id with an
    exhausted epoch (a retry of the call that rotated the id)."""
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == meta.producer_id
        or (producer_id == meta.previous_producer_id and is_epoch_exhausted(epoch))
    )


def _bumped(
    meta: TransactionMetadata, expected: tuple[int, int] | None, timeout_ms: int, now_ms: int
) -> TransactionMetadata:
    """Kafka's prepareIncrementProducerEpoch."""
    epoch, last = meta.producer_epoch + 1, NO_PRODUCER_EPOCH
    if expected is not None:
        expected_epoch = expected[1]
        if meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
            last = meta.producer_epoch  # recovering after an error: bump, remember the old one
        elif expected_epoch == meta.last_producer_epoch:
            epoch, last = meta.producer_epoch, meta.last_producer_epoch  # a retry of that bump
        else:
            raise ProducerFencedError(
                f"{meta.transactional_id}: epoch {expected_epoch} is neither the current "
                f"{meta.producer_epoch} nor the previous {meta.last_producer_epoch}"
            )
    return dataclasses.replace(
        meta,
        state=S.EMPTY,
        producer_epoch=epoch,
        last_producer_epoch=last,
        timeout_ms=timeout_ms,
        partitions=frozenset(),
        txn_start_timestamp_ms=-1,
        txn_last_update_timestamp_ms=now_ms,
    )


def fence_and_abort(meta: TransactionMetadata, now_ms: int, server_transaction_version: int) -> Transit:
    """Abort ``meta``'s Ongoing transaction with a bumped epoch, so that its producer is
    fenced (Kafka: prepareFenceProducerEpoch, then an EndTxn(abort) not from the client).

    The bump is skipped when the last fence's write failed (that epoch was never handed
    out) or the epoch is already MAX. Under Transactions V2 the abort bumps once more.
    """
    if meta.state is not S.ONGOING or meta.pending_state is not None:
        raise IllegalTransitionError(f"{meta.transactional_id}: fencing in {meta.state.name}")
    fenced = meta.producer_epoch
    if not meta.has_failed_epoch_fence and fenced < MAX_EPOCH:
        fenced += 1
    # Kafka bumps the cached epoch before the write, and keeps it if the write fails.
    mid = dataclasses.replace(meta, producer_epoch=fenced, last_producer_epoch=NO_PRODUCER_EPOCH)
    tv = server_transaction_version if supports_epoch_bump(server_transaction_version) else TV_0
    transit = prepare(mid, _ended(mid, S.PREPARE_ABORT, tv, NO_PRODUCER_ID, now_ms, nothing_added=False))
    return dataclasses.replace(transit, epoch_fence=True)


# --- AddPartitionsToTxn, AddOffsetsToTxn -----------------------------------------------


def _check_producer(meta: TransactionMetadata | None, producer_id: int, epoch: int) -> TransactionMetadata:
    if meta is None:
        raise InvalidProducerIdMappingError("no producer id is mapped to this transactional id")
    if meta.producer_id != producer_id:
        raise InvalidProducerIdMappingError(
            f"{meta.transactional_id}: producer id {producer_id} is not the current {meta.producer_id}"
        )
    if meta.producer_epoch != epoch:
        raise ProducerFencedError(
            f"{meta.transactional_id}: epoch {epoch} is not the current {meta.producer_epoch}"
        )
    return meta


def add_partitions(
    current: TransactionMetadata | None,
    *,
    producer_id: int,
    producer_epoch: int,
    partitions: Collection[TopicPartition],
    now_ms: int,
    client_transaction_version: int = TV_0,
) -> Transit | Answer:
    """AddPartitionsToTxn: the transaction becomes (or stays) Ongoing with ``partitions``."""
    meta = _check_producer(current, producer_id, producer_epoch)
    if meta.pending_state is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        raise ConcurrentTransactionsError(f"{meta.transactional_id}: the previous transaction is completing")
    added = frozenset(partitions)
    if meta.state is S.ONGOING and added <= meta.partitions:
        return Answer(meta.producer_id, meta.producer_epoch)
    start = now_ms if meta.state in TERMINAL else meta.txn_start_timestamp_ms
    return prepare(
        meta,
        dataclasses.replace(
            meta,
            state=S.ONGOING,
            partitions=meta.partitions | added,
            txn_start_timestamp_ms=start,
            txn_last_update_timestamp_ms=now_ms,
            client_transaction_version=client_transaction_version,
        ),
    )


def offsets_partition(group_id: str, offsets_topic_partitions: int) -> TopicPartition:
    """The ``__consumer_offsets`` partition AddOffsetsToTxn adds for ``group_id``."""
    return TopicPartition(OFFSETS_TOPIC, offsets_partition_for(group_id, offsets_topic_partitions))


def add_offsets(
    current: TransactionMetadata | None,
    *,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
    offsets_topic_partitions: int,
    now_ms: int,
    client_transaction_version: int = TV_0,
) -> Transit | Answer:
    """AddOffsetsToTxn: adds the group's offsets partition, where TxnOffsetCommit writes."""
    return add_partitions(
        current,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partitions=(offsets_partition(group_id, offsets_topic_partitions),),
        now_ms=now_ms,
        client_transaction_version=client_transaction_version,
    )


def verify_partitions(
    current: TransactionMetadata | None,
    *,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, int]:
    """AddPartitionsToTxn with verifyOnly (KIP-890): error code per partition, 0 for the
    partitions the transaction has added, TRANSACTION_ABORTABLE for the others. A pending
    state is not checked (the write of the data is checked again at the leader)."""
    meta = _check_producer(current, producer_id, producer_epoch)
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        raise ConcurrentTransactionsError(f"{meta.transactional_id}: the transaction is completing")
    return {tp: 0 if tp in meta.partitions else TRANSACTION_ABORTABLE for tp in partitions}


# --- EndTxn ----------------------------------------------------------------------------


def _ended(
    meta: TransactionMetadata,
    state: TransactionState,
    tv: int,
    next_producer_id: int,
    now_ms: int,
    *,
    nothing_added: bool,
) -> TransactionMetadata:
    """Kafka's prepareAbortOrCommit."""
    epoch, last = meta.producer_epoch, meta.last_producer_epoch
    if supports_epoch_bump(tv):
        # An abort at MAX goes through without the bump, so that a broken state recovers.
        if not (meta.producer_epoch == MAX_EPOCH and state is S.PREPARE_ABORT):
            epoch = meta.producer_epoch + 1
        last = meta.producer_epoch
    return dataclasses.replace(
        meta,
        state=state,
        producer_epoch=epoch,
        last_producer_epoch=last,
        next_producer_id=next_producer_id,
        txn_start_timestamp_ms=now_ms if nothing_added else meta.txn_start_timestamp_ms,
        txn_last_update_timestamp_ms=now_ms,
        client_transaction_version=tv,
    )


def end_txn(
    current: TransactionMetadata | None,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    result: TransactionResult,
    now_ms: int,
    new_producer_id: Callable[[], int],
    client_transaction_version: int = TV_0,
) -> Transit | Answer:
    """EndTxn from the client. ``client_transaction_version`` is TV_2 for EndTxn v5+."""
    _require_id(transactional_id)
    if current is None:
        raise InvalidProducerIdMappingError(f"{transactional_id}: no producer id is mapped to it")
    if supports_epoch_bump(client_transaction_version):
        return _end_txn_v2(current, producer_id, producer_epoch, result, now_ms, new_producer_id)
    meta = _check_producer(current, producer_id, producer_epoch)
    if meta.pending_state is not None:
        raise ConcurrentTransactionsError(f"{transactional_id}: a state change is being written")
    commit = result is TransactionResult.COMMIT
    if meta.state is S.ONGOING:
        target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        return prepare(meta, _ended(meta, target, TV_0, NO_PRODUCER_ID, now_ms, nothing_added=False))
    return _end_in_other_state(meta, commit, retry=True)


def _end_in_other_state(meta: TransactionMetadata, commit: bool, *, retry: bool) -> Answer:
    """EndTxn in a state other than Ongoing: a retry of the same end succeeds, one still
    completing waits, anything else is INVALID_TXN_STATE."""
    same = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
    completing = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    if meta.state is same and retry:
        return Answer(meta.producer_id, meta.producer_epoch)
    if meta.state is completing:
        raise ConcurrentTransactionsError(f"{meta.transactional_id}: the transaction is completing")
    if meta.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        raise IllegalTransitionError(f"{meta.transactional_id}: EndTxn in {meta.state.name}")
    raise InvalidTxnStateError(
        f"{meta.transactional_id}: cannot {'commit' if commit else 'abort'} a transaction in "
        f"{meta.state.kafka_name}"
    )


def _end_txn_v2(
    meta: TransactionMetadata,
    producer_id: int,
    producer_epoch: int,
    result: TransactionResult,
    now_ms: int,
    new_producer_id: Callable[[], int],
) -> Transit | Answer:
    """EndTxn under Transactions V2 (Kafka's table: an abort with nothing open is allowed
    and bumps; a retry carries the epoch before the bump, or MAX-1 of the previous producer
    id after an overflow)."""
    retry_on_overflow = (
        meta.previous_producer_id == producer_id
        and producer_epoch == MAX_EPOCH - 1
        and meta.producer_epoch == 0
    )
    retry_on_bump = meta.producer_epoch == producer_epoch + 1
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        valid_epoch = retry_on_bump
    elif meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
    else:
        valid_epoch = producer_epoch == meta.producer_epoch
    if meta.producer_id != producer_id and not retry_on_overflow:
        raise InvalidProducerIdMappingError(
            f"{meta.transactional_id}: producer id {producer_id} is not the current {meta.producer_id}"
        )
    if not valid_epoch:
        raise ProducerFencedError(
            f"{meta.transactional_id}: epoch {producer_epoch} does not fit the current "
            f"{meta.producer_epoch} in {meta.state.kafka_name}"
        )
    if meta.pending_state is not None:
        raise ConcurrentTransactionsError(f"{meta.transactional_id}: a state change is being written")
    is_retry = retry_on_bump or retry_on_overflow
    commit = result is TransactionResult.COMMIT

    def end(target: TransactionState, nothing_added: bool) -> Transit:
        next_id = new_producer_id() if meta.is_epoch_exhausted else NO_PRODUCER_ID
        return prepare(meta, _ended(meta, target, TV_2, next_id, now_ms, nothing_added=nothing_added))

    if meta.state is S.ONGOING:
        return end(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False)
    if not commit and not is_retry and meta.state in TERMINAL:
        return end(S.PREPARE_ABORT, True)  # an abort with nothing open: bump the epoch
    return _end_in_other_state(meta, commit, retry=is_retry)


# --- completion, timeouts, expiration ----------------------------------------------------


def begin_completion(current: TransactionMetadata, now_ms: int) -> Transit:
    """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort (Kafka's prepareComplete).

    Prepared once the PrepareX record is acknowledged (or found by a replay): the pending
    state holds off other requests while the markers are written, and ``transit.after``
    is written once they all are. Under Transactions V2, an epoch that overflowed at the
    end hands over to ``next_producer_id`` at epoch 0.
    """
    if current.state is S.PREPARE_COMMIT:
        target = S.COMPLETE_COMMIT
    elif current.state is S.PREPARE_ABORT:
        target = S.COMPLETE_ABORT
    else:
        raise IllegalTransitionError(
            f"{current.transactional_id}: completing a transaction in {current.state.name}"
        )
    meta = dataclasses.replace(current, has_failed_epoch_fence=False)  # the fence was written
    pid, epoch = meta.producer_id, meta.producer_epoch
    if supports_epoch_bump(meta.client_transaction_version) and meta.next_producer_id != NO_PRODUCER_ID:
        pid, epoch = meta.next_producer_id, 0
    return prepare(
        meta,
        dataclasses.replace(
            meta,
            state=target,
            producer_id=pid,
            producer_epoch=epoch,
            next_producer_id=NO_PRODUCER_ID,
            partitions=frozenset(),
            txn_last_update_timestamp_ms=now_ms,
        ),
    )


def end_txn_answer(completion: Transit) -> Answer:
    """EndTxn's success once PrepareX is written: under Transactions V2 (EndTxn v5+) the
    producer id and epoch the client continues with (the bumped epoch, or the next producer
    id at epoch 0 after an overflow); older versions carry none."""
    after = completion.after
    if supports_epoch_bump(after.client_transaction_version):
        return Answer(after.producer_id, after.producer_epoch)
    return Answer()


def result_of(state: TransactionState) -> TransactionResult:
    """The marker a PrepareX (or CompleteX) transaction's partitions get."""
    if state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT):
        return TransactionResult.COMMIT
    if state in (S.PREPARE_ABORT, S.COMPLETE_ABORT):
        return TransactionResult.ABORT
    raise IllegalTransitionError(f"no transaction result in {state.name}")


def is_timed_out(meta: TransactionMetadata, now_ms: int) -> bool:
    """An Ongoing transaction open longer than its timeout, with nothing pending."""
    return (
        meta.pending_state is None
        and meta.state is S.ONGOING
        and meta.txn_start_timestamp_ms + meta.timeout_ms < now_ms
    )


def timed_out(metadata: Mapping[str, TransactionMetadata], now_ms: int) -> list[str]:
    """The transactional ids whose transactions ``abort_timed_out`` aborts now."""
    return [tid for tid, meta in metadata.items() if is_timed_out(meta, now_ms)]


def abort_timed_out(current: TransactionMetadata, now_ms: int, server_transaction_version: int) -> Transit:
    """Abort a timed-out transaction, fencing its producer as Kafka does (its next request
    gets PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for older clients)."""
    if not is_timed_out(current, now_ms):
        raise IllegalTransitionError(f"{current.transactional_id}: not a timed-out transaction")
    return fence_and_abort(current, now_ms, server_transaction_version)


def is_expired(meta: TransactionMetadata, now_ms: int, expiration_ms: int) -> bool:
    """Idle for ``transactional.id.expiration.ms`` with no transaction open or pending."""
    return (
        meta.pending_state is None
        and meta.state.expiration_allowed
        and meta.txn_last_update_timestamp_ms <= now_ms - expiration_ms
    )


def expire(current: TransactionMetadata, now_ms: int, expiration_ms: int) -> Transit:
    """Dead, pending while the tombstone is written; once it is acknowledged the caller
    removes the id from the cache (``complete`` refuses Dead: nothing is installed)."""
    if not is_expired(current, now_ms, expiration_ms):
        raise IllegalTransitionError(f"{current.transactional_id}: not expired")
    return prepare(current, dataclasses.replace(current, state=S.DEAD, partitions=frozenset()))


def expired(metadata: Mapping[str, TransactionMetadata], now_ms: int, expiration_ms: int) -> list[str]:
    return [tid for tid, meta in metadata.items() if is_expired(meta, now_ms, expiration_ms)]
