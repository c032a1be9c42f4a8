"""Read-only REST routes for operators and the web dashboard (api/dashboard).

``GET /v1/status``  broker health: id, cluster, uptime, object store reachability,
                    topic/partition counts, partitions that are offline here, the data
                    directory's disk (free bytes, high-water mark, ENOSPC: hot.disk_health)
                    and the reasons for a "degraded" status.
``GET /v1/partitions``  every topic with, per partition, where the log start, the local
                    log start, the high watermark and the log end sit, the local and
                    remote bytes and segment counts, and the upload lag (sealed local
                    segments not yet in the bucket: the same definition as the
                    ``strata_tiering_upload_lag_*`` gauges).

Both are computed on request from the logs and the tiering service's cached manifests
(no object-store round trip), so the dashboard can poll them cheaply. With authorization
on, both count and name only the topics the user may DESCRIBE (api.rest.authz); ``status``
stays the broker's own (``degraded`` when any partition is offline, shown or not).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from api.rest.authz import topic_filter
from api.rest.codec import JSONBody
from hot.errors import StrataError
from tiering.service import TieringService

if TYPE_CHECKING:
    from broker.broker import Broker
    from hot.log import Log


class PartitionStatusV1(BaseModel):
    partition: int
    hosted: bool = Field(description="false when this broker has no log for it (cluster: not a replica)")
    online: bool = Field(description="false when the log went offline on a storage error")
    log_start_offset: int | None = Field(description="first offset readable (remote tier included)")
    local_log_start_offset: int | None = Field(description="first offset still on local disk")
    high_watermark: int | None
    log_end_offset: int | None
    remote_next_offset: int = Field(description="offsets below it are in the bucket (0: none)")
    local_bytes: int
    local_segments: int
    remote_bytes: int
    remote_segments: int
    upload_lag_bytes: int = Field(description="bytes of sealed local segments not uploaded yet")
    upload_lag_segments: int


class TopicStatusV1(BaseModel):
    topic: str
    remote_storage: bool = Field(description="remote.storage.enable")
    partitions: list[PartitionStatusV1]


class PartitionsV1(BaseModel):
    topics: list[TopicStatusV1]


class DiskStatusV1(BaseModel):
    directory: str = Field(description="the data directory")
    total_bytes: int | None = Field(description="size of its filesystem (null: cannot be measured)")
    used_bytes: int | None
    free_bytes: int | None = Field(description="bytes still available to the broker")
    high_water: bool = Field(description="the disk high-water mark refuses appends")
    full: bool = Field(description="writes fail for lack of space (ENOSPC)")


class StatusV1(BaseModel):
    status: str = Field(
        description='"ok", or "degraded" when the store fails, partitions are offline or the disk is full'
    )
    broker_id: int
    cluster_id: str
    uptime_seconds: float
    object_store: str
    object_store_available: bool
    topics: int
    partitions: int
    offline_partitions: list[str] = Field(description='"topic-partition" of logs offline on a storage error')
    disk: DiskStatusV1
    degraded_reasons: list[str] = Field(description="why the status is degraded (empty when ok)")


def tier_partition(tiering: TieringService | None, log: Log | None, topic: str, p: int) -> dict[str, Any]:
    manifest = tiering.manifest(topic, p) if tiering is not None else None
    remote_next = tiering.uploaded(topic, p) if tiering is not None else 0
    remote_segments = 0
    remote_bytes = 0
    if manifest is not None:
        remote_bytes = manifest.remote_size()
        remote_segments = len(manifest.copied()) + sum(r.segment_count for r in manifest.spillover)
    out: dict[str, Any] = {
        "partition": p,
        "hosted": log is not None,
        "online": log is not None and log.is_online,
        "log_start_offset": None,
        "local_log_start_offset": None,
        "high_watermark": None,
        "log_end_offset": None,
        "remote_next_offset": remote_next,
        "local_bytes": 0,
        "local_segments": 0,
        "remote_bytes": remote_bytes,
        "remote_segments": remote_segments,
        "upload_lag_bytes": 0,
        "upload_lag_segments": 0,
    }
    if log is None:
        return out
    segs = log.segments()
    # Only sealed segments can be uploaded; tiering off means nothing is "lagging".
    tiered = log.config.remote_storage_enable
    pending = [s for s in segs[:-1] if s.next_offset > remote_next] if tiered else []
    out.update(
        log_start_offset=log.log_start_offset,
        local_log_start_offset=log.local_log_start_offset,
        high_watermark=log.high_watermark,
        log_end_offset=log.log_end_offset,
        local_bytes=sum(s.size for s in segs),
        local_segments=len(segs),
        upload_lag_bytes=sum(s.size for s in pending),
        upload_lag_segments=len(pending),
    )
    return out


def log_or_none(broker: Broker, topic: str, p: int) -> Log | None:
    try:
        return broker.manager.get_log(topic, p)
    except StrataError:
        return None  # refused (corrupt), deleted meanwhile, or not hosted here


def ops_router(broker: Broker) -> APIRouter:
    router = APIRouter(tags=["ops"])
    started = time.monotonic()
    tiering = broker.tiering if isinstance(broker.tiering, TieringService) else None

    @router.get("/v1/partitions", response_model=PartitionsV1)
    async def partitions(request: Request) -> Response:
        visible = topic_filter(broker, request)
        topics = []
        for info in sorted(broker.topics(), key=lambda t: t.name):
            if not visible(info.name):
                continue
            parts = [
                tier_partition(tiering, log_or_none(broker, info.name, p), info.name, p)
                for p in range(info.partitions)
            ]
            try:
                tiered = broker.manager.log_config(info.name).remote_storage_enable
            except StrataError:
                tiered = False  # deleted meanwhile
            topics.append({"topic": info.name, "remote_storage": tiered, "partitions": parts})
        return JSONBody({"topics": topics})

    @router.get("/v1/status", response_model=StatusV1)
    async def status(request: Request) -> Response:
        visible = topic_filter(broker, request)
        offline: list[str] = []
        any_offline = False
        topics = count = 0
        for info in broker.topics():
            shown = visible(info.name)
            topics += shown
            for p in range(info.partitions):
                count += shown
                log = log_or_none(broker, info.name, p)
                if log is not None and not log.is_online:
                    any_offline = True
                    if shown:
                        offline.append(f"{info.name}-{p}")
        store_ok = tiering is None or not tiering.store_failing
        disk = broker.manager.disk_health.snapshot()
        reasons: list[str] = []
        if not store_ok:
            reasons.append("object store unavailable")
        if any_offline:
            # Partitions the user may not describe count without being named or counted.
            reasons.append(f"{len(offline)} partition(s) offline" if offline else "partitions offline")
        if disk.reason is not None:
            reasons.append(disk.reason)
        usage = disk.usage
        return JSONBody(
            {
                "status": "degraded" if reasons else "ok",
                "broker_id": broker.node_id,
                "cluster_id": broker.config.cluster_id,
                "uptime_seconds": round(time.monotonic() - started, 3),
                "object_store": broker.config.object_store_url,
                "object_store_available": store_ok,
                "topics": topics,
                "partitions": count,
                "offline_partitions": offline,
                "disk": {
                    "directory": disk.directory,
                    "total_bytes": usage.total if usage is not None else None,
                    "used_bytes": usage.used if usage is not None else None,
                    "free_bytes": usage.available if usage is not None else None,
                    "high_water": disk.high_water,
                    "full": disk.no_space,
                },
                "degraded_reasons": reasons,
            }
        )

    return router
