"""The transaction coordinator service (broker.transactions.coordinator) on a real broker of
one (embedded store, real replica manager, ``__transaction_state`` through the coordinator
runtime), with a fake marker writer: InitProducerId and fencing, AddPartitions, EndTxn
commit and abort (answered at PrepareX, completed once the markers are written), the
timeout abort, the id's expiry, and a restart that finishes a transaction left in
PrepareCommit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.groups.types import TopicPartition
from broker.transactions.config import TransactionConfig
from broker.transactions.coordinator import CONCURRENT_WAIT_S, TransactionCoordinator
from broker.transactions.markers import MarkerOutcome, MarkersDone
from broker.transactions.state import TransactionState
from broker.transactions.transitions import TransactionResult
from hot.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    NotCoordinatorError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
)
from tests.inprocess import broker_of_one

BOUND_S = 20.0
PARTITIONS = 2
TP_A0 = TopicPartition("a", 0)
TP_B1 = TopicPartition("b", 1)
S = TransactionState


@dataclass(frozen=True)
class Call:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    result: TransactionResult
    partitions: frozenset[TopicPartition]


@dataclass
class FakeMarkers:
    """The MarkerSink: records each write; completes it once ``gate`` is open."""

    calls: list[Call] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: MarkerOutcome = MarkerOutcome.WRITTEN

    def __post_init__(self) -> None:
        self.gate.set()

    def write(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: TransactionResult,
        partitions: Iterable[TopicPartition],
        *,
        transaction_version: int = 0,
        superseded: Callable[[], bool] = lambda: False,
    ) -> asyncio.Future[MarkersDone]:
        parts = frozenset(partitions)
        self.calls.append(Call(producer_id, producer_epoch, coordinator_epoch, result, parts))

        async def run() -> MarkersDone:
            await self.gate.wait()
            done = parts if self.outcome is MarkerOutcome.WRITTEN else frozenset()
            return MarkersDone(self.outcome, done, frozenset())

        return asyncio.ensure_future(run())


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + BOUND_S
    while not check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)


def state_of(coord: TransactionCoordinator, tid: str) -> TransactionState | None:
    (d,) = coord.describe([tid])
    return d.meta.state if d.meta is not None else None


@asynccontextmanager
async def coordinator(
    data_dir: Path, markers: FakeMarkers, clock: Clock, **settings: object
) -> AsyncIterator[tuple[Broker, TransactionCoordinator]]:
    config = TransactionConfig.from_kafka({"transaction.state.log.num.partitions": PARTITIONS, **settings})
    async with broker_of_one(BrokerConfig(data_dir=data_dir), transactions=config, markers=markers) as broker:
        coord = broker.transactions
        assert coord is not None
        coord.clock = clock
        await coord.ensure_topic()
        await until(lambda: coord.log.runtime.loads == PARTITIONS, "__transaction_state loaded")
        yield broker, coord


@pytest.fixture
def clock() -> Clock:
    return Clock()


async def test_init_bumps_the_epoch_and_fences_older_instances(tmp_path: Path, clock: Clock) -> None:
    async with coordinator(tmp_path / "data", FakeMarkers(), clock) as (_, coord):
        pid, epoch = await coord.init_producer_id("t1", 60_000)
        assert epoch == 0
        assert await coord.init_producer_id("t1", 60_000) == (pid, 1)
        # KIP-360: the current producer recovering bumps again; a fenced one is refused.
        assert await coord.init_producer_id("t1", 60_000, pid, 1) == (pid, 2)
        with pytest.raises(ProducerFencedError):
            await coord.init_producer_id("t1", 60_000, pid, 0)
        with pytest.raises(InvalidTransactionTimeoutError):
            await coord.init_producer_id("t1", 900_001)
        with pytest.raises(InvalidRequestError):
            await coord.init_producer_id("", 60_000)
        assert state_of(coord, "t1") is S.EMPTY
        other, _ = await coord.init_producer_id("t2", 60_000)
        assert other != pid
        # The old epoch can no longer add partitions; an unknown producer id is refused.
        with pytest.raises(ProducerFencedError):
            await coord.add_partitions("t1", pid, 1, [TP_A0])
        with pytest.raises(InvalidProducerIdMappingError):
            await coord.add_partitions("t1", other, 2, [TP_A0])
        with pytest.raises(InvalidProducerIdMappingError):
            await coord.add_partitions("unknown", pid, 0, [TP_A0])


async def test_commit_answers_at_prepare_and_completes_once_the_markers_are_written(
    tmp_path: Path, clock: Clock
) -> None:
    markers = FakeMarkers()
    markers.gate.clear()
    async with coordinator(tmp_path / "data", markers, clock) as (_, coord):
        pid, epoch = await coord.init_producer_id("t", 60_000)
        await coord.add_partitions("t", pid, epoch, [TP_A0])
        await coord.add_partitions("t", pid, epoch, [TP_A0, TP_B1])
        await coord.add_offsets("t", pid, epoch, "g")
        (d,) = coord.describe(["t"])
        assert d.meta is not None and d.meta.state is S.ONGOING
        assert TP_A0 in d.meta.partitions and TP_B1 in d.meta.partitions
        assert any(tp.topic == "__consumer_offsets" for tp in d.meta.partitions)
        assert coord.verify_partitions("t", pid, epoch, [TP_A0, TopicPartition("c", 0)]) == {
            TP_A0: 0,
            TopicPartition("c", 0): 120,  # TRANSACTION_ABORTABLE
        }
        # A commit with nothing to commit (another id) is INVALID_TXN_STATE.
        pid2, epoch2 = await coord.init_producer_id("u", 60_000)
        with pytest.raises(InvalidTxnStateError):
            await coord.end_txn("u", pid2, epoch2, commit=True)

        await coord.end_txn("t", pid, epoch, commit=True)
        assert state_of(coord, "t") is S.PREPARE_COMMIT
        await until(lambda: bool(markers.calls), "markers sent")
        (call,) = markers.calls
        assert call.result is TransactionResult.COMMIT and call.producer_id == pid
        assert call.producer_epoch == epoch and TP_B1 in call.partitions and len(call.partitions) == 3
        assert call.coordinator_epoch == coord.cache.coordinator_epoch(coord.cache.partition_for("t"))
        # While the markers are written, the id's other requests wait.
        with pytest.raises(ConcurrentTransactionsError):
            await coord.add_partitions("t", pid, epoch, [TP_A0])
        with pytest.raises(ConcurrentTransactionsError):
            await coord.init_producer_id("t", 60_000)
        markers.gate.set()
        await until(lambda: state_of(coord, "t") is S.COMPLETE_COMMIT, "committed")
        # A retried EndTxn(commit) succeeds; an abort now is INVALID_TXN_STATE.
        await coord.end_txn("t", pid, epoch, commit=True)
        with pytest.raises(InvalidTxnStateError):
            await coord.end_txn("t", pid, epoch, commit=False)
        # The next transaction of the same producer.
        await coord.add_partitions("t", pid, epoch, [TP_B1])
        await coord.end_txn("t", pid, epoch, commit=False)
        await until(lambda: state_of(coord, "t") is S.COMPLETE_ABORT, "aborted")
        assert markers.calls[-1].result is TransactionResult.ABORT
        assert markers.calls[-1].partitions == {TP_B1}
        listed, unknown = coord.list_transactions(states=["CompleteAbort", "Bogus"])
        assert [(t.transactional_id, t.state) for t in listed] == [("t", "CompleteAbort")]
        assert unknown == ["Bogus"]


async def test_the_next_transactions_first_request_waits_for_the_completion_not_the_client(
    tmp_path: Path, clock: Clock
) -> None:
    """AddPartitionsToTxn/AddOffsetsToTxn arriving while the previous transaction's markers
    are written wait for them (up to CONCURRENT_WAIT_S) instead of costing the client a
    retry after its backoff; past the bound they answer CONCURRENT_TRANSACTIONS."""
    markers = FakeMarkers()
    async with coordinator(tmp_path / "data", markers, clock) as (_, coord):
        pid, epoch = await coord.init_producer_id("t", 60_000)
        await coord.add_partitions("t", pid, epoch, [TP_A0])
        markers.gate.clear()
        await coord.end_txn("t", pid, epoch, commit=True)
        waiting = [
            asyncio.ensure_future(coord.add_partitions("t", pid, epoch, [TP_B1])),
            asyncio.ensure_future(coord.add_offsets("t", pid, epoch, "g")),
        ]
        await asyncio.sleep(0.05)
        assert not any(w.done() for w in waiting) and state_of(coord, "t") is S.PREPARE_COMMIT
        markers.gate.set()
        await asyncio.wait_for(asyncio.gather(*waiting), BOUND_S)
        (d,) = coord.describe(["t"])
        assert d.meta is not None and d.meta.state is S.ONGOING
        assert TP_B1 in d.meta.partitions and TP_A0 not in d.meta.partitions
        assert any(tp.topic == "__consumer_offsets" for tp in d.meta.partitions)
        # Markers that do not come: the bounded wait ends in CONCURRENT_TRANSACTIONS.
        markers.gate.clear()
        await coord.end_txn("t", pid, epoch, commit=False)
        started = asyncio.get_running_loop().time()
        with pytest.raises(ConcurrentTransactionsError):
            await coord.add_partitions("t", pid, epoch, [TP_A0])
        assert asyncio.get_running_loop().time() - started >= CONCURRENT_WAIT_S * 0.9
        markers.gate.set()
        await until(lambda: state_of(coord, "t") is S.COMPLETE_ABORT, "aborted")


async def test_a_new_instance_fences_the_ongoing_transaction_of_the_old(tmp_path: Path, clock: Clock) -> None:
    markers = FakeMarkers()
    async with coordinator(tmp_path / "data", markers, clock) as (_, coord):
        pid, epoch = await coord.init_producer_id("t", 60_000)
        await coord.add_partitions("t", pid, epoch, [TP_A0])
        # The new instance: the old transaction is aborted with a bumped epoch first.
        with pytest.raises(ConcurrentTransactionsError):
            await coord.init_producer_id("t", 60_000)
        await until(lambda: state_of(coord, "t") is S.COMPLETE_ABORT, "fenced and aborted")
        (call,) = markers.calls
        assert (call.result, call.producer_epoch, call.partitions) == (
            TransactionResult.ABORT,
            epoch + 1,
            {TP_A0},
        )
        assert await coord.init_producer_id("t", 60_000) == (pid, epoch + 2)
        with pytest.raises(ProducerFencedError):
            await coord.end_txn("t", pid, epoch, commit=True)


async def test_a_transaction_past_its_timeout_is_aborted_and_an_idle_id_expires(
    tmp_path: Path, clock: Clock
) -> None:
    markers = FakeMarkers()
    async with coordinator(
        tmp_path / "data", markers, clock, **{"transactional.id.expiration.ms": 3_600_000}
    ) as (_, coord):
        pid, epoch = await coord.init_producer_id("t", 10_000)
        await coord.add_partitions("t", pid, epoch, [TP_A0])
        clock.now += 10_000
        assert await coord.abort_timed_out() == 0  # not older than its timeout yet
        clock.now += 1
        assert await coord.abort_timed_out() == 1
        await until(lambda: state_of(coord, "t") is S.COMPLETE_ABORT, "aborted by the timeout")
        assert markers.calls[-1].result is TransactionResult.ABORT
        with pytest.raises(ProducerFencedError):  # its producer was fenced
            await coord.end_txn("t", pid, epoch, commit=True)
        await coord.init_producer_id("idle", 10_000)
        clock.now += 3_600_000
        assert await coord.expire_ids() == 2
        assert coord.describe(["t"])[0].error is not None
        assert isinstance(coord.describe(["idle"])[0].error, TransactionalIdNotFoundError)
    # The tombstones hold after a restart.
    async with coordinator(tmp_path / "data", FakeMarkers(), clock) as (_, coord):
        assert isinstance(coord.describe(["idle"])[0].error, TransactionalIdNotFoundError)
        _, epoch2 = await coord.init_producer_id("idle", 10_000)
        assert epoch2 == 0


async def test_a_restart_finishes_a_transaction_left_in_prepare_commit(tmp_path: Path, clock: Clock) -> None:
    stuck = FakeMarkers()
    stuck.gate.clear()  # the markers are never written: the coordinator dies in PrepareCommit
    async with coordinator(tmp_path / "data", stuck, clock) as (_, coord):
        pid, epoch = await coord.init_producer_id("t", 60_000)
        await coord.add_partitions("t", pid, epoch, [TP_A0, TP_B1])
        await coord.end_txn("t", pid, epoch, commit=True)
        await until(lambda: bool(stuck.calls), "markers sent")
        first_epoch = stuck.calls[0].coordinator_epoch
        other, _ = await coord.init_producer_id("other", 60_000)
    markers = FakeMarkers()
    async with coordinator(tmp_path / "data", markers, clock) as (_, coord):
        await until(lambda: state_of(coord, "t") is S.COMPLETE_COMMIT, "the successor finished the commit")
        (call,) = markers.calls
        assert (call.producer_id, call.producer_epoch, call.result) == (pid, epoch, TransactionResult.COMMIT)
        assert call.partitions == {TP_A0, TP_B1}
        assert call.coordinator_epoch > first_epoch
        assert state_of(coord, "other") is S.EMPTY
        assert await coord.init_producer_id("other", 60_000) == (other, 1)


async def test_fenced_markers_leave_the_transaction_to_the_newer_coordinator(
    tmp_path: Path, clock: Clock
) -> None:
    markers = FakeMarkers(outcome=MarkerOutcome.FENCED)
    async with coordinator(tmp_path / "data", markers, clock) as (_, coord):
        pid, epoch = await coord.init_producer_id("t", 60_000)
        await coord.add_partitions("t", pid, epoch, [TP_A0])
        await coord.end_txn("t", pid, epoch, commit=False)

        def given_up() -> bool:
            meta = coord.describe(["t"])[0].meta
            return meta is not None and meta.pending_state is None

        await until(given_up, "given up")
        assert state_of(coord, "t") is S.PREPARE_ABORT
        assert coord.completed == 0


async def test_requests_before_the_topic_exists_are_not_coordinator(tmp_path: Path) -> None:
    async with broker_of_one(BrokerConfig(data_dir=tmp_path / "data")) as broker:
        coord = broker.transactions
        assert coord is not None
        with pytest.raises(NotCoordinatorError):
            await coord.init_producer_id("t", 60_000)
        assert coord.list_transactions() == ([], [])


async def test_the_timer_aborts_without_being_asked(tmp_path: Path, clock: Clock) -> None:
    markers = FakeMarkers()
    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 20}
    async with coordinator(tmp_path / "data", markers, clock, **settings) as (_, coord):
        pid, epoch = await coord.init_producer_id("t", 1_000)
        await coord.add_partitions("t", pid, epoch, [TP_A0])
        clock.now += 1_001
        await until(lambda: state_of(coord, "t") is S.COMPLETE_ABORT, "the timer aborted it")
        assert coord.timed_out == 1 and markers.calls[-1].result is TransactionResult.ABORT


async def test_a_compacted_partition_keeps_the_latest_state_of_each_id(tmp_path: Path, clock: Clock) -> None:
    async with coordinator(tmp_path / "data", FakeMarkers(), clock) as (_, coord):
        pids = {}
        for tid in ("a", "b", "c"):
            pid, epoch = await coord.init_producer_id(tid, 60_000)
            for _ in range(3):
                await coord.add_partitions(tid, pid, epoch, [TP_A0])
                await coord.end_txn(tid, pid, epoch, commit=True)
                await until(lambda tid=tid: state_of(coord, tid) is S.COMPLETE_COMMIT, "committed")
            pids[tid] = pid
        await coord.add_partitions("b", pids["b"], 0, [TP_B1])  # left Ongoing
        await coord.init_producer_id("new", 60_000)
        for shard in coord.log.shards():
            before = shard.rep.log.log_start_offset
            assert await coord.log.runtime.compact(shard)
            assert shard.rep.log.log_start_offset > before or shard.count() == 0
    async with coordinator(tmp_path / "data", FakeMarkers(), clock) as (_, coord):
        assert state_of(coord, "a") is S.COMPLETE_COMMIT and state_of(coord, "c") is S.COMPLETE_COMMIT
        (b,) = coord.describe(["b"])
        assert b.meta is not None and b.meta.state is S.ONGOING and b.meta.partitions == {TP_B1}
        assert state_of(coord, "new") is S.EMPTY
        assert await coord.init_producer_id("a", 60_000) == (pids["a"], 1)


async def test_an_end_txn_whose_client_went_away_still_completes(tmp_path: Path, clock: Clock) -> None:
    markers = FakeMarkers()
    async with coordinator(tmp_path / "data", markers, clock) as (_, coord):
        pid, epoch = await coord.init_producer_id("t", 60_000)
        await coord.add_partitions("t", pid, epoch, [TP_A0])
        request = asyncio.ensure_future(coord.end_txn("t", pid, epoch, commit=True))
        await asyncio.sleep(0)  # PrepareCommit appended, not yet acknowledged
        request.cancel()  # the connection closed
        with pytest.raises(asyncio.CancelledError):
            await request
        await until(lambda: state_of(coord, "t") is S.COMPLETE_COMMIT, "completed all the same")
        assert [c.result for c in markers.calls] == [TransactionResult.COMMIT]


async def test_metrics_at_scrape_time(tmp_path: Path, clock: Clock) -> None:
    from prometheus_client import CollectorRegistry

    from broker.txn_metrics import register_txn_metrics

    async with coordinator(tmp_path / "data", FakeMarkers(), clock) as (broker, coord):
        registry = CollectorRegistry()
        assert register_txn_metrics(broker, registry) and not register_txn_metrics(broker, registry)
        pid, epoch = await coord.init_producer_id("t", 60_000)
        await coord.init_producer_id("idle", 60_000)
        await coord.add_partitions("t", pid, epoch, [TP_A0])
        clock.now += 2_500
        assert registry.get_sample_value("strata_transactions", {"state": "Ongoing"}) == 1
        assert registry.get_sample_value("strata_transactions", {"state": "Empty"}) == 1
        assert registry.get_sample_value("strata_transactions_oldest_open_seconds") == 2.5
        await coord.end_txn("t", pid, epoch, commit=True)
        await until(lambda: state_of(coord, "t") is S.COMPLETE_COMMIT, "committed")
        assert registry.get_sample_value("strata_transactions_completed_total") == 1
        assert registry.get_sample_value("strata_transactions_oldest_open_seconds") == 0
