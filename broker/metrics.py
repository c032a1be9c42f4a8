"""Prometheus metrics of the request layer, kept apart from the logic that updates them.

Each broker owns its own ``CollectorRegistry`` so several brokers can live in one
process (tests, benchmarks) without clashing on metric names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from broker.latency_histogram import LatencyBatch, LatencyHistogram
from broker.request_metrics import RequestErrors, ResponseErrors
from core.prom_text import exposition
from hot.errors import StrataError

if TYPE_CHECKING:
    from hot.log import Log
    from hot.manager import LogManager

# Counters and histograms without their `_created` series: Prometheus derives nothing from
# them, and they double the series count of every labelled counter.
disable_created_metrics()  # type: ignore[no-untyped-call]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_THROTTLE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def _build() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("strata")
    except PackageNotFoundError:
        v = "unknown"
    return {"version": v}


class TopicTotals(Collector):
    """A counter by topic whose values are plain integers (``table[topic][index]``) that
    the produce and fetch paths add to, exported at scrape time as the counter
    ``<name>_total{topic=...}``. prometheus-client's ``Counter.inc`` takes a lock per call,
    two per partition of every request (5 % of a 1,000-partition Produce). The additions
    happen on the event loop (and REST worker threads, rarely at once); a series appears
    with its topic's first addition, as a labelled counter's would, and is never removed."""

    def __init__(
        self, name: str, doc: str, table: dict[str, list[int]], index: int, registry: CollectorRegistry
    ) -> None:
        self._name = name
        self._doc = doc
        self._table = table
        self._index = index
        registry.register(self)

    def describe(self) -> Iterator[Metric]:
        yield CounterMetricFamily(self._name, self._doc, labels=["topic"])

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._doc, labels=["topic"])
        for topic, row in list(self._table.items()):
            family.add_metric([topic], row[self._index])
        yield family


class BrokerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._children: dict[tuple[int, str], Any] = {}
        self._batches: dict[tuple[int, str, str], LatencyBatch] = {}
        r = self.registry
        # prometheus-client's standard collectors (process_cpu_seconds_total, RSS, open fds,
        # python_info, GC), on the broker's own registry, and what is running.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        Info("strata_build", "The Strata version this broker runs", registry=r).info(_build())
        # Per-topic totals of the produce and fetch paths: plain integers, exported at
        # scrape time (``TopicTotals``).
        self._produced: dict[str, list[int]] = {}
        self._fetched: dict[str, list[int]] = {}
        produced, fetched = self._produced, self._fetched
        self.produced_messages = TopicTotals("strata_produce_messages", "Records appended", produced, 0, r)
        self.produced_bytes = TopicTotals(
            "strata_produce_bytes", "Record batch bytes appended", produced, 1, r
        )
        self.fetched_messages = TopicTotals(
            "strata_fetch_messages", "Records served (offsets the batches cover)", fetched, 0, r
        )
        self.fetched_bytes = TopicTotals("strata_fetch_bytes", "Record batch bytes served", fetched, 1, r)
        self.produce_latency = LatencyHistogram(
            "strata_produce_latency_seconds",
            "Produce latency from request decode to acknowledgement, by source (kafka, rest)",
            "source",
            _LATENCY_BUCKETS,
            r,
        )
        self.fetch_latency = LatencyHistogram(
            "strata_fetch_latency_seconds",
            "Fetch latency including long-poll wait, by source (kafka, rest, replica)",
            "source",
            _LATENCY_BUCKETS,
            r,
        )
        self.request_latency = LatencyHistogram(
            "strata_request_latency_seconds",
            "Kafka request handling latency by API",
            "api",
            _LATENCY_BUCKETS,
            r,
        )
        # Call sites count with errors.labels(source, code); the listener counts whole
        # responses with response_errors.count(api, response) (broker.request_metrics).
        self.errors = RequestErrors(
            Counter(
                "strata_request_errors",
                "Error codes in responses, by API (Kafka's name, or REST) and error (Kafka's name)",
                ["api", "error"],
                registry=r,
            )
        )
        self.response_errors = ResponseErrors(self.errors)
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

        self.quota_throttle = Histogram(
            "strata_quota_throttle_seconds",
            "Throttle times imposed on a user over its byte-rate quota (broker.security.quotas)",
            ["principal", "quota"],
            buckets=_THROTTLE_BUCKETS,
            registry=r,
        )

    def labelled(self, metric: Any, label: str) -> Any:
        """``metric.labels(label)``, cached (for label values never removed: API names, doors)."""
        key = (id(metric), label)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(label)
        return child

    def latency_batch(self, door_metric: Any, door: str, api: str) -> LatencyBatch:
        """The ``LatencyBatch`` of a fast path's requests: counted in ``door_metric`` under
        ``door`` and in ``request_latency`` under ``api``; one per (metric, door, api)."""
        key = (id(door_metric), door, api)
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = LatencyBatch(
                self.labelled(door_metric, door), self.labelled(self.request_latency, api)
            )
        return batch

    def produced(self, topic: str) -> list[int]:
        """[records, bytes] appended to ``topic`` so far: the caller adds to them."""
        row = self._produced.get(topic)
        if row is None:
            row = self._produced[topic] = [0, 0]
        return row

    def fetched(self, topic: str) -> list[int]:
        """[records, bytes] served from ``topic`` so far: the caller adds to them."""
        row = self._fetched.get(topic)
        if row is None:
            row = self._fetched[topic] = [0, 0]
        return row

    def quota_throttled(self, user: str, quota: str, seconds: float) -> None:
        self.quota_throttle.labels(f"User:{user}", quota).observe(seconds)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (``core.prom_text``: generate_latest's
        bytes, its labels rendered once per label set)."""
        return exposition(self.registry)


class LogStatsCollector(Collector):
    """Per-partition log figures read at scrape time (nothing on the append path): local
    size and segment count, and where the offsets sit. ``logs`` yields (topic, partition,
    log) for the partitions this broker hosts."""

    def __init__(self, logs: Callable[[], Iterable[tuple[str, int, Log]]]) -> None:
        self._logs = logs

    def describe(self) -> Iterator[Metric]:
        yield from self._families(())  # names only: registering reads no log

    def collect(self) -> Iterator[Metric]:
        yield from self._families(self._logs())

    @staticmethod
    def _families(logs: Iterable[tuple[str, int, Log]]) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(
            "strata_log_size_bytes", "Bytes of the partition's local segments", labels=labels
        )
        segments = GaugeMetricFamily("strata_log_segments", "Local segments of the partition", labels=labels)
        offsets = {
            "start": GaugeMetricFamily(
                "strata_log_start_offset", "First readable offset (remote tier included)", labels=labels
            ),
            "local_start": GaugeMetricFamily(
                "strata_log_local_start_offset", "First offset still on local disk", labels=labels
            ),
            "hw": GaugeMetricFamily("strata_log_high_watermark", "High watermark", labels=labels),
            "end": GaugeMetricFamily("strata_log_end_offset", "Log end offset", labels=labels),
        }
        for topic, partition, log in logs:
            # One labels dict shared by the partition's six samples (add_metric would build
            # one per sample): a scrape of thousands of partitions (core.prom_text).
            lv = {"topic": topic, "partition": str(partition)}
            segs = log.segments()
            size.samples.append(Sample(size.name, lv, sum(s.size for s in segs)))
            segments.samples.append(Sample(segments.name, lv, len(segs)))
            for key, value in (
                ("start", log.log_start_offset),
                ("local_start", log.local_log_start_offset),
                ("hw", log.high_watermark),
                ("end", log.log_end_offset),
            ):
                family = offsets[key]
                family.samples.append(Sample(family.name, lv, value))
        yield size
        yield segments
        yield from offsets.values()


def manager_logs(manager: LogManager) -> Callable[[], list[tuple[str, int, Log]]]:
    """The (topic, partition, log) triples a LogManager hosts, for LogStatsCollector."""

    def logs() -> list[tuple[str, int, Log]]:
        out: list[tuple[str, int, Log]] = []
        for info in manager.topics():
            for p in range(info.partitions):
                try:
                    out.append((info.name, p, manager.get_log(info.name, p)))
                except StrataError:
                    continue  # refused (corrupt), deleted meanwhile, or not a replica here
        return out

    return logs
