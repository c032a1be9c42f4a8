"""A single node is a cluster of one on the embedded metadata store: a data dir written
before (topics in topics.json, committed offsets in the single-node offsets log) is adopted
with its data, and what the store holds survives a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.config import BrokerConfig
from broker.groups.offsets import OffsetsLog
from broker.groups.types import OffsetAndMetadata, TopicPartition
from hot.config import LogConfig
from hot.manager import LogManager
from tests.inprocess import broker_of_one, create_topic, wait_led
from tests.tiering.tierlib import make_batch


async def test_an_older_data_dir_is_adopted_with_its_topics_data_and_offsets(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    manager = LogManager(data, LogConfig())
    manager.open()
    info = manager.create_topic("old", 2, {"retention.ms": "3600000"})
    manager.get_log("old", 1).append(make_batch(0, 5))
    manager.close()
    offsets = OffsetsLog.open(data, LogConfig())
    tp = TopicPartition("old", 1)
    await offsets.commit("g", {tp: OffsetAndMetadata(3, -1, "m", 1)})
    offsets.close()

    config = BrokerConfig(data_dir=data)
    async with broker_of_one(config) as broker:
        adopted = broker.topic("old")
        assert (adopted.partitions, adopted.topic_id) == (2, info.topic_id)
        assert dict(adopted.configs)["retention.ms"] == "3600000"
        await wait_led(broker, "old", 2)
        end, _ = await broker.list_offset("old", 1, -1)
        assert end == 5
        await broker.prepare_group("g")
        assert broker.groups is not None
        assert broker.groups.committed_offsets("g")[tp].offset == 3
        await create_topic(broker, "new", 1)

    async with broker_of_one(config) as broker:  # a restart: the store kept everything
        assert {t.name for t in broker.topics()} >= {"old", "new", "__consumer_offsets"}
        await broker.prepare_group("g")
        assert broker.groups is not None
        assert broker.groups.committed_offsets("g")[tp].offset == 3
        await asyncio.sleep(0)


async def test_offsets_adoption_resumes_after_a_crash_between_its_steps(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    offsets = OffsetsLog.open(data, LogConfig())
    tp = TopicPartition("t", 0)
    await offsets.commit("g", {tp: OffsetAndMetadata(7, -1, "", 1)})
    offsets.close()
    # The crash: the directory staged (hot.manager.adopt_partition's first step), the
    # topic registered, and an empty log opened for it by the next start, nothing else.
    manager = LogManager(data, LogConfig())
    manager.open()
    (data / "__consumer_offsets-0").rename(manager.adoption_dir("__consumer_offsets", 0))
    manager.create_topic("__consumer_offsets", 1)
    manager.close()
    async with broker_of_one(BrokerConfig(data_dir=data)) as broker:
        await broker.prepare_group("g")
        assert broker.groups is not None
        assert broker.groups.committed_offsets("g")[tp].offset == 7
