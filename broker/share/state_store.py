"""The share coordinator's persisted state (Kafka's ``__share_group_state``): one record per
share partition, keyed ``group:topic-id:partition``, on the coordinator runtime
(broker.coordinator_runtime), so it is replicated like any topic, loaded by each state
partition's new leader and compacted to the latest record per key.

Kafka writes a ShareSnapshot now and then and ShareUpdate deltas between; here every
write is a whole snapshot of the share partition (its state epoch, start offset and state
batches, JSON), which the runtime's compaction keeps to one per key. A partition's window
is at most ``group.share.partition.max.record.locks`` records, so a snapshot stays small.

A share partition's state is written by the broker leading the user partition, and read
when it starts serving it. Writes go through the local coordinator only: the state
partition of the key must be led by this broker (always so for a single node);
otherwise ``available`` is False and the share partition is kept in memory (see
docs/architecture.md: WriteShareGroupState between brokers is not served yet).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, Final

from broker.coordinator_runtime.runtime import CoordinatorLog
from broker.coordinator_runtime.shard import CoordinatorShard, Naming, StateTopic
from broker.partition_replica import PartitionReplica
from broker.replica_manager import ReplicaManager
from broker.share.config import SHARE_STATE_TOPIC
from broker.share.partition import RecordState, StateBatch
from hot.errors import CorruptRecordError, StrataError

log = logging.getLogger(__name__)

NAMING: Final = Naming(
    entities="share partitions",
    records="share-group state",
    coordinator="share coordinator",
    replication_factor_setting="share.coordinator.state.topic.replication.factor",
    task_prefix="shares",
    watch_task="shares-state-leaders",
)

LOAD_WAIT_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    state_epoch: int
    start: int
    batches: tuple[StateBatch, ...]

    def encode(self) -> bytes:
        return json.dumps(
            {
                "e": self.state_epoch,
                "s": self.start,
                "b": [[b.first, b.last, int(b.state), b.delivery_count] for b in self.batches],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> Snapshot:
        try:
            d: Any = json.loads(data)
            return cls(
                int(d["e"]),
                int(d["s"]),
                tuple(StateBatch(int(f), int(la), RecordState(int(st)), int(c)) for f, la, st, c in d["b"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(f"bad share-group state record: {exc}") from exc


Op = tuple[str, bytes | None]  # key, snapshot (None: the share partition was deleted)


class _StateShard(CoordinatorShard[Op]):
    def __init__(self, number: int, rep: PartitionReplica, epoch: int) -> None:
        super().__init__(number, rep, epoch)
        self.latest: dict[str, bytes] = {}
        self.durable: dict[str, bytes] = {}

    def apply_latest(self, op: Op) -> None:
        _apply(self.latest, op)

    def apply_durable(self, op: Op) -> None:
        _apply(self.durable, op)

    def decode(self, key: bytes, value: bytes | None) -> Op:
        return key.decode(), None if value is None else bytes(value)

    def record(self, op: Op) -> tuple[bytes, bytes | None]:
        return op[0].encode(), op[1]

    def dump(self) -> list[Op]:
        return list(self.latest.items())

    def live_size(self) -> int:
        return sum(len(k) + len(v) for k, v in self.latest.items())

    def count(self) -> int:
        return len(self.latest)


def _apply(state: dict[str, bytes], op: Op) -> None:
    key, value = op
    if value is None:
        state.pop(key, None)
    else:
        state[key] = value


def state_key(group_id: str, topic_id: str, partition: int) -> str:
    return f"{group_id}:{topic_id}:{partition}"


class ShareStateStore:
    """``__share_group_state`` on the coordinator runtime (module docstring)."""

    def __init__(
        self, broker_id: int, replicas: ReplicaManager, *, partitions: int = 8, replication_factor: int = 3
    ) -> None:
        topic = StateTopic(
            name=SHARE_STATE_TOPIC,
            partitions=partitions,
            replication_factor=replication_factor,
            segment_bytes=16 * 1024 * 1024,
            commit_timeout_ms=5000,
            naming=NAMING,
        )
        self.runtime: CoordinatorLog[Op, _StateShard] = CoordinatorLog(
            broker_id, replicas, topic, _StateShard, logger=log
        )
        self.broker_id = broker_id

    def start(self) -> None:
        self.runtime.start()

    def close(self) -> None:
        self.runtime.close()

    async def _shard(self, key: str) -> _StateShard | None:
        """The loaded local shard of ``key`` (creating the topic, waiting for a load in
        progress); None when another broker leads it."""
        await self.runtime.ensure_topic()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOAD_WAIT_S
        while True:
            shard = self.runtime.shard_for(key)
            if shard is not None:
                return shard
            try:
                if self.runtime.coordinator_for(key) != self.broker_id:
                    return None
            except StrataError:
                pass  # loading, or no leader yet
            if loop.time() > deadline:
                return None
            await asyncio.sleep(0.05)

    async def read(self, key: str) -> Snapshot | bool | None:
        """The key's snapshot, None when it has none, False when not led here."""
        shard = await self._shard(key)
        if shard is None:
            return False
        data = shard.durable.get(key)
        return None if data is None else Snapshot.decode(data)

    async def write(self, key: str, snapshot: Snapshot | None) -> bool:
        """Persist (acks=all) the key's snapshot; False when not led here."""
        shard = await self._shard(key)
        if shard is None:
            return False
        await self.runtime.append(shard, [(key, None if snapshot is None else snapshot.encode())])
        return True
