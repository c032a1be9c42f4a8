"""A batch with a correct CRC-32C whose records do not decode (issue 18's reproduction).

Header: 3 records (lastOffsetDelta 2, recordsCount 3); body: only 2 records, the second
with a 6-byte key-length varint (at most 5 are allowed). Followers store it as it comes
(``Log.append_as_follower`` judges CRC and structure, not records), which is how data
written before produce validated records looks on disk.
"""

from __future__ import annotations

import time

from crc32c import crc32c

from hot.batch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC
from hot.records import encode_varint, encode_varlong

REASON = "varint longer than 5 bytes"  # what the strict decoder says about it


def _record(offset_delta: int, key_length: bytes, key: bytes, value: bytes) -> bytes:
    body = (
        b"\x00"  # attributes
        + encode_varlong(0)  # timestampDelta
        + encode_varint(offset_delta)
        + key_length
        + key
        + encode_varint(len(value))
        + value
        + encode_varint(0)  # headers
    )
    return encode_varint(len(body)) + body


def malformed_batch(base_offset: int, *, partition_leader_epoch: int = 0) -> bytes:
    records = _record(0, encode_varint(1), b"k", b"good") + _record(
        1, b"\x80\x80\x80\x80\x80\x01", b"k", b"bad"
    )
    now = int(time.time() * 1000)
    header = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        header,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(records),
        partition_leader_epoch,
        MAGIC,
        0,  # CRC, below
        0,  # attributes: no compression, CreateTime
        2,  # lastOffsetDelta: 3 records claimed
        now,
        now,
        -1,
        -1,
        -1,
        3,  # recordsCount
    )
    crc = crc32c(records, crc32c(bytes(header[CRC_START:])))
    header[17:21] = crc.to_bytes(4, "big")
    return bytes(header) + records
