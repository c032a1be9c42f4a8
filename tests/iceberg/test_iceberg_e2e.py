"""Iceberg topics end to end: a real broker translates a topic (with an aborted transaction
and tiered history) into its table; pyiceberg and DuckDB's iceberg_scan read exactly the
committed records; a kill -9 between the data files and the commit loses and doubles nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from spark.iceberg.catalog import open_catalog
from tests.brokers import BrokerProcess, create_topic
from tests.iceberg.icelib import duckdb_rows, pyiceberg_rows, wait_for

pytestmark = pytest.mark.timeout(600)

ICEBERG = {"iceberg.mode": "key_value", "iceberg.target.lag.ms": "1000", "segment.bytes": "4096"}


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for part, k, v in records:
        p.produce(topic, v, k, partition=part, headers=[("h", b"x")])
    assert p.flush(30) == 0


def _aborted(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"aborted-%d" % i, b"ak", partition=0)
    p.flush(30)
    p.abort_transaction(30)


def _committed_tx(bootstrap: str, topic: str, n: int) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    p.begin_transaction()
    values = [b"txn-%d" % i for i in range(n)]
    for v in values:
        p.produce(topic, v, b"tk", partition=1)
    p.commit_transaction(30)
    return values


def _table(data_dir: Path, topic: str) -> Any:
    from spark.iceberg.catalog import catalog_properties
    from tiering.iceberg_config import IcebergConfig

    url = f"file://{(data_dir / 'objects').resolve()}"
    cat = open_catalog(catalog_properties(IcebergConfig(), data_dir, url))
    return cat.load_table(("strata", topic))


def _values_of(rows: list[tuple[int, int, bytes | None, bytes | None]]) -> list[bytes | None]:
    return [r[3] for r in rows]


def test_key_value_exactly_once_through_a_crash(tmp_path: Path) -> None:
    data = tmp_path / "b"
    topic = "orders.v1"
    broker = BrokerProcess(data, env={"STRATA_ICEBERG_CHECK_INTERVAL_MS": "200"}).start()
    try:
        create_topic(broker.bootstrap, topic, 2, ICEBERG)
        with pytest.raises(KafkaException) as bad:  # as Kafka refuses a bad topic config
            create_topic(broker.bootstrap, "bad", 1, {"iceberg.mode": "yes"})
        assert bad.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert "iceberg.mode" in bad.value.args[0].str()
        first = [(i % 2, b"k%d" % i, b"v%d-" % i + b"x" * 200) for i in range(200)]
        _produce(broker.bootstrap, topic, first)
        _aborted(broker.bootstrap, topic)
        txn_values = _committed_tx(broker.bootstrap, topic, 3)
        expected = sorted(v for _, _, v in first) + sorted(txn_values)

        def translated() -> list[Any] | None:
            try:
                rows = pyiceberg_rows(_table(data, topic))
            except Exception:
                return None
            return rows if len(rows) >= len(expected) else None

        rows = wait_for(translated, 90, "the first translation")
        assert sorted(_values_of(rows)) == sorted(expected)  # no aborted record, no control record
        offsets = {(p, o) for p, o, _, _ in rows}
        assert len(offsets) == len(rows)
    finally:
        broker.stop()

    # kill -9 between writing data files and the commit, then restart: nothing doubled or lost
    crash = BrokerProcess(
        data, env={"STRATA_ICEBERG_CHECK_INTERVAL_MS": "200", "STRATA_ICEBERG_CRASH_BEFORE_COMMIT": "1"}
    )
    crash.kafka_port, crash.http_port = broker.kafka_port, broker.http_port
    crash.start()
    second = [(i % 2, b"s%d" % i, b"second-%d" % i) for i in range(100)]
    _produce(crash.bootstrap, topic, second)
    assert crash.proc is not None
    crash.proc.wait(timeout=60)  # the hook's SIGKILL
    orphans_before = list((data / "objects").rglob("*.parquet"))
    restarted = BrokerProcess(data, env={"STRATA_ICEBERG_CHECK_INTERVAL_MS": "200"})
    restarted.kafka_port, restarted.http_port = broker.kafka_port, broker.http_port
    restarted.start()
    try:
        expected += [v for _, _, v in second]

        def complete() -> list[Any] | None:
            rows = pyiceberg_rows(_table(data, topic))
            return rows if len(rows) >= len(expected) else None

        rows = wait_for(complete, 90, "translation after the crash")
        assert sorted(_values_of(rows)) == sorted(expected)
        assert len({(p, o) for p, o, _, _ in rows}) == len(rows)
        table = _table(data, topic)
        ends = {p: max(o for q, o, _, _ in rows if q == p) for p in (0, 1)}
        summary = table.current_snapshot().summary.additional_properties
        assert int(summary["strata.offset.0"]) > ends[0] and int(summary["strata.offset.1"]) > ends[1]
        assert duckdb_rows(table.metadata_location) == rows
        # the crashed pass's files were orphans, removed when the committer started again
        files = table.inspect.files().column("file_path").to_pylist()
        live = {Path(f.removeprefix("file://")) for f in files}
        assert not [f for f in (data / "objects").rglob("*.parquet") if f not in live]
        assert [f for f in orphans_before if f not in live]  # the crash did leave some
        # the door: strata iceberg status
        tail = ["--format", "json", "-b", restarted.bootstrap]
        out = subprocess.run(
            [sys.executable, "-m", "api.cli", "iceberg", "status", topic, "--data-dir", str(data), *tail],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        st = json.loads(out)
        assert st["identifier"] == f"strata.{topic}" and st["catalog"]["type"] == "sql"
        prop = "strata.offset."
        assert st["committed_offsets"] == {
            k.removeprefix(prop): int(v) for k, v in summary.items() if k.startswith(prop)
        }
        assert st["lag_records"] == 0 and st["last_snapshot"]["snapshot_id"]
    finally:
        restarted.stop()

    # a data directory without its catalog (a restore, a committer on another broker): the
    # table is picked up from the bucket's newest metadata and translation goes on from there
    (data / "iceberg" / "catalog.db").unlink()
    again = BrokerProcess(data, env={"STRATA_ICEBERG_CHECK_INTERVAL_MS": "200"})
    again.kafka_port, again.http_port = broker.kafka_port, broker.http_port
    again.start()
    try:
        third = [(i % 2, b"t%d" % i, b"third-%d" % i) for i in range(50)]
        _produce(again.bootstrap, topic, third)
        expected += [v for _, _, v in third]
        rows = wait_for(translated, 90, "translation with a new catalog")
        assert sorted(_values_of(rows)) == sorted(expected)
        assert len({(p, o) for p, o, _, _ in rows}) == len(rows)
    finally:
        again.stop()


def test_metrics_expiry_and_topic_deletion_keep_or_drop(tmp_path: Path) -> None:
    import urllib.request

    from confluent_kafka.admin import AdminClient

    data = tmp_path / "b"
    env = {
        "STRATA_ICEBERG_CHECK_INTERVAL_MS": "200",
        "STRATA_ICEBERG_SNAPSHOT_MAX_AGE_MS": "1",
        "STRATA_ICEBERG_MAINTENANCE_INTERVAL_MS": "1",
    }
    broker = BrokerProcess(data, env=env).start()
    try:
        create_topic(broker.bootstrap, "dropme", 1, {**ICEBERG, "iceberg.delete": "true"})
        create_topic(broker.bootstrap, "keepme", 1, ICEBERG)
        for batch in range(3):  # three commits
            for topic in ("dropme", "keepme"):
                _produce(
                    broker.bootstrap,
                    topic,
                    [(0, b"k", b"%s-%d-%d" % (topic.encode(), batch, i)) for i in range(10)],
                )
            wait_for(
                lambda b=batch: (
                    all(len(pyiceberg_rows(_table(data, t))) == 10 * (b + 1) for t in ("dropme", "keepme"))
                    if _exists(data, "dropme") and _exists(data, "keepme")
                    else False
                ),
                120,
                f"commit {batch}",
            )
        table = _table(data, "keepme")
        assert len(table.snapshots()) <= 2  # expired down to the current one (and maybe its parent)
        assert table.current_snapshot().summary.additional_properties["strata.offset.0"] == "30"
        metrics = urllib.request.urlopen(f"{broker.http_url}/metrics", timeout=10).read().decode()
        assert 'strata_iceberg_committed_offset{partition="0",topic="keepme"} 30.0' in metrics
        assert 'strata_iceberg_lag_records{topic="keepme"} 0.0' in metrics

        keep_id = table.properties["strata.topic-id"].replace("-", "")
        drop_root = Path(_table(data, "dropme").metadata.location.removeprefix("file://"))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.delete_topics(["dropme", "keepme"]).values():
            f.result(30)
        wait_for(
            lambda: not _exists(data, "dropme") and not _exists(data, "keepme"), 60, "tables moved or dropped"
        )
        wait_for(lambda: not drop_root.exists() or not any(drop_root.rglob("*.*")), 30, "dropped files")
        kept = _table(data, f"keepme_{keep_id}")
        assert len(pyiceberg_rows(kept)) == 30

        # a new topic of the same name gets a new table, from its own offset 0
        create_topic(broker.bootstrap, "keepme", 1, ICEBERG)
        _produce(broker.bootstrap, "keepme", [(0, b"n", b"new-%d" % i) for i in range(5)])
        rows = wait_for(
            lambda: (
                _exists(data, "keepme")
                and len(pyiceberg_rows(_table(data, "keepme"))) == 5
                and pyiceberg_rows(_table(data, "keepme"))
            ),
            120,
            "the new topic's table",
        )
        assert [r[3] for r in rows] == [b"new-%d" % i for i in range(5)]
    finally:
        broker.stop()


def _exists(data: Path, topic: str) -> bool:
    try:
        _table(data, topic)
    except Exception:
        return False
    return True
