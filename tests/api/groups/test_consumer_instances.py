"""Consumer instances in-process over a real LogManager, Broker and GroupCoordinator:
idle expiry (consumer.instance.timeout.ms) with its auto-commit, and rejoining after the
coordinator dropped the member (a lost session)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from api.rest_consumers import (
    ConsumedRecord,
    ConsumerInstanceNotFoundError,
    ConsumerInstances,
    ConsumerInstancesConfig,
    InstanceSettings,
)
from api.stored_batches import StoredBatchError
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.groups.config import GroupConfig
from broker.groups.types import GroupState, MemberIdentity, TopicPartition
from hot.records import RecordInput, build_batch
from tests.hot.badbatch import malformed_batch
from tests.inprocess import broker_of_one, create_topic

pytestmark = pytest.mark.timeout(120)

FAST = ConsumerInstancesConfig(
    instance_timeout_ms=400, session_timeout_ms=6000, heartbeat_interval_ms=50, auto_commit_interval_ms=100
)


async def until(what: str, check: Callable[[], object], timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with broker_of_one(
        BrokerConfig(data_dir=tmp_path), groups=GroupConfig(initial_rebalance_delay_ms=0)
    ) as b:
        await create_topic(b, "t", 2)
        yield b


async def produce(broker: Broker, partition: int, values: list[bytes]) -> None:
    res = await broker.writes.produce(
        "t", partition, build_batch([RecordInput(None, v) for v in values]), acks=-1, timeout_ms=10_000
    )
    assert res.error is None


def values(records: list[ConsumedRecord]) -> list[bytes | None]:
    return [r.record.value for r in records]


async def test_idle_instance_expires_after_auto_committing(broker: Broker) -> None:
    coordinator = broker.groups
    assert coordinator is not None
    await produce(broker, 0, [b"a", b"b"])
    await produce(broker, 1, [b"c"])
    instances = ConsumerInstances(broker, FAST)
    inst = instances.create("g", InstanceSettings("x", auto_offset_reset="earliest"))
    inst.subscribe(["t"])
    got: list[ConsumedRecord] = []
    while len(got) < 3:
        got += await inst.fetch(200, 1 << 20, lambda r: r)
    assert sorted(values(got)) == [b"a", b"b", b"c"]  # type: ignore[type-var]
    assert len(coordinator.describe_group("g").members) == 1
    # Idle from now on: it expires, commits what it consumed and leaves.
    await until("the instance to expire", lambda: len(instances) == 0)
    with pytest.raises(ConsumerInstanceNotFoundError):
        instances.get("g", "x")
    await until("it to leave the group", lambda: coordinator.describe_group("g").members == ())
    assert inst.closed
    assert coordinator.describe_group("g").state is GroupState.EMPTY
    committed = coordinator.committed_offsets("g")
    assert {tp: o.offset for tp, o in committed.items()} == {
        TopicPartition("t", 0): 2,
        TopicPartition("t", 1): 1,
    }
    await instances.close()


async def test_instance_in_use_does_not_expire(broker: Broker) -> None:
    instances = ConsumerInstances(broker, FAST)
    inst = instances.create("g2", InstanceSettings("busy", auto_offset_reset="earliest"))
    inst.subscribe(["t"])
    # Long polls of 300 ms each, back to back, for longer than the 400 ms idle timeout.
    for _ in range(5):
        await inst.fetch(300, 1 << 20, lambda r: r)
    assert instances.get("g2", "busy") is inst
    await instances.close()
    assert inst.closed


async def test_rejoins_after_losing_its_membership(broker: Broker) -> None:
    coordinator = broker.groups
    assert coordinator is not None
    instances = ConsumerInstances(broker, FAST)
    inst = instances.create("g3", InstanceSettings("r", auto_offset_reset="earliest", auto_commit=False))
    inst.subscribe(["t"])
    await until("an assignment", lambda: len(inst.assignment()) == 2)
    old = inst.member_id
    # The coordinator forgets the member, as when its session timed out.
    [result] = coordinator.leave_group("g3", [MemberIdentity(old)])
    assert result.error is None
    await until("a new membership", lambda: inst.member_id not in ("", old) and len(inst.assignment()) == 2)
    assert [m.member_id for m in coordinator.describe_group("g3").members] == [inst.member_id]
    await produce(broker, 1, [b"after"])
    got: list[ConsumedRecord] = []
    while not got:
        got += await inst.fetch(200, 1 << 20, lambda r: r)
    assert values(got) == [b"after"]
    await instances.delete("g3", "r")
    assert coordinator.describe_group("g3").members == ()
    await instances.close()


async def test_close_while_the_first_join_waits_leaves_no_member(broker: Broker) -> None:
    """An instance deleted while its join is parked (the group waits for a slow member)
    must not stay in the group until a timeout."""
    coordinator = broker.groups
    assert coordinator is not None
    instances = ConsumerInstances(broker, FAST)
    a = instances.create("g4", InstanceSettings("a"))
    a.subscribe(["t"])
    await until("a to be assigned", lambda: len(a.assignment()) == 2)
    b = instances.create("g4", InstanceSettings("b"))
    b.subscribe(["t"])
    await until("b's join to be parked", lambda: len(coordinator.describe_group("g4").members) == 2)
    await instances.delete("g4", "b")
    await until(
        "a alone again", lambda: [m.client_id for m in coordinator.describe_group("g4").members] == ["a"]
    )
    await until("a to own everything again", lambda: len(a.assignment()) == 2)
    await instances.close()


async def test_leader_reassigns_when_subscribed_topics_appear_or_grow(broker: Broker) -> None:
    instances = ConsumerInstances(broker, FAST)
    inst = instances.create("g5", InstanceSettings("l", auto_offset_reset="earliest"))
    inst.subscribe(["later"])
    await until("a first (empty) generation", lambda: inst.generation_id >= 1)
    assert inst.assignment() == []
    await broker.admin_create_topic("later", 2)
    await until("the new topic assigned", lambda: len(inst.assignment()) == 2)
    await broker.admin_add_partitions("later", 3)
    await until("the new partition assigned", lambda: len(inst.assignment()) == 3)
    await instances.close()


async def test_a_stored_batch_that_does_not_decode_is_raised_once_reached(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """Everything before the bad batch is delivered, then StoredBatchError names it (also
    when another partition has records), until the instance seeks past it."""
    await produce(broker, 0, [b"a", b"b"])
    log = broker.manager.get_log("t", 0)
    bad = log.log_end_offset
    log.append_as_follower(malformed_batch(bad))
    log.flush()
    await produce(broker, 0, [b"c"])
    await produce(broker, 1, [b"x", b"y"])
    instances = ConsumerInstances(broker, FAST)
    inst = instances.create("gbad", InstanceSettings("i", auto_offset_reset="earliest", auto_commit=False))
    inst.subscribe(["t"])
    got: list[ConsumedRecord] = []
    with pytest.raises(StoredBatchError) as raised:
        for _ in range(50):
            got += await inst.fetch(200, 1 << 20, lambda r: r)
    assert sorted(values(got)) == [b"a", b"b", b"x", b"y"]  # type: ignore[type-var]
    message = str(raised.value)
    assert f"t-0 at offsets {bad}-{bad + 2} failed to decode" in message
    assert f"resume at offset {bad + 3}" in message and "`strata check t:0`" in message
    for _ in range(3):  # not skipped silently: raised again and again
        with pytest.raises(StoredBatchError):
            await inst.fetch(50, 1 << 20, lambda r: r)
    warnings = [r for r in caplog.records if r.name == "api.stored_batches" and r.levelname == "WARNING"]
    assert len(warnings) == 1 and f"offsets {bad}-{bad + 2}" in warnings[0].getMessage()
    await inst.seek({TopicPartition("t", 0): bad + 3})
    after: list[ConsumedRecord] = []
    while not after:
        after += await inst.fetch(200, 1 << 20, lambda r: r)
    assert values(after) == [b"c"]
    await instances.close()
