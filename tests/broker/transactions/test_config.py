"""Transaction coordinator settings under their Kafka names."""

from __future__ import annotations

import pytest

from broker.transactions.config import ENV_NAMES, KAFKA_NAMES, TransactionConfig
from hot.errors import InvalidConfigError


def test_defaults_are_kafkas_and_round_trip() -> None:
    c = TransactionConfig()
    assert c.max_timeout_ms == 900_000 and c.transactional_id_expiration_ms == 7 * 24 * 3600 * 1000
    assert c.abort_timed_out_interval_ms == 10_000 and c.remove_expired_interval_ms == 3_600_000
    assert c.partition_verification_enable is True
    assert TransactionConfig.from_kafka(c.to_kafka()) == c
    assert set(c.to_kafka()) == set(KAFKA_NAMES)
    assert ENV_NAMES["STRATA_TRANSACTION_MAX_TIMEOUT_MS"] == "transaction.max.timeout.ms"


def test_values_are_parsed_and_checked() -> None:
    c = TransactionConfig.from_kafka(
        {
            "transaction.max.timeout.ms": "60000",
            "transactional.id.expiration.ms": 1000,
            "transaction.partition.verification.enable": False,
        }
    )
    assert (c.max_timeout_ms, c.transactional_id_expiration_ms) == (60_000, 1000)
    assert c.partition_verification_enable is False
    assert c.to_kafka()["transaction.partition.verification.enable"] == "false"
    for bad in (
        {"transaction.max.timeout.ms": "0"},
        {"transaction.max.timeout.ms": "soon"},
        {"transaction.state.log.num.partitions": "1001"},
        {"transaction.partition.verification.enable": "yes"},
        {"transaction.nonsense": "1"},
    ):
        with pytest.raises(InvalidConfigError, match=next(iter(bad)).replace(".", r"\.")):
            TransactionConfig.from_kafka(bad)
    with pytest.raises(InvalidConfigError):
        TransactionConfig(max_timeout_ms=True)


def test_the_state_topic_is_created_with_transaction_state_log_min_isr() -> None:
    from broker.coordinator_runtime.shard import state_topic_configs
    from broker.transactions.state_log import state_topic

    topic = state_topic(TransactionConfig.from_kafka({"transaction.state.log.min.isr": 3}))
    assert topic.min_isr == 3
    assert state_topic_configs(3, 1 << 20, topic.min_isr)["min.insync.replicas"] == "3"
    # Capped at the replication factor (a single node: one replica).
    assert state_topic_configs(1, 1 << 20, topic.min_isr)["min.insync.replicas"] == "1"
    # Kafka's default, 2.
    assert state_topic(TransactionConfig()).min_isr == 2
