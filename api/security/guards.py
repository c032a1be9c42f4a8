"""ACL enforcement of every Kafka API, in front of the handlers (single node and cluster alike).

A guard takes the request, answers what the principal may not do with Kafka's error for it
(TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED, per partition, topic, group or resource as
Kafka does), hands the permitted rest to the real handler and merges both answers. So the
handlers stay unaware of authorization and cluster mode's handlers are covered too.
Without an authorizer, or on the internal (inter-broker) listener, requests go straight
to the handler (``guard``).

Rules (Kafka's): Produce WRITE topic; Fetch READ topic, a follower's fetch CLUSTER_ACTION;
ListOffsets and OffsetForLeaderEpoch DESCRIBE topic; Metadata lists only topics the
principal may DESCRIBE, and auto-creates only with CREATE on the cluster or topic;
CreateTopics CREATE (cluster or topic); DeleteTopics DELETE; CreatePartitions ALTER;
DescribeConfigs DESCRIBE_CONFIGS and (Incremental)AlterConfigs ALTER_CONFIGS on the topic
or, for a broker, the cluster; DescribeClientQuotas / AlterClientQuotas DESCRIBE_CONFIGS /
ALTER_CONFIGS on the cluster; InitProducerId IDEMPOTENT_WRITE on the cluster or WRITE on
some topic, or with a transactional id WRITE on it; partition reassignment ALTER/DESCRIBE
on the cluster; WriteTxnMarkers CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED
per partition). Transactions: AddPartitionsToTxn (v0-3), AddOffsetsToTxn and EndTxn WRITE
on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), AddPartitionsToTxn also
WRITE on each topic (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED) and
its broker form (v4+) CLUSTER_ACTION, AddOffsetsToTxn also READ on the group;
DescribeTransactions DESCRIBE on each id (its topics the principal may not DESCRIBE left
out), ListTransactions lists only the ids the principal may DESCRIBE. Group APIs (and
FindCoordinator): api.security.group_guards.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from api.handlers.fetch import named_topics
from api.security.conn_authz import allowed, allowed_cluster, authorized_operations, principal
from broker.security.authz import AccessControl
from kwire import APIS, ApiKey, RequestHeader
from kwire import error_table as E
from kwire.acl import CLUSTER_NAME, Operation, ResourceType
from kwire.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from kwire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kwire.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterEntryResponse,
)
from kwire.messages.alter_configs import AlterConfigsResourceResponse
from kwire.messages.create_partitions import CreatePartitionsTopicResult
from kwire.messages.create_topics import CreatableTopicResult
from kwire.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsTopicResult,
)
from kwire.messages.delete_topics import DeletableTopicResult
from kwire.messages.describe_configs import DescribeConfigsResult
from kwire.messages.describe_log_dirs import DescribeLogDirsResponse
from kwire.messages.describe_producers import (
    DescribeProducersPartitionResponse,
    DescribeProducersTopicResponse,
)
from kwire.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponseTopic,
)
from kwire.messages.describe_topic_partitions import TopicRequest as DTPTopicRequest
from kwire.messages.describe_transactions import (
    DescribedTransactionState,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from kwire.messages.elect_leaders import ElectLeadersResponse, PartitionResult, ReplicaElectionResult
from kwire.messages.end_txn import EndTxnResponse
from kwire.messages.fetch import (
    FetchableTopicResponse,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from kwire.messages.init_producer_id import InitProducerIdResponse
from kwire.messages.list_offsets import ListOffsetsPartitionResponse, ListOffsetsTopicResponse
from kwire.messages.list_transactions import ListTransactionsResponse
from kwire.messages.metadata import MetadataResponseTopic
from kwire.messages.offset_for_leader_epoch import (
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
)
from kwire.messages.produce import ProducePartitionResponse, ProduceResponse, ProduceTopicResponse
from kwire.messages.user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kwire.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection

Handler = Callable[["Connection", RequestHeader, Any], Awaitable[Any]]
Guard = Callable[[Handler, "Connection", RequestHeader, Any], Awaitable[Any]]

RESOURCE_BROKER: Final = 4  # ConfigResource type of broker configs (topic: 2)
RESOURCE_GROUP: Final = 32  # ConfigResource type of group configs (KIP-848, KIP-932)
ZERO_UUID: Final = uuid.UUID(int=0)


def _active(conn: Connection) -> bool:
    return getattr(conn.broker, "access", None) is not None and not conn.server.inter_broker


def topic_ok(conn: Connection, op: Operation, topic: str | None) -> bool:
    return topic is not None and allowed(conn, op, ResourceType.TOPIC, topic)


def _split(items: Any, ok: Callable[[Any], bool]) -> tuple[list[Any], list[Any]]:
    yes: list[Any] = []
    no: list[Any] = []
    for item in items:
        (yes if ok(item) else no).append(item)
    return yes, no


_T = TypeVar("_T")
_P = TypeVar("_P")


def refused_topics(
    topics: Iterable[_T],
    partitions: Callable[[_T], Iterable[_P]],
    topic_answer: Callable[[_T, tuple[Any, ...]], Any],
    partition_answer: Callable[[_P], Any],
) -> tuple[Any, ...]:
    """The answer entries of topics refused whole, every API's shape: per requested topic
    ``topic_answer(topic, answers)`` with ``answers`` each of its requested ``partitions``
    refused (``partition_answer``, which carries the error code)."""
    return tuple(topic_answer(t, tuple(partition_answer(p) for p in partitions(t))) for t in topics)


async def with_refused(
    inner: Handler,
    conn: Connection,
    header: RequestHeader,
    req: Any,
    *,
    ok: Sequence[Any],
    refused: tuple[Any, ...],
    request_field: str,
    response_field: str,
    only_refused: Callable[[tuple[Any, ...]], Any] | None = None,
) -> Any:
    """The handler's answer to the permitted entries (``ok``, the request's
    ``request_field``) with the ``refused`` answers appended to its ``response_field``: the
    request as it came when nothing is refused, and, when everything is and
    ``only_refused`` is given, its answer without calling the handler."""
    if not refused:
        return await inner(conn, header, req)
    if not ok and only_refused is not None:
        return only_refused(refused)
    resp = await inner(conn, header, dataclasses.replace(req, **{request_field: tuple(ok)}))
    return dataclasses.replace(resp, **{response_field: (*getattr(resp, response_field), *refused)})


# --- per-partition data APIs --------------------------------------------------------------------


def _refused_produce(topics: Iterable[Any], code: int) -> tuple[Any, ...]:
    return refused_topics(
        topics,
        lambda t: t.partition_data,
        lambda t, ps: ProduceTopicResponse(name=t.name, partition_responses=ps),
        lambda p: ProducePartitionResponse(index=p.index, error_code=code),
    )


async def guard_produce(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if req.transactional_id is not None and not allowed(
        conn, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
    ):
        # Kafka: the whole request is refused, every partition with this code.
        if req.acks == 0:
            return None
        return ProduceResponse(
            responses=_refused_produce(req.topic_data, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        )
    ok, no = _split(req.topic_data, lambda t: topic_ok(conn, Operation.WRITE, t.name))
    resp = await inner(conn, header, dataclasses.replace(req, topic_data=tuple(ok))) if ok else None
    if req.acks == 0:
        return None
    refused = _refused_produce(no, E.TOPIC_AUTHORIZATION_FAILED)
    if resp is None:
        return ProduceResponse(responses=refused)
    return dataclasses.replace(resp, responses=(*resp.responses, *refused))


async def guard_fetch(inner: Handler, conn: Connection, header: RequestHeader, req: FetchRequest) -> Any:
    # v13+ names topics by id: authorize by the names they resolve to; an id no topic has is
    # left to the handler (UNKNOWN_TOPIC_ID, as Kafka answers whatever the ACLs).
    named, unknown = named_topics(conn.broker, header.api_version, req)
    topics = [*named, *(("", t) for t in unknown)]
    if req.replica_id >= 0:  # a follower: the whole request is the cluster's business
        ok_all = allowed_cluster(conn, Operation.CLUSTER_ACTION)
        ok, no = (topics, []) if ok_all else ([], topics)
        code = E.CLUSTER_AUTHORIZATION_FAILED
    else:
        ok, no = _split(topics, lambda nt: not nt[0] or topic_ok(conn, Operation.READ, nt[0]))
        code = E.TOPIC_AUTHORIZATION_FAILED
    refused = refused_topics(
        no,
        lambda nt: nt[1].partitions,
        lambda nt, ps: FetchableTopicResponse(topic=nt[0], topic_id=nt[1].topic_id, partitions=ps),
        lambda p: FetchPartitionData(partition_index=p.partition, error_code=code, records=b""),
    )
    return await with_refused(
        inner,
        conn,
        header,
        req,
        ok=[t for _, t in ok],
        refused=refused,
        request_field="topics",
        response_field="responses",
        only_refused=lambda r: FetchResponse(responses=r),
    )


async def guard_list_offsets(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    ok, no = _split(req.topics, lambda t: topic_ok(conn, Operation.DESCRIBE, t.name))
    refused = refused_topics(
        no,
        lambda t: t.partitions,
        lambda t, ps: ListOffsetsTopicResponse(name=t.name, partitions=ps),
        lambda p: ListOffsetsPartitionResponse(
            partition_index=p.partition_index, error_code=E.TOPIC_AUTHORIZATION_FAILED
        ),
    )
    return await with_refused(
        inner, conn, header, req, ok=ok, refused=refused, request_field="topics", response_field="topics"
    )


async def guard_describe_producers(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    """READ on the topic, as Kafka's DescribeProducers asks."""
    ok, no = _split(req.topics, lambda t: topic_ok(conn, Operation.READ, t.name))
    refused = refused_topics(
        no,
        lambda t: t.partition_indexes,
        lambda t, ps: DescribeProducersTopicResponse(name=t.name, partitions=ps),
        lambda p: DescribeProducersPartitionResponse(
            partition_index=p, error_code=E.TOPIC_AUTHORIZATION_FAILED
        ),
    )
    return await with_refused(
        inner, conn, header, req, ok=ok, refused=refused, request_field="topics", response_field="topics"
    )


async def guard_offset_for_leader_epoch(
    inner: Handler, conn: Connection, header: RequestHeader, req: Any
) -> Any:
    if req.replica_id >= 0:
        ok_all = allowed_cluster(conn, Operation.CLUSTER_ACTION)
        ok, no = (list(req.topics), []) if ok_all else ([], list(req.topics))
        code = E.CLUSTER_AUTHORIZATION_FAILED
    else:
        ok, no = _split(req.topics, lambda t: topic_ok(conn, Operation.DESCRIBE, t.topic))
        code = E.TOPIC_AUTHORIZATION_FAILED
    refused = refused_topics(
        no,
        lambda t: t.partitions,
        lambda t, ps: OffsetForLeaderTopicResult(topic=t.topic, partitions=ps),
        lambda p: OffsetForLeaderPartitionResult(partition=p.partition, error_code=code),
    )
    return await with_refused(
        inner, conn, header, req, ok=ok, refused=refused, request_field="topics", response_field="topics"
    )


# --- metadata and topic administration ----------------------------------------------------------


def _may_create(conn: Connection, topic: str) -> bool:
    return allowed_cluster(conn, Operation.CREATE) or topic_ok(conn, Operation.CREATE, topic)


async def guard_metadata(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    asked: set[str] = set()
    if req.topics is not None:
        named = [t for t in req.topics if t.name is not None]
        asked = {t.name for t in named}
        if req.allow_auto_topic_creation and not all(_may_create(conn, t.name) for t in named):
            # Kafka: no auto-creation without CREATE; the topic is then just unknown
            req = dataclasses.replace(req, allow_auto_topic_creation=False)
    resp = await inner(conn, header, req)
    topics = []
    for t in resp.topics:
        if topic_ok(conn, Operation.DESCRIBE, t.name):
            if req.include_topic_authorized_operations and t.name is not None and not t.error_code:
                t = dataclasses.replace(
                    t, topic_authorized_operations=authorized_operations(conn, ResourceType.TOPIC, t.name)
                )
            topics.append(t)
        elif req.topics is not None:  # named (or asked by id): say so; a full listing omits it
            by_name = t.name in asked
            topics.append(
                MetadataResponseTopic(
                    error_code=E.TOPIC_AUTHORIZATION_FAILED,
                    name=t.name if by_name else None,
                    topic_id=ZERO_UUID if by_name else t.topic_id,
                )
            )
    if req.include_cluster_authorized_operations:
        ops = authorized_operations(conn, ResourceType.CLUSTER, CLUSTER_NAME)
        resp = dataclasses.replace(resp, cluster_authorized_operations=ops)
    return dataclasses.replace(resp, topics=tuple(topics))


async def guard_create_topics(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    ok, no = _split(req.topics, lambda t: _may_create(conn, t.name))
    if not no:
        return await inner(conn, header, req)
    refused = tuple(
        CreatableTopicResult(
            name=t.name,
            error_code=E.TOPIC_AUTHORIZATION_FAILED,
            error_message=f"not authorized to CREATE topic {t.name!r}",
        )
        for t in no
    )
    resp = await inner(conn, header, dataclasses.replace(req, topics=tuple(ok)))
    return dataclasses.replace(resp, topics=(*resp.topics, *refused))


def _topic_name_by_id(conn: Connection, topic_id: uuid.UUID) -> str | None:
    for t in conn.broker.topics():
        if t.topic_id == topic_id:
            return t.name
    return None


async def guard_delete_topics(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    names_ok, names_no = _split(req.topic_names, lambda n: topic_ok(conn, Operation.DELETE, n))

    def state_ok(t: Any) -> bool:
        name = t.name if t.name is not None else _topic_name_by_id(conn, t.topic_id)
        return name is None or topic_ok(conn, Operation.DELETE, name)  # unknown id: the handler says so

    states_ok, states_no = _split(req.topics, state_ok)
    if not names_no and not states_no:
        return await inner(conn, header, req)
    refused = tuple(
        DeletableTopicResult(
            name=name,
            topic_id=topic_id,
            error_code=E.TOPIC_AUTHORIZATION_FAILED,
            error_message="not authorized",
        )
        for name, topic_id in [(n, ZERO_UUID) for n in names_no] + [(t.name, t.topic_id) for t in states_no]
    )
    resp = await inner(
        conn, header, dataclasses.replace(req, topic_names=tuple(names_ok), topics=tuple(states_ok))
    )
    return dataclasses.replace(resp, responses=(*resp.responses, *refused))


async def guard_create_partitions(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    ok, no = _split(req.topics, lambda t: topic_ok(conn, Operation.ALTER, t.name))
    if not no:
        return await inner(conn, header, req)
    refused = tuple(
        CreatePartitionsTopicResult(
            name=t.name,
            error_code=E.TOPIC_AUTHORIZATION_FAILED,
            error_message=f"not authorized to ALTER topic {t.name!r}",
        )
        for t in no
    )
    resp = await inner(conn, header, dataclasses.replace(req, topics=tuple(ok)))
    return dataclasses.replace(resp, results=(*resp.results, *refused))


async def guard_delete_records(
    inner: Handler, conn: Connection, header: RequestHeader, req: DeleteRecordsRequest
) -> Any:
    """DELETE on the topic, as Kafka's DeleteRecords asks."""
    ok, no = _split(req.topics, lambda t: topic_ok(conn, Operation.DELETE, t.name))
    refused = refused_topics(
        no,
        lambda t: t.partitions,
        lambda t, ps: DeleteRecordsTopicResult(name=t.name, partitions=ps),
        lambda p: DeleteRecordsPartitionResult(
            partition_index=p.partition_index, error_code=E.TOPIC_AUTHORIZATION_FAILED
        ),
    )
    return await with_refused(
        inner, conn, header, req, ok=ok, refused=refused, request_field="topics", response_field="topics"
    )


def _config_ok(conn: Connection, op: Operation, res: Any) -> bool:
    if res.resource_type == RESOURCE_BROKER:
        return allowed(conn, op, ResourceType.CLUSTER, CLUSTER_NAME)
    if res.resource_type == RESOURCE_GROUP:  # a group's configs (KIP-848, KIP-932)
        return allowed(conn, op, ResourceType.GROUP, res.resource_name)
    return topic_ok(conn, op, res.resource_name)  # other types: the handler refuses them


def _config_code(res: Any) -> int:
    if res.resource_type == RESOURCE_BROKER:
        return E.CLUSTER_AUTHORIZATION_FAILED
    if res.resource_type == RESOURCE_GROUP:
        return E.GROUP_AUTHORIZATION_FAILED
    return E.TOPIC_AUTHORIZATION_FAILED


async def guard_describe_configs(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    ok, no = _split(req.resources, lambda r: _config_ok(conn, Operation.DESCRIBE_CONFIGS, r))
    if not no:
        return await inner(conn, header, req)
    refused = tuple(
        DescribeConfigsResult(
            error_code=_config_code(r),
            error_message="not authorized to DESCRIBE_CONFIGS",
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r in no
    )
    resp = await inner(conn, header, dataclasses.replace(req, resources=tuple(ok)))
    return dataclasses.replace(resp, results=(*resp.results, *refused))


async def guard_alter_configs(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    """AlterConfigs and IncrementalAlterConfigs (same request and response shapes)."""
    ok, no = _split(req.resources, lambda r: _config_ok(conn, Operation.ALTER_CONFIGS, r))
    if not no:
        return await inner(conn, header, req)
    refused = tuple(
        AlterConfigsResourceResponse(
            error_code=_config_code(r),
            error_message="not authorized to ALTER_CONFIGS",
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r in no
    )
    resp = await inner(conn, header, dataclasses.replace(req, resources=tuple(ok)))
    return dataclasses.replace(resp, responses=(*resp.responses, *refused))


async def guard_init_producer_id(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if req.transactional_id is not None:
        if not txn_ok(conn, Operation.WRITE, req.transactional_id):
            return InitProducerIdResponse(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not (allowed_cluster(conn, Operation.IDEMPOTENT_WRITE) or _write_on_some_topic(conn)):
        return InitProducerIdResponse(error_code=E.CLUSTER_AUTHORIZATION_FAILED)
    return await inner(conn, header, req)


def _write_on_some_topic(conn: Connection) -> bool:
    access: AccessControl | None = conn.broker.access
    assert access is not None  # guards run only with an authorizer
    return access.allowed_on_some(principal(conn), Operation.WRITE, ResourceType.TOPIC)


def _cluster_guard(op: Operation) -> Guard:
    async def guard_cluster(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
        if allowed_cluster(conn, op):
            return await inner(conn, header, req)
        # These responses (reassignments, DescribeClientQuotas) carry a top-level error.
        cls = APIS[header.api_key].response.cls
        return cls(
            error_code=E.CLUSTER_AUTHORIZATION_FAILED,
            error_message=f"not authorized to {op.name} the cluster",
        )

    return guard_cluster


async def guard_alter_client_quotas(
    inner: Handler, conn: Connection, header: RequestHeader, req: AlterClientQuotasRequest
) -> Any:
    # No top-level error code in this response: every entry is refused (as Kafka does).
    if allowed_cluster(conn, Operation.ALTER_CONFIGS):
        return await inner(conn, header, req)
    return AlterClientQuotasResponse(
        entries=tuple(
            AlterEntryResponse(
                error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                error_message="not authorized to ALTER_CONFIGS the cluster",
                entity=e.entity,
            )
            for e in req.entries
        )
    )


async def guard_describe_topic_partitions(
    inner: Handler, conn: Connection, header: RequestHeader, req: DescribeTopicPartitionsRequest
) -> Any:
    """DESCRIBE on each topic: a named topic refused says so; asked for every topic, only the
    describable ones are listed (as Kafka's DescribeTopicPartitions does)."""
    if not req.topics:
        view = conn.broker.replicas.view
        names = [
            t
            for t in sorted(view.topics)
            if allowed(conn, Operation.DESCRIBE, ResourceType.TOPIC, t, quiet=True)
        ]
        if not names:
            return DescribeTopicPartitionsResponse()
        req = dataclasses.replace(req, topics=tuple(DTPTopicRequest(name=n) for n in names))
        return await inner(conn, header, req)
    ok, no = _split(req.topics, lambda t: topic_ok(conn, Operation.DESCRIBE, t.name))
    refused = [
        DescribeTopicPartitionsResponseTopic(error_code=E.TOPIC_AUTHORIZATION_FAILED, name=t.name) for t in no
    ]
    if not ok:
        return DescribeTopicPartitionsResponse(topics=tuple(refused))
    resp: DescribeTopicPartitionsResponse = await inner(
        conn, header, dataclasses.replace(req, topics=tuple(ok))
    )
    topics = sorted([*resp.topics, *refused], key=lambda t: t.name or "")
    return dataclasses.replace(resp, topics=tuple(topics))


async def guard_elect_leaders(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    # Kafka: ALTER on the cluster; refused, every named partition says so (v1+ also at the top).
    if allowed_cluster(conn, Operation.ALTER):
        return await inner(conn, header, req)
    code = E.CLUSTER_AUTHORIZATION_FAILED
    return ElectLeadersResponse(
        error_code=code,
        replica_election_results=tuple(
            ReplicaElectionResult(
                topic=t.topic,
                partition_result=tuple(
                    PartitionResult(partition_id=p, error_code=code) for p in t.partitions
                ),
            )
            for t in req.topic_partitions or ()
        ),
    )


async def guard_describe_log_dirs(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    # Kafka: DESCRIBE on the cluster, else no log directory (v3+ says why).
    if allowed_cluster(conn, Operation.DESCRIBE):
        return await inner(conn, header, req)
    return DescribeLogDirsResponse(error_code=E.CLUSTER_AUTHORIZATION_FAILED)


async def guard_alter_user_scram_credentials(
    inner: Handler, conn: Connection, header: RequestHeader, req: AlterUserScramCredentialsRequest
) -> Any:
    # No top-level error code in this response: every user is refused (as Kafka does).
    if allowed_cluster(conn, Operation.ALTER):
        return await inner(conn, header, req)
    named = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
    return AlterUserScramCredentialsResponse(
        results=tuple(
            AlterUserScramCredentialsResult(
                user=n,
                error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                error_message="not authorized to ALTER the cluster",
            )
            for n in dict.fromkeys(named)
        )
    )


async def guard_write_txn_markers(
    inner: Handler, conn: Connection, header: RequestHeader, req: WriteTxnMarkersRequest
) -> Any:
    # Only coordinators send it (Kafka: CLUSTER_ACTION on the cluster); every partition is refused.
    if allowed_cluster(conn, Operation.CLUSTER_ACTION):
        return await inner(conn, header, req)
    return WriteTxnMarkersResponse(
        markers=tuple(
            WritableTxnMarkerResult(
                producer_id=m.producer_id,
                topics=tuple(
                    WritableTxnMarkerTopicResult(
                        name=t.name,
                        partitions=tuple(
                            WritableTxnMarkerPartitionResult(
                                partition_index=p, error_code=E.CLUSTER_AUTHORIZATION_FAILED
                            )
                            for p in t.partition_indexes
                        ),
                    )
                    for t in m.topics
                ),
            )
            for m in req.markers
        )
    )


# --- the transaction coordinator's APIs -----------------------------------------------------------


def txn_ok(conn: Connection, op: Operation, transactional_id: str) -> bool:
    return allowed(conn, op, ResourceType.TRANSACTIONAL_ID, transactional_id)


async def guard_add_partitions_to_txn(
    inner: Handler, conn: Connection, header: RequestHeader, req: AddPartitionsToTxnRequest
) -> Any:
    if header.api_version >= 4:  # broker to broker (KIP-890)
        if allowed_cluster(conn, Operation.CLUSTER_ACTION):
            return await inner(conn, header, req)
        return AddPartitionsToTxnResponse(error_code=E.CLUSTER_AUTHORIZATION_FAILED)

    def refused(code_of: Callable[[str], int]) -> AddPartitionsToTxnResponse:
        return AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=tuple(
                AddPartitionsToTxnTopicResult(
                    name=t.name,
                    results_by_partition=tuple(
                        AddPartitionsToTxnPartitionResult(
                            partition_index=p, partition_error_code=code_of(t.name)
                        )
                        for p in t.partitions
                    ),
                )
                for t in req.v3_and_below_topics
            )
        )

    if not txn_ok(conn, Operation.WRITE, req.v3_and_below_transactional_id):
        return refused(lambda _: E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    denied = {t.name for t in req.v3_and_below_topics if not topic_ok(conn, Operation.WRITE, t.name)}
    if denied:  # as Kafka: nothing is added, the others are not attempted
        return refused(
            lambda name: E.TOPIC_AUTHORIZATION_FAILED if name in denied else E.OPERATION_NOT_ATTEMPTED
        )
    return await inner(conn, header, req)


async def guard_add_offsets_to_txn(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if not txn_ok(conn, Operation.WRITE, req.transactional_id):
        return AddOffsetsToTxnResponse(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(conn, Operation.READ, ResourceType.GROUP, req.group_id):
        return AddOffsetsToTxnResponse(error_code=E.GROUP_AUTHORIZATION_FAILED)
    return await inner(conn, header, req)


async def guard_end_txn(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    if not txn_ok(conn, Operation.WRITE, req.transactional_id):
        return EndTxnResponse(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return await inner(conn, header, req)


async def guard_describe_transactions(
    inner: Handler, conn: Connection, header: RequestHeader, req: DescribeTransactionsRequest
) -> Any:
    ok, no = _split(req.transactional_ids, lambda t: txn_ok(conn, Operation.DESCRIBE, t))
    refused = tuple(
        DescribedTransactionState(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=t)
        for t in no
    )
    if not ok:
        return DescribeTransactionsResponse(transaction_states=refused)
    resp: DescribeTransactionsResponse = await inner(
        conn, header, dataclasses.replace(req, transactional_ids=tuple(ok))
    )
    # Partitions of topics the principal may not DESCRIBE are left out, as Kafka does.
    states = tuple(
        dataclasses.replace(
            s, topics=tuple(t for t in s.topics if topic_ok(conn, Operation.DESCRIBE, t.topic))
        )
        for s in resp.transaction_states
    )
    return dataclasses.replace(resp, transaction_states=(*states, *refused))


async def guard_list_transactions(inner: Handler, conn: Connection, header: RequestHeader, req: Any) -> Any:
    resp: ListTransactionsResponse = await inner(conn, header, req)
    visible = tuple(
        t
        for t in resp.transaction_states
        if allowed(conn, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id, quiet=True)
    )
    return dataclasses.replace(resp, transaction_states=visible)


def guard(api_key: int, handler: Handler, guards: Mapping[int, Guard]) -> Handler:
    """``handler`` behind its API's guard (if any), active only when authorization is."""
    g = guards.get(api_key)
    if g is None:
        return handler

    # Returns the handler's (or the guard's) awaitable itself: no coroutine frame of its own
    # on every request.
    @functools.wraps(handler)
    def guarded(conn: Connection, header: RequestHeader, req: Any) -> Awaitable[Any]:
        if not _active(conn):
            return handler(conn, header, req)
        return g(handler, conn, header, req)

    return guarded


TOPIC_GUARDS: Final[dict[int, Guard]] = {
    ApiKey.PRODUCE: guard_produce,
    ApiKey.FETCH: guard_fetch,
    ApiKey.LIST_OFFSETS: guard_list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: guard_offset_for_leader_epoch,
    ApiKey.METADATA: guard_metadata,
    ApiKey.CREATE_TOPICS: guard_create_topics,
    ApiKey.DELETE_TOPICS: guard_delete_topics,
    ApiKey.CREATE_PARTITIONS: guard_create_partitions,
    ApiKey.DELETE_RECORDS: guard_delete_records,
    ApiKey.DESCRIBE_LOG_DIRS: guard_describe_log_dirs,
    ApiKey.ELECT_LEADERS: guard_elect_leaders,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: guard_describe_topic_partitions,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster_guard(Operation.DESCRIBE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: guard_alter_user_scram_credentials,
    ApiKey.DESCRIBE_CONFIGS: guard_describe_configs,
    ApiKey.ALTER_CONFIGS: guard_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: guard_alter_configs,
    ApiKey.INIT_PRODUCER_ID: guard_init_producer_id,
    ApiKey.DESCRIBE_PRODUCERS: guard_describe_producers,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster_guard(Operation.ALTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster_guard(Operation.DESCRIBE),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster_guard(Operation.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CLIENT_QUOTAS: guard_alter_client_quotas,
    ApiKey.WRITE_TXN_MARKERS: guard_write_txn_markers,
    ApiKey.ADD_PARTITIONS_TO_TXN: guard_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: guard_add_offsets_to_txn,
    ApiKey.END_TXN: guard_end_txn,
    ApiKey.DESCRIBE_TRANSACTIONS: guard_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: guard_list_transactions,
}

# APIs without a guard, and why: every other API must have one (checked at import by
# api.kafka_server), so a new API cannot go unchecked by accident.
UNGUARDED: Final = frozenset(
    {
        ApiKey.API_VERSIONS,  # before authentication, as in Kafka
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.DESCRIBE_ACLS,  # the ACL handlers check the cluster themselves (api.handlers.acls)
        ApiKey.CREATE_ACLS,
        ApiKey.DELETE_ACLS,
    }
)
