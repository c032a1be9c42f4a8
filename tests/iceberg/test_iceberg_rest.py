"""The REST catalog path (``[iceberg] catalog = "rest"``): a broker commits a topic's table
through pyiceberg's RestCatalog to an Iceberg REST catalog (tests/iceberg/rest_catalog.py:
the spec's endpoints answered by pyiceberg's SQL catalog, in its own process), and the
catalog is killed with kill -9 and restarted while records keep coming: the table holds
every record exactly once (no duplicate, no gap), read by pyiceberg through the same REST
catalog and by DuckDB's iceberg_scan."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from spark.iceberg.translate import committed_offsets
from tests.broker.etcdlib import free_port
from tests.brokers import BrokerProcess, create_topic
from tests.iceberg.icelib import duckdb_rows, pyiceberg_rows, wait_for

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]


def _catalog_process(port: int, base: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.iceberg.rest_catalog",
            "--port",
            str(port),
            "--db",
            str(base / "rest-catalog.db"),
            "--warehouse",
            f"file://{base / 'warehouse'}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


def test_rest_catalog_restarted_mid_translation_loses_and_doubles_nothing(tmp_path: Path) -> None:
    from pyiceberg.catalog import load_catalog

    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    rest = _catalog_process(port, tmp_path)
    broker = BrokerProcess(
        tmp_path / "b",
        env={
            "STRATA_ICEBERG_CATALOG": "rest",
            "STRATA_ICEBERG_URI": uri,
            "STRATA_ICEBERG_TOKEN": "test-token",
            "STRATA_ICEBERG_CHECK_INTERVAL_MS": "200",
        },
    ).start()
    stop = threading.Event()
    sent: list[int] = []
    try:
        create_topic(
            broker.bootstrap, "rested", 2, {"iceberg.mode": "key_value", "iceberg.target.lag.ms": "1000"}
        )
        catalog = load_catalog("check", type="rest", uri=uri, token="test-token")

        def produce() -> None:
            p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
            i = 0
            while not stop.is_set():
                p.produce("rested", b"v%d" % i, b"k%d" % i, partition=i % 2)
                i += 1
                p.poll(0)
                time.sleep(0.002)
            assert p.flush(30) == 0
            sent.append(i)

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()

        def some_committed() -> bool:
            try:
                table = catalog.load_table(("strata", "rested"))
            except Exception:
                return False
            return sum(committed_offsets(table).values()) > 0

        wait_for(some_committed, 90, "a first commit through the REST catalog")
        rest.kill()  # mid-translation: passes in flight fail, the next ones wait for it
        rest.wait(10)
        time.sleep(3)
        rest = _catalog_process(port, tmp_path)
        time.sleep(3)
        stop.set()
        thread.join(60)
        total = sent[0]

        def all_in() -> bool:
            try:
                table = catalog.load_table(("strata", "rested"))
            except Exception:
                return False
            return sum(committed_offsets(table).values()) >= total

        wait_for(all_in, 120, f"all {total} records committed after the catalog's restart")
        table = catalog.load_table(("strata", "rested"))
        rows = pyiceberg_rows(table)
        # exactly once: every record of each partition, in order, once
        for part in (0, 1):
            got = [(o, v) for p, o, _, v in rows if p == part]
            assert [o for o, _ in got] == list(range(len(got)))
            assert [v for _, v in got] == [b"v%d" % i for i in range(part, total, 2)]
        assert len(rows) == total
        assert len(duckdb_rows(table.metadata_location)) == total
    finally:
        stop.set()
        broker.stop()
        rest.kill()
        rest.wait(10)
