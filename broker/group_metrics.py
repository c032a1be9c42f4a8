"""Prometheus metrics of consumer groups, computed at scrape time from the coordinator.

Nothing is maintained on the commit, join or fetch path: each scrape lists the groups,
reads their committed offsets and the partitions' high watermarks (broker.group_lag) and
yields fresh families, so a deleted group or partition simply stops being exported.

    strata_group_lag{group,topic,partition}               high watermark - committed
    strata_group_lag_sum{group}                           the group's total lag
    strata_group_committed_offset{group,topic,partition}  the committed offset
    strata_group_members{group}                           live members
    strata_group_generation{group}                        generation id
    strata_group_state{group,state}                       1 for the group's current state

Partitions without a committed offset, or whose end is not known on this node, have no
lag series. A coordinator that is loading or unavailable exports no group series (the
scrape itself never fails because of it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.group_lag import EndOffsets, GroupLag, all_group_lags, coordinator_of, manager_end_offsets
from broker.groups.coordinator import GroupCoordinator
from hot.errors import StrataError

if TYPE_CHECKING:
    from broker.broker import Broker


class GroupMetricsCollector(Collector):
    """``coordinator`` is asked for at every scrape (so the collector can be registered
    before the coordinator exists); a StrataError from it means no group series."""

    def __init__(self, coordinator: Callable[[], GroupCoordinator], end_offsets: EndOffsets) -> None:
        self._coordinator = coordinator
        self._end_offsets = end_offsets

    def _lags(self) -> list[GroupLag]:
        try:
            return all_group_lags(self._coordinator(), self._end_offsets)
        except StrataError:
            return []

    def describe(self) -> Iterator[Metric]:
        # Names only, so registering does not touch the coordinator.
        yield from self._families([])

    def collect(self) -> Iterator[Metric]:
        yield from self._families(self._lags())

    def _families(self, lags: list[GroupLag]) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "strata_group_lag",
            "Consumer group lag: partition high watermark minus committed offset",
            labels=["group", "topic", "partition"],
        )
        lag_sum = GaugeMetricFamily("strata_group_lag_sum", "Total lag of a consumer group", labels=["group"])
        committed = GaugeMetricFamily(
            "strata_group_committed_offset",
            "Committed offset of a consumer group",
            labels=["group", "topic", "partition"],
        )
        members = GaugeMetricFamily(
            "strata_group_members", "Live members of a consumer group", labels=["group"]
        )
        generation = GaugeMetricFamily(
            "strata_group_generation", "Generation id of a consumer group", labels=["group"]
        )
        state = GaugeMetricFamily(
            "strata_group_state", "1 for the consumer group's current state", labels=["group", "state"]
        )
        for g in lags:
            gid = g.description.group_id
            for p in g.partitions:
                labels = [gid, p.topic, str(p.partition)]
                if p.committed_offset is not None:
                    committed.add_metric(labels, p.committed_offset)
                if p.lag is not None:
                    lag.add_metric(labels, p.lag)
            lag_sum.add_metric([gid], g.total_lag)
            members.add_metric([gid], len(g.description.members))
            generation.add_metric([gid], g.description.generation_id)
            state.add_metric([gid, g.description.state.value], 1)
        yield from (lag, lag_sum, committed, members, generation, state)


def register_group_metrics(broker: Broker, registry: CollectorRegistry | None = None) -> bool:
    """Register the group families of ``broker`` (its coordinator ``broker.groups``, its
    logs' high watermarks) on ``registry`` (default: the broker's, so they appear on its
    ``/metrics``). Idempotent: False if they were registered already."""
    target = registry if registry is not None else broker.metrics.registry
    collector = GroupMetricsCollector(lambda: coordinator_of(broker), manager_end_offsets(broker.manager))
    try:
        target.register(collector)
    except ValueError:  # "Duplicated timeseries": this registry exports them already
        return False
    return True
