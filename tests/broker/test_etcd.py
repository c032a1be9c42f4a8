"""broker.etcd against a real etcd: key/value, transactions, leases, watches, outages."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import time
from collections.abc import AsyncGenerator, Awaitable, Callable

import pytest

from broker.etcd import Endpoint, EtcdClient, parse_endpoints
from broker.metadata_store import (
    Compare,
    CompareTarget,
    Delete,
    Get,
    LeaseNotFoundError,
    Put,
    WatchEvent,
    WatchEventType,
    WatchReset,
    WatchUpdate,
)
from hot.errors import InvalidConfigError, MetadataStoreError
from tests.broker.etcdlib import EtcdProcess, free_port

Clients = Callable[[EtcdProcess], EtcdClient]

# Bounds a call that must fail fast; far above the client's own 2 s deadline.
NO_HANG = 15.0


def test_parse_endpoints() -> None:
    assert parse_endpoints("a:1,b,[::1]:3,http://c:4") == (
        Endpoint("a", 1),
        Endpoint("b", 2379),
        Endpoint("::1", 3),
        Endpoint("c", 4),
    )
    for bad in ("", "a:,b", "a:0", "a:x", "::1:2", "[::1", "https://a:1", "a,,b", ":5"):
        with pytest.raises(InvalidConfigError):
            parse_endpoints(bad)


def test_compare_validation() -> None:
    with pytest.raises(ValueError):
        Compare(b"k", CompareTarget.VALUE, "==", 1)
    with pytest.raises(ValueError):
        Compare(b"k", CompareTarget.MOD_REVISION, "==", b"1")
    with pytest.raises(ValueError):
        Compare(b"k", CompareTarget.VERSION, ">=", 1)


async def test_key_value_and_prefix(etcd_server: EtcdProcess, clients: Clients) -> None:
    c = await clients(etcd_server).connect()
    p = b"/kv-test/"
    rev = await c.put(p + b"a", b"1")
    kv = await c.get(p + b"a")
    assert kv is not None and kv.value == b"1" and kv.mod_revision == rev == kv.create_revision
    assert kv.version == 1 and kv.lease == 0
    await c.put(p + b"b", b"2")
    await c.put(b"/kv-test-other", b"x")  # shares the bytes of the prefix but not the slash
    kvs, list_rev = await c.get_prefix(p)
    assert [k.key for k in kvs] == [p + b"a", p + b"b"] and list_rev >= rev
    assert await c.delete(p + b"a") is True
    assert await c.delete(p + b"a") is False
    assert await c.get(p + b"a") is None
    assert await c.delete_prefix(p) == 1
    assert (await c.get_prefix(p))[0] == ()
    assert await c.ping() > 0


async def test_txn_compare_and_swap(etcd_server: EtcdProcess, clients: Clients) -> None:
    c = await clients(etcd_server).connect()
    k = b"/txn-test/k"
    await c.delete(k)
    # Create only if absent.
    r = await c.txn([Compare.absent(k)], [Put(k, b"v1")], [Get(k)])
    assert r.succeeded and r.revision > 0 and r.reads == ()
    r2 = await c.txn([Compare.absent(k)], [Put(k, b"again")], [Get(k)])
    assert not r2.succeeded and r2.reads[0][0].value == b"v1"
    kv = await c.get(k)
    assert kv is not None and kv.mod_revision == r.revision
    # CAS on mod_revision: the first writer wins, the second sees the winner's value.
    ok = await c.txn([Compare.mod_revision(k, kv.mod_revision)], [Put(k, b"v2")], [Get(k)])
    lost = await c.txn([Compare.mod_revision(k, kv.mod_revision)], [Put(k, b"v3")], [Get(k)])
    assert ok.succeeded and not lost.succeeded
    assert lost.reads[0][0].value == b"v2" and lost.reads[0][0].mod_revision == ok.revision
    # version and create_revision compares, value compare, multi-op branches.
    assert (await c.txn([Compare.version(k, 2)], [Get(k)])).succeeded
    assert (await c.txn([Compare.create_revision(k, r.revision)], [Get(k)])).succeeded
    assert (await c.txn([Compare.value_is(k, b"v2")], [Get(k)])).succeeded
    assert not (await c.txn([Compare.mod_revision(k, ok.revision, "<")], [Get(k)])).succeeded
    both = await c.txn(
        [Compare.version(k, 0, ">")],
        [Put(b"/txn-test/x", b"1"), Put(b"/txn-test/y", b"2"), Get(b"/txn-test/", prefix=True)],
    )
    assert both.succeeded and [kv.key for kv in both.reads[0]] == [
        b"/txn-test/k",
        b"/txn-test/x",
        b"/txn-test/y",
    ]
    gone = await c.txn([], [Delete(b"/txn-test/", prefix=True)])
    assert gone.succeeded and (await c.get_prefix(b"/txn-test/"))[0] == ()


async def test_lease_keepalive_expiry_and_revoke(etcd_server: EtcdProcess, clients: Clients) -> None:
    c = await clients(etcd_server).connect()
    lease = await c.grant_lease(1)
    await c.put(b"/lease-test/kept", b"v", lease=lease.id)
    keeper = c.keep_alive(lease)
    short = await c.grant_lease(1)
    await c.put(b"/lease-test/dropped", b"v", lease=short.id)
    # The unrefreshed lease expires (etcd deletes its key); the kept one does not.
    while await c.get(b"/lease-test/dropped") is not None:
        await asyncio.sleep(0.1)
    assert await c.lease_ttl(short.id) == -1
    assert await c.refresh_lease(short.id) == 0
    kept = await c.get(b"/lease-test/kept")
    assert kept is not None and kept.lease == lease.id
    assert keeper.running and not keeper.lost.is_set()
    with pytest.raises(LeaseNotFoundError):
        await c.put(b"/lease-test/late", b"v", lease=short.id)
    # Revoking deletes the keys at once and the keeper reports the loss.
    assert await c.revoke_lease(lease.id) is True
    assert await c.revoke_lease(lease.id) is False
    assert await c.get(b"/lease-test/kept") is None
    await asyncio.wait_for(keeper.lost.wait(), NO_HANG)
    assert not keeper.running
    await keeper.stop()
    with pytest.raises(InvalidConfigError):
        await c.grant_lease(0)


async def _collect(it: AsyncGenerator[WatchUpdate, None], out: list[WatchUpdate], count: int) -> None:
    """Append updates to ``out`` until it holds ``count``."""
    while len(out) < count:
        out.append(await anext(it))


async def test_watch_snapshot_then_events(etcd_server: EtcdProcess, clients: Clients) -> None:
    c = await clients(etcd_server).connect()
    p = b"/watch-basic/"
    await c.put(p + b"before", b"0")
    got: list[WatchUpdate] = []
    async with contextlib.aclosing(c.watch_prefix(p)) as it:
        first = await anext(it)
        assert isinstance(first, WatchReset) and [kv.key for kv in first.kvs] == [p + b"before"]
        await c.put(p + b"a", b"1")
        await c.delete(p + b"before")
        await c.put(b"/watch-basic-not", b"x")
        await c.put(p + b"b", b"2")
        await asyncio.wait_for(_collect(it, got, 3), NO_HANG)
    assert [(type(u), u.type, u.kv.key) for u in got if isinstance(u, WatchEvent)] == [
        (WatchEvent, WatchEventType.PUT, p + b"a"),
        (WatchEvent, WatchEventType.DELETE, p + b"before"),
        (WatchEvent, WatchEventType.PUT, p + b"b"),
    ]
    revs = [u.kv.mod_revision for u in got if isinstance(u, WatchEvent)]
    assert revs == sorted(revs) and revs[0] > first.revision


async def test_watch_delivers_every_event_of_a_transaction(
    etcd_server: EtcdProcess, clients: Clients
) -> None:
    c = await clients(etcd_server).connect()
    p = b"/watch-txn/"
    got: list[WatchUpdate] = []
    async with contextlib.aclosing(c.watch_prefix(p)) as it:
        assert isinstance(await anext(it), WatchReset)
        res = await c.txn([], [Put(p + b"%d" % i, b"x") for i in range(5)])
        await c.put(p + b"next", b"y")
        await asyncio.wait_for(_collect(it, got, 6), NO_HANG)
    events = [u for u in got if isinstance(u, WatchEvent)]
    assert [e.kv.mod_revision for e in events[:5]] == [res.revision] * 5
    assert [e.kv.key for e in events] == [p + b"%d" % i for i in range(5)] + [p + b"next"]


async def test_watch_from_compacted_revision_relists(
    etcd_factory: Callable[[], EtcdProcess], clients: Clients
) -> None:
    c = await clients(etcd_factory()).connect()
    p = b"/watch-compact/"
    old = await c.put(p + b"a", b"1")
    await c.delete(p + b"a")
    await c.put(p + b"b", b"2")
    now = await c.put(p + b"c", b"3")
    await c.compact(now)
    async with contextlib.aclosing(c.watch_prefix(p, start_revision=old)) as it:
        first = await asyncio.wait_for(anext(it), NO_HANG)
        assert isinstance(first, WatchReset)
        assert [kv.key for kv in first.kvs] == [p + b"b", p + b"c"] and first.revision >= now
        await c.put(p + b"d", b"4")
        ev = await asyncio.wait_for(anext(it), NO_HANG)
        assert isinstance(ev, WatchEvent) and ev.kv.key == p + b"d"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill9", "sigterm"])
async def test_watch_survives_etcd_restart(
    etcd_factory: Callable[[], EtcdProcess], clients: Clients, sig: signal.Signals
) -> None:
    server = etcd_factory()
    c = await clients(server).connect()
    writer = await clients(server).connect()
    p = b"/watch-restart/"
    got: list[WatchUpdate] = []
    async with contextlib.aclosing(c.watch_prefix(p)) as it:
        assert isinstance(await anext(it), WatchReset)
        await writer.put(p + b"1", b"a")
        await asyncio.wait_for(_collect(it, got, 1), NO_HANG)
        for round_ in range(2):
            server.restart(sig=sig)  # crash or stop, then the same ports and data dir
            # Written while the watcher may still be disconnected: must arrive exactly once.
            first_key = p + f"after-{round_}".encode()
            await _retry(functools.partial(writer.put, first_key, b"b"))
            await writer.put(p + f"after-{round_}-2".encode(), b"c")
            want = 3 + 2 * round_
            await asyncio.wait_for(_collect(it, got, want), NO_HANG)
    keys = [u.kv.key for u in got if isinstance(u, WatchEvent)]
    assert keys == [p + b"1", p + b"after-0", p + b"after-0-2", p + b"after-1", p + b"after-1-2"]


async def _retry(op: Callable[[], object], attempts: int = 100) -> None:
    """Run ``op`` until etcd accepts it (just after a restart the channel reconnects)."""
    for _ in range(attempts):
        try:
            await op()  # type: ignore[misc]
            return
        except MetadataStoreError:
            await asyncio.sleep(0.1)
    raise AssertionError("etcd did not come back")


async def test_operations_during_outage_raise_not_hang(
    etcd_factory: Callable[[], EtcdProcess], clients: Clients
) -> None:
    server = etcd_factory()
    c = await clients(server).connect()
    await c.put(b"/outage/k", b"v")
    lease = await c.grant_lease(60)
    keeper = c.keep_alive(lease)

    async def fails(call: Callable[[], Awaitable[object]]) -> None:
        with pytest.raises(MetadataStoreError):
            await asyncio.wait_for(call(), NO_HANG)

    async def every_call() -> None:
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: c.get(b"/outage/k"),
            lambda: c.put(b"/outage/k", b"w"),
            lambda: c.get_prefix(b"/outage/"),
            lambda: c.delete(b"/outage/x"),
            lambda: c.txn([Compare.absent(b"/outage/y")], [Put(b"/outage/y", b"1")]),
            lambda: c.grant_lease(5),
            lambda: c.refresh_lease(lease.id),
            lambda: c.lease_ttl(lease.id),
            lambda: c.revoke_lease(0x5EED),  # not our lease: a late delivery must not matter
            lambda: c.ping(),
        ]
        await asyncio.gather(*(fails(call) for call in calls))

    server.kill()  # crashed: connections refused
    await every_call()
    server.start()
    server.pause()  # frozen: connections accepted, nothing answered (deadlines fire)
    try:
        await every_call()
    finally:
        server.resume()
    # etcd is back: the same client works again, and the lease survived the outage.
    await _retry(lambda: c.get(b"/outage/k"))
    assert await c.lease_ttl(lease.id) > 0
    assert not keeper.lost.is_set()
    await keeper.stop(revoke=True)


async def test_slow_handshake_is_waited_for_not_failed(etcd_server: EtcdProcess) -> None:
    """An etcd that takes a while to answer a new connection (a loaded machine, a stalled
    etcd) is waited for within the call's deadline: gRPC's connect timeout once was 100 ms,
    and every call then failed at once ("timed out before receiving SETTINGS frame")."""
    delay = 0.6

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, wait: float) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            first = await src.read(65536)
            await asyncio.sleep(wait)
            while first:
                dst.write(first)
                await dst.drain()
                first = await src.read(65536)
        dst.close()

    host, port = etcd_server.endpoint.rsplit(":", 1)
    tasks: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        tasks.append(asyncio.create_task(pipe(reader, up_writer, 0.0)))
        tasks.append(asyncio.create_task(pipe(up_reader, writer, delay)))  # etcd answers late

    slow = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        slow_port = slow.sockets[0].getsockname()[1]
        async with EtcdClient(f"127.0.0.1:{slow_port}", timeout=5.0) as c:
            await c.put(b"/slow-handshake/k", b"v")
            kv = await c.get(b"/slow-handshake/k")
            assert kv is not None and kv.value == b"v"
    finally:
        slow.close()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_second_endpoint_used_when_first_is_down(etcd_server: EtcdProcess) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with EtcdClient(f"{dead},{etcd_server.endpoint}", timeout=2.0) as c:
        await _retry(lambda: c.put(b"/multi-endpoint/k", b"v"))
        kv = await c.get(b"/multi-endpoint/k")
        assert kv is not None and kv.value == b"v"


async def test_closed_client_raises(etcd_server: EtcdProcess) -> None:
    c = EtcdClient(etcd_server.endpoint, timeout=2.0)
    with pytest.raises(MetadataStoreError, match="not connected"):
        await c.get(b"/x")
    await c.connect()
    await c.close()
    with pytest.raises(MetadataStoreError, match="closed"):
        await c.get(b"/x")


async def test_lease_kept_while_the_event_loop_is_blocked(etcd_server: EtcdProcess, clients: Clients) -> None:
    """The keeper refreshes from a thread of its own: a loop blocked past the TTL (a
    synchronous step of a busy broker) keeps its lease and ``alive_until`` moves on."""
    c = await clients(etcd_server).connect()
    lease = await c.grant_lease(2)
    await c.put(b"/lease-blocked/kept", b"v", lease=lease.id)
    keeper = c.keep_alive(lease)
    try:
        time.sleep(4.0)  # blocks the event loop for two TTLs
        assert await c.get(b"/lease-blocked/kept") is not None
        assert await c.lease_ttl(lease.id) > 0
        assert keeper.alive_until > time.monotonic()
        assert keeper.running and not keeper.lost.is_set()
    finally:
        await keeper.stop(revoke=True)
    assert not keeper.running
    assert await c.lease_ttl(lease.id) == -1


async def test_lease_let_go_when_the_event_loop_stops_for_good(
    etcd_server: EtcdProcess, clients: Clients
) -> None:
    """A loop silent for longer than ``max_loop_stall`` is not kept registered: the thread
    stops refreshing, etcd ends the lease, and once the loop runs again the keeper says so."""
    from broker.etcd_lease import ThreadLeaseKeeper

    c = await clients(etcd_server).connect()
    lease = await c.grant_lease(1)
    await c.put(b"/lease-wedged/k", b"v", lease=lease.id)
    keeper = c.keep_alive(lease)
    assert isinstance(keeper, ThreadLeaseKeeper)
    keeper.max_loop_stall = 0.5
    time.sleep(3.0)  # the loop wedged: past the stall bound and the 1 s TTL after it
    try:
        await asyncio.wait_for(keeper.lost.wait(), NO_HANG)
        assert await c.get(b"/lease-wedged/k") is None
        assert not keeper.running
    finally:
        await keeper.stop()
