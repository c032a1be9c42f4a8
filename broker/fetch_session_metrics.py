"""``/metrics`` for the fetch session cache (broker.fetch_sessions), read at scrape time
beside the cache, not inside it: Kafka's FetchSessionCache gauges
(NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached) and its evictions; and
how many session partitions consumers' incremental fetches looked at, and how many of
those fetches walked their whole session (broker.consumer_marks): an idle consumer's
partitions are looked at only by the safety walk."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.consumer_marks import ConsumerMarks
from broker.fetch_sessions import FetchSessionCache


class FetchSessionCollector(Collector):
    def __init__(self, cache: FetchSessionCache, consumers: ConsumerMarks | None = None) -> None:
        self._cache = cache
        self._consumers = consumers

    def collect(self) -> Iterator[Metric]:
        sessions = GaugeMetricFamily(
            "strata_fetch_sessions", "Incremental fetch sessions (KIP-227) held", labels=["kind"]
        )
        partitions = GaugeMetricFamily(
            "strata_fetch_session_partitions", "Partitions cached in the fetch sessions", labels=["kind"]
        )
        evicted = CounterMetricFamily(
            "strata_fetch_session_evictions", "Fetch sessions evicted to make room for another"
        )
        counts = {"replica": [0, 0], "consumer": [0, 0]}
        for s in self._cache.sessions():
            c = counts["replica" if s.replica else "consumer"]
            c[0] += 1
            c[1] += len(s.partitions)
        for kind, (n, p) in counts.items():
            sessions.add_metric([kind], n)
            partitions.add_metric([kind], p)
        evicted.add_metric([], self._cache.evictions)
        yield sessions
        yield partitions
        yield evicted
        if self._consumers is not None:
            looked = CounterMetricFamily(
                "strata_fetch_session_partitions_looked",
                "Session partitions looked at by consumers' incremental fetches",
            )
            looked.add_metric([], self._consumers.looked)
            walks = CounterMetricFamily(
                "strata_fetch_session_walks",
                "Consumers' incremental fetches that looked at their whole session",
            )
            walks.add_metric([], self._consumers.walks)
            yield looked
            yield walks
