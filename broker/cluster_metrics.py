"""Prometheus metrics of a replicated cluster, computed at scrape time from the broker's
watched copy of the etcd metadata (``broker.status.cluster_status`` over the
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
(aggregate with ``max``). In single-node mode the families exist with no series.

The broker's own session with the metadata store (etcd, or the embedded store of a
single node), from its registration lease (broker.metadata_store.LeaseKeeping):

    strata_metadata_store_contact_age_seconds       since the lease was last refreshed
                                                    (a refresh every third of the TTL)
    strata_metadata_store_session_timeout_seconds   the lease TTL (broker.session.timeout.ms)

An age past the timeout means etcd has been out of reach long enough for the lease, and
with it this broker's registration, to expire (or that it has: the keeper stops on a lost
lease, so the age keeps growing). No series while the broker is not registered.

Events are counted exactly by ``ClusterEventMetrics``, through hooks of the logic that
writes them to etcd (each event is counted once, by the broker that wrote it, so
aggregate with ``sum`` over brokers):

    strata_isr_shrinks_total{topic,partition}    ISR writes that removed replicas (the
                                                 partition leader on follower lag, or the
                                                 controller dropping a dead broker or the
                                                 replicas a completed reassignment removed)
    strata_isr_expands_total{topic,partition}    ISR writes that added a caught-up replica
    strata_leader_elections_total{kind}          leaders elected by the controller: clean
                                                 (from the ISR) or unclean
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from broker.status import cluster_status

if TYPE_CHECKING:
    from broker.metadata import ClusterView
    from broker.metadata_store import LeaseKeeping


class ClusterMetricsCollector(Collector):
    """``view`` returns the broker's watched ClusterView, or None outside cluster mode;
    ``keeper`` its registration lease's keeper (None: not registered)."""

    def __init__(
        self,
        view: Callable[[], ClusterView | None],
        keeper: Callable[[], LeaseKeeping | None] = lambda: None,
    ) -> None:
        self._view = view
        self._keeper = keeper

    def describe(self) -> Iterator[Metric]:
        yield from self._families(None)
        yield from self._session(None)

    def collect(self) -> Iterator[Metric]:
        view = self._view()
        yield from self._families(None if view is None else cluster_status(view))
        yield from self._session(self._keeper())

    @staticmethod
    def _session(keeper: LeaseKeeping | None) -> Iterator[Metric]:
        age = GaugeMetricFamily(
            "strata_metadata_store_contact_age_seconds",
            "Seconds since this broker's metadata store (etcd) lease was last refreshed",
        )
        ttl = GaugeMetricFamily(
            "strata_metadata_store_session_timeout_seconds",
            "TTL of this broker's metadata store lease: past it the broker's registration expires",
        )
        if keeper is not None:
            # alive_until is the last successful refresh's send time plus the TTL it re-armed.
            last = keeper.alive_until - keeper.lease.ttl
            age.add_metric([], max(0.0, time.monotonic() - last))
            ttl.add_metric([], keeper.lease.ttl)
        yield age
        yield ttl

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
                # One labels dict for the partition's five samples (core.prom_text).
                lv = {"topic": row["topic"], "partition": str(row["partition"])}
                for family, value in (
                    (replicas, len(row["replicas"])),
                    (isr, len(row["isr"])),
                    (under, 1 if row["under_replicated"] else 0),
                    (leader, row["leader"]),
                    (epoch, row["leader_epoch"]),
                ):
                    family.samples.append(Sample(family.name, lv, value))
        yield from (live, controller, urp, offline, replicas, isr, under, leader, epoch)


class ClusterEventMetrics:
    """Exact counters of ISR changes and leader elections; the cluster logic calls the two
    hooks (``ReplicaManager.on_isr_change``, ``Controller.on_isr_change`` and
    ``Controller.on_election``) and never touches prometheus."""

    def __init__(self, registry: CollectorRegistry) -> None:
        pl = ["topic", "partition"]
        self.isr_shrinks = Counter(
            "strata_isr_shrinks", "ISR writes that removed replicas", pl, registry=registry
        )
        self.isr_expands = Counter(
            "strata_isr_expands", "ISR writes that added replicas", pl, registry=registry
        )
        self.leader_elections = Counter(
            "strata_leader_elections",
            "Partition leaders elected by this broker as controller (clean or unclean)",
            ["kind"],
            registry=registry,
        )
        for kind in ("clean", "unclean"):
            self.leader_elections.labels(kind)  # both series exist from the start

    def isr_changed(self, topic: str, partition: int, old: tuple[int, ...], new: tuple[int, ...]) -> None:
        """One committed ISR write; a write that both drops and adds counts as both."""
        before, after = set(old), set(new)
        if before - after:
            self.isr_shrinks.labels(topic, str(partition)).inc()
        if after - before:
            self.isr_expands.labels(topic, str(partition)).inc()

    def leader_elected(self, topic: str, partition: int, clean: bool) -> None:
        self.leader_elections.labels("clean" if clean else "unclean").inc()
