"""A producer that starts the moment CreateTopics answers, on a single node (``strata
serve``, product defaults), with a topic of a thousand partitions (issue 35).

CreateTopics answers once the partitions are writable, or after ``CREATE_VISIBLE_S`` when
the creation (built in a thread) takes longer, as on a loaded machine: the producer's
first records then meet partitions whose logs do not exist yet and are retried. Invariants,
exact: every record (acks=all, one per partition) is acknowledged, and each is read back
after a kill -9 and restart of the broker (the new partitions' files: no recovery-point
file and no leader-epoch checkpoint written at creation, hot.log_loader and
hot.leader_epoch).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokers import BrokerProcess

pytestmark = pytest.mark.timeout(300)

TOPIC = "early"
PARTITIONS = 1000


def test_every_record_of_a_producer_started_at_creation_is_acknowledged_and_kept(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start(timeout=120)
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
        fut = admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        fut[TOPIC].result(timeout=120)
        prod = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 20, "log_level": 0})
        acked: dict[int, int] = {}
        failed: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(f"{msg.partition()}: {err}")
            else:
                acked[msg.partition()] = msg.offset()

        for p in range(PARTITIONS):
            prod.produce(TOPIC, value=b"v%d" % p, partition=p, on_delivery=delivered)
        assert prod.flush(180) == 0, "records still unacknowledged after 180 s"
        assert failed == []
        assert acked == dict.fromkeys(range(PARTITIONS), 0)
        del prod, admin

        b.kill()  # kill -9: nothing acknowledged may be lost
        b.start(timeout=120)
        cons = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": "early-check",
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        try:
            cons.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
            got: dict[int, bytes] = {}
            deadline = time.monotonic() + 120
            while len(got) < PARTITIONS and time.monotonic() < deadline:
                for m in cons.consume(num_messages=500, timeout=1.0):
                    part, value = m.partition(), m.value()
                    if m.error() is None and part is not None and value is not None:
                        assert part not in got, f"partition {part} read twice"
                        got[part] = value
        finally:
            cons.close()
        assert got == {p: b"v%d" % p for p in range(PARTITIONS)}
    finally:
        b.kill()
