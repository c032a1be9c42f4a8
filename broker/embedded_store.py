"""The embedded metadata store of a single node: etcd's model in process, durable on local disk.

``strata serve`` without ``--etcd`` runs the same broker, controller and replica manager as
a cluster, as a cluster of one; this store stands in for etcd (``broker.metadata_store``
is the seam both implement). It holds every key in memory, in key order, and differs from
etcd only where one process makes a difference:

* **Leases are always held** by default. A lease exists until it is revoked or the process
  ends (a refresh answers ``HELD_TTL``). Its keys are never written to disk, so after a
  restart (or kill -9) they are gone, exactly as an etcd lease of a dead broker runs out.
  A store that serves other processes' leases (a multi-process node's supervisor, through
  ``broker.store_socket``) is opened with ``expire_leases=True`` instead: then a lease
  runs out as etcd's does, ``ttl`` seconds after its last refresh by ``clock`` (a worker
  that hangs without dying loses its registration), and ``expire_leases()`` (run by a
  background task, or by a test with its own clock) revokes every lease past its time.
* **Watches are in-process callbacks**: each watcher has a queue that every committed
  transaction feeds, in revision order, all events of one transaction together.
* **No outages.** Calls fail only on a closed store or a disk error (``MetadataStoreError``,
  the same error the domain already handles for etcd).

Files, in ``<data_dir>/meta/``:

* ``metadata.snapshot``: JSON ``{"revision": R, "compacted": C, "kvs": [[key, value,
  create_revision, mod_revision, version], ...]}`` with keys and values in base64; written
  by ``core.disk.atomic_write`` (temp file, fsync, rename, fsync dir).
* ``metadata.journal``: one JSON line per committed transaction after the snapshot,
  ``{"r": revision, "ops": [["p", key, value] | ["d", key], ...]}``, appended and fsynced
  before the transaction is applied in memory, answered, or seen by any watcher. The
  journal is folded into a new snapshot (and truncated) once it holds
  ``JOURNAL_FOLD_ENTRIES`` lines. The journal file is ``flock``ed while a store has it
  open, so two processes never share one (``MetadataStoreLockedError``; while a broker
  runs, other processes reach its store through ``broker.store_socket``).

Both files are private (mode 0600, set again on open): they hold the SASL users' salted
SCRAM keys (broker.security.stored).

Crash behaviour: a transaction is acknowledged only after its journal line is fsynced, so
every acknowledged change survives. Recovery loads the snapshot, then replays journal
lines with a revision above the snapshot's; a torn or unparsable last line (a crash in the
middle of an append, never acknowledged) ends the replay and is cut off. A crash while
folding leaves either the old snapshot with the whole journal, or the new snapshot with a
journal whose lines it already contains (skipped by revision).
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import json
import logging
import math
import os
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from broker.metadata_store import (
    Compare,
    CompareTarget,
    Delete,
    Get,
    KeyValue,
    Lease,
    LeaseKeeper,
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
from core.disk import atomic_write, fsync_dir
from hot.errors import InvalidConfigError, MetadataStoreError
from hot.tasks import cancel_and_wait

log = logging.getLogger("strata.cluster.embedded_store")

SNAPSHOT_FILE: Final = "metadata.snapshot"
JOURNAL_FILE: Final = "metadata.journal"
JOURNAL_FOLD_ENTRIES: Final = 1000
FILE_MODE: Final = 0o600
# Changes kept for watches that resume from a revision; older ones re-list (as etcd does
# after compaction).
HISTORY_EVENTS: Final = 10_000
# What refresh_lease and lease_ttl answer for a live lease: it cannot run out, so a keeper's
# ``alive_until`` never passes while the process runs, even across a long event-loop stall.
HELD_TTL: Final = 1 << 30
# How often an expiring store looks for leases past their time, at most and at least.
REAP_MAX_S: Final = 1.0
REAP_MIN_S: Final = 0.05

_Event = tuple[int, WatchEvent]  # (revision, event)
_Record = list[Any]  # a journal op: ["p", key, value] or ["d", key]


class MetadataStoreLockedError(MetadataStoreError):
    """Another process (a running broker, or ``strata users``) has the store open."""

    retriable = False


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _holds(kv: KeyValue | None, c: Compare) -> bool:
    if c.target is CompareTarget.VALUE:
        if kv is None:  # etcd: a value compare on an absent key is false
            return False
        actual: int | bytes = kv.value
    elif kv is None:
        actual = 0
    elif c.target is CompareTarget.VERSION:
        actual = kv.version
    elif c.target is CompareTarget.CREATE_REVISION:
        actual = kv.create_revision
    else:
        actual = kv.mod_revision
    expected = c.value
    if c.op == "==":
        return actual == expected
    if c.op == "!=":
        return actual != expected
    if c.op == "<":
        return actual < expected  # type: ignore[operator]
    return actual > expected  # type: ignore[operator]


class EmbeddedMetadataStore:
    """An in-process ``MetadataStore`` persisted under ``<data_dir>/meta`` (module docstring)."""

    timeout: float = 5.0

    def __init__(
        self, meta_dir: Path, *, expire_leases: bool = False, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.meta_dir = meta_dir
        self.expiring = expire_leases  # leases run out by their TTL (module docstring)
        self._clock = clock
        self._deadlines: dict[int, float] = {}  # lease id -> when it runs out (expiring)
        self._reaper: asyncio.Task[None] | None = None
        self._kvs: dict[bytes, KeyValue] = {}
        self._revision = 1  # etcd starts at 1: revision 0 means "absent"
        self._compacted = 0
        self._leases: dict[int, tuple[int, set[bytes]]] = {}  # id -> (ttl, keys)
        self._next_lease = 1
        self._history: list[_Event] = []
        self._watchers: set[asyncio.Queue[list[_Event] | None]] = set()
        self._lock = asyncio.Lock()
        self._journal_fd: int | None = None
        self._journal_lines = 0
        self._closed = False

    # --- life cycle --------------------------------------------------------------------------

    async def connect(self) -> EmbeddedMetadataStore:
        """Load the snapshot and replay the journal (module docstring); idempotent."""
        if self._closed:
            raise MetadataStoreError("metadata store is closed")
        if self._journal_fd is None:
            try:
                await asyncio.to_thread(self._open)
            except OSError as exc:
                raise MetadataStoreError(f"cannot open the metadata store in {self.meta_dir}: {exc}") from exc
            if self.expiring:
                self._reaper = asyncio.get_running_loop().create_task(self._reap(), name="lease-reaper")
        return self

    def _open(self) -> None:
        self.meta_dir.mkdir(parents=True, exist_ok=True)
        path = self.meta_dir / JOURNAL_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise MetadataStoreLockedError(
                f"the metadata store in {self.meta_dir} is in use by another process"
            ) from None
        try:
            os.fchmod(fd, FILE_MODE)  # also a journal made before the files were private
            snapshot = self.meta_dir / SNAPSHOT_FILE
            if snapshot.exists():
                os.chmod(snapshot, FILE_MODE)
            self._load_snapshot()
            good = self._replay(path)
            if good != os.fstat(fd).st_size:
                log.warning("metadata journal %s: cut off a torn last entry at byte %d", path, good)
                os.ftruncate(fd, good)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        fsync_dir(self.meta_dir)
        self._journal_fd = fd

    def _load_snapshot(self) -> None:
        path = self.meta_dir / SNAPSHOT_FILE
        try:
            doc = json.loads(path.read_bytes())
        except FileNotFoundError:
            return
        except ValueError as exc:
            # atomic_write never leaves a partial snapshot: this is damage, not a crash.
            raise MetadataStoreError(f"metadata snapshot {path} is damaged: {exc}") from exc
        self._revision = int(doc["revision"])
        self._compacted = int(doc.get("compacted", 0))
        for key64, value64, create, mod, version in doc["kvs"]:
            key = _unb64(key64)
            self._kvs[key] = KeyValue(key, _unb64(value64), int(create), int(mod), int(version), 0)

    def _replay(self, path: Path) -> int:
        """Apply journal lines newer than the snapshot; the byte length of the good prefix."""
        data = path.read_bytes()
        good = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            try:
                entry = json.loads(line)
                revision = int(entry["r"])
                ops = [(str(o[0]), _unb64(o[1]), _unb64(o[2]) if o[0] == "p" else b"") for o in entry["ops"]]
            except (ValueError, KeyError, TypeError, IndexError):
                break
            good += len(line)
            self._journal_lines += 1
            if revision <= self._revision:
                continue  # already in the snapshot (a crash while folding)
            self._revision = revision
            for kind, key, value in ops:
                if kind == "p":
                    self._put_kv(key, value, revision, lease=0)
                else:
                    self._kvs.pop(key, None)
        return good

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reaper is not None:
            await cancel_and_wait(self._reaper)
        for q in list(self._watchers):
            q.put_nowait(None)
        async with self._lock:
            fd, self._journal_fd = self._journal_fd, None
            if fd is not None:
                os.close(fd)  # releases the flock

    async def __aenter__(self) -> EmbeddedMetadataStore:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _require(self) -> None:
        if self._journal_fd is None:
            raise MetadataStoreError(
                "metadata store is closed" if self._closed else "metadata store is not open"
            )

    # --- reads -------------------------------------------------------------------------------

    async def ping(self) -> int:
        self._require()
        return self._revision

    async def get(self, key: bytes) -> KeyValue | None:
        self._require()
        return self._kvs.get(key)

    def _range(self, prefix: bytes) -> tuple[KeyValue, ...]:
        end = prefix_end(prefix)
        every = end == b"\0"
        return tuple(self._kvs[k] for k in sorted(self._kvs) if k >= prefix and (every or k < end))

    async def get_prefix(self, prefix: bytes) -> tuple[tuple[KeyValue, ...], int]:
        self._require()
        return self._range(prefix), self._revision

    # --- writes ------------------------------------------------------------------------------

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        res = await self.txn([], [Put(key, value, lease)])
        return res.revision

    async def delete(self, key: bytes) -> bool:
        async with self._lock:
            self._require()
            if key not in self._kvs:
                return False
            await self._commit([Delete(key)])
            return True

    async def delete_prefix(self, prefix: bytes) -> int:
        async with self._lock:
            self._require()
            keys = [kv.key for kv in self._range(prefix)]
            if keys:
                await self._commit([Delete(k) for k in keys])
            return len(keys)

    async def compact(self, revision: int) -> None:
        self._require()
        self._compacted = max(self._compacted, min(revision, self._revision))
        self._history = [e for e in self._history if e[0] >= self._compacted]

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult:
        async with self._lock:
            self._require()
            ok = all(_holds(self._kvs.get(c.key), c) for c in compare)
            branch = success if ok else failure
            reads: list[tuple[KeyValue, ...]] = []
            writes: list[Put | Delete] = []
            for op in branch:
                if isinstance(op, Get):
                    # etcd reads see the transaction's earlier writes; no caller mixes them.
                    if writes:
                        raise InvalidConfigError("a Get after a write in one transaction is not supported")
                    found = self._range(op.key) if op.prefix else (self._kvs.get(op.key),)
                    reads.append(tuple(kv for kv in found if kv is not None))
                elif isinstance(op, Put):
                    if op.lease and not self._lease_live(op.lease):
                        raise LeaseNotFoundError(f"metadata store put: lease {op.lease:x} not found")
                    writes.append(op)
                elif op.prefix:
                    writes.extend(Delete(kv.key) for kv in self._range(op.key))
                elif op.key in self._kvs:
                    writes.append(op)
            revision = self._revision if branch else 0
            if writes:
                revision = await self._commit(writes)
            return TxnResult(ok, revision, tuple(reads))

    async def _commit(self, writes: Sequence[Put | Delete]) -> int:
        """Journal, then apply and publish, one new revision (caller holds the lock)."""
        revision = self._revision + 1
        # Every commit is journalled, even one that writes only lease keys (kept in memory):
        # revisions never repeat across restarts (a registration's create_revision is the
        # broker epoch). A lease put over a durable key deletes it on disk.
        ops: list[_Record] = []
        for w in writes:
            if isinstance(w, Delete) or w.lease:
                ops.append(["d", _b64(w.key)])
            else:
                ops.append(["p", _b64(w.key), _b64(w.value)])
        line = json.dumps({"r": revision, "ops": ops}, separators=(",", ":")).encode() + b"\n"
        try:
            await asyncio.to_thread(self._append, line)
        except OSError as exc:
            raise MetadataStoreError(f"metadata store write failed: {exc}") from exc
        self._revision = revision
        events: list[_Event] = []
        for w in writes:
            if isinstance(w, Put):
                kv = self._put_kv(w.key, w.value, revision, lease=w.lease)
                events.append((revision, WatchEvent(WatchEventType.PUT, kv)))
            else:
                old = self._kvs.pop(w.key, None)
                if old is not None:
                    self._forget_lease_key(old)
                    gone = KeyValue(w.key, b"", 0, revision, 0, 0)
                    events.append((revision, WatchEvent(WatchEventType.DELETE, gone)))
        self._publish(events)
        if self._journal_lines >= JOURNAL_FOLD_ENTRIES:
            await self._fold()
        return revision

    def _append(self, line: bytes) -> None:
        fd = self._journal_fd
        if fd is None:
            raise OSError("journal closed")
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        self._journal_lines += 1

    async def _fold(self) -> None:
        doc = {
            "revision": self._revision,
            "compacted": self._compacted,
            "kvs": [
                [_b64(kv.key), _b64(kv.value), kv.create_revision, kv.mod_revision, kv.version]
                for kv in self._kvs.values()
                if not kv.lease
            ],
        }
        data = json.dumps(doc, separators=(",", ":")).encode()

        def write() -> None:
            atomic_write(self.meta_dir / SNAPSHOT_FILE, data, mode=FILE_MODE)
            fd = self._journal_fd
            if fd is not None:
                os.ftruncate(fd, 0)
                os.fsync(fd)

        try:
            await asyncio.to_thread(write)
        except OSError as exc:  # the journal still holds everything: fold again later
            log.warning("metadata store: folding the journal into a snapshot failed: %s", exc)
            return
        self._journal_lines = 0

    def _put_kv(self, key: bytes, value: bytes, revision: int, *, lease: int) -> KeyValue:
        old = self._kvs.get(key)
        if old is not None:
            self._forget_lease_key(old)
        kv = KeyValue(
            key,
            value,
            old.create_revision if old is not None else revision,
            revision,
            old.version + 1 if old is not None else 1,
            lease,
        )
        self._kvs[key] = kv
        if lease:
            self._leases[lease][1].add(key)
        return kv

    def _forget_lease_key(self, kv: KeyValue) -> None:
        if kv.lease and kv.lease in self._leases:
            self._leases[kv.lease][1].discard(kv.key)

    def _publish(self, events: list[_Event]) -> None:
        if not events:
            return
        self._history.extend(events)
        if len(self._history) > HISTORY_EVENTS:
            drop = len(self._history) - HISTORY_EVENTS
            self._compacted = max(self._compacted, self._history[drop][0])
            del self._history[:drop]
        for q in self._watchers:
            q.put_nowait(events)

    # --- leases ------------------------------------------------------------------------------

    async def grant_lease(self, ttl: int) -> Lease:
        if ttl < 1:
            raise InvalidConfigError(f"lease TTL must be at least 1 s, got {ttl}")
        self._require()
        lease_id = self._next_lease
        self._next_lease += 1
        self._leases[lease_id] = (ttl, set())
        if self.expiring:
            self._deadlines[lease_id] = self._clock() + ttl
        return Lease(lease_id, ttl)

    def _lease_live(self, lease_id: int) -> bool:
        if lease_id not in self._leases:
            return False
        return not self.expiring or self._deadlines[lease_id] > self._clock()

    async def refresh_lease(self, lease_id: int) -> int:
        self._require()
        if not self.expiring:
            return HELD_TTL if lease_id in self._leases else 0
        if not self._lease_live(lease_id):
            # Past its time: gone, even if the reaper has not run yet (etcd answers the same).
            await self._end_lease(lease_id, due=True)
            return 0
        ttl = self._leases[lease_id][0]
        self._deadlines[lease_id] = self._clock() + ttl
        return ttl

    async def lease_ttl(self, lease_id: int) -> int:
        self._require()
        if not self.expiring:
            return HELD_TTL if lease_id in self._leases else -1
        if not self._lease_live(lease_id):
            return -1
        return math.ceil(self._deadlines[lease_id] - self._clock())

    async def revoke_lease(self, lease_id: int) -> bool:
        return await self._end_lease(lease_id, due=False)

    async def _end_lease(self, lease_id: int, *, due: bool) -> bool:
        """Revoke the lease and delete its keys; with ``due`` only if it is (still, under
        the lock: a refresh may have come first) past its time."""
        async with self._lock:
            self._require()
            if due and self._lease_live(lease_id):
                return False
            held = self._leases.pop(lease_id, None)
            self._deadlines.pop(lease_id, None)
            if held is None:
                return False
            keys = sorted(held[1])
            if keys:
                await self._commit([Delete(k) for k in keys])
            return True

    async def expire_leases(self) -> int:
        """Revoke every lease past its time (``expire_leases=True``); how many ran out."""
        now = self._clock()
        ended = 0
        for lease_id in [i for i, t in self._deadlines.items() if t <= now]:
            if await self._end_lease(lease_id, due=True):
                log.info("metadata store: lease %x ran out (not refreshed for its TTL)", lease_id)
                ended += 1
        return ended

    async def _reap(self) -> None:
        while True:
            now = self._clock()
            nearest = min(self._deadlines.values(), default=now + REAP_MAX_S)
            await asyncio.sleep(min(max(nearest - now, REAP_MIN_S), REAP_MAX_S))
            try:
                await self.expire_leases()
            except MetadataStoreError as exc:  # a disk error: the next round tries again
                log.warning("metadata store: expiring leases failed: %s", exc)

    def keep_alive(self, lease: Lease, *, interval: float | None = None) -> LeaseKeeper:
        return LeaseKeeper(self, lease, interval=interval)

    # --- watches -----------------------------------------------------------------------------

    async def watch_prefix(
        self, prefix: bytes, *, start_revision: int | None = None
    ) -> AsyncGenerator[WatchUpdate, None]:
        """As ``EtcdClient.watch_prefix``: a snapshot first (or the changes from
        ``start_revision``, re-listed when older than the history kept), then every change."""
        if self._closed:
            return
        end = prefix_end(prefix)

        def matches(key: bytes) -> bool:
            return key >= prefix and (end == b"\0" or key < end)

        # Registered before listing, with no await in between: no change can fall between.
        queue: asyncio.Queue[list[_Event] | None] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            first: WatchUpdate | None = None
            backlog: list[_Event] = []
            if start_revision is None or start_revision < max(self._compacted, 1):
                first = WatchReset(self._range(prefix), self._revision)
            else:
                backlog = [e for e in self._history if e[0] >= start_revision]
            if first is not None:
                yield first
            for _, event in backlog:
                if matches(event.kv.key):
                    yield event
            while True:
                batch = await queue.get()
                if batch is None:
                    return
                for _, event in batch:
                    if matches(event.kv.key):
                        yield event
        finally:
            self._watchers.discard(queue)


if TYPE_CHECKING:  # the seam's structural check, for mypy
    from broker.metadata_store import MetadataStore

    _check: type[MetadataStore] = EmbeddedMetadataStore
