"""The Kafka protocol listener: asyncio TCP, one reader and one writer task per connection.

This module holds the listener, the connection, framing and dispatch only: each request
goes to its API's one handler in api.handlers (``HANDLERS``), behind the API's ACL guard
(api.security.guards) and, for Produce and Fetch, the byte-rate quotas (api.handlers.quotas).

Ordering and pipelining: a connection's requests are started as tasks in arrival order
and answered strictly in that order by the writer, which writes consecutive small
answers that are ready together (one ``send`` for a burst of pipelined answers). A
produce handler appends every partition synchronously before its first ``await``, so a
producer's pipelined batches land in the log in the order they were sent while a single
group commit can cover all of them. The number of requests in flight per connection is
bounded; reading pauses when the bound is hit (backpressure instead of unbounded memory).

Zero copy: a Fetch response is encoded into parts, bytes for headers and
``FileRegion`` objects for record data, and each region goes to the socket with
``os.sendfile`` (asyncio's ``loop.sendfile``; on uvloop, which has none, the same on a
duplicate of the socket), never through Python buffers. Large in-memory parts (remote-tier
chunks) are sent from their own buffers too, not copied into asyncio's write buffer
(``Connection._send_direct``).

Answers ready without a handler: a Metadata request asked before at this metadata view
(api.handlers.metadata_cache) and a consumer's Fetch of ready local data
(api.handlers.fetch_fast) are answered from the frame's bytes, queued as already-complete
answers (no decode, no task); everything else is decoded and handled as above.

Security (api.security): with TLS the handshake runs per connection before anything is
read, and a failed one (no client certificate, a plaintext client) is one log line. With
SASL only ApiVersions, SaslHandshake and SaslAuthenticate are served until the client
has authenticated; any other request closes the connection, as Kafka does. A failed
authentication is answered (SASL_AUTHENTICATION_FAILED) and the connection then closed.
After a SaslHandshake v0 the tokens come as bare size-prefixed frames, answered the same
way (KIP-43, before SaslAuthenticate existed); a failure there just closes the connection.

Start-up (api.startup_gate): until the broker is registered, connections are accepted
but no request is read; the first request waits for the start to complete.

Malformed input (bad frame sizes, unknown API keys, undecodable bodies, unsupported
versions other than the ApiVersions fallback) closes that connection only, with one
log line saying why; nothing is answered for the bad request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import struct
import time
import uuid
import weakref
from collections.abc import Coroutine
from typing import Any, Final

from api.answer_queue import AnswerQueue
from api.handlers import GUARDS, HANDLERS, Handler
from api.handlers.fetch_fast import FetchFastPath
from api.handlers.metadata_cache import MetadataCache
from api.handlers.produce_fast import PRODUCE_KEY, FastProduce, NoAnswer, Waiting
from api.handlers.quotas import with_fetch_quota, with_produce_quota
from api.security.guards import guard
from api.security.sasl import SaslSession
from api.startup_gate import StartupGate
from broker.broker import Broker
from broker.produce_path import ProduceOrder
from broker.security.tls import describe_handshake_error, peer_principal
from broker.security.users import UserTable
from hot.errors import CorruptLogError, StrataError
from hot.region import FileRegion
from kwire import (
    APIS,
    ApiKey,
    FrameDecoder,
    ProtocolError,
    RequestHeader,
    UnknownApiKeyError,
    UnsupportedVersionError,
    api_versions_fallback_response,
    decode_request,
    encode_frame,
    encode_request,
    encode_response,
)
from kwire.messages.fetch import (
    FetchableTopicResponse,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)

log = logging.getLogger("strata.kafka")

# What the writer awaits for each request, in order: a handler's task (or a future already
# holding the answer), a fast-path Produce waiting for its acknowledgements, or the parts of
# an answer ready when the request was read (api.handlers.produce_fast).
Answer = asyncio.Future[Any] | Waiting | list[Any]

MAX_IN_FLIGHT = 64
READ_CHUNK = 1 << 18
# Response parts at least this large bypass asyncio's write buffer (Connection._send_direct).
DIRECT_SEND_MIN = 1 << 18
# A response whose file regions add up to less than this is sent from a copy (one pread):
# below it the bytes cost less to copy than a sendfile costs to set up on the event loop
# (writer registration, a future, a drain: ~90 CPU-µs of a small Fetch, bench_request_cost),
# and the copy joins the other small answers' single write. Tail-following consumers'
# fetches are this small; catch-up reads (max.partition.fetch.bytes 1 MiB) still go zero-copy.
COPY_REGIONS_BELOW = 64 << 10

METADATA_KEY = ApiKey.METADATA.to_bytes(2, "big")  # a frame's first two bytes: its API key
FETCH_KEY = ApiKey.FETCH.to_bytes(2, "big")
TLS_HANDSHAKE_TIMEOUT = 10.0
# What a client may send on a SASL listener before it has authenticated.
PRE_AUTH_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class _Handled:
    """A fast path took the frame and there is nothing to queue (``Connection._fast``)."""


_HANDLED: Final = _Handled()
_SIZE: Final = struct.Struct(">i")  # a frame's size prefix


class KafkaServer:
    def __init__(
        self,
        broker: Broker,
        *,
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanisms: tuple[str, ...] = (),
        users: UserTable | None = None,
        inter_broker: bool = False,
        external: bool = False,
        gate: StartupGate | None = None,
    ) -> None:
        self.broker = broker
        # Until it opens, connections are accepted but no request is read (api.startup_gate).
        self.gate = gate
        # The external client listener: Metadata and FindCoordinator name the brokers'
        # external addresses (broker.metadata.BrokerRegistration.client_address).
        self.external = external
        # The internal listener: its connections are the inter-broker principal (broker.security.authz).
        self.inter_broker = inter_broker
        self.ssl_context = ssl_context
        self.sasl_mechanisms = sasl_mechanisms
        self.users = users
        if sasl_mechanisms and users is None:
            raise ValueError("SASL needs a user store")
        # Every API has its one handler in api.handlers, behind its API's ACL guard
        # (api.security.guards).
        self.handlers: dict[int, Handler] = {key: guard(key, h, GUARDS) for key, h in HANDLERS.items()}
        # Byte-rate quotas (api.handlers.quotas) around Produce and Fetch.
        self.handlers[ApiKey.PRODUCE] = with_produce_quota(self.handlers[ApiKey.PRODUCE])
        self.handlers[ApiKey.FETCH] = with_fetch_quota(self.handlers[ApiKey.FETCH])
        # Encoded Metadata answers reused while the view stands still (api.handlers.metadata_cache).
        self.metadata_cache = MetadataCache()
        self.handlers[ApiKey.METADATA] = self.metadata_cache.wrap(self.handlers[ApiKey.METADATA])
        # Plain Produce requests from the frame's bytes to the append (api.handlers.produce_fast).
        self.produce_fast = FastProduce()
        # Fetches of ready local data answered from the frame (api.handlers.fetch_fast).
        self.fetch_fast = FetchFastPath(COPY_REGIONS_BELOW)
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()

    async def start(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._accept, sock=sock, limit=READ_CHUNK)
        global _fetch_codecs_warmed
        if not _fetch_codecs_warmed:  # once per process, whatever the number of listeners
            _fetch_codecs_warmed = True
            task = asyncio.create_task(_warm_fetch_codecs(), name="strata-warm-fetch-codecs")
            _background.add(task)
            task.add_done_callback(_background.discard)

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
        self.pending: AnswerQueue[tuple[RequestHeader, Answer] | None] = AnswerQueue(MAX_IN_FLIGHT)
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
        # The writer waits for the queue with nothing of its own to write (_answer_in_place).
        self._writer_idle = False
        self._muted_until = 0.0  # quota throttling: no reads before this (time.monotonic)
        # The connection's produce requests append in the order sent (broker.produce_path).
        self.produce_order = ProduceOrder()
        # The last Produce the general path took (api.handlers.produce_fast.FastProduce.usable).
        self.general_produce: asyncio.Future[Any] | None = None
        # Set by a SaslHandshake v0: frames are raw SASL tokens until authenticated.
        self.raw_sasl: RequestHeader | None = None
        # The latest handler's task, weakly: a done task's answer (remote-tier buffers,
        # say) is not kept alive by it; a task collected is done.
        self._last_task: weakref.ref[asyncio.Task[Any]] | None = None

    async def run(self) -> None:
        self._read_task = asyncio.current_task()  # type: ignore[assignment]
        gate = self.server.gate
        if gate is not None and not gate.is_open:
            # The start is not complete: the client's first request waits rather than get
            # a wrong answer (api.startup_gate). Closing the listener cancels this wait.
            try:
                await gate.wait()
            except asyncio.CancelledError:
                self.abort()
                return
            if not self._reading:
                self.abort()
                return
        self._write_task = asyncio.create_task(self._write_loop())
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

    @property
    def ever_throttled(self) -> bool:
        """Whether a quota ever muted this connection (none did: no throttle time to report)."""
        return self._muted_until != 0.0

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
            pending = self.pending
            while (frame := self.decoder.next_frame()) is not None:
                if self._muted_until:  # ever throttled (quotas): no coroutine per frame otherwise
                    await self._unmuted()
                started = time.perf_counter()
                # The fast paths answer in place, with no coroutine or future per request
                # (issue 34 round 6); the rest goes through _dispatch.
                item = self._fast(frame, started) if self.raw_sasl is None else None
                if item is None:
                    await self._dispatch(frame, started)
                elif not isinstance(item, _Handled) and not self._answer_in_place(item, pending):
                    if pending.full():  # MAX_IN_FLIGHT reached: reading waits for the writer
                        await pending.put(item)
                    else:
                        pending.put_nowait(item)

    def _answer_in_place(
        self, item: tuple[RequestHeader, Answer], pending: AnswerQueue[tuple[RequestHeader, Answer] | None]
    ) -> bool:
        """Writes a ready one-part answer to the transport here, when it is the only thing
        to answer: the writer idle with nothing queued or buffered, no other request in
        the bytes read, and the transport's buffer empty (so nothing can pile up without
        the writer's drain). What one request in flight meets every time: its answer goes
        out without waking the writer task (issue 34 round 6: depth 1). False: queue it."""
        if not self._writer_idle or self._close_after_answer:
            return False
        answer = item[1]
        if type(answer) is not list or len(answer) != 1 or type(answer[0]) is not bytes:
            return False
        body = answer[0]
        if (
            len(body) >= DIRECT_SEND_MIN
            or not pending.empty()
            or self.decoder.buffered
            or self.writer.transport.get_write_buffer_size()
        ):
            return False
        try:
            self.writer.write(_SIZE.pack(len(body)) + body)
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.info("client %s went away while being answered: %s", self.peer, exc)
            self.stop_reading()
        return True

    def _fast(self, frame: bytes, started: float) -> tuple[RequestHeader, Answer] | _Handled | None:
        """A fast path's answer to ``frame`` for the writer's queue (a ready answer is its
        parts: no future), ``_HANDLED`` when there is nothing to queue (acks=0, or the
        connection is closing), None: the general path's (``_dispatch``)."""
        key = frame[:2]
        if key == PRODUCE_KEY:
            try:
                fast = self.server.produce_fast.answer(self, frame, started)
            except Exception:  # as a failed handler: one log line, this connection closed
                log.exception("closing connection from %s: produce (fast path) failed", self.peer)
                self.stop_reading()
                return _HANDLED
            if fast is None:
                return None
            # appended; answered now, later, or (acks=0) never
            return _HANDLED if isinstance(fast, NoAnswer) else fast
        if key == FETCH_KEY:
            return self._fetch_fast(frame, started)
        if key == METADATA_KEY and (self.sasl is None or self.sasl.authenticated):
            # the same request as one answered at this view
            return self.server.metadata_cache.answer_frame(self, frame, started)
        return None

    async def _dispatch(self, frame: bytes, started: float) -> None:
        """The general path: the frame decoded and its handler's task queued."""
        if self.raw_sasl is not None:
            await self._enqueue(self.raw_sasl, asyncio.create_task(self._raw_sasl_token(frame)))
            return
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
        if header.api_key == ApiKey.METADATA:
            cached = self.server.metadata_cache.answer(self, header, request, frame, started)
            if cached is not None:
                await self._enqueue(header, _done(cached))
                return
        handler = self.server.handlers[header.api_key]
        admit = getattr(handler, "admit", None)
        if admit is not None:  # quota accounting on arrival (api.handlers.quotas)
            admit(self, request)
        task = asyncio.create_task(self._run_handler(handler, header, request, started))
        if header.api_key == ApiKey.PRODUCE:
            self.general_produce = task
        self._last_task = weakref.ref(task)
        await self._enqueue(header, task)

    def _fetch_fast(self, frame: bytes, started: float) -> tuple[RequestHeader, Answer] | None:
        """The answer to a Fetch of ready local data from its frame (api.handlers.fetch_fast)
        for the writer's queue; None: decode it and run the handler. Only once the latest
        handler's task is done (tasks start in order, so every earlier one has started
        too): this fetch then sees what they did before their first wait (a Produce's
        append), as its own task would. A fast-path Produce appended when it was read,
        before this frame."""
        if self.sasl is not None and not self.sasl.authenticated:
            return None
        last = self._last_task() if self._last_task is not None else None
        if last is not None and not last.done():
            return None
        ready = self.server.fetch_fast.answer_frame(self, frame, started)
        if ready is None:
            return None
        header, answer = ready
        if isinstance(answer, list):
            return header, answer
        # A long poll parked on the fast path: its task, as a handler's would be.
        task = asyncio.create_task(self._fetch_parked(answer, frame, started))
        self._last_task = weakref.ref(task)
        return header, task

    async def _fetch_parked(
        self, parked: Coroutine[Any, Any, list[Any] | None], frame: bytes, started: float
    ) -> Any:
        """A long poll's answer from the fast path, or, when what woke it is the general
        path's to answer (a partition moved, a topic went), the handler's."""
        parts = await parked
        if parts is not None:
            return parts
        header, request = decode_request(frame)
        handler = self.server.handlers[header.api_key]
        admit = getattr(handler, "admit", None)
        if admit is not None:
            admit(self, request)
        return await self._run_handler(handler, header, request, started)

    async def _enqueue(self, header: RequestHeader, task: Answer) -> None:
        if self.pending.full():  # MAX_IN_FLIGHT reached: reading waits for the writer
            await self.pending.put((header, task))
        else:
            self.pending.put_nowait((header, task))

    async def _run_handler(
        self, handler: Handler, header: RequestHeader, request: Any, started: float
    ) -> Any:
        response = await handler(self, header, request)
        api = APIS[header.api_key].name
        metrics = self.broker.metrics
        metrics.labelled(metrics.request_latency, api).observe(time.perf_counter() - started)
        metrics.response_errors.count(api, response)
        if response is None:
            return None
        return encode_response(header, response)

    async def _write_loop(self) -> None:
        """Answers the accepted requests in order. Consecutive small responses that are
        already complete go out in one write (one ``send`` for a burst of pipelined
        answers instead of one each); a response not complete yet first flushes those
        before it, so no answer waits for a later request's work."""
        loop = asyncio.get_running_loop()
        out: list[bytes | bytearray | memoryview] = []  # small complete frames, not written yet
        nxt: tuple[RequestHeader, Answer] | None = None
        have_next = False  # nxt holds the queue's next item (None: the end)
        while True:
            item: tuple[RequestHeader, Answer] | None
            if have_next:
                item, nxt, have_next = nxt, None, False
            elif out and not self.pending.empty():
                item = self.pending.get_nowait()
            else:
                if out and not await self._write_out(out):
                    return
                self._writer_idle = True  # nothing of its own to write: _answer_in_place may
                try:
                    item = await self.pending.get()
                finally:
                    self._writer_idle = False
            if item is None:
                if out:
                    await self._write_out(out)
                return
            header, task = item
            parts: Any
            try:
                if isinstance(task, list):  # an answer ready when read (the fast paths)
                    parts = task
                    if len(parts) == 1 and type(parts[0]) is bytes and not self._close_after_answer:
                        body = parts[0]
                        if len(body) < DIRECT_SEND_MIN:
                            # One small bytes part (a one-partition answer): its size and
                            # itself into the batch, without encode_frame's copy and checks.
                            out.append(_SIZE.pack(len(body)))
                            out.append(body)
                            if not self.pending.empty():
                                nxt, have_next = self.pending.get_nowait(), True
                            continue
                else:
                    if out and not task.done() and not await self._write_out(out):
                        return
                    parts = await task
            except asyncio.CancelledError:
                raise
            except Exception:
                if out:
                    await self._write_out(out)
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
            frame = encode_frame(parts)
            if len(frame) > 1:
                try:
                    frame = _copy_small_regions(frame)
                except StrataError as exc:  # a segment closed or short while being read
                    if out:
                        await self._write_out(out)
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    self.stop_reading()
                    return
            if not self._close_after_answer and _small(frame):
                out.extend(frame)  # type: ignore[arg-type]
                if not self.pending.empty():
                    nxt, have_next = self.pending.get_nowait(), True
                continue
            if out and not await self._write_out(out):
                return
            try:
                await self._write_frame(loop, frame)
            except (ConnectionError, OSError, RuntimeError) as exc:
                log.info("client %s went away while being answered: %s", self.peer, exc)
                self.stop_reading()
                return
            except StrataError as exc:  # a segment closed or short while being read
                log.warning("closing connection from %s: %s", self.peer, exc)
                self.stop_reading()
                return
            if self._close_after_answer:  # failed authentication: answered, now closed
                self.stop_reading()
                return

    async def _write_out(self, out: list[bytes | bytearray | memoryview]) -> bool:
        """Writes the collected small frames at once and empties ``out``; False (reading
        stopped) if the client went away."""
        try:
            self.writer.writelines(out)
            out.clear()
            await self.writer.drain()
        except (ConnectionError, OSError, RuntimeError) as exc:
            out.clear()
            log.info("client %s went away while being answered: %s", self.peer, exc)
            self.stop_reading()
            return False
        return True

    async def _write_frame(self, loop: asyncio.AbstractEventLoop, frame: list[Any]) -> None:
        """One response: bytes through the transport (large ones directly), file regions
        with sendfile (a plain read through TLS)."""
        for part in frame:
            if isinstance(part, (bytes, bytearray, memoryview)):
                if len(part) >= DIRECT_SEND_MIN and not self.tls:
                    await self._send_direct(loop, part)
                else:
                    self.writer.write(part)
            else:
                region: FileRegion = part
                await self.writer.drain()
                if self.tls:
                    # No sendfile through TLS; asyncio's fallback would seek the shared
                    # file object and swap the protocol. pread-based, whole batches.
                    self.writer.write(region.read())
                else:
                    await self._sendfile(loop, region)
        await self.writer.drain()

    async def _sendfile(self, loop: asyncio.AbstractEventLoop, region: FileRegion) -> None:
        """``region`` to the socket with ``os.sendfile``: asyncio's own ``loop.sendfile``
        where the loop is asyncio's; on other loops (uvloop has no ``sendfile``) the same
        done here on the connection's duplicate socket, after the transport's buffer
        drained (order). A file shorter than its region is a CorruptLogError: the stream
        would be out of step."""
        if isinstance(loop, asyncio.BaseEventLoop):
            await loop.sendfile(self.writer.transport, region.file, region.position, region.length)
            return
        await self._drain_all()
        sock = self._direct_socket()
        out_fd = sock.fileno()
        in_fd = region.file.fileno()
        pos = region.position
        end = pos + region.length
        while pos < end:
            try:
                n = os.sendfile(out_fd, in_fd, pos, end - pos)
            except BlockingIOError:
                await self._writable(loop, out_fd)
                continue
            if n == 0:
                raise CorruptLogError(region.path, pos, "file ends before the end of the region")
            pos += n

    @staticmethod
    async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_writer(fd, wake)
        try:
            await ready
        finally:
            loop.remove_writer(fd)

    async def _drain_all(self) -> None:
        """Until the transport's buffer is empty, not just below its high-water mark."""
        transport = self.writer.transport
        if transport.get_write_buffer_size():
            transport.set_write_buffer_limits(high=0)  # drain() now waits for an empty buffer
            try:
                await self.writer.drain()
            finally:
                transport.set_write_buffer_limits()

    def _direct_socket(self) -> socket.socket:
        """A duplicate of the connection's socket, non-blocking, made once (asyncio refuses
        ``sock_*`` calls on a transport's own fd; uvloop's transport socket cannot ``dup``)."""
        if self._direct is None:
            fd = self.writer.get_extra_info("socket").fileno()
            self._direct = socket.socket(fileno=os.dup(fd))
            self._direct.setblocking(False)
        return self._direct

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
        await self._drain_all()
        await loop.sock_sendall(self._direct_socket(), part)

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


_fetch_codecs_warmed = False
# Fetch versions whose codecs are built at start: what current clients send (librdkafka 2.x
# v11+, the Java client of Kafka 4.x v17); an older one builds its own on first use.
WARM_FETCH_FROM: Final = 11
_background: set[asyncio.Task[None]] = set()


async def _warm_fetch_codecs() -> None:
    """Build the Fetch request and response codecs of every version now, one version at a
    time between other work, instead of on the first Fetch that takes the general path.
    Why: kwire builds a codec on its first use, about 7 ms to decode a Fetch v12 request
    and 5 ms to encode its response here (2 ms per direction for each further version).
    Fetches of local data take the fast path, which needs no codec; the first remote-tier
    read after a restart paid those 13 ms on top of its GETs (issue 39, sixth round).
    Newest versions first, down to ``WARM_FETCH_FROM``: about 45 ms of CPU in all, spread
    over the start-up."""
    spec = APIS[ApiKey.FETCH]
    for version in range(spec.max_version, max(spec.min_version, WARM_FETCH_FROM) - 1, -1):
        await asyncio.sleep(0)
        try:
            _warm_fetch_codec(version)
        except Exception as e:  # an optimisation only: the first Fetch builds what is missing
            log.debug("warming the Fetch v%d codecs: %s", version, e)


def _warm_fetch_codec(version: int) -> None:
    """Decode a Fetch request and encode a Fetch response of ``version`` (one partition,
    by name and topic id, so every version's fields are there)."""
    topic_id = uuid.UUID(int=1)
    part = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1)
    topic = FetchTopic(topic="warm", topic_id=topic_id, partitions=(part,))
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1, topics=(topic,))
    decode_request(encode_request(ApiKey.FETCH, version, 0, None, request))
    answer = FetchableTopicResponse(
        topic="warm", topic_id=topic_id, partitions=(FetchPartitionData(partition_index=0),)
    )
    encode_response(RequestHeader(ApiKey.FETCH, version, 0, None), FetchResponse(responses=(answer,)))


def _copy_small_regions(frame: list[Any]) -> list[Any]:
    """``frame`` with its file regions read into bytes when they are small together
    (``COPY_REGIONS_BELOW``); the frame itself otherwise."""
    size = 0
    for part in frame:
        if not isinstance(part, (bytes, bytearray, memoryview)):
            size += part.length
            if size >= COPY_REGIONS_BELOW:
                return frame
    return [p if isinstance(p, (bytes, bytearray, memoryview)) else p.read() for p in frame]


def _small(frame: list[Any]) -> bool:
    """Whether a response frame is only bytes, and few enough to be batched with others."""
    size = 0
    for part in frame:
        if not isinstance(part, (bytes, bytearray, memoryview)):
            return False
        size += len(part)
    return size < DIRECT_SEND_MIN


def _done(value: Any) -> asyncio.Future[Any]:
    """A future already holding ``value`` (an answer ready without a handler), for the
    queue of answers: no task to schedule."""
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut
