"""A real local Spark (local[2]) reading a topic's hot tail (includeHot) from a broker with
SASL and authorization: refused with the topic named until the principal may READ, then
every record; the password never reaches the broker's output."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.security.test_authorization import (
    ADMIN_PW,
    MECH,
    add_acls,
    add_user,
    binding,
    conf,
    create_topics,
    produce,
)
from tests.brokers import BrokerProcess
from tests.spark.sparklib import local_spark

pyspark_sql = pytest.importorskip("pyspark.sql")

ANALYST_PW = "Spark-analyst-9b04de"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("spark-authz")
    add_user(data, "admin", ADMIN_PW)
    add_user(data, "analyst", ANALYST_PW)
    env = {
        "STRATA_SASL_MECHANISMS": f"{MECH},SCRAM-SHA-512",
        "STRATA_AUTHORIZATION_ENABLED": "true",
        "STRATA_AUTHORIZATION_SUPER_USERS": "User:admin",
    }
    b = BrokerProcess(data, env=env).start()
    yield b
    b.kill()
    assert ANALYST_PW not in b.output() and ADMIN_PW not in b.output()


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    with local_spark("strata-authz-tests") as session:
        yield session


def test_include_hot_with_sasl_and_acls(broker: BrokerProcess, spark: object, tmp_path: Path) -> None:
    topic = f"sp-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    assert produce(conf(broker, "admin", ADMIN_PW), topic, 4) == [None] * 4

    def read() -> list[bytes]:
        df = (
            spark.read.format("strata")  # type: ignore[attr-defined]
            .option("topic", topic)
            .option("includeHot", "true")
            .option("broker", broker.bootstrap)
            .option("kafka.security.protocol", "SASL_PLAINTEXT")
            .option("kafka.sasl.mechanism", "SCRAM-SHA-512")
            .option("kafka.sasl.username", "analyst")
            .option("kafka.sasl.password", ANALYST_PW)
            .load(f"file://{broker.data_dir.resolve()}/objects")
        )
        return sorted(r["value"] for r in df.select("value").collect())

    with pytest.raises(Exception) as exc:
        read()
    assert f"topic {topic!r}" in str(exc.value) and ANALYST_PW not in str(exc.value)
    add_acls(broker, binding("TOPIC", topic, "User:analyst", "READ"))
    assert read() == [b"v0", b"v1", b"v2", b"v3"]
