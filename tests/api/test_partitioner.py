"""murmur2 and key placement agree with the Java client and kafka-python."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from api.partitioner import murmur2, partition_for_key, to_positive

# From Kafka's UtilsTest.testMurmur2 (Java, signed int results).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), sorted(JAVA_VECTORS.items()))
def test_java_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_empty_key() -> None:
    assert murmur2(b"") & 0xFFFFFFFF == kafka_python_murmur2(b"")


def test_random_keys_match_kafka_python() -> None:
    rng = random.Random(20240601)
    for _ in range(2000):
        key = rng.randbytes(rng.randrange(0, 64))
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key), key
        for n in (1, 3, 7, 12, 100):
            expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % n
            assert partition_for_key(key, n) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_signed_32_bit_range(key: bytes) -> None:
    h = murmur2(key)
    assert -(2**31) <= h < 2**31
    assert h & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_accepts_buffer_types() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == JAVA_VECTORS[b"foobar"]


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(5) == 5


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)
