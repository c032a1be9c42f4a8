"""``strata check --remote``: the same batch check (hot.check) over a partition's segments
in the object store.

Every COPIED segment the partition manifest lists (spilled entries included) is read
with ranged GETs of ``hot.check.CHUNK_SIZE`` bytes and walked by ``hot.check.scan_segment``,
so memory stays within a chunk plus the largest batch. Nothing in the bucket is
written. A remote segment is always sealed: an unframeable region in it is
``unreadable``, never a torn tail. Problems are named by the segment object's key.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from hot.check import (
    CHUNK_SIZE,
    PartitionCheck,
    ReadError,
    SegmentCheck,
    SegmentScan,
    finish_partition,
    scan_segment,
)
from hot.errors import ObjectStoreError
from tiering.manifest import RemoteSegment, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.store import ObjectStore


async def _run_remote(
    scan: SegmentScan, store: ObjectStore, key: str, progress: Callable[[int], None] | None
) -> SegmentCheck:
    try:
        request = next(scan)
        while True:
            position, length = request
            try:
                data = await store.get(key, start=position, end=position + length)
            except ObjectStoreError as e:
                request = scan.throw(ReadError(str(e)))
                continue
            if progress is not None:
                progress(len(data))
            request = scan.send(data)
    except StopIteration as stop:
        result: SegmentCheck = stop.value
        return result


async def check_remote_segment(
    store: ObjectStore,
    seg: RemoteSegment,
    *,
    compact: bool = False,
    chunk_size: int = CHUNK_SIZE,
    progress: Callable[[int], None] | None = None,
) -> SegmentCheck:
    """Scan one remote segment's log object (its size as the manifest records it)."""
    scan = scan_segment(
        seg.keys.log,
        seg.base_offset,
        seg.size,
        allow_gaps=compact or seg.compacted,
        tail=False,
        chunk_size=chunk_size,
    )
    return await _run_remote(scan, store, seg.keys.log, progress)


async def check_remote_partition(
    manifests: ManifestStore,
    topic: str,
    topic_id: uuid.UUID,
    partition: int,
    *,
    compact: bool = False,
    log_start_offset: int | None = None,
    chunk_size: int = CHUNK_SIZE,
    progress: Callable[[int], None] | None = None,
) -> PartitionCheck:
    """Scan every COPIED segment of one partition in the bucket. ``log_start_offset``: the
    partition's (the local one where there is a broker; default the manifest's)."""
    m, _ = await manifests.load(topic, topic_id, partition)
    if m is None:
        return PartitionCheck(
            topic, partition, "remote", log_start_offset, (), note="no manifest in the bucket"
        )
    copied = [s for s in await manifests.all_segments(m) if s.state is SegmentState.COPIED]
    segments: list[SegmentCheck] = []
    for seg in copied:
        checked = await check_remote_segment(
            manifests.store, seg, compact=compact, chunk_size=chunk_size, progress=progress
        )
        # The manifest knows where the segment ends: a reader resumes after it.
        problems = tuple(
            p if p.skip_to is not None else dataclasses.replace(p, skip_to=seg.last_offset + 1)
            for p in checked.problems
        )
        segments.append(dataclasses.replace(checked, problems=problems))
    lso = max(m.log_start_offset, log_start_offset) if log_start_offset is not None else m.log_start_offset
    return finish_partition(topic, partition, "remote", segments, lso)
