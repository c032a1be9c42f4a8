"""Iceberg topic configs (hot.config) and the broker's [iceberg] settings: validation."""

from __future__ import annotations

import pytest

from broker.config import load_config
from hot.config import LogConfig
from hot.errors import InvalidConfigError
from tiering.iceberg_config import IcebergConfig


def test_defaults_and_round_trip() -> None:
    c = LogConfig()
    assert (c.iceberg_mode, c.iceberg_target_lag_ms) == ("disabled", 60000)
    assert c.iceberg_partition_spec == "hour(timestamp)"
    assert c.iceberg_invalid_record_action == "drop" and c.iceberg_delete is False
    c = LogConfig.from_kafka(
        {"iceberg.mode": "key_value", "iceberg.partition.spec": "(day(timestamp), identity(partition))"}
    )
    assert c.iceberg_mode == "key_value"
    assert c.to_kafka()["iceberg.partition.spec"] == "day(timestamp),identity(partition)"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("iceberg.mode", "on", "must be one of disabled, key_value, value_schema_id_prefix"),
        ("iceberg.target.lag.ms", "10", "must be in [1000"),
        ("iceberg.target.lag.ms", "soon", "iceberg.target.lag.ms"),
        ("iceberg.partition.spec", "hour(key)", "comma-separated list"),
        ("iceberg.partition.spec", "hour(timestamp),hour(timestamp)", "distinct"),
        ("iceberg.invalid.record.action", "dlq", "must be one of drop, dlq_table"),
        ("iceberg.delete", "maybe", "iceberg.delete"),
    ],
)
def test_bad_values_are_refused_with_one_clear_line(name: str, value: str, says: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_kafka({name: value})
    assert says in str(info.value) and name in str(info.value)
    assert "\n" not in str(info.value)


def test_broker_iceberg_settings() -> None:
    c = load_config(env={"STRATA_ICEBERG_CATALOG": "rest", "STRATA_ICEBERG_URI": "http://127.0.0.1:1/cat"})
    assert c.iceberg.catalog == "rest" and c.iceberg.uri == "http://127.0.0.1:1/cat"
    with pytest.raises(InvalidConfigError, match="needs uri"):
        IcebergConfig(catalog="rest")
    with pytest.raises(InvalidConfigError, match="unknown iceberg setting"):
        load_config(env={}, overrides={"iceberg": {"catalogue": "rest"}})
    assert "secret" not in repr(IcebergConfig(catalog="rest", uri="http://x", credential="id:secret"))
