"""FrameDecoder: INT32 size-prefixed stream splitting, fed in any chunking."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire import EncodeError, FrameDecoder, ProtocolError, encode_frame, frame_bytes

SETTINGS = settings(derandomize=True, database=None, deadline=None, max_examples=100)


def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(frame_bytes(p) for p in payloads)


def _drain(dec: FrameDecoder) -> list[bytes]:
    out = []
    while (frame := dec.next_frame()) is not None:
        out.append(bytes(frame))
    return out


def test_one_byte_at_a_time() -> None:
    payloads = [b"", b"a", b"hello world" * 20, bytes(range(256))]
    dec = FrameDecoder(max_frame_size=10_000)
    got: list[bytes] = []
    for i in range(len(data := _stream(payloads))):
        dec.feed(data[i : i + 1])
        got.extend(_drain(dec))
    assert got == payloads
    assert dec.at_boundary


@SETTINGS
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(0, 3000), max_size=20),
)
def test_random_chunkings(payloads: list[bytes], cuts: list[int]) -> None:
    data = _stream(payloads)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    dec = FrameDecoder(max_frame_size=300)
    got: list[bytes] = []
    for a, b in itertools.pairwise(points):
        dec.feed(memoryview(data)[a:b])
        got.extend(_drain(dec))
    assert got == payloads
    assert dec.buffered == 0


def test_partial_frame_is_not_returned() -> None:
    dec = FrameDecoder(100)
    dec.feed(struct.pack(">i", 5) + b"abc")
    assert dec.next_frame() is None
    assert not dec.at_boundary and dec.buffered == 7
    dec.feed(b"de")
    assert dec.next_frame() == b"abcde"
    assert dec.next_frame() is None


def test_absurd_size_is_rejected_as_soon_as_the_prefix_is_complete() -> None:
    dec = FrameDecoder(max_frame_size=1024)
    dec.feed(b"\x7f\xff")
    assert dec.next_frame() is None  # prefix not complete yet
    with pytest.raises(ProtocolError, match="exceeds the maximum of 1024"):
        dec.feed(b"\xff\xff")  # no body bytes needed to reject it
    # the stream is out of sync: the decoder stays failed
    with pytest.raises(ProtocolError):
        dec.next_frame()
    with pytest.raises(ProtocolError):
        dec.feed(b"more")


def test_size_just_at_the_limit_is_accepted() -> None:
    dec = FrameDecoder(max_frame_size=4)
    dec.feed(frame_bytes(b"abcd"))
    assert dec.next_frame() == b"abcd"
    with pytest.raises(ProtocolError, match="5 bytes exceeds"):
        dec.feed(struct.pack(">i", 5))


@pytest.mark.parametrize("size", [-1, -2, -(2**31)])
def test_negative_size_is_rejected(size: int) -> None:
    dec = FrameDecoder(max_frame_size=100)
    with pytest.raises(ProtocolError, match=f"invalid frame size {size}"):
        dec.feed(struct.pack(">i", size))


def test_bad_prefix_after_a_good_frame_does_not_lose_the_good_frame() -> None:
    dec = FrameDecoder(max_frame_size=100)
    dec.feed(frame_bytes(b"ok") + struct.pack(">i", -5))
    assert dec.next_frame() == b"ok"
    with pytest.raises(ProtocolError):
        dec.next_frame()


def test_many_small_frames_compact_the_buffer() -> None:
    dec = FrameDecoder(max_frame_size=100)
    payloads = [bytes([i % 256]) * 50 for i in range(5000)]
    data = _stream(payloads)
    got: list[bytes] = []
    for i in range(0, len(data), 4096):
        dec.feed(data[i : i + 4096])
        got.extend(_drain(dec))
    assert got == payloads
    assert dec.at_boundary


class _Region:
    def __init__(self, n: int) -> None:
        self.length = n


def test_encode_frame_sums_bytes_and_regions() -> None:
    r1, r2 = _Region(10), _Region(0)
    framed = encode_frame([b"head", r1, b"mid", r2])
    assert framed[0] == struct.pack(">i", 4 + 10 + 3 + 0) + b"head"
    assert framed[1:] == [r1, b"mid", r2]
    assert encode_frame([r1]) == [struct.pack(">i", 10), r1]
    assert encode_frame([]) == [struct.pack(">i", 0)]


def test_encode_frame_rejects_bad_parts() -> None:
    with pytest.raises(EncodeError):
        encode_frame([object()])
    with pytest.raises(EncodeError, match="int32 size limit"):
        encode_frame([_Region(2**31)])
