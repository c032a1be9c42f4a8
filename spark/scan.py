"""Executing one scan task: ranged GETs (or broker fetches) in, Arrow RecordBatches out.

Cold tasks read each slice of a segment's ``.log`` object with ranged GETs of
``readChunkBytes``, the next GET in flight while the current chunk is decoded; a batch cut
by a chunk boundary is completed by the next chunk. Only bytes of the planned slices are
requested, and reading stops as soon as the slice's end offset is reached.

Checks while reading, so that a damaged bucket never yields wrong rows silently: every
batch's CRC-32C and record structure (``spark.columnar``); offsets are dense (the first
batch of a segment starts at its base offset, each batch where the previous one ended,
the last one ends at the segment's last offset); an object shorter than its manifest
entry says is corrupt. Failures raise ``CorruptLogError`` / ``ObjectNotFoundError`` naming
the object key and the offset.

Hot tasks fetch ``[start, end)`` from the broker with Fetch requests (read-uncommitted,
like Spark's Kafka source; the end is at or below the high watermark snapshot of the plan,
so every record is committed). If the broker answers OFFSET_OUT_OF_RANGE because the
range was uploaded and deleted locally since the plan, the range is read from the bucket.
"""

from __future__ import annotations

import concurrent.futures
import logging
import uuid
from collections.abc import Iterator
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hot.errors import (
    CorruptLogError,
    CorruptRecordError,
    ObjectNotFoundError,
    OffsetOutOfRangeError,
    StrataError,
)
from hot.txn_cleaning import AbortedRanges
from hot.txn_index import AbortedTxn
from kclient import KafkaClient
from kwire import ApiKey
from kwire.address import HostPort
from kwire.error_table import OFFSET_OUT_OF_RANGE, TOPIC_AUTHORIZATION_FAILED, error_for_code
from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from spark.columnar import BatchBounds, BatchDecodeError, DecodedChunk, Frames, batch_bounds, decode_columns
from spark.options import ReadOptions
from spark.plan import (
    BrokerClient,
    ColdTask,
    HotTask,
    Planner,
    ScanTask,
    SegmentSlice,
    open_store_from,
    refused,
    run_blocking,
)
from tiering.manifest_store import ManifestStore
from tiering.store import InvalidRangeError, SyncObjectStore

# Arrow batches handed to Spark stay below this: its JVM side takes Arrow buffers up to 4 MiB
# from a pool (Netty's chunk size) but allocates and frees larger ones for every batch.
ARROW_BATCH_BYTES: Final = 2 << 20
# The first GET of a slice is small so that rows flow early; later ones double up to readChunkBytes.
_FIRST_CHUNK: Final = 1 << 20
_EMPTY_FETCHES: Final = 5  # empty fetch responses tolerated below the planned high watermark
_OFFSET_COLUMN: Final = 4  # spark.schema.COLUMNS.index("offset")
logger = logging.getLogger(__name__)


def read_task(
    task: ScanTask | None, options: ReadOptions, *, store: SyncObjectStore | None = None
) -> Iterator[pa.RecordBatch]:
    """The rows of one task as Arrow RecordBatches (``spark.schema.ARROW_SCHEMA``); empty
    batches are not yielded. ``store`` (a test seam) defaults to one opened from the options."""
    if task is None:
        return
    own = store is None
    s = store if store is not None else SyncObjectStore(open_store_from(options.store))
    try:
        batches: Iterator[pa.RecordBatch]
        if isinstance(task, ColdTask):
            batches = (b for sl in task.slices for b in read_cold(s, task, sl, options))
        else:
            batches = read_hot(task, options, s)
        for batch in batches:
            yield from split_batch(batch, ARROW_BATCH_BYTES)
    finally:
        if own:
            s.close()


def split_batch(batch: pa.RecordBatch, target: int) -> Iterator[pa.RecordBatch]:
    """``batch`` as zero-copy slices of about ``target`` bytes at most."""
    rows = batch.num_rows
    size = batch.nbytes
    if size <= target or rows <= 1:
        yield batch
        return
    step = max(1, rows * target // size)
    for start in range(0, rows, step):
        yield batch.slice(start, step)


def read_cold(
    store: SyncObjectStore, task: ColdTask, sl: SegmentSlice, options: ReadOptions
) -> Iterator[pa.RecordBatch]:
    """The rows of one slice of a cold task. A segment that retention deleted since the
    plan (the manifest's log start is now past it) is data loss: ``OffsetOutOfRangeError``,
    or with ``failOnDataLoss=false`` its rows not read yet are skipped. A segment that
    remote compaction replaced since the plan (its objects deleted after the grace
    period) is read on from the segments the manifest names now. A missing object that
    the manifest still names is damage: ``ObjectNotFoundError``."""
    done = sl.start_offset  # rows below this were yielded
    aborted = AbortedRanges(task.aborted) if task.aborted else None
    try:
        for batch in read_slice(store, task.topic, task.partition, sl, options.read_chunk_bytes, aborted):
            done = batch.column(_OFFSET_COLUMN)[-1].as_py() + 1
            yield batch
    except ObjectNotFoundError:
        log_start = _archive_log_start(options, task.topic, task.topic_id, task.partition)
        if log_start is not None and log_start <= sl.last_offset:
            again = _replanned(options, task, sl, done)
            if again is None:
                raise  # the manifest still names this object: it should exist
            for nsl in again:
                for batch in read_slice(
                    store, task.topic, task.partition, nsl, options.read_chunk_bytes, aborted
                ):
                    rows = batch.filter(pc.greater_equal(batch.column(_OFFSET_COLUMN), done))
                    if rows.num_rows:
                        yield rows
            return
        why = (
            "deleted with their topic"
            if log_start is None
            else f"deleted by retention (the log now starts at offset {log_start})"
        )
        _data_loss(options, task.topic, task.partition, done, sl.end_offset, why)


def _replanned(
    options: ReadOptions, task: ColdTask, sl: SegmentSlice, done: int
) -> list[SegmentSlice] | None:
    """Slices holding ``[done, sl.end_offset)`` in the manifest as it is now, if they are
    other objects than ``sl``'s (a remote compaction swapped them in) and cover the range
    from ``done`` on without a hole; else None."""
    if task.topic_id is None or done >= sl.end_offset:
        return [] if done >= sl.end_offset else None
    tid = uuid.UUID(task.topic_id)

    async def plan() -> list[SegmentSlice]:
        planner = Planner(options, open_store_from(options.store))
        try:
            return await planner.archived_slices(task.topic, tid, task.partition, done, sl.end_offset)
        finally:
            await planner.store.close()

    slices = run_blocking(plan)
    if not slices or any(n.key == sl.key for n in slices) or slices[0].base_offset > done:
        return None
    if slices[-1].last_offset + 1 < sl.end_offset:
        return None
    logger.info(
        "%s-%d: segment %s was replaced (remote compaction); reading on from its successor",
        task.topic,
        task.partition,
        sl.key,
    )
    return slices


def _archive_log_start(options: ReadOptions, topic: str, topic_id: str | None, partition: int) -> int | None:
    """The partition manifest's log start offset now, or None without a manifest."""
    if topic_id is None:
        return None
    tid = uuid.UUID(topic_id)

    async def load() -> int | None:
        store = open_store_from(options.store)
        try:
            m, _ = await ManifestStore(store).load(topic, tid, partition)
            return None if m is None else m.log_start_offset
        finally:
            await store.close()

    return run_blocking(load)


def _data_loss(options: ReadOptions, topic: str, partition: int, start: int, end: int, why: str) -> None:
    """Offsets ``[start, end)`` of a plan are gone: fail, or (failOnDataLoss=false) log it."""
    what = f"{topic}-{partition}: offsets {start} to {end - 1}, planned to be read, were {why}"
    if options.fail_on_data_loss:
        raise OffsetOutOfRangeError(
            f"{what}. Some data was lost after the scan was planned: a DataFrame's offset ranges "
            "are fixed by its first action. Read again with a fresh DataFrame, or set option "
            "failOnDataLoss=false to skip records deleted in the meantime"
        )
    logger.warning("%s; skipped (failOnDataLoss=false)", what)


def _get(store: SyncObjectStore, sl: SegmentSlice, where: str, start: int, end: int) -> bytes:
    try:
        data = store.get(sl.key, start=start, end=end)
    except ObjectNotFoundError as e:
        raise ObjectNotFoundError(
            f"{where}: segment object {sl.key} (offsets {sl.base_offset}-{sl.last_offset}) is missing: {e}"
        ) from None
    except InvalidRangeError as e:
        data = b""
        if e.object_size is None:
            raise
    if len(data) != end - start:
        raise CorruptLogError(
            sl.key,
            sl.start_offset,
            f"{where}: object is shorter than its manifest entry ({sl.size} bytes): "
            f"got {len(data)} of bytes [{start}, {end})",
            what="offset",
        )
    return data


def read_slice(
    store: SyncObjectStore,
    topic: str,
    partition: int,
    sl: SegmentSlice,
    chunk_bytes: int,
    aborted: AbortedRanges | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of offsets ``[sl.start_offset, sl.end_offset)`` of one segment slice
    (without the records of ``aborted`` transactions: read_committed)."""
    where = f"{topic}-{partition}"
    if sl.start_position >= sl.end_position:
        return
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="strata-prefetch")

    def fetch(start: int, size: int) -> tuple[concurrent.futures.Future[bytes], int]:
        stop = min(start + size, sl.end_position)
        return pool.submit(_get, store, sl, where, start, stop), stop

    try:
        pos = sl.start_position
        size = min(chunk_bytes, _FIRST_CHUNK)
        pending: concurrent.futures.Future[bytes] | None
        pending, stop = fetch(pos, size)
        expect: int | None = sl.base_offset if sl.start_position == 0 else None
        next_offset = -1
        while pending is not None:
            data = pending.result()
            pending = None
            bounds = batch_bounds(data)
            # The next GET starts at the first batch not whole in this one (a batch cut by
            # the chunk's end is read again, whole), so chunks are never concatenated.
            nxt = pos + bounds.consumed
            if bounds.error is None and nxt < sl.end_position:
                size = min(size * 2, chunk_bytes)
                if bounds.consumed == 0:  # a batch larger than the chunk, or a truncated one
                    if stop >= sl.end_position or bounds.next_size <= len(data):
                        raise _truncated(sl, next_offset, pos)
                    size = max(size, bounds.next_size)
                pending, stop = fetch(nxt, size)
            if bounds.consumed or bounds.error is not None:
                decoded = _decode(data, pos, topic, partition, sl, bounds, aborted)
                fr = decoded.frames
                if len(fr):
                    _check_dense(sl, fr, pos, expect)
                    expect = next_offset = int(fr.next_offsets[-1])
                if decoded.batch.num_rows:
                    yield decoded.batch
                if next_offset >= sl.end_offset:
                    return
            pos = nxt
        if next_offset < sl.end_offset:
            raise CorruptLogError(
                sl.key,
                max(next_offset, sl.start_offset),
                f"the segment's data ends at offset {next_offset}, before offset {sl.end_offset} "
                f"(manifest says the last offset is {sl.last_offset})",
                what="offset",
            )
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _truncated(sl: SegmentSlice, next_offset: int, position: int) -> CorruptLogError:
    return CorruptLogError(
        sl.key,
        next_offset if next_offset >= 0 else sl.start_offset,
        f"{sl.end_position - position} bytes at byte {position} are not a whole batch (truncated?)",
        what="offset",
    )


def _check_dense(sl: SegmentSlice, fr: Frames, buf_start: int, expect: int | None) -> None:
    """Offsets of a segment are dense: each batch starts where the previous one ended (the
    first one at the segment's base, or at or below the first wanted offset after an
    index jump), and none runs past the segment's last offset. A cleaned segment of a
    compacted topic may skip offsets between batches, but never goes back."""
    bases = fr.base_offsets
    nexts = fr.next_offsets
    prev = np.empty(len(bases), dtype=np.int64)
    prev[1:] = nexts[:-1]
    prev[0] = bases[0] if expect is None else expect
    wrong = ((bases < prev) if sl.compacted else (bases != prev)) | (nexts - 1 > sl.last_offset)
    if expect is None and bases[0] > sl.start_offset and not sl.compacted:
        raise CorruptLogError(
            sl.key,
            int(bases[0]),
            f"the batch at byte {buf_start + int(fr.positions[0])} starts after the first wanted offset "
            f"{sl.start_offset} (offset index and log disagree)",
            what="offset",
        )
    if wrong.any():
        i = int(np.argmax(wrong))
        if nexts[i] - 1 > sl.last_offset:
            reason = f"batch runs past the segment's last offset {sl.last_offset}"
        else:
            reason = (
                f"batch starts at offset {int(bases[i])}, expected {int(prev[i])} (offsets must be dense)"
            )
        raise CorruptLogError(
            sl.key,
            int(bases[i]),
            f"{reason}; batch at byte {buf_start + int(fr.positions[i])}",
            what="offset",
        )


def _decode(
    buf: bytes,
    buf_start: int,
    topic: str,
    partition: int,
    sl: SegmentSlice,
    bounds: BatchBounds,
    aborted: AbortedRanges | None,
) -> DecodedChunk:
    try:
        return decode_columns(
            buf,
            topic=topic,
            partition=partition,
            start_offset=sl.start_offset,
            end_offset=sl.end_offset,
            bounds=bounds,
            aborted=aborted,
        )
    except BatchDecodeError as e:
        offset = e.base_offset if e.base_offset is not None else sl.start_offset
        raise CorruptLogError(
            sl.key,
            offset,
            f"{e.reason} (batch at byte {buf_start + e.position} of {topic}-{partition})",
            what="offset",
        ) from None


# --- hot tail ---------------------------------------------------------------------------------------


def read_hot(task: HotTask, options: ReadOptions, store: SyncObjectStore) -> Iterator[pa.RecordBatch]:
    max_bytes = options.read_chunk_bytes
    off = task.start_offset
    try:
        client = KafkaClient.connect(
            HostPort.parse(task.broker, setting="strata option broker"), security=options.security
        )
    except OSError as e:
        raise StrataError(
            f"cannot reach broker {task.broker} for the hot tail of {task.topic}-{task.partition}: {e}"
        ) from None
    with client:
        empty = 0
        while off < task.end_offset:
            req = FetchRequest(
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=max_bytes,
                isolation_level=options.isolation_level,
                topics=(
                    FetchTopic(
                        topic=task.topic,
                        partitions=(
                            FetchPartition(
                                partition=task.partition, fetch_offset=off, partition_max_bytes=max_bytes
                            ),
                        ),
                    ),
                ),
            )
            resp = client.call(ApiKey.FETCH, req)
            pd = resp.responses[0].partitions[0]
            if pd.error_code == OFFSET_OUT_OF_RANGE:
                # The broker no longer has ``off`` (retention, or a broker whose local copy
                # went while another uploader archived it): the bucket may.
                for batch, next_off in _out_of_range(task, options, store, off):
                    if batch is not None:
                        yield batch
                    off = next_off
                continue
            if pd.error_code == TOPIC_AUTHORIZATION_FAILED:
                raise refused(task.broker, "READ", task.topic)
            if pd.error_code:
                raise error_for_code(
                    pd.error_code,
                    f"fetch {task.topic}-{task.partition} at offset {off} from {task.broker}: "
                    f"error {pd.error_code}",
                )
            records = pd.records if pd.records is not None else b""
            try:
                decoded = decode_columns(
                    records,
                    topic=task.topic,
                    partition=task.partition,
                    start_offset=off,
                    end_offset=task.end_offset,
                    # read_committed: the broker's list, applied as a Kafka consumer does
                    fetch_aborted=[(a.producer_id, a.first_offset) for a in pd.aborted_transactions or ()]
                    if options.isolation_level
                    else None,
                )
            except CorruptRecordError as e:
                raise CorruptRecordError(
                    f"fetch {task.topic}-{task.partition} at offset {off} from {task.broker}: {e}"
                ) from None
            if not len(decoded.frames):
                empty += 1
                if empty > _EMPTY_FETCHES:
                    raise OffsetOutOfRangeError(
                        f"{task.topic}-{task.partition}: broker {task.broker} returns no records at "
                        f"offset {off}, "
                        f"below the high watermark {task.end_offset} the scan planned with (log truncated?)"
                    )
                max_bytes = min(max_bytes * 2, 1 << 30)
                continue
            empty = 0
            off = max(off, int(decoded.frames.next_offsets[-1]))
            if decoded.batch.num_rows:
                yield decoded.batch


def _out_of_range(
    task: HotTask, options: ReadOptions, store: SyncObjectStore, off: int
) -> Iterator[tuple[pa.RecordBatch | None, int]]:
    """After the broker refused ``off``: the rows the bucket holds from ``off`` on, up to
    its first gap; or, when it holds nothing there, the lost offsets up to the first one
    still available (``_data_loss``). Yields (batch or None, next offset to read)."""
    topic_id = task.topic_id or _archived_topic_id(options, task.topic)
    slices: list[SegmentSlice] = []
    aborted: AbortedRanges | None = None
    if topic_id is not None:
        tid = uuid.UUID(topic_id)

        async def plan() -> tuple[list[SegmentSlice], tuple[AbortedTxn, ...]]:
            # A store of its own: an async store belongs to the event loop that opened it.
            planner = Planner(options, open_store_from(options.store))
            try:
                found = await planner.archived_slices(task.topic, tid, task.partition, off, task.end_offset)
                txns: tuple[AbortedTxn, ...] = ()
                if options.isolation_level and found:
                    txns = await planner.archived_aborted(
                        task.topic, tid, task.partition, off, task.end_offset
                    )
                return found, txns
            finally:
                await planner.store.close()

        slices, txns = run_blocking(plan)
        aborted = AbortedRanges(txns) if txns else None
    if slices and slices[0].start_offset == off:
        for sl in slices:
            for batch in read_slice(store, task.topic, task.partition, sl, options.read_chunk_bytes, aborted):
                yield batch, off
            off = sl.end_offset
            yield None, off
        return
    broker_start = BrokerClient(task.broker).list_offsets(task.topic, [task.partition], -2)[task.partition]
    later = [o for o in (broker_start, *(sl.start_offset for sl in slices[:1])) if o > off]
    resume = min(later) if later else task.end_offset  # nothing later: the log ends before ``off``
    why = (
        f"deleted by retention (broker {task.broker} now starts at offset {broker_start})"
        if broker_start > off
        else f"not on broker {task.broker} any more, nor archived (topic deleted and recreated?)"
    )
    _data_loss(options, task.topic, task.partition, off, min(resume, task.end_offset), why)
    yield None, resume


def _archived_topic_id(options: ReadOptions, topic: str) -> str | None:
    """The topic id of the bucket's topic manifest (a topic archived since the plan), or None."""

    async def load() -> str | None:
        store = open_store_from(options.store)
        try:
            doc = await ManifestStore(store).load_topic_manifest(topic)
            return None if doc is None else uuid.UUID(doc["topic_id"]).hex
        finally:
            await store.close()

    return run_blocking(load)
