"""ACLs and SASL users in etcd (broker.security.stored) against a real etcd: two brokers' views
stay identical through their watches, concurrent creations through both land (compare-
and-swap), deletions propagate, and `strata users --etcd`'s writes reach a broker's store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker.etcd import EtcdClient
from broker.keys import KeyLayout
from broker.security.stored import (
    SecurityDocuments,
    StoredAcls,
    StoredUsers,
    delete_user,
    read_users,
    set_password,
)
from kclient.scram import HASHES, verify_password
from kwire.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from tests.broker.etcdlib import EtcdProcess

Clients = Callable[[EtcdProcess], EtcdClient]


def acl(i: int) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, f"t{i}", PatternType.LITERAL, f"User:u{i}", "*", Operation.READ, Permission.ALLOW
    )


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_two_brokers_share_acls(etcd_server: EtcdProcess, clients: Clients, layout: KeyLayout) -> None:
    docs = [SecurityDocuments(await clients(etcd_server).connect(), layout) for _ in range(2)]
    for d in docs:
        await d.start()
    a, b = (StoredAcls(d) for d in docs)
    try:
        assert a.bindings() == b.bindings() == ()
        # ten creations racing through both brokers: every one lands exactly once
        await asyncio.gather(*(s.create([acl(i)]) for i, s in zip(range(10), [a, b] * 5, strict=True)))
        want = {acl(i) for i in range(10)}
        await eventually(lambda: set(a.bindings()) == set(b.bindings()) == want)
        assert len(a.bindings()) == 10
        matched = await b.delete([AclFilter(principal="User:u3"), AclFilter(resource_name="t4")])
        assert matched == [[acl(3)], [acl(4)]]
        await eventually(lambda: set(a.bindings()) == want - {acl(3), acl(4)})
    finally:
        for d in docs:
            await d.close()


async def test_users_in_etcd(etcd_server: EtcdProcess, clients: Clients, layout: KeyLayout) -> None:
    docs = SecurityDocuments(await clients(etcd_server).connect(), layout)
    await docs.start()
    store = StoredUsers(docs)
    cli = await clients(etcd_server).connect()  # what `strata users --etcd` opens
    try:
        assert store.reload().names() == []
        assert await set_password(cli, layout, "alice", "pw-1") is False
        await eventually(lambda: store.reload().names() == ["alice"])
        before = store.version
        cred = store.credential("alice", "SCRAM-SHA-512")
        assert cred is not None and verify_password(HASHES["SCRAM-SHA-512"], cred, "pw-1")
        assert await set_password(cli, layout, "alice", "pw-2") is True
        await eventually(lambda: store.reload().version != before)
        cred = store.credential("alice", "SCRAM-SHA-256")
        assert cred is not None and verify_password(HASHES["SCRAM-SHA-256"], cred, "pw-2")
        listed = await read_users(cli, layout)
        assert listed.names() == ["alice"] and listed.mechanisms("alice") == [
            "SCRAM-SHA-256",
            "SCRAM-SHA-512",
        ]
        etcd = await clients(etcd_server).connect()
        kv = await etcd.get(layout.users)
        assert kv is not None and b"pw-2" not in kv.value and b"stored_key" in kv.value  # hashed
        assert await delete_user(cli, layout, "alice") is True
        assert await delete_user(cli, layout, "alice") is False
        await eventually(lambda: store.reload().names() == [])
    finally:
        await docs.close()
