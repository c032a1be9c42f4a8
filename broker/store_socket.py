"""A single node's metadata store for other local processes: the broker's admin socket.

The embedded store (``broker.embedded_store``) is ``flock``ed by the one process that has
it open. While a broker runs on a data dir, ``strata users --data-dir`` reaches the store
through the broker instead: the broker serves ``<data_dir>/meta/store.sock``, a Unix
socket of mode 0600 (only the data dir's owner, and root, can connect; peers of another
uid are also refused by their ``SO_PEERCRED``), and ``LocalStoreClient`` is a
``MetadataStore`` speaking to it, so that the CLI's code is one function over a
``MetadataStore`` whether the store is etcd, the embedded store opened directly, or this
socket (``open_data_dir_store`` picks).

Protocol, one request then one reply at a time on a connection; each message a frame:

    u32 big-endian length N (at most MAX_FRAME), then N bytes of a UTF-8 JSON object

Requests (``key``/``value`` base64; ``KV`` = ``[key, value, create_revision, mod_revision,
version, lease]``; ``OP`` = ``["put", key, value]`` | ``["delete", key, prefix]`` |
``["get", key, prefix]``; ``CMP`` = ``[key, target, op, value]``, ``value`` base64 when
``target`` is ``"value"``, else an integer):

    {"op": "hello"}                  -> {"ok": true, "cluster": name, "revision": R}
    {"op": "get", "key": k}          -> {"ok": true, "kv": KV | null}
    {"op": "get_prefix", "key": k}   -> {"ok": true, "kvs": [KV, ...], "revision": R}
    {"op": "txn", "compare": [CMP, ...], "success": [OP, ...], "failure": [OP, ...]}
                                     -> {"ok": true, "succeeded": bool, "revision": R,
                                         "reads": [[KV, ...], ...]}

A failure answers ``{"ok": false, "error": message, "retriable": bool}``. Leases,
compaction and watches are not served (a lease of another process means nothing to the
broker); a put with a lease is refused.

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
import base64
import contextlib
import json
import logging
import os
import socket
import struct
from collections.abc import AsyncGenerator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from broker.embedded_store import EmbeddedMetadataStore, MetadataStoreLockedError
from broker.keys import DEFAULT_ROOT, KeyLayout
from broker.metadata_store import (
    Compare,
    CompareTarget,
    Delete,
    Get,
    KeyValue,
    Lease,
    LeaseKeeper,
    MetadataStore,
    Op,
    Put,
    TxnResult,
    WatchUpdate,
)
from broker.security.adopt import adopt_security_files, legacy_files
from hot.errors import InvalidConfigError, MetadataStoreError, StrataError

log = logging.getLogger("strata.cluster.store_socket")

SOCKET_NAME: Final = "store.sock"
SOCKET_MODE: Final = 0o600
MAX_FRAME: Final = 64 << 20
IDLE_S: Final = 60.0
CALL_TIMEOUT: Final = 5.0
SUN_PATH_MAX: Final = 107  # sockaddr_un.sun_path is 108 bytes with the NUL
DEFAULT_CLUSTER: Final = "strata-local"
_LEN = struct.Struct(">I")


def socket_path(meta_dir: Path) -> Path:
    return meta_dir / SOCKET_NAME


@contextlib.contextmanager
def _address(path: Path) -> Iterator[str]:
    """An address to bind or connect ``path`` by: itself, or, over the length limit,
    the same name through a directory descriptor in /proc (Linux)."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield str(path)
        return
    if not os.path.isdir("/proc/self/fd"):
        raise MetadataStoreError(
            f"the admin socket path {path} is longer than the {SUN_PATH_MAX} bytes a Unix "
            "socket path may have: use a shorter data dir path"
        )
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


# --- the codec ---------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: object) -> bytes:
    if not isinstance(text, str):
        raise InvalidConfigError("admin socket: expected base64 text")
    return base64.b64decode(text.encode("ascii"), validate=True)


def _kv_out(kv: KeyValue) -> list[Any]:
    return [_b64(kv.key), _b64(kv.value), kv.create_revision, kv.mod_revision, kv.version, kv.lease]


def _kv_in(raw: list[Any]) -> KeyValue:
    key, value, create, mod, version, lease = raw
    return KeyValue(_unb64(key), _unb64(value), int(create), int(mod), int(version), int(lease))


def _op_out(op: Op) -> list[Any]:
    if isinstance(op, Put):
        if op.lease:
            raise MetadataStoreError("leases are not served over the admin socket")
        return ["put", _b64(op.key), _b64(op.value)]
    kind = "delete" if isinstance(op, Delete) else "get"
    return [kind, _b64(op.key), op.prefix]


def _op_in(raw: list[Any]) -> Op:
    kind = raw[0]
    if kind == "put":
        return Put(_unb64(raw[1]), _unb64(raw[2]))
    if kind == "delete":
        return Delete(_unb64(raw[1]), bool(raw[2]))
    if kind == "get":
        return Get(_unb64(raw[1]), bool(raw[2]))
    raise InvalidConfigError(f"admin socket: unknown operation {kind!r}")


def _cmp_out(c: Compare) -> list[Any]:
    value = _b64(c.value) if isinstance(c.value, bytes) else c.value
    return [_b64(c.key), c.target.value, c.op, value]


def _cmp_in(raw: list[Any]) -> Compare:
    key, target, op, value = raw
    t = CompareTarget(target)
    return Compare(_unb64(key), t, str(op), _unb64(value) if t is CompareTarget.VALUE else int(value))


async def _read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message; None at a clean end of stream."""
    try:
        head = await reader.readexactly(_LEN.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    (n,) = _LEN.unpack(head)
    if n > MAX_FRAME:
        raise InvalidConfigError(f"admin socket: a frame of {n} bytes is over the {MAX_FRAME} allowed")
    doc = json.loads(await reader.readexactly(n))
    if not isinstance(doc, dict):
        raise InvalidConfigError("admin socket: a message must be a JSON object")
    return doc


def _frame(doc: dict[str, Any]) -> bytes:
    body = json.dumps(doc, separators=(",", ":")).encode()
    return _LEN.pack(len(body)) + body


# --- the broker's side -------------------------------------------------------------------------


class LocalStoreServer:
    """Serves ``store`` on ``<meta_dir>/store.sock`` (module docstring)."""

    def __init__(self, store: MetadataStore, meta_dir: Path, cluster: str) -> None:
        self.store = store
        self.path = socket_path(meta_dir)
        self.cluster = cluster
        self._server: asyncio.Server | None = None
        self._inode: int | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        tmp = self.path.with_name(f"{SOCKET_NAME}.{os.getpid()}.tmp")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            with _address(tmp) as addr:
                sock.bind(addr)
            os.chmod(tmp, SOCKET_MODE)
            sock.listen(16)
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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            if not _peer_allowed(writer):
                return
            while True:
                try:
                    request = await asyncio.wait_for(_read_frame(reader), IDLE_S)
                except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    return
                except (ValueError, InvalidConfigError) as exc:  # a bad frame: answer, then hang up
                    writer.write(_frame({"ok": False, "error": str(exc), "retriable": False}))
                    await writer.drain()
                    return
                if request is None:
                    return
                writer.write(_frame(await self._answer(request)))
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

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            op = request.get("op")
            if op == "hello":
                return {"ok": True, "cluster": self.cluster, "revision": await self.store.ping()}
            if op == "get":
                kv = await self.store.get(_unb64(request["key"]))
                return {"ok": True, "kv": None if kv is None else _kv_out(kv)}
            if op == "get_prefix":
                kvs, revision = await self.store.get_prefix(_unb64(request["key"]))
                return {"ok": True, "kvs": [_kv_out(kv) for kv in kvs], "revision": revision}
            if op == "txn":
                result = await self.store.txn(
                    [_cmp_in(c) for c in request["compare"]],
                    [_op_in(o) for o in request["success"]],
                    [_op_in(o) for o in request.get("failure", [])],
                )
                reads = [[_kv_out(kv) for kv in read] for read in result.reads]
                ok = result.succeeded
                return {"ok": True, "succeeded": ok, "revision": result.revision, "reads": reads}
            raise InvalidConfigError(f"admin socket: unknown request {op!r}")
        except StrataError as exc:
            return {"ok": False, "error": str(exc), "retriable": exc.retriable}
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            return {"ok": False, "error": f"admin socket: malformed request ({exc!r})", "retriable": False}


def _peer_allowed(writer: asyncio.StreamWriter) -> bool:
    """The socket's mode already limits it to its owner; where the OS tells the peer's
    uid, refuse anyone else but root (a mode changed by hand, a shared directory)."""
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return True
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    if uid in (os.getuid(), 0):
        return True
    log.warning("admin socket: refused a connection of uid %d", uid)
    return False


# --- the CLI's side ----------------------------------------------------------------------------


class LocalStoreClient:
    """A ``MetadataStore`` served by the broker running on ``meta_dir`` (module docstring):
    reads and transactions; no leases, compaction or watches."""

    def __init__(self, meta_dir: Path, *, timeout: float = CALL_TIMEOUT) -> None:
        self.path = socket_path(meta_dir)
        self.timeout = timeout
        self.cluster: str | None = None  # the broker's cluster id (``hello``)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def connect(self) -> LocalStoreClient:
        if self._writer is None:
            try:
                with _address(self.path) as addr:
                    self._reader, self._writer = await asyncio.wait_for(
                        asyncio.open_unix_connection(addr), self.timeout
                    )
            except (OSError, TimeoutError) as exc:
                why = "no answer" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
                raise MetadataStoreError(
                    f"cannot reach the broker's admin socket {self.path}: {why}"
                ) from None
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
        self._closed = True
        self._drop()

    def _drop(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()

    async def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        async with self._lock:
            if self._writer is None or self._reader is None:
                raise MetadataStoreError("the admin socket connection is closed")
            reader, writer = self._reader, self._writer
            try:
                writer.write(_frame(request))
                reply = await asyncio.wait_for(self._exchange(reader, writer), self.timeout)
            except TimeoutError:
                self._drop()
                raise MetadataStoreError(
                    f"the broker did not answer on {self.path} within {self.timeout:g} s"
                ) from None
            except (OSError, asyncio.IncompleteReadError, ValueError, InvalidConfigError) as exc:
                self._drop()
                raise MetadataStoreError(f"the broker's admin socket {self.path} failed: {exc}") from None
        if not reply.get("ok"):
            error = MetadataStoreError(str(reply.get("error", "unknown error")))
            error.retriable = bool(reply.get("retriable", False))
            raise error
        return reply

    @staticmethod
    async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict[str, Any]:
        await writer.drain()
        reply = await _read_frame(reader)
        if reply is None:
            raise ConnectionResetError("the broker closed the connection")
        return reply

    # --- MetadataStore ---------------------------------------------------------------------

    async def ping(self) -> int:
        return int((await self._call({"op": "hello"}))["revision"])

    async def get(self, key: bytes) -> KeyValue | None:
        raw = (await self._call({"op": "get", "key": _b64(key)}))["kv"]
        return None if raw is None else _kv_in(raw)

    async def get_prefix(self, prefix: bytes) -> tuple[tuple[KeyValue, ...], int]:
        reply = await self._call({"op": "get_prefix", "key": _b64(prefix)})
        return tuple(_kv_in(kv) for kv in reply["kvs"]), int(reply["revision"])

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult:
        reply = await self._call(
            {
                "op": "txn",
                "compare": [_cmp_out(c) for c in compare],
                "success": [_op_out(o) for o in success],
                "failure": [_op_out(o) for o in failure],
            }
        )
        reads = tuple(tuple(_kv_in(kv) for kv in read) for read in reply["reads"])
        return TxnResult(bool(reply["succeeded"]), int(reply["revision"]), reads)

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        return (await self.txn([], [Put(key, value, lease)])).revision

    async def delete(self, key: bytes) -> bool:
        return (await self.txn([Compare.version(key, 0, ">")], [Delete(key)])).succeeded

    async def delete_prefix(self, prefix: bytes) -> int:
        result = await self.txn([], [Get(prefix, prefix=True), Delete(prefix, prefix=True)])
        return len(result.reads[0])

    async def compact(self, revision: int) -> None:
        raise MetadataStoreError("compaction is not served over the admin socket")

    async def grant_lease(self, ttl: int) -> Lease:
        raise MetadataStoreError("leases are not served over the admin socket")

    async def refresh_lease(self, lease_id: int) -> int:
        raise MetadataStoreError("leases are not served over the admin socket")

    async def lease_ttl(self, lease_id: int) -> int:
        raise MetadataStoreError("leases are not served over the admin socket")

    async def revoke_lease(self, lease_id: int) -> bool:
        raise MetadataStoreError("leases are not served over the admin socket")

    def keep_alive(self, lease: Lease, *, interval: float | None = None) -> LeaseKeeper:
        raise MetadataStoreError("leases are not served over the admin socket")

    async def watch_prefix(
        self, prefix: bytes, *, start_revision: int | None = None
    ) -> AsyncGenerator[WatchUpdate, None]:
        raise MetadataStoreError("watches are not served over the admin socket")
        yield  # an async generator, as the protocol's


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
