"""The Kafka listener's write loop over a real loopback TCP connection: responses go out
whole and in order whichever way their parts are written (through the transport's
buffer, or large parts straight from their own memory with ``Connection._send_direct``),
also when the transport's buffer still holds earlier bytes because the client is not
reading. The server object is a stand-in with just what a Connection reads from it."""

from __future__ import annotations

import asyncio
import os
import socket
from types import SimpleNamespace
from typing import Any

from api.kafka_server import DIRECT_SEND_MIN, Connection
from kwire import RequestHeader


def _server() -> Any:
    broker = SimpleNamespace(config=SimpleNamespace(max_request_bytes=1 << 20))
    return SimpleNamespace(broker=broker, sasl_mechanisms=(), users=None)


async def _done(value: Any) -> Any:
    return value


async def test_large_parts_wait_for_buffered_bytes_and_arrive_in_order() -> None:
    small = [os.urandom(50_000) for _ in range(200)]  # 10 MB through the transport's buffer
    big = memoryview(bytearray(os.urandom(12 << 20)))  # then one part sent directly
    tail = os.urandom(DIRECT_SEND_MIN + 1)  # a bytes part large enough to go directly too
    responses: list[list[Any]] = [small[:100], [*small[100:], big], [b"x" * 10, tail], [b"last"]]
    conns: list[Connection] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(_server(), reader, writer)
        conns.append(conn)
        write_task = asyncio.create_task(conn._write_loop())
        for i, parts in enumerate(responses):
            header = RequestHeader(api_key=18, api_version=0, correlation_id=i, client_id=None)
            await conn.pending.put((header, asyncio.create_task(_done(parts))))
        await conn.pending.put(None)
        await write_task
        conn.abort()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)
    client.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(client, ("127.0.0.1", port))
    try:
        await asyncio.sleep(0.5)  # not reading: the kernel's buffers fill, the transport's too
        received = bytearray()
        while True:
            chunk = await asyncio.wait_for(loop.sock_recv(client, 1 << 16), 30)
            if not chunk:
                break
            received += chunk
    finally:
        client.close()
        server.close()
        await server.wait_closed()

    expected = bytearray()
    for parts in responses:
        body = b"".join(bytes(p) for p in parts)
        expected += len(body).to_bytes(4, "big") + body
    assert len(received) == len(expected)
    assert received == expected
    assert conns[0]._direct is not None  # the large parts did take the direct path
    assert conns[0]._direct.fileno() == -1  # and its socket was closed with the connection
