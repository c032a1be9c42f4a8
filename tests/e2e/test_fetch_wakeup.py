"""A consumer long-polling an up-to-date partition is woken by the next append.

librdkafka parks a Fetch at the log end for ``fetch.wait.max.ms``; the broker must answer
it as soon as a record is readable (committed), not when the wait runs out. In
``strata.flush.mode=interval`` the high watermark moves at the append itself, in ``fsync``
mode when the group commit has made it durable (in a cluster: when the followers have
fetched it, ``tests/broker/test_cluster_basic.py``): each must wake the parked fetch.
"""

from __future__ import annotations

import statistics
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(120)

WAIT_MAX_MS = 500
RECORDS = 30


def median_delivery_seconds(bootstrap: str, topic: str, records: int = RECORDS) -> float:
    """Send ``records`` one at a time (acks=all) to partition 0, each once the consumer,
    parked at the log end with ``fetch.wait.max.ms`` 500, has received the previous one;
    the median seconds from send to delivery."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": WAIT_MAX_MS,
            "fetch.min.bytes": 1,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])

    def send_and_receive(i: int) -> float:
        sent = time.monotonic()
        producer.produce(topic, value=str(i).encode(), partition=0)
        assert producer.flush(10) == 0
        deadline = sent + 10
        while time.monotonic() < deadline:
            m = consumer.poll(0.05)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            assert m.value() == str(i).encode()
            return time.monotonic() - sent
        raise AssertionError(f"record {i} not delivered within 10 s")

    try:
        send_and_receive(-1)  # connections up, the consumer now polls at the log end
        latencies = []
        for i in range(records):
            time.sleep(0.02)  # the consumer's next fetch is parked when the record lands
            latencies.append(send_and_receive(i))
    finally:
        consumer.close()
    return statistics.median(latencies)


@pytest.mark.parametrize("mode", ["interval", "fsync"])
def test_parked_fetch_is_woken_by_append(broker: BrokerProcess, mode: str) -> None:
    topic = f"wake-{mode}-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1, {"strata.flush.mode": mode})
    median = median_delivery_seconds(broker.bootstrap, topic)
    # Without the wake every record waits out most of fetch.wait.max.ms (~500 ms each): the
    # median tells a woken fetch from a timed-out one, with room for a loaded machine.
    assert median < 0.1, f"median delivery {median * 1000:.0f} ms: parked fetches are not woken ({mode})"
