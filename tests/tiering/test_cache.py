"""The on-disk chunk cache: LRU under a size cap, restart, single-flight, prefetch, damage,
write-behind, whole-object GETs with their SHA-256 check.

GETs are counted by a wrapper around a real file:// store (no mock of the store). Chunk
files are written after the readers got the bytes, so tests that look at files or entries
first wait for those writes (``wait_writes``)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from hot.errors import ObjectNotFoundError
from hot.region import FileRegion
from tests.tiering.tierlib import CountingStore
from tiering.cache import (
    CHUNK_HEADER,
    CHUNK_SUFFIX,
    ChunkCache,
    ChunkFile,
    ChunkMap,
    ObjectCheck,
    RemoteCorruptObjectError,
    sendable,
)
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


def _cache(
    store: CountingStore, tmp_path: Path, chunks: int = 100, prefetch: int = 0, memory: int = 1 << 20
) -> ChunkCache:
    # each file holds the chunk plus a small header: leave room for exactly ``chunks`` of them
    per_file = CHUNK + CHUNK_HEADER.size + len(KEY.encode())
    return ChunkCache(
        store,
        tmp_path / "cache",
        max_bytes=chunks * per_file,
        chunk_bytes=CHUNK,
        prefetch_chunks=prefetch,
        memory_bytes=memory,
    )


def _files(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "cache").rglob(f"*{CHUNK_SUFFIX}"))


async def test_ranges_and_hits(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    for start, end in ((0, 10), (1000, 1100), (0, len(DATA)), (CHUNK * 8, CHUNK * 9 + 50), (5, 5)):
        assert await cache.read(KEY, start, end, object_size=len(DATA)) == DATA[start:end]
    await cache.wait_writes()
    st = cache.stats()
    assert st.gets == 9 and st.misses == 9 and st.entries == 9
    assert st.hits > 0 and st.fetched_bytes == len(DATA)
    assert await cache.get_chunk(KEY, 8, object_size=len(DATA)) == DATA[CHUNK * 8 :]
    assert cache.stats().gets == 9
    await cache.close()


async def test_eviction_under_a_small_cap(store: CountingStore, tmp_path: Path) -> None:
    # no memory tier: every hit below is a read of a chunk file
    cache = _cache(store, tmp_path, chunks=3, memory=0)
    for i in range(6):
        assert await cache.get_chunk(KEY, i, object_size=len(DATA)) == DATA[i * CHUNK : (i + 1) * CHUNK]
        await cache.wait_writes()
    st = cache.stats()
    assert st.entries == 3 and st.evictions == 3 and st.size <= cache.max_bytes
    assert len(_files(tmp_path)) == 3
    # the most recent three are cached; the first was evicted and costs a GET again
    await cache.get_chunk(KEY, 5, object_size=len(DATA))
    assert cache.stats().gets == 6
    await cache.get_chunk(KEY, 0, object_size=len(DATA))
    await cache.wait_writes()
    assert cache.stats().gets == 7
    # a hit refreshes recency: 5 was used, so 3 goes next
    await cache.get_chunk(KEY, 5, object_size=len(DATA))
    await cache.get_chunk(KEY, 1, object_size=len(DATA))
    await cache.wait_writes()
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
    cache = _cache(store, tmp_path, memory=0)  # no memory tier: the next read is of the file
    await cache.get_chunk(KEY, 0, object_size=len(DATA))
    await cache.wait_writes()
    [path] = _files(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    # A file this process wrote is trusted (mapped and sent unread, like a hot segment); one
    # found at start (a crash may have left it half written) is checked on its first read.
    await cache.close()
    cache = _cache(store, tmp_path, memory=0)
    assert await cache.get_chunk(KEY, 0, object_size=len(DATA)) == DATA[:CHUNK]
    await cache.wait_writes()
    st = cache.stats()
    assert st.corrupt == 1 and st.gets == 1
    assert ChunkFile.decode(path.read_bytes(), KEY, 0) == DATA[:CHUNK]  # rewritten good
    await cache.close()


async def test_hits_on_files_written_here_are_file_regions(tmp_path: Path) -> None:
    """A hit on a chunk file this process wrote is mapped, not read, and ``sendable``
    turns views of it into file regions (sendfile) holding exactly those bytes."""
    chunk = 128 << 10  # above SENDFILE_MIN
    data = bytes((i * 13 + i // 509) % 256 for i in range(3 * chunk))
    store = CountingStore(open_store(f"file://{tmp_path}/bucket"))
    await store.put(KEY, data)
    cache = ChunkCache(
        store,
        tmp_path / "cache",
        max_bytes=16 * chunk,
        chunk_bytes=chunk,
        memory_bytes=0,
        mapped_bytes=2 * chunk,
    )
    try:
        await cache.read_views(KEY, 0, len(data), object_size=len(data))  # GETs, files written
        await cache.wait_writes()
        views = await cache.read_views(KEY, 100, len(data) - 7, object_size=len(data))
        assert all(isinstance(v.obj, ChunkMap) for v in views)
        assert b"".join(views) == data[100:-7]
        parts = sendable([*views, b"tail"])
        assert [type(p) for p in parts] == [FileRegion, FileRegion, FileRegion, bytes]
        assert b"".join(p.read() if isinstance(p, FileRegion) else p for p in parts) == data[100:-7] + b"tail"
        assert len(store.gets) == 3 and cache.stats().hits == 3  # one GET per chunk, then hits
        # The mappings are kept: the next hits come without a worker thread (no disk load).
        loads = 0
        real = cache._load_many

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal loads
            loads += 1
            return real(*args, **kwargs)

        cache._load_many = counting  # type: ignore[method-assign]
        # ``mapped_bytes`` keeps the last two chunks mapped: only the first is loaded again.
        again = await cache.read_views(KEY, 0, len(data), object_size=len(data))
        assert loads == 1 and b"".join(again) == data and all(isinstance(v.obj, ChunkMap) for v in again)
        assert len(cache._maps) == 2 and cache._maps_size == 2 * chunk
        await cache.read_views(KEY, 2 * chunk, len(data), object_size=len(data))
        assert loads == 1
        # Invalidated: the mapping goes with the file.
        await cache.invalidate(KEY, object_size=len(data))
        assert not cache._maps
    finally:
        await cache.close()
        await store.close()


async def test_errors_reach_every_waiter_and_are_not_cached(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    with pytest.raises(ObjectNotFoundError, match="nope"):
        await cache.get_chunk("objects/nope.log", 0, object_size=100)
    # an object shorter than its recorded size is corruption, not short data
    with pytest.raises(RemoteCorruptObjectError, match="shorter"):
        await cache.get_chunk(KEY, 8, object_size=len(DATA) + 10)
    with pytest.raises(RemoteCorruptObjectError, match="shorter"):
        await cache.get_chunk(KEY, 9, object_size=len(DATA) + CHUNK)
    await cache.wait_writes()
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


def _sha256_check(expected: str) -> ObjectCheck:
    def check(data: memoryview, crc: int) -> None:
        assert crc == crc32c(data)  # combined from the chunks' CRCs
        if hashlib.sha256(data).hexdigest() != expected:
            raise RemoteCorruptObjectError(KEY, "SHA-256 differs")

    return check


async def test_whole_object_is_one_get_checked_before_it_is_served(
    store: CountingStore, tmp_path: Path
) -> None:
    cache = _cache(store, tmp_path)
    check = _sha256_check(hashlib.sha256(DATA).hexdigest())
    views = await cache.read_views(KEY, 0, 100, object_size=len(DATA), whole=True, check=check)
    assert b"".join(views) == DATA[:100]
    assert store.gets == [(KEY, None, None)] and cache.object_checks == 1
    await cache.wait_writes()
    assert cache.stats().entries == cache.chunk_count(len(DATA))  # split into its chunks
    # the rest comes from the cache: no GET, no second check
    views = await cache.read_views(KEY, 0, len(DATA), object_size=len(DATA), whole=True, check=check)
    assert b"".join(views) == DATA and len(views) == cache.chunk_count(len(DATA))
    assert len(store.gets) == 1 and cache.object_checks == 1
    await cache.close()


async def test_whole_object_failing_its_check_is_never_served_nor_cached(
    store: CountingStore, tmp_path: Path
) -> None:
    cache = _cache(store, tmp_path)
    check = _sha256_check(hashlib.sha256(b"another object").hexdigest())
    for _ in range(2):  # nothing of the failed GET was kept: the second read GETs again
        with pytest.raises(RemoteCorruptObjectError, match="SHA-256"):
            await cache.read_views(KEY, 0, 100, object_size=len(DATA), whole=True, check=check)
    # a prefetch that fails its check leaves nothing either
    assert cache.prefetch(KEY, 0, 1, object_size=len(DATA), whole=True, check=check) == 1
    await cache.wait_prefetches()
    assert len(store.gets) == 3 and cache.stats().entries == 0 and not _files(tmp_path)
    await cache.close()


async def test_whole_object_only_from_its_start_when_small_and_untouched(
    store: CountingStore, tmp_path: Path
) -> None:
    size = len(DATA)
    # larger than whole_object_bytes: chunk by chunk
    small = ChunkCache(
        store,
        tmp_path / "c1",
        max_bytes=1 << 20,
        chunk_bytes=CHUNK,
        prefetch_chunks=0,
        whole_object_bytes=size - 1,
    )
    await small.read_views(KEY, 0, 2 * CHUNK, object_size=size, whole=True)
    assert [(s, e) for _, s, e in store.gets] == [(0, CHUNK), (CHUNK, 2 * CHUNK)]
    await small.close()
    store.gets.clear()
    cache = ChunkCache(store, tmp_path / "c2", max_bytes=1 << 20, chunk_bytes=CHUNK, prefetch_chunks=0)
    # not from the start: chunk by chunk
    await cache.read_views(KEY, CHUNK, CHUNK + 10, object_size=size, whole=True)
    assert [(s, e) for _, s, e in store.gets] == [(CHUNK, 2 * CHUNK)]
    # from the start, but part of the object is cached already: only the missing chunks
    await cache.read_views(KEY, 0, 3 * CHUNK, object_size=size, whole=True)
    assert [(s, e) for _, s, e in store.gets[1:]] == [(0, CHUNK), (2 * CHUNK, 3 * CHUNK)]
    await cache.close()


async def test_readers_do_not_wait_for_the_disk(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    # a file where a chunk subdirectory must go: every chunk file write fails
    name = cache.chunk_name(KEY, 0)
    (tmp_path / "cache" / name[:2]).write_bytes(b"not a directory")
    assert await cache.get_chunk(KEY, 0, object_size=len(DATA)) == DATA[:CHUNK]
    await cache.wait_writes()
    assert cache.stats().entries == 0  # not on disk (the error is logged)...
    assert await cache.get_chunk(KEY, 0, object_size=len(DATA)) == DATA[:CHUNK]
    assert len(store.gets) == 1  # ...but served from memory
    await cache.close()


async def test_invalidate_drops_memory_and_disk(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    await cache.read(KEY, 0, 3 * CHUNK, object_size=len(DATA))
    await cache.wait_writes()
    assert len(_files(tmp_path)) == 3
    await cache.invalidate(KEY, object_size=len(DATA))
    assert not _files(tmp_path) and cache.stats().entries == 0
    assert await cache.read(KEY, 0, 3 * CHUNK, object_size=len(DATA)) == DATA[: 3 * CHUNK]
    assert len(store.gets) == 6
    await cache.close()


async def test_disk_hits_after_restart_are_checked(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path)
    await cache.read(KEY, 0, len(DATA), object_size=len(DATA))
    await cache.close()
    # damage one of several chunk files one read needs (loaded together, in one hop)
    path = tmp_path / "cache" / cache.chunk_name(KEY, 3)[:2] / cache.chunk_name(KEY, 3)
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x10
    path.write_bytes(bytes(raw))
    store.gets.clear()
    again = _cache(store, tmp_path)
    assert await again.read(KEY, 0, len(DATA), object_size=len(DATA)) == DATA
    assert [(s, e) for _, s, e in store.gets] == [(3 * CHUNK, 4 * CHUNK)]
    assert again.stats().corrupt == 1 and again.stats().hits == 8
    await again.close()


async def test_prefetch_in_flight_is_bounded_by_the_memory_tier(store: CountingStore, tmp_path: Path) -> None:
    cache = _cache(store, tmp_path, memory=3 * CHUNK)
    store.gate = asyncio.Event()
    assert cache.prefetch(KEY, 0, 8, object_size=len(DATA)) == 8
    await asyncio.sleep(0)
    assert len(store.gets) == 3  # the rest of the window is left to the reads
    store.gate.set()
    await cache.wait_prefetches()
    assert cache.prefetch(KEY, 3 * CHUNK, 2, object_size=len(DATA)) == 2
    await cache.wait_prefetches()
    assert [s for _, s, _ in store.gets] == [0, CHUNK, 2 * CHUNK, 3 * CHUNK, 4 * CHUNK]
    await cache.close()


def test_chunk_file_round_trip_at_odd_sizes(tmp_path: Path) -> None:
    """Chunk files are written with O_DIRECT where possible (padded to 4 KiB, then truncated):
    whatever the size, the file is exactly header + payload and decodes to the payload."""
    sizes = (0, 1, 4095, 4096, 4097, 300_001, 70_000, 600_000, 300_001)  # the buffer grows, then is reused
    for n, size in enumerate(sizes):
        data = bytes((i * 31 + size) % 256 for i in range(size))
        # large writable sources (pooled GET buffers) are copied with the GIL released
        payload: bytes | memoryview = data if n % 2 else memoryview(bytearray(data))
        path = str(tmp_path / "ab" / f"chunk-{n}{CHUNK_SUFFIX}")
        header = ChunkFile.header(KEY, n, payload)
        assert ChunkFile.write(path, payload, header)
        raw = Path(path).read_bytes()
        assert len(raw) == len(header) + size and raw == ChunkFile.encode(KEY, n, payload)
        assert ChunkFile.decode(raw, KEY, n) == payload
    assert not list(tmp_path.rglob("*.tmp"))


def test_chunk_file_verified_flag_and_first_layout() -> None:
    payload = bytes(range(256)) * 5
    plain = ChunkFile.encode(KEY, 3, payload)
    verified = ChunkFile.encode(KEY, 3, payload, verified=True)
    assert plain[:4] == verified[:4] == b"STC2"
    assert ChunkFile.decode_chunk(plain, KEY, 3) == (payload, False)
    assert ChunkFile.decode_chunk(verified, KEY, 3) == (payload, True)
    # the flag is covered by the CRC: flipping it makes the file damaged, never "verified"
    flipped = bytearray(plain)
    flipped[CHUNK_HEADER.size - 1] ^= 0x01
    assert ChunkFile.decode_chunk(bytes(flipped), KEY, 3) is None
    unknown = bytearray(verified)
    unknown[CHUNK_HEADER.size - 1] = 0x03  # a flag this version does not know
    assert ChunkFile.decode_chunk(bytes(unknown), KEY, 3) is None
    # a header built from the payload's CRC is the same header
    assert ChunkFile.header(KEY, 3, payload, verified=True, payload_crc=crc32c(payload)) == (
        ChunkFile.header(KEY, 3, payload, verified=True)
    )
    # files of the first layout (magic STCC, no flags byte) are still read, as not verified
    kb = KEY.encode()
    body = struct.pack(">IIH", 3, len(payload), len(kb)) + kb
    v1 = b"STCC" + struct.pack(">I", crc32c(payload, crc32c(body))) + body + payload
    assert ChunkFile.decode_chunk(v1, KEY, 3) == (payload, False)
    assert ChunkFile.decode(v1, KEY, 3) == payload
    assert ChunkFile.decode_chunk(v1, KEY, 4) is None  # another chunk's file
    assert ChunkFile.decode_chunk(v1[:-1], KEY, 3) is None  # torn


async def test_whole_object_chunks_stay_verified_in_memory_and_on_disk(
    store: CountingStore, tmp_path: Path
) -> None:
    check = _sha256_check(hashlib.sha256(DATA).hexdigest())
    cache = _cache(store, tmp_path)
    views, verified = await cache.read_checked_views(
        KEY, 0, len(DATA), object_size=len(DATA), whole=True, check=check
    )
    assert b"".join(views) == DATA and verified
    await cache.wait_writes()
    for path in _files(tmp_path):
        assert path.read_bytes()[CHUNK_HEADER.size - 1] == 1  # VERIFIED
    views, verified = await cache.read_checked_views(KEY, 100, 3000, object_size=len(DATA))
    assert b"".join(views) == DATA[100:3000] and verified  # from memory
    await cache.close()
    # a new cache (a restart) reads the files, flag included
    cache = _cache(store, tmp_path)
    views, verified = await cache.read_checked_views(KEY, 0, len(DATA), object_size=len(DATA))
    assert b"".join(views) == DATA and verified and len(store.gets) == 1
    await cache.close()


async def test_ranged_chunks_are_not_verified(store: CountingStore, tmp_path: Path) -> None:
    check = _sha256_check(hashlib.sha256(DATA).hexdigest())
    cache = _cache(store, tmp_path)
    # not from byte 0: chunk GETs, whatever ``whole`` says
    views, verified = await cache.read_checked_views(
        KEY, CHUNK, 3 * CHUNK, object_size=len(DATA), whole=True, check=check
    )
    assert b"".join(views) == DATA[CHUNK : 3 * CHUNK] and not verified
    await cache.wait_writes()
    assert [p.read_bytes()[CHUNK_HEADER.size - 1] for p in _files(tmp_path)] == [0, 0]
    # a read that mixes them with nothing else is still unverified (chunks 1-2 ranged),
    # and the rest of the object can no longer be fetched whole
    views, verified = await cache.read_checked_views(
        KEY, 0, len(DATA), object_size=len(DATA), whole=True, check=check
    )
    assert b"".join(views) == DATA and not verified
    assert all(a is not None for _, a, _ in store.gets) and cache.object_checks == 0
    await cache.close()


def test_chunk_file_zero_copy_from_an_aligned_buffer(tmp_path: Path) -> None:
    """A large chunk of a page-aligned writable buffer (a pooled GET body) gets a header
    padded to 4 KiB and is written straight from its memory; the file decodes to it, and
    anything else takes the copying path with an unpadded header."""
    import mmap

    from tiering import chunk_file as cache_mod

    if not cache_mod._direct_io:
        pytest.skip("no O_DIRECT here")
    buf = mmap.mmap(-1, 3 << 20)
    view = memoryview(buf)
    view[:] = bytes(i % 251 for i in range(256)) * ((3 << 20) // 256)
    cases = [
        (view[: 64 << 10], True),  # exactly whole blocks
        (view[: (64 << 10) + 1], True),  # a 1-byte last block
        (view[1 << 20 : (3 << 20) - 100], True),  # a chunk at an aligned offset, short tail
        (view[1 : 1 << 20], False),  # misaligned start
        (view[: (64 << 10) - 1], False),  # too small to pay for the padding
        (bytes(view[: 1 << 20]), False),  # read-only
    ]
    for n, (payload, zero_copy) in enumerate(cases):
        assert ChunkFile.zero_copy(payload) is zero_copy
        header = ChunkFile.header(KEY, n, payload, verified=True, aligned=zero_copy)
        assert (len(header) % 4096 == 0) is zero_copy
        path = str(tmp_path / "ab" / f"chunk-{n}{CHUNK_SUFFIX}")
        assert ChunkFile.write(path, payload, header)
        raw = Path(path).read_bytes()
        assert len(raw) == len(header) + len(payload)
        assert ChunkFile.decode_chunk(raw, KEY, n) == (bytes(payload), True)
        damaged = bytearray(raw)
        damaged[len(header) - 1 if zero_copy else -1] ^= 0x10  # padding or payload
        assert ChunkFile.decode_chunk(bytes(damaged), KEY, n) is None
    assert not list(tmp_path.rglob("*.tmp"))
    for payload, _ in cases:
        if isinstance(payload, memoryview):
            payload.release()
    view.release()
    buf.close()


async def test_cache_hits_read_on_are_mapped_ahead(
    store: CountingStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunk files after a cache hit are mapped (and read into the page cache) in the
    background, in one worker-thread hop; a reader asking meanwhile joins that load, and
    later reads of them wait for no disk."""
    per_file = CHUNK + CHUNK_HEADER.size + len(KEY.encode())
    cache = ChunkCache(
        store,
        tmp_path / "cache",
        max_bytes=100 * per_file,
        chunk_bytes=CHUNK,
        prefetch_chunks=2,
        memory_bytes=CHUNK,  # the last chunk read; hits on the others are on files
        mapped_bytes=8 * CHUNK,
    )
    size = len(DATA)
    for i in range(cache.chunk_count(size)):
        await cache.get_chunk(KEY, i, object_size=size)
    await cache.wait_prefetches()
    await cache.wait_writes()
    gets = len(store.gets)
    loads: list[list[int]] = []
    load_many = cache._load_many

    def counting(key: str, jobs: Any, trusted: Any = ()) -> Any:
        loads.append([i for _, i in jobs])
        return load_many(key, jobs, trusted)

    monkeypatch.setattr(cache, "_load_many", counting)
    cache._maps.clear()  # as after a restart of reading: nothing mapped
    cache._maps_size = 0
    assert cache.prefetch(KEY, 2 * CHUNK, 3, object_size=size) == 3
    joined = asyncio.create_task(cache.get_chunk(KEY, 3, object_size=size))
    assert await joined == DATA[3 * CHUNK : 4 * CHUNK]
    await cache.wait_prefetches()
    assert loads == [[2, 3, 4]] and cache.stats().coalesced >= 1
    for i in (2, 3, 4):
        chunk = await cache.get_chunk(KEY, i, object_size=size)
        assert chunk == DATA[i * CHUNK : (i + 1) * CHUNK] and isinstance(chunk.obj, ChunkMap)
    assert loads == [[2, 3, 4]] and len(store.gets) == gets  # no disk wait, no GET
    await cache.close()


async def test_a_chunk_file_gone_before_its_load_ahead_is_fetched_again(
    store: CountingStore, tmp_path: Path
) -> None:
    """A reader that joined a load ahead of a chunk file that has gone (or is damaged)
    gets the chunk from a GET, not an error."""
    cache = _cache(store, tmp_path, prefetch=2, memory=CHUNK)
    size = len(DATA)
    for i in range(4):
        await cache.get_chunk(KEY, i, object_size=size)
    await cache.wait_prefetches()
    await cache.wait_writes()
    cache._maps.clear()
    cache._maps_size = 0
    gets = len(store.gets)
    [gone] = [p for p in _files(tmp_path) if ChunkFile.decode(p.read_bytes(), KEY, 1) is not None]
    gone.unlink()
    assert cache.prefetch(KEY, 0, 3, object_size=size) == 3
    joined = asyncio.create_task(cache.get_chunk(KEY, 1, object_size=size))
    assert await joined == DATA[CHUNK : 2 * CHUNK]
    await cache.wait_prefetches()
    assert len(store.gets) == gets + 1 and store.gets[-1][1:] == (CHUNK, 2 * CHUNK)
    await cache.close()
