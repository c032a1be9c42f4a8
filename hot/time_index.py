"""The sparse time index of one segment (``<20-digit base offset>.timeindex``).

File layout: a flat array of 12-byte entries, no header::

    offset  size  field
    0       8     timestamp       int64 BE    the segment's max timestamp so far
    8       4     relativeOffset  uint32 BE   base offset (relative) of the batch that raised it

Entries are added at the offset index's cadence, and only when the segment's max
timestamp grew since the last entry, so timestamps strictly increase. An entry
(T, o) promises that every batch with base offset <= o has maxTimestamp <= T.
"""

from __future__ import annotations

import bisect
import struct
from array import array
from typing import Final

from hot.offset_index import IndexFile

ENTRY: Final = struct.Struct(">qI")
ENTRY_SIZE: Final = ENTRY.size


class TimeIndex(IndexFile):
    """Sparse map max timestamp -> offset of one segment.

    File ``<20-digit base offset>.timeindex``: 12-byte entries (timestamp int64 BE,
    relativeOffset uint32 BE), timestamps strictly increasing. Same write and crash
    behaviour as the offset index (see ``IndexFile``): created at its first entry or at
    seal, no descriptor held, entries buffered until a flush, and a missing index or one
    failing the load sanity check is rebuilt from the log."""

    entry_size = ENTRY_SIZE

    def __init__(self, path: str, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._ts = array("q")
        self._rel = array("I")

    def __len__(self) -> int:
        return len(self._ts)

    def _pack_from(self, start: int) -> bytes:
        out = bytearray((len(self._ts) - start) * ENTRY_SIZE)
        pack = ENTRY.pack_into
        for i in range(start, len(self._ts)):
            pack(out, (i - start) * ENTRY_SIZE, self._ts[i], self._rel[i])
        return bytes(out)

    def _set_from_bytes(self, data: bytes) -> None:
        self._ts = array("q")
        self._rel = array("I")
        for ts, rel in ENTRY.iter_unpack(data):
            self._ts.append(ts)
            self._rel.append(rel)

    def _drop_from(self, n: int) -> None:
        del self._ts[n:]
        del self._rel[n:]

    def load(self, next_offset: int) -> str | None:
        """Read the file. Returns None if it passed the sanity check (timestamps increasing,
        offsets non-decreasing and below ``next_offset``), else why not (index left empty)."""
        data = self._read_file()
        reason = None
        if len(data) % ENTRY_SIZE:
            reason = f"size {len(data)} is not a multiple of {ENTRY_SIZE}"
        else:
            self._load_bytes(data)
            limit = next_offset - self.base_offset
            prev_ts = prev_rel = -1
            for i in range(len(self._ts)):
                ts, rel = self._ts[i], self._rel[i]
                if (i and ts <= prev_ts) or rel < prev_rel:
                    reason = f"entry {i} ({ts}, {rel}) does not increase"
                    break
                if rel >= limit:
                    reason = f"entry {i} names offset {self.base_offset + rel} at or past the segment end"
                    break
                prev_ts, prev_rel = ts, rel
        if reason is not None:
            self.reset()
        return reason

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add (timestamp, offset) if ``timestamp`` exceeds the last entry's. True if added."""
        if self._ts and timestamp <= self._ts[-1]:
            return False
        rel = offset - self.base_offset
        if self._rel and rel < self._rel[-1]:
            raise ValueError(f"time index entry ({timestamp}, {offset}) goes back in offsets")
        self._ts.append(timestamp)
        self._rel.append(rel)
        return True

    def lookup_before(self, timestamp: int) -> tuple[int, int] | None:
        """The last entry (timestamp, offset) whose timestamp is strictly below ``timestamp``:
        the answer for ``timestamp`` lies after that entry's batch. None if there is none."""
        i = bisect.bisect_left(self._ts, timestamp) - 1
        if i < 0:
            return None
        return self._ts[i], self.base_offset + self._rel[i]

    def last_entry(self) -> tuple[int, int] | None:
        if not self._ts:
            return None
        return self._ts[-1], self.base_offset + self._rel[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for offsets >= ``offset``."""
        self.truncate_entries(bisect.bisect_left(self._rel, max(0, offset - self.base_offset)))

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel, strict=True)]
