"""Transactional offset commits waiting for their transaction's end (KIP-98, KIP-447;
Kafka's OffsetMetadataManager.pendingTransactionalOffsets).

TxnOffsetCommit writes a producer's offsets to the group's ``__consumer_offsets``
partition in a transactional batch (the producer's id and epoch). They are held here,
per producer id, apart from the committed offsets: OffsetFetch does not return them (and
answers UNSTABLE_OFFSET_COMMIT for their partitions when asked for stable offsets), until
the producer's marker in that partition: COMMIT makes them committed offsets, ABORT drops
them. Pure state, no I/O; one ``PendingTxnOffsets`` per state of a partition (the
log-order one and the durable one, broker.groups.replicated_offsets).

Ordering with plain commits, as Kafka does: every offset remembers the offset of the
record that wrote it, and at COMMIT a transactional offset replaces the committed one only
if its record is the later one in the log (a plain commit written after the
TxnOffsetCommit, before the marker, wins). A tombstone of a key (OffsetDelete,
DeleteGroups, expiry, a deleted topic) removes it from every open transaction too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from broker.groups.offsets_codec import OffsetKey
from broker.groups.types import OffsetAndMetadata, TopicPartition


@dataclass(frozen=True, slots=True)
class PendingOffset:
    """One transactional offset: the record that wrote it and its value."""

    record_offset: int
    raw: bytes
    value: OffsetAndMetadata


@dataclass(eq=False)
class OpenTxn:
    """The pending offsets of one producer's open transaction in a partition."""

    epoch: int  # the producer epoch of its latest write (a dump restates them in it)
    offsets: dict[OffsetKey, PendingOffset] = field(default_factory=dict)


@dataclass(eq=False)
class PendingTxnOffsets:
    """Open transactions' offsets of one partition, by producer id (module docstring)."""

    txns: dict[int, OpenTxn] = field(default_factory=dict)
    raw_bytes: int = 0  # keys and values held, about what a dump of them takes

    def add(self, producer_id: int, epoch: int, key: OffsetKey, pending: PendingOffset) -> None:
        txn = self.txns.get(producer_id)
        if txn is None:
            txn = self.txns[producer_id] = OpenTxn(epoch)
        txn.epoch = max(txn.epoch, epoch)
        old = txn.offsets.pop(key, None)
        if old is not None:
            self.raw_bytes -= _key_bytes(key) + len(old.raw)
        txn.offsets[key] = pending
        self.raw_bytes += _key_bytes(key) + len(pending.raw)

    def complete(self, producer_id: int) -> dict[OffsetKey, PendingOffset]:
        """Take the producer's offsets out (its marker came): empty when it has none."""
        txn = self.txns.pop(producer_id, None)
        if txn is None:
            return {}
        self.raw_bytes -= sum(_key_bytes(k) + len(p.raw) for k, p in txn.offsets.items())
        return txn.offsets

    def remove_key(self, key: OffsetKey) -> None:
        """A tombstone of ``key``: gone from every open transaction."""
        for pid in list(self.txns):
            txn = self.txns[pid]
            old = txn.offsets.pop(key, None)
            if old is not None:
                self.raw_bytes -= _key_bytes(key) + len(old.raw)
            # The transaction stays open (its marker is still to come) even when empty.

    def has(self, group: str, tp: TopicPartition) -> bool:
        key = OffsetKey(group, tp.topic, tp.partition)
        return any(key in txn.offsets for txn in self.txns.values())

    def partitions(self, group: str) -> set[TopicPartition]:
        """The group's partitions with a pending transactional offset."""
        return {k.topic_partition for txn in self.txns.values() for k in txn.offsets if k.group == group}

    def has_group(self, group: str) -> bool:
        return any(k.group == group for txn in self.txns.values() for k in txn.offsets)

    def groups(self) -> set[str]:
        return {k.group for txn in self.txns.values() for k in txn.offsets}

    def keys_of(self, group: str) -> set[OffsetKey]:
        return {k for txn in self.txns.values() for k in txn.offsets if k.group == group}

    def entries(self) -> Iterator[tuple[int, int, OffsetKey, PendingOffset]]:
        """(producer id, epoch, key, pending offset) of every open transaction's offset."""
        for pid, txn in self.txns.items():
            for key, p in txn.offsets.items():
                yield pid, txn.epoch, key, p


def _key_bytes(key: OffsetKey) -> int:
    # About the encoded key's size (version, group, topic, partition), for the dump estimate.
    return 2 + 2 + len(key.group) + 2 + len(key.topic) + 4
