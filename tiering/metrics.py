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
from prometheus_client.samples import Sample

_PARTITION = ["topic", "partition"]


class TieringMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # The per-partition gauges: read at scrape time (``PartitionGauges``).
        self.partitions = PartitionGauges()
        r.register(self.partitions)
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
        self.partitions.forget((topic, partition))


# What ``PartitionGauges`` reads of a partition with lag series at scrape time: sealed
# local segments not uploaded yet, their bytes, the age in seconds of the oldest of them
# (0: none), and the bytes of all its local segments.
LagFigures = tuple[float, float, float, float]


class PartitionGauges(Collector):
    """The per-partition tiering gauges, rendered at scrape time (issue 39).

    They were labelled ``Gauge`` children that every visit of the tiering pass set (four
    per partition and visit) and that a scrape turned into samples one child at a time;
    with 10,000 partitions both showed in an idle broker's profile. Now a visit only
    registers the partition (``track_lag``, a dict lookup after the first), a manifest
    change stores two numbers, and a scrape computes the lag figures from the log and
    the uploader's state (``lag_source``) and renders one family per name. Names, help,
    labels and values are those of the gauges: the lag series (``upload_lag_*``,
    ``local_bytes``) exist from a partition's first upload visit, the remote ones from
    its first manifest read or write, ``partition_stopped`` (1) from a stop; all go with
    ``forget``. Event-loop only (the uploader and the /metrics handler run there)."""

    def __init__(self) -> None:
        self._labels: dict[tuple[str, int], dict[str, str]] = {}
        self._lag: dict[tuple[str, int], dict[str, str]] = {}
        self._remote: dict[tuple[str, int], tuple[float, float]] = {}
        self._stopped: dict[tuple[str, int], dict[str, str]] = {}
        # Set by the uploader: the partition's figures now (None: no log here any more).
        self.lag_source: Callable[[tuple[str, int]], LagFigures | None] = lambda key: None

    def _lv(self, key: tuple[str, int]) -> dict[str, str]:
        lv = self._labels.get(key)
        if lv is None:
            # One labels dict per partition shared by its samples and kept across scrapes
            # (core.prom_text renders a label set once).
            lv = self._labels[key] = {"topic": key[0], "partition": str(key[1])}
        return lv

    def track_lag(self, key: tuple[str, int]) -> None:
        if key not in self._lag:
            self._lag[key] = self._lv(key)

    def set_remote(self, key: tuple[str, int], nbytes: int, segments: int) -> None:
        self._lv(key)
        self._remote[key] = (float(nbytes), float(segments))

    def set_stopped(self, key: tuple[str, int]) -> None:
        self._stopped[key] = self._lv(key)

    def forget(self, key: tuple[str, int]) -> None:
        for d in (self._labels, self._lag, self._remote, self._stopped):
            d.pop(key, None)

    def lag_ages(self) -> list[tuple[str, float]]:
        """(topic, seconds) of each partition's oldest segment not uploaded (0: none)."""
        out = []
        for key in list(self._lag):
            figures = self.lag_source(key)
            out.append((key[0], 0.0 if figures is None else figures[2]))
        return out

    def describe(self) -> Iterator[Metric]:
        yield from self._families()  # names only: registering reads nothing

    def collect(self) -> Iterator[Metric]:
        fams = self._families()
        lag_segments, lag_bytes, lag_seconds, local_bytes, remote_bytes, remote_segments, stopped = fams
        source = self.lag_source
        for key, lv in list(self._lag.items()):
            figures = source(key) or (0.0, 0.0, 0.0, 0.0)
            for fam, value in zip((lag_segments, lag_bytes, lag_seconds, local_bytes), figures, strict=True):
                fam.samples.append(Sample(fam.name, lv, value))
        labels = self._labels
        for key, (nbytes, count) in list(self._remote.items()):
            lv = labels.get(key) or self._lv(key)
            remote_bytes.samples.append(Sample(remote_bytes.name, lv, nbytes))
            remote_segments.samples.append(Sample(remote_segments.name, lv, count))
        for lv in list(self._stopped.values()):
            stopped.samples.append(Sample(stopped.name, lv, 1.0))
        yield from fams

    @staticmethod
    def _families() -> list[GaugeMetricFamily]:
        return [
            GaugeMetricFamily(name, doc, labels=_PARTITION)
            for name, doc in (
                ("strata_tiering_upload_lag_segments", "Sealed local segments not uploaded yet"),
                ("strata_tiering_upload_lag_bytes", "Bytes of sealed local segments not uploaded yet"),
                (
                    "strata_tiering_upload_lag_seconds",
                    "Age of the oldest sealed local segment not uploaded yet (0: none)",
                ),
                ("strata_tiering_local_bytes", "Bytes of local segments"),
                ("strata_tiering_remote_bytes", "Bytes of COPIED remote segments"),
                ("strata_tiering_remote_segments", "COPIED remote segments"),
                (
                    "strata_tiering_partition_stopped",
                    "1 when tiering of the partition stopped on an error that needs an operator",
                ),
            )
        ]


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
