"""broker.embedded_store: etcd's semantics in process, and durability across restarts and torn journals."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path

import pytest

from broker import embedded_store
from broker.embedded_store import HELD_TTL, JOURNAL_FILE, SNAPSHOT_FILE, EmbeddedMetadataStore
from broker.metadata_store import (
    Compare,
    Delete,
    Get,
    LeaseNotFoundError,
    Put,
    WatchEvent,
    WatchEventType,
    WatchReset,
    WatchUpdate,
    cas_update,
)
from hot.errors import InvalidConfigError, MetadataStoreError

NO_HANG = 10.0


async def _open(path: Path) -> EmbeddedMetadataStore:
    return await EmbeddedMetadataStore(path).connect()


async def test_key_value_prefix_and_revisions(tmp_path: Path) -> None:
    c = await _open(tmp_path)
    p = b"/kv/"
    rev = await c.put(p + b"a", b"1")
    kv = await c.get(p + b"a")
    assert kv is not None and kv.value == b"1" and kv.mod_revision == rev == kv.create_revision
    assert kv.version == 1 and kv.lease == 0
    rev2 = await c.put(p + b"a", b"2")
    kv2 = await c.get(p + b"a")
    assert kv2 is not None and rev2 > rev and kv2.create_revision == rev and kv2.version == 2
    await c.put(p + b"b", b"2")
    await c.put(b"/kv-other", b"x")
    kvs, list_rev = await c.get_prefix(p)
    assert [k.key for k in kvs] == [p + b"a", p + b"b"] and list_rev >= rev2
    assert await c.delete(p + b"a") is True
    assert await c.delete(p + b"a") is False
    assert await c.delete_prefix(p) == 1
    assert (await c.get_prefix(p))[0] == ()
    assert await c.ping() > 0
    await c.close()
    with pytest.raises(MetadataStoreError):
        await c.get(p)


async def test_txn_compare_and_swap(tmp_path: Path) -> None:
    c = await _open(tmp_path)
    k = b"/txn/k"
    r = await c.txn([Compare.absent(k)], [Put(k, b"v1")], [Get(k)])
    assert r.succeeded and r.revision > 0 and r.reads == ()
    r2 = await c.txn([Compare.absent(k)], [Put(k, b"again")], [Get(k)])
    assert not r2.succeeded and r2.reads[0][0].value == b"v1"
    kv = await c.get(k)
    assert kv is not None
    ok = await c.txn([Compare.mod_revision(k, kv.mod_revision)], [Put(k, b"v2")], [Get(k)])
    lost = await c.txn([Compare.mod_revision(k, kv.mod_revision)], [Put(k, b"v3")], [Get(k)])
    assert ok.succeeded and not lost.succeeded
    assert lost.reads[0][0].value == b"v2" and lost.reads[0][0].mod_revision == ok.revision
    assert (await c.txn([Compare.version(k, 2)], [Get(k)])).succeeded
    assert (await c.txn([Compare.create_revision(k, r.revision)], [Get(k)])).succeeded
    assert (await c.txn([Compare.value_is(k, b"v2")], [Get(k)])).succeeded
    assert not (await c.txn([Compare.value_is(b"/txn/absent", b"")], [Get(k)])).succeeded
    assert not (await c.txn([Compare.mod_revision(k, ok.revision, "<")], [Get(k)])).succeeded
    both = await c.txn([Compare.version(k, 0, ">")], [Put(b"/txn/x", b"1"), Put(b"/txn/y", b"2")])
    assert both.succeeded
    assert [kv.key for kv in (await c.get_prefix(b"/txn/"))[0]] == [b"/txn/k", b"/txn/x", b"/txn/y"]
    assert (await c.get(b"/txn/x")).mod_revision == (await c.get(b"/txn/y")).mod_revision  # type: ignore[union-attr]
    gone = await c.txn([], [Delete(b"/txn/", prefix=True)])
    assert gone.succeeded and (await c.get_prefix(b"/txn/"))[0] == ()
    value, _ = await cas_update(c, b"/cas", lambda old: (old or b"") + b"+", attempts=3)
    assert value == b"+"
    await c.close()


async def test_leases_are_held_until_revoked_and_never_persisted(tmp_path: Path) -> None:
    c = await _open(tmp_path)
    lease = await c.grant_lease(1)
    await c.put(b"/lease/kept", b"v", lease=lease.id)
    keeper = c.keep_alive(lease)
    await asyncio.sleep(1.5)  # longer than the TTL: an embedded lease does not run out
    assert await c.refresh_lease(lease.id) == HELD_TTL and await c.lease_ttl(lease.id) == HELD_TTL
    assert keeper.running and not keeper.lost.is_set()
    with pytest.raises(LeaseNotFoundError):
        await c.put(b"/lease/late", b"v", lease=999)
    with pytest.raises(InvalidConfigError):
        await c.grant_lease(0)
    await c.put(b"/durable", b"d")
    rev_before = await c.ping()
    await c.close()  # the process "dies": its leases end with it
    c = await _open(tmp_path)
    assert await c.get(b"/lease/kept") is None and await c.get(b"/durable") is not None
    assert await c.ping() >= rev_before  # revisions never repeat across restarts
    lease2 = await c.grant_lease(5)
    await c.put(b"/lease/k2", b"v", lease=lease2.id)
    assert await c.revoke_lease(lease2.id) is True and await c.revoke_lease(lease2.id) is False
    assert await c.get(b"/lease/k2") is None and await c.refresh_lease(lease2.id) == 0
    await keeper.stop()
    await c.close()


async def _collect(c: EmbeddedMetadataStore, prefix: bytes, count: int, **kw: int) -> list[WatchUpdate]:
    out: list[WatchUpdate] = []
    async with contextlib.aclosing(c.watch_prefix(prefix, **kw)) as it:
        while len(out) < count:
            out.append(await asyncio.wait_for(anext(it), NO_HANG))
    return out


async def test_watch_snapshot_events_and_resume(tmp_path: Path) -> None:
    c = await _open(tmp_path)
    p = b"/w/"
    await c.put(p + b"before", b"0")
    task = asyncio.create_task(_collect(c, p, 4))
    await asyncio.sleep(0)
    first_rev = await c.txn([], [Put(p + b"a", b"1"), Put(p + b"b", b"2")])
    await c.put(b"/w-not", b"x")
    await c.delete(p + b"before")
    got = await task
    assert isinstance(got[0], WatchReset) and [kv.key for kv in got[0].kvs] == [p + b"before"]
    events = [u for u in got[1:] if isinstance(u, WatchEvent)]
    assert [(e.type, e.kv.key) for e in events] == [
        (WatchEventType.PUT, p + b"a"),
        (WatchEventType.PUT, p + b"b"),
        (WatchEventType.DELETE, p + b"before"),
    ]
    assert events[0].kv.mod_revision == events[1].kv.mod_revision == first_rev.revision
    # Resuming from a revision replays the changes since; a compacted one re-lists.
    again = await _collect(c, p, 3, start_revision=first_rev.revision)
    assert [u.kv.key for u in again if isinstance(u, WatchEvent)] == [p + b"a", p + b"b", p + b"before"]
    await c.compact(await c.ping())
    relist = await _collect(c, p, 1, start_revision=first_rev.revision)
    assert isinstance(relist[0], WatchReset) and [kv.key for kv in relist[0].kvs] == [p + b"a", p + b"b"]
    # Closing the store ends every watch.
    it = c.watch_prefix(p)
    assert isinstance(await anext(it), WatchReset)
    await c.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(it), NO_HANG)


async def test_restart_replays_journal_folds_snapshot_and_cuts_a_torn_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded_store, "JOURNAL_FOLD_ENTRIES", 5)
    c = await _open(tmp_path)
    for i in range(12):
        await c.put(b"/k/%02d" % i, b"%d" % i)
    await c.delete(b"/k/00")
    kvs, rev = await c.get_prefix(b"/k/")
    await c.close()
    assert (tmp_path / SNAPSHOT_FILE).exists()
    c = await _open(tmp_path)
    kvs2, rev2 = await c.get_prefix(b"/k/")
    assert kvs2 == kvs and rev2 == rev
    await c.close()
    # A crash in the middle of an append: the torn line was never acknowledged.
    with open(tmp_path / JOURNAL_FILE, "ab") as f:
        f.write(b'{"r":999,"ops":[["p","L2s=","dg==')
    c = await _open(tmp_path)
    assert (await c.get_prefix(b"/k/")) == (kvs, rev)
    await c.put(b"/k/new", b"n")  # appends after the cut, not after the torn bytes
    await c.close()
    c = await _open(tmp_path)
    assert (await c.get(b"/k/new")) is not None and len((await c.get_prefix(b"/k/"))[0]) == len(kvs) + 1
    await c.close()


async def test_one_process_per_store(tmp_path: Path) -> None:
    c = await _open(tmp_path)
    code = (
        "import asyncio, sys; from pathlib import Path\n"
        "from broker.embedded_store import EmbeddedMetadataStore as S\n"
        "asyncio.run(S(Path(sys.argv[1])).connect())"
    )
    args = [sys.executable, "-c", code, str(tmp_path)]
    res = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "in use by another process" in res.stderr
    await c.close()
