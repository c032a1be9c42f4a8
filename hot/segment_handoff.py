"""Which sealed segments the cleaner and the tiered-storage uploader may each take.

Both work on a log's sealed segments outside its lock, so they must never take the same
one: the cleaner rewrites a segment by swapping in a new file, the uploader copies it.
Two offsets of one log decide (both only rise, except that truncation lowers the first):

* ``first_dirty``: segments below it were cleaned (persisted in the partition's
  ``cleaner-offset-checkpoint``, text ``"<offset>\\n"``, hot.local_log). A compacted
  tiered log with a cleaner attached uploads only segments below it, so the bucket
  gets compacted data (``upload_waits``).
* ``upload_floor``: segments ending at or below it were handed to the uploader; the
  cleaner skips them from then on.

Locking: none of its own; the owning ``hot.log.Log`` calls every ``*_locked`` method with
``Log._lock`` held and passes the log's high watermark and log start offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from hot.local_log import CLEANER_CHECKPOINT_FILE, LocalLog
from hot.producer_state import ProducerStateManager
from hot.segment import Segment


@dataclass(frozen=True, slots=True)
class CleanerView:
    """What the cleaner may work on, taken under the log's lock (see ``Log.cleaner_view``)."""

    segments: tuple[Segment, ...]  # cleanable: sealed, below the HW, past min.compaction.lag.ms
    first_dirty: int  # segments from here on were never cleaned
    producer_last_offsets: dict[int, int]  # producer id -> offset of its last batch
    upload_waits: bool  # tiered: uploads wait for these segments to be cleaned


class SegmentHandoff:
    """The first dirty offset and the upload floor of one log (module docstring)."""

    def __init__(self, local: LocalLog, first_dirty: int = 0) -> None:
        self._local = local
        self.first_dirty = first_dirty
        self.upload_floor = 0  # segments ending at or below it were handed to the uploader

    def upload_waits(self, cleaner_attached: bool) -> bool:
        cfg = self._local.config
        return cleaner_attached and cfg.compact and cfg.remote_storage_enable

    def for_upload_locked(self, limit: int, from_offset: int) -> list[Segment]:
        """Sealed, non-empty segments ending at or below ``limit`` and after
        ``from_offset``, oldest first; raises the upload floor past them."""
        out: list[Segment] = []
        segs = self._local.segments
        for seg in segs[self._local.segment_index(from_offset) : -1]:
            if seg.next_offset > limit:
                break
            if seg.next_offset > from_offset and not seg.is_empty:
                out.append(seg)
        if out:
            self.upload_floor = max(self.upload_floor, out[-1].next_offset)
        return out

    def set_first_dirty_locked(self, offset: int) -> None:
        """Persist the cleaner's progress (atomic, durable); never moves it back."""
        if offset <= self.first_dirty:
            return
        self.first_dirty = offset
        self._local.write_offset_file(CLEANER_CHECKPOINT_FILE, offset)

    def truncated_locked(self, offset: int) -> None:
        """The log was cut at ``offset``: nothing from there on was cleaned."""
        self.first_dirty = min(self.first_dirty, offset)

    def cleaner_view_locked(
        self,
        now_ms: int,
        hw: int,
        log_start: int,
        producers: ProducerStateManager,
        upload_waits: bool,
        first_unstable: int | None = None,
    ) -> CleanerView:
        lag = self._local.config.min_compaction_lag_ms
        # Kafka's firstUncleanableDirtyOffset: never past an undecided transaction's data.
        limit = hw if first_unstable is None else min(hw, first_unstable)
        segs: list[Segment] = []
        for seg in self._local.segments[:-1]:
            if seg.next_offset <= self.upload_floor or seg.next_offset <= log_start:
                continue
            if seg.next_offset > limit or now_ms - seg.largest_timestamp() < lag:
                break
            segs.append(seg)
        first_dirty = max(self.first_dirty, segs[0].base_offset) if segs else self.first_dirty
        last = {pid: e.last_offset for pid, e in producers.entries().items()}
        return CleanerView(tuple(segs), first_dirty, last, upload_waits)


__all__ = ["CleanerView", "SegmentHandoff"]
