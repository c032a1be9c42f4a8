"""broker.metrics_history: rates between samples, the p99 of a histogram's interval, the
ring buffer's bound and each group's lag series, driven by a fake clock."""

from __future__ import annotations

import math

import pytest

from broker.metrics_history import MetricsHistory, Totals, quantile


class Source:
    def __init__(self) -> None:
        self.totals = Totals()

    def __call__(self) -> Totals:
        return self.totals


def test_rates_latency_and_lag_between_samples() -> None:
    now = [1000.0]
    src = Source()
    h = MetricsHistory(src, clock=lambda: now[0], interval_s=10, window_s=30)
    buckets = ((0.001, 0.0), (0.01, 0.0), (0.1, 0.0), (math.inf, 0.0))
    src.totals = Totals(
        produce_messages=100, produce_bytes=1000, latency_buckets=buckets, topics={"t": (100, 1000, 0, 0)}
    )
    assert h.sample() is None  # the baseline
    now[0] += 10
    src.totals = Totals(
        produce_messages=600,
        produce_bytes=6000,
        fetch_messages=50,
        fetch_bytes=500,
        uploaded_segments=3,
        latency_buckets=((0.001, 90.0), (0.01, 99.0), (0.1, 100.0), (math.inf, 100.0)),
        topics={"t": (600, 6000, 50, 500)},
        group_lag={"g": 42},
    )
    p = h.sample()
    assert p is not None
    assert (p.produce_msgs, p.produce_bytes, p.fetch_msgs, p.fetch_bytes) == (50, 500, 5, 50)
    assert p.uploaded_segments == 3 and p.group_lag == {"g": 42}
    assert p.latency_p99_ms == pytest.approx(10.0)  # the 99th of 100 observations ends the 10 ms bucket
    assert p.produce_p99_ms is None  # no Produce request in the interval
    assert h.topic_rates()["t"].produce_msgs == 50
    # An idle interval: no request, so no p99; the counters did not move.
    now[0] += 10
    src.totals = Totals(
        produce_messages=600,
        produce_bytes=6000,
        fetch_messages=50,
        fetch_bytes=500,
        uploaded_segments=3,
        latency_buckets=((0.001, 90.0), (0.01, 99.0), (0.1, 100.0), (math.inf, 100.0)),
        topics={"t": (600, 6000, 50, 500)},
        group_lag={"g": 40, "h": 1},
    )
    q = h.sample()
    assert q is not None and q.produce_msgs == 0 and q.latency_p99_ms is None
    assert h.group_series("g") == [(1010.0, 42), (1020.0, 40)]
    assert h.group_series("h") == [(1020.0, 1)]
    # The window keeps window_s / interval_s points: the oldest fall off.
    for _ in range(5):
        now[0] += 10
        h.sample()
    assert len(h.points()) == 3 and h.points()[0].t == 1050.0
    assert [p.t for p in h.points(since=1060.0)] == [1070.0]


def test_a_counter_that_restarts_counts_from_zero_and_a_still_clock_adds_nothing() -> None:
    now = [0.0]
    src = Source()
    h = MetricsHistory(src, clock=lambda: now[0])
    src.totals = Totals(produce_messages=1000)
    h.sample()
    now[0] = 10.0
    src.totals = Totals(produce_messages=30)
    p = h.sample()
    assert p is not None and p.produce_msgs == 3.0
    assert h.sample() is None  # the clock did not move
    assert len(h.points()) == 1


def test_quantile() -> None:
    assert quantile([], 0.99) is None
    assert quantile([(1.0, 0.0), (math.inf, 0.0)], 0.99) is None
    assert quantile([(1.0, 50.0), (2.0, 100.0), (math.inf, 100.0)], 0.5) == 1.0
    assert quantile([(1.0, 0.0), (2.0, 100.0), (math.inf, 100.0)], 0.5) == pytest.approx(1.5)
    assert quantile([(1.0, 0.0), (math.inf, 10.0)], 0.99) == 1.0  # in +Inf: the last finite bound
