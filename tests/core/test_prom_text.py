"""core.prom_text.exposition writes exactly generate_latest's bytes, for every metric type,
awkward label values and names, timestamps, ``_created`` samples, and on a second scrape
(from its label cache)."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Enum,
    Gauge,
    Histogram,
    Info,
    Summary,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from core.prom_text import exposition


class _Custom(Collector):
    def __init__(self, values: list[tuple[str, float]]) -> None:
        self.values = values

    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily("x_gauge", 'doc with "quotes", \\ and\nnewline', labels=["topic", "partition"])
        for i, (label, value) in enumerate(self.values):
            g.add_metric([label, str(i)], value, timestamp=None if i % 3 else 1700000000.123)
        yield g
        yield CounterMetricFamily("x_count", "counted", value=7, created=1700000000.0)
        yield GaugeHistogramMetricFamily("x_gh", "gh", buckets=[("1.0", 4), ("+Inf", 5)], gsum_value=3)
        yield UnknownMetricFamily("x_unknown", "unknown", value=1.5)


def _registry(values: list[tuple[str, float]]) -> CollectorRegistry:
    r = CollectorRegistry()
    c = Counter("strata_c", "a counter", ["topic"], registry=r)
    c.labels("a").inc(3)
    c.labels('we"ird\\na\nme').inc()
    Gauge("strata_g", "a gauge", registry=r).set(1234567.0)
    h = Histogram("strata_h", "a histogram", ["api"], registry=r)
    for v in (0.001, 0.2, 7.0):
        h.labels("Fetch").observe(v)
    Summary("strata_s", "a summary", registry=r).observe(2.5)
    Info("strata_i", "an info", registry=r).info({"version": "1", "name": "x"})
    Enum("strata_e", "an enum", states=["a", "b"], registry=r).state("b")
    r.register(_Custom(values))
    return r


def test_the_same_bytes_as_generate_latest_for_every_type() -> None:
    r = _registry(
        [("t", 1.0), ("u", 2.5), ("with space", float("inf")), ("neg", -3.0), ("nan", float("nan"))]
    )
    assert exposition(r) == generate_latest(r)
    assert exposition(r) == generate_latest(r)  # from the label cache


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(max_size=12), st.floats(allow_nan=False) | st.integers(-(2**60), 2**60)),
        max_size=20,
    )
)
def test_any_label_values_and_numbers(values: list[tuple[str, float]]) -> None:
    r = _registry([(label, float(v)) for label, v in values])
    assert exposition(r) == generate_latest(r)
