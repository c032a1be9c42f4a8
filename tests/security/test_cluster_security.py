"""Cluster mode with TLS and SASL on the client listener: followers replicate through the
plaintext internal listener (``internal_listen``), clients use SASL_SSL, acks=all works."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.clusterlib import Cluster
from tests.cluster.etcdlib import EtcdProcess
from tests.security.test_sasl import strata_users
from tests.security.test_tls import produce_consume
from tests.security.tlslib import make_pki, server_env

PW = "Cluster-pw-4c9e2a"


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    server = EtcdProcess(tmp_path / "etcd").start()
    yield server
    server.kill()


def test_replication_with_secured_client_listener(tmp_path: Path, etcd: EtcdProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    pki = make_pki(tmp_path / "pki")
    for i in (1, 2):  # users are per broker in cluster mode (not in etcd yet)
        assert (
            strata_users(tmp_path / f"broker{i}", "add", "svc", "--password-stdin", stdin=PW).returncode == 0
        )
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
