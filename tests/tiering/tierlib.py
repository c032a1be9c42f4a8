"""Helpers of the remote-read, cache and restore tests: real hot logs, real uploads.

Segments are produced by a real ``hot.log.Log`` and uploaded here with the real store and
``ManifestStore`` (the same objects and manifest entries the uploader writes), so the
reader is tested against genuine segment, index and snapshot files.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from crc32c import crc32c

from hot.batch import iter_batches
from hot.config import LogConfig
from hot.log import Log
from hot.records import RecordInput, build_batch
from hot.segment import Segment
from hot.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from tiering.keys import segment_keys
from tiering.manifest import PartitionManifest, RemoteSegment, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.store import ObjectInfo, ObjectStore

TS0 = 1_700_000_000_000


def make_batch(
    first: int, count: int, *, size: int = 60, producer: tuple[int, int, int] | None = None
) -> bytes:
    """``count`` records with deterministic values; timestamps TS0 + 10 * offset."""
    recs = [
        RecordInput(
            key=b"k%d" % o,
            value=(hashlib.sha256(b"v%d" % o).digest() * (size // 32 + 1))[:size],
            timestamp=TS0 + 10 * o,
        )
        for o in range(first, first + count)
    ]
    if producer is None:
        return build_batch(recs)
    pid, epoch, seq = producer
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def make_log(
    path: Path,
    *,
    batches: int = 60,
    per_batch: int = 5,
    segment_bytes: int = 4096,
    index_interval_bytes: int = 256,
    producer_id: int | None = None,
    topic: str = "t",
) -> Log:
    """A flushed log of ``batches`` batches (varied sizes) over several sealed segments."""
    log = Log.open(
        path,
        LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes),
        topic=topic,
        partition=0,
    )
    off = 0
    for i in range(batches):
        n = per_batch + (i % 3)
        producer = (producer_id, 0, off) if producer_id is not None else None
        log.append(make_batch(off, n, size=40 + 17 * (i % 5), producer=producer))
        off += n
    log.flush()
    return log


class CountingStore(ObjectStore):
    """A real store with counted calls; ``gate`` (if set) holds every GET until it is set."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.gets: list[tuple[str, int | None, int | None]] = []
        self.gate: asyncio.Event | None = None

    async def put(
        self, key: str, data: bytes | memoryview, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        return await self.inner.put(key, data, if_match=if_match, if_none_match=if_none_match)

    async def put_file(
        self, key: str, path: str | os.PathLike[str], *, offset: int = 0, length: int | None = None
    ) -> str:
        return await self.inner.put_file(key, path, offset=offset, length=length)

    async def get(self, key: str, *, start: int | None = None, end: int | None = None) -> bytes:
        self.gets.append((key, start, end))
        if self.gate is not None:
            await self.gate.wait()
        return await self.inner.get(key, start=start, end=end)

    async def get_view(
        self,
        key: str,
        *,
        start: int | None = None,
        end: int | None = None,
        check: Callable[[memoryview], None] | None = None,
    ) -> memoryview:
        self.gets.append((key, start, end))
        if self.gate is not None:
            await self.gate.wait()
        return await self.inner.get_view(key, start=start, end=end, check=check)

    async def get_with_etag(self, key: str) -> tuple[bytes, str]:
        self.gets.append((key, None, None))
        return await self.inner.get_with_etag(key)

    async def head(self, key: str) -> ObjectInfo | None:
        return await self.inner.head(key)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def delete_many(self, keys: Sequence[str]) -> None:
        await self.inner.delete_many(keys)

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        return await self.inner.list(prefix)

    async def close(self) -> None:
        await self.inner.close()

    async def connect(self) -> None:
        await self.inner.connect()

    def gets_of(self, suffix: str) -> int:
        return sum(1 for k, _, _ in self.gets if k.endswith(suffix))


def _first_timestamp(seg: Segment) -> int:
    data = seg.read_bytes(0, min(seg.size, 4096))
    for _, h in iter_batches(data[: _whole(data)]):
        return h.base_timestamp
    return -1


def _whole(data: bytes) -> int:
    from hot.batch import peek_size

    pos = 0
    while True:
        n = peek_size(data, pos)
        if n is None or pos + n > len(data):
            return pos
        pos += n


async def upload_segment(
    store: ObjectStore,
    manifests: ManifestStore,
    log: Log,
    seg: Segment,
    topic: str,
    topic_id: uuid.UUID,
    partition: int = 0,
    *,
    with_crc32c: bool = True,
) -> RemoteSegment:
    """Upload one sealed segment as the uploader does (its transaction index too, when it
    has entries) and mark it COPIED (``with_crc32c``
    False: a manifest entry in the format written before ``log_crc32c`` existed)."""
    sid = uuid.uuid4()
    keys = segment_keys(topic, topic_id, partition, seg.base_offset, sid)
    await store.put_file(keys.log, seg.log_path)
    await store.put_file(keys.index, seg.index_path)
    await store.put_file(keys.timeindex, seg.timeindex_path)
    snap = log.producer_snapshot_after(seg)
    if snap is not None:
        await store.put_file(keys.producer_snapshot, snap)
    txnindex_size = len(seg.txn_index) * TXN_ENTRY_SIZE
    if txnindex_size:
        await store.put_file(keys.txnindex, seg.txnindex_path, length=txnindex_size)
    with open(seg.log_path, "rb") as f:
        body = f.read()
    sha = hashlib.sha256(body).hexdigest()
    now = int(time.time() * 1000)
    rs = RemoteSegment(
        segment_id=sid,
        base_offset=seg.base_offset,
        last_offset=seg.next_offset - 1,
        first_timestamp=_first_timestamp(seg),
        max_timestamp=seg.max_timestamp,
        size=seg.size,
        log_sha256=sha,
        index_size=Path(seg.index_path).stat().st_size,
        timeindex_size=Path(seg.timeindex_path).stat().st_size,
        leader_epoch=0,
        state=SegmentState.COPY_STARTED,
        keys=keys,
        created_ms=now,
        updated_ms=now,
        has_producer_snapshot=snap is not None,
        log_crc32c=int(crc32c(body)) if with_crc32c else None,
        txnindex_size=txnindex_size or None,
    )
    copied = rs.with_state(SegmentState.COPIED, now)
    await manifests.update(topic, topic_id, partition, lambda m: m.add_or_update(rs))
    await manifests.update(topic, topic_id, partition, lambda m: m.add_or_update(copied))
    return copied


async def upload_all(
    store: ObjectStore,
    manifests: ManifestStore,
    log: Log,
    topic: str,
    topic_id: uuid.UUID,
    partition: int = 0,
    *,
    count: int | None = None,
    with_crc32c: bool = True,
) -> list[RemoteSegment]:
    """Upload the sealed segments (the first ``count`` of them), oldest first."""
    sealed = log.segments()[:-1]
    out = []
    for seg in sealed[:count]:
        rs = await upload_segment(
            store, manifests, log, seg, topic, topic_id, partition, with_crc32c=with_crc32c
        )
        out.append(rs)
    return out


async def set_log_start(
    manifests: ManifestStore, topic: str, topic_id: uuid.UUID, partition: int, offset: int
) -> PartitionManifest:
    return await manifests.update(topic, topic_id, partition, lambda m: m.advance_log_start(offset))
