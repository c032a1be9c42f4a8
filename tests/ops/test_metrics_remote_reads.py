"""Tiering metrics under a scripted workload against a real broker tiering to moto S3:
local retention leaves a remote-only part, the per-partition gauges reflect it, reads
from the remote tier count the bytes they return, and a remote object deleted behind
the broker's back makes reads fail with an error (never bad data) counted by kind."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from kwire.error_table import KAFKA_STORAGE_ERROR
from tests.brokers import BrokerProcess, S3Endpoint, create_topic
from tests.ops.settle import wait_settled
from tests.ops.test_metrics_workload import _scrape, _value

TOPIC = "remote-metered"
PREFIX = "rm"
N = 600


def _rest_read(http: str, offset: int) -> list[dict[str, object]]:
    req = urllib.request.Request(
        f"{http}/topics/{TOPIC}/partitions/0/records?offset={offset}&timeout=0&max_bytes=4096",
        headers={"Accept": "application/vnd.kafka.binary.v2+json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        records: list[dict[str, object]] = json.loads(resp.read())
    return records


def _kafka_fetch(bootstrap: str, offset: int) -> Any:
    """Partition 0 of one raw Fetch (the client sees the error code as sent)."""
    from kclient import KafkaClient
    from kwire import ApiKey
    from kwire.address import HostPort
    from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic

    part = FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=65536)
    req = FetchRequest(max_wait_ms=0, min_bytes=1, topics=(FetchTopic(topic=TOPIC, partitions=(part,)),))
    with KafkaClient.connect(HostPort.parse(bootstrap), timeout=30) as c:
        return c.call(ApiKey.FETCH, req).responses[0].partitions[0]


def test_remote_reads_bytes_errors_and_fresh_local_gauges(
    broker_factory: Callable[..., BrokerProcess], s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    import base64

    from confluent_kafka import Consumer, Producer, TopicPartition

    env = {
        **s3_endpoint.env,
        "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100",
        "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "200",
    }
    b = broker_factory("--object-store", f"s3://{s3_bucket}/{PREFIX}", env=env)
    create_topic(b.bootstrap, TOPIC, 1, {"segment.bytes": "16384", "local.retention.bytes": "32768"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2, "batch.size": 4096})
    for i in range(N):
        p.produce(TOPIC, value=f"v{i}:".encode() + b"t" * 300)
    assert p.flush(30) == 0
    [part] = wait_settled(b.http_url, TOPIC)
    local_start = part["local_log_start_offset"]

    # -- gauges reflect the state after local retention (not the last upload's) -------------
    s = _scrape(b.http_url)
    lv = {"topic": TOPIC, "partition": "0"}
    assert _value(s, "strata_tiering_local_bytes", **lv) == _value(s, "strata_log_size_bytes", **lv)
    assert _value(s, "strata_tiering_local_bytes", **lv) == part["local_bytes"]
    assert _value(s, "strata_tiering_upload_lag_bytes", **lv) == 0
    assert _value(s, "strata_log_local_start_offset", **lv) == local_start > 0
    assert _value(s, "strata_tiering_remote_read_bytes_total", topic=TOPIC) == 0

    # -- the first remote segment's data object disappears from the bucket -------------------
    s3 = s3_endpoint.client()
    listed = s3.list_objects_v2(Bucket=s3_bucket, Prefix=f"{PREFIX}/")  # type: ignore[attr-defined]
    logs = sorted(o["Key"] for o in listed["Contents"] if o["Key"].endswith(".log"))
    assert len(logs) >= 2
    first, second = logs[0], logs[1]
    second_base = int(second.rsplit("/", 1)[1].split("-", 1)[0])
    assert 0 < second_base < local_start
    s3.delete_object(Bucket=s3_bucket, Key=first)  # type: ignore[attr-defined]

    with pytest.raises(urllib.error.HTTPError) as exc:
        _rest_read(b.http_url, 0)
    assert exc.value.code == 502
    assert first.split("/", 1)[1] in json.loads(exc.value.read())["message"]
    # A Kafka Fetch gets KAFKA_STORAGE_ERROR for the partition, and no bytes.
    resp = _kafka_fetch(b.bootstrap, 0)
    assert (resp.error_code, resp.records) == (KAFKA_STORAGE_ERROR, b"")
    s = _scrape(b.http_url)
    assert _value(s, "strata_tiering_remote_read_errors_total", topic=TOPIC, kind="missing") == 2
    assert _value(s, "strata_tiering_remote_read_bytes_total", topic=TOPIC) == 0

    # -- reads of the segments still in the bucket succeed and are counted -------------------
    records = _rest_read(b.http_url, second_base)
    assert records and records[0]["offset"] == second_base
    value = base64.b64decode(str(records[0]["value"]))
    assert value.startswith(f"v{second_base}:".encode())
    rest_bytes = _value(_scrape(b.http_url), "strata_tiering_remote_read_bytes_total", topic=TOPIC)
    assert rest_bytes > 0

    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "rm", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, second_base)])
        got: list[int] = []
        deadline = time.monotonic() + 60
        while len(got) < N - second_base:
            assert time.monotonic() < deadline, f"consumed {len(got)} of {N - second_base}"
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                offset, data = msg.offset(), msg.value()
                assert offset is not None and data is not None
                assert data.startswith(f"v{offset}:".encode())
                got.append(offset)
    finally:
        consumer.close()
    assert got == list(range(second_base, N))
    s = _scrape(b.http_url)
    # The consumer read [second_base, local_start) from the remote tier: more bytes counted.
    assert _value(s, "strata_tiering_remote_read_bytes_total", topic=TOPIC) > rest_bytes
    assert _value(s, "strata_tiering_remote_read_errors_total", topic=TOPIC, kind="missing") == 2
    assert _value(s, "strata_tiering_remote_read_errors_total", topic=TOPIC, kind="corrupt") == 0
    assert b.stop() == 0
