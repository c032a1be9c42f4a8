"""``__transaction_state`` on the coordinator runtime: the transaction coordinator's layer on
``broker.coordinator_runtime`` (as ``broker.groups.replicated_offsets`` is the group
coordinator's).

The topic (``transaction.state.log.*`` settings of ``broker.transactions.config``) is
created on demand by the first FindCoordinator(TRANSACTION) that finds it missing; a
transactional id belongs to partition ``abs(hash) % partitions`` and that partition's
leader is its coordinator. Each partition this broker leads is a ``TxnShard``: its ops are
the topic's records (``log_codec``: key = the transactional id, value = its metadata, a
null value = the id expired). Loading replays the partition (``replay``: latest record per
id, tombstones forget) and hands the result to the coordinator (``on_load``) with the
partition's leader epoch as its *coordinator epoch*, which every marker it writes carries
(a partition leader refuses markers of an older coordinator epoch: a deposed coordinator
cannot finish a transaction its successor already finished). Compaction restates the
latest record of every live id (an expired id's tombstone is dropped with everything below
the dump: no older value of it survives).

Crash behaviour: a record is acknowledged once the high watermark passed it (acks=all); a
write that failed after its append stays in the log and counts on the next load, as in
Kafka. A coordinator that dies with a transaction in PrepareCommit/PrepareAbort leaves it so
in the log; its successor's load finds it there and writes its markers again (they are
idempotent at the partitions) before writing CompleteCommit/CompleteAbort.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from broker.coordinator_runtime.records import RECORD_OVERHEAD
from broker.coordinator_runtime.runtime import CoordinatorLog
from broker.coordinator_runtime.shard import CoordinatorShard, Naming, StateTopic
from broker.replica_manager import ReplicaManager
from broker.transactions.config import TransactionConfig
from broker.transactions.log_codec import UnknownKey, decode_key, decode_value, encode_record
from broker.transactions.partitioner import TRANSACTION_STATE_TOPIC
from broker.transactions.replay import Loaded, replay
from broker.transactions.state import TransactionMetadata

log = logging.getLogger("strata.transactions")

NAMING: Final = Naming(
    entities="transactional ids",
    records="transaction state",
    coordinator="transaction coordinator",
    replication_factor_setting="transaction.state.log.replication.factor",
    task_prefix="txn",
    watch_task="txn-state-leaders",
)

# How long a state write waits for acks=all (Kafka's coordinator uses request.timeout.ms;
# shorter here so that a client, whose own request timeout is 30 s, gets the error in time).
COMMIT_TIMEOUT_MS: Final = 5_000


def state_topic(config: TransactionConfig) -> StateTopic:
    """``__transaction_state`` with the broker's ``transaction.state.log.*`` settings."""
    return StateTopic(
        name=TRANSACTION_STATE_TOPIC,
        partitions=config.state_log_num_partitions,
        replication_factor=config.state_log_replication_factor,
        segment_bytes=config.state_log_segment_bytes,
        commit_timeout_ms=COMMIT_TIMEOUT_MS,
        naming=NAMING,
        min_isr=config.state_log_min_isr,
    )


@dataclass(frozen=True, slots=True)
class TxnOp:
    """One ``__transaction_state`` record: the id (None: a key of an unknown version,
    skipped as Kafka does), its encoded key and value (None: a tombstone)."""

    transactional_id: str | None
    key: bytes
    value: bytes | None

    @classmethod
    def of(cls, meta: TransactionMetadata, value_version: int) -> TxnOp:
        """The record stating ``meta`` (a tombstone for Dead)."""
        key, value = encode_record(meta, value_version)
        return cls(meta.transactional_id, key, value)


@dataclass(eq=False)
class TxnShard(CoordinatorShard[TxnOp]):
    """The transactional ids of one ``__transaction_state`` partition led here.

    Only the latest record of each id is kept (log order, writes in flight included):
    the dump, and what the load replays. The coordinator's view of the ids (with their
    pending transitions) is the ``TransactionCache``, installed from this at load and
    kept by the coordinator afterwards; so the durable state needs nothing here."""

    latest: dict[str, TxnOp] = field(default_factory=dict)
    live_bytes: int = 0
    unknown_keys: int = 0

    def apply_latest(self, op: TxnOp) -> None:
        tid = op.transactional_id
        if tid is None:
            return
        old = self.latest.pop(tid, None)
        if old is not None:
            self.live_bytes -= _size(old)
        if op.value is not None:
            self.latest[tid] = op
            self.live_bytes += _size(op)

    def apply_durable(self, op: TxnOp) -> None:
        pass  # readers use the coordinator's cache (class docstring)

    def decode(self, key: bytes, value: bytes | None) -> TxnOp:
        tid = decode_key(key)
        if isinstance(tid, UnknownKey):
            self.unknown_keys += 1
            return TxnOp(None, key, value)
        if value is not None:
            decode_value(tid, value)  # a malformed value fails the load here, with its partition
        return TxnOp(tid, key, value)

    def record(self, op: TxnOp) -> tuple[bytes, bytes | None]:
        return op.key, op.value

    def dump(self) -> list[TxnOp]:
        return list(self.latest.values())

    def live_size(self) -> int:
        return self.live_bytes

    def count(self) -> int:
        return len(self.latest)

    def loaded(self, now_ms: int) -> Loaded:
        """The partition's metadata as a replay of its records gives it (``replay``)."""
        return replay(((op.key, op.value) for op in self.latest.values()), now_ms)


def _size(op: TxnOp) -> int:
    return len(op.key) + len(op.value or b"") + RECORD_OVERHEAD


class TxnStateLog:
    """``__transaction_state`` partitions this broker leads (``CoordinatorLog``), for the
    transaction coordinator: ``on_load(shard)`` once a partition is replayed (before it
    serves), ``on_unload(shard)`` (returns how many ids it dropped) once it is lost."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        config: TransactionConfig,
        *,
        on_load: Callable[[TxnShard], None],
        on_unload: Callable[[TxnShard], int],
    ) -> None:
        self.topic = state_topic(config)
        self.runtime: CoordinatorLog[TxnOp, TxnShard] = CoordinatorLog(
            broker_id, replicas, self.topic, TxnShard, logger=log, on_load=on_load, on_unload=on_unload
        )

    def start(self) -> None:
        self.runtime.start()

    def close(self) -> None:
        self.runtime.close()

    def partition_count(self) -> int | None:
        return self.runtime.partition_count()

    async def ensure_topic(self) -> None:
        await self.runtime.ensure_topic()

    def leader_for(self, transactional_id: str) -> int:
        return self.runtime.leader_for(transactional_id)

    def coordinator_for(self, transactional_id: str) -> int:
        return self.runtime.coordinator_for(transactional_id)

    def shard_for(self, transactional_id: str) -> TxnShard | None:
        return self.runtime.shard_for(transactional_id)

    def shard(self, partition: int) -> TxnShard | None:
        return self.runtime.shard(partition)

    def shards(self) -> list[TxnShard]:
        return self.runtime.shards()

    def write(self, shard: TxnShard, meta: TransactionMetadata, value_version: int) -> asyncio.Future[None]:
        """Append ``meta``'s record (a tombstone for Dead) now; the future completes once
        it is acknowledged (acks=all), with the coordinator error Kafka gives otherwise."""
        return self.runtime.append(shard, [TxnOp.of(meta, value_version)])
