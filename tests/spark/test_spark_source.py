"""The ``strata`` data source in a real local Spark (local[2]): file:// and S3 (moto), offset
and timestamp ranges, damage, and includeHot against a real broker.

One SparkSession serves the whole module (Spark starts in 10-20 s). Its Python workers
are this interpreter (PYSPARK_PYTHON) with the repository on PYTHONPATH, and the AWS chain
variables point at moto before Spark starts, so S3 reads use the standard chain.
pyspark is a hard requirement here: without it this module fails at import, loudly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from hot.errors import OffsetOutOfRangeError
from spark.options import ReadOptions
from spark.plan import ColdTask, HotTask, plan_scan
from spark.scan import read_task
from tests.brokers import BrokerProcess, S3Endpoint, create_topic
from tests.spark.sparklib import (
    TS0,
    Row,
    fill_log,
    local_spark,
    open_log,
    put_topic,
    rows_of_table,
    tier_log,
    upload_segment_files,
)
from tiering.manifest_store import ManifestStore
from tiering.store import open_store

TOPIC = "clicks"
PARTITIONS = 3
KAFKA_SCHEMA = (
    "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
    "timestampType:int,headers:array<struct<key:string,value:binary>>>"
)
COLUMNS = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "unix_micros(timestamp) AS ts",
    "timestampType",
    "headers",
)


@pytest.fixture(scope="module")
def spark(s3_endpoint: S3Endpoint) -> Iterator[SparkSession]:
    # The AWS chain variables reach the JVM and its Python workers through the environment.
    conf = {"spark_sql_shuffle_partitions": "2", "spark_sql_session_timeZone": "UTC"}
    with local_spark("strata-tests", s3_endpoint.env, **conf) as session:
        yield session


class Archive:
    def __init__(self, url: str, rows: list[Row], segments: dict[int, list[Any]]) -> None:
        self.url = url
        self.rows = rows
        self.segments = segments


def _archive(tmp: Path, url: str) -> Archive:
    topic_id = uuid.uuid4()
    rows: list[Row] = []
    segments: dict[int, list[Any]] = {}

    async def go() -> None:
        store = open_store(url)
        try:
            for p in range(PARTITIONS):
                log = open_log(tmp / f"{TOPIC}-{p}", TOPIC, p, segment_bytes=16384)
                written = fill_log(log, TOPIC, p, 60 + 10 * p, 10, value_size=70)
                segs = await tier_log(store, log, TOPIC, topic_id, p)
                segments[p] = segs
                rows.extend(r for r in written if r.offset <= segs[-1].last_offset)
                log.close()
            await put_topic(store, TOPIC, topic_id, PARTITIONS)
        finally:
            await store.close()

    asyncio.run(go())
    return Archive(url, rows, segments)


@pytest.fixture(scope="module")
def file_archive(tmp_path_factory: pytest.TempPathFactory) -> Archive:
    tmp = tmp_path_factory.mktemp("spark-file")
    return _archive(tmp, f"file://{tmp / 'bucket'}")


@pytest.fixture(scope="module")
def s3_archive(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: S3Endpoint) -> Iterator[Archive]:
    tmp = tmp_path_factory.mktemp("spark-s3")
    bucket = s3_endpoint.create_bucket(f"spark-src-{uuid.uuid4().hex[:8]}")
    saved = {k: os.environ.get(k) for k in s3_endpoint.env}
    os.environ.update(s3_endpoint.env)
    try:
        yield _archive(tmp, f"s3://{bucket}/tiered")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def read(spark: SparkSession, url: str, topic: str = TOPIC, **options: str) -> DataFrame:
    r = spark.read.format("strata").option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(url)


def rows_of(df: DataFrame) -> list[Row]:
    out = []
    for r in df.selectExpr(*COLUMNS).collect():
        us = r["ts"]
        assert us % 1000 == 0
        hs = r["headers"]
        out.append(
            Row(
                r["topic"],
                r["partition"],
                r["offset"],
                us // 1000,
                r["timestampType"],
                None if r["key"] is None else bytes(r["key"]),
                None if r["value"] is None else bytes(r["value"]),
                None
                if hs is None
                else tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in hs),
            )
        )
    return out


def key(r: Row) -> tuple[str, int, int]:
    return (r.topic, r.partition, r.offset)


def test_schema_is_sparks_kafka_schema(spark: SparkSession, file_archive: Archive) -> None:
    assert read(spark, file_archive.url).schema.simpleString() == KAFKA_SCHEMA


@pytest.mark.parametrize("where", ["file", "s3"])
def test_reads_exactly_the_archived_rows(
    spark: SparkSession, where: str, request: pytest.FixtureRequest
) -> None:
    archive: Archive = request.getfixturevalue(f"{where}_archive")
    got = rows_of(read(spark, archive.url))  # S3: endpoint and credentials from the AWS chain
    assert len(got) == len(archive.rows) == len({key(r) for r in got})
    assert sorted(got, key=key) == sorted(archive.rows, key=key)
    codecs_seen = (
        {r.value is None for r in got} | {r.key is None for r in got} | {r.headers is None for r in got}
    )
    assert codecs_seen == {True, False}


def test_offset_and_timestamp_ranges(spark: SparkSession, file_archive: Archive) -> None:
    starting = f'{{"{TOPIC}":{{"0":37,"1":-2,"2":250}}}}'
    ending = f'{{"{TOPIC}":{{"0":401,"1":-1,"2":260}}}}'
    got = rows_of(read(spark, file_archive.url, startingOffsets=starting, endingOffsets=ending))
    bounds = {0: (37, 401), 1: (0, 1 << 62), 2: (250, 260)}
    expected = [r for r in file_archive.rows if bounds[r.partition][0] <= r.offset < bounds[r.partition][1]]
    assert sorted(got, key=key) == sorted(expected, key=key)

    lo, hi = TS0 + 1000 * 150 + 2, TS0 + 1000 * 333  # offset 150: TS0 + 150000; 151: TS0 + 151001
    got = rows_of(
        read(spark, file_archive.url, startingTimestamp=str(lo), endingTimestamp=str(hi), partitions="0,2")
    )
    expected = []
    for p in (0, 2):
        part = sorted((r for r in file_archive.rows if r.partition == p), key=lambda r: r.offset)
        first = next(r.offset for r in part if r.timestamp >= lo)
        end = next(r.offset for r in part if r.timestamp >= hi)
        assert (first, end) == (151, 333)
        expected += [r for r in part if first <= r.offset < end]
    assert sorted(got, key=key) == sorted(expected, key=key)
    assert read(spark, file_archive.url, startingTimestamp=str(TS0 + 10**12)).count() == 0


def test_corrupt_object_fails_with_key_and_offset(
    spark: SparkSession, file_archive: Archive, tmp_path: Path
) -> None:
    src = Path(file_archive.url.removeprefix("file://"))
    shutil.copytree(src, tmp_path / "bucket")
    seg = file_archive.segments[2][1]
    path = tmp_path / "bucket" / seg.keys.log
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(Exception) as info:
        read(spark, f"file://{tmp_path / 'bucket'}", partitions="2").count()
    msg = str(info.value)
    assert seg.keys.log in msg and "offset" in msg and "CorruptLogError" in msg


def test_missing_topic_fails_clearly(spark: SparkSession, file_archive: Archive) -> None:
    with pytest.raises(Exception, match=r"topics/nosuch\.json"):
        read(spark, file_archive.url, topic="nosuch").count()


# --- includeHot: cold segments from the bucket, the tail from a real broker ----------------------

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _produce(
    bootstrap: str, topic: str, partitions: int, per_codec: int
) -> dict[tuple[int, int], tuple[Any, ...]]:
    """Records through confluent-kafka (one producer per codec); returns what the broker acked."""
    from confluent_kafka import Producer

    acked: dict[tuple[int, int], tuple[Any, ...]] = {}
    n = 0
    for codec in CODECS:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 2, "batch.size": 4096}
        )
        for i in range(per_codec):
            p = n % partitions
            k = None if n % 9 == 4 else b"key-%d" % n
            v = None if n % 13 == 6 else (b"%s-%d-" % (codec.encode(), n)) * 5
            hs = [("n", b"%d" % n), ("nil", None)] if n % 4 == 0 else None
            ts = TS0 + 10 * n

            def ack(err: Any, msg: Any, k: Any = k, v: Any = v, hs: Any = hs, ts: int = ts) -> None:
                assert err is None, err
                acked[(msg.partition(), msg.offset())] = (k, v, tuple(hs) if hs else None, ts)

            producer.produce(topic, value=v, key=k, partition=p, headers=hs, timestamp=ts, on_delivery=ack)
            n += 1
            if i % 100 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
    return acked


def test_include_hot_reads_cold_and_hot_exactly_once(
    spark: SparkSession, broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = broker_factory()
    topic = "mixed"
    # tiny segments: several sealed ones per partition however the producer batches
    create_topic(broker.bootstrap, topic, 2, {"segment.bytes": "2048", "retention.ms": "-1"})
    acked = _produce(broker.bootstrap, topic, 2, per_codec=300)
    url = f"file://{tmp_path / 'bucket'}"
    topic_id = uuid.uuid4()
    tiered: dict[int, int] = {}

    async def tier() -> None:
        store = open_store(url)
        try:
            ms = ManifestStore(store)
            for p in range(2):
                d = broker.data_dir / "logs" / f"{topic}-{p}"
                logs = sorted(d.glob("*.log"))
                assert len(logs) >= 4, "the topic needs several sealed segments"
                for log in logs[: len(logs) // 2]:  # the older half is archived, the rest stays hot
                    seg = await upload_segment_files(store, ms, str(log), topic, topic_id, p)
                    tiered[p] = seg.last_offset + 1
            await put_topic(store, topic, topic_id, 2)
        finally:
            await store.close()

    asyncio.run(tier())
    plan = plan_scan(
        ReadOptions.parse({"topic": topic, "includeHot": "true", "broker": broker.bootstrap}, path=url)
    )
    assert {type(t) for t in plan.tasks} == {ColdTask, HotTask}
    assert all(r.high_watermark == 1 + max(o for (p, o) in acked if p == r.partition) for r in plan.ranges)

    cold_only = rows_of(read(spark, url, topic=topic))
    assert {(r.partition, r.offset) for r in cold_only} == {k for k in acked if k[1] < tiered[k[0]]}

    got = rows_of(read(spark, url, topic=topic, includeHot="true", broker=broker.bootstrap))
    assert len(got) == len({(r.partition, r.offset) for r in got}) == len(acked)
    for r in got:
        k, v, hs, ts = acked[(r.partition, r.offset)]
        assert (r.key, r.value, r.headers, r.timestamp, r.topic) == (k, v, hs, ts, topic)


# --- includeHot: a DataFrame's plan outlives the broker's tiering and retention -------------------
#
# Spark plans a DataFrame (partitions()) on its first action and every later action reuses that
# plan, so these tests plan with a first action, let the broker tier or delete records, and read
# again with the same DataFrame.


def _alter(bootstrap: str, topic: str, **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)


def _wait(cond: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    """Poll for the broker's background work (bounded; not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _log_starts(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's log start offset (low watermark), asked with confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{uuid.uuid4().hex[:8]}"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[0] for p in range(partitions)
        }
    finally:
        c.close()


def _local_start(broker: BrokerProcess, topic: str, p: int) -> int:
    """Base offset of the broker's oldest local segment (its local log start)."""
    return min(int(f.stem) for f in (broker.data_dir / "logs" / f"{topic}-{p}").glob("*.log"))


def _archived_ends(url: str, topic: str, partitions: int) -> dict[int, int]:
    async def go() -> dict[int, int]:
        store = open_store(url)
        try:
            ms = ManifestStore(store)
            doc = await ms.load_topic_manifest(topic)
            if doc is None:
                return dict.fromkeys(range(partitions), 0)
            out = {}
            for p in range(partitions):
                m, _ = await ms.load(topic, uuid.UUID(doc["topic_id"]), p)
                out[p] = 0 if m is None else m.next_offset()
            return out
        finally:
            await store.close()

    return asyncio.run(go())


def _check_rows(got: list[Row], acked: dict[tuple[int, int], tuple[Any, ...]], topic: str) -> None:
    assert len(got) == len({(r.partition, r.offset) for r in got}), "each offset at most once"
    for r in got:
        k, v, hs, ts = acked[(r.partition, r.offset)]
        assert (r.key, r.value, r.headers, r.timestamp, r.topic) == (k, v, hs, ts, topic)


def test_include_hot_tail_moved_to_the_bucket_after_planning_is_read_exactly_once(
    spark: SparkSession, broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    broker = broker_factory("--object-store", url, env={"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100"})
    topic = "moving"
    # retention.ms=-1: the records' timestamps (2023) are older than the default 7 days
    configs = {"segment.bytes": "2048", "remote.storage.enable": "false", "retention.ms": "-1"}
    create_topic(broker.bootstrap, topic, 2, configs)
    acked = _produce(broker.bootstrap, topic, 2, per_codec=120)
    df = read(spark, url, topic=topic, includeHot="true", broker=broker.bootstrap)
    first = rows_of(df)  # plans: nothing is archived, the whole range is a hot tail
    assert len(first) == len(acked)
    _check_rows(first, acked, topic)

    # The broker uploads the sealed segments and deletes them locally (local.retention.bytes).
    _alter(broker.bootstrap, topic, remote_storage_enable="true", local_retention_bytes="2048")
    _wait(
        lambda: all(_local_start(broker, topic, p) > 0 for p in range(2)),
        "the oldest segments of every partition to leave the broker's disk",
    )
    archived = _archived_ends(url, topic, 2)
    assert all(archived[p] >= _local_start(broker, topic, p) > 0 for p in range(2))
    again = rows_of(df)  # the same plan: its hot tasks now read offsets that live in the bucket
    assert sorted(again, key=key) == sorted(first, key=key)


def test_include_hot_records_deleted_by_retention_after_planning_fail_or_are_skipped(
    spark: SparkSession,
    broker_factory: Callable[..., BrokerProcess],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    env = {"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100", "STRATA_TIERING_RETENTION_CHECK_INTERVAL_MS": "200"}
    broker = broker_factory("--object-store", url, env=env)
    topic = "expiring"
    create_topic(broker.bootstrap, topic, 2, {"segment.bytes": "2048", "retention.ms": "-1"})
    acked = _produce(broker.bootstrap, topic, 2, per_codec=60)
    _wait(lambda: all(e > 0 for e in _archived_ends(url, topic, 2).values()), "the first uploads")
    # Uploads stop: what is produced now stays a hot tail (of several segments).
    _alter(broker.bootstrap, topic, remote_storage_enable="false")
    acked.update(_produce(broker.bootstrap, topic, 2, per_codec=120))
    options = {"includeHot": "true", "broker": broker.bootstrap}
    strict = read(spark, url, topic=topic, **options)
    lenient = read(spark, url, topic=topic, failOnDataLoss="false", **options)
    for df in (strict, lenient):  # plans both, over cold segments and a hot tail
        got = rows_of(df)
        assert len(got) == len(acked)
        _check_rows(got, acked, topic)
    plan = plan_scan(ReadOptions.parse({"topic": topic, **options}, path=url))
    assert {type(t) for t in plan.tasks} == {ColdTask, HotTask}
    archived = {r.partition: r.archived_end for r in plan.ranges}
    high = {r.partition: r.end for r in plan.ranges}

    # Total retention now deletes the oldest records, archived or not, past the planned hot start.
    _alter(broker.bootstrap, topic, remote_storage_enable="true", retention_bytes="4096")
    _wait(
        lambda: all(s > archived[p] for p, s in _log_starts(broker.bootstrap, topic, 2).items()),
        "retention to delete records of the planned hot tail",
    )
    # Retention advances the manifest's (and then the broker's) log start before it deletes
    # the segments' objects: until they are gone a cold task of the plan still reads them.
    bucket = tmp_path / "bucket"
    planned = [sl.key for t in plan.tasks if isinstance(t, ColdTask) for sl in t.slices]
    _wait(lambda: not any((bucket / k).exists() for k in planned), "retention to delete the planned objects")
    starts = _log_starts(broker.bootstrap, topic, 2)
    with pytest.raises(Exception) as info:
        strict.count()
    msg = str(info.value)
    assert "OffsetOutOfRangeError" in msg and "failOnDataLoss=false" in msg and topic in msg

    def check_suffix(got: list[Row]) -> None:
        _check_rows(got, acked, topic)
        for p in range(2):
            offsets = sorted(r.offset for r in got if r.partition == p)
            assert offsets == list(range(offsets[0], high[p])), "a gapless suffix of the planned range"
            assert offsets[0] >= starts[p] > archived[p]

    check_suffix(rows_of(lenient))  # skips what is gone, reads the rest of the plan exactly once

    # Both ways of losing planned records, task by task with the same plan: a cold task's
    # segment objects deleted, and a hot task's offsets refused by the broker.
    opts = ReadOptions.parse({"topic": topic, **options}, path=url)
    for task in plan.tasks:
        with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss=false"):
            list(read_task(task, opts))
    lenient_opts = ReadOptions.parse({"topic": topic, "failOnDataLoss": "false", **options}, path=url)
    with caplog.at_level(logging.WARNING, logger="spark.scan"):
        check_suffix([r for t in plan.tasks for b in read_task(t, lenient_opts) for r in rows_of_table(b)])
    assert any("deleted by retention (the log now starts at" in m for m in caplog.messages)
    assert any(f"deleted by retention (broker {broker.bootstrap} now starts at" in m for m in caplog.messages)


# --- a fresh broker: the bucket is behind until a roll; the source says so ---------------------


def test_fresh_broker_read_warns_until_tier_sync(
    spark: SparkSession,
    broker_factory: Callable[..., BrokerProcess],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The README's read on a fresh single node: the records sit in the active segment, the
    bucket holds none of them, and the read warns per topic (how many, with a broker
    address) instead of returning nothing silently; after `strata tier sync` it reads them."""
    import subprocess
    import sys

    from confluent_kafka import Producer

    from spark.source import StrataDataSourceReader
    from tests.brokers import ROOT

    broker = broker_factory(env={"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100"})
    topic = "fresh"
    create_topic(broker.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
    for i in range(30):
        p.produce(topic, value=b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    bucket = broker.data_dir / "objects"
    _wait(lambda: (bucket / "topics" / f"{topic}.json").exists(), "the topic manifest")
    url = f"file://{bucket.resolve()}"

    def warnings_of(**options: str) -> list[str]:
        """What the batch reader's planning (a Python worker's work under Spark, which relays
        the worker's stderr to the driver's) warns, planned here."""
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="spark.source"):
            StrataDataSourceReader(ReadOptions.parse({"topic": topic, **options}, path=url)).partitions()
        return [r.getMessage() for r in caplog.records if r.name == "spark.source"]

    assert read(spark, url, topic=topic).count() == 0
    [line] = warnings_of()
    assert line.startswith(f"topic {topic}: the bucket holds none of the records read")
    assert 'option("kafka.bootstrap.servers", "HOST:PORT") reads them' in line
    assert read(spark, url, topic=topic, includeHot="false", broker=broker.bootstrap).count() == 0
    [line] = warnings_of(includeHot="false", broker=broker.bootstrap)
    behind = f"topic {topic}: the bucket is behind broker {broker.bootstrap} by 30 record(s) in 2"
    assert line.startswith(behind)
    # the option the README shows reads the tail through the broker
    assert read(spark, url, topic=topic, **{"kafka.bootstrap.servers": broker.bootstrap}).count() == 30

    sync = subprocess.run(
        [sys.executable, "-m", "api.cli", "tier", "sync", topic, "--http", broker.http_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sync.returncode == 0, sync.stderr
    assert sorted(r.offset for r in rows_of(read(spark, url, topic=topic))) == sorted(list(range(15)) * 2)
    assert warnings_of() == []
    assert broker.stop() == 0


def test_workers_that_cannot_import_the_source_fail_in_one_line(spark: SparkSession, tmp_path: Path) -> None:
    """PYSPARK_PYTHON naming an interpreter without the project (no venv): registering the
    source says so and what to set, before any worker's ImportError in a py4j traceback."""
    import sys

    from hot.errors import InvalidConfigError
    from spark.source import StrataDataSource

    bare = tmp_path / "python-without-strata"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    bare.chmod(0o755)
    sc = spark.sparkContext
    saved = sc.pythonExec
    sc.pythonExec = str(bare)
    try:
        with pytest.raises(InvalidConfigError) as exc:
            spark.dataSource.register(StrataDataSource)
    finally:
        sc.pythonExec = saved
    msg = str(exc.value)
    assert "\n" not in msg and f"run {bare} (PYSPARK_PYTHON), which cannot import" in msg
    assert f"set PYSPARK_PYTHON={sys.executable}" in msg and "ModuleNotFoundError" in msg
    spark.dataSource.register(StrataDataSource)  # this interpreter: fine
