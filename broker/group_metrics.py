"""Prometheus metrics of consumer groups, computed at scrape time from the coordinator.

Nothing is maintained on the commit, join or fetch path: each scrape lists the groups,
reads their committed offsets and the partitions' high watermarks (broker.group_lag) and
yields fresh families, so a deleted group or partition simply stops being exported.

    strata_group_lag_offsets{group,topic,partition}       high watermark - committed
    strata_group_total_lag_offsets{group}                 the group's lag over its partitions
    strata_group_lag_seconds{group,topic,partition}       age of the first record not consumed
    strata_group_max_lag_seconds{group}                   the group's largest lag in seconds
    strata_group_committed_offset{group,topic,partition}  the committed offset
    strata_group_members{group}                           live members
    strata_group_generation{group}                        generation id
    strata_group_state{group,state}                       1 for the group's current state

Lag in seconds is how old the first record the group has not consumed is: now minus the
timestamp of the batch holding the committed offset (its first record's timestamp, or its
append time for a LogAppendTime topic), so a group that stopped an hour ago on a busy
topic lags an hour, and 0 when it is caught up (committed offset at the high watermark).
It is read from one batch header on local disk per partition and scrape. An offset already
moved to the object store (below the local log start) is measured at the first local batch
instead: a lower bound, which is what an alert needs. Producer clocks set CreateTime, so a
skewed producer skews this figure (never below 0).

Partitions without a committed offset, or whose end is not known on this node, have no
lag series. A coordinator that is loading or unavailable exports no group series (the
scrape itself never fails because of it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.group_lag import (
    EndOffsets,
    GroupLag,
    PartitionLag,
    all_group_lags,
    coordinator_of,
    manager_end_offsets,
)
from broker.groups.coordinator import GroupCoordinator
from hot.batch import HEADER_SIZE, TimestampType, parse_header
from hot.errors import StrataError
from hot.region import FileRegion

if TYPE_CHECKING:
    from broker.broker import Broker
    from hot.manager import LogManager


class GroupMetricsCollector(Collector):
    """``coordinator`` is asked for at every scrape (so the collector can be registered
    before the coordinator exists); a StrataError from it means no group series."""

    def __init__(
        self,
        coordinator: Callable[[], GroupCoordinator],
        end_offsets: EndOffsets,
        record_times: RecordTimes | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._coordinator = coordinator
        self._end_offsets = end_offsets
        self._record_times = record_times
        self._clock_ms = clock_ms

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
        pl = ["group", "topic", "partition"]
        lag = GaugeMetricFamily(
            "strata_group_lag_offsets",
            "Consumer group lag: partition high watermark minus committed offset",
            labels=pl,
        )
        total = GaugeMetricFamily(
            "strata_group_total_lag_offsets",
            "Lag of a consumer group over all its partitions",
            labels=["group"],
        )
        seconds = GaugeMetricFamily(
            "strata_group_lag_seconds",
            "Age of the first record a consumer group has not consumed (0: caught up)",
            labels=pl,
        )
        max_seconds = GaugeMetricFamily(
            "strata_group_max_lag_seconds",
            "Largest lag in seconds over a group's partitions",
            labels=["group"],
        )
        committed = GaugeMetricFamily(
            "strata_group_committed_offset", "Committed offset of a consumer group", labels=pl
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
        now_ms = self._clock_ms() if lags else 0
        for g in lags:
            gid = g.description.group_id
            worst: float | None = None
            for p in g.partitions:
                labels = [gid, p.topic, str(p.partition)]
                if p.committed_offset is not None:
                    committed.add_metric(labels, p.committed_offset)
                if p.lag is None:
                    continue
                lag.add_metric(labels, p.lag)
                age = self._age_seconds(p, now_ms)
                if age is not None:
                    seconds.add_metric(labels, age)
                    worst = age if worst is None else max(worst, age)
            total.add_metric([gid], g.total_lag)
            if worst is not None:
                max_seconds.add_metric([gid], worst)
            members.add_metric([gid], len(g.description.members))
            generation.add_metric([gid], g.description.generation_id)
            state.add_metric([gid, g.description.state.value], 1)
        yield from (lag, total, seconds, max_seconds, committed, members, generation, state)

    def _age_seconds(self, p: PartitionLag, now_ms: int) -> float | None:
        """Lag in seconds of one partition with a known lag (module docstring)."""
        if p.lag == 0:
            return 0.0
        if self._record_times is None or p.committed_offset is None:
            return None
        ts = self._record_times(p.topic, p.partition, p.committed_offset)
        if ts is None:
            return None
        return max(0, now_ms - ts) / 1000


# (topic, partition, offset) -> timestamp (ms) of the batch holding the offset, None if unknown.
RecordTimes = Callable[[str, int, int], int | None]


def manager_record_times(manager: LogManager) -> RecordTimes:
    """Record times read from the local logs of a LogManager: the header of the batch
    holding the offset, or of the first local batch for an offset below the local log
    start (module docstring). None when the partition is not here, the offset is at or
    past the high watermark, or the timestamp is unset (-1)."""

    def timestamp(topic: str, partition: int, offset: int) -> int | None:
        try:
            log = manager.get_log(topic, partition)
            start = max(offset, log.local_log_start_offset)
            regions = log.read(start, 1, min_one=True).regions
        except StrataError:
            return None
        if not regions or not isinstance(regions[0], FileRegion):
            return None
        region = regions[0]
        try:
            header = parse_header(os.pread(region.file.fileno(), HEADER_SIZE, region.position))
        except (OSError, ValueError, StrataError):  # deleted or closed meanwhile, or unreadable
            return None
        if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
            ts = header.max_timestamp
        else:
            ts = header.base_timestamp
        return ts if ts >= 0 else None

    return timestamp


def register_group_metrics(broker: Broker, registry: CollectorRegistry | None = None) -> bool:
    """Register the group families of ``broker`` (its coordinator ``broker.groups``, its
    logs' high watermarks) on ``registry`` (default: the broker's, so they appear on its
    ``/metrics``). Idempotent: False if they were registered already."""
    target = registry if registry is not None else broker.metrics.registry
    collector = GroupMetricsCollector(
        lambda: coordinator_of(broker),
        manager_end_offsets(broker.manager),
        manager_record_times(broker.manager),
    )
    try:
        target.register(collector)
    except ValueError:  # "Duplicated timeseries": this registry exports them already
        return False
    return True
