"""Keys and values of the records in the internal offsets log. Pure, no I/O.

The layouts are Kafka's own ``__consumer_offsets`` schemas (big-endian; STRING = INT16
length + UTF-8, -1 = null where nullable; BYTES = INT32 length + bytes; ARRAY = INT32
count), so the log reads like Kafka's to anyone who knows those::

    key, version 0 or 1: an offset commit
        version INT16, group STRING, topic STRING, partition INT32
    key, version 2: a group's metadata
        version INT16, group STRING

    offset value (a null value is a tombstone: the offset was deleted)
        v0  version INT16, offset INT64, metadata STRING, commit_timestamp INT64
        v1  version INT16, offset INT64, metadata STRING, commit_timestamp INT64,
            expire_timestamp INT64
        v2  version INT16, offset INT64, metadata STRING, commit_timestamp INT64
        v3  version INT16, offset INT64, leader_epoch INT32, metadata STRING,
            commit_timestamp INT64
      written as v1 when the commit carried an explicit retention (OffsetCommit v2-v4),
      as v3 otherwise (what Kafka writes too).

    group value (null: the group was deleted)
        v0  version INT16, protocol_type STRING, generation INT32, protocol NULLABLE_STRING,
            leader NULLABLE_STRING, members ARRAY(member v0)
        v1  as v0 with members ARRAY(member v1)
        v2  as v1 with current_state_timestamp INT64 after leader
        v3  as v2 with members ARRAY(member v3)
      member v0: member_id STRING, client_id STRING, client_host STRING,
                 session_timeout INT32, subscription BYTES, assignment BYTES
      member v1/v2: as v0 with rebalance_timeout INT32 before session_timeout
      member v3: as v1 with group_instance_id NULLABLE_STRING after member_id
      Strata writes v3 with no members (memberships are not persisted) and skips the
      members of any version when reading.

    key, versions 3 to 8: a KIP-848 consumer group's records (ConsumerGroupMetadata,
      its partition metadata, member metadata, target assignment and current
      assignments), in broker.groups.consumer_records with their values.

Reading anything else (unknown versions, truncation, trailing bytes) raises
OffsetRecordError; the store turns it into CorruptLogError with the record's offset.
Writing a string longer than 32767 bytes is InvalidRequestError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from broker.groups.consumer_records import KINDS, ConsumerKey, decode_consumer_key, encode_consumer_key
from broker.groups.types import NO_LEADER_EPOCH, OffsetAndMetadata, StoredGroup, TopicPartition
from hot.errors import InvalidRequestError, StrataError
from kwire.primitives import Reader

OFFSET_KEY_VERSION: Final = 1
GROUP_KEY_VERSION: Final = 2
GROUP_VALUE_VERSION: Final = 3

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")


class OffsetRecordError(StrataError):
    """A record of the offsets log that does not parse."""


@dataclass(frozen=True, slots=True, order=True)
class OffsetKey:
    group: str
    topic: str
    partition: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True, order=True)
class GroupKey:
    group: str


RecordKey = OffsetKey | GroupKey | ConsumerKey


# --- writing -----------------------------------------------------------------------------


def _string(out: bytearray, s: str | None, what: str) -> None:
    if s is None:
        out += _I16.pack(-1)
        return
    raw = s.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise InvalidRequestError(f"{what} of {len(raw)} bytes is longer than 32767")
    out += _I16.pack(len(raw))
    out += raw


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, ConsumerKey):
        return encode_consumer_key(key)
    out = bytearray()
    if isinstance(key, OffsetKey):
        out += _I16.pack(OFFSET_KEY_VERSION)
        _string(out, key.group, "group id")
        _string(out, key.topic, "topic")
        out += _I32.pack(key.partition)
    else:
        out += _I16.pack(GROUP_KEY_VERSION)
        _string(out, key.group, "group id")
    return bytes(out)


def encode_offset(value: OffsetAndMetadata) -> bytes:
    out = bytearray()
    if value.expire_timestamp_ms is not None:
        out += _I16.pack(1)
        out += _I64.pack(value.offset)
        _string(out, value.metadata, "offset metadata")
        out += _I64.pack(value.commit_timestamp_ms)
        out += _I64.pack(value.expire_timestamp_ms)
    else:
        out += _I16.pack(3)
        out += _I64.pack(value.offset)
        out += _I32.pack(value.leader_epoch)
        _string(out, value.metadata, "offset metadata")
        out += _I64.pack(value.commit_timestamp_ms)
    return bytes(out)


def encode_group(value: StoredGroup) -> bytes:
    out = bytearray(_I16.pack(GROUP_VALUE_VERSION))
    _string(out, value.protocol_type, "protocol type")
    out += _I32.pack(value.generation_id)
    _string(out, value.protocol_name, "protocol name")
    _string(out, value.leader_id, "leader id")
    out += _I64.pack(value.state_timestamp_ms)
    out += _I32.pack(0)  # members
    return bytes(out)


# --- reading -----------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise OffsetRecordError(f"{self.what} truncated at byte {self.pos} of {len(self.buf)}")

    def _unpack(self, s: struct.Struct) -> int:
        self._need(s.size)
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(v)

    def i16(self) -> int:
        return self._unpack(_I16)

    def i32(self) -> int:
        return self._unpack(_I32)

    def i64(self) -> int:
        return self._unpack(_I64)

    def string(self, *, nullable: bool = False) -> str | None:
        n = self.i16()
        if n == -1 and nullable:
            return None
        self._need(n)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise OffsetRecordError(f"{self.what}: string at byte {self.pos - n} is not UTF-8") from None

    def skip_bytes(self) -> None:
        n = self.i32()
        if n == -1:
            return
        self._need(n)
        self.pos += n

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise OffsetRecordError(f"{self.what}: {len(self.buf) - self.pos} trailing bytes")


def decode_key(data: bytes) -> RecordKey:
    r = _Reader(bytes(data), "offsets log key")
    version = r.i16()
    if version in (0, 1):
        group = r.string()
        topic = r.string()
        partition = r.i32()
        r.end()
        assert group is not None and topic is not None
        return OffsetKey(group, topic, partition)
    if version == GROUP_KEY_VERSION:
        group = r.string()
        r.end()
        assert group is not None
        return GroupKey(group)
    if version in KINDS:
        return decode_consumer_key(version, Reader(r.buf, r.pos))
    raise OffsetRecordError(f"offsets log key version {version} is unknown")


def decode_offset(data: bytes) -> OffsetAndMetadata:
    r = _Reader(bytes(data), "offset value")
    version = r.i16()
    if not 0 <= version <= 3:
        raise OffsetRecordError(f"offset value version {version} is unknown")
    offset = r.i64()
    epoch = r.i32() if version == 3 else NO_LEADER_EPOCH
    metadata = r.string()
    commit_ts = r.i64()
    expire = r.i64() if version == 1 else None
    r.end()
    assert metadata is not None
    return OffsetAndMetadata(offset, epoch, metadata, commit_ts, expire)


def decode_group(data: bytes) -> StoredGroup:
    r = _Reader(bytes(data), "group value")
    version = r.i16()
    if not 0 <= version <= 3:
        raise OffsetRecordError(f"group value version {version} is unknown")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.i64() if version >= 2 else -1
    count = r.i32()
    if count < -1:
        raise OffsetRecordError(f"group value: {count} members")
    for _ in range(max(count, 0)):
        r.string()  # member id
        if version >= 3:
            r.string(nullable=True)  # group instance id
        r.string()  # client id
        r.string()  # client host
        if version >= 1:
            r.i32()  # rebalance timeout
        r.i32()  # session timeout
        r.skip_bytes()  # subscription
        r.skip_bytes()  # assignment
    r.end()
    assert protocol_type is not None
    return StoredGroup(protocol_type, generation, protocol, leader, state_ts)
