"""Confluent REST v3 produce: ``POST /v3/clusters/{id}/topics/{t}/records``.

The body is one record, or a stream of records as concatenated JSON (Confluent's streaming
mode, typically sent with ``Transfer-Encoding: chunked``)::

    {"partition_id": 1, "headers": [{"name": "h", "value": "<base64>"}],
     "key": {"type": "STRING", "data": "k"}, "value": {"type": "JSON", "data": {"a": 1}},
     "timestamp": "2026-11-28T16:00:00Z"}

``type`` is BINARY (``data`` base64), JSON (any JSON value, stored as its compact UTF-8
encoding) or STRING (stored UTF-8); without ``type`` the data is JSON. A null or absent key
is no key; a null or absent value a null value. No schema registry: ``schema_id`` and the
like are refused (422).

The answer is one delivery report per record, in order, concatenated (newline-separated)
like the request; read while the request is still being sent, each report follows its
record (records that arrive together are appended together, one batch per partition):
``{"error_code": 200, "cluster_id", "topic_name", "partition_id", "offset", "timestamp",
"key": {"type", "size"} | null, "value": ...}``, or for a refused record
``{"error_code": <code>, "message": ".."}`` (400 a malformed record or bad base64, as
Confluent's v3; 40402 no such partition, else Confluent's produce codes: 50003 retriable,
50002 other) while the other records go on; the HTTP status is 200 once the topic is known. The topic, the
cluster, WRITE on the topic (as the v2 produce, auto-creation included) and the content type
are checked first, as HTTP errors. Each record (one JSON value) is at most
``max_request_bytes``; the stream itself is not bounded.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import datetime
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from api.rest.codec import (
    JSON,
    RestError,
    UnknownPartitionError,
    check_partition,
    describe_errors,
    dumps_compact,
    media_type_of,
    request_body_spec,
    schema_ref,
    strict_decoder,
)
from api.rest.models_v3 import ProduceDataIn, ProduceRecordV3, ProduceResultV3
from api.rest.producing import RestProducer, producer_error_code
from api.rest.v3 import V3Context
from hot.records import Header, RecordInput
from hot.topics import TopicInfo


class _BadRecord(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _encode(data: ProduceDataIn | None, where: str) -> tuple[bytes | None, dict[str, Any] | None]:
    """The stored bytes of a key or value and its ``{"type", "size"}`` report."""
    if data is None or data.data is None:
        return None, None
    kind = data.type or "JSON"
    if kind == "BINARY":
        if not isinstance(data.data, str):
            raise _BadRecord(400, f"{where}.data of type BINARY must be a base64 string")
        try:
            raw = base64.b64decode(data.data, validate=True)
        except (binascii.Error, ValueError):
            raise _BadRecord(400, f"{where}.data is not valid base64") from None
    elif kind == "STRING":
        if not isinstance(data.data, str):
            raise _BadRecord(400, f"{where}.data of type STRING must be a string")
        raw = data.data.encode("utf-8", "surrogatepass")
    else:
        try:
            raw = dumps_compact(data.data)
        except (ValueError, RecursionError) as exc:
            raise _BadRecord(400, f"{where}.data cannot be encoded as JSON: {exc}") from None
    return raw, {"type": kind, "size": len(raw)}


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _BadRecord(400, f"timestamp {text[:40]!r} is not ISO 8601") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _iso(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Parsed:
    """One record of the request: what to append, or why it is refused."""

    def __init__(self, doc: Any, info: TopicInfo) -> None:
        self.error: _BadRecord | None = None
        self.input: RecordInput | None = None
        self.partition: int | None = None
        self.key: dict[str, Any] | None = None
        self.value: dict[str, Any] | None = None
        self.timestamp = 0
        try:
            for part in ("key", "value"):
                sub = doc.get(part) if isinstance(doc, dict) else None
                if isinstance(sub, dict) and any(k.startswith("schema") or k == "subject" for k in sub):
                    raise _BadRecord(
                        400, f"{part}: schemas need a schema registry, which Strata does not run"
                    )
            try:
                rec = ProduceRecordV3.model_validate(doc)
            except ValidationError as exc:
                raise _BadRecord(400, describe_errors(exc.errors())) from None
            if rec.partition_id is not None:
                try:
                    check_partition(info, rec.partition_id)
                except UnknownPartitionError as exc:
                    raise _BadRecord(40402, str(exc)) from None
            key, self.key = _encode(rec.key, "key")
            value, self.value = _encode(rec.value, "value")
            headers = []
            for i, h in enumerate(rec.headers):
                raw = None
                if h.value is not None:
                    try:
                        raw = base64.b64decode(h.value, validate=True)
                    except (binascii.Error, ValueError):
                        raise _BadRecord(400, f"headers[{i}].value is not valid base64") from None
                headers.append(Header(h.name, raw))
            self.timestamp = _timestamp_ms(rec.timestamp) if rec.timestamp else int(time.time() * 1000)
            self.partition = rec.partition_id
            self.input = RecordInput(key, value, tuple(headers), self.timestamp)
        except _BadRecord as exc:
            self.error = exc


_LITERALS = ("true", "false", "null")


def _cut(exc: json.JSONDecodeError, text: str) -> bool:
    """Whether the decoding error is only the end of the text so far: an unfinished string,
    or the rest a prefix of a literal or number (``{"a": tr``, ``{"a": 1``)."""
    if exc.msg.startswith("Unterminated string"):
        return True
    rest = text[exc.pos :]
    return all(c in "0123456789+-.eE" for c in rest) or any(lit.startswith(rest) for lit in _LITERALS)


class _Splitter:
    """Concatenated JSON values out of a byte stream that arrives in arbitrary chunks."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.text = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._json = strict_decoder()

    def feed(self, chunk: bytes) -> tuple[list[Any], str | None]:
        """The values completed by ``chunk``, and an error message when what follows can
        never become one (bad UTF-8 or JSON, or a value over ``limit`` bytes)."""
        try:
            self.text += self._utf8.decode(chunk)
        except UnicodeDecodeError:
            return [], "the request body is not UTF-8"
        values: list[Any] = []
        pos = 0
        text = self.text
        while True:
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if pos >= len(text):
                break
            try:
                doc, pos = self._json.raw_decode(text, pos)
            except (json.JSONDecodeError, ValueError, RecursionError) as exc:
                if isinstance(exc, json.JSONDecodeError) and _cut(exc, text):
                    break  # a value cut by the chunk boundary: wait for more
                self.text = ""
                return values, f"the request body is not valid JSON: {exc}"
            values.append(doc)
        self.text = text[pos:]
        if len(self.text) > self.limit:
            return values, f"a record exceeds the limit of {self.limit} bytes"
        return values, None

    @property
    def unfinished(self) -> bool:
        return bool(self.text.strip())


class _Reports(Response):
    """The delivery reports, sent as they are made. Not a StreamingResponse: that one reads
    the connection for a disconnect while it streams, taking the request body's messages
    this answer still reads (a request body read while answering is the point here)."""

    def __init__(self, reports: AsyncIterator[bytes]) -> None:
        super().__init__(media_type=JSON)
        # no Content-Length (Response sets 0 for its empty body): the reports are chunked
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.reports = reports

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for chunk in self.reports:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def v3_records_router(ctx: V3Context, producer: RestProducer) -> APIRouter:
    router = APIRouter(tags=["v3"])
    broker = ctx.broker
    limit = broker.config.max_request_bytes

    async def reports(request: Request, info: TopicInfo, docs: list[Any]) -> list[dict[str, Any]]:
        parsed = [_Parsed(doc, info) for doc in docs]
        valid = [(p.input, p.partition) for p in parsed if p.input is not None]
        outcomes = iter((await producer.produce(request, info, valid))[0] if valid else [])
        out = []
        for p in parsed:
            if p.error is not None:
                out.append({"error_code": p.error.code, "message": str(p.error)})
                continue
            o = next(outcomes)
            if o.error is not None:
                out.append({"error_code": producer_error_code(o.error), "message": str(o.error)})
                continue
            out.append(
                {
                    "error_code": 200,
                    "cluster_id": ctx.cluster_id,
                    "topic_name": info.name,
                    "partition_id": o.partition,
                    "offset": o.offset,
                    "timestamp": _iso(o.log_append_time_ms if o.log_append_time_ms >= 0 else p.timestamp),
                    "key": p.key,
                    "value": p.value,
                }
            )
        return out

    @router.post(
        "/v3/clusters/{cluster_id}/topics/{topic}/records",
        response_class=Response,
        openapi_extra=request_body_spec((JSON, ProduceRecordV3)),
        responses={
            200: {
                "description": "One delivery report per record, in order (concatenated JSON)",
                "content": {JSON: {"schema": schema_ref(ProduceResultV3)}},
            }
        },
    )
    async def produce_records(request: Request, cluster_id: str, topic: str) -> Response:
        ctx.check(cluster_id)
        media = media_type_of(request)
        if media != JSON and not (media.startswith("application/") and media.endswith("+json")):
            raise RestError(415, 415, f"unsupported Content-Type {media or '(none)'!r}: use {JSON}")
        info = await producer.topic_for_write(request, topic)
        stream = request.stream()
        splitter = _Splitter(limit)
        # The first record is read before answering, so that an empty body or a malformed
        # first record is an HTTP error, as a single-record request expects.
        first: list[Any] = []
        error: str | None = None
        async for chunk in stream:
            first, error = splitter.feed(chunk)
            if first or error:
                break
        if not first:
            if error is None and splitter.unfinished:
                error = "the request body ends inside a record"
            raise RestError(422, 422, error or "the request body has no record")

        async def answer() -> AsyncIterator[bytes]:
            pending, failure = first, error
            while True:
                for report in await reports(request, info, pending) if pending else []:
                    yield dumps_compact(report) + b"\n"
                if failure is not None:
                    yield dumps_compact({"error_code": 400, "message": failure}) + b"\n"
                    return
                try:
                    chunk = await anext(stream)
                except ClientDisconnect:
                    return  # the client went away: what it sent is written, nobody to tell
                except StopAsyncIteration:
                    if splitter.unfinished:
                        end = {"error_code": 400, "message": "the request body ends inside a record"}
                        yield dumps_compact(end) + b"\n"
                    return
                pending, failure = splitter.feed(chunk)

        return _Reports(answer())

    return router
