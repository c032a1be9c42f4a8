"""Prometheus metrics of a replicated cluster, computed at scrape time from the broker's
watched copy of the etcd metadata (``cluster.status.cluster_status`` over the
``ClusterView``): nothing is maintained on the replication path.

    strata_cluster_live_brokers                                  registered brokers
    strata_cluster_controller_epoch                              epoch of the elected controller
    strata_cluster_under_replicated_partitions                   ISR smaller than the replica set
    strata_cluster_offline_partitions                            no live leader
    strata_cluster_partition_replicas{topic,partition}           replica set size
    strata_cluster_partition_isr{topic,partition}                in-sync replicas
    strata_cluster_partition_under_replicated{topic,partition}   1 while ISR < replicas
    strata_cluster_partition_leader{topic,partition}             leader broker id (-1: none)
    strata_cluster_partition_leader_epoch{topic,partition}       bumped by every leader election

Every broker sees the whole cluster, so each exports the same cluster-wide figures
(aggregate with ``max``). Leader elections are ``changes()``/``increase()`` of the
leader epoch, ISR shrinks and expands ``changes()`` of the ISR size; exact event counters
would need hooks in cluster/replica_manager.py. In single-node mode the families exist
with no series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from cluster.metadata import ClusterView


class ClusterMetricsCollector(Collector):
    """``view`` returns the broker's watched ClusterView, or None outside cluster mode."""

    def __init__(self, view: Callable[[], ClusterView | None]) -> None:
        self._view = view

    def describe(self) -> Iterator[Metric]:
        yield from self._families(None)

    def collect(self) -> Iterator[Metric]:
        view = self._view()
        if view is None:
            yield from self._families(None)
            return
        from cluster.status import cluster_status

        yield from self._families(cluster_status(view))

    @staticmethod
    def _families(report: dict[str, Any] | None) -> Iterator[Metric]:
        pl = ["topic", "partition"]
        live = GaugeMetricFamily("strata_cluster_live_brokers", "Registered (live) brokers")
        controller = GaugeMetricFamily("strata_cluster_controller_epoch", "Epoch of the elected controller")
        urp = GaugeMetricFamily(
            "strata_cluster_under_replicated_partitions",
            "Partitions whose ISR is smaller than the replica set",
        )
        offline = GaugeMetricFamily("strata_cluster_offline_partitions", "Partitions without a live leader")
        replicas = GaugeMetricFamily("strata_cluster_partition_replicas", "Replica set size", labels=pl)
        isr = GaugeMetricFamily("strata_cluster_partition_isr", "In-sync replicas", labels=pl)
        under = GaugeMetricFamily(
            "strata_cluster_partition_under_replicated",
            "1 while the ISR is smaller than the replicas",
            labels=pl,
        )
        leader = GaugeMetricFamily(
            "strata_cluster_partition_leader", "Leader broker id (-1: none)", labels=pl
        )
        epoch = GaugeMetricFamily(
            "strata_cluster_partition_leader_epoch", "Leader epoch: +1 per leader election", labels=pl
        )
        if report is not None:
            live.add_metric([], len(report["brokers"]))
            if report["controller"] is not None:
                controller.add_metric([], report["controller"]["epoch"])
            urp.add_metric([], len(report["under_replicated"]))
            offline.add_metric([], len(report["offline"]))
            for row in report["partitions"]:
                lv = [row["topic"], str(row["partition"])]
                replicas.add_metric(lv, len(row["replicas"]))
                isr.add_metric(lv, len(row["isr"]))
                under.add_metric(lv, 1 if row["under_replicated"] else 0)
                leader.add_metric(lv, row["leader"])
                epoch.add_metric(lv, row["leader_epoch"])
        yield from (live, controller, urp, offline, replicas, isr, under, leader, epoch)
