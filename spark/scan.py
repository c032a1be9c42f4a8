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
import uuid
from collections.abc import Iterator
from typing import Final

import numpy as np
import pyarrow as pa

from hot.errors import (
    OFFSET_OUT_OF_RANGE,
    CorruptLogError,
    CorruptRecordError,
    ObjectNotFoundError,
    OffsetOutOfRangeError,
    StrataError,
    error_for_code,
)
from spark.columnar import BatchDecodeError, DecodedChunk, Frames, decode_columns
from spark.options import ReadOptions
from spark.plan import (
    ColdTask,
    HotTask,
    Planner,
    ScanTask,
    SegmentSlice,
    open_store_from,
    run_blocking,
)
from tiering.store import InvalidRangeError, SyncObjectStore

_EMPTY_FETCHES: Final = 5  # empty fetch responses tolerated below the planned high watermark


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
        if isinstance(task, ColdTask):
            for sl in task.slices:
                yield from read_slice(s, task.topic, task.partition, sl, options.read_chunk_bytes)
        else:
            yield from read_hot(task, options, s)
    finally:
        if own:
            s.close()


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
    store: SyncObjectStore, topic: str, partition: int, sl: SegmentSlice, chunk_bytes: int
) -> Iterator[pa.RecordBatch]:
    """The rows of offsets ``[sl.start_offset, sl.end_offset)`` of one segment slice."""
    where = f"{topic}-{partition}"
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="strata-prefetch")
    try:
        pos = sl.start_position
        stop = min(pos + chunk_bytes, sl.end_position)
        pending = pool.submit(_get, store, sl, where, pos, stop) if pos < sl.end_position else None
        buf = b""
        expect: int | None = sl.base_offset if sl.start_position == 0 else None
        next_offset = -1
        while pending is not None:
            data = pending.result()
            pending = None
            pos = stop
            if pos < sl.end_position:
                stop = min(pos + chunk_bytes, sl.end_position)
                pending = pool.submit(_get, store, sl, where, pos, stop)
            buf_start = pos - len(buf) - len(data)  # file position of buf[0]
            buf = buf + data if buf else data
            decoded = _decode(buf, buf_start, topic, partition, sl)
            fr = decoded.frames
            if len(fr):
                _check_dense(sl, fr, buf_start, expect)
                expect = next_offset = int(fr.next_offsets[-1])
            if decoded.batch.num_rows:
                yield decoded.batch
            buf = buf[decoded.consumed :]
            if next_offset >= sl.end_offset:
                return
            if pending is None and buf:
                raise CorruptLogError(
                    sl.key,
                    next_offset if next_offset >= 0 else sl.start_offset,
                    f"{len(buf)} bytes at byte {sl.end_position - len(buf)} are not a whole batch "
                    "(truncated?)",
                    what="offset",
                )
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


def _check_dense(sl: SegmentSlice, fr: Frames, buf_start: int, expect: int | None) -> None:
    """Offsets of a segment are dense: each batch starts where the previous one ended (the
    first one at the segment's base, or at or below the first wanted offset after an
    index jump), and none runs past the segment's last offset."""
    bases = fr.base_offsets
    nexts = fr.next_offsets
    prev = np.empty(len(bases), dtype=np.int64)
    prev[1:] = nexts[:-1]
    prev[0] = bases[0] if expect is None else expect
    wrong = (bases != prev) | (nexts - 1 > sl.last_offset)
    if expect is None and bases[0] > sl.start_offset:
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


def _decode(buf: bytes, buf_start: int, topic: str, partition: int, sl: SegmentSlice) -> DecodedChunk:
    try:
        return decode_columns(
            buf, topic=topic, partition=partition, start_offset=sl.start_offset, end_offset=sl.end_offset
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
    from api.client import KafkaClient
    from api.config import HostPort
    from api.protocol import ApiKey
    from api.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic

    max_bytes = options.read_chunk_bytes
    off = task.start_offset
    try:
        client = KafkaClient.connect(HostPort.parse(task.broker, setting="strata option broker"))
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
                isolation_level=0,
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
            if pd.error_code == OFFSET_OUT_OF_RANGE and task.topic_id is not None:
                # Uploaded and deleted locally since the plan: read what the bucket has now.
                for batch, next_off in _cold_fallback(task, options, store, off):
                    if batch is not None:
                        yield batch
                    off = next_off
                continue
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


def _cold_fallback(
    task: HotTask, options: ReadOptions, store: SyncObjectStore, off: int
) -> Iterator[tuple[pa.RecordBatch | None, int]]:
    """Rows from the bucket starting at ``off``, up to the first offset not archived;
    yields (batch, next offset to read)."""
    assert task.topic_id is not None
    topic_id = uuid.UUID(task.topic_id)

    async def plan() -> list[SegmentSlice]:
        # A store of its own: an async store belongs to the event loop that opened it.
        planner = Planner(options, open_store_from(options.store))
        try:
            return await planner.archived_slices(task.topic, topic_id, task.partition, off, task.end_offset)
        finally:
            await planner.store.close()

    slices = run_blocking(plan)
    if not slices or slices[0].start_offset > off:
        raise OffsetOutOfRangeError(
            f"{task.topic}-{task.partition}: offset {off} is neither on broker {task.broker} nor archived "
            "in the bucket (deleted by retention since the scan was planned?)"
        )
    for sl in slices:
        for batch in read_slice(store, task.topic, task.partition, sl, options.read_chunk_bytes):
            yield batch, sl.start_offset
        yield None, sl.end_offset
