"""Kafka's default key partitioner: murmur2 exactly as the Java client computes it.

The REST API places keyed records with this function so that records produced over
HTTP land in the same partition as the same key produced by the Java client,
kafka-python, or librdkafka with ``partitioner=murmur2_random``. Pure, no I/O.
"""

from __future__ import annotations

from typing import Final

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_R: Final = 24
_MASK32: Final = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 of ``data`` as Java's ``Utils.murmur2``: a signed 32-bit int.

    Java does the arithmetic in wrapping 32-bit ints with logical shifts (``>>>``);
    here it is done unsigned with explicit masks and the sign applied at the end.
    """
    buf = bytes(data)
    length = len(buf)
    h = (_SEED ^ length) & _MASK32
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(buf[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length & 3
    if tail >= 3:
        h ^= buf[whole + 2] << 16
    if tail >= 2:
        h ^= buf[whole + 1] << 8
    if tail >= 1:
        h ^= buf[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not ``abs``, which overflows on MIN_VALUE)."""
    return value & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition the Java ``DefaultPartitioner`` / ``BuiltInPartitioner`` picks for a non-null key."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
