"""The sparse offset index of one segment (``<20-digit base offset>.index``).

File layout: a flat array of 8-byte entries, no header::

    offset  size  field
    0       4     relativeOffset  uint32 BE   batch base offset - segment base offset
    4       4     position        uint32 BE   byte position of that batch in the .log file

One entry is added per ``index.interval.bytes`` of log written; it points at the
start of a batch and records that batch's base offset. The first batch (position 0)
is never indexed: a lookup with no entry at or below the target starts at (base, 0).
The file exists once an entry was written or the segment was sealed (``IndexFile``):
a new partition's empty segment has a ``.log`` and no index files.
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
    """An append-only index file mirrored by in-memory arrays, holding no descriptor.

    Entries are kept in memory and written to the file only by ``write_pending`` (the
    log calls it when it flushes, seals or closes a segment), so an append costs no
    system call. The file is opened only for a write, a truncation or an fsync, and
    closed again at once: an idle partition's indexes cost no open file (Kafka maps
    its index files and closes the channel for the same reason). ``fsync`` syncs only
    what was written or truncated since the last one, through a descriptor opened for
    it (Linux syncs the inode's dirty pages whichever descriptor asks).

    The file is created at the first write of an entry, or empty by ``materialize``
    (a segment being sealed): a new or small active segment has none, and loading
    treats a missing file as "rebuild from the log", which for such a segment is the
    header scan a load does anyway. After a crash the file may lack its newest
    entries, be torn, or hold garbage: the load sanity check rejects anything
    inconsistent and the segment then rebuilds the index from the log; entries
    beyond the recovery point are always rebuilt by the recovery scan.
    """

    entry_size: int = 0

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._written = 0  # entries already in the file
        self.existed = os.path.exists(path)  # False: not created yet (or missing after a crash)
        self._on_disk = self.existed
        self._unsynced = False  # written or truncated since the last fsync

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

    def _open(self) -> int:
        """A descriptor of the file (created if missing); the caller closes it."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StorageError(f"cannot open index {self.path}: {e}") from e
        self._on_disk = True
        return fd

    def _read_file(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            self._on_disk = False
            return b""
        except OSError as e:
            raise StorageError(f"cannot read index {self.path}: {e}") from e
        self._on_disk = True
        return data

    def _load_bytes(self, data: bytes) -> None:
        self._set_from_bytes(data)
        self._written = len(self)

    def reset(self) -> None:
        """Drop every entry, in memory and on disk (before a rebuild)."""
        self._drop_from(0)
        self._truncate_file(0)

    def _truncate_file(self, entries: int) -> None:
        self._written = min(self._written, entries)
        if not self._on_disk:
            return
        try:
            os.truncate(self.path, entries * self.entry_size)
        except FileNotFoundError:
            self._on_disk = False
            return
        except OSError as e:
            raise StorageError(f"cannot truncate index {self.path}: {e}") from e
        self._unsynced = True

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
        data = self._pack_from(self._written)
        at = self._written * self.entry_size
        fd = self._open()
        try:
            done = os.pwrite(fd, data, at)
            while done < len(data):
                done += os.pwrite(fd, data[done:], at + done)
        except OSError as e:
            raise StorageError(f"cannot write index {self.path}: {e}") from e
        finally:
            os.close(fd)
        self._written = n
        self._unsynced = True

    def materialize(self) -> None:
        """Create the file if it does not exist yet (a segment being sealed: its index
        files are uploaded and renamed by path). The next ``fsync`` makes it durable."""
        if not self._on_disk:
            os.close(self._open())
            self._unsynced = True

    def fsync(self) -> None:
        """fsync what was written or truncated since the last call (nothing else can be
        unsynced: the file is written only through this object)."""
        if not self._unsynced:
            return
        fd = self._open()
        try:
            disk.fsync(fd)
        except OSError as e:
            raise StorageError(f"fsync of index {self.path} failed: {e}") from e
        finally:
            os.close(fd)
        self._unsynced = False

    def flush(self) -> None:
        self.write_pending()
        self.fsync()

    def close(self) -> None:
        """Write pending entries (no fsync: the caller flushed if it must). No descriptor
        is held between calls, so there is nothing else to close."""
        self.write_pending()

    def close_quietly(self) -> None:
        """Nothing to release (the segment is being deleted or the log failed)."""

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StorageError(f"cannot delete index {self.path}: {e}") from e
        self._on_disk = False

    def rename(self, new_path: str) -> None:
        try:
            os.rename(self.path, new_path)
        except FileNotFoundError:
            if self._on_disk:
                raise StorageError(f"cannot rename index {self.path}: it disappeared") from None
        except OSError as e:
            raise StorageError(f"cannot rename index {self.path}: {e}") from e
        self.path = new_path


class OffsetIndex(IndexFile):
    """Sparse map offset -> file position of one segment.

    File ``<20-digit base offset>.index``: 8-byte entries (relativeOffset uint32 BE,
    position uint32 BE), strictly increasing in both; created at its first entry written
    or when the segment is sealed. Crash: entries are buffered until the segment is
    flushed; a missing file, or one failing the load sanity check (size, order, positions
    within the log), is rebuilt from the log (see ``IndexFile``)."""

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
