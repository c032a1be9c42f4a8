"""Encoded Metadata answers, reused while the metadata view stands still.

A Metadata answer (api.handlers.topics.handle_metadata) is a pure function of the watched
metadata view, the request's topic names (or "all"), the API version and the listener
(external or not: which broker addresses it names). Clients ask the same question over
and over (librdkafka every ``topic.metadata.refresh.interval.ms`` and on every error, a
pipelining client on every partition it meets), so the answer's body is kept as encoded
bytes and sent again with only the response header (the correlation id) made new: no
handler, no response dataclasses, no encode, no task per request (issue 34 §2). A request
whose bytes (all but its correlation id) were seen before at this view is not even
decoded: the listener looks its frame up first (``answer_frame``).

What may be answered from here: a request whose named topics all exist in the view (or
that asks for all topics), on a connection with no ACL guard in front of the handler
(no authorizer, or the inter-broker listener). Everything else goes to the handler as
before: a topic to auto-create or answer UNKNOWN_TOPIC_OR_PARTITION, topics asked by id,
and every request under ACLs (the guard filters per principal). ``view.seq`` moves with
every update the view applies, and the entries of an older ``seq`` (or of a view object
since replaced) are dropped, so a cached answer is always the one the handler would give.

The answer's error codes (partitions without a leader) are kept with it and counted on
every reuse, as ``strata_request_errors_total`` counts a handler's answer.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kwire import APIS, ApiKey, RequestHeader, encode_response
from kwire.messages.metadata import MetadataRequest, MetadataResponse

if TYPE_CHECKING:
    from api.handlers.context import Connection
    from api.security.guards import Handler

# More distinct questions than this at one view seq: start over (bounded memory).
MAX_ENTRIES: Final = 512
API_NAME: Final = APIS[ApiKey.METADATA].name

# (API version, topic names or None for all); one cache per listener (external or not)
Key = tuple[int, tuple[str, ...] | None]


@dataclass(frozen=True, slots=True)
class Entry:
    header: RequestHeader  # of the request first answered (the listener logs with it)
    body: bytes  # the response less its correlation id
    codes: tuple[int, ...]  # the error codes in it (strata_request_errors_total)


# (the request's header, the response parts)
Answer = tuple[RequestHeader, list[Any]]


class MetadataCache:
    """One per listener (``api.kafka_server.KafkaServer``); event loop only."""

    def __init__(self) -> None:
        self._view: object = None
        self._seq = -1
        self._entries: dict[Key, Entry] = {}
        # The same entries by request frame (its bytes less the correlation id): a client
        # repeating a request is answered without even decoding it.
        self._frames: dict[bytes, Entry] = {}
        self.hits = 0  # for tests and benchmarks

    def _usable(self, conn: Connection) -> bool:
        """No ACL guard in front of the handler, and the entries of the view as it is now
        (older ones dropped)."""
        broker = conn.broker
        if getattr(broker, "access", None) is not None and not conn.server.inter_broker:
            return False  # ACLs: the guard answers per principal
        view = broker.replicas.view
        if view is not self._view or view.seq != self._seq:
            self._view, self._seq = view, view.seq
            self._entries.clear()
            self._frames.clear()
        return True

    def _key(self, conn: Connection, header: RequestHeader, req: MetadataRequest) -> Key | None:
        """The request's key if the cache may answer it, else None (see the module doc)."""
        if not self._usable(conn):
            return None
        if req.topics is None:
            return (header.api_version, None)
        names: list[str] = []
        topics = conn.broker.replicas.view.topics
        for rt in req.topics:
            name = rt.name
            if name is None or name not in topics:
                return None  # by id, unknown or to auto-create: the handler decides
            names.append(name)
        return (header.api_version, tuple(names))

    def answer_frame(self, conn: Connection, frame: bytes, started: float) -> Answer | None:
        """The answer to a Metadata request ``frame`` (not decoded yet) if a request with
        the same bytes but for the correlation id was answered from here before, at this
        view; None: decode it and ask ``answer``."""
        if not self._usable(conn):
            return None
        entry = self._frames.get(frame[:4] + frame[8:])
        if entry is None:
            return None
        return entry.header, self._reply(conn, entry, frame[4:8], started)

    def answer(
        self, conn: Connection, header: RequestHeader, req: MetadataRequest, frame: bytes, started: float
    ) -> list[Any] | None:
        """The response parts for this request if cached (metrics counted as the listener
        would; ``started``: ``time.perf_counter()`` at its arrival); None: run the handler."""
        key = self._key(conn, header, req)
        if key is None:
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        if len(self._frames) >= MAX_ENTRIES:
            self._frames.clear()
        self._frames[frame[:4] + frame[8:]] = entry
        return self._reply(conn, entry, frame[4:8], started)

    def _reply(self, conn: Connection, entry: Entry, correlation: bytes, started: float) -> list[Any]:
        self.hits += 1
        metrics = conn.broker.metrics
        metrics.labelled(metrics.request_latency, API_NAME).observe(time.perf_counter() - started)
        if entry.codes:
            metrics.response_errors.count_codes(API_NAME, entry.codes)
        return [correlation + entry.body]

    def wrap(self, inner: Handler) -> Handler:
        """``inner`` (the Metadata handler) storing what it answers when cacheable."""

        def cached(conn: Connection, header: RequestHeader, req: Any) -> Awaitable[Any]:
            key = self._key(conn, header, req)
            if key is None:
                return inner(conn, header, req)
            return self._fill(inner, key, conn, header, req)

        return cached

    async def _fill(self, inner: Handler, key: Key, conn: Connection, header: RequestHeader, req: Any) -> Any:
        seq = self._seq
        view = self._view
        resp = await inner(conn, header, req)
        if type(resp) is not MetadataResponse or self._seq != seq or self._view is not view:
            return resp
        if conn.broker.replicas.view.seq != seq:
            return resp  # the view moved while the handler ran: not this key's answer
        parts = encode_response(RequestHeader(ApiKey.METADATA, header.api_version, 0, None), resp)
        if not all(isinstance(p, bytes | bytearray) for p in parts):
            return resp
        encoded = b"".join(parts)  # type: ignore[arg-type]
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = Entry(
            header,
            encoded[4:],  # all but the correlation id: the header's tag byte if flexible, the body
            tuple(conn.broker.metrics.response_errors.codes(API_NAME, resp)),
        )
        return resp


__all__ = ["MetadataCache"]
