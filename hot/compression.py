"""Record-batch payload codecs (attributes bits 0-2). Pure, no I/O.

In a v2 batch everything after the 61-byte header (the concatenated records) is
compressed as one block. Wire formats accepted, as Kafka clients write them::

    GZIP    RFC 1952 gzip; concatenated members are accepted.
    SNAPPY  either one raw snappy block (librdkafka, and what we write) or the
            xerial / snappy-java stream that Java and kafka-python write:

                offset  size  field
                0       8     magic  b"\\x82SNAPPY\\x00"
                8       4     version int32  (ignored: some producers write it little-endian)
                12      4     compat  int32  (ignored, likewise)
                16      ...   repeated [int32 BE block length][raw snappy block]

    LZ4     the standard LZ4 frame format (KIP-57); we write independent blocks,
            no content size and no content checksum, which every Kafka reader accepts.
    ZSTD    zstd frames; the content size may be absent from the frame header
            (Java's streaming writer omits it), concatenated frames are accepted.

Every decoder is bounded by ``max_size`` decompressed bytes so that a small
malicious batch cannot inflate to gigabytes (decompression bomb).
"""

from __future__ import annotations

import struct
import threading
import zlib
from typing import Final

import cramjam
import lz4.frame
import zstandard

from hot.batch import Compression
from hot.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError

DEFAULT_MAX_SIZE: Final = 64 * 1024 * 1024

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")
_XERIAL_BLOCK_LEN: Final = struct.Struct(">i")

_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS  # gzip container only, as Kafka's GZIPInputStream
_GZIP_LEVEL: Final = 6  # Kafka's default (java.util.zip.Deflater default)
_ZSTD_LEVEL: Final = 3  # Kafka's default (KIP-390)
# A 4-byte zstd RLE block can expand to 128 KiB: feeding budget/32768 input bytes at a
# time keeps the worst-case output of one step within the remaining budget.
_ZSTD_MAX_RATIO: Final = 32768
_ZSTD_MIN_STEP: Final = 64
_ZSTD_MAX_STEP: Final = 64 * 1024
# Output buffer of a one-shot decode of a frame without a content size (Java producers):
# this many times the input, at least _ZSTD_ONE_SHOT_MIN; a larger output is decoded again.
_ZSTD_ONE_SHOT_RATIO: Final = 16
_ZSTD_ONE_SHOT_MIN: Final = 256 * 1024

Buffer = bytes | bytearray | memoryview


def codec_of(codec: Compression | int) -> Compression:
    """The Compression for a raw attributes codec id; ids 5-7 are UnsupportedCompressionError."""
    c = _BY_ID.get(codec)  # a dict, not Compression(codec): the enum's lookup costs ~1.5 µs a batch
    if c is None:
        raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
    return c


_BY_ID: Final[dict[int, Compression]] = {int(c): c for c in Compression}


def compress(codec: Compression | int, data: Buffer, *, level: int | None = None) -> bytes:
    """Compress a records payload with ``codec`` in the format Kafka expects."""
    c = codec_of(codec)
    if c is Compression.NONE:
        return bytes(data)
    if c is Compression.GZIP:
        z = zlib.compressobj(_GZIP_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
        return z.compress(data) + z.flush()
    if c is Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(bytes(data)))
    if c is Compression.LZ4:
        return bytes(
            lz4.frame.compress(
                data,
                compression_level=0 if level is None else level,
                block_linked=False,  # Kafka's Java LZ4 reader rejects dependent blocks
                content_checksum=False,
                store_size=False,
            )
        )
    zc = zstandard.ZstdCompressor(level=_ZSTD_LEVEL if level is None else level)
    return bytes(zc.compress(data))


def decompress(codec: Compression | int, data: Buffer, *, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Decompress a records payload; more than ``max_size`` output bytes is RecordTooLargeError.

    Corrupt or truncated input is CorruptRecordError, unknown codec ids are
    UnsupportedCompressionError.
    """
    c = codec_of(codec)
    if c is Compression.NONE:
        if len(data) > max_size:
            raise _too_large("uncompressed", max_size)
        return bytes(data)
    if len(data) == 0:
        raise CorruptRecordError(f"empty {c.name} payload")
    if c is Compression.GZIP:
        return _gunzip(data, max_size)
    if c is Compression.SNAPPY:
        return _unsnappy(data, max_size)
    if c is Compression.LZ4:
        return _unlz4(data, max_size)
    return _unzstd(data, max_size)


def _too_large(name: str, max_size: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"{name} payload decompresses to more than {max_size} bytes")


def _gunzip(data: Buffer, max_size: int) -> bytes:
    out: list[bytes] = []
    produced = 0
    rest: Buffer = data
    try:
        while True:
            d = zlib.decompressobj(_GZIP_WBITS)
            chunk = d.decompress(rest, max_size - produced + 1)
            produced += len(chunk)
            if produced > max_size:
                raise _too_large("gzip", max_size)
            out.append(chunk)
            if not d.eof:
                # Either max_length stopped it (then output > budget, handled above)
                # or the input ended mid-stream.
                raise CorruptRecordError("truncated gzip payload")
            rest = d.unused_data
            if not rest:
                break
    except zlib.error as e:
        raise CorruptRecordError(f"corrupt gzip payload: {e}") from None
    return b"".join(out)


def _unsnappy(data: Buffer, max_size: int) -> bytes:
    raw = bytes(data)
    if not raw.startswith(_XERIAL_MAGIC):
        return _snappy_block(raw, max_size)
    if len(raw) < _XERIAL_HEADER.size:
        raise CorruptRecordError(f"truncated xerial snappy header: {len(raw)} bytes")
    out: list[bytes] = []
    produced = 0
    pos = _XERIAL_HEADER.size
    end = len(raw)
    while pos < end:
        if end - pos < _XERIAL_BLOCK_LEN.size:
            raise CorruptRecordError(f"truncated xerial snappy block length at byte {pos}")
        (n,) = _XERIAL_BLOCK_LEN.unpack_from(raw, pos)
        pos += _XERIAL_BLOCK_LEN.size
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block of {n} bytes at byte {pos} exceeds the payload")
        block = _snappy_block(raw[pos : pos + n], max_size - produced)
        produced += len(block)
        out.append(block)
        pos += n
    return b"".join(out)


def _snappy_block(raw: bytes, max_size: int) -> bytes:
    try:
        n = cramjam.snappy.decompress_raw_len(raw)
        if n > max_size:
            raise _too_large("snappy", max_size)
        return bytes(cramjam.snappy.decompress_raw(raw))
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"corrupt snappy payload: {e}") from None


_LZ4_MAX_RATIO: Final = 255


def _unlz4(data: Buffer, max_size: int) -> bytes:
    out: list[bytes] = []
    produced = 0
    rest = bytes(data)
    try:
        while rest:
            d = lz4.frame.LZ4FrameDecompressor()
            # LZ4 expands at most 255:1, so this bound is never hit by valid data; passing
            # the full max_size instead makes lz4 allocate that much per call (~10x slower).
            limit = min(max_size - produced + 1, len(rest) * _LZ4_MAX_RATIO + 64)
            chunk = d.decompress(rest, max_length=limit)
            produced += len(chunk)
            if produced > max_size:
                raise _too_large("lz4", max_size)
            out.append(chunk)
            if not d.eof:
                raise CorruptRecordError("truncated lz4 frame")
            rest = d.unused_data or b""
    except (RuntimeError, ValueError) as e:  # lz4.frame reports LZ4F errors as RuntimeError
        raise CorruptRecordError(f"corrupt lz4 payload: {e}") from None
    return b"".join(out)


def _unzstd(data: Buffer, max_size: int) -> bytes:
    # One-shot decoding is 5x faster than the bounded streaming below; it is tried only
    # where its output is bounded too, and anything it refuses (several frames, damage,
    # a larger output) is decoded again by the streaming path, whose errors are the rule.
    fast = _unzstd_one_shot(data, max_size)
    return fast if fast is not None else _unzstd_stepped(data, max_size)


_zstd_local = threading.local()  # a ZstdDecompressor must not be used by two threads at once


def _zstd_dctx() -> zstandard.ZstdDecompressor:
    dctx: zstandard.ZstdDecompressor | None = getattr(_zstd_local, "dctx", None)
    if dctx is None:
        dctx = _zstd_local.dctx = zstandard.ZstdDecompressor()
    return dctx


def _unzstd_one_shot(data: Buffer, max_size: int) -> bytes | None:
    """One whole frame in one call, or None. With a content size in the frame header, libzstd
    checks the output against it; without one, the output buffer is bounded by a guess
    (``_ZSTD_ONE_SHOT_RATIO``) and by ``max_size``."""
    try:
        size = zstandard.frame_content_size(data)
        if size > max_size:
            return None
        dctx = _zstd_dctx()
        if size >= 0:  # declared: decompress() ignores max_output_size, hence the check above
            return dctx.decompress(data, allow_extra_data=False)
        cap = min(max_size, max(_ZSTD_ONE_SHOT_MIN, len(data) * _ZSTD_ONE_SHOT_RATIO))
        return dctx.decompress(data, max_output_size=cap, allow_extra_data=False)
    except zstandard.ZstdError:
        return None


def _unzstd_stepped(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data)
    end = len(view)
    out: list[bytes] = []
    produced = 0
    pos = 0
    dctx = zstandard.ZstdDecompressor()
    try:
        while pos < end:
            d = dctx.decompressobj()
            while not d.eof:
                if pos >= end:
                    raise CorruptRecordError("truncated zstd frame")
                budget = max_size - produced
                step = min(_ZSTD_MAX_STEP, max(_ZSTD_MIN_STEP, budget // _ZSTD_MAX_RATIO))
                chunk = d.decompress(view[pos : pos + step])
                pos += step
                produced += len(chunk)
                if produced > max_size:
                    raise _too_large("zstd", max_size)
                out.append(chunk)
            # The frame ended inside the last step: give back what belongs to the next frame.
            pos = min(pos, end) - len(d.unused_data)
    except zstandard.ZstdError as e:
        raise CorruptRecordError(f"corrupt zstd payload: {e}") from None
    return b"".join(out)
