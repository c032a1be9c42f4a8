"""End-transaction markers (KIP-98): the one record of a control batch that commits or
aborts a producer's transaction in a partition. Pure, no I/O.

The record (Kafka's ControlRecordType / EndTransactionMarker)::

    key    version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)          4 bytes
    value  version int16 (0) | coordinatorEpoch int32                       6 bytes

Its batch (Kafka's MemoryRecords.withEndTransactionMarker): magic 2, attributes
transactional (bit 4) + control (bit 5), no compression, CreateTime; the producer's id and
epoch, baseSequence -1, one record at offset delta 0 with the marker's timestamp.

As in Kafka, a higher key or value version is read as version 0 (later versions only add
fields); a negative version or a short key or value is CorruptRecordError. Other control
types (Kafka's LEADER_CHANGE, snapshot records) are not transaction markers: ``decode``
refuses them, ``read_marker`` reports them as None.
"""

from __future__ import annotations

from dataclasses import dataclass

from hot.errors import CorruptRecordError, InvalidRecordError
from hot.records import (
    CONTROL_KEY,
    CONTROL_KEY_VERSION,
    END_TXN_MARKER,
    END_TXN_MARKER_VERSION,
    ControlType,
    build_control_batch,
    decode_batch,
)

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """A COMMIT or ABORT marker as written by the transaction coordinator."""

    control_type: ControlType
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type is ControlType.COMMIT

    def key(self) -> bytes:
        return CONTROL_KEY.pack(CONTROL_KEY_VERSION, int(self.control_type))

    def value(self) -> bytes:
        try:
            return END_TXN_MARKER.pack(END_TXN_MARKER_VERSION, self.coordinator_epoch)
        except Exception as e:  # struct.error: out of int32 range
            raise InvalidRecordError(
                f"coordinator epoch {self.coordinator_epoch} out of range: {e}"
            ) from None

    @staticmethod
    def control_type_of(key: Buffer | None) -> int:
        """The raw control type of a control record key (any type, not just markers)."""
        if key is None or len(key) < CONTROL_KEY.size:
            raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes, need 4")
        version, type_id = CONTROL_KEY.unpack_from(key)
        if version < 0:
            raise CorruptRecordError(f"control record key version {version}")
        return int(type_id)

    @staticmethod
    def decode(key: Buffer | None, value: Buffer | None) -> EndTxnMarker:
        """The marker of a control record; CorruptRecordError if it is not a valid one."""
        type_id = EndTxnMarker.control_type_of(key)
        if type_id not in (ControlType.ABORT, ControlType.COMMIT):
            raise CorruptRecordError(f"control type {type_id} is not a transaction marker")
        if value is None or len(value) < END_TXN_MARKER.size:
            raise CorruptRecordError(
                f"transaction marker value of {0 if value is None else len(value)} bytes, need 6"
            )
        version, epoch = END_TXN_MARKER.unpack_from(value)
        if version < 0:
            raise CorruptRecordError(f"transaction marker value version {version}")
        return EndTxnMarker(ControlType(type_id), epoch)


def build_marker_batch(
    marker: EndTxnMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The control batch carrying ``marker`` for a producer (layout: module docstring)."""
    if producer_id < 0 or producer_epoch < 0:
        raise InvalidRecordError(
            f"a transaction marker needs a producer id and epoch, got {producer_id}/{producer_epoch}"
        )
    marker.value()  # range check with a clear error
    return build_control_batch(
        marker.control_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=marker.coordinator_epoch,
        base_offset=base_offset,
        timestamp=timestamp,
        partition_leader_epoch=partition_leader_epoch,
    )


def read_marker(batch: Buffer) -> EndTxnMarker | None:
    """The marker of a stored control batch (whole batch bytes), None if its control type
    is not ABORT / COMMIT or it holds no record (an emptied batch, as a cleaner may leave).
    CorruptRecordError if the batch cannot be read."""
    records = decode_batch(bytes(batch), verify_crc=False).records
    if not records:
        return None
    rec = records[0]
    if EndTxnMarker.control_type_of(rec.key) not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    return EndTxnMarker.decode(rec.key, rec.value)


__all__ = ["EndTxnMarker", "build_marker_batch", "read_marker"]
