"""Iceberg topics on S3 (moto over HTTP): backfill of a topic whose history is only in the
bucket (local retention deleted it), then an S3 outage of a few seconds while records keep
coming: the table ends with every committed record exactly once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from spark.iceberg.catalog import catalog_properties, open_catalog
from tests.brokers import BrokerProcess, S3Endpoint, create_topic
from tests.iceberg.icelib import pyiceberg_rows, wait_for
from tiering.iceberg_config import IcebergConfig

pytestmark = pytest.mark.timeout(600)
TOPIC = "history"


def _produce(bootstrap: str, values: list[bytes]) -> None:
    # small batches: segments of 4 KiB roll (a batch is never split over two)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "batch.size": 1000})
    for i, v in enumerate(values):
        p.produce(TOPIC, v, b"k%d" % i, partition=i % 2)
    assert p.flush(30) == 0


def _local_log_start(data: Path) -> int:
    bases = [int(f.stem) for f in (data / "logs" / f"{TOPIC}-0").glob("*.log")]
    return min(bases) if bases else 0


def test_backfill_from_the_bucket_then_an_s3_outage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s3 = S3Endpoint()
    try:
        bucket = s3.create_bucket("lake")
        for k, v in s3.env.items():
            monkeypatch.setenv(k, v)
        url = f"s3://{bucket}/strata"
        env = {
            **s3.env,
            "STRATA_TIERING_UPLOAD_INTERVAL_MS": "100",
            "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "300",
            "STRATA_TIERING_MAX_BACKOFF_MS": "500",
            "STRATA_ICEBERG_CHECK_INTERVAL_MS": "200",
        }
        data = tmp_path / "b"
        broker = BrokerProcess(data, "--object-store", url, env=env).start()
        try:
            create_topic(
                broker.bootstrap,
                TOPIC,
                2,
                {
                    "segment.bytes": "4096",
                    "local.retention.bytes": "4096",
                    "file.delete.delay.ms": "0",
                    "iceberg.target.lag.ms": "1000",
                },
            )
            history = [b"h%04d-" % i + b"y" * 100 for i in range(400)]
            _produce(broker.bootstrap, history)
            # the oldest records are only in the bucket now
            wait_for(lambda: _local_log_start(data) > 0, 60, "local retention to delete uploaded segments")

            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            res = ConfigResource(
                ConfigResource.Type.TOPIC,
                TOPIC,
                incremental_configs=[
                    ConfigEntry("iceberg.mode", "key_value", incremental_operation=AlterConfigOpType.SET)
                ],
            )
            admin.incremental_alter_configs([res])[res].result(30)
            catalog = open_catalog(catalog_properties(IcebergConfig(), data, url))

            def rows(n: int) -> Any:
                try:
                    got = pyiceberg_rows(catalog.load_table(("strata", TOPIC)))
                except Exception:
                    return None
                return got if len(got) >= n else None

            got = wait_for(lambda: rows(len(history)), 90, "the backfill")
            assert sorted(r[3] for r in got) == sorted(history)

            # S3 goes away for a few seconds while records keep coming
            s3.stop()
            more = [b"m%04d" % i for i in range(100)]
            _produce(broker.bootstrap, more)
            time.sleep(4)
            s3.start()
            got = wait_for(lambda: rows(len(history) + len(more)), 120, "translation after the outage")
            assert sorted(r[3] for r in got) == sorted(history + more)
            assert len({(r[0], r[1]) for r in got}) == len(got)
        finally:
            broker.stop()
    finally:
        s3.stop()
