"""Every request of the transaction coordinator, valid and invalid (Kafka's rules)."""

from __future__ import annotations

import dataclasses

import pytest

from broker.groups.replicated_offsets import partition_for as group_partition
from broker.groups.types import TopicPartition
from broker.transactions.state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_2,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    Transit,
)
from broker.transactions.transitions import (
    Answer,
    TransactionResult,
    abort_timed_out,
    add_offsets,
    add_partitions,
    begin_completion,
    end_txn,
    end_txn_answer,
    expire,
    expired,
    for_version,
    init_producer_id,
    result_of,
    timed_out,
    verify_partitions,
)
from hot.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from kwire.error_table import TRANSACTION_ABORTABLE
from tests.broker.transactions.txnlib import TP_A0, TP_A1, TP_B0, Sim

S = TransactionState
COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
MAX_TIMEOUT = 900_000


def init(sim: Sim, tid: str = "tx", *, expected: tuple[int, int] | None = None, timeout_ms: int = 60_000,
         server_tv: int = 0) -> Transit:  # fmt: skip
    return init_producer_id(
        sim.get(tid),
        transactional_id=tid,
        timeout_ms=timeout_ms,
        max_timeout_ms=MAX_TIMEOUT,
        now_ms=sim.now,
        new_producer_id=sim.new_pid,
        expected=expected,
        server_transaction_version=server_tv,
    )


def add(sim: Sim, pid: int, epoch: int, *tps: TopicPartition, tid: str = "tx") -> Transit | Answer:
    return add_partitions(sim.get(tid), producer_id=pid, producer_epoch=epoch, partitions=tps, now_ms=sim.now)


def end(
    sim: Sim, pid: int, epoch: int, result: TransactionResult, *, tv: int = 0, tid: str = "tx"
) -> Transit | Answer:
    return end_txn(
        sim.get(tid),
        transactional_id=tid,
        producer_id=pid,
        producer_epoch=epoch,
        result=result,
        now_ms=sim.now,
        new_producer_id=sim.new_pid,
        client_transaction_version=tv,
    )


def started(sim: Sim, tid: str = "tx") -> TransactionMetadata:
    """An initialised id with an Ongoing transaction on a-0."""
    m = sim.apply(init(sim, tid))
    assert m is not None
    sim.now += 10
    m = sim.apply(add(sim, m.producer_id, m.producer_epoch, TP_A0, tid=tid))
    assert m is not None
    return m


# --- InitProducerId ---------------------------------------------------------------------


def test_a_new_transactional_id_gets_a_producer_id_at_epoch_0() -> None:
    sim = Sim()
    transit = init(sim)
    assert transit.before.state is S.EMPTY and transit.before.pending_state is S.EMPTY
    assert transit.before.producer_epoch == NO_PRODUCER_EPOCH  # created, not yet written
    m = sim.apply(transit)
    assert m == TransactionMetadata(
        transactional_id="tx",
        producer_id=1000,
        previous_producer_id=1000,
        producer_epoch=0,
        timeout_ms=60_000,
        state=S.EMPTY,
        txn_last_update_timestamp_ms=sim.now,
    )
    assert len(sim.log) == 1


def test_init_bumps_the_epoch_of_a_known_id_and_takes_its_new_timeout() -> None:
    sim = Sim()
    sim.apply(init(sim))
    sim.now += 5
    m = sim.apply(init(sim, timeout_ms=30_000))
    assert m is not None
    assert (m.producer_id, m.producer_epoch, m.last_producer_epoch) == (1000, 1, NO_PRODUCER_EPOCH)
    assert m.timeout_ms == 30_000 and m.txn_last_update_timestamp_ms == sim.now


@pytest.mark.parametrize("tid", [""])
def test_init_refuses_an_empty_id(tid: str) -> None:
    with pytest.raises(InvalidRequestError):
        init(Sim(), tid)


@pytest.mark.parametrize("timeout_ms", [0, -1, MAX_TIMEOUT + 1])
def test_init_refuses_a_timeout_outside_the_maximum(timeout_ms: int) -> None:
    sim = Sim()
    with pytest.raises(InvalidTransactionTimeoutError, match=r"transaction\.max\.timeout\.ms"):
        init(sim, timeout_ms=timeout_ms)
    assert sim.new_pid() == 1000  # no producer id was taken


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    sim = Sim()
    sim.apply(init(sim))
    sim.cache["tx"] = dataclasses.replace(sim.cache["tx"], producer_epoch=MAX_EPOCH - 1)
    m = sim.apply(init(sim))
    assert m is not None
    assert (m.producer_id, m.producer_epoch, m.last_producer_epoch) == (1001, 0, NO_PRODUCER_EPOCH)
    assert m.previous_producer_id == 1000


def test_kip360_recovery_rotates_and_a_retry_is_recognised() -> None:
    sim = Sim()
    sim.apply(init(sim))
    sim.cache["tx"] = dataclasses.replace(sim.cache["tx"], producer_epoch=MAX_EPOCH - 1)
    m = sim.apply(init(sim, expected=(1000, MAX_EPOCH - 1)))
    assert m is not None
    assert (m.producer_id, m.producer_epoch, m.last_producer_epoch) == (1001, 0, MAX_EPOCH - 1)
    # the response was lost: the same request again gets the same id and epoch
    again = sim.apply(init(sim, expected=(1000, MAX_EPOCH - 1)))
    assert again is not None and (again.producer_id, again.producer_epoch) == (1001, 0)


def test_kip360_recovery_bumps_from_the_current_epoch_and_tolerates_a_retry() -> None:
    sim = Sim()
    sim.apply(init(sim))
    sim.apply(init(sim))  # epoch 1
    m = sim.apply(init(sim, expected=(1000, 1)))
    assert m is not None and (m.producer_epoch, m.last_producer_epoch) == (2, 1)
    retry = sim.apply(init(sim, expected=(1000, 1)))
    assert retry is not None and (retry.producer_epoch, retry.last_producer_epoch) == (2, 1)


@pytest.mark.parametrize("expected", [(1000, 0), (999, 1), (5, 1)])
def test_kip360_recovery_of_a_fenced_producer_is_producer_fenced(expected: tuple[int, int]) -> None:
    sim = Sim()
    sim.apply(init(sim))
    sim.apply(init(sim))
    sim.apply(init(sim))  # epoch 2, last epoch -1: a new instance took over
    with pytest.raises(ProducerFencedError):
        init(sim, expected=expected)


def test_kip360_recovery_of_a_new_id_starts_at_epoch_0() -> None:
    sim = Sim()
    m = sim.apply(init(sim, expected=(42, 7)))
    assert m is not None and (m.producer_id, m.producer_epoch) == (1000, 0)


def test_init_while_a_write_is_pending_or_a_transaction_completes_is_concurrent() -> None:
    sim = Sim()
    sim.start(init(sim))
    with pytest.raises(ConcurrentTransactionsError):
        init(sim)
    sim.ack("tx")
    m = sim.cache["tx"]
    sim.apply(add(sim, m.producer_id, 0, TP_A0))
    sim.apply(end(sim, m.producer_id, 0, COMMIT))
    assert sim.cache["tx"].state is S.PREPARE_COMMIT
    with pytest.raises(ConcurrentTransactionsError):
        init(sim)


def test_init_fences_an_ongoing_transaction_and_aborts_it() -> None:
    sim = Sim()
    old = started(sim)
    sim.now += 10
    fence = init(sim)
    assert fence.epoch_fence and fence.after.state is S.PREPARE_ABORT
    assert (fence.after.producer_epoch, fence.after.last_producer_epoch) == (1, NO_PRODUCER_EPOCH)
    assert fence.after.partitions == {TP_A0}
    sim.apply(fence)  # the caller answers CONCURRENT_TRANSACTIONS and writes the markers
    # the old instance can neither add nor end
    with pytest.raises(ProducerFencedError):
        add(sim, old.producer_id, old.producer_epoch, TP_B0)
    with pytest.raises(ProducerFencedError):
        end(sim, old.producer_id, old.producer_epoch, COMMIT)
    with pytest.raises(ConcurrentTransactionsError):
        init(sim)  # the client's retry while the markers are written
    done = sim.complete_markers("tx")
    assert done is not None and done.state is S.COMPLETE_ABORT and not done.partitions
    m = sim.apply(init(sim))
    assert m is not None and (m.state, m.producer_epoch) == (S.EMPTY, 2)


def test_a_fence_whose_write_failed_is_not_bumped_again() -> None:
    sim = Sim()
    started(sim)
    sim.start(init(sim))
    failed = sim.fail("tx")
    assert failed.state is S.ONGOING and failed.producer_epoch == 1 and failed.has_failed_epoch_fence
    fence = init(sim)
    assert fence.after.producer_epoch == 1  # the bumped epoch was never handed out
    sim.apply(fence)
    done = sim.complete_markers("tx")
    assert done is not None and not done.has_failed_epoch_fence


def test_transactions_v2_fencing_bumps_twice_and_never_past_max() -> None:
    sim = Sim()
    started(sim)
    fence = init(sim, server_tv=TV_2)
    assert (fence.after.producer_epoch, fence.after.last_producer_epoch) == (2, 1)
    assert fence.after.client_transaction_version == TV_2
    sim2 = Sim()
    started(sim2)
    sim2.cache["tx"] = dataclasses.replace(sim2.cache["tx"], producer_epoch=MAX_EPOCH)
    assert init(sim2).after.producer_epoch == MAX_EPOCH
    assert init(sim2, server_tv=TV_2).after.producer_epoch == MAX_EPOCH


@pytest.mark.parametrize(
    ("api_key", "version", "fenced"),
    [
        (22, 3, False),
        (22, 4, True),
        (24, 1, False),
        (24, 2, True),
        (25, 1, False),
        (26, 1, False),
        (26, 5, True),
    ],
)
def test_older_clients_get_invalid_producer_epoch_for_producer_fenced(
    api_key: int, version: int, fenced: bool
) -> None:
    err = for_version(ProducerFencedError("x"), api_key, version)
    assert isinstance(err, ProducerFencedError if fenced else InvalidProducerEpochError)
    other = InvalidRequestError("y")
    assert for_version(other, api_key, version) is other


# --- AddPartitionsToTxn, AddOffsetsToTxn -------------------------------------------------------


def test_add_partitions_starts_a_transaction_and_grows_it() -> None:
    sim = Sim()
    m = sim.apply(init(sim))
    assert m is not None
    sim.now += 10
    first = sim.apply(add(sim, 1000, 0, TP_A0))
    assert first is not None and first.state is S.ONGOING
    assert first.txn_start_timestamp_ms == sim.now == first.txn_last_update_timestamp_ms
    sim.now += 10
    second = sim.apply(add(sim, 1000, 0, TP_A1, TP_B0))
    assert second is not None and second.partitions == {TP_A0, TP_A1, TP_B0}
    assert second.txn_start_timestamp_ms == first.txn_start_timestamp_ms
    assert second.txn_last_update_timestamp_ms == sim.now
    writes = len(sim.log)
    assert add(sim, 1000, 0, TP_A1) == Answer(1000, 0)  # already in: nothing written
    assert len(sim.log) == writes


def test_add_partitions_after_a_completed_transaction_starts_a_new_one() -> None:
    sim = Sim()
    m = started(sim)
    sim.apply(end(sim, m.producer_id, m.producer_epoch, COMMIT))
    sim.complete_markers("tx")
    sim.now += 100
    again = sim.apply(add(sim, m.producer_id, m.producer_epoch, TP_B0))
    assert again is not None and again.partitions == {TP_B0} and again.txn_start_timestamp_ms == sim.now


def test_add_partitions_errors() -> None:
    sim = Sim()
    with pytest.raises(InvalidProducerIdMappingError):
        add(sim, 1000, 0, TP_A0)
    sim.apply(init(sim))
    with pytest.raises(InvalidProducerIdMappingError):
        add(sim, 999, 0, TP_A0)
    with pytest.raises(ProducerFencedError):
        add(sim, 1000, 1, TP_A0)
    sim.start(add(sim, 1000, 0, TP_A0))
    with pytest.raises(ConcurrentTransactionsError):
        add(sim, 1000, 0, TP_A1)
    sim.ack("tx")
    sim.apply(end(sim, 1000, 0, COMMIT))
    with pytest.raises(ConcurrentTransactionsError):
        add(sim, 1000, 0, TP_A1)  # PrepareCommit, no write pending
    sim.start(begin_completion(sim.cache["tx"], sim.now))
    with pytest.raises(ConcurrentTransactionsError):
        add(sim, 1000, 0, TP_A1)  # markers being written


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    sim = Sim()
    sim.apply(init(sim))
    m = sim.apply(
        add_offsets(
            sim.get("tx"),
            producer_id=1000,
            producer_epoch=0,
            group_id="my-group",
            offsets_topic_partitions=50,
            now_ms=sim.now,
        )
    )
    assert m is not None
    assert m.partitions == {TopicPartition("__consumer_offsets", group_partition("my-group", 50))}


def test_verify_partitions_is_the_leaders_check() -> None:
    sim = Sim()
    m = started(sim)
    codes = verify_partitions(sim.get("tx"), producer_id=1000, producer_epoch=0, partitions=[TP_A0, TP_B0])
    assert codes == {TP_A0: 0, TP_B0: TRANSACTION_ABORTABLE}
    with pytest.raises(InvalidProducerIdMappingError):
        verify_partitions(None, producer_id=1000, producer_epoch=0, partitions=[TP_A0])
    with pytest.raises(InvalidProducerIdMappingError):
        verify_partitions(sim.get("tx"), producer_id=1, producer_epoch=0, partitions=[TP_A0])
    with pytest.raises(ProducerFencedError):
        verify_partitions(sim.get("tx"), producer_id=1000, producer_epoch=5, partitions=[TP_A0])
    sim.apply(end(sim, m.producer_id, m.producer_epoch, ABORT))
    with pytest.raises(ConcurrentTransactionsError):
        verify_partitions(sim.get("tx"), producer_id=1000, producer_epoch=0, partitions=[TP_A0])


# --- EndTxn (before Transactions V2) --------------------------------------------------------------


@pytest.mark.parametrize("result", [COMMIT, ABORT])
def test_end_txn_prepares_then_completes_and_a_retry_gets_the_same_answer(result: TransactionResult) -> None:
    sim = Sim()
    m = started(sim)
    sim.now += 10
    prepared = sim.apply(end(sim, 1000, 0, result))
    want = S.PREPARE_COMMIT if result is COMMIT else S.PREPARE_ABORT
    assert prepared is not None and prepared.state is want and prepared.partitions == m.partitions
    assert prepared.producer_epoch == 0 and prepared.txn_start_timestamp_ms == m.txn_start_timestamp_ms
    assert result_of(prepared.state) is result
    completion = begin_completion(prepared, sim.now)
    assert end_txn_answer(completion) == Answer()  # EndTxn before v5 carries no id or epoch
    sim.start(completion)
    with pytest.raises(ConcurrentTransactionsError):
        end(sim, 1000, 0, result)  # markers in flight
    done = sim.ack("tx")
    assert done is not None and done.state is (S.COMPLETE_COMMIT if result is COMMIT else S.COMPLETE_ABORT)
    assert not done.partitions and done.txn_start_timestamp_ms == m.txn_start_timestamp_ms
    assert end(sim, 1000, 0, result) == Answer(1000, 0)
    other = ABORT if result is COMMIT else COMMIT
    with pytest.raises(InvalidTxnStateError):
        end(sim, 1000, 0, other)


@pytest.mark.parametrize("result", [COMMIT, ABORT])
def test_end_txn_with_nothing_open_is_invalid_txn_state(result: TransactionResult) -> None:
    sim = Sim()
    sim.apply(init(sim))
    with pytest.raises(InvalidTxnStateError):
        end(sim, 1000, 0, result)


def test_end_txn_while_preparing() -> None:
    sim = Sim()
    started(sim)
    sim.apply(end(sim, 1000, 0, COMMIT))  # PrepareCommit, completion not begun yet
    with pytest.raises(ConcurrentTransactionsError):
        end(sim, 1000, 0, COMMIT)
    with pytest.raises(InvalidTxnStateError):
        end(sim, 1000, 0, ABORT)


def test_end_txn_producer_checks() -> None:
    sim = Sim()
    with pytest.raises(InvalidRequestError):
        end(sim, 1000, 0, COMMIT, tid="")
    with pytest.raises(InvalidProducerIdMappingError):
        end(sim, 1000, 0, COMMIT)
    started(sim)
    with pytest.raises(InvalidProducerIdMappingError):
        end(sim, 1, 0, COMMIT)
    with pytest.raises(ProducerFencedError):
        end(sim, 1000, 1, COMMIT)
    sim.start(add(sim, 1000, 0, TP_B0))
    with pytest.raises(ConcurrentTransactionsError):
        end(sim, 1000, 0, COMMIT)


def test_begin_completion_needs_a_prepared_transaction() -> None:
    sim = Sim()
    m = started(sim)
    with pytest.raises(IllegalTransitionError):
        begin_completion(m, sim.now)


# --- EndTxn under Transactions V2 (KIP-890) ----------------------------------------------------------


def completed_v2(result: TransactionResult) -> tuple[Sim, TransactionMetadata]:
    sim = Sim()
    started(sim)
    sim.apply(end(sim, 1000, 0, result, tv=TV_2))
    done = sim.complete_markers("tx")
    assert done is not None and done.producer_epoch == 1
    return sim, done


def test_v2_end_bumps_the_epoch_and_answers_it() -> None:
    sim = Sim()
    started(sim)
    prepared = sim.apply(end(sim, 1000, 0, COMMIT, tv=TV_2))
    assert prepared is not None
    assert (prepared.producer_epoch, prepared.last_producer_epoch) == (1, 0)
    assert prepared.client_transaction_version == TV_2
    completion = begin_completion(prepared, sim.now)
    assert end_txn_answer(completion) == Answer(1000, 1)
    with pytest.raises(ConcurrentTransactionsError):
        sim.start(completion)
        end(sim, 1000, 0, COMMIT, tv=TV_2)  # a retry while the markers are written


# Kafka's table: Retry = the epoch before the bump, Current = the epoch now.
@pytest.mark.parametrize(
    ("state", "result", "retry", "outcome"),
    [
        ("empty", ABORT, True, ProducerFencedError),
        ("empty", ABORT, False, "bump"),
        ("empty", COMMIT, True, ProducerFencedError),
        ("empty", COMMIT, False, InvalidTxnStateError),
        ("abort", ABORT, True, "none"),
        ("abort", ABORT, False, "bump"),
        ("abort", COMMIT, True, InvalidTxnStateError),
        ("abort", COMMIT, False, InvalidTxnStateError),
        ("commit", ABORT, True, InvalidTxnStateError),
        ("commit", ABORT, False, "bump"),
        ("commit", COMMIT, True, "none"),
        ("commit", COMMIT, False, InvalidTxnStateError),
    ],
)
def test_v2_end_in_a_terminal_state_follows_kafkas_table(
    state: str, result: TransactionResult, retry: bool, outcome: object
) -> None:
    if state == "empty":
        sim = Sim()
        sim.apply(init(sim))
        sim.apply(init(sim))
        current = 1
    else:
        sim, done = completed_v2(COMMIT if state == "commit" else ABORT)
        current = done.producer_epoch
    epoch = current - 1 if retry else current
    if isinstance(outcome, type):
        with pytest.raises(outcome):
            end(sim, 1000, epoch, result, tv=TV_2)
    elif outcome == "none":
        assert end(sim, 1000, epoch, result, tv=TV_2) == Answer(1000, current)
    else:
        sim.now += 7
        prepared = sim.apply(end(sim, 1000, epoch, result, tv=TV_2))
        assert prepared is not None and prepared.state is S.PREPARE_ABORT and not prepared.partitions
        assert prepared.producer_epoch == current + 1 and prepared.txn_start_timestamp_ms == sim.now
        assert sim.complete_markers("tx") is not None


def test_v2_end_while_preparing_wants_the_retry_epoch() -> None:
    sim = Sim()
    started(sim)
    sim.apply(end(sim, 1000, 0, COMMIT, tv=TV_2))  # PrepareCommit at epoch 1
    with pytest.raises(ConcurrentTransactionsError):
        end(sim, 1000, 0, COMMIT, tv=TV_2)
    with pytest.raises(InvalidTxnStateError):
        end(sim, 1000, 0, ABORT, tv=TV_2)
    with pytest.raises(ProducerFencedError):
        end(sim, 1000, 1, COMMIT, tv=TV_2)
    with pytest.raises(InvalidProducerIdMappingError):
        end(sim, 5, 0, COMMIT, tv=TV_2)


def test_v2_epoch_overflow_hands_over_to_the_next_producer_id() -> None:
    sim = Sim()
    started(sim)
    sim.cache["tx"] = dataclasses.replace(sim.cache["tx"], producer_epoch=MAX_EPOCH - 1)
    prepared = sim.apply(end(sim, 1000, MAX_EPOCH - 1, COMMIT, tv=TV_2))
    assert prepared is not None
    assert (prepared.producer_epoch, prepared.next_producer_id) == (MAX_EPOCH, 1001)
    completion = begin_completion(prepared, sim.now)
    assert end_txn_answer(completion) == Answer(1001, 0)
    sim.start(completion)
    done = sim.ack("tx")
    assert done is not None
    assert (done.producer_id, done.producer_epoch, done.previous_producer_id) == (1001, 0, 1000)
    assert done.next_producer_id == NO_PRODUCER_ID
    # the client did not get the answer and retries with the old id at MAX-1
    assert end(sim, 1000, MAX_EPOCH - 1, COMMIT, tv=TV_2) == Answer(1001, 0)
    with pytest.raises(InvalidTxnStateError):
        end(sim, 1000, MAX_EPOCH - 1, ABORT, tv=TV_2)


# --- timeouts and expiration -------------------------------------------------------------------------


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced() -> None:
    sim = Sim()
    m = started(sim)
    deadline = m.txn_start_timestamp_ms + m.timeout_ms
    assert timed_out(sim.cache, deadline) == []
    assert timed_out(sim.cache, deadline + 1) == ["tx"]
    with pytest.raises(IllegalTransitionError):
        abort_timed_out(m, deadline, 0)
    sim.now = deadline + 1
    transit = abort_timed_out(sim.cache["tx"], sim.now, 0)
    assert transit.epoch_fence and transit.after.state is S.PREPARE_ABORT
    assert transit.after.producer_epoch == 1
    sim.start(transit)
    assert timed_out(sim.cache, sim.now) == []  # pending: not twice
    sim.ack("tx")
    sim.complete_markers("tx")
    assert sim.cache["tx"].state is S.COMPLETE_ABORT
    with pytest.raises(ProducerFencedError):
        add(sim, 1000, 0, TP_A0)
    with pytest.raises(ProducerFencedError):
        init(sim, expected=(1000, 0))  # KIP-360 recovery of the fenced producer


def test_ids_expire_after_inactivity_in_a_terminal_state_only() -> None:
    sim = Sim()
    expiration = 7 * 24 * 3600 * 1000
    started(sim, "busy")
    idle = sim.apply(init(sim, "idle"))
    assert idle is not None
    last = idle.txn_last_update_timestamp_ms
    assert expired(sim.cache, last + expiration - 1, expiration) == []
    assert expired(sim.cache, last + expiration, expiration) == ["idle"]
    with pytest.raises(IllegalTransitionError):
        expire(sim.cache["busy"], last + 10 * expiration, expiration)
    transit = expire(idle, last + expiration, expiration)
    assert transit.after.state is S.DEAD and transit.before.pending_state is S.DEAD
    sim.start(transit)
    assert expired(sim.cache, last + expiration, expiration) == []
    assert sim.ack("idle") is None and "idle" not in sim.cache
    assert sim.log[-1][1] is None  # a tombstone
    again = sim.apply(init(sim, "idle"))  # a new producer id afterwards
    assert again is not None and again.producer_id != idle.producer_id and again.producer_epoch == 0
