"""The sparse offset index of one segment (``<20-digit base offset>.index``).

File layout: a flat array of 8-byte entries, no header::

    offset  size  field
    0       4     relativeOffset  uint32 BE   batch base offset - segment base offset
    4       4     position        uint32 BE   byte position of that batch in the .log file

One entry is added per ``index.interval.bytes`` of log written; it points at the
start of a batch and records that batch's base offset. The first batch (position 0)
is never indexed: a lookup with no entry at or below the target starts at (base, 0).
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from typing import Final

from core import disk
from hot.errors import StorageError

ENTRY: Final = struct.Struct(">II")
ENTRY_SIZE: Final = ENTRY.size
MAX_RELATIVE: Final = 0xFFFFFFFF


class IndexFile:
    """An append-only index file mirrored by in-memory arrays.

    Entries are kept in memory and written to the file only by ``write_pending`` (the
    log calls it when it flushes, seals or closes a segment), so an append costs no
    system call. After a crash the file may lack its newest entries, be torn, or hold
    garbage: the load sanity check rejects anything inconsistent and the segment then
    rebuilds the index from the log; entries beyond the recovery point are always
    rebuilt by the recovery scan.
    """

    entry_size: int = 0

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._written = 0  # entries already in the file
        self.existed = os.path.exists(path)  # False: created now (missing after a crash?)
        try:
            self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StorageError(f"cannot open index {path}: {e}") from e

    # --- subclass hooks ------------------------------------------------------------------

    def __len__(self) -> int:
        raise NotImplementedError

    def _pack_from(self, start: int) -> bytes:
        raise NotImplementedError

    def _set_from_bytes(self, data: bytes) -> None:
        raise NotImplementedError

    def _drop_from(self, n: int) -> None:
        raise NotImplementedError

    # --- file handling ---------------------------------------------------------------------

    def _require_fd(self) -> int:
        if self._fd is None:
            raise StorageError(f"index {self.path} is closed")
        return self._fd

    def _read_file(self) -> bytes:
        fd = self._require_fd()
        try:
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0)
        except OSError as e:
            raise StorageError(f"cannot read index {self.path}: {e}") from e
        return data

    def _load_bytes(self, data: bytes) -> None:
        self._set_from_bytes(data)
        self._written = len(self)

    def reset(self) -> None:
        """Drop every entry, in memory and on disk (before a rebuild)."""
        self._drop_from(0)
        self._truncate_file(0)

    def _truncate_file(self, entries: int) -> None:
        fd = self._require_fd()
        try:
            os.ftruncate(fd, entries * self.entry_size)
        except OSError as e:
            raise StorageError(f"cannot truncate index {self.path}: {e}") from e
        self._written = min(self._written, entries)

    def truncate_entries(self, n: int) -> None:
        """Keep the first ``n`` entries."""
        if n >= len(self):
            return
        self._drop_from(n)
        if n < self._written:
            self._truncate_file(n)

    def write_pending(self) -> None:
        """Write the entries added since the last call (no fsync)."""
        n = len(self)
        if self._written >= n:
            return
        fd = self._require_fd()
        data = self._pack_from(self._written)
        try:
            done = os.pwrite(fd, data, self._written * self.entry_size)
            while done < len(data):
                done += os.pwrite(fd, data[done:], self._written * self.entry_size + done)
        except OSError as e:
            raise StorageError(f"cannot write index {self.path}: {e}") from e
        self._written = n

    def fsync(self) -> None:
        fd = self._require_fd()
        try:
            disk.fsync(fd)
        except OSError as e:
            raise StorageError(f"fsync of index {self.path} failed: {e}") from e

    def flush(self) -> None:
        self.write_pending()
        self.fsync()

    def close(self) -> None:
        """Write pending entries and close the file (no fsync: the caller flushed if it must)."""
        if self._fd is None:
            return
        try:
            self.write_pending()
        finally:
            fd, self._fd = self._fd, None
            os.close(fd)

    def close_quietly(self) -> None:
        """Close without writing (the segment is being deleted or the log failed)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass

    def delete(self) -> None:
        self.close_quietly()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(f"cannot delete index {self.path}: {e}") from e

    def rename(self, new_path: str) -> None:
        try:
            os.rename(self.path, new_path)
        except OSError as e:
            raise StorageError(f"cannot rename index {self.path}: {e}") from e
        self.path = new_path


class OffsetIndex(IndexFile):
    """Sparse map offset -> file position of one segment.

    File ``<20-digit base offset>.index``: 8-byte entries (relativeOffset uint32 BE,
    position uint32 BE), strictly increasing in both. Crash: entries are buffered until
    the segment is flushed; a file failing the load sanity check (size, order, positions
    within the log) is rebuilt from the log (see ``IndexFile``)."""

    entry_size = ENTRY_SIZE

    def __init__(self, path: str, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._rel = array("I")
        self._pos = array("I")

    def __len__(self) -> int:
        return len(self._rel)

    def _pack_from(self, start: int) -> bytes:
        out = bytearray((len(self._rel) - start) * ENTRY_SIZE)
        pack = ENTRY.pack_into
        for i in range(start, len(self._rel)):
            pack(out, (i - start) * ENTRY_SIZE, self._rel[i], self._pos[i])
        return bytes(out)

    def _set_from_bytes(self, data: bytes) -> None:
        values = struct.unpack(f">{len(data) // 4}I", data)
        self._rel = array("I", values[0::2])
        self._pos = array("I", values[1::2])

    def _drop_from(self, n: int) -> None:
        del self._rel[n:]
        del self._pos[n:]

    def load(self, log_size: int) -> str | None:
        """Read the file. Returns None if it passed the sanity check, else why it did not
        (the index is then left empty, ready for a rebuild)."""
        data = self._read_file()
        reason = None
        if len(data) % ENTRY_SIZE:
            reason = f"size {len(data)} is not a multiple of {ENTRY_SIZE}"
        else:
            self._load_bytes(data)
            prev_rel = prev_pos = -1
            for i in range(len(self._rel)):
                rel, pos = self._rel[i], self._pos[i]
                if rel <= prev_rel or pos <= prev_pos:
                    reason = f"entry {i} ({rel}, {pos}) does not increase"
                    break
                if pos >= log_size:
                    reason = f"entry {i} points at position {pos} past the log end {log_size}"
                    break
                prev_rel, prev_pos = rel, pos
        if reason is not None:
            self.reset()
        return reason

    def append(self, offset: int, position: int) -> None:
        """Add an entry for the batch with base ``offset`` starting at ``position``."""
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not follow the last one")
        self._rel.append(rel)
        self._pos.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below ``offset``, else (base, 0)."""
        i = bisect.bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below file ``position``, else (base, 0)."""
        i = bisect.bisect_right(self._pos, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def last_entry(self) -> tuple[int, int]:
        if not self._rel:
            return self.base_offset, 0
        return self.base_offset + self._rel[-1], self._pos[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for offsets >= ``offset``."""
        self.truncate_entries(bisect.bisect_left(self._rel, max(0, offset - self.base_offset)))

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos, strict=True)]
