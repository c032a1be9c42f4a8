"""Helpers shared by the hot-storage tests, and the child program of the kill -9 test.

Batches are built with ``hot.records.build_batch`` when it exists, else with
kafka-python's DefaultRecordBatchBuilder, so the tests do not depend on the codec.

As a program (``python hotlib.py <log dir> <seed>``) it appends batches to a log in
fsync mode and prints ``<first> <last>`` for each batch once it is acknowledged
(high watermark passed it); the parent kills it with SIGKILL at a random moment.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hot.batch import HEADER, LOG_OVERHEAD
from hot.config import LogConfig
from hot.log import Log

Rec = tuple[bytes | None, bytes | None, int]  # key, value, timestamp


def build(
    records: Sequence[Rec],
    *,
    base_offset: int = 0,
    compression: int = 0,
    log_append_time: bool = False,
) -> bytes:
    """One v2 batch holding ``records``."""
    try:
        from hot.batch import Compression, TimestampType
        from hot.records import RecordInput, build_batch
    except ImportError:
        return _build_kafka(records, base_offset, compression, log_append_time)
    return build_batch(
        [RecordInput(k, v, timestamp=ts) for k, v, ts in records],
        base_offset=base_offset,
        compression=Compression(compression),
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME,
    )


def _build_kafka(records: Sequence[Rec], base_offset: int, compression: int, log_append_time: bool) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, (k, v, ts) in enumerate(records):
        b.append(i, timestamp=ts, key=k, value=v, headers=[])
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)
    assert not log_append_time, "kafka-python builder cannot set LogAppendTime"
    return bytes(data)


def decode(buf: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record of whole batches in ``buf``."""
    try:
        from hot.records import decode_batches
    except ImportError:
        from kafka.record.memory_records import MemoryRecords

        out = []
        mr = MemoryRecords(buf)
        while True:
            batch = mr.next_batch()
            if batch is None:
                return out
            out.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    return [(r.offset, r.timestamp, r.key, r.value) for b in decode_batches(buf) for r in b]


def headers(buf: bytes) -> list[tuple[int, int, int]]:
    """(position, base offset, next offset) of every batch in ``buf`` (headers only)."""
    out = []
    pos = 0
    while pos + LOG_OVERHEAD <= len(buf):
        h = HEADER.unpack_from(buf, pos)
        out.append((pos, h[0], h[0] + h[6] + 1))
        pos += h[1] + LOG_OVERHEAD
    return out


def value_for(offset: int, size: int = 40) -> bytes:
    """A deterministic payload for ``offset``."""
    seed = hashlib.sha256(b"strata-%d" % offset).digest()
    return (seed * (size // len(seed) + 1))[:size]


def batch_at(offset: int, count: int, *, ts: int | None = None, size: int = 40) -> bytes:
    """A batch of ``count`` deterministic records meant to land at ``offset``."""
    return build(
        [
            (b"k%d" % o, value_for(o, size), ts if ts is not None else 1_000 + o)
            for o in range(offset, offset + count)
        ],
        base_offset=0,
    )


def open_log(path: Path | str, clean: bool = False, **config: object) -> Log:
    cfg = LogConfig(**config)  # type: ignore[arg-type]
    return Log.open(path, cfg, topic="t", partition=0, clean_shutdown=clean)


def child_main(log_dir: str, seed: int) -> None:
    """Append forever in fsync mode, pipelining a few batches, printing acknowledgements."""
    import random

    from hot.flush import GroupCommitter

    rnd = random.Random(seed)
    committer = GroupCommitter()
    log = Log.open(
        log_dir,
        LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512),
        topic="t",
        partition=0,
        flusher=committer,
    )
    out = sys.stdout
    while True:
        pending = []
        for _ in range(rnd.randint(1, 4)):
            first = log.log_end_offset
            info = log.append(batch_at(first, rnd.randint(1, 5), size=rnd.randint(10, 300)))
            assert info.first_offset == first
            pending.append((info, log.high_watermark_future(info.last_offset + 1)))
        for info, fut in pending:
            fut.result()
            out.write(f"{info.first_offset} {info.last_offset}\n")
            out.flush()


if __name__ == "__main__":
    child_main(sys.argv[1], int(sys.argv[2]))
