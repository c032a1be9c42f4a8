"""``POST /v1/tier/sync``: make the bucket current now (``strata tier sync``).

Query: ``topic`` (optional; every tiered topic without it) and ``timeout_ms`` (how long each
broker waits for its uploads, default 30000, at most 600000). Each broker rolls the active
segments that hold data of the tiered partitions it leads, uploads every sealed segment
the bucket lacks (ignoring ``remote.copy.lag.ms``) and waits until its manifests show them
(``tiering.service.TieringService.sync``). The broker asked forwards the request to every
other live broker (``api.rest.peers``, same principal), so one call covers the cluster;
brokers that do not answer are listed in ``unreachable``.

Answer: ``{"partitions": [{"broker", "topic", "partition", "rolled", "target",
"remote_next_offset", "complete", "pending"}], "uploaded_segments", "unreachable"}``.

A state-changing admin operation: with authorization on it needs ALTER on the cluster, or,
for one named topic, ALTER on that topic (Kafka's AlterConfigs takes either for a topic).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from api.rest.authz import allowed, require_cluster
from api.rest.codec import JSONBody, RestError, loads_strict
from api.rest.peers import Peers, forwarded, other_live_brokers
from broker.security.authz import denied
from hot.errors import StrataError, UnknownTopicOrPartitionError
from kwire.acl import CLUSTER_NAME, Operation, ResourceType
from tiering.service import TieringService

if TYPE_CHECKING:
    from broker.broker import Broker

DEFAULT_TIMEOUT_MS: Final = 30_000
MAX_TIMEOUT_MS: Final = 600_000


class SyncedPartitionV1(BaseModel):
    broker: int
    topic: str
    partition: int
    rolled: bool = Field(description="its active segment held data and was rolled")
    target: int = Field(description="the log end the bucket was synced to")
    remote_next_offset: int = Field(description="every offset below it is in the bucket now")
    complete: bool
    pending: str | None = Field(description="why offsets below target are not in the bucket yet")


class TierSyncV1(BaseModel):
    partitions: list[SyncedPartitionV1]
    uploaded_segments: int
    unreachable: list[int]


def tier_sync_router(broker: Broker, peers: Peers) -> APIRouter:
    router = APIRouter(tags=["ops"])

    @router.post("/v1/tier/sync", response_model=TierSyncV1)
    async def sync(
        request: Request, topic: str | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> Response:
        if not 0 <= timeout_ms <= MAX_TIMEOUT_MS:
            raise RestError(
                400, 40002, f"timeout_ms must be between 0 and {MAX_TIMEOUT_MS}, got {timeout_ms}"
            )
        if topic is None:
            require_cluster(broker, request, Operation.ALTER)
        elif not allowed(
            broker, request, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True
        ) and not allowed(broker, request, Operation.ALTER, ResourceType.TOPIC, topic):
            raise denied(Operation.ALTER, ResourceType.TOPIC, topic)
        if topic is not None and topic not in {t.name for t in broker.topics()}:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        if topic is not None and not _tiered(broker, topic):
            raise RestError(
                400, 40002, f"topic {topic!r} is not tiered (remote.storage.enable=false): nothing to sync"
            )
        tiering = broker.tiering
        parts: list[dict[str, Any]] = []
        uploaded = 0
        unreachable: list[int] = []
        others: list[Any] = []
        if not forwarded(request):
            path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            ids = other_live_brokers(broker)
            wait = timeout_ms / 1000 + 10
            others = [peers.ask(request, b, path, method="POST", body=b"", timeout=wait) for b in ids]
        else:
            ids = []
        local = (
            tiering.sync({topic} if topic is not None else None, timeout_ms)
            if isinstance(tiering, TieringService)
            else None
        )
        mine_too = [local] if local is not None else []
        results = await asyncio.gather(*others, *mine_too, return_exceptions=True)
        for b, r in zip(ids, results, strict=False):
            doc = None
            if not isinstance(r, BaseException) and r[0] == 200:
                try:
                    doc = loads_strict(r[1])
                except ValueError:
                    doc = None
            if not isinstance(doc, dict):
                unreachable.append(b)
                continue
            parts.extend(doc.get("partitions", []))
            uploaded += int(doc.get("uploaded_segments", 0))
        if local is not None:
            mine = results[-1]
            if isinstance(mine, BaseException):
                raise mine
            uploaded += mine.uploaded
            parts.extend(
                {
                    "broker": broker.node_id,
                    "topic": p.topic,
                    "partition": p.partition,
                    "rolled": p.rolled,
                    "target": p.target,
                    "remote_next_offset": p.remote_next,
                    "complete": p.pending is None,
                    "pending": p.pending,
                }
                for p in mine.partitions
            )
        parts.sort(key=lambda p: (str(p.get("topic")), int(p.get("partition", 0))))
        return JSONBody(
            {"partitions": parts, "uploaded_segments": uploaded, "unreachable": sorted(unreachable)}
        )

    return router


def _tiered(broker: Broker, topic: str) -> bool:
    try:
        return bool(broker.manager.log_config(topic).remote_storage_enable)
    except StrataError:
        return True  # deleted meanwhile, or not known here: the sync finds nothing
