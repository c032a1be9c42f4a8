"""Replication over TLS and SASL (``security.inter.broker.protocol``): followers fetch from
leaders with mutual TLS (their broker certificate as client certificate) and/or SASL as
the inter-broker user; acks=all with min.insync.replicas=2 only succeeds once they did."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.clusterlib import CLUSTER_NAME, Cluster
from tests.broker.etcdlib import EtcdProcess
from tests.broker.security.test_sasl import strata_users
from tests.broker.security.test_tls import wait_for_line
from tests.broker.security.tlslib import make_pki, server_env

CLIENT_PW = "Client-pw-71c0de"
REPL_PW = "Repl-pw-a93f25"


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    server = EtcdProcess(tmp_path / "etcd").start()
    yield server
    server.kill()


def _acks_all_round_trip(cluster: Cluster, conf: dict[str, Any], topic: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(conf)
    new = NewTopic(topic, num_partitions=1, replication_factor=2, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(timeout=60)
    cluster.wait_fully_replicated(topic)
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 30_000})
    for i in range(3):
        p.produce(topic, value=f"r{i}".encode())
    assert p.flush(60) == 0
    c = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 3 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value() or b"")
    c.close()
    assert got == [b"r0", b"r1", b"r2"]


def test_sasl_ssl_between_brokers_on_the_internal_listener(tmp_path: Path, etcd: EtcdProcess) -> None:
    pki = make_pki(tmp_path / "pki")
    for user, pw in (("app", CLIENT_PW), ("repl", REPL_PW)):  # in etcd: one add serves every broker
        etcd_args = ("--etcd", etcd.endpoint, "--cluster-name", CLUSTER_NAME)
        added = strata_users(tmp_path, "add", user, "--password-stdin", *etcd_args, stdin=pw)
        assert added.returncode == 0, added.stderr
    env = {
        **server_env(pki),
        "STRATA_TLS_CA": str(pki.ca),
        "STRATA_SASL_MECHANISMS": "SCRAM-SHA-512",
        "STRATA_INTERNAL_LISTEN": "127.0.0.1:0",
        "STRATA_SECURITY_INTER_BROKER_PROTOCOL": "SASL_SSL",
        "STRATA_INTER_BROKER_SASL_USERNAME": "repl",
        "STRATA_INTER_BROKER_SASL_PASSWORD": REPL_PW,
    }
    cluster = Cluster(tmp_path, etcd, n=2, env=env, proxied=False).start()
    try:
        conf: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "app",
            "sasl.password": CLIENT_PW,
        }
        _acks_all_round_trip(cluster, conf, "ib-sasl-ssl")
        out = "".join(n.output() for n in cluster.nodes.values())
        assert "(SASL_SSL, for replication)" in out
        assert "authenticated as 'repl' with SASL SCRAM-SHA-512" in out
        # the internal listener refuses a plaintext client (and one without a certificate)
        node = cluster.nodes[1]
        m = re.search(r"internal kafka listener on [\d.]+:(\d+)", node.output())
        assert m is not None
        start = len(node.lines)
        with socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=30) as s:
            s.sendall(b"\0\0\0\x0a" + b"\0" * 10)
            assert s.recv(4096) == b""
        wait_for_line(node, "TLS handshake", start)
    finally:
        cluster.close()
    for n in cluster.nodes.values():
        assert REPL_PW not in n.output() and CLIENT_PW not in n.output()


def test_mutual_tls_between_brokers_on_the_client_listener(tmp_path: Path, etcd: EtcdProcess) -> None:
    pki = make_pki(tmp_path / "pki")
    # no internal_listen: followers use the TLS client listener, with their certificate
    env = {**server_env(pki, client_auth="required"), "STRATA_SECURITY_INTER_BROKER_PROTOCOL": "SSL"}
    cluster = Cluster(tmp_path, etcd, n=2, env=env, proxied=False).start()
    try:
        conf: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca),
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
        }
        _acks_all_round_trip(cluster, conf, "ib-mtls")
    finally:
        cluster.close()


def test_inter_broker_settings_are_checked(tmp_path: Path) -> None:
    from broker.config import load_config
    from hot.errors import InvalidConfigError

    pki = make_pki(tmp_path / "pki")
    base = {"STRATA_ETCD": "127.0.0.1:2379", "STRATA_DATA_DIR": str(tmp_path / "d")}
    cases = {
        "needs [tls] cert, key and ca": {**base, "STRATA_SECURITY_INTER_BROKER_PROTOCOL": "SSL"},
        "needs inter.broker.sasl.username": {
            **base,
            "STRATA_SECURITY_INTER_BROKER_PROTOCOL": "SASL_PLAINTEXT",
        },
        "security.inter.broker.protocol=SSL": {**base, **server_env(pki)},
        "one of PLAINTEXT": {**base, "STRATA_SECURITY_INTER_BROKER_PROTOCOL": "TLS"},
        "a PLAINTEXT Kafka listener needs internal_listen": {
            **base,
            "STRATA_SECURITY_INTER_BROKER_PROTOCOL": "SASL_PLAINTEXT",
            "STRATA_INTER_BROKER_SASL_USERNAME": "repl",
            "STRATA_INTER_BROKER_SASL_PASSWORD": REPL_PW,
        },
    }
    for message, env in cases.items():
        with pytest.raises(InvalidConfigError, match=re.escape(message)):
            load_config(env=env)
    tls = {**server_env(pki), "STRATA_TLS_CA": str(pki.ca)}
    ok = load_config(env={**base, **tls, "STRATA_SECURITY_INTER_BROKER_PROTOCOL": "SSL"})
    assert ok.cluster is not None and ok.cluster.inter_broker_protocol == "SSL"
    with_sasl = load_config(
        env={
            **base,
            "STRATA_INTERNAL_LISTEN": "127.0.0.1:0",
            "STRATA_SECURITY_INTER_BROKER_PROTOCOL": "sasl_plaintext",
            "STRATA_INTER_BROKER_SASL_USERNAME": "repl",
            "STRATA_INTER_BROKER_SASL_PASSWORD": REPL_PW,
        }
    )
    assert with_sasl.cluster is not None and REPL_PW not in repr(with_sasl)


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_server(mech: str) -> None:
    from hot.errors import AuthenticationError
    from kclient.scram import HASHES, ScramClient, ScramServer, make_credential

    cred = make_credential(HASHES[mech], REPL_PW)
    server = ScramServer(mech, lambda u: cred if u == "re,pl" else None)
    client = ScramClient(mech, "re,pl", REPL_PW)
    client.verify(server.final(client.final(server.first(client.first()))))
    assert server.done
    wrong = ScramClient(mech, "re,pl", "not-it")
    server2 = ScramServer(mech, lambda u: cred)
    with pytest.raises(AuthenticationError):
        server2.final(wrong.final(server2.first(wrong.first())))
    impostor = ScramClient(mech, "re,pl", REPL_PW)
    impostor.final(ScramServer(mech, lambda u: cred).first(impostor.first()))
    with pytest.raises(AuthenticationError, match="signature"):
        impostor.verify(b"v=AAAA")
