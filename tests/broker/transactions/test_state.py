"""The transaction state machine's table and the prepare / complete / abandon protocol."""

from __future__ import annotations

import dataclasses

import pytest

from broker.transactions.state import (
    MAX_EPOCH,
    VALID_PREVIOUS,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    abandon,
    complete,
    is_epoch_exhausted,
    log_value_version,
    prepare,
    supports_epoch_bump,
    without_partition,
)
from hot.errors import ConcurrentTransactionsError, InvalidTxnStateError, ProducerFencedError
from kwire.error_table import CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE, PRODUCER_FENCED
from kwire.error_table import kafka_code as error_code
from tests.broker.transactions.txnlib import TP_A0, TP_A1

S = TransactionState


def meta(state: TransactionState = S.EMPTY, **kw: object) -> TransactionMetadata:
    base = TransactionMetadata(
        transactional_id="tx",
        producer_id=7,
        producer_epoch=3,
        timeout_ms=60_000,
        state=state,
        txn_last_update_timestamp_ms=100,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_states_have_kafkas_ids_names_and_expiry() -> None:
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.from_name("PrepareCommit") is S.PREPARE_COMMIT and S.from_name("prepare") is None


def test_valid_previous_states_are_kafkas() -> None:
    terminal = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert {
        S.EMPTY: terminal,
        S.ONGOING: terminal | {S.ONGOING},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: terminal | {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: terminal,
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    } == VALID_PREVIOUS
    assert S.ONGOING.valid_previous is VALID_PREVIOUS[S.ONGOING]


def test_epoch_and_version_helpers() -> None:
    assert not is_epoch_exhausted(MAX_EPOCH - 2)
    assert is_epoch_exhausted(MAX_EPOCH - 1) and is_epoch_exhausted(MAX_EPOCH)
    assert [log_value_version(v) for v in (0, 1, 2)] == [0, 1, 1]
    assert [supports_epoch_bump(v) for v in (0, 1, 2)] == [False, False, True]


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", [s for s in S if s is not S.DEAD])
def test_prepare_allows_exactly_the_valid_previous_states(source: S, target: S) -> None:
    current = meta(source)
    if source in VALID_PREVIOUS[target]:
        transit = prepare(current, dataclasses.replace(current, state=target))
        assert transit.before == dataclasses.replace(current, pending_state=target)
        assert transit.after.state is target and transit.after.pending_state is None
    else:
        with pytest.raises(IllegalTransitionError):
            prepare(current, dataclasses.replace(current, state=target))


def test_prepare_refuses_a_second_pending_transition_and_bad_ids() -> None:
    current = meta(S.EMPTY, pending_state=S.ONGOING)
    with pytest.raises(IllegalTransitionError, match="pending"):
        prepare(current, dataclasses.replace(current, state=S.ONGOING, pending_state=None))
    with pytest.raises(IllegalTransitionError, match="producer id"):
        prepare(meta(), meta(producer_id=-1))
    with pytest.raises(IllegalTransitionError, match="epoch"):
        prepare(meta(), meta(producer_epoch=-1))
    with pytest.raises(IllegalTransitionError, match="epoch"):
        prepare(meta(), meta(producer_epoch=MAX_EPOCH + 1))


def test_prepare_records_the_previous_producer_id() -> None:
    transit = prepare(meta(producer_id=7), meta(producer_id=9, producer_epoch=0))
    assert transit.after.previous_producer_id == 7


def test_complete_checks_the_pending_state_and_kafkas_invariants() -> None:
    ongoing = meta(S.ONGOING, partitions=frozenset({TP_A0}), txn_start_timestamp_ms=50)
    transit = prepare(ongoing, dataclasses.replace(ongoing, partitions=frozenset({TP_A0, TP_A1})))
    done = complete(transit.before, transit)
    assert done.partitions == {TP_A0, TP_A1} and done.pending_state is None
    with pytest.raises(IllegalTransitionError, match="pending"):
        complete(ongoing, transit)  # nothing pending
    # partitions never shrink while Ongoing, the timeout and the epoch hold
    for bad in (
        dataclasses.replace(ongoing, partitions=frozenset()),
        dataclasses.replace(ongoing, timeout_ms=1),
        dataclasses.replace(ongoing, producer_epoch=4),
    ):
        t = prepare(ongoing, bad)
        with pytest.raises(IllegalTransitionError, match="unexpected"):
            complete(t.before, t)
    # Empty: the epoch bumps by one, or restarts at 0 with a new producer id
    empty = meta(S.EMPTY)
    for ok in (meta(producer_epoch=4), meta(producer_epoch=3), meta(producer_id=8, producer_epoch=0)):
        t = prepare(empty, ok)
        assert complete(t.before, t).producer_epoch == ok.producer_epoch
    t = prepare(empty, meta(producer_epoch=5))
    with pytest.raises(IllegalTransitionError):
        complete(t.before, t)
    # Dead is removed from the cache, never installed
    t = prepare(empty, meta(S.DEAD))
    with pytest.raises(IllegalTransitionError):
        complete(t.before, t)


def test_abandon_clears_the_pending_state_and_remembers_a_failed_fence() -> None:
    ongoing = meta(S.ONGOING, txn_start_timestamp_ms=50)
    transit = prepare(ongoing, dataclasses.replace(ongoing, state=S.PREPARE_ABORT))
    assert abandon(transit.before, transit) == ongoing
    fence = dataclasses.replace(transit, epoch_fence=True)
    assert abandon(transit.before, fence).has_failed_epoch_fence


def test_persisted_drops_what_is_only_in_memory() -> None:
    m = meta(last_producer_epoch=2, pending_state=S.ONGOING, has_failed_epoch_fence=True)
    assert m.persisted() == meta()


def test_markers_remove_partitions_only_while_preparing() -> None:
    m = meta(S.PREPARE_COMMIT, partitions=frozenset({TP_A0, TP_A1}), txn_start_timestamp_ms=5)
    assert without_partition(m, TP_A0).partitions == {TP_A1}
    with pytest.raises(IllegalTransitionError):
        without_partition(meta(S.ONGOING, partitions=frozenset({TP_A0})), TP_A0)


def test_error_codes() -> None:
    assert error_code(ConcurrentTransactionsError("x")) == CONCURRENT_TRANSACTIONS
    assert error_code(InvalidTxnStateError("x")) == INVALID_TXN_STATE
    assert error_code(ProducerFencedError("x")) == PRODUCER_FENCED
    assert ConcurrentTransactionsError.retriable and not InvalidTxnStateError.retriable
