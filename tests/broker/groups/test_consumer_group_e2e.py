"""KIP-848 consumer groups against a real broker process: at the wire level with the
project's codec (ConsumerGroupHeartbeat, ConsumerGroupDescribe, the member-epoch checks of
OffsetCommit/OffsetFetch v9, ListGroups v5 types, DescribeGroups v6, the classic <->
consumer conversion of empty groups), and with confluent-kafka's
``Consumer(group.protocol=consumer)``: members joining and leaving a group over 6
partitions, every record read exactly once with synchronous commits.

Bounded: waits poll a condition until a deadline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from kclient import KafkaClient
from kwire import ApiKey
from kwire import error_table as E
from kwire.address import HostPort
from kwire.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kwire.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kwire.messages.describe_groups import DescribeGroupsRequest
from kwire.messages.find_coordinator import FindCoordinatorRequest
from kwire.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kwire.messages.list_groups import ListGroupsRequest
from kwire.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kwire.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kwire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from tests.brokers import ROOT, BrokerProcess, create_topic

pytestmark = pytest.mark.timeout(240)

HEARTBEAT_MS = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("kip848"),
        env={
            "STRATA_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": str(HEARTBEAT_MS),
            "STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS": "50",
        },
    ).start()
    create_topic(b.bootstrap, "w", 4)
    create_topic(b.bootstrap, "ex", 6)
    yield b
    b.kill()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[KafkaClient]:
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as c:
        # creates __consumer_offsets, as a client's first FindCoordinator does
        call(c, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(coordinator_keys=("wire",)))
        # ... and, as a client retries COORDINATOR_LOAD_IN_PROGRESS, wait for the group's
        # partition to be loaded (it is led before it is loaded)
        deadline = time.monotonic() + 30
        while (
            call(c, ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=("wire",))).groups[0].error_code
            == E.COORDINATOR_LOAD_IN_PROGRESS
        ):
            assert time.monotonic() < deadline, "__consumer_offsets never loaded"
            time.sleep(0.05)
        yield c


def call(client: KafkaClient, key: ApiKey, version: int, req: Any) -> Any:
    return client._call(key, version, req)


def heartbeat(client: KafkaClient, group: str, member: str, epoch: int, version: int = 1, **kw: Any) -> Any:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        kw.setdefault("topic_partitions", ())
    return call(
        client,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        version,
        ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch, **kw),
    )


def commit(client: KafkaClient, version: int, group: str, member: str, epoch: int) -> int:
    r = call(
        client,
        ApiKey.OFFSET_COMMIT,
        version,
        OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=epoch,
            member_id=member,
            topics=(
                OffsetCommitRequestTopic(
                    name="w",
                    partitions=(OffsetCommitRequestPartition(partition_index=0, committed_offset=5),),
                ),
            ),
        ),
    )
    code: int = r.topics[0].partitions[0].error_code
    return code


def test_the_protocol_at_the_wire(client: KafkaClient) -> None:
    group, mid = "wire", str(uuid.uuid4())
    r = heartbeat(client, group, mid, 0, subscribed_topic_names=("w",))
    assert r.error_code == 0 and r.member_id == mid and r.member_epoch > 0
    assert r.heartbeat_interval_ms == HEARTBEAT_MS
    assert r.assignment is not None and [sorted(t.partitions) for t in r.assignment.topic_partitions] == [
        [0, 1, 2, 3]
    ]
    epoch = r.member_epoch
    owned = r.assignment.topic_partitions
    r = heartbeat(client, group, mid, epoch, topic_partitions=owned)
    assert (r.error_code, r.member_epoch) == (0, epoch)
    # errors, as Kafka 4 answers them
    assert heartbeat(client, group, mid, epoch + 5).error_code == E.FENCED_MEMBER_EPOCH
    assert heartbeat(client, group, "nobody", 3).error_code == E.UNKNOWN_MEMBER_ID
    assert heartbeat(client, group, "", 0, subscribed_topic_names=("w",)).error_code == E.INVALID_REQUEST
    bad = heartbeat(client, group, "x", 0, subscribed_topic_names=("w",), server_assignor="nope")
    assert bad.error_code == E.UNSUPPORTED_ASSIGNOR
    assert (
        heartbeat(client, group, "x", 0, subscribed_topic_regex="(").error_code
        == E.INVALID_REGULAR_EXPRESSION
    )
    # v0: the coordinator makes the member id
    r0 = heartbeat(client, "wire0", "", 0, version=0, subscribed_topic_names=("w",))
    assert r0.error_code == 0 and r0.member_id
    # offsets with the member epoch (v9); older versions are refused for its members
    assert commit(client, 9, group, mid, epoch) == 0
    assert commit(client, 9, group, mid, epoch - 1) == E.STALE_MEMBER_EPOCH
    assert commit(client, 9, group, mid, epoch + 1) == E.FENCED_MEMBER_EPOCH
    assert commit(client, 9, group, "nobody", epoch) == E.UNKNOWN_MEMBER_ID
    assert commit(client, 8, group, mid, epoch) == E.UNSUPPORTED_VERSION
    f = call(
        client,
        ApiKey.OFFSET_FETCH,
        9,
        OffsetFetchRequest(
            groups=(OffsetFetchRequestGroup(group_id=group, member_id=mid, member_epoch=epoch, topics=None),)
        ),
    )
    assert f.groups[0].error_code == 0 and f.groups[0].topics[0].partitions[0].committed_offset == 5
    f = call(
        client,
        ApiKey.OFFSET_FETCH,
        9,
        OffsetFetchRequest(
            groups=(OffsetFetchRequestGroup(group_id=group, member_id=mid, member_epoch=1, topics=None),)
        ),
    )
    assert f.groups[0].error_code == E.STALE_MEMBER_EPOCH
    # OffsetDelete: not for a topic the members subscribe to
    od = call(
        client,
        ApiKey.OFFSET_DELETE,
        0,
        OffsetDeleteRequest(
            group_id=group,
            topics=(
                OffsetDeleteRequestTopic(
                    name="w", partitions=(OffsetDeleteRequestPartition(partition_index=0),)
                ),
            ),
        ),
    )
    assert (od.error_code, od.topics[0].partitions[0].error_code) == (0, E.GROUP_SUBSCRIBED_TO_TOPIC)
    # ConsumerGroupDescribe
    d = call(
        client, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=(group, "none"))
    )
    g, missing = d.groups
    assert (g.error_code, g.group_state, g.assignor_name) == (0, "Stable", "uniform")
    assert g.group_epoch == g.assignment_epoch == epoch
    (m,) = g.members
    assert (m.member_id, m.member_epoch, m.member_type, tuple(m.subscribed_topic_names)) == (
        mid,
        epoch,
        1,
        ("w",),
    )
    assert m.assignment.topic_partitions[0].topic_name == "w"
    assert missing.error_code == E.GROUP_ID_NOT_FOUND
    # ListGroups v5 with types; DescribeGroups v5 (Dead, no error) and v6 (GROUP_ID_NOT_FOUND)
    lg = call(client, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=("Consumer",)))
    assert (group, "consumer", "Stable", "consumer") in {
        (x.group_id, x.protocol_type, x.group_state, x.group_type) for x in lg.groups
    }
    lg = call(client, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=("classic",)))
    assert group not in {x.group_id for x in lg.groups}
    dg = call(client, ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=(group,)))
    assert (dg.groups[0].error_code, dg.groups[0].group_state) == (0, "Dead")
    dg = call(client, ApiKey.DESCRIBE_GROUPS, 6, DescribeGroupsRequest(groups=(group,)))
    assert dg.groups[0].error_code == E.GROUP_ID_NOT_FOUND
    # a classic member joins a consumer group with members through the online migration's
    # bridge (test_migration_e2e.py), but not with a subscription that does not parse
    join = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )
    assert call(client, ApiKey.JOIN_GROUP, 3, join).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # leaving empties the group: a classic member turns it back into a classic group
    assert heartbeat(client, group, mid, -1).member_epoch == -1
    assert call(client, ApiKey.JOIN_GROUP, 3, join).error_code == 0
    lg = call(client, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=("classic",)))
    assert group in {x.group_id for x in lg.groups}
    # ... which a consumer member cannot upgrade online while its member's subscription
    # does not parse (the answer Kafka gives when the upgrade is not possible)
    refused = heartbeat(client, group, mid, 0, subscribed_topic_names=("w",))
    assert (refused.error_code, refused.error_message) == (
        E.GROUP_ID_NOT_FOUND,
        f"Group {group} is not a consumer group",
    )
    # committed offsets survived both conversions
    f = call(
        client,
        ApiKey.OFFSET_FETCH,
        8,
        OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group, topics=None),)),
    )
    assert f.groups[0].topics[0].partitions[0].committed_offset == 5


def test_static_member_rejoins_with_its_partitions(client: KafkaClient) -> None:
    group = "static"
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    ra = heartbeat(client, group, a, 0, subscribed_topic_names=("w",), instance_id="i-a")
    heartbeat(client, group, b, 0, subscribed_topic_names=("w",), instance_id="i-b")
    for _ in range(6):  # converge: a revokes, b takes its share
        ra = heartbeat(
            client,
            group,
            a,
            ra.member_epoch,
            topic_partitions=ra.assignment.topic_partitions if ra.assignment else (),
        )
        heartbeat(client, group, b, ra.member_epoch, topic_partitions=())
    d = call(
        client, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, ConsumerGroupDescribeRequest(group_ids=(group,))
    ).groups[0]
    a_parts = next(m for m in d.members if m.member_id == a).assignment.topic_partitions
    assert heartbeat(client, group, a, -2, instance_id="i-a").member_epoch == -2
    a2 = str(uuid.uuid4())
    r = heartbeat(client, group, a2, 0, subscribed_topic_names=("w",), instance_id="i-a")
    assert r.error_code == 0
    assert r.assignment is not None
    assert {(t.topic_id, tuple(sorted(t.partitions))) for t in r.assignment.topic_partitions} == {
        (t.topic_id, tuple(sorted(t.partitions))) for t in a_parts
    }
    c = str(uuid.uuid4())
    again = heartbeat(client, group, c, 0, subscribed_topic_names=("w",), instance_id="i-a")
    assert again.error_code == E.UNRELEASED_INSTANCE_ID


def test_a_static_member_changes_protocol(client: KafkaClient) -> None:
    """Kafka 4's static membership across the protocols: a classic JoinGroup with the
    group.instance.id of the group's only consumer-protocol member replaces it (the group
    is classic again, the joiner's SyncGroup answers the replaced member's partitions); a
    consumer-protocol member with that instance id then replaces the classic one (the group
    is upgraded) without waiting for it to leave, which only a consumer-protocol
    predecessor must."""
    from kwire.consumer_protocol import Subscription, decode_assignment, encode_subscription
    from kwire.messages.heartbeat import HeartbeatRequest
    from kwire.messages.sync_group import SyncGroupRequest

    group, iid = "xproto", "i-x"
    first = heartbeat(client, group, str(uuid.uuid4()), 0, subscribed_topic_names=("w",), instance_id=iid)
    assert first.error_code == 0 and first.assignment is not None
    join = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        group_instance_id=iid,
        protocol_type="consumer",
        protocols=(
            JoinGroupRequestProtocol(name="range", metadata=encode_subscription(Subscription(1, ("w",)))),
        ),
    )
    j = call(client, ApiKey.JOIN_GROUP, 5, join)
    assert (j.error_code, j.generation_id) == (0, first.member_epoch), j
    lg = call(client, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=("classic",)))
    assert (group, "Stable") in {(x.group_id, x.group_state) for x in lg.groups}
    sync = SyncGroupRequest(
        group_id=group, generation_id=j.generation_id, member_id=j.member_id, group_instance_id=iid
    )
    s = call(client, ApiKey.SYNC_GROUP, 3, sync)
    assert s.error_code == 0
    assert {p for tp in decode_assignment(s.assignment).partitions for p in tp.partitions} == {0, 1, 2, 3}
    beat = HeartbeatRequest(
        group_id=group, generation_id=j.generation_id, member_id=j.member_id, group_instance_id=iid
    )
    assert call(client, ApiKey.HEARTBEAT, 3, beat).error_code == 0  # stable: no rebalance

    again = heartbeat(client, group, str(uuid.uuid4()), 0, subscribed_topic_names=("w",), instance_id=iid)
    assert again.error_code == 0, again
    assert again.assignment is not None and sorted(again.assignment.topic_partitions[0].partitions) == [
        0,
        1,
        2,
        3,
    ]
    lg = call(client, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=("consumer",)))
    assert group in {x.group_id for x in lg.groups}
    assert call(client, ApiKey.HEARTBEAT, 3, beat).error_code in (E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID)


# --- confluent-kafka ------------------------------------------------------------------------------


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class Member(threading.Thread):
    """One ``group.protocol=consumer`` consumer committing each record synchronously."""

    def __init__(
        self, bootstrap: str, group: str, seen: Counter[bytes], lock: threading.Lock, topic: str = "ex"
    ) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        # (monotonic time, partitions) of each assignment and each revocation or loss
        self.assigned: list[tuple[float, list[int]]] = []
        self.revoked: list[tuple[float, list[int]]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.seen, self.lock = seen, lock
        self.stopping = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        c = self.consumer

        def on_assign(_: Any, parts: list[Any]) -> None:
            self.assigned.append((time.monotonic(), [tp.partition for tp in parts]))

        def on_revoke(_: Any, parts: list[Any]) -> None:
            self.revoked.append((time.monotonic(), [tp.partition for tp in parts]))

        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        try:
            while not self.stopping.is_set():
                m = c.poll(0.1)
                if m is None:
                    continue
                if m.error():
                    self.errors.append(str(m.error()))
                    continue
                with self.lock:
                    self.seen[bytes(m.value() or b"")] += 1
                self.commit(m)
        finally:
            c.close()

    def commit(self, m: Any) -> None:
        """Synchronously. librdkafka hands STALE_MEMBER_EPOCH to the application when the
        commit raced a new member epoch (the Java client retries it itself): retry it once
        the next heartbeat has brought the new epoch. A commit that still fails leaves the
        record to be read again by the partition's next owner: the test sees a duplicate."""
        for _ in range(50):
            try:
                self.consumer.commit(message=m, asynchronous=False)
                return
            except KafkaException as e:
                self.errors.append(f"commit: {e}")
                if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                    return
                time.sleep(HEARTBEAT_MS / 1000 / 5)


def test_members_join_and_leave_and_every_record_is_read_once(broker: BrokerProcess) -> None:
    seen: Counter[bytes] = Counter()
    lock = threading.Lock()
    produced: list[bytes] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})

    def produce(n: int) -> None:
        for _ in range(n):
            v = b"%d" % len(produced)
            produced.append(v)
            p.produce("ex", value=v, partition=len(produced) % 6)
        assert p.flush(30) == 0

    def count() -> int:
        with lock:
            return sum(seen.values())

    members: list[Member] = []

    def start() -> Member:
        m = Member(broker.bootstrap, "exactly", seen, lock)
        m.start()
        members.append(m)
        return m

    try:
        produce(150)
        first = start()
        wait_for("the first member reading", lambda: count() >= 30)
        start()
        start()
        produce(150)
        wait_for("the three members reading", lambda: count() >= 200)
        first.stopping.set()  # leaves the group (epoch -1) on close
        first.join(30)
        produce(150)
        start()
        produce(150)
        try:
            wait_for("every record", lambda: count() >= len(produced))
        except AssertionError:
            with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as c:
                d = call(
                    c, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=("exactly",))
                )
            print("DESCRIBE", d)
            print("ERRORS", [e for m in members for e in m.errors][:20])
            print("COUNT", count(), len(produced))
            raise
        time.sleep(HEARTBEAT_MS * 5 / 1000)  # a duplicate would show up now
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)
    with lock:
        dupes = {v: n for v, n in seen.items() if n != 1}
        assert not dupes, f"read more than once: {sorted(dupes.items())[:10]}"
        assert set(seen) == set(produced)


def test_cli_shows_the_protocol_epochs_and_assignments(broker: BrokerProcess, client: KafkaClient) -> None:
    group, mid = "cli848", str(uuid.uuid4())
    r = heartbeat(client, group, mid, 0, subscribed_topic_names=("w",))
    assert r.error_code == 0
    assert commit(client, 9, group, mid, r.member_epoch) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def strata(*args: str) -> Any:
        out = subprocess.run(
            [sys.executable, "-m", "api.cli", *args, "--bootstrap", broker.bootstrap, "-o", "json"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    listed = {g["group_id"]: g for g in strata("groups", "list")}
    assert listed[group]["type"] == "consumer" and listed[group]["state"] == "Stable"
    assert listed[group]["protocol_type"] == "consumer" and listed[group]["members"] == 1
    d = strata("groups", "describe", group)
    assert (d["type"], d["protocol"], d["group_epoch"]) == ("consumer", "uniform", r.member_epoch)
    (m,) = d["members"]
    assert m["member_id"] == mid and m["member_epoch"] == r.member_epoch
    assert m["partitions"] == m["target_partitions"] == [["w", p] for p in range(4)]
    assert {(p["partition"], p["member_id"]) for p in d["partitions"]} >= {(0, mid)}
    # REST v3 and the console's API
    url = broker.http_url
    cid = httpx.get(f"{url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    g = httpx.get(f"{url}/v3/clusters/{cid}/consumer-groups/{group}", timeout=10).json()
    assert (g["type"], g["state"], g["partition_assignor"], g["is_simple"]) == (
        "CONSUMER",
        "STABLE",
        "uniform",
        False,
    )
    (c,) = httpx.get(f"{url}/v3/clusters/{cid}/consumer-groups/{group}/consumers", timeout=10).json()["data"]
    assert (c["consumer_id"], c["member_epoch"]) == (mid, r.member_epoch)
    listed_v3 = httpx.get(f"{url}/v3/clusters/{cid}/consumer-groups", timeout=10).json()["data"]
    assert group in {x["consumer_group_id"] for x in listed_v3}
    page = httpx.get(f"{url}/console/api/groups/{group}", timeout=10).json()
    assert (page["type"], page["generation_id"], page["state"]) == ("consumer", r.member_epoch, "Stable")
    assert page["members"][0]["member_epoch"] == r.member_epoch
    assert page["members"][0]["target"] == [f"w-{p}" for p in range(4)]
    assert heartbeat(client, group, mid, -1).error_code == 0


def test_regex_subscription_follows_new_topics(broker: BrokerProcess) -> None:
    """librdkafka sends a ``^``-prefixed subscription as SubscribedTopicRegex (v1); the
    coordinator resolves it (RE2) and a matching topic created later joins the assignment."""
    create_topic(broker.bootstrap, "rx-a", 2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("rx-a", value=b"a")
    p.flush(30)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "rx",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe(["^rx-.*"])
    got: list[tuple[str, bytes]] = []

    def read(n: int) -> bool:
        m = c.poll(0.1)
        if m is not None and not m.error():
            got.append((str(m.topic()), bytes(m.value() or b"")))
        return len(got) >= n

    try:
        wait_for("the record of rx-a", lambda: read(1), timeout=60)
        create_topic(broker.bootstrap, "rx-b", 1)
        p.produce("rx-b", value=b"b")
        p.flush(30)
        wait_for("the record of the new topic rx-b", lambda: read(2), timeout=60)
        with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as kc:
            d = call(kc, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=("rx",)))
        (m,) = d.groups[0].members
        # sent as a regex (librdkafka wraps each pattern in parentheses), resolved here
        assert m.subscribed_topic_regex == "(^rx-.*)"
    finally:
        c.close()
    assert sorted(got) == [("rx-a", b"a"), ("rx-b", b"b")]


def _describe(broker: BrokerProcess, group: str) -> Any:
    with KafkaClient.connect(HostPort("127.0.0.1", broker.kafka_port)) as c:
        return call(c, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(group_ids=(group,)))


def _assignments(group: Any) -> set[tuple[str, str, tuple[int, ...]]]:
    return {
        (m.member_id, tp.topic_name, tuple(tp.partitions))
        for m in group.members
        for tp in m.assignment.topic_partitions
    }


def test_kill_and_restart_keeps_epochs_and_assignments(broker: BrokerProcess) -> None:
    """kill -9 of the broker, restarted: the group's records in ``__consumer_offsets``
    bring back its epoch, members and assignments, so the members go on with what they
    had: no partition revoked, no rebalance, every record read exactly once. (Last in
    the module: the shared broker restarts.)"""
    create_topic(broker.bootstrap, "kr", 6)
    seen: Counter[bytes] = Counter()
    lock = threading.Lock()
    produced: list[bytes] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})

    def produce(n: int) -> None:
        for _ in range(n):
            v = b"%d" % len(produced)
            produced.append(v)
            p.produce("kr", value=v, partition=len(produced) % 6)
        assert p.flush(30) == 0

    def count() -> int:
        with lock:
            return sum(seen.values())

    members = [Member(broker.bootstrap, "survivor", seen, lock, topic="kr") for _ in range(2)]
    try:
        produce(300)
        for m in members:
            m.start()

        def stable() -> bool:
            d = _describe(broker, "survivor").groups[0]
            return d.group_state == "Stable" and len(d.members) == 2 and count() >= 50

        wait_for("a stable group of two, reading", stable)
        before = _describe(broker, "survivor").groups[0]
        killed_at = time.monotonic()
        broker.kill()
        broker.start()
        produce(300)
        wait_for("every record", lambda: count() >= len(produced), timeout=90)
        time.sleep(HEARTBEAT_MS * 5 / 1000)  # a duplicate would show up now
        after = _describe(broker, "survivor").groups[0]
        done_at = time.monotonic()
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)
    assert after.group_epoch == before.group_epoch
    assert {(m.member_id, m.member_epoch) for m in after.members} == {
        (m.member_id, m.member_epoch) for m in before.members
    }
    assert _assignments(after) == _assignments(before)
    for m in members:
        lost = [r for r in m.revoked if killed_at <= r[0] < done_at and r[1]]
        assert not lost, f"revoked after the kill: {lost}"
    with lock:
        dupes = {v: n for v, n in seen.items() if n != 1}
        assert not dupes, f"read more than once: {sorted(dupes.items())[:10]}"
        assert set(seen) == set(produced)
