"""KIP-848's online migration against a real broker with confluent-kafka (librdkafka)
consumers: a rolling upgrade of three ``group.protocol=classic`` members to
``group.protocol=consumer``, one at a time, on a 6-partition topic with records flowing,
then the rolling downgrade back; every record is read exactly once (synchronous commits),
in order within its partition, and the group is a consumer group in between and a
classic one at each end.

Bounded: waits poll a condition until a deadline; the producer thread stops by itself."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from kclient import KafkaClient
from kwire import ApiKey
from kwire.address import HostPort
from kwire.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kwire.messages.find_coordinator import FindCoordinatorRequest
from kwire.messages.list_groups import ListGroupsRequest
from tests.brokers import BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(300)

HEARTBEAT_MS = 300
PARTITIONS = 6
GROUP = "rolling"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("migration"),
        env={
            "STRATA_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": str(HEARTBEAT_MS),
            "STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS": "50",
        },
    ).start()
    create_topic(b.bootstrap, "roll", PARTITIONS)
    yield b
    b.kill()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class Reads:
    """What the members read: each partition's sequence numbers in reading order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_partition: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.who: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}  # the reader of each

    def add(self, partition: int, seq: int, who: str = "") -> None:
        with self.lock:
            self.by_partition[partition].append(seq)
            self.who[partition].append(who)

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.by_partition.values())


class Member(threading.Thread):
    """One consumer of either protocol, committing each record synchronously before it
    polls the next (so a partition handed over resumes right after the last record read)."""

    def __init__(
        self, bootstrap: str, protocol: str, reads: Reads, group: str = GROUP, topic: str = "roll"
    ) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        if protocol == "classic":
            # The session outlasts a broker restart on a loaded machine: librdkafka drops a
            # member (and its partitions, as lost) whose heartbeats fail that long.
            conf |= {"session.timeout.ms": 30_000, "heartbeat.interval.ms": 200}
        self.protocol = protocol
        self.consumer = Consumer(conf)
        self.reads = reads
        self.stopping = threading.Event()
        self.assigned = threading.Event()  # set at its first non-empty assignment
        self.errors: list[str] = []

    def run(self) -> None:
        c = self.consumer

        def on_assign(_: Any, parts: list[Any]) -> None:
            if parts:
                self.assigned.set()

        c.subscribe([self.topic], on_assign=on_assign)
        try:
            while not self.stopping.is_set():
                m = c.poll(0.1)
                if m is None:
                    continue
                if m.error():
                    self.errors.append(str(m.error()))
                    continue
                self.reads.add(m.partition() or 0, int(m.value() or b"-1"), f"{self.protocol}@{self.name}")
                self.commit(m)
        finally:
            c.close()

    def commit(self, m: Any) -> None:
        # librdkafka hands a consumer-protocol commit that raced a new member epoch to the
        # application (STALE_MEMBER_EPOCH, docs/operations.md): retry with the next epoch.
        for _ in range(50):
            try:
                done = self.consumer.commit(message=m, asynchronous=False)
                self.errors.extend(f"commit {tp}: {tp.error}" for tp in done or () if tp.error)
                return
            except KafkaException as e:
                self.errors.append(f"commit: {e}")
                if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                    return
                time.sleep(HEARTBEAT_MS / 1000 / 5)


class Flow(threading.Thread):
    """Produces ``total`` records, partition by partition in turn, a few every 50 ms."""

    def __init__(
        self, bootstrap: str, total: int, topic: str = "roll", sent: dict[int, int] | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.total = total
        # records sent to each partition (a flow that follows another goes on from it)
        self.sent: dict[int, int] = dict(sent) if sent else dict.fromkeys(range(PARTITIONS), 0)

    def run(self) -> None:
        n = 0
        while n < self.total:
            for _ in range(6):
                p = n % PARTITIONS
                self.producer.produce(self.topic, value=b"%d" % self.sent[p], partition=p)
                self.sent[p] += 1
                n += 1
            self.producer.poll(0)
            time.sleep(0.05)
        assert self.producer.flush(30) == 0


def group_type(broker: BrokerProcess) -> str:
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as c:
        c._call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(coordinator_keys=(GROUP,)))
        lg = c._call(ApiKey.LIST_GROUPS, 5, ListGroupsRequest())
    types = {g.group_id: g.group_type for g in lg.groups}
    return str(types.get(GROUP, ""))


def member_types(broker: BrokerProcess) -> list[int]:
    """ConsumerGroupDescribe v1's MemberType of each member (0 classic, 1 consumer)."""
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as c:
        d = c._call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=(GROUP,)))
    return sorted(m.member_type for m in d.groups[0].members)


def test_rolling_upgrade_and_downgrade_read_every_record_once_in_order(broker: BrokerProcess) -> None:
    reads = Reads()
    flow = Flow(broker.bootstrap, 3000)
    members: list[Member] = []

    def start(protocol: str) -> Member:
        m = Member(broker.bootstrap, protocol, reads)
        m.start()
        members.append(m)
        wait_for(f"a {protocol} member's first partitions", m.assigned.is_set, 60)
        return m

    def stop(m: Member) -> None:
        m.stopping.set()  # LeaveGroup (classic) or the leave heartbeat (consumer) on close
        m.join(30)
        assert not m.is_alive()

    def progress(what: str, more: int = 150) -> None:
        target = reads.count() + more
        wait_for(what, lambda: reads.count() >= target)

    try:
        classic = [start("classic") for _ in range(3)]
        flow.start()
        progress("three classic members reading")
        assert group_type(broker) == "classic"
        consumers = []
        for i, old in enumerate(classic):  # the rolling upgrade
            stop(old)
            consumers.append(start("consumer"))
            progress(f"upgrade step {i}")
            assert group_type(broker) == "consumer"
            if i == 0:  # the classic members stay in the consumer group
                assert member_types(broker) == [0, 0, 1]
        back = []
        for i, old in enumerate(consumers):  # and the rolling downgrade
            stop(old)
            back.append(start("classic"))
            progress(f"downgrade step {i}")
        wait_for("a classic group again", lambda: group_type(broker) == "classic", 30)
        flow.join(120)
        total = sum(flow.sent.values())
        wait_for("every record", lambda: reads.count() >= total, 120)
        time.sleep(2)  # a duplicate would show up now
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)
    logged = "".join(broker.lines)
    assert "classic group rolling upgraded to a consumer group" in logged
    assert "consumer group rolling downgraded to a classic group" in logged
    errors = [e for m in members for e in m.errors]
    with reads.lock:
        for p, seqs in reads.by_partition.items():
            assert seqs == list(range(flow.sent[p])), (
                f"partition {p}: {len(seqs)} reads of {flow.sent[p]} records, out of order or "
                f"repeated (first differences: {[s for i, s in enumerate(seqs) if s != i][:10]}); "
                f"errors: {errors[:10]}"
            )


def describe(broker: BrokerProcess, group: str) -> Any:
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as c:
        return c._call(
            ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=(group,))
        ).groups[0]


def test_a_classic_member_of_a_consumer_group_survives_a_restart(broker: BrokerProcess) -> None:
    """kill -9 and restart: the group's records bring back its classic member (its
    ClassicMemberMetadata) with its epoch and assignment, and both members go on reading
    with no record read twice. (Last in the module: the shared broker restarts.)"""
    group = "survivor"
    create_topic(broker.bootstrap, "kr", PARTITIONS)
    reads = Reads()
    flow = Flow(broker.bootstrap, 600, "kr")
    members = [Member(broker.bootstrap, proto, reads, group, "kr") for proto in ("classic", "consumer")]
    try:
        members[0].start()
        wait_for("the classic member's partitions", members[0].assigned.is_set, 60)
        members[1].start()
        flow.start()

        def stable() -> bool:
            d = describe(broker, group)
            return (
                d.error_code == 0
                and d.group_state == "Stable"
                and sorted(m.member_type for m in d.members) == [0, 1]
                and all(m.assignment.topic_partitions for m in d.members)
            )

        wait_for("a stable group of a classic and a consumer member", stable)
        # Records flow before and after the kill, not through it: a produce request cut
        # by kill -9 is retried by the (non-idempotent) producer, a duplicate in the log.
        flow.join(120)
        before = describe(broker, group)
        broker.kill()
        broker.start()
        flow = Flow(broker.bootstrap, 600, "kr", flow.sent)
        flow.start()
        flow.join(120)
        total = sum(flow.sent.values())
        wait_for("every record", lambda: reads.count() >= total, 120)
        time.sleep(2)  # a duplicate would show up now
        after = describe(broker, group)
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)
    assert after.group_epoch == before.group_epoch
    assert {(m.member_id, m.member_epoch, m.member_type) for m in after.members} == {
        (m.member_id, m.member_epoch, m.member_type) for m in before.members
    }
    with reads.lock:
        for p, seqs in reads.by_partition.items():
            bad = next((i for i, s in enumerate(seqs) if s != i), len(seqs))
            assert seqs == list(range(flow.sent[p])), (
                f"partition {p}: not each record once, in order: at {bad}: "
                f"{list(zip(seqs, reads.who[p], strict=True))[max(bad - 3, 0) : bad + 3]}; "
                f"errors: {[e for m in members for e in m.errors][:10]}"
            )


def test_a_static_member_restarts_with_the_other_protocol(broker: BrokerProcess) -> None:
    """One ``group.instance.id`` restarted with the other protocol each time, as Kafka 4
    allows (consumer -> classic -> consumer): each incarnation replaces the previous one
    and goes on from its committed offsets, every record read once. The classic one ends
    without leaving (librdkafka's static members don't): the consumer-protocol one that
    follows replaces it at once."""
    topic, group, total = "static-x", "static-x-g", 30
    create_topic(broker.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(total):
        p.produce(topic, value=b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    seen: list[int] = []
    for protocol, upto in (("consumer", 10), ("classic", 20), ("consumer", total)):
        conf: dict[str, Any] = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "group.instance.id": "sx-1",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        if protocol == "classic":
            conf |= {"session.timeout.ms": 30_000, "heartbeat.interval.ms": 200}
        c = Consumer(conf)
        c.subscribe([topic])
        try:
            deadline = time.monotonic() + 60
            while len(seen) < upto and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is None:
                    continue
                assert m.error() is None, f"{protocol}: {m.error()}"
                seen.append(int(m.value() or b"-1"))
                c.commit(message=m, asynchronous=False)
            assert len(seen) >= upto, (protocol, len(seen))
        finally:
            c.close()
    assert sorted(seen) == list(range(total))
