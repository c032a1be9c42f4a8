"""Prometheus metrics of the request layer, kept apart from the logic that updates them.

Each broker owns its own ``CollectorRegistry`` so several brokers can live in one
process (tests, benchmarks) without clashing on metric names.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class BrokerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.produced_messages = Counter("strata_produce_messages", "Records appended", ["topic"], registry=r)
        self.produced_bytes = Counter(
            "strata_produce_bytes", "Record batch bytes appended", ["topic"], registry=r
        )
        self.fetched_bytes = Counter("strata_fetch_bytes", "Record batch bytes served", ["topic"], registry=r)
        self.produce_latency = Histogram(
            "strata_produce_latency_seconds",
            "Produce latency from request decode to acknowledgement",
            ["api"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.fetch_latency = Histogram(
            "strata_fetch_latency_seconds",
            "Fetch latency including long-poll wait",
            ["api"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.request_latency = Histogram(
            "strata_request_latency_seconds",
            "Kafka request handling latency by API",
            ["api"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "strata_request_errors", "Per-partition or request errors", ["api", "code"], registry=r
        )
        self.connections = Gauge("strata_kafka_connections", "Open Kafka protocol connections", registry=r)
        self.http_requests = Counter(
            "strata_http_requests", "REST requests by route and status", ["route", "status"], registry=r
        )
        self.http_latency = Histogram(
            "strata_http_latency_seconds",
            "REST request latency",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
