"""Consumer groups against a real broker process with real clients: confluent-kafka
(eager and cooperative-sticky assignors, auto-commit, churn with kill -9 of a member),
kafka-python and aiokafka; committed offsets across broker restarts (kill -9 and clean).

Every test is bounded: waits poll a condition until a deadline, never sleep a fixed time
to "let things happen".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient

from tests.brokers import ROOT, BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(240)

CHILD = Path(__file__).resolve().parent / "consumer_child.py"
BROKER_ENV = {
    "STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS": "200",
    "STRATA_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
}
# Fast failure detection and rebalances; the rebalance timeout (max.poll.interval.ms)
# bounds how long a join waits for a member that does not rejoin.
MEMBER_CONFIG: dict[str, Any] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300,
    "max.poll.interval.ms": 30000,
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "broker", env=BROKER_ENV).start()
    yield b
    b.kill()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> dict[int, int]:
    """``count`` records round-robin over the partitions; returns the end offset of each."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    ends: dict[int, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    for i in range(count):
        p.produce(topic, value=b"%d" % i, partition=i % partitions, on_delivery=delivered)
        p.poll(0)
    assert p.flush(30) == 0
    return ends


# --- bookkeeping shared by every member -------------------------------------------------------


class Ledger:
    """What every member processed and currently owns (fed by their callbacks)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.processed: dict[int, set[int]] = {}
        self.owned: dict[str, set[int]] = {}
        self.revocations: Counter[str] = Counter()

    def process(self, partition: int, offset: int) -> None:
        with self.lock:
            self.processed.setdefault(partition, set()).add(offset)

    def assign(self, member: str, partitions: set[int], *, incremental: bool) -> None:
        with self.lock:
            if incremental:
                self.owned.setdefault(member, set()).update(partitions)
            else:
                self.owned[member] = set(partitions)

    def revoke(self, member: str, partitions: set[int] | None) -> None:
        with self.lock:
            self.revocations[member] += 1
            if partitions is None:
                self.owned[member] = set()
            else:
                self.owned.setdefault(member, set()).difference_update(partitions)

    def forget(self, member: str) -> None:
        with self.lock:
            self.owned.pop(member, None)

    def exclusive(self, members: list[str], partitions: int) -> bool:
        """Every partition owned by exactly one of ``members``, each of which owns some."""
        with self.lock:
            owners = Counter(p for m in members for p in self.owned.get(m, ()))
            return (
                set(owners) == set(range(partitions))
                and all(n == 1 for n in owners.values())
                and all(self.owned.get(m) for m in members)
            )

    def missing(self, ends: dict[int, int]) -> dict[int, list[int]]:
        with self.lock:
            return {
                p: gaps
                for p, end in ends.items()
                if (gaps := sorted(set(range(end)) - self.processed.get(p, set())))
            }


class ThreadMember(threading.Thread):
    """A confluent-kafka consumer in a thread: process, then commit (at least once)."""

    def __init__(
        self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger, **conf: Any
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.ledger = ledger
        self.topic = topic
        self.stopping = threading.Event()
        self.cooperative = conf.get("partition.assignment.strategy") == "cooperative-sticky"
        self.error: BaseException | None = None
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **MEMBER_CONFIG,
                **conf,
            }
        )

    def run(self) -> None:
        c = self.consumer
        try:
            c.subscribe(
                [self.topic],
                on_assign=lambda _, ps: self.ledger.assign(
                    self.name, {p.partition for p in ps}, incremental=self.cooperative
                ),
                on_revoke=lambda _, ps: self.ledger.revoke(
                    self.name, {p.partition for p in ps} if self.cooperative else None
                ),
            )
            while not self.stopping.is_set():
                msgs = [m for m in c.consume(num_messages=200, timeout=0.1) if m.error() is None]
                for m in msgs:
                    self.ledger.process(m.partition(), m.offset())
                if msgs:
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException:
                        pass  # lost the partitions meanwhile: whoever gets them reprocesses
        except BaseException as e:
            self.error = e
        finally:
            c.close()  # leaves the group (LeaveGroup)
            self.ledger.forget(self.name)

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive() and self.error is None, self.error


class ChildMember:
    """tests/broker/groups/consumer_child.py in a child process, reporting to the ledger."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ledger: Ledger) -> None:
        self.name = name
        self.ledger = ledger
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(CHILD),
                bootstrap,
                group,
                topic,
                json.dumps({"client.id": name, **MEMBER_CONFIG}),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "A":
                self.ledger.assign(self.name, {int(p) for p in rest.split(",") if p}, incremental=False)
            elif kind == "R":
                self.ledger.revoke(self.name, None)
            elif kind == "M":
                p, o = rest.split()
                self.ledger.process(int(p), int(o))

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.reader.join(30)  # everything it printed before dying is counted
        self.ledger.forget(self.name)


class Feeder(threading.Thread):
    """Produces records during the churn; ``ends`` are the delivered end offsets."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.partitions = partitions
        self.stopping = threading.Event()
        self.ends: dict[int, int] = {}
        self.lock = threading.Lock()
        self.sent = 0

    def _delivered(self, err: Any, msg: Any) -> None:
        assert err is None, err
        with self.lock:
            self.ends[msg.partition()] = max(self.ends.get(msg.partition(), 0), msg.offset() + 1)

    def run(self) -> None:
        while not self.stopping.is_set():
            for _ in range(20):
                self.producer.produce(
                    self.topic,
                    value=b"%d" % self.sent,
                    partition=self.sent % self.partitions,
                    on_delivery=self._delivered,
                )
                self.sent += 1
            self.producer.poll(0.05)
        assert self.producer.flush(30) == 0

    def stop(self) -> dict[int, int]:
        self.stopping.set()
        self.join(60)
        with self.lock:
            return dict(self.ends)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([CkTopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


# --- the churn test ---------------------------------------------------------------------------


def test_membership_churn_keeps_ownership_exclusive_and_skips_no_record(broker: BrokerProcess) -> None:
    topic, group, partitions = "churn", "churners", 8
    create_topic(broker.bootstrap, topic, partitions)
    ledger = Ledger()
    feeder = Feeder(broker.bootstrap, topic, partitions)
    feeder.start()
    m1, m2 = (ThreadMember(n, broker.bootstrap, group, topic, ledger) for n in ("m1", "m2"))
    m1.start()
    m2.start()
    child = ChildMember("child", broker.bootstrap, group, topic, ledger)
    try:
        wait_for(
            "3 members sharing 8 partitions", lambda: ledger.exclusive(["m1", "m2", "child"], partitions)
        )

        m3 = ThreadMember("m3", broker.bootstrap, group, topic, ledger)
        m3.start()
        wait_for(
            "a 4th member to get its share", lambda: ledger.exclusive(["m1", "m2", "child", "m3"], partitions)
        )

        m1.stop()  # a clean close: LeaveGroup
        wait_for("m1's partitions to move", lambda: ledger.exclusive(["m2", "child", "m3"], partitions))

        child.kill()  # kill -9: no LeaveGroup, the session timeout must expire it
        wait_for("the dead member's partitions to move", lambda: ledger.exclusive(["m2", "m3"], partitions))

        ends = feeder.stop()
        assert sum(ends.values()) == feeder.sent > 0
        wait_for("every record to be processed", lambda: not ledger.missing(ends), timeout=60)
        wait_for(
            "the commits to reach the end of every partition",
            lambda: committed(broker.bootstrap, group, topic, partitions) == ends,
            every=0.5,
        )
    finally:
        feeder.stopping.set()
        if child.proc.poll() is None:
            child.kill()
        for m in (m1, m2):
            if m.is_alive():
                m.stop()
        if "m3" in locals():
            m3.stop()


# --- assignors and commit modes -------------------------------------------------------------------


def test_cooperative_sticky_assignor_moves_only_what_it_must(broker: BrokerProcess) -> None:
    topic, group, partitions = "coop", "cooperative", 6
    create_topic(broker.bootstrap, topic, partitions)
    produce(broker.bootstrap, topic, 60, partitions)
    ledger = Ledger()
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    a, b, c = (ThreadMember(n, broker.bootstrap, group, topic, ledger, **conf) for n in ("a", "b", "c"))
    a.start()
    b.start()
    try:
        wait_for("a and b sharing the partitions", lambda: ledger.exclusive(["a", "b"], partitions))
        before = {m: set(ledger.owned[m]) for m in ("a", "b")}
        c.start()
        wait_for("c to get its share", lambda: ledger.exclusive(["a", "b", "c"], partitions))
        # Incremental: a and b kept every partition they were not asked to give up.
        for m in ("a", "b"):
            assert len(ledger.owned[m] & before[m]) == len(ledger.owned[m]) >= 1
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # referenced until answered
        desc = admin.describe_consumer_groups([group])[group].result(20)
        assert desc.partition_assignor == "cooperative-sticky"
        assert {m.client_id for m in desc.members} == {"a", "b", "c"}
        wait_for("all 60 records", lambda: not ledger.missing(dict.fromkeys(range(partitions), 10)))
        c.stop()
        wait_for("c's partitions back with a and b", lambda: ledger.exclusive(["a", "b"], partitions))
    finally:
        for m in (a, b, c):
            if m.is_alive():
                m.stop()


def test_auto_commit_default_works(broker: BrokerProcess) -> None:
    """enable.auto.commit=true is confluent-kafka's default: it used to stall because
    FindCoordinator was not served."""
    topic, group = "auto", "autocommit"
    create_topic(broker.bootstrap, topic, 2)
    ends = produce(broker.bootstrap, topic, 50, 2)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 200,
        }
    )
    try:
        c.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 50:
            assert time.monotonic() < deadline, f"consumed only {seen} of 50"
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                seen += 1
        wait_for(
            "auto-commits to reach the end", lambda: committed(broker.bootstrap, group, topic, 2) == ends
        )
    finally:
        c.close()


# --- restarts ----------------------------------------------------------------------------------------


def _consume_from(bootstrap: str, group: str, topic: str, count: int) -> list[tuple[int, int]]:
    """A new member of ``group`` consumes ``count`` records, committing each batch."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: list[tuple[int, int]] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < count:
            assert time.monotonic() < deadline, f"consumed only {len(got)} of {count}"
            for m in c.consume(num_messages=count - len(got), timeout=0.2):
                if m.error() is None:
                    got.append((m.partition(), m.offset()))
            if got:
                c.commit(asynchronous=False)
    finally:
        c.close()
    return got


@pytest.mark.parametrize("how", ["kill9", "clean"])
def test_committed_offsets_survive_a_broker_restart(tmp_path: Path, how: str) -> None:
    broker = BrokerProcess(tmp_path / "broker", env=BROKER_ENV).start()
    try:
        create_topic(broker.bootstrap, "r", 1)
        produce(broker.bootstrap, "r", 100, 1)
        first = _consume_from(broker.bootstrap, "rg", "r", 30)
        assert [o for _, o in first] == list(range(30))
        assert committed(broker.bootstrap, "rg", "r", 1) == {0: 30}
        if how == "kill9":
            broker.kill()
        else:
            assert broker.stop() == 0
        broker.start()  # same data dir and ports
        assert committed(broker.bootstrap, "rg", "r", 1) == {0: 30}
        second = _consume_from(broker.bootstrap, "rg", "r", 20)
        assert [o for _, o in second] == list(range(30, 50))  # resumed exactly at the commit
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = {g.group_id for g in admin.list_consumer_groups().result(20).valid}
        assert "rg" in listed
    finally:
        broker.kill()


# --- other clients -------------------------------------------------------------------------------------


def test_kafka_python_group_consumer_commits_and_resumes(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    create_topic(broker.bootstrap, "kp", 2)
    produce(broker.bootstrap, "kp", 40, 2)

    def consume(n: int) -> list[tuple[int, int]]:
        c = KafkaConsumer(
            "kp",
            bootstrap_servers=broker.bootstrap,
            group_id="kpg",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        got: list[tuple[int, int]] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < n:
                assert time.monotonic() < deadline, f"kafka-python consumed {len(got)} of {n}"
                for records in c.poll(timeout_ms=200, max_records=n - len(got)).values():
                    got += [(r.partition, r.offset) for r in records]
            c.commit()
        finally:
            c.close()
        return got

    first = consume(24)
    second = consume(16)
    assert sorted(first + second) == sorted((p, o) for p in range(2) for o in range(20))
    assert committed(broker.bootstrap, "kpg", "kp", 2) == {0: 20, 1: 20}


async def test_aiokafka_group_consumer_commits_and_resumes(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer

    create_topic(broker.bootstrap, "aio", 2)
    produce(broker.bootstrap, "aio", 40, 2)

    async def consume(n: int) -> list[tuple[int, int]]:
        c = AIOKafkaConsumer(
            "aio",
            bootstrap_servers=broker.bootstrap,
            group_id="aiog",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        await c.start()
        got: list[tuple[int, int]] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < n:
                assert time.monotonic() < deadline, f"aiokafka consumed {len(got)} of {n}"
                batch = await c.getmany(timeout_ms=200, max_records=n - len(got))
                for records in batch.values():
                    got += [(r.partition, r.offset) for r in records]
            await c.commit()
        finally:
            await c.stop()
        return got

    first = await consume(24)
    second = await consume(16)
    assert sorted(first + second) == sorted((p, o) for p in range(2) for o in range(20))
    assert committed(broker.bootstrap, "aiog", "aio", 2) == {0: 20, 1: 20}


# --- admin clients --------------------------------------------------------------------------------------


def test_admin_clients_list_describe_alter_and_delete(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import MemberToRemove
    from kafka.errors import GroupSubscribedToTopicError, NoError

    create_topic(broker.bootstrap, "t", 2)
    create_topic(broker.bootstrap, "u", 1)
    member = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "g1",
            "group.instance.id": "inst-1",
            "client.id": "static-client",
            "session.timeout.ms": 6000,
        }
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        member.subscribe(["t"])
        deadline = time.monotonic() + 30
        while len(member.assignment()) < 2:
            assert time.monotonic() < deadline, "no assignment"
            member.poll(0.1)
        member.commit(offsets=[CkTopicPartition("t", 0, 5), CkTopicPartition("t", 1, 6)], asynchronous=False)

        stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(20).valid
        assert [(g.group_id, g.is_simple_consumer_group) for g in stable] == [("g1", False)]
        described = admin.describe_consumer_groups(["g1", "nope"])
        g1 = described["g1"].result(20)
        assert (g1.state, g1.partition_assignor) == (ConsumerGroupState.STABLE, "range")
        [m] = g1.members
        assert (m.group_instance_id, m.client_id, m.host) == ("inst-1", "static-client", "/127.0.0.1")
        assert sorted(tp.partition for tp in m.assignment.topic_partitions) == [0, 1]
        assert described["nope"].result(20).state == ConsumerGroupState.DEAD
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g1")])["g1"].result(20)
        assert {(tp.topic, tp.partition, tp.offset) for tp in offsets.topic_partitions} == {
            ("t", 0, 5),
            ("t", 1, 6),
        }

        # A "simple" group: offsets written by a tool, no members.
        altered = admin.alter_consumer_group_offsets(
            [
                ConsumerGroupTopicPartitions(
                    "simple", [CkTopicPartition("t", 0, 3), CkTopicPartition("u", 0, 1)]
                )
            ]
        )["simple"].result(20)
        assert all(tp.error is None for tp in altered.topic_partitions)
        listed = {g["group_id"]: (g["protocol_type"], g["group_state"]) for g in kp.list_groups()}
        assert listed == {"g1": ("consumer", "Stable"), "simple": ("", "Empty")}

        # OffsetDelete: refused for a topic a live member subscribes to, fine otherwise.
        assert kp.delete_group_offsets("g1", [KpTopicPartition("t", 0)]) == {
            KpTopicPartition("t", 0): GroupSubscribedToTopicError
        }
        assert kp.delete_group_offsets("simple", [KpTopicPartition("u", 0)]) == {
            KpTopicPartition("u", 0): NoError
        }

        # DeleteGroups: a group with members is refused; removing the static member (by
        # its instance id, LeaveGroup v3+) empties it.
        failed = admin.delete_consumer_groups(["g1"])["g1"].exception(20)
        assert failed is not None and "NON_EMPTY_GROUP" in str(failed)
        assert kp.remove_group_members("g1", [MemberToRemove(group_instance_id="inst-1")]) == {
            "inst-1": NoError
        }
        deleted = admin.delete_consumer_groups(["g1", "simple", "nope"])
        assert deleted["g1"].result(20) is None and deleted["simple"].result(20) is None
        assert "GROUP_ID_NOT_FOUND" in str(deleted["nope"].exception(20))
        assert kp.list_groups() == []
    finally:
        member.close()
        kp.close()
