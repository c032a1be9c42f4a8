"""Object stores against both real backends: a local directory and S3 over HTTP (moto server)."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hot.errors import (
    InvalidConfigError,
    InvalidRequestError,
    ObjectNotFoundError,
    ObjectStoreError,
    PreconditionFailedError,
    RetriableObjectStoreError,
    StorageError,
)
from tests.brokers import S3Endpoint
from tiering.file_store import ETAG_XATTR, FileStore
from tiering.s3_store import MIN_PART_SIZE, BufferPool, S3Store
from tiering.s3_store import _read_body_into as read_body_into
from tiering.store import InvalidRangeError, ObjectStore, SyncObjectStore, open_store


def _url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    if backend == "file":
        return f"file://{tmp_path}/objects"
    bucket = request.getfixturevalue("s3_bucket")
    return f"s3://{bucket}/some/prefix"


@pytest.fixture(params=["file", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    s = open_store(_url(request, request.param, tmp_path), part_size=MIN_PART_SIZE)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture(params=["file", "s3"])
def sync_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SyncObjectStore]:
    with SyncObjectStore.open(_url(request, request.param, tmp_path)) as s:
        yield s


def _data(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


async def test_put_get_head_list_delete(store: ObjectStore) -> None:
    etag = await store.put("a/b/one", b"hello")
    assert await store.get("a/b/one") == b"hello"
    info = await store.head("a/b/one")
    assert info is not None
    assert (info.key, info.size, info.etag) == ("a/b/one", 5, etag)
    assert info.last_modified_ms > 1_600_000_000_000
    data, etag2 = await store.get_with_etag("a/b/one")
    assert (data, etag2) == (b"hello", etag)

    await store.put("a/b/two", memoryview(b"second"))
    await store.put("a/c", b"")
    await store.put("z", b"zz")
    assert [o.key for o in await store.list()] == ["a/b/one", "a/b/two", "a/c", "z"]
    assert [o.key for o in await store.list("a/b/")] == ["a/b/one", "a/b/two"]
    assert [o.key for o in await store.list("a/b/t")] == ["a/b/two"]
    assert [o.key for o in await store.list("a/")] == ["a/b/one", "a/b/two", "a/c"]
    assert await store.list("nothing/") == []
    listed = {o.key: o for o in await store.list("a/b/")}
    assert listed["a/b/one"].etag == etag and listed["a/b/one"].size == 5

    # Overwrite: new content, new etag.
    etag3 = await store.put("a/b/one", b"HELLO!")
    assert etag3 != etag
    assert await store.get("a/b/one") == b"HELLO!"

    await store.delete("a/b/one")
    await store.delete("a/b/one")  # idempotent
    assert await store.head("a/b/one") is None
    assert not await store.exists("a/b/one")
    await store.delete_many(["a/b/two", "a/c", "never/was"])
    await store.delete_many([])
    assert [o.key for o in await store.list()] == ["z"]


async def test_missing_key_names_the_key(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFoundError, match="no/such/key"):
        await store.get("no/such/key")
    with pytest.raises(ObjectNotFoundError, match="no/such/key"):
        await store.get_with_etag("no/such/key")
    with pytest.raises(ObjectNotFoundError, match="no/such/key"):
        await store.get("no/such/key", start=3, end=3)
    assert await store.head("no/such/key") is None
    # A "directory" is not an object on either backend.
    await store.put("dir/file", b"x")
    assert await store.head("dir") is None
    with pytest.raises(ObjectNotFoundError):
        await store.get("dir")


async def test_ranged_get(store: ObjectStore) -> None:
    data = bytes(range(100))
    await store.put("r", data)
    assert await store.get("r", start=10, end=20) == data[10:20]
    assert await store.get("r", start=90) == data[90:]
    assert await store.get("r", end=5) == data[:5]
    assert await store.get("r", start=95, end=1000) == data[95:]  # past the end: what exists
    assert await store.get("r", start=99, end=100) == data[99:]
    assert await store.get("r", start=40, end=40) == b""
    with pytest.raises(InvalidRangeError, match="100-byte") as ei:
        await store.get("r", start=100)
    assert ei.value.object_size == 100 and not ei.value.retriable
    with pytest.raises(InvalidRangeError):
        await store.get("r", start=150, end=200)
    with pytest.raises(InvalidRequestError):
        await store.get("r", start=20, end=10)
    with pytest.raises(InvalidRequestError):
        await store.get("r", start=-1)
    await store.put("empty", b"")
    assert await store.get("empty") == b""
    assert await store.get("empty", start=0, end=10) == b""


async def test_get_view_same_bytes_ranges_and_errors_as_get(store: ObjectStore) -> None:
    data = _data(3 << 20, seed=5)
    await store.put("v", data)
    views = []
    for start, end in ((None, None), (10, 20), (4096, None), (None, 5), (len(data) - 3, len(data) + 9)):
        v = await store.get_view("v", start=start, end=end)
        assert isinstance(v, memoryview)
        assert v == await store.get("v", start=start, end=end)
        views.append(v)
    # every view still holds its own bytes after later GETs (no buffer reused under a view)
    assert views[0] == data and views[1] == data[10:20] and views[2] == data[4096:]
    assert await store.get_view("v", start=40, end=40) == b""
    with pytest.raises(InvalidRangeError):
        await store.get_view("v", start=len(data))
    with pytest.raises(ObjectNotFoundError, match="nope"):
        await store.get_view("nope")
    await store.put("empty", b"")
    assert await store.get_view("empty") == b""


async def test_s3_get_view_reuses_buffers_nobody_views(s3_bucket: str) -> None:
    store = open_store(f"s3://{s3_bucket}/pool")
    assert isinstance(store, S3Store)
    try:
        small = _data(1000, seed=3)
        await store.put("small", small)
        assert await store.get_view("small") == small and store.buffers.allocated == 0  # plain bytes
        a, b = _data(1 << 20, seed=1), _data(1 << 20, seed=2)
        await store.put("a", a)
        await store.put("b", b)
        va = await store.get_view("a")
        vb = await store.get_view("b")
        assert va == a and vb == b and store.buffers.allocated == 2
        slice_of_a = va[100:200]
        del va
        vb2 = await store.get_view("b")  # a's buffer is still seen through a slice
        assert store.buffers.allocated == 3 and slice_of_a == a[100:200] and vb == b == vb2
        del slice_of_a, vb
        for _ in range(3):
            assert await store.get_view("a") == a
        assert store.buffers.allocated == 3 and store.buffers.reused == 3
    finally:
        await store.close()


def test_buffer_pool_never_reuses_a_viewed_buffer() -> None:
    pool = BufferPool(max_free_bytes=3 * 4096)
    m1 = pool.take(5000)
    assert len(m1) == 8192  # whole pages
    v = memoryview(m1)[:10]
    del m1
    m2 = pool.take(5000)  # m1 is still viewed through v
    assert pool.allocated == 2
    m2[:4] = b"abcd"
    del v
    m3 = pool.take(8000)  # m1 is free now (m2 is still referenced here)
    assert pool.allocated == 2 and pool.reused == 1 and m3 is not m2
    del m2, m3
    pool.take(100_000)  # frees both; only 3 pages of free buffers are kept
    assert sum(len(m) for m in pool._free) <= 3 * 4096


class _Body:
    """A response body without the http.client layout: read() and copy is used."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data


def test_read_body_into_fallback_checks_the_length() -> None:
    view = memoryview(bytearray(5))
    read_body_into(_Body(b"12345"), view)
    assert view == b"12345"
    for wrong in (b"1234", b"123456"):
        with pytest.raises(OSError, match="Content-Length"):
            read_body_into(_Body(wrong), memoryview(bytearray(5)))


async def test_put_file_multipart_exact_bytes(store: ObjectStore, tmp_path: Path) -> None:
    data = _data(11 * 1024 * 1024 + 123)  # three 5 MiB parts, the last one short
    src = tmp_path / "segment.log"
    src.write_bytes(data)
    etag = await store.put_file("seg/0.log", src)
    assert await store.get("seg/0.log") == data
    info = await store.head("seg/0.log")
    assert info is not None and info.size == len(data) and info.etag == etag
    if isinstance(store, S3Store):
        assert etag.endswith("-3")  # really went through multipart
    assert (
        await store.get("seg/0.log", start=5 * 1024 * 1024 - 7, end=5 * 1024 * 1024 + 9)
        == (data[5 * 1024 * 1024 - 7 : 5 * 1024 * 1024 + 9])
    )
    # Idempotent overwrite with the same content.
    assert await store.put_file("seg/0.log", src) == etag
    # A window of the file, large (multipart) and small (single put).
    off, n = 1234, 10 * 1024 * 1024 + 1
    await store.put_file("seg/window", src, offset=off, length=n)
    assert await store.get("seg/window") == data[off : off + n]
    await store.put_file("seg/small", src, offset=7, length=1000)
    assert await store.get("seg/small") == data[7:1007]
    await store.put_file("seg/tail", src, offset=len(data) - 10)
    assert await store.get("seg/tail") == data[-10:]


async def test_put_file_source_errors(store: ObjectStore, tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=r"missing\.log"):
        await store.put_file("k", tmp_path / "missing.log")
    src = tmp_path / "small.log"
    src.write_bytes(b"0123456789")
    with pytest.raises(InvalidRequestError, match="past the end"):
        await store.put_file("k", src, offset=5, length=6)
    assert await store.head("k") is None


async def test_put_file_moved_takes_the_file(
    store: ObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Iceberg translator's data files: the object holds the file's bytes (in the file
    store with the ETag a put of them gives) and the file is gone; the file store renames it in (its
    inode is the object's), or copies it from another file system (EXDEV)."""
    import errno

    data = _data(6 * 1024 * 1024 + 5)
    expected = await store.put("ref", data)
    src = tmp_path / "spool.parquet"
    src.write_bytes(data)
    inode = src.stat().st_ino
    etag = await store.put_file_moved("data/one.parquet", src)
    assert await store.get("data/one.parquet") == data and not src.exists()
    info = await store.head("data/one.parquet")
    assert info is not None and info.etag == etag
    if isinstance(store, FileStore):
        assert etag == expected  # (S3: a multipart upload's ETag is of its parts)
        moved = Path(store.root) / "data" / "one.parquet"
        assert moved.stat().st_ino == inode and moved.stat().st_mode & 0o777 == 0o644
        real_rename = os.rename

        def cross_device(a: str, b: str) -> None:
            raise OSError(errno.EXDEV, "Invalid cross-device link")

        src.write_bytes(data)
        monkeypatch.setattr(os, "rename", cross_device)
        assert await store.put_file_moved("data/two.parquet", src) == expected
        monkeypatch.setattr(os, "rename", real_rename)
        assert await store.get("data/two.parquet") == data and not src.exists()
    with pytest.raises(StorageError, match=r"missing\.parquet"):
        await store.put_file_moved("k", tmp_path / "missing.parquet")
    assert await store.head("k") is None


async def test_conditional_puts(store: ObjectStore) -> None:
    e1 = await store.put("m.json", b"v1", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        await store.put("m.json", b"v1-again", if_none_match=True)
    e2 = await store.put("m.json", b"v2", if_match=e1)
    with pytest.raises(PreconditionFailedError):
        await store.put("m.json", b"stale", if_match=e1)
    assert await store.get("m.json") == b"v2"
    data, etag = await store.get_with_etag("m.json")
    assert (data, etag) == (b"v2", e2)
    info = await store.head("m.json")
    assert info is not None and info.etag == e2
    e3 = await store.put("m.json", b"v3", if_match=info.etag)
    assert await store.get_with_etag("m.json") == (b"v3", e3)
    with pytest.raises(PreconditionFailedError):
        await store.put("absent.json", b"x", if_match=e3)
    assert await store.head("absent.json") is None
    with pytest.raises(InvalidRequestError):
        await store.put("m.json", b"x", if_match=e3, if_none_match=True)


async def test_concurrent_if_none_match_has_one_winner(store: ObjectStore) -> None:
    async def attempt(i: int) -> bool:
        try:
            await store.put("lock", f"writer {i}".encode(), if_none_match=True)
        except PreconditionFailedError:
            return False
        return True

    results = await asyncio.gather(*(attempt(i) for i in range(8)))
    assert sum(results) == 1
    winner = results.index(True)
    assert await store.get("lock") == f"writer {winner}".encode()


@pytest.mark.parametrize(
    "key",
    ["", "/abs", "a/../b", "..", "a/./b", "a//b", "trailing/", ".strata/locks/00.lock", "a\x00b", "x" * 1100],
)
async def test_illegal_keys_refused(store: ObjectStore, key: str) -> None:
    with pytest.raises(InvalidRequestError):
        await store.put(key, b"x")
    with pytest.raises(InvalidRequestError):
        await store.get(key)
    with pytest.raises(InvalidRequestError):
        await store.delete(key)


async def test_file_store_never_writes_outside_root(tmp_path: Path) -> None:
    root = tmp_path / "objects"
    store = open_store(f"file://{root}")
    for key in ["../escape", "a/../../escape", "/tmp/escape"]:
        with pytest.raises(InvalidRequestError):
            await store.put(key, b"x")
    with pytest.raises(InvalidRequestError):
        await store.list("../")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["objects"]


async def test_file_store_layout_temp_files_and_xattr_fallback(tmp_path: Path) -> None:
    root = tmp_path / "objects"
    store = open_store(f"file://{root}")
    assert isinstance(store, FileStore)
    etag = await store.put("t/x.json", b'{"a": 1}')
    assert (root / "t" / "x.json").read_bytes() == b'{"a": 1}'  # plain files, readable by any tool
    # A temp file left by a crashed upload is invisible and can be swept.
    leftover = root / ".strata" / "tmp" / "dead.tmp"
    leftover.write_bytes(b"partial")
    os.utime(leftover, (0, 0))
    assert [o.key for o in await store.list()] == ["t/x.json"]
    assert store.sweep_temp(older_than_s=60) == 1 and not leftover.exists()
    # Without the stored etag (copied by a tool that drops xattrs) it is recomputed identically.
    os.removexattr(root / "t" / "x.json", ETAG_XATTR)
    info = await store.head("t/x.json")
    assert info is not None and info.etag == etag
    # A key cannot be both an object and a prefix on a directory.
    with pytest.raises(ObjectStoreError) as ei:
        await store.put("t/x.json/child", b"y")
    assert not ei.value.retriable
    # Deleting the last object of a directory prunes it.
    await store.delete("t/x.json")
    assert not (root / "t").exists()


async def test_file_store_keeps_key_segments_over_255_bytes(tmp_path: Path) -> None:
    """``<249-character topic>-<topic id>`` is a 282-byte key segment: S3 takes it, a file
    name cannot, so the file store spans it over two directories (hot.naming)."""
    root = tmp_path / "objects"
    store = open_store(f"file://{root}")
    long_seg = "t" * 249 + "-" + "f" * 32
    keys = [f"abcd/{long_seg}/{p}/segments/{p:020d}.log" for p in (0, 10)] + ["abcd/short/0/m.json"]
    for k in keys:
        await store.put(k, k.encode())
    assert [o.key for o in await store.list()] == sorted(keys)
    assert [o.key for o in await store.list(f"abcd/{long_seg}/10/")] == [keys[1]]
    assert [o.key for o in await store.list("abcd/" + "t" * 249)] == keys[:2]  # mid-segment prefix
    assert [o.key for o in await store.list("abcd/" + "t" * 260)] == []
    assert await store.get(keys[1]) == keys[1].encode()
    assert all(len(os.fsencode(n)) <= 255 for _, dirs, files in os.walk(root) for n in dirs + files)
    with pytest.raises(InvalidRequestError):  # would read back as another key
        await store.put("a/" + "x" * 254 + "+", b"x")
    await store.delete_many(keys)
    assert await store.list() == [] and sorted(os.listdir(root)) == [".strata"]


async def test_file_store_conditional_put_across_threads(tmp_path: Path) -> None:
    """flock + rename: of N threads each with its own store, exactly one if_none_match wins."""
    url = f"file://{tmp_path}/objects"

    def attempt(i: int) -> bool:
        async def go() -> bool:
            s = open_store(url)
            try:
                await s.put("race", str(i).encode(), if_none_match=True)
            except PreconditionFailedError:
                return False
            return True

        return asyncio.run(go())

    results = await asyncio.gather(*(asyncio.to_thread(attempt, i) for i in range(6)))
    assert sum(results) == 1


async def test_file_store_put_races_directory_pruning(tmp_path: Path) -> None:
    """Deleting the last object of a directory prunes it; a put into it at that moment still lands."""
    url = f"file://{tmp_path}/objects"

    def churn(name: str) -> None:
        async def go() -> None:
            s = open_store(url)
            for i in range(150):
                await s.put(f"d/e/{name}", str(i).encode())
                assert await s.get(f"d/e/{name}") == str(i).encode()
                await s.delete(f"d/e/{name}")

        asyncio.run(go())

    await asyncio.gather(*(asyncio.to_thread(churn, n) for n in ("a", "b", "c")))
    assert await open_store(url).list() == []


async def test_many_objects_list_and_delete_many(store: ObjectStore) -> None:
    """Listing spans several pages and deletion several DeleteObjects batches."""
    if isinstance(store, S3Store):
        store.list_page_size = 7
        store.delete_batch = 4
    keys = [f"many/{i:05d}" for i in range(45)]
    sem = asyncio.Semaphore(32)

    async def put(k: str) -> None:
        async with sem:
            await store.put(k, k.encode())

    await asyncio.gather(*(put(k) for k in keys))
    await store.put("other", b"x")
    listed = await store.list("many/")
    assert [o.key for o in listed] == keys
    await store.delete_many(keys)
    assert [o.key for o in await store.list()] == ["other"]


def test_sync_facade(sync_store: SyncObjectStore, tmp_path: Path) -> None:
    etag = sync_store.put("s/k", b"sync")
    assert sync_store.get("s/k") == b"sync"
    assert sync_store.get("s/k", start=1, end=3) == b"yn"
    assert sync_store.get_with_etag("s/k") == (b"sync", etag)
    info = sync_store.head("s/k")
    assert info is not None and info.etag == etag
    src = tmp_path / "f"
    src.write_bytes(b"file-bytes")
    sync_store.put_file("s/f", src)
    assert [o.key for o in sync_store.list("s/")] == ["s/f", "s/k"]
    with pytest.raises(ObjectNotFoundError, match="s/missing"):
        sync_store.get("s/missing")
    with pytest.raises(PreconditionFailedError):
        sync_store.put("s/k", b"x", if_none_match=True)
    sync_store.delete_many(["s/f", "s/k"])
    assert not sync_store.exists("s/k")


def test_sync_facade_closed() -> None:
    s = SyncObjectStore.open("file:///tmp/strata-test-sync-closed")
    s.close()
    s.close()
    with pytest.raises(ObjectStoreError, match="closed"):
        s.get("x")


@pytest.mark.parametrize(
    "url",
    [
        "http://bucket/x",
        "ftp://host/p",
        "file://relative/path",
        "file:relative",
        "s3://",
        "s3:///prefix-only",
        "s3://bucket/a/../b",
        "s3://bucket/p?versionId=1",
        "",
        "bucket/prefix",
    ],
)
def test_open_store_rejects_bad_urls(url: str) -> None:
    with pytest.raises(InvalidConfigError):
        open_store(url)


def test_open_store_config_errors() -> None:
    with pytest.raises(InvalidConfigError, match="part_size"):
        open_store("s3://bucket/p", part_size=1024)
    with pytest.raises(InvalidConfigError, match="together"):
        open_store("s3://bucket/p", access_key="a")
    with pytest.raises(InvalidConfigError, match="endpoint_url"):
        open_store("s3://bucket/p", endpoint_url="127.0.0.1:9000")
    s3 = open_store("s3a://bucket/deep/prefix/")
    assert isinstance(s3, S3Store) and (s3.bucket, s3.prefix) == ("bucket", "deep/prefix/")


async def test_s3_explicit_endpoint_and_credentials(
    s3_endpoint: S3Endpoint, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    async with open_store(
        f"s3://{s3_bucket}",
        endpoint_url=s3_endpoint.url,
        region="us-east-1",
        access_key="testing",
        secret_key="testing",
    ) as s:
        await s.put("top", b"level")
        assert await s.get("top") == b"level"
    # The object is at the bucket root (no prefix).
    got = s3_endpoint.client().get_object(Bucket=s3_bucket, Key="top")  # type: ignore[attr-defined]
    assert got["Body"].read() == b"level"


async def test_s3_prefix_isolation(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    async with open_store(f"s3://{s3_bucket}/one") as a, open_store(f"s3://{s3_bucket}/two") as b:
        await a.put("k", b"a")
        await b.put("k", b"b")
        assert [o.key for o in await a.list()] == ["k"]
        assert await a.get("k") == b"a" and await b.get("k") == b"b"
    keys = [o["Key"] for o in s3_endpoint.client().list_objects_v2(Bucket=s3_bucket)["Contents"]]  # type: ignore[attr-defined]
    assert sorted(keys) == ["one/k", "two/k"]


async def test_s3_wrong_bucket_is_not_retriable(s3_bucket: str) -> None:
    async with open_store("s3://strata-no-such-bucket-0123/p", max_attempts=2) as s:
        for call in (s.get("k"), s.head("k"), s.put("k", b"x"), s.list(), s.delete("k")):
            with pytest.raises(ObjectStoreError, match="strata-no-such-bucket-0123") as ei:
                await call
            assert not ei.value.retriable
            assert not isinstance(ei.value, ObjectNotFoundError)


async def test_s3_bad_credentials_are_not_retriable(
    s3_endpoint: S3Endpoint, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # moto accepts any key pair, so exercise the chain itself: no credentials at all.
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    async with open_store(f"s3://{s3_bucket}/p") as s:
        with pytest.raises(ObjectStoreError, match="credentials") as ei:
            await s.get("k")
        assert not ei.value.retriable


async def test_s3_outage_is_retriable_and_recovers(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    s = open_store(f"s3://{s3_bucket}/p", connect_timeout=1, read_timeout=2, max_attempts=1)
    try:
        await s.put("k", b"before")
        s3_endpoint.stop()
        try:
            with pytest.raises(RetriableObjectStoreError, match=s3_bucket):
                await s.get("k")
            with pytest.raises(RetriableObjectStoreError):
                await s.put("k2", b"during")
            with pytest.raises(RetriableObjectStoreError):
                await s.list()
        finally:
            s3_endpoint.start()
        assert await s.get("k") == b"before"
        await s.put("k2", b"after")
        assert [o.key for o in await s.list()] == ["k", "k2"]
    finally:
        await s.close()


async def test_connect_is_idempotent_and_the_store_works_after_it(store: ObjectStore) -> None:
    await store.connect()
    await store.connect()
    await store.put("warm/key", b"xyz")
    assert await store.get("warm/key") == b"xyz"


async def test_s3_connect_failure_is_a_store_error_and_retried_on_use() -> None:
    # botocore refuses the region when it builds the client: a real set-up failure
    s = open_store("s3://bucket/p", endpoint_url="http://127.0.0.1:9", region="bad region!")
    try:
        with pytest.raises(ObjectStoreError, match="region"):
            await s.connect()
        # nothing was cached from the failed attempt: the next request builds the client again
        with pytest.raises(ObjectStoreError, match="region"):
            await s.get("k")
    finally:
        await s.close()


async def test_s3_connect_warms_up_in_the_background_without_leaving_objects(s3_bucket: str) -> None:
    s = open_store(f"s3://{s3_bucket}/p")
    try:
        await s.connect()
        task = s._warm_up_task  # type: ignore[attr-defined]
        assert task is not None
        await asyncio.wait_for(task, 30)  # its GETs answered NoSuchKey, which it ignores
        assert await s.list() == []
        await s.put("k", b"v")
        assert await s.get("k") == b"v"
    finally:
        await s.close()


async def test_s3_warm_up_against_a_dead_endpoint_fails_quietly_and_close_cancels_it() -> None:
    # nothing listens on port 9: the warm-up's GETs fail (after retries), in the background
    s = open_store("s3://bucket/p", endpoint_url="http://127.0.0.1:9", region="us-east-1", max_attempts=5)
    await s.connect()  # does not wait for the warm-up
    task = s._warm_up_task  # type: ignore[attr-defined]
    assert task is not None
    await s.close()  # cancels it if it is still retrying
    assert task.done() and s._warm_up_task is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-23T01:37:12.000Z",  # XML bodies (ListObjectsV2)
        "2026-11-23T01:37:12Z",
        "2026-11-23T01:37:12.123456+02:00",
        "Mon, 23 Nov 2026 01:37:12 GMT",  # headers (Last-Modified)
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "1700000000",  # epoch seconds: botocore's own parser
        "2026-11-23T01:37:12",  # no zone: botocore's own parser (naive, as it returns)
    ],
)
def test_timestamp_parser_agrees_with_botocore(value: str) -> None:
    from botocore.utils import parse_timestamp

    from tiering.s3_store import _parse_timestamp

    ours, theirs = _parse_timestamp(value), parse_timestamp(value)
    assert ours == theirs and (ours.utcoffset() is None) == (theirs.utcoffset() is None)
