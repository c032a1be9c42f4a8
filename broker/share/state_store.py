"""The share coordinator's persisted state (Kafka's ``__share_group_state``): one record per
share partition, keyed ``group:topic-id:partition``, on the coordinator runtime
(broker.coordinator_runtime), so it is replicated like any topic, loaded by each state
partition's new leader and compacted to the latest record per key.

Kafka writes a ShareSnapshot now and then and ShareUpdate deltas between; here every
write is a whole snapshot of the share partition (its state epoch, start offset and state
batches, JSON), which the runtime's compaction keeps to one per key. A partition's window
is at most ``group.share.partition.max.record.locks`` records, so a snapshot stays small.

A share partition's state is written by the broker leading the user partition (before
it answers acknowledgements) and read when it starts serving it, at the share
coordinator: the leader of the key's state partition, this broker or another one reached
with ReadShareGroupState / WriteShareGroupState over the replica listener. A coordinator
that moves or is loading is followed for up to ``RETRY_S``.

Fencing, as Kafka's share coordinator (ShareCoordinatorShard): each snapshot carries the
user partition's leader epoch of its writer and the state epoch. A read by a partition
leader in a newer leader epoch records that epoch (persisted, so it survives a failover
of the share coordinator); a read or write from an older leader epoch is
FENCED_LEADER_EPOCH (a deposed leader that has not noticed yet), a write with an older
state epoch than the stored one FENCED_STATE_EPOCH (AlterShareGroupOffsets reset the state
meanwhile). Unlike Kafka, a write with leader epoch -1 is the group coordinator's
AlterShareGroupOffsets (Kafka's InitializeShareGroupState, which Strata does not have as
a separate API): it is not leader-fenced and keeps the stored leader epoch.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

from broker.coordinator_runtime.runtime import CoordinatorLog
from broker.coordinator_runtime.shard import CoordinatorShard, Naming, StateTopic
from broker.partition_replica import PartitionReplica
from broker.replica_manager import ReplicaManager
from broker.share.config import SHARE_STATE_TOPIC
from broker.share.errors import FencedStateEpochError
from broker.share.partition import RecordState, StateBatch
from broker.transactions.markers import MarkerSendError
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptRecordError,
    FencedLeaderEpochError,
    NotCoordinatorError,
)
from kwire import ApiKey
from kwire import error_table as E
from kwire.error_table import error_for_code
from kwire.messages.share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteStateData,
    DeleteStatePartition,
    ReadShareGroupStateRequest,
    ReadStateData,
    ReadStatePartition,
    ShareStateBatch,
    WriteShareGroupStateRequest,
    WriteStateData,
    WriteStatePartition,
)

log = logging.getLogger(__name__)

NAMING: Final = Naming(
    entities="share partitions",
    records="share-group state",
    coordinator="share coordinator",
    replication_factor_setting="share.coordinator.state.topic.replication.factor",
    task_prefix="shares",
    watch_task="shares-state-leaders",
)

T = TypeVar("T")

RETRY_S: Final = 15.0  # how long a read or write follows a moving coordinator
RETRY_BACKOFF_S: Final = 0.1
CALL_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    state_epoch: int
    start: int
    batches: tuple[StateBatch, ...]
    # The user partition's leader epoch of the writer (-1: none, module docstring).
    leader_epoch: int = -1

    def encode(self) -> bytes:
        return json.dumps(
            {
                "e": self.state_epoch,
                "s": self.start,
                "b": [[b.first, b.last, int(b.state), b.delivery_count] for b in self.batches],
                "l": self.leader_epoch,
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
                int(d.get("l", -1)),  # absent in records written before leader epochs were kept
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


def state_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group_id}:{topic_id}:{partition}"


# A request to another broker: (broker id, api key, request, timeout s) -> response.
RemoteCall = Callable[[int, int, Any, float], Awaitable[Any]]

_RETRIABLE: Final = frozenset(
    {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS}
)


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
        # How to reach the coordinator on another broker (set by the process wiring).
        self.remote: Callable[[], RemoteCall | None] = lambda: None

    def start(self) -> None:
        self.runtime.start()

    def close(self) -> None:
        self.runtime.close()

    # -- the coordinator's side (this broker leads the key's state partition) ----------------

    def local_read(self, key: str) -> Snapshot | None:
        """The durable snapshot of ``key`` (None: none); the coordinator error when the key's
        state partition is not loaded here (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
        data = self._local_shard(key).durable.get(key)
        return None if data is None else Snapshot.decode(data)

    async def local_read_as_leader(self, key: str, leader_epoch: int) -> Snapshot | None:
        """``local_read`` for the partition leader in ``leader_epoch`` (-1: unfenced):
        FENCED_LEADER_EPOCH when a leader in a newer epoch read or wrote the state already;
        a newer epoch is recorded (appended, acks=all) before the state is returned, so
        the older leader's writes are fenced from then on."""
        shard = self._local_shard(key)
        current = shard.latest.get(key)
        if current is not None and leader_epoch >= 0:
            snap = Snapshot.decode(current)
            if snap.leader_epoch > leader_epoch:
                raise FencedLeaderEpochError(
                    f"share-group state of {key} is held by leader epoch {snap.leader_epoch}, "
                    f"not {leader_epoch}"
                )
            if snap.leader_epoch < leader_epoch:
                await self.runtime.append(shard, [(key, replace(snap, leader_epoch=leader_epoch).encode())])
        return self.local_read(key)

    async def local_write(self, key: str, snapshot: Snapshot) -> None:
        """Append the snapshot and wait for acks=all. FENCED_LEADER_EPOCH when a newer
        leader epoch read or wrote the state, then FENCED_STATE_EPOCH when the state has a
        newer state epoch (AlterShareGroupOffsets wrote it): the writer's copy is stale, as
        Kafka's share coordinator fences it. Leader epoch -1: AlterShareGroupOffsets
        (module docstring)."""
        await self._append_checked(self._local_shard(key), key, snapshot)

    def write_now(
        self, group_id: str, topic_id: uuid.UUID, partition: int, snapshot: Snapshot
    ) -> asyncio.Future[None] | None:
        """``write`` begun at once where this broker is the key's share coordinator (its
        state partition loaded): the snapshot is appended before this returns, so the flush
        round of the caller's loop iteration covers it while the caller goes on; the future
        completes once it is acknowledged. None where the write must go the long way
        (``write``: another coordinator, a loading or moving one). FENCED_* raised."""
        key = state_key(group_id, topic_id, partition)
        shard = self.runtime.shard_for(key)
        if shard is None:
            return None
        try:
            return self._append_checked(shard, key, snapshot)
        except (NotCoordinatorError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError):
            return None

    def _append_checked(self, shard: _StateShard, key: str, snapshot: Snapshot) -> asyncio.Future[None]:
        """``local_write``'s fencing, then the append (the future: its acknowledgement)."""
        current = shard.latest.get(key)
        if current is not None:
            stored = Snapshot.decode(current)
            if snapshot.leader_epoch < 0:
                snapshot = replace(snapshot, leader_epoch=stored.leader_epoch)
            elif stored.leader_epoch > snapshot.leader_epoch:
                raise FencedLeaderEpochError(
                    f"share-group state of {key} is held by leader epoch {stored.leader_epoch}, "
                    f"not {snapshot.leader_epoch}"
                )
            if stored.state_epoch > snapshot.state_epoch:
                raise FencedStateEpochError(f"share-group state of {key} has a newer state epoch")
        return self.runtime.append(shard, [(key, snapshot.encode())])

    async def local_delete(self, key: str) -> None:
        """Append a tombstone for ``key`` (when it has state) and wait for acks=all."""
        shard = self._local_shard(key)
        if key in shard.latest:
            await self.runtime.append(shard, [(key, None)])

    def _local_shard(self, key: str) -> _StateShard:
        shard = self.runtime.shard_for(key)
        if shard is not None:
            return shard
        node = self.runtime.coordinator_for(key)  # raises LOAD_IN_PROGRESS / NOT_COORDINATOR here
        raise NotCoordinatorError(f"the share coordinator of {key} is broker {node}")

    # -- the share-partition leader's side ---------------------------------------------------

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, leader_epoch: int = -1
    ) -> Snapshot | None:
        """The persisted snapshot (None: none); ``leader_epoch``: the reader leads the user
        partition in that epoch (``local_read_as_leader``), -1 for a summary read."""
        key = state_key(group_id, topic_id, partition)

        async def local() -> Snapshot | None:
            return await self.local_read_as_leader(key, leader_epoch)

        async def remote(call: RemoteCall, node: int) -> Snapshot | None:
            req = ReadShareGroupStateRequest(
                group_id=group_id,
                topics=(
                    ReadStateData(
                        topic_id=topic_id,
                        partitions=(ReadStatePartition(partition=partition, leader_epoch=leader_epoch),),
                    ),
                ),
            )
            resp = await call(node, ApiKey.READ_SHARE_GROUP_STATE, req, CALL_TIMEOUT_S)
            r = resp.results[0].partitions[0]
            _raise_for(r.error_code, r.error_message)
            if r.start_offset < 0:
                return None
            return Snapshot(
                r.state_epoch,
                r.start_offset,
                tuple(
                    StateBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count)
                    for b in r.state_batches
                ),
            )

        return await self._retrying(key, local, remote)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, snapshot: Snapshot) -> None:
        """Persist (acks=all at the share coordinator) the share partition's snapshot."""
        key = state_key(group_id, topic_id, partition)

        async def local() -> None:
            await self.local_write(key, snapshot)

        async def remote(call: RemoteCall, node: int) -> None:
            req = WriteShareGroupStateRequest(
                group_id=group_id,
                topics=(
                    WriteStateData(
                        topic_id=topic_id,
                        partitions=(
                            WriteStatePartition(
                                partition=partition,
                                state_epoch=snapshot.state_epoch,
                                leader_epoch=snapshot.leader_epoch,
                                start_offset=snapshot.start,
                                state_batches=tuple(
                                    ShareStateBatch(
                                        first_offset=b.first,
                                        last_offset=b.last,
                                        delivery_state=int(b.state),
                                        delivery_count=b.delivery_count,
                                    )
                                    for b in snapshot.batches
                                ),
                            ),
                        ),
                    ),
                ),
            )
            resp = await call(node, ApiKey.WRITE_SHARE_GROUP_STATE, req, CALL_TIMEOUT_S)
            r = resp.results[0].partitions[0]
            _raise_for(r.error_code, r.error_message)

        await self._retrying(key, local, remote)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """Tombstone (acks=all at the share coordinator) the share partition's state, as
        Kafka's share coordinator does for DeleteGroups and DeleteShareGroupOffsets."""
        key = state_key(group_id, topic_id, partition)

        async def local() -> None:
            await self.local_delete(key)

        async def remote(call: RemoteCall, node: int) -> None:
            req = DeleteShareGroupStateRequest(
                group_id=group_id,
                topics=(
                    DeleteStateData(
                        topic_id=topic_id, partitions=(DeleteStatePartition(partition=partition),)
                    ),
                ),
            )
            resp = await call(node, ApiKey.DELETE_SHARE_GROUP_STATE, req, CALL_TIMEOUT_S)
            r = resp.results[0].partitions[0]
            _raise_for(r.error_code, r.error_message)

        await self._retrying(key, local, remote)

    async def _retrying(
        self,
        key: str,
        local: Callable[[], Awaitable[T]],
        remote: Callable[[RemoteCall, int], Awaitable[T]],
    ) -> T:
        """At the key's coordinator, here or over the wire, retrying while it moves or
        loads (a failover), for up to RETRY_S; then the last error."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RETRY_S
        while True:
            try:
                await self.runtime.ensure_topic()
                node = self.runtime.coordinator_for(key)
                if node == self.broker_id:
                    return await local()
                call = self.remote()
                if call is None:
                    raise CoordinatorNotAvailableError(
                        f"no way to reach the share coordinator on broker {node}"
                    )
                return await remote(call, node)
            except (
                NotCoordinatorError,
                CoordinatorNotAvailableError,
                CoordinatorLoadInProgressError,
                MarkerSendError,
                TimeoutError,
                OSError,
            ) as exc:
                if loop.time() > deadline:
                    raise CoordinatorNotAvailableError(f"share-group state of {key}: {exc}") from exc
                await asyncio.sleep(RETRY_BACKOFF_S)


def _raise_for(code: int, message: str | None) -> None:
    if code == 0:
        return
    if code == E.NOT_COORDINATOR:
        raise NotCoordinatorError(message or "not the share coordinator")
    if code == E.COORDINATOR_LOAD_IN_PROGRESS:
        raise CoordinatorLoadInProgressError(message or "share coordinator loading")
    if code == E.COORDINATOR_NOT_AVAILABLE:
        raise CoordinatorNotAvailableError(message or "share coordinator not available")
    if code == FencedStateEpochError.kafka_code:
        raise FencedStateEpochError(message or "fenced state epoch")
    raise error_for_code(code, message)
