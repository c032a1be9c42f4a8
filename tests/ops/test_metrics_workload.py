"""Broker metrics move as expected under a scripted workload against a real broker.

One ``strata serve`` (tiering to its default file:// store, small segments) and real
confluent-kafka clients: produce N records, fetch them all, commit group offsets, and
provoke a MESSAGE_TOO_LARGE. Every figure asserted is exact or a bound the workload
implies; background work (uploads) is awaited by polling /metrics, never by sleeping a
fixed time.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.brokers import BrokerProcess, create_topic

TOPIC = "metered"
SMALL = "small-records"
N = 1200
SEGMENT = 16 * 1024

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(http: str) -> Samples:
    with urllib.request.urlopen(f"{http}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float:
    """The sample's value; 0 when the series does not exist (yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def _sum(samples: Samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, lv), v in samples.items() if n == name and want <= lv)


def _wait_metrics(http: str, cond: Callable[[Samples], bool], what: str, timeout: float = 60.0) -> Samples:
    deadline = time.monotonic() + timeout
    while True:
        samples = _scrape(http)
        if cond(samples):
            return samples
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_metrics_follow_produce_fetch_tiering_groups_and_errors(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = broker_factory(env={"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100"})
    create_topic(b.bootstrap, TOPIC, 2, {"segment.bytes": str(SEGMENT)})
    before = _scrape(b.http_url)
    assert _value(before, "strata_produce_messages_total", topic=TOPIC) == 0
    assert _value(before, "strata_log_end_offset", topic=TOPIC, partition="0") == 0

    # -- produce: counts, bytes, latency, log offsets and sizes ------------------------------
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2, "batch.size": 4096})
    payload = 0
    for i in range(N):
        value = f"record-{i}:".encode() + b"m" * 200
        payload += len(value)
        producer.produce(TOPIC, partition=i % 2, value=value)
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    after = _scrape(b.http_url)
    assert _value(after, "strata_produce_messages_total", topic=TOPIC) == N
    assert _value(after, "strata_produce_bytes_total", topic=TOPIC) > payload  # batch framing on top
    assert _value(after, "strata_produce_latency_seconds_count", source="kafka") > 0
    for p in ("0", "1"):
        assert _value(after, "strata_log_end_offset", topic=TOPIC, partition=p) == N // 2
        assert _value(after, "strata_log_high_watermark", topic=TOPIC, partition=p) == N // 2
        assert _value(after, "strata_log_segments", topic=TOPIC, partition=p) > 1  # rolled at 16 KiB
        assert _value(after, "strata_log_size_bytes", topic=TOPIC, partition=p) > (payload // 2)

    # -- tiering: every sealed segment uploaded, lag back to zero -------------------------------
    def uploaded(s: Samples) -> bool:
        return all(
            _value(s, "strata_tiering_remote_segments", topic=TOPIC, partition=p) > 0
            and _value(s, "strata_tiering_upload_lag_segments", topic=TOPIC, partition=p) == 0
            and _value(s, "strata_tiering_remote_segments", topic=TOPIC, partition=p)
            == _value(s, "strata_log_segments", topic=TOPIC, partition=p) - 1
            for p in ("0", "1")
        )

    tiered = _wait_metrics(b.http_url, uploaded, "uploads of every sealed segment")
    assert _value(tiered, "strata_tiering_uploaded_segments_total", topic=TOPIC) == _sum(
        tiered, "strata_tiering_remote_segments", topic=TOPIC
    )
    assert _sum(tiered, "strata_tiering_remote_bytes", topic=TOPIC) == _value(
        tiered, "strata_tiering_uploaded_bytes_total", topic=TOPIC
    )
    assert _sum(tiered, "strata_tiering_upload_errors_total") == 0
    for p in ("0", "1"):  # the oldest segment not uploaded: none, so 0 s
        assert _value(tiered, "strata_tiering_upload_lag_seconds", topic=TOPIC, partition=p) == 0

    # -- fetch: a consumer reads everything; bytes served cover what was produced --------------
    consumer = Consumer(
        {"bootstrap.servers": b.bootstrap, "group.id": "meter-reader", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
        got = 0
        deadline = time.monotonic() + 60
        while got < N:
            assert time.monotonic() < deadline, f"consumed {got} of {N}"
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                got += 1
        fetched = _scrape(b.http_url)
        assert _value(fetched, "strata_fetch_bytes_total", topic=TOPIC) >= _value(
            fetched, "strata_produce_bytes_total", topic=TOPIC
        )
        # Whole batches are served, and a poll may fetch a batch again: at least every record.
        assert _value(fetched, "strata_fetch_messages_total", topic=TOPIC) >= N
        assert _value(fetched, "strata_fetch_latency_seconds_count", source="kafka") > 0
        assert _value(fetched, "strata_request_latency_seconds_count", api="Fetch") > 0

        # -- groups: lag follows commits exactly ---------------------------------------------
        consumer.commit(
            offsets=[TopicPartition(TOPIC, 0, 100), TopicPartition(TOPIC, 1, 250)], asynchronous=False
        )
        lagging = _scrape(b.http_url)
        assert (
            _value(lagging, "strata_group_lag_offsets", group="meter-reader", topic=TOPIC, partition="0")
            == N // 2 - 100
        )
        assert _value(lagging, "strata_group_total_lag_offsets", group="meter-reader") == N - 350
        consumer.commit(offsets=[TopicPartition(TOPIC, p, N // 2) for p in (0, 1)], asynchronous=False)
        caught_up = _scrape(b.http_url)
        assert _value(caught_up, "strata_group_total_lag_offsets", group="meter-reader") == 0
    finally:
        consumer.close()

    # -- errors by code: REST produce to a partition that does not exist (40402) -------------
    req = urllib.request.Request(
        f"{b.http_url}/topics/{TOPIC}/partitions/7",
        data=b'{"records":[{"value":{"n":1}}]}',
        headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=10)
    assert exc.value.code == 404
    final = _scrape(b.http_url)
    assert _value(final, "strata_request_errors_total", api="REST", error="40402") == 1
    assert _value(final, "strata_produce_messages_total", topic=TOPIC) == N
    assert b.stop() == 0
    assert "Traceback" not in b.output(), b.output()[-3000:]


def test_a_kafka_produce_error_is_counted_once_by_code(broker_factory: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka import KafkaError, Producer

    b = broker_factory()
    create_topic(b.bootstrap, SMALL, 1, {"max.message.bytes": "2000"})
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": b.bootstrap, "message.send.max.retries": 0})
    p.produce(SMALL, value=b"z" * 5000, on_delivery=lambda err, _msg: errors.append(err))
    assert p.flush(30) == 0
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    final = _scrape(b.http_url)
    assert _value(final, "strata_produce_messages_total", topic=SMALL) == 0
    assert _value(final, "strata_request_errors_total", api="Produce", error="MESSAGE_TOO_LARGE") == 1
