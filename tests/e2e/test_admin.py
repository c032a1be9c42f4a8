"""Admin tools work: confluent-kafka AdminClient describe/alter configs and create partitions."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    ResourceType,
)

from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(120)


def _configs(admin: AdminClient, topic: str) -> dict[str, str]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(30)
    return {k: v.value for k, v in entries.items()}


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_incremental_and_full_alter_configs(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"cfg-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1, {"retention.ms": "1000"})
    assert _configs(admin, topic)["retention.ms"] == "1000"

    res = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)
    cfg = _configs(admin, topic)
    assert cfg["segment.bytes"] == "1048576"
    assert cfg["retention.ms"] == "604800000"  # back to the default

    bad = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("segment.bytes", "tiny", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException, match=r"segment\.bytes"):
        admin.incremental_alter_configs([bad])[bad].result(30)
    assert _configs(admin, topic)["segment.bytes"] == "1048576"  # nothing changed

    full = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.bytes": "123456789"})
    admin.alter_configs([full])[full].result(30)
    cfg = _configs(admin, topic)
    assert cfg["retention.bytes"] == "123456789"
    assert cfg["segment.bytes"] == "1073741824"  # AlterConfigs replaces the whole override set


def test_create_partitions(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"grow-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5
    with pytest.raises(KafkaException):
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)


def test_describe_broker_configs(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.BROKER, "0")
    entries = admin.describe_configs([res])[res].result(30)
    assert entries["broker.id"].value == "0"
    assert entries["auto.create.topics.enable"].value == "false"
