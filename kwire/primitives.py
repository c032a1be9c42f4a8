"""Kafka protocol primitive types: a bounds-checked Reader and an accumulating Writer. Pure, no I/O.

Wire layouts (protocol guide, "Protocol Primitive Types"; all big-endian)::

    INT8 / INT16 / INT32 / INT64     1 / 2 / 4 / 8 bytes, two's complement
    UINT16 / UINT32                  2 / 4 bytes unsigned
    FLOAT64                          8 bytes IEEE 754
    BOOLEAN                          1 byte; 0 = false, anything else = true
    UUID                             16 bytes
    UNSIGNED_VARINT                  7 bits per byte, low group first, high bit = "more"; at most 5 bytes
    VARINT / VARLONG                 zigzag-encoded int32 / int64 as unsigned varint (5 / 10 bytes max)
    STRING                           INT16 length N >= 0, N bytes UTF-8
    NULLABLE_STRING                  INT16 length, -1 = null
    COMPACT_STRING                   UNSIGNED_VARINT N+1 (0 illegal), N bytes UTF-8
    COMPACT_NULLABLE_STRING          UNSIGNED_VARINT N+1, 0 = null
    BYTES / NULLABLE_BYTES           INT32 length (-1 = null when nullable), N bytes
    COMPACT_BYTES / COMPACT_NULLABLE_BYTES   UNSIGNED_VARINT N+1 (0 = null when nullable)
    ARRAY                            INT32 count (-1 = null when nullable), then elements
    COMPACT_ARRAY                    UNSIGNED_VARINT count+1 (0 = null when nullable), then elements
    TAGGED_FIELDS                    UNSIGNED_VARINT count, then per field:
                                     UNSIGNED_VARINT tag, UNSIGNED_VARINT size, size bytes

Every read is checked against the end of the frame (or of the enclosing tagged field), and
every length against the bytes that remain, so malformed input raises ``ProtocolError`` with
the offset and never an IndexError/struct.error, and never makes us allocate what the frame
does not contain. Byte strings come back as zero-copy ``memoryview`` slices of the frame.
Strings must be valid UTF-8: where Kafka's Java decoder would substitute U+FFFD we reject,
so a topic or group name can never silently change on the way in.
"""

from __future__ import annotations

import builtins
import struct
import uuid
from typing import Final

from kwire.errors import EncodeError, ProtocolError

I8: Final = struct.Struct(">b")
I16: Final = struct.Struct(">h")
I32: Final = struct.Struct(">i")
I64: Final = struct.Struct(">q")
U16: Final = struct.Struct(">H")
U32: Final = struct.Struct(">I")
F64: Final = struct.Struct(">d")
UUID_SIZE: Final = 16
ZERO_UUID: Final = uuid.UUID(int=0)

MAX_STRING_LENGTH: Final = 0x7FFF
MAX_INT32: Final = 0x7FFFFFFF
_MAX_UVARINT: Final = 0xFFFFFFFF
_EMPTY_TAGS: Final[dict[int, tuple[int, int]]] = {}

Buffer = bytes | bytearray | memoryview


class Reader:
    """Reads primitives from ``buf[pos:end]``; ``pos`` is the next byte to read.

    Offsets in error messages are absolute within the buffer the reader was created on
    (the frame), which is what one needs to find the bad byte in a hex dump.
    """

    __slots__ = ("buf", "end", "pos")

    def __init__(self, data: Buffer, pos: int = 0, end: int | None = None) -> None:
        mv = data if isinstance(data, memoryview) else memoryview(data)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        self.buf: memoryview = mv
        self.pos = pos
        self.end = len(mv) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def short(self, need: int, what: str) -> ProtocolError:
        return ProtocolError(
            f"truncated {what}: need {need} bytes at offset {self.pos}, only {self.end - self.pos} left"
        )

    def sub(self, size: int) -> Reader:
        """A reader over the next ``size`` bytes (which this reader skips)."""
        if size > self.end - self.pos:
            raise self.short(size, "field")
        child = Reader(self.buf, self.pos, self.pos + size)
        self.pos += size
        return child

    # --- fixed width -----------------------------------------------------------------

    def int8(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise self.short(1, "int8")
        self.pos = pos + 1
        v = self.buf[pos]
        return v - 256 if v > 127 else v

    def boolean(self) -> bool:
        pos = self.pos
        if pos >= self.end:
            raise self.short(1, "boolean")
        self.pos = pos + 1
        return self.buf[pos] != 0

    def int16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise self.short(2, "int16")
        self.pos = pos + 2
        v: int = I16.unpack_from(self.buf, pos)[0]
        return v

    def uint16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise self.short(2, "uint16")
        self.pos = pos + 2
        v: int = U16.unpack_from(self.buf, pos)[0]
        return v

    def int32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise self.short(4, "int32")
        self.pos = pos + 4
        v: int = I32.unpack_from(self.buf, pos)[0]
        return v

    def uint32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise self.short(4, "uint32")
        self.pos = pos + 4
        v: int = U32.unpack_from(self.buf, pos)[0]
        return v

    def int64(self) -> int:
        pos = self.pos
        if pos + 8 > self.end:
            raise self.short(8, "int64")
        self.pos = pos + 8
        v: int = I64.unpack_from(self.buf, pos)[0]
        return v

    def float64(self) -> float:
        pos = self.pos
        if pos + 8 > self.end:
            raise self.short(8, "float64")
        self.pos = pos + 8
        v: float = F64.unpack_from(self.buf, pos)[0]
        return v

    def uuid(self) -> uuid.UUID:
        pos = self.pos
        if pos + UUID_SIZE > self.end:
            raise self.short(UUID_SIZE, "uuid")
        self.pos = pos + UUID_SIZE
        return uuid.UUID(bytes=bytes(self.buf[pos : pos + UUID_SIZE]))

    # --- varints ---------------------------------------------------------------------

    def uvarint(self) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        if pos < end and buf[pos] < 0x80:  # the common one-byte case
            self.pos = pos + 1
            return buf[pos]
        start = pos
        result = 0
        shift = 0
        while True:
            if pos >= end:
                raise ProtocolError(f"truncated unsigned varint at offset {start}")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 28:
                raise ProtocolError(f"unsigned varint at offset {start} is longer than 5 bytes")
        if result > _MAX_UVARINT:
            raise ProtocolError(f"unsigned varint at offset {start} does not fit in 32 bits")
        self.pos = pos
        return result

    def varint(self) -> int:
        """Zigzag-encoded int32."""
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        """Zigzag-encoded int64 (up to 10 bytes)."""
        buf, pos, end = self.buf, self.pos, self.end
        start = pos
        result = 0
        shift = 0
        while True:
            if pos >= end:
                raise ProtocolError(f"truncated varlong at offset {start}")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 63:
                raise ProtocolError(f"varlong at offset {start} is longer than 10 bytes")
        if result >= 1 << 64:
            raise ProtocolError(f"varlong at offset {start} does not fit in 64 bits")
        self.pos = pos
        return (result >> 1) ^ -(result & 1)

    # --- lengths ---------------------------------------------------------------------

    def _take(self, n: int, what: str) -> memoryview:
        pos = self.pos
        if n > self.end - pos:
            raise ProtocolError(
                f"{what} of length {n} at offset {pos} overruns the frame ({self.end - pos} bytes left)"
            )
        self.pos = pos + n
        return self.buf[pos : pos + n]

    def _utf8(self, n: int) -> str:
        start = self.pos
        raw = self._take(n, "string")
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"string at offset {start} is not valid UTF-8: {e.reason}") from None

    # --- strings ---------------------------------------------------------------------

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ProtocolError(f"non-nullable string has length {n} at offset {self.pos - 2}")
        return self._utf8(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n < 0:
            if n == -1:
                return None
            raise ProtocolError(f"string has invalid length {n} at offset {self.pos - 2}")
        return self._utf8(n)

    def compact_string(self) -> str:
        start = self.pos
        n = self.uvarint() - 1
        if n < 0:
            raise ProtocolError(f"non-nullable compact string is null at offset {start}")
        return self._utf8(n)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._utf8(n)

    # --- bytes (zero-copy slices) ------------------------------------------------------

    def bytes(self) -> memoryview:
        n = self.int32()
        if n < 0:
            raise ProtocolError(f"non-nullable bytes have length {n} at offset {self.pos - 4}")
        return self._take(n, "bytes")

    def nullable_bytes(self) -> memoryview | None:
        n = self.int32()
        if n < 0:
            if n == -1:
                return None
            raise ProtocolError(f"bytes have invalid length {n} at offset {self.pos - 4}")
        return self._take(n, "bytes")

    def compact_bytes(self) -> memoryview:
        start = self.pos
        n = self.uvarint() - 1
        if n < 0:
            raise ProtocolError(f"non-nullable compact bytes are null at offset {start}")
        return self._take(n, "bytes")

    def compact_nullable_bytes(self) -> memoryview | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._take(n, "bytes")

    # --- arrays: only the count; elements are the schema's business -----------------------

    def array_count(self, nullable: bool, min_element_size: int) -> int | None:
        """INT32 count; None for null. The count is checked against what can still fit."""
        start = self.pos
        n = self.int32()
        if n < 0:
            if n == -1:
                if nullable:
                    return None
                raise ProtocolError(f"non-nullable array is null at offset {start}")
            raise ProtocolError(f"array has invalid count {n} at offset {start}")
        self._check_count(n, min_element_size, start)
        return n

    def compact_array_count(self, nullable: bool, min_element_size: int) -> int | None:
        start = self.pos
        n = self.uvarint() - 1
        if n < 0:
            if nullable:
                return None
            raise ProtocolError(f"non-nullable compact array is null at offset {start}")
        self._check_count(n, min_element_size, start)
        return n

    def _check_count(self, n: int, min_element_size: int, start: int) -> None:
        # Every element takes at least one byte in all our schemas; refusing counts that
        # cannot fit stops a 4-byte frame from making us loop or allocate billions of times.
        if n * max(min_element_size, 1) > self.end - self.pos:
            raise ProtocolError(
                f"array count {n} at offset {start} cannot fit in the {self.end - self.pos} bytes left"
            )

    # --- tagged fields -------------------------------------------------------------------

    def tagged_fields(self) -> dict[int, tuple[int, int]]:
        """The tagged-field section as {tag: (start, end) offsets}; callers parse the tags they know."""
        start = self.pos
        n = self.uvarint()
        if n == 0:
            return _EMPTY_TAGS
        if 2 * n > self.end - self.pos:  # each tag needs >= 2 bytes (tag, size)
            raise ProtocolError(f"tagged field count {n} at offset {start} cannot fit in the frame")
        tags: dict[int, tuple[int, int]] = {}
        for _ in range(n):
            tag_at = self.pos
            tag = self.uvarint()
            size = self.uvarint()
            if tag in tags:
                raise ProtocolError(f"duplicate tag {tag} at offset {tag_at}")
            if size > self.end - self.pos:
                raise ProtocolError(
                    f"tagged field {tag} of {size} bytes at offset {tag_at} overruns the frame "
                    f"({self.end - self.pos} bytes left)"
                )
            tags[tag] = (self.pos, self.pos + size)
            self.pos += size
        return tags


class Writer:
    """Accumulates an encoding. ``parts`` holds finished bytes and pass-through objects
    (file regions); consecutive bytes are always merged into one part."""

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[bytes | object] = []

    def raw(self, data: Buffer) -> None:
        self.buf += data

    def region(self, obj: object) -> None:
        """Pass ``obj`` through as its own part (its bytes are sent by the caller)."""
        if self.buf:
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        self.parts.append(obj)

    def finish(self) -> list[bytes | object]:
        if self.buf or not self.parts:
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        return self.parts

    def getvalue(self) -> bytes:
        """All bytes; only valid when no region was written."""
        if self.parts:
            raise EncodeError("message contains pass-through regions and cannot be returned as bytes")
        return bytes(self.buf)

    # --- fixed width -----------------------------------------------------------------

    def int8(self, v: int) -> None:
        self.buf += I8.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def int16(self, v: int) -> None:
        self.buf += I16.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += U16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += I32.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += U32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += I64.pack(v)

    def float64(self, v: float) -> None:
        self.buf += F64.pack(v)

    def uuid(self, v: uuid.UUID) -> None:
        if not isinstance(v, uuid.UUID):
            raise EncodeError(f"expected uuid.UUID, got {type(v).__name__}")
        self.buf += v.bytes

    # --- varints ---------------------------------------------------------------------

    def uvarint(self, v: int) -> None:
        if v < 0 or v > _MAX_UVARINT:
            raise EncodeError(f"unsigned varint {v} out of range")
        if v < 0x80:
            self.buf.append(v)
            return
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.buf += out

    def varint(self, v: int) -> None:
        if not -(1 << 31) <= v < 1 << 31:
            raise EncodeError(f"varint {v} out of int32 range")
        self.uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        if not -(1 << 63) <= v < 1 << 63:
            raise EncodeError(f"varlong {v} out of int64 range")
        z = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
        out = bytearray()
        while z >= 0x80:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
        self.buf += out

    # --- strings ---------------------------------------------------------------------

    @staticmethod
    def _utf8(v: str) -> bytes:
        if not isinstance(v, str):
            raise EncodeError(f"expected str, got {type(v).__name__}")
        try:
            b = v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise EncodeError(f"string is not encodable as UTF-8: {e.reason}") from None
        if len(b) > MAX_STRING_LENGTH:
            raise EncodeError(f"string of {len(b)} bytes exceeds the {MAX_STRING_LENGTH}-byte limit")
        return b

    def string(self, v: str) -> None:
        b = self._utf8(v)
        self.buf += I16.pack(len(b))
        self.buf += b

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.string(v)

    def compact_string(self, v: str) -> None:
        b = self._utf8(v)
        self.uvarint(len(b) + 1)
        self.buf += b

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    # --- bytes -----------------------------------------------------------------------

    def bytes(self, v: Buffer) -> None:
        n = _buffer_len(v)
        self.buf += I32.pack(n)
        self.buf += v

    def nullable_bytes(self, v: Buffer | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes(v)

    def compact_bytes(self, v: Buffer) -> None:
        self.uvarint(_buffer_len(v) + 1)
        self.buf += v

    def compact_nullable_bytes(self, v: Buffer | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    # --- arrays and tags -----------------------------------------------------------------

    def array_count(self, n: int | None) -> None:
        self.buf += I32.pack(-1 if n is None else n)

    def compact_array_count(self, n: int | None) -> None:
        self.uvarint(0 if n is None else n + 1)

    def tagged_fields(self, fields: list[tuple[int, builtins.bytes]]) -> None:
        """``fields`` must be sorted by tag (Kafka writes them in ascending order)."""
        self.uvarint(len(fields))
        for tag, data in fields:
            self.uvarint(tag)
            self.uvarint(len(data))
            self.buf += data


def _buffer_len(v: Buffer) -> int:
    if isinstance(v, memoryview):
        n = v.nbytes
    elif isinstance(v, bytes | bytearray):
        n = len(v)
    else:
        raise EncodeError(f"expected bytes, got {type(v).__name__}")
    if n > MAX_INT32:
        raise EncodeError(f"byte string of {n} bytes exceeds the int32 length limit")
    return n
