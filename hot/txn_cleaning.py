"""What compaction does with transactions (Kafka's LogCleaner / CleanedTransactionMetadata),
shared by the local cleaner (hot.cleaner) and the remote compaction (tiering.compactor).
Pure, no I/O.

- A data batch of an aborted transaction is removed: its records never enter the offset
  map (an aborted value never shadows a committed one) and are dropped from the rewritten
  segment (its header alone stays where Kafka keeps it: the producer's last batch, so
  idempotent deduplication state survives).
- Markers (control batches) are kept. Kafka removes a marker once no data of its
  transaction remains and ``delete.retention.ms`` has passed; keeping them is the
  conservative part: consumers never see a marker, and the transaction index entry of an
  ABORT marker stays valid, so a read_committed fetch of data of that transaction outside
  the cleaned range (a spilled remote segment, or an older remote segment under a local
  cleaner) still filters it.
- A transactional batch belongs to an aborted transaction iff its producer has an aborted
  transaction (from the transaction indexes: ``AbortedTxn``) whose first offset is at or
  below the batch and whose ABORT marker is above it: a producer has at most one
  transaction open at a time and its marker ends it. Only decided transactions may be
  cleaned: the callers clean below the first unstable offset (a transaction still open
  could yet be aborted after its records shadowed older committed values).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Final

from hot.txn_index import AbortedTxn

_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20


class AbortedRanges:
    """The aborted transactions of a cleaning pass, by producer (module docstring)."""

    __slots__ = ("_firsts", "_lasts")

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        by_pid: dict[int, list[tuple[int, int]]] = {}
        for t in aborted:
            by_pid.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
        self._firsts: dict[int, list[int]] = {}
        self._lasts: dict[int, list[int]] = {}
        for pid, spans in by_pid.items():
            spans.sort()
            self._firsts[pid] = [f for f, _ in spans]
            self._lasts[pid] = [last for _, last in spans]

    def __bool__(self) -> bool:
        return bool(self._firsts)

    def spans(self) -> dict[int, tuple[list[int], list[int]]]:
        """Producer id -> (first offsets, marker offsets) of its aborted transactions, in
        order (for vectorized readers: spark.columnar)."""
        return {pid: (self._firsts[pid], self._lasts[pid]) for pid in self._firsts}

    def contains(self, producer_id: int, offset: int) -> bool:
        """Whether ``offset`` of the producer lies in one of its aborted transactions."""
        firsts = self._firsts.get(producer_id)
        if firsts is None:
            return False
        i = bisect.bisect_right(firsts, offset) - 1
        return i >= 0 and offset <= self._lasts[producer_id][i]

    def drops(self, attributes: int, producer_id: int, base_offset: int) -> bool:
        """Whether a batch (its header's attributes, producer id, base offset) is data of an
        aborted transaction, to be removed by compaction. Markers never are."""
        return (
            attributes & _TRANSACTIONAL_BIT != 0
            and attributes & _CONTROL_BIT == 0
            and producer_id >= 0
            and self.contains(producer_id, base_offset)
        )


__all__ = ["AbortedRanges"]
