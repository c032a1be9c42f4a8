"""Records inside a v2 record batch: decoding, building, stream framing. Pure, no I/O.

The 61-byte batch header is ``hot.batch``'s business; after it come ``recordsCount``
records (compressed together as one block when attributes bits 0-2 are non-zero).
One record, as in Kafka's DefaultRecord::

    field            type      notes
    length           varint    bytes of the record after this field
    attributes       int8      unused, always 0
    timestampDelta   varlong   timestamp - batch baseTimestamp
    offsetDelta      varint    offset - batch baseOffset, in [0, lastOffsetDelta]
    keyLength        varint    -1 = null key
    key              bytes
    valueLength      varint    -1 = null value
    value            bytes
    headersCount     varint
    headers          [headerKeyLength varint, headerKey utf-8 (never null),
                      headerValueLength varint (-1 = null), headerValue bytes]

varint / varlong are zigzag-encoded base-128 integers, little-endian groups of 7
bits, high bit = more bytes follow (protobuf sint32 / sint64): at most 5 bytes for
a varint and 10 for a varlong.

Control batches (attributes bit 5) hold one record whose key and value are::

    key    version int16 (0), type int16 (0 = ABORT, 1 = COMMIT, ...)
    value  version int16 (0), coordinatorEpoch int32     (for ABORT / COMMIT)
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

from hot.batch import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Compression,
    TimestampType,
    make_attributes,
    parse_header,
    peek_size,
    validate_batch,
)
from hot.compression import DEFAULT_MAX_SIZE, codec_of, compress, decompress
from hot.errors import CorruptRecordError, InvalidRecordError, UnsupportedMagicError

DEFAULT_MAX_UNCOMPRESSED: Final = DEFAULT_MAX_SIZE
DEFAULT_MAX_BATCH_SIZE: Final = 64 * 1024 * 1024

CONTROL_KEY: Final = struct.Struct(">hh")  # version, type
END_TXN_MARKER: Final = struct.Struct(">hi")  # version, coordinatorEpoch
CONTROL_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0

_VARINT_MAX_BYTES: Final = 5
_VARLONG_MAX_BYTES: Final = 10
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_INT16_MAX: Final = (1 << 15) - 1
# attributes + timestampDelta + offsetDelta + keyLength + valueLength + headersCount, one byte each
_MIN_RECORD_BODY: Final = 6
_MAGIC_POS: Final = 16
_CRC_POS: Final = 17
_CRC: Final = struct.Struct(">I")

Buffer = bytes | bytearray | memoryview


# --- varints -------------------------------------------------------------------------------


def _read_unsigned(buf: Buffer, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError(f"{what} truncated at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise CorruptRecordError(f"{what} longer than {max_bytes} bytes at byte {pos - max_bytes}")


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """(value, position after it) of the zigzag varint (int32) at ``pos``."""
    u, end = _read_unsigned(buf, pos, _VARINT_MAX_BYTES, "varint")
    if u >> 32:
        raise CorruptRecordError(f"varint at byte {pos} overflows 32 bits")
    return (u >> 1) ^ -(u & 1), end


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """(value, position after it) of the zigzag varlong (int64) at ``pos``."""
    u, end = _read_unsigned(buf, pos, _VARLONG_MAX_BYTES, "varlong")
    if u >> 64:
        raise CorruptRecordError(f"varlong at byte {pos} overflows 64 bits")
    return (u >> 1) ^ -(u & 1), end


def _varint_multi(data: bytes, pos: int) -> tuple[int, int]:
    """decode_varint for a varint known to be 2+ bytes long; 2- and 3-byte ones without a loop."""
    b1 = data[pos + 1] if pos + 1 < len(data) else 0x80
    if b1 < 0x80:
        u = (data[pos] & 0x7F) | (b1 << 7)
        return (u >> 1) ^ -(u & 1), pos + 2
    b2 = data[pos + 2] if pos + 2 < len(data) else 0x80
    if b2 < 0x80:
        u = (data[pos] & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)
        return (u >> 1) ^ -(u & 1), pos + 3
    return decode_varint(data, pos)


def _varlong_multi(data: bytes, pos: int) -> tuple[int, int]:
    """decode_varlong for a varlong known to be 2+ bytes long; 2- and 3-byte ones without a loop."""
    b1 = data[pos + 1] if pos + 1 < len(data) else 0x80
    if b1 < 0x80:
        u = (data[pos] & 0x7F) | (b1 << 7)
        return (u >> 1) ^ -(u & 1), pos + 2
    b2 = data[pos + 2] if pos + 2 < len(data) else 0x80
    if b2 < 0x80:
        u = (data[pos] & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)
        return (u >> 1) ^ -(u & 1), pos + 3
    return decode_varlong(data, pos)


def _write_unsigned(out: bytearray, u: int) -> None:
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _zigzag(value: int) -> int:
    return value << 1 if value >= 0 else (-value << 1) - 1


def _put_varint(out: bytearray, value: int) -> None:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise InvalidRecordError(f"{value} does not fit a varint (int32)")
    _write_unsigned(out, _zigzag(value))


def _put_varlong(out: bytearray, value: int) -> None:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidRecordError(f"{value} does not fit a varlong (int64)")
    _write_unsigned(out, _zigzag(value))


def encode_varint(value: int) -> bytes:
    out = bytearray()
    _put_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    out = bytearray()
    _put_varlong(out, value)
    return bytes(out)


def varint_size(value: int) -> int:
    """Encoded size of ``value`` as a varint or varlong (the two agree in their common range)."""
    return max(1, (_zigzag(value).bit_length() + 6) // 7)


# --- data model ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record; ``offset`` and ``timestamp`` are absolute (batch base + delta)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordBatch:
    header: BatchHeader
    records: tuple[Record, ...]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def size(self) -> int:
        return self.header.size

    @property
    def compression(self) -> Compression:
        return self.header.compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def crc(self) -> int:
        return self.header.crc


@dataclass(frozen=True, slots=True)
class RecordInput:
    """A record to build: offsets are assigned in order; ``timestamp=None`` takes the batch's."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class ControlMarker:
    """A decoded control record. ``type`` is a raw id: Kafka defines more than ABORT/COMMIT."""

    type: int
    coordinator_epoch: int | None  # only for ABORT / COMMIT

    @property
    def is_commit(self) -> bool:
        return self.type == ControlType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlType.ABORT


# --- decoding --------------------------------------------------------------------------------


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
) -> RecordBatch:
    """Decode the whole batch at ``pos``: header, CRC, decompression and every record.

    Bytes after the batch are not looked at. Raises CorruptRecordError (with the reason),
    UnsupportedMagicError, UnsupportedCompressionError or RecordTooLargeError (payload
    inflating beyond ``max_uncompressed``).
    """
    if verify_crc:
        h = validate_batch(buf, pos)
    else:
        h = parse_header(buf, pos)
        if pos + h.size > len(buf):
            raise CorruptRecordError(f"batch of {h.size} bytes truncated at {len(buf) - pos} bytes")
    codec = codec_of(h.attributes & 0x07)
    payload = memoryview(buf)[pos + HEADER_SIZE : pos + h.size]
    if h.records_count == 0 and len(payload) == 0:
        # Kafka's cleaner keeps empty batches (no payload at all) to preserve producer state.
        return RecordBatch(h, ())
    data = decompress(codec, payload, max_size=max_uncompressed)
    return RecordBatch(h, _decode_records(data, h))


def _decode_records(data: bytes, h: BatchHeader) -> tuple[Record, ...]:
    count = h.records_count
    end = len(data)
    if count * (_MIN_RECORD_BODY + 1) > end:
        raise CorruptRecordError(f"recordsCount {count} cannot fit in {end} bytes of records")
    base_offset = h.base_offset
    base_ts = h.base_timestamp
    last_delta = h.last_offset_delta
    log_append = h.timestamp_type is TimestampType.LOG_APPEND_TIME
    max_ts = h.max_timestamp
    records: list[Record] = []
    append = records.append
    pos = 0
    i = 0
    # Bounds are checked per record (rec_end <= end) and per key/value slice; a varint read
    # past the end of ``data`` surfaces as IndexError, which saves a check per field.
    try:
        for i in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                length, pos = _varint_multi(data, pos)
            start = pos
            rec_end = pos + length
            if length < _MIN_RECORD_BODY or rec_end > end:
                raise CorruptRecordError(
                    f"record {i}: length {length} invalid with {end - pos} bytes remaining"
                )
            pos += 1  # attributes: unused
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                ts_delta, pos = _varlong_multi(data, pos)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                off_delta, pos = _varint_multi(data, pos)
            if off_delta < 0 or off_delta > last_delta:
                raise CorruptRecordError(
                    f"record {i}: offsetDelta {off_delta} outside [0, lastOffsetDelta {last_delta}]"
                )
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = _varint_multi(data, pos)
            key: bytes | None
            if n >= 0:
                key = data[pos : pos + n]
                pos += n
                if pos > rec_end:
                    raise CorruptRecordError(f"record {i}: key length {n} overruns the record")
            elif n == -1:
                key = None
            else:
                raise CorruptRecordError(f"record {i}: key length {n}")
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = _varint_multi(data, pos)
            value: bytes | None
            if n >= 0:
                value = data[pos : pos + n]
                pos += n
                if pos > rec_end:
                    raise CorruptRecordError(f"record {i}: value length {n} overruns the record")
            elif n == -1:
                value = None
            else:
                raise CorruptRecordError(f"record {i}: value length {n}")
            b = data[pos]
            if b == 0:
                headers: tuple[Header, ...] = ()
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos, rec_end, i)
            if pos != rec_end:
                raise CorruptRecordError(
                    f"record {i}: declared length {length} but its fields span {pos - start} bytes"
                )
            append(
                Record(
                    base_offset + off_delta,
                    max_ts if log_append else base_ts + ts_delta,
                    key,
                    value,
                    headers,
                )
            )
    except IndexError:
        raise CorruptRecordError(
            f"record {i} of {count} runs past the end of the {end}-byte records data"
        ) from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} trailing bytes after {count} records")
    return tuple(records)


def _decode_headers(data: bytes, pos: int, rec_end: int, i: int) -> tuple[tuple[Header, ...], int]:
    count, pos = decode_varint(data, pos)
    # Each header takes at least two bytes (two lengths), so this bounds the loop.
    if count < 0 or count * 2 > rec_end - pos:
        raise CorruptRecordError(f"record {i}: header count {count} invalid")
    headers: list[Header] = []
    for _ in range(count):
        n, pos = decode_varint(data, pos)
        if n < 0 or pos + n > rec_end:
            raise CorruptRecordError(f"record {i}: header key length {n} invalid")
        try:
            hkey = data[pos : pos + n].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError(f"record {i}: header key is not valid UTF-8") from None
        pos += n
        n, pos = decode_varint(data, pos)
        hval: bytes | None
        if n >= 0:
            if pos + n > rec_end:
                raise CorruptRecordError(f"record {i}: header value length {n} invalid")
            hval = data[pos : pos + n]
            pos += n
        elif n == -1:
            hval = None
        else:
            raise CorruptRecordError(f"record {i}: header value length {n}")
        headers.append(Header(hkey, hval))
    return tuple(headers), pos


def decode_batches(
    buf: Buffer,
    *,
    allow_partial_tail: bool = True,
    verify_crc: bool = True,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
) -> list[RecordBatch]:
    """Decode consecutive whole batches.

    A fetch response may end with the prefix of a batch cut at the fetch size; with
    ``allow_partial_tail`` that prefix is skipped, otherwise it is CorruptRecordError.
    """
    batches: list[RecordBatch] = []
    pos = 0
    end = len(buf)
    while pos < end:
        size = peek_size(buf, pos)
        if size is None or pos + size > end:
            if allow_partial_tail:
                break
            raise CorruptRecordError(f"partial batch of {end - pos} bytes at byte {pos}")
        batches.append(decode_batch(buf, pos, verify_crc=verify_crc, max_uncompressed=max_uncompressed))
        pos += size
    return batches


def parse_control_record(record: Record) -> ControlMarker:
    """The marker carried by a record of a control batch."""
    key = record.key
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecordError(f"control record at offset {record.offset}: key too short")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record at offset {record.offset}: key version {version}")
    if type_id not in (ControlType.ABORT, ControlType.COMMIT):
        return ControlMarker(type_id, None)
    value = record.value
    if value is None or len(value) < END_TXN_MARKER.size:
        raise CorruptRecordError(f"transaction marker at offset {record.offset}: value too short")
    vversion, coordinator_epoch = END_TXN_MARKER.unpack_from(value)
    if vversion < 0:
        raise CorruptRecordError(f"transaction marker at offset {record.offset}: version {vversion}")
    return ControlMarker(type_id, coordinator_epoch)


# --- building --------------------------------------------------------------------------------


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, rec: RecordInput) -> None:
    body = bytearray(b"\x00")  # attributes
    _put_varlong(body, ts_delta)
    _put_varint(body, offset_delta)
    _put_bytes(body, rec.key, "key")
    _put_bytes(body, rec.value, "value")
    _put_varint(body, len(rec.headers))
    for h in rec.headers:
        if not isinstance(h, Header) or not isinstance(h.key, str):
            raise InvalidRecordError(f"header must be Header(str, bytes | None), got {h!r}")
        try:
            hkey = h.key.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRecordError(f"header key {h.key!r} is not encodable as UTF-8") from None
        _put_bytes(body, hkey, "header key")
        _put_bytes(body, h.value, "header value")
    _put_varint(out, len(body))
    out += body


def _put_bytes(out: bytearray, data: bytes | None, what: str) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
        return
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidRecordError(f"{what} must be bytes or None, got {type(data).__name__}")
    _put_varint(out, len(data))
    out += data


def build_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    base_timestamp: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    compression_level: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch with offsets ``base_offset`` .. + len - 1.

    ``base_timestamp`` defaults to the first record's timestamp, or now if that is None;
    records without a timestamp get the base timestamp.
    """
    if not records:
        raise InvalidRecordError("a record batch needs at least one record")
    if len(records) - 1 > _INT32_MAX:
        raise InvalidRecordError(f"{len(records)} records do not fit in one batch")
    for rec in records:
        if not isinstance(rec, RecordInput):
            raise InvalidRecordError(f"expected RecordInput, got {type(rec).__name__}")
        if not (rec.timestamp is None or isinstance(rec.timestamp, int)):
            raise InvalidRecordError(f"timestamp must be int or None, got {type(rec.timestamp).__name__}")
        if not isinstance(rec.headers, tuple | list):
            raise InvalidRecordError(f"headers must be a tuple of Header, got {type(rec.headers).__name__}")
    if base_timestamp is None:
        first = records[0].timestamp
        base_timestamp = first if first is not None else int(time.time() * 1000)
    body = bytearray()
    max_ts = _INT64_MIN
    for delta, rec in enumerate(records):
        ts = base_timestamp if rec.timestamp is None else rec.timestamp
        if ts > max_ts:
            max_ts = ts
        _encode_record(body, delta, ts - base_timestamp, rec)
    payload = compress(compression, body, level=compression_level)
    attributes = make_attributes(compression, timestamp_type, transactional, control)
    return _seal(
        payload,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=len(records) - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )


def _seal(
    payload: bytes,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> bytes:
    batch_length = MIN_BATCH_LENGTH + len(payload)
    if batch_length > _INT32_MAX:
        raise InvalidRecordError(f"batch of {batch_length + LOG_OVERHEAD} bytes is too large")
    out = bytearray(HEADER_SIZE)
    try:
        HEADER.pack_into(
            out,
            0,
            base_offset,
            batch_length,
            partition_leader_epoch,
            MAGIC,
            0,  # CRC, filled in below once the covered bytes are final
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
    except struct.error as e:
        raise InvalidRecordError(f"batch header field out of range: {e}") from None
    crc = crc32c(payload, crc32c(memoryview(out)[CRC_START:]))
    _CRC.pack_into(out, _CRC_POS, crc)
    out += payload
    return bytes(out)


def build_control_batch(
    control_type: ControlType | int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker, as a coordinator writes it."""
    if not 0 <= int(control_type) <= _INT16_MAX:
        raise InvalidRecordError(f"control type {control_type} out of range")
    try:
        key = CONTROL_KEY.pack(CONTROL_KEY_VERSION, int(control_type))
        value = END_TXN_MARKER.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    except struct.error as e:
        raise InvalidRecordError(f"control record field out of range: {e}") from None
    return build_batch(
        [RecordInput(key, value, timestamp=timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


# --- stream framing --------------------------------------------------------------------------


class BatchFramer:
    """Splits a byte stream arriving in arbitrary chunks into whole batches (sans-I/O).

    Only framing is checked (length within bounds, magic 2); CRC and records are left to
    ``decode_batch``. After an error the framer stays failed and re-raises it.
    """

    def __init__(self, *, max_batch_size: int = DEFAULT_MAX_BATCH_SIZE) -> None:
        self._buf = bytearray()
        self._max = max_batch_size
        self._error: CorruptRecordError | UnsupportedMagicError | None = None

    def feed(self, data: Buffer) -> None:
        if self._error is not None:
            raise self._error
        self._buf += data

    def next_batch(self) -> bytes | None:
        """The next whole batch, or None until more bytes are fed."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        try:
            size = peek_size(buf)
            if size is None:
                return None
            if size > self._max:
                raise CorruptRecordError(f"batch of {size} bytes exceeds the framing limit {self._max}")
            if len(buf) > _MAGIC_POS and buf[_MAGIC_POS] != MAGIC:
                raise UnsupportedMagicError(f"record batch magic {buf[_MAGIC_POS]} is not supported (need 2)")
        except (CorruptRecordError, UnsupportedMagicError) as e:
            self._error = e
            raise
        if len(buf) < size:
            return None
        batch = bytes(buf[:size])
        del buf[:size]  # bytearray drops a prefix without moving the rest
        return batch

    def __iter__(self) -> Iterator[bytes]:
        """Drain every whole batch currently buffered."""
        while (batch := self.next_batch()) is not None:
            yield batch

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet form a whole batch (or are not yet taken)."""
        return len(self._buf)

    def has_partial(self) -> bool:
        return bool(self._buf)
