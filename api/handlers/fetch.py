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

Fetch sessions (KIP-227, v7+; broker.fetch_sessions): a follower's or a consumer's
incremental fetch names only what changed; the session's other partitions are fetched at
their last stated positions and answered only when something about them is new. A
consumer's session partitions are authorized on every request, as Kafka does (READ on
each topic), not only when they joined the session.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from api.security.conn_authz import acl_generation, allowed, principal
from broker.broker import Broker
from broker.consumer_marks import SessionMarks
from broker.fetch_sessions import Asked, FetchContext, SessionPartition, TopicPartition
from broker.read_path import FetchedPartition, FetchRequestPartition
from hot.errors import StrataError
from kwire import RequestHeader
from kwire import error_table as E
from kwire.acl import Operation, ResourceType
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
Refused = list[tuple[str, FetchPartitionData]]


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
    broker: Broker,
    version: int,
    by_topic: dict[str, list[FetchPartitionData]],
    unknown: list[FetchTopic],
    session_id: int = 0,
) -> FetchResponse:
    if version < TOPIC_ID_VERSION:
        return FetchResponse(
            session_id=session_id,
            responses=tuple(
                FetchableTopicResponse(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            ),
        )
    view = broker.replicas.view
    responses = [
        FetchableTopicResponse(topic=t, topic_id=view.topic_id(t) or ZERO_UUID, partitions=tuple(ps))
        for t, ps in by_topic.items()
    ]
    return FetchResponse(session_id=session_id, responses=(*responses, *_unknown_ids(unknown)))


def _session(broker: Broker, version: int, req: FetchRequest, named: Named) -> FetchContext:
    """The request resolved against the fetch-session cache: what to fetch, how to answer."""
    asked = [
        Asked(
            topic,
            p.partition,
            p.fetch_offset,
            p.partition_max_bytes,
            p.current_leader_epoch,
            p.log_start_offset,
        )
        for topic, t in named
        for p in t.partitions
    ]
    forgotten: list[tuple[str, int]] = []
    if req.forgotten_topics_data:
        view = broker.replicas.view
        for f in req.forgotten_topics_data:
            name = f.topic if version < TOPIC_ID_VERSION else view.topic_name(f.topic_id)
            if name is not None:
                forgotten.extend((name, p) for p in f.partitions)
    return broker.fetch_sessions.begin(
        req.session_id, req.session_epoch, asked, forgotten, replica=req.replica_id >= 0
    )


def _check(
    conn: Connection,
    items: Iterable[tuple[TopicPartition, SessionPartition]],
    readable: dict[str, bool] | None,
    watch: Callable[[TopicPartition], None] | None = None,
) -> tuple[
    list[tuple[str, FetchPartitionData]], list[FetchRequestPartition], dict[TopicPartition, SessionPartition]
]:
    """The partitions to read (this broker leads them, at the stated leader epochs), and
    the refused ones answered with their error. ``readable``: READ on each topic is
    checked again (an incremental fetch: the guard saw only the request's topics), the
    answers cached there. ``watch``: called for each partition before it is read."""
    broker = conn.broker
    refused: list[tuple[str, FetchPartitionData]] = []
    parts: list[FetchRequestPartition] = []
    states: dict[TopicPartition, SessionPartition] = {}
    for tp, sp in items:
        topic, partition = tp
        if watch is not None:
            watch(tp)
        try:
            if readable is not None:
                ok = readable.get(topic)
                if ok is None:
                    ok = readable[topic] = allowed(conn, Operation.READ, ResourceType.TOPIC, topic)
                if not ok:
                    refused.append(
                        (
                            topic,
                            FetchPartitionData(
                                partition_index=partition,
                                error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                records=b"",
                            ),
                        )
                    )
                    continue
            broker.replicas.leader_replica(topic, partition, sp.current_leader_epoch)
        except StrataError as exc:
            code = kafka_code(exc)
            broker.metrics.errors.labels("fetch", str(code)).inc()
            # Empty records, never null: librdkafka cannot parse a null records field
            # ("invalid MessageSetSize -1") and drops the whole response.
            refused.append(
                (topic, FetchPartitionData(partition_index=partition, error_code=code, records=b""))
            )
            continue
        states[tp] = sp
        parts.append(FetchRequestPartition(topic, partition, sp.fetch_offset, sp.max_bytes))
    return refused, parts, states


def _carried(
    ctx: FetchContext,
    fetched: list[FetchedPartition],
    states: Mapping[TopicPartition, SessionPartition],
) -> Iterator[FetchedPartition]:
    """The fetched partitions the answer carries: all of a full fetch, and of an
    incremental one those whose answer changed (``FetchContext.include``, which also
    records what the session was last told)."""
    for f in fetched:
        key = (f.topic, f.partition)
        if ctx.include(
            key,
            states[key],
            has_data=f.size > 0 or bool(f.remote),
            error=f.error is not None,
            high_watermark=f.high_watermark,
            last_stable_offset=f.last_stable_offset,
            log_start_offset=f.log_start_offset,
        ):
            yield f


def _answered(
    broker: Broker,
    ctx: FetchContext,
    fetched: list[FetchedPartition],
    states: dict[TopicPartition, SessionPartition],
) -> dict[str, list[FetchPartitionData]]:
    """The fetched partitions the answer carries (``FetchContext.include``), by topic."""
    by_topic: dict[str, list[FetchPartitionData]] = {}
    for f in _carried(ctx, fetched, states):
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
    return by_topic


async def handle_fetch(conn: Connection, header: RequestHeader, req: FetchRequest) -> FetchResponse:
    broker = conn.broker
    version = header.api_version
    named, unknown = named_topics(broker, version, req)
    ctx = _session(broker, version, req, named)
    if ctx.error:
        return FetchResponse(error_code=ctx.error, session_id=0)
    if req.replica_id >= 0:
        return await _replica_fetch(broker, version, req, ctx, unknown)
    if ctx.incremental and ctx.session is not None:
        return await _session_fetch(conn, version, req, ctx, unknown)
    started = time.perf_counter()
    refused, parts, states = _check(conn, ctx.fetch, None)
    by_topic: dict[str, list[FetchPartitionData]] = {}
    if parts or not refused:
        # An error is answered at once, as Kafka does, with whatever the others have now.
        fetched = await broker.reads.fetch(
            parts,
            max_wait_ms=0 if refused else req.max_wait_ms,
            min_bytes=req.min_bytes,
            max_bytes=req.max_bytes,
            read_committed=req.isolation_level == READ_COMMITTED,
            leaders_checked=True,  # just above, with the request's leader epochs
        )
        by_topic = _answered(broker, ctx, fetched, states)
        broker.metrics.labelled(broker.metrics.fetch_latency, "kafka").observe(time.perf_counter() - started)
    for topic, data in refused:
        by_topic.setdefault(topic, []).append(data)
    return _answer(broker, version, by_topic, unknown, ctx.session_id)


def _session_readable(conn: Connection, st: SessionMarks) -> tuple[dict[str, bool] | None, bool]:
    """The session's cached READ answers per topic (None: nothing to check), and whether
    the whole session must be looked at: the ACLs or the principal changed since they
    were cached (every topic asked again), or a topic is refused (its partitions are
    answered with the error on every fetch, as without the cache)."""
    generation = acl_generation(conn)
    if generation is None:
        return None, False
    who = principal(conn)
    key = st.authz_key
    if key is None or key[0] is not generation or key[1] != who:
        st.authz_key = (generation, who)
        st.readable = {}
        return st.readable, True
    return st.readable, not all(st.readable.values())


async def _session_fetch(
    conn: Connection,
    version: int,
    req: FetchRequest,
    ctx: FetchContext,
    unknown: list[FetchTopic],
) -> FetchResponse:
    """A consumer's incremental fetch in its session: only the partitions the request
    names and those marked since its last fetch (broker.consumer_marks) are looked at;
    the others would be left out of the answer anyway (nothing about them changed). With
    nothing to send it parks once for the session, woken by a mark, and answers at
    ``max_wait_ms`` with no partitions, as Kafka does. What is looked at is answered as a
    full look would answer it: the same reads, ``include`` rule and errors."""
    broker = conn.broker
    session = ctx.session
    assert session is not None
    marks = broker.reads.consumers
    st = marks.state(session)
    in_session = session.partitions
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    deadline = loop.time() + max(0, req.max_wait_ms) / 1000
    readable, must_walk = _session_readable(conn, st)
    read_committed = req.isolation_level == READ_COMMITTED

    def watch(tp: TopicPartition) -> None:
        try:
            key: int | None = id(broker.reads.log(*tp))
        except StrataError:
            key = None  # no log here: marked by the role change that brings one
        marks.watch(st, tp, key)

    _, picked = marks.pick(st, ctx.asked, loop.time(), walk=must_walk)
    looked = dict.fromkeys(picked)
    order = st.order
    while True:
        woken = marks.waiter(st)
        items = [(tp, in_session[tp]) for tp in looked if tp in in_session]
        refused, parts, states = _check(conn, items, readable, watch)
        fetched: list[FetchedPartition] = []
        if parts:
            fetched = await broker.reads.read_once(parts, req.max_bytes, read_committed=read_committed)
        left = deadline - loop.time()
        if (
            refused
            or left <= 0
            or not in_session
            or sum(f.size for f in fetched) >= max(req.min_bytes, 1)
            or any(f.error is not None for f in fetched)
        ):
            break
        try:
            await asyncio.wait_for(woken, left)
        except TimeoutError:
            break  # nothing marked: the answer is what was read
        _, more = marks.pick(st, (), loop.time())
        if any(tp not in looked for tp in more):
            looked.update(dict.fromkeys(more))
            looked = dict.fromkeys(sorted(looked, key=lambda tp: order.get(tp, len(order))))
    # Looked at again next time: what is behind (an error, data not all sent, which a
    # client restates only when its position moves) or refused.
    again = [
        (f.topic, f.partition) for f in fetched if f.error is not None or _behind(f, states, read_committed)
    ]
    for topic, d in refused:
        tp = (topic, d.partition_index)
        again.append(tp)
        # Answered again once it clears, as an error read is (``include``) and as Kafka's
        # cached partition is (its marks become the error answer's).
        in_session[tp].high_watermark = -1
    marks.remark(st, again)
    broker.reads.served(fetched)
    by_topic = _answered(broker, ctx, fetched, states)
    broker.metrics.labelled(broker.metrics.fetch_latency, "kafka").observe(time.perf_counter() - started)
    for topic, data in refused:
        by_topic.setdefault(topic, []).append(data)
    return _answer(broker, version, by_topic, unknown, ctx.session_id)


def _behind(
    f: FetchedPartition, states: dict[TopicPartition, SessionPartition], read_committed: bool
) -> bool:
    end = f.last_stable_offset if read_committed else f.high_watermark
    return states[(f.topic, f.partition)].fetch_offset < end or f.size > 0 or bool(f.remote)


async def _replica_fetch(
    broker: Broker,
    version: int,
    req: FetchRequest,
    ctx: FetchContext,
    unknown: list[FetchTopic],
) -> FetchResponse:
    started = time.perf_counter()
    # An incremental session fetch looks at what changed in its session, not at a list.
    by_session = ctx.incremental and ctx.session is not None
    fetched = await broker.reads.replica_fetch(
        req.replica_id,
        () if by_session else ctx.fetch,
        max_wait_ms=req.max_wait_ms,
        max_bytes=req.max_bytes,
        incremental=ctx.incremental,
        session=ctx.session,
        asked=ctx.asked,
    )
    states = ctx.session.partitions if ctx.session is not None else dict(ctx.fetch)
    by_topic: dict[str, list[FetchPartitionData]] = {}
    for f in _carried(ctx, fetched, states):
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
    return _answer(broker, version, by_topic, unknown, ctx.session_id)
