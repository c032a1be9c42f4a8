"""Share groups (KIP-932) with the real client: confluent-kafka's ``ShareConsumer``
(librdkafka's preview share consumer) against one broker.

More share consumers than partitions all receive records, each record once; a consumer
killed (SIGKILL) holding acquired records: those come back after the acquisition lock,
its accepted ones never; REJECT and the delivery-count limit archive a record and copy it to the group's
dead-letter topic.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer

from kwire import ApiKey
from kwire.messages.alter_configs import (
    AlterableConfigOp,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from tests.api.test_share_wire import GROUP_RESOURCE, Wire
from tests.brokers import ROOT, BrokerProcess, create_topic

LOCK_MS = 3_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    env = {"STRATA_GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS": "1000"}
    b = BrokerProcess(tmp_path_factory.mktemp("share-client"), env=env).start()
    yield b
    b.kill()


def _configure(bootstrap: str, group: str, **values: str) -> None:
    """The group's share configs, with ``share.auto.offset.reset=earliest`` and the lock."""
    values = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS), **values}
    ops = tuple(AlterableConfigOp(name=k, value=v) for k, v in values.items())
    res = IncrementalAlterConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group, configs=ops)
    wire = Wire(bootstrap)
    try:
        resp = wire.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest(resources=(res,))
        )
    finally:
        wire.close()
    assert resp.responses[0].error_code == 0, resp


def _produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
        if i % 3 == 2:
            p.flush(10)  # small batches: acquisition rounds up to whole batches
    assert p.flush(10) == 0


def _consumer(bootstrap: str, group: str, topic: str, **conf: Any) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 5, **conf})
    c.subscribe([topic])
    return c


def _drain(c: ShareConsumer, timeout: float, until: int | None = None) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (until is None or len(got) < until):
        for m in c.poll(0.5):
            assert m.error() is None, m.error()
            got.append(m)
    return got


def test_more_consumers_than_partitions_all_receive_each_record_once(broker: BrokerProcess) -> None:
    topic, group, n = "sc-many", "sc-many-g", 60
    create_topic(broker.bootstrap, topic, 2)
    _configure(broker.bootstrap, group)
    _produce(broker.bootstrap, topic, n, 2)
    consumers = [_consumer(broker.bootstrap, group, topic) for _ in range(3)]
    seen: dict[int, list[tuple[int | None, int | None]]] = {i: [] for i in range(3)}
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and sum(len(v) for v in seen.values()) < n:
            for i, c in enumerate(consumers):
                for m in c.poll(0.2):  # implicit mode: accepted at the next poll
                    assert m.error() is None, m.error()
                    seen[i].append((m.partition(), m.offset()))
        everything = [tp for v in seen.values() for tp in v]
        assert len(everything) == n and len(set(everything)) == n  # each record once
        assert all(seen[i] for i in range(3)), {i: len(v) for i, v in seen.items()}
    finally:
        for c in consumers:
            c.close()


# Polls once, accepts the first two records, prints what it accepted and what it still
# holds, and waits to be killed (SIGKILL: no leave, no release).
_VICTIM = """
import json, sys, time
from confluent_kafka import ShareConsumer, AcknowledgeType
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit", "max.poll.records": 6})
c.subscribe([sys.argv[3]])
msgs = []
while len(msgs) < 3:
    msgs += [m for m in c.poll(1.0) if m.error() is None]
for m in msgs[:2]:
    c.acknowledge(m, AcknowledgeType.ACCEPT)
c.commit_sync(30)
print(json.dumps({"accepted": [(m.partition(), m.offset()) for m in msgs[:2]],
                  "held": [(m.partition(), m.offset()) for m in msgs[2:]]}), flush=True)
time.sleep(600)
"""


def test_killed_consumer_records_come_back_after_the_lock(broker: BrokerProcess) -> None:
    topic, group, n = "sc-kill", "sc-kill-g", 12
    create_topic(broker.bootstrap, topic, 1)
    _configure(broker.bootstrap, group)
    _produce(broker.bootstrap, topic, n, 1)
    victim = subprocess.Popen(
        [sys.executable, "-c", _VICTIM, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert victim.stdout is not None
        report = json.loads(victim.stdout.readline())
    finally:
        victim.kill()
        victim.wait(10)
    accepted = {tuple(x) for x in report["accepted"]}
    held = {tuple(x) for x in report["held"]}
    assert len(accepted) == 2 and held
    c = _consumer(broker.bootstrap, group, topic)
    try:
        got = _drain(c, 30, until=n - len(accepted))
    finally:
        c.close()
    offsets = [(m.partition(), m.offset()) for m in got]
    assert not accepted & set(offsets), "an accepted record was delivered again"
    assert sorted(offsets) == sorted({(0, o) for o in range(n)} - accepted)
    again = [m for m in got if (m.partition(), m.offset()) in held]
    assert again and all(m.delivery_count() >= 2 for m in again)


def test_reject_and_delivery_limit_archive(broker: BrokerProcess) -> None:
    topic, group, dlq = "sc-poison", "sc-poison-g", "sc-poison-dlq"
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, dlq, 1)
    _configure(
        broker.bootstrap,
        group,
        **{"share.delivery.count.limit": "2", "errors.deadletterqueue.topic.name": dlq},
    )
    _produce(broker.bootstrap, topic, 3, 1)  # offsets 0, 1, 2 in one batch
    c = _consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    deliveries: dict[int, int] = {}
    done_at: float | None = None
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            msgs = list(c.poll(0.5))
            for m in msgs:
                assert m.error() is None, m.error()
                off = m.offset()
                assert off is not None
                deliveries[off] = deliveries.get(off, 0) + 1
                # 0: poison, released every time; 1: rejected; 2: accepted
                kinds = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT}
                c.acknowledge(m, kinds.get(off, AcknowledgeType.ACCEPT))
            if msgs:
                c.commit_sync(30)
            if done_at is None and deliveries.get(0) == 2 and 1 in deliveries and 2 in deliveries:
                done_at = time.monotonic()
            if done_at is not None and time.monotonic() - done_at > LOCK_MS / 1000 + 1:
                break  # nothing more came for longer than a lock
    finally:
        c.close()
    assert deliveries == {0: 2, 1: 1, 2: 1}
    # both archived records went to the dead-letter topic, saying where they came from
    reader = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "dlq-reader", "auto.offset.reset": "earliest"}
    )
    reader.subscribe([dlq])
    copies: dict[Any, dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + 30
        while len(copies) < 2 and time.monotonic() < deadline:
            got = reader.poll(0.5)
            if got is not None and got.error() is None:
                headers: Any = got.headers() or []
                copies[got.value()] = dict(headers)
    finally:
        reader.close()
    assert copies == {
        b"0": {
            "__dlq.errors.topic": topic.encode(),
            "__dlq.errors.partition": b"0",
            "__dlq.errors.offset": b"0",
            "__dlq.errors.delivery.count": b"2",
        },
        b"1": {
            "__dlq.errors.topic": topic.encode(),
            "__dlq.errors.partition": b"0",
            "__dlq.errors.offset": b"1",
            "__dlq.errors.delivery.count": b"1",
        },
    }
