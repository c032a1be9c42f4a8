"""broker.store_socket: the whole MetadataStore API served over the local store socket,
as the workers of a multi-process node use it (the embedded store of their supervisor):
key-values and transactions, leases that run out by their TTL, a dead process's leases
revoked by its pid, watches that resume across a lost connection, concurrent calls, and
two brokers forming a cluster over one socket."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from broker.embedded_store import EmbeddedMetadataStore
from broker.metadata import TopicAssignment
from broker.metadata_store import (
    Compare,
    Get,
    KeyValue,
    LeaseNotFoundError,
    Put,
    WatchEvent,
    WatchEventType,
    WatchReset,
    WatchUpdate,
    cas_update,
)
from broker.store_protocol import event_out, frame, read_frame
from broker.store_socket import LocalStoreClient, LocalStoreServer, socket_path
from hot.errors import MetadataStoreError
from tests.brokers import BrokerProcess

NO_HANG = 10.0
ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class Clock:
    """The store's clock, moved by hand: lease expiry without waiting for it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def served(
    meta: Path, clock: Callable[[], float] = time.monotonic
) -> AsyncIterator[tuple[EmbeddedMetadataStore, LocalStoreServer, LocalStoreClient]]:
    async with EmbeddedMetadataStore(meta, expire_leases=True, clock=clock) as store:
        server = LocalStoreServer(store, meta, "c1")
        await server.start()
        try:
            async with LocalStoreClient(path=socket_path(meta), timeout=5) as client:
                yield store, server, client
        finally:
            await server.close()


async def test_key_values_and_transactions(tmp_path: Path) -> None:
    async with served(tmp_path) as (store, _, c):
        p = b"/kv/"
        rev = await c.put(p + b"a", b"\x001")
        kv = await c.get(p + b"a")
        assert kv is not None and kv.value == b"\x001" and kv.mod_revision == rev == kv.create_revision
        assert await store.get(p + b"a") == kv
        r = await c.txn([Compare.absent(p + b"b")], [Put(p + b"b", b"2"), Put(p + b"c", b"3")], [Get(p)])
        assert r.succeeded and (await c.get(p + b"c")).mod_revision == r.revision  # type: ignore[union-attr]
        lost = await c.txn([Compare.absent(p + b"b")], [Put(p + b"b", b"x")], [Get(p, prefix=True)])
        assert not lost.succeeded and [kv.key for kv in lost.reads[0]] == [p + b"a", p + b"b", p + b"c"]
        kvs, revision = await c.get_prefix(p)
        assert len(kvs) == 3 and revision == await c.ping() == await store.ping()
        assert await c.delete(p + b"a") is True and await c.delete(p + b"a") is False
        assert await c.delete_prefix(p) == 2 and (await c.get_prefix(p))[0] == ()
        await c.compact(await c.ping())
        with pytest.raises(LeaseNotFoundError):
            await c.put(p + b"l", b"v", lease=12345)
        with pytest.raises(MetadataStoreError, match="Get after a write") as err:
            await c.txn([], [Put(p + b"z", b"z"), Get(p)])
        assert not err.value.retriable
        with pytest.raises(MetadataStoreError, match="at least 1 s"):
            await c.grant_lease(0)


async def test_leases_run_out_by_their_ttl(tmp_path: Path) -> None:
    clock = Clock()
    async with served(tmp_path, clock) as (store, server, c):
        lease = await c.grant_lease(2)
        await c.put(b"/l/a", b"v", lease=lease.id)
        assert (await c.get(b"/l/a")).lease == lease.id  # type: ignore[union-attr]
        assert server.leases_of(os.getpid()) == [lease.id]
        clock.now += 1.5
        assert await c.lease_ttl(lease.id) == 1
        assert await c.refresh_lease(lease.id) == 2  # a refresh re-arms the whole TTL
        clock.now += 1.5
        assert await store.expire_leases() == 0 and await c.get(b"/l/a") is not None
        clock.now += 1.0  # 2 s without a refresh: a worker that hangs loses its keys
        assert await c.lease_ttl(lease.id) == -1
        await store.expire_leases()  # (or the store's own reaper already did, by the same clock)
        assert await c.get(b"/l/a") is None
        assert await c.refresh_lease(lease.id) == 0
        with pytest.raises(LeaseNotFoundError):
            await c.put(b"/l/b", b"v", lease=lease.id)
        # A refresh that comes after the time but before the reaper: gone all the same.
        late = await c.grant_lease(1)
        await c.put(b"/l/c", b"v", lease=late.id)
        clock.now += 5
        assert await c.refresh_lease(late.id) == 0 and await c.get(b"/l/c") is None
        gone = await c.grant_lease(5)
        await c.put(b"/l/d", b"v", lease=gone.id)
        assert await c.revoke_lease(gone.id) is True and await c.revoke_lease(gone.id) is False
        assert await c.get(b"/l/d") is None and server.leases_of(os.getpid()) == []


async def test_keep_alive_holds_a_lease_and_the_reaper_ends_it(tmp_path: Path) -> None:
    """On the real clock: refreshed over the socket, the lease outlives its TTL; not
    refreshed any more, the store's own reaper deletes its keys."""
    async with served(tmp_path) as (_, _, c):
        lease = await c.grant_lease(1)
        await c.put(b"/k/reg", b"v", lease=lease.id)
        keeper = c.keep_alive(lease)
        await asyncio.sleep(2.0)
        assert keeper.running and not keeper.lost.is_set() and await c.get(b"/k/reg") is not None
        assert keeper.alive_until > time.monotonic()
        await keeper.stop()  # the worker hangs: no more refreshes
        deadline = time.monotonic() + NO_HANG
        while await c.get(b"/k/reg") is not None:
            assert time.monotonic() < deadline, "the lease never ran out"
            await asyncio.sleep(0.1)
        assert await c.lease_ttl(lease.id) == -1


async def _collect(it: Any, count: int) -> list[WatchUpdate]:
    return [await asyncio.wait_for(anext(it), NO_HANG) for _ in range(count)]


async def test_watch_snapshot_resume_reset_and_reconnect(tmp_path: Path) -> None:
    async with served(tmp_path) as (store, server, c):
        p = b"/w/"
        await c.put(p + b"before", b"0")
        async with contextlib.aclosing(c.watch_prefix(p)) as it:
            reset = await _collect(it, 1)
            assert isinstance(reset[0], WatchReset) and [kv.key for kv in reset[0].kvs] == [p + b"before"]
            first = await c.txn([], [Put(p + b"a", b"1"), Put(p + b"b", b"2")])
            await c.put(b"/w-not", b"x")
            await c.delete(p + b"before")
            got = await _collect(it, 3)
            assert [(u.type, u.kv.key) for u in got if isinstance(u, WatchEvent)] == [
                (WatchEventType.PUT, p + b"a"),
                (WatchEventType.PUT, p + b"b"),
                (WatchEventType.DELETE, p + b"before"),
            ]
            assert got[0].kv.mod_revision == got[1].kv.mod_revision == first.revision  # type: ignore[union-attr]
            # The server goes away and comes back (on the same store): the watch resumes
            # where it stopped, and delivers what changed meanwhile, once.
            await server.close()
            await store.put(p + b"meanwhile", b"m")
            server2 = LocalStoreServer(store, tmp_path, "c1")
            await server2.start()
            try:
                await c.put(p + b"after", b"z")
                again = await _collect(it, 2)
                assert [u.kv.key for u in again if isinstance(u, WatchEvent)] == [
                    p + b"meanwhile",
                    p + b"after",
                ]
            finally:
                await server2.close()
        await server.start()  # for the client's remaining calls (same path)
        # From a revision: the changes since; from a compacted one: a re-listing.
        async with contextlib.aclosing(c.watch_prefix(p, start_revision=first.revision)) as it:
            replay = await _collect(it, 3)
            assert [u.kv.key for u in replay if isinstance(u, WatchEvent)] == [
                p + b"a",
                p + b"b",
                p + b"before",
            ]
        await c.compact(await c.ping())
        async with contextlib.aclosing(c.watch_prefix(p, start_revision=first.revision)) as it:
            relist = await _collect(it, 1)
            assert isinstance(relist[0], WatchReset)
            assert [kv.key for kv in relist[0].kvs] == [p + b"a", p + b"after", p + b"b", p + b"meanwhile"]
        # Closing the client ends its watches.
        it = c.watch_prefix(p)
        assert isinstance(await asyncio.wait_for(anext(it), NO_HANG), WatchReset)
        await c.close()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(it), NO_HANG)


async def test_concurrent_calls_and_a_server_that_goes_away(tmp_path: Path) -> None:
    def increment(old: bytes | None) -> bytes:
        return b"%d" % (int(old or b"0") + 1)

    async with served(tmp_path) as (_, server, c):
        # Many calls at once from one loop (a pool of connections): every CAS lands once.
        await asyncio.gather(
            *(
                cas_update(c, b"/n", lambda old: b"%d" % (int(old or b"0") + 1), attempts=200)
                for _ in range(40)
            ),
            *(c.get_prefix(b"/") for _ in range(40)),
        )
        assert (await c.get(b"/n")).value == b"40"  # type: ignore[union-attr]
        c.timeout = 1.0  # what a call waits for a server that went away
        await server.close()
        quick = LocalStoreClient(path=socket_path(tmp_path), timeout=0.5)
        started = time.monotonic()
        with pytest.raises(MetadataStoreError) as err:
            await quick.connect()
        assert err.value.retriable and time.monotonic() - started < NO_HANG
        with pytest.raises(MetadataStoreError) as err:
            await asyncio.wait_for(c.get(b"/n"), NO_HANG)  # its pooled connections are gone
        assert err.value.retriable
        await server.start()
        assert (await c.get(b"/n")) is not None  # the next call connects again
        await quick.close()


_CHILD = """
import asyncio, sys
from pathlib import Path
from broker.store_socket import LocalStoreClient

async def main():
    client = await LocalStoreClient(path=Path(sys.argv[1])).connect()
    lease = await client.grant_lease(60)
    await client.put(b"/reg/child", b"alive", lease=lease.id)
    client.keep_alive(lease)
    print(lease.id, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def test_revoke_leases_of_a_process_killed_with_sigkill(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, server, c):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _CHILD, str(socket_path(tmp_path)), stdout=asyncio.subprocess.PIPE, env=env
        )
        try:
            assert child.stdout is not None
            line = await asyncio.wait_for(child.stdout.readline(), 30)
            lease_id = int(line)
            assert server.leases_of(child.pid) == [lease_id]
            assert (await c.get(b"/reg/child")) is not None
            child.send_signal(signal.SIGKILL)
            await asyncio.wait_for(child.wait(), 30)
            assert await c.lease_ttl(lease_id) > 0  # a 60 s TTL: still there on its own
            assert await server.revoke_leases_of(child.pid) == 1
            assert await c.get(b"/reg/child") is None and server.leases_of(child.pid) == []
            assert await server.revoke_leases_of(child.pid) == 0
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()


# --- two brokers on one store socket ------------------------------------------------------------


class StoreThread:
    """The supervisor's part, for a synchronous test: an expiring embedded store served on
    its socket from an event loop of its own thread."""

    def __init__(self, meta: Path, cluster: str) -> None:
        self.meta = meta
        self.cluster = cluster
        self.path = socket_path(meta)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self.server: LocalStoreServer | None = None
        self.store: EmbeddedMetadataStore | None = None

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with EmbeddedMetadataStore(self.meta, expire_leases=True) as store:
            self.store = store
            self.server = LocalStoreServer(store, self.meta, self.cluster)
            await self.server.start()
            self._ready.set()
            await self._stop.wait()
            await self.server.close()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(NO_HANG)

    def __enter__(self) -> StoreThread:
        self._thread.start()
        assert self._ready.wait(NO_HANG)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(NO_HANG)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[StoreThread, list[BrokerProcess]]]:
    brokers: list[BrokerProcess] = []
    with StoreThread(tmp_path / "meta", "strata-node") as store:
        yield store, brokers
        for b in brokers:
            b.kill()


def test_two_brokers_form_a_cluster_over_one_store_socket(
    tmp_path: Path, node: tuple[StoreThread, list[BrokerProcess]]
) -> None:
    from confluent_kafka import Consumer, Producer

    from tests.brokers import create_topic

    store, brokers = node
    env = {
        "STRATA_CLUSTER_ID": "strata-node",
        "STRATA_BROKER_SESSION_TIMEOUT_MS": "3000",
        "STRATA_LOG_REMOTE_STORAGE_ENABLE": "false",
    }
    for i in (1, 2):
        b = BrokerProcess(
            tmp_path / f"w{i}", "--store-socket", str(store.path), "--broker-id", str(i), env=env
        )
        brokers.append(b)
        b.start(timeout=60)
    assert "joined cluster strata-node" in brokers[0].output()
    create_topic(brokers[0].bootstrap, "spread", 2)
    state, _ = store.call(store.store.get_prefix(b"/strata/strata-node/"))  # type: ignore[union-attr]
    registered = sorted(kv.key.rsplit(b"/", 1)[1] for kv in state if b"/brokers/" in kv.key)
    assert registered == [b"1", b"2"]
    topic = next(kv for kv in state if kv.key.endswith(b"/topics/spread"))
    placed = TopicAssignment.from_json(topic.value).partitions
    assert sorted(r for replicas in placed for r in replicas) == [1, 2]  # one partition on each
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for n in range(20):
        producer.produce("spread", value=b"v%d" % n, partition=n % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["spread"])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while len(got) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None and msg.value() is not None:
                got.add(bytes(msg.value()))  # type: ignore[arg-type]
    finally:
        consumer.close()
    assert got == {b"v%d" % n for n in range(20)}
    # A worker that dies loses its registration at once through its pid.
    victim = brokers[1]
    assert victim.proc is not None
    pid = victim.proc.pid
    victim.kill()
    assert store.call(store.server.revoke_leases_of(pid)) >= 1  # type: ignore[union-attr]
    state, _ = store.call(store.store.get_prefix(b"/strata/strata-node/brokers/"))  # type: ignore[union-attr]
    assert [kv.key.rsplit(b"/", 1)[1] for kv in state] == [b"1"]


async def test_a_watch_resumes_inside_a_split_transaction(tmp_path: Path) -> None:
    """The client's resume logic against a scripted server: a connection lost between two
    events of one transaction resumes from that revision without repeating the first."""

    def put(key: bytes, revision: int) -> WatchEvent:
        return WatchEvent(WatchEventType.PUT, KeyValue(key, b"v", revision, revision, 1, 0))

    asked: list[object] = []
    scripts = [[put(b"/s/a", 5)], [put(b"/s/a", 5), put(b"/s/b", 5), put(b"/s/c", 6)]]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_frame(reader)
        assert request is not None
        asked.append(request["start_revision"])
        for event in scripts.pop(0):
            writer.write(frame({"ok": True, "events": [event_out(event)]}))
        await writer.drain()
        if scripts:  # the first connection is lost after one event of revision 5
            writer.close()
            return
        await reader.read()  # the second lasts until the client hangs up

    path = tmp_path / "scripted.sock"
    server = await asyncio.start_unix_server(serve, path=str(path))
    client = LocalStoreClient(path=path, timeout=5)
    try:
        async with contextlib.aclosing(client.watch_prefix(b"/s/", start_revision=4)) as it:
            got = await _collect(it, 3)
        assert [u.kv.key for u in got if isinstance(u, WatchEvent)] == [b"/s/a", b"/s/b", b"/s/c"]
        assert asked == [4, 5]
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
