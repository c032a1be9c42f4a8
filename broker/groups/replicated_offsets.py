"""Consumer groups in cluster mode: offsets in the replicated ``__consumer_offsets`` topic.

As in Kafka, group ``g`` belongs to partition ``(String.hashCode(g) & 0x7fffffff) % N`` of
the internal topic ``__consumer_offsets`` (N = its partition count, fixed once the topic
exists), and that partition's leader is the group's coordinator. The topic runs on the
coordinator runtime (``broker.coordinator_runtime``: creation, loading, acks=all writes,
compaction, failover safety, all described there); this module is the groups' part.

* The topic is created on the first FindCoordinator that finds it missing:
  ``offsets.topic.num.partitions`` partitions, ``offsets.topic.replication.factor``
  replicas capped at the live brokers (with a warning), ``min.insync.replicas`` 2 when
  there are 3 replicas or more, no time or size retention, never tiered.
* Records are the single-node offsets log's (``broker.groups.offsets``: Kafka's own
  ``__consumer_offsets`` key and value schemas, uncompressed v2 batches without producer
  id), appended by the partition's leader in its epoch. A write (commit, OffsetDelete,
  DeleteGroups, group metadata, a deleted topic's tombstones) is acknowledged once the
  high watermark passed it (acks=all), within ``offsets.commit.timeout.ms``. Replication
  failures become the group errors Kafka gives: NOT_LEADER_OR_FOLLOWER and storage errors
  -> NOT_COORDINATOR; not enough replicas, timeouts and anything else ->
  COORDINATOR_NOT_AVAILABLE. A record whose write failed after the append stays in the
  log (as in Kafka) and counts on the next load.
* Loading: when this broker becomes leader of an offsets partition, it waits until the
  high watermark reaches the log end it found, replays the partition from its log start
  and hands its groups to the coordinator (Empty, as after a single-node restart). Until
  then the groups' requests get COORDINATOR_LOAD_IN_PROGRESS. Losing the lead (another
  leader or epoch, the replica dropped) unloads the partition's groups: parked
  JoinGroup/SyncGroup requests and later requests get NOT_COORDINATOR, and clients find
  the new coordinator. Requests for a group whose partition is not loaded here get
  NOT_COORDINATOR.
* Readers see only acknowledged state (applied in log order as acknowledgements arrive);
  ``has_offsets`` also counts writes in flight, as in the single-node store.
* Compaction: when a partition holds more than ``max(offsets.topic.segment.bytes, 2 x
  live bytes)``, its leader writes every live key (offsets and group metadata not
  tombstoned) again and moves its log start offset past the old records; followers
  follow.
* Topics deleted from the cluster get their offsets tombstoned in every partition led
  here, as Kafka does (the local delete listener only fires on brokers holding a replica
  of the topic).
* KIP-848 consumer groups (broker.groups.consumer_records): their ConsumerGroup*
  records are written here like offsets (``write_consumer``, acks=all before the
  heartbeat is answered), replayed with the partition and handed to the coordinator
  with it (``load_consumer_groups``): a new coordinator continues each group with its
  epochs, members and assignments.
* Transactional offsets (TxnOffsetCommit, KIP-447): one transactional batch with the
  producer's id and epoch (base sequence -1, origin COORDINATOR), acknowledged like any
  write, then held pending for that producer (broker.groups.txn_offsets) until its
  COMMIT or ABORT marker in the partition: replayed in log order at loading (a
  transaction still open at the end stays pending), applied through ``complete_txn``
  once WriteTxnMarkers has the marker acknowledged here (Broker.on_txn_marker). Every
  offset remembers its record's offset, so a COMMIT never overrides a plain commit
  written after the transactional one. Compaction restates pending offsets as
  transactional records of their producer, in their original order relative to the
  plain records (so a replay of the dump orders them the same), and waits while a
  marker is in the log but not yet applied here (the dump would restate offsets after
  their own marker).

Everything here runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Final

from broker.coordinator_runtime.records import RECORD_OVERHEAD, java_string_hash, partition_for
from broker.coordinator_runtime.runtime import CoordinatorLog, all_of
from broker.coordinator_runtime.shard import (
    MAX_MESSAGE_BYTES,
    CoordinatorShard,
    Naming,
    Producer,
    StateTopic,
    Write,
    coordinator_error,
    state_topic_configs,
)
from broker.groups.config import GroupConfig
from broker.groups.consumer_records import ConsumerKey, ConsumerValue
from broker.groups.coordinator import GroupCoordinator
from broker.groups.offsets import OFFSETS_TOPIC, Op, Value, decode_op, encode_ops
from broker.groups.offsets_codec import GroupKey, OffsetKey, RecordKey, encode_key
from broker.groups.txn_offsets import PendingOffset, PendingTxnOffsets
from broker.groups.types import OffsetAndMetadata, StoredGroup, TopicPartition
from broker.replica_manager import ReplicaManager
from hot.errors import NotCoordinatorError, NotLeaderError, StrataError

__all__ = [
    "MAX_MESSAGE_BYTES",
    "ClusterOffsetStore",
    "java_string_hash",
    "offsets_topic_configs",
    "partition_for",
    "replication_error",
]

log = logging.getLogger("strata.cluster.groups")

NAMING: Final = Naming(
    entities="groups",
    records="offsets",
    coordinator="group coordinator",
    replication_factor_setting="offsets.topic.replication.factor",
    task_prefix="groups",
    watch_task="groups-offsets-leaders",
)

# Kafka's names for what the runtime calls state topic configs and coordinator errors.
offsets_topic_configs = state_topic_configs


def replication_error(exc: BaseException) -> StrataError:
    """A replication failure of an offsets write as the group error Kafka answers."""
    return coordinator_error(exc, NAMING.records)


_Write = Write[Op]


@dataclass(eq=False)
class _Partition(CoordinatorShard[Op]):
    """The groups of one offsets partition this broker leads (in ``epoch``, on ``rep``)."""

    # Log order, writes in flight included: what a replay would rebuild, and the dump.
    offset_keys: dict[str, set[OffsetKey]] = field(default_factory=dict)
    group_keys: set[str] = field(default_factory=set)
    consumer_keys: dict[str, set[ConsumerKey]] = field(default_factory=dict)  # KIP-848 groups
    latest: dict[RecordKey, bytes] = field(default_factory=dict)  # live key -> its value
    live_bytes: int = 0  # about the size of a dump of every live key
    latest_at: dict[RecordKey, int] = field(default_factory=dict)  # live key -> its record's offset
    txn_latest: PendingTxnOffsets = field(default_factory=PendingTxnOffsets)
    # Acknowledged state: what readers see.
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, StoredGroup] = field(default_factory=dict)
    consumer: dict[str, dict[ConsumerKey, ConsumerValue]] = field(default_factory=dict)
    committed_at: dict[OffsetKey, int] = field(default_factory=dict)  # committed -> record offset
    txn_durable: PendingTxnOffsets = field(default_factory=PendingTxnOffsets)

    def apply_latest(self, op: Op) -> None:
        key, k, raw, _ = op
        old = self.latest.pop(key, None)
        if old is not None:
            self.live_bytes -= len(k) + len(old) + RECORD_OVERHEAD
        if raw is not None:
            self.latest[key] = raw
            self.live_bytes += len(k) + len(raw) + RECORD_OVERHEAD
        if isinstance(key, OffsetKey):
            keys = self.offset_keys.setdefault(key.group, set())
            if raw is None:
                keys.discard(key)
                if not keys:
                    del self.offset_keys[key.group]
            else:
                keys.add(key)
        elif isinstance(key, ConsumerKey):
            ckeys = self.consumer_keys.setdefault(key.group, set())
            if raw is None:
                ckeys.discard(key)
                if not ckeys:
                    del self.consumer_keys[key.group]
            else:
                ckeys.add(key)
        elif raw is None:
            self.group_keys.discard(key.group)
        else:
            self.group_keys.add(key.group)

    def apply_durable(self, op: Op) -> None:
        key, _, _, value = op
        if isinstance(key, OffsetKey):
            if isinstance(value, OffsetAndMetadata):
                self.offsets.setdefault(key.group, {})[key.topic_partition] = value
            else:
                offsets = self.offsets.get(key.group)
                if offsets is not None:
                    offsets.pop(key.topic_partition, None)
                    if not offsets:
                        del self.offsets[key.group]
        elif isinstance(key, ConsumerKey):
            records = self.consumer.setdefault(key.group, {})
            if value is None or isinstance(value, OffsetAndMetadata | StoredGroup):
                records.pop(key, None)
                if not records:
                    del self.consumer[key.group]
            else:
                records[key] = value
        elif isinstance(value, StoredGroup):
            self.groups[key.group] = value
        else:
            self.groups.pop(key.group, None)

    # --- transactional offsets (module docstring) ---------------------------------------------

    def apply_latest_at(self, op: Op, offset: int, producer: Producer | None) -> None:
        key, _, raw, value = op
        if producer is not None and isinstance(key, OffsetKey) and isinstance(value, OffsetAndMetadata):
            assert raw is not None
            self.txn_latest.add(producer[0], producer[1], key, PendingOffset(offset, raw, value))
            return
        self.apply_latest(op)
        if raw is None:
            self.latest_at.pop(key, None)
            if isinstance(key, OffsetKey):
                self.txn_latest.remove_key(key)
        else:
            self.latest_at[key] = offset

    def apply_durable_at(self, op: Op, offset: int, producer: Producer | None) -> None:
        key, _, raw, value = op
        if not isinstance(key, OffsetKey):
            self.apply_durable(op)
        elif producer is not None and isinstance(value, OffsetAndMetadata):
            assert raw is not None
            self.txn_durable.add(producer[0], producer[1], key, PendingOffset(offset, raw, value))
        else:
            self.apply_durable(op)
            if value is None:
                self.committed_at.pop(key, None)
                self.txn_durable.remove_key(key)
            else:
                self.committed_at[key] = offset

    def apply_marker(self, producer_id: int, commit: bool) -> None:
        """The producer's marker: COMMIT makes its pending offsets committed where their
        record is later than the committed offset's; ABORT drops them."""
        for key, p in self.txn_latest.complete(producer_id).items():
            if commit and self.latest_at.get(key, -1) < p.record_offset:
                self.apply_latest((key, encode_key(key), p.raw, p.value))
                self.latest_at[key] = p.record_offset
        for key, p in self.txn_durable.complete(producer_id).items():
            if commit and self.committed_at.get(key, -1) < p.record_offset:
                self.apply_durable((key, encode_key(key), p.raw, p.value))
                self.committed_at[key] = p.record_offset

    def dump_writes(self) -> list[tuple[Producer | None, list[Op]]]:
        """Every live key's latest record and every pending transactional offset, in their
        log order, cut where the transaction (or its absence) changes."""
        items: list[tuple[int, Producer | None, Op]] = [
            (self.latest_at.get(key, -1), None, (key, encode_key(key), raw, None))
            for key, raw in self.latest.items()
        ]
        items += [
            (p.record_offset, (pid, epoch), (key, encode_key(key), p.raw, p.value))
            for pid, epoch, key, p in self.txn_latest.entries()
        ]
        items.sort(key=lambda item: item[0])
        writes: list[tuple[Producer | None, list[Op]]] = []
        for _, producer, op in items:
            if writes and writes[-1][0] == producer:
                writes[-1][1].append(op)
            else:
                writes.append((producer, [op]))
        return writes

    def compactable(self) -> bool:
        """Not while a producer whose offsets are pending here has no open transaction in
        the log any more: its marker is written but not applied yet (Broker.on_txn_marker
        comes once it is acknowledged), and a dump would restate the offsets after it."""
        if not self.txn_latest.txns:
            return True
        entries = self.rep.log.producer_entries()
        for pid in self.txn_latest.txns:
            entry = entries.get(pid)
            if entry is None or entry.current_txn_first_offset < 0:
                return False
        return True

    def decode(self, key: bytes, value: bytes | None) -> Op:
        return decode_op(key, value)

    def record(self, op: Op) -> tuple[bytes, bytes | None]:
        return op[1], op[2]

    def dump(self) -> list[Op]:
        """Every live key's latest record (log order state), to append again."""
        return [(key, encode_key(key), raw, None) for key, raw in self.latest.items()]

    def live_size(self) -> int:
        return self.live_bytes + self.txn_latest.raw_bytes

    def count(self) -> int:
        return len(self.group_ids() | self.consumer.keys())

    def group_ids(self) -> Set[str]:
        return self.offsets.keys() | self.groups.keys() | self.txn_durable.groups()


class ClusterOffsetStore:
    """The ``OffsetStore`` and ``CoordinatorLocator`` of a cluster-mode broker (behaviour:
    module docstring). ``attach`` it to its coordinator, which then owns it (``close``)."""

    def __init__(self, broker_id: int, replicas: ReplicaManager, config: GroupConfig) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.view = replicas.view
        self.config = config
        self._coordinator: GroupCoordinator | None = None
        self._topics: set[str] | None = None  # the cluster's topics when last looked at
        topic = StateTopic(
            name=OFFSETS_TOPIC,
            partitions=config.offsets_topic_num_partitions,
            replication_factor=config.offsets_topic_replication_factor,
            segment_bytes=config.offsets_segment_bytes,
            commit_timeout_ms=config.offsets_commit_timeout_ms,
            naming=NAMING,
        )
        self.runtime: CoordinatorLog[Op, _Partition] = CoordinatorLog(
            broker_id,
            replicas,
            topic,
            _Partition,
            logger=log,
            on_load=self._loaded,
            on_unload=self._unloaded,
            on_watch=self._forget_deleted_topics,
        )

    @property
    def loads(self) -> int:
        """Partitions loaded since start (tests, logs)."""
        return self.runtime.loads

    @property
    def compactions(self) -> int:
        """Compactions done since start (tests, logs)."""
        return self.runtime.compactions

    # --- life cycle ----------------------------------------------------------------------------

    def attach(self, coordinator: GroupCoordinator) -> None:
        """Serve ``coordinator`` and start watching the offsets partitions' leaders."""
        self._coordinator = coordinator
        self.runtime.start()

    def close(self) -> None:
        self.runtime.close()

    # --- the topic and the locator ---------------------------------------------------------------

    def partition_count(self) -> int | None:
        return self.runtime.partition_count()

    async def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` if etcd has no such topic (any broker may; a
        concurrent creator wins and that is fine). CoordinatorNotAvailableError when it
        cannot be created now (no live broker, etcd unreachable)."""
        await self.runtime.ensure_topic()

    def leader_for(self, group_id: str) -> int:
        """The broker id etcd names leader of the group's offsets partition (FindCoordinator);
        CoordinatorNotAvailableError when the topic is missing or the partition has no
        live leader, or when that is this broker and it cannot confirm its lease."""
        return self.runtime.leader_for(group_id)

    def coordinator_for(self, group_id: str) -> int:
        """This broker when it leads and has loaded the group's partition; otherwise the
        leader etcd names (NOT_COORDINATOR follows), COORDINATOR_LOAD_IN_PROGRESS when
        that is this broker but loading is not done, NOT_COORDINATOR when it is this
        broker but its lease is in doubt (another may lead already)."""
        return self.runtime.coordinator_for(group_id)

    def partition_exists(self, topic: str, partition: int) -> bool:
        """OffsetCommit's check, against the cluster's topics (not just local replicas)."""
        va = self.view.topics.get(topic)
        return va is not None and 0 <= partition < va.value.partition_count

    # --- following the partitions (runtime callbacks) ---------------------------------------------

    def sync(self) -> None:
        """Unload partitions no longer led here; start loading newly led ones; delete the
        segments a compaction left below the log start offset."""
        self.runtime.sync()

    def _loaded(self, part: _Partition) -> None:
        if self._coordinator is not None:
            self._coordinator.load_groups(part.group_ids())
            self._coordinator.load_consumer_groups({g: dict(r) for g, r in part.consumer.items()})

    def _unloaded(self, part: _Partition) -> int:
        if self._coordinator is None:
            return 0
        n = self.partition_count()
        p = part.number
        # The partition count never changes once the topic exists.
        return self._coordinator.unload_groups(lambda gid: n is not None and partition_for(gid, n) == p)

    def _forget_deleted_topics(self) -> None:
        """Tombstone the offsets of topics deleted from the cluster, as Kafka does (the
        local delete listener only fires on brokers holding a replica of the topic)."""
        if not self.view.ready:
            return
        topics = set(self.view.topics)
        gone = self._topics - topics if self._topics is not None else set()
        self._topics = topics
        if self._coordinator is not None:
            for topic in sorted(gone):
                self._coordinator.on_topic_deleted(topic)

    # --- OffsetStore: reading --------------------------------------------------------------------

    def groups(self) -> Set[str]:
        out: set[str] = set()
        for part in self.runtime.shards():
            out |= part.group_ids()
        return out

    def group_metadata(self, group: str) -> StoredGroup | None:
        part = self.runtime.shard_for(group)
        return part.groups.get(group) if part is not None else None

    def committed(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        part = self.runtime.shard_for(group)
        return dict(part.offsets.get(group, {})) if part is not None else {}

    def has_offsets(self, group: str) -> bool:
        """Committed offsets or pending transactional ones, writes in flight included."""
        part = self.runtime.shard_for(group)
        return part is not None and (bool(part.offset_keys.get(group)) or part.txn_latest.has_group(group))

    def pending_transactional(self, group: str) -> Set[TopicPartition]:
        """The group's partitions with an acknowledged transactional offset whose
        transaction has not ended (OffsetFetch's UNSTABLE_OFFSET_COMMIT)."""
        part = self.runtime.shard_for(group)
        return part.txn_durable.partitions(group) if part is not None else set()

    # --- OffsetStore: writing --------------------------------------------------------------------

    def commit(self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> asyncio.Future[None]:
        return self._write(
            group, [(OffsetKey(group, tp.topic, tp.partition), v) for tp, v in offsets.items()]
        )

    def commit_transactional(
        self, group: str, producer: Producer, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> asyncio.Future[None]:
        """Append the offsets as one transactional batch of ``producer`` (id, epoch); once
        acknowledged they are pending until the producer's marker (``complete_txn``)."""
        items: list[tuple[RecordKey, Value | None]] = [
            (OffsetKey(group, tp.topic, tp.partition), v) for tp, v in offsets.items()
        ]
        return self.runtime.append(self._serving(group), encode_ops(items), producer=producer)

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's COMMIT or ABORT marker in offsets partition ``partition`` was
        acknowledged here: complete its pending offsets. NOT_LEADER_OR_FOLLOWER when the
        partition is not loaded here (not led, or still loading), as Kafka answers
        WriteTxnMarkers then: the transaction coordinator retries the marker, and a
        later load replays this one from the log anyway."""
        part = self.runtime.shard(partition)
        if part is None:
            raise NotLeaderError(f"{OFFSETS_TOPIC}-{partition} is not loaded on broker {self.broker_id}")
        self.runtime.settle_acknowledged(part)
        part.apply_marker(producer_id, commit)

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> asyncio.Future[None]:
        part = self._serving(group)
        # Pending transactional offsets get a tombstone too (it removes them), as in Kafka.
        keys = part.offset_keys.get(group, set()) | part.txn_latest.keys_of(group)
        doomed = [k for tp in partitions if (k := OffsetKey(group, tp.topic, tp.partition)) in keys]
        return self._write(group, [(k, None) for k in doomed])

    def delete_group(self, group: str) -> asyncio.Future[None]:
        part = self._serving(group)
        keys = part.offset_keys.get(group, set()) | part.txn_latest.keys_of(group)
        ops: list[tuple[RecordKey, Value | None]] = [(k, None) for k in sorted(keys)]
        if group in part.group_keys:
            ops.append((GroupKey(group), None))
        return self._write(group, ops)

    def store_group(self, group: str, value: StoredGroup) -> asyncio.Future[None]:
        return self._write(group, [(GroupKey(group), value)])

    def delete_topic(self, topic: str) -> asyncio.Future[None]:
        futs: list[asyncio.Future[None]] = []
        for part in self.runtime.shards():
            doomed = sorted(
                {k for keys in part.offset_keys.values() for k in keys if k.topic == topic}
                | {k for _, _, k, _ in part.txn_latest.entries() if k.topic == topic}
            )
            if doomed:
                futs.append(self.runtime.append(part, encode_ops((k, None) for k in doomed)))
        return all_of(futs)

    def write_consumer(
        self, group: str, items: list[tuple[ConsumerKey, ConsumerValue | None]]
    ) -> asyncio.Future[None]:
        """Append a KIP-848 group's changed records and tombstones (broker.groups.consumer_records)."""
        return self._write(group, list(items))

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The id the consumer group records name topic ``name`` by."""
        tid: uuid.UUID | None = self.view.topic_id(name)
        return tid

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        name: str | None = self.view.topic_name(topic_id)
        return name

    def _serving(self, group: str) -> _Partition:
        part = self.runtime.shard_for(group)
        if part is None:
            raise NotCoordinatorError(f"broker {self.broker_id} does not coordinate group {group!r}")
        return part

    def _write(self, group: str, items: list[tuple[RecordKey, Value | None]]) -> asyncio.Future[None]:
        """Append now (call order is log order); the future completes once acknowledged."""
        return self.runtime.append(self._serving(group), encode_ops(items))

    # --- compaction ------------------------------------------------------------------------------

    async def compact(self, part: _Partition) -> bool:
        """Compact one partition this broker leads (``CoordinatorLog.compact``)."""
        return await self.runtime.compact(part)
