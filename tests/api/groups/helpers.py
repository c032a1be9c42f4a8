"""Shared helpers of the group API tests: bounded waits, producing, REST calls, a
confluent-kafka group member running in a thread."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from confluent_kafka import Consumer, Producer

V2 = "application/vnd.kafka.v2+json"
V2_BINARY = "application/vnd.kafka.binary.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"
JSON_HEADERS = {"Content-Type": V2}

# Brokers of these tests: short initial rebalance delay, small sessions allowed.
BROKER_ENV = {
    "STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS": "100",
    "STRATA_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
}
MEMBER_CONFIG: dict[str, Any] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300,
    "max.poll.interval.ms": 30000,
}


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def produce(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None, int]]
) -> list[tuple[int, int]]:
    """Produce (key, value, partition) records in order; their (partition, offset)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    out: dict[int, tuple[int, int]] = {}

    def delivered(i: int) -> Callable[[Any, Any], None]:
        def cb(err: Any, msg: Any) -> None:
            assert err is None, err
            out[i] = (msg.partition(), msg.offset())

        return cb

    for i, (key, value, partition) in enumerate(records):
        p.produce(topic, key=key, value=value, partition=partition, on_delivery=delivered(i))
        p.poll(0)
    assert p.flush(30) == 0
    return [out[i] for i in range(len(records))]


def rest(broker_url: str) -> httpx.Client:
    return httpx.Client(base_url=broker_url, timeout=60)


def get_json_body(client: httpx.Client, path: str, body: Any) -> httpx.Response:
    """GET with a JSON body (REST Proxy v2's GET .../offsets)."""
    return client.request("GET", path, content=json.dumps(body), headers=JSON_HEADERS)


def poll_records(
    client: httpx.Client, base: str, want: int, *, accept: str = V2_BINARY, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """GET records until ``want`` arrived (bounded)."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} records within {timeout}s"
        r = client.get(f"{base}/records", params={"timeout": 500}, headers={"Accept": accept})
        assert r.status_code == 200, r.text
        got += r.json()
    return got


def assignment(client: httpx.Client, base: str) -> set[tuple[str, int]]:
    r = client.get(f"{base}/assignments")
    assert r.status_code == 200, r.text
    return {(p["topic"], p["partition"]) for p in r.json()["partitions"]}


class GroupMember:
    """A confluent-kafka consumer subscribed in a thread: polls, records what it got and
    its current assignment; commits what it processed when ``commit`` is set."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], **extra: Any) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **MEMBER_CONFIG,
                **extra,
            }
        )
        self.topics = topics
        self.records: list[tuple[str, int, int, bytes | None]] = []
        self.assigned: set[tuple[str, int]] = set()
        self.commit = True
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> GroupMember:
        self._thread.start()
        return self

    def _run(self) -> None:
        c = self.consumer
        c.subscribe(self.topics)
        while not self._stop.is_set():
            msg = c.poll(0.1)
            with self._lock:
                self.assigned = {(tp.topic, tp.partition) for tp in c.assignment()}
            if msg is None or msg.error():
                continue
            with self._lock:
                self.records.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))
            if self.commit:
                c.commit(msg, asynchronous=False)

    def snapshot(self) -> tuple[set[tuple[str, int]], list[tuple[str, int, int, bytes | None]]]:
        with self._lock:
            return set(self.assigned), list(self.records)

    def member_id(self) -> str:
        return str(self.consumer.memberid())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()
