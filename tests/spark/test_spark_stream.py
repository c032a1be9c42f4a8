"""``spark.readStream.format("strata")`` (spark.stream) in a real local Spark (local[2]) over
file:// buckets and a real broker; plus the pure parts (offset JSON, rate limiting,
trigger pacing, option validation) without Spark.

One SparkSession serves the module. Streams collect rows with foreachBatch keyed by batch
id (a replayed batch overwrites its own entry: an idempotent sink), so "exactly once" is
checked on what the committed batches hold.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from hot.errors import InvalidConfigError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from spark.options import ReadOptions
from spark.stream import StrataStreamReader, TriggerPacer, from_json, rate_limit, to_json
from tests.brokers import BrokerProcess, create_topic
from tests.spark.sparklib import fill_log, local_spark, open_log, put_topic, upload_segment_files
from tiering.manifest_store import ManifestStore
from tiering.store import open_store

# --- pure parts -----------------------------------------------------------------------------------


def test_offset_json_rate_limit_and_pacing() -> None:
    offsets = {("b", 1): 7, ("a", 10): 3, ("a", 2): 0}
    doc = to_json(offsets)
    assert doc == {"a": {"2": 0, "10": 3}, "b": {"1": 7}}
    assert from_json(doc) == offsets
    for bad in ({"a": {"x": 1}}, {"a": {"0": -1}}, {"a": [1]}, {"a": {"0": True}}):
        with pytest.raises(InvalidConfigError, match="strata: offset"):
            from_json(bad)

    # Spark's KafkaMicroBatchStream.rateLimit: shares in proportion to the backlog, floored,
    # ceiled below 1; a partition new to the stream counts from its start; never past the end.
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    until = {("t", 0): 900, ("t", 1): 190, ("t", 2): 51}
    assert rate_limit(100, start, until) == {("t", 0): 90, ("t", 1): 109, ("t", 2): 51}
    assert rate_limit(10_000, start, until) == until
    assert rate_limit(5, {("t", 0): 4}, {("t", 0): 4}) == {("t", 0): 4}

    now = [1000.0]
    pacer = TriggerPacer(max_delay_ms=60_000, clock=lambda: now[0])
    assert not pacer.delay(backlog=1, minimum=100)  # the first trigger always runs
    now[0] += 10
    assert pacer.delay(backlog=99, minimum=100)
    assert not pacer.delay(backlog=100, minimum=100)
    now[0] += 59
    assert pacer.delay(backlog=1, minimum=100)
    now[0] += 1
    assert not pacer.delay(backlog=1, minimum=100)  # maxTriggerDelay passed


def test_option_validation() -> None:
    url = "file:///nowhere"

    def err(opts: dict[str, str], streaming: bool = False) -> str:
        with pytest.raises(InvalidConfigError) as info:
            ReadOptions.parse(opts, path=url, streaming=streaming)
        return str(info.value)

    assert "'startingOffset'; did you mean 'startingOffsets'" in err({"topic": "t", "startingOffset": "x"})
    assert "did you mean 'maxOffsetsPerTrigger'" in err({"topic": "t", "maxOffsetPerTriger": "5"}, True)
    assert "did you mean 'kafka.sasl.username'" in err({"topic": "t", "kafka.sasl.usernme": "u"})
    assert "One of the following options must be specified" in err({})
    assert "Only one of the following options" in err({"subscribe": "a", "subscribePattern": "a.*"})
    assert "Only one of the following options" in err({"topic": "a", "subscribe": "a"})
    assert "No topicpartitions to assign" in err({"assign": "t"})
    assert "No topics to subscribe to" in err({"subscribe": " , "})
    assert "Pattern to subscribe is empty" in err({"subscribePattern": " "})
    assert "not a valid regex" in err({"subscribePattern": "a("})
    assert "'auto.offset.reset' is not supported" in err({"topic": "t", "kafka.auto.offset.reset": "x"})
    assert "ending offset not valid in streaming queries" in err(
        {"topic": "t", "endingOffsets": "latest"}, True
    )
    assert "higher than the maxOffsetsPerTrigger" in err(
        {"topic": "t", "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "6"}, True
    )
    assert "can't be latest for batch" in err({"topic": "t", "startingOffsets": "latest"})
    assert "includeHeaders" in err({"topic": "t", "includeHeaders": "false"})

    # harmless Spark Kafka options are accepted; broker given: includeHot by default
    ok = ReadOptions.parse(
        {"subscribe": "t", "kafka.group.id": "g", "fetchOffset.numRetries": "3", "includeHeaders": "true"},
        path=url,
    )
    assert ok.topics == ("t",) and not ok.include_hot
    hot = ReadOptions.parse({"subscribe": "t", "kafka.bootstrap.servers": "h:1"}, path=url, streaming=True)
    assert hot.include_hot and hot.broker == "h:1" and hot.start.default == -1  # streams: latest
    cold = ReadOptions.parse({"subscribe": "t", "broker": "h:1", "includeHot": "false"}, path=url)
    assert not cold.include_hot
    a = ReadOptions.parse({"assign": '{"x":[0,2],"y":[1]}'}, path=url)
    assert (
        a.partitions_of("x") == frozenset({0, 2})
        and a.partitions_of("y") == frozenset({1})
        and a.topics == ("x", "y")
    )
    p = ReadOptions.parse(
        {"subscribePattern": "ev.+", "maxOffsetsPerTrigger": "9", "maxTriggerDelay": "30s"},
        path=url,
        streaming=True,
    )
    assert p.selects("events") and not p.selects("xevents") and not p.selects("ev")
    assert (p.stream.max_offsets, p.stream.max_trigger_delay_ms) == (9, 30_000)
    reader = StrataStreamReader(p)
    assert reader.getDefaultReadLimit() == ReadMaxRows(9)
    assert reader._limits(ReadAllAvailable()) == (None, None)
    assert reader._limits(ReadMinRows(3)) == (9, 3)


# --- archives in file:// buckets ------------------------------------------------------------------


def _archive(
    tmp: Path, url: str, topic: str, partitions: int, batches: int, *, log_start: int | None = None
) -> dict[int, int]:
    """Append ``batches`` batches of 10 records to each partition's log (created on first
    use under ``tmp``) and tier every sealed segment not archived yet; with ``log_start``,
    retention then deletes the archive below it (the manifest's log start). Returns the
    archived end per partition."""
    ends: dict[int, int] = {}

    async def go() -> None:
        store = open_store(url)
        try:
            ms = ManifestStore(store)
            doc = await ms.load_topic_manifest(topic)
            topic_id = uuid.UUID(doc["topic_id"]) if doc else uuid.uuid4()
            for p in range(partitions):
                log = open_log(tmp / f"{topic}-{p}", topic, p, segment_bytes=4096)
                fill_log(log, topic, p, batches, 10, value_size=60)
                log.roll()
                m = (await ms.load(topic, topic_id, p))[0]
                have = 0 if m is None else m.next_offset()
                for seg in log.segments()[:-1]:
                    if seg.base_offset >= have:
                        await upload_segment_files(store, ms, seg.log_path, topic, topic_id, p)
                if log_start is not None:
                    await ms.update(topic, topic_id, p, lambda m: m.advance_log_start(log_start))
                ends[p] = log.log_end_offset
                log.close()
            await put_topic(store, topic, topic_id, partitions)
        finally:
            await store.close()

    asyncio.run(go())
    return ends


def _segment_bases(url: str, topic: str, partition: int) -> list[int]:
    async def go() -> list[int]:
        store = open_store(url)
        try:
            ms = ManifestStore(store)
            doc = await ms.load_topic_manifest(topic)
            assert doc is not None
            m = (await ms.load(topic, uuid.UUID(doc["topic_id"]), partition))[0]
            assert m is not None
            return [s.base_offset for s in m.copied()]
        finally:
            await store.close()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    conf = {"spark_sql_shuffle_partitions": "2", "spark_sql_session_timeZone": "UTC"}
    with local_spark("strata-stream-tests", **conf) as session:
        yield session


class Collector:
    """A foreachBatch sink: rows (topic, partition, offset, value) per batch id."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[str, int, int, bytes | None]]] = {}

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = df.select("topic", "partition", "offset", "value").collect()
        self.batches[batch_id] = [
            (r["topic"], r["partition"], r["offset"], None if r["value"] is None else bytes(r["value"]))
            for r in rows
        ]

    def offsets(self) -> list[tuple[str, int, int]]:
        return [(t, p, o) for b in sorted(self.batches) for t, p, o, _ in self.batches[b]]

    def check_in_order(self) -> None:
        """Each partition's offsets grow from batch to batch (rows within one batch come
        from several tasks, so their order there is Spark's)."""
        last: dict[tuple[str, int], int] = {}
        for b in sorted(self.batches):
            seen: dict[tuple[str, int], list[int]] = {}
            for t, p, o, _ in self.batches[b]:
                seen.setdefault((t, p), []).append(o)
            for tp, offs in seen.items():
                assert min(offs) > last.get(tp, -1), f"batch {b} goes back in {tp}"
                last[tp] = max(offs)


def stream(spark: SparkSession, url: str, **options: str) -> DataFrame:
    r = spark.readStream.format("strata")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(url)


def run(df: DataFrame, sink: Collector, checkpoint: Path, trigger: dict[str, Any]) -> None:
    q = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )
    try:
        q.awaitTermination(180)
        assert not q.isActive, "the availableNow query did not finish"
    finally:
        q.stop()
    if q.exception() is not None:
        raise q.exception()  # type: ignore[misc]


def every_200ms(df: DataFrame, sink: Collector, checkpoint: Path) -> StreamingQuery:
    """The query running with a processing-time trigger (the caller stops it)."""
    return (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def test_max_offsets_per_trigger_bounds_each_batch(spark: SparkSession, tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    ends = _archive(tmp_path, url, "limited", 2, 40)
    sink = Collector()
    df = stream(spark, url, subscribe="limited", startingOffsets="earliest", maxOffsetsPerTrigger="150")
    run(df, sink, tmp_path / "ck", {"availableNow": True})
    assert sorted(sink.offsets()) == sorted(("limited", p, o) for p in ends for o in range(ends[p]))
    sizes = [len(rows) for rows in sink.batches.values()]
    assert max(sizes) <= 150 + 1 and len(sizes) >= sum(ends.values()) // 151
    sink.check_in_order()

    # Trigger.Once (deprecated in Spark 4, still supported): one batch of everything new,
    # the read limit ignored as Spark's Kafka source ignores it under ReadAllAvailable.
    before = set(sink.batches)
    more = _archive(tmp_path, url, "limited", 2, 40)
    run(df, sink, tmp_path / "ck", {"once": True})
    new = [b for b in sink.batches if b not in before]
    assert len(new) == 1 and len(sink.batches[new[0]]) == sum(more.values()) - sum(ends.values()) > 151
    assert sorted(sink.offsets()) == sorted(("limited", p, o) for p in more for o in range(more[p]))
    sink.check_in_order()


def test_misspelled_option_fails_naming_the_valid_one(spark: SparkSession, tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    with pytest.raises(Exception, match="did you mean 'startingOffsets'"):
        q = stream(spark, url, subscribe="t", startingOffset="earliest").writeStream.format("noop").start()
        q.awaitTermination(60)
        if q.exception() is not None:
            raise q.exception()  # type: ignore[misc]
    with pytest.raises(Exception, match="did you mean 'startingOffsets'"):
        spark.read.format("strata").option("subscribe", "t").option("startingoffset", "x").load(url).count()


def _all(topic: str, ends: dict[int, int], start: int = 0) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, end in ends.items() for o in range(start, end))


def test_subscribe_pattern_picks_up_a_new_topic_and_assign_reads_only_its_partitions(
    spark: SparkSession, tmp_path: Path
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    a = _archive(tmp_path, url, "pat-a", 2, 6)
    _archive(tmp_path, url, "other", 1, 3)
    sink = Collector()
    df = stream(spark, url, subscribePattern="pat-.*", startingOffsets="earliest")
    q = every_200ms(df, sink, tmp_path / "ck")
    try:
        q.processAllAvailable()
        assert sorted(sink.offsets()) == _all("pat-a", a)
        b = _archive(tmp_path, url, "pat-b", 3, 4)  # a topic created while the query runs
        a = _archive(tmp_path, url, "pat-a", 2, 6)
        q.processAllAvailable()
    finally:
        q.stop()
    assert q.exception() is None
    assert sorted(sink.offsets()) == sorted(_all("pat-a", a) + _all("pat-b", b))
    sink.check_in_order()

    assigned = Collector()
    df = stream(spark, url, assign='{"pat-a":[1],"pat-b":[0,2]}', startingOffsets="earliest")
    run(df, assigned, tmp_path / "ck-assign", {"availableNow": True})
    want = [
        r
        for r in _all("pat-a", a) + _all("pat-b", b)
        if (r[0], r[1]) in {("pat-a", 1), ("pat-b", 0), ("pat-b", 2)}
    ]
    assert sorted(assigned.offsets()) == sorted(want)

    # batch reads take the same options
    def batch(**options: str) -> list[tuple[str, int, int]]:
        df = spark.read.format("strata").options(**options).load(url)
        return sorted(
            (r["topic"], r["partition"], r["offset"])
            for r in df.select("topic", "partition", "offset").collect()
        )

    assert batch(assign='{"pat-a":[1],"pat-b":[0,2]}') == sorted(want)
    assert batch(subscribePattern="pat-.*") == sorted(_all("pat-a", a) + _all("pat-b", b))


def test_assign_of_a_partition_not_created_yet_warns_and_reads_it_once_it_appears(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark's Kafka source reads an assignment's existing partitions (AssignStrategy keeps
    those the topic has) and adds the others as new partitions when they appear; an assigned
    topic that does not exist fails. Here never silently: a warning names the partitions."""
    url = f"file://{tmp_path / 'bucket'}"
    ends = _archive(tmp_path, url, "few", 1, 4)
    opts = {"assign": '{"few":[0,1]}', "startingOffsets": "earliest"}
    reader = StrataStreamReader(ReadOptions.parse(opts, path=url, streaming=True))
    with caplog.at_level(logging.WARNING, logger="spark.stream"):
        start = reader.initialOffset()
    assert start == {"few": {"0": 0}}
    assert "assigned partitions few-1 do not exist (yet)" in caplog.text
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"few": {"0": ends[0]}}

    ends = _archive(tmp_path, url, "few", 2, 4)  # partition 1 is created
    later = reader.latestOffset(end, ReadAllAvailable())
    assert later == {"few": {"0": ends[0], "1": ends[1]}}
    tasks = [p.task for p in reader.partitions(end, later)]  # type: ignore[attr-defined]
    assert {(t.partition, t.slices[0].start_offset) for t in tasks} == {(0, end["few"]["0"]), (1, 0)}

    with pytest.raises(UnknownTopicOrPartitionError, match="topic 'nope' has no topic manifest"):
        StrataStreamReader(
            ReadOptions.parse({"assign": '{"nope":[0]}'}, path=url, streaming=True)
        ).initialOffset()
    with pytest.raises(UnknownTopicOrPartitionError, match="starting offsets name few-2"):
        bad = {"assign": '{"few":[2]}', "startingOffsets": '{"few":{"2":0}}'}
        StrataStreamReader(ReadOptions.parse(bad, path=url, streaming=True)).initialOffset()


def test_fail_on_data_loss_after_retention_fails_or_skips(spark: SparkSession, tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    first = _archive(tmp_path, url, "lossy", 1, 30)
    sink = Collector()
    run(
        stream(spark, url, subscribe="lossy", startingOffsets="earliest"),
        sink,
        tmp_path / "ck",
        {"availableNow": True},
    )
    assert sorted(sink.offsets()) == _all("lossy", first)
    shutil.copytree(tmp_path / "ck", tmp_path / "ck-lenient")

    # More records arrive; retention then deletes the archive up to a segment past the
    # stream's next offset.
    _archive(tmp_path, url, "lossy", 1, 30)
    gone = next(b for b in _segment_bases(url, "lossy", 0) if b > first[0] + 10)
    ends = _archive(tmp_path, url, "lossy", 1, 5, log_start=gone)
    with pytest.raises(Exception) as info:
        run(stream(spark, url, subscribe="lossy"), Collector(), tmp_path / "ck", {"availableNow": True})
    msg = str(info.value)
    assert f"lossy-0: offsets {first[0]} to {gone - 1} are not available any more" in msg
    assert '"failOnDataLoss" to "false"' in msg

    lenient = Collector()
    df = stream(spark, url, subscribe="lossy", failOnDataLoss="false")
    run(df, lenient, tmp_path / "ck-lenient", {"availableNow": True})
    assert sorted(lenient.offsets()) == _all("lossy", ends, start=gone)


# --- archive + hot tail through a real broker -----------------------------------------------------


def _produce(
    bootstrap: str, topic: str, partitions: int, count: int, acked: dict[tuple[int, int], bytes]
) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4"})
    base = len(acked)

    def ack(err: Any, msg: Any) -> None:
        assert err is None, err
        acked[(msg.partition(), msg.offset())] = msg.value()

    for i in range(count):
        producer.produce(topic, value=b"v-%d-" % (base + i) * 4, partition=i % partitions, on_delivery=ack)
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _local_start(broker: BrokerProcess, topic: str, p: int) -> int:
    return min(int(f.stem) for f in (broker.data_dir / "logs" / f"{topic}-{p}").glob("*.log"))


def test_stream_over_archive_and_hot_tail_exactly_once_across_restarts(
    spark: SparkSession, broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    broker = broker_factory("--object-store", url, env={"STRATA_TIERING_UPLOAD_INTERVAL_MS": "100"})
    topic = "flow"
    configs = {"segment.bytes": "2048", "retention.ms": "-1", "local.retention.bytes": "4096"}
    create_topic(broker.bootstrap, topic, 2, configs)
    acked: dict[tuple[int, int], bytes] = {}
    _produce(broker.bootstrap, topic, 2, 1500, acked)
    sink = Collector()
    ck = tmp_path / "ck"
    options = {"subscribe": topic, "kafka.bootstrap.servers": broker.bootstrap}

    # availableNow in small batches while the broker uploads and deletes segments locally
    df = stream(spark, url, startingOffsets="earliest", maxOffsetsPerTrigger="300", **options)
    run(df, sink, ck, {"availableNow": True})
    assert sorted(sink.offsets()) == sorted((topic, p, o) for p, o in acked)
    assert len(sink.batches) >= 5

    # processing-time triggers, records produced while the query runs
    q = stream(spark, url, **options).writeStream.foreachBatch(sink).option("checkpointLocation", str(ck))
    running = q.trigger(processingTime="300 milliseconds").start()
    try:
        _produce(broker.bootstrap, topic, 2, 1500, acked)
        running.processAllAvailable()
    finally:
        running.stop()
    assert running.exception() is None

    # the query restarts from its checkpoint after more records arrived
    _produce(broker.bootstrap, topic, 2, 1000, acked)
    run(stream(spark, url, **options), sink, ck, {"availableNow": True})

    got = [(p, o, v) for b in sorted(sink.batches) for _, p, o, v in sink.batches[b]]
    assert len(got) == len({(p, o) for p, o, _ in got}) == len(acked), "every record exactly once"
    assert all(acked[(p, o)] == v for p, o, v in got)
    sink.check_in_order()
    deadline = time.monotonic() + 60  # the uploader's background work, bounded
    while not all(_local_start(broker, topic, p) > 0 for p in range(2)):
        assert time.monotonic() < deadline, "older records never left the broker for the bucket"
        time.sleep(0.2)


def test_subscribe_pattern_finds_a_new_topic_through_the_brokers_metadata(
    spark: SparkSession, broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    """A topic created on the broker while the query runs, nothing of it tiered (the bucket
    is empty): the pattern's topics come from the broker's Metadata too."""
    url = f"file://{tmp_path / 'bucket'}"
    (tmp_path / "bucket").mkdir()
    broker = broker_factory()
    create_topic(broker.bootstrap, "hp-old", 1)
    old: dict[tuple[int, int], bytes] = {}
    _produce(broker.bootstrap, "hp-old", 1, 20, old)
    sink = Collector()
    df = stream(
        spark,
        url,
        subscribePattern="hp-.*",
        startingOffsets="earliest",
        **{"kafka.bootstrap.servers": broker.bootstrap},
    )
    q = every_200ms(df, sink, tmp_path / "ck")
    try:
        q.processAllAvailable()
        assert sorted(sink.offsets()) == _all("hp-old", {0: 20})
        create_topic(broker.bootstrap, "hp-new", 2)
        acked: dict[tuple[int, int], bytes] = {}
        _produce(broker.bootstrap, "hp-new", 2, 30, acked)
        q.processAllAvailable()
    finally:
        q.stop()
    assert q.exception() is None
    assert sorted(sink.offsets()) == sorted(_all("hp-old", {0: 20}) + [("hp-new", p, o) for p, o in acked])
    assert not list((tmp_path / "bucket").rglob("*.json")), "nothing tiered: all of it came from the broker"


async def test_read_committed_stream_stops_at_the_archives_stable_end(tmp_path: Path) -> None:
    """kafka.isolation.level=read_committed for streams, driven without Spark: the latest
    offset is where the bucket's decided data ends, aborted records are left out."""
    from hot.txn_cleaning import AbortedRanges
    from tests.spark.sparklib import rows_of_table
    from tests.tiering.test_txn_tiering import TOPIC, Writer, local_records, write_compaction_history
    from tests.tiering.uplib import new_manager, new_service

    url = f"file://{tmp_path / 'bucket'}"
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        m.create_topic(TOPIC, 1, {"segment.bytes": "1200", "retention.ms": "-1"})
        log = m.get_log(TOPIC, 0)
        a_first, _ = write_compaction_history(Writer(log))
        log.roll()
        await svc.run_once(retention=False, sweep=False)
        records = local_records(log)
        ranges = AbortedRanges(log.collect_aborted_transactions(0, log.log_end_offset))
    finally:
        await svc.close()
        m.close()
    opts = {"subscribe": TOPIC, "startingOffsets": "earliest", "kafka.isolation.level": "read_committed"}
    reader = StrataStreamReader(ReadOptions.parse(opts, path=url, streaming=True))

    def batch() -> tuple[dict[str, Any], list[int]]:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        parts = reader.partitions(start, end)
        return end, [r.offset for p in parts for b in reader.read(p) for r in rows_of_table(b)]

    end, got = await asyncio.to_thread(batch)
    assert end == {TOPIC: {"0": a_first}}
    data = [(o, pid, txn) for o, pid, txn, control, _ in records if not control and o < a_first]
    want = [o for o, pid, txn in data if not (txn and ranges.contains(pid, o))]
    assert sorted(got) == want and len(want) < len(data)


def test_reader_offsets_new_partitions_gone_partitions_and_available_now(tmp_path: Path) -> None:
    """The driver side of a stream without Spark: the initial offset, a partition added to
    the topic (joins from its start), the availableNow target (records arriving later are
    left out), and a partition that vanished (data loss)."""
    url = f"file://{tmp_path / 'bucket'}"
    ends = _archive(tmp_path, url, "grow", 1, 8)
    opts = ReadOptions.parse({"subscribe": "grow"}, path=url, streaming=True)
    reader = StrataStreamReader(opts)
    start = reader.initialOffset()
    assert start == {"grow": {"0": ends[0]}}  # latest by default
    assert reader.latestOffset(start, ReadAllAvailable()) == start  # nothing new

    ends = _archive(tmp_path, url, "grow", 2, 4)  # more records, and a second partition
    reader.prepareForTriggerAvailableNow()
    _archive(tmp_path, url, "grow", 2, 4)  # after the target: not for this run
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"grow": {"0": ends[0], "1": ends[1]}}
    tasks = [p.task for p in reader.partitions(start, end)]  # type: ignore[attr-defined]
    assert {(t.partition, t.slices[0].start_offset) for t in tasks if t.slices} >= {(1, 0)}
    assert reader.latestOffset(end, ReadAllAvailable()) == end  # the target reached: done

    lenient = StrataStreamReader(dataclasses.replace(opts, fail_on_data_loss=False))
    ghost = {"grow": {"0": 0}, "gone": {"0": 5}}
    assert "gone" not in lenient.latestOffset(ghost, ReadAllAvailable())
    with pytest.raises(OffsetOutOfRangeError, match=r"partitions gone-0 are gone"):
        reader.latestOffset(ghost, ReadAllAvailable())
