"""Prometheus metrics of tiered storage, kept apart from the logic that updates them.

Registered on the broker's own ``CollectorRegistry`` (``broker.metrics.registry``) so
they appear on the same ``/metrics`` page; tests pass a fresh registry.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

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
        self.uploaded_bytes = Counter(
            "strata_tiering_uploaded_bytes", "Segment bytes uploaded (.log only)", ["topic"], registry=r
        )
        self.uploaded_segments = Counter(
            "strata_tiering_uploaded_segments", "Segments uploaded (COPIED)", ["topic"], registry=r
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
        self.store_available = Gauge(
            "strata_tiering_store_available", "0 while the object store is failing", registry=r
        )
        self.store_available.set(1)

    def forget_partition(self, topic: str, partition: int) -> None:
        """Drop the per-partition series of a deleted partition."""
        labels = (topic, str(partition))
        for g in (
            self.upload_lag_bytes,
            self.upload_lag_segments,
            self.remote_bytes,
            self.remote_segments,
            self.local_bytes,
            self.partition_stopped,
        ):
            try:
                g.remove(*labels)
            except KeyError:
                pass
