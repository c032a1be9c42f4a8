"""The transaction index of one segment (``<20-digit base offset>.txnindex``), Kafka's
TransactionIndex: the aborted transactions whose ABORT marker lies in that segment.

File layout: a flat array of 34-byte entries, no header (Kafka's AbortedTxn)::

    offset  size  field
    0       2     version           int16 BE   0
    2       8     producerId        int64 BE
    10      8     firstOffset       int64 BE   the transaction's first data offset in the partition
    18      8     lastOffset        int64 BE   the offset of its ABORT marker
    26      8     lastStableOffset  int64 BE   the LSO when the marker was written: the first
                                               offset of the earliest other ongoing transaction,
                                               else lastOffset + 1

Entries are in marker order, so ``lastOffset`` strictly increases. A transaction may start
in an earlier segment than its marker: recovery rebuilds an index from the producer state
as of the segment's start (hot.producer_snapshots), never from the segment alone.

Write and crash behaviour: the file is created on the first entry (most segments never
hold an aborted transaction, and a missing file means "none"); each entry is written at
once (``pwrite`` at the tracked size), fsynced with the segment (``Segment.sync``) and so
durable once the segment is sealed. After a crash the file may end in a torn entry or lack
the newest ones: only the segments from the recovery point on can be affected, and
``hot.log_loader`` rebuilds those from the log. ``problem`` finds a damaged file below the
recovery point (torn tail, unknown version, entries out of order or outside the segment),
which the loader then also rebuilds.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from core import disk
from hot.errors import StorageError

ENTRY: Final = struct.Struct(">hqqqq")
ENTRY_SIZE: Final = ENTRY.size  # 34
ABORTED_TXN_VERSION: Final = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction of a partition (one transaction index entry)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(
            ABORTED_TXN_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )

    @staticmethod
    def decode(data: bytes | memoryview, pos: int = 0) -> tuple[int, AbortedTxn]:
        """(version, entry) of the 34 bytes at ``pos``."""
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        return version, AbortedTxn(pid, first, last, lso)


@dataclass(frozen=True, slots=True)
class TxnSearch:
    """What one segment's index gives a fetch: the overlapping aborted transactions, and
    whether the search is complete (an entry's LSO reached the upper bound, so no later
    segment can hold a transaction overlapping the range: Kafka's TxnIndexSearchResult)."""

    aborted: tuple[AbortedTxn, ...]
    complete: bool


def collect_aborted(entries: Sequence[AbortedTxn], fetch_offset: int, upper_bound_offset: int) -> TxnSearch:
    """The entries overlapping [fetch_offset, upper_bound_offset), and whether the search
    can stop here (Kafka's TransactionIndex.collectAbortedTxns). Pure: also used for the
    indexes of remote segments."""
    out: list[AbortedTxn] = []
    for t in entries:
        if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
            out.append(t)
        if t.last_stable_offset >= upper_bound_offset:
            return TxnSearch(tuple(out), True)
    return TxnSearch(tuple(out), False)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Every whole entry of a ``.txnindex`` file's bytes (a torn tail is ignored, as Kafka's
    reader does); ValueError for an entry of an unknown version."""
    out: list[AbortedTxn] = []
    for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, t = AbortedTxn.decode(data, pos)
        if version != ABORTED_TXN_VERSION:
            raise ValueError(f"entry at byte {pos} has version {version}, expected {ABORTED_TXN_VERSION}")
        out.append(t)
    return out


class TransactionIndex:
    """The ``.txnindex`` file of one segment, mirrored in memory (see the module docstring
    for the layout and crash behaviour). Not thread-safe: the owning Log serializes access."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd: int | None = None
        self._entries: list[AbortedTxn] = []
        self._size = 0  # bytes of whole entries in the file
        self._torn = 0  # bytes of a partial last entry found at open
        self._problem: str | None = None
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        except OSError as e:
            raise StorageError(f"cannot read transaction index {path}: {e}") from e
        self._torn = len(data) % ENTRY_SIZE
        self._size = len(data) - self._torn
        try:
            self._entries = decode_entries(data)
        except ValueError as e:
            self._problem = str(e)
            self._entries = []

    # --- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def exists(self) -> bool:
        return self._fd is not None or os.path.exists(self.path)

    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnSearch:
        return collect_aborted(self._entries, fetch_offset, upper_bound_offset)

    def problem(self, next_offset: int) -> str | None:
        """Why the file as opened cannot be trusted (None if it can): a torn tail, an
        unknown version, markers out of order or outside [base offset, ``next_offset``),
        a first offset after its marker. The loader rebuilds such an index from the log."""
        if self._problem is not None:
            return self._problem
        if self._torn:
            return f"{self._torn} bytes of a torn entry at its end"
        prev = -1
        for i, t in enumerate(self._entries):
            if not self.base_offset <= t.last_offset < next_offset:
                return f"entry {i}: marker offset {t.last_offset} outside the segment"
            if t.last_offset <= prev:
                return f"entry {i}: marker offset {t.last_offset} does not increase"
            if not 0 <= t.first_offset <= t.last_offset or t.last_stable_offset < 0:
                return f"entry {i}: offsets {t.first_offset}..{t.last_offset} (LSO {t.last_stable_offset})"
            prev = t.last_offset
        return None

    # --- writing ---------------------------------------------------------------------------

    def _writer(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as e:
                raise StorageError(f"cannot open transaction index {self.path}: {e}") from e
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (its marker must come after the last one's). StorageError on an I/O
        failure: the file may then hold part of the entry, so the caller takes the log
        offline and recovery rebuilds the index."""
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            last = self._entries[-1].last_offset
            raise ValueError(f"{self.path}: marker offset {txn.last_offset} does not follow {last}")
        data = txn.encode()
        fd = self._writer()
        try:
            if self._torn:
                os.ftruncate(fd, self._size)
                self._torn = 0
            n = os.pwrite(fd, data, self._size)
            if n != len(data):
                raise OSError(f"short write: {n} of {len(data)} bytes")
        except OSError as e:
            raise StorageError(f"write to {self.path} failed: {e}") from e
        self._size += len(data)
        self._entries.append(txn)

    def _truncate_entries(self, n: int) -> None:
        size = n * ENTRY_SIZE
        if size == self._size and not self._torn:
            del self._entries[n:]
            return
        try:
            if self._fd is not None:
                os.ftruncate(self._fd, size)
            elif os.path.exists(self.path):
                os.truncate(self.path, size)
        except OSError as e:
            raise StorageError(f"cannot truncate {self.path}: {e}") from e
        del self._entries[n:]
        self._size = size
        self._torn = 0
        self._problem = None

    def reset(self) -> None:
        """Drop every entry (a segment being recovered: its index is rebuilt from the log)."""
        self._truncate_entries(0)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (Kafka's truncateTo)."""
        n = len(self._entries)
        while n and self._entries[n - 1].last_offset >= offset:
            n -= 1
        self._truncate_entries(n)

    def fsync(self) -> None:
        if self._fd is None:
            return
        try:
            disk.fsync(self._fd)
        except OSError as e:
            raise StorageError(f"fsync of {self.path} failed: {e}") from e

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError as e:
                raise StorageError(f"cannot close {self.path}: {e}") from e

    def close_quietly(self) -> None:
        try:
            self.close()
        except StorageError:
            pass

    def delete(self) -> None:
        self.close_quietly()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(f"cannot delete {self.path}: {e}") from e


__all__ = [
    "ABORTED_TXN_VERSION",
    "ENTRY_SIZE",
    "AbortedTxn",
    "TransactionIndex",
    "TxnSearch",
    "collect_aborted",
    "decode_entries",
]
