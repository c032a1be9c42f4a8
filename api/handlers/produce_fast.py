"""The Produce fast path: from the request frame's bytes to the appends and back to the
response bytes (issue 34 §2).

The common Produce (no transactional id, acks -1/0/1, no tagged fields, every partition
led here and writable) is parsed straight from the frame by ``parse``: no request
dataclasses, no task, no handler chain. Its batches are appended at once, in request
order, by ``broker.produce_path.ProducePath.fast_append`` (the general path's append
without its per-partition objects), and a successful answer is encoded directly
(``encode_success``). What it waits for (acks=all, or acks=1 in fsync mode) it waits for
through ``ReplicaManager.ack_round``: one future per replica and flush round, shared by
every request of the loop iteration, not one per request; the writer completes the
request's answer when that future is done (``Waiting``).

Anything else goes to the general path (``api.handlers.produce.handle_produce``), which
answers it exactly as before: a transactional id, an unusual header or body (tagged
fields, repeated topics, versions outside 3-11, a null batch), acks outside -1/0/1, an
ACL guard in front of the handler (an authorizer on a client listener), a produce quota
that applies to the principal or a connection already throttled, SASL not done, an earlier
produce of the connection still in the general path (its appends must come first), and
every partition the general path would refuse before appending (not the leader, too few
in-sync replicas, an internal topic, zstd before v7, no records). Nothing is appended
before that is known, so falling back is always safe. A partition that the append itself
refuses (validation, the idempotent producer's sequence checks) or that fails while
waiting (timeout, leadership lost) is answered through the general path's response
builder and encoder (``api.handlers.produce.produce_response``), so the bytes are the
general path's in every case (tests/api/test_produce_fast.py checks fast against general:
same request, same response bytes, same log bytes).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Final

from api.handlers.leader_cache import LeaderCache
from api.handlers.produce import produce_response
from broker.latency_histogram import LatencyBatch
from broker.produce_path import ProduceResult
from broker.security.quotas import ANONYMOUS, PRODUCER_BYTE_RATE
from hot.errors import RequestTimedOutError, StrataError
from hot.log import AppendInfo
from kwire import APIS, ApiKey, RequestHeader, encode_response

# The one-partition parse and answer in C (hot/_recordwalk.c), None without the extension.
_CParse = Callable[[bytes], "tuple[int, int, int, bytes, int, int, int] | None"]
_CAnswer = Callable[[bytes, bytes, bytes, int, int, int, int, int], bytes]


def _load_codec() -> tuple[_CParse | None, _CAnswer | None]:
    try:
        from hot._recordwalk import produce_answer, produce_one
    except ImportError:  # installed without a C compiler, or a module built before them
        return None, None
    return produce_one, produce_answer


_c_parse, _c_answer = _load_codec()

if TYPE_CHECKING:
    from api.handlers.context import Connection
    from broker.broker import Broker
    from broker.partition_replica import PartitionReplica
    from hot.log import Log

PRODUCE_KEY: Final = ApiKey.PRODUCE.to_bytes(2, "big")  # a frame's first two bytes
API_NAME: Final = APIS[ApiKey.PRODUCE].name
MIN_VERSION: Final = 3
MAX_VERSION: Final = 11
FLEXIBLE_VERSION: Final = 9
MAX_NAMES: Final = 4096  # decoded topic names kept (bounded memory)

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_ACKS_TIMEOUT: Final = struct.Struct(">hi")
_INDEX_LEN: Final = struct.Struct(">ii")
# One partition's answer without an error, by version (the fields after it: see encode_success).
_PART_V3: Final = struct.Struct(">ihqq")  # index, error_code 0, base_offset, log_append_time_ms
_PART_V5: Final = struct.Struct(">ihqqq")  # + log_start_offset
_PART_V8: Final = struct.Struct(">ihqqqih")  # + record_errors (empty), error_message (null)
_FLEX_PART_TAIL: Final = b"\x01\x00\x00"  # empty compact record_errors, null error_message, no tags
_ZERO_THROTTLE: Final = b"\x00\x00\x00\x00"
# The header the writer logs a failed answer with (api key and version only).
_LOG_HEADERS: Final = {
    v: RequestHeader(ApiKey.PRODUCE, v, 0, None) for v in range(MIN_VERSION, MAX_VERSION + 1)
}


class NoAnswer:
    """acks=0: appended, nothing to answer."""


NO_ANSWER: Final = NoAnswer()

# (topic, [(partition, records)]) in request order
Topics = list[tuple[str, list[tuple[int, memoryview]]]]


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``: (value, position after it). IndexError past the end."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 28:
            raise IndexError("varint too long")


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def parse(frame: bytes, names: dict[bytes, str]) -> tuple[int, int, int, Topics] | None:
    """(version, acks, timeout_ms, topics) of a Produce request frame (no size prefix) the
    fast path may take, else None (module docstring). ``names``: decoded topic names by
    their bytes, filled here. ``records`` are views of ``frame`` (no copy)."""
    try:
        if frame[2] != 0:
            return None
        version = frame[3]
        if not MIN_VERSION <= version <= MAX_VERSION:
            return None
        flexible = version >= FLEXIBLE_VERSION
        (client_len,) = _I16.unpack_from(frame, 8)
        pos = 10 + max(client_len, 0)
        if client_len < -1:
            return None
        if flexible:
            if frame[pos] != 0:  # header tagged fields
                return None
            if frame[pos + 1] != 0:  # transactional_id not null
                return None
            pos += 2
        else:
            (txn_len,) = _I16.unpack_from(frame, pos)
            if txn_len != -1:
                return None
            pos += 2
        acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, pos)
        if acks not in (-1, 0, 1):
            return None
        pos += 6
        if flexible:
            ntopics, pos = _uvarint(frame, pos)
            ntopics -= 1
        else:
            (ntopics,) = _I32.unpack_from(frame, pos)
            pos += 4
        if ntopics <= 0:
            return None
        view = memoryview(frame)
        topics: Topics = []
        for _ in range(ntopics):
            if flexible:
                nlen, pos = _uvarint(frame, pos)
                nlen -= 1
            else:
                (nlen,) = _I16.unpack_from(frame, pos)
                pos += 2
            if nlen < 0 or pos + nlen > len(frame):
                return None
            raw = frame[pos : pos + nlen]
            pos += nlen
            name = names.get(raw)
            if name is None:
                name = raw.decode()
                if len(names) >= MAX_NAMES:
                    names.clear()
                names[raw] = name
            if flexible:
                nparts, pos = _uvarint(frame, pos)
                nparts -= 1
            else:
                (nparts,) = _I32.unpack_from(frame, pos)
                pos += 4
            if nparts <= 0:
                return None
            parts: list[tuple[int, memoryview]] = []
            for _ in range(nparts):
                if flexible:
                    (index,) = _I32.unpack_from(frame, pos)
                    size, pos = _uvarint(frame, pos + 4)
                    size -= 1
                else:
                    index, size = _INDEX_LEN.unpack_from(frame, pos)
                    pos += 8
                if size <= 0 or pos + size > len(frame):
                    return None  # null or empty batch: the general path refuses it
                parts.append((index, view[pos : pos + size]))
                pos += size
                if flexible:
                    if frame[pos] != 0:  # partition tagged fields
                        return None
                    pos += 1
            if flexible:
                if frame[pos] != 0:  # topic tagged fields
                    return None
                pos += 1
            topics.append((name, parts))
        if flexible:
            if frame[pos] != 0:  # body tagged fields
                return None
            pos += 1
        if pos != len(frame):
            return None
        if ntopics > 1 and len({t for t, _ in topics}) != ntopics:
            return None  # a topic named twice: the general answer merges them
        return version, acks, timeout_ms, topics
    except (IndexError, struct.error, UnicodeDecodeError):
        return None


def parse_fast(
    frame: bytes, names: dict[bytes, str], one: _CParse | None = _c_parse
) -> tuple[int, int, int, Topics] | None:
    """``parse``, a request to one partition of one topic (what a producer sends most) in
    one C call (``hot._recordwalk.produce_one``); anything else, or a build without the
    extension (``one`` None), through ``parse``. The same answer for every frame:
    tests/api/test_produce_codec_c.py."""
    got = one(frame) if one is not None else None
    if got is None:
        return parse(frame, names)
    version, acks, timeout_ms, raw, index, start, size = got
    name = names.get(raw)
    if name is None:
        try:
            name = raw.decode()
        except UnicodeDecodeError:
            return None
        if len(names) >= MAX_NAMES:
            names.clear()
        names[raw] = name
    return version, acks, timeout_ms, [(name, [(index, memoryview(frame)[start : start + size])])]


# (index, base_offset, log_append_time_ms, log_start_offset) of a partition appended
Success = tuple[int, int, int, int]


def encode_success(
    version: int,
    correlation: bytes,
    topics: list[tuple[str, list[Success]]],
    names: dict[tuple[str, bool], bytes],
) -> bytes:
    """A Produce response with no error (no size prefix), as the codec encodes it:
    ``correlation`` is the request's correlation id (4 bytes); ``names``: encoded topic
    names by (name, flexible), filled here."""
    flexible = version >= FLEXIBLE_VERSION
    out = [correlation, b"\x00" if flexible else b""]
    out.append(_varint_bytes(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for name, parts in topics:
        key = (name, flexible)
        enc = names.get(key)
        if enc is None:
            raw = name.encode()
            enc = (_varint_bytes(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw
            if len(names) >= MAX_NAMES:
                names.clear()
            names[key] = enc
        out.append(enc)
        out.append(_varint_bytes(len(parts) + 1) if flexible else _I32.pack(len(parts)))
        if flexible:
            pack = _PART_V5.pack
            for index, base, lat, lso in parts:
                out.append(pack(index, 0, base, lat, lso))
                out.append(_FLEX_PART_TAIL)
            out.append(b"\x00")  # topic tagged fields
        elif version >= 8:
            pack8 = _PART_V8.pack
            for index, base, lat, lso in parts:
                out.append(pack8(index, 0, base, lat, lso, 0, -1))
        elif version >= 5:
            pack5 = _PART_V5.pack
            for index, base, lat, lso in parts:
                out.append(pack5(index, 0, base, lat, lso))
        else:
            pack3 = _PART_V3.pack
            for index, base, lat, _ in parts:
                out.append(pack3(index, 0, base, lat))
    out.append(_ZERO_THROTTLE)
    if flexible:
        out.append(b"\x00")  # response tagged fields (no node_endpoints)
    return b"".join(out)


def encode_one(
    version: int,
    correlation: bytes,
    name: str,
    success: Success,
    templates: dict[tuple[int, str], tuple[bytes, bytes]],
    c_answer: _CAnswer | None = _c_answer,
) -> bytes:
    """``encode_success`` of one partition of one topic (what a producer's request to one
    partition gets), from the bytes around the partition's fields kept per (version,
    topic) in ``templates``: only the offsets are packed per request."""
    flexible = version >= FLEXIBLE_VERSION
    template = templates.get((version, name))
    if template is None:
        raw = name.encode()
        if flexible:
            head = b"\x00\x02" + _varint_bytes(len(raw) + 1) + raw + b"\x02"
            tail = _FLEX_PART_TAIL + b"\x00" + _ZERO_THROTTLE + b"\x00"
        else:
            head = _I32.pack(1) + _I16.pack(len(raw)) + raw + _I32.pack(1)
            tail = _ZERO_THROTTLE
        if len(templates) >= MAX_NAMES:
            templates.clear()
        template = templates[(version, name)] = (head, tail)
    index, base, lat, lso = success
    if c_answer is not None:  # the same bytes in one C call (hot._recordwalk.produce_answer)
        return c_answer(correlation, template[0], template[1], version, index, base, lat, lso)
    if flexible or version >= 5:
        part = (
            _PART_V8.pack(index, 0, base, lat, lso, 0, -1)
            if version == 8
            else _PART_V5.pack(index, 0, base, lat, lso)
        )
    else:
        part = _PART_V3.pack(index, 0, base, lat)
    return correlation + template[0] + part + template[1]


class FastProduce:
    """The fast path of one listener (``api.kafka_server.KafkaServer``); event loop only."""

    def __init__(self) -> None:
        self._names: dict[bytes, str] = {}
        self._encoded: dict[tuple[str, bool], bytes] = {}
        self._templates: dict[tuple[int, str], tuple[bytes, bytes]] = {}
        self.taken = 0  # requests answered here (tests, benchmarks)
        # ``fast_leader``'s answers (the replica and its log) by (topic, partition), while
        # the replica's log is the one cached (api.handlers.leader_cache); the lease,
        # shutting down and the ISR for acks=all are checked per request
        # (``ProducePath.fast_again``).
        self._leaders: LeaderCache[tuple[str, int], tuple[PartitionReplica, Log]] = LeaderCache(MAX_NAMES)
        # (the broker's metrics, the batch of its produce and request latency histograms)
        self._latency: tuple[object, LatencyBatch, list[float]] | None = None

    def usable(self, conn: Connection) -> bool:
        """Whether this connection's Produce requests may take the fast path at all."""
        broker = conn.broker
        if getattr(broker, "access", None) is not None and not conn.server.inter_broker:
            return False  # ACLs: the guard answers per principal
        if conn.sasl is not None and not conn.sasl.authenticated:
            return False
        if conn.ever_throttled:
            return False
        gate = conn.produce_order.gate
        if gate is not None and not gate.done():
            return False  # an earlier request awaits its transaction verification
        last = conn.general_produce
        if last is not None and not last.done():
            return False  # an earlier request in the general path: it appends first
        return broker.quotas.quota(conn.principal or ANONYMOUS, PRODUCER_BYTE_RATE) is None

    def answer(
        self, conn: Connection, frame: bytes, started: float
    ) -> tuple[RequestHeader, Any] | NoAnswer | None:
        """Appends the Produce request ``frame`` and returns (a header to log with, the
        answer's parts or a ``Waiting``), ``NO_ANSWER`` for acks=0, or None when the
        general path must take it (nothing appended then)."""
        if not self.usable(conn):
            return None
        parsed = parse_fast(frame, self._names)
        if parsed is None:
            return None
        version, acks, timeout_ms, topics = parsed
        broker = conn.broker
        writes = broker.writes
        replicas = broker.replicas
        known = self._leaders.current(replicas)
        leaders: list[PartitionReplica] = []
        for name, parts in topics:
            for index, records in parts:
                cached = known.get((name, index))
                if cached is not None and cached[0].log is cached[1]:
                    rep = cached[0]
                    if not writes.fast_again(rep, acks, records, version):
                        return None
                else:
                    got = writes.fast_leader(name, index, acks, records, version)
                    if got is None:
                        return None
                    rep = got
                    self._leaders.put((name, index), (rep, rep.log))
                leaders.append(rep)
        # Every partition passed the checks: append them all, in request order.
        self.taken += 1
        outcomes: list[AppendInfo | StrataError | ProduceResult]
        if len(leaders) == 1:
            outcomes = [writes.fast_append(leaders[0], topics[0][0], topics[0][1][0][1])]
        else:  # fan-out: the writes, then the high-watermark pass once for the request
            outcomes = list(writes.fast_append_all(leaders, topics))
        metrics = broker.metrics
        if acks == 0:
            metrics.labelled(metrics.request_latency, API_NAME).observe(time.perf_counter() - started)
            return NO_ANSWER
        waits: list[tuple[int, asyncio.Future[None]]] = []
        failed = False
        timeout = max(timeout_ms, 1) / 1000
        for i, out in enumerate(outcomes):
            if type(out) is not AppendInfo:
                failed = True
                continue
            rep = leaders[i]
            if acks == -1 or rep.log.config.fsync_mode:
                try:
                    fut = replicas.ack_round(rep, rep.leader_epoch, out.last_offset + 1, acks, timeout)
                except StrataError as exc:
                    outcomes[i] = ProduceResult(exc, record_count=out.record_count)
                    failed = True
                    continue
                if fut is not None:
                    waits.append((i, fut))
        request = _Request(
            self, conn, version, frame[4:8], acks, timeout_ms, topics, leaders, outcomes, failed, started
        )
        header = _LOG_HEADERS[version]
        if waits:
            return header, Waiting(request, waits)
        if failed:
            return header, request.general()
        return header, [request.success()]


class _Request:
    """One fast-path request between its appends and its answer."""

    __slots__ = (
        "acks",
        "conn",
        "correlation",
        "failed",
        "fast",
        "leaders",
        "outcomes",
        "started",
        "timeout_ms",
        "topics",
        "version",
    )

    def __init__(
        self,
        fast: FastProduce,
        conn: Connection,
        version: int,
        correlation: bytes,
        acks: int,
        timeout_ms: int,
        topics: Topics,
        leaders: list[PartitionReplica],
        outcomes: list[Any],
        failed: bool,
        started: float,
    ) -> None:
        self.fast = fast
        self.conn = conn
        self.version = version
        self.correlation = correlation
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topics = topics
        self.leaders = leaders
        # per partition: AppendInfo (appended), StrataError (refused by the append) or
        # ProduceResult (an error after it)
        self.outcomes = outcomes
        self.failed = failed  # some partition has an error already
        self.started = started

    def _observe(self, broker: Broker) -> None:
        """The produce and request latency histograms, counted in batches (LatencyBatch)."""
        metrics = broker.metrics
        fast = self.fast
        latency = fast._latency
        if latency is None or latency[0] is not metrics:
            batch = metrics.latency_batch(metrics.produce_latency, "kafka", API_NAME)
            latency = fast._latency = (metrics, batch, batch.values)
        values = latency[2]
        values.append(time.perf_counter() - self.started)
        if len(values) >= LatencyBatch.FOLD_AT:
            latency[1].fold()

    def success(self) -> bytes:
        """Every partition appended and acknowledged: the answer, encoded directly."""
        leaders = self.leaders
        outcomes = self.outcomes
        topics = self.topics
        if len(topics) == 1 and len(topics[0][1]) == 1:  # one partition: from its template
            info = outcomes[0]
            one = (
                topics[0][1][0][0],
                info.first_offset,
                info.log_append_time_ms,
                leaders[0].log.log_start_offset,
            )
            body = encode_one(self.version, self.correlation, topics[0][0], one, self.fast._templates)
            self._observe(self.conn.broker)
            return body
        answer: list[tuple[str, list[Success]]] = []
        i = 0
        for name, parts in self.topics:
            done: list[Success] = []
            for index, _ in parts:
                info = outcomes[i]
                done.append(
                    (index, info.first_offset, info.log_append_time_ms, leaders[i].log.log_start_offset)
                )
                i += 1
            answer.append((name, done))
        body = encode_success(self.version, self.correlation, answer, self.fast._encoded)
        self._observe(self.conn.broker)
        return body

    def general(self) -> list[Any]:
        """Some partition failed: the general path's answer to these outcomes (its
        response builder, which counts the errors, and the codec)."""
        broker = self.conn.broker
        partitions: list[tuple[str, int, object]] = []
        results: list[ProduceResult] = []
        i = 0
        for name, parts in self.topics:
            for index, records in parts:
                partitions.append((name, index, records))
                out = self.outcomes[i]
                if type(out) is AppendInfo:
                    results.append(
                        ProduceResult(
                            None,
                            base_offset=out.first_offset,
                            log_append_time_ms=out.log_append_time_ms,
                            log_start_offset=self.leaders[i].log.log_start_offset,
                            record_count=out.record_count,
                        )
                    )
                elif isinstance(out, ProduceResult):
                    results.append(out)
                else:
                    results.append(ProduceResult(out))
                i += 1
        response = produce_response(broker, partitions, results)
        self._observe(broker)
        (correlation,) = _I32.unpack(self.correlation)
        return encode_response(RequestHeader(ApiKey.PRODUCE, self.version, correlation, None), response)

    def waited(self, failures: list[tuple[int, BaseException]]) -> list[Any]:
        """The answer once every wait is over; ``failures``: (partition position, what its
        wait raised), as ``ProducePath.complete`` turns them into results."""
        if not failures and not self.failed:
            return [self.success()]
        for i, exc in failures:
            info = self.outcomes[i]
            if isinstance(exc, TimeoutError):
                what = "replicated to the in-sync replicas" if self.acks == -1 else "durable on the leader"
                err: StrataError = RequestTimedOutError(f"not {what} within {self.timeout_ms} ms")
            elif isinstance(exc, StrataError):
                err = exc
            else:
                raise exc
            self.outcomes[i] = ProduceResult(err, record_count=info.record_count)
        return self.general()


class Waiting:
    """A fast-path answer waiting for acknowledgements: awaitable like the general path's
    task (the listener's writer awaits it in order), built when the shared futures of its
    partitions are done. A future is shielded while awaited: cancelling one connection's
    writer must not cancel a wait other requests share."""

    __slots__ = ("_request", "_waits")

    def __init__(self, request: _Request, waits: list[tuple[int, asyncio.Future[None]]]) -> None:
        self._request = request
        self._waits = waits

    def done(self) -> bool:
        return all(f.done() for _, f in self._waits)

    def __await__(self) -> Generator[Any, None, list[Any]]:
        failures: list[tuple[int, BaseException]] = []
        for i, fut in self._waits:
            if not fut.done():
                try:
                    yield from asyncio.shield(fut).__await__()
                except asyncio.CancelledError:
                    if not fut.done():
                        raise
            exc = fut.exception()
            if exc is not None:
                failures.append((i, exc))
        return self._request.waited(failures)


__all__ = ["NO_ANSWER", "FastProduce", "Waiting", "encode_one", "encode_success", "parse", "parse_fast"]
