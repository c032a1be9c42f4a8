"""The authorizer's decision rules and the ACL filters, as pure logic (Kafka's semantics)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.embedded_store import EmbeddedMetadataStore
from broker.keys import KeyLayout
from broker.security.acl import Authorizer, parse_principals
from broker.security.stored import SecurityDocuments, StoredAcls
from kwire.acl import AclBinding, AclError, AclFilter, Operation, PatternType, Permission, ResourceType

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(
    rt: ResourceType,
    name: str,
    op: Operation,
    perm: Permission = ALLOW,
    principal: str = "User:alice",
    pattern: PatternType = LIT,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, perm).validate()


def ok(bindings: list[AclBinding], op: Operation, rt: ResourceType, name: str, **kw: object) -> bool:
    az = Authorizer(kw.pop("supers", ()), allow_if_no_acl=bool(kw.pop("open", False)))  # type: ignore[arg-type]
    principal = str(kw.pop("principal", "User:alice"))
    host = str(kw.pop("host", "127.0.0.1"))
    return az.authorize(bindings, principal, host, op, rt, name)


def test_deny_by_default_and_the_open_option() -> None:
    assert not ok([], Operation.READ, T, "orders")
    assert ok([], Operation.READ, T, "orders", open=True)
    # a resource some ACL names is no longer "without ACLs": the open option stops applying
    other = [acl(T, "orders", Operation.READ, principal="User:bob")]
    assert not ok(other, Operation.READ, T, "orders", open=True)


def test_literal_prefixed_and_wildcard() -> None:
    b = [acl(T, "orders", Operation.READ), acl(T, "logs-", Operation.WRITE, pattern=PRE)]
    assert ok(b, Operation.READ, T, "orders")
    assert not ok(b, Operation.READ, T, "orders2")
    assert ok(b, Operation.WRITE, T, "logs-app")
    assert not ok(b, Operation.WRITE, T, "log")
    star = [acl(T, "*", Operation.READ)]
    assert ok(star, Operation.READ, T, "anything")
    # a prefixed "*" is the literal prefix "*", not a wildcard
    assert not ok([acl(T, "*", Operation.READ, pattern=PRE)], Operation.READ, T, "x")
    # resource types do not mix
    assert not ok([acl(G, "orders", Operation.READ)], Operation.READ, T, "orders")


def test_deny_wins_over_allow() -> None:
    b = [acl(T, "*", Operation.ALL), acl(T, "secret", Operation.READ, DENY)]
    assert not ok(b, Operation.READ, T, "secret")
    assert ok(b, Operation.WRITE, T, "secret")
    assert ok(b, Operation.READ, T, "public")
    everyone_denied = [acl(T, "x", Operation.ALL), acl(T, "x", Operation.ALL, DENY, principal="User:*")]
    assert not ok(everyone_denied, Operation.WRITE, T, "x")


def test_all_and_implied_operations() -> None:
    assert ok([acl(T, "t", Operation.ALL)], Operation.DELETE, T, "t")
    for op in (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER):
        assert ok([acl(T, "t", op)], Operation.DESCRIBE, T, "t"), op
    assert not ok([acl(T, "t", Operation.CREATE)], Operation.DESCRIBE, T, "t")
    assert ok([acl(T, "t", Operation.ALTER_CONFIGS)], Operation.DESCRIBE_CONFIGS, T, "t")
    assert not ok([acl(T, "t", Operation.DESCRIBE_CONFIGS)], Operation.ALTER_CONFIGS, T, "t")
    # implication is only for ALLOW: a DENY READ does not deny DESCRIBE
    b = [acl(T, "t", Operation.WRITE), acl(T, "t", Operation.READ, DENY)]
    assert ok(b, Operation.DESCRIBE, T, "t")


def test_principals_hosts_and_super_users() -> None:
    b = [acl(T, "t", Operation.READ, principal="User:*"), acl(T, "u", Operation.READ, host="10.0.0.1")]
    assert ok(b, Operation.READ, T, "t", principal="User:bob")
    assert not ok(b, Operation.READ, T, "u")
    assert ok(b, Operation.READ, T, "u", host="10.0.0.1")
    assert ok([], Operation.ALTER, C, "kafka-cluster", principal="User:admin", supers={"User:admin"})
    deny = [acl(C, "kafka-cluster", Operation.ALL, DENY, principal="User:admin")]
    assert ok(deny, Operation.ALTER, C, "kafka-cluster", principal="User:admin", supers={"User:admin"})


def test_authorize_on_some_topic() -> None:
    az = Authorizer()
    b = [acl(T, "logs-", Operation.WRITE, pattern=PRE)]
    assert az.authorize_on_some(b, "User:alice", "h", Operation.WRITE, T)
    assert not az.authorize_on_some(b, "User:bob", "h", Operation.WRITE, T)
    b.append(acl(T, "*", Operation.WRITE, DENY))
    assert not az.authorize_on_some(b, "User:alice", "h", Operation.WRITE, T)


def test_validation_and_principal_lists() -> None:
    with pytest.raises(AclError):
        acl(C, "other", Operation.ALTER)
    with pytest.raises(AclError):
        acl(T, "t", Operation.ANY)
    with pytest.raises(AclError):
        acl(T, "t", Operation.READ, principal="alice")
    assert parse_principals("User:admin,User:CN=ops,O=acme") == {"User:admin", "User:CN=ops,O=acme"}
    assert parse_principals("User:a; User:b") == {"User:a", "User:b"}


def test_filters() -> None:
    lit = acl(T, "orders", Operation.READ)
    pre = acl(T, "ord", Operation.WRITE, pattern=PRE)
    star = acl(T, "*", Operation.READ, DENY)
    grp = acl(G, "g", Operation.READ, principal="User:bob")
    every = [lit, pre, star, grp]
    assert [b for b in every if AclFilter().matches(b)] == every
    assert [b for b in every if AclFilter(T, "orders", PatternType.MATCH).matches(b)] == [lit, pre, star]
    assert [b for b in every if AclFilter(T, "orders", PatternType.ANY).matches(b)] == [lit]
    assert [b for b in every if AclFilter(T, None, PRE).matches(b)] == [pre]
    assert [b for b in every if AclFilter(principal="User:bob").matches(b)] == [grp]
    assert [b for b in every if AclFilter(permission=DENY).matches(b)] == [star]
    with pytest.raises(AclError):
        AclFilter(operation=Operation.UNKNOWN).validate()


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def test_stored_acls_are_private_and_reload(tmp_path: Path) -> None:
    """Two views of one store (as two brokers'): each sees the other's changes through
    its watch; the store's files are private."""

    async def run() -> None:
        async with EmbeddedMetadataStore(tmp_path / "meta") as store:
            docs = [SecurityDocuments(store, KeyLayout("strata-local")) for _ in range(2)]
            for d in docs:
                await d.start()
            a, b = (StoredAcls(d) for d in docs)
            try:
                one, two = acl(T, "x", Operation.READ), acl(G, "g", Operation.READ)
                await a.create([one, two, one])
                await eventually(lambda: b.bindings() == (one, two))  # the other instance sees it
                journal = tmp_path / "meta" / "metadata.journal"
                assert oct(journal.stat().st_mode & 0o777) == "0o600"
                matched = await b.delete([AclFilter(resource_type=G), AclFilter(resource_type=G)])
                assert matched == [[two], [two]]
                await eventually(lambda: a.bindings() == (one,))
            finally:
                for d in docs:
                    await d.close()

    asyncio.run(run())


def test_authorization_config(tmp_path: Path) -> None:
    from broker.config import load_config
    from hot.errors import InvalidConfigError

    toml = tmp_path / "a.toml"
    toml.write_text('[authorization]\nenabled = true\nsuper_users = ["User:admin", "User:CN=ops,O=acme"]\n')
    cfg = load_config(config_file=toml, env={})
    assert cfg.authorization.enabled and not cfg.authorization.allow_everyone_if_no_acl_found
    assert cfg.authorization.super_users == {"User:admin", "User:CN=ops,O=acme"}
    env = {"STRATA_AUTHORIZATION_ENABLED": "1", "STRATA_AUTHORIZATION_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true"}
    assert load_config(env=env).authorization.allow_everyone_if_no_acl_found
    assert load_config(env={}).authorization.enabled is False
    with pytest.raises(InvalidConfigError, match="super_users"):
        load_config(env={"STRATA_AUTHORIZATION_SUPER_USERS": "admin"})
    toml.write_text("[authorization]\nenable = true\n")
    with pytest.raises(InvalidConfigError, match="unknown authorization setting 'enable'"):
        load_config(config_file=toml, env={})
    cluster = {"STRATA_AUTHORIZATION_ENABLED": "true", "STRATA_ETCD": "127.0.0.1:2379"}
    with pytest.raises(InvalidConfigError, match="needs internal_listen"):
        load_config(env=cluster)
    assert load_config(env={**cluster, "STRATA_INTERNAL_LISTEN": "127.0.0.1:0"}).authorization.enabled


def test_malformed_acls_file_stops_the_broker(tmp_path: Path) -> None:
    from tests.brokers import BrokerProcess

    path = tmp_path / "meta" / "acls.json"  # a single node's file from before the metadata store
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "acls": [{"resource_type": "TOPIC"}]}')
    b = BrokerProcess(tmp_path, env={"STRATA_AUTHORIZATION_ENABLED": "true"})
    with pytest.raises(RuntimeError, match="exited during start-up") as exc:
        b.start(timeout=60)
    assert "acls.json: malformed ACL" in str(exc.value)
