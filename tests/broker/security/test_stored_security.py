"""A single node's ACLs, users and quotas in its embedded metadata store: the admin socket
(broker.store_socket) against the embedded store, the adoption of the old ``meta/*.json``
files (broker.security.adopt), and ``strata users --data-dir`` on a stopped data dir and
beside a running broker."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from pathlib import Path

import pytest

from broker.cluster_config import ClusterConfig
from broker.config import BrokerConfig
from broker.embedded_store import EmbeddedMetadataStore
from broker.keys import KeyLayout
from broker.metadata_store import Compare, Delete, Get, LeaseNotFoundError, Put, cas_update
from broker.node import ClusterNode
from broker.security.acl_store import encode_acls
from broker.security.adopt import adopt_security_files
from broker.security.quotas import QuotaTable
from broker.security.stored import StoredQuotas, read_users, set_password
from broker.security.users import UserTable
from broker.store_socket import (
    LocalStoreClient,
    LocalStoreServer,
    local_layout,
    open_data_dir_store,
    open_local_store,
    socket_path,
)
from hot.errors import MetadataStoreError
from kwire.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from tests.broker.security.test_sasl import strata_users
from tests.brokers import BrokerProcess

LAYOUT = KeyLayout("strata-local")
PW = "Stored-pw-31c9e0"


def grant(name: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, name, PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW
    )


async def test_admin_socket_serves_the_embedded_store(tmp_path: Path) -> None:
    meta = tmp_path / "meta"
    meta.mkdir()
    socket_path(meta).write_text("stale")  # a killed broker's socket: replaced
    async with EmbeddedMetadataStore(meta) as store:
        server = LocalStoreServer(store, meta, "c1")
        await server.start()
        try:
            assert stat.S_IMODE(socket_path(meta).stat().st_mode) == 0o600
            async with LocalStoreClient(meta, timeout=5) as client:
                assert client.cluster == "c1"
                assert await client.get(b"/k") is None
                rev = await client.put(b"/k", b"\x00v1")
                kv = await client.get(b"/k")
                assert kv is not None and kv.value == b"\x00v1" and kv.mod_revision == rev
                assert await store.get(b"/k") == kv  # the broker's store itself
                # cas_update (what `strata users` runs) over the socket, racing a local write
                new, _ = await cas_update(client, b"/k", lambda old: (old or b"") + b"+", attempts=3)
                assert new == b"\x00v1+"
                lost = await client.txn([Compare.mod_revision(b"/k", rev)], [Put(b"/k", b"x")], [Get(b"/k")])
                assert not lost.succeeded and lost.reads[0][0].value == b"\x00v1+"
                value_cmp = Compare.value_is(b"/k", b"\x00v1+")
                assert (await client.txn([value_cmp], [Put(b"/p/a", b"1"), Put(b"/p/b", b"2")])).succeeded
                kvs, revision = await client.get_prefix(b"/p/")
                assert [kv.key for kv in kvs] == [b"/p/a", b"/p/b"] and revision == await client.ping()
                assert await client.delete(b"/p/a") and not await client.delete(b"/p/a")
                assert await client.delete_prefix(b"/p/") == 1
                with pytest.raises(LeaseNotFoundError):  # leases are served (test_store_socket.py)
                    await client.put(b"/k", b"v", lease=7)
                # the store's own errors come back as they are
                with pytest.raises(MetadataStoreError, match="Get after a write"):
                    await client.txn([], [Delete(b"/k"), Get(b"/k")])
                assert (await client.get(b"/k")) is not None  # nothing of that transaction ran
        finally:
            await server.close()
        assert not socket_path(meta).exists()
        with pytest.raises(MetadataStoreError, match="cannot reach the broker's admin socket"):
            await LocalStoreClient(meta, timeout=1).connect()


async def test_admin_socket_on_a_long_path(tmp_path: Path) -> None:
    """A data dir whose socket path is over the 107 bytes of a Unix socket address."""
    meta = tmp_path / ("d" * 60) / ("e" * 60) / "meta"
    meta.mkdir(parents=True)
    assert len(os.fsencode(socket_path(meta))) > 107
    async with EmbeddedMetadataStore(meta) as store:
        server = LocalStoreServer(store, meta, "strata-local")
        await server.start()
        try:
            assert stat.S_IMODE(socket_path(meta).stat().st_mode) == 0o600
            async with LocalStoreClient(meta) as client:
                await client.put(b"/long", b"ok")
                assert (await store.get(b"/long")) is not None
        finally:
            await server.close()


async def test_a_locked_store_that_does_not_answer(tmp_path: Path) -> None:
    meta = tmp_path / "meta"
    async with EmbeddedMetadataStore(meta):  # holds the lock, serves no socket
        started = time.monotonic()
        with pytest.raises(MetadataStoreError, match="locked by a process that does not answer"):
            await open_local_store(meta, timeout=0.5)
        assert time.monotonic() - started < 5
    store = await open_local_store(meta, timeout=0.5)  # free again: opened directly
    try:
        assert isinstance(store, EmbeddedMetadataStore)
        assert (await local_layout(store, None)) == LAYOUT
        await store.put(b"/strata/other/quotas", b"{}")
        assert (await local_layout(store, None)) == KeyLayout("other")  # the one cluster it holds
    finally:
        await store.close()


def _old_files(meta: Path) -> tuple[bytes, bytes, bytes]:
    """The three files a single node kept before the embedded store, as it wrote them."""
    users = UserTable()
    users.put_password("alice", PW, iterations=4096)
    quotas = QuotaTable().altered([("alice", "producer_byte_rate", 1000.0)])
    docs = (
        encode_acls([grant("orders")]),
        users.document(),
        json.dumps(quotas.to_json(), indent=1, sort_keys=True).encode(),
    )
    meta.mkdir(parents=True, exist_ok=True)
    for name, data in zip(("acls.json", "users.json", "quotas.json"), docs, strict=True):
        (meta / name).write_bytes(data)
        (meta / name).chmod(0o600)
    return docs


async def test_adoption_is_idempotent_and_never_overwrites(tmp_path: Path) -> None:
    meta = tmp_path / "meta"
    acls, users, quotas = _old_files(meta)
    async with EmbeddedMetadataStore(meta) as store:
        # a crash after an earlier run wrote the users key (then changed by an admin) but
        # before it renamed the files: the store's newer value stays
        newer = b'{"version": 1, "users": {}}'
        await store.put(LAYOUT.users, newer)
        assert await adopt_security_files(store, LAYOUT, meta) == ["acls.json", "users.json", "quotas.json"]
        for key, want in ((LAYOUT.acls, acls), (LAYOUT.users, newer), (LAYOUT.quotas, quotas)):
            kv = await store.get(key)
            assert kv is not None and kv.value == want
        assert sorted(p.name for p in meta.glob("*.json*")) == [
            "acls.json.adopted",
            "quotas.json.adopted",
            "users.json.adopted",
        ]
        assert (meta / "users.json.adopted").read_bytes() == users  # kept, nothing lost
        revision = await store.ping()
        assert await adopt_security_files(store, LAYOUT, meta) == []  # again: nothing to do
        assert await store.ping() == revision


async def test_a_single_node_adopts_its_old_files(tmp_path: Path) -> None:
    """Old files -> the store at the first start; the restart reads them from the store."""
    data = tmp_path / "data"
    _old_files(data / "meta")
    config = BrokerConfig(data_dir=data)
    for start in range(2):
        node = await ClusterNode.connect(config, ClusterConfig.of_one(config.broker_id))
        try:
            assert not (data / "meta" / "acls.json").exists()
            assert (data / "meta" / "acls.json.adopted").exists()
            await node.start_security()
            assert node.acl_store().bindings() == (grant("orders"),), start
            users = node.user_store().reload()
            cred = users.credential("alice", "SCRAM-SHA-256")
            assert users.names() == ["alice"] and cred is not None
            quotas = StoredQuotas(node.etcd, node.client.layout, node.client.view)
            assert quotas.table().users == {"alice": {"producer_byte_rate": 1000.0}}
        finally:
            await node.close()


def _names(data: Path) -> list[str]:
    out = strata_users(data, "list", "--output", "json")
    assert out.returncode == 0, out.stderr
    return [row["user"] for row in json.loads(out.stdout)]


def _add(data: Path, name: str) -> None:
    r = strata_users(data, "add", name, "--password-stdin", stdin=PW + "\n")
    assert r.returncode == 0, r.stderr


def test_cli_users_on_a_stopped_and_a_running_broker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert _names(data) == [] and not data.exists()  # listing creates nothing
    _add(data, "alice")  # no broker: the store opened directly
    assert _names(data) == ["alice"]
    b = BrokerProcess(data, env={"STRATA_SASL_MECHANISMS": "PLAIN"}).start()
    try:
        sock = socket_path(data / "meta")
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        _add(data, "bob")  # through the running broker's admin socket
        assert _names(data) == ["alice", "bob"]

        async def broker_sees() -> list[str]:
            async with open_data_dir_store(data) as (store, layout):
                assert isinstance(store, LocalStoreClient)
                return (await read_users(store, layout)).names()

        assert asyncio.run(broker_sees()) == ["alice", "bob"]
        assert strata_users(data, "delete", "alice").returncode == 0
        gone = strata_users(data, "delete", "alice")
        assert gone.returncode != 0 and "no user named 'alice'" in gone.stderr
        assert _names(data) == ["bob"]
    finally:
        b.stop()
    assert not socket_path(data / "meta").exists()
    assert _names(data) == ["bob"]  # the stopped data dir's store, opened directly


async def test_set_password_over_the_socket_reaches_the_brokers_view(tmp_path: Path) -> None:
    """What a login checks (StoredUsers over the watch) sees a write made through the socket."""
    config = BrokerConfig(data_dir=tmp_path / "data")
    node = await ClusterNode.connect(config, ClusterConfig.of_one(config.broker_id))
    try:
        await node.start_security()
        users = node.user_store()
        async with open_data_dir_store(config.data_dir) as (store, layout):
            assert isinstance(store, LocalStoreClient)
            assert await set_password(store, layout, "carol", PW) is False
        deadline = time.monotonic() + 5
        while users.reload().names() != ["carol"]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
    finally:
        await node.close()
