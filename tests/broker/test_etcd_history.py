"""etcd at scale against a real etcd (issue 35): the paged listing of a watch, and the
controller's periodic compaction of etcd's history with a watcher that fell behind."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from broker.controller import Controller, create_topic
from broker.etcd import EtcdClient
from broker.etcd_compaction import CompactionSchedule
from broker.keys import KeyLayout
from broker.metadata import ClusterView, MetadataClient, PartitionState
from broker.metadata_store import WatchReset
from tests.broker.clusterlib import TcpProxy
from tests.broker.etcdlib import EtcdProcess

Clients = Callable[[EtcdProcess], EtcdClient]
WAIT = 20.0  # upper bound of every wait; never reached when correct


def test_compaction_schedule_one_interval_behind() -> None:
    s = CompactionSchedule(10.0)
    assert s.due(100, 0.0) is None  # the first mark
    assert s.due(150, 5.0) is None  # nothing an interval old yet
    assert s.due(200, 10.0) == 100  # the revision seen one interval earlier
    s.done(100)
    assert s.due(250, 15.0) is None
    assert s.due(300, 20.0) == 200
    assert CompactionSchedule(0).due(100, 1e9) is None  # disabled


async def test_list_prefix_in_pages_is_one_snapshot_and_survives_compaction(
    etcd_factory: Callable[[], EtcdProcess], clients: Clients
) -> None:
    server = etcd_factory()
    c = await clients(server).connect()
    other = await clients(server).connect()
    p = b"/paged/"
    for i in range(25):
        await c.put(p + b"%03d" % i, b"v%d" % i)
    kvs, revision = await c.list_prefix(p, page=4)
    assert [kv.key for kv in kvs] == [p + b"%03d" % i for i in range(25)]
    assert revision == await c.ping()
    # Between two pages a writer adds a key and compacts past the listing's revision: the
    # listing starts again at a newer revision and so includes the new key.
    real = c._call
    calls = 0

    async def meddling(what: str, fn: Callable[[Any], Awaitable[Any]]) -> Any:
        nonlocal calls
        calls += 1
        if what == "list_prefix" and calls == 2:
            now = await other.put(p + b"new", b"x")
            await other.compact(now)
        return await real(what, fn)

    c._call = meddling  # type: ignore[method-assign]
    kvs, revision = await c.list_prefix(p, page=4)
    assert [kv.key for kv in kvs][-1] == p + b"new" and len(kvs) == 26
    assert calls > 2


def _same(a: ClusterView, b: ClusterView) -> bool:
    return (
        a.topics == b.topics
        and a.partitions == b.partitions
        and set(a.brokers) == set(b.brokers)
        and a.controller == b.controller
    )


async def test_controller_compacts_and_a_watcher_behind_relists(
    etcd_factory: Callable[[], EtcdProcess], layout: KeyLayout
) -> None:
    server = etcd_factory()
    proxy = TcpProxy()
    proxy.target_port = server.client_port
    etcds: list[EtcdClient] = []
    clients: list[MetadataClient] = []

    async def client(endpoint: str) -> MetadataClient:
        etcd = await EtcdClient(endpoint, timeout=2.0).connect()
        etcds.append(etcd)
        mc = MetadataClient(etcd, layout, lease_ttl=2, max_txn_ops=16)
        clients.append(mc)
        return await mc.start()

    ctl: Controller | None = None
    try:
        a = await client(server.endpoint)
        await a.register("127.0.0.1", 9001, 8001, broker_id=1)
        behind = await client(proxy.address)  # a broker's watch, on a link that will fail
        ctl = Controller(a, poll_interval=0.2, compaction_interval_s=0.5).start()
        await asyncio.wait_for(ctl.active.wait(), WAIT)
        await create_topic(a, "gone", 3, 1)
        await create_topic(a, "kept", 40, 1)  # in steps: above max_txn_ops
        for mc in (a, behind):  # each view sees the creations through its own watch
            await mc.view.wait_for(lambda v: v.is_whole("kept") and v.is_whole("gone"), WAIT)
        seen = behind.view.revision

        proxy.cut()  # the watcher falls behind while the history it needs is compacted
        await a.delete_topic("gone")
        for p in range(0, 40, 3):
            cur = a.view.partitions[("kept", p)]
            s = cur.value
            new = PartitionState(s.leader, s.leader_epoch + 1, s.isr, s.controller_epoch)
            assert (await a.update_partition_state("kept", p, cur, new)).ok
        await create_topic(a, "new", 2, 1)
        await a.view.wait_for(lambda v: v.is_whole("new"), WAIT)
        last = a.view.revision

        async def compacted_past() -> None:
            while ctl.compaction.compacted <= seen:
                await asyncio.sleep(0.1)

        await asyncio.wait_for(compacted_past(), WAIT)
        assert ctl.compactions >= 1
        # etcd no longer has the revisions the watcher needs: a watch from there re-lists.
        async with contextlib.aclosing(a.etcd.watch_prefix(layout.prefix, start_revision=seen + 1)) as it:
            assert isinstance(await asyncio.wait_for(anext(it), WAIT), WatchReset)

        resets = behind.view.seq
        proxy.heal()
        await behind.view.wait_for(lambda v: v.revision >= last and _same(v, a.view), WAIT)
        assert behind.view.seq > resets
        assert "gone" not in behind.view.topics and behind.view.is_whole("new")
        assert behind.view.partitions[("kept", 3)].value.leader_epoch == 1
        # A starting broker's listing, decoded a few keys at a time, is the same view.
        fresh = ClusterView(layout)
        kvs, revision = await etcds[0].list_prefix(layout.prefix, page=7)
        await fresh.load(WatchReset(kvs, revision), chunk=5)
        assert fresh.ready and fresh.revision == revision and _same(fresh, a.view)
    finally:
        if ctl is not None:
            await ctl.stop(resign=False)
        for mc in clients:
            await mc.close(deregister=False)
        for e in etcds:
            await e.close()
        proxy.close()
