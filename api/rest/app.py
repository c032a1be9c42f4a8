"""The REST API app: Kafka REST Proxy v2 produce/fetch/metadata plus Confluent v3 (api.rest.v3*).

Conventions follow Confluent REST Proxy v2 as Redpanda's HTTP Proxy implements it, so
existing REST clients work unchanged:

* Produce: ``POST /topics/{topic}`` and ``POST /topics/{topic}/partitions/{p}`` with
  ``Content-Type: application/vnd.kafka.json.v2+json`` (key/value any JSON, stored as
  its compact UTF-8 encoding) or ``application/vnd.kafka.binary.v2+json`` (base64).
  As in Confluent, ``application/vnd.kafka.v2+json`` and ``application/json`` mean
  binary; any other type is 415. Keyed records are placed with Kafka's murmur2 over
  the stored key bytes, so REST and Java/librdkafka(murmur2_random) clients agree;
  unkeyed records of one request stick to one partition, rotating per request.
  A per-record failure keeps HTTP 200 and fills ``error_code`` (Kafka code) and
  ``error``; ``error_code`` is null on success.
* Fetch: ``GET /topics/{topic}/partitions/{p}/records?offset=&timeout=&max_bytes=``;
  the Accept header picks the embedded format (binary unless json is asked for). A
  record that is not valid JSON asked for as json is 406 with a hint to use binary.
* Errors are always ``{"error_code": int, "message": str}`` with a five-digit
  ``error_code``, Confluent's: 40401 unknown topic, 40402 unknown partition, 40403 unknown
  consumer instance, 40002 a Kafka "bad request" (topic exists, invalid config, partitions
  or replication factor), 40101 / 40301 authentication / authorization (40301 also a
  cross-origin write), 40601 not representable in the asked format, 42204 an invalid
  consumer setting, 50003 a retriable and 50002 any other server-side Kafka error;
  otherwise the HTTP status times 100 (42200 a body that does not parse or fit, 40000 the
  same on v3, 41500 a body that is not JSON, 41300, 40400, 41600 an offset out of range).
* Writes (POST, PUT, PATCH, DELETE) take JSON bodies only (``application/json`` or the
  ``application/vnd.kafka.*+json`` types) and are refused (403) when a browser sends them
  from a page of another origin (``Origin`` / ``Sec-Fetch-Site``): a same-origin policy
  for writes, so another site cannot make an operator's browser change anything.
* Quotas apply per user, the basic/bearer auth user or ANONYMOUS:
  a produce over the user's producer_byte_rate is answered after the throttle time, a
  fetch by a user over its consumer_byte_rate is served after it; the
  ``X-Strata-Throttle-Ms`` header says how long. Delaying rather than answering 429
  keeps every client working and, for one request at a time, holds it to the rate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import RedirectResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Scope

from api.dashboard import dashboard_router
from api.node_metrics import NodeMetrics, from_node
from api.rest.authz import require_cluster, require_topic, topic_visible
from api.rest.codec import (
    DEFAULT_FETCH_MAX_BYTES,
    DEFAULT_FETCH_TIMEOUT_MS,
    ERROR_RESPONSES,
    MAX_FETCH_TIMEOUT_MS,
    V2_BINARY,
    V2_JSON,
    JSONBody,
    RestError,
    V2Response,
    b64_or_none,
    check_partition,
    decode_json_field,
    describe_errors,
    dumps_compact,
    error_response,
    fetch_format,
    five_digit,
    parse_body,
    partition_v2,
    produce_format,
    read_records,
    records_from_request,
    request_body_spec,
    schema_ref,
    strata_error_code,
    topic_v2,
)
from api.rest.consumers import consumers_router
from api.rest.docs import add_docs
from api.rest.groups import groups_router
from api.rest.models import (
    BODY_MODELS,
    BinaryProduceRequest,
    BinaryRecordOut,
    BrokersV2,
    Health,
    JsonProduceRequest,
    JsonRecordOut,
    PartitionOffsetsV2,
    PartitionV2,
    ProduceResponse,
    TopicV2,
)
from api.rest.models_v3 import V3_BODY_MODELS
from api.rest.ops import ops_router
from api.rest.peers import AnsweredBy, Peers
from api.rest.producing import RestProducer, producer_error_code
from api.rest.tier_sync import tier_sync_router
from api.rest.v3 import V3Context, v3_router
from api.rest.v3_configs import v3_configs_router
from api.rest.v3_groups import v3_groups_router
from api.rest.v3_records import v3_records_router
from api.rest.v3_share_groups import v3_share_groups_router
from api.rest_consumers import ConsumerInstances
from api.security.basic_auth import BasicAuthMiddleware
from api.security.same_origin import SameOriginWrites
from broker.broker import Broker
from broker.group_metrics import register_group_metrics
from broker.read_path import FetchRequestPartition
from broker.security.quotas import CONSUMER_BYTE_RATE
from broker.security.tokens import TokenStore, tokens_path
from hot.config import INT32_MAX, INT64_MAX
from hot.errors import InvalidConfigError, StrataError
from kwire.acl import Operation
from kwire.error_table import http_status

# The OpenAPI description (/docs, /redoc): this docstring but its first paragraph.
API_DESCRIPTION = __doc__.split("\n\n", 1)[1] if __doc__ else ""

# How long a produce/fetch response was held back for the user's byte-rate quota, ms.
THROTTLE_HEADER = "X-Strata-Throttle-Ms"

# --- metrics middleware ---------------------------------------------------------------------


class MetricsMiddleware:
    """Counts requests by route template (not raw path: bounded label cardinality) and status."""

    def __init__(self, app: ASGIApp, broker: Broker) -> None:
        self.app = app
        self.metrics = broker.metrics

    async def __call__(
        self,
        scope: Scope,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.http_requests.labels(route, str(status)).inc()
            self.metrics.http_latency.labels(route).observe(time.perf_counter() - start)


# --- the application ------------------------------------------------------------------------


def _version() -> str:
    """The package's version: Strata's, not the REST API's (v2 and v3 are both served)."""
    try:
        return metadata.version("strata")
    except metadata.PackageNotFoundError:
        return "0"


def create_app(broker: Broker) -> FastAPI:
    """The REST app over ``broker`` (which it never creates or closes)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # When a server runs our lifespan, the loop serving HTTP is the one fetches wait on.
        broker.bind_loop(asyncio.get_running_loop())
        yield

    app = FastAPI(
        title="Strata REST API",
        version=_version(),
        description=API_DESCRIPTION,
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
        default_response_class=JSONBody,
        docs_url=None,  # api.rest.docs serves them from local files (no CDN)
        redoc_url=None,
    )
    add_docs(app)
    app.add_middleware(MetricsMiddleware, broker=broker)
    sasl = broker.config.sasl
    if sasl.rest_basic_auth or sasl.rest_bearer_auth:  # outermost: nothing runs unauthenticated
        if sasl.rest_basic_auth and broker.users is None:
            # broker.users are the metadata store's users (api.server loads them first)
            raise InvalidConfigError("REST basic auth needs the broker's users loaded (broker.users)")
        app.add_middleware(
            BasicAuthMiddleware,
            users=broker.users if sasl.rest_basic_auth else None,
            tokens=TokenStore(tokens_path(broker.config.data_dir)) if sasl.rest_bearer_auth else None,
        )
    # Outermost: a cross-origin or non-JSON write is refused before authentication runs.
    app.add_middleware(SameOriginWrites, allowed_origins=broker.config.http_allowed_origins)
    producer = RestProducer(broker)
    limit = broker.config.max_request_bytes
    metrics = broker.metrics

    # -- error handlers: always the JSON error shape, 4xx for bad input ----------------------

    def _count(code: int) -> None:
        metrics.errors.labels("rest", str(five_digit(code))).inc()

    peers = Peers(broker)

    @app.exception_handler(AnsweredBy)
    async def _answered_by(request: Request, exc: AnsweredBy) -> Response:
        try:
            return await peers.relay(
                request, exc.broker_id, method=request.method, body=await request.body() or None
            )
        except RestError as err:  # the coordinator did not answer: 502 naming it
            _count(err.error_code)
            return error_response(err.status, err.error_code, err.message, path=request.url.path)

    @app.exception_handler(RestError)
    async def _rest_error(request: Request, exc: RestError) -> Response:
        _count(exc.error_code)
        return error_response(exc.status, exc.error_code, exc.message, path=request.url.path)

    @app.exception_handler(StrataError)
    async def _strata_error(request: Request, exc: StrataError) -> Response:
        code = strata_error_code(exc)
        _count(code)
        message = str(exc) or type(exc).__name__
        return error_response(http_status(exc), code, message, path=request.url.path)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        _count(422)
        return error_response(422, 42200, describe_errors(exc.errors()), path=request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = exc.status_code
        _count(code)
        return error_response(exc.status_code, code, str(exc.detail), exc.headers, path=request.url.path)

    # -- v2: metadata -----------------------------------------------------------------------

    @app.get("/topics", response_model=list[str], response_class=V2Response, tags=["v2"])
    async def list_topics(request: Request) -> Response:
        return V2Response(sorted(t.name for t in broker.topics() if topic_visible(broker, request, t.name)))

    @app.get("/topics/{topic}", response_model=TopicV2, response_class=V2Response, tags=["v2"])
    async def get_topic(request: Request, topic: str) -> Response:
        require_topic(broker, request, Operation.DESCRIBE, topic)
        return V2Response(topic_v2(broker, broker.topic(topic)))

    @app.get(
        "/topics/{topic}/partitions", response_model=list[PartitionV2], response_class=V2Response, tags=["v2"]
    )
    async def list_partitions(request: Request, topic: str) -> Response:
        require_topic(broker, request, Operation.DESCRIBE, topic)
        info = broker.topic(topic)
        return V2Response([partition_v2(broker, topic, p) for p in range(info.partitions)])

    @app.get(
        "/topics/{topic}/partitions/{partition}",
        response_model=PartitionV2,
        response_class=V2Response,
        tags=["v2"],
    )
    async def get_partition(
        request: Request, topic: str, partition: int = Path(ge=0, le=INT32_MAX)
    ) -> Response:
        require_topic(broker, request, Operation.DESCRIBE, topic)
        info = broker.topic(topic)
        check_partition(info, partition)
        return V2Response(partition_v2(broker, topic, partition))

    @app.get(
        "/topics/{topic}/partitions/{partition}/offsets",
        response_model=PartitionOffsetsV2,
        response_class=V2Response,
        tags=["v2"],
    )
    async def get_partition_offsets(
        request: Request, topic: str, partition: int = Path(ge=0, le=INT32_MAX)
    ) -> Response:
        require_topic(broker, request, Operation.DESCRIBE, topic)
        check_partition(broker.topic(topic), partition)
        # ListOffsets' EARLIEST (-2, the log start) and LATEST (-1, the high watermark).
        start, _, _ = await broker.list_offset_with_epoch(
            topic, partition, -2, current_leader_epoch=-1, replica_id=-1
        )
        end, _, _ = await broker.list_offset_with_epoch(
            topic, partition, -1, current_leader_epoch=-1, replica_id=-1
        )
        return V2Response({"beginning_offset": start, "end_offset": end})

    @app.get("/brokers", response_model=BrokersV2, response_class=V2Response, tags=["v2"])
    async def list_brokers() -> Response:
        return V2Response({"brokers": sorted({*broker.replicas.view.brokers, broker.node_id})})

    # -- v2: produce ------------------------------------------------------------------------

    async def produce(request: Request, topic: str, forced_partition: int | None) -> Response:
        fmt = produce_format(request)
        info = await producer.topic_for_write(request, topic)
        if forced_partition is not None:
            check_partition(info, forced_partition)
        model: type[JsonProduceRequest] | type[BinaryProduceRequest] = (
            JsonProduceRequest if fmt == "json" else BinaryProduceRequest
        )
        req = await parse_body(request, limit, model)
        outcomes, throttle_ms = await producer.produce(
            request, info, records_from_request(req), forced_partition
        )
        offsets = [
            {
                "partition": o.partition,
                "offset": o.offset,
                "error_code": None if o.error is None else producer_error_code(o.error),
                "error": None if o.error is None else str(o.error),
            }
            for o in outcomes
        ]
        return V2Response(
            {"offsets": offsets, "key_schema_id": None, "value_schema_id": None},
            headers={THROTTLE_HEADER: str(throttle_ms)},
        )

    produce_body = request_body_spec((V2_JSON, JsonProduceRequest), (V2_BINARY, BinaryProduceRequest))

    @app.post(
        "/topics/{topic}",
        response_model=ProduceResponse,
        response_class=V2Response,
        openapi_extra=produce_body,
        tags=["v2"],
    )
    async def produce_to_topic(request: Request, topic: str) -> Response:
        return await produce(request, topic, None)

    @app.post(
        "/topics/{topic}/partitions/{partition}",
        response_model=ProduceResponse,
        response_class=V2Response,
        openapi_extra=produce_body,
        tags=["v2"],
    )
    async def produce_to_partition(
        request: Request, topic: str, partition: int = Path(ge=0, le=INT32_MAX)
    ) -> Response:
        return await produce(request, topic, partition)

    # -- v2: fetch --------------------------------------------------------------------------

    @app.get(
        "/topics/{topic}/partitions/{partition}/records",
        tags=["v2"],
        response_class=Response,
        responses={
            200: {
                "description": "Records at or after `offset`, in offset order",
                "content": {
                    V2_BINARY: {"schema": {"type": "array", "items": schema_ref(BinaryRecordOut)}},
                    V2_JSON: {"schema": {"type": "array", "items": schema_ref(JsonRecordOut)}},
                },
            }
        },
    )
    async def fetch_records(
        request: Request,
        topic: str,
        partition: int = Path(ge=0, le=INT32_MAX),
        offset: int = Query(ge=0, le=INT64_MAX),
        timeout: int = Query(
            DEFAULT_FETCH_TIMEOUT_MS, ge=0, le=MAX_FETCH_TIMEOUT_MS, description="long-poll wait, ms"
        ),
        max_bytes: int = Query(
            DEFAULT_FETCH_MAX_BYTES, ge=0, le=INT32_MAX, description="approximate bound on key+value bytes"
        ),
    ) -> Response:
        fmt = fetch_format(request)
        require_topic(broker, request, Operation.READ, topic)
        info = broker.topic(topic)
        check_partition(info, partition)
        # A user over its fetch quota waits before it is served; what it is served counts.
        user = request.scope.get("strata.principal")
        throttle_ms = broker.quotas.pending(user, CONSUMER_BYTE_RATE)
        await asyncio.sleep(throttle_ms / 1000)
        started = time.perf_counter()
        [fetched] = await broker.reads.fetch(
            [FetchRequestPartition(topic, partition, offset, max_bytes)],
            max_wait_ms=timeout,
            min_bytes=1,
            max_bytes=max_bytes,
        )
        if fetched.error is not None:
            raise fetched.error
        broker.quotas.record(user, CONSUMER_BYTE_RATE, fetched.size)
        records = await asyncio.to_thread(read_records, fetched, offset) if fetched.size else []
        out: list[dict[str, Any]] = []
        size = 0
        for rec in records:
            if rec.offset < offset:
                continue
            if out and size >= max_bytes:
                break
            size += len(rec.key or b"") + len(rec.value or b"")
            if fmt == "json":
                key = decode_json_field(rec.key, "key", rec.offset)
                value = decode_json_field(rec.value, "value", rec.offset)
            else:
                key, value = b64_or_none(rec.key), b64_or_none(rec.value)
            out.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "offset": rec.offset,
                    "timestamp": rec.timestamp,
                    "key": key,
                    "value": value,
                    "headers": [{"key": h.key, "value": b64_or_none(h.value)} for h in rec.headers],
                }
            )
        metrics.fetch_latency.labels("rest").observe(time.perf_counter() - started)
        try:
            body = dumps_compact(out)
        except (ValueError, RecursionError):
            raise RestError(
                406, 40601, f"records cannot be represented as JSON; use Accept: {V2_BINARY}"
            ) from None
        return Response(
            body,
            media_type=V2_JSON if fmt == "json" else V2_BINARY,
            headers={THROTTLE_HEADER: str(throttle_ms)},
        )

    # -- v3: clusters, topics, partitions, brokers, configs, ACLs (api.rest.v3*) -------------

    v3 = V3Context(broker)
    app.include_router(v3_router(v3))
    app.include_router(v3_configs_router(v3))
    app.include_router(v3_groups_router(v3, peers))
    app.include_router(v3_share_groups_router(v3, peers))
    app.include_router(v3_records_router(v3, producer))

    # -- consumer groups: lag (v1) and REST Proxy v2 consumer instances ------------------------

    app.include_router(groups_router(broker))
    consumer_instances = ConsumerInstances(broker)
    app.state.consumer_instances = consumer_instances  # for the process wiring to close at shutdown
    app.include_router(consumers_router(broker, consumer_instances))
    register_group_metrics(broker)

    # -- operations -------------------------------------------------------------------------

    app.include_router(ops_router(broker))
    app.include_router(tier_sync_router(broker, peers))
    app.include_router(dashboard_router(broker))

    @app.get("/", include_in_schema=False)
    async def root() -> Response:
        return RedirectResponse("/dashboard", status_code=307)

    @app.get("/healthz", response_model=Health, tags=["ops"])
    async def healthz(request: Request) -> Response:
        return JSONBody(
            {
                "status": "ok",
                "broker_id": broker.node_id,
                "cluster_id": broker.config.cluster_id,
                "topics": sum(topic_visible(broker, request, t.name) for t in broker.topics()),
            }
        )

    node_metrics = NodeMetrics(broker, metrics)  # the whole node's series, on a node of processes

    @app.get(
        "/metrics",
        tags=["ops"],
        response_class=Response,
        responses={200: {"description": "Prometheus text exposition", "content": {CONTENT_TYPE_LATEST: {}}}},
    )
    async def prometheus_metrics(request: Request) -> Response:
        # Every topic's and group's series: with authorization on, DESCRIBE on the cluster
        # (Kafka's rule for cluster-wide descriptions); scrapers without a user read the
        # metrics listener instead (api.metrics_listener).
        if from_node(request.headers):  # another process of this node (api.node_metrics)
            return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
        require_cluster(broker, request, Operation.DESCRIBE)
        return Response(await node_metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in (*BODY_MODELS, *V3_BODY_MODELS):
                js = model.model_json_schema(ref_template="#/components/schemas/{model}")
                components.update(js.pop("$defs", {}))
                components[model.__name__] = js
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
