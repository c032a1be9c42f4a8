"""CRC-32C of concatenations from the CRCs of their parts (pure; no I/O).

``crc32c_combine(crc(A), crc(B), len(B)) == crc(A + B)``. Why: a remote segment fetched
whole is checked against the manifest's CRC-32C of the whole object, and each of its
chunks is written to the cache with a CRC-32C of its own; computing the chunks' CRCs and
combining them gives both from one pass over the bytes instead of two (a pass over 8 MiB
is about 0.5 ms even in hardware, and a cold read's CPU is what limits it).

The arithmetic is over GF(2) polynomials modulo the Castagnoli polynomial, in the
reflected bit order the CRC uses: appending ``n`` zero bytes to a message multiplies its
CRC register by x^(8n) mod P, so ``crc(A + B) = crc(A) * x^(8 len(B)) + crc(B)`` (the
pre- and post-conditioning of the register cancel out in that sum). ``x^(8n)`` is built
from a table of x^(2^k) by square-and-multiply, and memoised per length: a cache combines
chunks of one fixed size.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Final

from crc32c import crc32c

_POLY: Final = 0x82F63B78  # Castagnoli, reflected
_ONE: Final = 1 << 31  # the polynomial 1 (x^0) in reflected order


def _multiply(a: int, b: int) -> int:
    """a * b modulo the polynomial (both reflected)."""
    product = 0
    bit = _ONE
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return product


def _x_powers() -> tuple[int, ...]:
    """x^(2^k) mod P for k = 0..66: enough for any length below 2^63 bytes."""
    table = [_ONE >> 1]  # x^1
    for _ in range(66):
        table.append(_multiply(table[-1], table[-1]))
    return tuple(table)


_X_POW_2K: Final = _x_powers()


@functools.lru_cache(maxsize=64)
def _x8n(n: int) -> int:
    """x^(8n) mod P: the multiplier that appends ``n`` zero bytes."""
    result = _ONE
    k = 3  # 8n = n * 2^3
    while n:
        if n & 1:
            result = _multiply(_X_POW_2K[k], result)
        n >>= 1
        k += 1
    return result


def crc32c_combine(crc_a: int, crc_b: int, len_b: int) -> int:
    """CRC-32C of A + B from ``crc32c(A)``, ``crc32c(B)`` and ``len(B)``."""
    if not 0 <= len_b < 1 << 63:
        raise ValueError(f"length must be in [0, 2^63), got {len_b}")
    if len_b == 0:
        return crc_a
    return _multiply(_x8n(len_b), crc_a) ^ crc_b


def crc32c_concat(parts: Iterable[tuple[int, int]]) -> int:
    """CRC-32C of consecutive parts given as (crc, length) pairs."""
    crc = 0
    for part_crc, length in parts:
        crc = crc32c_combine(crc, part_crc, length)
    return crc


def crc32c_pieces(data: memoryview, piece_bytes: int) -> list[tuple[int, int]]:
    """(CRC-32C, length) of each ``piece_bytes`` slice of ``data`` (the last may be
    shorter): what ``crc32c_concat`` takes."""
    if piece_bytes <= 0:
        raise ValueError(f"piece size must be positive, got {piece_bytes}")
    pieces = (data[lo : lo + piece_bytes] for lo in range(0, len(data), piece_bytes))
    return [(int(crc32c(p)), len(p)) for p in pieces]


__all__ = ["crc32c_combine", "crc32c_concat", "crc32c_pieces"]
