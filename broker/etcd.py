"""A thin asyncio wrapper over the etcd v3 client library (aetcd): the only module importing it.

Everything above this module sees plain frozen dataclasses (``KeyValue``, ``Compare``,
``Put``/``Delete``/``Get``, ``TxnResult``, ``WatchEvent``/``WatchReset``) and the Strata
error hierarchy: every library or gRPC failure is converted here into
``MetadataStoreError`` (retriable), or ``LeaseNotFoundError`` when etcd says a lease no
longer exists.

No call can hang: every unary call carries a gRPC deadline of ``timeout`` seconds and is
also bounded by ``asyncio.wait_for``, and the channel reconnects quickly (100 ms to 1 s
back-off) once etcd is back. A watch is a long-lived iterator that outlives etcd crashes:
it re-watches from the last revision it delivered + 1, and when that revision has been
compacted away it re-lists the prefix (in pages: ``list_prefix``) and yields a ``WatchReset``
snapshot instead.

Several endpoints (``host:port,host:port``) are resolved to IPv4 addresses at connect
time and handed to gRPC as one ``ipv4:`` target, whose pick-first policy moves to the
next address when the current one fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import aetcd

from broker.etcd_lease import ThreadLeaseKeeper
from broker.metadata_store import (
    Compare,
    CompareTarget,
    Delete,
    Get,
    KeyValue,
    Lease,
    LeaseNotFoundError,
    Op,
    Put,
    TxnResult,
    WatchEvent,
    WatchEventType,
    WatchReset,
    WatchUpdate,
    prefix_end,
)
from hot.errors import InvalidConfigError, MetadataStoreError

log = logging.getLogger("strata.cluster.etcd")

T = TypeVar("T")

DEFAULT_PORT: Final = 2379
DEFAULT_TIMEOUT: Final = 5.0
_RETRY_MIN: Final = 0.05
_RETRY_MAX: Final = 1.0
# Keys per range of a watch's listing (``list_prefix``): 100,000 partition states read in
# one range were one 15 MiB message converted in one piece (seconds of the event loop).
LIST_PAGE_KEYS: Final = 2048

# gRPC's default reconnect back-off grows to 120 s: far too slow to notice that etcd is
# back. Keepalive pings detect a frozen etcd under a long-lived watch stream; etcd refuses
# pings more often than every 5 s, and pings without an open stream.
# "grpc.min_reconnect_backoff_ms" is not part of the back-off: gRPC core uses it as the
# minimum time a connection attempt gets to finish its handshake (HTTP/2 SETTINGS). Set
# per client to its call timeout (``EtcdClient.connect``): at 100 ms a loaded machine or an
# etcd stalled for a moment failed every call at once ("connection attempt timed out
# before receiving SETTINGS frame") instead of within the call's deadline.
_CHANNEL_OPTIONS: Final[dict[str, Any]] = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.keepalive_permit_without_calls": 0,
    "grpc.max_receive_message_length": 256 << 20,
}


# --- endpoints ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """``host:port,host:port`` (port 2379 when absent; IPv6 as ``[addr]:port``)."""
    endpoints: list[Endpoint] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise InvalidConfigError(f"etcd endpoints {text!r}: empty entry")
        for prefix in ("http://", "https://"):
            if item.startswith(prefix):
                if prefix == "https://":
                    raise InvalidConfigError(f"etcd endpoint {item!r}: TLS is not supported")
                item = item[len(prefix) :]
        port_text: str | None = None
        if item.startswith("["):
            host, sep, rest = item[1:].partition("]")
            if not sep or (rest and not rest.startswith(":")):
                raise InvalidConfigError(f"etcd endpoint {raw!r}: bad IPv6 literal")
            port_text = rest[1:] if rest else None
        elif item.count(":") == 1:
            host, _, port_text = item.partition(":")
        elif ":" in item:
            raise InvalidConfigError(f"etcd endpoint {raw!r}: write IPv6 addresses as [addr]:port")
        else:
            host = item
        if not host:
            raise InvalidConfigError(f"etcd endpoint {raw!r}: empty host")
        port = DEFAULT_PORT
        if port_text is not None:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise InvalidConfigError(f"etcd endpoint {raw!r}: bad port {port_text!r}")
            port = int(port_text)
        endpoints.append(Endpoint(host, port))
    return tuple(endpoints)


async def _grpc_target(endpoints: Sequence[Endpoint]) -> tuple[str, int]:
    """(host, port) for the client, which builds its target as ``f"{host}:{port}"``."""
    if len(endpoints) == 1:
        e = endpoints[0]
        return (f"[{e.host}]" if ":" in e.host else e.host), e.port
    loop = asyncio.get_running_loop()
    addresses: list[str] = []
    for e in endpoints:
        try:
            ipaddress.IPv4Address(e.host)
            addresses.append(f"{e.host}:{e.port}")
            continue
        except ValueError:
            pass
        try:
            infos = await loop.getaddrinfo(e.host, e.port, family=socket.AF_INET, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise InvalidConfigError(f"etcd endpoint {e}: cannot resolve to an IPv4 address: {exc}") from exc
        addresses.append(f"{infos[0][4][0]}:{e.port}")
    # The last ":port" is split off again by the client's f"{host}:{port}".
    joined = "ipv4:" + ",".join(addresses)
    head, _, tail = joined.rpartition(":")
    return head, int(tail)


# --- values ---------------------------------------------------------------------------------


def _kv(raw: Any) -> KeyValue:
    return KeyValue(
        key=bytes(raw.key),
        value=bytes(raw.value),
        create_revision=int(raw.create_revision),
        mod_revision=int(raw.mod_revision),
        version=int(raw.version),
        lease=int(raw.lease),
    )


# Failures of the library and of gRPC under it; anything else is a bug and propagates.
_LIBRARY_ERRORS: Final[tuple[type[BaseException], ...]] = (
    aetcd.ClientError,
    aetcd.rpc.RpcError,
    aetcd.rpc.BaseError,
    OSError,
    TimeoutError,
)


def _convert(exc: BaseException, what: str) -> MetadataStoreError:
    text = str(exc) or type(exc).__name__
    if "lease not found" in text:
        return LeaseNotFoundError(f"etcd {what}: {text}")
    if isinstance(exc, TimeoutError):
        text = "timed out"
    return MetadataStoreError(f"etcd {what} failed: {text}")


class EtcdClient:
    """One connection (gRPC channel) to an etcd cluster."""

    def __init__(self, endpoints: str | Sequence[Endpoint], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.endpoints = parse_endpoints(endpoints) if isinstance(endpoints, str) else tuple(endpoints)
        if not self.endpoints:
            raise InvalidConfigError("no etcd endpoints")
        if timeout <= 0:
            raise InvalidConfigError(f"etcd timeout must be positive, got {timeout}")
        self.timeout = timeout
        self._client: Any = None
        self._closed = False
        # The channel's target and options, for the lease keeper's own channel.
        self._target = ""
        self._options: dict[str, Any] = {}

    async def connect(self) -> EtcdClient:
        """Open the channel. No I/O reaches etcd yet: use ``ping`` to check it answers."""
        if self._closed:
            raise MetadataStoreError("etcd client is closed")
        if self._client is None:
            host, port = await _grpc_target(self.endpoints)
            options = {
                **_CHANNEL_OPTIONS,
                "grpc.min_reconnect_backoff_ms": max(100, int(self.timeout * 1000)),
            }
            # The library's deadline is an int in its signature, but gRPC takes float seconds.
            client = aetcd.Client(host=host, port=port, timeout=self.timeout, options=options)
            self._target, self._options = f"{host}:{port}", options
            try:
                await client.connect()
            except _LIBRARY_ERRORS as exc:
                raise _convert(exc, "connect") from exc
            self._client = client
        return self

    async def close(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(*_LIBRARY_ERRORS):
                await asyncio.wait_for(client.close(), self.timeout)

    async def __aenter__(self) -> EtcdClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _require(self) -> Any:
        if self._client is None:
            raise MetadataStoreError(
                "etcd client is closed" if self._closed else "etcd client is not connected"
            )
        return self._client

    async def _call(self, what: str, fn: Callable[[Any], Awaitable[T]]) -> T:
        client = self._require()
        try:
            # The gRPC deadline normally fires first; wait_for bounds whatever it does not cover.
            return await asyncio.wait_for(fn(client), self.timeout + 1.0)
        except _LIBRARY_ERRORS as exc:
            raise _convert(exc, what) from exc

    # --- key/value ---------------------------------------------------------------------------

    async def ping(self) -> int:
        """The current store revision; raises MetadataStoreError when etcd does not answer."""
        _, revision = await self.get_prefix(b"\0strata-ping")
        return revision

    async def get(self, key: bytes) -> KeyValue | None:
        raw = await self._call("get", lambda c: c.get(key))
        return None if raw is None else _kv(raw)

    async def get_prefix(self, prefix: bytes) -> tuple[tuple[KeyValue, ...], int]:
        """Every key starting with ``prefix`` (sorted by key) and the revision of the read."""
        rng = await self._call("get_prefix", lambda c: c.get_range(prefix, prefix_end(prefix)))
        return tuple(_kv(kv) for kv in rng.kvs), int(rng.header.revision)

    async def list_prefix(
        self, prefix: bytes, *, page: int = LIST_PAGE_KEYS
    ) -> tuple[tuple[KeyValue, ...], int]:
        """``get_prefix`` in ranges of ``page`` keys, every range at the revision of the
        first (one consistent snapshot), handing the event loop back between ranges. When
        that revision is compacted part-way (the controller's periodic compaction), the
        listing starts again at a newer one."""
        end = prefix_end(prefix)
        for _ in range(5):
            out: list[KeyValue] = []
            start, revision = prefix, 0
            try:
                while True:
                    request = aetcd.rpc.RangeRequest(key=start, range_end=end, limit=page, revision=revision)

                    def read(c: Any, r: Any = request) -> Awaitable[Any]:
                        # The library's get_range sends neither a limit nor a revision.
                        return c.kvstub.Range(r, timeout=self.timeout, metadata=c.metadata)  # type: ignore[no-any-return]

                    rng = await self._call("list_prefix", read)
                    revision = revision or int(rng.header.revision)
                    out.extend(_kv(kv) for kv in rng.kvs)
                    if not rng.more or not rng.kvs:
                        return tuple(out), revision
                    start = bytes(rng.kvs[-1].key) + b"\0"
                    await asyncio.sleep(0)
            except MetadataStoreError as exc:
                if "compacted" not in str(exc):
                    raise
                log.info("listing %r: revision %d compacted part-way; listing again", prefix, revision)
        raise MetadataStoreError(f"etcd list_prefix of {prefix!r}: compacted five times in a row")

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        """Returns the revision of the write (the key's new mod_revision)."""
        res = await self._call("put", lambda c: c.put(key, value, lease=lease))
        return int(res.header.revision)

    async def delete(self, key: bytes) -> bool:
        res = await self._call("delete", lambda c: c.delete(key))
        return res is not None

    async def delete_prefix(self, prefix: bytes) -> int:
        res = await self._call("delete_prefix", lambda c: c.delete_range(prefix, prefix_end(prefix)))
        return int(res.deleted)

    async def compact(self, revision: int) -> None:
        """Discard history below ``revision`` (watches from older revisions then re-list)."""
        await self._call("compact", lambda c: c.compact(revision, physical=True))

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult:
        """Atomically: if every ``compare`` holds run ``success``, else run ``failure``."""

        def build_compare(c: Compare, t: Any) -> Any:
            factory = {
                CompareTarget.VALUE: t.value,
                CompareTarget.VERSION: t.version,
                CompareTarget.CREATE_REVISION: t.create,
                CompareTarget.MOD_REVISION: t.mod,
            }[c.target]
            cmp = factory(c.key)
            # The library builds a comparison by overloading Python's comparison operators.
            if c.op == "==":
                return cmp == c.value
            if c.op == "!=":
                return cmp != c.value
            if c.op == "<":
                return cmp < c.value
            return cmp > c.value

        def build_op(op: Op, t: Any) -> Any:
            if isinstance(op, Put):
                return t.put(op.key, op.value, lease=op.lease or None)
            if isinstance(op, Delete):
                return t.delete(op.key, range_end=prefix_end(op.key) if op.prefix else None)
            return t.get(op.key, range_end=prefix_end(op.key) if op.prefix else None)

        async def run(c: Any) -> tuple[bool, list[Any]]:
            t = c.transactions
            ok, responses = await c.transaction(
                compare=[build_compare(x, t) for x in compare],
                success=[build_op(x, t) for x in success],
                failure=[build_op(x, t) for x in failure],
            )
            return bool(ok), list(responses)

        ok, responses = await self._call("txn", run)
        branch = success if ok else failure
        revision = 0
        reads: list[tuple[KeyValue, ...]] = []
        for op, resp in zip(branch, responses, strict=True):
            if isinstance(op, Get):
                # A list of (value, Get) pairs; each Get carries the response header.
                kvs = tuple(_kv(get) for _, get in resp)
                reads.append(kvs)
                if resp:
                    revision = max(revision, int(resp[0][1].header.revision))
            else:
                which = resp.WhichOneof("response")
                revision = max(revision, int(getattr(resp, which).header.revision))
        return TxnResult(ok, revision, tuple(reads))

    # --- leases ------------------------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> Lease:
        if ttl < 1:
            raise InvalidConfigError(f"lease TTL must be at least 1 s, got {ttl}")
        raw = await self._call("grant_lease", lambda c: c.lease(ttl))
        return Lease(int(raw.id), int(raw.ttl))

    async def refresh_lease(self, lease_id: int) -> int:
        """One keep-alive; returns the lease's renewed TTL, or 0 if etcd no longer has it."""
        reply = await self._call("refresh_lease", lambda c: c.refresh_lease(lease_id))
        if reply is None:
            raise MetadataStoreError("etcd refresh_lease failed: keep-alive stream closed without a reply")
        return max(int(reply.TTL), 0)

    async def lease_ttl(self, lease_id: int) -> int:
        """Remaining TTL in seconds, or -1 if the lease does not exist."""
        info = await self._call("lease_ttl", lambda c: c.get_lease_info(lease_id, keys=False))
        return int(info.TTL)

    async def revoke_lease(self, lease_id: int) -> bool:
        """Revoke (deleting every key attached to it); False if it did not exist."""
        try:
            await self._call("revoke_lease", lambda c: c.revoke_lease(lease_id))
        except LeaseNotFoundError:
            return False
        return True

    def keep_alive(self, lease: Lease, *, interval: float | None = None) -> ThreadLeaseKeeper:
        """Start refreshing ``lease`` from a thread of its own (every TTL/3 by default), so
        that a busy event loop does not lose it (``broker.etcd_lease``)."""
        self._require()
        return ThreadLeaseKeeper(self, self._target, self._options, lease, interval=interval)

    # --- watches -----------------------------------------------------------------------------

    async def watch_prefix(
        self, prefix: bytes, *, start_revision: int | None = None
    ) -> AsyncGenerator[WatchUpdate, None]:
        """Changes under ``prefix``, for as long as the caller iterates.

        Without ``start_revision`` the first item is a ``WatchReset`` listing the prefix,
        followed by every change after it. With it, changes from that revision on. Across
        etcd failures the watch is re-created from the last delivered revision + 1 (retrying
        with back-off, never raising); a compacted revision turns into a ``WatchReset``.
        The iterator ends when the client is closed. Close it with ``aclose()``
        (``contextlib.aclosing``) to release the server-side watch promptly.
        """
        next_rev = start_revision
        delay = _RETRY_MIN
        while not self._closed:
            if next_rev is None:
                try:
                    kvs, revision = await self.list_prefix(prefix)
                except MetadataStoreError as exc:
                    log.debug("watch %r: listing failed (%s), retrying", prefix, exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _RETRY_MAX)
                    continue
                yield WatchReset(kvs, revision)
                next_rev = revision + 1
            client = self._client
            if client is None:
                return
            try:
                watch = await asyncio.wait_for(
                    client.watch(prefix, range_end=prefix_end(prefix), start_revision=next_rev),
                    self.timeout + 1.0,
                )
            except aetcd.RevisionCompactedError:
                next_rev = None
                continue
            except _LIBRARY_ERRORS as exc:
                log.debug("watch %r: create failed (%s), retrying", prefix, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)
                continue
            # One transaction's events share a revision and arrive in one response, so
            # resuming from the last delivered revision + 1 never splits a transaction.
            watch_start = next_rev
            try:
                async for raw in watch:
                    delay = _RETRY_MIN
                    event = WatchEvent(
                        WatchEventType.DELETE if raw.kind == "DELETE" else WatchEventType.PUT, _kv(raw.kv)
                    )
                    if event.kv.mod_revision < watch_start:
                        continue  # etcd never sends these; cheap insurance against duplicates
                    next_rev = max(next_rev, event.kv.mod_revision + 1)
                    yield event
            except aetcd.RevisionCompactedError:
                next_rev = None
            except _LIBRARY_ERRORS as exc:
                if not self._closed:
                    log.info("watch %r interrupted (%s); resuming from revision %s", prefix, exc, next_rev)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _RETRY_MAX)
            else:
                # Ended without an error (the server cancelled it, or the client closed):
                # re-watch, but never in a tight loop.
                if not self._closed:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _RETRY_MAX)
            finally:
                if not self._closed:  # closing the client ends its watches itself
                    with contextlib.suppress(*_LIBRARY_ERRORS):
                        await asyncio.wait_for(watch.cancel(), self.timeout)


if TYPE_CHECKING:  # the seam's structural check, for mypy
    from broker.metadata_store import MetadataStore

    _check: type[MetadataStore] = EtcdClient
