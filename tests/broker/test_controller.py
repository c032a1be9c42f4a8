"""broker.controller against a real etcd: controller election and failover, leader
election from the ISR when a broker's lease expires, unclean election, fencing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

import pytest

from broker.controller import Controller, create_topic
from broker.metadata import NO_LEADER, ClusterView, MetadataClient, PartitionState
from hot.errors import StaleControllerEpochError
from tests.broker.etcdlib import EtcdProcess

MakeClient = Callable[..., Awaitable[MetadataClient]]
WAIT = 20.0  # upper bound for waits on watches and lease expiry; never reached when correct


@pytest.fixture
async def controllers() -> AsyncIterator[Callable[[MetadataClient], Controller]]:
    made: list[Controller] = []

    def make(mc: MetadataClient) -> Controller:
        c = Controller(mc, poll_interval=0.5).start()
        made.append(c)
        return c

    yield make
    for c in made:
        await c.stop(resign=False)


async def _broker(make: MakeClient, server: EtcdProcess, broker_id: int) -> MetadataClient:
    mc = await make(server)
    await mc.register("127.0.0.1", 9000 + broker_id, 8000 + broker_id, broker_id=broker_id)
    return mc


async def _cluster(make: MakeClient, server: EtcdProcess, n: int) -> list[MetadataClient]:
    brokers = [await _broker(make, server, i + 1) for i in range(n)]
    await brokers[0].view.wait_for(lambda v: len(v.brokers) == n, WAIT)
    return brokers


def _epoch_of(view: ClusterView, topic: str, p: int) -> int | None:
    s = view.partition_state(topic, p)
    return None if s is None else s.controller_epoch


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.05)


def _state(view: ClusterView, topic: str, p: int) -> PartitionState:
    s = view.partition_state(topic, p)
    assert s is not None
    return s


async def test_single_controller_and_failover_bumps_epoch(
    etcd_server: EtcdProcess,
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    a, b = await _cluster(metadata_clients, etcd_server, 2)
    ca = controllers(a)
    await asyncio.wait_for(ca.active.wait(), WAIT)
    cb = controllers(b)
    await b.view.wait_for(lambda v: v.controller is not None, WAIT)
    assert ca.token is not None and ca.token.epoch == 1 and ca.token.broker_id == 1
    assert not cb.is_active
    old = ca.token
    # Broker 1 crashes: its lease expires, the controller key with it, and broker 2 wins.
    await ca.stop(resign=False)
    await a.close(deregister=False)
    await asyncio.wait_for(cb.active.wait(), WAIT)
    assert cb.token is not None and cb.token.epoch == 2 and cb.token.broker_id == 2
    held = await b.get_controller()
    assert held is not None and held.value.epoch == 2 and held.value.broker_id == 2
    # The deposed controller's writes are refused.
    await create_topic(b, "fenced", 1, 1)
    await b.view.wait_for(lambda v: v.partition_state("fenced", 0) is not None, WAIT)
    current = b.view.partitions[("fenced", 0)]
    with pytest.raises(StaleControllerEpochError):
        await b.update_partition_state("fenced", 0, current, current.value, controller=old)


async def test_revoked_lease_moves_controller_with_new_epoch(
    etcd_server: EtcdProcess,
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    a, b = await _cluster(metadata_clients, etcd_server, 2)
    ca = controllers(a)
    await asyncio.wait_for(ca.active.wait(), WAIT)
    cb = controllers(b)
    lease = a.lease_id
    assert lease is not None
    await b.etcd.revoke_lease(lease)  # as if etcd expired broker 1's lease
    # Exactly one of the two (broker 1 after re-registering, or broker 2) holds epoch 2.
    await b.view.wait_for(lambda v: v.controller is not None and v.controller.value.epoch == 2, WAIT)
    await asyncio.wait_for(a.reregistered.wait(), WAIT)
    assert b.view.controller is not None
    winner = ca if b.view.controller.value.broker_id == 1 else cb
    loser = cb if winner is ca else ca
    await asyncio.wait_for(winner.active.wait(), WAIT)
    assert winner.token is not None and winner.token.epoch == 2
    await asyncio.wait_for(_until(lambda: not loser.is_active), WAIT)
    assert loser.token is None


async def test_resigning_controller_hands_over_at_once(
    etcd_server: EtcdProcess,
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    a, b = await _cluster(metadata_clients, etcd_server, 2)
    ca = controllers(a)
    await asyncio.wait_for(ca.active.wait(), WAIT)
    cb = controllers(b)
    await ca.stop(resign=True)  # broker 1 still registered: only the role moves
    await asyncio.wait_for(cb.active.wait(), WAIT)
    assert cb.token is not None and cb.token.epoch == 2
    assert sorted(await b.live_brokers()) == [1, 2]


async def test_leader_elected_from_isr_when_leader_lease_expires(
    etcd_server: EtcdProcess,
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    a, b, c = await _cluster(metadata_clients, etcd_server, 3)
    ctl = controllers(a)
    await asyncio.wait_for(ctl.active.wait(), WAIT)
    created = await create_topic(b, "events", 6, 3)
    await a.view.wait_for_revision(created.mod_revision, WAIT)
    before = {p: _state(a.view, "events", p) for p in range(6)}
    led_by_2 = [p for p, s in before.items() if s.leader == 2]
    assert led_by_2
    # Broker 2 crashes (no revoke): once its lease expires the controller re-elects.
    await b.close(deregister=False)

    def settled(v: ClusterView) -> bool:
        return 2 not in v.brokers and all(2 not in _state(v, "events", p).isr for p in range(6))

    await a.view.wait_for(settled, WAIT)
    replicas = created.value.partitions
    for p in range(6):
        s = _state(a.view, "events", p)
        old = before[p]
        if p in led_by_2:
            # The first surviving ISR member in replica order, with the leader epoch bumped.
            expected = next(r for r in replicas[p] if r != 2)
            assert s.leader == expected and s.leader_epoch == old.leader_epoch + 1
        else:
            assert s.leader == old.leader and s.leader_epoch == old.leader_epoch
        assert set(s.isr) == {1, 3} and s.controller_epoch == ctl.token.epoch  # type: ignore[union-attr]
        assert s.partition_epoch == old.partition_epoch + 1
    # Counted once the write's reply is in, which may come just after the watch showed it.
    async with asyncio.timeout(WAIT):
        while ctl.elections < len(led_by_2):
            await asyncio.sleep(0.01)
    assert ctl.elections == len(led_by_2)
    assert await c.live_brokers() == a.view.brokers


async def test_out_of_sync_replica_not_elected_unless_unclean(
    etcd_server: EtcdProcess,
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    a, b, _ = await _cluster(metadata_clients, etcd_server, 3)
    ctl = controllers(a)
    await asyncio.wait_for(ctl.active.wait(), WAIT)
    clean = await create_topic(a, "clean", 3, 2)
    dirty = await create_topic(a, "dirty", 3, 2, {"unclean.leader.election.enable": "true"})
    await a.view.wait_for_revision(dirty.mod_revision, WAIT)
    # For every partition led by broker 2, the leader shrinks the ISR to itself (as a
    # leader does when its followers lag), so the follower is out of sync.
    shrunk: dict[tuple[str, int], int] = {}
    for topic, created in (("clean", clean), ("dirty", dirty)):
        for p, replicas in enumerate(created.value.partitions):
            if replicas[0] != 2:
                continue
            cur = a.view.partitions[(topic, p)]
            res = await b.update_partition_state(topic, p, cur, replace(cur.value, isr=(2,)))
            assert res.ok
            shrunk[(topic, p)] = replicas[1]
    assert {t for t, _ in shrunk} == {"clean", "dirty"}
    before = {k: _state(a.view, *k) for k in shrunk}
    await b.close(deregister=False)  # broker 2 crashes

    def decided(v: ClusterView) -> bool:
        return all(_state(v, *k).leader_epoch == before[k].leader_epoch + 1 for k in shrunk)

    await a.view.wait_for(decided, WAIT)
    for (topic, p), follower in shrunk.items():
        s = _state(a.view, topic, p)
        if topic == "clean":
            assert s.leader == NO_LEADER and s.isr == (2,)  # offline; the follower is not elected
        else:
            assert s.leader == follower and s.isr == (follower,)
    # Broker 2 comes back: as the last in-sync replica it leads its clean partitions again.
    await _broker(metadata_clients, etcd_server, 2)
    offline = [k for k in shrunk if k[0] == "clean"]
    await a.view.wait_for(lambda v: all(_state(v, *k).leader == 2 for k in offline), WAIT)
    for k in offline:
        assert _state(a.view, *k).leader_epoch == before[k].leader_epoch + 2


async def test_controller_fills_missing_partition_states(
    etcd_server: EtcdProcess,
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    (a,) = await _cluster(metadata_clients, etcd_server, 1)
    created = await create_topic(a, "holes", 3, 1)
    # As if the creator crashed between the steps of a large topic's creation.
    await a.etcd.delete(a.layout.partition_state("holes", 1))
    ctl = controllers(a)
    await asyncio.wait_for(ctl.active.wait(), WAIT)
    # Not just present (the view may still show the deleted state): written by the controller.
    await a.view.wait_for(lambda v: _epoch_of(v, "holes", 1) == ctl.token.epoch, WAIT)  # type: ignore[union-attr]
    s = _state(a.view, "holes", 1)
    assert s.leader == created.value.partitions[1][0] and s.controller_epoch == ctl.token.epoch  # type: ignore[union-attr]
    with contextlib.suppress(asyncio.CancelledError):
        await ctl.stop()


async def test_controller_keeps_office_across_etcd_restart(
    etcd_factory: Callable[[], EtcdProcess],
    metadata_clients: MakeClient,
    controllers: Callable[[MetadataClient], Controller],
) -> None:
    server = etcd_factory()
    a, b, _ = await _cluster(metadata_clients, server, 3)
    ctl = controllers(a)
    await asyncio.wait_for(ctl.active.wait(), WAIT)
    token = ctl.token
    created = await create_topic(a, "steady", 3, 3)
    await a.view.wait_for_revision(created.mod_revision, WAIT)
    server.restart()  # kill -9 and back: leases (and so the controller key) survive
    # Broker 2 then crashes; the same controller, same epoch, re-elects its partitions.
    await b.close(deregister=False)

    def settled(v: ClusterView) -> bool:
        return 2 not in v.brokers and all(_state(v, "steady", p).leader != 2 for p in range(3))

    await a.view.wait_for(settled, WAIT)
    assert ctl.token == token and ctl.is_active
    held = await a.get_controller()
    assert held is not None and held.value.epoch == 1
    assert all(_state(a.view, "steady", p).controller_epoch == 1 for p in range(3))
