"""The metadata store seam: what the broker domain needs from a metadata store, with two
implementations: ``broker.etcd.EtcdClient`` (a replicated cluster's etcd) and
``broker.embedded_store.EmbeddedMetadataStore`` (a single node: a cluster of one, with no
external service).

The model is etcd's v3 API, kept small: a flat, ordered map of byte keys, each write a new
store revision (one per transaction), compare-and-swap transactions, leases that delete
their keys when they end, and prefix watches that start with a snapshot (``WatchReset``)
and then deliver every change in revision order. Everything above this module sees the
frozen dataclasses defined here and ``MetadataStoreError`` (retriable) or
``LeaseNotFoundError``; nothing above it knows which implementation it talks to.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from hot.errors import MetadataStoreError
from hot.tasks import cancel_and_wait

log = logging.getLogger("strata.cluster.metadata_store")


class LeaseNotFoundError(MetadataStoreError):
    """The store no longer knows the lease (it expired or was revoked): grant a new one."""

    retriable = False


# --- values --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key as etcd stores it. ``version`` counts writes since creation (0 = absent)."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


@dataclass(frozen=True, slots=True)
class Lease:
    id: int
    ttl: int


class CompareTarget(enum.Enum):
    VALUE = "value"
    VERSION = "version"
    CREATE_REVISION = "create_revision"
    MOD_REVISION = "mod_revision"


_OPS: Final = ("==", "!=", "<", ">")


@dataclass(frozen=True, slots=True)
class Compare:
    """One condition of a transaction: ``<target of key> <op> <value>``.

    An absent key has create_revision, mod_revision and version 0.
    """

    key: bytes
    target: CompareTarget
    op: str
    value: int | bytes

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"compare op must be one of {_OPS}, got {self.op!r}")
        if (self.target is CompareTarget.VALUE) != isinstance(self.value, bytes):
            needs = "bytes" if self.target is CompareTarget.VALUE else "an int"
            raise ValueError(f"compare of {self.target.value} needs {needs}")

    @classmethod
    def absent(cls, key: bytes) -> Compare:
        return cls(key, CompareTarget.CREATE_REVISION, "==", 0)

    @classmethod
    def mod_revision(cls, key: bytes, revision: int, op: str = "==") -> Compare:
        return cls(key, CompareTarget.MOD_REVISION, op, revision)

    @classmethod
    def create_revision(cls, key: bytes, revision: int, op: str = "==") -> Compare:
        return cls(key, CompareTarget.CREATE_REVISION, op, revision)

    @classmethod
    def version(cls, key: bytes, version: int, op: str = "==") -> Compare:
        return cls(key, CompareTarget.VERSION, op, version)

    @classmethod
    def value_is(cls, key: bytes, value: bytes, op: str = "==") -> Compare:
        return cls(key, CompareTarget.VALUE, op, value)


@dataclass(frozen=True, slots=True)
class Put:
    key: bytes
    value: bytes
    lease: int = 0


@dataclass(frozen=True, slots=True)
class Delete:
    key: bytes
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Get:
    key: bytes
    prefix: bool = False


Op = Put | Delete | Get


@dataclass(frozen=True, slots=True)
class TxnResult:
    """``reads`` has one tuple per ``Get`` of the branch that ran, in order.

    ``revision`` is the store revision the transaction ran at when its branch wrote or
    read something (for a successful write, the new ``mod_revision`` of the keys it put);
    0 when the branch was empty.
    """

    succeeded: bool
    revision: int
    reads: tuple[tuple[KeyValue, ...], ...]


class WatchEventType(enum.Enum):
    PUT = "put"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A change of one key. For a delete, ``kv.value`` is empty and ``kv.mod_revision`` is
    the revision of the deletion."""

    type: WatchEventType
    kv: KeyValue


@dataclass(frozen=True, slots=True)
class WatchReset:
    """Every key under the watched prefix as of ``revision``: replaces what the consumer
    knew (first item of a watch, and after the watch's revision was compacted away)."""

    kvs: tuple[KeyValue, ...]
    revision: int


WatchUpdate = WatchEvent | WatchReset


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key starting with ``prefix`` (etcd's range_end)."""
    b = bytearray(prefix)
    for i in range(len(b) - 1, -1, -1):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[: i + 1])
    return b"\0"  # every key


class MetadataStore(Protocol):
    """The calls the broker domain makes on its metadata store (see the module docstring).

    ``get_prefix`` answers keys sorted by key and the revision of the read; ``put`` the
    revision of the write; ``txn`` runs ``success`` if every compare holds, else
    ``failure``, atomically. ``refresh_lease`` answers the renewed TTL or 0 when the lease
    is gone; ``lease_ttl`` -1 when it does not exist. ``watch_prefix`` never raises for
    the store's trouble: it resumes, and re-lists (``WatchReset``) when it cannot resume.
    """

    timeout: float  # the bound of one call, in seconds

    @property
    def closed(self) -> bool: ...

    async def close(self) -> None: ...

    async def ping(self) -> int: ...

    async def get(self, key: bytes) -> KeyValue | None: ...

    async def get_prefix(self, prefix: bytes) -> tuple[tuple[KeyValue, ...], int]: ...

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int: ...

    async def delete(self, key: bytes) -> bool: ...

    async def delete_prefix(self, prefix: bytes) -> int: ...

    async def compact(self, revision: int) -> None: ...

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult: ...

    async def grant_lease(self, ttl: int) -> Lease: ...

    async def refresh_lease(self, lease_id: int) -> int: ...

    async def lease_ttl(self, lease_id: int) -> int: ...

    async def revoke_lease(self, lease_id: int) -> bool: ...

    def keep_alive(self, lease: Lease, *, interval: float | None = None) -> LeaseKeeping: ...

    def watch_prefix(
        self, prefix: bytes, *, start_revision: int | None = None
    ) -> AsyncGenerator[WatchUpdate, None]: ...


async def cas_update(
    store: MetadataStore, key: bytes, change: Callable[[bytes | None], bytes], *, attempts: int
) -> tuple[bytes, int]:
    """Replace ``key``'s value by ``change(old)`` (``None``: absent) with a compare-and-swap
    on its mod revision, re-reading and retrying a lost race up to ``attempts`` times.
    Returns the value written and the revision of the write."""
    for _ in range(attempts):
        kv = await store.get(key)
        new = change(kv.value if kv is not None else None)
        guard = Compare.absent(key) if kv is None else Compare.mod_revision(key, kv.mod_revision)
        result = await store.txn([guard], [Put(key, new)])
        if result.succeeded:
            return new, result.revision
    raise MetadataStoreError(f"could not update {key.decode()}: too many concurrent changes")


class LeaseKeeping(Protocol):
    """A lease kept alive in the background: ``LeaseKeeper`` on the event loop, or
    ``broker.etcd_lease.ThreadLeaseKeeper`` on a thread of its own (etcd)."""

    lease: Lease
    lost: asyncio.Event
    alive_until: float

    @property
    def running(self) -> bool: ...

    async def stop(self, *, revoke: bool = False) -> None: ...


class LeaseKeeper:
    """Keeps one lease alive from a background task.

    Refreshes every ``interval`` (TTL/3 by default) and retries failed refreshes faster.
    A failure to reach etcd is not a loss: etcd itself keeps the lease (and re-arms every
    lease's full TTL when it restarts). The lease is lost only when etcd answers that it
    no longer exists; then ``lost`` is set and the task ends. ``alive_until`` (monotonic
    clock) is the time up to which the lease is known to be alive: the send time of the
    last successful refresh plus the TTL it returned.
    """

    def __init__(self, client: MetadataStore, lease: Lease, *, interval: float | None = None) -> None:
        self.client = client
        self.lease = lease
        self.interval = interval if interval is not None else max(lease.ttl / 3.0, 0.1)
        self.lost = asyncio.Event()
        self.alive_until = time.monotonic() + lease.ttl
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"lease-keeper-{lease.id:x}")

    async def _run(self) -> None:
        retry = max(min(self.interval / 2.0, 0.5), 0.05)
        while True:
            sent = time.monotonic()
            try:
                ttl = await self.client.refresh_lease(self.lease.id)
            except MetadataStoreError as exc:
                log.debug("lease %x: refresh failed (%s)", self.lease.id, exc)
                await asyncio.sleep(retry)
                continue
            if ttl <= 0:
                log.warning("lease %x is gone from etcd (expired or revoked)", self.lease.id)
                self.lost.set()
                return
            self.alive_until = sent + ttl
            await asyncio.sleep(self.interval)

    @property
    def running(self) -> bool:
        return not self._task.done()

    async def stop(self, *, revoke: bool = False) -> None:
        """Stop refreshing; with ``revoke`` also end the lease now (deleting its keys)."""
        await cancel_and_wait(self._task)
        if revoke and not self.client.closed:
            with contextlib.suppress(MetadataStoreError):
                await self.client.revoke_lease(self.lease.id)
