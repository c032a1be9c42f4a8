"""Fetch fast path: a consumer's Fetch of ready local data, from the frame's bytes to the
response's parts, with no request or response objects and no task (issue 34 §2).

The listener (``api.kafka_server.Connection``) offers every Fetch frame here first.
``FetchFastPath.answer_frame`` parses it by hand and answers it when the answer is
immediate and plain, exactly as ``handle_fetch`` behind its guard and quota wrapper would
(the same reads of the same logs, the same metrics, the same bytes:
tests/api/test_fetch_fast.py compares the two); anything else returns None and the frame
goes the general way (decode, guard, quota, ``handle_fetch``), which answers it as before.

Answered here, all of:
  * a consumer (``replica_id`` < 0, no ``replica_state``), sessionless or asking for a new
    full session (``session_id`` 0, ``session_epoch`` -1 or 0) of fewer than
    ``MIN_CONSUMER_PARTITIONS`` partitions: answered ``session_id`` 0, "no session", as
    the general path does for such a small one (broker.fetch_sessions) and as Kafka does
    when its session cache is full; the client keeps sending full requests. A larger
    request for a session, and every incremental one, goes the general way,
    no forgotten topics, no tagged fields anywhere (header tags included);
  * every topic known (by name, or v13+ by an id the view knows), every partition led
    here at the epoch asked (or -1), its fetch offset inside the local log (not below
    the local log start: a remote-tier read; not out of range);
  * no ACL guard refusing anything (with an authorizer on, every topic allowed to the
    principal), no byte-rate quota for the principal, a connection never throttled;
  * a long poll (``max_wait_ms`` > 0) with less than ``min_bytes`` (at least one byte)
    to answer now is parked here (``answer_frame`` gives a coroutine, which the listener
    runs as the request's task): woken when a high watermark of its partitions moves
    (``ReadPath.park``, as the general path's long poll), it reads again and answers
    once ``min_bytes`` are there; at ``max_wait_ms`` it answers what it read last (no
    second read of every partition: an idle consumer of many partitions, librdkafka's
    sessionless full fetch, reads each once per poll). Woken into anything else (a
    partition no longer led here, a topic gone), it gives the frame to the general path;
  * the connection's latest handler task done (the listener checks): what an earlier
    request's handler does before its first wait (a Produce's append) is seen by this
    fetch, as by the general path's task, which would run after it.
Both isolation levels: read_committed reads below the last stable offset and carries the
aborted transactions of the range; read_uncommitted a null list, as the general path.

Record data as before: at least ``copy_below`` bytes of it (the listener's
``COPY_REGIONS_BELOW``, 64 KiB) stay the log's ``FileRegion`` objects, which the writer
sends with sendfile; less is read into the answer here (one ``pread`` per region), as the
writer would have copied it, so the answer is one bytes part batched with its neighbours.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final

from api.handlers.leader_cache import LeaderCache
from api.security.guards import topic_ok
from broker.fetch_sessions import MIN_CONSUMER_PARTITIONS
from broker.latency_histogram import LatencyBatch
from broker.security.quotas import ANONYMOUS, CONSUMER_BYTE_RATE
from hot.errors import StrataError
from kwire import APIS, ApiKey, RequestHeader
from kwire.acl import Operation
from kwire.messages.fetch import READ_COMMITTED
from kwire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from api.handlers.context import Connection
    from broker.metadata import ClusterView
    from broker.partition_replica import PartitionReplica
    from hot.log import Log
    from hot.region import FileRegion
    from hot.txn_index import AbortedTxn

API_NAME: Final = APIS[ApiKey.FETCH].name
MIN_VERSION: Final = APIS[ApiKey.FETCH].min_version
MAX_VERSION: Final = APIS[ApiKey.FETCH].max_version
FLEXIBLE_VERSION: Final = 12  # compact encodings and tagged fields, request header v2
TOPIC_ID_VERSION: Final = 13  # topics by id only (KIP-516)
REPLICA_STATE_VERSION: Final = 15  # replica_id moves into the tagged replica_state (KIP-903)

_HEAD: Final = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_PARTITION: Final = struct.Struct(">ihqqq")  # index, error_code, hw, lso, log start (v5+)
_PARTITION_V4: Final = struct.Struct(">ihqq")  # v4 has no log_start_offset
_ABORTED: Final = struct.Struct(">qq")
_NULL_ARRAY: Final = b"\xff\xff\xff\xff"
_NO_PREFERRED: Final = _I32.pack(-1)
_NULL_ARRAY_PREFERRED: Final = _NULL_ARRAY + _NO_PREFERRED  # no aborted list, no preferred replica (v11)
_FLEX_NO_ABORTED: Final = b"\x00" + _NO_PREFERRED  # null compact aborted list, no preferred replica
MAX_IDS: Final = 4096  # topic ids remembered per view seq (bounded memory)


class _Fallback(Exception):
    """Not for the fast path: the general path answers this frame."""


class _Gathered:
    """What a fetch read: its rows by topic, the partitions with data, and each
    partition's log with the mark (HW, or LSO for read_committed) it was read at. A long
    poll with less than ``min_bytes`` of it waits on those marks (``_parked``) and answers
    it if nothing moves before ``max_wait_ms``."""

    __slots__ = ("by_topic", "spans", "total", "watched")

    def __init__(
        self,
        by_topic: dict[str, list[Read]],
        spans: list[tuple[str, int, int]],
        total: int,
        watched: list[tuple[Log, int]],
    ) -> None:
        self.by_topic = by_topic
        self.spans = spans  # (topic, offsets, bytes) of each partition with data
        self.total = total
        self.watched = watched


# One partition asked: (partition, current_leader_epoch, fetch_offset, partition_max_bytes).
Asked = tuple[int, int, int, int]
# One partition read: (partition, hw, lso, log start, aborted or None, regions, size).
Read = tuple[int, int, int, int, "list[AbortedTxn] | None", "tuple[FileRegion, ...]", int]


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        if shift > 28:
            raise _Fallback  # longer than an int32's varint: malformed
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7


def _count(buf: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (not null: every array here is non-nullable)."""
    if flexible:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        n = _I32.unpack_from(buf, pos)[0]
        pos += 4
    if n < 0 or n > len(buf) - pos:  # every element takes at least one byte
        raise _Fallback
    return n, pos


def _string(buf: bytes, pos: int, flexible: bool) -> tuple[str, int]:
    if flexible:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        n = _I16.unpack_from(buf, pos)[0]
        pos += 2
    end = pos + n
    if n < 0 or end > len(buf):
        raise _Fallback
    return str(buf[pos:end], "utf-8"), end


def _no_tags(buf: bytes, pos: int) -> int:
    """Past an empty tagged-field section; a section with tags is for the general path."""
    if buf[pos] != 0:
        raise _Fallback
    return pos + 1


# The one-partition parse in C (hot/_recordwalk.c ``fetch_one``), None without the extension.
_COne = tuple[int, int, int, "str | None", int, int, int, bool, bool, "str | None", bytes, int, int, int, int]
_CParse = Callable[[bytes], "_COne | None"]


def _load_parse() -> _CParse | None:
    try:
        from hot._recordwalk import fetch_one
    except ImportError:  # installed without a C compiler, or a module built before it
        return None
    return fetch_one


_c_parse: Final = _load_parse()


class _Request:
    """What the fast path needs of a Fetch request: a request for one partition of one
    topic (what a consumer of one partition sends) parsed in one C call
    (``hot._recordwalk.fetch_one``), anything else, or a build without the extension
    (``one`` None), by ``_parse``, the reference: the same fields for every frame
    (tests/api/test_fetch_codec_c.py)."""

    __slots__ = ("header", "max_bytes", "max_wait_ms", "min_bytes", "read_committed", "topics", "version")

    def __init__(self, frame: bytes, one: _CParse | None = _c_parse) -> None:
        got = one(frame) if one is not None else None
        if got is None:
            self.topics: list[tuple[str | None, bytes, list[Asked]]] = []
            self._parse(frame)
            return
        (
            api_key,
            version,
            correlation_id,
            client_id,
            self.max_wait_ms,
            self.min_bytes,
            self.max_bytes,
            self.read_committed,
            _,
            name,
            topic_id,
            partition,
            epoch,
            offset,
            max_bytes,
        ) = got
        self.version = version
        self.header = RequestHeader(api_key, version, correlation_id, client_id)
        self.topics = [(name, topic_id, [(partition, epoch, offset, max_bytes)])]

    def _parse(self, buf: bytes) -> None:
        api_key, version, correlation_id, n = _HEAD.unpack_from(buf, 0)
        if not MIN_VERSION <= version <= MAX_VERSION:
            raise _Fallback
        self.version = version
        pos = 10
        client_id: str | None = None
        if n >= 0:
            end = pos + n
            if end > len(buf):
                raise _Fallback
            client_id = str(buf[pos:end], "utf-8")
            pos = end
        elif n != -1:
            raise _Fallback
        flexible = version >= FLEXIBLE_VERSION
        if flexible:
            pos = _no_tags(buf, pos)
        self.header = RequestHeader(api_key, version, correlation_id, client_id)
        if version < REPLICA_STATE_VERSION:
            if _I32.unpack_from(buf, pos)[0] >= 0:
                raise _Fallback  # a follower's fetch
            pos += 4
        self.max_wait_ms, self.min_bytes, self.max_bytes, isolation = _FIXED.unpack_from(buf, pos)
        pos += _FIXED.size
        if version >= 7:
            session_id, session_epoch = _SESSION.unpack_from(buf, pos)
            pos += _SESSION.size
            if session_id != 0 or session_epoch not in (-1, 0):
                raise _Fallback  # an incremental session's request
            opens_session = session_epoch == 0
        else:
            opens_session = False
        self.read_committed = isolation == READ_COMMITTED
        by_id = version >= TOPIC_ID_VERSION
        n_topics, pos = _count(buf, pos, flexible)
        for _ in range(n_topics):
            name: str | None
            if by_id:
                topic_id = buf[pos : pos + 16]
                pos += 16
                name = None
            else:
                topic_id = b""
                name, pos = _string(buf, pos, flexible)
            n_parts, pos = _count(buf, pos, flexible)
            parts: list[Asked] = []
            layout = _ASKED[version]
            for _ in range(n_parts):
                if version >= 9:
                    partition, epoch, offset, max_bytes = layout.unpack_from(buf, pos)
                else:
                    partition, offset, max_bytes = layout.unpack_from(buf, pos)
                    epoch = -1
                pos += layout.size
                if flexible:
                    if buf[pos] != 0:
                        raise _Fallback  # tags (v17's replica_directory_id among them)
                    pos += 1
                parts.append((partition, epoch, offset, max_bytes))
            if flexible:
                pos = _no_tags(buf, pos)
            self.topics.append((name, topic_id, parts))
        if opens_session and sum(len(ps) for _, _, ps in self.topics) >= MIN_CONSUMER_PARTITIONS:
            raise _Fallback  # a new session (broker.fetch_sessions) is made on the general path
        if version >= 7:
            n_forgotten, pos = _count(buf, pos, flexible)
            if n_forgotten:
                raise _Fallback  # only incremental sessions forget topics
        if version >= 11:
            _, pos = _string(buf, pos, flexible)  # rack_id: no follower fetching (KIP-392)
        if flexible:
            pos = _no_tags(buf, pos)  # cluster_id, replica_state
        if pos > len(buf):
            raise _Fallback


# One asked partition by version: partition, current_leader_epoch (v9+), fetch_offset,
# last_fetched_epoch (v12+) and log_start_offset (v5+), a follower's: skipped as pad bytes,
# partition_max_bytes.
def _asked_layout(v: int) -> struct.Struct:
    epoch = "i" if v >= 9 else ""
    follower = ("4x" if v >= 12 else "") + ("8x" if v >= 5 else "")
    return struct.Struct(f">i{epoch}q{follower}i")


_ASKED: Final = {v: _asked_layout(v) for v in range(MIN_VERSION, MAX_VERSION + 1)}
_FIXED: Final = struct.Struct(">iiib")  # max_wait_ms, min_bytes, max_bytes, isolation_level (v4+)
_SESSION: Final = struct.Struct(">ii")  # session_id, session_epoch (v7+)


class FetchFastPath:
    """One per listener (``api.kafka_server.KafkaServer``); event loop only."""

    def __init__(self, copy_below: int = 0) -> None:
        # Record data smaller than this in all is copied into the answer here (one bytes
        # part, one pread per region), as the writer would copy it (its COPY_REGIONS_BELOW):
        # the writer then has one small frame to batch with the others and nothing to read.
        self.copy_below = copy_below
        self.hits = 0  # for tests and benchmarks
        # Topic names by the 16 bytes of their ids (v13+), for the view as it is now.
        self._view: object = None
        self._seq = -1
        self._ids: dict[bytes, str] = {}
        # (the broker's metrics, the batch of its fetch and request latency histograms for
        # Fetch, the batch's values)
        self._latency: tuple[object, LatencyBatch, list[float]] | None = None
        # The leader checks' answers (the replica and its log) by (topic, partition,
        # current_leader_epoch asked), while the replica's log is the one cached
        # (api.handlers.leader_cache).
        self._leaders: LeaderCache[tuple[str, int, int], tuple[PartitionReplica, Log]] = LeaderCache(MAX_IDS)
        # A one-partition answer's bytes before its partition, by (version, topic), for
        # the view as it is now (a topic id may change with it).
        self._heads: dict[tuple[int, str], bytes] = {}

    def answer_frame(
        self, conn: Connection, frame: bytes, started: float
    ) -> tuple[RequestHeader, list[Any] | Coroutine[Any, Any, list[Any] | None]] | None:
        """The answer to the Fetch request ``frame`` if it is one for the fast path (module
        doc), with the metrics counted as the general path counts them; for a long poll
        with nothing to answer yet, a coroutine giving the answer (or None: the general
        path answers the frame after all); None: decode it and run the handler."""
        if conn.ever_throttled:
            return None
        try:
            req = _Request(frame)
            answer = self._answer(conn, req, started)
        except (_Fallback, StrataError, struct.error, IndexError, UnicodeDecodeError):
            return None
        if isinstance(answer, _Gathered):
            return req.header, self._parked(conn, req, started, answer)
        return req.header, answer

    async def _parked(
        self, conn: Connection, req: _Request, started: float, pending: _Gathered
    ) -> list[Any] | None:
        """A parked long poll's answer (``answer_frame``); None: the general path's."""
        reads = conn.broker.reads
        loop = asyncio.get_running_loop()
        deadline = loop.time() + req.max_wait_ms / 1000
        committed = req.read_committed
        while True:
            fut: asyncio.Future[None] = loop.create_future()
            keys = reads.park(fut, (lg for lg, _ in pending.watched))
            try:
                # Registered after the read: a mark moved in between (a group-commit
                # thread's fsync) woke nobody, so look once before waiting.
                if all(
                    (lg.last_stable_offset if committed else lg.high_watermark) == mark
                    for lg, mark in pending.watched
                ):
                    try:
                        await asyncio.wait_for(fut, deadline - loop.time())
                    except TimeoutError:
                        return self._finish(conn, req, started, pending)
            finally:
                reads.unpark(fut, keys)
            try:
                answer = self._answer(conn, req, started)
            except (_Fallback, StrataError):
                return None
            if not isinstance(answer, _Gathered):
                return answer
            if loop.time() >= deadline:
                return self._finish(conn, req, started, answer)
            pending = answer

    def _names(self, conn: Connection, req: _Request) -> list[str]:
        """The request's topic names, in its order (v13+: resolved from their ids)."""
        view = conn.broker.replicas.view
        if view is not self._view or view.seq != self._seq:
            self._view, self._seq = view, view.seq
            self._ids.clear()
            self._heads.clear()
        names: list[str] = []
        for name, topic_id, _ in req.topics:
            if name is None:
                name = self._ids.get(topic_id)
                if name is None:
                    name = view.topic_name(uuid.UUID(bytes=topic_id))
                    if name is None:
                        raise _Fallback  # UNKNOWN_TOPIC_ID
                    if len(self._ids) >= MAX_IDS:
                        self._ids.clear()
                    self._ids[topic_id] = name
            names.append(name)
        return names

    def _answer(self, conn: Connection, req: _Request, started: float) -> list[Any] | _Gathered:
        broker = conn.broker
        names = self._names(conn, req)
        if getattr(broker, "access", None) is not None and not conn.server.inter_broker:
            for name in names:
                if not topic_ok(conn, Operation.READ, name):
                    raise _Fallback  # the guard answers TOPIC_AUTHORIZATION_FAILED
        if broker.quotas.quota(conn.principal or ANONYMOUS, CONSUMER_BYTE_RATE) is not None:
            raise _Fallback  # the quota wrapper counts and may throttle
        reads = broker.reads
        replicas = broker.replicas
        leaders = self._leaders.current(replicas)
        read_committed = req.read_committed
        budget = req.max_bytes
        first_with_data = True
        total = 0
        # By topic in the order first met, as the general path groups its answer (a topic
        # asked twice is answered once); partitions read in the request's order (the budget).
        by_topic: dict[str, list[Read]] = {}
        spans: list[tuple[str, int, int]] = []
        watched: list[tuple[Log, int]] = []
        for name, (_, _, asked) in zip(names, req.topics, strict=True):
            for partition, epoch, offset, max_bytes in asked:
                known = leaders.get((name, partition, epoch))
                if known is None or known[0].log is not known[1]:
                    rep = replicas.leader_replica(name, partition, epoch)
                    lg = reads.log(name, partition)
                    self._leaders.put((name, partition, epoch), (rep, lg))
                else:
                    lg = known[1]
                end = reads.at_end(lg, offset, read_committed)
                row: Read
                if end is not None:  # nothing to read (an idle consumer's partition)
                    hw, lso, start = end
                    row = (partition, hw, lso, start, [] if read_committed else None, (), 0)
                    size = 0
                else:
                    if reads.remote_bound(lg, offset) is not None:
                        raise _Fallback  # the bucket's (tiering)
                    lso = lg.last_stable_offset
                    r = lg.read(
                        offset,
                        max(0, min(max_bytes, budget)),
                        min_one=first_with_data,
                        max_offset=lso if read_committed else None,
                    )
                    size = r.size
                    aborted: list[AbortedTxn] | None = None
                    if read_committed:
                        aborted = lg.collect_aborted_transactions(offset, r.next_offset) if size else []
                    hw = lg.high_watermark
                    row = (partition, hw, lso, lg.log_start_offset, aborted, r.regions, size)
                    if size:
                        first_with_data = False
                        budget -= size
                        total += size
                        spans.append((name, r.next_offset - r.first_offset, size))
                watched.append((lg, lso if read_committed else hw))
                rows = by_topic.get(name)
                if rows is None:
                    by_topic[name] = [row]
                else:
                    rows.append(row)
        if total < max(req.min_bytes, 1) and req.max_wait_ms > 0:
            return _Gathered(by_topic, spans, total, watched)  # a long poll: parked (``_parked``)
        return self._finish(conn, req, started, _Gathered(by_topic, spans, total, watched))

    def _finish(self, conn: Connection, req: _Request, started: float, read: _Gathered) -> list[Any]:
        """The answer's parts for what was ``read``, with what it serves and its latency
        counted."""
        broker = conn.broker
        metrics = broker.metrics
        for name, span, size in read.spans:
            totals = metrics.fetched(name)
            totals[0] += span
            totals[1] += size
        latency = self._latency
        if latency is None or latency[0] is not metrics:
            batch = metrics.latency_batch(metrics.fetch_latency, "kafka", API_NAME)
            latency = self._latency = (metrics, batch, batch.values)
        # The fetch and request latency histograms, counted in batches (LatencyBatch).
        values = latency[2]
        values.append(time.perf_counter() - started)
        if len(values) >= LatencyBatch.FOLD_AT:
            latency[1].fold()
        self.hits += 1
        copy = read.total < self.copy_below
        view = broker.replicas.view
        by_topic = read.by_topic
        if copy and len(by_topic) == 1:
            ((name, rows),) = by_topic.items()
            if len(rows) == 1 and rows[0][4] is None:  # what a consumer of one partition asks
                return [self._encode_one(req.header.correlation_id, req.version, view, name, rows[0])]
        return _encode(req.header.correlation_id, req.version, view, by_topic, copy=copy)

    def _encode_one(
        self, correlation_id: int, version: int, view: ClusterView, name: str, row: Read
    ) -> bytes:
        """``_encode`` of one partition of one topic read with read_uncommitted, its data
        copied: the bytes before the partition kept per (version, topic) (``_heads``,
        cleared with the view), the partition's own packed after them. The same bytes:
        tests/api/test_fetch_fast.py compares the fast answers with the general path's."""
        head = self._heads.get((version, name))
        if head is None:
            head = _encode(0, version, view, {name: []}, copy=True)[0][4:]
            # less the empty partition list (and the topic's and the response's tags)
            head = head[: len(head) - (3 if version >= FLEXIBLE_VERSION else 4)]
            head += b"\x02" if version >= FLEXIBLE_VERSION else b"\x00\x00\x00\x01"
            if len(self._heads) >= MAX_IDS:
                self._heads.clear()
            self._heads[(version, name)] = head
        index, hw, lso, log_start, _, regions, size = row
        out = [_I32.pack(correlation_id), head]
        if version >= FLEXIBLE_VERSION:
            out.append(_PARTITION.pack(index, 0, hw, lso, log_start))
            out.append(_FLEX_NO_ABORTED)
            out.append(_uvarint_bytes(size + 1))
        else:
            out.append(
                _PARTITION.pack(index, 0, hw, lso, log_start)
                if version >= 5
                else _PARTITION_V4.pack(index, 0, hw, lso)
            )
            out.append(_NULL_ARRAY_PREFERRED if version >= 11 else _NULL_ARRAY)
            out.append(_I32.pack(size))
        for region in regions:
            out.append(region.read())
        if version >= FLEXIBLE_VERSION:
            out.append(b"\x00\x00\x00")  # the partition's, the topic's and the response's tags
        return b"".join(out)


def _encode(
    correlation_id: int, version: int, view: ClusterView, topics: dict[str, list[Read]], *, copy: bool
) -> list[Any]:
    """The response's parts as ``kwire.encode_response`` makes them: bytes, with each file
    region a part of its own right after its length prefix; with ``copy`` the regions' bytes
    in place instead (one bytes part)."""
    flexible = version >= FLEXIBLE_VERSION
    buf = bytearray(_I32.pack(correlation_id))
    if flexible:
        buf.append(0)
    buf += b"\x00\x00\x00\x00"  # throttle_time_ms
    if version >= 7:
        buf += b"\x00\x00\x00\x00\x00\x00"  # error_code, session_id: no session
    _put_count(buf, len(topics), flexible)
    partition = _PARTITION if version >= 5 else _PARTITION_V4
    parts: list[Any] = []
    for name, rows in topics.items():
        if version >= TOPIC_ID_VERSION:
            # The id the view gives the name, as the general path answers.
            buf += (view.topic_id(name) or ZERO_UUID).bytes
        else:
            raw = name.encode()
            if flexible:
                _put_uvarint(buf, len(raw) + 1)
            else:
                buf += _I16.pack(len(raw))
            buf += raw
        _put_count(buf, len(rows), flexible)
        for index, hw, lso, log_start, aborted, regions, size in rows:
            if version >= 5:
                buf += partition.pack(index, 0, hw, lso, log_start)
            else:
                buf += partition.pack(index, 0, hw, lso)
            if aborted is None:
                if flexible:
                    buf.append(0)
                else:
                    buf += _NULL_ARRAY
            else:
                _put_count(buf, len(aborted), flexible)
                for a in aborted:
                    buf += _ABORTED.pack(a.producer_id, a.first_offset)
                    if flexible:
                        buf.append(0)
            if version >= 11:
                buf += _NO_PREFERRED
            if flexible:
                _put_uvarint(buf, size + 1)
            else:
                buf += _I32.pack(size)
            for region in regions:
                if copy:
                    buf += region.read()
                    continue
                if buf:
                    parts.append(bytes(buf))
                    buf = bytearray()
                parts.append(region)
            if flexible:
                buf.append(0)  # the partition's tagged fields
        if flexible:
            buf.append(0)  # the topic's
    if flexible:
        buf.append(0)  # the response's (node_endpoints: only with NOT_LEADER errors)
    if buf or not parts:
        parts.append(bytes(buf))
    return parts


def _uvarint_bytes(v: int) -> bytes:
    if v < 0x80:
        return bytes((v,))
    buf = bytearray()
    _put_uvarint(buf, v)
    return bytes(buf)


def _put_count(buf: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _put_uvarint(buf, n + 1)
    else:
        buf += _I32.pack(n)


def _put_uvarint(buf: bytearray, v: int) -> None:
    while v >= 0x80:
        buf.append((v & 0x7F) | 0x80)
        v >>= 7
    buf.append(v)


__all__ = ["FetchFastPath"]
