"""Record batch v2 (magic 2) header: parsing, validation and offset assignment. Pure, no I/O.

Wire and disk layout of one batch (all big-endian), as in Kafka's DefaultRecordBatch::

    offset  size  field
    0       8     baseOffset            int64
    8       4     batchLength           int32   bytes after this field (total size - 12)
    12      4     partitionLeaderEpoch  int32
    16      1     magic                 int8    always 2
    17      4     crc                   uint32  CRC-32C of bytes [21, end)
    21      2     attributes            int16   bits 0-2 codec, 3 timestamp type,
                                                4 transactional, 5 control
    23      4     lastOffsetDelta       int32
    27      8     baseTimestamp         int64
    35      8     maxTimestamp          int64
    43      8     producerId            int64
    51      2     producerEpoch         int16
    53      4     baseSequence          int32
    57      4     recordsCount          int32
    61      ...   records (possibly compressed as one block)

Because the CRC starts at ``attributes``, the broker assigns offsets by rewriting
baseOffset (and stamps partitionLeaderEpoch) without touching the CRC or the
compressed payload. ``hot.records`` decodes the records themselves.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

from hot.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)

HEADER: Final = struct.Struct(">qiiBIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength precede the counted length
MIN_BATCH_LENGTH: Final = HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC: Final = 2
CRC_START: Final = 21
_OFFSET_AND_LENGTH: Final = struct.Struct(">qi")
_BASE_OFFSET: Final = struct.Struct(">q")
_LEADER_EPOCH: Final = struct.Struct(">i")
_MAGIC_POS: Final = 16

NO_PRODUCER_ID: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
NO_TIMESTAMP: Final = -1

_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte header of one batch, plus where it sits in the buffer it was parsed from."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        codec = self.attributes & _CODEC_MASK
        if codec > Compression.ZSTD:
            raise UnsupportedCompressionError(f"compression codec id {codec} is not supported")
        return Compression(codec)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


def make_attributes(
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    transactional: bool = False,
    control: bool = False,
) -> int:
    attrs = int(compression)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attrs |= _TIMESTAMP_TYPE_BIT
    if transactional:
        attrs |= _TRANSACTIONAL_BIT
    if control:
        attrs |= _CONTROL_BIT
    return attrs


def peek_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """Total size of the batch starting at ``pos`` or None if fewer than 12 bytes are there.

    Raises CorruptRecordError if the length field is impossible. Used by stream framers
    (recovery scan, remote reads) that must know how many bytes to wait for.
    """
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    length = int(_OFFSET_AND_LENGTH.unpack_from(buf, pos)[1])
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {length} below minimum {MIN_BATCH_LENGTH}")
    return length + LOG_OVERHEAD


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``. Checks structure (length, magic), not the CRC."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header: {len(buf) - pos} of {HEADER_SIZE} bytes")
    if buf[pos + _MAGIC_POS] != MAGIC:
        raise UnsupportedMagicError(f"record batch magic {buf[pos + _MAGIC_POS]} is not supported (need 2)")
    h = BatchHeader(*HEADER.unpack_from(buf, pos))
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {h.batch_length} below minimum {MIN_BATCH_LENGTH}")
    if h.last_offset_delta < 0 or h.records_count < 0:
        raise CorruptRecordError(
            f"negative lastOffsetDelta {h.last_offset_delta} or recordsCount {h.records_count}"
        )
    if h.records_count > 0 and h.last_offset_delta + 1 < h.records_count:
        raise CorruptRecordError(
            f"recordsCount {h.records_count} exceeds lastOffsetDelta+1 ({h.last_offset_delta + 1})"
        )
    return h


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    view = memoryview(buf)[pos + CRC_START : pos + size]
    return int(crc32c(view))


def validate_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, max_size: int | None = None
) -> BatchHeader:
    """Parse and fully validate the batch at ``pos``: structure, bounds and CRC-32C."""
    h = parse_header(buf, pos)
    if max_size is not None and h.size > max_size:
        raise RecordTooLargeError(f"batch of {h.size} bytes exceeds max.message.bytes {max_size}")
    if pos + h.size > len(buf):
        raise CorruptRecordError(f"batch of {h.size} bytes truncated at {len(buf) - pos} bytes")
    actual = compute_crc(buf, pos, h.size)
    if actual != h.crc:
        raise CorruptRecordError(f"CRC mismatch: stored {h.crc:#010x}, computed {actual:#010x}")
    return h


def iter_batches(
    buf: bytes | bytearray | memoryview, *, max_size: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Validate every batch of a buffer that must hold whole batches only; yield (position, header).

    Raises on the first invalid batch or on trailing bytes that are not a whole batch.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        h = validate_batch(buf, pos, max_size=max_size)
        yield pos, h
        pos += h.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (outside the CRC)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (outside the CRC)."""
    _LEADER_EPOCH.pack_into(buf, pos + 12, epoch)
