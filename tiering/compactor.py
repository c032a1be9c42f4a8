"""Remote compaction: rewrites a compacted topic's remote segments, keeping the latest
record of every key, and swaps them into the partition manifest by compare-and-swap.

Runs where the partition's uploads run (the tiering service of a single node, the
leader in cluster mode), every ``remote_compaction_interval_ms``, for partitions of
topics with ``cleanup.policy=compact`` and ``remote.storage.enable`` whose remote dirty
ratio (bytes of COPIED segments at or above the manifest's ``cleaned_offset`` over
all COPIED bytes of the main manifest) reaches ``min.cleanable.dirty.ratio``. One pass:

1. Read the manifest. Only the main manifest's COPIED segments are compacted (spilled
   segments are left as they are; their tombstones therefore stay, see 4).
2. Map key -> latest offset over the dirty segments (whole segments, at most
   ``log.cleaner.dedupe.buffer.size`` worth of keys: a map that fills up cleans the prefix
   that fit, as the local cleaner does), each ``.log`` downloaded by ranged GETs into
   ``<data-dir>/remote-compaction/``, checked against its manifest checksum, mapped and
   deleted: memory and disk stay bounded. Keys of local segments not yet uploaded are
   never used, so the swap never depends on what is not in the bucket yet.
3. Producers' last batches: from the producer snapshot uploaded with the last segment
   compacted (the state after it; a header scan of the segments if it is missing).
4. Group by group (downloaded again, then deleted: disk holds one group and its output),
   rewrite consecutive segments (together at most ``segment.bytes``, offsets
   within 32-bit relative offsets) with hot.cleaner's ``filter_batch``: original offsets
   (gaps between batches), producer-state headers of a producer's last batch kept, control
   batches kept, the group's last batch kept so the segment ends where it did. Tombstones
   are dropped only in segments first cleaned remotely more than ``delete.retention.ms``
   ago (``cleaned_ms``), and never while the partition has spilled segments (an older
   value could be below). A single segment that would come out unchanged and was already
   cleaned is left alone. Indexes are rebuilt by hot.segment.Segment; the producer
   snapshot of a group's last segment is copied.
5. Upload the rewritten objects under fresh segment ids (``tiering.keys.segment_keys``:
   never an existing key, so no reader of an old object is disturbed and the chunk
   cache, keyed by object key, cannot mix old and new bytes).
6. One CAS (``PartitionManifest.swap_compacted``): the replaced entries become
   DELETE_STARTED ``replaced``, the new ones COPIED, ``cleaned_offset`` rises. A lost CAS
   (the uploader appended meanwhile) reloads and re-applies as long as the replaced
   entries are unchanged; otherwise (retention, a new leader) the swap is abandoned and
   the new objects deleted.
7. ``Uploader.delete_replaced`` deletes the replaced objects once
   ``remote_compaction_grace_ms`` has passed, then the entries. A remote read that meets
   a deleted object reloads the manifest and retries (tiering/remote_read.py).

Transactions (hot.txn_cleaning, as the local cleaner): only segments below the first
transaction still open at the end of the bucket (the producer snapshot uploaded with the
last COPIED segment, version 2; a header scan if it is missing) are compacted, since a
transaction whose marker is not uploaded yet is undecided here. Batches of aborted
transactions (the remote transaction indexes from the first cleaned segment on, Kafka's
stop rule) are neither mapped nor kept; markers are kept, and the rewritten segment's
``.txnindex`` holds every entry of its sources (uploaded beside it, as the uploader does).
Its ``.index``, ``.timeindex`` and the last source's producer snapshot go up as one
``.indexes`` object, the uploader's layout.

A crash leaves either the old manifest (new objects are orphans: the sweeper deletes them
after ``orphan_grace_ms``) or the new one (old objects are deleted after the grace period).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from crc32c import crc32c

from hot.batch import HEADER
from hot.cleaner import (
    CleanerConfig,
    CleanStats,
    OffsetMap,
    filter_batch,
    iter_file_batches,
    map_batch,
)
from hot.config import LogConfig
from hot.errors import CorruptLogError, CorruptRecordError, ObjectNotFoundError, StrataError
from hot.log import Log
from hot.offset_index import MAX_RELATIVE
from hot.producer_state import ProducerSnapshotFile
from hot.segment import Segment
from hot.txn_cleaning import AbortedRanges
from hot.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from hot.txn_index import AbortedTxn
from tiering.keys import segment_keys
from tiering.manifest import CompactionConflictError, PartitionManifest, RemoteSegment, SegmentState
from tiering.remote_txn import collect_remote, parse_txn_index
from tiering.uploader import PartitionState, PartitionStoppedError, Uploader, fault, read_concatenated

logger = logging.getLogger(__name__)

WORK_DIR: Final = "remote-compaction"
_GET_CHUNK: Final = 8 << 20
_H_EPOCH: Final = 2
_H_BASE_TS: Final = 7
_H_MAX_TS: Final = 8
_H_PID: Final = 9
_H_ATTRIBUTES: Final = 5
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class RemoteSegmentCorruptError(StrataError):
    """A downloaded remote segment does not match its manifest checksum."""


@dataclass(slots=True)
class RemoteCompactionStats:
    """What one remote compaction pass over one partition did."""

    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    cleaned_offset: int = 0
    swapped: bool = False
    conflict: bool = False
    records: CleanStats = field(default_factory=CleanStats)


@dataclass(frozen=True, slots=True)
class _Rewritten:
    """One rewritten group, built locally, not uploaded yet."""

    sources: tuple[RemoteSegment, ...]
    stem: str  # local path without suffix
    base_offset: int
    last_offset: int
    size: int
    sha256: str
    crc32c: int
    index_size: int
    timeindex_size: int
    first_timestamp: int
    max_timestamp: int
    leader_epoch: int
    cleaned_ms: int
    txnindex_size: int = 0  # bytes of the rewritten .txnindex; 0: none


def remote_dirty_ratio(m: PartitionManifest) -> float:
    copied = m.copied()
    total = sum(s.size for s in copied)
    dirty = sum(s.size for s in copied if s.base_offset >= m.cleaned_offset)
    return dirty / total if total else 0.0


def group_remote(segments: Sequence[RemoteSegment], max_bytes: int) -> list[list[RemoteSegment]]:
    """Consecutive runs whose total size fits ``max_bytes`` and whose offsets fit 32-bit
    relative offsets (the local cleaner's grouping, over manifest entries)."""
    groups: list[list[RemoteSegment]] = []
    for seg in segments:
        if groups:
            g = groups[-1]
            if (
                sum(s.size for s in g) + seg.size <= max_bytes
                and seg.last_offset + 1 - g[0].base_offset <= MAX_RELATIVE
                and g[-1].last_offset + 1 == seg.base_offset
            ):
                g.append(seg)
                continue
        groups.append([seg])
    return groups


class RemoteCompactor:
    """Remote compaction of the partitions an ``Uploader`` serves (module docstring)."""

    def __init__(
        self,
        uploader: Uploader,
        work_dir: Path,
        cleaner_config: CleanerConfig | None = None,
        *,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.uploader = uploader
        self.store = uploader.store
        self.metrics = uploader.metrics
        self.work_dir = Path(work_dir)
        self.cleaner_config = cleaner_config if cleaner_config is not None else CleanerConfig()
        self._clock_ms = clock_ms
        self._lock = asyncio.Lock()  # one pass at a time: bounds disk and memory

    def _now(self) -> int:
        return self._clock_ms()

    def due(self, m: PartitionManifest, cfg: LogConfig) -> bool:
        copied = m.copied()
        if not copied or copied[-1].last_offset < m.cleaned_offset:
            return False
        return remote_dirty_ratio(m) >= cfg.min_cleanable_dirty_ratio

    async def compact_log(
        self, log: Log, topic_id: uuid.UUID, *, force: bool = False
    ) -> RemoteCompactionStats | None:
        """Compact the remote segments of ``log``'s partition if due (or ``force``); None
        when nothing was done. ObjectStoreError propagates (the service backs off)."""
        cfg = log.config
        if not (cfg.compact and cfg.remote_storage_enable and self.cleaner_config.enable):
            return None
        st = self.uploader.state(log.topic, log.partition, topic_id)
        if st.stopped is not None or not self.uploader.begin_term(st):
            return None
        async with self._lock:
            return await self.compact_partition(st, cfg, force=force)

    async def compact_partition(
        self, st: PartitionState, cfg: LogConfig, *, force: bool = False
    ) -> RemoteCompactionStats | None:
        if not st.recovered:
            await self.uploader.recover(st)
        # The uploader's cached manifest decides whether a pass is due (no GET per check:
        # this broker writes the manifest); the pass itself starts from a fresh read.
        cached = st.manifest
        if not force and cached is not None and st.loaded and not self.due(cached, cfg):
            return None
        m = await self.uploader._load(st)
        if not (self.due(m, cfg) or (force and m.copied())):
            return None
        work = self.work_dir / f"{st.topic}-{st.partition}"
        await asyncio.to_thread(shutil.rmtree, work, True)
        await asyncio.to_thread(os.makedirs, work, exist_ok=True)
        try:
            return await self._compact(st, cfg, m, work)
        finally:
            await asyncio.to_thread(shutil.rmtree, work, True)

    async def _compact(
        self, st: PartitionState, cfg: LogConfig, m: PartitionManifest, work: Path
    ) -> RemoteCompactionStats | None:
        now = self._now()
        stats = RemoteCompactionStats()
        all_copied = m.copied()
        # Only decided transactions are cleaned (hot.txn_cleaning): stop below the first
        # one whose marker is not in the bucket yet.
        unstable = await self._first_unstable(all_copied, work)
        copied = [s for s in all_copied if unstable is None or s.last_offset < unstable]
        if not copied:
            return None
        txn_entries: dict[uuid.UUID, tuple[AbortedTxn, ...]] = {}

        async def load_txn(seg: RemoteSegment) -> tuple[AbortedTxn, ...]:
            if seg.segment_id not in txn_entries:
                txn_entries[seg.segment_id] = await self._txn_index(seg)
            return txn_entries[seg.segment_id]

        found = await collect_remote(all_copied, copied[0].base_offset, copied[-1].last_offset + 1, load_txn)
        aborted = AbortedRanges(found.aborted)
        # 1. The map, over the dirty segments, downloaded one at a time (then deleted).
        offset_map = OffsetMap(self.cleaner_config.dedupe_buffer_size)
        end = await self._build_map(copied, m.cleaned_offset, offset_map, str(work / "map.log"), aborted)
        if end is None:
            return None
        cleanable = [s for s in copied if s.last_offset < end]
        if not cleanable:
            return None
        pid_last = await self._producer_last_offsets(cleanable, work)
        mapped = await asyncio.to_thread(offset_map.sorted_offsets)
        horizon = now - cfg.delete_retention_ms
        stats.cleaned_offset = end
        rewritten: list[_Rewritten] = []
        new_entries: list[RemoteSegment] = []
        try:
            # 2. Group by group: download, rewrite, upload under new keys, delete the local
            # files (disk holds one group and its output at a time).
            for i, group in enumerate(group_remote(cleanable, cfg.segment_bytes)):
                paths: dict[uuid.UUID, str] = {}
                for seg in group:
                    paths[seg.segment_id] = str(work / f"{seg.segment_id.hex}.log")
                    await self._download(seg, paths[seg.segment_id])
                    await load_txn(seg)
                out_dir = work / f"out-{i}"
                out = await asyncio.to_thread(
                    self._rewrite_group,
                    group,
                    paths,
                    str(out_dir),
                    offset_map,
                    mapped,
                    pid_last,
                    m,
                    horizon,
                    now,
                    cfg.index_interval_bytes,
                    stats.records,
                    aborted,
                    txn_entries,
                )
                if out is not None:
                    new_entries.append(await self._upload(st, out))
                    rewritten.append(out)
                for path in paths.values():
                    await asyncio.to_thread(os.unlink, path)
                await asyncio.to_thread(shutil.rmtree, out_dir, True)
            fault("compact_after_upload")
            # 3. One compare-and-swap.
            olds = [s for rw in rewritten for s in rw.sources]
            swapped_at = self._now()

            def swap(cur: PartitionManifest) -> PartitionManifest:
                return cur.swap_compacted(olds, new_entries, swapped_at, cleaned_offset=end)

            await self.uploader._update(st, swap)
        except CompactionConflictError as e:
            logger.info("%s-%d: remote compaction abandoned: %s", st.topic, st.partition, e)
            stats.conflict = True
            self.metrics.remote_compaction_conflicts.labels(st.topic).inc()
            await self.store.delete_many([k for s in new_entries for k in s.keys.all()])
            return stats
        except BaseException:
            # Not swapped (store failure, stop): the new objects are orphans. Try to delete
            # them now; the sweeper removes whatever is left after its grace period.
            if new_entries:
                try:
                    await self.store.delete_many([k for s in new_entries for k in s.keys.all()])
                except Exception:
                    pass
            raise
        fault("compact_after_swap")
        stats.swapped = True
        stats.segments_in = sum(len(rw.sources) for rw in rewritten)
        stats.segments_out = len(rewritten)
        stats.bytes_in = sum(s.size for rw in rewritten for s in rw.sources)
        stats.bytes_out = sum(rw.size for rw in rewritten)
        self.metrics.remote_compaction_runs.labels(st.topic).inc()
        self.metrics.remote_compaction_bytes_rewritten.labels(st.topic).inc(stats.bytes_in)
        removed = max(0, stats.bytes_in - stats.bytes_out)
        self.metrics.remote_compaction_bytes_removed.labels(st.topic).inc(removed)
        logger.info(
            "%s-%d: remote compaction: %d segments -> %d, %d -> %d bytes; cleaned to offset %d",
            st.topic,
            st.partition,
            stats.segments_in,
            stats.segments_out,
            stats.bytes_in,
            stats.bytes_out,
            end,
        )
        return stats

    # --- steps -----------------------------------------------------------------------------

    async def _download(self, seg: RemoteSegment, path: str) -> None:
        """The segment's ``.log`` into ``path`` by ranged GETs, checked against the manifest."""
        digest = hashlib.sha256() if seg.log_crc32c is None else None
        crc = 0
        with open(path, "wb") as f:

            def write(data: bytes, crc: int) -> int:  # in a worker thread: file I/O, checksum
                f.write(data)
                if digest is not None:
                    digest.update(data)
                    return crc
                return int(crc32c(data, crc))

            pos = 0
            while pos < seg.size:
                end = min(seg.size, pos + _GET_CHUNK)
                data = await self.store.get(seg.keys.log, start=pos, end=end)
                if len(data) != end - pos:
                    raise RemoteSegmentCorruptError(f"{seg.keys.log}: short read at byte {pos}")
                crc = await asyncio.to_thread(write, data, crc)
                pos = end
        if digest is not None and digest.hexdigest() != seg.log_sha256:
            raise RemoteSegmentCorruptError(f"{seg.keys.log}: SHA-256 does not match the manifest")
        if digest is None and crc != seg.log_crc32c:
            raise RemoteSegmentCorruptError(f"{seg.keys.log}: CRC-32C does not match the manifest")

    async def _build_map(
        self,
        segments: Sequence[RemoteSegment],
        cleaned_offset: int,
        offset_map: OffsetMap,
        path: str,
        aborted: AbortedRanges,
    ) -> int | None:
        """Map the dirty segments (whole ones, each downloaded to ``path`` in turn); the
        offset the map covers up to (exclusive), None when not even the first dirty
        segment fits."""
        end: int | None = cleaned_offset if segments[0].base_offset < cleaned_offset else None
        for seg in segments:
            if seg.base_offset < cleaned_offset:
                continue
            await self._download(seg, path)
            try:
                fits = await asyncio.to_thread(_map_file, path, offset_map, aborted)
            finally:
                await asyncio.to_thread(os.unlink, path)
            if not fits:
                if end is None or end == cleaned_offset:
                    logger.warning(
                        "remote segment %s does not fit the offset map (%d keys); raise "
                        "log.cleaner.dedupe.buffer.size",
                        seg.keys.log,
                        offset_map.slots,
                    )
                break
            end = seg.last_offset + 1
        return end

    async def _txn_index(self, seg: RemoteSegment) -> tuple[AbortedTxn, ...]:
        """A segment's checked transaction index entries (none if it has no index)."""
        if not seg.txnindex_size:
            return ()
        return parse_txn_index(await self.store.get(seg.keys.txnindex), seg)

    async def _first_unstable(self, segments: Sequence[RemoteSegment], work: Path) -> int | None:
        """The first offset of the earliest transaction open at the end of ``segments``
        (its marker is not uploaded), None if there is none: from the producer snapshot
        uploaded with the last one (version 2 snapshots carry each open transaction's first
        offset), else by scanning the segments' headers."""
        if not segments:
            return None
        last = segments[-1]
        snap = last.snapshot_part()
        if snap is not None:
            try:
                data = await snap.get(self.store)
                entries = ProducerSnapshotFile.decode(data, last.last_offset + 1, snap.name)
                return min(
                    (e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0),
                    default=None,
                )
            except (ObjectNotFoundError, CorruptLogError) as e:
                logger.warning("producer snapshot %s unusable (%s); scanning", snap.name, e)
        open_txns: dict[int, int] = {}
        path = str(work / "txns.log")
        for seg in segments:
            await self._download(seg, path)
            try:
                await asyncio.to_thread(_open_transactions, path, open_txns)
            finally:
                await asyncio.to_thread(os.unlink, path)
        return min(open_txns.values(), default=None)

    async def _producer_last_offsets(self, segments: Sequence[RemoteSegment], work: Path) -> dict[int, int]:
        """Producer id -> offset of its last batch up to the end of ``segments``: from the
        producer snapshot uploaded with the last one (the state after it, as the local
        cleaner uses the log's producer state), else by scanning every segment's headers."""
        last = segments[-1]
        snap = last.snapshot_part()
        if snap is not None:
            try:
                data = await snap.get(self.store)
                entries = ProducerSnapshotFile.decode(data, last.last_offset + 1, snap.name)
                return {e.producer_id: e.last_offset for e in entries if e.batches}
            except (ObjectNotFoundError, CorruptLogError) as e:
                logger.warning("producer snapshot %s unusable (%s); scanning", snap.name, e)
        out: dict[int, int] = {}
        path = str(work / "producers.log")
        for seg in segments:
            await self._download(seg, path)
            try:
                out.update(await asyncio.to_thread(_producer_last_offsets, path))
            finally:
                await asyncio.to_thread(os.unlink, path)
        return out

    def _rewrite_group(
        self,
        group: Sequence[RemoteSegment],
        paths: dict[uuid.UUID, str],
        out_dir: str,
        offset_map: OffsetMap,
        mapped: list[int],
        pid_last: dict[int, int],
        m: PartitionManifest,
        horizon: int,
        now_ms: int,
        index_interval_bytes: int,
        stats: CleanStats,
        aborted: AbortedRanges,
        txn_entries: dict[uuid.UUID, tuple[AbortedTxn, ...]],
    ) -> _Rewritten | None:
        """Build the rewritten segment of ``group`` under ``out_dir``; None when it would be
        the one source segment unchanged (already cleaned)."""
        os.makedirs(out_dir, exist_ok=True)
        base = group[0].base_offset
        last_group_batch = group[-1].last_offset
        out = Segment(out_dir, base, index_interval_bytes=index_interval_bytes)
        out.compacted = True
        first_ts, epoch = -1, 0
        changed = len(group) > 1
        try:
            for seg in group:
                was_clean = seg.last_offset < m.cleaned_offset
                drop_tombstones = (
                    was_clean and seg.cleaned_ms is not None and seg.cleaned_ms < horizon and not m.spillover
                )
                for b_base, b_last, raw in iter_file_batches(paths[seg.segment_id]):
                    kept = filter_batch(
                        raw,
                        b_base,
                        b_last,
                        offset_map,
                        drop_tombstones=drop_tombstones,
                        producer_last_offsets=pid_last,
                        last_group_batch=last_group_batch,
                        stats=stats,
                        # every key of a dirty segment is in the map: the fast path
                        mapped_offsets=None if seg.base_offset < m.cleaned_offset else mapped,
                        aborted=aborted,
                    )
                    if kept is not raw:
                        changed = True
                    if kept is None:
                        continue
                    h = HEADER.unpack_from(kept)
                    if out.is_empty:
                        first_ts, epoch = h[_H_BASE_TS], max(-1, h[2])
                    out.append([kept], len(kept), [(h[0], len(kept), h[_H_MAX_TS])], b_last + 1, now_ms)
            if out.next_offset != last_group_batch + 1:
                raise CorruptRecordError(
                    f"rewriting remote segments at {base}: ends at {out.next_offset - 1}, "
                    f"not {last_group_batch}"
                )
            # Markers are kept, so every aborted transaction of the sources still ends here.
            for seg in group:
                for txn in txn_entries.get(seg.segment_id, ()):
                    out.txn_index.append(txn)
            txnindex_size = len(out.txn_index) * TXN_ENTRY_SIZE
            out.seal()
            # Remote readers serve bytes matching the manifest's CRC-32C without checking
            # each batch again: like the uploader, validate them all before that CRC.
            verified = out.verify()
        finally:
            out.close()
        if not changed and group[0].cleaned_ms is not None:
            return None
        size = os.path.getsize(out.log_path)
        if verified != size:
            raise CorruptRecordError(
                f"rewriting remote segments at {base}: verified {verified} of {size} bytes"
            )
        digest = hashlib.sha256()
        crc = 0
        with open(out.log_path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
                crc = crc32c(chunk, crc)
        # First remote clean: now; re-clean of cleaned segments only: the oldest of theirs,
        # so tombstones go delete.retention.ms after they were first cleaned.
        cleaned = [s.cleaned_ms for s in group]
        cleaned_ms = now_ms if any(c is None for c in cleaned) else max(c for c in cleaned if c is not None)
        max_ts = out.max_timestamp if out.max_timestamp >= 0 else max(s.max_timestamp for s in group)
        return _Rewritten(
            sources=tuple(group),
            stem=out.log_path[: -len(".log")],
            base_offset=base,
            last_offset=last_group_batch,
            size=size,
            sha256=digest.hexdigest(),
            crc32c=int(crc),
            index_size=os.path.getsize(out.index_path),
            timeindex_size=os.path.getsize(out.timeindex_path),
            first_timestamp=first_ts,
            max_timestamp=max_ts,
            leader_epoch=epoch,
            cleaned_ms=cleaned_ms,
            txnindex_size=txnindex_size,
        )

    async def _upload(self, st: PartitionState, rw: _Rewritten) -> RemoteSegment:
        """Upload a rewritten segment under fresh keys; its (COPIED) manifest entry."""
        sid = uuid.uuid4()
        keys = segment_keys(st.topic, st.topic_id, st.partition, rw.base_offset, sid)
        last_src = rw.sources[-1]
        await self.uploader._bucket.take(rw.size + rw.index_size + rw.timeindex_size + rw.txnindex_size)

        async def put_log() -> None:
            await self.store.put_file(keys.log, rw.stem + ".log", length=rw.size)
            fault("compact_after_log_upload")

        # The indexes and the snapshot in one ``.indexes`` object, as the uploader writes
        # them (one PUT, and one GET for a reader); the snapshot is the last source's.
        src_snap = last_src.snapshot_part()
        snapshot = b"" if src_snap is None else await src_snap.get(self.store)
        indexes = await asyncio.to_thread(
            read_concatenated,
            [(rw.stem + ".index", rw.index_size), (rw.stem + ".timeindex", rw.timeindex_size)],
        )
        indexes += snapshot
        puts = [put_log(), self.store.put(keys.indexes, indexes)]
        if rw.txnindex_size:
            puts.append(self.store.put_file(keys.txnindex, rw.stem + ".txnindex", length=rw.txnindex_size))
        results = await asyncio.gather(*puts, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                await self.store.delete_many(keys.all())
                raise r
        now = self._now()
        return RemoteSegment(
            segment_id=sid,
            base_offset=rw.base_offset,
            last_offset=rw.last_offset,
            first_timestamp=rw.first_timestamp,
            max_timestamp=rw.max_timestamp,
            size=rw.size,
            log_sha256=rw.sha256,
            log_crc32c=rw.crc32c,
            index_size=rw.index_size,
            timeindex_size=rw.timeindex_size,
            leader_epoch=rw.leader_epoch,
            state=SegmentState.COPIED,
            keys=keys,
            created_ms=now,
            updated_ms=now,
            has_producer_snapshot=last_src.has_producer_snapshot,
            record_count=None,
            compacted=True,
            cleaned_ms=rw.cleaned_ms,
            txnindex_size=rw.txnindex_size or None,
            indexes_size=len(indexes),
        )


def _map_file(path: str, offset_map: OffsetMap, aborted: AbortedRanges) -> bool:
    """Map every batch of a segment file (not those of ``aborted`` transactions); False
    (and the file's puts undone) when the map fills up."""
    changes: list[tuple[bytes, int]] = []
    for _, _, raw in iter_file_batches(path):
        if not map_batch(raw, offset_map, changes, aborted):
            offset_map.undo(changes[::-1])
            return False
    return True


def _producer_last_offsets(path: str) -> dict[int, int]:
    """Producer id -> last offset of its last batch in a segment file."""
    out: dict[int, int] = {}
    for _, last, raw in iter_file_batches(path):
        pid = HEADER.unpack_from(raw)[_H_PID]
        if pid >= 0:
            out[pid] = last
    return out


def _open_transactions(path: str, open_txns: dict[int, int]) -> None:
    """Follow a segment file's transactions: producer id -> first offset of its open
    transaction (a transactional data batch opens one, a marker ends it)."""
    for base, _, raw in iter_file_batches(path):
        h = HEADER.unpack_from(raw)
        pid, attributes = h[_H_PID], h[_H_ATTRIBUTES]
        if pid < 0 or not attributes & _TRANSACTIONAL_BIT:
            continue
        if attributes & _CONTROL_BIT:
            open_txns.pop(pid, None)
        else:
            open_txns.setdefault(pid, base)


__all__ = [
    "WORK_DIR",
    "PartitionStoppedError",
    "RemoteCompactionStats",
    "RemoteCompactor",
    "group_remote",
    "remote_dirty_ratio",
]
