"""The transaction coordinator's APIs: wire messages <-> broker.transactions.coordinator.

InitProducerId with a transactional id (the idempotent form stays in
``api.handlers.producer_ids``, which routes here), AddPartitionsToTxn (v0-3: a producer
adds partitions to its transaction; v4-5: a partition leader's batch, KIP-890, each
transaction verified or added), AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions. FindCoordinator(TRANSACTION) is answered in ``api.handlers.groups``
through ``find_transaction_coordinator`` here.

Errors as Kafka answers them: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
COORDINATOR_NOT_AVAILABLE (find the coordinator again), CONCURRENT_TRANSACTIONS (retry),
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for versions before KIP-588: InitProducerId v<4,
AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v<2), INVALID_TXN_STATE,
INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT. AddPartitionsToTxn v0-3 answers
UNKNOWN_TOPIC_OR_PARTITION for partitions the cluster does not have and
OPERATION_NOT_ATTEMPTED for the others of such a request. EndTxn is served up to v4: v5
(Transactions V2, an epoch bump at every end) needs the ``transaction.version`` feature
this coordinator does not run.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from broker.groups.types import TopicPartition
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.transitions import for_version
from hot.errors import CoordinatorNotAvailableError, StrataError
from kwire import ApiKey, RequestHeader
from kwire import error_table as E
from kwire.error_table import kafka_code
from kwire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kwire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
)
from kwire.messages.describe_transactions import (
    DescribedTransactionState,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TransactionTopicData,
)
from kwire.messages.end_txn import EndTxnRequest, EndTxnResponse
from kwire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kwire.messages.list_transactions import (
    ListedTransactionState,
    ListTransactionsRequest,
    ListTransactionsResponse,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection


def _coordinator(conn: Connection) -> TransactionCoordinator:
    coord: TransactionCoordinator | None = getattr(conn.broker, "transactions", None)
    if coord is None:
        raise CoordinatorNotAvailableError("this broker runs no transaction coordinator")
    return coord


def _code(exc: StrataError, api_key: int, version: int) -> int:
    return kafka_code(for_version(exc, api_key, version))


async def find_transaction_coordinator(conn: Connection, transactional_id: str) -> int:
    """FindCoordinator(TRANSACTION): the leader of the id's ``__transaction_state``
    partition, creating the topic first if needed."""
    coord = _coordinator(conn)
    await coord.ensure_topic()
    return coord.leader_for(transactional_id)


# --- InitProducerId ------------------------------------------------------------------------


async def handle_transactional_init_producer_id(
    conn: Connection, header: RequestHeader, req: InitProducerIdRequest
) -> InitProducerIdResponse:
    """InitProducerId with a transactional id (``api.handlers.producer_ids`` routes here)."""
    assert req.transactional_id is not None
    if (req.producer_id == -1) != (req.producer_epoch == -1):
        return InitProducerIdResponse(error_code=E.INVALID_REQUEST)
    try:
        pid, epoch = await _coordinator(conn).init_producer_id(
            req.transactional_id, req.transaction_timeout_ms, req.producer_id, req.producer_epoch
        )
    except StrataError as exc:
        return InitProducerIdResponse(error_code=_code(exc, ApiKey.INIT_PRODUCER_ID, header.api_version))
    return InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)


# --- AddPartitionsToTxn --------------------------------------------------------------------


def _results(codes: dict[TopicPartition, int]) -> tuple[AddPartitionsToTxnTopicResult, ...]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=tp.partition, partition_error_code=code)
        )
    return tuple(
        AddPartitionsToTxnTopicResult(name=t, results_by_partition=tuple(r)) for t, r in by_topic.items()
    )


def _partitions(
    topics: tuple[AddPartitionsToTxnTopic, ...] | list[AddPartitionsToTxnTopic],
) -> list[TopicPartition]:
    return [TopicPartition(t.name, p) for t in topics for p in t.partitions]


def _exists(conn: Connection, tp: TopicPartition) -> bool:
    va = conn.broker.replicas.view.topics.get(tp.topic)
    return va is not None and 0 <= tp.partition < va.value.partition_count


async def _add_or_verify(
    conn: Connection, version: int, tid: str, pid: int, epoch: int, tps: list[TopicPartition], verify: bool
) -> dict[TopicPartition, int]:
    """One transaction's partitions: an error code for each."""
    missing = [tp for tp in tps if not _exists(conn, tp)]
    if missing:  # as Kafka, for both forms: nothing is added or verified
        return {
            tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in missing else E.OPERATION_NOT_ATTEMPTED for tp in tps
        }
    try:
        coord = _coordinator(conn)
        if verify:
            codes = coord.verify_partitions(tid, pid, epoch, tps)
            if version < 5:  # TRANSACTION_ABORTABLE is v5+
                codes = {
                    tp: E.INVALID_TXN_STATE if c == E.TRANSACTION_ABORTABLE else c for tp, c in codes.items()
                }
            return codes
        await coord.add_partitions(tid, pid, epoch, tps)
    except StrataError as exc:
        code = _code(exc, ApiKey.ADD_PARTITIONS_TO_TXN, version)
        return dict.fromkeys(tps, code)
    return dict.fromkeys(tps, E.NONE)


async def handle_add_partitions_to_txn(
    conn: Connection, header: RequestHeader, req: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    v = header.api_version
    if v <= 3:
        codes = await _add_or_verify(
            conn,
            v,
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            _partitions(list(req.v3_and_below_topics)),
            verify=False,
        )
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_results(codes))
    out: list[AddPartitionsToTxnResult] = []
    for txn in req.transactions:
        out.append(await _broker_form(conn, v, txn))
    return AddPartitionsToTxnResponse(results_by_transaction=tuple(out))


async def _broker_form(
    conn: Connection, v: int, txn: AddPartitionsToTxnTransaction
) -> AddPartitionsToTxnResult:
    codes = await _add_or_verify(
        conn,
        v,
        txn.transactional_id,
        txn.producer_id,
        txn.producer_epoch,
        _partitions(list(txn.topics)),
        verify=txn.verify_only,
    )
    return AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=_results(codes))


# --- AddOffsetsToTxn, EndTxn ------------------------------------------------------------------


async def handle_add_offsets_to_txn(
    conn: Connection, header: RequestHeader, req: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    try:
        await _coordinator(conn).add_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
        )
    except StrataError as exc:
        return AddOffsetsToTxnResponse(error_code=_code(exc, ApiKey.ADD_OFFSETS_TO_TXN, header.api_version))
    return AddOffsetsToTxnResponse()


async def handle_end_txn(conn: Connection, header: RequestHeader, req: EndTxnRequest) -> EndTxnResponse:
    try:
        answer = await _coordinator(conn).end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed
        )
    except StrataError as exc:
        return EndTxnResponse(error_code=_code(exc, ApiKey.END_TXN, header.api_version))
    return EndTxnResponse(producer_id=answer.producer_id, producer_epoch=answer.producer_epoch)


# --- DescribeTransactions, ListTransactions -----------------------------------------------------


async def handle_describe_transactions(
    conn: Connection, header: RequestHeader, req: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    try:
        described = _coordinator(conn).describe(req.transactional_ids)
    except StrataError as exc:
        code = kafka_code(exc)
        return DescribeTransactionsResponse(
            transaction_states=tuple(
                DescribedTransactionState(error_code=code, transactional_id=t) for t in req.transactional_ids
            )
        )
    states: list[DescribedTransactionState] = []
    for d in described:
        meta = d.meta
        if meta is None:
            code = kafka_code(d.error) if d.error is not None else E.UNKNOWN_SERVER_ERROR
            states.append(DescribedTransactionState(error_code=code, transactional_id=d.transactional_id))
            continue
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(meta.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        states.append(
            DescribedTransactionState(
                transactional_id=d.transactional_id,
                transaction_state=meta.state.kafka_name,
                transaction_timeout_ms=meta.timeout_ms,
                transaction_start_time_ms=meta.txn_start_timestamp_ms,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=tuple(
                    TransactionTopicData(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )
        )
    return DescribeTransactionsResponse(transaction_states=tuple(states))


async def handle_list_transactions(
    conn: Connection, header: RequestHeader, req: ListTransactionsRequest
) -> ListTransactionsResponse:
    pattern: re.Pattern[str] | None = None
    if req.transactional_id_pattern:
        try:
            pattern = re.compile(req.transactional_id_pattern)
        except re.error:
            return ListTransactionsResponse(error_code=E.INVALID_REGULAR_EXPRESSION)
    coord: TransactionCoordinator | None = getattr(conn.broker, "transactions", None)
    if coord is None:
        return ListTransactionsResponse(unknown_state_filters=())
    try:
        listed, unknown = coord.list_transactions(
            states=list(req.state_filters),
            producer_ids=list(req.producer_id_filters),
            min_duration_ms=req.duration_filter,
        )
    except StrataError as exc:
        return ListTransactionsResponse(error_code=kafka_code(exc))
    return ListTransactionsResponse(
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            ListedTransactionState(
                transactional_id=t.transactional_id, producer_id=t.producer_id, transaction_state=t.state
            )
            for t in listed
            if pattern is None or pattern.fullmatch(t.transactional_id)  # Java's Matcher.matches
        ),
    )
