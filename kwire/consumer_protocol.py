"""The "consumer" embedded protocol: what Kafka consumers put in JoinGroup metadata and
SyncGroup assignments. Pure, no I/O: bytes in, frozen dataclasses out (and back).

The coordinator treats these bytes as opaque except for OffsetDelete, which must know
which topics a live member subscribes to, and for descriptions (assigned partitions).
Layouts (Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment, big-endian,
never "flexible": strings are INT16 length + UTF-8, -1 = null; bytes are INT32 length,
-1 = null; arrays are INT32 count, -1 = null)::

    Subscription
      version            INT16
      topics             ARRAY(STRING)
      user_data          NULLABLE_BYTES
      owned_partitions   ARRAY(topic STRING, partitions ARRAY(INT32))     v1+
      generation_id      INT32  (-1 when unknown)                        v2+
      rack_id            NULLABLE_STRING                                 v3+

    Assignment
      version            INT16   (v1 has the v0 layout; it marks cooperative assignors)
      assigned           ARRAY(topic STRING, partitions ARRAY(INT32))
      user_data          NULLABLE_BYTES

A version above the newest known is read with the newest known layout and trailing bytes
are ignored, as Kafka's own ConsumerProtocol does, so newer clients stay readable.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from hot.errors import InvalidRequestError

PROTOCOL_TYPE: Final = "consumer"
SUBSCRIPTION_VERSION: Final = 3  # newest layout known
ASSIGNMENT_VERSION: Final = 1

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


class ConsumerProtocolError(InvalidRequestError):
    """Consumer-protocol bytes that do not parse."""


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartitions, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    version: int
    partitions: tuple[TopicPartitions, ...]
    user_data: bytes | None = None


# --- reading -----------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def _need(self, n: int, field: str) -> None:
        if self.pos + n > len(self.buf):
            raise ConsumerProtocolError(
                f"{self.what}: truncated in {field} at byte {self.pos} ({len(self.buf)} bytes in all)"
            )

    def i16(self, field: str) -> int:
        self._need(2, field)
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(v)

    def i32(self, field: str) -> int:
        self._need(4, field)
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def string(self, field: str, *, nullable: bool = False) -> str | None:
        n = self.i16(field)
        if n < 0:
            if nullable and n == -1:
                return None
            raise ConsumerProtocolError(f"{self.what}: {field} has length {n}")
        self._need(n, field)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConsumerProtocolError(f"{self.what}: {field} is not UTF-8") from None

    def bytes_(self, field: str) -> bytes | None:
        n = self.i32(field)
        if n < 0:
            if n == -1:
                return None
            raise ConsumerProtocolError(f"{self.what}: {field} has length {n}")
        self._need(n, field)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(raw)

    def count(self, field: str, min_item_size: int) -> int:
        n = self.i32(field)
        if n == -1:
            return 0  # a null array reads as empty
        if n < 0 or n * min_item_size > len(self.buf) - self.pos:
            raise ConsumerProtocolError(
                f"{self.what}: {field} claims {n} items with {len(self.buf) - self.pos} bytes left"
            )
        return n

    def topic_partitions(self, field: str) -> tuple[TopicPartitions, ...]:
        out: list[TopicPartitions] = []
        for _ in range(self.count(field, 6)):
            topic = self.string(f"{field}.topic")
            assert topic is not None
            parts = tuple(
                self.i32(f"{field}.partitions") for _ in range(self.count(f"{field}.partitions", 4))
            )
            out.append(TopicPartitions(topic, parts))
        return tuple(out)


def decode_subscription(data: bytes) -> Subscription:
    """Parse JoinGroup protocol metadata of protocol type "consumer"."""
    r = _Reader(bytes(data), "consumer subscription")
    version = r.i16("version")
    if version < 0:
        raise ConsumerProtocolError(f"consumer subscription: version {version}")
    topics: list[str] = []
    for _ in range(r.count("topics", 2)):
        t = r.string("topics")
        assert t is not None
        topics.append(t)
    user_data = r.bytes_("user_data")
    owned: tuple[TopicPartitions, ...] = ()
    generation = -1
    rack: str | None = None
    if version >= 1:
        owned = r.topic_partitions("owned_partitions")
    if version >= 2:
        generation = r.i32("generation_id")
    if version >= 3:
        rack = r.string("rack_id", nullable=True)
    return Subscription(version, tuple(topics), user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> Assignment:
    """Parse a SyncGroup assignment of protocol type "consumer". Empty bytes (what a
    member gets when the leader assigned it nothing at all) is an empty assignment."""
    if len(data) == 0:
        return Assignment(0, ())
    r = _Reader(bytes(data), "consumer assignment")
    version = r.i16("version")
    if version < 0:
        raise ConsumerProtocolError(f"consumer assignment: version {version}")
    parts = r.topic_partitions("assigned_partitions")
    user_data = r.bytes_("user_data")
    return Assignment(version, parts, user_data)


# --- writing (tests, tools) --------------------------------------------------------------


def _string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _I16.pack(-1)
        return
    raw = s.encode("utf-8")
    out += _I16.pack(len(raw))
    out += raw


def _bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(b))
    out += b


def _topic_partitions(out: bytearray, items: Sequence[TopicPartitions]) -> None:
    out += _I32.pack(len(items))
    for tp in items:
        _string(out, tp.topic)
        out += _I32.pack(len(tp.partitions))
        for p in tp.partitions:
            out += _I32.pack(p)


def encode_subscription(sub: Subscription) -> bytes:
    if not 0 <= sub.version <= SUBSCRIPTION_VERSION:
        raise ConsumerProtocolError(f"cannot write consumer subscription version {sub.version}")
    out = bytearray(_I16.pack(sub.version))
    out += _I32.pack(len(sub.topics))
    for t in sub.topics:
        _string(out, t)
    _bytes(out, sub.user_data)
    if sub.version >= 1:
        _topic_partitions(out, sub.owned_partitions)
    if sub.version >= 2:
        out += _I32.pack(sub.generation_id)
    if sub.version >= 3:
        _string(out, sub.rack_id)
    return bytes(out)


def encode_assignment(assignment: Assignment) -> bytes:
    if not 0 <= assignment.version <= ASSIGNMENT_VERSION:
        raise ConsumerProtocolError(f"cannot write consumer assignment version {assignment.version}")
    out = bytearray(_I16.pack(assignment.version))
    _topic_partitions(out, assignment.partitions)
    _bytes(out, assignment.user_data)
    return bytes(out)
