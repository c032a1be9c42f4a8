"""WriteTxnMarkers on the partition leaders, and how a transaction coordinator reaches them.

Leader side, ``write_txn_markers`` (Kafka's KafkaApis.handleWriteTxnMarkersRequest): the
Kafka handler (api.handlers.txn_markers) and this broker's own coordinator (through
``MarkerChannels``, no socket) both call it, so a marker is written one way whoever sends it.

* Every partition of every marker is appended first, in request order, with nothing awaited
  in between (as Produce does: ``Broker.append_marker`` serializes with the other appends),
  then all are awaited together with acks=all semantics: ``min.insync.replicas`` is checked
  before the append (NOT_ENOUGH_REPLICAS), the answer comes once the high watermark passes
  the marker (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank meanwhile), bounded by
  ``MARKER_TIMEOUT_MS`` (REQUEST_TIMED_OUT; Kafka bounds it by ``request.timeout.ms``).
* Per-partition errors as Kafka answers them: UNKNOWN_TOPIC_OR_PARTITION for a partition
  with no replica here, NOT_LEADER_OR_FOLLOWER when this broker only follows it (or its
  leadership moved during the wait), INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED
  from the log's producer state (a stale producer epoch, a zombie coordinator),
  KAFKA_STORAGE_ERROR for a log that went offline. The coordinator retries the retriable
  ones (broker.transactions.markers).
* A ``__consumer_offsets`` partition's marker is appended like any other; once acknowledged,
  ``Broker.on_txn_marker`` completes the producer's transactional offset commits there.
* The transaction version (v2's ``transaction_version``, KIP-890) is carried on the wire but
  not checked by the log: the coordinator's markers carry the epoch it decided.

Coordinator side, ``MarkerChannels``: the ``MarkerWriter``'s leader lookup (this broker's
metadata view) and sender: to itself a direct call of ``write_txn_markers``, to another
broker a WriteTxnMarkers request over an inter-broker connection (``broker.fetcher``'s
``BrokerConnection``: its replica listener, with the follower's TLS/SASL), kept in a small
pool per broker so concurrent transactions do not queue behind each other. A connection that
fails is closed, never reused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from broker.fetcher import BrokerConnection, FetchConnectionError
from broker.groups.offsets import OFFSETS_TOPIC
from broker.transactions.markers import MarkerSendError, MarkerWriter
from hot.errors import StrataError
from hot.records import ControlType
from kwire import ApiKey
from kwire import error_table as E
from kwire.error_table import kafka_code
from kwire.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

if TYPE_CHECKING:
    from broker.inter_broker import InterBrokerClient
    from broker.metadata import ClusterView
    from broker.metrics import BrokerMetrics
    from broker.produce_path import PendingAppend, ProducePath
    from broker.replica_manager import ReplicaManager

LocalWrite = Callable[[WriteTxnMarkersRequest], Awaitable[WriteTxnMarkersResponse]]

# How long a leader waits for the in-sync replicas to acknowledge a marker (Kafka bounds its
# marker appends by request.timeout.ms, 30 s).
MARKER_TIMEOUT_MS: Final = 30_000
# A coordinator's attempt at one destination: the leader's own bound plus time for the answer.
ATTEMPT_TIMEOUT_S: Final = MARKER_TIMEOUT_MS / 1000 + 5.0
# Idle connections kept per destination broker (one request at a time on each).
_POOL_SIZE: Final = 4


class MarkerHost(Protocol):
    """What marker writing needs of the broker (``broker.broker.Broker``)."""

    @property
    def node_id(self) -> int: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def writes(self) -> ProducePath: ...

    @property
    def metrics(self) -> BrokerMetrics: ...

    def on_txn_marker(self, topic: str, partition: int, producer_id: int, kind: ControlType) -> None: ...


def _kind(marker: WritableTxnMarker) -> ControlType:
    return ControlType.COMMIT if marker.transaction_result else ControlType.ABORT


def _append(broker: MarkerHost, topic: str, partition: int, marker: WritableTxnMarker) -> PendingAppend | int:
    """The marker appended as the leader (a PendingAppend to await) or the error code."""
    if (topic, partition) not in broker.replicas.replicas:
        # Kafka: no online replica of the partition on this broker.
        return E.UNKNOWN_TOPIC_OR_PARTITION
    pending = broker.writes.append_marker(
        topic, partition, marker.producer_id, marker.producer_epoch, _kind(marker), marker.coordinator_epoch
    )
    return kafka_code(pending.error) if pending.error is not None else pending


async def _settle(
    broker: MarkerHost,
    topic: str,
    partition: int,
    marker: WritableTxnMarker,
    pending: PendingAppend | int,
    timeout_ms: int,
) -> int:
    if isinstance(pending, int):
        return pending
    result = await broker.writes.complete(pending, acks=-1, timeout_ms=timeout_ms)
    if result.error is not None:
        return kafka_code(result.error)
    if topic == OFFSETS_TOPIC:
        try:
            broker.on_txn_marker(topic, partition, marker.producer_id, _kind(marker))
        except StrataError as exc:
            return kafka_code(exc)
    return E.NONE


async def write_txn_markers(
    broker: MarkerHost, req: WriteTxnMarkersRequest, *, timeout_ms: int = MARKER_TIMEOUT_MS
) -> WriteTxnMarkersResponse:
    """Append and acknowledge every marker of ``req`` on the partitions led here (module
    docstring); one result per requested partition, in request order."""
    # Phase one, synchronous and in request order: every append before any await.
    plan: list[tuple[WritableTxnMarker, list[tuple[str, list[tuple[int, PendingAppend | int]]]]]] = []
    for marker in req.markers:
        topics = [
            (t.name, [(p, _append(broker, t.name, p, marker)) for p in t.partition_indexes])
            for t in marker.topics
        ]
        plan.append((marker, topics))
    # Phase two: the acknowledgements, all together.
    codes = await asyncio.gather(
        *(
            _settle(broker, name, p, marker, pending, timeout_ms)
            for marker, topics in plan
            for name, parts in topics
            for p, pending in parts
        )
    )
    for code in codes:
        if code != E.NONE:
            broker.metrics.errors.labels("write_txn_markers", str(code)).inc()
    return _results(plan, codes)


class MarkerChannels:
    """A ``MarkerWriter``'s view of the cluster from one broker (module docstring):
    ``view`` its metadata, ``local`` how it writes markers to the partitions it leads
    (None: it leads none, e.g. a tool outside the cluster), ``security`` how it reaches
    the others' replica listeners."""

    def __init__(
        self,
        broker_id: int,
        view: ClusterView,
        local: LocalWrite | None,
        security: InterBrokerClient | None,
    ) -> None:
        self.broker_id = broker_id
        self.view = view
        self.local = local
        self.security = security
        self._idle: dict[int, list[BrokerConnection]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The partition's leader (-1: none available now, or not registered); None when
        the partition is not in the metadata (its topic was deleted)."""
        va = self.view.topics.get(topic)
        if va is None or not 0 <= partition < va.value.partition_count:
            return None
        live = self.view.leader_of(topic, partition)
        return -1 if live is None else live.broker_id

    async def send(self, dest: int, req: WriteTxnMarkersRequest, timeout: float) -> WriteTxnMarkersResponse:
        if dest == self.broker_id and self.local is not None:
            return await self.local(req)
        response: WriteTxnMarkersResponse = await self.call(dest, ApiKey.WRITE_TXN_MARKERS, req, timeout)
        return response

    async def call(self, dest: int, api_key: int, req: Any, timeout: float) -> Any:
        """One request to another broker over a pooled connection (MarkerSendError when
        it cannot be reached): WriteTxnMarkers, and the leaders' transaction verification
        (broker.txn_verification)."""
        live = self.view.brokers.get(dest)
        if live is None:
            raise MarkerSendError(f"broker {dest} is not registered")
        address = live.registration.replica_address
        conn = self._take(dest, address)
        try:
            if conn is None:
                conn = BrokerConnection(
                    address[0], address[1], f"strata-txn-markers-{self.broker_id}", self.security
                )
                await conn.open(timeout)
            response = await conn.call(api_key, req, timeout)
        except BaseException as exc:
            # Never reused: a cancelled or failed call leaves the stream mid-answer.
            if conn is not None:
                await asyncio.shield(conn.close())
            if isinstance(exc, FetchConnectionError):
                raise MarkerSendError(str(exc)) from exc
            raise
        self._give_back(dest, conn)
        return response

    def _take(self, dest: int, address: tuple[str, int]) -> BrokerConnection | None:
        idle = self._idle.get(dest)
        while idle:
            conn = idle.pop()
            if (conn.host, conn.port) == address:
                return conn
            self._close_later(conn)  # the broker re-registered elsewhere
        return None

    def _give_back(self, dest: int, conn: BrokerConnection) -> None:
        idle = self._idle.setdefault(dest, [])
        if self._closed or len(idle) >= _POOL_SIZE:
            self._close_later(conn)
        else:
            idle.append(conn)

    def _close_later(self, conn: BrokerConnection) -> None:
        task = asyncio.get_running_loop().create_task(conn.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close every idle connection (close the writer first: nothing is in flight)."""
        self._closed = True
        conns = [c for idle in self._idle.values() for c in idle]
        self._idle.clear()
        for conn in conns:
            with contextlib.suppress(Exception):
                await conn.close()
        await asyncio.gather(*self._closing, return_exceptions=True)


def marker_writer(broker: MarkerHost) -> tuple[MarkerWriter, MarkerChannels]:
    """A coordinator's marker writer on ``broker``; on shutdown close the writer, then the
    channels."""

    async def local(req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        return await write_txn_markers(broker, req)

    channels = MarkerChannels(broker.node_id, broker.replicas.view, local, broker.replicas.security)
    writer = MarkerWriter(channels.leader_of, channels.send, attempt_timeout_s=ATTEMPT_TIMEOUT_S)
    return writer, channels


def _results(
    plan: Sequence[tuple[WritableTxnMarker, Sequence[tuple[str, Sequence[tuple[int, object]]]]]],
    codes: Sequence[int],
) -> WriteTxnMarkersResponse:
    it = iter(codes)
    return WriteTxnMarkersResponse(
        markers=tuple(
            WritableTxnMarkerResult(
                producer_id=marker.producer_id,
                topics=tuple(
                    WritableTxnMarkerTopicResult(
                        name=name,
                        partitions=tuple(
                            WritableTxnMarkerPartitionResult(partition_index=p, error_code=next(it))
                            for p, _ in parts
                        ),
                    )
                    for name, parts in topics
                ),
            )
            for marker, topics in plan
        )
    )
