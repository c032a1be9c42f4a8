"""ACL authorization on a real single-node broker (SASL_PLAINTEXT on loopback), with real
clients: confluent-kafka and kafka-python admin manage ACLs; producers, consumers and kcat
are refused exactly what no ACL allows; the super user is never refused; a broker with
authorization off answers SECURITY_DISABLED; no password reaches the broker's output."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.security.test_sasl import strata_users
from tests.broker.security.test_tls import wait_for_line
from tests.brokers import BrokerProcess

ADMIN_PW = "Admin-pw-0c4e2a"
ALICE_PW = "Alice-pw-ab31f0"
BOB_PW = "Bob-pw-77d1e3"
SECRETS = (ADMIN_PW, ALICE_PW, BOB_PW)
MECH = "SCRAM-SHA-256"


def stored_acls(data: Path) -> bytes | None:
    """The ACL document of ``data``'s metadata store (through the broker while it runs)."""
    import asyncio

    from broker.store_socket import open_data_dir_store

    async def read() -> bytes | None:
        async with open_data_dir_store(data) as (store, layout):
            kv = await store.get(layout.acls)
            return None if kv is None else kv.value

    return asyncio.run(read())


def add_user(data: Path, name: str, pw: str) -> None:
    r = strata_users(data, "add", name, "--password-stdin", stdin=pw + "\n")
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("authz")
    for name, pw in (("admin", ADMIN_PW), ("alice", ALICE_PW), ("bob", BOB_PW)):
        add_user(data, name, pw)
    env = {
        "STRATA_SASL_MECHANISMS": f"{MECH},PLAIN",
        "STRATA_AUTHORIZATION_ENABLED": "true",
        "STRATA_AUTHORIZATION_SUPER_USERS": "User:admin",
        "STRATA_SASL_REST_BASIC_AUTH": "true",
    }
    b = BrokerProcess(data, env=env).start()
    yield b
    b.kill()
    out = b.output()
    for secret in SECRETS:
        assert secret not in out


def conf(b: BrokerProcess, user: str, pw: str, mech: str = MECH) -> dict[str, Any]:
    return {
        "bootstrap.servers": b.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mech,
        "sasl.username": user,
        "sasl.password": pw,
    }


def admin_client(b: BrokerProcess, user: str = "admin", pw: str = ADMIN_PW) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(conf(b, user, pw))


def create_topics(b: BrokerProcess, *names: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin = admin_client(b)
    for f in admin.create_topics([NewTopic(n, num_partitions=1) for n in names]).values():
        f.result(timeout=30)


def binding(
    rtype: str, name: str, principal: str, op: str, *, prefixed: bool = False, deny: bool = False
) -> Any:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(
        ResourceType[rtype],
        name,
        ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
        principal,
        "*",
        AclOperation[op],
        AclPermissionType.DENY if deny else AclPermissionType.ALLOW,
    )


def add_acls(b: BrokerProcess, *bindings: Any) -> None:
    admin = admin_client(b)  # referenced until the futures resolve
    for f in admin.create_acls(list(bindings)).values():
        f.result(timeout=30)


def produce(c: dict[str, Any], topic: str, n: int = 3) -> list[Any]:
    """Delivery errors (None for delivered records), bounded."""
    from confluent_kafka import Producer

    results: list[Any] = []
    p = Producer({**c, "message.timeout.ms": 10000, "retries": 0})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), on_delivery=lambda err, msg: results.append(err))
    p.flush(30)
    return results


def test_confluent_admin_acls_and_cluster_authorization(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    b1 = binding("TOPIC", "acl-t", "User:alice", "READ")
    b2 = binding("TOPIC", "acl-", "User:alice", "WRITE", prefixed=True)
    b3 = binding("GROUP", "acl-g", "User:bob", "READ", deny=True)
    add_acls(broker, b1, b2, b3)
    admin = admin_client(broker)
    any_filter = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    got = admin.describe_acls(any_filter).result(timeout=30)
    assert {b1, b2, b3} <= set(got)
    alice = AclBindingFilter(
        ResourceType.TOPIC,
        None,
        ResourcePatternType.ANY,
        "User:alice",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert set(admin.describe_acls(alice).result(timeout=30)) >= {b1, b2}
    # bob is neither a super user nor allowed ALTER/DESCRIBE on the cluster
    bob = admin_client(broker, "bob", BOB_PW)
    # (librdkafka 2.16 turns a refused DescribeAcls into an empty list: nothing leaks)
    start = len(broker.lines)
    assert bob.describe_acls(any_filter).result(timeout=30) == []
    wait_for_line(broker, "denied User:bob DESCRIBE on cluster", start)
    with pytest.raises(KafkaException) as exc:
        for f in bob.create_acls([binding("TOPIC", "x", "User:bob", "ALL")]).values():
            f.result(timeout=30)
    assert "CLUSTER_AUTHORIZATION_FAILED" in str(exc.value) or "not authorized" in str(exc.value)
    deny_filter = AclBindingFilter(
        ResourceType.GROUP,
        "acl-g",
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.DENY,
    )
    deleted = next(iter(admin.delete_acls([deny_filter]).values())).result(timeout=30)
    assert deleted == [b3]
    assert b3 not in set(admin.describe_acls(any_filter).result(timeout=30))
    assert stored_acls(broker.data_dir) is not None  # persisted in the data dir's metadata store


def test_write_and_read_need_acls(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, KafkaError

    topic, group = f"orders-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    alice, bob = conf(broker, "alice", ALICE_PW), conf(broker, "bob", BOB_PW)
    # no ACL yet: deny by default
    errs = produce(alice, topic, 1)
    assert errs and errs[0] is not None and errs[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errs
    add_acls(broker, binding("TOPIC", topic, "User:alice", "WRITE"))
    assert produce(alice, topic) == [None, None, None]
    errs = produce(bob, topic, 1)
    assert errs[0] is not None and errs[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # the super user is never refused
    assert produce(conf(broker, "admin", ADMIN_PW), topic, 1) == [None]

    def consume(c: dict[str, Any], want: int) -> tuple[list[bytes], list[int]]:
        consumer = Consumer(
            {**c, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
        consumer.subscribe([topic])
        got: list[bytes] = []
        errors: list[int] = []
        deadline = time.monotonic() + 20
        try:
            while len(got) < want and not errors and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is None:
                    continue
                if m.error() is not None:
                    errors.append(m.error().code())
                else:
                    got.append(m.value() or b"")
            if got:
                consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        return got, errors

    # READ on the topic but not on the group: the group refuses
    add_acls(broker, binding("TOPIC", topic, "User:bob", "READ"))
    got, errors = consume(bob, 4)
    assert not got and KafkaError.GROUP_AUTHORIZATION_FAILED in errors, errors
    add_acls(broker, binding("GROUP", group, "User:bob", "READ"))
    got, errors = consume(bob, 4)
    assert got == [b"v0", b"v1", b"v2", b"v0"] and not errors
    # a DENY beats the ALLOW: bob can no longer read the topic
    add_acls(broker, binding("TOPIC", topic, "User:bob", "READ", deny=True))
    got, errors = consume(bob, 1)
    assert not got and KafkaError.TOPIC_AUTHORIZATION_FAILED in errors, errors


def test_metadata_lists_only_describable_topics(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    visible, hidden = f"vis-{uuid.uuid4().hex[:6]}", f"hid-{uuid.uuid4().hex[:6]}"
    create_topics(broker, visible, hidden)
    add_acls(broker, binding("TOPIC", visible, "User:alice", "DESCRIBE"))
    md = AdminClient(conf(broker, "alice", ALICE_PW)).list_topics(timeout=30)
    assert visible in md.topics and hidden not in md.topics
    md = admin_client(broker).list_topics(timeout=30)
    assert visible in md.topics and hidden in md.topics


def test_kafka_python_admin_acls(broker: BrokerProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    admin = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="admin",
        sasl_plain_password=ADMIN_PW,
        request_timeout_ms=30000,
    )
    try:
        acl = ACL(
            "User:carol",
            "*",
            ACLOperation.READ,
            ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "kp-topic", ACLResourcePatternType.LITERAL),
        )
        result = admin.create_acls([acl])
        assert result["succeeded"] == [acl] and not result["failed"]
        flt = ACLFilter(
            "User:carol",
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY),
        )
        found, _ = admin.describe_acls(flt)
        assert [(a.principal, a.resource_pattern.resource_name) for a in found] == [
            ("User:carol", "kp-topic")
        ]
        ((_, matches, _error),) = admin.delete_acls([flt])
        assert [m[0].principal if isinstance(m, tuple) else m.principal for m in matches] == ["User:carol"]
        found, _ = admin.describe_acls(flt)
        assert found == []
    finally:
        admin.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_with_and_without_acl(broker: BrokerProcess) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    common = ["-b", broker.bootstrap, "-t", topic, "-p", "0"]
    for k, v in conf(broker, "alice", ALICE_PW).items():
        if k != "bootstrap.servers":
            common += ["-X", f"{k}={v}"]
    refused = subprocess.run(["kcat", "-P", *common], input=b"x\n", timeout=60, capture_output=True)
    assert refused.returncode != 0 and b"uthoriz" in refused.stderr, refused.stderr
    add_acls(broker, binding("TOPIC", topic, "User:alice", "ALL"))
    subprocess.run(["kcat", "-P", *common], input=b"x\ny\n", check=True, timeout=60)
    out = subprocess.run(
        ["kcat", "-C", *common, "-o", "beginning", "-e", "-q"], check=True, timeout=60, capture_output=True
    )
    assert out.stdout.split() == [b"x", b"y"]
    assert ALICE_PW.encode() not in refused.stderr


def test_security_disabled(tmp_path: Path) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    b = BrokerProcess(tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        with pytest.raises(KafkaException) as exc:
            for f in admin.create_acls([binding("TOPIC", "t", "User:x", "READ")]).values():
                f.result(timeout=30)
        assert "SECURITY_DISABLED" in str(exc.value) or "not enabled" in str(exc.value)
    finally:
        b.kill()


def strata_acl(
    b: BrokerProcess, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> Any:
    import os
    import sys

    from tests.brokers import ROOT

    return subprocess.run(
        [sys.executable, "-m", "api.cli", "acl", *args, "--bootstrap", b.bootstrap],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_strata_acl_cli(broker: BrokerProcess, tmp_path: Path) -> None:
    import json

    as_admin = ("--sasl-user", "admin", "--sasl-mechanism", MECH)
    env = {"STRATA_SASL_PASSWORD": ADMIN_PW}
    added = strata_acl(
        broker, "add", "-p", "User:dave", "--operation", "read", "--operation", "describe",
        "--topic", "cli-", "--prefixed", "-o", "json", *as_admin, env=env,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert {r["operation"] for r in json.loads(added.stdout)} == {"READ", "DESCRIBE"}
    # a --command-config file, librdkafka style, password read from stdin instead
    props = tmp_path / "client.properties"
    props.write_text("# admin\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\n")
    listed = strata_acl(
        broker, "list", "-p", "User:dave", "-o", "json", "--command-config", str(props), "--password-stdin",
        stdin=ADMIN_PW + "\n",
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert {(r["resource_name"], r["pattern_type"], r["operation"]) for r in rows} == {
        ("cli-", "PREFIXED", "READ"),
        ("cli-", "PREFIXED", "DESCRIBE"),
    }
    text = strata_acl(broker, "list", "--topic", "cli-", "--prefixed", *as_admin, env=env)
    assert "ALLOW\tUser:dave\tREAD\ttopic:cli- (prefixed)\thost=*" in text.stdout
    # not a super user: one line, no secret
    refused = strata_acl(broker, "list", "--sasl-user", "bob", env={"STRATA_SASL_PASSWORD": BOB_PW})
    assert refused.returncode == 1
    assert refused.stderr.startswith("strata: error: not authorized to DESCRIBE the cluster")
    assert refused.stderr.count("\n") == 1 and BOB_PW not in refused.stderr
    wrong = strata_acl(broker, "list", "--sasl-user", "admin", env={"STRATA_SASL_PASSWORD": "Wrong-7c1d"})
    assert wrong.returncode == 1 and "Wrong-7c1d" not in wrong.stderr + wrong.stdout
    assert "invalid user name or password" in wrong.stderr
    removed = strata_acl(broker, "remove", "-p", "User:dave", "--operation", "describe", *as_admin, env=env)
    assert removed.returncode == 0 and "removed\tALLOW\tUser:dave\tDESCRIBE" in removed.stdout
    left = strata_acl(broker, "list", "-p", "User:dave", "-o", "json", *as_admin, env=env)
    assert [r["operation"] for r in json.loads(left.stdout)] == ["READ"]
    everything = strata_acl(broker, "remove", *as_admin, env=env)
    assert everything.returncode == 1 and "refusing to remove every ACL" in everything.stderr


def test_rest_401_and_403(broker: BrokerProcess) -> None:
    import httpx

    topic = f"rest-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    body = {"records": [{"value": {"n": 1}}]}
    ctype = {"Content-Type": "application/vnd.kafka.json.v2+json"}
    with httpx.Client(base_url=broker.http_url, timeout=30) as http:
        assert http.post(f"/topics/{topic}", json=body, headers=ctype).status_code == 401
        assert http.get("/topics", auth=("alice", "Wrong-3e9f")).status_code == 401
        r = http.post(f"/topics/{topic}", json=body, headers=ctype, auth=("alice", ALICE_PW))
        assert r.status_code == 403, r.text
        assert r.json()["message"] == f"not authorized to WRITE topic {topic!r}"
        assert r.json()["error_code"] // 100 == 403
        add_acls(broker, binding("TOPIC", topic, "User:alice", "WRITE"))
        r = http.post(f"/topics/{topic}", json=body, headers=ctype, auth=("alice", ALICE_PW))
        assert r.status_code == 200 and r.json()["offsets"][0]["error_code"] is None, r.text
        records = f"/topics/{topic}/partitions/0/records?offset=0&timeout=0"
        accept = {"Accept": "application/vnd.kafka.json.v2+json"}
        assert http.get(records, headers=accept, auth=("alice", ALICE_PW)).status_code == 403
        add_acls(broker, binding("TOPIC", topic, "User:alice", "READ"))
        r = http.get(records, headers=accept, auth=("alice", ALICE_PW))
        assert r.status_code == 200 and [x["value"] for x in r.json()] == [{"n": 1}]
        # listings show only what the user may describe; the super user sees everything
        assert topic in http.get("/topics", auth=("alice", ALICE_PW)).json()
        assert topic not in http.get("/topics", auth=("bob", BOB_PW)).json()
        assert topic in http.get("/topics", auth=("admin", ADMIN_PW)).json()
        r = http.delete(f"/v3/clusters/strata-local/topics/{topic}", auth=("alice", ALICE_PW))
        assert r.status_code == 403 and "DELETE" in r.json()["message"]
        r = http.post(
            "/consumers/rest-g",
            json={"name": "c1", "format": "json"},
            auth=("alice", ALICE_PW),
            headers=ctype,
        )
        assert r.status_code == 403 and "group 'rest-g'" in r.json()["message"]


def test_spark_include_hot_needs_acls(broker: BrokerProcess) -> None:
    """The Spark source's broker path (plan: Metadata + ListOffsets; tasks: Fetch) over
    SASL: refused with an error naming the topic until ACLs allow DESCRIBE, then READ."""
    from hot.errors import TopicAuthorizationFailedError
    from spark.options import ReadOptions
    from spark.plan import HotTask, plan_scan
    from spark.scan import read_task

    topic = f"spark-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    assert produce(conf(broker, "admin", ADMIN_PW), topic) == [None, None, None]
    options = {
        "topic": topic,
        "includeHot": "true",
        "broker": broker.bootstrap,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": MECH,
        "kafka.sasl.username": "alice",
        "kafka.sasl.password": ALICE_PW,
    }
    opts = ReadOptions.parse(options, path=f"file://{broker.data_dir.resolve()}/objects")
    assert ALICE_PW not in repr(opts)
    with pytest.raises(TopicAuthorizationFailedError) as exc:
        plan_scan(opts)
    assert f"DESCRIBE topic {topic!r}" in str(exc.value) and ALICE_PW not in str(exc.value)
    add_acls(broker, binding("TOPIC", topic, "User:alice", "DESCRIBE"))
    plan = plan_scan(opts)
    (task,) = plan.tasks
    assert isinstance(task, HotTask) and (task.start_offset, task.end_offset) == (0, 3)
    with pytest.raises(TopicAuthorizationFailedError) as exc:
        list(read_task(task, opts))
    assert f"READ topic {topic!r}" in str(exc.value)
    add_acls(broker, binding("TOPIC", topic, "User:alice", "READ"))
    rows = [v for b in read_task(task, opts) for v in b.column("value").to_pylist()]
    assert rows == [b"v0", b"v1", b"v2"]
    wrong = ReadOptions.parse({**options, "kafka.sasl.password": "Wrong-55e0"}, path=opts.store.url)
    with pytest.raises(Exception) as exc:
        plan_scan(wrong)
    assert "Wrong-55e0" not in str(exc.value)


def test_mtls_certificate_principal(tmp_path: Path) -> None:
    """A client certificate's subject is the principal (User:CN=test-client); the CLI's
    KafkaClient speaks TLS with a client certificate from a --command-config file."""
    import asyncio
    import json

    from confluent_kafka import KafkaError

    from broker.security.stored import SecurityDocuments, StoredAcls
    from broker.store_socket import open_data_dir_store
    from kwire.acl import AclBinding, Operation, PatternType, Permission, ResourceType
    from tests.broker.security.tlslib import make_pki, server_env

    pki = make_pki(tmp_path / "pki")
    data = tmp_path / "data"
    me = "User:CN=test-client"

    def allow(rt: ResourceType, name: str, op: Operation) -> AclBinding:
        return AclBinding(rt, name, PatternType.LITERAL, me, "*", op, Permission.ALLOW)

    async def write_acls() -> None:  # before start: the broker reads its data dir's metadata store
        async with open_data_dir_store(data) as (store, layout):
            await StoredAcls(SecurityDocuments(store, layout)).create(
                [
                    allow(ResourceType.CLUSTER, "kafka-cluster", Operation.DESCRIBE),
                    allow(ResourceType.CLUSTER, "kafka-cluster", Operation.CREATE),
                    allow(ResourceType.TOPIC, "mtls", Operation.WRITE),
                ]
            )

    asyncio.run(write_acls())
    env = {**server_env(pki, "required"), "STRATA_AUTHORIZATION_ENABLED": "true"}
    b = BrokerProcess(data, env=env).start()
    try:
        tls = {
            "bootstrap.servers": b.bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
        }
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(tls)
        admin.create_topics([NewTopic("mtls", 1)])["mtls"].result(timeout=30)
        assert produce(tls, "mtls", 2) == [None, None]
        from confluent_kafka import Consumer

        c = Consumer({**tls, "group.id": "mtls-g", "auto.offset.reset": "earliest"})
        c.subscribe(["mtls"])
        codes: list[int] = []
        deadline = time.monotonic() + 20
        while not codes and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                codes.append(m.error().code())
        c.close()
        assert (
            KafkaError.GROUP_AUTHORIZATION_FAILED in codes or KafkaError.TOPIC_AUTHORIZATION_FAILED in codes
        )
        props = tmp_path / "client.properties"
        props.write_text(
            "security.protocol=SSL\n"
            f"ssl.ca.location={pki.ca}\nssl.certificate.location={pki.client_cert}\n"
            f"ssl.key.location={pki.client_key}\n"
        )
        listed = strata_acl(b, "list", "--command-config", str(props), "-o", "json")
        assert listed.returncode == 0, listed.stderr
        assert {r["principal"] for r in json.loads(listed.stdout)} == {me}
        # the same client without its certificate: the TLS handshake fails, one line
        props.write_text(f"security.protocol=SSL\nssl.ca.location={pki.ca}\n")
        refused = strata_acl(b, "list", "--command-config", str(props))
        assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    finally:
        b.kill()
    assert f"denied {me} DESCRIBE on group 'mtls-g'" in b.output()  # FindCoordinator


def test_admin_requests_refused_per_resource(broker: BrokerProcess) -> None:
    """CreateTopics, DeleteTopics, DescribeConfigs, CreatePartitions, DeleteGroups and
    ListGroups as a principal with no ACL, through confluent-kafka's AdminClient; then an
    idempotent producer, whose InitProducerId needs WRITE on some topic."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

    topic = f"adm-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    bob_conf = conf(broker, "bob", BOB_PW)
    bob = admin_client(broker, "bob", BOB_PW)

    def code_of(future: Any) -> int:
        with pytest.raises(KafkaException) as exc:
            future.result(timeout=30)
        return int(exc.value.args[0].code())

    assert code_of(bob.create_topics([NewTopic(f"{topic}-new", 1)])[f"{topic}-new"]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert code_of(bob.delete_topics([topic])[topic]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code_of(bob.create_partitions([NewPartitions(topic, 2)])[topic]) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert code_of(bob.describe_configs([res])[res]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code_of(bob.delete_consumer_groups(["some-group"])["some-group"]) == (
        KafkaError.GROUP_AUTHORIZATION_FAILED
    )
    # the super user may do all of it; and bob's group listing is filtered, not refused
    admin = admin_client(broker)
    admin.describe_configs([res])[res].result(timeout=30)
    from confluent_kafka import Consumer, TopicPartition

    secret = f"secret-{topic}"
    c = Consumer({**conf(broker, "admin", ADMIN_PW), "group.id": secret})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()
    everyone = {g.group_id for g in admin.list_consumer_groups().result(timeout=30).valid}
    assert secret in everyone
    assert secret not in {g.group_id for g in bob.list_consumer_groups().result(timeout=30).valid}
    # idempotence: without WRITE anywhere InitProducerId is refused (fatal for librdkafka)
    fatal: list[Any] = []
    p = Producer(
        {**bob_conf, "enable.idempotence": True, "error_cb": fatal.append, "message.timeout.ms": 10000}
    )
    p.produce(topic, value=b"x")
    deadline = time.monotonic() + 20
    with pytest.raises(KafkaException) as exc:  # poll() raises librdkafka's fatal error
        while time.monotonic() < deadline:
            p.poll(0.2)
    err = exc.value.args[0]
    assert err.fatal() and err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, err
    add_acls(broker, binding("TOPIC", topic, "User:bob", "WRITE"))
    delivered: list[Any] = []
    p = Producer({**bob_conf, "enable.idempotence": True, "message.timeout.ms": 10000})
    p.produce(topic, value=b"y", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(30)
    assert delivered == [None]


def test_authorized_operations(broker: BrokerProcess) -> None:
    """KIP-430 fields: what the principal itself may do, as confluent-kafka reports it."""
    from confluent_kafka import Consumer, TopicCollection, TopicPartition
    from confluent_kafka.admin import AclOperation

    topic, group = f"ops-{uuid.uuid4().hex[:6]}", f"ops-g-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    c = Consumer({**conf(broker, "admin", ADMIN_PW), "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # the group now exists
    c.close()
    add_acls(
        broker,
        binding("TOPIC", topic, "User:alice", "WRITE"),
        binding("TOPIC", topic, "User:alice", "ALTER_CONFIGS"),
        binding("GROUP", group, "User:alice", "READ"),
    )
    alice = admin_client(broker, "alice", ALICE_PW)
    desc = alice.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic]
    ops = set(desc.result(timeout=30).authorized_operations)
    assert ops == {
        AclOperation.WRITE,
        AclOperation.DESCRIBE,
        AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS,
    }
    g = alice.describe_consumer_groups([group], include_authorized_operations=True)[group].result(timeout=30)
    assert set(g.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}


def test_cluster_level_requests(broker: BrokerProcess) -> None:
    """Requests only the cluster's own principals make: a follower's Fetch (replica_id >= 0)
    and a coordinator's WriteTxnMarkers need CLUSTER_ACTION, partition reassignment
    ALTER/DESCRIBE on the cluster. Sent with the project's KafkaClient over SASL."""
    from kclient import KafkaClient
    from kclient.security import ClientSecurity
    from kwire import ApiKey
    from kwire import error_table as E
    from kwire.address import HostPort
    from kwire.messages.describe_producers import (
        DescribeProducersRequest,
        DescribeProducersTopicRequest,
    )
    from kwire.messages.fetch import FetchPartition, FetchRequest, FetchTopic
    from kwire.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
    from kwire.messages.write_txn_markers import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )

    topic = f"cl-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    add_acls(broker, binding("TOPIC", topic, "User:bob", "READ"))

    def client(user: str, pw: str) -> KafkaClient:
        props = {k: str(v) for k, v in conf(broker, user, pw).items() if k != "bootstrap.servers"}
        return KafkaClient.connect(
            HostPort.parse(broker.bootstrap), security=ClientSecurity.from_properties(props)
        )

    fetch = FetchRequest(
        replica_id=1,
        max_wait_ms=0,
        min_bytes=0,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),),
            ),
        ),
    )
    markers = WriteTxnMarkersRequest(
        markers=(
            WritableTxnMarker(
                producer_id=99,
                producer_epoch=0,
                transaction_result=False,
                topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),),
                coordinator_epoch=0,
            ),
        )
    )

    def delete_codes(c: KafkaClient) -> list[int]:
        from kwire.messages.delete_records import (
            DeleteRecordsPartition,
            DeleteRecordsRequest,
            DeleteRecordsTopic,
        )

        req = DeleteRecordsRequest(
            topics=(
                DeleteRecordsTopic(
                    name=topic, partitions=(DeleteRecordsPartition(partition_index=0, offset=0),)
                ),
            ),
            timeout_ms=10000,
        )
        return [p.error_code for t in c.call(ApiKey.DELETE_RECORDS, req).topics for p in t.partitions]

    def marker_codes(c: KafkaClient) -> list[int]:
        resp = c.call(ApiKey.WRITE_TXN_MARKERS, markers)
        return [p.error_code for m in resp.markers for t in m.topics for p in t.partitions]

    with client("bob", BOB_PW) as bob:
        assert marker_codes(bob) == [E.CLUSTER_AUTHORIZATION_FAILED]
        resp = bob.call(ApiKey.FETCH, fetch)
        assert [p.error_code for t in resp.responses for p in t.partitions] == [
            E.CLUSTER_AUTHORIZATION_FAILED
        ]
        listed = bob.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest(topics=None))
        assert listed.error_code == E.CLUSTER_AUTHORIZATION_FAILED
        # DescribeProducers needs READ on the topic (bob has it on ``topic`` only).
        other = f"cl-other-{uuid.uuid4().hex[:6]}"
        producers = bob.call(
            ApiKey.DESCRIBE_PRODUCERS,
            DescribeProducersRequest(
                topics=(
                    DescribeProducersTopicRequest(name=topic, partition_indexes=(0,)),
                    DescribeProducersTopicRequest(name=other, partition_indexes=(0,)),
                )
            ),
        )
        codes = {t.name: [p.error_code for p in t.partitions] for t in producers.topics}
        assert codes == {topic: [0], other: [E.TOPIC_AUTHORIZATION_FAILED]}
        # DeleteRecords needs DELETE on the topic (bob may only READ it).
        assert delete_codes(bob) == [E.TOPIC_AUTHORIZATION_FAILED]
    with client("admin", ADMIN_PW) as admin:
        assert delete_codes(admin) == [0]
        listed = admin.call(
            ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest(topics=None)
        )
        assert listed.error_code == 0
        assert marker_codes(admin) == [0]  # a super user has CLUSTER_ACTION: the marker is written


def test_txn_offset_commit_needs_transactional_id_group_and_topic_acls(broker: BrokerProcess) -> None:
    """TxnOffsetCommit as KafkaApis checks it: WRITE on the transactional id, then READ on
    the group, then READ on each topic (per partition). Sent with the project's KafkaClient."""
    from kclient import KafkaClient
    from kclient.security import ClientSecurity
    from kwire import ApiKey
    from kwire import error_table as E
    from kwire.address import HostPort
    from kwire.messages.find_coordinator import FindCoordinatorRequest
    from kwire.messages.txn_offset_commit import (
        TxnOffsetCommitRequest,
        TxnOffsetCommitRequestPartition,
        TxnOffsetCommitRequestTopic,
    )

    topic, other = f"txo-{uuid.uuid4().hex[:6]}", f"txo-other-{uuid.uuid4().hex[:6]}"
    group, txn = f"txo-g-{uuid.uuid4().hex[:6]}", f"txo-t-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic, other)
    add_acls(broker, binding("TOPIC", topic, "User:bob", "READ"))
    props = {k: str(v) for k, v in conf(broker, "bob", BOB_PW).items() if k != "bootstrap.servers"}
    req = TxnOffsetCommitRequest(
        transactional_id=txn,
        group_id=group,
        producer_id=4242,
        producer_epoch=0,
        topics=tuple(
            TxnOffsetCommitRequestTopic(
                name=t, partitions=(TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1),)
            )
            for t in (topic, other)
        ),
    )
    with KafkaClient.connect(
        HostPort.parse(broker.bootstrap), security=ClientSecurity.from_properties(props)
    ) as bob:

        def codes() -> dict[str, int]:
            resp = bob.call(ApiKey.TXN_OFFSET_COMMIT, req)
            return {t.name: p.error_code for t in resp.topics for p in t.partitions}

        assert codes() == dict.fromkeys((topic, other), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        add_acls(broker, binding("TRANSACTIONAL_ID", txn, "User:bob", "WRITE"))
        assert codes() == dict.fromkeys((topic, other), E.GROUP_AUTHORIZATION_FAILED)
        add_acls(broker, binding("GROUP", group, "User:bob", "READ"))
        deadline = time.monotonic() + 30
        while True:  # the offsets topic is created by the first FindCoordinator, then loaded
            bob.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(coordinator_keys=(group,)))
            got = codes()
            if got[topic] not in (E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS):
                break
            assert time.monotonic() < deadline, got
            time.sleep(0.1)
        assert got == {topic: 0, other: E.TOPIC_AUTHORIZATION_FAILED}


def test_client_quota_apis_need_cluster_configs_acls(broker: BrokerProcess, tmp_path: Path) -> None:
    import json
    import sys

    from tests.brokers import ROOT

    def quotas(user: str, pw: str, *args: str) -> subprocess.CompletedProcess[str]:
        sasl = ("--sasl-user", user, "--sasl-mechanism", MECH, "--password-stdin")
        return subprocess.run(
            [sys.executable, "-m", "api.cli", "quotas", *args, "-b", broker.bootstrap, *sasl],
            cwd=ROOT,
            input=pw + "\n",
            capture_output=True,
            text=True,
            timeout=60,
        )

    # bob: no ACL on the cluster, so neither AlterClientQuotas nor DescribeClientQuotas
    refused = quotas("bob", BOB_PW, "alter", "--user", "bob", "--producer-byte-rate", "1e9")
    assert refused.returncode != 0 and "authoriz" in refused.stderr.lower(), refused.stderr
    refused = quotas("bob", BOB_PW, "describe")
    assert refused.returncode != 0 and "authoriz" in refused.stderr.lower(), refused.stderr
    # the super user may, and bob's attempt changed nothing
    ok = quotas("admin", ADMIN_PW, "describe", "-o", "json")
    assert ok.returncode == 0, ok.stderr
    assert all(row["user"] != "bob" for row in json.loads(ok.stdout))
    # DESCRIBE_CONFIGS on the cluster lets bob describe, still not alter
    add_acls(broker, binding("BROKER", "kafka-cluster", "User:bob", "DESCRIBE_CONFIGS"))
    assert quotas("bob", BOB_PW, "describe").returncode == 0
    refused = quotas("bob", BOB_PW, "alter", "--user", "bob", "--producer-byte-rate", "1e9")
    assert refused.returncode != 0 and "authoriz" in refused.stderr.lower(), refused.stderr


def test_transactional_ids_need_acls(broker: BrokerProcess) -> None:
    """Kafka's rules: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn need
    WRITE on the transactional id, FindCoordinator(TRANSACTION) DESCRIBE (implied by WRITE);
    DescribeTransactions refuses ids without DESCRIBE, ListTransactions leaves them out."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    from kclient import ClientSecurity, KafkaClient
    from kwire import ApiKey
    from kwire import error_table as E
    from kwire.address import HostPort
    from kwire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
    from kwire.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
    from kwire.messages.describe_transactions import DescribeTransactionsRequest
    from kwire.messages.end_txn import EndTxnRequest
    from kwire.messages.find_coordinator import KEY_TYPE_TRANSACTION, FindCoordinatorRequest
    from kwire.messages.list_transactions import ListTransactionsRequest

    prefix = f"tx-{uuid.uuid4().hex[:6]}"
    topic = f"txn-authz-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    bob = conf(broker, "bob", BOB_PW)
    refused = Producer({**bob, "transactional.id": f"{prefix}-bob"})
    with pytest.raises(KafkaException) as exc:
        refused.init_transactions(20)
    assert exc.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, exc.value
    add_acls(broker, binding("TRANSACTIONAL_ID", prefix, "User:bob", "WRITE", prefixed=True))
    Producer({**bob, "transactional.id": f"{prefix}-bob"}).init_transactions(20)

    sec = ClientSecurity(protocol="SASL_PLAINTEXT", mechanism=MECH, username="bob", password=BOB_PW)
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port), security=sec) as client:
        other = "not-" + prefix
        fc = client.call(
            ApiKey.FIND_COORDINATOR,
            FindCoordinatorRequest(key_type=KEY_TYPE_TRANSACTION, coordinator_keys=(other, f"{prefix}-bob")),
        )
        assert {(co.key, co.error_code) for co in fc.coordinators} == {
            (other, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            (f"{prefix}-bob", 0),
        }
        add = client._call(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=other,
                v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
            ),
        )
        codes = [
            p.partition_error_code for t in add.results_by_topic_v3_and_below for p in t.results_by_partition
        ]
        assert codes == [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
        # WRITE on the id but not on the topic: TOPIC_AUTHORIZATION_FAILED, nothing added.
        add = client._call(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=f"{prefix}-bob",
                v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
            ),
        )
        codes = [
            p.partition_error_code for t in add.results_by_topic_v3_and_below for p in t.results_by_partition
        ]
        assert codes == [E.TOPIC_AUTHORIZATION_FAILED]
        offsets = AddOffsetsToTxnRequest(
            transactional_id=f"{prefix}-bob", producer_id=0, producer_epoch=0, group_id="g"
        )
        assert client.call(ApiKey.ADD_OFFSETS_TO_TXN, offsets).error_code == E.GROUP_AUTHORIZATION_FAILED
        end = EndTxnRequest(transactional_id=other, producer_id=0, producer_epoch=0, committed=True)
        assert client.call(ApiKey.END_TXN, end).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        described = client.call(
            ApiKey.DESCRIBE_TRANSACTIONS,
            DescribeTransactionsRequest(transactional_ids=(other, f"{prefix}-bob")),
        ).transaction_states
        assert {(s.transactional_id, s.error_code) for s in described} == {
            (other, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            (f"{prefix}-bob", 0),
        }
        listed = client.call(ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest()).transaction_states
        assert {t.transactional_id for t in listed} == {f"{prefix}-bob"}
    # The super user lists every transactional id.
    admin = ClientSecurity(protocol="SASL_PLAINTEXT", mechanism=MECH, username="admin", password=ADMIN_PW)
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port), security=admin) as client:
        listed = client.call(ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest()).transaction_states
        assert f"{prefix}-bob" in {t.transactional_id for t in listed}


def test_scram_users_managed_by_admin_clients(broker: BrokerProcess) -> None:
    """KIP-554 with confluent-kafka's AdminClient: the super user creates a SCRAM user (the
    client sends only salt and SaltedPassword), the user authenticates with it, its
    credentials are described, deleted again; a user without ALTER on the cluster is refused;
    Kafka's validation errors."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    user, pw = f"carol-{uuid.uuid4().hex[:6]}", "Carol-pw-91d2"
    admin = admin_client(broker)
    info = ScramCredentialInfo(getattr(ScramMechanism, MECH.replace("-", "_")), 8192)
    for f in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, pw.encode())]
    ).values():
        f.result(timeout=30)
    # carol authenticates with the credential only her salted password went into.
    md = admin_client(broker, user, pw).list_topics(timeout=30)
    assert md.brokers
    described = admin.describe_user_scram_credentials([user])[user].result(timeout=30)
    ((mech, iterations),) = [(i.mechanism.name, i.iterations) for i in described.scram_credential_infos]
    assert (mech.replace("_", "-"), iterations) == (MECH, 8192)

    # bob may not ALTER the cluster; Kafka's own checks of the request.
    bob = admin_client(broker, "bob", BOB_PW)
    refused = bob.alter_user_scram_credentials([UserScramCredentialUpsertion("x-bob", info, b"pw")])
    with pytest.raises(KafkaException) as exc:
        refused["x-bob"].result(timeout=30)
    assert exc.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    few = ScramCredentialInfo(info.mechanism, 1000)
    bad = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("x-few", few, b"pw")])
    with pytest.raises(KafkaException) as exc:
        bad["x-few"].result(timeout=30)
    assert exc.value.args[0].name() == "UNACCEPTABLE_CREDENTIAL"

    gone = admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, info.mechanism)])
    gone[user].result(timeout=30)
    again = admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, info.mechanism)])
    with pytest.raises(KafkaException) as exc:
        again[user].result(timeout=30)
    assert exc.value.args[0].name() == "RESOURCE_NOT_FOUND"
    with pytest.raises(KafkaException) as exc:
        admin.describe_user_scram_credentials([user])[user].result(timeout=30)
    assert exc.value.args[0].name() == "RESOURCE_NOT_FOUND"


def test_kip848_consumer_group_needs_read_on_the_group(broker: BrokerProcess) -> None:
    """ConsumerGroupHeartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED to the
    ``group.protocol=consumer`` consumer), as Kafka's; with it (and READ on the topic) the
    consumer reads."""
    from confluent_kafka import Consumer, KafkaError

    topic, group = f"k848-{uuid.uuid4().hex[:6]}", f"k848g-{uuid.uuid4().hex[:6]}"
    create_topics(broker, topic)
    produce(conf(broker, "admin", ADMIN_PW), topic, 3)
    settings = {
        **conf(broker, "bob", BOB_PW),
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
    }
    c = Consumer(settings)
    c.subscribe([topic])
    codes: set[int] = set()
    deadline = time.monotonic() + 20
    try:
        while KafkaError.GROUP_AUTHORIZATION_FAILED not in codes and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error():
                codes.add(m.error().code())
    finally:
        c.close()
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in codes
    add_acls(broker, binding("GROUP", group, "User:bob", "READ"), binding("TOPIC", topic, "User:bob", "READ"))
    c = Consumer(settings)
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    try:
        while got < 3 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got += 1
    finally:
        c.close()
    assert got == 3


def test_share_group_apis_need_acls(broker: BrokerProcess) -> None:
    """The share-group APIs' refusals, each in its API's shape (api.security.share_guards):
    ShareGroupHeartbeat and AlterShareGroupOffsets GROUP_AUTHORIZATION_FAILED without READ
    on the group (Alter: on every partition too); ShareFetch and ShareAcknowledge
    TOPIC_AUTHORIZATION_FAILED on the partitions of a topic without READ, the readable one
    served; Read/Write/DeleteShareGroupState CLUSTER_AUTHORIZATION_FAILED on every partition;
    DeleteShareGroupOffsets GROUP_AUTHORIZATION_FAILED without DELETE on the group."""
    from kclient import KafkaClient
    from kclient.security import ClientSecurity
    from kwire import ApiKey
    from kwire import error_table as E
    from kwire.address import HostPort
    from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic
    from kwire.messages.share_acknowledge import (
        AcknowledgePartition,
        AcknowledgeTopic,
        ShareAcknowledgeRequest,
    )
    from kwire.messages.share_fetch import ShareFetchPartition, ShareFetchRequest, ShareFetchTopic
    from kwire.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
    from kwire.messages.share_group_offsets import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsRequestPartition,
        AlterShareGroupOffsetsRequestTopic,
        DeleteShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsRequestTopic,
    )
    from kwire.messages.share_group_state import (
        DeleteShareGroupStateRequest,
        DeleteStateData,
        DeleteStatePartition,
        ReadShareGroupStateRequest,
        ReadStateData,
        ReadStatePartition,
        WriteShareGroupStateRequest,
        WriteStateData,
        WriteStatePartition,
    )

    tag = uuid.uuid4().hex[:6]
    readable, hidden, group = f"sh-a-{tag}", f"sh-b-{tag}", f"sh-g-{tag}"
    create_topics(broker, readable, hidden)
    add_acls(broker, binding("TOPIC", readable, "User:bob", "READ"))

    def client(user: str, pw: str) -> KafkaClient:
        props = {k: str(v) for k, v in conf(broker, user, pw).items() if k != "bootstrap.servers"}
        return KafkaClient.connect(
            HostPort.parse(broker.bootstrap), security=ClientSecurity.from_properties(props)
        )

    with client("admin", ADMIN_PW) as admin:  # bob may not see the hidden topic's id
        md = MetadataRequest(topics=tuple(MetadataRequestTopic(name=t) for t in (readable, hidden)))
        ids = {t.name: t.topic_id for t in admin.call(ApiKey.METADATA, md).topics}
    bob = client("bob", BOB_PW)
    try:
        hb = ShareGroupHeartbeatRequest(
            group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, subscribed_topic_names=(readable,)
        )
        assert bob.call(ApiKey.SHARE_GROUP_HEARTBEAT, hb).error_code == E.GROUP_AUTHORIZATION_FAILED
        alter = AlterShareGroupOffsetsRequest(
            group_id=group,
            topics=tuple(
                AlterShareGroupOffsetsRequestTopic(
                    topic_name=t,
                    partitions=(AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0),),
                )
                for t in (readable, hidden)
            ),
        )
        resp = bob.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter)
        assert resp.error_code == E.GROUP_AUTHORIZATION_FAILED
        assert {(t.topic_name, p.error_code) for t in resp.responses for p in t.partitions} == {
            (readable, E.GROUP_AUTHORIZATION_FAILED),
            (hidden, E.GROUP_AUTHORIZATION_FAILED),
        }
        delete = DeleteShareGroupOffsetsRequest(
            group_id=group, topics=(DeleteShareGroupOffsetsRequestTopic(topic_name=readable),)
        )
        resp = bob.call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, delete)
        assert resp.error_code == E.GROUP_AUTHORIZATION_FAILED
        assert [t.error_code for t in resp.responses] == [E.GROUP_AUTHORIZATION_FAILED]

        add_acls(broker, binding("GROUP", group, "User:bob", "READ"))
        r = bob.call(ApiKey.SHARE_GROUP_HEARTBEAT, hb)
        assert r.error_code == 0, r
        resp = bob.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter)
        assert resp.error_code == E.NON_EMPTY_GROUP and {
            (t.topic_name, p.error_code) for t in resp.responses for p in t.partitions
        } == {(readable, E.NON_EMPTY_GROUP), (hidden, E.TOPIC_AUTHORIZATION_FAILED)}

        fetch = ShareFetchRequest(
            group_id=group,
            member_id=hb.member_id,
            share_session_epoch=0,
            max_wait_ms=0,
            min_bytes=0,
            max_records=10,
            batch_size=10,
            topics=tuple(
                ShareFetchTopic(topic_id=ids[t], partitions=(ShareFetchPartition(partition_index=0),))
                for t in (readable, hidden)
            ),
        )
        resp = bob.call(ApiKey.SHARE_FETCH, fetch)
        assert resp.error_code == 0, resp
        codes = {t.topic_id: [p.error_code for p in t.partitions] for t in resp.responses}
        assert codes == {ids[readable]: [0], ids[hidden]: [E.TOPIC_AUTHORIZATION_FAILED]}
        ack = ShareAcknowledgeRequest(
            group_id=group,
            member_id=hb.member_id,
            share_session_epoch=1,
            topics=(
                AcknowledgeTopic(topic_id=ids[hidden], partitions=(AcknowledgePartition(partition_index=0),)),
            ),
        )
        resp = bob.call(ApiKey.SHARE_ACKNOWLEDGE, ack)
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in resp.responses] == [
            (ids[hidden], [E.TOPIC_AUTHORIZATION_FAILED])
        ]

        caf = E.CLUSTER_AUTHORIZATION_FAILED
        read = ReadShareGroupStateRequest(
            group_id=group,
            topics=(ReadStateData(topic_id=ids[readable], partitions=(ReadStatePartition(partition=0),)),),
        )
        resp = bob.call(ApiKey.READ_SHARE_GROUP_STATE, read)
        assert [p.error_code for r in resp.results for p in r.partitions] == [caf]
        write = WriteShareGroupStateRequest(
            group_id=group,
            topics=(WriteStateData(topic_id=ids[readable], partitions=(WriteStatePartition(partition=0),)),),
        )
        resp = bob.call(ApiKey.WRITE_SHARE_GROUP_STATE, write)
        assert [p.error_code for r in resp.results for p in r.partitions] == [caf]
        gone = DeleteShareGroupStateRequest(
            group_id=group,
            topics=(
                DeleteStateData(topic_id=ids[readable], partitions=(DeleteStatePartition(partition=0),)),
            ),
        )
        resp = bob.call(ApiKey.DELETE_SHARE_GROUP_STATE, gone)
        assert [p.error_code for r in resp.results for p in r.partitions] == [caf]
        bob.call(ApiKey.SHARE_GROUP_HEARTBEAT, dataclasses.replace(hb, member_epoch=-1))
    finally:
        bob.close()
