"""The produce path: one broker-level entry from decoded partitions to their results
(Kafka's ``ReplicaManager.appendRecords``), so the Produce handler only decodes,
authorizes and answers.

``ProducePath.append_records`` runs a request in three phases, in one place:

1. **Check**, in request order, before anything is awaited: acks (INVALID_REQUEST), that
   this broker leads the partition (NOT_LEADER_OR_FOLLOWER) and, for acks=all, that the
   ISR meets ``min.insync.replicas`` (``ReplicaManager.writable_leader``), then the
   records (none: CORRUPT_MESSAGE; zstd before Produce v7: UNSUPPORTED_COMPRESSION_TYPE,
   KIP-110). A transactional request whose batches begin a transaction in a partition
   first has the coordinator verify it (``broker.txn_verification``, KIP-890); the
   connection's later produce requests wait for it (``ProduceOrder``) so they still land
   in the order sent.
2. **Append** every partition synchronously: no await between a partition's leader check
   and its append, so pipelined requests land in the log in the order sent and one group
   commit covers them.
3. **Complete**: wait for each append's durability (acks=1: on the leader, flushed in
   fsync mode; acks=all: the high watermark past it), all partitions together; acks=0
   returns no results.

The same class serves the other writers: ``produce`` (REST, the console: one partition,
one batch) and ``append_marker`` (WriteTxnMarkers, ``broker.txn_markers``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker import admin
from broker.metrics import BrokerMetrics
from broker.partition_replica import PartitionReplica
from broker.replica_manager import ReplicaManager
from broker.txn_verification import ProduceVerification, VerificationHost
from hot import errors as E
from hot.config import LogConfig
from hot.errors import InvalidRequestError, InvalidTopicError, RequestTimedOutError, StrataError
from hot.log import AppendInfo, Log
from hot.record_validation import uses_zstd
from hot.records import ControlType

if TYPE_CHECKING:
    from hot.producer_state import VerificationGuard

# Produce v7 is the first a client may send zstd batches in (KIP-110); Kafka refuses them in
# older versions with UNSUPPORTED_COMPRESSION_TYPE so that old clients' readers are never handed them.
PRODUCE_ZSTD_VERSION = 7


@dataclass(frozen=True, slots=True)
class ProduceResult:
    error: StrataError | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_count: int = 0


@dataclass(frozen=True, slots=True)
class PendingAppend:
    """A leader's append, with the replica and the epoch it was made in."""

    topic: str
    log: Log | None
    info: AppendInfo | None
    error: StrataError | None
    replica: PartitionReplica | None = None
    epoch: int = -1


class ProduceOrder:
    """One connection's produce order: set while a produce request awaits before its
    appends (a transaction verification), so the connection's next produce requests
    append after it, in the order they were sent."""

    __slots__ = ("gate",)

    def __init__(self) -> None:
        self.gate: asyncio.Future[None] | None = None


class ProducePath:
    """Every append a leader makes for a producer (module docstring)."""

    def __init__(
        self,
        host: VerificationHost,
        replicas: ReplicaManager,
        metrics: BrokerMetrics,
        log_for: Callable[[str, int], Log],
    ) -> None:
        self._host = host  # the broker: its transaction coordinator is set after start-up
        self.replicas = replicas
        self.metrics = metrics
        self._log_for = log_for

    # -- a Produce request ----------------------------------------------------------------

    async def append_records(
        self,
        partitions: Sequence[tuple[str, int, bytes | memoryview | None]],
        *,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None,
        api_version: int,
        order: ProduceOrder | None = None,
    ) -> list[ProduceResult] | None:
        """Check, append and complete every (topic, partition, records) of one Produce
        request; the results in request order, or None for acks=0 (nothing is answered)."""
        refused: StrataError | None = None
        if acks not in (-1, 0, 1):
            refused = InvalidRequestError(f"acks must be -1, 0 or 1, got {acks}")
        # A transactional id (WRITE on it checked by the door's guard) lets the log take the
        # request's transactional batches; without one they are refused (hot.log_append).
        transactional = transactional_id is not None
        verification: ProduceVerification | None = None
        coordinator = self._host.transactions
        if (
            transactional_id
            and refused is None
            and coordinator is not None
            and coordinator.config.partition_verification_enable
        ):
            verification = ProduceVerification(self._host, transactional_id, api_version)
            for topic, index, records in partitions:
                checked = self._checked(api_version, acks, topic, index, records)
                if isinstance(checked, PartitionReplica):
                    assert records is not None
                    verification.add(topic, index, records)
        # Topics with schema validation on (broker.schema_registry.validation) are checked
        # before the appends, in phase zero; the others cost one config look-up.
        to_validate = self._to_validate(partitions) if refused is None else []
        invalid: dict[tuple[str, int], StrataError] = {}
        # Phase zero, only when something must be awaited first (this request's verifications
        # or schema checks, or an earlier request of the connection still in its own):
        # requests of a connection are appended in the order they were sent.
        gate: asyncio.Future[None] | None = None
        before = order.gate if order is not None else None
        if order is not None and (
            (verification is not None and verification.pending)
            or (before is not None and not before.done())
            or to_validate
        ):
            gate = order.gate = asyncio.get_running_loop().create_future()
        try:
            if gate is not None:
                if before is not None:
                    await asyncio.shield(before)
                if verification is not None and verification.pending:
                    await verification.run()
            elif verification is not None and verification.pending:
                await verification.run()  # no connection order to keep (order=None)
            if to_validate:
                invalid = await self._validate(to_validate)
            pending = self._append_all(
                partitions, api_version, acks, refused, transactional, verification, invalid
            )
        finally:
            if gate is not None:
                gate.set_result(None)
        if acks == 0:
            return None
        # Phase two: wait for durability of all of them together.
        waits = [p for p in pending if isinstance(p, PendingAppend)]
        if len(waits) == 1:
            now = self.complete_now(waits[0], acks=acks)
            if now is None:
                now = await self.complete(waits[0], acks=acks, timeout_ms=timeout_ms)
            completed = [now]
        else:
            completed = await self._complete_all(waits, acks, timeout_ms)
        it = iter(completed)
        return [next(it) if isinstance(p, PendingAppend) else ProduceResult(p) for p in pending]

    def _append_all(
        self,
        partitions: Sequence[tuple[str, int, bytes | memoryview | None]],
        api_version: int,
        acks: int,
        refused: StrataError | None,
        transactional: bool,
        verification: ProduceVerification | None,
        invalid: Mapping[tuple[str, int], StrataError] | None = None,
    ) -> list[PendingAppend | StrataError]:
        """Phase one, synchronous and in request order: check and append every partition.
        There is no await before the last append, so leadership cannot change between a
        partition's check and its append."""
        pending: list[PendingAppend | StrataError] = []
        for topic, index, records in partitions:
            checked = refused or self._checked(api_version, acks, topic, index, records)
            if isinstance(checked, StrataError):
                pending.append(checked)
                continue
            if verification is not None:
                err = verification.errors.get((topic, index))
                if err is not None:
                    pending.append(err)
                    continue
            if invalid:
                err = invalid.get((topic, index))
                if err is not None:
                    pending.append(err)
                    continue
            assert records is not None
            guards = verification.guards_for(topic, index) if verification is not None else None
            pending.append(
                self.append(
                    topic, index, records, transactional=transactional, verification=guards, leader=checked
                )
            )
        return pending

    def _to_validate(
        self, partitions: Sequence[tuple[str, int, bytes | bytearray | memoryview | None]]
    ) -> list[tuple[str, int, bytes | bytearray | memoryview, LogConfig]]:
        """The partitions led here whose topic has schema validation on, with their data."""
        out = []
        for topic, index, records in partitions:
            rep = self.replicas.replicas.get((topic, index))
            if rep is not None and records and rep.log.config.schema_validation:
                out.append((topic, index, records, rep.log.config))
        return out

    async def _validate(
        self, parts: list[tuple[str, int, bytes | bytearray | memoryview, LogConfig]]
    ) -> dict[tuple[str, int], StrataError]:
        """Why each partition's data is refused by schema validation (absent: accepted)."""
        from broker.schema_registry.validation import validate

        store = getattr(self._host, "schema_store", None)
        out: dict[tuple[str, int], StrataError] = {}
        for topic, index, records, config in parts:
            err = await validate(store, topic, records, config)
            if err is not None:
                out[(topic, index)] = err
        return out

    def _checked(
        self, api_version: int, acks: int, topic: str, partition: int, records: bytes | memoryview | None
    ) -> PartitionReplica | StrataError:
        """The partition's replica this broker leads, or why its batch is not appended: not
        the leader (or, for acks=all, fewer in-sync replicas than ``min.insync.replicas``),
        then the records. The replica goes to ``append`` (nothing awaits in between)."""
        try:
            rep = self.replicas.writable_leader(topic, partition, acks)
        except StrataError as exc:
            return exc
        if records is None or len(records) == 0:
            return E.CorruptRecordError("produce request without record data")
        if api_version < PRODUCE_ZSTD_VERSION and uses_zstd(records):
            return E.UnsupportedCompressionError(
                f"Produce requests with version {api_version} may not use ZStandard "
                f"compression (version {PRODUCE_ZSTD_VERSION} or later may)"
            )
        return rep

    async def _complete_all(
        self, waits: list[PendingAppend], acks: int, timeout_ms: int
    ) -> list[ProduceResult]:
        """``complete`` of every partition, concurrently, as ``asyncio.gather`` would,
        without its task per partition: each completion first runs here up to its first
        suspension, and only those that suspend (waiting for a flush or the replicas) go on
        in tasks. With acks=1 in interval mode none does, so a Produce to many partitions
        costs no task at all. (``complete`` awaits plain futures only, which is what
        running it outside a task of its own requires.)"""
        results: list[ProduceResult | None] = [None] * len(waits)
        rest: list[tuple[int, _Resumed]] = []
        for i, p in enumerate(waits):
            now = self.complete_now(p, acks=acks)
            if now is not None:
                results[i] = now
                continue
            coro = self.complete(p, acks=acks, timeout_ms=timeout_ms)
            try:
                yielded = coro.send(None)
            except StopIteration as stop:
                results[i] = stop.value
                continue
            rest.append((i, _Resumed(coro, yielded)))
        if len(rest) == 1:
            results[rest[0][0]] = await rest[0][1]
        elif rest:
            done = await asyncio.gather(*(_finish(r) for _, r in rest))
            for (i, _), result in zip(rest, done, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    # -- the fast path's steps (api.handlers.produce_fast) --------------------------------

    def fast_leader(
        self, topic: str, partition: int, acks: int, records: memoryview, api_version: int
    ) -> PartitionReplica | None:
        """The replica to append ``records`` to when nothing refuses them before the append
        (``_checked`` and ``append``'s own checks pass); None: the general path answers
        (an error, or something only it handles). Nothing is appended here."""
        try:
            rep = self.replicas.writable_leader(topic, partition, acks)
        except StrataError:
            return None
        if len(records) == 0 or (api_version < PRODUCE_ZSTD_VERSION and uses_zstd(records)):
            return None
        if admin.is_internal(topic) or self._log_for(topic, partition) is not rep.log:
            return None
        if rep.log.config.schema_validation:  # checked by the general path
            return None
        return rep

    def fast_again(self, rep: PartitionReplica, acks: int, records: memoryview, api_version: int) -> bool:
        """``fast_leader``'s checks that a role change does not mark, for a replica it
        returned before (the listener keeps its answers while the view and every role are
        as they were: api.handlers.produce_fast): not shutting down, the lease certain,
        min.insync.replicas for acks=all, the records, the topic's schema validation."""
        replicas = self.replicas
        if replicas.shutting_down or not replicas.lease_alive():
            return False
        leader = rep.leader
        if leader is None:
            return False
        if acks == -1:
            try:
                leader.check_before_append(acks)
            except StrataError:
                return False
        if len(records) == 0 or (api_version < PRODUCE_ZSTD_VERSION and uses_zstd(records)):
            return False
        return not rep.log.config.schema_validation

    def fast_append(self, rep: PartitionReplica, topic: str, records: memoryview) -> AppendInfo | StrataError:
        """``append`` of one non-transactional request's batches to ``rep`` (from
        ``fast_leader``, no await since), without its PendingAppend: what the log wrote, or
        why it refused them (validation, the idempotent producer's checks)."""
        info = _fast_write(rep, records)
        if type(info) is AppendInfo:
            self.replicas.appended(rep)
            totals = self.metrics.produced(topic)
            totals[0] += info.record_count
            totals[1] += len(records)
        return info

    def fast_append_all(
        self, leaders: list[PartitionReplica], topics: list[tuple[str, list[tuple[int, memoryview]]]]
    ) -> list[AppendInfo | StrataError]:
        """``fast_append`` of every partition of one request (``leaders`` in request
        order): the writes first, in order, then the after-append work once per request
        (issue 34 §2, fan-out): the per-topic totals added once per topic, and the parked
        fetches woken and the high watermarks advanced (``ReplicaManager.appended``) in
        one pass over the partitions written, not between one partition's write and the
        next's. Nothing awaits in between, so no reader sees the difference."""
        outcomes: list[AppendInfo | StrataError] = []
        written: list[PartitionReplica] = []
        produced = self.metrics.produced
        i = 0
        for topic, parts in topics:
            count = size = 0
            for _, records in parts:
                rep = leaders[i]
                i += 1
                info = _fast_write(rep, records)
                outcomes.append(info)
                if type(info) is AppendInfo:
                    written.append(rep)
                    count += info.record_count
                    size += len(records)
            if count:
                totals = produced(topic)
                totals[0] += count
                totals[1] += size
        appended = self.replicas.appended
        for rep in written:
            appended(rep)
        return outcomes

    # -- one append -----------------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        data: bytes | bytearray | memoryview,
        *,
        acks: int = 1,
        transactional: bool = False,
        verification: Mapping[int, VerificationGuard] | None = None,
        leader: PartitionReplica | None = None,
    ) -> PendingAppend:
        """Append a producer's batches as the partition's leader; ``transactional``: the
        request named a transactional id (its transactional batches are accepted, hot.log);
        ``verification``: the producers' guards the coordinator confirmed
        (broker.txn_verification; None: not verified); ``leader``: what
        ``replicas.writable_leader`` returned for this append, with no await since, so it
        is not checked twice."""
        # The internal topics are written by their coordinators only (Kafka: INVALID_TOPIC_EXCEPTION).
        if admin.is_internal(topic):
            return PendingAppend(
                topic, None, None, InvalidTopicError(f"cannot produce to the internal topic {topic}")
            )
        pending = self._leader_append(
            topic,
            partition,
            acks,
            lambda lg, epoch: lg.append(
                data, leader_epoch=epoch, transactional=transactional, verification=verification
            ),
            leader,
        )
        if pending.info is not None:
            totals = self.metrics.produced(topic)
            totals[0] += pending.info.record_count
            totals[1] += len(data)
        return pending

    def append_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        kind: ControlType,
        coordinator_epoch: int,
    ) -> PendingAppend:
        """A transaction marker (WriteTxnMarkers, broker.txn_markers), appended as the
        leader in its epoch like a produce with acks=all (``complete`` awaits it), on any
        partition, ``__consumer_offsets`` included (a transactional offset commit's)."""
        return self._leader_append(
            topic,
            partition,
            -1,
            lambda lg, epoch: lg.append_marker(
                producer_id, producer_epoch, kind, coordinator_epoch, leader_epoch=epoch
            ),
        )

    def _leader_append(
        self,
        topic: str,
        partition: int,
        acks: int,
        write: Callable[[Log, int], AppendInfo],
        leader: PartitionReplica | None = None,
    ) -> PendingAppend:
        """``write(log, leader_epoch)`` on the partition as its current leader. Nothing
        awaits between the leader check and the append, so appends are in call order."""
        try:
            rep = leader if leader is not None else self.replicas.writable_leader(topic, partition, acks)
            lg = self._log_for(topic, partition)
            if lg is not rep.log:
                raise E.UnknownTopicOrPartitionError(f"{topic}-{partition} is being recreated")
            if rep.roll_before_append:  # a new leadership's first append (replica_manager)
                lg.roll()
                rep.roll_before_append = False
            info = write(lg, rep.leader_epoch)
        except StrataError as exc:
            # Counted once, by the protocol layer that answers the request.
            return PendingAppend(topic, None, None, exc)
        self.replicas.appended(rep)
        return PendingAppend(topic, lg, info, None, replica=rep, epoch=rep.leader_epoch)

    def complete_now(self, pending: PendingAppend, *, acks: int) -> ProduceResult | None:
        """``complete``'s result when it has nothing to wait for (an error, acks=0, acks=1
        in interval mode), else None: a Produce to many partitions costs no coroutine per
        partition then."""
        if pending.error is not None or pending.log is None or pending.info is None:
            return ProduceResult(pending.error)
        if acks != 0 and pending.replica is not None and (acks == -1 or pending.log.config.fsync_mode):
            return None
        return self._appended_result(pending)

    def _appended_result(self, pending: PendingAppend) -> ProduceResult:
        info = pending.info
        assert info is not None and pending.log is not None
        return ProduceResult(
            None,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=pending.log.log_start_offset,
            record_count=info.record_count,
        )

    async def complete(self, pending: PendingAppend, *, acks: int, timeout_ms: int) -> ProduceResult:
        if pending.error is not None or pending.log is None or pending.info is None:
            return ProduceResult(pending.error)
        info = pending.info
        if acks != 0 and pending.replica is not None:
            try:
                await self.replicas.wait_for_acks(
                    pending.replica, pending.epoch, info.last_offset + 1, acks, max(timeout_ms, 1) / 1000
                )
            except TimeoutError:
                what = "replicated to the in-sync replicas" if acks == -1 else "durable on the leader"
                error = RequestTimedOutError(f"not {what} within {timeout_ms} ms")
                return ProduceResult(error, record_count=info.record_count)
            except StrataError as exc:
                return ProduceResult(exc, record_count=info.record_count)
        return self._appended_result(pending)

    async def produce(
        self, topic: str, partition: int, data: bytes | bytearray | memoryview, *, acks: int, timeout_ms: int
    ) -> ProduceResult:
        """One batch to one partition (REST, the console)."""
        if acks not in (-1, 0, 1):
            return ProduceResult(InvalidRequestError(f"acks must be -1, 0 or 1, got {acks}"))
        checks = self._to_validate([(topic, partition, data)])
        if checks:
            refused = (await self._validate(checks)).get((topic, partition))
            if refused is not None:
                return ProduceResult(refused)
        pending = self.append(topic, partition, data, acks=acks)
        return await self.complete(pending, acks=acks, timeout_ms=timeout_ms)


class _Resumed:
    """The rest of a coroutine run to its first suspension: what it yielded goes to the
    task awaiting this (which waits for it as it would for the coroutine itself), then the
    coroutine resumes, as a task's step would resume it."""

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, ProduceResult], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded

    def __await__(self) -> Generator[Any, None, ProduceResult]:
        coro, yielded = self._coro, self._yielded
        self._yielded = None
        while True:
            try:
                yield yielded
            except GeneratorExit:  # closed unfinished
                coro.close()
                raise
            except BaseException as exc:  # thrown into the task: cancellation
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                continue
            try:
                yielded = coro.send(None)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]


async def _finish(rest: _Resumed) -> ProduceResult:
    return await rest


def _fast_write(rep: PartitionReplica, records: memoryview) -> AppendInfo | StrataError:
    """The fast path's ``Log.append`` of ``records`` to the leader ``rep``: what the log
    wrote, or why it refused them."""
    lg = rep.log
    try:
        if rep.roll_before_append:  # a new leadership's first append (replica_manager)
            lg.roll()
            rep.roll_before_append = False
        return lg.append(records, leader_epoch=rep.leader_epoch)
    except StrataError as exc:
        return exc
