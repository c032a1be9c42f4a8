"""``LocalStoreClient``: a ``MetadataStore`` served over the local store socket
(``broker.store_socket`` describes the protocol and the server).

Concurrency: a small pool of connections, each carrying one request and its reply at a
time (the protocol has no request ids): a call takes an idle connection or opens one, at
most ``POOL_SIZE`` at once (more calls wait for one), and puts it back after the reply.
A connection whose call failed or timed out is closed (its stream state is unknown); one
the server has closed (idle) or idle for over half the server's ``IDLE_S`` is dropped
before use, so a request is never written to a connection the server is about to hang up.
Each watch has a connection of its own (a stream of event frames).

Errors: every failure is a ``MetadataStoreError`` (``LeaseNotFoundError`` when the store
says so), retriable when the store is unreachable or slow; the server's errors keep the
``retriable`` flag it sends. A connect that finds no socket or a refusing one (a server
starting, or a full backlog) is retried until the call's ``timeout``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from broker.metadata_store import (
    Compare,
    KeyValue,
    Lease,
    LeaseKeeper,
    LeaseNotFoundError,
    Op,
    TxnResult,
    WatchReset,
    WatchUpdate,
)
from broker.store_protocol import (
    CALL_TIMEOUT,
    IDLE_S,
    address,
    b64,
    cmp_out,
    event_in,
    frame,
    kv_in,
    op_out,
    read_frame,
    socket_path,
)
from hot.errors import InvalidConfigError, MetadataStoreError

log = logging.getLogger("strata.cluster.store_client")

POOL_SIZE: Final = 8
# Back-off of a connect that is refused, and of a watch that lost its connection.
_RETRY_MIN: Final = 0.02
_RETRY_MAX: Final = 0.5
_TRANSIENT: Final = (ConnectionRefusedError, BlockingIOError, FileNotFoundError, InterruptedError)


@dataclass(slots=True)
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    last_used: float = field(default=0.0)

    def usable(self, now: float) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing() or now - self.last_used > IDLE_S / 2)


class LocalStoreClient:
    """A ``MetadataStore`` served by the process holding the store (module docstring).

    ``LocalStoreClient(meta_dir)`` reaches ``<meta_dir>/store.sock`` (a single node's
    admin socket); ``LocalStoreClient(path=socket)`` any socket path."""

    def __init__(
        self,
        meta_dir: Path | None = None,
        *,
        timeout: float = CALL_TIMEOUT,
        path: Path | None = None,
        pool_size: int = POOL_SIZE,
    ) -> None:
        if path is None:
            if meta_dir is None:
                raise InvalidConfigError("LocalStoreClient needs a meta dir or a socket path")
            path = socket_path(meta_dir)
        if timeout <= 0:
            raise InvalidConfigError(f"store socket timeout must be positive, got {timeout}")
        self.path = path
        self.timeout = timeout
        self.cluster: str | None = None  # the serving process's cluster id (``hello``)
        self._idle: list[_Conn] = []
        self._slots = asyncio.Semaphore(pool_size)
        self._watches: set[asyncio.StreamWriter] = set()
        self._closed = False

    async def connect(self) -> LocalStoreClient:
        """Reach the server (``hello``); idempotent."""
        if self.cluster is None:
            reply = await self._call({"op": "hello"})
            self.cluster = str(reply["cluster"])
        return self

    async def __aenter__(self) -> LocalStoreClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Close every connection; calls in flight fail and watches end."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.writer.close()
        for writer in list(self._watches):
            writer.close()

    # --- connections -------------------------------------------------------------------------

    async def _open(self, deadline: float) -> _Conn:
        """A new connection, retrying a refused or absent socket until ``deadline``."""
        loop = asyncio.get_running_loop()
        delay = _RETRY_MIN
        while True:
            try:
                with address(self.path) as addr:
                    reader, writer = await asyncio.open_unix_connection(addr)
                return _Conn(reader, writer, loop.time())
            except _TRANSIENT as exc:
                if loop.time() + delay >= deadline:
                    raise self._unreachable(exc) from None
            except OSError as exc:
                raise self._unreachable(exc) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)

    def _unreachable(self, exc: OSError) -> MetadataStoreError:
        return MetadataStoreError(
            f"cannot reach the broker's admin socket {self.path}: {exc.strerror or exc}"
        )

    async def _take(self, deadline: float) -> _Conn:
        now = asyncio.get_running_loop().time()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable(now):
                return conn
            conn.writer.close()
        return await self._open(deadline)

    def _give(self, conn: _Conn) -> None:
        if self._closed:
            conn.writer.close()
            return
        conn.last_used = asyncio.get_running_loop().time()
        self._idle.append(conn)

    async def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._closed:
            raise MetadataStoreError(f"the client of {self.path} is closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        try:
            async with asyncio.timeout_at(deadline), self._slots:
                conn = await self._take(deadline)
                try:
                    conn.writer.write(frame(request))
                    await conn.writer.drain()
                    reply = await read_frame(conn.reader)
                    if reply is None:
                        raise ConnectionResetError("the server closed the connection")
                except BaseException:
                    conn.writer.close()  # a timeout or an error mid-call: the stream is unknown
                    raise
                self._give(conn)
        except TimeoutError:
            raise MetadataStoreError(
                f"the broker did not answer on {self.path} within {self.timeout:g} s"
            ) from None
        except (OSError, asyncio.IncompleteReadError, ValueError, InvalidConfigError) as exc:
            raise MetadataStoreError(f"the broker's admin socket {self.path} failed: {exc}") from None
        if not reply.get("ok"):
            kind = LeaseNotFoundError if reply.get("kind") == "lease_not_found" else MetadataStoreError
            error = kind(str(reply.get("error", "unknown error")))
            error.retriable = bool(reply.get("retriable", False))
            raise error
        return reply

    # --- MetadataStore -----------------------------------------------------------------------

    async def ping(self) -> int:
        return int((await self._call({"op": "hello"}))["revision"])

    async def get(self, key: bytes) -> KeyValue | None:
        raw = (await self._call({"op": "get", "key": b64(key)}))["kv"]
        return None if raw is None else kv_in(raw)

    async def get_prefix(self, prefix: bytes) -> tuple[tuple[KeyValue, ...], int]:
        reply = await self._call({"op": "get_prefix", "key": b64(prefix)})
        return tuple(kv_in(kv) for kv in reply["kvs"]), int(reply["revision"])

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult:
        reply = await self._call(
            {
                "op": "txn",
                "compare": [cmp_out(c) for c in compare],
                "success": [op_out(o) for o in success],
                "failure": [op_out(o) for o in failure],
            }
        )
        reads = tuple(tuple(kv_in(kv) for kv in read) for read in reply["reads"])
        return TxnResult(bool(reply["succeeded"]), int(reply["revision"]), reads)

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        reply = await self._call({"op": "put", "key": b64(key), "value": b64(value), "lease": lease})
        return int(reply["revision"])

    async def delete(self, key: bytes) -> bool:
        return bool((await self._call({"op": "delete", "key": b64(key)}))["deleted"])

    async def delete_prefix(self, prefix: bytes) -> int:
        return int((await self._call({"op": "delete_prefix", "key": b64(prefix)}))["deleted"])

    async def compact(self, revision: int) -> None:
        await self._call({"op": "compact", "revision": revision})

    async def grant_lease(self, ttl: int) -> Lease:
        reply = await self._call({"op": "grant_lease", "ttl": ttl})
        return Lease(int(reply["id"]), int(reply["ttl"]))

    async def refresh_lease(self, lease_id: int) -> int:
        return int((await self._call({"op": "refresh_lease", "id": lease_id}))["ttl"])

    async def lease_ttl(self, lease_id: int) -> int:
        return int((await self._call({"op": "lease_ttl", "id": lease_id}))["ttl"])

    async def revoke_lease(self, lease_id: int) -> bool:
        return bool((await self._call({"op": "revoke_lease", "id": lease_id}))["revoked"])

    def keep_alive(self, lease: Lease, *, interval: float | None = None) -> LeaseKeeper:
        return LeaseKeeper(self, lease, interval=interval)

    async def watch_prefix(
        self, prefix: bytes, *, start_revision: int | None = None
    ) -> AsyncGenerator[WatchUpdate, None]:
        """As ``EtcdClient.watch_prefix``, on a connection of its own: a ``WatchReset``
        first without ``start_revision``, then every change. A lost connection is opened
        again (with back-off, never raising) and the watch resumed where it stopped: from
        the revision of the last event delivered, skipping the events of that revision
        already delivered (a transaction's events may have been split by the loss); the
        server re-lists (``WatchReset``) when it no longer holds that revision. The
        iterator ends when the client is closed."""
        resume = start_revision  # None: start with a listing
        seen = 0  # events of revision ``resume`` already delivered
        delay = _RETRY_MIN
        loop = asyncio.get_running_loop()
        while not self._closed:
            try:
                conn = await self._open(loop.time() + self.timeout)
            except MetadataStoreError as exc:
                log.debug("watch %r: %s; retrying", prefix, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)
                continue
            self._watches.add(conn.writer)
            skip = seen  # the server replays revision ``resume`` whole: these were delivered
            try:
                conn.writer.write(frame({"op": "watch", "prefix": b64(prefix), "start_revision": resume}))
                await conn.writer.drain()
                while True:
                    doc = await read_frame(conn.reader)  # no bound: a watch waits for changes
                    if doc is None:
                        break
                    if not doc.get("ok", True):
                        log.warning("watch %r refused: %s", prefix, doc.get("error"))
                        break
                    delay = _RETRY_MIN
                    if "reset" in doc:
                        revision = int(doc["revision"])
                        resume, seen, skip = revision + 1, 0, 0
                        yield WatchReset(tuple(kv_in(raw) for raw in doc["reset"]), revision)
                        continue
                    for raw in doc["events"]:
                        event = event_in(raw)
                        revision = event.kv.mod_revision
                        if resume is not None and revision < resume:
                            continue
                        if revision == resume and skip > 0:
                            skip -= 1
                            continue
                        yield event
                        if revision == resume:
                            seen += 1
                        else:
                            resume, seen = revision, 1
            except (OSError, asyncio.IncompleteReadError, ValueError, InvalidConfigError) as exc:
                if not self._closed:
                    log.info("watch %r interrupted (%s); resuming from revision %s", prefix, exc, resume)
            finally:
                self._watches.discard(conn.writer)
                conn.writer.close()
            if not self._closed:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)


if TYPE_CHECKING:  # the seam's structural check, for mypy
    from broker.metadata_store import MetadataStore

    _check: type[MetadataStore] = LocalStoreClient
