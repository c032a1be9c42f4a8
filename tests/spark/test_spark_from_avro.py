"""Spark's ``from_avro`` over values written by confluent-kafka's AvroSerializer against the
built-in registry: the documented recipe (docs/schema-registry.md) strips Confluent's
5-byte prefix (magic byte 0 and the 4-byte schema id) and decodes the rest with the
schema the registry holds for that id.

``from_avro`` lives in Spark's external ``spark-avro`` package, which pyspark does not
bundle; the test runs where its jar is found (``STRATA_SPARK_AVRO_JAR``, pyspark's jars,
~/.ivy2*/jars, ~/.m2) and is skipped otherwise, before any broker or Spark starts."""

from __future__ import annotations

import glob
import json
import os
import uuid
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess, create_topic

USER = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}
# The recipe, as docs/schema-registry.md shows it: Spark's substring is 1-based.
STRIP = "substring(value, 6, length(value) - 5)"


def spark_avro_jar() -> str | None:
    import pyspark

    version = pyspark.__version__
    given = os.environ.get("STRATA_SPARK_AVRO_JAR")
    if given:
        return given if Path(given).is_file() else None
    home = Path.home()
    patterns = [
        os.path.join(os.path.dirname(pyspark.__file__), "jars", f"spark-avro_*-{version}.jar"),
        str(home / ".ivy2*" / "jars" / f"org.apache.spark_spark-avro_*-{version}.jar"),
        str(home / ".m2" / "repository" / "org" / "apache" / "spark" / "spark-avro_*" / version / "*.jar"),
    ]
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def test_from_avro_reads_serializer_values(tmp_path: Path) -> None:
    jar = spark_avro_jar()
    if jar is None:
        pytest.skip(
            "the spark-avro package (org.apache.spark:spark-avro_2.13) is not installed and cannot "
            "be fetched offline; set STRATA_SPARK_AVRO_JAR to its jar to run this test"
        )
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import expr

    from tests.spark.sparklib import local_spark

    broker = BrokerProcess(tmp_path / "b", "--schema-registry-listen", "127.0.0.1:0").start()
    try:
        topic = f"users-{uuid.uuid4().hex[:8]}"
        create_topic(broker.bootstrap, topic, 1)
        sr = SchemaRegistryClient({"url": broker.registry_url})
        serialize = AvroSerializer(sr, json.dumps(USER))
        people = [{"name": "Ada", "age": 36}, {"name": "Alan", "age": 41}]
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for person in people:
            p.produce(topic, value=serialize(person, SerializationContext(topic, MessageField.VALUE)))
        assert p.flush(30) == 0
        c = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
        )
        c.subscribe([topic])
        values: list[bytes] = []
        try:
            for _ in range(60):
                m = c.poll(1.0)
                if m is not None and m.error() is None:
                    values.append(m.value() or b"")
                if len(values) == len(people):
                    break
        finally:
            c.close()
        schema_id = int.from_bytes(values[0][1:5], "big")
        writer_schema = sr.get_schema(schema_id).schema_str
        assert writer_schema is not None
        with local_spark("strata-from-avro", spark_jars=jar) as spark:
            # The same `value` column a Kafka (or strata) source DataFrame has.
            df = spark.createDataFrame([(v,) for v in values], "value binary")
            rows = df.select(from_avro(expr(STRIP), writer_schema).alias("u")).select("u.*").collect()
        assert [r.asDict() for r in rows] == people
    finally:
        broker.kill()
