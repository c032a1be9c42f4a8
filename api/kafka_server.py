"""The Kafka protocol listener: asyncio TCP, one reader and one writer task per connection.

Ordering and pipelining: a connection's requests are started as tasks in arrival order
and answered strictly in that order by the writer. A produce handler appends every
partition synchronously before its first ``await``, so a producer's pipelined batches
land in the log in the order they were sent while a single group commit can cover all
of them. The number of requests in flight per connection is bounded; reading pauses
when the bound is hit (backpressure instead of unbounded memory).

Zero copy: a Fetch response is encoded into parts, bytes for headers and
``FileRegion`` objects for record data, and each region goes to the socket with
``loop.sendfile`` (``os.sendfile`` underneath), never through Python buffers. Large
in-memory parts (remote-tier chunks) are sent from their own buffers too, not copied
into asyncio's write buffer (``Connection._send_direct``).

Security (api.security): with TLS the handshake runs per connection before anything is
read, and a failed one (no client certificate, a plaintext client) is one log line. With
SASL only ApiVersions, SaslHandshake and SaslAuthenticate are served until the client
has authenticated; any other request closes the connection, as Kafka does. A failed
authentication is answered (SASL_AUTHENTICATION_FAILED) and the connection then closed.
After a SaslHandshake v0 the tokens come as bare size-prefixed frames, answered the same
way (KIP-43, before SaslAuthenticate existed); a failure there just closes the connection.

Malformed input (bad frame sizes, unknown API keys, undecodable bodies, unsupported
versions other than the ApiVersions fallback) closes that connection only, with one
log line saying why; nothing is answered for the bad request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from api.acl_handlers import handle_create_acls, handle_delete_acls, handle_describe_acls
from api.broker import Broker, FetchRequestPartition, PendingAppend
from api.group_handlers import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync_group,
)
from api.protocol import (
    APIS,
    ApiKey,
    FrameDecoder,
    ProtocolError,
    RequestHeader,
    UnknownApiKeyError,
    UnsupportedVersionError,
    api_versions_fallback_response,
    api_versions_response,
    decode_request,
    encode_frame,
    encode_response,
)
from api.protocol.messages.alter_configs import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from api.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from api.protocol.messages.create_topics import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from api.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from api.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from api.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from api.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from api.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from api.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from api.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
)
from api.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from api.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from api.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from api.quota_handlers import (
    handle_alter_client_quotas,
    handle_describe_client_quotas,
    with_fetch_quota,
    with_produce_quota,
)
from api.reassignment_handlers import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from api.security.group_guards import GROUP_GUARDS
from api.security.guards import TOPIC_GUARDS, UNGUARDED, guard
from api.security.sasl import SaslSession
from api.security.tls import describe_handshake_error, peer_principal
from api.security.users import UserTable
from hot import errors as E
from hot.errors import InvalidRequestError, StrataError, UnknownTopicOrPartitionError, kafka_code
from hot.record_validation import uses_zstd
from hot.region import FileRegion
from hot.topics import TopicInfo

log = logging.getLogger("strata.kafka")

GUARDS = {**TOPIC_GUARDS, **GROUP_GUARDS}
MAX_IN_FLIGHT = 64
READ_CHUNK = 1 << 18
# Response parts at least this large bypass asyncio's write buffer (Connection._send_direct).
DIRECT_SEND_MIN = 1 << 18
ZERO_UUID = uuid.UUID(int=0)
# Produce v7 is the first a client may send zstd batches in (KIP-110); Kafka refuses them in
# older versions with UNSUPPORTED_COMPRESSION_TYPE so that old clients' readers are never handed them.
_PRODUCE_ZSTD_VERSION = 7

# DescribeConfigs resource types and config sources (Kafka's ConfigResource / ConfigSource).
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_TOPIC_CONFIG = 1
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

TLS_HANDSHAKE_TIMEOUT = 10.0
# What a client may send on a SASL listener before it has authenticated.
PRE_AUTH_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})

Handler = Callable[["Connection", RequestHeader, Any], Awaitable[Any]]


class KafkaServer:
    def __init__(
        self,
        broker: Broker,
        *,
        handlers: Mapping[int, Handler] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanisms: tuple[str, ...] = (),
        users: UserTable | None = None,
        inter_broker: bool = False,
    ) -> None:
        self.broker = broker
        # The internal listener: its connections are the inter-broker principal (api.security.authz).
        self.inter_broker = inter_broker
        self.ssl_context = ssl_context
        self.sasl_mechanisms = sasl_mechanisms
        self.users = users
        if sasl_mechanisms and users is None:
            raise ValueError("SASL needs a user store")
        # Cluster mode (cluster.kafka_handlers) replaces some of the single-node handlers;
        # every one of them sits behind its API's ACL guard (api.security.guards).
        self.handlers: dict[int, Handler] = {
            key: guard(key, h, GUARDS) for key, h in {**HANDLERS, **(handlers or {})}.items()
        }
        # Byte-rate quotas (api.quota_handlers) around whichever Produce/Fetch is served.
        self.handlers[ApiKey.PRODUCE] = with_produce_quota(self.handlers[ApiKey.PRODUCE])
        self.handlers[ApiKey.FETCH] = with_fetch_quota(self.handlers[ApiKey.FETCH])
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()

    async def start(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._accept, sock=sock, limit=READ_CHUNK)

    async def close(self, grace: float = 5.0) -> None:
        if self._server is not None:
            self._server.close()
        conns = list(self._connections)
        for c in conns:
            c.stop_reading()
        if conns:
            await asyncio.wait([asyncio.create_task(c.drained()) for c in conns], timeout=grace)
        for c in list(self._connections):
            c.abort()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=grace)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.ssl_context is not None and not await self._handshake(writer):
            return
        conn = Connection(self, reader, writer)
        self._connections.add(conn)
        self.broker.metrics.connections.inc()
        try:
            await conn.run()
        finally:
            self._connections.discard(conn)
            self.broker.metrics.connections.dec()

    async def _handshake(self, writer: asyncio.StreamWriter) -> bool:
        # Done here rather than by start_server(ssl=...), where asyncio swallows handshake
        # failures silently: an operator should see who failed and why, in one line.
        peer = writer.get_extra_info("peername")
        try:
            await writer.start_tls(self.ssl_context, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT)  # type: ignore[arg-type]
            return True
        except (ssl.SSLError, OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            log.warning("TLS handshake with %s failed: %s", peer, describe_handshake_error(exc))
        except asyncio.CancelledError:  # shutting down mid-handshake
            writer.transport.abort()
            raise
        with contextlib.suppress(Exception):
            writer.transport.abort()
        return False


class Connection:
    def __init__(
        self, server: KafkaServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.broker = server.broker
        self.reader = reader
        self.writer = writer
        self.peer = writer.get_extra_info("peername")
        self.host = str(self.peer[0]) if isinstance(self.peer, tuple) and self.peer else ""
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder(self.broker.config.max_request_bytes)
        # (header or None, task producing the response parts or None for "no response")
        self.pending: asyncio.Queue[tuple[RequestHeader, asyncio.Task[Any]] | None] = asyncio.Queue(
            MAX_IN_FLIGHT
        )
        self._reading = True
        self._read_task: asyncio.Task[None] | None = None
        self._write_task: asyncio.Task[None] | None = None
        self._closed = asyncio.Event()
        self.principal: str | None = peer_principal(writer.get_extra_info("ssl_object"))
        self.sasl: SaslSession | None = None
        if server.sasl_mechanisms and server.users is not None:
            self.sasl = SaslSession(server.sasl_mechanisms, server.users)
        self._close_after_answer = False
        self.tls = writer.get_extra_info("ssl_object") is not None
        self._direct: socket.socket | None = None
        self._muted_until = 0.0  # quota throttling: no reads before this (time.monotonic)
        # Set by a SaslHandshake v0: frames are raw SASL tokens until authenticated.
        self.raw_sasl: RequestHeader | None = None

    async def run(self) -> None:
        self._write_task = asyncio.create_task(self._write_loop())
        self._read_task = asyncio.current_task()  # type: ignore[assignment]
        try:
            await self._read_loop()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except asyncio.CancelledError:
            pass
        finally:
            # answer the requests already accepted (bounded), then close
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self.pending.put(None), timeout=30)
                await asyncio.wait_for(self._write_task, timeout=30)
            self.abort()

    def throttle(self, ms: int) -> None:
        """Stop reading this connection for ``ms`` (KIP-219: the response is already on its way)."""
        self._muted_until = max(self._muted_until, time.monotonic() + ms / 1000)

    def throttled_ms(self) -> int:
        return max(0, round((self._muted_until - time.monotonic()) * 1000))

    async def _unmuted(self) -> None:
        while (delay := self._muted_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def stop_reading(self) -> None:
        self._reading = False
        if self._read_task is not None and not self._read_task.done():
            self._read_task.cancel()

    async def drained(self) -> None:
        await self._closed.wait()

    def abort(self) -> None:
        if self._write_task is not None and not self._write_task.done():
            self._write_task.cancel()
        with contextlib.suppress(Exception):
            self.writer.close()
        if self._direct is not None:
            # the dup holds the socket open: without this close the peer never sees EOF
            self._direct.close()
        self._closed.set()

    async def _read_loop(self) -> None:
        while self._reading:
            await self._unmuted()
            data = await self.reader.read(READ_CHUNK)
            if not data:
                if not self.decoder.at_boundary:
                    log.info(
                        "client %s disconnected mid-request (%d bytes buffered)",
                        self.peer,
                        self.decoder.buffered,
                    )
                return
            self.decoder.feed(data)
            while (frame := self.decoder.next_frame()) is not None:
                await self._unmuted()
                await self._dispatch(frame)

    async def _dispatch(self, frame: bytes) -> None:
        if self.raw_sasl is not None:
            await self._enqueue(self.raw_sasl, asyncio.create_task(self._raw_sasl_token(frame)))
            return
        started = time.perf_counter()
        try:
            header, request = decode_request(frame)
        except UnsupportedVersionError as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                parts = api_versions_fallback_response(exc.header)
                await self._enqueue(exc.header, _done(parts))
                return
            raise
        except UnknownApiKeyError:
            raise
        if self.sasl is not None and not self.sasl.authenticated and header.api_key not in PRE_AUTH_APIS:
            raise ProtocolError(f"{APIS[header.api_key].name} request before SASL authentication")
        handler = self.server.handlers[header.api_key]
        admit = getattr(handler, "admit", None)
        if admit is not None:  # quota accounting on arrival (api.quota_handlers)
            admit(self, request)
        task = asyncio.create_task(self._run_handler(handler, header, request, started))
        await self._enqueue(header, task)

    async def _enqueue(self, header: RequestHeader, task: asyncio.Task[Any]) -> None:
        await self.pending.put((header, task))

    async def _run_handler(
        self, handler: Handler, header: RequestHeader, request: Any, started: float
    ) -> Any:
        response = await handler(self, header, request)
        api = APIS[header.api_key].name
        self.broker.metrics.request_latency.labels(api).observe(time.perf_counter() - started)
        if response is None:
            return None
        return encode_response(header, response)

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            transport = self.writer.transport
            item = await self.pending.get()
            if item is None:
                return
            header, task = item
            try:
                parts = await task
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "closing connection from %s: handler for api %s v%d failed",
                    self.peer,
                    header.api_key,
                    header.api_version,
                )
                self.stop_reading()
                return
            if parts is None:  # acks=0 produce: no response at all
                continue
            try:
                for part in encode_frame(parts):
                    if isinstance(part, (bytes, bytearray, memoryview)):
                        if len(part) >= DIRECT_SEND_MIN and not self.tls:
                            await self._send_direct(loop, part)
                        else:
                            self.writer.write(part)
                    else:
                        region: FileRegion = part  # type: ignore[assignment]
                        await self.writer.drain()
                        if self.tls:
                            # No sendfile through TLS; asyncio's fallback would seek the shared
                            # file object and swap the protocol. pread-based, whole batches.
                            self.writer.write(region.read())
                        else:
                            await loop.sendfile(transport, region.file, region.position, region.length)
                await self.writer.drain()
            except (ConnectionError, OSError, RuntimeError) as exc:
                log.info("client %s went away while being answered: %s", self.peer, exc)
                self.stop_reading()
                return
            except StrataError as exc:  # a segment closed or short while being read (TLS path)
                log.warning("closing connection from %s: %s", self.peer, exc)
                self.stop_reading()
                return
            if self._close_after_answer:  # failed authentication: answered, now closed
                self.stop_reading()
                return

    async def _send_direct(
        self, loop: asyncio.AbstractEventLoop, part: bytes | bytearray | memoryview
    ) -> None:
        """Sends a large part (remote-tier chunks) from its own buffer, without a copy.

        Python 3.11's socket transport copies whatever one ``send`` did not take into a
        bytearray and then shifts that bytearray after every later ``send`` (about 2 ms per
        8 MiB with the GIL held). Here the transport's buffer is drained first (order), then
        ``sock_sendall`` sends slices of the part on a dup of the socket (asyncio refuses
        ``sock_*`` calls on a transport's own fd). Only the write loop writes, so nothing can
        slip in between.
        """
        transport = self.writer.transport
        if transport.get_write_buffer_size():
            transport.set_write_buffer_limits(high=0)  # drain() now waits for an empty buffer
            try:
                await self.writer.drain()
            finally:
                transport.set_write_buffer_limits()
        if self._direct is None:
            self._direct = self.writer.get_extra_info("socket").dup()
            self._direct.setblocking(False)
        await loop.sock_sendall(self._direct, part)

    async def _raw_sasl_token(self, token: bytes) -> list[bytes] | None:
        """One token of the SaslHandshake v0 flow: the answer goes out as a bare frame."""
        session = self.sasl
        assert session is not None
        try:
            answer = await session.authenticate(token)
        except StrataError as exc:
            self.authentication_failed(session.mechanism or "?", session.username, exc)
            self.stop_reading()  # v0 has no way to say why: the connection just closes
            return None
        if session.authenticated:
            self.raw_sasl = None  # Kafka requests from here on
            self.authenticated(session)
        return [answer]

    def authenticated(self, session: SaslSession) -> None:
        self.principal = session.principal
        log.info(
            "client %s authenticated as %r with SASL %s", self.peer, session.principal, session.mechanism
        )

    def authentication_failed(self, mechanism: str, user: str | None, exc: StrataError) -> None:
        # never the token: it holds the password (PLAIN) or a proof (SCRAM)
        log.warning(
            "closing connection from %s: SASL %s authentication failed for user %r: %s",
            self.peer,
            mechanism,
            user,
            exc,
        )
        self._close_after_answer = True


def _done(value: Any) -> asyncio.Task[Any]:
    async def ready() -> Any:
        return value

    return asyncio.create_task(ready())


# --- handlers ----------------------------------------------------------------------------------


async def handle_api_versions(conn: Connection, header: RequestHeader, req: Any) -> Any:
    return api_versions_response()


async def handle_sasl_handshake(
    conn: Connection, header: RequestHeader, req: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    if conn.sasl is None:
        return SaslHandshakeResponse(error_code=E.ILLEGAL_SASL_STATE)
    try:
        conn.sasl.handshake(req.mechanism)
    except StrataError as exc:
        return SaslHandshakeResponse(error_code=kafka_code(exc), mechanisms=conn.sasl.enabled)
    if header.api_version == 0:  # raw tokens follow (KIP-43), not SaslAuthenticate requests
        conn.raw_sasl = header
    return SaslHandshakeResponse(mechanisms=conn.sasl.enabled)


async def handle_sasl_authenticate(
    conn: Connection, header: RequestHeader, req: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    session = conn.sasl
    if session is None:
        return SaslAuthenticateResponse(
            error_code=E.ILLEGAL_SASL_STATE, error_message="SASL is not enabled on this listener"
        )
    try:
        answer = await session.authenticate(req.auth_bytes)
    except StrataError as exc:
        conn.authentication_failed(session.mechanism or "?", session.username, exc)
        return SaslAuthenticateResponse(
            error_code=kafka_code(exc), error_message=f"Authentication failed: {exc}"
        )
    if session.authenticated:
        conn.authenticated(session)
    return SaslAuthenticateResponse(auth_bytes=answer)


def _topic_by_id(broker: Broker, topic_id: uuid.UUID) -> TopicInfo | None:
    for t in broker.topics():
        if t.topic_id == topic_id:
            return t
    return None


async def handle_metadata(conn: Connection, header: RequestHeader, req: MetadataRequest) -> MetadataResponse:
    broker = conn.broker
    node = broker.node_id
    adv = broker.config.advertised
    topics: list[MetadataResponseTopic] = []
    infos: list[tuple[str | None, uuid.UUID, TopicInfo | None, int]] = []
    info: TopicInfo | None
    if req.topics is None:
        infos = [(t.name, t.topic_id, t, 0) for t in broker.topics()]
    else:
        allow_auto = req.allow_auto_topic_creation  # absent before v4: its default, True
        for rt in req.topics:
            try:
                if rt.name is None:
                    found = _topic_by_id(broker, rt.topic_id)
                    if found is None:
                        raise UnknownTopicOrPartitionError(f"unknown topic id {rt.topic_id}")
                    infos.append((found.name, found.topic_id, found, 0))
                else:
                    info = broker.topic(rt.name, auto_create=allow_auto)
                    infos.append((info.name, info.topic_id, info, 0))
            except StrataError as exc:
                infos.append((rt.name, rt.topic_id, None, kafka_code(exc)))
    for name, topic_id, info, code in infos:
        if info is None:
            topics.append(MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id))
            continue
        partitions = tuple(
            MetadataResponsePartition(
                partition_index=p,
                leader_id=node,
                leader_epoch=0,
                replica_nodes=(node,),
                isr_nodes=(node,),
            )
            for p in range(info.partitions)
        )
        topics.append(MetadataResponseTopic(name=info.name, topic_id=info.topic_id, partitions=partitions))
    return MetadataResponse(
        brokers=(MetadataResponseBroker(node_id=node, host=adv.host, port=adv.port),),
        cluster_id=broker.config.cluster_id,
        controller_id=node,
        topics=tuple(topics),
    )


async def handle_produce(
    conn: Connection, header: RequestHeader, req: ProduceRequest
) -> ProduceResponse | None:
    broker = conn.broker
    started = time.perf_counter()
    acks = req.acks
    bad_acks = acks not in (-1, 0, 1)
    transactional = req.transactional_id is not None
    pending: list[tuple[str, int, PendingAppend | None, StrataError | None]] = []
    # Phase one, synchronous and in request order: append every partition.
    for td in req.topic_data:
        for pd in td.partition_data:
            if bad_acks:
                err: StrataError | None = InvalidRequestError(f"acks must be -1, 0 or 1, got {acks}")
            elif transactional:
                err = E.TransactionsNotSupportedError("transactions are not supported")
            elif pd.records is None or len(pd.records) == 0:
                err = E.CorruptRecordError("produce request without record data")
            elif header.api_version < _PRODUCE_ZSTD_VERSION and uses_zstd(pd.records):
                err = E.UnsupportedCompressionError(
                    f"Produce requests with version {header.api_version} may not use ZStandard "
                    f"compression (version {_PRODUCE_ZSTD_VERSION} or later may)"
                )
            else:
                err = None
            if err is not None:
                pending.append((td.name, pd.index, None, err))
            else:
                assert pd.records is not None
                pending.append((td.name, pd.index, broker.append(td.name, pd.index, pd.records), None))
    if acks == 0:
        return None
    # Phase two: wait for durability of all of them together.
    results = await asyncio.gather(
        *(broker.complete(p, acks=acks, timeout_ms=req.timeout_ms) for _, _, p, _ in pending if p is not None)
    )
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
    broker.metrics.produce_latency.labels("kafka").observe(time.perf_counter() - started)
    return ProduceResponse(
        responses=tuple(
            ProduceTopicResponse(name=t, partition_responses=tuple(ps)) for t, ps in by_topic.items()
        )
    )


def _record_errors(err: StrataError) -> tuple[BatchIndexAndErrorMessage, ...]:
    """Produce v8+ names the records that made a batch fail (KIP-467)."""
    return tuple(
        BatchIndexAndErrorMessage(batch_index=e.batch_index, batch_index_error_message=e.message)
        for e in getattr(err, "record_errors", ())
    )


async def handle_fetch(conn: Connection, header: RequestHeader, req: FetchRequest) -> FetchResponse:
    broker = conn.broker
    started = time.perf_counter()
    if req.replica_id >= 0:
        raise InvalidRequestError("replica fetches are not supported by a single-node broker")
    parts = [
        FetchRequestPartition(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
        for t in req.topics
        for p in t.partitions
    ]
    fetched = await broker.fetch(
        parts, max_wait_ms=req.max_wait_ms, min_bytes=req.min_bytes, max_bytes=req.max_bytes
    )
    by_topic: dict[str, list[FetchPartitionData]] = {}
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
                records=f.records,
            )
        by_topic.setdefault(f.topic, []).append(data)
    broker.metrics.fetch_latency.labels("kafka").observe(time.perf_counter() - started)
    return FetchResponse(
        responses=tuple(FetchableTopicResponse(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    )


async def handle_list_offsets(
    conn: Connection, header: RequestHeader, req: ListOffsetsRequest
) -> ListOffsetsResponse:
    broker = conn.broker
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                offset, ts = await broker.list_offset(t.name, p.partition_index, p.timestamp)
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, timestamp=ts, offset=offset, leader_epoch=0
                    )
                )
            except StrataError as exc:
                parts.append(
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=kafka_code(exc)
                    )
                )
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return ListOffsetsResponse(topics=tuple(topics))


async def handle_create_topics(
    conn: Connection, header: RequestHeader, req: CreateTopicsRequest
) -> CreateTopicsResponse:
    broker = conn.broker
    results = []
    seen: set[str] = set()
    for t in req.topics:
        if t.name in seen:
            results.append(
                CreatableTopicResult(
                    name=t.name,
                    error_code=E.INVALID_REQUEST,
                    error_message="topic named twice in one request",
                )
            )
            continue
        seen.add(t.name)
        try:
            partitions = t.num_partitions
            if t.assignments:
                if partitions != -1:
                    raise InvalidRequestError("give either num_partitions or assignments, not both")
                partitions = len(t.assignments)
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            info = broker.create_topic(  # type: ignore[attr-defined]  # dead: removed with the handler merge
                t.name, partitions, t.replication_factor, configs, validate_only=req.validate_only
            )
            effective = broker.topic_configs(info.name) if not req.validate_only else []
            results.append(
                CreatableTopicResult(
                    name=t.name,
                    topic_id=info.topic_id if not req.validate_only else ZERO_UUID,
                    num_partitions=info.partitions,
                    replication_factor=1,
                    configs=tuple(
                        CreatableTopicConfigs(
                            name=c.name,
                            value=c.value,
                            config_source=SOURCE_DEFAULT_CONFIG if c.is_default else SOURCE_TOPIC_CONFIG,
                        )
                        for c in effective
                    ),
                )
            )
        except StrataError as exc:
            results.append(
                CreatableTopicResult(name=t.name, error_code=kafka_code(exc), error_message=str(exc))
            )
    return CreateTopicsResponse(topics=tuple(results))


async def handle_delete_topics(
    conn: Connection, header: RequestHeader, req: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    broker = conn.broker
    targets: list[tuple[str | None, uuid.UUID]] = [(n, ZERO_UUID) for n in req.topic_names]
    targets += [(t.name, t.topic_id) for t in req.topics]
    out = []
    for name, topic_id in targets:
        try:
            if name is None:
                found = _topic_by_id(broker, topic_id)
                if found is None:
                    raise UnknownTopicOrPartitionError(f"unknown topic id {topic_id}")
                name = found.name
            info = broker.topic(name)
            broker.delete_topic(name)  # type: ignore[attr-defined]  # dead: removed with the handler merge
            out.append(DeletableTopicResult(name=name, topic_id=info.topic_id))
        except StrataError as exc:
            out.append(
                DeletableTopicResult(
                    name=name, topic_id=topic_id, error_code=kafka_code(exc), error_message=str(exc)
                )
            )
    return DeleteTopicsResponse(responses=tuple(out))


def _broker_configs(conn: Connection) -> dict[str, str]:
    cfg = conn.broker.config
    out = {f"log.{k}" if not k.startswith("log.") else k: v for k, v in cfg.log.to_kafka().items()}
    out.update(
        {
            "broker.id": str(cfg.broker_id),
            "log.dirs": str(cfg.data_dir / "logs"),
            "auto.create.topics.enable": "true" if cfg.auto_create_topics else "false",
            "num.partitions": str(cfg.num_partitions),
            "socket.request.max.bytes": str(cfg.max_request_bytes),
            "advertised.listeners": f"{cfg.security_protocol}://{cfg.advertised}",
        }
    )
    return out


async def handle_describe_configs(
    conn: Connection, header: RequestHeader, req: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    broker = conn.broker
    results = []
    for res in req.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        try:
            if res.resource_type == RESOURCE_TOPIC:
                entries = [
                    DescribeConfigsResourceResult(
                        name=c.name,
                        value=c.value,
                        is_default=c.is_default,
                        config_source=SOURCE_DEFAULT_CONFIG if c.is_default else SOURCE_TOPIC_CONFIG,
                    )
                    for c in broker.topic_configs(res.resource_name)
                    if keys is None or c.name in keys
                ]
            elif res.resource_type == RESOURCE_BROKER:
                if res.resource_name not in ("", str(broker.node_id)):
                    raise InvalidRequestError(f"unknown broker {res.resource_name!r}")
                entries = [
                    DescribeConfigsResourceResult(
                        name=k, value=v, read_only=True, config_source=SOURCE_STATIC_BROKER_CONFIG
                    )
                    for k, v in sorted(_broker_configs(conn).items())
                    if keys is None or k in keys
                ]
            else:
                raise InvalidRequestError(f"unsupported resource type {res.resource_type}")
            results.append(
                DescribeConfigsResult(
                    resource_type=res.resource_type, resource_name=res.resource_name, configs=tuple(entries)
                )
            )
        except StrataError as exc:
            results.append(
                DescribeConfigsResult(
                    error_code=kafka_code(exc),
                    error_message=str(exc),
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                )
            )
    return DescribeConfigsResponse(results=tuple(results))


async def handle_init_producer_id(
    conn: Connection, header: RequestHeader, req: InitProducerIdRequest
) -> InitProducerIdResponse:
    # Idempotent producers (KIP-98): a new id at epoch 0, or with v3+ (KIP-360) the same id
    # with its epoch bumped. Transactions are not supported: refused with a fatal code.
    if req.transactional_id is not None:
        return InitProducerIdResponse(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if (req.producer_id == -1) != (req.producer_epoch == -1):
        return InitProducerIdResponse(error_code=E.INVALID_REQUEST)
    try:
        pid, epoch = conn.broker.manager.producer_ids.init_producer(req.producer_id, req.producer_epoch)
    except StrataError as exc:
        return InitProducerIdResponse(error_code=kafka_code(exc))
    return InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)


def _config_resource_error(res_type: int, res_name: str, exc: StrataError) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        error_code=kafka_code(exc), error_message=str(exc), resource_type=res_type, resource_name=res_name
    )


def _alter_topic(
    conn: Connection,
    res_type: int,
    name: str,
    changes: dict[str, str | None],
    replace: bool,
    validate_only: bool,
) -> AlterConfigsResourceResponse:
    try:
        if res_type != RESOURCE_TOPIC:
            raise InvalidRequestError(f"altering resource type {res_type} is not supported; only topics")
        conn.broker.alter_topic_configs(name, changes, replace=replace, validate_only=validate_only)  # type: ignore[attr-defined]  # dead: removed with the handler merge
        return AlterConfigsResourceResponse(resource_type=res_type, resource_name=name)
    except StrataError as exc:
        return _config_resource_error(res_type, name, exc)


async def handle_alter_configs(
    conn: Connection, header: RequestHeader, req: AlterConfigsRequest
) -> AlterConfigsResponse:
    out = []
    for res in req.resources:
        changes = {c.name: c.value for c in res.configs}
        out.append(_alter_topic(conn, res.resource_type, res.resource_name, changes, True, req.validate_only))
    return AlterConfigsResponse(responses=tuple(out))


async def handle_incremental_alter_configs(
    conn: Connection, header: RequestHeader, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    out = []
    for res in req.resources:
        try:
            current = (
                {c.name: c.value for c in conn.broker.topic_configs(res.resource_name)}
                if res.resource_type == RESOURCE_TOPIC
                else {}
            )
            changes: dict[str, str | None] = {}
            for c in res.configs:
                if c.config_operation == OP_SET:
                    if c.value is None:
                        raise InvalidRequestError(f"SET of {c.name} needs a value")
                    changes[c.name] = c.value
                elif c.config_operation == OP_DELETE:
                    changes[c.name] = None
                elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
                    # list-valued configs (cleanup.policy): comma-separated items
                    base = changes.get(c.name, current.get(c.name)) or ""
                    items = [i for i in base.split(",") if i]
                    for v in (c.value or "").split(","):
                        if c.config_operation == OP_APPEND and v and v not in items:
                            items.append(v)
                        elif c.config_operation == OP_SUBTRACT and v in items:
                            items.remove(v)
                    changes[c.name] = ",".join(items)
                else:
                    raise InvalidRequestError(f"unknown config operation {c.config_operation}")
        except StrataError as exc:
            out.append(_config_resource_error(res.resource_type, res.resource_name, exc))
            continue
        out.append(
            _alter_topic(conn, res.resource_type, res.resource_name, changes, False, req.validate_only)
        )
    return IncrementalAlterConfigsResponse(responses=tuple(out))


async def handle_create_partitions(
    conn: Connection, header: RequestHeader, req: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    results = []
    for t in req.topics:
        try:
            if (
                t.assignments is not None
                and len(t.assignments) != t.count - conn.broker.topic(t.name).partitions
            ):
                raise InvalidRequestError("assignments must name every new partition")
            conn.broker.add_partitions(t.name, t.count, validate_only=req.validate_only)  # type: ignore[attr-defined]  # dead: removed with the handler merge
            results.append(CreatePartitionsTopicResult(name=t.name))
        except StrataError as exc:
            results.append(
                CreatePartitionsTopicResult(name=t.name, error_code=kafka_code(exc), error_message=str(exc))
            )
    return CreatePartitionsResponse(results=tuple(results))


async def handle_offset_for_leader_epoch(
    conn: Connection, header: RequestHeader, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    # A single node leads every partition in leader epoch 0 (what Metadata reports), and
    # stamps 0 in every batch; cluster mode has its own handler (cluster.kafka_handlers).
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                if p.current_leader_epoch > 0:
                    raise E.UnknownLeaderEpochError(f"leader epoch {p.current_leader_epoch} is newer than 0")
                epoch, end = conn.broker.manager.get_log(t.topic, p.partition).end_offset_for_epoch(
                    p.leader_epoch
                )
                parts.append(
                    OffsetForLeaderPartitionResult(partition=p.partition, leader_epoch=epoch, end_offset=end)
                )
            except StrataError as exc:
                parts.append(
                    OffsetForLeaderPartitionResult(partition=p.partition, error_code=kafka_code(exc))
                )
        topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=tuple(parts)))
    return OffsetForLeaderEpochResponse(topics=tuple(topics))


HANDLERS: dict[int, Handler] = {
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.METADATA: handle_metadata,
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
}

# Every API the codec advertises must have a handler, and vice versa.
assert set(HANDLERS) == set(APIS), set(HANDLERS) ^ set(APIS)
# every API is checked by a guard unless listed, with its reason, in UNGUARDED
assert set(APIS) == set(GUARDS) | UNGUARDED, set(APIS) ^ (set(GUARDS) | UNGUARDED)
