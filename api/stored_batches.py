"""Decoding the batches a fetch read from the broker's own log, for the readers that decode
(REST fetch and REST consumer instances; Kafka fetch sends the bytes unread).

A batch the broker stored but cannot decode (stored before produce validated records, or
damaged on disk with its CRC intact) must not stall a reader silently: the good batches
before it are returned, so a reader gets up to it; once it is the first batch of a read,
``StoredBatchError`` (503 over REST) names the partition, its offsets, the offset to
resume at and ``strata check``. The broker logs one WARNING per bad batch, not per read
(the set of batches already reported is bounded; one pushed out of it is reported again).
"""

from __future__ import annotations

import logging
import struct
import threading
from collections import OrderedDict
from typing import Final

from hot.batch import parse_header, peek_size
from hot.errors import StorageError, StrataError
from hot.records import RecordBatch, decode_batch

logger = logging.getLogger(__name__)

MAX_REPORTED: Final = 4096  # bad batches remembered as already logged
_BASE_OFFSET: Final = struct.Struct(">q")

Buffer = bytes | bytearray | memoryview


class StoredBatchError(StorageError):
    """A batch stored in a partition fails to decode: readers cannot get past it."""

    retriable = False

    def __init__(
        self, topic: str, partition: int, base_offset: int, last_offset: int | None, reason: str
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.reason = reason
        where = f"offset {base_offset}" if last_offset is None else f"offsets {base_offset}-{last_offset}"
        known = last_offset is not None and last_offset >= base_offset
        resume = f"; resume at offset {last_offset + 1}" if known and last_offset is not None else ""
        super().__init__(
            f"stored batch of {topic}-{partition} at {where} failed to decode: {reason}{resume}; "
            f"`strata check {topic}:{partition}` lists every such batch "
            '(docs/operations.md, "Checking a partition")'
        )


_reported: OrderedDict[tuple[str, int, int], None] = OrderedDict()
_reported_lock = threading.Lock()


def _report_once(err: StoredBatchError, size: int) -> None:
    key = (err.topic, err.partition, err.base_offset)
    with _reported_lock:
        if key in _reported:
            _reported.move_to_end(key)
            return
        _reported[key] = None
        if len(_reported) > MAX_REPORTED:
            _reported.popitem(last=False)
    last = "?" if err.last_offset is None else str(err.last_offset)
    logger.warning(
        "partition %s-%d: the stored batch at offsets %d-%s (%d bytes) cannot be decoded (%s); readers "
        "cannot get past it. Run `strata check %s:%d` and skip it (docs/operations.md)",
        err.topic,
        err.partition,
        err.base_offset,
        last,
        size,
        err.reason,
        err.topic,
        err.partition,
    )


def _bad_batch(data: Buffer, pos: int, topic: str, partition: int, reason: str) -> StoredBatchError:
    try:
        h = parse_header(data, pos)
        base, last, size = h.base_offset, h.last_offset, h.size
    except StrataError:
        # The read found a batch here by its header, so at least its base offset is there.
        base = int(_BASE_OFFSET.unpack_from(data, pos)[0]) if len(data) - pos >= 8 else -1
        last, size = None, len(data) - pos
    err = StoredBatchError(topic, partition, base, last, reason)
    _report_once(err, size)
    return err


def decode_stored(data: Buffer, topic: str, partition: int, start_offset: int) -> list[RecordBatch]:
    """The whole batches of ``data`` (read from ``topic``-``partition`` at ``start_offset``),
    a partial batch at the end skipped. A batch that fails to decode ends the list there
    when a batch before it holds a data record at or after ``start_offset`` (the reader
    makes progress and reads the bad one first next time); otherwise StoredBatchError."""
    batches: list[RecordBatch] = []
    pos = 0
    end = len(data)
    while pos < end:
        try:
            size = peek_size(data, pos)
            if size is None or pos + size > end:
                break
            batch = decode_batch(data, pos)
        except StrataError as e:
            err = _bad_batch(data, pos, topic, partition, str(e))
            if any(r.offset >= start_offset for b in batches if not b.is_control for r in b.records):
                return batches
            raise err from e
        batches.append(batch)
        pos += size
    return batches
