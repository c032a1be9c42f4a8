"""The ``strata`` sink in a real local Spark (local[2]) against real brokers: batch round trip
read back by confluent-kafka, a streaming query over micro-batches, an ACL refusal; schema
and option errors without Spark."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from hot.errors import InvalidConfigError
from spark.sink import SinkOptions, validate_schema
from tests.broker.security.test_authorization import (
    ADMIN_PW,
    ALICE_PW,
    MECH,
    add_acls,
    add_user,
    binding,
    conf,
    create_topics,
)
from tests.brokers import BrokerProcess, create_topic
from tests.spark.sparklib import local_spark

pytestmark = pytest.mark.timeout(240)
BOUND_S = 30.0


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with local_spark("strata-sink-tests", spark_sql_shuffle_partitions="2") as session:
        yield session


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("sink-broker")).start()
    yield b
    b.kill()


def consume(bootstrap: str, topics: list[str], expect: int, extra: dict[str, Any] | None = None) -> list[Any]:
    """``expect`` records of ``topics`` from the start (bounded)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chk-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **(extra or {}),
        }
    )
    out: list[Any] = []
    try:
        c.subscribe(topics)
        deadline = time.monotonic() + BOUND_S
        while len(out) < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                out.append(m)
        return out
    finally:
        c.close()


def test_batch_round_trip_keys_headers_partitions_and_topic_routing(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    a, b = f"sa-{uuid.uuid4().hex[:6]}", f"sb-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, a, 3)
    create_topic(broker.bootstrap, b, 2)
    rows = []
    for i in range(300):
        topic = a if i % 3 else b
        part = None if i % 4 == 0 else i % (3 if topic == a else 2)
        headers = [("h", b"x%d" % i), ("n", None)] if i % 5 == 0 else None
        key = None if i % 7 == 0 else f"k{i}"
        rows.append((key, b"v%d" % i, topic, part, headers))
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField(
                "headers",
                ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
            ),
        ]
    )
    df = spark.createDataFrame(rows, schema).repartition(2)
    df.write.format("strata").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()

    got = {m.value(): m for m in consume(broker.bootstrap, [a, b], len(rows))}
    assert len(got) == len(rows)
    for key, value, topic, part, headers in rows:
        m = got[value]
        assert m.topic() == topic
        assert m.key() == (None if key is None else key.encode())
        if part is not None:
            assert m.partition() == part
        assert (m.headers() or None) == headers
    # Keyed rows without a partition land by Kafka's murmur2, as the Java producer places them.
    from api.partitioner import partition_for_key

    for key, value, topic, part, _ in rows:
        if part is None and key is not None:
            assert got[value].partition() == partition_for_key(key.encode(), 3 if topic == a else 2)


def test_streaming_rate_source_every_micro_batch_written(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = f"ss-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    src = tmp_path / "in"
    src.mkdir()
    schema = StructType([StructField("id", LongType())])
    for n in range(3):  # three files: three micro-batches (maxFilesPerTrigger=1)
        spark.range(n * 100, n * 100 + 100).write.mode("overwrite").parquet(str(tmp_path / f"f{n}"))
        for f in (tmp_path / f"f{n}").glob("*.parquet"):
            f.rename(src / f"{n}-{f.name}")
    q = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(src))
        .selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")
        .writeStream.format("strata")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120)
    assert q.exception() is None
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    assert len(batches) >= 2
    got = consume(broker.bootstrap, [topic], 300)
    values = sorted(int(m.value()) for m in got)
    assert len(got) == 300 and values == list(range(300))


def test_exactly_once_a_replayed_micro_batch_is_not_written_twice(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    """The last batch's commit is removed from the checkpoint, as a crash between the tasks'
    writes and Spark's commit leaves it: the restarted query replays that batch, and the
    read_committed output still holds every row once."""
    topic = f"se-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    src = tmp_path / "in"
    src.mkdir()
    for n in range(3):
        spark.range(n * 100, n * 100 + 100).repartition(2).write.parquet(str(tmp_path / f"f{n}"))
        for f in (tmp_path / f"f{n}").glob("*.parquet"):
            f.rename(src / f"{n}-{f.name}")
    ckpt = tmp_path / "ckpt"

    def run() -> None:
        q = (
            spark.readStream.schema("id long")
            .option("maxFilesPerTrigger", 2)
            .parquet(str(src))
            .selectExpr("CAST(id AS STRING) AS value")
            .writeStream.format("strata")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", topic)
            .option("exactlyOnce", "true")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(120)
        assert q.exception() is None

    run()
    commits = sorted((ckpt / "commits").iterdir(), key=lambda f: f.name)
    last = [f for f in commits if f.name.isdigit()][-1]
    last.unlink()
    (ckpt / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    run()  # replays the batch whose commit was removed
    got = consume(broker.bootstrap, [topic], 301, {"isolation.level": "read_committed"})
    assert sorted(int(m.value()) for m in got) == list(range(300))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("sink-authz")
    add_user(data, "admin", ADMIN_PW)
    add_user(data, "alice", ALICE_PW)
    env = {
        "STRATA_SASL_MECHANISMS": MECH,
        "STRATA_AUTHORIZATION_ENABLED": "true",
        "STRATA_AUTHORIZATION_SUPER_USERS": "User:admin",
    }
    b = BrokerProcess(data, env=env).start()
    yield b
    b.kill()
    assert ALICE_PW not in b.output()


def test_a_topic_the_user_may_not_write_fails_the_query(
    spark: SparkSession, secure_broker: BrokerProcess
) -> None:
    allowed, denied = f"ok-{uuid.uuid4().hex[:6]}", f"no-{uuid.uuid4().hex[:6]}"
    create_topics(secure_broker, allowed, denied)
    add_acls(secure_broker, binding("TOPIC", allowed, "User:alice", "WRITE"))
    c = conf(secure_broker, "alice", ALICE_PW)

    def write(topic: str) -> None:
        w = spark.range(50).selectExpr("CAST(id AS STRING) AS value").write.format("strata")
        w = w.option("topic", topic).option("kafka.bootstrap.servers", c["bootstrap.servers"])
        w = w.option("kafka.security.protocol", "SASL_PLAINTEXT").option("kafka.sasl.mechanism", MECH)
        login = "org.apache.kafka.common.security.scram.ScramLoginModule"
        jaas = f'{login} required username="alice" password="{ALICE_PW}";'
        w.option("kafka.sasl.jaas.config", jaas).option("kafka.message.timeout.ms", "20000").mode(
            "append"
        ).save()

    write(allowed)
    assert (
        len(
            consume(
                c["bootstrap.servers"],
                [allowed],
                50,
                {k: v for k, v in conf(secure_broker, "admin", ADMIN_PW).items() if k != "bootstrap.servers"},
            )
        )
        == 50
    )
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED") as e:
        write(denied)
    assert ALICE_PW not in str(e.value)


def test_exactly_once_needs_write_on_the_topic_and_the_transactional_id(
    spark: SparkSession, secure_broker: BrokerProcess, tmp_path: Path
) -> None:
    """An exactlyOnce streaming write fails the query with the broker's authorization error:
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED without WRITE on the transactional id,
    TOPIC_AUTHORIZATION_FAILED without WRITE on the topic; with both (and READ on the
    marker group, named as the transactional id) every row arrives once."""
    allowed, denied = f"xok-{uuid.uuid4().hex[:6]}", f"xno-{uuid.uuid4().hex[:6]}"
    create_topics(secure_broker, allowed, denied)
    c = conf(secure_broker, "alice", ALICE_PW)
    add_acls(secure_broker, binding("TOPIC", allowed, "User:alice", "WRITE"))
    add_acls(secure_broker, binding("TOPIC", allowed, "User:alice", "READ"))  # the marker's committed offset
    src = tmp_path / "in"
    spark.range(40).write.parquet(str(src))

    def write(topic: str, prefix: str) -> None:
        w = spark.readStream.schema("id long").parquet(str(src)).selectExpr("CAST(id AS STRING) AS value")
        w = w.writeStream.format("strata").option("topic", topic).option("exactlyOnce", "true")
        w = w.option("transactionalIdPrefix", prefix).option(
            "kafka.bootstrap.servers", c["bootstrap.servers"]
        )
        w = w.option("kafka.security.protocol", "SASL_PLAINTEXT").option("kafka.sasl.mechanism", MECH)
        w = w.option("kafka.sasl.username", "alice").option("kafka.sasl.password", ALICE_PW)
        w = w.option("kafka.message.timeout.ms", "20000").option("kafka.transaction.timeout.ms", "20000")
        q = w.option("checkpointLocation", str(tmp_path / f"ck-{prefix}")).trigger(availableNow=True).start()
        assert q.awaitTermination(120)
        if q.exception() is not None:
            raise q.exception()  # type: ignore[misc]

    with pytest.raises(Exception, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED") as e:
        write(allowed, "noacl")
    assert ALICE_PW not in str(e.value)
    add_acls(
        secure_broker,
        binding("TRANSACTIONAL_ID", "eo-", "User:alice", "WRITE", prefixed=True),
        binding("GROUP", "eo-", "User:alice", "READ", prefixed=True),
    )
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED") as e:
        write(denied, "eo-denied")
    assert ALICE_PW not in str(e.value)
    write(allowed, "eo-ok")
    admin = {k: v for k, v in conf(secure_broker, "admin", ADMIN_PW).items() if k != "bootstrap.servers"}
    got = consume(c["bootstrap.servers"], [allowed], 40, {**admin, "isolation.level": "read_committed"})
    assert sorted(int(m.value()) for m in got) == list(range(40))


def test_schema_and_option_errors_name_the_column_or_option(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    ok = {"kafka.bootstrap.servers": "127.0.0.1:9"}
    value = StructField("value", BinaryType())
    with pytest.raises(InvalidConfigError, match="required attribute 'value' not found"):
        validate_schema(
            StructType([StructField("key", StringType())]), SinkOptions.parse({**ok, "topic": "t"})
        )
    with pytest.raises(InvalidConfigError, match="key attribute type must be a string or binary"):
        validate_schema(
            StructType([value, StructField("key", LongType())]), SinkOptions.parse({**ok, "topic": "t"})
        )
    with pytest.raises(InvalidConfigError, match="partition attribute type must be an int"):
        validate_schema(
            StructType([value, StructField("partition", LongType())]), SinkOptions.parse({**ok, "topic": "t"})
        )
    with pytest.raises(InvalidConfigError, match="topic option required when no 'topic' attribute"):
        validate_schema(StructType([value]), SinkOptions.parse(ok))
    with pytest.raises(InvalidConfigError, match="headers attribute type must be"):
        validate_schema(
            StructType([value, StructField("headers", ArrayType(StringType()))]),
            SinkOptions.parse({**ok, "topic": "t"}),
        )
    with pytest.raises(InvalidConfigError, match="unknown option 'topc'; did you mean 'topic'"):
        SinkOptions.parse({**ok, "topc": "t"})
    with pytest.raises(InvalidConfigError, match=r"kafka.bootstrap.servers .* is required"):
        SinkOptions.parse({"topic": "t"})
    with pytest.raises(
        InvalidConfigError, match=r"kafka\.ssl\.truststore\.location is a Java client setting"
    ):
        SinkOptions.parse({**ok, "kafka.ssl.truststore.location": "/x.jks"})
    with pytest.raises(InvalidConfigError, match="transactionalIdPrefix needs exactlyOnce=true"):
        SinkOptions.parse({**ok, "transactionalIdPrefix": "x"})
    with pytest.raises(InvalidConfigError, match="No such configuration property"):
        SinkOptions.parse({**ok, "kafka.no.such.thing": "1"}).check_producer()
    assert "s3cr3t" not in repr(SinkOptions.parse({**ok, "kafka.sasl.password": "s3cr3t"}))
    # Through Spark: a null topic fails the task with Spark's message; a bad type fails planning.
    df = spark.createDataFrame([("v", None)], "value string, topic string")
    with pytest.raises(Exception, match="null topic present in the data"):
        df.write.format("strata").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    with pytest.raises(Exception, match="value attribute type must be a string or binary"):
        spark.range(1).selectExpr("id AS value").write.format("strata").option("topic", "t").option(
            "kafka.bootstrap.servers", broker.bootstrap
        ).mode("append").save()
