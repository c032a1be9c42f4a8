"""Asking another broker's HTTP listener, so that any broker's console and REST API serve
the whole cluster.

Most of what they show is in the cluster metadata every broker watches. Three things are
not: the groups a broker coordinates, the records of the partitions it leads, and its own
disk and request rates. For those the serving broker asks the broker that has them, over
that broker's HTTP listener, with the same request: the same endpoint, the caller's
``Authorization`` header (so the peer makes the same ACL decisions for the same principal),
and ``X-Strata-Forwarded: 1`` so that the peer answers from what it has and never forwards
again (no loop while leadership moves).

Peers are reached at the host of their registration and their HTTP port, with TLS when this
broker's HTTP listener uses it (the configured CA checks the peer; the broker's own
certificate is offered for mutual TLS). A peer that does not answer within ``TIMEOUT_S`` is
a 502 with one line naming it, or, for the group listing and the broker figures, a name in
the answer's ``unreachable`` list. Principals authenticated by a client certificate have no
header to forward: the peer sees the broker's certificate instead.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import Response

from api.rest.codec import JSON, RestError, loads_strict
from hot.errors import StrataError

if TYPE_CHECKING:
    from broker.broker import Broker

FORWARDED = "X-Strata-Forwarded"
TIMEOUT_S = 10.0


class AnsweredBy(Exception):
    """Raised by a route whose answer another broker holds (a group's coordinator): the
    app's handler relays the whole request there (``Peers.relay``) and passes its answer
    back as it came."""

    def __init__(self, broker_id: int) -> None:
        super().__init__(f"answered by broker {broker_id}")
        self.broker_id = broker_id


def forwarded(request: Request) -> bool:
    """Whether another broker sent this request (answer locally, never forward)."""
    return request.headers.get(FORWARDED) == "1"


def other_live_brokers(broker: Broker) -> list[int]:
    return sorted(b for b in broker.replicas.view.brokers if b != broker.node_id)


def group_coordinator_id(broker: Broker, group: str) -> int:
    """The broker coordinating ``group`` (consumer and share groups are placed alike): this
    one when it cannot tell yet, so that the local coordinator answers with the usual error."""
    store = broker.offset_store
    if store is None:
        return broker.node_id
    try:
        return store.coordinator_for(group)
    except StrataError:
        return broker.node_id  # loading: this broker is the one asked


def answered_at_coordinator(broker: Broker, request: Request, group: str) -> None:
    """Raise ``AnsweredBy`` when another broker coordinates ``group`` and this request was
    not relayed already (a relayed one is answered here, whatever this broker knows)."""
    coordinator = group_coordinator_id(broker, group)
    if coordinator != broker.node_id and not forwarded(request):
        raise AnsweredBy(coordinator)


async def with_peers_listing(
    peers: Peers, request: Request, data: list[dict[str, Any]], key: str
) -> list[dict[str, Any]]:
    """``data`` (this broker's rows of a v3 listing) merged with the rows every other live
    broker answers for the same request (unless this one was relayed), each id once, sorted
    by ``key``. A broker that does not answer is left out."""
    if forwarded(request):
        return data
    answers, _ = await peers.json_of_each(request, request.url.path)
    out = list(data)
    seen = {row[key] for row in out}
    for doc in answers.values():
        for row in doc.get("data", []) if isinstance(doc, dict) else []:
            if isinstance(row, dict) and row.get(key) not in seen:
                seen.add(row.get(key))
                out.append(row)
    out.sort(key=lambda row: str(row.get(key)))
    return out


class Peers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        tls = broker.config.tls
        self._context: ssl.SSLContext | None = None
        if tls.enabled and tls.cert is not None and tls.key is not None:
            ctx = ssl.create_default_context(cafile=str(tls.ca) if tls.ca is not None else None)
            ctx.load_cert_chain(str(tls.cert), str(tls.key))
            self._context = ctx

    async def ask(
        self,
        request: Request,
        broker_id: int,
        path: str,
        *,
        method: str = "GET",
        body: bytes | None = None,
        timeout: float = TIMEOUT_S,
    ) -> tuple[int, bytes, str]:
        """(status, body, content type) of ``path`` (with its query) on broker ``broker_id``
        (``timeout``: for a request that is slow by design, such as a tier sync)."""
        live = self.broker.replicas.view.brokers.get(broker_id)
        if live is None:
            raise RestError(502, 50200, f"broker {broker_id} is not registered (down?)")
        reg = live.registration
        scheme = "https" if self._context is not None else "http"
        url = f"{scheme}://{reg.host}:{reg.http_port}{path}"
        headers = {FORWARDED: "1", "Accept": JSON}
        auth = request.headers.get("authorization")
        if auth is not None:
            headers["Authorization"] = auth
        if body is not None:
            headers["Content-Type"] = JSON
        ctx = self._context

        def call() -> tuple[int, bytes, str]:
            req = urllib.request.Request(url, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
                    return resp.status, resp.read(), resp.headers.get("Content-Type", JSON)
            except urllib.error.HTTPError as e:
                return e.code, e.read(), e.headers.get("Content-Type", JSON)
            except (OSError, ValueError) as e:
                reason = getattr(e, "reason", e)
                raise RestError(
                    502, 50200, f"broker {broker_id} at {reg.host}:{reg.http_port} did not answer: {reason}"
                ) from None

        return await asyncio.to_thread(call)

    async def relay(
        self, request: Request, broker_id: int, *, method: str = "GET", body: bytes | None = None
    ) -> Response:
        """The same request, answered by broker ``broker_id``, passed back as it answered."""
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        status, data, ctype = await self.ask(request, broker_id, path, method=method, body=body)
        return Response(data, status_code=status, media_type=ctype)

    async def json(self, request: Request, broker_id: int, path: str) -> Any:
        """The JSON answer of ``path`` on broker ``broker_id``; its error (status and
        message) raised as this broker's when it did not answer 200."""
        status, data, _ = await self.ask(request, broker_id, path)
        try:
            doc = loads_strict(data)
        except ValueError:
            raise RestError(502, 50200, f"broker {broker_id} answered HTTP {status} without JSON") from None
        if status != 200:
            message = doc.get("message") if isinstance(doc, dict) else None
            raise RestError(status, status * 100, message or f"broker {broker_id} answered HTTP {status}")
        return doc

    async def json_of_each(self, request: Request, path: str) -> tuple[dict[int, Any], list[int]]:
        """``path`` asked of every other live broker at once: the JSON answers of those that
        answered 200, and the ids of those that did not."""
        ids = other_live_brokers(self.broker)
        results = await asyncio.gather(*(self.ask(request, b, path) for b in ids), return_exceptions=True)
        out: dict[int, Any] = {}
        failed: list[int] = []
        for b, r in zip(ids, results, strict=True):
            if isinstance(r, BaseException) or r[0] != 200:
                failed.append(b)
                continue
            try:
                out[b] = loads_strict(r[1])
            except ValueError:
                failed.append(b)
        return out, failed
