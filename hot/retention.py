"""Which sealed segments a retention pass deletes (Kafka's deletable-segments rules).

Pure selection over a log's segment list, oldest first, stopping at the first segment that
does not qualify so the remaining data stays contiguous. ``hot.log_start`` calls these with
the log's lock held and then deletes the chosen prefix; the rules themselves are on
``Log.apply_retention`` and ``Log.apply_local_retention``. Files: none. Locking: none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hot.config import LogConfig
from hot.segment import Segment


def retention_doomed(
    segments: Sequence[Segment],
    cfg: LogConfig,
    now_ms: int,
    hw: int,
    log_start: int,
    guard: Callable[[Segment], bool] | None,
) -> list[Segment]:
    """The oldest sealed segments that total retention deletes (``Log.apply_retention``).
    ``segments`` is the whole list, the active segment last (never chosen)."""
    # cleanup.policy=compact alone: no time or size retention (Kafka).
    size = sum(s.size for s in segments)
    excess = size - cfg.retention_bytes if cfg.retention_bytes >= 0 and cfg.delete else None
    doomed: list[Segment] = []
    for seg in segments[:-1]:
        if seg.next_offset > hw:
            break
        below_start = seg.next_offset <= log_start
        expired = cfg.delete and cfg.retention_ms >= 0 and now_ms - seg.largest_timestamp() > cfg.retention_ms
        too_big = excess is not None and excess - seg.size >= 0
        if not (below_start or expired or too_big):
            break
        if guard is not None and not guard(seg):
            break
        if excess is not None:
            excess -= seg.size
        doomed.append(seg)
    return doomed


def local_retention_doomed(
    segments: Sequence[Segment],
    cfg: LogConfig,
    now_ms: int,
    hw: int,
    log_start: int,
    is_uploaded: Callable[[Segment], bool],
) -> list[Segment]:
    """The oldest sealed segments that local retention of a tiered log deletes
    (``Log.apply_local_retention``)."""
    keep_ms = cfg.effective_local_retention_ms
    keep_bytes = cfg.effective_local_retention_bytes
    size = sum(s.size for s in segments)
    excess = size - keep_bytes if keep_bytes >= 0 else None
    doomed: list[Segment] = []
    for seg in segments[:-1]:
        if seg.next_offset > hw:
            break
        below_start = seg.next_offset <= log_start
        if not below_start:
            expired = keep_ms >= 0 and now_ms - seg.largest_timestamp() > keep_ms
            too_big = excess is not None and excess - seg.size >= 0
            if not (expired or too_big) or not is_uploaded(seg):
                break
        if excess is not None:
            excess -= seg.size
        doomed.append(seg)
    return doomed


__all__ = ["local_retention_doomed", "retention_doomed"]
