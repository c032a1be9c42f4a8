"""The transaction coordinator (Kafka's TransactionCoordinator and TransactionStateManager):
the pure logic of this package run against ``__transaction_state`` (``state_log``).

Every request follows the same steps: look the transactional id up in the cache
(NOT_COORDINATOR when this broker does not lead its partition, COORDINATOR_LOAD_IN_PROGRESS
while it loads it), ask ``transitions`` for the answer or a ``Transit``, install the
transit's pending state (other requests for the id get CONCURRENT_TRANSACTIONS meanwhile),
append its record through the runtime (acks=all), then install the new state (``complete``)
or drop the pending one (``abandon``) and answer the write's error. Every write is checked
against the coordinator epoch it started under: one that lands after the partition moved
answers NOT_COORDINATOR (the successor has the record in its log, or not: either is
consistent).

EndTxn is answered once PrepareCommit/PrepareAbort is durable, as Kafka does; the markers
then go to every partition of the transaction in the background (``MarkerSink``, the
broker's ``MarkerWriter``) and CompleteCommit/CompleteAbort is written once they all have
theirs. Until then the id answers CONCURRENT_TRANSACTIONS, but AddPartitionsToTxn and
AddOffsetsToTxn (the next transaction's first request, which usually arrives while the
previous one's markers are being written) first wait up to ``CONCURRENT_WAIT_S`` for the id
to settle: answering at once costs every client a retry after its backoff (librdkafka's
and Java's: 20 ms or more, against the 1 ms the completion takes). The same
completion runs for a transaction a fencing InitProducerId or the timeout aborted, and for
every transaction a load finds in PrepareCommit/PrepareAbort (a predecessor that died
mid-commit). A write of the Complete record that fails is tried again while this broker
still coordinates the id in the same epoch; markers that a partition leader refuses as
fenced (a newer coordinator wrote there) leave the transaction to that coordinator.

Two timers (``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
``transaction.remove.expired.transaction.cleanup.interval.ms``) abort Ongoing transactions
older than their timeout (fencing their producer) and write tombstones for ids idle longer
than ``transactional.id.expiration.ms``. ``clock`` (epoch milliseconds) is injectable.

The coordinator runs Transactions V1 (``transaction.version`` 1: flexible state records, no
epoch bump at EndTxn): it does not advertise the ``transaction.version`` feature, so clients
never send EndTxn v5.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from broker.groups.types import TopicPartition
from broker.replica_manager import ReplicaManager
from broker.transactions import transitions as T
from broker.transactions.cache import Listed, TransactionCache
from broker.transactions.config import TransactionConfig
from broker.transactions.markers import MarkerOutcome, MarkersDone
from broker.transactions.state import (
    TV_1,
    TransactionMetadata,
    TransactionState,
    Transit,
    log_value_version,
)
from broker.transactions.state_log import TxnShard, TxnStateLog
from broker.transactions.transitions import Answer, TransactionResult
from hot.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    NotCoordinatorError,
    StrataError,
)

log = logging.getLogger("strata.transactions")

# The feature level this coordinator runs (module docstring).
SERVER_TRANSACTION_VERSION: Final = TV_1
COMPLETE_RETRY_S: Final = 0.1  # first wait before writing a Complete record again (doubling)
COMPLETE_RETRY_MAX_S: Final = 2.0
# How long AddPartitionsToTxn/AddOffsetsToTxn wait for an id's pending write or completion
# before answering CONCURRENT_TRANSACTIONS (module docstring): long enough for a local
# completion, short against request.timeout.ms (30 s), so a completion stuck on an
# unreachable partition leader still gets the client's own retries.
CONCURRENT_WAIT_S: Final = 0.5
ANSWER_TURNS: Final = 4  # see _finish


class MarkerSink(Protocol):
    """Writes a transaction's markers to its partitions' leaders until done
    (``broker.transactions.markers.MarkerWriter``)."""

    def write(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: TransactionResult,
        partitions: Iterable[TopicPartition],
        *,
        transaction_version: int = ...,
        superseded: Callable[[], bool] = ...,
    ) -> Awaitable[MarkersDone]: ...


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Written:
    """An acknowledged write: the id's new metadata (None: it expired), and the completion
    started for a PrepareX record (None otherwise, or when the id moved meanwhile)."""

    meta: TransactionMetadata | None
    completion: Transit | None = None


@dataclass(frozen=True, slots=True)
class Described:
    """One DescribeTransactions entry: the metadata, or the error for the id."""

    transactional_id: str
    meta: TransactionMetadata | None = None
    error: StrataError | None = None


class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions this broker leads
    (module docstring). ``new_producer_id`` is the broker's producer-id allocator;
    ``offsets_partitions`` the partition count of ``__consumer_offsets`` (AddOffsetsToTxn).
    Runs on the broker's event loop: ``start``, then ``attach_markers``; ``close``."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        config: TransactionConfig,
        new_producer_id: Callable[[], int],
        offsets_partitions: Callable[[], int],
        *,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._new_producer_id = new_producer_id
        self._offsets_partitions = offsets_partitions
        self.clock = clock
        self.cache = TransactionCache(config.state_log_num_partitions)
        self.log = TxnStateLog(broker_id, replicas, config, on_load=self._loaded, on_unload=self._unloaded)
        self.value_version = log_value_version(SERVER_TRANSACTION_VERSION)
        self._markers: MarkerSink | None = None
        self._markers_ready = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: list[asyncio.Task[None]] = []
        self._closed = False
        self._settling: dict[str, asyncio.Event] = {}  # id -> set when its pending change ends
        self.completed = 0  # transactions completed (markers and Complete record written)
        self.timed_out = 0  # transactions aborted by the timeout
        self.expired = 0  # transactional ids expired

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Follow the ``__transaction_state`` partitions' leaders and start the timers."""
        self.log.start()
        loop = asyncio.get_running_loop()
        self._timers = [
            loop.create_task(
                self._every(self.config.abort_timed_out_interval_ms, self.abort_timed_out),
                name="txn-abort-timed-out",
            ),
            loop.create_task(
                self._every(self.config.remove_expired_interval_ms, self.expire_ids), name="txn-expire-ids"
            ),
        ]

    def attach_markers(self, markers: MarkerSink) -> None:
        """The marker writer (made once the broker exists); completions wait for it."""
        self._markers = markers
        self._markers_ready.set()

    async def close(self) -> None:
        """Stop the timers and every completion in progress (a transaction left in
        PrepareX is finished by the next coordinator's load), then the state log."""
        if self._closed:
            return
        self._closed = True
        tasks = [*self._timers, *self._tasks]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.log.close()

    # --- finding the coordinator ---------------------------------------------------------------

    async def ensure_topic(self) -> None:
        await self.log.ensure_topic()

    def leader_for(self, transactional_id: str) -> int:
        """The broker FindCoordinator names for the id (the partition's leader in etcd)."""
        return self.log.leader_for(transactional_id)

    # --- requests --------------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[int, int]:
        """InitProducerId with a transactional id: (producer id, epoch). An Ongoing
        transaction is fenced: its abort is written and CONCURRENT_TRANSACTIONS answered
        (the client retries once the abort completed)."""
        expected = (producer_id, producer_epoch) if producer_id >= 0 else None
        T.validate_timeout(timeout_ms, self.config.max_timeout_ms)
        shard, epoch, current = self._lookup(transactional_id)
        transit = T.init_producer_id(
            current,
            transactional_id=transactional_id,
            timeout_ms=timeout_ms,
            max_timeout_ms=self.config.max_timeout_ms,
            now_ms=self.clock(),
            new_producer_id=self._new_producer_id,
            expected=expected,
            server_transaction_version=SERVER_TRANSACTION_VERSION,
        )
        written = await self._write(shard, epoch, transit, then_complete=transit.epoch_fence)
        done = written.meta
        assert done is not None
        if transit.epoch_fence:
            raise ConcurrentTransactionsError(
                f"{transactional_id}: the ongoing transaction of the fenced producer is being aborted"
            )
        return done.producer_id, done.producer_epoch

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Collection[TopicPartition],
    ) -> None:
        """AddPartitionsToTxn from a producer (v0-3)."""
        await self._once_settled(
            transactional_id,
            lambda current: T.add_partitions(
                current,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                partitions=partitions,
                now_ms=self.clock(),
            ),
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn with verifyOnly (KIP-890, from a partition leader): an error
        code per partition (0: in the transaction)."""
        _, _, current = self._lookup(transactional_id)
        return T.verify_partitions(
            current, producer_id=producer_id, producer_epoch=producer_epoch, partitions=partitions
        )

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> None:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        await self._once_settled(
            transactional_id,
            lambda current: T.add_offsets(
                current,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                group_id=group_id,
                offsets_topic_partitions=self._offsets_partitions(),
                now_ms=self.clock(),
            ),
        )

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Answer:
        """EndTxn: answered once PrepareCommit/PrepareAbort is durable (a retry of an end
        already done answers at once); the markers and the Complete record follow."""
        shard, epoch, current = self._lookup(transactional_id)
        out = T.end_txn(
            current,
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            result=TransactionResult.COMMIT if commit else TransactionResult.ABORT,
            now_ms=self.clock(),
            new_producer_id=self._new_producer_id,
        )
        if isinstance(out, Answer):
            return out
        completion = (await self._write(shard, epoch, out, then_complete=True)).completion
        return T.end_txn_answer(completion) if completion is not None else Answer()

    def describe(self, transactional_ids: Iterable[str]) -> list[Described]:
        """DescribeTransactions: each id's metadata or its error (NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND)."""
        out: list[Described] = []
        for tid in transactional_ids:
            try:
                self._serving(tid)
                out.append(Described(tid, meta=self.cache.describe(tid)))
            except StrataError as exc:
                out.append(Described(tid, error=exc))
        return out

    def list_transactions(
        self,
        states: Collection[str] = (),
        producer_ids: Collection[int] = (),
        min_duration_ms: int = -1,
    ) -> tuple[list[Listed], list[str]]:
        """ListTransactions of the partitions led here: (transactions, unknown state names)."""
        return self.cache.list_transactions(
            states=states, producer_ids=producer_ids, min_duration_ms=min_duration_ms, now_ms=self.clock()
        )

    # --- timers ----------------------------------------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Abort (fencing the producer) every Ongoing transaction older than its timeout,
        the writes in parallel; returns how many aborts were written."""
        now = self.clock()

        async def abort(epoch: int, meta: TransactionMetadata) -> bool:
            tid = meta.transactional_id
            try:
                shard, cur_epoch, current = self._lookup(tid)
                if cur_epoch != epoch or current is None or not T.is_timed_out(current, now):
                    return False
                transit = T.abort_timed_out(current, now, SERVER_TRANSACTION_VERSION)
                log.info(
                    "aborting the transaction of %r (producer %d): open longer than its %d ms timeout",
                    tid,
                    current.producer_id,
                    current.timeout_ms,
                )
                await self._write(shard, epoch, transit, then_complete=True)
            except StrataError as exc:
                log.warning("cannot abort the timed-out transaction of %r: %s", tid, exc)
                return False
            self.timed_out += 1
            return True

        due = [abort(epoch, meta) for epoch, meta in list(self.cache) if T.is_timed_out(meta, now)]
        return sum(await asyncio.gather(*due))

    async def expire_ids(self) -> int:
        """Tombstone every id idle longer than ``transactional.id.expiration.ms`` with no
        transaction open, the writes in parallel; returns how many were removed."""
        now = self.clock()
        expiration = self.config.transactional_id_expiration_ms

        async def expire(epoch: int, meta: TransactionMetadata) -> bool:
            tid = meta.transactional_id
            try:
                shard, cur_epoch, current = self._lookup(tid)
                if cur_epoch != epoch or current is None or not T.is_expired(current, now, expiration):
                    return False
                await self._write(shard, epoch, T.expire(current, now, expiration))
            except StrataError as exc:
                log.warning("cannot expire transactional id %r: %s", tid, exc)
                return False
            self.expired += 1
            log.info("transactional id %r expired (idle %d ms)", tid, now - meta.txn_last_update_timestamp_ms)
            return True

        due = [expire(epoch, meta) for epoch, meta in list(self.cache) if T.is_expired(meta, now, expiration)]
        return sum(await asyncio.gather(*due))

    async def _every(self, interval_ms: int, action: Callable[[], Coroutine[Any, Any, int]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except Exception:
                log.exception("transaction coordinator timer %s failed", action.__name__)

    # --- lookups and writes ----------------------------------------------------------------------

    async def _once_settled(
        self,
        transactional_id: str,
        transition: Callable[[TransactionMetadata | None], Transit | Answer],
    ) -> None:
        """Look the id up, ask ``transition`` and write its transit (if any); while that
        answers CONCURRENT_TRANSACTIONS, again each time the id's pending change ends, for
        up to ``CONCURRENT_WAIT_S`` (module docstring)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONCURRENT_WAIT_S
        while True:
            try:
                shard, epoch, current = self._lookup(transactional_id)
                out = transition(current)
                if isinstance(out, Transit):
                    await self._write(shard, epoch, out)
                return
            except ConcurrentTransactionsError:
                left = deadline - loop.time()
                if left <= 0:
                    raise
                event = self._settling.setdefault(transactional_id, asyncio.Event())
                try:
                    await asyncio.wait_for(event.wait(), left)
                except TimeoutError:
                    raise ConcurrentTransactionsError(
                        f"{transactional_id}: the previous state change is still being written"
                    ) from None

    def _settled(self, transactional_id: str) -> None:
        """The id's pending change ended (written, failed, or its partition unloaded)."""
        event = self._settling.pop(transactional_id, None)
        if event is not None:
            event.set()

    def _cache_complete(self, transit: Transit, epoch: int) -> TransactionMetadata | None:
        try:
            return self.cache.complete(transit, epoch)
        finally:
            self._settled(transit.before.transactional_id)

    def _cache_abandon(self, transit: Transit, epoch: int) -> None:
        self.cache.abandon(transit, epoch)
        self._settled(transit.before.transactional_id)

    def _serving(self, transactional_id: str) -> TxnShard:
        """The loaded partition of the id, or the error Kafka answers."""
        shard = self.log.shard_for(transactional_id)
        if shard is None or self.cache.coordinator_epoch(shard.number) != shard.epoch:
            if self.log.partition_count() is None:
                raise NotCoordinatorError("__transaction_state does not exist yet")
            try:
                self.log.coordinator_for(transactional_id)  # LOAD_IN_PROGRESS while loading here
            except CoordinatorNotAvailableError as exc:
                raise NotCoordinatorError(str(exc)) from exc
            raise NotCoordinatorError(f"broker {self.broker_id} does not coordinate {transactional_id!r}")
        return shard

    def _lookup(self, transactional_id: str) -> tuple[TxnShard, int, TransactionMetadata | None]:
        """(partition, coordinator epoch, metadata or None) of an id coordinated here."""
        if not transactional_id:
            raise InvalidRequestError("empty transactional id")
        shard = self._serving(transactional_id)
        epoch, meta = self.cache.get(transactional_id)
        return shard, epoch, meta

    async def _write(
        self, shard: TxnShard, epoch: int, transit: Transit, *, then_complete: bool = False
    ) -> Written:
        """Write ``transit`` (protocol: module docstring): the new metadata (None: the id
        expired), or the write's coordinator error. With ``then_complete`` (a PrepareX
        record) the transaction's completion starts as soon as the record is acknowledged.
        Both happen even if the caller is cancelled meanwhile (its connection closed): a
        prepared transaction is never left without its markers."""
        if shard.epoch != epoch:
            raise NotCoordinatorError(f"{transit.before.transactional_id}: the coordinator epoch moved")
        self.cache.start(transit, epoch)
        try:
            fut = self.log.write(shard, transit.after, self.value_version)
        except BaseException:
            self._cache_abandon(transit, epoch)
            raise
        result: asyncio.Future[Written] = asyncio.get_running_loop().create_future()
        # Retrieved even when the caller is gone (no "exception never retrieved" noise).
        result.add_done_callback(lambda r: r.cancelled() or r.exception())

        def acknowledged(f: asyncio.Future[None]) -> None:
            exc = f.exception() if not f.cancelled() else CoordinatorNotAvailableError("write cancelled")
            if exc is not None:
                self._cache_abandon(transit, epoch)
                result.set_exception(exc)
                return
            try:
                meta = self._cache_complete(transit, epoch)
            except Exception as err:  # NOT_COORDINATOR: moved to another coordinator meanwhile
                result.set_exception(err)
                return
            completion = self._complete_later(epoch, meta) if then_complete and meta is not None else None
            result.set_result(Written(meta, completion))

        fut.add_done_callback(acknowledged)
        return await asyncio.shield(result)

    # --- completing transactions -----------------------------------------------------------------

    def _complete_later(self, epoch: int, prepared: TransactionMetadata) -> Transit | None:
        """Start completing a PrepareCommit/PrepareAbort transaction (markers, then the
        Complete record) in the background; returns its completion transit (None when the
        id is no longer coordinated here in ``epoch``)."""
        transit = T.begin_completion(prepared, self.clock())
        try:
            self.cache.start(transit, epoch)
        except NotCoordinatorError:
            return None
        self._spawn(self._finish(epoch, transit, answering=True), f"txn-complete-{prepared.producer_id}")
        return transit

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        if self._closed:
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, epoch: int, transit: Transit, *, answering: bool = False) -> None:
        """Write ``transit.before``'s markers, then its Complete record (``transit.after``).
        ``answering``: the PrepareX record was just acknowledged to a request whose answer
        is on its way."""
        prepared = transit.before
        tid = prepared.transactional_id
        partition = self.cache.partition_for(tid)
        if answering:
            # Let that answer go out first: the markers' local appends run synchronously on
            # this loop, and the client waits for nothing but the answer. It is
            # ANSWER_TURNS loop turns away (the write's future, the shield, the handler,
            # the connection's writer); the markers wait for no more than that.
            for _ in range(ANSWER_TURNS):
                await asyncio.sleep(0)
        try:
            if prepared.partitions:
                await self._markers_ready.wait()
                assert self._markers is not None
                done = await self._markers.write(
                    prepared.producer_id,
                    prepared.producer_epoch,
                    epoch,
                    T.result_of(prepared.state),
                    prepared.partitions,
                    transaction_version=prepared.client_transaction_version,
                    superseded=lambda: self.cache.coordinator_epoch(partition) != epoch,
                )
                if done.outcome is not MarkerOutcome.WRITTEN:
                    log.warning(
                        "%r: markers of producer %d epoch %d not written (%s): left to the newer coordinator",
                        tid,
                        prepared.producer_id,
                        prepared.producer_epoch,
                        done.outcome.name.lower(),
                    )
                    self._cache_abandon(transit, epoch)
                    return
            delay = COMPLETE_RETRY_S
            while True:
                shard = self.log.shard(partition)
                if shard is None or shard.epoch != epoch or self.cache.coordinator_epoch(partition) != epoch:
                    return  # the successor finishes it from the log
                try:
                    fut = self.log.write(shard, transit.after, self.value_version)
                    await asyncio.shield(fut)
                except (NotCoordinatorError, CoordinatorLoadInProgressError):
                    return
                except StrataError as exc:
                    log.warning(
                        "%r: writing %s failed, again in %.1f s: %s",
                        tid,
                        transit.after.state.name,
                        delay,
                        exc,
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, COMPLETE_RETRY_MAX_S)
                    continue
                break
            with contextlib.suppress(NotCoordinatorError):
                self._cache_complete(transit, epoch)
                self.completed += 1
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%r: completing the transaction of producer %d failed", tid, prepared.producer_id)
            self._cache_abandon(transit, epoch)

    # --- loading (state log callbacks) ------------------------------------------------------------

    def _loaded(self, shard: TxnShard) -> None:
        """A partition is replayed: serve its ids in the partition's leader epoch and
        finish the transactions its previous coordinator left in PrepareX."""
        p, epoch = shard.number, shard.epoch
        self.cache.begin_loading(p, epoch)
        completions = self.cache.finish_loading(p, epoch, shard.loaded(self.clock()))
        for transit in completions or ():
            prepared = transit.before
            log.info(
                "%r: finishing the %s of producer %d left by the previous coordinator",
                prepared.transactional_id,
                "commit" if prepared.state is TransactionState.PREPARE_COMMIT else "abort",
                prepared.producer_id,
            )
            self._spawn(self._finish(epoch, transit), f"txn-complete-{prepared.producer_id}")

    def _unloaded(self, shard: TxnShard) -> int:
        n = sum(1 for _, m in self.cache if self.cache.partition_for(m.transactional_id) == shard.number)
        self.cache.unload(shard.number, shard.epoch)
        for tid in [t for t in self._settling if self.cache.partition_for(t) == shard.number]:
            self._settled(tid)  # its waiters now answer NOT_COORDINATOR
        return n
