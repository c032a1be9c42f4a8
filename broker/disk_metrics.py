"""Prometheus gauges of the data directory's disk (hot.disk_health), read at scrape time.

``strata_disk_total_bytes`` / ``strata_disk_used_bytes`` / ``strata_disk_free_bytes``: the
filesystem holding the data directory (free: what an unprivileged writer may still use);
``strata_disk_high_water``: 1 while the high-water mark refuses appends;
``strata_disk_full``: 1 while writes fail with ENOSPC/EDQUOT;
``strata_disk_appends_refused``: 1 while either holds. Each is labelled ``directory``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hot.disk_health import DiskHealth, DiskState


class DiskHealthCollector(Collector):
    def __init__(self, health: DiskHealth) -> None:
        self._health = health

    def describe(self) -> Iterator[Metric]:
        yield from self._families(None)  # names only: registering measures nothing

    def collect(self) -> Iterator[Metric]:
        yield from self._families(self._health.snapshot())

    @staticmethod
    def _families(state: DiskState | None) -> Iterator[Metric]:
        labels = ["directory"]
        fams = {
            "total": GaugeMetricFamily(
                "strata_disk_total_bytes", "Size of the data directory's filesystem", labels=labels
            ),
            "used": GaugeMetricFamily(
                "strata_disk_used_bytes", "Bytes used on the data directory's filesystem", labels=labels
            ),
            "free": GaugeMetricFamily(
                "strata_disk_free_bytes",
                "Bytes still available to the broker on the data directory's filesystem",
                labels=labels,
            ),
            "high_water": GaugeMetricFamily(
                "strata_disk_high_water", "1 while the disk high-water mark refuses appends", labels=labels
            ),
            "full": GaugeMetricFamily(
                "strata_disk_full", "1 while writes fail for lack of space (ENOSPC/EDQUOT)", labels=labels
            ),
            "refused": GaugeMetricFamily(
                "strata_disk_appends_refused", "1 while appends are refused for lack of disk", labels=labels
            ),
        }
        if state is not None:
            lv = [state.directory]
            if state.usage is not None:
                fams["total"].add_metric(lv, state.usage.total)
                fams["used"].add_metric(lv, state.usage.used)
                fams["free"].add_metric(lv, state.usage.available)
            fams["high_water"].add_metric(lv, int(state.high_water))
            fams["full"].add_metric(lv, int(state.no_space))
            fams["refused"].add_metric(lv, int(state.refusing))
        yield from fams.values()
