"""The REST API's building blocks below the routes: content negotiation, bounded body
reading and parsing, JSON/base64 codecs, record placement, the error shape, and the
v2 representations of topics and partitions."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError

from api.partitioner import partition_for_key
from api.rest.models import (
    BinaryProduceRequest,
    BinaryRecordIn,
    ErrorResponse,
    HeaderIn,
    JsonProduceRequest,
    JsonRecordIn,
)
from api.stored_batches import decode_stored
from broker.broker import Broker
from broker.read_path import FetchedPartition
from hot.errors import (
    AuthenticationError,
    AuthorizationError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    PolicyViolationError,
    SecurityDisabledError,
    StrataError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from hot.records import Header, Record, RecordInput
from hot.topics import TopicInfo
from kwire.error_table import http_status

V2: Final = "application/vnd.kafka.v2+json"
V2_JSON: Final = "application/vnd.kafka.json.v2+json"
V2_BINARY: Final = "application/vnd.kafka.binary.v2+json"
JSON: Final = "application/json"

PRODUCE_TIMEOUT_MS: Final = 30_000  # Kafka's request.timeout.ms default
DEFAULT_FETCH_TIMEOUT_MS: Final = 1_000  # Confluent's consumer.request.timeout.ms default
MAX_FETCH_TIMEOUT_MS: Final = 30_000
DEFAULT_FETCH_MAX_BYTES: Final = 1 << 20

Format = Literal["json", "binary"]

# --- errors ---------------------------------------------------------------------------------


class RestError(Exception):
    """An HTTP-level failure that is not a Strata domain error (content type, size, syntax)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


class UnknownPartitionError(UnknownTopicOrPartitionError):
    """The topic exists but not the partition (Confluent tells the two apart: 40401/40402)."""


# Confluent's error codes for Kafka errors (rest-utils' KafkaExceptionMapper, kafka-rest's
# Errors): the HTTP status always comes from kwire.error_table.classify (the one table).
_CODES: Final[dict[type[StrataError], int]] = {
    UnknownPartitionError: 40402,
    UnknownTopicOrPartitionError: 40401,
    AuthenticationError: 40101,
    AuthorizationError: 40301,
    # the Kafka errors Confluent answers 400 / 40002 ("bad request")
    TopicExistsError: 40002,
    InvalidTopicError: 40002,
    InvalidPartitionsError: 40002,
    InvalidReplicationFactorError: 40002,
    InvalidConfigError: 40002,
    InvalidRequestError: 40002,
    PolicyViolationError: 40002,
    SecurityDisabledError: 40002,
}


def strata_error_code(exc: StrataError) -> int:
    """Confluent's ``error_code`` of a Strata error: its own (table above), else for a server
    error 50003 when retrying may help and 50002 otherwise (Confluent's retriable and other
    Kafka errors), else the HTTP status times 100 (five_digit)."""
    code = next((_CODES[c] for c in type(exc).__mro__ if c in _CODES), None)
    if code is not None:
        return code
    status = http_status(exc)
    if status >= 500:
        return 50003 if exc.retriable else 50002
    return five_digit(status)


def five_digit(code: int) -> int:
    """A bare HTTP status as an ``error_code``: the status times 100 (40400, 41500, 42200,
    41600 an offset out of range), the form of Confluent's five-digit codes with ``00``
    for "no finer code"; a five-digit code is kept."""
    return code * 100 if code < 1000 else code


# Confluent's code of an invalid consumer instance setting (kafka-rest Errors).
INVALID_CONSUMER_CONFIG: Final = 42204


def unprocessable(message: str, code: int = 422) -> RestError:
    """A body that does not parse or fit: 422 / 42200 on v2 (v3 routes turn it into
    400 / 40000: api.rest.codec.error_response)."""
    return RestError(422, code, message)


def describe_errors(errors: Any) -> str:
    parts = []
    for err in list(errors)[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{loc}: {err.get('msg', 'invalid')}" if loc else str(err.get("msg", "invalid")))
    return "; ".join(parts) or "invalid request"


# --- JSON helpers ---------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text[:40]} is out of range")
    return number


def loads_strict(data: bytes) -> Any:
    """RFC 8259 JSON from UTF-8 bytes: no NaN/Infinity, no numbers that overflow a double."""
    return json.loads(data.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float)


def strict_decoder() -> json.JSONDecoder:
    """``loads_strict``'s rules as a decoder (``raw_decode`` of concatenated JSON)."""
    return json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def dumps_compact(value: Any) -> bytes:
    """The compact UTF-8 JSON encoding stored for json-format keys and values."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        # lone surrogates (from "\ud800" escapes) cannot be UTF-8: keep them escaped
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def b64decode_field(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise unprocessable(f"{where} is not valid base64") from None


def b64_or_none(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def schema_ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


_ERROR_CONTENT: Final = {
    JSON: {"schema": schema_ref(ErrorResponse)},
    V2: {"schema": schema_ref(ErrorResponse)},
}
ERROR_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    "4XX": {
        "description": "Client error (v2 routes: application/vnd.kafka.v2+json)",
        "content": _ERROR_CONTENT,
    },
    "5XX": {
        "description": "Server error (v2 routes: application/vnd.kafka.v2+json)",
        "content": _ERROR_CONTENT,
    },
}


def request_body_spec(*types: tuple[str, type[BaseModel]]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {ct: {"schema": schema_ref(m)} for ct, m in types}}}


class JSONBody(JSONResponse):
    """JSON that cannot fail to encode: text with lone surrogates (echoed input) is escaped."""

    def render(self, content: Any) -> bytes:
        return dumps_compact(content)


class V2Response(JSONBody):
    media_type = V2


# The REST Proxy v2 resources: their error bodies are application/vnd.kafka.v2+json, as
# Confluent's (v3, v1 and the operations' routes answer application/json).
V2_ROOTS: Final = ("topics", "consumers", "brokers")


def is_v2_path(path: str) -> bool:
    return path.lstrip("/").split("/", 1)[0] in V2_ROOTS


def error_response(
    status: int, error_code: int, message: str, headers: Mapping[str, str] | None = None, *, path: str = ""
) -> Response:
    """The error body; ``path`` (the request's) picks the media type: v2's for v2 routes.
    On v3 routes a body that does not parse or fit is 400 / 40000. A bare HTTP status as
    ``error_code`` becomes five digits (five_digit), so every error body has one."""
    if status == 422 and path.startswith("/v3/"):
        status, error_code = 400, 400
    body = {"error_code": five_digit(error_code), "message": message}
    if is_v2_path(path):
        return V2Response(body, status_code=status, headers=headers)
    return JSONBody(body, status_code=status, headers=headers)


# --- request parsing ------------------------------------------------------------------------


def media_type_of(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def produce_format(request: Request) -> Format:
    media = media_type_of(request)
    if media == V2_JSON:
        return "json"
    if media in (V2_BINARY, V2, JSON):
        return "binary"
    raise RestError(
        415,
        415,
        f"unsupported Content-Type {media or '(none)'!r}: use {V2_JSON} or {V2_BINARY}",
    )


def fetch_format(request: Request) -> Format:
    accept = request.headers.get("accept", "")
    offered = [part.split(";", 1)[0].strip().lower() for part in accept.split(",") if part.strip()]
    for media in offered:
        if media == V2_JSON:
            return "json"
        if media in (V2_BINARY, V2, JSON, "application/*", "*/*"):
            return "binary"
    if not offered:
        return "binary"
    raise RestError(406, 406, f"cannot produce {accept!r}: accept {V2_JSON} or {V2_BINARY}")


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RestError(413, 413, f"request body of {declared} bytes exceeds the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RestError(413, 413, f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


M = TypeVar("M", bound=BaseModel)


async def parse_body(request: Request, limit: int, model: type[M]) -> M:
    body = await read_body(request, limit)
    try:
        doc = loads_strict(body)
    except (ValueError, RecursionError) as exc:
        raise unprocessable(f"request body is not valid JSON: {exc}") from None
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise unprocessable(describe_errors(exc.errors())) from None


def _headers_in(headers: list[HeaderIn], where: str) -> tuple[Header, ...]:
    return tuple(
        Header(h.key, None if h.value is None else b64decode_field(h.value, f"{where}.headers[{i}].value"))
        for i, h in enumerate(headers)
    )


def records_from_request(
    req: JsonProduceRequest | BinaryProduceRequest,
) -> list[tuple[RecordInput, int | None]]:
    out: list[tuple[RecordInput, int | None]] = []
    for i, rec in enumerate(req.records):
        where = f"records[{i}]"
        if isinstance(rec, JsonRecordIn):
            try:
                key = None if rec.key is None else dumps_compact(rec.key)
                value = None if rec.value is None else dumps_compact(rec.value)
            except (ValueError, RecursionError) as exc:
                raise unprocessable(f"{where} cannot be encoded as JSON: {exc}") from None
        else:
            assert isinstance(rec, BinaryRecordIn)
            key = None if rec.key is None else b64decode_field(rec.key, f"{where}.key")
            value = None if rec.value is None else b64decode_field(rec.value, f"{where}.value")
        out.append((RecordInput(key, value, _headers_in(rec.headers, where)), rec.partition))
    return out


# --- responses ------------------------------------------------------------------------------


def check_partition(info: TopicInfo, partition: int) -> None:
    if not 0 <= partition < info.partitions:
        raise UnknownPartitionError(
            f"partition {partition} of topic {info.name!r} does not exist ({info.partitions} partitions)"
        )


def place_records(
    records: list[tuple[RecordInput, int | None]],
    info: TopicInfo,
    forced_partition: int | None,
    unkeyed_partition: int,
) -> tuple[list[tuple[int, int]], dict[int, list[RecordInput]]]:
    """Choose each record's partition and group them into one batch per partition.

    Returns, in request order, (partition, index within that partition's batch), and the
    records of each partition. Precedence: the URL's partition, the record's own, murmur2
    of the key, then the request's sticky partition for unkeyed records.
    """
    placed: list[tuple[int, int]] = []
    groups: dict[int, list[RecordInput]] = {}
    for rec, explicit in records:
        if forced_partition is not None:
            p = forced_partition
        elif explicit is not None:
            check_partition(info, explicit)
            p = explicit
        elif rec.key is not None:
            p = partition_for_key(rec.key, info.partitions)
        else:
            p = unkeyed_partition
        group = groups.setdefault(p, [])
        placed.append((p, len(group)))
        group.append(rec)
    return placed, groups


def topic_v2(broker: Broker, info: TopicInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "configs": {c.name: c.value for c in broker.topic_configs(info.name)},
        "partitions": [partition_v2(broker, info.name, p) for p in range(info.partitions)],
    }


def partition_v2(broker: Broker, topic: str, partition: int) -> dict[str, Any]:
    """Leader, replicas and in-sync replicas as the cluster's metadata says (leader -1 while
    the partition is offline)."""
    view = broker.replicas.view
    va = view.topics.get(topic)
    replicas = va.value.replicas(partition) if va is not None else (broker.node_id,)
    state = view.partition_state(topic, partition)
    leader = state.leader if state is not None and state.has_leader else -1
    isr = state.isr if state is not None else ()
    return {
        "partition": partition,
        "leader": leader,
        "replicas": [{"broker": b, "leader": b == leader, "in_sync": b in isr} for b in replicas],
    }


def decode_json_field(data: bytes | None, what: str, offset: int) -> Any:
    if data is None:
        return None
    try:
        return loads_strict(data)
    except (ValueError, RecursionError):
        raise RestError(
            406,
            40601,
            f"the {what} of the record at offset {offset} is not valid JSON; "
            f"fetch it with Accept: {V2_BINARY}",
        ) from None


def read_records(fetched: FetchedPartition, offset: int) -> list[Record]:
    """Read (local file regions or bytes from the object store) and decode a fetched
    partition, skipping control batches (blocking: runs in a worker thread). A stored
    batch that does not decode is StoredBatchError (503) once it is the first one read
    (api.stored_batches)."""
    batches = decode_stored(fetched.read(), fetched.topic, fetched.partition, offset)
    return [r for b in batches if not b.is_control for r in b.records]
