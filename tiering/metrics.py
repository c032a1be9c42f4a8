"""Prometheus metrics of tiered storage, kept apart from the logic that updates them.

Registered on the broker's own ``CollectorRegistry`` (``broker.metrics.registry``) so
they appear on the same ``/metrics`` page; tests pass a fresh registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_PARTITION = ["topic", "partition"]


class TieringMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.upload_lag_bytes = Gauge(
            "strata_tiering_upload_lag_bytes",
            "Bytes of sealed local segments not uploaded yet",
            _PARTITION,
            registry=r,
        )
        self.upload_lag_segments = Gauge(
            "strata_tiering_upload_lag_segments",
            "Sealed local segments not uploaded yet",
            _PARTITION,
            registry=r,
        )
        self.upload_lag_seconds = Gauge(
            "strata_tiering_upload_lag_seconds",
            "Age of the oldest sealed local segment not uploaded yet at the last upload pass (0: none)",
            _PARTITION,
            registry=r,
        )
        self.uploaded_bytes = Counter(
            "strata_tiering_uploaded_bytes", "Segment bytes uploaded (.log only)", ["topic"], registry=r
        )
        self.uploaded_segments = Counter(
            "strata_tiering_uploaded_segments", "Segments uploaded (COPIED)", ["topic"], registry=r
        )
        self.lag_rolls = Counter(
            "strata_tiering_lag_rolls",
            "Active segments rolled because their data reached remote.copy.max.lag.ms",
            ["topic"],
            registry=r,
        )
        self.upload_errors = Counter(
            "strata_tiering_upload_errors",
            "Failed tiering operations by kind (store, corrupt, gap, manifest, other)",
            ["topic", "kind"],
            registry=r,
        )
        self.remote_deleted_segments = Counter(
            "strata_tiering_remote_deleted_segments",
            "Remote segments deleted (retention, abandoned copies, deleted topics)",
            ["topic"],
            registry=r,
        )
        self.remote_compaction_runs = Counter(
            "strata_tiering_remote_compaction_runs",
            "Remote compaction passes that swapped rewritten segments into a manifest",
            ["topic"],
            registry=r,
        )
        self.remote_compaction_conflicts = Counter(
            "strata_tiering_remote_compaction_conflicts",
            "Remote compaction swaps abandoned because the replaced entries changed",
            ["topic"],
            registry=r,
        )
        self.remote_compaction_bytes_rewritten = Counter(
            "strata_tiering_remote_compaction_rewritten_bytes",
            "Bytes of remote segments replaced by remote compaction",
            ["topic"],
            registry=r,
        )
        self.remote_compaction_bytes_removed = Counter(
            "strata_tiering_remote_compaction_removed_bytes",
            "Remote bytes remote compaction removed (replaced minus rewritten sizes)",
            ["topic"],
            registry=r,
        )
        self.orphans_deleted = Counter(
            "strata_tiering_orphans_deleted", "Unreferenced remote objects deleted by the sweeper", registry=r
        )
        self.remote_bytes = Gauge(
            "strata_tiering_remote_bytes", "Bytes of COPIED remote segments", _PARTITION, registry=r
        )
        self.remote_segments = Gauge(
            "strata_tiering_remote_segments", "COPIED remote segments", _PARTITION, registry=r
        )
        self.local_bytes = Gauge(
            "strata_tiering_local_bytes", "Bytes of local segments", _PARTITION, registry=r
        )
        self.partition_stopped = Gauge(
            "strata_tiering_partition_stopped",
            "1 when tiering of the partition stopped on an error that needs an operator",
            _PARTITION,
            registry=r,
        )
        self.remote_read_bytes = Counter(
            "strata_tiering_remote_read_bytes",
            "Record bytes returned by remote-tier reads (what clients are served, cache hits included)",
            ["topic"],
            registry=r,
        )
        self.remote_read_errors = Counter(
            "strata_tiering_remote_read_errors",
            "Failed remote-tier reads by kind (missing, corrupt, store)",
            ["topic", "kind"],
            registry=r,
        )
        self.store_available = Gauge(
            "strata_tiering_store_available", "0 while the object store is failing", registry=r
        )
        self.store_available.set(1)
        self.upload_memory_bytes = Gauge(
            "strata_tiering_upload_memory_bytes",
            "Bytes of segment bodies held for uploads in flight (bounded by tiering.upload_memory_bytes)",
            registry=r,
        )
        self.upload_memory_limit_bytes = Gauge(
            "strata_tiering_upload_memory_limit_bytes",
            "tiering.upload_memory_bytes: the bound of strata_tiering_upload_memory_bytes",
            registry=r,
        )

    def remote_read(self, topic: str, nbytes: int) -> None:
        """Hook of the remote reader (``RemoteReader.on_read``)."""
        if nbytes:
            self.remote_read_bytes.labels(topic).inc(nbytes)

    def remote_read_error(self, topic: str, kind: str) -> None:
        """Hook of the remote reader (``RemoteReader.on_error``)."""
        self.remote_read_errors.labels(topic, kind).inc()

    def forget_partition(self, topic: str, partition: int) -> None:
        """Drop the per-partition series of a deleted partition."""
        labels = (topic, str(partition))
        for g in (
            self.upload_lag_bytes,
            self.upload_lag_segments,
            self.upload_lag_seconds,
            self.remote_bytes,
            self.remote_segments,
            self.local_bytes,
            self.partition_stopped,
        ):
            try:
                g.remove(*labels)
            except KeyError:
                pass


class CacheStatsCollector(Collector):
    """Exports a chunk cache's counters at scrape time (the cache keeps plain integers, so
    the read path pays nothing for metrics)."""

    def __init__(self, stats: Callable[[], Any]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        s = self._stats()
        for name, doc in (
            ("hits", "Chunk reads served from the local cache"),
            ("misses", "Chunk reads that started a GET"),
            ("coalesced", "Chunk reads that joined a GET already in flight"),
            ("prefetches", "GETs started by sequential prefetch"),
            ("evictions", "Chunk files evicted to stay under the size cap"),
            ("gets", "Ranged GETs sent to the object store"),
            ("fetched_bytes", "Bytes received from the object store"),
        ):
            yield CounterMetricFamily(f"strata_tiering_cache_{name}", doc, value=getattr(s, name))
        total = s.hits + s.misses + s.coalesced
        yield GaugeMetricFamily(
            "strata_tiering_cache_hit_ratio",
            "Hits / chunk reads since start",
            value=(s.hits / total) if total else 0.0,
        )
        yield GaugeMetricFamily("strata_tiering_cache_size_bytes", "Bytes of cached chunks", value=s.size)
        yield GaugeMetricFamily("strata_tiering_cache_entries", "Cached chunk files", value=s.entries)
        yield GaugeMetricFamily(
            "strata_tiering_cache_memory_bytes", "Bytes of chunks in the in-memory LRU", value=s.memory
        )
        yield GaugeMetricFamily(
            "strata_tiering_cache_memory_limit_bytes",
            "tiering.read_memory_bytes: the bound of strata_tiering_cache_memory_bytes",
            value=s.memory_limit,
        )


class S3RequestCollector(Collector):
    """Exports an S3 store's failed and throttled request attempts
    (``tiering.s3_store.S3RequestStats``) and the bytes of its pooled GET buffers at
    scrape time."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        r = self._store.requests
        yield CounterMetricFamily(
            "strata_tiering_s3_failed_attempts",
            "S3 request attempts that failed (error status or connection error); botocore retried "
            "those within max_attempts",
            value=r.failed_attempts,
        )
        yield CounterMetricFamily(
            "strata_tiering_s3_throttled",
            "S3 request attempts answered 503 SlowDown, 429 or another throttling error",
            value=r.throttled,
        )
        yield GaugeMetricFamily(
            "strata_tiering_s3_read_buffer_bytes",
            "Bytes of pooled GET buffers (remote reads), lent or kept for reuse",
            value=self._store.buffers.mapped_bytes,
        )


class DirectGetCollector(Collector):
    """Exports the S3 store's direct-GET counters (``tiering.s3_direct``) at scrape time;
    ``direct`` returns its ``DirectGet`` (None: no direct path, e.g. before the store's
    first use or on a botocore without the parts it reuses)."""

    def __init__(self, direct: Callable[[], Any]) -> None:
        self._direct = direct

    def collect(self) -> Iterator[Metric]:
        d = self._direct()
        yield GaugeMetricFamily(
            "strata_tiering_s3_direct_get_enabled",
            "1 while S3 GETs are sent directly (0: every GET goes through the botocore client)",
            value=1 if d is not None and d.enabled else 0,
        )
        yield CounterMetricFamily(
            "strata_tiering_s3_direct_gets",
            "S3 GETs answered on the direct path",
            value=d.served if d is not None else 0,
        )
        yield CounterMetricFamily(
            "strata_tiering_s3_direct_puts",
            "Small S3 PUTs (index files) answered on the direct path",
            value=d.puts if d is not None else 0,
        )
        yield CounterMetricFamily(
            "strata_tiering_s3_direct_passed_on",
            "Direct S3 GETs without a success, repeated through the botocore client",
            value=d.passed_on if d is not None else 0,
        )
