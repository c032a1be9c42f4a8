"""TxnOffsetCommit end to end on a broker of one (tests.inprocess: embedded store, real
replica manager, real ``__consumer_offsets``): through the Kafka handlers, the offsets
stay pending (OffsetFetch: unchanged; require_stable: UNSTABLE_OFFSET_COMMIT) until the
producer's marker is appended to the group's offsets partition and acknowledged
(``Broker.on_txn_marker``, as WriteTxnMarkers calls it); COMMIT shows them, ABORT drops
them; a restart replays the same state, a transaction open across it included."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from api.handlers.groups import handle_offset_fetch, handle_txn_offset_commit
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.coordinator_runtime.records import partition_for
from broker.groups.offsets import OFFSETS_TOPIC
from hot.errors import NotLeaderError
from hot.records import ControlType
from kwire import error_table as E
from kwire.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
)
from kwire.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from tests.inprocess import broker_of_one, create_topic

BOUND_S = 20.0
GROUP = "txn-group"
TOPIC = "in"


def conn(broker: Broker) -> Any:
    return SimpleNamespace(broker=broker)


async def txn_commit(
    broker: Broker, pid: int, offsets: dict[int, int], *, epoch: int = 0, version: int = 4, **kw: Any
) -> dict[tuple[str, int], int]:
    req = TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=GROUP,
        producer_id=pid,
        producer_epoch=epoch,
        topics=[
            TxnOffsetCommitRequestTopic(
                name=kw.pop("topic", TOPIC),
                partitions=[
                    TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o)
                    for p, o in offsets.items()
                ],
            )
        ],
        **kw,
    )
    resp: TxnOffsetCommitResponse = await handle_txn_offset_commit(
        conn(broker), SimpleNamespace(api_version=version), req
    )
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


async def fetch(broker: Broker, *, stable: bool, version: int = 8) -> dict[int, tuple[int, int]]:
    """partition -> (committed offset, error code) of partitions 0 and 1."""
    topics = [OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1])]
    if version >= 8:
        req = OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup(group_id=GROUP, topics=topics)], require_stable=stable
        )
    else:
        req = OffsetFetchRequest(group_id=GROUP, topics=topics, require_stable=stable)
    resp: OffsetFetchResponse = await handle_offset_fetch(
        conn(broker), SimpleNamespace(api_version=version), req
    )
    topics_out = resp.groups[0].topics if version >= 8 else resp.topics
    if version >= 8:
        assert resp.groups[0].error_code == 0
    return {p.partition_index: (p.committed_offset, p.error_code) for t in topics_out for p in t.partitions}


async def marker(broker: Broker, pid: int, kind: ControlType, *, epoch: int = 0) -> None:
    """What WriteTxnMarkers does for an offsets partition: append the marker as leader,
    wait until it is acknowledged, then call the hook."""
    store = broker.offset_store
    assert store is not None
    n = store.partition_count()
    assert n is not None
    p = partition_for(GROUP, n)
    rep = broker.replicas.replicas[(OFFSETS_TOPIC, p)]
    info = rep.log.append_marker(pid, epoch, kind, 0, leader_epoch=rep.leader_epoch)
    broker.replicas.appended(rep)
    deadline = asyncio.get_running_loop().time() + BOUND_S
    while rep.log.high_watermark <= info.last_offset:
        assert asyncio.get_running_loop().time() < deadline, "marker acknowledged"
        await asyncio.sleep(0.01)
    broker.on_txn_marker(OFFSETS_TOPIC, p, pid, kind)


async def ready(broker: Broker) -> None:
    await broker.prepare_group(GROUP)
    store = broker.offset_store
    assert store is not None
    deadline = asyncio.get_running_loop().time() + BOUND_S
    while store.runtime.shard_for(GROUP) is None:
        assert asyncio.get_running_loop().time() < deadline, "offsets partition loaded"
        await asyncio.sleep(0.01)


UNSTABLE = E.UNSTABLE_OFFSET_COMMIT


async def test_txn_offsets_pending_until_the_marker_and_after_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path / "data")
    async with broker_of_one(config) as broker:
        await create_topic(broker, TOPIC, 2)
        await ready(broker)
        # Unknown partitions and topics are answered per partition, the rest is written.
        assert await txn_commit(broker, 1000, {0: 10, 1: 11, 7: 1}) == {
            (TOPIC, 0): 0,
            (TOPIC, 1): 0,
            (TOPIC, 7): E.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert await fetch(broker, stable=False) == {0: (-1, 0), 1: (-1, 0)}
        assert await fetch(broker, stable=True) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        assert await fetch(broker, stable=True, version=7) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        await marker(broker, 1000, ControlType.COMMIT)
        assert await fetch(broker, stable=True) == {0: (10, 0), 1: (11, 0)}
        # An aborted transaction leaves the committed offsets as they were.
        assert await txn_commit(broker, 1001, {0: 99}) == {(TOPIC, 0): 0}
        assert await fetch(broker, stable=True) == {0: (-1, UNSTABLE), 1: (11, 0)}
        assert await fetch(broker, stable=False) == {0: (10, 0), 1: (11, 0)}
        await marker(broker, 1001, ControlType.ABORT)
        assert await fetch(broker, stable=True) == {0: (10, 0), 1: (11, 0)}
        # A fenced producer epoch is refused by the offsets partition's producer state.
        assert await txn_commit(broker, 1000, {0: 5}, epoch=0) == {(TOPIC, 0): 0}
        await marker(broker, 1000, ControlType.COMMIT, epoch=1)
        assert await txn_commit(broker, 1000, {0: 6}, epoch=0) == {(TOPIC, 0): E.INVALID_PRODUCER_EPOCH}
        assert await fetch(broker, stable=True) == {0: (5, 0), 1: (11, 0)}
        # KIP-447: a member the group does not know is refused (the group is Empty).
        assert await txn_commit(broker, 1002, {0: 1}, generation_id=3, member_id="m") == {
            (TOPIC, 0): E.UNKNOWN_MEMBER_ID
        }
        assert await txn_commit(broker, 1002, {1: 1}, member_id="m") == {(TOPIC, 1): 0}  # Empty group
        await marker(broker, 1002, ControlType.ABORT)
        # A transaction left open across the restart.
        assert await txn_commit(broker, 1003, {1: 40}) == {(TOPIC, 1): 0}
    async with broker_of_one(config) as broker:
        await ready(broker)
        assert await fetch(broker, stable=False) == {0: (5, 0), 1: (11, 0)}
        assert await fetch(broker, stable=True) == {0: (5, 0), 1: (-1, UNSTABLE)}
        await marker(broker, 1003, ControlType.COMMIT)
        assert await fetch(broker, stable=True) == {0: (5, 0), 1: (40, 0)}
        # A marker for a partition not loaded here: NOT_LEADER_OR_FOLLOWER (the
        # transaction coordinator retries it).
        store = broker.offset_store
        assert store is not None
        n = store.partition_count()
        assert n is not None and n > 1
        other = (partition_for(GROUP, n) + 1) % n
        store.runtime._parts.pop(other, None)
        store.runtime._loading.pop(other, None)
        with pytest.raises(NotLeaderError):
            broker.on_txn_marker(OFFSETS_TOPIC, other, 1003, ControlType.COMMIT)
    async with broker_of_one(config) as broker:
        await ready(broker)
        assert await fetch(broker, stable=True) == {0: (5, 0), 1: (40, 0)}
        # DeleteGroups of the (Empty) group deletes its pending offsets too, as in Kafka:
        # the transaction's COMMIT after it brings nothing back.
        assert await txn_commit(broker, 1004, {0: 50}) == {(TOPIC, 0): 0}
        groups = broker.groups
        assert groups is not None
        assert await groups.delete_groups([GROUP]) == {GROUP: None}
        assert await fetch(broker, stable=True) == {0: (-1, 0), 1: (-1, 0)}
        await marker(broker, 1004, ControlType.COMMIT)
        assert await fetch(broker, stable=True) == {0: (-1, 0), 1: (-1, 0)}


async def test_compaction_keeps_pending_offsets_and_waits_for_an_unapplied_marker(tmp_path: Path) -> None:
    from broker.groups.types import OffsetCommitRequest, TopicPartition

    config = BrokerConfig(data_dir=tmp_path / "data")
    async with broker_of_one(config) as broker:
        await create_topic(broker, TOPIC, 2)
        await ready(broker)
        store, groups = broker.offset_store, broker.groups
        assert store is not None and groups is not None
        assert await txn_commit(broker, 2000, {0: 7}) == {(TOPIC, 0): 0}
        plain = OffsetCommitRequest(GROUP, ((TopicPartition(TOPIC, 1), 3, -1, None),))
        assert await groups.commit_offsets(plain) == {TopicPartition(TOPIC, 1): None}
        part = store.runtime.shard_for(GROUP)
        assert part is not None
        lg = part.rep.log
        assert await store.compact(part)
        assert lg.log_start_offset > 0
        assert await fetch(broker, stable=True) == {0: (-1, UNSTABLE), 1: (3, 0)}
        # The marker is in the log but not applied here yet: no compaction meanwhile.
        p = part.number
        info = lg.append_marker(2000, 0, ControlType.COMMIT, 0, leader_epoch=part.rep.leader_epoch)
        broker.replicas.appended(part.rep)
        assert not await store.compact(part)
        deadline = asyncio.get_running_loop().time() + BOUND_S
        while lg.high_watermark <= info.last_offset:
            assert asyncio.get_running_loop().time() < deadline, "marker acknowledged"
            await asyncio.sleep(0.01)
        broker.on_txn_marker(OFFSETS_TOPIC, p, 2000, ControlType.COMMIT)
        assert await fetch(broker, stable=True) == {0: (7, 0), 1: (3, 0)}
        assert await store.compact(part)
        # A transaction open across a compaction and a restart.
        assert await txn_commit(broker, 2001, {1: 9}) == {(TOPIC, 1): 0}
        assert await store.compact(part)
    async with broker_of_one(config) as broker:
        await ready(broker)
        assert await fetch(broker, stable=True) == {0: (7, 0), 1: (-1, UNSTABLE)}
        await marker(broker, 2001, ControlType.COMMIT)
        assert await fetch(broker, stable=True) == {0: (7, 0), 1: (9, 0)}
