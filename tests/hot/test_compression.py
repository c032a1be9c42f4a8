"""hot.compression: every codec round-trips, reads what other producers write, and fails precisely."""

from __future__ import annotations

import gzip
import struct

import aiokafka.codec
import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from hot.batch import Compression
from hot.compression import DEFAULT_MAX_SIZE, compress, decompress
from hot.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    StrataError,
    UnsupportedCompressionError,
)

CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c is not Compression.NONE]
SAMPLE = b"".join(b"record %d: the quick brown fox " % i for i in range(2000))
XERIAL_MAGIC = b"\x82SNAPPY\x00"


def xerial(data: bytes, block: int, *, little_endian_header: bool = False) -> bytes:
    """A snappy-java style stream built by hand from raw snappy blocks."""
    fmt = "<ii" if little_endian_header else ">ii"
    out = bytearray(XERIAL_MAGIC + struct.pack(fmt, 1, 1))
    for i in range(0, len(data), block):
        raw = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += struct.pack(">i", len(raw)) + raw
    return bytes(out)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", SAMPLE, bytes(range(256)) * 40])
def test_round_trip(codec: Compression, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data
    assert decompress(int(codec), bytearray(packed)) == data


@settings(derandomize=True, max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=4000))
def test_round_trip_random(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_levels(codec: Compression) -> None:
    for level in (1, 9):
        assert decompress(codec, compress(codec, SAMPLE, level=level)) == SAMPLE


def test_compressed_is_smaller() -> None:
    for codec in COMPRESSED:
        assert len(compress(codec, SAMPLE)) < len(SAMPLE) // 2, codec


# --- formats written by other implementations ---------------------------------------------


def test_gzip_foreign_and_multi_member() -> None:
    assert decompress(Compression.GZIP, gzip.compress(SAMPLE, compresslevel=9)) == SAMPLE
    assert decompress(Compression.GZIP, aiokafka.codec.gzip_encode(SAMPLE)) == SAMPLE
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Compression.GZIP, two) == b"first second"


def test_snappy_raw_and_xerial() -> None:
    # We write raw snappy (as librdkafka does).
    assert compress(Compression.SNAPPY, SAMPLE) == bytes(cramjam.snappy.compress_raw(SAMPLE))
    for block in (1, 1000, 32 * 1024, 10**6):
        assert decompress(Compression.SNAPPY, xerial(SAMPLE, block)) == SAMPLE
    # Some producers write version/compat little-endian; they carry no information.
    assert decompress(Compression.SNAPPY, xerial(SAMPLE, 4096, little_endian_header=True)) == SAMPLE
    assert decompress(Compression.SNAPPY, xerial(b"", 10)) == b""
    assert (
        decompress(Compression.SNAPPY, aiokafka.codec.snappy_encode(SAMPLE, xerial_compatible=True)) == SAMPLE
    )
    assert (
        decompress(Compression.SNAPPY, aiokafka.codec.snappy_encode(SAMPLE, xerial_compatible=False))
        == SAMPLE
    )


def test_lz4_frame_variants() -> None:
    for kwargs in (
        {},
        {"content_checksum": True},
        {"store_size": True, "block_linked": False},
        {"block_checksum": True, "block_size": lz4.frame.BLOCKSIZE_MAX4MB},
    ):
        assert decompress(Compression.LZ4, lz4.frame.compress(SAMPLE, **kwargs)) == SAMPLE
    assert decompress(Compression.LZ4, aiokafka.codec.lz4_encode(SAMPLE)) == SAMPLE
    assert decompress(Compression.LZ4, bytes(cramjam.lz4.compress(SAMPLE))) == SAMPLE
    # Our frames use independent blocks and no content size (flags byte bit 5 set, bit 3 clear).
    flags = compress(Compression.LZ4, SAMPLE)[4]
    assert flags & 0x20 and not flags & 0x08


def test_zstd_without_content_size_and_multi_frame() -> None:
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(SAMPLE)
    assert zstandard.frame_content_size(no_size) == -1
    assert decompress(Compression.ZSTD, no_size) == SAMPLE
    # A streaming writer (what Java's ZstdOutputStream does) also omits the size.
    cobj = zstandard.ZstdCompressor().compressobj()
    streamed = cobj.compress(SAMPLE[:5000]) + cobj.compress(SAMPLE[5000:]) + cobj.flush()
    assert decompress(Compression.ZSTD, streamed) == SAMPLE
    two = compress(Compression.ZSTD, b"first ") + no_size
    assert decompress(Compression.ZSTD, two) == b"first " + SAMPLE
    assert decompress(Compression.ZSTD, aiokafka.codec.zstd_encode(SAMPLE)) == SAMPLE


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec(codec_id: int) -> None:
    with pytest.raises(UnsupportedCompressionError, match=f"codec id {codec_id}"):
        compress(codec_id, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec_id, b"x")


@pytest.mark.parametrize("codec", COMPRESSED)
def test_corrupt_inputs(codec: Compression) -> None:
    packed = compress(codec, SAMPLE)
    with pytest.raises(CorruptRecordError, match=codec.name.lower()):
        decompress(codec, b"\x00garbage that is not compressed data at all" * 3)
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"")
    with pytest.raises(CorruptRecordError):
        decompress(codec, packed[: len(packed) // 2])
    with pytest.raises(CorruptRecordError):
        decompress(codec, packed + b"\x01trailing")


@pytest.mark.parametrize("codec", COMPRESSED)
def test_every_truncation_is_detected(codec: Compression) -> None:
    packed = compress(codec, SAMPLE[:3000])
    for cut in range(len(packed)):
        try:
            out = decompress(codec, packed[:cut])
        except CorruptRecordError:
            continue
        pytest.fail(f"{codec.name}: truncation to {cut} bytes accepted ({len(out)} bytes out)")


def test_xerial_framing_errors() -> None:
    good = xerial(SAMPLE, 4096)
    with pytest.raises(CorruptRecordError, match="xerial"):
        decompress(Compression.SNAPPY, XERIAL_MAGIC + b"\x00\x00")
    with pytest.raises(CorruptRecordError, match="block length"):
        decompress(Compression.SNAPPY, good + b"\x00\x00")
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decompress(Compression.SNAPPY, good + struct.pack(">i", 100) + b"abc")
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decompress(Compression.SNAPPY, good + struct.pack(">i", -1))


@settings(derandomize=True, max_examples=200, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=300))
def test_fuzz_only_strata_errors(codec: Compression, data: bytes) -> None:
    try:
        decompress(codec, data, max_size=1 << 20)
    except StrataError:
        pass


@settings(derandomize=True, max_examples=150, deadline=None)
@given(codec=st.sampled_from(COMPRESSED), data=st.data())
def test_fuzz_mutated_streams(codec: Compression, data: st.DataObject) -> None:
    packed = bytearray(compress(codec, SAMPLE[:2000]))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(packed) - 1))
        packed[i] = data.draw(st.integers(0, 255))
    try:
        decompress(codec, bytes(packed), max_size=1 << 20)
    except StrataError:
        pass


# --- decompression bombs -------------------------------------------------------------------


BOMB = bytes(8 * 1024 * 1024)


@pytest.mark.parametrize("codec", CODECS)
def test_bomb_limit(codec: Compression) -> None:
    packed = compress(codec, BOMB)
    with pytest.raises(RecordTooLargeError, match="more than 1048576 bytes"):
        decompress(codec, packed, max_size=1 << 20)
    # The limit is inclusive.
    assert decompress(codec, packed, max_size=len(BOMB)) == BOMB
    assert len(BOMB) <= DEFAULT_MAX_SIZE


def test_bomb_limit_foreign_framings() -> None:
    limit = 1 << 20
    cases = [
        (Compression.ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(BOMB)),
        (Compression.ZSTD, compress(Compression.ZSTD, BOMB[: limit // 2]) * 3),
        (Compression.SNAPPY, xerial(BOMB, 64 * 1024)),
        (Compression.LZ4, lz4.frame.compress(BOMB, store_size=True)),
        (Compression.GZIP, gzip.compress(BOMB[: limit // 2]) * 3),
    ]
    for codec, packed in cases:
        with pytest.raises(RecordTooLargeError):
            decompress(codec, packed, max_size=limit)
