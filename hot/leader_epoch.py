"""Leader-epoch cache of one partition (KIP-101/KIP-279) and its ``leader-epoch-checkpoint`` file.

A partition's history is a sequence of leader epochs; every batch carries, in its
``partitionLeaderEpoch`` header field, the epoch of the leader that appended it. The
cache remembers where each epoch starts: entries ``(epoch, start_offset)`` with both
strictly increasing. The end offset of an epoch is the start offset of the next
higher epoch, or the log end offset for the latest one. Replicas compare these
(OffsetForLeaderEpoch) to find where their logs diverge, instead of trusting the
high watermark (the KIP-101 data-loss bug).

File ``<partition dir>/leader-epoch-checkpoint``, ASCII text, Kafka's
LeaderEpochCheckpointFile format::

    0\\n                        format version (only 0 exists)
    <N>\\n                      number of entries
    <epoch> <start offset>\\n   N lines, one space between, epochs and offsets increasing

Crash behaviour: every change replaces the whole file atomically (``<name>.tmp``,
rename), so a reader sees the old or the new version, never a mix; as in Kafka since
KAFKA-15046, without fsync: ``sync`` (fsync of the file and the directory) runs before
the log's recovery point is persisted past it (``LocalLog.before_recovery_point``).
An entry a new leader records at its log end before any batch of its epoch
(``assign(..., defer=True)``, ``Log.assign_leader_epoch``) is not even written then, only
by ``sync`` or the next change: opening a log drops every entry starting at or beyond its
log end (below), so until a batch of that epoch exists the file's having the entry
changes no outcome, and once one exists the file stands as if its unsynced write were
lost, which recovery repairs from the batch headers. Becoming leader of thousands of new
partitions so creates no file (issue 35: each file creation costs this machine's kernel
about a millisecond, and makeLeader runs on the event loop).
After a crash the file can therefore disagree with the log in two ways, both repaired
when the log opens: it may name epochs starting at or beyond the recovered log end (an
entry is written before the batches it describes, and a truncation cuts the log before
the cache): the cache is truncated to the log end; or it may lack entries (an old
version came back, or an empty or partial file): only for batches above the persisted
recovery point, whose epochs recovery reads from their headers (``assign_if_newer``).
A file that does not parse (``CorruptLogError`` from ``decode``) or is missing is
rebuilt from every batch's ``partitionLeaderEpoch``.

Not thread-safe: the owning ``Log`` serializes every call under its lock.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from core import disk
from hot.errors import CorruptLogError, InvalidRequestError, StorageError
from hot.local_log import atomic_write, fsync_dir

logger = logging.getLogger(__name__)

CHECKPOINT_FILE: Final = "leader-epoch-checkpoint"
CHECKPOINT_VERSION: Final = 0
UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1
_MAX_FILE_BYTES: Final = 64 * 1024 * 1024  # far beyond any real history; refuses garbage


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    """Leader epoch ``epoch`` starts at offset ``start_offset``."""

    epoch: int
    start_offset: int


def end_offset_for(
    entries: Sequence[EpochEntry], requested_epoch: int, log_end_offset: int
) -> tuple[int, int]:
    """(epoch, end offset) answering OffsetForLeaderEpoch(``requested_epoch``) for a replica
    whose epochs are ``entries`` (ascending) and whose log ends at ``log_end_offset``.

    Kafka's LeaderEpochFileCache.endOffsetFor after KIP-279 / KAFKA-7415:

    * requested is the latest epoch: (requested, log end offset);
    * otherwise, with H the first entry whose epoch is above requested:
      no H (empty cache, or requested above every epoch): (-1, -1) undefined;
      no entry at or below requested (it predates the cache, e.g. trimmed by
      retention): (requested, H.start_offset), so a follower restarts at the
      leader's first known epoch;
      else (F.epoch, H.start_offset) with F the last entry at or below requested,
      the largest epoch the replica knows that is <= requested and where it ended.

    A negative requested epoch is undefined (-1, -1); Kafka checks -1 only, but no other
    negative epoch can name anything.
    """
    if requested_epoch < 0 or not entries:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if entries[-1].epoch == requested_epoch:
        return requested_epoch, log_end_offset
    i = bisect.bisect_right(entries, requested_epoch, key=lambda e: e.epoch)
    if i == len(entries):
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    higher = entries[i]
    if i == 0:
        return requested_epoch, higher.start_offset
    return entries[i - 1].epoch, higher.start_offset


def encode(entries: Iterable[EpochEntry]) -> bytes:
    """The checkpoint file's bytes for ``entries``."""
    items = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(items))]
    lines.extend(f"{e.epoch} {e.start_offset}" for e in items)
    return ("\n".join(lines) + "\n").encode("ascii")


def _parse_int(text: str) -> int | None:
    # Plain decimal digits only: int() would also take "+1", " 1", "1_0" or non-ASCII digits.
    if not text or not text.isascii() or not text.isdigit() or len(text) > 19:
        return None
    return int(text)


def decode(data: bytes, path: str = "<leader-epoch-checkpoint>") -> list[EpochEntry]:
    """Parse a checkpoint file. Anything but exactly the layout in the module docstring,
    with epochs and start offsets strictly increasing, is CorruptLogError (the ``position``
    it carries is the line number, counted from 1)."""

    def bad(line: int, reason: str) -> CorruptLogError:
        return CorruptLogError(path, line, reason, what="line")

    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as e:
        raise bad(0, f"not ASCII text: {e}") from None
    if not text.endswith("\n"):
        raise bad(0, "missing final newline (truncated file)")
    lines = text[:-1].split("\n")
    if len(lines) < 2:
        raise bad(len(lines), "missing the version or the entry count line")
    version = _parse_int(lines[0])
    if version != CHECKPOINT_VERSION:
        raise bad(1, f"unknown version {lines[0][:20]!r} (expected {CHECKPOINT_VERSION})")
    count = _parse_int(lines[1])
    if count is None:
        raise bad(2, f"bad entry count {lines[1][:20]!r}")
    if count != len(lines) - 2:
        raise bad(2, f"entry count {count} but the file holds {len(lines) - 2} entry lines")
    out: list[EpochEntry] = []
    for n, line in enumerate(lines[2:], start=3):
        parts = line.split(" ")
        epoch = _parse_int(parts[0]) if len(parts) == 2 else None
        start = _parse_int(parts[1]) if len(parts) == 2 else None
        if epoch is None or start is None or epoch >= 1 << 31:
            raise bad(n, f"malformed entry {line[:40]!r} (expected '<epoch> <start offset>')")
        if out and (epoch <= out[-1].epoch or start <= out[-1].start_offset):
            raise bad(n, f"entry {epoch} {start} does not follow {out[-1].epoch} {out[-1].start_offset}")
        out.append(EpochEntry(epoch, start))
    return out


class LeaderEpochCache:
    """The epochs of one partition, ascending, mirrored to ``leader-epoch-checkpoint``.

    Every method that changes the entries rewrites the file before it returns (layout and
    crash behaviour in the module docstring) and returns whether anything changed. With
    ``path=None`` the cache lives in memory only (pure computations and tests).
    A failed write raises StorageError; the memory already holds the change, and the
    owning log goes offline.
    """

    def __init__(self, path: str | None, entries: Iterable[EpochEntry] = ()) -> None:
        self.path = path
        self._unsynced = False  # the file on disk may lag the entries: ``sync`` makes it durable
        self._unwritten = False  # the file lags the entries (a deferred ``assign``): ``sync`` writes it
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for e in entries:
            if e.epoch < 0 or e.start_offset < 0:
                raise InvalidRequestError(f"negative leader epoch entry {e}")
            if self._epochs and (e.epoch <= self._epochs[-1] or e.start_offset <= self._starts[-1]):
                raise InvalidRequestError(f"leader epoch entries are not increasing at {e}")
            self._epochs.append(e.epoch)
            self._starts.append(e.start_offset)

    # --- the file -------------------------------------------------------------------------------

    @staticmethod
    def read(path: str) -> list[EpochEntry] | None:
        """The entries stored at ``path``; None if there is no file. CorruptLogError if it
        does not parse, StorageError if it cannot be read."""
        try:
            with open(path, "rb") as f:
                data = f.read(_MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e}") from e
        if len(data) > _MAX_FILE_BYTES:
            raise CorruptLogError(path, 0, f"file larger than {_MAX_FILE_BYTES} bytes", what="line")
        return decode(data, path)

    def _persist(self) -> None:
        # Written without fsync (Kafka since KAFKA-15046): a new leader of thousands of
        # partitions would otherwise wait for two fsyncs each. ``sync`` makes it durable
        # before the log's recovery point passes any entry (see the crash behaviour above).
        if self.path is None:
            return
        atomic_write(self.path, encode(self.entries()), sync=False)
        self._unwritten = False
        self._unsynced = True

    def sync(self) -> None:
        """Make the file durable as the entries are now, writing it first if an ``assign``
        deferred that (no-op if it is durable already)."""
        if not self._unsynced or self.path is None:
            return
        if self._unwritten:
            self._persist()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = -1  # removed since (clear): the directory fsync makes that durable
        except OSError as e:
            raise StorageError(f"cannot open {self.path}: {e}") from e
        try:
            if fd >= 0:
                disk.fsync(fd)
        except OSError as e:
            raise StorageError(f"fsync of {self.path} failed: {e}") from e
        finally:
            if fd >= 0:
                os.close(fd)
        fsync_dir(os.path.dirname(self.path) or ".")
        self._unsynced = False

    def clear(self) -> bool:
        """Forget every entry and remove the file (the log was emptied: a missing file
        means "rebuild from the log", which then finds nothing). The caller fsyncs the
        directory."""
        changed = bool(self._epochs)
        self._epochs.clear()
        self._starts.clear()
        self._unwritten = False  # nothing left to write: the file goes
        if self.path is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            except OSError as e:
                raise StorageError(f"cannot remove {self.path}: {e}") from e
        return changed

    # --- queries --------------------------------------------------------------------------------

    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(EpochEntry(e, s) for e, s in zip(self._epochs, self._starts, strict=True))

    def __len__(self) -> int:
        return len(self._epochs)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.path}, {list(zip(self._epochs, self._starts, strict=True))})"

    @property
    def latest_epoch(self) -> int:
        """The highest epoch, -1 if the cache is empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= requested, its end offset); rules in the module function
        ``end_offset_for``."""
        return end_offset_for(self.entries(), requested_epoch, log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the batch at ``offset`` belongs to, -1 if before the first entry."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    # --- changes --------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, defer: bool = False) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's assign).

        No change if ``epoch`` is already the latest and starts at or before
        ``start_offset`` (every later batch of the current epoch). Otherwise the entries
        it contradicts (epoch >= ``epoch`` or start >= ``start_offset``, necessarily a
        suffix) are dropped first, so the entries stay strictly increasing: the log was
        rewritten from ``start_offset`` on, and what the cache said about it is stale.

        ``defer``: only for an entry at the log end, before any batch of its epoch (crash
        behaviour in the module docstring): the file is written by ``sync`` or the next
        change, not now.
        """
        if epoch < 0 or start_offset < 0:
            raise InvalidRequestError(f"invalid leader epoch entry: epoch {epoch}, start {start_offset}")
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._starts[-1]:
            return False
        removed: list[tuple[int, int]] = []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed.append((self._epochs.pop(), self._starts.pop()))
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            # One entry at the same start offset is the normal case of a leader whose epoch
            # entry was written before any data; anything else means the log was rewritten.
            logger.warning(
                "%s: epoch %d at %d replaces conflicting entries %s", self.path, epoch, start_offset, removed
            )
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if defer and self.path is not None and not removed:
            self._unwritten = self._unsynced = True
        else:
            self._persist()
        return True

    def assign_if_newer(self, epoch: int, start_offset: int) -> bool:
        """``assign`` only if ``epoch`` is above the latest (a scan of batches during
        recovery or a rebuild: an older epoch in the log never rewrites the cache)."""
        if epoch < 0 or epoch <= self.latest_epoch:
            return False
        return self.assign(epoch, start_offset)

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log was truncated to ``end_offset``: drop every entry starting at or after it."""
        i = bisect.bisect_left(self._starts, end_offset)
        if i == len(self._starts):
            return False
        del self._epochs[i:]
        del self._starts[i:]
        self._persist()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start moved up to ``start_offset``: drop entries that end at or before it
        and move the one spanning it (the last entry starting at or below it) to start
        there (Kafka's truncateFromStart)."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0 or (i == 1 and self._starts[0] == start_offset):
            return False
        keep = self._epochs[i - 1]
        del self._epochs[: i - 1]
        del self._starts[: i - 1]
        self._epochs[0], self._starts[0] = keep, start_offset
        self._persist()
        return True

    def replace(self, entries: Iterable[EpochEntry]) -> None:
        """Replace every entry (rebuild) and rewrite the file."""
        fresh = LeaderEpochCache(None, entries)
        self._epochs, self._starts = fresh._epochs, fresh._starts
        self._persist()

    @classmethod
    def rebuild(cls, path: str | None, batches: Iterable[tuple[int, int]]) -> LeaderEpochCache:
        """The cache of a log whose batches are ``(partitionLeaderEpoch, base offset)`` in
        offset order: each epoch starts at its first batch. Negative epochs (batches written
        without one) and epochs below the latest one seen are skipped, as in recovery. The
        file is written only if there is at least one entry (an empty log needs none)."""
        cache = cls(None)
        for epoch, base in batches:
            cache.assign_if_newer(epoch, base)
        cache.path = path
        if cache._epochs:
            cache._persist()
        return cache


__all__ = [
    "CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
    "decode",
    "encode",
    "end_offset_for",
]
