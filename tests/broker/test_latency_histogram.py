"""broker.latency_histogram.LatencyHistogram exports what prometheus_client's Histogram
exports for the same observations: same names, help, labels, buckets, counts and sums,
byte for byte in the text exposition (its integers are only counted differently)."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from broker.latency_histogram import LatencyBatch, LatencyHistogram
from broker.metrics import _LATENCY_BUCKETS, BrokerMetrics

NAME = "strata_x_latency_seconds"
DOC = "Some latency, by api"


def test_exposition_matches_prometheus_histogram() -> None:
    ours_r, theirs_r = CollectorRegistry(), CollectorRegistry()
    ours = LatencyHistogram(NAME, DOC, "api", _LATENCY_BUCKETS, ours_r)
    theirs = Histogram(NAME, DOC, ["api"], buckets=_LATENCY_BUCKETS, registry=theirs_r)
    assert generate_latest(ours_r) == generate_latest(theirs_r)  # no label value yet: no series
    rng = random.Random(34)
    # Values on and around every bound (``le`` is inclusive), beyond the last, zero.
    values = [0.0, 20.0, *_LATENCY_BUCKETS, *(b * 1.0000001 for b in _LATENCY_BUCKETS)]
    values += [rng.expovariate(50.0) for _ in range(2000)]
    for i, v in enumerate(values):
        api = rng.choice(["Produce", "Fetch", "Metadata"])
        ours.labels(api).observe(v)
        theirs.labels(api).observe(v)
        if i % 97 == 0:
            assert generate_latest(ours_r) == generate_latest(theirs_r)
    assert generate_latest(ours_r) == generate_latest(theirs_r)


def test_broker_metrics_names_unchanged() -> None:
    m = BrokerMetrics()
    m.labelled(m.produce_latency, "kafka").observe(0.001)
    m.fetch_latency.labels("rest").observe(0.2)
    m.labelled(m.request_latency, "Produce").observe(0.0004)
    text = m.exposition().decode()
    assert "# TYPE strata_produce_latency_seconds histogram" in text
    assert 'strata_produce_latency_seconds_bucket{le="0.001",source="kafka"} 1.0' in text
    assert 'strata_fetch_latency_seconds_count{source="rest"} 1.0' in text
    assert 'strata_request_latency_seconds_bucket{api="Produce",le="0.0005"} 1.0' in text


def test_unsorted_buckets_refused() -> None:
    with pytest.raises(ValueError, match="sorted"):
        LatencyHistogram("x_seconds", "x", "api", (0.5, 0.1), CollectorRegistry())


def test_a_batch_counts_in_every_child_before_a_scrape() -> None:
    """``LatencyBatch`` (the fast paths' two histograms per request): its values are
    counted in both children at ``FOLD_AT`` and before any read, as direct observations."""
    ours_r, theirs_r = CollectorRegistry(), CollectorRegistry()
    door = LatencyHistogram(NAME, DOC, "api", _LATENCY_BUCKETS, ours_r)
    api = LatencyHistogram("strata_y_latency_seconds", DOC, "api", _LATENCY_BUCKETS, ours_r)
    theirs = [
        Histogram(n, DOC, ["api"], buckets=_LATENCY_BUCKETS, registry=theirs_r)
        for n in (NAME, "strata_y_latency_seconds")
    ]
    batch = LatencyBatch(door.labels("kafka"), api.labels("Fetch"))
    rng = random.Random(6)
    for i in range(LatencyBatch.FOLD_AT * 2 + 7):
        v = rng.expovariate(50.0)
        batch.values.append(v)
        if len(batch.values) >= LatencyBatch.FOLD_AT:
            batch.fold()
        theirs[0].labels("kafka").observe(v)
        theirs[1].labels("Fetch").observe(v)
        if i % 101 == 0:  # a scrape in between sees every value so far
            assert generate_latest(ours_r) == generate_latest(theirs_r)
    assert batch.values and len(batch.values) < LatencyBatch.FOLD_AT
    assert generate_latest(ours_r) == generate_latest(theirs_r)
    assert not batch.values
    m = BrokerMetrics()
    one = m.latency_batch(m.fetch_latency, "kafka", "Fetch")
    assert one is m.latency_batch(m.fetch_latency, "kafka", "Fetch")
