"""Produce: append every partition's batch, then wait for its durability.

Each partition is checked in request order before anything is awaited: acks
(INVALID_REQUEST), that
this broker leads the partition (NOT_LEADER_OR_FOLLOWER) and, for acks=all, that the ISR
meets ``min.insync.replicas`` (``ReplicaManager.writable_leader``), then the records (none:
CORRUPT_MESSAGE; zstd before v7: UNSUPPORTED_COMPRESSION_TYPE, KIP-110). The appends all
happen synchronously, so pipelined requests land in the log in the order sent and one
group commit covers them; acks=0 gets no response. A transactional request whose batches
begin a transaction in a partition first has the coordinator verify it
(broker.txn_verification, KIP-890); the connection's later produce requests wait for it
(``Connection.produce_gate``) so they still land in the order sent. Record validation and the append
itself live in the broker and hot.log; per-record errors are returned from v8 (KIP-467).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Generator
from typing import TYPE_CHECKING, Any

from api.protocol import RequestHeader
from api.protocol.error_table import kafka_code
from api.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from broker.broker import Broker, PendingAppend, ProduceResult
from broker.replica_manager import PartitionReplica
from broker.txn_verification import ProduceVerification
from hot import errors as E
from hot.errors import InvalidRequestError, StrataError
from hot.record_validation import uses_zstd

if TYPE_CHECKING:
    from api.kafka_server import Connection

# Produce v7 is the first a client may send zstd batches in (KIP-110); Kafka refuses them in
# older versions with UNSUPPORTED_COMPRESSION_TYPE so that old clients' readers are never handed them.
_PRODUCE_ZSTD_VERSION = 7


async def handle_produce(
    conn: Connection, header: RequestHeader, req: ProduceRequest
) -> ProduceResponse | None:
    broker = conn.broker
    started = time.perf_counter()
    acks = req.acks
    refused: StrataError | None = None
    if acks not in (-1, 0, 1):
        refused = InvalidRequestError(f"acks must be -1, 0 or 1, got {acks}")
    # A transactional id (WRITE on it checked by the guard) lets the log take the request's
    # transactional batches; without one they are refused (hot.log_append).
    transactional = req.transactional_id is not None
    verification: ProduceVerification | None = None
    coordinator = broker.transactions
    if (
        req.transactional_id
        and refused is None
        and coordinator is not None
        and coordinator.config.partition_verification_enable
    ):
        verification = ProduceVerification(broker, req.transactional_id, header.api_version)
        for td in req.topic_data:
            for pd in td.partition_data:
                checked = _checked(broker, header, acks, td.name, pd.index, pd.records)
                if isinstance(checked, PartitionReplica):
                    assert pd.records is not None
                    verification.add(td.name, pd.index, pd.records)
    # Phase zero, only when something must be awaited first (this request's verifications,
    # or an earlier request of the connection still in its own): requests of a connection
    # are appended in the order they were sent.
    gate: asyncio.Future[None] | None = None
    before = conn.produce_gate
    if (verification is not None and verification.pending) or (before is not None and not before.done()):
        gate = conn.produce_gate = asyncio.get_running_loop().create_future()
    try:
        if gate is not None:
            if before is not None:
                await asyncio.shield(before)
            if verification is not None and verification.pending:
                await verification.run()
        pending = _append_all(broker, header, req, refused, transactional, verification)
    finally:
        if gate is not None:
            gate.set_result(None)
    if acks == 0:
        return None
    # Phase two: wait for durability of all of them together.
    waits = [p for _, _, p, _ in pending if p is not None]
    if len(waits) == 1:
        now = broker.complete_now(waits[0], acks=acks)
        if now is None:
            now = await broker.complete(waits[0], acks=acks, timeout_ms=req.timeout_ms)
        results = [now]
    else:
        results = await _complete_all(broker, waits, acks, req.timeout_ms)
    it = iter(results)
    by_topic: dict[str, list[ProducePartitionResponse]] = {}
    for topic, index, p, err in pending:
        if p is not None:
            r = next(it)
            err = r.error
            if err is None:
                by_topic.setdefault(topic, []).append(
                    ProducePartitionResponse(
                        index=index,
                        base_offset=r.base_offset,
                        log_append_time_ms=r.log_append_time_ms,
                        log_start_offset=r.log_start_offset,
                    )
                )
                continue
        assert err is not None
        code = kafka_code(err)
        broker.metrics.errors.labels("produce", str(code)).inc()
        by_topic.setdefault(topic, []).append(
            ProducePartitionResponse(
                index=index,
                error_code=code,
                error_message=str(err) or None,
                record_errors=_record_errors(err),
            )
        )
    broker.metrics.labelled(broker.metrics.produce_latency, "kafka").observe(time.perf_counter() - started)
    return ProduceResponse(
        responses=tuple(
            ProduceTopicResponse(name=t, partition_responses=tuple(ps)) for t, ps in by_topic.items()
        )
    )


async def _complete_all(
    broker: Broker, waits: list[PendingAppend], acks: int, timeout_ms: int
) -> list[ProduceResult]:
    """``broker.complete`` of every partition, concurrently, as ``asyncio.gather`` would,
    without its task per partition: each completion first runs here up to its first
    suspension, and only those that suspend (waiting for a flush or the replicas) go on
    in tasks. With acks=1 in interval mode none does, so a Produce to many partitions
    costs no task at all. (``Broker.complete`` awaits plain futures only, which is what
    running it outside a task of its own requires.)"""
    results: list[ProduceResult | None] = [None] * len(waits)
    rest: list[tuple[int, _Resumed]] = []
    for i, p in enumerate(waits):
        now = broker.complete_now(p, acks=acks)
        if now is not None:
            results[i] = now
            continue
        coro = broker.complete(p, acks=acks, timeout_ms=timeout_ms)
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


def _append_all(
    broker: Broker,
    header: RequestHeader,
    req: ProduceRequest,
    refused: StrataError | None,
    transactional: bool,
    verification: ProduceVerification | None,
) -> list[tuple[str, int, PendingAppend | None, StrataError | None]]:
    """Phase one, synchronous and in request order: check and append every partition. There
    is no await before the last append, so leadership cannot change between a partition's
    check and its append."""
    pending: list[tuple[str, int, PendingAppend | None, StrataError | None]] = []
    for td in req.topic_data:
        for pd in td.partition_data:
            checked = refused or _checked(broker, header, req.acks, td.name, pd.index, pd.records)
            err = checked if isinstance(checked, StrataError) else None
            if err is None and verification is not None:
                err = verification.errors.get((td.name, pd.index))
            if err is not None:
                pending.append((td.name, pd.index, None, err))
                continue
            assert pd.records is not None and isinstance(checked, PartitionReplica)
            guards = verification.guards_for(td.name, pd.index) if verification is not None else None
            appended = broker.append(
                td.name,
                pd.index,
                pd.records,
                transactional=transactional,
                verification=guards,
                leader=checked,
            )
            pending.append((td.name, pd.index, appended, None))
    return pending


def _checked(
    broker: Broker,
    header: RequestHeader,
    acks: int,
    topic: str,
    partition: int,
    records: bytes | memoryview | None,
) -> PartitionReplica | StrataError:
    """The partition's replica this broker leads, or why its batch is not appended: not
    the leader (or, for acks=all, fewer in-sync replicas than ``min.insync.replicas``),
    then the records. The replica goes to ``Broker.append`` (nothing awaits in between)."""
    try:
        rep = broker.replicas.writable_leader(topic, partition, acks)
    except StrataError as exc:
        return exc
    if records is None or len(records) == 0:
        return E.CorruptRecordError("produce request without record data")
    if header.api_version < _PRODUCE_ZSTD_VERSION and uses_zstd(records):
        return E.UnsupportedCompressionError(
            f"Produce requests with version {header.api_version} may not use ZStandard "
            f"compression (version {_PRODUCE_ZSTD_VERSION} or later may)"
        )
    return rep


def _record_errors(err: StrataError) -> tuple[BatchIndexAndErrorMessage, ...]:
    """Produce v8+ names the records that made a batch fail (KIP-467)."""
    return tuple(
        BatchIndexAndErrorMessage(batch_index=e.batch_index, batch_index_error_message=e.message)
        for e in getattr(err, "record_errors", ())
    )
