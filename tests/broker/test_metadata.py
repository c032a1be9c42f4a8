"""broker.metadata against a real etcd: registration and leases, broker ids, topics,
compare-and-swap of partition state, the watched view, and etcd outages."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from broker.controller import create_topic
from broker.etcd import EtcdClient
from broker.keys import KeyLayout
from broker.metadata import (
    RESERVED_BROKER_MAX_ID,
    BrokerIdInUseError,
    Conflict,
    MetadataClient,
    PartitionState,
)
from hot.errors import (
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    MetadataStoreError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from tests.broker.conftest import CALL_TIMEOUT, LEASE_TTL
from tests.broker.etcdlib import EtcdProcess

MakeClient = Callable[..., Awaitable[MetadataClient]]
WAIT = 20.0  # upper bound for waits on watches and lease expiry; never reached when correct


async def _brokers(make: MakeClient, server: EtcdProcess, n: int) -> list[MetadataClient]:
    out = []
    for i in range(n):
        mc = await make(server)
        await mc.register("127.0.0.1", 9000 + i, 8000 + i, broker_id=i + 1)
        out.append(mc)
    return out


async def test_register_and_list_live_brokers(etcd_server: EtcdProcess, metadata_clients: MakeClient) -> None:
    a, b = await _brokers(metadata_clients, etcd_server, 2)
    live = await a.live_brokers()
    assert sorted(live) == [1, 2]
    assert live[2].registration.kafka_port == 9001 and live[2].epoch == b.broker_epoch > 0
    assert live[1].lease == a.lease_id
    await a.view.wait_for(lambda v: set(v.brokers) == {1, 2}, WAIT)
    assert a.view.brokers[2].registration == b.registration
    with pytest.raises(InvalidRequestError):
        await a.register("127.0.0.1", 1, 2, broker_id=9)


async def test_broker_ids_assigned_through_etcd_are_unique(
    etcd_server: EtcdProcess, metadata_clients: MakeClient
) -> None:
    made = [await metadata_clients(etcd_server) for _ in range(4)]
    regs = await asyncio.gather(*(mc.register("127.0.0.1", 9092, 8080) for mc in made))
    ids = sorted(r.broker_id for r in regs)
    assert ids == list(range(RESERVED_BROKER_MAX_ID + 1, RESERVED_BROKER_MAX_ID + 5))
    # An id held by a live broker is skipped even if the counter points at it.
    squatter = await metadata_clients(etcd_server)
    await squatter.register("127.0.0.1", 1, 2, broker_id=RESERVED_BROKER_MAX_ID + 5)
    late = await metadata_clients(etcd_server)
    assert (await late.register("127.0.0.1", 1, 2)).broker_id == RESERVED_BROKER_MAX_ID + 6


async def test_registering_a_live_id_fails_after_waiting(
    etcd_server: EtcdProcess, metadata_clients: MakeClient
) -> None:
    (a,) = await _brokers(metadata_clients, etcd_server, 1)
    b = await metadata_clients(etcd_server)
    with pytest.raises(BrokerIdInUseError, match="broker id 1"):
        await b.register("127.0.0.1", 1, 2, broker_id=1, wait=0.3)
    assert (await b.live_brokers())[1].lease == a.lease_id


async def test_restarted_broker_waits_for_its_old_lease(
    etcd_server: EtcdProcess, metadata_clients: MakeClient
) -> None:
    (a,) = await _brokers(metadata_clients, etcd_server, 1)
    await a.close(deregister=False)  # crash: the registration lingers until its TTL runs out
    again = await metadata_clients(etcd_server)
    reg = await again.register("127.0.0.1", 9000, 8000, broker_id=1)
    assert reg.broker_id == 1 and again.broker_epoch > a.broker_epoch


async def test_lease_expiry_removes_broker_from_live_view(
    etcd_server: EtcdProcess, metadata_clients: MakeClient
) -> None:
    a, b = await _brokers(metadata_clients, etcd_server, 2)
    await a.view.wait_for(lambda v: set(v.brokers) == {1, 2}, WAIT)
    await b.close(deregister=False)  # stops keep-alives without revoking: the lease must expire
    await a.view.wait_for(lambda v: set(v.brokers) == {1}, WAIT)
    assert sorted(await a.live_brokers()) == [1]


async def test_lost_lease_re_registers_with_new_epoch(
    etcd_server: EtcdProcess, metadata_clients: MakeClient
) -> None:
    a, b = await _brokers(metadata_clients, etcd_server, 2)
    old_lease, old_epoch = a.lease_id, a.broker_epoch
    assert old_lease is not None
    # As if etcd had expired it (e.g. the broker was cut off from etcd beyond the TTL).
    await b.etcd.revoke_lease(old_lease)
    await asyncio.wait_for(a.reregistered.wait(), WAIT)
    assert a.reregistrations == 1 and a.lease_id not in (None, old_lease)
    assert a.broker_epoch > old_epoch
    await b.view.wait_for(lambda v: 1 in v.brokers and v.brokers[1].epoch == a.broker_epoch, WAIT)
    assert b.view.brokers[1].registration == a.registration


async def test_create_topic_is_atomic_and_visible(
    etcd_server: EtcdProcess, metadata_clients: MakeClient
) -> None:
    a, b, _ = await _brokers(metadata_clients, etcd_server, 3)
    created = await create_topic(a, "orders", 6, 3, {"retention.ms": "60000"})
    t = created.value
    assert t.partition_count == 6 and t.replication_factor == 3 and t.configs == {"retention.ms": "60000"}
    assert all(sorted(r) == [1, 2, 3] for r in t.partitions)
    assert sorted(r[0] for r in t.partitions) == [1, 1, 2, 2, 3, 3]  # leaders spread
    for p, replicas in enumerate(t.partitions):
        s = await a.get_partition_state("orders", p)
        assert s is not None and s.mod_revision == created.mod_revision  # same transaction
        assert s.value == PartitionState(replicas[0], 0, replicas)
    # The other broker's view sees the topic and all its partitions.
    await b.view.wait_for_revision(created.mod_revision, WAIT)
    assert b.view.topics["orders"].value == t
    assert all(b.view.partition_state("orders", p) is not None for p in range(6))
    with pytest.raises(TopicExistsError):
        await create_topic(b, "orders", 1, 1)
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 3 live"):
        await create_topic(a, "wide", 1, 4)
    # Kafka's '.' versus '_' collision check, in cluster mode too.
    dotted = await create_topic(a, "order.events", 1, 1)
    await b.view.wait_for_revision(dotted.mod_revision, WAIT)
    with pytest.raises(InvalidTopicError, match=r"collides with existing topic 'order\.events'"):
        await create_topic(b, "order_events", 1, 1)
    assert await a.get_topic("wide") is None
    await a.delete_topic("orders")
    assert await a.get_topic("orders") is None and await a.get_partition_state("orders", 0) is None
    with pytest.raises(UnknownTopicOrPartitionError):
        await a.delete_topic("orders")


async def test_concurrent_topic_creation_has_one_winner(
    etcd_server: EtcdProcess, metadata_clients: MakeClient
) -> None:
    brokers = await _brokers(metadata_clients, etcd_server, 3)
    results = await asyncio.gather(
        *(create_topic(mc, "race", 4, 2) for mc in brokers for _ in range(3)), return_exceptions=True
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, TopicExistsError) for r in results if isinstance(r, BaseException))
    stored = await brokers[0].get_topic("race")
    assert stored is not None and stored.value == winners[0].value


async def test_large_topic_created_in_steps(etcd_server: EtcdProcess, metadata_clients: MakeClient) -> None:
    (a,) = await _brokers(metadata_clients, etcd_server, 1)
    small = await metadata_clients(etcd_server, max_txn_ops=4)
    created = await create_topic(small, "big", 11, 1)
    for p in range(11):
        s = await a.get_partition_state("big", p)
        assert s is not None and s.value.leader == 1
    assert created.value.partition_count == 11


async def test_partition_state_cas_conflicts(etcd_server: EtcdProcess, metadata_clients: MakeClient) -> None:
    a, b, _ = await _brokers(metadata_clients, etcd_server, 3)
    await create_topic(a, "cas", 1, 3)
    seen = await a.get_partition_state("cas", 0)
    assert seen is not None
    leader = seen.value.leader
    followers = [r for r in seen.value.isr if r != leader]
    shrunk = replace(seen.value, isr=(leader, followers[0]))
    # Two writers read the same version: the first wins, the second gets the winner's state.
    first = await a.update_partition_state("cas", 0, seen, shrunk)
    second = await b.update_partition_state("cas", 0, seen, replace(seen.value, isr=(leader,)))
    assert first.ok and first.state is not None and first.state.value.partition_epoch == 1
    assert not second.ok and second.conflict is Conflict.STALE_VERSION
    assert second.state == first.state
    # A leader change makes writers holding the old leader epoch fenced.
    assert first.state is not None
    moved = await a.update_partition_state(
        "cas", 0, first.state, PartitionState(followers[0], seen.value.leader_epoch + 1, (followers[0],))
    )
    assert moved.ok
    fenced = await b.update_partition_state("cas", 0, first.state, replace(first.state.value, isr=(leader,)))
    assert not fenced.ok and fenced.conflict is Conflict.FENCED_LEADER_EPOCH
    assert fenced.state == moved.state
    assert moved.state is not None
    with pytest.raises(InvalidRequestError, match="cannot go back"):
        await a.update_partition_state("cas", 0, moved.state, replace(moved.state.value, leader_epoch=0))
    await a.delete_topic("cas")
    gone = await a.update_partition_state("cas", 0, moved.state, moved.state.value)
    assert not gone.ok and gone.conflict is Conflict.DELETED and gone.state is None


async def test_concurrent_writers_lose_no_update(
    etcd_server: EtcdProcess, metadata_clients: MakeClient
) -> None:
    brokers = await _brokers(metadata_clients, etcd_server, 2)
    writers = brokers + [await metadata_clients(etcd_server) for _ in range(2)]
    await create_topic(brokers[0], "counter", 1, 2)
    per_writer = 15
    conflicts = 0

    async def bump(mc: MetadataClient) -> None:
        nonlocal conflicts
        done = 0
        current = await mc.get_partition_state("counter", 0)
        assert current is not None
        while done < per_writer:
            res = await mc.update_partition_state("counter", 0, current, current.value)
            if res.ok:
                done += 1
            else:
                conflicts += 1
                assert res.conflict is Conflict.STALE_VERSION
            assert res.state is not None
            current = res.state
            await asyncio.sleep(0)

    await asyncio.gather(*(bump(mc) for mc in writers))
    final = await brokers[0].get_partition_state("counter", 0)
    assert final is not None and final.value.partition_epoch == per_writer * len(writers)


async def test_view_survives_etcd_kill9_and_restart(
    etcd_factory: Callable[[], EtcdProcess], metadata_clients: MakeClient
) -> None:
    server = etcd_factory()
    a, b = await _brokers(metadata_clients, server, 2)
    await create_topic(a, "before", 1, 2)
    server.restart()  # SIGKILL
    created = None
    for _ in range(100):  # the channel reconnects within a second or so
        try:
            created = await create_topic(b, "after", 2, 2)
            break
        except MetadataStoreError:
            await asyncio.sleep(0.1)
    assert created is not None
    await a.view.wait_for_revision(created.mod_revision, WAIT)
    assert set(a.view.topics) == {"before", "after"}
    assert a.view.partition_state("after", 1) is not None
    # Leases survive an etcd crash: both brokers are still registered.
    assert sorted(await a.live_brokers()) == [1, 2] and a.reregistrations == b.reregistrations == 0


async def test_metadata_calls_during_outage_raise(
    etcd_factory: Callable[[], EtcdProcess], layout: KeyLayout
) -> None:
    server = etcd_factory()
    etcd = await EtcdClient(server.endpoint, timeout=CALL_TIMEOUT).connect()
    mc = await MetadataClient(etcd, layout, lease_ttl=LEASE_TTL).start()
    try:
        await mc.register("127.0.0.1", 1, 2, broker_id=1)
        await create_topic(mc, "t", 1, 1)
        state = await mc.get_partition_state("t", 0)
        assert state is not None
        server.kill()
        calls: list[Callable[[], Awaitable[object]]] = [
            mc.live_brokers,
            lambda: mc.get_topic("t"),
            lambda: mc.get_partition_state("t", 0),
            lambda: create_topic(mc, "u", 1, 1),
            lambda: mc.update_partition_state("t", 0, state, state.value),
            mc.allocate_broker_id,
            lambda: mc.delete_topic("t"),
        ]
        for call in calls:
            with pytest.raises(MetadataStoreError):
                await asyncio.wait_for(call(), WAIT)
        # A new client cannot start its view without etcd: an error, not a hang.
        other = MetadataClient(etcd, layout)
        with pytest.raises(MetadataStoreError):
            await asyncio.wait_for(other.start(timeout=1.0), WAIT)
        await other.close()
        # The cached view still answers while etcd is away.
        assert mc.view.partition_state("t", 0) == state.value
    finally:
        await mc.close(deregister=False)
        await etcd.close()
