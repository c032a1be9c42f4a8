"""Remote reads against segments produced by a real log and uploaded with the real store.

Every read is compared with the hot log's own read of the same offsets: the bytes served
from the bucket must be identical to what the producer's batches became on disk.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from api.rest import V2_BINARY, create_app
from broker.broker import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Broker
from broker.config import BrokerConfig
from broker.read_path import FetchedPartition, FetchRequestPartition
from hot.errors import OffsetOutOfRangeError
from hot.log import Log
from kwire.error_table import KAFKA_STORAGE_ERROR, kafka_code
from tests.inprocess import broker_of_one, create_topic
from tests.tiering.tierlib import (
    TS0,
    CountingStore,
    make_batch,
    make_log,
    set_log_start,
    upload_all,
    upload_segment,
)
from tiering.cache import DEFAULT_WHOLE_OBJECT_BYTES, ChunkCache
from tiering.keys import manifest_key
from tiering.manifest import RemoteSegment
from tiering.manifest_store import ManifestStore
from tiering.remote_read import (
    RemoteCorruptObjectError,
    RemoteObjectMissingError,
    RemoteReader,
)
from tiering.store import open_store

TOPIC = "orders"
TID = uuid.UUID("0123456789abcdef0123456789abcdef")


class Env:
    def __init__(self, log: Log, store: CountingStore, reader: RemoteReader, segs: list[RemoteSegment]):
        self.log = log
        self.store = store
        self.reader = reader
        self.segs = segs

    @property
    def remote_end(self) -> int:
        return self.segs[-1].last_offset + 1

    async def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        r = await self.reader.read(
            TOPIC, TID, 0, offset, max_bytes, min_one=min_one, max_offset=self.remote_end
        )
        assert r.size == len(r.data)
        return r.data

    def local(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        return self.log.read(offset, max_bytes, max_offset=self.remote_end, min_one=min_one).read()


async def _env(
    tmp_path: Path,
    url: str,
    *,
    chunk_bytes: int = 1024,
    cache_bytes: int = 1 << 20,
    whole_object_bytes: int = DEFAULT_WHOLE_OBJECT_BYTES,
    prefetch_chunks: int = 2,
    with_crc32c: bool = True,
) -> Env:
    log = make_log(tmp_path / "log")
    store = CountingStore(open_store(url))
    manifests = ManifestStore(store)
    segs = await upload_all(store, manifests, log, TOPIC, TID, with_crc32c=with_crc32c)
    assert len(segs) >= 4
    store.gets.clear()  # count the reader's GETs only
    cache = ChunkCache(
        store,
        tmp_path / "cache",
        max_bytes=cache_bytes,
        chunk_bytes=chunk_bytes,
        whole_object_bytes=whole_object_bytes,
        prefetch_chunks=prefetch_chunks,
    )
    return Env(log, store, RemoteReader(store, manifests, cache), segs)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    e = await _env(tmp_path, f"file://{tmp_path}/bucket")
    yield e
    await e.reader.cache.close()
    await e.store.close()
    e.log.close()


def _batch_bounds(log: Log, end: int) -> list[tuple[int, int]]:
    """(base offset, next offset) of every local batch below ``end``."""
    out = []
    for seg in log.segments():
        for b in seg.batches():
            if b.base_offset < end:
                out.append((b.base_offset, b.next_offset))
    return out


async def test_every_offset_reads_byte_identical_to_local(env: Env) -> None:
    bounds = _batch_bounds(env.log, env.remote_end)
    offsets = sorted({o for base, nxt in bounds for o in (base, (base + nxt) // 2, nxt - 1)})
    for max_bytes in (1, 700, 5000, 1 << 20):
        for off in offsets:
            assert await env.read(off, max_bytes) == env.local(off, max_bytes), (off, max_bytes)


async def test_max_bytes_and_min_one(env: Env) -> None:
    first = env.local(0, 1)
    assert first and await env.read(0, 1) == first  # KIP-74: one batch even if larger
    assert await env.read(0, 1, min_one=False) == b""
    two = env.local(0, len(first) + 1, min_one=False)
    assert await env.read(0, len(first) + 1, min_one=False) == two == first  # whole batches only


async def test_read_spans_segments_and_stops_at_max_offset(env: Env) -> None:
    s0, s1 = env.segs[0], env.segs[1]
    r = await env.reader.read(TOPIC, TID, 0, s0.last_offset, 1 << 20, max_offset=s1.last_offset + 1)
    assert r.first_offset <= s0.last_offset and r.next_offset == s1.last_offset + 1
    assert r.data == env.log.read(s0.last_offset, 1 << 20, max_offset=s1.last_offset + 1).read()
    whole = await env.reader.read(TOPIC, TID, 0, 0, 1 << 30, max_offset=env.remote_end)
    assert whole.next_offset == env.remote_end and whole.size == sum(s.size for s in env.segs)
    # cutting a result at a batch boundary gives what a smaller read gives
    cut = whole.truncate(3000, min_one=True)
    assert cut.data == await env.read(0, 3000)
    assert (
        cut.next_offset
        == (await env.reader.read(TOPIC, TID, 0, 0, 3000, max_offset=env.remote_end)).next_offset
    )


async def test_manifest_is_not_fetched_per_read(env: Env) -> None:
    for off in range(0, env.remote_end, 7):
        await env.read(off, 4000)
    assert env.reader.manifest_loads == 1
    assert env.store.gets_of("manifest.json") == 1
    # each index object is fetched once however many reads use it
    assert env.store.gets_of(".index") <= len(env.segs)


async def test_below_log_start_is_out_of_range(env: Env) -> None:
    await set_log_start(env.reader.manifests, TOPIC, TID, 0, env.segs[1].base_offset)
    env.reader.forget(TOPIC, TID, 0)
    with pytest.raises(OffsetOutOfRangeError):
        await env.read(0, 1000)
    assert await env.read(env.segs[1].base_offset, 1000) == env.local(env.segs[1].base_offset, 1000)


async def test_corrupt_object_is_an_error_naming_key_and_offset(env: Env) -> None:
    seg = env.segs[1]
    data = bytearray(await env.store.inner.get(seg.keys.log))
    data[200] ^= 0xFF  # inside a batch, after its CRC field
    await env.store.inner.put(seg.keys.log, bytes(data))
    with pytest.raises(RemoteCorruptObjectError) as info:
        await env.read(seg.base_offset, 1 << 20)
    assert seg.keys.log in str(info.value) and "offset" in str(info.value)
    assert kafka_code(info.value) == KAFKA_STORAGE_ERROR
    # a read that stops before the damage, and other segments, are still served
    assert await env.read(env.segs[0].base_offset, 100) == env.local(env.segs[0].base_offset, 100)
    s2 = env.segs[2].base_offset
    assert await env.read(s2, 1 << 20) == env.local(s2, 1 << 20)


@pytest.mark.parametrize("backend", ["file", "s3"])
@pytest.mark.parametrize(("with_crc32c", "checksum"), [(True, "CRC-32C"), (False, "SHA-256")])
async def test_bit_flip_of_whole_segment_is_refused_and_never_served(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, with_crc32c: bool, checksum: str
) -> None:
    """A bit flipped where no batch CRC looks (the first batch's partitionLeaderEpoch) is
    caught by the whole-object check: CRC-32C for current manifest entries, SHA-256 for
    entries written before ``log_crc32c`` existed. Nothing of the object is served or
    cached: once the good bytes are back, the next read GETs the object again."""
    if backend == "s3":
        url = f"s3://{request.getfixturevalue('s3_bucket')}/tiered"
    else:
        url = f"file://{tmp_path}/bucket"
    env = await _env(tmp_path, url, chunk_bytes=2048, prefetch_chunks=0, with_crc32c=with_crc32c)
    try:
        seg = env.segs[0]
        assert (seg.log_crc32c is not None) is with_crc32c
        good = await env.store.inner.get(seg.keys.log)
        data = bytearray(good)
        data[15] ^= 0x01  # partitionLeaderEpoch low byte of the first batch, outside its CRC
        await env.store.inner.put(seg.keys.log, bytes(data))
        with pytest.raises(RemoteCorruptObjectError) as info:
            await env.reader.read(TOPIC, TID, 0, 0, 1 << 30, max_offset=seg.last_offset + 1)
        msg = str(info.value)
        assert info.value.key == seg.keys.log and seg.keys.log in msg and checksum in msg, msg
        assert kafka_code(info.value) == KAFKA_STORAGE_ERROR
        gets = env.store.gets_of(".log")
        assert gets == 2  # the check failed, the reader refetched once with the cache dropped
        await env.reader.cache.wait_writes()
        assert env.reader.cache.stats().entries == 0  # no chunk file of the bad bytes
        # the other segments are still served
        s1 = env.segs[1]
        assert await env.read(s1.base_offset, 1 << 20) == env.local(s1.base_offset, 1 << 20)
        # good bytes back: read again from the bucket (nothing bad was kept), and served
        await env.store.inner.put(seg.keys.log, good)
        before = env.store.gets_of(".log")
        r = await env.reader.read(TOPIC, TID, 0, 0, 1 << 30, max_offset=seg.last_offset + 1)
        assert r.data == env.local(0, seg.size) and env.store.gets_of(".log") == before + 1
    finally:
        await env.reader.cache.close()
        await env.store.close()
        env.log.close()


async def test_old_and_new_manifest_entries_read_alike(tmp_path: Path) -> None:
    """Segments recorded without ``log_crc32c`` (an older Strata) and with it, in one
    manifest, read byte-identical to the local log; each whole-object GET is checked."""
    log = make_log(tmp_path / "log")
    store = CountingStore(open_store(f"file://{tmp_path}/bucket"))
    manifests = ManifestStore(store)
    sealed = log.segments()[:-1]
    segs = [
        await upload_segment(store, manifests, log, s, TOPIC, TID, with_crc32c=i % 2 == 1)
        for i, s in enumerate(sealed)
    ]
    doc = json.loads(await store.inner.get(manifest_key(TOPIC, TID, 0)))
    assert ["log_crc32c" in d for d in doc["segments"]] == [i % 2 == 1 for i in range(len(segs))]
    cache = ChunkCache(store, tmp_path / "cache", max_bytes=1 << 20, chunk_bytes=1024, prefetch_chunks=0)
    env = Env(log, store, RemoteReader(store, manifests, cache), segs)
    try:
        r = await env.reader.read(TOPIC, TID, 0, 0, 1 << 30, max_offset=env.remote_end)
        assert r.data == env.local(0, 1 << 30)
        assert env.reader.object_checks == len(segs) == env.store.gets_of(".log")
    finally:
        await cache.close()
        await store.close()
        log.close()


async def test_whole_segment_checksum_is_checked_once_per_segment(tmp_path: Path) -> None:
    env = await _env(tmp_path, f"file://{tmp_path}/bucket", prefetch_chunks=0)  # GETs by reads only
    seg = env.segs[0]
    for _ in range(3):
        r = await env.reader.read(TOPIC, TID, 0, 0, seg.size, max_offset=env.remote_end)
        assert r.data == env.local(0, seg.size) and r.size == seg.size
    assert env.reader.object_checks == 1  # in the GET of the whole segment; hits never hash
    assert env.store.gets_of(".log") == 1
    # a read from the start of a segment, however small, GETs it whole (and checks it)
    s1 = env.segs[1]
    assert await env.read(s1.base_offset, 100) == env.local(s1.base_offset, 100)
    assert env.reader.object_checks == 2 and env.store.gets_of(".log") == 2
    assert await env.read(s1.base_offset, s1.size) == env.local(s1.base_offset, s1.size)
    assert env.reader.object_checks == 2 and env.store.gets_of(".log") == 2
    # a read from the middle of an untouched segment GETs chunks: no hash; every batch it
    # serves is still CRC-checked
    s3 = env.segs[3]
    _, pos = (await env.reader.offset_index(s3)).lookup(s3.last_offset)
    assert pos > 0
    r = await env.reader.read(TOPIC, TID, 0, s3.last_offset, 3000, max_offset=s3.last_offset + 1)
    assert r.data == env.log.read(s3.last_offset, 3000, max_offset=s3.last_offset + 1).read()
    assert env.reader.object_checks == 2
    assert [a for k, a, _ in env.store.gets if k == s3.keys.log] == [pos // 1024 * 1024]
    await env.reader.cache.close()
    await env.store.close()
    env.log.close()


async def test_read_prefetches_the_following_segment_whole(env: Env) -> None:
    s0, s1, s2 = env.segs[0], env.segs[1], env.segs[2]
    assert s1.size <= env.reader.cache.whole_object_bytes
    r = await env.reader.read(TOPIC, TID, 0, s0.last_offset, 1, max_offset=s2.base_offset)
    assert r.next_offset == s1.base_offset
    await env.reader.wait_prefetches()
    # one GET of the whole next segment, its SHA-256 checked in that GET
    assert [(a, b) for k, a, b in env.store.gets if k == s1.keys.log] == [(None, None)]
    assert env.reader.object_checks == 1
    before = len(env.store.gets)
    assert await env.read(s1.base_offset, s1.size) == env.local(s1.base_offset, s1.size)
    await env.reader.wait_prefetches()
    assert not any(k == s1.keys.log for k, _, _ in env.store.gets[before:])
    # and the next prefetch GETs the following segments whole (two fetches' worth), s2 first
    later = [(k, a) for k, a, _ in env.store.gets[before:] if k.endswith(".log")]
    assert later[0] == (s2.keys.log, None) and all(a is None for _, a in later)
    assert env.reader.object_checks == 1 + len(later)


async def test_batches_checked_against_the_whole_segment_are_not_validated_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment fetched whole passed its manifest CRC-32C: its batches are served without
    a second CRC pass, from memory and from chunk files (VERIFIED) after a restart. Bytes
    from ranged GETs are validated batch by batch, every time."""
    import tiering.remote_read as remote_read

    validated: list[int] = []
    real = remote_read.validate_batches

    def counting(data: object, seg: RemoteSegment, position: int) -> None:
        validated.append(position)
        real(data, seg, position)  # type: ignore[arg-type]

    monkeypatch.setattr(remote_read, "validate_batches", counting)
    env = await _env(tmp_path, f"file://{tmp_path}/bucket", prefetch_chunks=0)
    s0, s3 = env.segs[0], env.segs[3]
    try:
        for _ in range(2):  # a GET of the whole segment, then memory
            assert await env.read(s0.base_offset, s0.size) == env.local(s0.base_offset, s0.size)
        assert env.reader.object_checks == 1 and validated == []
        await env.reader.cache.close()
        # restart: the chunk files say VERIFIED
        cache = ChunkCache(
            env.store, tmp_path / "cache", max_bytes=1 << 20, chunk_bytes=1024, prefetch_chunks=0
        )
        env.reader = RemoteReader(env.store, ManifestStore(env.store), cache)
        gets = env.store.gets_of(".log")
        mid = (s0.base_offset + s0.last_offset) // 2
        end = s0.last_offset + 1
        r = await env.reader.read(TOPIC, TID, 0, mid, 1 << 20, max_offset=end)
        assert r.data == env.log.read(mid, 1 << 20, max_offset=end).read()
        assert env.store.gets_of(".log") == gets and validated == []
        # the middle of an untouched segment: ranged chunk GETs, every batch validated
        r = await env.reader.read(TOPIC, TID, 0, s3.last_offset, 3000, max_offset=s3.last_offset + 1)
        assert r.data == env.log.read(s3.last_offset, 3000, max_offset=s3.last_offset + 1).read()
        assert len(validated) == 1
        r = await env.reader.read(TOPIC, TID, 0, s3.last_offset, 3000, max_offset=s3.last_offset + 1)
        assert len(validated) == 2  # and again on a cache hit
    finally:
        await env.reader.cache.close()
        await env.store.close()
        env.log.close()


@pytest.fixture
async def chunked_env(tmp_path: Path) -> AsyncIterator[Env]:
    """Segments never GET whole (as if every one were larger than ``whole_object_bytes``)."""
    e = await _env(tmp_path, f"file://{tmp_path}/bucket", whole_object_bytes=0)
    yield e
    await e.reader.cache.close()
    await e.store.close()
    e.log.close()


async def test_read_prefetches_the_following_chunks_into_the_next_segment(chunked_env: Env) -> None:
    env = chunked_env
    s0, s1, s2 = env.segs[0], env.segs[1], env.segs[2]
    chunk = env.reader.cache.chunk_bytes
    assert env.reader.cache.prefetch_chunks == 2 and s1.size > 2 * chunk
    # a read that ends with s0: the next bytes are s1's first two chunks
    r = await env.reader.read(TOPIC, TID, 0, s0.last_offset, 1, max_offset=s2.base_offset)
    assert r.next_offset == s0.last_offset + 1 == s1.base_offset
    await env.reader.wait_prefetches()
    assert [(a, b) for k, a, b in env.store.gets if k == s1.keys.log] == [(0, chunk), (chunk, 2 * chunk)]
    # nothing is prefetched at or past ``max_offset``: the hot tier serves those offsets
    r = await env.reader.read(TOPIC, TID, 0, s1.last_offset, 1, max_offset=s2.base_offset)
    assert r.next_offset == s2.base_offset
    await env.reader.wait_prefetches()
    assert not any(k == s2.keys.log for k, _, _ in env.store.gets)
    # a read of the prefetched bytes finds them cached: no GET of them again
    before = len(env.store.gets)
    assert await env.read(s1.base_offset, chunk) == env.local(s1.base_offset, chunk)
    await env.reader.wait_prefetches()
    assert not [(k, a) for k, a, _ in env.store.gets[before:] if k == s1.keys.log and a in (0, chunk)]


async def test_impossible_header_and_truncated_object(env: Env) -> None:
    seg = env.segs[0]
    data = bytearray(await env.store.inner.get(seg.keys.log))
    data[8:12] = (3).to_bytes(4, "big")  # batchLength below the minimum
    await env.store.inner.put(seg.keys.log, bytes(data))
    with pytest.raises(RemoteCorruptObjectError, match=seg.keys.log):
        await env.read(0, 1000)
    s1 = env.segs[1]
    await env.store.inner.put(s1.keys.log, (await env.store.inner.get(s1.keys.log))[: s1.size // 2])
    with pytest.raises(RemoteCorruptObjectError, match=s1.keys.log):
        await env.read(s1.last_offset, 1000)


async def test_corrupt_index_is_an_error_naming_it(env: Env) -> None:
    seg = env.segs[2]
    assert seg.index_size >= 16
    idx = bytearray(await env.store.inner.get(seg.keys.index))
    idx[4:8] = (seg.size + 5).to_bytes(4, "big")  # a position past the segment end
    await env.store.inner.put(seg.keys.index, bytes(idx))
    with pytest.raises(RemoteCorruptObjectError, match=seg.keys.index):
        await env.read(seg.last_offset, 1000)


async def test_missing_object_is_an_error_naming_key(env: Env) -> None:
    seg = env.segs[1]
    await env.store.inner.delete(seg.keys.log)
    with pytest.raises(RemoteObjectMissingError) as info:
        await env.read(seg.base_offset, 1000)
    assert seg.keys.log in str(info.value) and info.value.key == seg.keys.log
    assert kafka_code(info.value) == KAFKA_STORAGE_ERROR
    # the stale-manifest path reloaded the manifest once before giving up
    assert env.reader.manifest_loads == 2


async def test_no_manifest_is_an_error(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/bucket")
    reader = RemoteReader(store, ManifestStore(store), ChunkCache(store, tmp_path / "c", max_bytes=0))
    with pytest.raises(RemoteObjectMissingError, match=r"manifest\.json"):
        await reader.read(TOPIC, TID, 0, 0, 100)
    await store.close()


async def test_offset_for_timestamp_matches_local(env: Env) -> None:
    for off in (0, 1, 7, 50, env.segs[2].base_offset, env.remote_end - 1):
        ts = TS0 + 10 * off  # tierlib's timestamps
        remote = await env.reader.offset_for_timestamp(TOPIC, TID, 0, ts, max_offset=env.remote_end)
        assert remote == env.log.offset_for_timestamp(ts) == (off, ts)
        between = await env.reader.offset_for_timestamp(TOPIC, TID, 0, ts - 5, max_offset=env.remote_end)
        assert between == (off, ts)
    after = TS0 + 10 * env.remote_end
    assert await env.reader.offset_for_timestamp(TOPIC, TID, 0, after, max_offset=env.remote_end) is None
    assert await env.reader.max_timestamp(TOPIC, TID, 0, max_offset=env.remote_end) == after - 10


async def test_reads_from_s3(tmp_path: Path, s3_bucket: str) -> None:
    e = await _env(tmp_path, f"s3://{s3_bucket}/tiered", chunk_bytes=2048)
    try:
        for off in (0, 3, e.segs[1].base_offset + 2, e.remote_end - 1):
            assert await e.read(off, 3000) == e.local(off, 3000)
        whole = await e.reader.read(TOPIC, TID, 0, 0, 1 << 30, max_offset=e.remote_end)
        assert whole.data == e.local(0, 1 << 30)
    finally:
        await e.reader.cache.close()
        await e.store.close()
        e.log.close()


# --- through the broker: fetch, ListOffsets and REST across the tier boundary -------------------


@dataclass
class _Tier:
    """What the broker takes of the tiering service: its reader."""

    reader: RemoteReader


@pytest.fixture
async def tiered_broker(tmp_path: Path) -> AsyncIterator[tuple[Broker, dict[int, bytes]]]:
    """A broker whose topic ``orders`` (2 partitions) has its oldest segments only in the
    bucket; yields it and each partition's complete bytes as produced."""
    config = BrokerConfig(data_dir=tmp_path / "data")
    store = open_store(f"file://{tmp_path}/bucket")
    manifests = ManifestStore(store)
    reader = RemoteReader(
        store, manifests, ChunkCache(store, tmp_path / "cache", max_bytes=1 << 20, chunk_bytes=2048)
    )
    try:
        async with broker_of_one(config, tiering=_Tier(reader)) as broker:
            manager = broker.manager
            info = await create_topic(
                broker,
                TOPIC,
                2,
                configs={
                    "segment.bytes": "4096",
                    "index.interval.bytes": "256",
                    "local.retention.bytes": "0",
                },
            )
            complete: dict[int, bytes] = {}
            for p in range(2):
                off = 0
                for i in range(50):
                    n = 3 + (i + p) % 4
                    res = await broker.writes.produce(
                        TOPIC, p, make_batch(off, n, size=50 + 13 * (i % 4)), acks=1, timeout_ms=5000
                    )
                    assert res.error is None and res.base_offset == off
                    off += n
                lg = manager.get_log(TOPIC, p)
                complete[p] = lg.read(0, 1 << 30).read()
                await upload_all(store, manifests, lg, TOPIC, info.topic_id, p)
                assert lg.apply_local_retention(int(time.time() * 1000), lambda seg: True)
                assert lg.log_start_offset == 0 < lg.local_log_start_offset < lg.high_watermark
            yield broker, complete
    finally:
        await reader.cache.close()
        await store.close()


async def _fetch(
    broker: Broker, parts: list[tuple[int, int]], max_bytes: int = 1 << 20
) -> list[FetchedPartition]:
    return await broker.reads.fetch(
        [FetchRequestPartition(TOPIC, p, off, 1 << 20) for p, off in parts],
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=max_bytes,
    )


async def test_broker_fetch_is_seamless_across_the_boundary(
    tiered_broker: tuple[Broker, dict[int, bytes]],
) -> None:
    broker, complete = tiered_broker
    got = {0: b"", 1: b""}
    offsets = {0: 0, 1: 0}
    sources: set[str] = set()
    hw = {p: broker.manager.get_log(TOPIC, p).high_watermark for p in (0, 1)}
    while any(offsets[p] < hw[p] for p in (0, 1)):
        fetched = await _fetch(broker, [(p, offsets[p]) for p in (0, 1) if offsets[p] < hw[p]], 3000)
        for f in fetched:
            assert f.error is None, f.error
            data = f.read()
            sources.add("remote" if f.remote else "local" if f.regions else "none")
            got[f.partition] += data
            if data:
                *_, last = [h for h in _headers(data)]
                offsets[f.partition] = last
    assert got == complete
    assert {"remote", "local"} <= sources


def _headers(data: bytes) -> list[int]:
    from hot.batch import iter_batches

    return [h.next_offset for _, h in iter_batches(data)]


async def test_broker_fetch_budget_spans_remote_and_local(
    tiered_broker: tuple[Broker, dict[int, bytes]],
) -> None:
    broker, complete = tiered_broker
    local0 = broker.manager.get_log(TOPIC, 0).local_log_start_offset
    # one request, one remote and one local partition
    fetched = await _fetch(broker, [(1, 0), (0, local0)])
    assert fetched[0].remote and not fetched[0].regions
    assert fetched[1].regions and not fetched[1].remote
    assert complete[1].startswith(fetched[0].read())
    # a tiny budget: the first partition gets one whole batch (KIP-74), the second nothing
    small = await _fetch(broker, [(0, 0), (1, 0)], max_bytes=10)
    assert len(list(_headers(small[0].read()))) == 1 and small[1].size == 0
    # the budget is shared in request order
    budget = 2500
    both = await _fetch(broker, [(0, 0), (1, 0)], max_bytes=budget)
    assert both[0].size > 0 and both[0].size + both[1].size <= budget


async def test_broker_list_offsets_span_both_tiers(tiered_broker: tuple[Broker, dict[int, bytes]]) -> None:
    broker, _ = tiered_broker
    lg = broker.manager.get_log(TOPIC, 0)
    assert await broker.list_offset(TOPIC, 0, EARLIEST_TIMESTAMP) == (0, -1)
    assert await broker.list_offset(TOPIC, 0, LATEST_TIMESTAMP) == (lg.high_watermark, -1)
    for off in (0, 5, lg.local_log_start_offset - 1, lg.local_log_start_offset, lg.high_watermark - 1):
        ts = TS0 + 10 * off
        assert await broker.list_offset(TOPIC, 0, ts) == (off, ts)
        assert await broker.list_offset(TOPIC, 0, ts - 3) == (off, ts)
    assert await broker.list_offset(TOPIC, 0, TS0 + 10 * lg.high_watermark) == (-1, -1)
    last = lg.high_watermark - 1
    assert await broker.list_offset(TOPIC, 0, MAX_TIMESTAMP) == (last, TS0 + 10 * last)


async def test_rest_fetch_reads_remote_offsets(tiered_broker: tuple[Broker, dict[int, bytes]]) -> None:
    broker, _ = tiered_broker
    transport = httpx.ASGITransport(app=create_app(broker))
    async with httpx.AsyncClient(transport=transport, base_url="http://strata.test") as client:
        r = await client.get(
            f"/topics/{TOPIC}/partitions/0/records",
            params={"offset": 2, "max_bytes": 100000, "timeout": 0},
            headers={"Accept": V2_BINARY},
        )
        assert r.status_code == 200, r.text
        records = r.json()
        assert records[0]["offset"] == 2
        assert [rec["offset"] for rec in records] == list(range(2, 2 + len(records)))
        assert base64.b64decode(records[0]["key"]) == b"k2"


# --- remote bytes on their way to the socket ---------------------------------------------------


def test_remote_records_are_frame_parts_not_copies() -> None:
    """A remote read's chunk views go to the Fetch encoder as frame parts of their own (as
    file regions do): the 8 MiB of a fetch are not copied into the encoder's buffer."""
    from kwire import RequestHeader, decode_response, encode_frame, encode_response
    from kwire.messages.fetch import FetchableTopicResponse, FetchPartitionData, FetchResponse
    from kwire.schema import PASS_THROUGH_BYTES

    blob = bytes(range(256)) * (4 * PASS_THROUGH_BYTES // 256)
    big1 = memoryview(blob)[: 2 * PASS_THROUGH_BYTES]
    small = memoryview(blob)[2 * PASS_THROUGH_BYTES : 2 * PASS_THROUGH_BYTES + 100]
    big2 = memoryview(blob)[2 * PASS_THROUGH_BYTES + 100 :]
    resp = FetchResponse(
        responses=(
            FetchableTopicResponse(
                topic="t",
                partitions=(
                    FetchPartitionData(partition_index=0, high_watermark=9, records=(big1, small, big2)),
                ),
            ),
        )
    )
    for version in (11, 12):
        parts = encode_response(RequestHeader(1, version, 7, "c"), resp)
        assert any(p is big1 for p in parts) and any(p is big2 for p in parts)
        assert not any(p is small for p in parts)  # small pieces are merged into the bytes around
        framed = encode_frame(parts)
        frame = b"".join(bytes(p) for p in framed)  # type: ignore[arg-type]
        corr, decoded = decode_response(1, version, frame[4:], strict=True)
        assert corr == 7 and decoded.responses[0].partitions[0].records == blob


async def test_a_mostly_full_read_does_not_wait_for_the_next_segment(tmp_path: Path) -> None:
    """Past half its budget, a read stops at a segment's end rather than wait for the next
    segment's GET (the read-ahead brings it for the next fetch); with the next segment at
    hand it goes on into it."""
    e = await _env(tmp_path, f"file://{tmp_path}/bucket", prefetch_chunks=0)
    try:
        s0, s1 = e.segs[0], e.segs[1]
        budget = s0.size + s0.size // 4
        r = await e.reader.read(TOPIC, TID, 0, 0, budget, max_offset=e.remote_end)
        assert r.next_offset == s1.base_offset and r.data == e.local(0, s0.size)
        assert e.store.gets_of(s1.keys.log) == 0
        await e.reader.read(TOPIC, TID, 0, s1.base_offset, 1, max_offset=e.remote_end)
        r = await e.reader.read(TOPIC, TID, 0, 0, budget, max_offset=e.remote_end)
        assert r.next_offset > s1.base_offset and r.data == e.local(0, budget)
        assert e.store.gets_of(s1.keys.log) == 1
    finally:
        await e.reader.cache.close()
        await e.store.close()
        e.log.close()


async def test_read_ahead_follows_the_consumers_pace_within_the_read_memory(tmp_path: Path) -> None:
    """The read-ahead after a read: the bytes a consumer takes while one GET runs, plus a
    fetch; never less than ``prefetch_chunks`` / two fetches, never more than half the
    read memory."""
    store = CountingStore(open_store(f"file://{tmp_path}/bucket"))
    now = [100.0]
    chunk, memory, fetch = 1 << 20, 128 << 20, 8 << 20
    cache = ChunkCache(
        store,
        tmp_path / "cache",
        max_bytes=1 << 30,
        chunk_bytes=chunk,
        prefetch_chunks=3,
        memory_bytes=memory,
    )
    reader = RemoteReader(store, ManifestStore(store), cache, clock=lambda: now[0])
    tp = (TOPIC, TID, 0)
    base = 16  # two fetches of 8 MiB in 1 MiB chunks
    try:
        assert reader._read_ahead_chunks(tp, 0, fetch, now[0]) == base  # no stream yet
        reader._note_stream(tp, 1000, fetch)
        assert reader._read_ahead_chunks(tp, 1000, fetch, now[0] + 0.001) == base  # no GET timed yet
        cache.get_seconds = 0.05
        # asked again 10 ms after 8 MiB: 40 MiB while a GET runs, plus a fetch
        assert reader._read_ahead_chunks(tp, 1000, fetch, now[0] + 0.01) == 40 + 8
        # 2 ms: 200 MiB, capped by half the read memory
        assert reader._read_ahead_chunks(tp, 1000, fetch, now[0] + 0.002) == memory // 2 // chunk
        # 100 ms: 4 MiB while a GET runs, plus a fetch
        assert reader._read_ahead_chunks(tp, 1000, fetch, now[0] + 0.1) == base
        cache.get_seconds = 0.2  # a slower bucket: more ahead for the same consumer
        assert reader._read_ahead_chunks(tp, 1000, fetch, now[0] + 0.1) == 8 + 16
        # a slow consumer, or a read that does not continue the stream: the floor
        assert reader._read_ahead_chunks(tp, 1000, fetch, now[0] + 30) == base
        assert reader._read_ahead_chunks(tp, 5, fetch, now[0] + 0.01) == base
    finally:
        await cache.close()
        await store.close()
