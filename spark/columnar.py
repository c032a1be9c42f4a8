"""Column-oriented decoding of record batches straight into Arrow arrays. Pure, no I/O.

The byte layouts are ``hot.batch``'s (61-byte v2 batch header, parsed here through the
numpy dtype ``_HEADER_DTYPE``) and ``hot.records``'s (one record: ``length varint |
attributes int8 | timestampDelta varlong | offsetDelta varint | keyLength varint | key |
valueLength varint | value | headersCount varint | headers``; one header: ``keyLength
varint | key utf-8 | valueLength varint | value``). This module decodes the same bytes
with the same checks as ``hot.records``, but builds no Python object per record:

1. framing: a Python loop over the batch lengths finds the whole batches, numpy parses
   and checks all their headers at once, and each batch's CRC-32C is verified; the data
   batches overlapping the wanted offsets are decompressed (``hot.compression``) and
   their records payloads concatenated into one buffer;
2. the chain of record ``length`` varints (the one sequential dependency) is followed
   for all batches together, step k reading the k-th record of every batch through a
   lookup table of all 1- and 2-byte varints (a per-record Python loop for few, large
   batches or long records);
3. every other field is decoded with numpy for all records at once, varints included;
4. keys, values and header keys/values become Arrow binary arrays without passing
   through Python: the boundaries ``key start, key end, value start, value end`` of
   consecutive records never decrease, so they are the offsets of one Arrow binary array
   over the payload buffer whose every 4th element is a key (every 4th + 2 a value);
   ``take`` gathers them in C++.

Any inconsistency (a bound, a varint, a delta, invalid UTF-8 in a header key) makes the
offending batch be decoded again by ``hot.records.decode_batch``, so the error raised is
exactly the reference codec's, wrapped in ``BatchDecodeError`` with the batch's position
and base offset. ``tests/spark/test_columnar.py`` cross-checks both decoders with
hypothesis, on valid and on damaged input.
"""

from __future__ import annotations

import importlib
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from crc32c import crc32c

from hot.batch import CRC_START, HEADER_SIZE, LOG_OVERHEAD, MAGIC, MIN_BATCH_LENGTH, validate_batch
from hot.compression import codec_of, decompress
from hot.errors import CorruptRecordError, StrataError
from hot.records import DEFAULT_MAX_UNCOMPRESSED, decode_batch
from hot.txn_cleaning import AbortedRanges
from hot.txn_index import AbortedTxn
from spark.schema import ARROW_SCHEMA, HEADER_TYPE, HEADERS_TYPE, TIMESTAMP_TYPE

_decode: ModuleType | None
try:  # the C record decoder (setup.py builds it; optional: the vectorized path decodes all)
    # By name: an import statement of the extension reads, to import-linter and the cycle
    # test (which see Python files only), as importing the ``spark`` package itself.
    _decode = importlib.import_module("spark._decode")
except ImportError:  # pragma: no cover - depends on the build
    _decode = None

Buffer = bytes | bytearray | memoryview
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
Bool = npt.NDArray[np.bool_]

INT64_MAX: Final = (1 << 63) - 1
_PREFIX: Final = struct.Struct(">qi")  # baseOffset, batchLength
_MAGIC_POS: Final = 16
_CONTROL_BIT: Final = 0x20
_TRANSACTIONAL_BIT: Final = 0x10
_LOG_APPEND_BIT: Final = 0x08
_MIN_RECORD_BODY: Final = 6
_PAD: Final = bytes(16)  # lets a varint read run off the last record without an IndexError
_EMPTY: Final[npt.NDArray[np.int64]] = np.empty(0, dtype=np.int64)
# Follow the record-length chains of all batches together when there are at least this many
# records per step (a numpy step costs about as much as this many Python-loop records).
_CHAIN_ACROSS_BATCHES: Final = 12


def _varint16_tables() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Decoding of every 1- and 2-byte zigzag varint by the little-endian uint16 of its
    first two bytes: (value, size); size 0 marks a varint of 3 or more bytes."""
    w = np.arange(1 << 16, dtype=np.int64)
    b0, b1 = w & 0xFF, w >> 8
    one = b0 < 0x80
    two = ~one & (b1 < 0x80)
    u = np.where(one, b0, (b0 & 0x7F) | (b1 << 7))
    return (u >> 1) ^ -(u & 1), np.where(one, 1, np.where(two, 2, 0))


_VAL16, _SIZE16 = _varint16_tables()
_STEP16: Final = _VAL16 + _SIZE16  # record length varint: bytes from its start to the record's end


def _u16_view(data: bytes) -> npt.NDArray[np.uint16]:
    """Little-endian uint16 at every byte position of ``data`` (unaligned, no copy)."""
    return np.ndarray(shape=(len(data) - 1,), dtype="<u2", buffer=data, offset=0, strides=(1,))


# Milliseconds whose microsecond value fits an int64 (Spark's timestamp range is narrower still).
_MAX_MS: Final = INT64_MAX // 1000
# Keep every binary array's int32 offsets in range: decode at most this many payload bytes at once.
MAX_GROUP_BYTES: Final = 256 << 20


class BatchDecodeError(CorruptRecordError):
    """A batch that fails decoding; ``position`` is its byte position in the decoded buffer."""

    def __init__(self, message: str, *, position: int, base_offset: int | None) -> None:
        super().__init__(message)
        self.position = position
        self.base_offset = base_offset
        self.reason = message


_HEADER_DTYPE: Final = np.dtype(
    [
        ("base_offset", ">i8"),
        ("batch_length", ">i4"),
        ("leader_epoch", ">i4"),
        ("magic", "i1"),
        ("crc", ">u4"),
        ("attributes", ">i2"),
        ("last_delta", ">i4"),
        ("base_ts", ">i8"),
        ("max_ts", ">i8"),
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("base_sequence", ">i4"),
        ("records_count", ">i4"),
    ]
)
assert _HEADER_DTYPE.itemsize == HEADER_SIZE
_HEADER_BYTES: Final = np.arange(HEADER_SIZE, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Frames:
    """The whole batches at the front of a buffer, one array element per batch, in order.

    ``consumed`` is the number of bytes they span; a partial batch after them is left
    for the caller to complete with more bytes."""

    positions: I64
    sizes: I64
    base_offsets: I64
    last_deltas: I64
    attributes: I64
    base_timestamps: I64
    max_timestamps: I64
    counts: I64
    producer_ids: I64
    consumed: int

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def next_offsets(self) -> I64:
        return self.base_offsets + self.last_deltas + 1

    def data_batches(self, aborted: AbortedRanges | None = None) -> I64:
        """Indexes of batches holding data records (not control, not empty), without the
        transactional batches of ``aborted`` transactions (read_committed; None or empty:
        every transactional batch, as a read_uncommitted Kafka consumer sees them)."""
        keep = ((self.attributes & _CONTROL_BIT) == 0) & (self.counts > 0)
        if aborted:
            txn = keep & ((self.attributes & _TRANSACTIONAL_BIT) != 0)
            for pid, (firsts, lasts) in aborted.spans().items():
                sel = np.flatnonzero(txn & (self.producer_ids == pid))
                if not sel.size:
                    continue
                base = self.base_offsets[sel]
                i = np.searchsorted(np.asarray(firsts, dtype=np.int64), base, side="right") - 1
                last = np.asarray(lasts, dtype=np.int64)[np.maximum(i, 0)]
                keep[sel[(i >= 0) & (base <= last)]] = False
        return np.flatnonzero(keep)

    def aborted_in_fetch(self, aborted: Sequence[tuple[int, int]]) -> AbortedRanges:
        """The aborted transactions of a Fetch response (producer id, first offset: Kafka's
        AbortedTransaction) as ranges ending at each one's ABORT marker in these batches (the
        first control batch of that producer at or after its first offset; past the end
        when the marker is not among them), as a Kafka consumer applies them."""
        control = (self.attributes & _CONTROL_BIT) != 0
        out: list[AbortedTxn] = []
        for pid, first in aborted:
            ends = self.base_offsets[control & (self.producer_ids == pid) & (self.base_offsets >= first)]
            last = int(ends.min()) if ends.size else INT64_MAX
            out.append(AbortedTxn(pid, first, last, last))
        return AbortedRanges(out)


@dataclass(frozen=True, slots=True)
class DecodedChunk:
    """The rows of one buffer's whole batches within the requested offset range, and the
    frames of all those batches (data or not) so callers can check offset continuity."""

    batch: pa.RecordBatch
    frames: Frames

    @property
    def consumed(self) -> int:
        return self.frames.consumed


def _reference_error(buf: Buffer, position: int, base_offset: int | None, what: str) -> BatchDecodeError:
    """The reference codec's error for the batch at ``position`` that a vectorized check refused."""
    try:
        validate_batch(buf, position)
        decode_batch(buf, position, verify_crc=False)
    except StrataError as e:
        return BatchDecodeError(str(e), position=position, base_offset=base_offset)
    # Both decoders must agree; reaching this is a bug in this module, reported as corruption
    # rather than silently returning different rows.
    return BatchDecodeError(
        f"batch failed columnar validation ({what}) but not the reference decoder",
        position=position,
        base_offset=base_offset,
    )


@dataclass(frozen=True, slots=True)
class BatchBounds:
    """Where the whole batches at the front of a buffer are, from their length fields
    only (nothing else is checked yet): ``consumed`` bytes hold them; ``error`` is the
    first framing error after them (a length below the minimum, or the magic of a
    partial batch), raised by ``frame`` after the batches before it are validated.
    ``next_size`` is the full size of the partial batch after them, when its length
    field is there (-1 otherwise)."""

    positions: array[int]
    sizes: array[int]
    consumed: int
    error: BatchDecodeError | None
    next_size: int


def batch_bounds(buf: Buffer) -> BatchBounds:
    """Follow the batch length fields from the start of ``buf`` (a cheap pass: a reader can
    ask for the bytes after the last whole batch before decoding these)."""
    positions = array("q")
    sizes = array("q")
    pos = 0
    end = len(buf)
    error: BatchDecodeError | None = None
    next_size = -1
    unpack = _PREFIX.unpack_from
    while end - pos >= LOG_OVERHEAD:
        base, length = unpack(buf, pos)
        if length < MIN_BATCH_LENGTH:
            error = BatchDecodeError(
                f"batch length {length} below minimum {MIN_BATCH_LENGTH}", position=pos, base_offset=base
            )
            break
        size = length + LOG_OVERHEAD
        if pos + size > end:
            if end - pos > _MAGIC_POS and buf[pos + _MAGIC_POS] != MAGIC:
                error = BatchDecodeError(
                    f"record batch magic {buf[pos + _MAGIC_POS]} is not supported (need 2)",
                    position=pos,
                    base_offset=base,
                )
            else:
                next_size = size
            break
        positions.append(pos)
        sizes.append(size)
        pos += size
    return BatchBounds(positions, sizes, pos, error, next_size)


def frame(buf: Buffer, *, verify_crc: bool = True, bounds: BatchBounds | None = None) -> Frames:
    """Find and validate (structure, CRC-32C) the whole batches at the front of ``buf``. A
    partial batch at the end is not an error; anything malformed is BatchDecodeError,
    for the first bad batch in buffer order. ``bounds``: ``batch_bounds(buf)``, if known."""
    b = bounds if bounds is not None else batch_bounds(buf)
    positions, sizes, pos, deferred = b.positions, b.sizes, b.consumed, b.error
    nb = len(positions)
    if nb == 0:
        if deferred is not None:
            raise deferred
        return Frames(_EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, 0)
    P = np.frombuffer(positions, dtype=np.int64)
    Z = np.frombuffer(sizes, dtype=np.int64)
    u8 = np.frombuffer(buf, dtype=np.uint8)
    H = u8[P[:, None] + _HEADER_BYTES].view(_HEADER_DTYPE).reshape(nb)
    base = H["base_offset"].astype(np.int64)
    last_delta = H["last_delta"].astype(np.int64)
    counts = H["records_count"].astype(np.int64)
    broken = (
        (H["magic"] != MAGIC) | (last_delta < 0) | (counts < 0) | ((counts > 0) & (last_delta + 1 < counts))
    )
    first_broken = int(np.argmax(broken)) if broken.any() else nb
    if verify_crc:
        view = memoryview(buf)
        stored = H["crc"].tolist()
        for i, (p, z) in enumerate(zip(positions, sizes, strict=True)):
            if i >= first_broken:
                break
            actual = crc32c(view[p + CRC_START : p + z])
            if actual != stored[i]:
                raise BatchDecodeError(
                    f"CRC mismatch: stored {stored[i]:#010x}, computed {actual:#010x}",
                    position=p,
                    base_offset=int(base[i]),
                )
    if first_broken < nb:
        raise _reference_error(buf, positions[first_broken], int(base[first_broken]), "batch header")
    if deferred is not None:
        raise deferred
    return Frames(
        positions=P,
        sizes=Z,
        base_offsets=base,
        last_deltas=last_delta,
        attributes=H["attributes"].astype(np.int64),
        base_timestamps=H["base_ts"].astype(np.int64),
        max_timestamps=H["max_ts"].astype(np.int64),
        counts=counts,
        producer_ids=H["producer_id"].astype(np.int64),
        consumed=pos,
    )


def decode_columns(
    buf: Buffer,
    *,
    topic: str,
    partition: int,
    start_offset: int = 0,
    end_offset: int = INT64_MAX,
    verify_crc: bool = True,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED,
    bounds: BatchBounds | None = None,
    aborted: AbortedRanges | None = None,
    fetch_aborted: Sequence[tuple[int, int]] | None = None,
) -> DecodedChunk:
    """Decode the whole batches at the front of ``buf`` into one Arrow RecordBatch (schema
    ``spark.schema.ARROW_SCHEMA``) holding the data records with offsets in
    ``[start_offset, end_offset)``, in offset order. Control batches are skipped; so are
    the batches of ``aborted`` transactions (read_committed, from the segments'
    transaction indexes) or, for a broker's Fetch response, of ``fetch_aborted`` ones
    (its (producer id, first offset) list). ``bounds``: ``batch_bounds(buf)``, if the
    caller computed it already."""
    fr = frame(buf, verify_crc=verify_crc, bounds=bounds)
    if fetch_aborted:
        aborted = fr.aborted_in_fetch(fetch_aborted)
    wi = fr.data_batches(aborted)
    if wi.size:
        last = fr.base_offsets[wi] + fr.last_deltas[wi]
        wi = wi[(last >= start_offset) & (fr.base_offsets[wi] < end_offset)]
    view = memoryview(buf)
    parts: list[pa.RecordBatch] = []
    group: list[int] = []
    payloads: list[bytes | memoryview] = []
    group_bytes = 0
    codecs = (fr.attributes[wi] & 0x07).tolist()
    for i, codec_id, p, z in zip(
        wi.tolist(), codecs, fr.positions[wi].tolist(), fr.sizes[wi].tolist(), strict=True
    ):
        payload = view[p + HEADER_SIZE : p + z]
        if codec_id == 0 and z - HEADER_SIZE <= max_uncompressed:
            data: bytes | memoryview = payload  # joined below without an extra copy
        else:
            try:
                data = decompress(codec_of(codec_id), payload, max_size=max_uncompressed)
            except StrataError as e:
                raise BatchDecodeError(str(e), position=p, base_offset=int(fr.base_offsets[i])) from None
        if group and group_bytes + len(data) > MAX_GROUP_BYTES:
            parts.append(_decode_group(buf, fr, group, payloads, topic, partition, start_offset, end_offset))
            group, payloads, group_bytes = [], [], 0
        group.append(i)
        payloads.append(data)
        group_bytes += len(data)
    if group or not parts:
        parts.append(_decode_group(buf, fr, group, payloads, topic, partition, start_offset, end_offset))
    batch = parts[0] if len(parts) == 1 else _concat(parts)
    return DecodedChunk(batch, fr)


def _concat(parts: Sequence[pa.RecordBatch]) -> pa.RecordBatch:
    return pa.Table.from_batches(parts, schema=ARROW_SCHEMA).combine_chunks().to_batches()[0]


def empty_batch() -> pa.RecordBatch:
    """A RecordBatch of the data source's schema with no rows."""
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in ARROW_SCHEMA], schema=ARROW_SCHEMA)


# --- the vectorized part ----------------------------------------------------------------------


def _varint_py(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (at most 5 bytes) of a record length; (-1, pos) if malformed."""
    u = 0
    shift = 0
    for i in range(5):
        b = data[pos + i]
        u |= (b & 0x7F) << shift
        if b < 0x80:
            if u >> 32:
                return -1, pos
            return (u >> 1) ^ -(u & 1), pos + i + 1
        shift += 7
    return -1, pos


def _vfield(d: U8, d16: npt.NDArray[np.uint16], p: I64, max_bytes: int) -> tuple[I64, I64, Bool | None]:
    """``_vvarint`` through the uint16 tables: three gathers for 1- and 2-byte varints,
    the general decoder only for the (rare) longer ones."""
    w = d16[p]
    size = np.take(_SIZE16, w, mode="clip")  # take: faster than fancy indexing; w is in range
    values = np.take(_VAL16, w, mode="clip")
    if size.min() > 0:
        return values, p + size, None
    long = np.flatnonzero(size == 0)
    v, after, bad = _vvarint(d, p[long], max_bytes)
    values[long] = v
    nxt = p + size
    nxt[long] = after
    if bad is None:
        return values, nxt, None
    mask = np.zeros(len(p), dtype=np.bool_)
    mask[long] = bad
    return values, nxt, mask


def _record_heads(
    data: bytes, d16: npt.NDArray[np.uint16], S: I64, E: I64
) -> tuple[I64, I64, I64, I64, I64, I64] | None:
    """timestampDelta, offsetDelta, keyLength, key start, valueLength, value start of every
    record (body at ``S``), or None when some of these varints take 3 bytes or more (keys or
    values of 8 KiB or more; the general path then decodes them). One 8-byte gather per
    record covers attributes, timestamp and offset deltas and key length, and the value
    length too when the key is short: each pass over a chunk's records costs about as much
    as a memory pass over the chunk, so passes are what this saves. Bounds are the caller's
    to check (a length running past the record yields garbage values, never a read out of
    ``data``: positions read are clamped to ``E``)."""
    d64 = np.ndarray(shape=(len(data) - 7,), dtype="<i8", buffer=data, offset=0, strides=(1,))
    word = d64[S]
    shift = np.full(len(S), 8, dtype=np.int64)  # bits of ``word`` consumed: attributes
    fields = []
    for _ in range(3):
        w = (word >> shift) & 0xFFFF
        size = np.take(_SIZE16, w, mode="clip")
        fields.append(np.take(_VAL16, w, mode="clip"))
        if size.min() == 0:
            return None
        shift += size << 3
    ts_delta, off_delta, klen = fields
    ks = S + (shift >> 3)
    vpos = np.minimum(ks + np.maximum(klen, 0), E)
    rel = vpos - S  # the value length's first byte, from the record body's start
    in_word = rel <= 6
    w = (word >> (np.where(in_word, rel, 0) << 3)) & 0xFFFF
    if not in_word.all():
        out = np.flatnonzero(~in_word)
        w[out] = d16[vpos[out]]
    size = np.take(_SIZE16, w, mode="clip")
    if size.min() == 0:
        return None
    return ts_delta, off_delta, klen, ks, np.take(_VAL16, w, mode="clip"), vpos + size


def _vvarint(d: U8, p: I64, max_bytes: int) -> tuple[I64, I64, Bool | None]:
    """Zigzag varints (``max_bytes`` 5) or varlongs (10) at positions ``p``, all at once:
    (values, positions after them, malformed mask or None when none is: too long or
    overflowing). One- and two-byte encodings, nearly all of them, take a short path."""
    b0 = d[p]
    more0 = b0 >= 0x80
    if not more0.any():
        u = b0.astype(np.int64)
        return (u >> 1) ^ -(u & 1), p + 1, None
    b1 = d[p + 1]
    if not (more0 & (b1 >= 0x80)).any():
        u = np.where(more0, (b0 & 0x7F).astype(np.int64) | (b1.astype(np.int64) << 7), b0.astype(np.int64))
        return (u >> 1) ^ -(u & 1), p + 1 + more0, None
    uu = (b0 & 0x7F).astype(np.uint64)
    nxt = p + 1
    more = np.flatnonzero(more0)
    bad = np.zeros(len(p), dtype=np.bool_)
    for k in range(1, max_bytes):
        bk = d[p[more] + k]
        chunk = (bk & 0x7F).astype(np.uint64)
        if k == max_bytes - 1:
            # Bits beyond the type's width: varint 35 - 32, varlong 70 - 64.
            limit = 0x0F if max_bytes == 5 else 0x01
            bad[more[chunk > limit]] = True
        uu[more] |= chunk << np.uint64(7 * k)
        nxt[more] += 1
        more = more[(bk & 0x80) != 0]
        if not more.size:
            break
    if more.size:
        bad[more] = True
    values = (uu >> np.uint64(1)).astype(np.int64) ^ -(uu & np.uint64(1)).astype(np.int64)
    return values, nxt, bad if bad.any() else None


def _binary_slices(d_buf: pa.Buffer, starts: I64, ends: I64, nulls: Bool | None) -> pa.Array:
    """Binary array of ``d[starts[i]:ends[i]]``; ranges must be ordered and disjoint."""
    n = len(starts)
    if n == 0:
        return pa.array([], type=pa.binary())
    bounds = np.empty(2 * n, dtype=np.int32)
    bounds[0::2] = starts
    bounds[1::2] = ends
    spans = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds), d_buf])
    idx = pa.array(np.arange(0, 2 * n, 2, dtype=np.int32), mask=nulls)
    return spans.take(idx)


def _key_value_arrays(
    d_buf: pa.Buffer, ks: I64, ke: I64, vs: I64, ve: I64, key_null: Bool, value_null: Bool
) -> tuple[pa.Array, pa.Array]:
    n = len(ks)
    if n == 0:
        empty = pa.array([], type=pa.binary())
        return empty, empty
    bounds = np.empty(4 * n, dtype=np.int32)
    bounds[0::4] = ks
    bounds[1::4] = ke
    bounds[2::4] = vs
    bounds[3::4] = ve
    spans = pa.Array.from_buffers(pa.binary(), 4 * n - 1, [None, pa.py_buffer(bounds), d_buf])
    base = np.arange(0, 4 * n, 4, dtype=np.int32)
    return _take(spans, base, key_null), _take(spans, base + 2, value_null)


def _take(spans: pa.Array, idx: npt.NDArray[np.int32], null: Bool) -> pa.Array:
    if null.all():  # null keys are common: no gather at all
        return pa.nulls(len(idx), pa.binary())
    return spans.take(pa.array(idx, mask=null if null.any() else None))


def _constant_string(s: str, n: int) -> pa.Array:
    raw = s.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _decode_group(
    buf: Buffer,
    fr: Frames,
    group: list[int],
    payloads: list[bytes | memoryview],
    topic: str,
    partition: int,
    start_offset: int,
    end_offset: int,
) -> pa.RecordBatch:
    nb = len(group)
    if nb == 0:
        return empty_batch()
    gi = np.asarray(group, dtype=np.int64)
    if _decode is not None:
        fast = _decode_group_c(fr, gi, payloads, topic, partition, start_offset, end_offset)
        if fast is not None:
            return fast
    data = b"".join([*payloads, _PAD])
    d: U8 = np.frombuffer(data, dtype=np.uint8)
    d16 = _u16_view(data)
    counts = fr.counts[gi]
    base_off = fr.base_offsets[gi]
    last_delta = fr.last_deltas[gi]
    base_ts = fr.base_timestamps[gi]
    max_ts = fr.max_timestamps[gi]
    log_append = (fr.attributes[gi] & _LOG_APPEND_BIT) != 0
    data_end = np.cumsum(np.fromiter((len(x) for x in payloads), dtype=np.int64, count=nb))
    data_start = data_end - np.fromiter((len(x) for x in payloads), dtype=np.int64, count=nb)

    def fail(batch: int, what: str) -> BatchDecodeError:
        i = group[batch]
        return _reference_error(buf, int(fr.positions[i]), int(fr.base_offsets[i]), what)

    # Step 2: the chain of record lengths: where each record body starts (S) and ends (E).
    n = int(counts.sum())
    max_count = int(counts.max())
    across = n >= _CHAIN_ACROSS_BATCHES * max_count
    # The table path keeps a (max records per batch) x (batches) matrix: only for batches of
    # similar sizes.
    use_tables = across and max_count * nb <= 4 * n
    fast = _chain_tables(d16, counts, data_start, data_end, n) if use_tables else None
    if fast is not None:
        S, E = fast
        bad_batch = None
    elif across:
        S, E, bad_batch = _chain_vectorized(d, counts, data_start, data_end, n)
    else:
        S, E, bad_batch = _chain_python(data, counts, data_start, data_end, n)
    if bad_batch is not None:
        raise fail(bad_batch, "record length chain")
    bidx = np.repeat(np.arange(nb, dtype=np.int64), counts)

    # Step 3: every other field, vectorized over all records.
    heads = _record_heads(data, d16, S, E)
    if heads is not None:
        ts_delta, off_delta, klen, ks, vlen, vs = heads
        malformed_fields: list[Bool | None] = []
    else:
        p = S + 1  # attributes: unused
        ts_delta, p, b1 = _vfield(d, d16, p, 10)
        off_delta, p, b2 = _vfield(d, d16, p, 5)
        klen, ks, b3 = _vfield(d, d16, p, 5)
        vlen, vs, b4 = _vfield(d, d16, np.minimum(ks + np.maximum(klen, 0), E), 5)
        malformed_fields = [b1, b2, b3, b4]
    bad = (off_delta < 0) | (off_delta > last_delta[bidx]) | (klen < -1) | (vlen < -1)
    bad |= ks + np.maximum(klen, 0) > E
    p = vs + np.maximum(vlen, 0)
    bad |= p > E
    np.minimum(p, E, out=p)
    count_byte = d[p]
    if count_byte.max() < 0x80:  # one-byte header counts (nearly always 0): no table lookup
        hcount = (count_byte >> 1).astype(np.int64) ^ -(count_byte & 1).astype(np.int64)
        p = p + 1
    else:
        hcount, p, b5 = _vfield(d, d16, p, 5)
        malformed_fields.append(b5)
    for malformed in malformed_fields:
        if malformed is not None:
            bad |= malformed
    hcount_bad = (hcount < 0) | (hcount * 2 > E - p)
    if hcount_bad.any():
        bad |= hcount_bad
        hcount = np.where(hcount_bad, 0, hcount)

    with_headers = np.flatnonzero(hcount)
    h_first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(hcount, out=h_first[1:])
    total_h = int(h_first[-1])
    hks = np.empty(total_h, dtype=np.int64)
    hke = np.empty(total_h, dtype=np.int64)
    hvs = np.empty(total_h, dtype=np.int64)
    hve = np.empty(total_h, dtype=np.int64)
    hv_null = np.zeros(total_h, dtype=np.bool_)
    if with_headers.size:
        rec = with_headers
        hp = p[rec]
        he = E[rec]
        hleft = hcount[rec]
        j = 0
        while rec.size:
            flat = h_first[rec] + j
            kl, hp, hb1 = _vfield(d, d16, hp, 5)
            hb = kl < 0 if hb1 is None else hb1 | (kl < 0)
            hks[flat] = hp
            hp = hp + np.maximum(kl, 0)
            hb |= hp > he
            hp = np.minimum(hp, he)
            hke[flat] = hp
            vl, hp, hb2 = _vfield(d, d16, hp, 5)
            hb |= vl < -1
            if hb2 is not None:
                hb |= hb2
            hvs[flat] = hp
            hp = hp + np.maximum(vl, 0)
            hb |= hp > he
            hp = np.minimum(hp, he)
            hve[flat] = hp
            hv_null[flat] = vl < 0
            bad[rec[hb]] = True
            p[rec] = hp
            j += 1
            keep = hleft > j
            rec, hp, he, hleft = rec[keep], hp[keep], he[keep], hleft[keep]
    bad |= p != E
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise fail(int(bidx[first]), "record fields")

    d_buf = pa.py_buffer(data)
    header_keys: pa.Array | None = None
    if total_h:
        try:
            header_keys = _binary_slices(d_buf, hks, hke, None).cast(pa.string())
        except pa.ArrowInvalid:
            first_bad = _first_invalid_utf8(data, hks, hke, h_first)
            raise fail(int(bidx[first_bad]), "header key") from None

    # Step 4: Arrow columns of the records in range.
    offsets = base_off[bidx] + off_delta
    sel_mask = (offsets >= start_offset) & (offsets < end_offset)
    if not sel_mask.all():
        sel = np.flatnonzero(sel_mask)
        offsets, ts_delta, klen, vlen, ks, vs, bidx_s, hcount_s = (
            offsets[sel],
            ts_delta[sel],
            klen[sel],
            vlen[sel],
            ks[sel],
            vs[sel],
            bidx[sel],
            hcount[sel],
        )
        h_sel: I64 | None = sel
    else:
        bidx_s, hcount_s = bidx, hcount
        h_sel = None
    m = len(offsets)
    ts = np.where(log_append[bidx_s], max_ts[bidx_s], base_ts[bidx_s] + ts_delta)
    ts_us = np.clip(ts, -_MAX_MS, _MAX_MS) * 1000
    key_null = klen < 0
    value_null = vlen < 0
    keys, values = _key_value_arrays(
        d_buf, ks, ks + np.maximum(klen, 0), vs, vs + np.maximum(vlen, 0), key_null, value_null
    )
    headers = _headers_array(d_buf, header_keys, hvs, hve, hv_null, h_first, hcount_s, h_sel, total_h)
    ts_type = log_append[bidx_s].astype(np.int32)
    columns = [
        keys,
        values,
        _constant_string(topic, m),
        pa.array(np.full(m, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.Array.from_buffers(TIMESTAMP_TYPE, m, [None, pa.py_buffer(np.ascontiguousarray(ts_us))]),
        pa.array(ts_type),
        headers,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _decode_group_c(
    fr: Frames,
    gi: I64,
    payloads: list[bytes | memoryview],
    topic: str,
    partition: int,
    start_offset: int,
    end_offset: int,
) -> pa.RecordBatch | None:
    """``_decode_group`` by ``spark._decode`` (C): one pass over the records writing the Arrow
    buffers, for groups of well-formed records without headers; None otherwise (a header,
    or anything malformed: the vectorized path decodes or refuses it exactly)."""
    assert _decode is not None
    counts = fr.counts[gi]
    n = int(counts.sum())
    total = sum(len(x) for x in payloads)
    bitmap = (n + 7) // 8
    # From Arrow's pool (mimalloc/jemalloc), which reuses freed pages: see spark/_decode.c.
    out = [
        pa.allocate_buffer(size, resizable=True)
        for size in (8 * n, 8 * n, 4 * n, 4 * n + 4, total, bitmap, 4 * n + 4, total, bitmap)
    ]
    got = _decode.decode_records(
        payloads,
        counts,
        fr.base_offsets[gi],
        fr.last_deltas[gi],
        fr.base_timestamps[gi],
        fr.max_timestamps[gi],
        ((fr.attributes[gi] & _LOG_APPEND_BIT) != 0).view(np.uint8),
        start_offset,
        end_offset,
        out,
    )
    if got is None:
        return None
    m, k_bytes, k_nulls, v_bytes, v_nulls = got
    offsets, ts, ts_type, k_off, k_data, k_valid, v_off, v_data, v_valid = out
    if m < n:  # rows out of range: no larger buffers than the columns need
        for b, width in ((offsets, 8), (ts, 8), (ts_type, 4)):
            b.resize(width * m)
        k_off.resize(4 * m + 4)
        v_off.resize(4 * m + 4)
    k_data.resize(k_bytes, shrink_to_fit=True)
    v_data.resize(v_bytes, shrink_to_fit=True)
    columns = [
        _binary(m, k_off, k_data, k_valid, k_nulls),
        _binary(m, v_off, v_data, v_valid, v_nulls),
        _constant_string(topic, m),
        pa.array(np.full(m, partition, dtype=np.int32)),
        pa.Array.from_buffers(pa.int64(), m, [None, offsets]),
        pa.Array.from_buffers(TIMESTAMP_TYPE, m, [None, ts]),
        pa.Array.from_buffers(pa.int32(), m, [None, ts_type]),
        _no_headers(m),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _binary(m: int, offsets: pa.Buffer, data: pa.Buffer, valid: pa.Buffer, nulls: int) -> pa.Array:
    if nulls == m:  # null keys are common: the same array as the vectorized path's
        return pa.nulls(m, pa.binary())
    return pa.Array.from_buffers(pa.binary(), m, [valid if nulls else None, offsets, data], null_count=nulls)


def _no_headers(m: int) -> pa.Array:
    """A headers column of ``m`` nulls (records without headers), without a mask array."""
    zeros = pa.py_buffer(bytes(4 * (m + 1)))
    validity = pa.py_buffer(bytes((m + 7) // 8))
    return pa.Array.from_buffers(
        HEADERS_TYPE, m, [validity, zeros], null_count=m, children=[pa.array([], type=HEADER_TYPE)]
    )


def _headers_array(
    d_buf: pa.Buffer,
    header_keys: pa.Array | None,
    hvs: I64,
    hve: I64,
    hv_null: Bool,
    h_first: I64,
    hcount_s: I64,
    h_sel: I64 | None,
    total_h: int,
) -> pa.Array:
    m = len(hcount_s)
    list_offsets = np.zeros(m + 1, dtype=np.int32)
    np.cumsum(hcount_s, out=list_offsets[1:])
    no_headers = hcount_s == 0
    if header_keys is None or total_h == 0 or list_offsets[-1] == 0:
        values: pa.Array = pa.array([], type=HEADER_TYPE)
        list_offsets[:] = 0
    else:
        if h_sel is None:
            flat = None
        else:
            counts = hcount_s
            starts = h_first[h_sel]
            flat = np.repeat(starts - list_offsets[:-1], counts) + np.arange(int(list_offsets[-1]))
        hv = _binary_slices(d_buf, hvs, hve, hv_null if hv_null.any() else None)
        hk = header_keys
        if flat is not None:
            idx = pa.array(flat)
            hk, hv = hk.take(idx), hv.take(idx)
        values = pa.StructArray.from_arrays([hk, hv], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(
        pa.array(list_offsets),
        values,
        type=HEADERS_TYPE,
        mask=pa.array(no_headers) if no_headers.any() else None,
    )


def _first_invalid_utf8(data: bytes, hks: I64, hke: I64, h_first: I64) -> int:
    """The record holding the first header key that is not UTF-8."""
    for i in range(len(hks)):
        try:
            data[int(hks[i]) : int(hke[i])].decode("utf-8")
        except UnicodeDecodeError:
            return int(np.searchsorted(h_first, i, side="right")) - 1
    return 0


def _chain_python(
    data: bytes, counts: I64, data_start: I64, data_end: I64, n: int
) -> tuple[I64, I64, int | None]:
    """Record bodies batch by batch: one varint per record in Python (few, large batches)."""
    starts = array("q")
    ends = array("q")
    s_append = starts.append
    e_append = ends.append
    for bi in range(len(counts)):
        de = int(data_end[bi])
        p = int(data_start[bi])
        for _ in range(int(counts[bi])):
            b = data[p]
            if b < 0x80:
                q = p + 1
                length = (b >> 1) ^ -(b & 1)
            else:
                length, q = _varint_multi(data, p)
            e = q + length
            if length < _MIN_RECORD_BODY or e > de:
                return _EMPTY, _EMPTY, bi
            s_append(q)
            e_append(e)
            p = e
        if p != de:
            return _EMPTY, _EMPTY, bi
    if not n:
        return _EMPTY, _EMPTY, None
    return np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64), None


def _chain_tables(
    d16: npt.NDArray[np.uint16], counts: I64, data_start: I64, data_end: I64, n: int
) -> tuple[I64, I64] | None:
    """The fast path of ``_chain_vectorized`` for record lengths of 1 or 2 bytes (records
    under 8 KiB): per step, one table lookup per batch, batches ordered by record count so
    the batches still active are a prefix. Nothing is checked inside the loop (a runaway
    position ends it with an IndexError); everything is verified afterwards, and None
    means "not verified" (a longer length, or damage): the exact path decides."""
    nb = len(counts)
    order = np.argsort(-counts, kind="stable")
    sorted_counts = counts[order]
    steps = int(sorted_counts[0])
    active = np.searchsorted(-sorted_counts, -np.arange(steps), side="left").tolist()
    pos = data_start[order]
    # Step k writes row k: lanes (batches) are columns, so writes are contiguous slices.
    starts2 = np.empty((steps, nb), dtype=np.int64)
    words2 = np.empty((steps, nb), dtype=np.uint16)  # each record's first two bytes
    try:
        for k, na in enumerate(active):
            p = pos[:na]
            starts2[k, :na] = p
            w = d16[p]
            words2[k, :na] = w
            pos[:na] = p + np.take(_STEP16, w, mode="clip")
    except IndexError:
        return None
    valid = np.arange(steps, dtype=np.int64)[None, :] < counts[:, None]
    if nb == 1 or (order[1:] > order[:-1]).all():  # batches already in order (equal counts)
        RS, w = starts2.T[valid], words2.T[valid]
    else:
        lanes = np.empty(nb, dtype=np.int64)
        lanes[order] = np.arange(nb, dtype=np.int64)
        # row b: record starts of batch b (valid up to counts[b])
        RS, w = starts2.T[lanes][valid], words2.T[lanes][valid]
    size = _SIZE16[w]
    S = RS + size
    E = S + _VAL16[w]
    bidx = np.repeat(np.arange(nb, dtype=np.int64), counts)
    ok = (
        (size > 0).all()
        and (E - S >= _MIN_RECORD_BODY).all()
        and (data_end[bidx] >= E).all()
        and (pos == data_end[order]).all()
    )
    return (S, E) if ok else None


def _chain_vectorized(
    d: U8, counts: I64, data_start: I64, data_end: I64, n: int
) -> tuple[I64, I64, int | None]:
    """Record bodies of many batches at once: step k reads the k-th record length of every
    batch that has one, so the Python-level work is per batch length, not per record."""
    S = np.empty(n, dtype=np.int64)
    E = np.empty(n, dtype=np.int64)
    first = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    pos = data_start.copy()
    active = np.flatnonzero(counts)
    bad = np.zeros(len(counts), dtype=np.bool_)
    k = 0
    while active.size:
        p = pos[active]
        b0 = d[p]
        b1 = d[p + 1]
        two = b0 >= 0x80
        if (two & (b1 >= 0x80)).any():  # a 3+ byte length (records of 8 KiB or more)
            length, q, malformed = _vvarint(d, p, 5)
            broken = malformed if malformed is not None else np.zeros(len(p), dtype=np.bool_)
        else:
            u = np.where(two, (b0 & 0x7F).astype(np.int64) | (b1.astype(np.int64) << 7), b0)
            q = p + 1 + two
            length = (u >> 1) ^ -(u & 1)
            broken = None
        e = q + length
        too_short = (length < _MIN_RECORD_BODY) | (e > data_end[active])
        broken = too_short if broken is None else broken | too_short
        if broken.any():
            bad[active[broken]] = True
            keep = ~broken
            active, q, e = active[keep], q[keep], e[keep]
        out = first[active] + k
        S[out] = q
        E[out] = e
        pos[active] = e
        k += 1
        active = active[counts[active] > k]
    bad |= pos != data_end
    if bad.any():
        return _EMPTY, _EMPTY, int(np.flatnonzero(bad)[0])
    return S, E, None


def _varint_multi(data: bytes, pos: int) -> tuple[int, int]:
    """A record length varint of 2+ bytes; 2-byte ones (records of 64 to 8191 bytes) inline."""
    b1 = data[pos + 1]
    if b1 < 0x80:
        u = (data[pos] & 0x7F) | (b1 << 7)
        return (u >> 1) ^ -(u & 1), pos + 2
    return _varint_py(data, pos)
