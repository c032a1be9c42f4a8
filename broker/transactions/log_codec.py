"""Keys and values of ``__transaction_state`` records, as Kafka writes them. Pure, no I/O.

Layouts (Kafka's TransactionLogKey.json / TransactionLogValue.json; big-endian; STRING =
INT16 length + UTF-8; ARRAY = INT32 count, -1 = null; in flexible versions COMPACT_STRING =
UNSIGNED_VARINT length+1, COMPACT_ARRAY = UNSIGNED_VARINT count+1 with 0 = null, and every
struct ends with its tagged fields: UNSIGNED_VARINT count, then per field UNSIGNED_VARINT
tag, UNSIGNED_VARINT size, data)::

    key v0      version INT16 = 0, transactional_id STRING

    value v0    version INT16 = 0, producer_id INT64, producer_epoch INT16,
                transaction_timeout_ms INT32, transaction_status INT8,
                transaction_partitions ARRAY(topic STRING, partition_ids ARRAY(INT32)) (nullable),
                transaction_last_update_timestamp_ms INT64, transaction_start_timestamp_ms INT64
    value v1    version INT16 = 1, the same fields with COMPACT_ARRAY / COMPACT_STRING (each
                partitions entry ending with its tagged fields, none written), then tagged
                fields: 0 previous_producer_id INT64 (default -1), 1 next_producer_id INT64
                (default -1), 2 client_transaction_version INT16 (default 0); a field at
                its default is not written. Unknown tags are skipped (a newer Kafka's).

The status is ``TransactionState``'s id (never Dead, which is a tombstone, nor
PrepareEpochFence, which lives in memory only). An Empty transaction's partitions are written as
null and ignored when read. A null value (tombstone) means the transactional id expired.
Partitions are written sorted by topic, then partition (Kafka's order is a hash map's).
The last producer epoch and the in-memory fields are not stored. Anything malformed
(truncation, trailing bytes, unknown versions or states) raises TxnLogRecordError; a
loader turns it into CorruptLogError with the record's offset.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from dataclasses import dataclass
from typing import Final

from broker.groups.types import TopicPartition
from broker.transactions.state import (
    NO_PRODUCER_ID,
    TV_0,
    TransactionMetadata,
    TransactionState,
)
from hot.errors import InvalidRequestError, StrataError

KEY_VERSION: Final = 0
VALUE_VERSIONS: Final = (0, 1)

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
# after the version, in both: producer_id INT64, producer_epoch INT16, timeout INT32, status INT8
_HEAD: Final = struct.Struct(">qhib")
_TIMES: Final = struct.Struct(">qq")  # last update, start

# Dead is written as a tombstone, PrepareEpochFence is never written: a value stating either
# is refused both ways.
_NEVER_WRITTEN: Final = frozenset({TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE})

_TAG_PREVIOUS_PRODUCER_ID: Final = 0
_TAG_NEXT_PRODUCER_ID: Final = 1
_TAG_CLIENT_TRANSACTION_VERSION: Final = 2


class TxnLogRecordError(StrataError):
    """A ``__transaction_state`` record that does not parse."""


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key of a version this coordinator does not know (Kafka skips these on load)."""

    version: int


# --- writing -----------------------------------------------------------------------------


def _uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _utf8(s: str, what: str) -> bytes:
    raw = s.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise InvalidRequestError(f"{what} of {len(raw)} bytes is longer than 32767")
    return raw


def encode_key(transactional_id: str) -> bytes:
    raw = _utf8(transactional_id, "transactional id")
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def _grouped(partitions: frozenset[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return [(t, sorted(ps)) for t, ps in sorted(by_topic.items())]


def encode_value(meta: TransactionMetadata, version: int = 1) -> bytes:
    """The value of ``meta``'s record, in ``version`` (``state.log_value_version`` of the
    coordinator's transaction.version)."""
    if version not in VALUE_VERSIONS:
        raise ValueError(f"TransactionLogValue version {version} is not 0 or 1")
    if meta.state is TransactionState.EMPTY and meta.partitions:
        raise ValueError(f"{meta.transactional_id}: an Empty transaction with partitions")
    if meta.state in _NEVER_WRITTEN:
        raise ValueError(f"{meta.transactional_id}: {meta.state.name} is never written as a value")
    out = bytearray(_I16.pack(version))
    out += _HEAD.pack(meta.producer_id, meta.producer_epoch, meta.timeout_ms, int(meta.state))
    groups = None if meta.state is TransactionState.EMPTY else _grouped(meta.partitions)
    if version == 0:
        if groups is None:
            out += _I32.pack(-1)
        else:
            out += _I32.pack(len(groups))
            for topic, ids in groups:
                raw = _utf8(topic, "topic")
                out += _I16.pack(len(raw)) + raw + _I32.pack(len(ids))
                out += struct.pack(f">{len(ids)}i", *ids)
        out += _TIMES.pack(meta.txn_last_update_timestamp_ms, meta.txn_start_timestamp_ms)
        return bytes(out)
    if groups is None:
        _uvarint(out, 0)
    else:
        _uvarint(out, len(groups) + 1)
        for topic, ids in groups:
            raw = _utf8(topic, "topic")
            _uvarint(out, len(raw) + 1)
            out += raw
            _uvarint(out, len(ids) + 1)
            out += struct.pack(f">{len(ids)}i", *ids)
            _uvarint(out, 0)  # the entry's tagged fields
    out += _TIMES.pack(meta.txn_last_update_timestamp_ms, meta.txn_start_timestamp_ms)
    tags: list[tuple[int, bytes]] = []
    if meta.previous_producer_id != NO_PRODUCER_ID:
        tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(meta.previous_producer_id)))
    if meta.next_producer_id != NO_PRODUCER_ID:
        tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(meta.next_producer_id)))
    if meta.client_transaction_version != TV_0:
        tags.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(meta.client_transaction_version)))
    _uvarint(out, len(tags))
    for tag, data in tags:
        _uvarint(out, tag)
        _uvarint(out, len(data))
        out += data
    return bytes(out)


def encode_record(meta: TransactionMetadata, version: int = 1) -> tuple[bytes, bytes | None]:
    """(key, value) of the record that states ``meta``; a Dead one is a tombstone."""
    key = encode_key(meta.transactional_id)
    if meta.state is TransactionState.DEAD:
        return key, None
    return key, encode_value(meta, version)


# --- reading -----------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise TxnLogRecordError(f"{self.what} truncated at byte {self.pos} of {len(self.buf)}")

    def unpack(self, s: struct.Struct) -> tuple[int, ...]:
        self.need(s.size)
        values = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return tuple(int(v) for v in values)

    def take(self, n: int) -> bytes:
        self.need(n)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return raw

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            if shift > 28:
                raise TxnLogRecordError(f"{self.what}: varint longer than 5 bytes at byte {self.pos}")
            (b,) = self.take(1)
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n
            shift += 7

    def text(self, n: int) -> str:
        start = self.pos
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise TxnLogRecordError(f"{self.what}: string at byte {start} is not UTF-8") from None

    def skip_tags(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        last = -1
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            if tag <= last:
                raise TxnLogRecordError(f"{self.what}: tagged field {tag} out of order")
            last = tag
            fields[tag] = self.take(self.uvarint())
        return fields

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise TxnLogRecordError(f"{self.what}: {len(self.buf) - self.pos} trailing bytes")


def decode_key(data: bytes) -> str | UnknownKey:
    """The transactional id of a key, or UnknownKey for a version other than 0."""
    r = _Reader(bytes(data), "transaction log key")
    (version,) = r.unpack(_I16)
    if version != KEY_VERSION:
        return UnknownKey(version)
    (n,) = r.unpack(_I16)
    tid = r.text(n)
    r.end()
    return tid


def _tag_int(fields: dict[int, bytes], tag: int, s: struct.Struct, default: int, what: str) -> int:
    raw = fields.get(tag)
    if raw is None:
        return default
    if len(raw) != s.size:
        raise TxnLogRecordError(f"{what}: tagged field {tag} has {len(raw)} bytes, not {s.size}")
    return int(s.unpack(raw)[0])


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    """The metadata a (non-null) value states for ``transactional_id``."""
    what = f"transaction log value of {transactional_id!r}"
    r = _Reader(bytes(data), what)
    (version,) = r.unpack(_I16)
    if version not in VALUE_VERSIONS:
        raise TxnLogRecordError(f"{what}: version {version} is unknown")
    producer_id, epoch, timeout_ms, status = r.unpack(_HEAD)
    try:
        state = TransactionState(status)
    except ValueError:
        raise TxnLogRecordError(f"{what}: transaction status {status} is unknown") from None
    if state in _NEVER_WRITTEN:
        raise TxnLogRecordError(f"{what}: transaction status {state.name} is never written")
    pairs: list[TopicPartition] = []
    count = r.unpack(_I32)[0] if version == 0 else r.uvarint() - 1
    if count < -1:
        raise TxnLogRecordError(f"{what}: {count} partition entries")
    for _ in range(max(count, 0)):
        if version == 0:
            topic = r.text(r.unpack(_I16)[0])
            n = r.unpack(_I32)[0]
        else:
            length = r.uvarint() - 1
            if length < 0:
                raise TxnLogRecordError(f"{what}: null topic")
            topic = r.text(length)
            n = r.uvarint() - 1
        if n < 0:
            raise TxnLogRecordError(f"{what}: null partition list of {topic!r}")
        ids = struct.unpack(f">{n}i", r.take(4 * n))
        pairs.extend(TopicPartition(topic, p) for p in ids)
        if version >= 1:
            r.skip_tags()
    last_update, start = r.unpack(_TIMES)
    fields = r.skip_tags() if version >= 1 else {}
    r.end()
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        timeout_ms=timeout_ms,
        state=state,
        partitions=frozenset() if state is TransactionState.EMPTY else frozenset(pairs),
        txn_last_update_timestamp_ms=last_update,
        txn_start_timestamp_ms=start,
        previous_producer_id=_tag_int(fields, _TAG_PREVIOUS_PRODUCER_ID, _I64, NO_PRODUCER_ID, what),
        next_producer_id=_tag_int(fields, _TAG_NEXT_PRODUCER_ID, _I64, NO_PRODUCER_ID, what),
        client_transaction_version=_tag_int(fields, _TAG_CLIENT_TRANSACTION_VERSION, _I16, TV_0, what),
    )
