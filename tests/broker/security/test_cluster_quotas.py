"""Cluster mode: a quota set through one broker (AlterClientQuotas, kept in etcd) is
described and enforced by another."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hot.records import RecordInput, build_batch
from kclient import KafkaClient
from kwire import ApiKey
from kwire.address import HostPort
from kwire.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from tests.broker.clusterlib import Cluster
from tests.broker.etcdlib import EtcdProcess
from tests.broker.security.test_quotas import alter, describe
from tests.brokers import BrokerProcess


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    server = EtcdProcess(tmp_path / "etcd").start()
    yield server
    server.kill()


def wait_described(b: BrokerProcess, expected: dict[str | None, dict[str, float]]) -> None:
    deadline = time.monotonic() + 30
    while (got := describe(b)) != expected:
        assert time.monotonic() < deadline, got
        time.sleep(0.1)


def test_quota_set_on_one_broker_applies_on_another(tmp_path: Path, etcd: EtcdProcess) -> None:
    cluster = Cluster(tmp_path, etcd, n=2, proxied=False).start()
    try:
        one, two = cluster.nodes[1], cluster.nodes[2]
        assert alter(one, None, "producer_byte_rate", 100_000.0) == [(0, None)]
        assert describe(one) == {None: {"producer_byte_rate": 100_000.0}}
        wait_described(two, {None: {"producer_byte_rate": 100_000.0}})  # through the watch
        # 600 kB at once to broker 2, over a 100 kB/s quota: throttled there (counted on
        # arrival, whatever the partition's fate)
        batch = build_batch([RecordInput(key=None, value=b"z" * 600_000)])
        req = ProduceRequest(
            acks=1,
            timeout_ms=10_000,
            topic_data=(
                ProduceTopicData(name="nope", partition_data=(ProducePartitionData(index=0, records=batch),)),
            ),
        )
        with KafkaClient.connect(HostPort("127.0.0.1", two.kafka_port)) as c:
            resp = c.call(ApiKey.PRODUCE, req)
        assert resp.throttle_time_ms > 1000
        assert alter(two, None, "producer_byte_rate", None) == [(0, None)]
        wait_described(one, {})
    finally:
        cluster.close()
