"""Prometheus metrics of the transaction coordinator, computed at scrape time from its cache
(nothing is maintained on the request path).

    strata_transactions{state}                     transactional ids coordinated here, by state
    strata_transactions_oldest_open_seconds        age of the oldest transaction still open
                                                   (Ongoing or being completed; 0: none), what
                                                   holds a partition's last stable offset back
    strata_transactions_completed_total            transactions completed (markers and
                                                   CompleteCommit/CompleteAbort written)
    strata_transactions_timed_out_total            transactions aborted by transaction.timeout.ms
    strata_transactional_ids_expired_total         ids removed by transactional.id.expiration.ms

Each broker exports the ids of the ``__transaction_state`` partitions it leads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.state import TransactionState

if TYPE_CHECKING:
    from broker.broker import Broker

_OPEN = frozenset({TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})


class TransactionMetricsCollector(Collector):
    """``coordinator`` is asked for at every scrape (None: no series but the names)."""

    def __init__(self, coordinator: Callable[[], TransactionCoordinator | None]) -> None:
        self._coordinator = coordinator

    def describe(self) -> Iterator[Metric]:
        yield from self._families(None)

    def collect(self) -> Iterator[Metric]:
        yield from self._families(self._coordinator())

    def _families(self, coord: TransactionCoordinator | None) -> Iterator[Metric]:
        by_state = GaugeMetricFamily(
            "strata_transactions", "Transactional ids coordinated by this broker, by state", labels=["state"]
        )
        oldest = GaugeMetricFamily(
            "strata_transactions_oldest_open_seconds",
            "Age of the oldest transaction still open (Ongoing or being completed); 0 if none",
        )
        completed = CounterMetricFamily(
            "strata_transactions_completed", "Transactions completed (markers and Complete record written)"
        )
        timed_out = CounterMetricFamily(
            "strata_transactions_timed_out", "Transactions aborted because they exceeded their timeout"
        )
        expired = CounterMetricFamily(
            "strata_transactional_ids_expired", "Transactional ids removed by transactional.id.expiration.ms"
        )
        if coord is not None:
            now = coord.clock()
            counts: Counter[str] = Counter()
            age_ms = 0
            for _, meta in coord.cache:
                counts[meta.state.kafka_name] += 1
                if meta.state in _OPEN and meta.txn_start_timestamp_ms >= 0:
                    age_ms = max(age_ms, now - meta.txn_start_timestamp_ms)
            for state, n in sorted(counts.items()):
                by_state.add_metric([state], n)
            oldest.add_metric([], age_ms / 1000)
            completed.add_metric([], coord.completed)
            timed_out.add_metric([], coord.timed_out)
            expired.add_metric([], coord.expired)
        yield from (by_state, oldest, completed, timed_out, expired)


def register_txn_metrics(broker: Broker, registry: CollectorRegistry | None = None) -> bool:
    """Register the coordinator's families on ``registry`` (default: the broker's).
    Idempotent: False if they were registered already."""
    target = registry if registry is not None else broker.metrics.registry
    try:
        target.register(TransactionMetricsCollector(lambda: broker.transactions))
    except ValueError:  # this registry exports them already
        return False
    return True
