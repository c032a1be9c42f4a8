"""Uploads sealed segments to the object store and enforces local and total retention.

Per partition of a topic with ``remote.storage.enable`` (docs/tiering.md is the contract):

* Candidates are sealed local segments entirely below the last stable offset (Kafka's
  RemoteLogManager: a segment holding data of an undecided transaction waits for its
  marker, so the bucket holds only decided data), in offset order, starting at the
  manifest's next offset. A segment must extend the remote range contiguously (its
  base <= remote next offset < its end); a local segment starting after the remote next
  offset would leave a hole: the partition's tiering stops with an error
  (``PartitionStoppedError``), it never creates one.
* Each segment: full CRC verification and SHA-256 of the ``.log`` (a corrupt segment is
  never uploaded, KAFKA-15401; the partition stops; the next segment is verified while
  the current one uploads), CAS ``COPY_STARTED`` with a fresh segment id, upload
  ``.log``, ``.indexes`` (``.index`` + ``.timeindex`` + producer snapshot in one object)
  and ``.txnindex`` (where the segment has aborted transactions) under keys holding that
  id (concurrently), CAS ``COPIED`` (in the next batch's COPY_STARTED write). The
  COPIED CAS re-checks contiguity against the stored manifest, so two uploaders of one
  partition never record overlapping COPIED segments: the loser cleans its copy up.
* Crash recovery (first visit of a partition, and after a failed upload): leftover
  ``COPY_STARTED`` entries are moved to ``DELETE_STARTED``, their objects deleted and the
  entries dropped; ``DELETE_STARTED`` leftovers are finished the same way.
* Local retention (``Log.apply_local_retention``) may delete a local segment only once its
  range is covered by COPIED segments. Total retention (``retention.ms`` by max
  timestamp, ``retention.bytes`` over remote COPIED + local-only bytes, KAFKA-17062)
  deletes remote segments oldest first: CAS ``DELETE_STARTED`` and the new log start
  offset, advance the log's log start offset, delete the objects, CAS them away.
* Object-store outages raise RetriableObjectStoreError out of here; the service backs off
  and retries. Nothing local is deleted while uploads are failing.

Fault injection (tests only): with ``STRATA_TIERING_FAULT`` set to one of
``FAULT_POINTS`` the process exits at once (``os._exit(FAULT_EXIT_CODE)``, as abrupt as
``kill -9``) when an upload reaches that point. It is read from the environment at each
point and does nothing when unset.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from crc32c import crc32c

from hot.batch import HEADER, HEADER_SIZE
from hot.cleaner import iter_file_batches
from hot.errors import (
    CorruptLogError,
    FencedLeaderEpochError,
    LogClosedError,
    StorageError,
    StrataError,
)
from hot.log import Log
from hot.manager import LogManager
from hot.segment import Segment
from hot.topics import TopicInfo
from hot.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from tiering.config import TieringConfig
from tiering.keys import SegmentKeys, manifest_key, partition_root, segment_keys, topic_manifest_key
from tiering.manifest import (
    CompactionConflictError,
    ManifestError,
    Mutation,
    PartitionManifest,
    RemoteSegment,
    SegmentOverlapError,
    SegmentState,
    SpilloverRef,
)
from tiering.manifest_store import ManifestStore
from tiering.metrics import LagFigures, TieringMetrics

logger = logging.getLogger(__name__)

FAULT_ENV: Final = "STRATA_TIERING_FAULT"
FAULT_POINTS: Final = (
    "after_copy_started",
    "after_log_upload",
    "after_copied",
    "after_delete_started",
    # remote compaction (tiering/compactor.py)
    "compact_after_log_upload",
    "compact_after_upload",
    "compact_after_swap",
)
FAULT_EXIT_CODE: Final = 86
_HASH_CHUNK: Final = 1 << 20
# HEADER.unpack indexes: partitionLeaderEpoch, baseTimestamp.
_H_EPOCH: Final = 2
_H_BASE_TS: Final = 7
_H_COUNT: Final = 12


def fault(point: str) -> None:
    if os.environ.get(FAULT_ENV) == point:
        logger.error("fault injection (%s=%s): exiting now", FAULT_ENV, point)
        os._exit(FAULT_EXIT_CODE)


async def _all_or_first_error(aws: list[Coroutine[Any, Any, object]]) -> None:
    """Run ``aws`` concurrently and wait for all of them; then raise the first error (in
    ``aws`` order), so no put is still running when the caller cleans up after a failure."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r


def _drop(task: asyncio.Future[Any]) -> None:
    """Abandon a look-ahead task (its error, if any, is retrieved and forgotten)."""
    task.cancel()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionStoppedError(StrataError):
    """Tiering of a partition stopped on something that needs an operator (a hole between
    remote and local data, a corrupt local segment, an unreadable manifest)."""


class _Superseded(Exception):
    """The segment's range is already COPIED (another uploader won, or a replay)."""


class _Abandoned(Exception):
    """Our COPY_STARTED entry is gone or no longer COPY_STARTED (someone cleaned it up)."""


class _Gap(Exception):
    """The segment would not extend the remote range contiguously."""


class TokenBucket:
    """Upload bandwidth cap: ``take(n)`` waits until ``n`` bytes fit in ``rate`` bytes/s.

    The bucket may go into debt (a segment is bigger than one second of budget), which
    the next takers pay back by waiting, so the long-run rate holds."""

    def __init__(self, rate: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._clock = clock
        self._tokens = float(rate)
        self._at = clock()
        self._lock = asyncio.Lock()

    async def take(self, n: int) -> None:
        if self.rate <= 0 or n <= 0:
            return
        async with self._lock:
            now = self._clock()
            self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= n
            if self._tokens < 0:
                await asyncio.sleep(-self._tokens / self.rate)


class ByteBudget:
    """Bytes of upload bodies in memory at once (``tiering.upload_memory_bytes``), over all
    partitions: ``hold(n)`` waits until ``n`` more fit. A body larger than the whole
    budget counts as the whole budget, so it goes up alone instead of never.

    Why: each PUT body is read into memory whole (a multipart part at a time), and with
    several segments of several partitions in flight that memory is what grows."""

    def __init__(self, limit: int, on_change: Callable[[int], None] | None = None) -> None:
        self.limit = limit
        self.used = 0
        self._on_change = on_change
        self._waiters: list[asyncio.Future[None]] = []

    @contextlib.asynccontextmanager
    async def hold(self, n: int) -> AsyncIterator[None]:
        n = max(0, min(n, self.limit))
        while self.used + n > self.limit:
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
        self._set(self.used + n)
        try:
            yield
        finally:
            self._set(self.used - n)
            for fut in self._waiters:
                if not fut.done():
                    fut.set_result(None)

    def _set(self, used: int) -> None:
        self.used = used
        if self._on_change is not None:
            self._on_change(used)


@dataclass(frozen=True, slots=True)
class LocalSegmentInfo:
    """What the upload needs to know about a verified local segment."""

    size: int
    sha256: str
    crc32c: int  # of the whole .log: what remote reads check (manifest ``log_crc32c``)
    first_timestamp: int
    leader_epoch: int
    index_size: int
    timeindex_size: int
    snapshot_path: str | None
    snapshot_size: int
    # Bytes of the .txnindex's whole entries; 0: no aborted transaction, nothing to upload.
    txnindex_size: int = 0
    # Every offset of the segment has a batch (no gap a cleaner, or a cleaned leader a
    # follower copied from, left): the manifest's ``compacted`` flag is its negation.
    dense: bool = True


def _dense(seg: Segment) -> bool:
    """No offset of the segment lacks its record: batches follow each other exactly and
    each holds a record per offset it spans (a cleaner's rebuilt batch does not)."""
    expect = seg.base_offset
    for base, last, raw in iter_file_batches(seg.log_path):
        if base != expect or HEADER.unpack_from(raw)[_H_COUNT] != last - base + 1:
            return False
        expect = last + 1
    return expect == seg.next_offset


def _read_indexes(seg: Segment, local: LocalSegmentInfo) -> bytes:
    """The ``.indexes`` object of ``seg``: its .index, .timeindex and producer snapshot, as
    long as its verification measured them. Blocking: run in a worker thread."""
    parts = [(seg.index_path, local.index_size), (seg.timeindex_path, local.timeindex_size)]
    if local.snapshot_path is not None:
        parts.append((local.snapshot_path, local.snapshot_size))
    return read_concatenated(parts)


def read_concatenated(parts: Sequence[tuple[str | os.PathLike[str], int]]) -> bytes:
    """The first ``size`` bytes of each file, one after another (an ``.indexes`` object);
    StorageError when one cannot be read or is shorter. Blocking: run in a worker thread."""
    out = bytearray()
    for path, size in parts:
        try:
            with open(path, "rb") as f:
                data = f.read(size)
        except OSError as e:
            raise StorageError(f"cannot read {path} for upload: {e}") from e
        if len(data) != size:
            raise StorageError(f"{path} has {len(data)} bytes, {size} expected: it changed during the upload")
        out += data
    return bytes(out)


def inspect_segment(log: Log, seg: Segment) -> LocalSegmentInfo:
    """Verify ``seg`` (full CRC scan: CorruptLogError if any batch is bad) and checksum it
    whole (SHA-256 and CRC-32C in one pass over the file). Blocking: run in a worker thread."""
    size = seg.size
    verified = seg.verify()
    if verified != size:
        raise CorruptLogError(seg.log_path, verified, f"verified {verified} of {size} bytes")
    digest = hashlib.sha256()
    crc = 0
    try:
        with open(seg.log_path, "rb") as f:
            left = size
            while left:
                chunk = f.read(min(_HASH_CHUNK, left))
                if not chunk:
                    raise CorruptLogError(seg.log_path, size - left, "file shorter than the segment")
                digest.update(chunk)
                crc = crc32c(chunk, crc)
                left -= len(chunk)
        index_size = os.path.getsize(seg.index_path)
        timeindex_size = os.path.getsize(seg.timeindex_path)
        snapshot = log.producer_snapshot_after(seg)
        snapshot_size = os.path.getsize(snapshot) if snapshot is not None else 0
    except FileNotFoundError as e:
        raise StorageError(f"segment {seg.log_path} disappeared while being uploaded: {e}") from e
    except OSError as e:
        raise StorageError(f"cannot read {seg.log_path} for upload: {e}") from e
    first_ts, epoch = -1, 0
    if size >= HEADER_SIZE:
        h = HEADER.unpack(seg.read_bytes(0, HEADER_SIZE))
        first_ts, epoch = h[_H_BASE_TS], max(-1, h[_H_EPOCH])
    return LocalSegmentInfo(
        size=size,
        sha256=digest.hexdigest(),
        crc32c=int(crc),
        first_timestamp=first_ts,
        leader_epoch=epoch,
        index_size=index_size,
        timeindex_size=timeindex_size,
        snapshot_path=snapshot,
        snapshot_size=snapshot_size,
        # The in-memory entries: a sealed segment's index is complete and fsynced with it
        # (and a torn tail, which the loader would have rebuilt, is never counted).
        txnindex_size=len(seg.txn_index) * TXN_ENTRY_SIZE,
        dense=not seg.compacted or _dense(seg),
    )


@dataclass(slots=True)
class PartitionState:
    """The uploader's memory of one partition (rebuilt from the bucket after a restart)."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    manifest: PartitionManifest | None = None
    loaded: bool = False  # manifest read from the store at least once
    recovered: bool = False  # COPY_STARTED / DELETE_STARTED leftovers cleaned up
    stopped: str | None = None  # why tiering of this partition stopped
    term: int | None = None  # cluster mode: the leader epoch it was last worked on in here

    @property
    def remote_next_offset(self) -> int:
        return self.manifest.next_offset() if self.manifest is not None else 0


def _last_remote_offset(m: PartitionManifest) -> int:
    """Last offset covered by COPIED or spilled segments, -1 if none."""
    copied = m.copied()
    if copied:
        return copied[-1].last_offset
    if m.spillover:
        return m.spillover[-1].last_offset
    return -1


def _check_extends(m: PartitionManifest, base: int, last: int) -> None:
    """Raise unless [base, last] extends the remote range of ``m`` contiguously."""
    covered = _last_remote_offset(m)
    if covered >= last:
        raise _Superseded()
    if covered >= base:
        raise _Gap(
            f"local segment [{base}, {last}] overlaps the remote range ending at {covered}: "
            "local and remote segment boundaries disagree"
        )
    nxt = m.next_offset()
    if base > nxt:
        raise _Gap(
            f"local segment starts at {base} but the remote data ends at {nxt}: "
            "uploading it would leave a hole"
        )


# A segment of a batch: the local file, what its verification found, its manifest entry.
_Entry = tuple[Segment, LocalSegmentInfo, RemoteSegment]


def _mark_copied(m: PartitionManifest, copied: list[_Entry], now: int) -> PartitionManifest:
    """``m`` with ``copied`` (our COPY_STARTED entries, their objects all up) COPIED; raises
    _Abandoned if one is gone or no longer ours, or what ``_check_extends`` raises."""
    for _, _, entry in copied:
        cur = m.get(entry.segment_id)
        if cur is None or cur.state not in (SegmentState.COPY_STARTED, SegmentState.COPIED):
            raise _Abandoned()
        if cur.state is SegmentState.COPIED:
            continue  # our own write, replayed after a lost response
        _check_extends(m, cur.base_offset, cur.last_offset)
        m = m.add_or_update(cur.with_state(SegmentState.COPIED, now))
    return m


class Uploader:
    """Upload, retention and cleanup logic over one LogManager and one bucket (see module
    docstring). Coroutines run on the broker's event loop; file work goes to threads."""

    def __init__(
        self,
        manager: LogManager,
        manifests: ManifestStore,
        config: TieringConfig,
        metrics: TieringMetrics,
        *,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.manager = manager
        self.manifests = manifests
        self.store = manifests.store
        self.config = config
        self.metrics = metrics
        metrics.partitions.lag_source = self._lag_figures
        self._clock_ms = clock_ms
        self._states: dict[tuple[str, int], PartitionState] = {}
        self._pending: dict[tuple[str, int], int] = {}  # sealed segments not uploaded, at the last look
        self._topic_docs: dict[str, dict[str, object]] = {}
        self._bucket = TokenBucket(config.upload_bytes_per_second)
        self._memory = ByteBudget(config.upload_memory_bytes, metrics.upload_memory_bytes.set)
        metrics.upload_memory_limit_bytes.set(config.upload_memory_bytes)
        # Told about every manifest read or written (the remote reader's cache).
        self.on_manifest: Callable[[PartitionManifest], None] | None = None
        # Cluster mode: this broker's leader epoch of a partition (-1: not its leader); every
        # manifest write carries it and is refused if the manifest has a later one.
        self.leader_epoch: Callable[[str, int], int] | None = None

    # --- state ------------------------------------------------------------------------------

    def state(self, topic: str, partition: int, topic_id: uuid.UUID) -> PartitionState:
        st = self._states.get((topic, partition))
        if st is None or st.topic_id != topic_id:
            st = PartitionState(topic, partition, topic_id)
            self._states[(topic, partition)] = st
        return st

    def cached_state(self, topic: str, partition: int) -> PartitionState | None:
        return self._states.get((topic, partition))

    def pending_segments(self, topic: str, partition: int) -> int | None:
        """Sealed segments of the partition the bucket lacked at the last look (None:
        never looked)."""
        return self._pending.get((topic, partition))

    def led_epoch(self, topic: str, partition: int) -> int | None:
        """This broker's leader epoch of the partition (cluster mode), None on a single broker."""
        return None if self.leader_epoch is None else self.leader_epoch(topic, partition)

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._states if k[0] == topic]:
            del self._states[key]
            self._pending.pop(key, None)
            self.metrics.forget_partition(*key)
        self._topic_docs.pop(topic, None)

    def _stop(self, st: PartitionState, kind: str, why: str) -> None:
        st.stopped = why
        self.metrics.upload_errors.labels(st.topic, kind).inc()
        self.metrics.partitions.set_stopped((st.topic, st.partition))
        logger.error("tiering of %s-%d stopped: %s", st.topic, st.partition, why)

    def _observe(self, st: PartitionState) -> None:
        m = st.manifest
        if m is None:
            return
        if self.on_manifest is not None and m.revision > 0:
            try:
                self.on_manifest(m)
            except Exception:
                logger.exception("manifest listener failed")
        self.metrics.partitions.set_remote(
            (st.topic, st.partition),
            m.remote_size(),
            len(m.copied()) + sum(r.segment_count for r in m.spillover),
        )

    async def _load(self, st: PartitionState) -> PartitionManifest:
        try:
            m, _ = await self.manifests.load(st.topic, st.topic_id, st.partition)
        except ManifestError as e:
            self._stop(st, "manifest", f"unreadable manifest: {e}")
            raise PartitionStoppedError(st.stopped or str(e)) from e
        st.manifest = m or PartitionManifest.empty(st.topic, st.topic_id, st.partition)
        st.loaded = True
        self._observe(st)
        return st.manifest

    def _led_epoch(self, st: PartitionState) -> int | None:
        """Cluster mode: this broker's leader epoch of the partition (-1: not led here);
        None on a single broker."""
        if self.leader_epoch is None:
            return None
        return self.leader_epoch(st.topic, st.partition)

    def begin_term(self, st: PartitionState) -> bool:
        """Before work on a partition: False if this broker does not lead it (cluster
        mode). A new leadership term here makes the next step recover again: others may
        have written the manifest meanwhile, and left leftovers."""
        epoch = self._led_epoch(st)
        if epoch is None:
            return True
        if epoch < 0:
            return False
        if epoch != st.term:
            st.recovered = False
            st.term = epoch
        return True

    async def _update(self, st: PartitionState, mutate: Mutation) -> PartitionManifest:
        epoch = self._led_epoch(st)
        if epoch is not None and epoch < 0:
            # Not led here any more (leadership lost mid-upload): claim the epoch we last
            # led in, so a successor's write in a later epoch fences us. Never led here (a
            # deleted topic's cleanup): no epoch to claim.
            epoch = st.term
        try:
            m = await self.manifests.update(st.topic, st.topic_id, st.partition, mutate, leader_epoch=epoch)
        except FencedLeaderEpochError as e:
            # A newer leader writes this manifest now; what we cached is stale.
            st.loaded = False
            logger.info("tiering of %s-%d fenced: %s", st.topic, st.partition, e)
            raise PartitionStoppedError(str(e)) from e
        except ManifestError as e:
            if isinstance(e, SegmentOverlapError | CompactionConflictError):
                raise
            self._stop(st, "manifest", f"manifest update failed: {e}")
            raise PartitionStoppedError(st.stopped or str(e)) from e
        st.manifest = m
        st.loaded = True
        self._observe(st)
        return m

    # --- recovery and remote deletion ---------------------------------------------------------

    async def recover(self, st: PartitionState) -> None:
        """Finish what a crash interrupted: COPY_STARTED and DELETE_STARTED entries are
        deleted (objects first, then the entries)."""
        m = await self._load(st)
        # Entries remote compaction replaced stay until their grace period has passed
        # (readers may still be reading them): ``delete_replaced`` removes them.
        leftovers = [
            s
            for s in m.segments
            if s.state in (SegmentState.COPY_STARTED, SegmentState.DELETE_STARTED) and not s.replaced
        ]
        for s in leftovers:
            # Data the bucket never acknowledged (an upload) or was already dropping.
            logger.warning(
                "%s-%d: discarding the remote segment [%d, %d] (%d bytes, %s) a crash interrupted",
                st.topic,
                st.partition,
                s.base_offset,
                s.last_offset,
                s.size,
                "upload" if s.state is SegmentState.COPY_STARTED else "deletion",
            )
        if leftovers:
            await self._delete_remote(
                st,
                {s.segment_id for s in leftovers},
                states=(SegmentState.COPY_STARTED, SegmentState.DELETE_STARTED),
            )
        st.recovered = True

    async def _delete_remote(
        self,
        st: PartitionState,
        ids: set[uuid.UUID],
        *,
        states: Iterable[SegmentState],
        new_log_start: int | None = None,
        after_mark: Callable[[PartitionManifest], None] | None = None,
    ) -> list[RemoteSegment]:
        """Delete the segments ``ids`` that are in one of ``states``: CAS DELETE_STARTED (and
        the new log start offset), ``after_mark``, delete the objects, CAS them away."""
        allowed = frozenset(states)
        now = self._clock_ms()
        marked: list[RemoteSegment] = []

        def mark(m: PartitionManifest) -> PartitionManifest:
            marked.clear()
            if new_log_start is not None:
                m = m.advance_log_start(new_log_start)
            for s in m.segments:
                if s.segment_id not in ids or s.state not in allowed:
                    continue
                if s.state is not SegmentState.DELETE_STARTED:
                    s = s.with_state(SegmentState.DELETE_STARTED, now)
                    m = m.add_or_update(s)
                marked.append(s)
            return m

        m = await self._update(st, mark)
        fault("after_delete_started")
        if after_mark is not None:
            after_mark(m)
        if not marked:
            return []
        await self.store.delete_many([k for s in marked for k in s.keys.all()])

        def drop(m: PartitionManifest) -> PartitionManifest:
            for s in marked:
                if m.get(s.segment_id) is not None:
                    m = m.add_or_update(s.with_state(SegmentState.DELETED, now))
            return m.remove_deleted()

        await self._update(st, drop)
        self.metrics.remote_deleted_segments.labels(st.topic).inc(len(marked))
        return marked

    async def delete_replaced(self, st: PartitionState, now_ms: int) -> int:
        """Delete the objects of entries remote compaction replaced more than
        ``remote_compaction_grace_ms`` ago, then the entries (idempotent; only looks at the
        cached manifest, so it costs nothing when there is nothing to do)."""
        m = st.manifest
        if m is None:
            return 0
        due = m.replaced_due(now_ms, self.config.remote_compaction_grace_ms)
        if not due:
            return 0
        removed = await self._delete_remote(
            st, {s.segment_id for s in due}, states=(SegmentState.DELETE_STARTED,)
        )
        return len(removed)

    # --- uploads ------------------------------------------------------------------------------

    async def upload_partition(self, log: Log, topic_id: uuid.UUID, *, min_age_ms: int | None = None) -> int:
        """Upload every eligible segment of ``log`` in offset order; returns how many.
        ``min_age_ms``: in place of the topic's ``remote.copy.lag.ms`` (0 at shutdown).
        Raises RetriableObjectStoreError / ObjectStoreError when the store fails.

        Segments go up in batches of up to ``upload_segments_in_flight`` (and
        ``upload_memory_bytes``): one COPY_STARTED manifest write for the batch, every
        object of it uploaded concurrently; the batch's COPIED is written together with the
        next batch's COPY_STARTED (one manifest write per batch, not two: each is a round
        trip the uploads wait for), or alone when no batch follows."""
        st = self.state(log.topic, log.partition, topic_id)
        if st.stopped is not None or not log.is_online:
            return 0
        if not self.begin_term(st):
            return 0  # no longer led here: the new leader uploads
        epoch = self._led_epoch(st)
        if not st.recovered:
            await self.recover(st)
        uploaded = 0
        lag_ms = log.config.remote_copy_lag_ms if min_age_ms is None else min_age_ms
        # Verifications (CRC scan + SHA-256, worker threads) of the next batch start while
        # the current one uploads; each result, or error, is taken at its own turn.
        ahead: dict[Segment, asyncio.Task[LocalSegmentInfo]] = {}
        # The last batch's segments whose objects are all up: their COPIED goes into the next
        # batch's COPY_STARTED write, or into a write of its own when no batch follows.
        pending: list[_Entry] = []
        try:
            try:
                while st.stopped is None and log.is_online:
                    if self._led_epoch(st) != epoch:
                        break  # leadership moved mid-pass: a deposed leader stops uploading
                    m = st.manifest
                    assert m is not None
                    nxt = max(m.next_offset(), log.log_start_offset)
                    if pending:
                        nxt = max(nxt, pending[-1][2].last_offset + 1)
                    candidates = log.sealed_segments_for_upload(log.last_stable_offset, from_offset=nxt)
                    self._observe_lag(st, log, nxt)
                    batch = self._batch(candidates, lag_ms)
                    if not batch:
                        break
                    following = self._batch(candidates[len(batch) :], lag_ms)
                    inspections: list[asyncio.Task[LocalSegmentInfo]] = []
                    for seg in batch:
                        task = ahead.pop(seg, None)
                        if task is None:
                            task = asyncio.ensure_future(asyncio.to_thread(inspect_segment, log, seg))
                        inspections.append(task)
                    for task in ahead.values():
                        _drop(task)
                    ahead = {
                        seg: asyncio.ensure_future(asyncio.to_thread(inspect_segment, log, seg))
                        for seg in following
                    }
                    try:
                        done, pending = await self._upload_batch(st, log, batch, inspections, pending)
                    except CorruptLogError as e:
                        self._stop(
                            st, "corrupt", f"local segment {e.path} is corrupt and will not be uploaded: {e}"
                        )
                        break
                    except _Gap as e:
                        self._stop(st, "gap", str(e))
                        break
                    uploaded += done
                    if not pending:
                        # Nothing of this batch went up. Superseded: ``st.manifest`` is the newer
                        # one that said so, go on from its end. Vanished (or no progress): the
                        # next pass looks again.
                        newer = st.manifest
                        if newer is not m and newer is not None and newer.next_offset() > nxt:
                            continue
                        break
            except BaseException as e:
                if pending:
                    if isinstance(e, Exception):
                        # The batch after them failed; these are up: record them all the same.
                        try:
                            uploaded += await self._finish(st, pending)
                        except Exception:
                            st.recovered = False  # the next visit cleans their COPY_STARTED up
                            logger.warning("%s-%d: COPIED write failed after %s", st.topic, st.partition, e)
                    else:
                        st.recovered = False  # cancelled: the next visit cleans up first
                    pending = []
                raise
            finally:
                for task in ahead.values():
                    _drop(task)
            if pending:
                try:
                    uploaded += await self._finish(st, pending)
                except Exception:
                    st.recovered = False  # the next visit cleans their COPY_STARTED up first
                    raise
        finally:
            # Every pass, failed ones too (a store outage): the lag's age keeps growing.
            if st.manifest is not None:
                self._observe_lag(st, log, st.remote_next_offset)
        return uploaded

    def _batch(self, candidates: list[Segment], lag_ms: int) -> list[Segment]:
        """The next segments to upload together: old enough, contiguous, at most
        ``upload_segments_in_flight`` of them and (beyond the first) within
        ``upload_memory_bytes``."""
        batch: list[Segment] = []
        size = 0
        for seg in candidates[: self.config.upload_segments_in_flight]:
            if lag_ms > 0 and not self._old_enough(seg, lag_ms):
                break
            if batch and (seg.base_offset != batch[-1].next_offset or size + seg.size > self._memory.limit):
                break
            batch.append(seg)
            size += seg.size
        return batch

    def _old_enough(self, seg: Segment, lag_ms: int) -> bool:
        try:
            mtime = seg.file.mtime_ms()
        except StorageError:
            return False
        return self._clock_ms() - mtime >= lag_ms

    def _lag_figures(self, key: tuple[str, int]) -> LagFigures | None:
        """The partition's lag gauges now (``PartitionGauges.lag_source``, at scrape time):
        its sealed segments above the remote next offset, their bytes, the oldest one's
        age, and the bytes of all its local segments."""
        try:
            log = self.manager.get_log(*key)
        except StrataError:
            return None
        st = self._states.get(key)
        remote_next = st.remote_next_offset if st is not None and st.manifest is not None else 0
        segs = log.segments()
        local = float(sum(s.size for s in segs))
        pending = [s for s in segs[:-1] if s.next_offset > remote_next]
        if not pending:
            return (0.0, 0.0, 0.0, local)
        age_ms = 0
        # Sealed when last written: its mtime is when it stopped growing.
        with contextlib.suppress(StorageError):
            age_ms = max(0, self._clock_ms() - pending[0].file.mtime_ms())
        return (float(len(pending)), float(sum(s.size for s in pending)), age_ms / 1000, local)

    def _observe_lag(self, st: PartitionState, log: Log, remote_next: int) -> None:
        """After a visit: what the pass schedule reads (``pending_segments``); the gauges
        are computed at scrape time, so an idle partition's visit sets none of them."""
        key = (st.topic, st.partition)
        self._pending[key] = sum(1 for s in log.segments()[:-1] if s.next_offset > remote_next)
        self.metrics.partitions.track_lag(key)

    async def _inspected(
        self,
        st: PartitionState,
        log: Log,
        batch: list[Segment],
        inspections: list[asyncio.Task[LocalSegmentInfo]],
    ) -> list[tuple[Segment, LocalSegmentInfo]]:
        """The batch's verified segments: its longest prefix whose verification succeeded.
        A corrupt or vanished segment ends the prefix; if it is the first, its error is
        raised (CorruptLogError) or the batch is empty (vanished), as for a lone segment."""
        out: list[tuple[Segment, LocalSegmentInfo]] = []
        for i, (seg, task) in enumerate(zip(batch, inspections, strict=True)):
            try:
                local = await task
            except (LogClosedError, StorageError) as e:
                for rest in inspections[i + 1 :]:
                    _drop(rest)
                if out:
                    break  # the segment's own turn comes next pass, and says so then
                if isinstance(e, CorruptLogError):
                    raise
                if seg.deleted or not log.is_online:
                    break
                raise
            out.append((seg, local))
        return out

    async def _upload_batch(
        self,
        st: PartitionState,
        log: Log,
        batch: list[Segment],
        inspections: list[asyncio.Task[LocalSegmentInfo]],
        finishing: list[_Entry],
    ) -> tuple[int, list[_Entry]]:
        """Upload ``batch`` (contiguous segments) through the state machine. ``inspections``:
        their verifications, already started. ``finishing``: the previous batch's segments
        whose objects are all up; their COPIED goes into this batch's COPY_STARTED write.

        Returns how many of ``finishing`` were COPIED, and this batch's segments whose
        objects all went up (a prefix of it), whose COPIED the caller writes next (with the
        following batch, or by ``_finish``); none if the batch was superseded or its files
        disappeared (nothing left behind). If this raises, ``finishing`` is not COPIED yet
        unless the error came after this batch's COPY_STARTED write."""
        verified = await self._inspected(st, log, batch, inspections)
        if not verified:
            return (await self._finish(st, finishing) if finishing else 0), []
        now = self._clock_ms()
        entries: list[_Entry] = []
        for seg, local in verified:
            sid = uuid.uuid4()
            keys = segment_keys(st.topic, st.topic_id, st.partition, seg.base_offset, sid)
            entry = RemoteSegment(
                segment_id=sid,
                base_offset=seg.base_offset,
                last_offset=seg.next_offset - 1,
                first_timestamp=local.first_timestamp,
                max_timestamp=seg.max_timestamp,
                size=local.size,
                log_sha256=local.sha256,
                log_crc32c=local.crc32c,
                index_size=local.index_size,
                timeindex_size=local.timeindex_size,
                leader_epoch=local.leader_epoch,
                state=SegmentState.COPY_STARTED,
                keys=keys,
                created_ms=now,
                updated_ms=now,
                has_producer_snapshot=local.snapshot_path is not None,
                # A cleaned segment skips offsets: its span is not its record count.
                record_count=None if not local.dense else seg.next_offset - seg.base_offset,
                compacted=not local.dense,
                txnindex_size=local.txnindex_size or None,
                indexes_size=local.index_size + local.timeindex_size + local.snapshot_size,
            )
            entries.append((seg, local, entry))
        log_start = log.log_start_offset
        seen: list[PartitionManifest] = []
        refused: list[Exception] = []  # why this batch was not started, its previous one finished

        def start(m: PartitionManifest) -> PartitionManifest:
            seen[:] = [m]
            refused.clear()
            if finishing:
                m = _mark_copied(m, finishing, now)
            m = m.advance_log_start(log_start)
            try:
                _check_extends(m, entries[0][2].base_offset, entries[0][2].last_offset)
            except (_Superseded, _Gap) as e:
                if not finishing:
                    raise
                refused.append(e)  # the previous batch's COPIED is still written
                return m
            for _, _, entry in entries:  # contiguous among themselves (``_batch``)
                m = m.add_or_update(entry)
            return m

        try:
            await self._update(st, start)
        except (_Superseded, _Abandoned, _Gap, SegmentOverlapError) as e:
            if finishing:
                # Raised by the previous batch's COPIED (this batch's refusal is in
                # ``refused``): another uploader recorded that range first.
                await self._lost(st, finishing, e)
                finishing.clear()
                return 0, []
            if not isinstance(e, _Superseded):
                raise
            # Another writer (a deposed leader finishing its pass, a concurrent uploader)
            # got further than our cached manifest: take theirs, or every later pass would
            # pick this same segment again and never upload anything.
            if seen:
                st.manifest = seen[0]
                st.loaded = True
                self._observe(st)
            return 0, []
        finished = len(finishing)
        if finishing:
            self._copied(st, finishing)
            finishing.clear()  # done: the caller's list, so an error below does not redo it
        if refused:
            if isinstance(refused[0], _Gap):
                raise refused[0]
            return finished, []
        fault("after_copy_started")
        try:
            await self._bucket.take(
                sum(
                    local.size
                    + local.index_size
                    + local.timeindex_size
                    + local.snapshot_size
                    + local.txnindex_size
                    for _, local, _ in entries
                )
            )
            results = await asyncio.gather(
                *(self._put_segment(seg, local, entry.keys) for seg, local, entry in entries),
                return_exceptions=True,
            )
        except BaseException:
            st.recovered = False  # cancelled mid-upload: the next visit cleans up first
            raise
        # The COPIED prefix: up to the first segment whose objects did not all go up.
        ok = 0
        while ok < len(results) and results[ok] is None:
            ok += 1
        failed = entries[ok:]
        error = results[ok] if ok < len(results) else None
        if error is not None and not isinstance(error, Exception):
            st.recovered = False
            raise error  # cancellation and the like: the next visit cleans up first
        if isinstance(error, StorageError):
            # The local files went away (topic deleted, log closed): drop those copies.
            logger.info(
                "%s-%d: abandoning upload of %s: %s", st.topic, st.partition, failed[0][0].log_path, error
            )
            await self._abandon(st, {e.segment_id for _, _, e in failed}, [e.keys for _, _, e in failed])
            error = None
        elif error is not None:
            st.recovered = False  # the next visit cleans the COPY_STARTED entries up first
        copied = entries[:ok]
        if error is not None:
            if copied:
                await self._finish(st, copied)
            raise error
        return finished, copied

    async def _finish(self, st: PartitionState, copied: list[_Entry]) -> int:
        """Write COPIED for ``copied`` (their objects are all up) in a manifest write of its
        own, and empty the list; how many were COPIED (0: lost to another uploader, objects
        removed)."""
        now = self._clock_ms()
        try:
            await self._update(st, lambda m: _mark_copied(m, copied, now))
        except (_Superseded, _Abandoned, _Gap, SegmentOverlapError) as e:
            await self._lost(st, copied, e)
            copied.clear()
            return 0
        self._copied(st, copied)
        n = len(copied)
        copied.clear()
        return n

    async def _lost(self, st: PartitionState, entries: list[_Entry], why: Exception) -> None:
        logger.info(
            "%s-%d: upload of [%d, %d] lost to another uploader (%s); removing its objects",
            st.topic,
            st.partition,
            entries[0][2].base_offset,
            entries[-1][2].last_offset,
            type(why).__name__.strip("_"),
        )
        await self._abandon(st, {e.segment_id for _, _, e in entries}, [e.keys for _, _, e in entries])

    def _copied(self, st: PartitionState, copied: list[_Entry]) -> None:
        fault("after_copied")
        for _, local, entry in copied:
            self.metrics.uploaded_segments.labels(st.topic).inc()
            self.metrics.uploaded_bytes.labels(st.topic).inc(local.size)
            logger.debug(
                "%s-%d: uploaded [%d, %d]", st.topic, st.partition, entry.base_offset, entry.last_offset
            )

    async def _put_segment(self, seg: Segment, local: LocalSegmentInfo, keys: SegmentKeys) -> None:
        """Every object of one segment, at once; the ``.log`` with the CRC-32C its
        verification computed (the store sends it instead of hashing the bytes again) and
        within the upload memory budget. Raises the first error once all have finished."""

        async def put_log() -> None:
            async with self._memory.hold(local.size):
                await self.store.put_file_checked(
                    keys.log, seg.log_path, length=local.size, crc32c=local.crc32c
                )
            fault("after_log_upload")

        async def put_indexes() -> None:
            data = await asyncio.to_thread(_read_indexes, seg, local)
            await self.store.put(keys.indexes, data)

        # The indexes and the snapshot go up as one object (``.indexes``: a request per
        # segment instead of three, each costing the endpoint as much as a manifest write),
        # while the .log does.
        puts: list[Coroutine[Any, Any, object]] = [put_log(), put_indexes()]
        if local.txnindex_size:
            puts.append(self.store.put_file(keys.txnindex, seg.txnindex_path, length=local.txnindex_size))
        await _all_or_first_error(puts)

    async def _abandon(self, st: PartitionState, sids: set[uuid.UUID], keys: list[SegmentKeys]) -> None:
        """Remove our own COPY_STARTED copies (never a COPIED one)."""
        await self._delete_remote(st, sids, states=(SegmentState.COPY_STARTED, SegmentState.DELETE_STARTED))
        # If someone else already dropped the entries, our objects may have been written
        # after their delete: delete them again (idempotent).
        await self.store.delete_many([k for ks in keys for k in ks.all()])

    # --- retention ------------------------------------------------------------------------

    def is_uploaded(self, topic: str, partition: int) -> Callable[[Segment], bool]:
        """The local-retention predicate: the segment's range is covered by COPIED segments
        (contiguous uploads: it ends at or below the remote next offset)."""
        st = self._states.get((topic, partition))
        if st is None or st.manifest is None:
            return lambda seg: False
        remote_next = st.remote_next_offset
        return lambda seg: seg.next_offset <= remote_next

    async def apply_local_retention(self, log: Log, now_ms: int) -> list[int]:
        """Local retention of a tiered log (only uploaded segments go)."""
        st = self._states.get((log.topic, log.partition))
        if st is None or st.manifest is None or not log.is_online:
            return []
        if len(log.segments()) < 2:
            return []  # only the active segment, which local retention never deletes: no thread hop
        try:
            deleted = await asyncio.to_thread(
                log.apply_local_retention, now_ms, self.is_uploaded(log.topic, log.partition)
            )
        except StrataError as e:
            logger.error("local retention of %s failed: %s", log.name, e)
            return []
        if deleted:
            guard = self.manager.disk_guard
            if guard is not None:
                guard.invalidate()
            self._observe_lag(st, log, st.remote_next_offset)
        return deleted

    async def apply_total_retention(self, log: Log, topic_id: uuid.UUID, now_ms: int) -> int:
        """Total retention over remote + local data: delete remote segments that are below
        the log start offset, older than retention.ms, or in excess of retention.bytes
        (oldest first); advance the log start offset. Returns how many were deleted."""
        st = self.state(log.topic, log.partition, topic_id)
        if st.stopped is not None and st.manifest is None:
            return 0
        if not self.begin_term(st):
            return 0  # no longer led here
        if not st.recovered:
            await self.recover(st)
        m = st.manifest
        assert m is not None
        # The manifest's log start is the truth for remote data (a crash may have hit
        # between the CAS that advanced it and the local update).
        self._advance_local_start(log, m.log_start_offset)
        cfg = log.config
        lso = log.log_start_offset
        remote_next = m.next_offset()
        local_only = sum(s.size for s in log.segments() if s.next_offset > remote_next)
        total = m.remote_size() + local_only

        def doomed(last: int, size: int, max_ts: int) -> bool:
            nonlocal total
            below = last < lso
            expired = cfg.retention_ms >= 0 and now_ms - max_ts > cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and total - size >= cfg.retention_bytes
            if below or expired or too_big:
                total -= size
                return True
            return False

        refs: list[SpilloverRef] = []
        for ref in m.spillover:
            if not doomed(ref.last_offset, ref.size, ref.max_timestamp):
                break
            refs.append(ref)
        segs: list[RemoteSegment] = []
        if len(refs) == len(m.spillover):
            for s in m.copied():
                if not doomed(
                    s.last_offset, s.size, s.max_timestamp if s.max_timestamp >= 0 else s.created_ms
                ):
                    break
                segs.append(s)
        if not refs and not segs:
            # Record a moved log start (DeleteRecords), but never create a manifest for a
            # topic that was never tiered.
            if m.log_start_offset < lso and (m.revision > 0 or cfg.remote_storage_enable):
                await self._update(st, lambda cur: cur.advance_log_start(lso))
            return 0
        last = segs[-1].last_offset if segs else refs[-1].last_offset
        new_start = max(lso, last + 1)
        deleted = 0
        for ref in refs:
            deleted += await self._delete_spillover(st, log, ref, new_start)
        if segs:
            removed = await self._delete_remote(
                st,
                {s.segment_id for s in segs},
                states=(SegmentState.COPIED, SegmentState.DELETE_STARTED),
                new_log_start=new_start,
                after_mark=lambda cur: self._advance_local_start(log, cur.log_start_offset),
            )
            deleted += len(removed)
        logger.info(
            "%s: total retention deleted %d remote segment(s); log start offset now %d",
            log.name,
            deleted,
            log.log_start_offset,
        )
        return deleted

    async def _delete_spillover(self, st: PartitionState, log: Log, ref: SpilloverRef, new_start: int) -> int:
        m = await self._update(st, lambda cur: cur.advance_log_start(max(new_start, ref.last_offset + 1)))
        self._advance_local_start(log, m.log_start_offset)
        segs = await self.manifests.load_spillover(ref)
        await self.store.delete_many([k for s in segs for k in s.keys.all()])
        await self._update(st, lambda cur: cur.drop_spillover(ref.key))
        await self.store.delete(ref.key)
        self.metrics.remote_deleted_segments.labels(st.topic).inc(len(segs))
        return len(segs)

    @staticmethod
    def _advance_local_start(log: Log, offset: int) -> None:
        target = min(offset, log.high_watermark)
        if target > log.log_start_offset:
            try:
                log.advance_log_start_offset(target)
            except StrataError as e:
                logger.error("cannot advance the log start offset of %s to %d: %s", log.name, target, e)

    # --- topics ---------------------------------------------------------------------------

    async def sync_topic_manifest(self, info: TopicInfo) -> None:
        """Write ``topics/<topic>.json`` when the topic is first tiered or changed."""
        doc: dict[str, object] = {
            "name": info.name,
            "topic_id": str(info.topic_id),
            "partitions": info.partitions,
            "configs": dict(info.configs),
        }
        if self._topic_docs.get(info.name) == doc:
            return
        await self.manifests.put_topic_manifest(doc)
        self._topic_docs[info.name] = doc

    async def delete_topic(self, name: str, topic_id: uuid.UUID, partitions: int) -> int:
        """Delete a deleted topic's remote data: every entry DELETE_STARTED, every object
        under its partition roots, the manifests, and the topic manifest if it is still
        this topic's. Idempotent. Returns the number of objects deleted."""
        removed = 0
        for p in range(partitions):
            st = PartitionState(name, p, topic_id)
            m, _ = await self.manifests.load(name, topic_id, p)
            if m is not None and m.segments:
                await self._update(
                    st,
                    lambda cur: _mark_all(cur, self._clock_ms()),
                )
            root = partition_root(name, topic_id, p) + "/"
            mkey = manifest_key(name, topic_id, p)
            objs = [o.key for o in await self.store.list(root) if o.key != mkey]
            await self.store.delete_many(objs)
            await self.store.delete(mkey)
            removed += len(objs) + (1 if m is not None else 0)
        doc = await self.manifests.load_topic_manifest(name)
        if doc is not None and doc.get("topic_id") == str(topic_id):
            await self.store.delete(topic_manifest_key(name))
            removed += 1
        self.forget_topic(name)
        logger.info("deleted the remote data of topic %s (%d objects)", name, removed)
        return removed


def _mark_all(m: PartitionManifest, now: int) -> PartitionManifest:
    for s in m.segments:
        if s.state in (SegmentState.COPY_STARTED, SegmentState.COPIED):
            m = m.add_or_update(s.with_state(SegmentState.DELETE_STARTED, now))
    return m


__all__ = [
    "FAULT_ENV",
    "FAULT_EXIT_CODE",
    "FAULT_POINTS",
    "LocalSegmentInfo",
    "PartitionState",
    "PartitionStoppedError",
    "TokenBucket",
    "Uploader",
    "inspect_segment",
]
