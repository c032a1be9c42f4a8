"""A second client listener (``external_listen``): each listener's clients are told the
addresses of that listener, as Kafka's advertised.listeners with two client listeners, so
clients on two networks (compose containers and their host) can both use the cluster."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from broker.config import load_config
from hot.errors import InvalidConfigError
from tests.brokers import BrokerProcess, create_topic


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def test_each_listener_advertises_its_own_addresses(tmp_path: Path) -> None:
    # 127.0.0.2 is loopback too: the external listener gets an address of its own, so the
    # test sees which one each client was told.
    port = _free_port("127.0.0.2")
    b = BrokerProcess(tmp_path / "b", "--external-listen", f"127.0.0.2:{port}").start()
    try:
        external = f"127.0.0.2:{port}"
        told = {
            bootstrap: {
                f"{m.host}:{m.port}"
                for m in AdminClient({"bootstrap.servers": bootstrap})
                .list_topics(timeout=10)
                .brokers.values()
            }
            for bootstrap in (b.bootstrap, external)
        }
        assert told == {b.bootstrap: {b.bootstrap}, external: {external}}
        # A client of the external listener produces and consumes in a group (FindCoordinator
        # names the coordinator by its external address too).
        topic = f"ext-{uuid.uuid4().hex[:8]}"
        create_topic(b.bootstrap, topic, 2)
        p = Producer({"bootstrap.servers": external, "enable.idempotence": True})
        for i in range(100):
            p.produce(topic, value=str(i).encode(), key=str(i).encode())
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": external, "group.id": topic, "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got: set[bytes] = set()
        try:
            for _ in range(300):
                if len(got) == 100:
                    break
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.add(m.value() or b"")
            c.commit(asynchronous=False)
        finally:
            c.close()
        assert got == {str(i).encode() for i in range(100)}
        assert "external kafka listener on 127.0.0.2" in b.output()
    finally:
        b.kill()


def test_an_external_advertised_address_needs_its_listener() -> None:
    with pytest.raises(InvalidConfigError, match="external_advertised_listener needs external_listen"):
        load_config(env={}, overrides={"external_advertised_listener": "host.example:19092"})
    cfg = load_config(env={"STRATA_EXTERNAL_LISTEN": "0.0.0.0:19092"}, overrides={})
    assert cfg.external_advertised is not None and cfg.external_advertised.port == 19092
