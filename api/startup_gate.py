"""The start-up gate: no request is answered before the broker can answer it correctly.

``strata serve`` binds its sockets early (their ports go into the broker's registration
and the start-up lines), but the broker is registered in its metadata store, with a
controller in its view, only at the end of the start (``broker.node.ClusterNode.start``).
A request answered in between would get a wrong answer: a Metadata response with no
brokers and no controller, after which librdkafka's admin client waits for its next
metadata refresh (about 25 s) before it retries. Kafka, likewise, binds its listeners
early and enables request processing only once the broker's start-up is complete.

So every door waits on one ``StartupGate``, opened by ``api.server.serve`` right before
"strata: ready":

* Kafka listeners (client, external, internal): connections are accepted (and a TLS
  handshake runs) at once, but no request is read until the gate opens; the client's
  first request simply takes longer (api.kafka_server). Nothing that the start itself
  needs comes in through these listeners: registration, the view and the controller
  election go through the metadata store only, so gating the internal listener cannot
  deadlock a start. A peer fetching from this broker in the meantime waits, as a client does.
* HTTP (REST, console, metrics listener): ``GET /healthz`` answers 503 with
  ``{"status": "starting"}`` and ``Retry-After`` at once (a health check's correct
  answer); every other request waits for the gate, up to ``HTTP_WAIT_S``, and is then
  answered 503 with ``Retry-After`` if the start has still not finished.
"""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Receive, Scope, Send

# How long an HTTP request made during the start waits for it before a 503.
HTTP_WAIT_S = 30.0
RETRY_AFTER_S = 1
# Paths that report the start instead of waiting for it.
STATUS_PATHS = frozenset({"/healthz"})


class StartupGate:
    """Closed until the broker's start-up is complete; ``open`` is final."""

    def __init__(self) -> None:
        self._open = asyncio.Event()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def open(self) -> None:
        self._open.set()

    async def wait(self) -> None:
        await self._open.wait()


def gated(app: ASGIApp, gate: StartupGate, *, wait_s: float = HTTP_WAIT_S) -> ASGIApp:
    """``app`` behind ``gate`` (see the module docstring)."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if gate.is_open or scope["type"] not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        if scope["type"] == "http" and scope.get("path") in STATUS_PATHS:
            await _starting(send)
            return
        try:
            await asyncio.wait_for(gate.wait(), wait_s)
        except TimeoutError:
            if scope["type"] == "http":
                await _starting(send)
            else:
                await send({"type": "websocket.close", "code": 1013})  # try again later
            return
        await app(scope, receive, send)

    return asgi


async def _starting(send: Send) -> None:
    body = json.dumps({"status": "starting"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(RETRY_AFTER_S).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
