"""Cluster mode with TLS and SASL on the client listener: followers replicate through the
plaintext internal listener (``internal_listen``), clients use SASL_SSL, acks=all works;
users live in etcd (``strata users --etcd``), and ACLs created through one broker are
enforced by every other one, with replication unaffected by authorization."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.clusterlib import CLUSTER_NAME, Cluster
from tests.broker.etcdlib import EtcdProcess
from tests.broker.security.test_sasl import strata_users
from tests.broker.security.test_tls import produce_consume
from tests.broker.security.tlslib import make_pki, server_env

PW = "Cluster-pw-4c9e2a"


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    server = EtcdProcess(tmp_path / "etcd").start()
    yield server
    server.kill()


def test_replication_with_secured_client_listener(tmp_path: Path, etcd: EtcdProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    pki = make_pki(tmp_path / "pki")
    # users live in etcd in cluster mode: one `strata users add` serves every broker
    added = strata_users(
        tmp_path,
        "add",
        "svc",
        "--password-stdin",
        "--etcd",
        etcd.endpoint,
        "--cluster-name",
        CLUSTER_NAME,
        stdin=PW,
    )
    assert added.returncode == 0, added.stderr
    env = {
        **server_env(pki),
        "STRATA_SASL_MECHANISMS": "SCRAM-SHA-512",
        "STRATA_INTERNAL_LISTEN": "127.0.0.1:0",
    }
    cluster = Cluster(tmp_path, etcd, n=2, env=env, proxied=False).start()
    try:
        for node in cluster.nodes.values():
            assert "internal kafka listener on 127.0.0.1:" in node.output()
            assert "SASL_SSL" in node.output()
        conf: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "svc",
            "sasl.password": PW,
        }
        admin = AdminClient(conf)
        futures = admin.create_topics(
            [
                NewTopic(
                    "secure-rf2", num_partitions=1, replication_factor=2, config={"min.insync.replicas": "2"}
                )
            ]
        )
        futures["secure-rf2"].result(timeout=60)
        cluster.wait_fully_replicated("secure-rf2")
        # acks=all with min.insync.replicas=2: answered only once the follower fetched
        from confluent_kafka import Consumer, Producer, TopicPartition

        p = Producer({**conf, "acks": "all"})
        for i in range(3):
            p.produce("secure-rf2", value=f"v{i}".encode())
        assert p.flush(60) == 0
        c = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
        c.assign([TopicPartition("secure-rf2", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value() or b"")
        c.close()
        assert got == [b"v0", b"v1", b"v2"]
        # and through a consumer group (it produces v0-v2 again, reads from the start)
        assert produce_consume(conf, "secure-rf2", 3) == [b"v0", b"v1", b"v2"]
    finally:
        cluster.close()
    for node in cluster.nodes.values():
        assert PW not in node.output()


ADMIN_PW = "Cluster-admin-8d2f1b"
ALICE_PW = "Cluster-alice-61ac0e"
BOB_PW = "Cluster-bob-2b7d94"


def test_acls_shared_through_etcd(tmp_path: Path, etcd: EtcdProcess) -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from tests.broker.security.test_authorization import binding

    for user, pw in (("admin", ADMIN_PW), ("alice", ALICE_PW), ("bob", BOB_PW)):
        r = strata_users(
            tmp_path,
            "add",
            user,
            "--password-stdin",
            "--etcd",
            etcd.endpoint,
            "--cluster-name",
            CLUSTER_NAME,
            stdin=pw,
        )
        assert r.returncode == 0, r.stderr
    listed = strata_users(
        tmp_path, "list", "--etcd", etcd.endpoint, "--cluster-name", CLUSTER_NAME, "-o", "json"
    )
    assert '"alice"' in listed.stdout and ALICE_PW not in listed.stdout
    env = {
        "STRATA_SASL_MECHANISMS": "SCRAM-SHA-512,PLAIN",
        "STRATA_INTERNAL_LISTEN": "127.0.0.1:0",
        "STRATA_AUTHORIZATION_ENABLED": "true",
        "STRATA_AUTHORIZATION_SUPER_USERS": "User:admin",
    }
    cluster = Cluster(tmp_path, etcd, n=2, env=env, proxied=False).start()
    b1, b2 = cluster.nodes[1], cluster.nodes[2]

    def conf(bootstrap: str, user: str, pw: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": pw,
        }

    try:
        admin1 = AdminClient(conf(b1.bootstrap, "admin", ADMIN_PW))
        topic = NewTopic(
            "acl-rf2", num_partitions=1, replication_factor=2, config={"min.insync.replicas": "2"}
        )
        admin1.create_topics([topic])["acl-rf2"].result(timeout=60)
        cluster.wait_fully_replicated("acl-rf2")
        # created through broker 1 ...
        for f in admin1.create_acls(
            [binding("TOPIC", "acl-", "User:alice", "WRITE", prefixed=True)]
        ).values():
            f.result(timeout=30)
        # ... enforced by broker 2: its Metadata shows alice the topic (WRITE implies DESCRIBE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            md = AdminClient(conf(b2.bootstrap, "alice", ALICE_PW)).list_topics(timeout=30)
            if "acl-rf2" in md.topics:
                break
            time.sleep(0.2)
        assert "acl-rf2" in md.topics
        assert "acl-rf2" not in AdminClient(conf(b2.bootstrap, "bob", BOB_PW)).list_topics(timeout=30).topics
        # and the followers still replicate: acks=all with min.insync.replicas=2 succeeds
        delivered: list[Any] = []
        p = Producer({**conf(b2.bootstrap, "alice", ALICE_PW), "acks": "all", "message.timeout.ms": 30000})
        for i in range(3):
            p.produce("acl-rf2", value=f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        p.flush(60)
        assert delivered == [None, None, None]
        refused: list[Any] = []
        p = Producer({**conf(b1.bootstrap, "bob", BOB_PW), "message.timeout.ms": 10000, "retries": 0})
        p.produce("acl-rf2", value=b"x", on_delivery=lambda err, msg: refused.append(err))
        p.flush(30)
        assert refused and refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert (tmp_path / "broker1" / "meta" / "acls.json").exists() is False  # in etcd, not on disk
    finally:
        cluster.close()
    for node in cluster.nodes.values():
        for secret in (ADMIN_PW, ALICE_PW, BOB_PW):
            assert secret not in node.output()
