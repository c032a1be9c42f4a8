"""Fetch: consumer fetches, and a follower's replica fetch as a branch of the same handler.

A consumer fetch (``replica_id`` < 0) is served by the partition's leader only
(NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH on a stale or newer
``current_leader_epoch``, KIP-320), up to the high watermark (isolation_level 1,
read_committed: up to the last stable offset, with the aborted transactions overlapping the
batches returned, KIP-98), local or remote tier alike
(the broker's ``fetch``; record data is sent zero-copy by api.kafka_server). A partition
error is answered at once with whatever the other partitions have, as Kafka does. A fetch
with a ``replica_id`` is a follower's: ``Broker.replica_fetch`` serves it past the
high watermark and records the follower's offset for the ISR.

From v13 topics come by id (KIP-516): they are resolved through the broker's metadata view
before anything else (``named_topics``, which the authorization guard uses too); an id
no topic has is UNKNOWN_TOPIC_ID for each of its partitions, and every answered topic
carries its id.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from broker.broker import Broker
from broker.read_path import FetchRequestPartition, ReplicaFetchPartition
from hot.errors import StrataError
from kwire import RequestHeader
from kwire import error_table as E
from kwire.error_table import kafka_code
from kwire.messages.fetch import (
    READ_COMMITTED,
    AbortedTransaction,
    FetchableTopicResponse,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from kwire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from api.handlers.context import Connection


# The first version that names topics by id only.
TOPIC_ID_VERSION = 13


Named = list[tuple[str, FetchTopic]]


def named_topics(broker: Broker, version: int, req: FetchRequest) -> tuple[Named, list[FetchTopic]]:
    """The request's topics with their names (v13+: resolved from their ids), and those whose
    id no topic has (answered UNKNOWN_TOPIC_ID); no new request objects on the fetch path.
    The authorization guard resolves with it too."""
    if version < TOPIC_ID_VERSION:
        return [(t.topic, t) for t in req.topics], []
    view = broker.replicas.view
    named: Named = []
    unknown: list[FetchTopic] = []
    for t in req.topics:
        name = t.topic or view.topic_name(t.topic_id)
        if name is None:
            unknown.append(t)
        else:
            named.append((name, t))
    return named, unknown


def _unknown_ids(topics: list[FetchTopic]) -> list[FetchableTopicResponse]:
    return [
        FetchableTopicResponse(
            topic_id=t.topic_id,
            partitions=tuple(
                FetchPartitionData(partition_index=p.partition, error_code=E.UNKNOWN_TOPIC_ID, records=b"")
                for p in t.partitions
            ),
        )
        for t in topics
    ]


def _answer(
    broker: Broker, version: int, by_topic: dict[str, list[FetchPartitionData]], unknown: list[FetchTopic]
) -> FetchResponse:
    if version < TOPIC_ID_VERSION:
        return FetchResponse(
            responses=tuple(
                FetchableTopicResponse(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            )
        )
    view = broker.replicas.view
    responses = [
        FetchableTopicResponse(topic=t, topic_id=view.topic_id(t) or ZERO_UUID, partitions=tuple(ps))
        for t, ps in by_topic.items()
    ]
    return FetchResponse(responses=(*responses, *_unknown_ids(unknown)))


async def handle_fetch(conn: Connection, header: RequestHeader, req: FetchRequest) -> FetchResponse:
    broker = conn.broker
    version = header.api_version
    named, unknown = named_topics(broker, version, req)
    if req.replica_id >= 0:
        return await _replica_fetch(broker, version, req, named, unknown)
    started = time.perf_counter()
    refused: list[tuple[str, FetchPartitionData]] = []
    parts: list[FetchRequestPartition] = []
    for topic, t in named:
        for p in t.partitions:
            try:
                broker.replicas.leader_replica(topic, p.partition, p.current_leader_epoch)
            except StrataError as exc:
                code = kafka_code(exc)
                broker.metrics.errors.labels("fetch", str(code)).inc()
                # Empty records, never null: librdkafka cannot parse a null records field
                # ("invalid MessageSetSize -1") and drops the whole response.
                refused.append(
                    (topic, FetchPartitionData(partition_index=p.partition, error_code=code, records=b""))
                )
                continue
            parts.append(FetchRequestPartition(topic, p.partition, p.fetch_offset, p.partition_max_bytes))
    by_topic: dict[str, list[FetchPartitionData]] = {}
    if parts or not refused:
        # An error is answered at once, as Kafka does, with whatever the others have now.
        fetched = await broker.reads.fetch(
            parts,
            max_wait_ms=0 if refused else req.max_wait_ms,
            min_bytes=req.min_bytes,
            max_bytes=req.max_bytes,
            read_committed=req.isolation_level == READ_COMMITTED,
        )
        for f in fetched:
            if f.error is not None:
                code = kafka_code(f.error)
                broker.metrics.errors.labels("fetch", str(code)).inc()
                data = FetchPartitionData(
                    partition_index=f.partition,
                    error_code=code,
                    high_watermark=f.high_watermark,
                    last_stable_offset=f.last_stable_offset,
                    log_start_offset=f.log_start_offset,
                    records=b"",
                )
            else:
                data = FetchPartitionData(
                    partition_index=f.partition,
                    high_watermark=f.high_watermark,
                    last_stable_offset=f.last_stable_offset,
                    log_start_offset=f.log_start_offset,
                    aborted_transactions=None
                    if f.aborted is None
                    else tuple(
                        AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                        for a in f.aborted
                    ),
                    records=f.records,
                )
            by_topic.setdefault(f.topic, []).append(data)
        broker.metrics.labelled(broker.metrics.fetch_latency, "kafka").observe(time.perf_counter() - started)
    for topic, data in refused:
        by_topic.setdefault(topic, []).append(data)
    return _answer(broker, version, by_topic, unknown)


async def _replica_fetch(
    broker: Broker,
    version: int,
    req: FetchRequest,
    named: Named,
    unknown: list[FetchTopic],
) -> FetchResponse:
    started = time.perf_counter()
    parts = [
        ReplicaFetchPartition(
            topic,
            p.partition,
            p.fetch_offset,
            p.partition_max_bytes,
            current_leader_epoch=p.current_leader_epoch,
            log_start_offset=p.log_start_offset,
        )
        for topic, t in named
        for p in t.partitions
    ]
    fetched = await broker.reads.replica_fetch(
        req.replica_id, parts, max_wait_ms=req.max_wait_ms, max_bytes=req.max_bytes
    )
    by_topic: dict[str, list[FetchPartitionData]] = {}
    for f in fetched:
        if f.error is not None:
            data = FetchPartitionData(
                partition_index=f.partition, error_code=kafka_code(f.error), records=b""
            )
        else:
            data = FetchPartitionData(
                partition_index=f.partition,
                high_watermark=f.high_watermark,
                last_stable_offset=f.last_stable_offset,
                log_start_offset=f.log_start_offset,
                records=f.records,
                # With batches always (empty: no leader segment begins among them).
                segment_bases=f.segment_bases if f.size else None,
            )
        by_topic.setdefault(f.topic, []).append(data)
    broker.metrics.labelled(broker.metrics.fetch_latency, "replica").observe(time.perf_counter() - started)
    return _answer(broker, version, by_topic, unknown)
