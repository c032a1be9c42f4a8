"""Kafka stream framing: every request and response is ``INT32 size`` followed by ``size`` bytes.

Sans-I/O in the h11 style: the connection ``feed``s whatever bytes arrived and pulls
complete frames with ``next_frame``. A size prefix that is negative or above the configured
maximum is rejected as soon as its 4 bytes are seen, before any of the body is waited for,
so a hostile or confused peer cannot make us buffer gigabytes (Kafka's
``socket.request.max.bytes`` check). A size of 0 is a valid (empty) frame at this layer, as
in Kafka; it fails later when the header cannot be read. After an error the decoder stays
failed: the stream is out of sync and the connection must be closed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from kwire.errors import EncodeError, ProtocolError
from kwire.primitives import MAX_INT32, Buffer
from kwire.schema import records_length

_SIZE: Final = struct.Struct(">i")
SIZE_PREFIX: Final = _SIZE.size

# Compact the buffer once the consumed prefix is at least this large (and half the buffer),
# so a stream of small frames costs amortised O(1) per byte.
_COMPACT_AT: Final = 64 * 1024
# Frames at least this large are copied out of a bytearray through a memoryview (one copy);
# smaller ones by slicing, which is cheaper than making the view.
_VIEW_FROM: Final = 16 * 1024


class FrameDecoder:
    """Splits a byte stream into frames (the bytes after each size prefix)."""

    __slots__ = ("_buf", "_error", "_max", "_need", "_start")

    def __init__(self, max_frame_size: int) -> None:
        if max_frame_size < 0:
            raise ValueError("max_frame_size must be >= 0")
        self._max = max_frame_size
        # The received bytes not yet returned as frames, from ``_start`` on: the last chunk
        # fed as it came (bytes) while whole frames are cut from it, a bytearray while a
        # frame spans chunks.
        self._buf: bytes | bytearray = b""
        self._start = 0  # first unconsumed byte of _buf
        self._need: int | None = None  # body size of the frame being read, once its prefix is seen
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames (prefix included)."""
        return len(self._buf) - self._start

    @property
    def at_boundary(self) -> bool:
        """True when no partial frame is buffered (a clean place for the peer to close)."""
        return self.buffered == 0

    def feed(self, data: Buffer) -> None:
        """Add received bytes. Raises ProtocolError as soon as a bad size prefix is complete."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        if self._start == len(buf):
            # Nothing buffered (the usual case): keep the received bytes as they are and
            # slice frames out of them, one copy per frame instead of two.
            self._buf = data if type(data) is bytes else bytes(data)
            self._start = 0
        elif type(buf) is bytes:  # a partial frame left from the last chunk: now accumulate
            self._buf = bytearray(memoryview(buf)[self._start :])
            self._buf += data
            self._start = 0
        else:
            buf += data
        if self._need is None:
            self._read_size()

    def next_frame(self) -> bytes | None:
        """The next complete frame body, or None until more bytes are fed."""
        if self._error is not None:
            raise self._error
        if self._need is None and not self._read_size():
            return None
        need = self._need
        assert need is not None
        start = self._start + SIZE_PREFIX
        if len(self._buf) - start < need:
            return None
        buf = self._buf
        if type(buf) is bytes or need < _VIEW_FROM:
            frame = bytes(buf[start : start + need])
        else:  # a large frame from a bytearray: copied once, not sliced then copied
            with memoryview(buf) as view:
                frame = bytes(view[start : start + need])
        self._start = start + need
        self._need = None
        if self._start == len(buf):
            self._buf = b""
            self._start = 0
        elif type(buf) is bytearray and self._start >= _COMPACT_AT and self._start * 2 >= len(buf):
            del buf[: self._start]
            self._start = 0
        return frame  # a following bad prefix is reported by the next call, not instead of this frame

    def _read_size(self) -> bool:
        if len(self._buf) - self._start < SIZE_PREFIX:
            return False
        (size,) = _SIZE.unpack_from(self._buf, self._start)
        if size < 0:
            self._error = ProtocolError(f"invalid frame size {size}")
        elif size > self._max:
            self._error = ProtocolError(f"frame of {size} bytes exceeds the maximum of {self._max}")
        if self._error is not None:
            raise self._error
        self._need = size
        return True


def encode_frame(parts: Iterable[bytes | object]) -> list[bytes | object]:
    """Prefix ``parts`` (bytes and objects with an int ``length``) with their total INT32 size.

    The size is merged into a leading bytes part so consecutive bytes stay one part.
    """
    items = list(parts)
    total = 0
    for p in items:
        total += records_length(p)
    if total > MAX_INT32:
        raise EncodeError(f"frame of {total} bytes exceeds the int32 size limit")
    prefix = _SIZE.pack(total)
    if items and isinstance(items[0], bytes | bytearray | memoryview):
        return [prefix + bytes(items[0]), *items[1:]]
    return [prefix, *items]


def frame_bytes(payload: Buffer) -> bytes:
    """``payload`` with its INT32 size prefix, as one bytes object (client side, tests)."""
    n = payload.nbytes if isinstance(payload, memoryview) else len(payload)
    if n > MAX_INT32:
        raise EncodeError(f"frame of {n} bytes exceeds the int32 size limit")
    return _SIZE.pack(n) + bytes(payload)
