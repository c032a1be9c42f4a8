"""The coordinator runtime (broker.coordinator_runtime) with a trivial shard state, a
key/value register, on a real broker of one (embedded store, real replica manager):
the state topic is created on demand and loaded once led, writes are applied at append
(log order) and at acknowledgement (readers), a partition is unloaded when leadership is
in doubt and loaded again, and a compaction keeps exactly the live keys."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.coordinator_runtime.records import partition_for, record_size
from broker.coordinator_runtime.runtime import CoordinatorLog
from broker.coordinator_runtime.shard import CoordinatorShard, Naming, StateTopic
from broker.replica_manager import ReplicaManager
from hot.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError
from tests.inprocess import broker_of_one

TOPIC = "__register_state"
PARTITIONS = 2
BOUND_S = 20.0
log = logging.getLogger("tests.coordinator_runtime")

Op = tuple[bytes, bytes | None]  # (key, value or None: a tombstone)


@dataclass(eq=False)
class Register(CoordinatorShard[Op]):
    """The trivial coordinator: the latest value of each key."""

    latest: dict[bytes, bytes] = field(default_factory=dict)
    durable: dict[bytes, bytes] = field(default_factory=dict)
    live_bytes: int = 0

    def apply_latest(self, op: Op) -> None:
        key, value = op
        old = self.latest.pop(key, None)
        if old is not None:
            self.live_bytes -= record_size(key, old)
        if value is not None:
            self.latest[key] = value
            self.live_bytes += record_size(key, value)

    def apply_durable(self, op: Op) -> None:
        key, value = op
        if value is None:
            self.durable.pop(key, None)
        else:
            self.durable[key] = value

    def decode(self, key: bytes, value: bytes | None) -> Op:
        return key, value

    def record(self, op: Op) -> tuple[bytes, bytes | None]:
        return op

    def dump(self) -> list[Op]:
        return list(self.latest.items())

    def live_size(self) -> int:
        return self.live_bytes

    def count(self) -> int:
        return len(self.durable)


@dataclass
class Events:
    loaded: list[int] = field(default_factory=list)
    unloaded: list[int] = field(default_factory=list)


def runtime_of(
    replicas: ReplicaManager, events: Events, segment_bytes: int = 1 << 20
) -> CoordinatorLog[Op, Register]:
    topic = StateTopic(
        name=TOPIC,
        partitions=PARTITIONS,
        replication_factor=3,  # capped at the one live broker
        segment_bytes=segment_bytes,
        commit_timeout_ms=5000,
        naming=Naming(
            entities="keys",
            records="register state",
            coordinator="register coordinator",
            replication_factor_setting="register.replication.factor",
            task_prefix="register",
            watch_task="register-leaders",
        ),
    )

    def unloaded(part: Register) -> int:
        events.unloaded.append(part.number)
        return part.count()

    return CoordinatorLog(
        replicas.broker_id,
        replicas,
        topic,
        Register,
        logger=log,
        on_load=lambda part: events.loaded.append(part.number),
        on_unload=unloaded,
    )


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + BOUND_S
    while not check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)


def key_on(partition: int, i: int = 0) -> str:
    """The ``i``-th key name of the form k<n> that hashes to ``partition``."""
    found = [f"k{n}" for n in range(1000) if partition_for(f"k{n}", PARTITIONS) == partition]
    return found[i]


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with broker_of_one(BrokerConfig(data_dir=tmp_path / "data")) as b:
        yield b


def replicas_of(broker: Broker) -> ReplicaManager:
    replicas: ReplicaManager = broker.replicas
    return replicas


async def test_the_topic_is_created_on_demand_and_each_partition_loaded_once_led(broker: Broker) -> None:
    replicas = replicas_of(broker)
    events = Events()
    rt = runtime_of(replicas, events)
    try:
        with pytest.raises(CoordinatorNotAvailableError, match="does not exist yet"):
            rt.coordinator_for("k")
        await rt.ensure_topic()
        assert rt.partition_count() == PARTITIONS
        assert dict(broker.topic(TOPIC).configs)["min.insync.replicas"] == "1"
        # Led here but not loaded: nothing is loaded before the runtime follows the leaders.
        with pytest.raises(CoordinatorLoadInProgressError, match="loading the keys of"):
            rt.coordinator_for("k")
        rt.start()
        await until(lambda: rt.loads == PARTITIONS, "both partitions loaded")
        assert sorted(events.loaded) == [0, 1]
        me = rt.coordinator_for("k")
        assert rt.leader_for("k") == me
        part = rt.shard_for("k")
        assert part is not None and part.number == partition_for("k", PARTITIONS)
        await rt.append(part, [(b"k", b"v1")])
    finally:
        rt.close()
    # A new coordinator (a restart) replays the records written before.
    again = runtime_of(replicas, Events())
    try:
        again.start()
        await until(lambda: again.loads == PARTITIONS, "loaded again")
        part = again.shard_for("k")
        assert part is not None and part.durable == part.latest == {b"k": b"v1"}
    finally:
        again.close()


async def test_writes_apply_at_append_in_log_order_and_at_acknowledgement(broker: Broker) -> None:
    rt = runtime_of(replicas_of(broker), Events())
    try:
        await rt.ensure_topic()
        rt.start()
        await until(lambda: rt.loads == PARTITIONS, "loaded")
        key = key_on(0)
        part = rt.shard_for(key)
        assert part is not None
        k = key.encode()
        first = rt.append(part, [(k, b"1"), (b"other", b"x")])
        second = rt.append(part, [(k, b"2"), (b"other", None)])
        # Log order at once, writes in flight included; readers see nothing yet.
        assert part.latest == {k: b"2"} and part.durable == {}
        assert len(part.pending) == 2
        await second
        assert first.done() and first.exception() is None
        assert part.durable == {k: b"2"} and not part.pending
        end = part.rep.log.log_end_offset
        assert end == 4 and part.rep.log.high_watermark == end
        empty = rt.append(part, [])  # nothing to write: done at once, nothing appended
        assert empty.done() and part.rep.log.log_end_offset == end
    finally:
        rt.close()


async def test_a_partition_is_unloaded_when_leadership_is_in_doubt_and_loaded_again(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    replicas = replicas_of(broker)
    events = Events()
    rt = runtime_of(replicas, events)
    try:
        await rt.ensure_topic()
        rt.start()
        await until(lambda: rt.loads == PARTITIONS, "loaded")
        key = key_on(1)
        part = rt.shard_for(key)
        assert part is not None
        await rt.append(part, [(key.encode(), b"kept")])
        # Cut off from the metadata store: another broker may lead already.
        monkeypatch.setattr(replicas, "lease_alive", lambda: False)
        await until(lambda: sorted(events.unloaded) == [0, 1], "both partitions unloaded")
        assert rt.shard_for(key) is None and rt.shards() == []
        with pytest.raises(NotCoordinatorError, match="cannot confirm its cluster lease"):
            rt.coordinator_for(key)
        with pytest.raises(NotCoordinatorError, match="not the coordinator any more"):
            rt.append(part, [(key.encode(), b"lost")])  # the old shard writes nothing
        monkeypatch.undo()
        await until(lambda: rt.loads == 2 * PARTITIONS, "loaded again")
        again = rt.shard_for(key)
        assert again is not None and again is not part
        assert again.durable == {key.encode(): b"kept"}
    finally:
        rt.close()


async def test_a_compaction_keeps_the_live_keys_and_drops_the_rest(broker: Broker) -> None:
    replicas = replicas_of(broker)
    rt = runtime_of(replicas, Events(), segment_bytes=1024)
    try:
        await rt.ensure_topic()
        rt.start()
        await until(lambda: rt.loads == PARTITIONS, "loaded")
        key = key_on(0)
        found = rt.shard_for(key)
        assert found is not None
        part = found
        gone = b"deleted"
        await rt.append(part, [(gone, b"soon gone" * 10)])
        await rt.append(part, [(gone, None)])
        n = 0
        while rt.compactions == 0:
            assert n < 2000, "no compaction"
            await rt.append(part, [(key.encode(), b"%d" % n + b"." * 100), (b"fixed", b"f")])
            n += 1
        await until(lambda: part.compaction is None, "compaction finished")
        lg = part.rep.log
        assert lg.log_start_offset > 0 and part.compactions >= 1
        assert part.durable == part.latest == {key.encode(): b"%d" % (n - 1) + b"." * 100, b"fixed": b"f"}
        assert lg.segments()[0].base_offset == lg.log_start_offset  # the old segments are gone
        expected = dict(part.durable)
    finally:
        rt.close()
    # What survived the compaction replays to the same state, the deleted key still gone.
    again = runtime_of(replicas, Events(), segment_bytes=1024)
    try:
        again.start()
        await until(lambda: again.loads == PARTITIONS, "loaded again")
        replayed = again.shard_for(key)
        assert replayed is not None and replayed.durable == replayed.latest == expected
        assert gone not in replayed.durable
    finally:
        again.close()
