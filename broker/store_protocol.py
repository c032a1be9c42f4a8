"""The frames and codec of the local metadata store socket (``broker.store_socket`` serves
it, ``broker.store_client`` speaks it; the protocol is described in ``broker.store_socket``).

Each message is one frame: a u32 big-endian length N (at most ``MAX_FRAME``), then N bytes
of a UTF-8 JSON object. Keys and values travel in base64.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from broker.metadata_store import (
    Compare,
    CompareTarget,
    Delete,
    Get,
    KeyValue,
    Op,
    Put,
    WatchEvent,
    WatchEventType,
)
from hot.errors import InvalidConfigError, MetadataStoreError

SOCKET_NAME: Final = "store.sock"
SOCKET_MODE: Final = 0o600
MAX_FRAME: Final = 64 << 20
IDLE_S: Final = 60.0
CALL_TIMEOUT: Final = 5.0
SUN_PATH_MAX: Final = 107  # sockaddr_un.sun_path is 108 bytes with the NUL
_LEN = struct.Struct(">I")


def socket_path(meta_dir: Path) -> Path:
    return meta_dir / SOCKET_NAME


@contextlib.contextmanager
def address(path: Path) -> Iterator[str]:
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


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: object) -> bytes:
    if not isinstance(text, str):
        raise InvalidConfigError("admin socket: expected base64 text")
    return base64.b64decode(text.encode("ascii"), validate=True)


def kv_out(kv: KeyValue) -> list[Any]:
    return [b64(kv.key), b64(kv.value), kv.create_revision, kv.mod_revision, kv.version, kv.lease]


def kv_in(raw: list[Any]) -> KeyValue:
    key, value, create, mod, version, lease = raw
    return KeyValue(unb64(key), unb64(value), int(create), int(mod), int(version), int(lease))


def op_out(op: Op) -> list[Any]:
    if isinstance(op, Put):
        return ["put", b64(op.key), b64(op.value), op.lease]
    kind = "delete" if isinstance(op, Delete) else "get"
    return [kind, b64(op.key), op.prefix]


def op_in(raw: list[Any]) -> Op:
    kind = raw[0]
    if kind == "put":  # the lease is absent in frames of older clients
        return Put(unb64(raw[1]), unb64(raw[2]), int(raw[3]) if len(raw) > 3 else 0)
    if kind == "delete":
        return Delete(unb64(raw[1]), bool(raw[2]))
    if kind == "get":
        return Get(unb64(raw[1]), bool(raw[2]))
    raise InvalidConfigError(f"admin socket: unknown operation {kind!r}")


def cmp_out(c: Compare) -> list[Any]:
    value = b64(c.value) if isinstance(c.value, bytes) else c.value
    return [b64(c.key), c.target.value, c.op, value]


def cmp_in(raw: list[Any]) -> Compare:
    key, target, op, value = raw
    t = CompareTarget(target)
    return Compare(unb64(key), t, str(op), unb64(value) if t is CompareTarget.VALUE else int(value))


def event_out(event: WatchEvent) -> list[Any]:
    return [event.type.value, kv_out(event.kv)]


def event_in(raw: list[Any]) -> WatchEvent:
    return WatchEvent(WatchEventType(raw[0]), kv_in(raw[1]))


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
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


def frame(doc: dict[str, Any]) -> bytes:
    body = json.dumps(doc, separators=(",", ":")).encode()
    return _LEN.pack(len(body)) + body
