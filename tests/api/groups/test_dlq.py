"""The dead-letter helper end to end: a confluent-kafka consumer loop with commit after
process against a real broker; poison records land in <topic>.dlq (created on first use)
with the strata.dlq.* headers, flaky ones are retried and processed."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient

from api.dlq import (
    HEADER_ATTEMPTS,
    HEADER_ERROR,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
    DeadLetterPolicy,
    DeadLetterTopicNameError,
    dlq_topic,
)
from tests.api.groups.helpers import MEMBER_CONFIG, wait_for
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(180)


class Poison(Exception):
    pass


def read_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-reader", "enable.auto.commit": False})
    c.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Any] = []
    try:
        wait_for(f"{count} records in {topic}", lambda: out.extend(c.consume(100, 0.2)) or len(out) >= count)
    finally:
        c.close()
    assert all(m.error() is None for m in out)
    return out


def test_poison_records_go_to_the_dead_letter_topic(gbroker: BrokerProcess) -> None:
    b = gbroker.bootstrap
    topic = "orders"
    create_topic(b, topic, 2)
    p = Producer({"bootstrap.servers": b})
    values = [b"ok-0", b"poison-1", b"flaky-2", b"ok-3", b"poison-4", b"bad-5"]
    for i, v in enumerate(values):
        p.produce(topic, key=b"k%d" % i, value=v, partition=i % 2, headers=[("trace", b"t%d" % i)])
    assert p.flush(30) == 0

    calls: dict[bytes, int] = {}
    processed: list[bytes] = []

    def handle(msg: Any) -> None:
        v = msg.value()
        calls[v] = calls.get(v, 0) + 1
        if v.startswith(b"poison"):
            raise Poison(f"cannot process {v.decode()}")
        if v.startswith(b"flaky") and calls[v] < 3:
            raise TimeoutError("downstream timed out")
        if v.startswith(b"bad"):
            raise ValueError("does not parse")
        processed.append(v)

    policy = DeadLetterPolicy.for_bootstrap(
        b, max_attempts=3, should_retry=lambda e: not isinstance(e, ValueError)
    )
    consumer = Consumer(
        {
            "bootstrap.servers": b,
            "group.id": "orders-svc",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **MEMBER_CONFIG,
        }
    )
    outcomes: dict[bytes, Any] = {}
    try:
        consumer.subscribe([topic])

        def step() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                outcomes[msg.value()] = policy.process(msg, handle)
                consumer.commit(msg, asynchronous=False)  # commit after process (or park)
            return len(outcomes) == len(values)

        wait_for("every record handled", step)
        committed = consumer.committed([CkTopicPartition(topic, 0), CkTopicPartition(topic, 1)], timeout=10)
    finally:
        consumer.close()

    assert sorted(processed) == [b"flaky-2", b"ok-0", b"ok-3"]
    assert {v: (o.processed, o.attempts, o.dead_lettered) for v, o in outcomes.items()} == {
        b"ok-0": (True, 1, False),
        b"poison-1": (False, 3, True),
        b"flaky-2": (True, 3, False),
        b"ok-3": (True, 1, False),
        b"poison-4": (False, 3, True),
        b"bad-5": (False, 1, True),  # should_retry said no: parked at once
    }
    assert calls[b"poison-1"] == 3 and calls[b"bad-5"] == 1
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 3), (1, 3)]
    assert policy.dead_lettered == 3

    # The dead-letter topic was created with the source's partition count.
    md = AdminClient({"bootstrap.servers": b}).list_topics(timeout=10)
    assert len(md.topics["orders.dlq"].partitions) == 2
    dead = sorted(read_all(b, "orders.dlq", 2, 3), key=lambda m: m.value())
    assert [m.value() for m in dead] == [b"bad-5", b"poison-1", b"poison-4"]
    for m in dead:
        i = int(m.value().split(b"-")[1])
        assert m.key() == b"k%d" % i
        assert m.partition() == i % 2  # same partition number as the original
        headers = dict(m.headers())
        assert headers["trace"] == b"t%d" % i
        assert headers[HEADER_TOPIC] == b"orders"
        assert headers[HEADER_PARTITION] == str(i % 2).encode()
        assert headers[HEADER_OFFSET] == str(i // 2).encode()
        expected = b"1" if i == 5 else b"3"
        assert headers[HEADER_ATTEMPTS] == expected
        error = b"ValueError: does not parse" if i == 5 else b"Poison: cannot process poison-%d" % i
        assert headers[HEADER_ERROR] == error


def test_existing_dead_letter_topic_is_used_as_is(gbroker: BrokerProcess) -> None:
    b = gbroker.bootstrap
    create_topic(b, "payments", 3)
    create_topic(b, "payments.dlq", 1)
    p = Producer({"bootstrap.servers": b})
    p.produce("payments", value=b"boom", partition=2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b, "group.id": "pay", "enable.auto.commit": False})
    c.assign([CkTopicPartition("payments", 2, 0)])
    try:
        msgs: list[Any] = []
        wait_for("the record", lambda: msgs.extend(c.consume(1, 0.2)) or bool(msgs))
        policy = DeadLetterPolicy.for_bootstrap(b, max_attempts=1)

        def fail(_: Any) -> None:
            raise RuntimeError("x" * 10_000)

        outcome = policy.process(msgs[0], fail)
    finally:
        c.close()
    assert (outcome.processed, outcome.attempts, outcome.dead_lettered) == (False, 1, True)
    [dead] = read_all(b, "payments.dlq", 1, 1)
    headers = dict(dead.headers())
    assert dead.partition() == 0  # the dead-letter topic has no partition 2
    assert headers[HEADER_PARTITION] == b"2"
    assert len(headers[HEADER_ERROR]) == 4096 and headers[HEADER_ERROR].endswith(b"...")


def test_dead_letter_topic_names_stay_legal() -> None:
    """``<topic>.dlq`` of a source topic over 245 characters would be longer than Kafka's
    249: refused before anything is produced, and not as a retriable error."""
    assert dlq_topic("t" * 245) == "t" * 245 + ".dlq"
    with pytest.raises(DeadLetterTopicNameError, match="at most 245 characters") as ei:
        dlq_topic("t" * 246)
    assert not ei.value.retriable

    class Msg:
        def topic(self) -> str:
            return "t" * 249

    produced: list[object] = []
    policy = DeadLetterPolicy(type("P", (), {"produce": lambda *a, **k: produced.append(a)})())
    with pytest.raises(DeadLetterTopicNameError):
        policy.dead_letter(Msg(), Poison("bad"), 1)  # type: ignore[arg-type]
    assert produced == []
    with pytest.raises(ValueError, match="suffix"):
        DeadLetterPolicy(object(), suffix="/dlq")
