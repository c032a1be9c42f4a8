"""An append's batches before the partition log writes them (the log side of Kafka's
``LogValidator``): the checks every batch passes before a byte is written, the bytes a
leader writes for each (offset and leader epoch stamped in), and the idempotent producer's
checks of one append. Pure functions over the request's buffer; the record-level rules are
``hot.record_validation``, the producer state ``hot.producer_state``.

Byte layout used here (the batch v2 header, hot.batch): the first 16 bytes are
baseOffset (int64), batchLength (int32) and partitionLeaderEpoch (int32), outside the
CRC, so a leader rewrites them without copying the batch; attributes (int16) at 21,
maxTimestamp (int64) at 35 and the CRC-32C (uint32) at 17, which covers bytes from 21 on.

Files: none. Locking: none of its own; ``check_producers`` works on a pending producer-state
change that ``hot.log.Log`` opens and commits under its lock.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from crc32c import crc32c

from hot.batch import CRC_START, iter_batches
from hot.config import LogConfig
from hot.errors import InvalidRecordError, RecordTooLargeError, TransactionalIdAuthorizationError
from hot.producer_state import UNVERIFIED, BatchMetadata, ProducerAppend, VerificationGuard
from hot.record_validation import check_batch, iter_client_batches, scan_client_batches, stamped_copy

_PREFIX: Final = struct.Struct(">qii")
_PREFIX_SIZE: Final = 16
_ATTRIBUTES: Final = struct.Struct(">h")
_MAX_TIMESTAMP: Final = struct.Struct(">q")
_CRC: Final = struct.Struct(">I")
_ATTRIBUTES_POS: Final = 21
_MAX_TIMESTAMP_POS: Final = 35
_CRC_POS: Final = 17
_TIMESTAMP_TYPE_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20
_MAX_APPEND_BYTES: Final = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What one append wrote (``hot.log.Log.append`` / ``append_as_follower``)."""

    first_offset: int
    last_offset: int
    batch_count: int
    record_count: int
    max_timestamp: int
    log_append_time_ms: int  # -1 for CreateTime topics
    log_start_offset: int
    # Every batch was an idempotent producer's retry of a batch already in the log: nothing
    # was written and the offsets are the original batches' (Kafka answers with them).
    duplicate: bool = False

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


@dataclass(slots=True)  # not frozen: built once per batch on the hot path, never shared
class AppendBatch:
    """A validated batch of an append request."""

    position: int
    size: int
    batch_length: int
    last_offset_delta: int
    max_timestamp: int
    records: int
    base_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_control: bool
    leader_epoch: int
    is_transactional: bool
    # Attributes to store when the header must be rewritten (maxTimestamp from the records,
    # hot.record_validation); -1 when the client's header is stored as it is.
    attributes: int = -1


def byte_view(data: bytes | bytearray | memoryview) -> memoryview:
    """A flat unsigned-byte view of ``data`` (no copy)."""
    mv = memoryview(data)
    if mv.ndim != 1 or mv.itemsize != 1 or mv.format != "B":
        mv = mv.cast("B")
    return mv


def leader_scan(mv: memoryview, config: LogConfig) -> list[tuple[Any, ...]] | None:
    """A leader's check of every batch in one C call (hot.record_validation
    ``scan_client_batches``): AppendBatch's fields per batch, or None when the Python path
    of ``validate_batches`` must judge the payload."""
    return scan_client_batches(
        mv,
        max_size=config.max_message_bytes,
        log_append_time=config.log_append_time,
        require_keys=config.compact,
    )


def validate_batches(
    mv: memoryview,
    config: LogConfig,
    *,
    leader: bool,
    coordinator: bool = False,
    prescanned: bool = False,
    scanned: list[tuple[Any, ...]] | None = None,
) -> tuple[list[AppendBatch], bool]:
    """Validate every batch before anything is written: structure, size and CRC; as
    leader also every record (hot.record_validation, Kafka's LogValidator), which gives
    the maxTimestamp to store. Returns the batches and whether any carries a producer id.
    ``prescanned``: ``scanned`` is ``leader_scan``'s answer already (not asked again)."""
    if len(mv) == 0:
        raise InvalidRecordError("produce payload holds no record batch")
    if len(mv) > _MAX_APPEND_BYTES:
        raise RecordTooLargeError(f"append of {len(mv)} bytes is too large")
    if leader:
        if not prescanned:
            scanned = leader_scan(mv, config)
        if scanned is not None:  # accepted in one C call; the same batches as below
            accepted = [AppendBatch(*fields) for fields in scanned]
            return accepted, any(b.producer_id >= 0 for b in accepted)
    out: list[AppendBatch] = []
    idempotent = False
    # A follower stores its leader's batches as they are: never judged again.
    batches = (
        iter_client_batches(mv, max_size=config.max_message_bytes, coordinator=coordinator)
        if leader
        else iter_batches(mv)
    )
    log_append = config.log_append_time
    compact = config.compact
    for pos, h in batches:
        if h.producer_id >= 0:
            idempotent = True
        b = AppendBatch(
            pos,
            h.size,
            h.batch_length,
            h.last_offset_delta,
            h.max_timestamp,
            h.records_count,
            h.base_offset,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            bool(h.attributes & _CONTROL_BIT),
            h.partition_leader_epoch,
            bool(h.attributes & _TRANSACTIONAL_BIT),
        )
        if leader:
            check = check_batch(mv, pos, h, log_append_time=log_append, require_keys=compact)
            b.max_timestamp = check.max_timestamp
            if check.rewrite:
                b.attributes = check.attributes
        out.append(b)
    return out, idempotent


def leader_iov(
    mv: memoryview,
    batches: Iterable[AppendBatch],
    first_offset: int,
    leader_epoch: int,
    now_ms: int,
    log_append: bool,
) -> tuple[list[bytes | bytearray | memoryview], list[tuple[int, int, int]], int, int]:
    """The bytes a leader writes for ``batches`` from ``first_offset`` on: baseOffset and
    partitionLeaderEpoch stamped in without copying the batch, unless the header must be
    rewritten (LogAppendTime, or a CreateTime maxTimestamp that is not the records'
    largest: copied with a new CRC, never recompressed). Returns the buffers, the
    (offset, size, timestamp) of each batch for the indexes, the largest timestamp (-1 if
    none) and the offset after the last batch."""
    iov: list[bytes | bytearray | memoryview] = []
    tracked: list[tuple[int, int, int]] = []
    max_ts = -1
    off = first_offset
    for b in batches:
        if log_append:
            iov.append(_stamp_log_append_time(mv, b, off, leader_epoch, now_ms))
            bts = now_ms
        elif b.attributes >= 0:
            iov.append(
                stamped_copy(
                    mv,
                    b.position,
                    b.size,
                    base_offset=off,
                    leader_epoch=leader_epoch,
                    attributes=b.attributes,
                    max_timestamp=b.max_timestamp,
                )
            )
            bts = b.max_timestamp
        else:
            iov.append(_PREFIX.pack(off, b.batch_length, leader_epoch))
            iov.append(mv[b.position + _PREFIX_SIZE : b.position + b.size])
            bts = b.max_timestamp
        tracked.append((off, b.size, bts))
        if bts > max_ts:
            max_ts = bts
        off += b.last_offset_delta + 1
    return iov, tracked, max_ts, off


def _stamp_log_append_time(mv: memoryview, b: AppendBatch, offset: int, epoch: int, now_ms: int) -> bytearray:
    buf = bytearray(mv[b.position : b.position + b.size])
    _PREFIX.pack_into(buf, 0, offset, b.batch_length, epoch)
    (attrs,) = _ATTRIBUTES.unpack_from(buf, _ATTRIBUTES_POS)
    _ATTRIBUTES.pack_into(buf, _ATTRIBUTES_POS, attrs | _TIMESTAMP_TYPE_BIT)
    _MAX_TIMESTAMP.pack_into(buf, _MAX_TIMESTAMP_POS, now_ms)
    _CRC.pack_into(buf, _CRC_POS, crc32c(memoryview(buf)[CRC_START:]))
    return buf


def check_producers(
    plan: ProducerAppend,
    batches: list[AppendBatch],
    first: int,
    now_ms: int,
    log_append: bool,
    transactional: bool = False,
    coordinator: bool = False,
    guards: Mapping[int, VerificationGuard] | None = None,
) -> tuple[list[AppendBatch], list[BatchMetadata], int]:
    """Producer-state checks of an append that would start at offset ``first``, recorded in
    the pending change ``plan``. Returns the batches to write, the duplicates' original
    batches, and the offset to report as the append's first. A transactional batch
    without ``transactional`` (a request with no transactional id the coordinator knows)
    is TransactionalIdAuthorizationError: TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kafka's
    answer to transactional records without an authorized transactional id. ``coordinator``:
    the coordinator's own batches (origin COORDINATOR: no sequence checks, no duplicates;
    hot.producer_state). ``guards``: the leader's verification of transactional batches
    (KIP-890), by producer id; a transactional batch of a producer not in it is checked
    against ``UNVERIFIED`` (None: no verification)."""
    kept: list[AppendBatch] = []
    dups: list[BatchMetadata] = []
    reported = -1
    off = first
    for b in batches:
        if b.producer_id >= 0:
            if b.is_transactional and not (transactional or coordinator):
                raise TransactionalIdAuthorizationError(
                    f"transactional batch of producer {b.producer_id} in a request without a transactional id"
                )
            dup = plan.append(
                b.producer_id,
                b.producer_epoch,
                b.base_sequence,
                b.last_offset_delta,
                off,
                now_ms if log_append else b.max_timestamp,
                b.is_transactional,
                coordinator=coordinator,
                guard=None if guards is None else guards.get(b.producer_id, UNVERIFIED),
            )
            if dup is not None:
                dups.append(dup)
                if reported < 0:
                    reported = dup.first_offset
                continue
        if reported < 0:
            reported = off
        kept.append(b)
        off += b.last_offset_delta + 1
    return kept, dups, reported


__all__ = ["AppendBatch", "byte_view", "check_producers", "leader_iov", "leader_scan", "validate_batches"]
