"""The coordinator's metadata of the ``__transaction_state`` partitions it leads (the cache of
Kafka's TransactionStateManager). In memory, no I/O, no clock.

A partition is first *loading* (from ``begin_loading``, for the leader epoch it was won
at, its coordinator epoch) until ``finish_loading`` hands it the replayed metadata; its
transactional ids meanwhile answer COORDINATOR_LOAD_IN_PROGRESS, and ids of partitions
this broker does not lead NOT_COORDINATOR. ``unload`` (leadership lost) drops a
partition, or cancels its load.

Writes follow ``state``'s protocol, each checked against the coordinator epoch it was
started under: ``start`` installs ``transit.before``; once the record is acknowledged
``complete`` installs the new metadata, or answers NOT_COORDINATOR if the partition was
unloaded or reloaded meanwhile (the successor has the record, or not, in its log: either
is consistent); ``abandon`` clears the pending state after a failed write. An
acknowledged Dead (an expired id's tombstone) removes the id.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from broker.transactions.partitioner import partition_for
from broker.transactions.replay import Loaded
from broker.transactions.state import (
    TransactionMetadata,
    TransactionState,
    Transit,
    abandon,
    complete,
)
from hot.errors import CoordinatorLoadInProgressError, NotCoordinatorError, TransactionalIdNotFoundError


@dataclass
class _Partition:
    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Listed:
    """One transaction of a ListTransactions answer."""

    transactional_id: str
    producer_id: int
    state: str  # Kafka's name of the state


class TransactionCache:
    """Every transactional id of the ``__transaction_state`` partitions this broker leads."""

    def __init__(self, num_partitions: int) -> None:
        if num_partitions <= 0:
            raise ValueError(f"{num_partitions} partitions")
        self.num_partitions = num_partitions
        self._loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self._partitions: dict[int, _Partition] = {}

    # --- leadership --------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This broker became the partition's leader at ``coordinator_epoch``: whatever it
        held of the partition is dropped, and its ids wait for ``finish_loading``."""
        self._partitions.pop(partition, None)
        self._loading[partition] = coordinator_epoch

    def finish_loading(
        self, partition: int, coordinator_epoch: int, loaded: Loaded
    ) -> tuple[Transit, ...] | None:
        """Serve the replayed partition. Returns the completions whose markers the caller
        writes now, or None if this load was cancelled or superseded (nothing installed)."""
        if self._loading.get(partition) != coordinator_epoch:
            return None
        del self._loading[partition]
        for tid in loaded.transactions:
            if partition_for(tid, self.num_partitions) != partition:
                raise ValueError(f"transactional id {tid!r} does not belong to partition {partition}")
        self._partitions[partition] = _Partition(coordinator_epoch, dict(loaded.transactions))
        return loaded.completions

    def unload(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """Leadership lost (at ``coordinator_epoch``, if known): forget the partition and
        cancel its load."""
        if coordinator_epoch is None or self._loading.get(partition) == coordinator_epoch:
            self._loading.pop(partition, None)
        self._partitions.pop(partition, None)

    def coordinator_epoch(self, partition: int) -> int | None:
        p = self._partitions.get(partition)
        return p.coordinator_epoch if p is not None else None

    @property
    def loading(self) -> bool:
        return bool(self._loading)

    # --- lookups -----------------------------------------------------------------------------

    def _partition(self, transactional_id: str) -> _Partition:
        n = self.partition_for(transactional_id)
        if n in self._loading:
            raise CoordinatorLoadInProgressError(f"__transaction_state-{n} is loading")
        p = self._partitions.get(n)
        if p is None:
            raise NotCoordinatorError(f"not the coordinator of __transaction_state-{n}")
        return p

    def get(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """(coordinator epoch, metadata or None) of an id this broker coordinates."""
        p = self._partition(transactional_id)
        return p.coordinator_epoch, p.transactions.get(transactional_id)

    def describe(self, transactional_id: str) -> TransactionMetadata:
        """DescribeTransactions: the id's metadata, TRANSACTIONAL_ID_NOT_FOUND if none."""
        meta = self._partition(transactional_id).transactions.get(transactional_id)
        if meta is None or meta.state is TransactionState.DEAD:
            raise TransactionalIdNotFoundError(f"transactional id {transactional_id!r} is not known")
        return meta

    def __iter__(self) -> Iterator[tuple[int, TransactionMetadata]]:
        """(coordinator epoch, metadata) of every id of the loaded partitions."""
        for p in list(self._partitions.values()):
            for meta in list(p.transactions.values()):
                yield p.coordinator_epoch, meta

    def list_transactions(
        self,
        *,
        states: Collection[str] = (),
        producer_ids: Collection[int] = (),
        min_duration_ms: int = -1,
        now_ms: int,
    ) -> tuple[list[Listed], list[str]]:
        """ListTransactions (KIP-664, KIP-994): the transactions matching every filter given
        (an empty filter matches all; ``min_duration_ms`` >= 0 keeps those open longer than
        it), and the state names it did not know. COORDINATOR_LOAD_IN_PROGRESS while any
        partition loads."""
        if self._loading:
            raise CoordinatorLoadInProgressError("transaction state partitions are loading")
        wanted = {s for s in map(TransactionState.from_name, states) if s is not None}
        unknown = [s for s in states if TransactionState.from_name(s) is None]
        out: list[Listed] = []
        for _, meta in self:
            if meta.state is TransactionState.DEAD:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if states and meta.state not in wanted:
                continue
            if min_duration_ms >= 0 and now_ms - meta.txn_start_timestamp_ms <= min_duration_ms:
                continue
            out.append(Listed(meta.transactional_id, meta.producer_id, meta.state.kafka_name))
        return out, unknown

    # --- writes -------------------------------------------------------------------------------

    def _owned(self, transactional_id: str, coordinator_epoch: int) -> _Partition:
        p = self._partitions.get(self.partition_for(transactional_id))
        if p is None or p.coordinator_epoch != coordinator_epoch:
            raise NotCoordinatorError(
                f"the coordinator epoch of {transactional_id!r} is no longer {coordinator_epoch}"
            )
        return p

    def start(self, transit: Transit, coordinator_epoch: int) -> None:
        """Install ``transit.before`` before its record is written."""
        tid = transit.before.transactional_id
        self._owned(tid, coordinator_epoch).transactions[tid] = transit.before

    def update(self, meta: TransactionMetadata, coordinator_epoch: int) -> None:
        """Replace an id's metadata without a write (a marker written: ``without_partition``)."""
        self._owned(meta.transactional_id, coordinator_epoch).transactions[meta.transactional_id] = meta

    def complete(self, transit: Transit, coordinator_epoch: int) -> TransactionMetadata | None:
        """``transit``'s record is acknowledged: the new metadata (None: the id expired)."""
        tid = transit.before.transactional_id
        p = self._owned(tid, coordinator_epoch)
        current = p.transactions.get(tid)
        if current is None:
            raise NotCoordinatorError(f"{tid!r} is no longer in the cache")
        if transit.after.state is TransactionState.DEAD:
            if current.pending_state is TransactionState.DEAD:
                del p.transactions[tid]
                return None
            raise NotCoordinatorError(f"{tid!r} changed while its tombstone was written")
        done = complete(current, transit)
        p.transactions[tid] = done
        return done

    def abandon(self, transit: Transit, coordinator_epoch: int) -> None:
        """``transit``'s write failed: clear the pending state (if the partition is still
        ours under the same epoch; otherwise there is nothing to clear)."""
        tid = transit.before.transactional_id
        p = self._partitions.get(self.partition_for(tid))
        if p is None or p.coordinator_epoch != coordinator_epoch:
            return
        current = p.transactions.get(tid)
        if current is not None:
            p.transactions[tid] = abandon(current, transit)
