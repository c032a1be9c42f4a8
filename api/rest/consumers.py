"""REST Proxy v2 consumer-instance routes (Confluent REST Proxy / Redpanda HTTP Proxy paths).

    POST   /consumers/{group}                                    create an instance
    DELETE /consumers/{group}/instances/{instance}               delete it (leaves the group)
    POST   /consumers/{group}/instances/{instance}/subscription  {"topics": [..]} | {"topic_pattern": ".."}
    GET    /consumers/{group}/instances/{instance}/subscription  {"topics": [..]}
    DELETE /consumers/{group}/instances/{instance}/subscription
    GET    /consumers/{group}/instances/{instance}/assignments   {"partitions": [..]}
    GET    /consumers/{group}/instances/{instance}/records       ?timeout=&max_bytes=
    POST   /consumers/{group}/instances/{instance}/offsets       commit (empty body: all consumed)
    GET    /consumers/{group}/instances/{instance}/offsets       committed, for {"partitions": [..]}
    POST   /consumers/{group}/instances/{instance}/positions     seek {"offsets": [..]}
    POST   /consumers/{group}/instances/{instance}/positions/beginning|end  {"partitions": [..]}

Request bodies are JSON (``application/vnd.kafka.v2+json``, ``application/json`` or any
``application/*+json``; otherwise 415). Records come in the instance's format: binary
(base64 keys and values) or json. An Accept header asking json of a binary instance is 406
(40601), as in Confluent; binary may be asked of a json instance (any record reads as bytes).

A json instance never gets stuck on a record that is not JSON (Confluent answers 500 / 50002
there on every request, the position never moving): the record is returned in its place,
the key or value that is not JSON as null, with an ``error`` field saying which and how to
read its bytes (seek back to its offset and ask with a binary Accept), and the position
moves past it like any record's. Commit offsets name the last record processed (Confluent's
semantics: offset + 1 is stored; GET offsets returns the stored, next-to-read offset).
Confluent's error codes: 40403 unknown instance, 40902 instance name taken.
The logic lives in api.rest_consumers; these routes only translate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.rest.authz import denied_pattern, require
from api.rest.codec import (
    DEFAULT_FETCH_MAX_BYTES,
    INVALID_CONSUMER_CONFIG,
    JSON,
    MAX_FETCH_TIMEOUT_MS,
    V2,
    V2_BINARY,
    V2_JSON,
    RestError,
    V2Response,
    b64_or_none,
    check_partition,
    decode_json_field,
    describe_errors,
    dumps_compact,
    loads_strict,
    media_type_of,
    parse_body,
    read_body,
    unprocessable,
)
from api.rest.models import BinaryRecordOut, JsonRecordOut
from api.rest_consumers import (
    ConsumedRecord,
    ConsumerInstance,
    ConsumerInstanceExistsError,
    ConsumerInstanceNotFoundError,
    ConsumerInstances,
    InstanceSettings,
)
from api.rest_consumers.instances import DEFAULT_REQUEST_TIMEOUT_MS, ISOLATION_LEVELS
from broker.groups.types import TopicPartition
from broker.security.quotas import CONSUMER_BYTE_RATE
from hot.config import INT32_MAX, INT64_MAX
from hot.errors import StrataError
from kwire.acl import Operation, ResourceType
from kwire.error_table import http_status

if TYPE_CHECKING:
    from broker.broker import Broker

_STRICT = ConfigDict(strict=True, populate_by_name=True)
M = TypeVar("M", bound=BaseModel)

# --- bodies ---------------------------------------------------------------------------------


class CreateConsumerRequest(BaseModel):
    model_config = _STRICT
    name: str | None = Field(default=None, min_length=1, max_length=249)
    format: str = Field(default="binary", description="binary or json")
    auto_offset_reset: str | None = Field(
        default=None, alias="auto.offset.reset", description="earliest, latest (default) or none"
    )
    auto_commit_enable: str | bool | None = Field(
        default=None, alias="auto.commit.enable", description='"true" (default) or "false"'
    )
    fetch_min_bytes: str | int | None = Field(default=None, alias="fetch.min.bytes")
    request_timeout_ms: str | int | None = Field(default=None, alias="consumer.request.timeout.ms")
    isolation_level: str | None = Field(
        default=None,
        alias="isolation.level",
        description="read_uncommitted (default) or read_committed: only committed transactions' records",
    )


class CreateConsumerResponse(BaseModel):
    instance_id: str
    base_uri: str


class SubscriptionRequest(BaseModel):
    model_config = _STRICT
    topics: list[str] | None = None
    topic_pattern: str | None = None


class TopicsV2(BaseModel):
    topics: list[str]


class PartitionIn(BaseModel):
    model_config = _STRICT
    topic: str
    partition: int = Field(ge=0, le=INT32_MAX)


class PartitionsRequest(BaseModel):
    model_config = _STRICT
    partitions: list[PartitionIn]


class PositionIn(BaseModel):
    model_config = _STRICT
    topic: str
    partition: int = Field(ge=0, le=INT32_MAX)
    offset: int = Field(ge=0, le=INT64_MAX)


class PositionsRequest(BaseModel):
    model_config = _STRICT
    offsets: list[PositionIn]


class CommitOffsetIn(BaseModel):
    model_config = _STRICT
    topic: str
    partition: int = Field(ge=0, le=INT32_MAX)
    offset: int = Field(ge=-1, le=INT64_MAX - 1, description="the last record processed")
    metadata: str | None = None


class CommitRequest(BaseModel):
    """Confluent spells the list ``offsets``, Redpanda ``partitions``; either is accepted."""

    model_config = _STRICT
    offsets: list[CommitOffsetIn] | None = None
    partitions: list[CommitOffsetIn] | None = None


class PartitionOut(BaseModel):
    topic: str
    partition: int


class AssignmentsV2(BaseModel):
    partitions: list[PartitionOut]


class CommittedOffsetOut(BaseModel):
    topic: str
    partition: int
    offset: int
    metadata: str


class CommittedOffsetsV2(BaseModel):
    offsets: list[CommittedOffsetOut]


def _inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its local definitions inlined (these bodies are not
    recursive), so the route's OpenAPI needs no shared components."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    result: dict[str, Any] = resolve(schema)
    return result


def _body(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    schema = _inline_schema(model)
    return {
        "requestBody": {"required": required, "content": {V2: {"schema": schema}, JSON: {"schema": schema}}}
    }


_NO_CONTENT: Final[dict[int | str, dict[str, Any]]] = {204: {"description": "Done"}}

# --- helpers --------------------------------------------------------------------------------


def _rest_error(exc: StrataError, sub: int) -> RestError:
    status = http_status(exc)
    return RestError(status, status * 100 + sub, str(exc))


def _check_json_body(request: Request) -> None:
    media = media_type_of(request)
    if media in (V2, JSON) or (media.startswith("application/") and media.endswith("+json")):
        return
    raise RestError(415, 415, f"unsupported Content-Type {media or '(none)'!r}: use {V2}")


def _flag(value: str | bool | None, name: str, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise unprocessable(f"{name} must be true or false, got {value!r}", INVALID_CONSUMER_CONFIG)


def _int_setting(value: str | int | None, name: str, default: int, lo: int, hi: int) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise unprocessable(f"{name} must be an integer, got {value!r}", INVALID_CONSUMER_CONFIG) from None
    if not lo <= number <= hi:
        raise unprocessable(f"{name} must be in [{lo}, {hi}], got {number}", INVALID_CONSUMER_CONFIG)
    return number


def _records_format(request: Request, instance_format: str) -> str:
    """The embedded format the Accept header asks for: the instance's own unless it
    names the other one explicitly. Binary may be asked of a json instance (any record can
    be read as bytes: the way to read what is not JSON); json of a binary one is 406 (40601),
    as in Confluent."""
    accept = request.headers.get("accept", "")
    offered = [part.split(";", 1)[0].strip().lower() for part in accept.split(",") if part.strip()]
    if not offered:
        return instance_format
    for media in offered:
        if media in (V2_JSON, V2_BINARY):
            wanted = "json" if media == V2_JSON else "binary"
            if wanted == "json" and instance_format != "json":
                raise RestError(
                    406,
                    40601,
                    f"the requested embedded format {wanted!r} does not match this consumer "
                    f"instance's format {instance_format!r}",
                )
            return wanted
        if media in (V2, JSON, "application/*", "*/*"):
            return instance_format
    raise RestError(406, 406, f"cannot produce {accept!r}: accept {V2_JSON} or {V2_BINARY}")


def _json_or_error(data: bytes | None, what: str, offset: int, errors: list[str]) -> Any:
    try:
        return decode_json_field(data, what, offset)
    except RestError as exc:
        errors.append(exc.message)
        return None


def _converter(fmt: str) -> Callable[[ConsumedRecord], dict[str, Any]]:
    """A record as the response shows it. In json, a key or value that is not JSON is
    null and the entry says so in ``error`` (the consumer moves on; the bytes stay readable
    with a binary Accept after seeking back to ``offset``)."""

    def convert(c: ConsumedRecord) -> dict[str, Any]:
        rec = c.record
        errors: list[str] = []
        if fmt == "json":
            key = _json_or_error(rec.key, "key", rec.offset, errors)
            value = _json_or_error(rec.value, "value", rec.offset, errors)
        else:
            key, value = b64_or_none(rec.key), b64_or_none(rec.value)
        out = {
            "topic": c.topic,
            "partition": c.partition,
            "offset": rec.offset,
            "timestamp": rec.timestamp,
            "key": key,
            "value": value,
            "headers": [{"key": h.key, "value": b64_or_none(h.value)} for h in rec.headers],
        }
        if errors:
            out["error"] = "; ".join(errors)
        return out

    return convert


# --- routes ---------------------------------------------------------------------------------


def consumers_router(broker: Broker, instances: ConsumerInstances) -> APIRouter:
    async def group_read(request: Request, group: str) -> None:
        # every consumer-instance route is the group's business: READ on it (api.rest.authz)
        require(broker, request, Operation.READ, ResourceType.GROUP, group)

    router = APIRouter(tags=["v2 consumers"], dependencies=[Depends(group_read)])
    limit = broker.config.max_request_bytes

    def instance(group: str, name: str) -> ConsumerInstance:
        try:
            return instances.get(group, name)
        except ConsumerInstanceNotFoundError as exc:
            raise _rest_error(exc, 3) from None

    def partition_of(
        request: Request, topic: str, partition: int, op: Operation = Operation.DESCRIBE
    ) -> TopicPartition:
        # A topic named in a body is checked before it is looked up: a refused one is 403
        # whether it exists or not. Committing needs READ on it, reading offsets or seeking
        # DESCRIBE (Kafka's OffsetCommit, OffsetFetch, ListOffsets).
        require(broker, request, op, ResourceType.TOPIC, topic)
        check_partition(broker.topic(topic), partition)
        return TopicPartition(topic, partition)

    async def optional_body(request: Request) -> bytes:
        body = await read_body(request, limit)
        if body.strip():
            _check_json_body(request)
        return body

    @router.post(
        "/consumers/{group}",
        response_model=CreateConsumerResponse,
        response_class=V2Response,
        openapi_extra=_body(CreateConsumerRequest, required=False),
    )
    async def create_consumer(request: Request, group: str = Path(min_length=1)) -> Response:
        body = await optional_body(request)
        req = _parse(body, CreateConsumerRequest) if body.strip() else CreateConsumerRequest()
        fmt = req.format.lower()
        if fmt in ("avro", "protobuf", "jsonschema"):
            raise unprocessable(
                f"format {fmt!r} needs a schema registry, which Strata does not run", INVALID_CONSUMER_CONFIG
            )
        if fmt not in ("binary", "json"):
            raise unprocessable(f"format must be binary or json, got {req.format!r}", INVALID_CONSUMER_CONFIG)
        reset = (req.auto_offset_reset or "latest").lower()
        if reset not in ("earliest", "latest", "none"):
            raise unprocessable(
                f"auto.offset.reset must be earliest, latest or none, got {reset!r}", INVALID_CONSUMER_CONFIG
            )
        timeout = _int_setting(
            req.request_timeout_ms,
            "consumer.request.timeout.ms",
            DEFAULT_REQUEST_TIMEOUT_MS,
            0,
            MAX_FETCH_TIMEOUT_MS,
        )
        fetch_min = _int_setting(req.fetch_min_bytes, "fetch.min.bytes", 1, 1, INT32_MAX)
        isolation = (req.isolation_level or "read_uncommitted").lower()
        if isolation not in ISOLATION_LEVELS:
            raise unprocessable(
                f"isolation.level must be read_uncommitted or read_committed, got {req.isolation_level!r}",
                INVALID_CONSUMER_CONFIG,
            )
        settings = InstanceSettings(
            name=req.name or instances.new_name(),
            format="json" if fmt == "json" else "binary",
            auto_offset_reset="earliest" if reset == "earliest" else "none" if reset == "none" else "latest",
            auto_commit=_flag(req.auto_commit_enable, "auto.commit.enable", True),
            request_timeout_ms=timeout,
            fetch_min_bytes=fetch_min,
            isolation_level="read_committed" if isolation == "read_committed" else "read_uncommitted",
        )
        host = f"/{request.client.host}" if request.client is not None else ""
        try:
            await broker.prepare_group(group)
            created = instances.create(group, settings, client_host=host)
        except ConsumerInstanceExistsError as exc:
            raise _rest_error(exc, 2) from None
        base = str(request.base_url).rstrip("/")
        uri = f"{base}/consumers/{quote(group, safe='')}/instances/{quote(created.name, safe='')}"
        return V2Response({"instance_id": created.name, "base_uri": uri})

    @router.delete(
        "/consumers/{group}/instances/{name}", status_code=204, response_class=Response, responses=_NO_CONTENT
    )
    async def delete_consumer(group: str, name: str) -> Response:
        try:
            await instances.delete(group, name)
        except ConsumerInstanceNotFoundError as exc:
            raise _rest_error(exc, 3) from None
        return Response(status_code=204)

    # -- subscription ---------------------------------------------------------------------

    @router.post(
        "/consumers/{group}/instances/{name}/subscription",
        status_code=204,
        response_class=Response,
        responses=_NO_CONTENT,
        openapi_extra=_body(SubscriptionRequest),
    )
    async def subscribe(request: Request, group: str, name: str) -> Response:
        inst = instance(group, name)
        _check_json_body(request)
        req = await parse_body(request, limit, SubscriptionRequest)
        if req.topic_pattern is not None and req.topics:
            raise unprocessable("give topics or topic_pattern, not both")
        if req.topic_pattern is None and not req.topics:
            raise unprocessable("give a non-empty topics list or a topic_pattern")
        if req.topic_pattern is not None and broker.access is not None:
            # topics a pattern matches later could not be checked one by one: name them
            raise denied_pattern()
        for t in req.topics or ():
            require(broker, request, Operation.READ, ResourceType.TOPIC, t)
        inst.subscribe(req.topics or (), req.topic_pattern)
        return Response(status_code=204)

    @router.get(
        "/consumers/{group}/instances/{name}/subscription", response_model=TopicsV2, response_class=V2Response
    )
    async def get_subscription(group: str, name: str) -> Response:
        return V2Response({"topics": instance(group, name).subscription()})

    @router.delete(
        "/consumers/{group}/instances/{name}/subscription",
        status_code=204,
        response_class=Response,
        responses=_NO_CONTENT,
    )
    async def unsubscribe(group: str, name: str) -> Response:
        await instance(group, name).unsubscribe()
        return Response(status_code=204)

    @router.get(
        "/consumers/{group}/instances/{name}/assignments",
        response_model=AssignmentsV2,
        response_class=V2Response,
    )
    async def get_assignments(group: str, name: str) -> Response:
        parts = instance(group, name).assignment()
        return V2Response({"partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in parts]})

    # -- records --------------------------------------------------------------------------

    @router.get(
        "/consumers/{group}/instances/{name}/records",
        response_class=Response,
        responses={
            200: {
                "description": "Records from the instance's assigned partitions, from its positions on",
                "content": {
                    V2_BINARY: {"schema": {"type": "array", "items": _inline_schema(BinaryRecordOut)}},
                    V2_JSON: {"schema": {"type": "array", "items": _inline_schema(JsonRecordOut)}},
                },
            }
        },
    )
    async def get_records(
        request: Request,
        group: str,
        name: str,
        timeout: int | None = Query(
            None,
            ge=0,
            le=MAX_FETCH_TIMEOUT_MS,
            description="long-poll wait, ms (consumer.request.timeout.ms)",
        ),
        max_bytes: int = Query(
            DEFAULT_FETCH_MAX_BYTES, ge=0, le=INT32_MAX, description="approximate bound on key+value bytes"
        ),
    ) -> Response:
        inst = instance(group, name)
        # READ on every topic it may serve, asked of this request's user as Kafka asks on
        # every Fetch: an ACL removed since the subscription applies at once, and another
        # user of the group cannot read through the instance what it may not read itself.
        for topic in sorted({*inst.subscription(), *(tp.topic for tp in inst.assignment())}):
            require(broker, request, Operation.READ, ResourceType.TOPIC, topic)
        fmt = _records_format(request, inst.settings.format)
        wait = timeout if timeout is not None else inst.settings.request_timeout_ms
        # The user's consumer quota (broker.security.quotas): over it, wait before fetching;
        # what is served counts (here the response body: records already decoded).
        user = request.scope.get("strata.principal")
        throttle_ms = broker.quotas.pending(user, CONSUMER_BYTE_RATE)
        await asyncio.sleep(throttle_ms / 1000)
        records = await inst.fetch(wait, max_bytes, _converter(fmt))
        try:
            body = dumps_compact(records)
        except (ValueError, RecursionError):
            raise RestError(406, 40601, f"records cannot be represented as JSON; use {V2_BINARY}") from None
        broker.quotas.record(user, CONSUMER_BYTE_RATE, len(body))
        media = V2_JSON if fmt == "json" else V2_BINARY
        return Response(body, media_type=media, headers={"X-Strata-Throttle-Ms": str(throttle_ms)})

    # -- offsets --------------------------------------------------------------------------

    @router.post(
        "/consumers/{group}/instances/{name}/offsets",
        status_code=204,
        response_class=Response,
        responses=_NO_CONTENT,
        openapi_extra=_body(CommitRequest, required=False),
    )
    async def commit_offsets(request: Request, group: str, name: str) -> Response:
        inst = instance(group, name)
        body = await optional_body(request)
        if not body.strip():
            await inst.commit(None)
            return Response(status_code=204)
        req = _parse(body, CommitRequest)
        items = (req.offsets or []) + (req.partitions or [])
        if req.offsets is None and req.partitions is None:
            await inst.commit(None)
            return Response(status_code=204)
        offsets: dict[TopicPartition, tuple[int, str | None]] = {}
        for o in items:
            offsets[partition_of(request, o.topic, o.partition, Operation.READ)] = (o.offset, o.metadata)
        await inst.commit(offsets)
        return Response(status_code=204)

    @router.get(
        "/consumers/{group}/instances/{name}/offsets",
        response_model=CommittedOffsetsV2,
        response_class=V2Response,
        openapi_extra=_body(PartitionsRequest, required=False),
    )
    async def get_offsets(request: Request, group: str, name: str) -> Response:
        inst = instance(group, name)
        body = await optional_body(request)
        if body.strip():
            asked = _parse(body, PartitionsRequest).partitions
            wanted = [partition_of(request, p.topic, p.partition) for p in asked]
        else:
            wanted = inst.assignment()
        committed = inst.committed(wanted)
        return V2Response(
            {
                "offsets": [
                    {"topic": tp.topic, "partition": tp.partition, "offset": o.offset, "metadata": o.metadata}
                    for tp, o in sorted(committed.items())
                ]
            }
        )

    # -- positions ------------------------------------------------------------------------

    @router.post(
        "/consumers/{group}/instances/{name}/positions",
        status_code=204,
        response_class=Response,
        responses=_NO_CONTENT,
        openapi_extra=_body(PositionsRequest),
    )
    async def seek(request: Request, group: str, name: str) -> Response:
        inst = instance(group, name)
        _check_json_body(request)
        req = await parse_body(request, limit, PositionsRequest)
        await inst.seek({partition_of(request, o.topic, o.partition): o.offset for o in req.offsets})
        return Response(status_code=204)

    async def seek_to(request: Request, group: str, name: str, *, end: bool) -> Response:
        inst = instance(group, name)
        _check_json_body(request)
        req = await parse_body(request, limit, PartitionsRequest)
        await inst.seek_to([partition_of(request, p.topic, p.partition) for p in req.partitions], end=end)
        return Response(status_code=204)

    @router.post(
        "/consumers/{group}/instances/{name}/positions/beginning",
        status_code=204,
        response_class=Response,
        responses=_NO_CONTENT,
        openapi_extra=_body(PartitionsRequest),
    )
    async def seek_to_beginning(request: Request, group: str, name: str) -> Response:
        return await seek_to(request, group, name, end=False)

    @router.post(
        "/consumers/{group}/instances/{name}/positions/end",
        status_code=204,
        response_class=Response,
        responses=_NO_CONTENT,
        openapi_extra=_body(PartitionsRequest),
    )
    async def seek_to_end(request: Request, group: str, name: str) -> Response:
        return await seek_to(request, group, name, end=True)

    return router


def _parse(body: bytes, model: type[M]) -> M:
    """A body already read (the optional bodies), parsed as ``parse_body`` does."""
    try:
        doc = loads_strict(body)
    except (ValueError, RecursionError) as exc:
        raise unprocessable(f"request body is not valid JSON: {exc}") from None
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise unprocessable(describe_errors(exc.errors())) from None
