"""The coordinator's marker writer (Kafka's TransactionMarkerChannelManager): once a
transaction is PrepareCommit / PrepareAbort, a COMMIT / ABORT marker goes to every one of its
partitions, and the transaction completes when they all have it.

``MarkerWriter.write`` returns a task that, until every partition is written:

1. groups the partitions still missing by their current leader (``leader_of``: the broker's
   metadata view) and sends one WriteTxnMarkers request per destination broker, all at
   once (``send``: this broker's own by a direct call, others over an inter-broker
   connection; broker.txn_markers), each attempt bounded by ``attempt_timeout_s``;
2. drops a partition whose topic no longer exists (Kafka skips it: the partition is likely
   deleted); keeps for the next round a partition without an available leader, one whose
   leader answered a retriable error (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
   NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR: a leader that
   moved or is catching up) and every partition of a destination that could not be reached;
   an unexpected error is logged and retried too (a marker is never given up on silently);
3. waits with exponential backoff (``backoff_s`` doubling up to ``max_backoff_s``, back to
   the start after any progress) before the next round.

It gives up, without writing the rest, only when the transaction is no longer this
coordinator's to finish: a leader answered TRANSACTION_COORDINATOR_FENCED (a newer
coordinator epoch wrote there: this one is a zombie) or INVALID_PRODUCER_EPOCH (a newer
producer epoch wrote there: the transaction was ended by its successor; Kafka gives up on both),
or ``superseded()`` says this coordinator's epoch of the transaction's
``__transaction_state`` partition has moved on (checked before every round). ``close``
cancels every write in progress (shutdown); a cancelled write leaves the transaction in
PrepareX, which the next coordinator finishes from the log (broker.transactions.replay).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final

from broker.groups.types import TopicPartition
from broker.transactions.transitions import TransactionResult
from hot.errors import StrataError
from kwire import error_table as E
from kwire.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

log = logging.getLogger("strata.transactions.markers")

# (destination broker id, request, timeout in seconds) -> its answer. MarkerSendError (or
# any StrataError / OSError) when the destination could not be reached or did not answer.
Sender = Callable[[int, WriteTxnMarkersRequest, float], Awaitable[WriteTxnMarkersResponse]]
# (topic, partition) -> its leader's broker id; NO_LEADER when none is available now; None
# when the partition does not exist (its topic was deleted).
LeaderOf = Callable[[str, int], int | None]

NO_LEADER: Final = -1
# Answers after which the partition is sent again (Kafka's TransactionMarkerRequestCompletionHandler).
RETRIABLE: Final = frozenset(
    {
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_LEADER_OR_FOLLOWER,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.REQUEST_TIMED_OUT,
        E.KAFKA_STORAGE_ERROR,
    }
)
# Answers that end the write: the transaction is no longer this coordinator's to finish.
FENCING: Final = frozenset({E.TRANSACTION_COORDINATOR_FENCED, E.INVALID_PRODUCER_EPOCH})


class MarkerSendError(StrataError):
    """A WriteTxnMarkers request got no answer (connection refused, closed, timed out)."""

    retriable = True


class MarkerOutcome(enum.Enum):
    WRITTEN = "written"  # every partition has its marker (or was dropped: topic deleted)
    FENCED = "fenced"  # a leader answered TRANSACTION_COORDINATOR_FENCED / INVALID_PRODUCER_EPOCH
    SUPERSEDED = "superseded"  # this coordinator's epoch of the transaction moved on


@dataclass(frozen=True, slots=True)
class MarkersDone:
    """How a ``write`` ended: the partitions written, those dropped (deleted topics) and,
    for FENCED, the error a leader answered."""

    outcome: MarkerOutcome
    written: frozenset[TopicPartition]
    dropped: frozenset[TopicPartition]
    error_code: int = E.NONE


class MarkerWriter:
    """Writes transaction markers until done (module docstring). Runs on one event loop."""

    def __init__(
        self,
        leader_of: LeaderOf,
        send: Sender,
        *,
        attempt_timeout_s: float = 35.0,
        backoff_s: float = 0.05,
        max_backoff_s: float = 1.0,
    ) -> None:
        self._leader_of = leader_of
        self._send = send
        self.attempt_timeout_s = attempt_timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._tasks: set[asyncio.Task[MarkersDone]] = set()
        self._closed = False

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
    ) -> asyncio.Task[MarkersDone]:
        """Start writing ``result``'s marker to ``partitions``; the task ends with MarkersDone
        (cancelled by ``close``)."""
        if self._closed:
            raise MarkerSendError("the marker writer is closed")
        write = _Write(
            self,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            result,
            set(partitions),
            transaction_version,
            superseded,
        )
        task = asyncio.get_running_loop().create_task(write.run(), name=f"txn-markers-{producer_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def close(self) -> None:
        """Cancel every write in progress and wait for them to end."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Write:
    """One transaction's markers (``MarkerWriter.write``)."""

    def __init__(
        self,
        writer: MarkerWriter,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: TransactionResult,
        pending: set[TopicPartition],
        transaction_version: int,
        superseded: Callable[[], bool],
    ) -> None:
        self.writer = writer
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.result = result
        self.pending = pending
        self.transaction_version = transaction_version
        self.superseded = superseded
        self.written: set[TopicPartition] = set()
        self.dropped: set[TopicPartition] = set()

    def _done(self, outcome: MarkerOutcome, code: int = E.NONE) -> MarkersDone:
        return MarkersDone(outcome, frozenset(self.written), frozenset(self.dropped), code)

    async def run(self) -> MarkersDone:
        delay = self.writer.backoff_s
        while True:
            if self.superseded():
                return self._done(MarkerOutcome.SUPERSEDED)
            by_leader = self._group()
            if not self.pending:
                return self._done(MarkerOutcome.WRITTEN)
            before = len(self.pending)
            answers = await asyncio.gather(*(self._attempt(dest, tps) for dest, tps in by_leader.items()))
            for code in answers:
                if code in FENCING:
                    return self._done(MarkerOutcome.FENCED, code)
            if not self.pending:
                return self._done(MarkerOutcome.WRITTEN)
            if len(self.pending) < before:
                delay = self.writer.backoff_s
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.writer.max_backoff_s)

    def _group(self) -> dict[int, list[TopicPartition]]:
        """The pending partitions by leader; deleted ones dropped, leaderless ones left."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(self.pending, key=lambda tp: (tp.topic, tp.partition)):
            leader = self.writer._leader_of(tp.topic, tp.partition)
            if leader is None:
                log.info(
                    "%s-%d no longer exists: skipping its marker for producer %d",
                    tp.topic,
                    tp.partition,
                    self.producer_id,
                )
                self.pending.discard(tp)
                self.dropped.add(tp)
            elif leader >= 0:
                by_leader.setdefault(leader, []).append(tp)
        return by_leader

    def _request(self, tps: list[TopicPartition]) -> WriteTxnMarkersRequest:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    transaction_result=self.result is TransactionResult.COMMIT,
                    topics=tuple(
                        WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                        for t, ps in by_topic.items()
                    ),
                    coordinator_epoch=self.coordinator_epoch,
                    transaction_version=self.transaction_version,
                ),
            )
        )

    async def _attempt(self, dest: int, tps: list[TopicPartition]) -> int:
        """Send ``tps``' markers to ``dest``; returns a FENCING code if one came back, else
        NONE (written partitions leave ``pending``, the others stay)."""
        timeout = self.writer.attempt_timeout_s
        try:
            async with asyncio.timeout(timeout):
                response = await self.writer._send(dest, self._request(tps), timeout)
        except (StrataError, OSError, TimeoutError) as exc:
            log.info("transaction markers to broker %d: %s; retrying", dest, exc or type(exc).__name__)
            return E.NONE
        asked = set(tps)
        fenced = E.NONE
        for m in response.markers:
            if m.producer_id != self.producer_id:
                continue
            for t in m.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp not in asked:
                        continue
                    code = p.error_code
                    if code == E.NONE:
                        self.pending.discard(tp)
                        self.written.add(tp)
                    elif code in FENCING:
                        log.info(
                            "marker of producer %d on %s-%d: error %d; this coordinator gives up",
                            self.producer_id,
                            tp.topic,
                            tp.partition,
                            code,
                        )
                        fenced = code
                    elif code not in RETRIABLE:
                        log.warning(
                            "marker of producer %d on %s-%d: unexpected error %d from broker %d; retrying",
                            self.producer_id,
                            tp.topic,
                            tp.partition,
                            code,
                            dest,
                        )
        return fenced
