"""CRC-32C of concatenations from the CRCs of their parts (``tiering.checksum``)."""

from __future__ import annotations

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from tiering.checksum import crc32c_combine, crc32c_concat, crc32c_pieces


def test_golden_check_value() -> None:
    # 0xE3069283 is CRC-32C's published check value (the CRC of the ASCII digits 1-9)
    assert crc32c(b"123456789") == 0xE3069283
    for cut in range(10):
        a, b = b"123456789"[:cut], b"123456789"[cut:]
        assert crc32c_combine(crc32c(a), crc32c(b), len(b)) == 0xE3069283


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.binary(max_size=2000))
def test_combine_equals_crc_of_the_concatenation(a: bytes, b: bytes) -> None:
    assert crc32c_combine(crc32c(a), crc32c(b), len(b)) == crc32c(a + b)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=0, max_size=5000), st.integers(min_value=1, max_value=700))
def test_pieces_and_concat(data: bytes, piece: int) -> None:
    pieces = crc32c_pieces(memoryview(data), piece)
    slices = [data[i : i + piece] for i in range(0, len(data), piece)]
    assert pieces == [(crc32c(s), len(s)) for s in slices]
    assert crc32c_concat(pieces) == crc32c(data)


def test_large_lengths() -> None:
    # zero runs: crc(zeros(n)) is known only by computing it; check a few sizes a cache uses
    for n in (4 << 20, (4 << 20) + 1, 8 << 20):
        zeros = bytes(n)
        assert crc32c_combine(crc32c(b"head"), crc32c(zeros), n) == crc32c(b"head" + zeros)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="length"):
        crc32c_combine(0, 0, -1)
    with pytest.raises(ValueError, match="piece size"):
        crc32c_pieces(memoryview(b"x"), 0)
