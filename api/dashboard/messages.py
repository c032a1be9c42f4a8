"""The console's message browser and its produce form.

``GET /console/api/topics/{topic}/messages``  records of one partition or all, newest first
    (``mode=newest``), from an offset (``mode=offset&offset=``) or from a timestamp
    (``mode=timestamp&timestamp=`` ms), at most ``limit`` of them, optionally only those
    whose key or value contains ``filter`` (bytes of its UTF-8). Needs READ on the topic.
``POST /console/api/topics/{topic}/messages``  ``{"partition"?, "key"?, "value"?, "headers"?:
    [{"key", "value"}]}`` (text, stored as UTF-8). Needs WRITE on the topic.

Reading goes through the broker's consumer fetch (``Broker.fetch``), the path Kafka clients
and the REST v2 consumer use, so offsets below the local log start are served from the
bucket like any consumer's. A scan is bounded: at most ``SCAN_RECORDS`` records and
``SCAN_BYTES`` bytes are read per request whatever the filter matches, and the answer says
when the bound stopped it (``truncated``), so a filter over a large topic never turns into
reading it all. Keys, values and header values come back as base64 (binary-safe); the page
renders them as text, pretty JSON or hex. Values longer than ``VALUE_BYTES`` are cut. A
value in Confluent's wire format (magic byte 0 and a schema id) also comes back decoded
by its schema from the registry (``value_schema``: broker.schema_registry.decode).

Newest first reads the last records of each partition: a window of ``limit`` offsets below
the high watermark, then older windows four times as large while a filter finds too few,
within the scan bound.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from api.partitioner import partition_for_key
from api.rest.authz import require_topic
from api.rest.codec import JSONBody, RestError, check_partition, parse_body, read_records
from api.rest.peers import Peers, forwarded
from broker.broker import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from broker.read_path import FetchRequestPartition
from broker.schema_registry.decode import decode as decode_value
from hot.config import INT64_MAX
from hot.errors import StrataError
from hot.records import Header, Record, RecordInput, build_batch
from kwire.acl import Operation

if TYPE_CHECKING:
    from broker.broker import Broker

SCAN_RECORDS = 20_000
SCAN_BYTES = 64 * 1024 * 1024
FETCH_BYTES = 1024 * 1024
VALUE_BYTES = 64 * 1024
MAX_LIMIT = 500
PRODUCE_TIMEOUT_MS = 30_000


class HeaderText(BaseModel):
    key: str
    value: str | None = None


class ProduceText(BaseModel):
    partition: int | None = Field(default=None, ge=0)
    key: str | None = None
    value: str | None = None
    headers: list[HeaderText] = Field(default_factory=list)


def _b64(data: bytes | None) -> tuple[str | None, int, bool]:
    if data is None:
        return None, 0, False
    cut = data[:VALUE_BYTES]
    return base64.b64encode(cut).decode(), len(data), len(cut) < len(data)


def record_json(partition: int, rec: Record) -> dict[str, Any]:
    key, key_size, key_cut = _b64(rec.key)
    value, value_size, value_cut = _b64(rec.value)
    return {
        "partition": partition,
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "key": key,
        "key_size": key_size,
        "value": value,
        "value_size": value_size,
        "truncated": key_cut or value_cut,
        "headers": [{"key": h.key, "value": _b64(h.value)[0]} for h in rec.headers],
    }


class _Budget:
    def __init__(self) -> None:
        self.records = SCAN_RECORDS
        self.bytes = SCAN_BYTES
        self.exhausted = False

    def spend(self, records: int, size: int) -> None:
        self.records -= records
        self.bytes -= size
        if self.records <= 0 or self.bytes <= 0:
            self.exhausted = True


def messages_router(broker: Broker, peers: Peers) -> APIRouter:
    router = APIRouter(prefix="/console/api", tags=["console"], include_in_schema=False)
    limit_body = broker.config.max_request_bytes

    def leader_of(topic: str, partition: int) -> int:
        state = broker.replicas.view.partition_state(topic, partition)
        return state.leader if state is not None else -1

    async def scan(
        topic: str,
        partition: int,
        start: int,
        end: int,
        want: int,
        match: Any,
        budget: _Budget,
        keep_last: bool,
    ) -> tuple[list[Record], int]:
        """Matching records of [start, end): the first ``want`` (or the last, ``keep_last``),
        and the next offset the scan would read."""
        out: list[Record] = []
        offset = start
        while offset < end and not budget.exhausted and (keep_last or len(out) < want):
            [f] = await broker.reads.fetch(
                [FetchRequestPartition(topic, partition, offset, FETCH_BYTES)],
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=FETCH_BYTES,
            )
            if f.error is not None:
                raise f.error
            if not f.size:
                break
            records = await asyncio.to_thread(read_records, f, offset)
            nxt = offset
            seen = 0
            for r in records:
                if r.offset < offset or r.offset >= end:
                    continue
                nxt = r.offset + 1
                seen += 1
                if match(r):
                    out.append(r)
            budget.spend(seen, f.size)
            if nxt == offset:  # only control batches or aborted data: skip what the batch covered
                nxt = offset + max(1, f.record_span)
            offset = nxt
        out = out[-want:] if keep_last else out[:want]
        return out, offset

    @router.get("/topics/{topic}/messages")
    async def browse(
        request: Request,
        topic: str,
        partition: int | None = Query(None, ge=0),
        mode: str = Query("newest", pattern="^(newest|offset|timestamp)$"),
        offset: int = Query(0, ge=0, le=INT64_MAX),
        timestamp: int = Query(0, ge=0, le=INT64_MAX),
        limit: int = Query(50, ge=1, le=MAX_LIMIT),
        filter: str = Query("", max_length=1000),
    ) -> Response:
        require_topic(broker, request, Operation.READ, topic)
        info = broker.topic(topic)
        if partition is not None:
            check_partition(info, partition)
        parts = [partition] if partition is not None else list(range(info.partitions))
        needle = filter.encode()

        def match(r: Record) -> bool:
            return not needle or needle in (r.key or b"") or needle in (r.value or b"")

        budget = _Budget()
        started = time.perf_counter()
        found: list[dict[str, Any]] = []
        scanned = 0
        truncated = False
        for p in parts:
            leader = leader_of(topic, p)
            if leader != broker.node_id and leader >= 0 and not forwarded(request):
                # Another broker leads it: its console reads it (with the same bounds).
                query = urlencode(
                    {
                        "partition": p,
                        "mode": mode,
                        "offset": offset,
                        "timestamp": timestamp,
                        "limit": limit,
                        "filter": filter,
                    }
                )
                doc = await peers.json(request, leader, f"{request.url.path}?{query}")
                found.extend(doc["records"])
                scanned += doc["scanned_records"]
                truncated = truncated or doc["truncated"]
                continue
            lo, _ = await broker.list_offset(topic, p, EARLIEST_TIMESTAMP)
            hi, _ = await broker.list_offset(topic, p, LATEST_TIMESTAMP)
            if mode == "newest":
                # Windows below the high watermark, each 4x the last and older than it, until
                # enough match, the log start is reached or the scan bound is.
                got: list[Record] = []
                end, window = hi, limit
                while True:
                    start = max(lo, end - window)
                    older, _ = await scan(topic, p, start, end, limit, match, budget, keep_last=True)
                    got = (older + got)[-limit:]
                    if len(got) >= limit or start == lo or budget.exhausted:
                        break
                    end, window = start, window * 4
            else:
                if mode == "offset":
                    start = max(lo, offset)
                else:
                    start, _ = await broker.list_offset(topic, p, timestamp)
                    if start < 0:
                        continue  # nothing at or after the timestamp
                got, _ = await scan(topic, p, start, hi, limit, match, budget, keep_last=False)
            for r in got:
                doc = record_json(p, r)
                if r.value is not None and r.value[:1] == b"\x00":  # Confluent's wire format
                    decoded = await decode_value(broker.schema_store, r.value)
                    if decoded is not None:
                        doc["value_schema"] = decoded
                found.append(doc)
        if mode == "newest":
            found.sort(key=lambda r: (r["timestamp"], r["offset"]), reverse=True)
        elif mode == "timestamp":
            found.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
        else:
            found.sort(key=lambda r: (r["offset"], r["partition"]))
        return JSONBody(
            {
                "topic": topic,
                "records": found[:limit],
                "scanned_records": scanned + SCAN_RECORDS - budget.records,
                "truncated": truncated or budget.exhausted,
                "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
            }
        )

    @router.post("/topics/{topic}/messages")
    async def produce(request: Request, topic: str) -> Response:
        require_topic(broker, request, Operation.WRITE, topic)
        info = broker.topic(topic)
        req = await parse_body(request, limit_body, ProduceText)
        key = req.key.encode() if req.key is not None else None
        if req.partition is not None:
            check_partition(info, req.partition)
            p = req.partition
        elif key is not None:
            p = partition_for_key(key, info.partitions)
        else:
            p = int(time.monotonic() * 1000) % info.partitions
        leader = leader_of(topic, p)
        if leader != broker.node_id and leader >= 0 and not forwarded(request):
            placed = req.model_copy(update={"partition": p}).model_dump_json().encode()
            return await peers.relay(request, leader, method="POST", body=placed)
        headers = tuple(Header(h.key, h.value.encode() if h.value is not None else None) for h in req.headers)
        rec = RecordInput(key, req.value.encode() if req.value is not None else None, headers)
        res = await broker.writes.produce(
            topic, p, build_batch([rec]), acks=-1, timeout_ms=PRODUCE_TIMEOUT_MS
        )
        if res.error is not None:
            if isinstance(res.error, StrataError):
                raise res.error
            raise RestError(500, 50000, str(res.error))
        return JSONBody({"topic": topic, "partition": p, "offset": res.base_offset})

    return router
