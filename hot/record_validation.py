"""Validation of producer batches on the leader's append path (Kafka's LogValidator). Pure, no I/O.

A batch whose CRC-32C is right can still hold records no reader can decode: a length that
overruns the batch, a 6-byte varint, fewer records than the header counts. Stored, such a
batch stops every consumer of the partition at it, forever. So before a leader appends, every
record of every batch is walked once (compressed batches after decompression) and the batch
is refused unless it holds exactly what the header announces:

    batch (checked first, in Kafka's order)      error
    ------------------------------------------   ------------------------------------------
    length, truncation                           CORRUPT_MESSAGE (2)
    magic other than 2                           UNSUPPORTED_FOR_MESSAGE_FORMAT (43)
    larger than max.message.bytes                MESSAGE_TOO_LARGE (10)
    CRC-32C                                      CORRUPT_MESSAGE (2)
    recordsCount <= 0 or != lastOffsetDelta + 1  INVALID_RECORD (87)
    control batch, producer id without epoch or
    base sequence, transactional without a
    producer id                                  INVALID_RECORD (87)
    codec id 5-7                                 UNSUPPORTED_COMPRESSION_TYPE (76)
    payload that does not decompress             CORRUPT_MESSAGE (2)
    timestamp type LogAppendTime set by the
    client (Kafka refuses it unless a CreateTime
    topic gets a maxTimestamp with it)           INVALID_TIMESTAMP (32)

    each record (hot.records has the layout)     error: INVALID_RECORD (87), naming the record
    ------------------------------------------
    length varint: body >= 6 bytes, within the data, and the fields fill it exactly
    varint <= 5 bytes and 32 bits, varlong <= 10 bytes and 64 bits
    attributes byte 0 (unused by Kafka; readers such as kafka-python read it as a varint)
    offsetDelta in [0, lastOffsetDelta] and strictly increasing
    key / value length >= -1 and within the record
    header count >= 0; header key length >= 0 and its bytes UTF-8; header value length >= -1
    baseTimestamp + timestampDelta within int64
    exactly recordsCount records, no bytes after the last
    compacted topics: every record has a key

The walk runs in C (``hot/_recordwalk.c``, built in place by ``pip install -e .``; ``NATIVE``
says whether it is loaded) and reads an uncompressed batch in place, inside the produce
request. Without a compiler the install still succeeds and the same walk runs in Python
(``_check_records_py``, the reference: the C walk gives the same result, or the same error
for the same record with the same text, and the test suite fuzzes one against the other).

Everything accepted here is decoded by ``hot.records.decode_batch`` and, identically, by
kafka-python's reader (the test suite fuzzes both). The walk slices nothing and builds no
record objects: per record it reads a few varints, like ``hot.records._decode_records``
without the allocations.

The check also yields what the append stores: Kafka sets a CreateTime batch's maxTimestamp
from its records (old clients send -1, and ListOffsets by timestamp and the time index read
it), so ``BatchCheck.rewrite`` says when the header must be rewritten and re-CRC'd
(``stamped_copy``), as DefaultRecordBatch.setMaxTimestamp does.

Followers and restore never come here: they keep what a leader stored, bytes unchanged.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from crc32c import crc32c

from hot.batch import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    BatchHeader,
    Compression,
    compute_crc,
    parse_header,
)
from hot.compression import DEFAULT_MAX_SIZE, codec_of, decompress
from hot.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordError,
    RecordTooLargeError,
    UnsupportedMagicError,
)
from hot.records import decode_varint, decode_varlong, encode_varint

Buffer = bytes | bytearray | memoryview

# For bench.bench_broker only (the cost of validation, measured with and without it in one
# run): a broker started with this variable set to 1 appends client batches after the CRC
# and header checks alone, as before records were validated. Not a configuration.
ENABLED: bool = os.environ.get("STRATA_BENCH_SKIP_RECORD_VALIDATION") != "1"

# (data, recordsCount, lastOffsetDelta, baseTimestamp, require_keys) -> max timestamp, or the
# keyless records' indexes; raises _NativeInvalid(index, message).
_NativeWalk = Callable[[Buffer, int, int, int, bool], "int | list[int]"]


class _NoNativeWalk(Exception):
    """Stands in for hot._recordwalk.InvalidRecord when the C walk is not loaded (never raised)."""


# (data, max_size or -1, log_append_time, require_keys, max_uncompressed) -> the AppendBatch
# fields of every batch, or None: the Python path judges the payload (hot/_recordwalk.c scan).
_NativeScan = Callable[[Buffer, int, bool, bool, int], "list[tuple[Any, ...]] | None"]


def _load_native() -> tuple[_NativeWalk | None, type[Exception], _NativeScan | None]:
    # STRATA_RECORD_WALK=python: for bench.bench_broker only (the C walk against the Python
    # one in one run). Not a configuration.
    if os.environ.get("STRATA_RECORD_WALK") == "python":
        return None, _NoNativeWalk, None
    try:
        from hot._recordwalk import InvalidRecord, walk
    except ImportError:  # installed without a C compiler
        return None, _NoNativeWalk, None
    try:
        from hot._recordwalk import scan
    except ImportError:  # a module built before scan existed: the walk alone
        return walk, InvalidRecord, None
    return walk, InvalidRecord, scan


_native, _NativeInvalid, _native_scan = _load_native()
# Whether the record walk runs in C (hot/_recordwalk.c) rather than in Python.
NATIVE: bool = _native is not None

_MIN_RECORD_BODY: Final = 6  # attributes, timestampDelta, offsetDelta, key, value, headers count
_MAGIC_POS: Final = 16
_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_PREFIX: Final = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_ATTRIBUTES: Final = struct.Struct(">h")
_MAX_TIMESTAMP: Final = struct.Struct(">q")
_CRC: Final = struct.Struct(">I")
_BATCH_LENGTH: Final = struct.Struct(">i")
_CRC_POS: Final = 17
_ATTRIBUTES_POS: Final = 21
_MAX_TIMESTAMP_POS: Final = 35


@dataclass(frozen=True, slots=True)
class BatchCheck:
    """What the append of one validated batch needs.

    ``max_timestamp`` and ``attributes`` are the values its stored header must carry;
    ``rewrite`` is true when they differ from what the client sent (then the header is
    rewritten and the CRC recomputed; the records are never touched).
    """

    max_timestamp: int
    attributes: int
    rewrite: bool


def _invalid(i: int, message: str) -> InvalidRecordError:
    text = f"record {i}: {message}"
    return InvalidRecordError(text, record_errors=(RecordError(i, text),))


# --- batches -------------------------------------------------------------------------------


def iter_client_batches(
    buf: Buffer, *, max_size: int | None, coordinator: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every batch of a produce payload, checked as Kafka checks a
    client's batches before their records (see the module docstring for the order and the
    errors). ``buf`` must hold whole batches only. ``coordinator``: a coordinator's own
    batch (Kafka's origin COORDINATOR), whose producer id may come without a base sequence
    (a TxnOffsetCommit's transactional offsets are written with NO_SEQUENCE)."""
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated batch header at byte {pos}: {end - pos} of {HEADER_SIZE} bytes"
            )
        if buf[pos + _MAGIC_POS] != MAGIC:
            raise UnsupportedMagicError(
                f"record batch magic {buf[pos + _MAGIC_POS]} is not supported (need 2)"
            )
        h = BatchHeader(*HEADER.unpack_from(buf, pos))
        if h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {h.batch_length} below minimum {MIN_BATCH_LENGTH}")
        if max_size is not None and h.size > max_size:
            raise RecordTooLargeError(f"batch of {h.size} bytes exceeds max.message.bytes {max_size}")
        if pos + h.size > end:
            raise CorruptRecordError(f"batch of {h.size} bytes truncated at {end - pos} bytes")
        actual = compute_crc(buf, pos, h.size)
        if actual != h.crc:
            raise CorruptRecordError(f"CRC mismatch: stored {h.crc:#010x}, computed {actual:#010x}")
        # LogValidator.validateBatch, for appends from clients.
        if h.records_count <= 0 or h.last_offset_delta < 0 or h.records_count != h.last_offset_delta + 1:
            raise InvalidRecordError(
                f"batch at byte {pos} has recordsCount {h.records_count} but "
                f"lastOffsetDelta {h.last_offset_delta}"
            )
        if h.attributes & _CONTROL_BIT:
            raise InvalidRecordError("clients may not write control batches")
        if h.producer_id >= 0:
            if (h.base_sequence < 0 and not coordinator) or h.producer_epoch < 0:
                raise InvalidRecordError(
                    f"batch at byte {pos} has producer id {h.producer_id} but epoch "
                    f"{h.producer_epoch} and base sequence {h.base_sequence}"
                )
        elif h.attributes & _TRANSACTIONAL_BIT:
            raise InvalidRecordError(f"transactional batch at byte {pos} has no producer id")
        yield pos, h
        pos += h.size


def scan_client_batches(
    buf: Buffer, *, max_size: int | None, log_append_time: bool, require_keys: bool
) -> list[tuple[Any, ...]] | None:
    """A leader's whole check of a produce payload in one C call (hot/_recordwalk.c
    ``scan``): ``iter_client_batches``' checks, the CRC-32C, the record walk and
    ``check_batch``'s decision, giving ``hot.log_append.AppendBatch``'s fields per batch.
    It only accepts: None whenever the Python path must judge (an error to raise with its
    one canonical text, compression, a client's LogAppendTime bit, a compacted topic's
    keyless record), and always None without the C module or with validation off."""
    if _native_scan is None or not ENABLED:
        return None
    return _native_scan(
        buf, -1 if max_size is None else max_size, log_append_time, require_keys, DEFAULT_MAX_SIZE
    )


def uses_zstd(buf: Buffer) -> bool:
    """Whether a batch of a produce payload says zstd (Produce < v7 may not: Kafka's
    ProduceRequest.validateRecords). Framing is only followed, not checked: the append does that."""
    pos = 0
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        if buf[pos + _ATTRIBUTES_POS + 1] & _CODEC_MASK == Compression.ZSTD:
            return True
        (length,) = _BATCH_LENGTH.unpack_from(buf, pos + 8)
        if length < MIN_BATCH_LENGTH:
            return False
        pos += length + 12
    return False


def transactional_producers(buf: Buffer) -> dict[int, int]:
    """Producer id -> epoch of the transactional batches of a produce payload (what a
    leader verifies with the coordinator, broker.txn_verification). Framing is only
    followed, not checked: the append does that."""
    out: dict[int, int] = {}
    pos = 0
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        h = parse_header(buf, pos)
        if h.batch_length < MIN_BATCH_LENGTH:
            break
        if h.is_transactional and h.has_producer_id and not h.is_control:
            out.setdefault(h.producer_id, h.producer_epoch)
        pos += h.size
    return out


def check_batch(
    buf: Buffer,
    pos: int,
    h: BatchHeader,
    *,
    log_append_time: bool = False,
    require_keys: bool = False,
    max_uncompressed: int = DEFAULT_MAX_SIZE,
) -> BatchCheck:
    """Validate the records of the batch at ``pos`` (header ``h``, already checked by
    ``iter_client_batches`` or ``hot.batch.validate_batch``) for a topic with the given
    timestamp type; ``require_keys`` for compacted topics. Raises the errors of the module
    docstring."""
    attributes = h.attributes
    if not ENABLED:
        return BatchCheck(h.max_timestamp, attributes, False)
    if attributes & _TIMESTAMP_TYPE_BIT and (log_append_time or h.max_timestamp == NO_TIMESTAMP):
        # LogValidator.validateTimestamp: a producer does not choose LogAppendTime. A
        # CreateTime topic takes such a batch only with a maxTimestamp (every record's
        # timestamp while the bit is set); Kafka then stores it as CreateTime with that
        # maxTimestamp (setMaxTimestamp clears the bit), and so does this broker.
        message = "producers may not set the timestamp type to LogAppendTime"
        raise InvalidTimestampError(message, record_errors=(RecordError(0, message),))
    codec = codec_of(attributes & _CODEC_MASK)
    payload = memoryview(buf)[pos + HEADER_SIZE : pos + h.size]
    if h.records_count == 0 and len(payload) == 0:
        max_ts = NO_TIMESTAMP  # an empty batch, as the cleaner leaves them (never from a client)
    else:
        data: Buffer
        if codec is Compression.NONE and _native is not None and len(payload) <= max_uncompressed:
            data = payload  # the C walk reads the request's bytes where they are
        else:
            # The Python walk copies: indexing bytes is ~1.6x faster than a memoryview in
            # CPython, so one memcpy costs less than the walk would lose over the view.
            data = decompress(codec, payload, max_size=max_uncompressed)
        max_ts = check_records(data, h, require_keys=require_keys)
    if log_append_time:
        return BatchCheck(h.max_timestamp, attributes, False)
    if attributes & _TIMESTAMP_TYPE_BIT:
        # As Kafka: the client's maxTimestamp, the type bit cleared.
        return BatchCheck(h.max_timestamp, attributes & ~_TIMESTAMP_TYPE_BIT, True)
    return BatchCheck(max_ts, attributes, max_ts != h.max_timestamp)


def stamped_copy(
    buf: Buffer,
    pos: int,
    size: int,
    *,
    base_offset: int,
    leader_epoch: int,
    attributes: int,
    max_timestamp: int,
) -> bytearray:
    """A copy of the batch at ``pos`` with its offset, leader epoch, attributes and
    maxTimestamp set and the CRC recomputed (DefaultRecordBatch.setMaxTimestamp)."""
    out = bytearray(memoryview(buf)[pos : pos + size])
    _PREFIX.pack_into(out, 0, base_offset, size - 12, leader_epoch)
    _ATTRIBUTES.pack_into(out, _ATTRIBUTES_POS, attributes)
    _MAX_TIMESTAMP.pack_into(out, _MAX_TIMESTAMP_POS, max_timestamp)
    _CRC.pack_into(out, _CRC_POS, crc32c(memoryview(out)[CRC_START:]))
    return out


# --- records -------------------------------------------------------------------------------


def _offset_deltas(n: int) -> tuple[bytes, ...]:
    """The canonical varint encodings of offset deltas 0 .. at least n-1 (shared, grown on
    demand up to _MAX_DELTAS: about 2 MiB)."""
    global _DELTAS
    if len(_DELTAS) < n:
        _DELTAS = tuple(encode_varint(i) for i in range(min(_MAX_DELTAS, max(n, 2 * len(_DELTAS)))))
    return _DELTAS


_MAX_DELTAS: Final = 1 << 16
_DELTAS: tuple[bytes, ...] = ()


def check_records(data: Buffer, h: BatchHeader, *, require_keys: bool = False) -> int:
    """Walk the ``h.records_count`` records of ``data`` (a batch's records, decompressed)
    once; return the batch's maximum record timestamp as Kafka computes it (the largest
    baseTimestamp + timestampDelta, and NO_TIMESTAMP (-1) when none is larger).

    Raises InvalidRecordError naming the first bad record (``record_errors`` carries its
    index within the batch, for Produce v8+), or, with ``require_keys``, every record
    without a key. In C when ``NATIVE`` (``data`` read in place), else in Python.
    """
    walk = _native
    if walk is None:
        return _check_records_py(
            data if isinstance(data, bytes) else bytes(data), h, require_keys=require_keys
        )
    try:
        result = walk(data, h.records_count, h.last_offset_delta, h.base_timestamp, require_keys)
    except _NativeInvalid as exc:
        index, message = exc.args
        raise _invalid(index, message) from None
    if isinstance(result, list):
        raise _keyless_error(result)
    return result


def _keyless_error(keyless: list[int]) -> InvalidRecordError:
    message = "compacted topic cannot accept a record without a key"
    return InvalidRecordError(
        f"{message} (records {keyless[:3]}{'...' if len(keyless) > 3 else ''} of the batch)",
        record_errors=tuple(RecordError(k, message) for k in keyless),
    )


def _check_records_py(data: bytes, h: BatchHeader, *, require_keys: bool = False) -> int:
    """check_records in Python: the reference the C walk (hot/_recordwalk.c) matches exactly,
    and the walk of an install without a C compiler."""
    count = h.records_count
    end = len(data)
    if count == 0 and end == 0:
        return NO_TIMESTAMP
    if count * (_MIN_RECORD_BODY + 1) > end:
        raise _invalid(0, f"recordsCount {count} cannot fit in {end} bytes of records")
    last_delta = h.last_offset_delta
    # With recordsCount == lastOffsetDelta + 1 (every client batch), increasing deltas in
    # [0, lastOffsetDelta] are exactly 0, 1, 2, ...: record i's delta is compared with the
    # canonical encoding of i in C (bytes.startswith) and decoded only when that fails.
    dense = count == last_delta + 1
    deltas = _offset_deltas(min(count, _MAX_DELTAS)) if dense else ()
    ndeltas = len(deltas)
    max_delta = _INT64_MIN
    prev = -1
    keyless: list[int] | None = None
    pos = 0
    i = 0
    # As in hot.records._decode_records: bounds are checked per record and per length; a
    # varint read past the end of ``data`` surfaces as IndexError, which saves a check per
    # field. One- and two-byte varints, nearly all of them, are decoded inline.
    try:
        for i in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = decode_varint(data, pos)
            rec_end = pos + length
            if length < _MIN_RECORD_BODY or rec_end > end:
                raise _invalid(i, f"length {length} invalid with {end - pos} bytes remaining")
            if data[pos]:
                raise _invalid(i, f"attributes {data[pos]:#04x}: record attributes are unused and must be 0")
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            elif data[pos + 2] < 0x80:
                u = (b & 0x7F) | (data[pos + 2] << 7)
                ts_delta = (u >> 1) ^ -(u & 1)
                pos += 3
            else:
                ts_delta, pos = decode_varlong(data, pos + 1)
            if ts_delta > max_delta:
                max_delta = ts_delta
            if dense:
                if i < ndeltas and data.startswith(deltas[i], pos):
                    pos += len(deltas[i])
                else:
                    off_delta, pos = decode_varint(data, pos)
                    if off_delta != i:
                        raise _invalid(
                            i,
                            f"offsetDelta {off_delta} where {i} was expected: with recordsCount = "
                            "lastOffsetDelta + 1 the deltas are 0, 1, 2, ...",
                        )
            else:
                off_delta, pos = decode_varint(data, pos)
                if off_delta <= prev or off_delta > last_delta:
                    raise _invalid(
                        i,
                        f"offsetDelta {off_delta} not in ({prev}, lastOffsetDelta {last_delta}]: "
                        "offset deltas must increase within the batch",
                    )
                prev = off_delta
            b = data[pos]
            if b == 1:  # null key
                pos += 1
                if require_keys:
                    if keyless is None:
                        keyless = []
                    keyless.append(i)
            else:
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif data[pos + 1] < 0x80:
                    u = (b & 0x7F) | (data[pos + 1] << 7)
                    n = (u >> 1) ^ -(u & 1)
                    pos += 2
                else:
                    n, pos = decode_varint(data, pos)
                if n < 0:  # -1 in an overlong encoding is as good as 0x01
                    if n != -1:
                        raise _invalid(i, f"key length {n}")
                    if require_keys:
                        if keyless is None:
                            keyless = []
                        keyless.append(i)
                else:
                    pos += n
                    if pos > rec_end:
                        raise _invalid(i, f"key length {n} overruns the record")
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                n = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                n, pos = decode_varint(data, pos)
            if n >= 0:
                pos += n
                if pos > rec_end:
                    raise _invalid(i, f"value length {n} overruns the record")
            elif n != -1:
                raise _invalid(i, f"value length {n}")
            if data[pos] == 0:
                pos += 1
            else:
                pos = _check_headers(data, pos, rec_end, i)
            if pos != rec_end:
                raise _invalid(i, f"declared length {length} but its fields end {pos - rec_end:+d} bytes off")
    except IndexError:
        raise _invalid(i, f"runs past the end of the {end}-byte records data") from None
    except CorruptRecordError as exc:  # an overlong varint (hot.records.decode_varint)
        raise _invalid(i, str(exc)) from None
    if pos != end:
        raise _invalid(count - 1, f"{end - pos} trailing bytes after the last of {count} records")
    max_ts = h.base_timestamp + max_delta
    if max_ts > _INT64_MAX or max_ts < _INT64_MIN:
        raise _invalid(0, f"baseTimestamp {h.base_timestamp} + timestampDelta {max_delta} overflows int64")
    if keyless:
        raise _keyless_error(keyless)
    return max_ts if max_ts > NO_TIMESTAMP else NO_TIMESTAMP


def _check_headers(data: bytes, pos: int, rec_end: int, i: int) -> int:
    count, pos = decode_varint(data, pos)
    # Each header takes at least two bytes (two lengths), so this bounds the loop.
    if count < 0 or count * 2 > rec_end - pos:
        raise _invalid(i, f"header count {count} invalid")
    for _ in range(count):
        n, pos = decode_varint(data, pos)
        if n < 0 or pos + n > rec_end:
            raise _invalid(i, f"header key length {n} invalid")
        try:
            data[pos : pos + n].decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid(i, "header key is not valid UTF-8") from None
        pos += n
        n, pos = decode_varint(data, pos)
        if n >= 0:
            pos += n
            if pos > rec_end:
                raise _invalid(i, f"header value length {n} invalid")
        elif n != -1:
            raise _invalid(i, f"header value length {n}")
    return pos
