"""A transactional id's state at the transaction coordinator (Kafka's TransactionMetadata).

State diagram (Kafka's TransactionState; each arrow is a record in ``__transaction_state``)::

    (new id)                 ──InitProducerId──────────────────────────► Empty
    Empty, Complete*         ──InitProducerId (epoch bump or new id)────► Empty
    Empty, Complete*, Ongoing ──AddPartitionsToTxn / AddOffsetsToTxn───► Ongoing
    Ongoing                  ──EndTxn(commit)──────────────────────────► PrepareCommit
    Ongoing                  ──EndTxn(abort), timeout, fencing─────────► PrepareAbort
    Empty, Complete*         ──EndTxn(abort), Transactions V2 only─────► PrepareAbort
    PrepareCommit            ──every marker written────────────────────► CompleteCommit
    PrepareAbort             ──every marker written────────────────────► CompleteAbort
    Empty, Complete*         ──transactional.id.expiration.ms idle─────► Dead (a tombstone:
                                                                           the id is forgotten)
    Ongoing                  ──fencing: PrepareEpochFence, in memory only, never written──►
                                                                           PrepareAbort

``VALID_PREVIOUS`` is Kafka's table of which state may precede which; every transition
checks it.

``TransactionMetadata`` is frozen: a transition is prepared as a ``Transit`` (the cache's
entry with its pending state set, and the metadata the record states), the record is
written, and ``complete`` installs the new metadata once the write is acknowledged
(``abandon`` when it failed). While a transition is pending, every other one is refused
with CONCURRENT_TRANSACTIONS, as Kafka does with its pending state. Nothing here does I/O
or reads a clock: times come in as ``now_ms``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from broker.groups.types import TopicPartition

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_EPOCH: Final = (1 << 15) - 1  # Short.MaxValue; clients are never given it (fencing needs one more)

# transaction.version feature levels (Kafka's TransactionVersion): 1 writes flexible
# (v1) __transaction_state values, 2 bumps the epoch at every EndTxn (KIP-890 part 2).
TV_0: Final = 0
TV_1: Final = 1
TV_2: Final = 2


def supports_epoch_bump(transaction_version: int) -> bool:
    """Transactions V2: every EndTxn bumps the producer epoch."""
    return transaction_version >= TV_2


def log_value_version(transaction_version: int) -> int:
    """The ``TransactionLogValue`` version a coordinator at this feature level writes."""
    return 1 if transaction_version >= TV_1 else 0


def is_epoch_exhausted(epoch: int) -> bool:
    """No epoch above MAX-1 is handed out, so a coordinator can always fence once more."""
    return epoch >= MAX_EPOCH - 1


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState; the values are the ids stored in ``__transaction_state``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions report."""
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether ``transactional.id.expiration.ms`` may remove an id in this state."""
        return self in _EXPIRABLE

    @property
    def valid_previous(self) -> frozenset[TransactionState]:
        return VALID_PREVIOUS[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state of a Kafka name (ListTransactions' state filter), or None."""
        return _BY_NAME.get(name)


_S = TransactionState
_NAMES: Final[dict[TransactionState, str]] = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME: Final = {name: state for state, name in _NAMES.items()}
_EXPIRABLE: Final = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
TERMINAL: Final = _EXPIRABLE  # no transaction open: a new one may start

VALID_PREVIOUS: Final[dict[TransactionState, frozenset[TransactionState]]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(Exception):
    """A transition the state machine forbids. Never a client's fault: it means a bug in
    the caller (Kafka logs these as fatal and throws IllegalStateException)."""


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """One transactional id's state. Everything but the last two fields is persisted.

    ``previous_producer_id`` is the producer id before the last transition (Kafka keeps it
    so that a retried InitProducerId after a producer id rotation is recognised);
    ``next_producer_id`` is the id a Transactions V2 EndTxn that exhausted the epoch
    handed out, taken over when the transaction completes. ``last_producer_epoch`` (not
    persisted) recognises a retried KIP-360 InitProducerId. ``txn_start_timestamp_ms`` is
    -1 while no transaction is open.
    """

    transactional_id: str
    producer_id: int
    timeout_ms: int
    state: TransactionState
    txn_last_update_timestamp_ms: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    partitions: frozenset[TopicPartition] = frozenset()
    txn_start_timestamp_ms: int = -1
    client_transaction_version: int = TV_0
    # In memory only: the state of a transition whose record is being written (Kafka's
    # pendingState), and whether an epoch fence's write failed (its bump is not repeated).
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False

    @property
    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT)

    def with_pending(self, state: TransactionState | None) -> TransactionMetadata:
        return dataclasses.replace(self, pending_state=state)

    def persisted(self) -> TransactionMetadata:
        """What a replay of this metadata's record gives: the in-memory fields reset."""
        return dataclasses.replace(
            self, last_producer_epoch=NO_PRODUCER_EPOCH, pending_state=None, has_failed_epoch_fence=False
        )


@dataclass(frozen=True, slots=True)
class Transit:
    """A prepared transition.

    ``before`` replaces the cached metadata at once (it carries the pending state that
    holds off other transitions); ``after`` is the metadata the record states and the cache
    holds once the write is acknowledged (``complete``). ``epoch_fence`` marks the abort of
    a fenced or timed-out transaction: if its write fails, ``abandon`` remembers it.
    """

    before: TransactionMetadata
    after: TransactionMetadata
    epoch_fence: bool = False

    @property
    def producer_id(self) -> int:
        return self.after.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.after.producer_epoch


def prepare(current: TransactionMetadata, target: TransactionMetadata) -> Transit:
    """Check ``current`` -> ``target`` against the state machine and mark it pending.

    ``target``'s ``previous_producer_id`` is set to ``current``'s producer id, as Kafka's
    every transition does.
    """
    if current.pending_state is not None:
        raise IllegalTransitionError(
            f"{current.transactional_id}: preparing {target.state.name} while "
            f"{current.pending_state.name} is pending"
        )
    if target.producer_id < 0:
        raise IllegalTransitionError(f"{current.transactional_id}: illegal producer id {target.producer_id}")
    if target.state is not _S.DEAD and not 0 <= target.producer_epoch <= MAX_EPOCH:
        raise IllegalTransitionError(
            f"{current.transactional_id}: illegal producer epoch {target.producer_epoch}"
        )
    if current.state not in VALID_PREVIOUS[target.state]:
        raise IllegalTransitionError(
            f"{current.transactional_id}: {current.state.name} -> {target.state.name} is not a transition"
        )
    after = dataclasses.replace(
        target,
        previous_producer_id=current.producer_id,
        pending_state=None,
        has_failed_epoch_fence=current.has_failed_epoch_fence,
    )
    return Transit(current.with_pending(target.state), after)


def complete(current: TransactionMetadata, transit: Transit) -> TransactionMetadata:
    """The metadata once ``transit``'s record is acknowledged (Kafka's completeTransitionTo).

    ``current`` is the cached metadata, which must still be ``transit.before``'s pending
    transition; the checks are Kafka's (epochs move by one or restart at 0 with a new
    producer id, partitions only grow while Ongoing, timeouts and start times hold).
    """
    after = transit.after
    to = current.pending_state
    if to is None or to is not after.state:
        raise IllegalTransitionError(
            f"{current.transactional_id}: completing {after.state.name} but the pending state is "
            f"{to.name if to is not None else 'none'}"
        )
    ok = True
    if to is _S.EMPTY:
        bumped = after.producer_epoch == current.producer_epoch + 1 or (
            after.producer_epoch == 0 and after.producer_id != current.producer_id
        )
        ok = (
            (after.producer_epoch == current.producer_epoch or bumped)
            and not after.partitions
            and after.txn_start_timestamp_ms == -1
        )
    elif to is _S.ONGOING:
        ok = (
            _valid_epoch(current, after)
            and after.partitions >= current.partitions
            and after.timeout_ms == current.timeout_ms
        )
    elif to in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        empty_abort = (
            to is _S.PREPARE_ABORT
            and supports_epoch_bump(after.client_transaction_version)
            and current.state in TERMINAL
        )
        ok = (
            _valid_epoch(current, after)
            and after.partitions == current.partitions
            and after.timeout_ms == current.timeout_ms
            and (after.txn_start_timestamp_ms == current.txn_start_timestamp_ms or empty_abort)
        )
    elif to in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
        ok = (
            _valid_epoch(current, after)
            and after.timeout_ms == current.timeout_ms
            and after.txn_start_timestamp_ms != -1
        )
    else:  # PREPARE_EPOCH_FENCE is never written, DEAD is removed rather than completed
        ok = False
    if not ok:
        raise IllegalTransitionError(
            f"{current.transactional_id}: unexpected transition {current} -> {after}"
        )
    return dataclasses.replace(after, has_failed_epoch_fence=current.has_failed_epoch_fence)


def _valid_epoch(current: TransactionMetadata, after: TransactionMetadata) -> bool:
    """Kafka's validProducerEpoch: the epoch holds, except where Transactions V2 bumps it."""
    v2 = supports_epoch_bump(after.client_transaction_version)
    if v2 and after.state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT) and after.producer_epoch == 0:
        # the epoch overflowed at EndTxn: the next producer id takes over at epoch 0
        return (
            after.last_producer_epoch == current.last_producer_epoch
            and after.previous_producer_id == current.producer_id
        )
    if v2 and after.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        return (
            after.last_producer_epoch == current.producer_epoch and after.producer_id == current.producer_id
        )
    return after.producer_epoch == current.producer_epoch and after.producer_id == current.producer_id


def abandon(current: TransactionMetadata, transit: Transit) -> TransactionMetadata:
    """The cached metadata after ``transit``'s write failed: no longer pending; a failed
    epoch fence is remembered so that the next fence does not bump the epoch again (the
    bumped epoch was never handed to a client)."""
    return dataclasses.replace(
        current,
        pending_state=None,
        has_failed_epoch_fence=current.has_failed_epoch_fence or transit.epoch_fence,
    )


def without_partition(current: TransactionMetadata, tp: TopicPartition) -> TransactionMetadata:
    """A PrepareCommit/PrepareAbort transaction once ``tp``'s marker is written."""
    if current.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        raise IllegalTransitionError(
            f"{current.transactional_id}: removing {tp} from a transaction in {current.state.name}"
        )
    return dataclasses.replace(current, partitions=current.partitions - {tp})


def partitions_of(pairs: Iterable[tuple[str, int]]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(t, p) for t, p in pairs)
