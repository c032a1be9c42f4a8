"""A single node's metadata store for other local processes: the broker's admin socket.

The embedded store (``broker.embedded_store``) is ``flock``ed by the one process that has
it open. While a broker runs on a data dir, ``strata users --data-dir`` reaches the store
through the broker instead: the broker serves ``<data_dir>/meta/store.sock``, a Unix
socket of mode 0600 (only the data dir's owner, and root, can connect; peers of another
uid are also refused by their ``SO_PEERCRED``), and ``LocalStoreClient`` is a
``MetadataStore`` speaking to it, so that the CLI's code is one function over a
``MetadataStore`` whether the store is etcd, the embedded store opened directly, or this
socket (``open_data_dir_store`` picks).

Beyond ``strata users``, the socket serves the whole ``MetadataStore`` API: the workers of
a multi-process node (``strata serve --processes N``) are cluster-mode brokers whose
"etcd" is the store their supervisor holds, reached through ``LocalStoreClient``
(``broker.store_client``; ``ClusterConfig.store_socket``).

Protocol: a connection carries one request then one reply at a time, except a watch; each
message a frame (``broker.store_protocol``):

    u32 big-endian length N (at most MAX_FRAME), then N bytes of a UTF-8 JSON object

Requests (``key``/``value``/``prefix`` base64; ``KV`` = ``[key, value, create_revision,
mod_revision, version, lease]``; ``OP`` = ``["put", key, value, lease]`` | ``["delete",
key, prefix]`` | ``["get", key, prefix]``; ``CMP`` = ``[key, target, op, value]``,
``value`` base64 when ``target`` is ``"value"``, else an integer):

    {"op": "hello"}                  -> {"ok": true, "cluster": name, "revision": R}
    {"op": "get", "key": k}          -> {"ok": true, "kv": KV | null}
    {"op": "get_prefix", "key": k}   -> {"ok": true, "kvs": [KV, ...], "revision": R}
    {"op": "txn", "compare": [CMP, ...], "success": [OP, ...], "failure": [OP, ...]}
                                     -> {"ok": true, "succeeded": bool, "revision": R,
                                         "reads": [[KV, ...], ...]}
    {"op": "put", "key": k, "value": v, "lease": id}   -> {"ok": true, "revision": R}
    {"op": "delete", "key": k}       -> {"ok": true, "deleted": bool}
    {"op": "delete_prefix", "key": k} -> {"ok": true, "deleted": count}
    {"op": "compact", "revision": R} -> {"ok": true}
    {"op": "grant_lease", "ttl": s}  -> {"ok": true, "id": id, "ttl": s}
    {"op": "refresh_lease", "id": id} -> {"ok": true, "ttl": s}   (0: gone)
    {"op": "lease_ttl", "id": id}    -> {"ok": true, "ttl": s}    (-1: gone)
    {"op": "revoke_lease", "id": id} -> {"ok": true, "revoked": bool}
    {"op": "watch", "prefix": p, "start_revision": R | null}
        -> a stream, for as long as the connection lasts, of
           {"ok": true, "reset": [KV, ...], "revision": R}     (the store's WatchReset)
           {"ok": true, "events": [[type, KV], ...]}          (type "put" | "delete")

A failure answers ``{"ok": false, "error": message, "retriable": bool}``, with ``"kind":
"lease_not_found"`` for ``LeaseNotFoundError``. A watch ends when the client hangs up
(the server reads that connection only to see its end) or the store closes.

Leases granted through the socket are tagged with the peer's pid (``SO_PEERCRED``):
``LocalStoreServer.revoke_leases_of(pid)`` ends at once every lease of a process that
died (a worker killed with SIGKILL) instead of after its TTL. A store that serves other
processes' leases should expire them (``EmbeddedMetadataStore(expire_leases=True)``):
a process that hangs without dying then loses them after their TTL, as with etcd.

Bounds: a client's connect and each call end after ``timeout`` seconds
(``MetadataStoreError``, and the connection is dropped: its stream state is unknown); the
server drops a connection idle for ``IDLE_S`` or sending a frame over ``MAX_FRAME``.

The socket's path must fit a Unix socket address (107 bytes and a NUL). A longer one (a
deep data dir) is bound and reached through ``/proc/self/fd/<fd of meta>/store.sock`` on
Linux, where that works; elsewhere the broker logs that it serves no admin socket and the
CLI says to stop the broker or use a shorter data dir path. At start the broker binds a
temporary name, sets its mode, and renames it over ``store.sock``: no moment with a
socket others can use, and a stale socket of a killed broker is replaced (only the
process holding the store's lock serves; the name is unlinked again at close).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from broker.embedded_store import EmbeddedMetadataStore, MetadataStoreLockedError
from broker.keys import DEFAULT_ROOT, KeyLayout
from broker.metadata_store import LeaseNotFoundError, MetadataStore, WatchReset
from broker.security.adopt import adopt_security_files, legacy_files
from broker.store_client import LocalStoreClient
from broker.store_protocol import (
    CALL_TIMEOUT,
    IDLE_S,
    MAX_FRAME,
    SOCKET_MODE,
    address,
    cmp_in,
    event_out,
    frame,
    kv_out,
    op_in,
    read_frame,
    socket_path,
    unb64,
)
from hot.errors import InvalidConfigError, MetadataStoreError, StrataError

__all__ = [
    "CALL_TIMEOUT",
    "DEFAULT_CLUSTER",
    "MAX_FRAME",
    "LocalStoreClient",
    "LocalStoreServer",
    "local_layout",
    "open_data_dir_store",
    "open_local_store",
    "socket_path",
]

log = logging.getLogger("strata.cluster.store_socket")

DEFAULT_CLUSTER: Final = "strata-local"


# --- the broker's side -------------------------------------------------------------------------


class LocalStoreServer:
    """Serves ``store`` on ``<meta_dir>/store.sock``, or on ``path`` (module docstring)."""

    def __init__(
        self, store: MetadataStore, meta_dir: Path, cluster: str, *, path: Path | None = None
    ) -> None:
        self.store = store
        self.path = path if path is not None else socket_path(meta_dir)
        self.cluster = cluster
        self._server: asyncio.Server | None = None
        self._inode: int | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._lease_owners: dict[int, int] = {}  # lease id -> pid of the process granted it
        self._warned = False  # about a store whose leases never run out

    async def start(self) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            with address(tmp) as addr:
                sock.bind(addr)
            os.chmod(tmp, SOCKET_MODE)
            sock.listen(128)
            sock.setblocking(False)
            os.replace(tmp, self.path)  # over a stale socket of a killed broker
            self._inode = os.stat(self.path).st_ino
        except OSError as exc:
            sock.close()
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise MetadataStoreError(f"cannot serve the admin socket {self.path}: {exc}") from exc
        except BaseException:
            sock.close()
            raise
        self._server = await asyncio.start_unix_server(self._serve, sock=sock)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)

    def leases_of(self, pid: int) -> list[int]:
        """The leases process ``pid`` was granted through this socket and has not revoked."""
        return sorted(lease for lease, owner in self._lease_owners.items() if owner == pid)

    async def revoke_leases_of(self, pid: int) -> int:
        """Revoke now every lease process ``pid`` was granted through this socket (it died:
        its registration goes at once, not a TTL later); how many were still alive."""
        revoked = 0
        for lease in self.leases_of(pid):
            if await self.store.revoke_lease(lease):
                revoked += 1
            self._lease_owners.pop(lease, None)
        if revoked:
            log.info("revoked %d lease(s) of process %d", revoked, pid)
        return revoked

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            peer = _peer(writer)
            if peer is None:
                return
            while True:
                try:
                    request = await asyncio.wait_for(read_frame(reader), IDLE_S)
                except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    return
                except (ValueError, InvalidConfigError) as exc:  # a bad frame: answer, then hang up
                    writer.write(frame({"ok": False, "error": str(exc), "retriable": False}))
                    await writer.drain()
                    return
                if request is None:
                    return
                if request.get("op") == "watch":  # the connection is the watch's from here on
                    await self._watch(request, reader, writer)
                    return
                writer.write(frame(await self._answer(request, peer)))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        except RuntimeError:  # uvloop's write on a connection the peer reset: gone, as above
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, request: dict[str, Any], pid: int) -> dict[str, Any]:
        try:
            return {"ok": True, **await self._run(request, pid)}
        except LeaseNotFoundError as exc:
            return {"ok": False, "error": str(exc), "retriable": False, "kind": "lease_not_found"}
        except StrataError as exc:
            return {"ok": False, "error": str(exc), "retriable": exc.retriable}
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            return {"ok": False, "error": f"admin socket: malformed request ({exc!r})", "retriable": False}

    async def _run(self, request: dict[str, Any], pid: int) -> dict[str, Any]:
        op = request.get("op")
        store = self.store
        if op == "hello":
            return {"cluster": self.cluster, "revision": await store.ping()}
        if op == "get":
            kv = await store.get(unb64(request["key"]))
            return {"kv": None if kv is None else kv_out(kv)}
        if op == "get_prefix":
            kvs, revision = await store.get_prefix(unb64(request["key"]))
            return {"kvs": [kv_out(kv) for kv in kvs], "revision": revision}
        if op == "txn":
            result = await store.txn(
                [cmp_in(c) for c in request["compare"]],
                [op_in(o) for o in request["success"]],
                [op_in(o) for o in request.get("failure", [])],
            )
            reads = [[kv_out(kv) for kv in read] for read in result.reads]
            return {"succeeded": result.succeeded, "revision": result.revision, "reads": reads}
        if op == "put":
            lease = int(request.get("lease", 0))
            return {"revision": await store.put(unb64(request["key"]), unb64(request["value"]), lease=lease)}
        if op == "delete":
            return {"deleted": await store.delete(unb64(request["key"]))}
        if op == "delete_prefix":
            return {"deleted": await store.delete_prefix(unb64(request["key"]))}
        if op == "compact":
            await store.compact(int(request["revision"]))
            return {}
        return await self._lease_call(op, request, pid)

    async def _lease_call(self, op: object, request: dict[str, Any], pid: int) -> dict[str, Any]:
        store = self.store
        if op == "grant_lease":
            lease = await store.grant_lease(int(request["ttl"]))
            self._lease_owners[lease.id] = pid
            if isinstance(store, EmbeddedMetadataStore) and not store.expiring and not self._warned:
                self._warned = True
                log.warning(
                    "the metadata store serves leases to other processes but never expires them:"
                    " open it with expire_leases=True (a process that hangs keeps its leases)"
                )
            return {"id": lease.id, "ttl": lease.ttl}
        lease_id = int(request["id"])
        if op == "refresh_lease":
            ttl = await store.refresh_lease(lease_id)
            if ttl <= 0:
                self._lease_owners.pop(lease_id, None)
            return {"ttl": ttl}
        if op == "lease_ttl":
            ttl = await store.lease_ttl(lease_id)
            if ttl < 0:
                self._lease_owners.pop(lease_id, None)
            return {"ttl": ttl}
        if op == "revoke_lease":
            self._lease_owners.pop(lease_id, None)
            return {"revoked": await store.revoke_lease(lease_id)}
        raise InvalidConfigError(f"admin socket: unknown request {op!r}")

    async def _watch(
        self, request: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Stream the store's watch to the client until it hangs up or the store closes."""
        try:
            prefix = unb64(request["prefix"])
            raw_start = request.get("start_revision")
            start = None if raw_start is None else int(raw_start)
        except (KeyError, TypeError, ValueError, InvalidConfigError) as exc:
            writer.write(frame({"ok": False, "error": f"admin socket: malformed watch ({exc!r})"}))
            await writer.drain()
            return

        async def pump() -> None:
            async with contextlib.aclosing(self.store.watch_prefix(prefix, start_revision=start)) as updates:
                async for update in updates:
                    if isinstance(update, WatchReset):
                        doc: dict[str, Any] = {
                            "ok": True,
                            "reset": [kv_out(kv) for kv in update.kvs],
                            "revision": update.revision,
                        }
                    else:
                        doc = {"ok": True, "events": [event_out(update)]}
                    writer.write(frame(doc))
                    await writer.drain()

        # The client sends nothing more: a read that ends is the client hanging up.
        streaming = asyncio.ensure_future(pump())
        hangup = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait({streaming, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (streaming, hangup):
                t.cancel()
            await asyncio.gather(streaming, hangup, return_exceptions=True)


def _peer(writer: asyncio.StreamWriter) -> int | None:
    """The peer's pid (0 where the OS does not tell), or None for a peer refused: the
    socket's mode already limits it to its owner; where the OS tells the peer's uid,
    refuse anyone else but root (a mode changed by hand, a shared directory)."""
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return 0
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _ = struct.unpack("3i", creds)
    if uid in (os.getuid(), 0):
        return int(pid)
    log.warning("admin socket: refused a connection of uid %d", uid)
    return None


# --- `strata users --data-dir`: the data dir's store, whoever holds it ----------------------------


async def open_local_store(
    meta_dir: Path, *, timeout: float = CALL_TIMEOUT
) -> EmbeddedMetadataStore | LocalStoreClient:
    """The store of ``meta_dir``: opened directly when no process holds it, else the running
    broker's through its admin socket. A broker that holds the lock but does not answer
    (still starting, stopping, or stuck) is retried for ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            return await EmbeddedMetadataStore(meta_dir).connect()
        except MetadataStoreLockedError:
            pass
        client = LocalStoreClient(meta_dir, timeout=max(deadline - loop.time(), 0.5))
        try:
            return await client.connect()
        except MetadataStoreError as exc:
            await client.close()
            if loop.time() >= deadline:
                raise MetadataStoreError(
                    f"the metadata store in {meta_dir} is locked by a process that does not answer "
                    f"on {client.path} ({exc}); is a broker still starting or stopping there?"
                ) from None
        await asyncio.sleep(0.1)


async def local_layout(store: MetadataStore, explicit: str | None) -> KeyLayout:
    """The key layout of a single node's store: the running broker's cluster, else the one
    cluster the store holds, else ``explicit`` or the default cluster id."""
    if isinstance(store, LocalStoreClient):
        name = store.cluster or DEFAULT_CLUSTER
        if explicit is not None and explicit != name:
            raise InvalidConfigError(
                f"the broker on {store.path.parent.parent} serves cluster {name!r}, not {explicit!r}"
            )
        return KeyLayout(name)
    if explicit is not None:
        return KeyLayout(explicit)
    root = DEFAULT_ROOT.encode() + b"/"
    kvs, _ = await store.get_prefix(root)
    names = sorted({kv.key[len(root) :].split(b"/", 1)[0].decode("ascii", "replace") for kv in kvs})
    if len(names) > 1:
        raise InvalidConfigError(
            f"the metadata store holds several clusters ({', '.join(names)}): pass --cluster-name"
        )
    return KeyLayout(names[0] if names else DEFAULT_CLUSTER)


@contextlib.asynccontextmanager
async def open_data_dir_store(
    data_dir: Path, cluster: str | None = None, *, timeout: float = CALL_TIMEOUT
) -> AsyncGenerator[tuple[MetadataStore, KeyLayout], None]:
    """The metadata store of a single node's ``data_dir`` and its key layout, for a command
    that runs beside the broker or instead of it. Opened directly, the store first adopts
    the data dir's old security files (broker.security.adopt), as the broker would."""
    meta_dir = data_dir / "meta"
    store = await open_local_store(meta_dir, timeout=timeout)
    try:
        layout = await local_layout(store, cluster)
        if isinstance(store, EmbeddedMetadataStore) and legacy_files(meta_dir):
            await adopt_security_files(store, layout, meta_dir)
        yield store, layout
    finally:
        await store.close()


if TYPE_CHECKING:  # the seam's structural check, for mypy
    _check: type[MetadataStore] = LocalStoreClient
