"""The on-disk chunk cache: LRU under a size cap, restart, single-flight, prefetch, damage.

GETs are counted by a wrapper around a real file:// store (no mock of the store)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hot.errors import ObjectNotFoundError
from tests.tiering.tierlib import CountingStore
from tiering.cache import CHUNK_SUFFIX, ChunkCache, ChunkFile, RemoteCorruptObjectError
from tiering.store import open_store

CHUNK = 1024
KEY = "objects/segment.log"
DATA = bytes((i * 7 + i // 251) % 256 for i in range(CHUNK * 8 + 300))  # 9 chunks, the last short


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[CountingStore]:
    s = CountingStore(open_store(f"file://{tmp_path}/bucket"))
    await s.put(KEY, DATA)
    yield s
    await s.close()


def _cache(store: CountingStore, tmp_path: Path, chunks: int = 100, prefetch: int = 0) -> ChunkCache:
    # each file holds the chunk plus a small header: leave room for exactly ``chunks`` of them
    per_file = CHUNK + 18 + len(KEY.encode())
    return ChunkCache(
        store, tmp_path / "cache", max_bytes=chunks * per_file, chunk_bytes=CHUNK, prefetch_chunks=prefetch
    )


def _files(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "cache").rglob(f"*{CHUNK_SUFFIX}"))


async def test_ranges_and_hits(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    for start, end in ((0, 10), (1000, 1100), (0, len(DATA)), (CHUNK * 8, CHUNK * 9 + 50), (5, 5)):
        assert await cache.read(KEY, start, end, object_size=len(DATA)) == DATA[start:end]
    st = cache.stats()
    assert st.gets == 9 and st.misses == 9 and st.entries == 9
    assert st.hits > 0 and st.fetched_bytes == len(DATA)
    assert await cache.get_chunk(KEY, 8, object_size=len(DATA)) == DATA[CHUNK * 8 :]
    assert cache.stats().gets == 9
    await cache.close()


async def test_eviction_under_a_small_cap(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path, chunks=3)
    for i in range(6):
        assert await cache.get_chunk(KEY, i, object_size=len(DATA)) == DATA[i * CHUNK : (i + 1) * CHUNK]
    st = cache.stats()
    assert st.entries == 3 and st.evictions == 3 and st.size <= cache.max_bytes
    assert len(_files(tmp_path)) == 3
    # the most recent three are cached; the first was evicted and costs a GET again
    await cache.get_chunk(KEY, 5, object_size=len(DATA))
    assert cache.stats().gets == 6
    await cache.get_chunk(KEY, 0, object_size=len(DATA))
    assert cache.stats().gets == 7
    # a hit refreshes recency: 5 was used, so 3 goes next
    await cache.get_chunk(KEY, 5, object_size=len(DATA))
    await cache.get_chunk(KEY, 1, object_size=len(DATA))
    await cache.get_chunk(KEY, 5, object_size=len(DATA))
    assert cache.stats().gets == 8
    await cache.close()


async def test_restart_keeps_the_cache(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    assert await cache.read(KEY, 0, len(DATA), object_size=len(DATA)) == DATA
    await cache.close()
    (tmp_path / "cache" / "ab").mkdir(exist_ok=True)
    (tmp_path / "cache" / "ab" / f"ab{'0' * 38}-00000000{CHUNK_SUFFIX}.tmp").write_bytes(b"torn")
    store.gets.clear()
    again = _cache(store, tmp_path)
    assert again.stats().entries == 9
    assert await again.read(KEY, 0, len(DATA), object_size=len(DATA)) == DATA
    assert store.gets == [] and again.stats().hits == 9
    assert not list((tmp_path / "cache").rglob("*.tmp"))  # leftovers of a crash are removed
    await again.close()
    # a smaller cap at restart evicts down to it
    small = _cache(store, tmp_path, chunks=2)
    assert small.stats().entries == 2 and len(_files(tmp_path)) == 2
    await small.close()


async def test_concurrent_readers_share_one_get(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    store.gate = asyncio.Event()
    readers = [asyncio.create_task(cache.get_chunk(KEY, 2, object_size=len(DATA))) for _ in range(20)]
    await asyncio.sleep(0)  # every reader reached its wait
    store.gate.set()
    results = await asyncio.gather(*readers)
    assert all(r == DATA[2 * CHUNK : 3 * CHUNK] for r in results)
    assert len(store.gets) == 1
    st = cache.stats()
    assert st.misses == 1 and st.coalesced == 19
    await cache.close()


async def test_cancelled_reader_does_not_cancel_the_shared_get(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    store.gate = asyncio.Event()
    first = asyncio.create_task(cache.get_chunk(KEY, 1, object_size=len(DATA)))
    second = asyncio.create_task(cache.get_chunk(KEY, 1, object_size=len(DATA)))
    await asyncio.sleep(0)
    first.cancel()
    store.gate.set()
    assert await second == DATA[CHUNK : 2 * CHUNK]
    assert len(store.gets) == 1
    await cache.close()


async def test_sequential_reads_prefetch_the_next_chunks(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path, prefetch=2)
    await cache.get_chunk(KEY, 0, object_size=len(DATA))
    await cache.wait_prefetches()
    assert cache.stats().prefetches == 0  # one read is not a sequence yet
    await cache.get_chunk(KEY, 1, object_size=len(DATA))
    await cache.wait_prefetches()
    assert cache.stats().prefetches == 2
    assert [(s, e) for k, s, e in store.gets] == [
        (0, CHUNK),
        (CHUNK, 2 * CHUNK),
        (2 * CHUNK, 3 * CHUNK),
        (3 * CHUNK, 4 * CHUNK),
    ]
    assert await cache.get_chunk(KEY, 2, object_size=len(DATA)) == DATA[2 * CHUNK : 3 * CHUNK]
    await cache.wait_prefetches()
    # a hit; reading 2 after 1 prefetches 3 (cached already: skipped) and 4
    st = cache.stats()
    assert st.hits == 1 and st.misses == 2 and st.prefetches == 3
    assert store.gets[-1][1:] == (4 * CHUNK, 5 * CHUNK) and len(store.gets) == 5
    # prefetch stops at the object's end
    await cache.get_chunk(KEY, 7, object_size=len(DATA))
    await cache.get_chunk(KEY, 8, object_size=len(DATA))
    await cache.wait_prefetches()
    assert all(s < len(DATA) for _, s, _ in store.gets if s is not None)
    await cache.close()


async def test_damaged_cache_file_is_refetched_not_served(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    await cache.get_chunk(KEY, 0, object_size=len(DATA))
    [path] = _files(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert await cache.get_chunk(KEY, 0, object_size=len(DATA)) == DATA[:CHUNK]
    st = cache.stats()
    assert st.corrupt == 1 and st.gets == 2
    assert ChunkFile.decode(path.read_bytes(), KEY, 0) == DATA[:CHUNK]  # rewritten good
    await cache.close()


async def test_errors_reach_every_waiter_and_are_not_cached(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    with pytest.raises(ObjectNotFoundError, match="nope"):
        await cache.get_chunk("objects/nope.log", 0, object_size=100)
    # an object shorter than its recorded size is corruption, not short data
    with pytest.raises(RemoteCorruptObjectError, match="shorter"):
        await cache.get_chunk(KEY, 8, object_size=len(DATA) + 10)
    with pytest.raises(RemoteCorruptObjectError, match="shorter"):
        await cache.get_chunk(KEY, 9, object_size=len(DATA) + CHUNK)
    assert cache.stats().entries == 0
    await cache.close()


async def test_disabled_disk_still_reads(store: CountingStore, tmp_path: Path) -> None:
    cache = ChunkCache(store, tmp_path / "none", max_bytes=0, chunk_bytes=CHUNK)
    assert await cache.read(KEY, 10, 3000, object_size=len(DATA)) == DATA[10:3000]
    assert await cache.read(KEY, 10, 3000, object_size=len(DATA)) == DATA[10:3000]
    assert cache.stats().gets == 6 and not os.path.exists(tmp_path / "none")
    await cache.close()


async def test_prefetch_window_skips_cached_chunks_and_readers_join_it(
    store: CountingStore, tmp_path: Path
) -> None:
    cache = _cache(store, tmp_path)
    size = len(DATA)
    await cache.get_chunk(KEY, 1, object_size=size)
    store.gate = asyncio.Event()
    # from the middle of chunk 0: chunk 1 (cached, counted, not fetched) and chunk 2
    assert cache.prefetch(KEY, CHUNK // 2, 2, object_size=size) == 2
    reader = asyncio.create_task(cache.get_chunk(KEY, 2, object_size=size))
    await asyncio.sleep(0)
    store.gate.set()
    assert await reader == DATA[2 * CHUNK : 3 * CHUNK]
    assert [s for _, s, _ in store.gets] == [CHUNK, 2 * CHUNK]
    await cache.wait_prefetches()
    st = cache.stats()
    assert st.prefetches == 1 and st.coalesced == 1 and len(store.gets) == 2
    # the window stops at the object's end and reports what it covered
    last = cache.chunk_count(size) - 1
    assert cache.prefetch(KEY, last * CHUNK, 5, object_size=size) == 1
    assert cache.prefetch(KEY, size, 5, object_size=size) == 0
    await cache.wait_prefetches()
    assert store.gets[-1][1:] == (last * CHUNK, size)
    await cache.close()
