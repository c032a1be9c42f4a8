"""Prometheus metrics of the schema registry, computed at scrape time (nothing on the
request path but two counter increments):

    strata_schema_registry_leader                  1 on the broker leading ``_schemas-0``
                                                   (the registry's writer), else 0
    strata_schema_registry_subjects                live subjects (on the leader)
    strata_schema_registry_schemas                 schema ids in use (on the leader)
    strata_schema_registry_records_written_total   ``_schemas`` records appended here
    strata_schema_registry_requests_total{endpoint,status}
                                                   API requests answered here (relayed ones
                                                   included), by route template and status
    strata_schema_validation_refused_total         produced batches refused by broker-side
                                                   schema validation
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.schema_registry.store import KEY, SchemaStore


class RegistryMetricsCollector(Collector):
    def __init__(self, store: Callable[[], SchemaStore | None]) -> None:
        self._store = store

    def describe(self) -> Iterator[Metric]:
        yield from self._families(None)

    def collect(self) -> Iterator[Metric]:
        yield from self._families(self._store())

    def _families(self, store: SchemaStore | None) -> Iterator[Metric]:
        leader = GaugeMetricFamily(
            "strata_schema_registry_leader", "1 on the registry's writer (_schemas-0 leader)"
        )
        subjects = GaugeMetricFamily("strata_schema_registry_subjects", "Live subjects (on the leader)")
        schemas = GaugeMetricFamily("strata_schema_registry_schemas", "Schema ids in use (on the leader)")
        written = CounterMetricFamily(
            "strata_schema_registry_records_written", "_schemas records appended by this broker"
        )
        requests = CounterMetricFamily(
            "strata_schema_registry_requests",
            "Schema registry API requests answered by this broker",
            labels=["endpoint", "status"],
        )
        refused = CounterMetricFamily(
            "strata_schema_validation_refused", "Produced batches refused by broker-side schema validation"
        )
        if store is not None:
            shard = store.log.shard_for(KEY) if not store.log.closed else None
            leader.add_metric([], 1 if shard is not None else 0)
            if shard is not None:
                subjects.add_metric([], len(shard.durable.subjects()))
                schemas.add_metric([], len(shard.durable.ids_in_use()))
            written.add_metric([], store.writes)
            for (endpoint, status), n in sorted(store.requests.items()):
                requests.add_metric([endpoint, str(status)], n)
            refused.add_metric([], store.validation_refused)
        yield from (leader, subjects, schemas, written, requests, refused)


def register_registry_metrics(registry: CollectorRegistry, store: Callable[[], SchemaStore | None]) -> bool:
    """Register the registry's families on ``registry``; False if they were already."""
    try:
        registry.register(RegistryMetricsCollector(store))
    except ValueError:
        return False
    return True
