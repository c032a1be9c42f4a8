"""The /metrics exposition of a real broker follows Prometheus's naming conventions, and the
shipped alert rules (infra/alerts.yml) only use series a broker really exports.

One ``strata serve`` gets produce, fetch, group commits and error traffic from real clients
(confluent-kafka, a REST call), then its exposition is linted family by family:
https://prometheus.io/docs/practices/naming/ (counters end ``_total``, nothing else ends in
a suffix Prometheus reserves, units are base units and end the name) plus Strata's own
rule that the ``api`` label is a Kafka API name (or ``REST``) wherever it appears.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kwire import APIS
from tests.brokers import BrokerProcess, create_topic

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "infra" / "alerts.yml"
TOPIC = "conventions"
N = 10
PAST_S = 120  # the records' timestamps: this long ago

# Series Prometheus makes itself for every target (not on /metrics).
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
RESERVED = ("_total", "_count", "_sum", "_bucket", "_created")
NON_BASE_UNITS = re.compile(
    r"_(ms|millis|milliseconds|microseconds|us|ns|nanoseconds|minutes|hours|days|kb|mb|gb|kib|mib|gib|percent)(_|$)"
)
API_NAMES = {spec.name for spec in APIS.values()} | {"REST"}


def _scrape(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def _types(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE)}


def _exported_names(text: str) -> set[str]:
    """Every series name a query can select: each family's, plus its histogram parts."""
    names: set[str] = set()
    for name, kind in _types(text).items():
        names.add(name)
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        if kind == "summary":
            names |= {f"{name}_sum", f"{name}_count"}
    return names


def _value(text: str, name: str, **labels: str) -> float | None:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


@pytest.fixture(scope="module")
def exposition(broker: BrokerProcess) -> str:
    """The broker's /metrics after produce, fetch, group and error traffic."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    create_topic(broker.bootstrap, TOPIC, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    past_ms = int(time.time() * 1000) - PAST_S * 1000
    for i in range(N):  # one batch each (flushed one by one), all stamped PAST_S ago
        producer.produce(TOPIC, partition=0, value=b"v%d" % i, timestamp=past_ms + i)
        assert producer.flush(30) == 0

    for group, committed in (("conv-behind", 4), ("conv-caught-up", N)):
        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            got, deadline = 0, time.monotonic() + 30
            while got < N:
                assert time.monotonic() < deadline, f"consumed {got} of {N}"
                msg = consumer.poll(1.0)
                if msg is not None and not msg.error():
                    got += 1
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, committed)], asynchronous=False)
        finally:
            consumer.close()

    # Errors of an API no handler counts itself (the listener walks the response) ...
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException, match=r"TOPIC_ALREADY_EXISTS|already exists"):
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=30)
    # ... and of the REST API (a partition that does not exist: 40402).
    req = urllib.request.Request(
        f"{broker.http_url}/topics/{TOPIC}/partitions/9",
        data=b'{"records":[{"value":{"n":1}}]}',
        headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(req, timeout=10)
    return _scrape(broker.http_url)


def test_every_family_follows_the_naming_conventions(exposition: str) -> None:
    types = _types(exposition)
    helps = set(re.findall(r"^# HELP (\S+) ", exposition, flags=re.MULTILINE))
    assert len(types) > 50, sorted(types)
    problems: list[str] = []
    for name, kind in types.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            problems.append(f"{name}: not snake_case")
        if name not in helps:
            problems.append(f"{name}: no HELP")
        if kind == "counter":
            if not name.endswith("_total"):
                problems.append(f"{name}: a counter not ending _total")
            base = name.removesuffix("_total")
        else:
            if name.endswith(RESERVED):
                problems.append(f"{name}: a {kind} ending in a reserved suffix")
            base = name
        if kind == "histogram" and not base.endswith(("_seconds", "_bytes")):
            problems.append(f"{name}: a histogram without its unit (_seconds, _bytes)")
        for unit in ("bytes", "seconds"):  # a unit ends the name (before _total)
            if f"_{unit}_" in base:
                problems.append(f"{name}: the unit {unit} is not the suffix")
        if NON_BASE_UNITS.search(base):
            problems.append(f"{name}: not a base unit (seconds, bytes, ratio)")
    assert not problems, "\n".join(problems)

    samples = [s for fam in text_string_to_metric_families(exposition) for s in fam.samples]
    assert not [s.name for s in samples if s.name.endswith("_created")]
    apis = {s.labels["api"] for s in samples if "api" in s.labels}
    assert {"Produce", "Fetch", "CreateTopics", "REST"} <= apis
    assert apis <= API_NAMES, apis - API_NAMES


def test_lag_in_seconds_errors_disk_and_metadata_store_series(exposition: str) -> None:
    behind = {"group": "conv-behind", "topic": TOPIC, "partition": "0"}
    assert _value(exposition, "strata_group_lag_offsets", **behind) == N - 4
    assert _value(exposition, "strata_group_total_lag_offsets", group="conv-behind") == N - 4
    # The first record not consumed was stamped PAST_S ago (the bound: however slow the run).
    lag_s = _value(exposition, "strata_group_lag_seconds", **behind)
    assert lag_s is not None and PAST_S - 1 <= lag_s < PAST_S + 600
    assert _value(exposition, "strata_group_max_lag_seconds", group="conv-behind") == lag_s
    assert _value(exposition, "strata_group_lag_seconds", group="conv-caught-up") == 0
    assert _value(exposition, "strata_group_max_lag_seconds", group="conv-caught-up") == 0

    assert (
        _value(exposition, "strata_request_errors_total", api="CreateTopics", error="TOPIC_ALREADY_EXISTS")
        == 1
    )
    assert _value(exposition, "strata_request_errors_total", api="REST", error="40402") == 1

    total = _value(exposition, "strata_disk_total_bytes")
    free = _value(exposition, "strata_disk_free_bytes")
    used = _value(exposition, "strata_disk_used_bytes")
    assert total and free and used and free + used <= total

    timeout = _value(exposition, "strata_metadata_store_session_timeout_seconds")
    age = _value(exposition, "strata_metadata_store_contact_age_seconds")
    assert timeout and timeout > 0
    assert age is not None and 0 <= age < timeout


def _selected_names(expr: object) -> set[str]:
    """The metric names an expression selects (promql_parser's syntax tree)."""
    import promql_parser

    if isinstance(expr, promql_parser.VectorSelector):
        assert expr.name, f"a selector without a metric name: {expr}"
        return {expr.name}
    names: set[str] = set()
    for attr in ("expr", "lhs", "rhs", "param", "vector_selector"):
        child = getattr(expr, attr, None)
        if child is not None and not isinstance(child, (str, int, float)):
            names |= _selected_names(child)
    for child in getattr(expr, "args", None) or ():
        names |= _selected_names(child)
    return names


def test_alert_rules_parse_and_use_only_exported_series(exposition: str) -> None:
    import promql_parser

    doc = yaml.safe_load(ALERTS.read_text())
    exported = _exported_names(exposition) | PROMETHEUS_SERIES
    rules = [r for g in doc["groups"] for r in g["rules"]]
    seen: set[str] = set()
    for rule in rules:
        assert re.fullmatch(r"Strata[A-Za-z]+", rule["alert"]), rule
        assert rule["alert"] not in seen, f"duplicate alert {rule['alert']}"
        seen.add(rule["alert"])
        assert rule["labels"]["severity"] in ("warning", "critical"), rule
        assert rule["annotations"]["summary"], rule
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule
        names = _selected_names(promql_parser.parse(rule["expr"]))
        assert names, rule["expr"]
        assert names <= exported, f"{rule['alert']}: {sorted(names - exported)} not on a broker's /metrics"
    # the list: replication, tiering, disk, consumers, object store, etcd
    for wanted in (
        "StrataUnderReplicatedPartitions",
        "StrataOfflinePartitions",
        "StrataUploadLagging",
        "StrataDiskHighWater",
        "StrataConsumerGroupLagging",
        "StrataObjectStoreUnavailable",
        "StrataMetadataStoreUnavailable",
    ):
        assert wanted in seen, wanted
    promtool = shutil.which("promtool")
    if promtool is not None:  # Debian's prometheus package; not installed by tests/run-all.sh
        out = subprocess.run(
            [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stdout + out.stderr
