"""The broker's own metric history, so the console's charts survive a reload.

Prometheus keeps history for operators who run one; the console must draw the last hour
without it. ``MetricsHistory`` samples cumulative counters every ``interval_s`` (10 s) and
keeps the rates between consecutive samples in a ring buffer covering ``window_s`` (one
hour): produce and fetch messages/s and bytes/s, the p99 of Kafka request latency over the
interval (Produce alone, and every request that does not wait by design), each consumer
group's total lag, and tiering's uploads and remote deletions. The latest per-topic rates
are kept too (the topic list's throughput), but no per-topic history: 1,000 topics x 360
samples would cost more than the charts are worth.

Sampling reads counters the request path already maintains (``broker.metrics``, the tiering
metrics) and the group coordinator's lag (``broker.group_lag``), so nothing is added to the
produce or fetch path. A sample costs one pass over the groups: with 500 groups every 10 s
it replaces the browser's per-group polling the old dashboard did.

The clock is injectable (tests drive ``sample`` with a fake one); ``run`` is the sampling
loop the process wiring (api.server) starts next to the broker as ``broker.history``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from prometheus_client import Counter
from prometheus_client.registry import Collector

from broker.group_lag import all_group_lags, manager_end_offsets
from hot.errors import InvalidConfigError, StrataError

if TYPE_CHECKING:
    from broker.groups.coordinator import GroupCoordinator
    from broker.log_manager import ClusterLogManager
    from broker.metrics import BrokerMetrics

log = logging.getLogger(__name__)

INTERVAL_S = 10.0
WINDOW_S = 3600.0
# Tests and the screenshot script (tests/ops/console_screenshots.py) sample faster.
INTERVAL_ENV = "STRATA_CONSOLE_SAMPLE_INTERVAL_S"


def sample_interval_s() -> float:
    """The sampling interval: ``INTERVAL_S``, or a positive number of seconds in
    ``STRATA_CONSOLE_SAMPLE_INTERVAL_S``."""
    text = os.environ.get(INTERVAL_ENV)
    if not text:
        return INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        raise InvalidConfigError(f"{INTERVAL_ENV} must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise InvalidConfigError(f"{INTERVAL_ENV} must be positive, got {text!r}")
    return value


# Requests that wait by design (a fetch's long poll, a rebalance): their latency says how
# long clients chose to wait, not how fast the broker is, so the p99 leaves them out.
WAITING_APIS = frozenset({"Fetch", "JoinGroup", "SyncGroup"})

# (produce messages, produce bytes, fetch messages, fetch bytes) of one topic.
TopicCounts = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class Totals:
    """Cumulative counters (and the lag gauges) read at one instant."""

    produce_messages: float = 0.0
    produce_bytes: float = 0.0
    fetch_messages: float = 0.0
    fetch_bytes: float = 0.0
    uploaded_bytes: float = 0.0
    uploaded_segments: float = 0.0
    deleted_segments: float = 0.0
    # Kafka request latency: (bucket upper bound in seconds, cumulative count), ascending;
    # requests that do not wait by design (WAITING_APIS left out), and Produce alone.
    latency_buckets: tuple[tuple[float, float], ...] = ()
    produce_latency_buckets: tuple[tuple[float, float], ...] = ()
    topics: Mapping[str, TopicCounts] = field(default_factory=dict)
    group_lag: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Point:
    """The rates over one interval, stamped with its end (unix seconds)."""

    t: float
    produce_msgs: float
    produce_bytes: float
    fetch_msgs: float
    fetch_bytes: float
    latency_p99_ms: float | None  # None: no request in the interval
    produce_p99_ms: float | None
    uploaded_bytes: float
    uploaded_segments: int  # in the interval
    deleted_segments: int
    group_lag: Mapping[str, int]  # each group's total lag at the sample


@dataclass(frozen=True, slots=True)
class TopicRate:
    produce_msgs: float
    produce_bytes: float
    fetch_msgs: float
    fetch_bytes: float


def quantile(buckets: Iterable[tuple[float, float]], q: float) -> float | None:
    """The ``q`` quantile of a cumulative histogram (Prometheus' histogram_quantile: linear
    within the bucket; the last finite bound when it falls in +Inf). None when empty."""
    rows = list(buckets)
    if not rows or rows[-1][1] <= 0:
        return None
    rank = q * rows[-1][1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in rows:
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def _interval_p99(
    before: tuple[tuple[float, float], ...], after: tuple[tuple[float, float], ...]
) -> float | None:
    """The p99 in ms of the observations between two reads of a cumulative histogram (all of
    ``after`` when a bucket went down: the source restarted)."""
    old = dict(before)
    rows = [(bound, count - old.get(bound, 0.0)) for bound, count in after]
    if any(c < 0 for _, c in rows):
        rows = list(after)
    q = quantile(rows, 0.99)
    return None if q is None else round(q * 1000, 3)


class MetricsHistory:
    """A ring buffer of ``Point``s, one per ``sample`` after the first (which only sets the
    baseline). ``read`` returns the current ``Totals``; ``clock`` gives unix seconds."""

    def __init__(
        self,
        read: Callable[[], Totals],
        *,
        clock: Callable[[], float] = time.time,
        interval_s: float = INTERVAL_S,
        window_s: float = WINDOW_S,
    ) -> None:
        self.read = read
        self.clock = clock
        self.interval_s = interval_s
        self._points: deque[Point] = deque(maxlen=max(1, math.ceil(window_s / interval_s)))
        self._last: tuple[float, Totals] | None = None
        self._topic_rates: dict[str, TopicRate] = {}

    def sample(self) -> Point | None:
        """Read the totals and append the rates since the previous sample (None the first
        time, or when the clock did not move). A counter that went down (a restart of its
        source) counts from zero."""
        now, totals = self.clock(), self.read()
        last, self._last = self._last, (now, totals)
        if last is None or now <= last[0]:
            return None
        then, prev = last
        dt = now - then

        def rate(a: float, b: float) -> float:
            return (b - a if b >= a else b) / dt

        p99 = _interval_p99(prev.latency_buckets, totals.latency_buckets)
        produce_p99 = _interval_p99(prev.produce_latency_buckets, totals.produce_latency_buckets)
        point = Point(
            t=now,
            produce_msgs=rate(prev.produce_messages, totals.produce_messages),
            produce_bytes=rate(prev.produce_bytes, totals.produce_bytes),
            fetch_msgs=rate(prev.fetch_messages, totals.fetch_messages),
            fetch_bytes=rate(prev.fetch_bytes, totals.fetch_bytes),
            latency_p99_ms=p99,
            produce_p99_ms=produce_p99,
            uploaded_bytes=rate(prev.uploaded_bytes, totals.uploaded_bytes),
            uploaded_segments=round(rate(prev.uploaded_segments, totals.uploaded_segments) * dt),
            deleted_segments=round(rate(prev.deleted_segments, totals.deleted_segments) * dt),
            group_lag=dict(totals.group_lag),
        )
        zero: TopicCounts = (0.0, 0.0, 0.0, 0.0)
        self._topic_rates = {
            t: TopicRate(*(rate(a, b) for a, b in zip(prev.topics.get(t, zero), counts, strict=True)))
            for t, counts in totals.topics.items()
        }
        self._points.append(point)
        return point

    def points(self, since: float | None = None) -> list[Point]:
        """The samples kept, oldest first (only those after ``since`` when given)."""
        return [p for p in self._points if since is None or p.t > since]

    def topic_rates(self) -> dict[str, TopicRate]:
        """Each topic's rates over the last interval (empty before the second sample)."""
        return dict(self._topic_rates)

    def group_series(self, group: str) -> list[tuple[float, int]]:
        """(t, total lag) of one group, for the samples that saw it."""
        return [(p.t, p.group_lag[group]) for p in self._points if group in p.group_lag]

    async def run(self) -> None:
        """Sample every ``interval_s`` until cancelled; a failing read is logged and skipped."""
        while True:
            try:
                self.sample()
            except Exception:
                log.exception("metrics history: sample failed")
            await asyncio.sleep(self.interval_s)


# --- reading the broker's own counters -----------------------------------------------------------


def _sum(metric: Counter | Collector) -> tuple[float, dict[str, float]]:
    """A labelled counter's total and its value per first label (the topic)."""
    total = 0.0
    by: dict[str, float] = {}
    for fam in metric.collect():
        for s in fam.samples:
            if s.name.endswith("_total"):
                total += s.value
                key = next(iter(s.labels.values()), "")
                by[key] = by.get(key, 0.0) + s.value
    return total, by


def _buckets(metric: Collector, keep: Callable[[str], bool]) -> tuple[tuple[float, float], ...]:
    """A histogram's cumulative buckets summed over the label values ``keep`` accepts (its
    one label: the API)."""
    acc: dict[float, float] = {}
    for fam in metric.collect():
        for s in fam.samples:
            if s.name.endswith("_bucket") and keep(s.labels.get("api", "")):
                bound = float(s.labels["le"])
                acc[bound] = acc.get(bound, 0.0) + s.value
    return tuple(sorted(acc.items()))


class Sampled(Protocol):
    """A broker (``broker.broker.Broker``), as far as its history samples it."""

    @property
    def metrics(self) -> BrokerMetrics: ...

    @property
    def tiering(self) -> object: ...

    @property
    def manager(self) -> ClusterLogManager: ...

    @property
    def groups(self) -> GroupCoordinator | None: ...


def broker_totals(broker: Sampled) -> Callable[[], Totals]:
    """The ``read`` of a broker's history: its request counters, its tiering counters (when
    it tiers) and the lag of every group its coordinator serves. Runs on the broker's loop."""
    from tiering.service import TieringService

    m = broker.metrics
    tiering = broker.tiering.metrics if isinstance(broker.tiering, TieringService) else None
    end_offsets = manager_end_offsets(broker.manager)

    def read() -> Totals:
        pm, pm_t = _sum(m.produced_messages)
        pb, pb_t = _sum(m.produced_bytes)
        fm, fm_t = _sum(m.fetched_messages)
        fb, fb_t = _sum(m.fetched_bytes)
        topics = {
            t: (pm_t.get(t, 0.0), pb_t.get(t, 0.0), fm_t.get(t, 0.0), fb_t.get(t, 0.0))
            for t in set(pm_t) | set(fm_t)
        }
        lags: dict[str, int] = {}
        if broker.groups is not None:
            try:
                lags = {
                    g.description.group_id: g.total_lag for g in all_group_lags(broker.groups, end_offsets)
                }
            except StrataError:
                pass  # the coordinator is not serving yet
        return Totals(
            produce_messages=pm,
            produce_bytes=pb,
            fetch_messages=fm,
            fetch_bytes=fb,
            uploaded_bytes=_sum(tiering.uploaded_bytes)[0] if tiering else 0.0,
            uploaded_segments=_sum(tiering.uploaded_segments)[0] if tiering else 0.0,
            deleted_segments=_sum(tiering.remote_deleted_segments)[0] if tiering else 0.0,
            latency_buckets=_buckets(m.request_latency, lambda api: api not in WAITING_APIS),
            produce_latency_buckets=_buckets(m.request_latency, lambda api: api == "Produce"),
            topics=topics,
            group_lag=lags,
        )

    return read
