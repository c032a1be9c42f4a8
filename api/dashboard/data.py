"""The console's read-only data: one endpoint per page, everything computed here.

Each page of the console (api/dashboard/static) polls exactly one of these, so a browser
tab costs one request per refresh whatever the cluster holds (1,000 topics, 500 groups):

``GET /console/api/overview``        brokers, partition health, throughput/latency/lag history,
                                    disk, bucket, object store and metadata health
``GET /console/api/topics``          every topic with sizes, messages, throughput, overrides
``GET /console/api/topics/{topic}``  partitions (leader, ISR, offsets, tiers) and configs
``GET /console/api/brokers``         every broker of the cluster with what it leads and hosts
``GET /console/api/brokers/{id}``    one broker, with its partitions (answered by that broker)
``GET /console/api/local``           this broker's disk, rates and history (asked by the others)
``GET /console/api/tiering``         upload lag, cache, remote bytes per topic, uploads/deletes
``GET /console/api/security``        ACLs, SCRAM users, quotas (DESCRIBE on the cluster)

Groups are in api.dashboard.groups, the message browser in api.dashboard.messages.

Authorization is the REST API's (api.rest.authz), decision for decision: a topic is listed
and counted only if the principal may DESCRIBE it, a named one it may not is 403 whether it
exists or not, the security page needs DESCRIBE on the cluster (Kafka's DescribeAcls rule).
Cluster-wide facts (brokers, leaders, ISR) come from the broker's watched metadata view,
which is the same on every broker, so every broker serves the whole cluster. Figures only a
broker itself knows (its disk, its request rates and history) are asked of that broker
(api.rest.peers); the offsets and tier figures of a partition are those of the replica
the serving broker hosts (null when it hosts none). The overview's charts merge every
broker's history (``merge_histories``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.rest.authz import allowed, require_cluster, require_topic, topic_filter
from api.rest.codec import JSONBody, RestError
from api.rest.ops import log_or_none, tier_partition
from api.rest.peers import Peers, forwarded
from broker.metadata import NO_LEADER
from broker.metrics_history import MetricsHistory
from hot.errors import StrataError
from kwire.acl import CLUSTER_NAME, Operation, ResourceType
from tiering.service import TieringService

if TYPE_CHECKING:
    from broker.broker import Broker


def history_rows(history: MetricsHistory, groups: set[str] | None = None) -> list[dict[str, Any]]:
    """The history as JSON rows; ``lag`` sums the lag of ``groups`` (the visible ones)."""
    rows = []
    for p in history.points():
        lag = sum(v for g, v in p.group_lag.items() if groups is None or g in groups)
        rows.append(
            {
                "t": p.t,
                "produce_msgs": round(p.produce_msgs, 3),
                "produce_bytes": round(p.produce_bytes, 1),
                "fetch_msgs": round(p.fetch_msgs, 3),
                "fetch_bytes": round(p.fetch_bytes, 1),
                "latency_p99_ms": p.latency_p99_ms,
                "produce_p99_ms": p.produce_p99_ms,
                "uploaded_bytes": round(p.uploaded_bytes, 1),
                "uploaded_segments": p.uploaded_segments,
                "deleted_segments": p.deleted_segments,
                "lag": lag,
            }
        )
    return rows


SUMMED = (
    "produce_msgs",
    "produce_bytes",
    "fetch_msgs",
    "fetch_bytes",
    "uploaded_bytes",
    "uploaded_segments",
    "deleted_segments",
    "lag",
)
WORST = ("latency_p99_ms", "produce_p99_ms")


def merge_histories(histories: list[list[dict[str, Any]]], interval_s: float) -> list[dict[str, Any]]:
    """Several brokers' history rows as the cluster's: rows fall into buckets of
    ``interval_s`` (each broker samples on its own clock); within a bucket each broker's rows
    are averaged, then rates and lag are summed over the brokers and the p99 latencies are the
    worst broker's (percentiles do not add up). A bucket is stamped with its latest sample."""
    buckets: dict[int, list[list[dict[str, Any]]]] = {}
    for rows in histories:
        mine: dict[int, list[dict[str, Any]]] = {}
        for r in rows:
            mine.setdefault(int(r["t"] // interval_s), []).append(r)
        for key, group in mine.items():
            buckets.setdefault(key, []).append(group)
    out = []
    for key in sorted(buckets):
        merged: dict[str, Any] = {"t": max(r["t"] for group in buckets[key] for r in group)}
        for field in SUMMED:
            merged[field] = round(sum(sum(r[field] for r in g) / len(g) for g in buckets[key]), 3)
        for field in WORST:
            values = [r[field] for g in buckets[key] for r in g if r[field] is not None]
            merged[field] = max(values) if values else None
        out.append(merged)
    return out


def brokers_of(broker: Broker) -> list[dict[str, Any]]:
    """Every broker the metadata knows: the registered (up) ones and replica ids without a
    registration (down), with the controller marked."""
    view = broker.replicas.view
    controller = view.controller.value.broker_id if view.controller is not None else None
    out: dict[int, dict[str, Any]] = {}
    for bid, b in view.brokers.items():
        r = b.registration
        out[bid] = {
            "id": bid,
            "host": r.host,
            "kafka_port": r.kafka_port,
            "http_port": r.http_port,
            "rack": r.rack,
            "up": True,
            "controller": bid == controller,
            "self": bid == broker.node_id,
        }
    for va in view.topics.values():
        for replicas in va.value.partitions:
            for rid in replicas:
                if rid not in out:
                    out[rid] = {
                        "id": rid,
                        "host": None,
                        "kafka_port": None,
                        "http_port": None,
                        "rack": None,
                        "up": False,
                        "controller": rid == controller,
                        "self": rid == broker.node_id,
                    }
    return [out[k] for k in sorted(out)]


def partition_row(
    broker: Broker, topic: str, p: int, replicas: tuple[int, ...] | list[int]
) -> dict[str, Any]:
    """Leader, replicas and ISR from the metadata, offsets and tiers from this broker's log
    (null offsets when it hosts no replica)."""
    view = broker.replicas.view
    state = view.partition_state(topic, p)
    live = view.live_broker_ids()
    leader = state.leader if state is not None else NO_LEADER
    isr = list(state.isr) if state is not None else []
    tiering = broker.tiering if isinstance(broker.tiering, TieringService) else None
    row = tier_partition(tiering, log_or_none(broker, topic, p), topic, p)
    row.update(
        leader=leader,
        leader_epoch=state.leader_epoch if state is not None else -1,
        replicas=list(replicas),
        isr=isr,
        under_replicated=len(isr) < len(replicas),
        offline=leader == NO_LEADER or leader not in live,
    )
    return row


def _disk(broker: Broker) -> dict[str, Any]:
    disk = broker.manager.disk_health.snapshot()
    u = disk.usage
    return {
        "directory": disk.directory,
        "total_bytes": u.total if u is not None else None,
        "used_bytes": u.used if u is not None else None,
        "free_bytes": u.available if u is not None else None,
        "high_water": disk.high_water,
        "full": disk.no_space,
        "reason": disk.reason,
    }


def _local_bytes(broker: Broker, topic: str, partitions: int) -> int:
    total = 0
    for p in range(partitions):
        log = log_or_none(broker, topic, p)
        if log is not None:
            total += sum(s.size for s in log.segments())
    return total


def data_router(broker: Broker, history: MetricsHistory, peers: Peers) -> APIRouter:
    router = APIRouter(prefix="/console/api", tags=["console"], include_in_schema=False)
    tiering = broker.tiering if isinstance(broker.tiering, TieringService) else None
    cluster = broker.config.cluster
    metadata_kind = "etcd" if cluster is not None and cluster.etcd is not None else "embedded"

    def served_by() -> dict[str, Any]:
        return {"broker_id": broker.node_id, "cluster_id": broker.config.cluster_id}

    def visible_groups(request: Request) -> set[str]:
        if broker.groups is None:
            return set()
        try:
            listings = broker.groups.list_groups()
        except StrataError:
            return set()
        return {
            g.group_id
            for g in listings
            if allowed(broker, request, Operation.DESCRIBE, ResourceType.GROUP, g.group_id, quiet=True)
        }

    def remote_bytes(topic: str, partitions: int) -> tuple[int, int]:
        if tiering is None:
            return 0, 0
        size = segs = 0
        for p in range(partitions):
            m = tiering.manifest(topic, p)
            if m is not None:
                size += m.remote_size()
                segs += len(m.copied()) + sum(r.segment_count for r in m.spillover)
        return size, segs

    @router.get("/overview")
    async def overview(request: Request) -> Response:
        visible = topic_filter(broker, request)
        view = broker.replicas.view
        live = view.live_broker_ids()
        total = urp = offline = 0
        topics = 0
        bucket = 0
        for name, va in view.topics.items():
            if not visible(name):
                continue
            topics += 1
            for p, replicas in enumerate(va.value.partitions):
                total += 1
                state = view.partition_state(name, p)
                isr = state.isr if state is not None else ()
                urp += len(isr) < len(replicas)
                leader = state.leader if state is not None else NO_LEADER
                offline += leader == NO_LEADER or leader not in live
            bucket += remote_bytes(name, len(va.value.partitions))[0]
        groups = visible_groups(request)
        # The cluster's charts: every broker's own history (and the lag of the groups it
        # coordinates), asked of it, merged here.
        histories = [history_rows(history, groups)]
        answered = [broker.node_id]
        if not forwarded(request):
            answers, _ = await peers.json_of_each(request, "/console/api/local")
            for bid, doc in answers.items():
                histories.append(doc["history"])
                answered.append(bid)
        return JSONBody(
            {
                **served_by(),
                "brokers": brokers_of(broker),
                "topics": topics,
                "groups": len(groups),
                "partitions": {"total": total, "under_replicated": urp, "offline": offline},
                "disk": _disk(broker),
                "bucket": {
                    "url": broker.config.object_store_url,
                    "tiering": tiering is not None,
                    "reachable": tiering is None or not tiering.store_failing,
                    "remote_bytes": bucket,
                },
                "metadata": {"kind": metadata_kind, "healthy": view.ready and broker.replicas.lease_alive()},
                "history": merge_histories(histories, history.interval_s),
                "history_brokers": sorted(answered),
                "interval_s": history.interval_s,
            }
        )

    @router.get("/topics")
    async def topics(request: Request) -> Response:
        visible = topic_filter(broker, request)
        rates = history.topic_rates()
        out = []
        for name, va in sorted(broker.replicas.view.topics.items()):
            if not visible(name):
                continue
            a = va.value
            n = len(a.partitions)
            messages = 0
            for p in range(n):
                log = log_or_none(broker, name, p)
                if log is not None:
                    messages += max(0, log.high_watermark - log.log_start_offset)
            remote, _ = remote_bytes(name, n)
            r = rates.get(name)
            out.append(
                {
                    "topic": name,
                    "internal": name.startswith("__"),
                    "partitions": n,
                    "replication_factor": a.replication_factor,
                    "local_bytes": _local_bytes(broker, name, n),
                    "remote_bytes": remote,
                    "messages": messages,
                    "produce_msgs": round(r.produce_msgs, 3) if r else 0.0,
                    "produce_bytes": round(r.produce_bytes, 1) if r else 0.0,
                    "fetch_bytes": round(r.fetch_bytes, 1) if r else 0.0,
                    "overrides": dict(sorted(a.configs.items())),
                }
            )
        return JSONBody({**served_by(), "topics": out})

    @router.get("/topics/{topic}")
    async def topic(request: Request, topic: str) -> Response:
        require_topic(broker, request, Operation.DESCRIBE, topic)
        info = broker.topic(topic)
        a = broker.replicas.view.topics[topic].value
        parts = [partition_row(broker, topic, p, replicas) for p, replicas in enumerate(a.partitions)]
        rates = history.topic_rates().get(topic)

        def may(op: Operation) -> bool:
            return allowed(broker, request, op, ResourceType.TOPIC, topic, quiet=True)

        return JSONBody(
            {
                **served_by(),
                "topic": topic,
                "topic_id": str(info.topic_id),
                "replication_factor": a.replication_factor,
                "remote_storage": broker.manager.log_config(topic).remote_storage_enable,
                "partitions": parts,
                "configs": [
                    {"name": c.name, "value": c.value, "source": "default" if c.is_default else "topic"}
                    for c in broker.topic_configs(topic)
                ],
                "rates": None
                if rates is None
                else {"produce_msgs": rates.produce_msgs, "produce_bytes": rates.produce_bytes},
                "may_read": may(Operation.READ),
                "may_write": may(Operation.WRITE),
            }
        )

    @router.get("/brokers")
    async def brokers(request: Request) -> Response:
        visible = topic_filter(broker, request)
        rows = {
            b["id"]: {**b, "leaders": 0, "replicas": 0, "disk": None, "rates": None}
            for b in brokers_of(broker)
        }
        view = broker.replicas.view
        for name, va in view.topics.items():
            if not visible(name):
                continue
            for p, replicas in enumerate(va.value.partitions):
                for rid in replicas:
                    rows[rid]["replicas"] += 1
                state = view.partition_state(name, p)
                if state is not None and state.leader in rows:
                    rows[state.leader]["leaders"] += 1
        figures = {broker.node_id: local_figures()}
        unreachable: list[int] = []
        if not forwarded(request):  # each other broker's disk and rates, asked at once
            answers, unreachable = await peers.json_of_each(request, "/console/api/local")
            figures.update(answers)
        for bid, fig in figures.items():
            if bid in rows:
                rows[bid].update(disk=fig["disk"], rates=fig["rates"])
        return JSONBody({**served_by(), "brokers": list(rows.values()), "unreachable": unreachable})

    def local_figures() -> dict[str, Any]:
        last = history_rows(history, set())[-1:]
        return {"broker_id": broker.node_id, "disk": _disk(broker), "rates": last[0] if last else None}

    @router.get("/local")
    async def local(request: Request) -> Response:
        """What only this broker knows (its disk, its rates, its history with the lag of the
        groups it coordinates that the principal may describe): the overview and the brokers
        page of any broker ask each broker for it."""
        return JSONBody({**local_figures(), "history": history_rows(history, visible_groups(request))})

    @router.get("/brokers/{broker_id}")
    async def broker_detail(request: Request, broker_id: int) -> Response:
        known = {b["id"]: b for b in brokers_of(broker)}
        if broker_id not in known:
            raise RestError(404, 404, f"no broker {broker_id} in this cluster")
        if broker_id != broker.node_id and known[broker_id]["up"] and not forwarded(request):
            return await peers.relay(request, broker_id)  # it knows its disk and has its history
        visible = topic_filter(broker, request)
        view = broker.replicas.view
        parts = []
        for name, va in sorted(view.topics.items()):
            if not visible(name):
                continue
            for p, replicas in enumerate(va.value.partitions):
                if broker_id in replicas:
                    state = view.partition_state(name, p)
                    parts.append(
                        {
                            "topic": name,
                            "partition": p,
                            "leader": state.leader if state is not None else NO_LEADER,
                            "replicas": list(replicas),
                            "isr": list(state.isr) if state is not None else [],
                        }
                    )
        own = broker_id == broker.node_id
        return JSONBody(
            {
                **served_by(),
                "broker": known[broker_id],
                "partitions": parts,
                "disk": _disk(broker) if own else None,
                "history": history_rows(history, visible_groups(request)) if own else None,
            }
        )

    @router.get("/tiering")
    async def tier(request: Request) -> Response:
        visible = topic_filter(broker, request)

        def restore_summary() -> dict[str, Any] | None:
            r = broker.startup_restore
            if r is None:
                return None
            return {
                "topics": [t for t in r.topics if visible(t)],
                "source": r.source,
                "finished_ms": r.finished_ms,
                "seconds": round(r.seconds, 3),
            }

        topics = []
        lag_bytes = lag_segments = 0
        # Iceberg tables this broker commits (api.iceberg_service; another broker commits
        # the others: their column is empty here)
        iceberg = {str(t["topic"]): t for t in (broker.iceberg_status() if broker.iceberg_status else [])}
        for name, va in sorted(broker.replicas.view.topics.items()):
            if not visible(name):
                continue
            n = len(va.value.partitions)
            rows = [tier_partition(tiering, log_or_none(broker, name, p), name, p) for p in range(n)]
            tb = sum(r["upload_lag_bytes"] for r in rows)
            ts = sum(r["upload_lag_segments"] for r in rows)
            lag_bytes += tb
            lag_segments += ts
            topics.append(
                {
                    "topic": name,
                    "remote_storage": broker.manager.log_config(name).remote_storage_enable,
                    "remote_bytes": sum(r["remote_bytes"] for r in rows),
                    "remote_segments": sum(r["remote_segments"] for r in rows),
                    "local_bytes": sum(r["local_bytes"] for r in rows),
                    "upload_lag_bytes": tb,
                    "upload_lag_segments": ts,
                    "iceberg": _iceberg_cell(iceberg.get(name)),
                }
            )
        ages = []
        if tiering is not None:
            for t, age in tiering.metrics.partitions.lag_ages():
                if age > 0 and visible(t):
                    ages.append(age)
        cache = tiering.cache.stats() if tiering is not None else None
        reads = (cache.hits + cache.misses + cache.coalesced) if cache is not None else 0
        return JSONBody(
            {
                **served_by(),
                "tiering": tiering is not None,
                "object_store": broker.config.object_store_url,
                "reachable": tiering is None or not tiering.store_failing,
                "upload_lag": {
                    "bytes": lag_bytes,
                    "segments": lag_segments,
                    "oldest_seconds": max(ages) if ages else 0.0,
                },
                "cache": None
                if cache is None
                else {
                    "size_bytes": cache.size,
                    "max_bytes": tiering.config.cache_max_bytes if tiering is not None else None,
                    "entries": cache.entries,
                    "hit_ratio": (cache.hits / reads) if reads else None,
                    "hits": cache.hits,
                    "misses": cache.misses,
                    "gets": cache.gets,
                    "fetched_bytes": cache.fetched_bytes,
                    "evictions": cache.evictions,
                },
                "startup_restore": restore_summary(),
                "pending_topic_deletes": [d.name for d in tiering.pending_deletes.list()]
                if tiering is not None
                else [],
                "topics": topics,
                "history": history_rows(history, set()),
                "interval_s": history.interval_s,
            }
        )

    @router.get("/security")
    async def security(request: Request) -> Response:
        require_cluster(broker, request, Operation.DESCRIBE)
        access = broker.access
        acls = (
            [
                {
                    "principal": b.principal,
                    "host": b.host,
                    "resource_type": b.resource_type.name,
                    "resource_name": b.resource_name,
                    "pattern_type": b.pattern_type.name,
                    "operation": b.operation.name,
                    "permission": b.permission.name,
                }
                for b in access.store.bindings()
            ]
            if access is not None
            else []
        )
        users = broker.users
        user_rows = (
            [{"name": n, "mechanisms": users.mechanisms(n)} for n in users.names()]
            if users is not None
            else []
        )
        runtime = broker.quotas.runtime()
        quotas = [
            {
                "entity": "user " + u if u is not None else "default user",
                "source": "runtime",
                "quotas": dict(q),
            }
            for u, q in runtime.entities()
        ]
        static = broker.quotas.config
        if static.defaults:
            quotas.append({"entity": "default user", "source": "config", "quotas": dict(static.defaults)})
        quotas += [
            {"entity": "user " + u, "source": "config", "quotas": dict(q)}
            for u, q in sorted(static.users.items())
        ]
        return JSONBody(
            {
                **served_by(),
                "authorization": access is not None,
                "super_users": sorted(broker.config.authorization.super_users),
                "acls": acls,
                "users": user_rows,
                "quotas": quotas,
                "may_alter": allowed(
                    broker, request, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True
                ),
                # quotas: Kafka's AlterClientQuotas rule (api.dashboard.admin)
                "may_alter_configs": allowed(
                    broker, request, Operation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME, quiet=True
                ),
            }
        )

    return router


def _iceberg_cell(status: dict[str, object] | None) -> dict[str, object] | None:
    """The tier view's Iceberg column of one topic: its table, committed offset (the sum
    over its partitions of the next offset to translate) and lag; None when this broker
    commits no table for it."""
    if status is None:
        return None
    offsets = status.get("committed_offsets")
    committed = sum(int(str(o)) for o in offsets.values()) if isinstance(offsets, dict) else 0
    return {
        "table": status.get("identifier"),
        "committed_offset": committed,
        "lag_records": status.get("lag_records"),
        "lag_seconds": status.get("lag_seconds"),
        "error": status.get("error"),
    }
