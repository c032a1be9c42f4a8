"""A confluent-kafka group member in its own process, so a test can SIGKILL it.

    python tests/broker/groups/consumer_child.py <bootstrap> <group> <topic> <json client config>

Processes records at least once: each polled batch is reported on stdout, flushed, and
only then committed. Lines::

    A <p>,<p>,...   its assignment after a rebalance (eager: the whole set)
    R               its assignment was revoked
    M <p> <offset>  a record processed
"""

from __future__ import annotations

import json
import sys
from typing import Any

from confluent_kafka import Consumer, KafkaException


def main(bootstrap: str, group: str, topic: str, extra: dict[str, Any]) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )

    def on_assign(c: Consumer, partitions: list[Any]) -> None:
        out.write("A " + ",".join(str(p.partition) for p in partitions) + "\n")
        out.flush()

    def on_revoke(c: Consumer, partitions: list[Any]) -> None:
        out.write("R\n")
        out.flush()

    out = sys.stdout
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while True:
        msgs = consumer.consume(num_messages=200, timeout=0.2)
        done = [m for m in msgs if m.error() is None]
        for m in done:
            out.write(f"M {m.partition()} {m.offset()}\n")
        out.flush()
        if done:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException:
                pass  # a rebalance got in the way: someone reprocesses (at least once)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
