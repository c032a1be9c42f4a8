"""Share groups (KIP-932) at the wire level against a real broker: ShareGroupHeartbeat,
ShareFetch (sessions, piggybacked acknowledgements), ShareAcknowledge, ShareGroupDescribe,
the group's share configs on the GROUP config resource, Alter/Delete/DescribeShareGroupOffsets
and DeleteGroups' removal of the group's state, encoded with kwire."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from kwire import ApiKey, decode_response, encode_request
from kwire import error_table as E
from kwire.framing import frame_bytes
from kwire.messages.alter_configs import (
    AlterableConfigOp,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from kwire.messages.delete_groups import DeleteGroupsRequest
from kwire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from kwire.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kwire.messages.list_groups import ListGroupsRequest
from kwire.messages.metadata import MetadataRequest, MetadataRequestTopic
from kwire.messages.share_acknowledge import AcknowledgePartition, AcknowledgeTopic, ShareAcknowledgeRequest
from kwire.messages.share_fetch import (
    AcknowledgementBatch,
    ShareFetchPartition,
    ShareFetchRequest,
    ShareFetchTopic,
)
from kwire.messages.share_group_describe import ShareGroupDescribeRequest
from kwire.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kwire.messages.share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from kwire.primitives import ZERO_UUID
from tests.brokers import BrokerProcess, create_topic

LOCK_MS = 2_000
GROUP_RESOURCE = 32


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    env = {"STRATA_GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS": "1000"}
    b = BrokerProcess(tmp_path_factory.mktemp("share-wire"), env=env).start()
    yield b
    b.kill()


class Wire:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, key: int, version: int, req: Any) -> Any:
        # The group requests go to the group's coordinator, which answers "loading" (or
        # "not available" while it creates __consumer_offsets) at first: retried, as a
        # client does. Every other answer is returned as it is.
        deadline = time.monotonic() + 20
        while True:
            resp = self._call(key, version, req)
            if (
                key == ApiKey.SHARE_GROUP_HEARTBEAT
                and resp.error_code in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE)
                and time.monotonic() < deadline
            ):
                time.sleep(0.1)
                continue
            return resp

    def _call(self, key: int, version: int, req: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(frame_bytes(encode_request(key, version, self.correlation, "wire-test", req)))
        (size,) = struct.unpack(">i", self._recv(4))
        cid, resp = decode_response(key, version, self._recv(size), strict=True)
        assert cid == self.correlation
        return resp

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "the broker closed the connection"
            buf += chunk
        return buf


@pytest.fixture
def wire(broker: BrokerProcess) -> Iterator[Wire]:
    w = Wire(broker.bootstrap)
    yield w
    w.close()


def _topic_id(wire: Wire, topic: str) -> uuid.UUID:
    resp = wire.call(ApiKey.METADATA, 12, MetadataRequest(topics=(MetadataRequestTopic(name=topic),)))
    tid: uuid.UUID = resp.topics[0].topic_id
    return tid


def _produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"r%d" % i, partition=partition)
        p.flush(10)  # one batch per record: acquisition is per record here
    assert p.flush(10) == 0


def _set_configs(wire: Wire, group: str, **values: str) -> Any:
    ops = tuple(AlterableConfigOp(name=k.replace("_", "."), value=v) for k, v in values.items())
    req = IncrementalAlterConfigsRequest(
        resources=(
            IncrementalAlterConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group, configs=ops),
        )
    )
    return wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, req).responses[0]


def _fetch(
    wire: Wire,
    group: str,
    member: str,
    epoch: int,
    tid: uuid.UUID,
    acks: tuple[AcknowledgementBatch, ...] = (),
    wait: int = 200,
) -> Any:
    return wire.call(
        ApiKey.SHARE_FETCH,
        1,
        ShareFetchRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait_ms=wait,
            min_bytes=1,
            max_records=100,
            batch_size=100,
            topics=(
                ShareFetchTopic(
                    topic_id=tid,
                    partitions=(ShareFetchPartition(partition_index=0, acknowledgement_batches=acks),),
                ),
            ),
        ),
    )


def _acquired(resp: Any) -> list[tuple[int, int, int]]:
    assert resp.error_code == 0, resp
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in resp.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def test_heartbeat_fetch_acknowledge_and_lock_expiry(broker: BrokerProcess, wire: Wire) -> None:
    create_topic(broker.bootstrap, "sw1", 1)
    tid = _topic_id(wire, "sw1")
    group = "sw-g1"
    assert (
        _set_configs(
            wire, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms=str(LOCK_MS)
        ).error_code
        == 0
    )
    bad = _set_configs(wire, group, share_delivery_count_limit="99")
    assert bad.error_code == E.INVALID_CONFIG and "share.delivery.count.limit" in (bad.error_message or "")
    described = wire.call(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        DescribeConfigsRequest(
            resources=(DescribeConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group),)
        ),
    )
    values = {c.name: c.value for c in described.results[0].configs}
    assert values["share.auto.offset.reset"] == "earliest" and values["share.delivery.count.limit"] == "5"
    _produce(broker.bootstrap, "sw1", 6)

    hb = wire.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        ShareGroupHeartbeatRequest(
            group_id=group, member_id="m1", member_epoch=0, subscribed_topic_names=("sw1",)
        ),
    )
    assert hb.error_code == 0 and hb.member_epoch == 1
    assert hb.assignment is not None and [
        (t.topic_id, tuple(t.partitions)) for t in hb.assignment.topic_partitions
    ] == [(tid, (0,))]
    hb2 = wire.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        ShareGroupHeartbeatRequest(
            group_id=group, member_id="m2", member_epoch=0, subscribed_topic_names=("sw1",)
        ),
    )
    assert hb2.member_epoch == 2 and hb2.assignment is not None  # partition 0 shared by both

    # m1 acquires everything there is; m2 then gets nothing
    first = _fetch(wire, group, "m1", 0, tid)
    assert first.acquisition_lock_timeout_ms == LOCK_MS
    assert _acquired(first) == [(0, 5, 1)]
    assert _acquired(_fetch(wire, group, "m2", 0, tid, wait=0)) == []

    # m1 accepts 0-2, releases 3, rejects 4 (piggybacked), leaves 5 acquired
    acks = (
        AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=(1,)),
        AcknowledgementBatch(first_offset=3, last_offset=4, acknowledge_types=(2, 3)),
    )
    r = _fetch(wire, group, "m1", 1, tid, acks, wait=0)
    assert r.responses[0].partitions[0].acknowledge_error_code == 0
    # the same fetch acquires the released record again, delivered a second time
    assert _acquired(r) == [(3, 3, 2)]
    # acknowledging what another member holds: INVALID_RECORD_STATE, nothing changes
    one = AcknowledgementBatch(first_offset=3, last_offset=3, acknowledge_types=(1,))
    wrong = wire.call(
        ApiKey.SHARE_ACKNOWLEDGE,
        1,
        ShareAcknowledgeRequest(
            group_id=group,
            member_id="m2",
            share_session_epoch=1,
            topics=(
                AcknowledgeTopic(
                    topic_id=tid,
                    partitions=(AcknowledgePartition(partition_index=0, acknowledgement_batches=(one,)),),
                ),
            ),
        ),
    )
    assert wrong.error_code == 0
    assert wrong.responses[0].partitions[0].error_code == E_INVALID_RECORD_STATE
    # session epochs: a skipped epoch, and a session that does not exist
    assert _fetch(wire, group, "m1", 7, tid).error_code == E_INVALID_SHARE_SESSION_EPOCH
    assert _fetch(wire, group, "m9", 1, tid).error_code == E_SHARE_SESSION_NOT_FOUND

    # m1 goes silent holding 3 and 5: after the lock both go to m2; the rejected 4 never
    time.sleep(LOCK_MS / 1000 + 0.5)
    got = _acquired(_fetch(wire, group, "m2", 2, tid, wait=0))
    assert got == [(3, 3, 3), (5, 5, 2)]

    described_group = wire.call(
        ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest(group_ids=(group, "no-such"))
    )
    g, missing = described_group.groups
    assert (
        g.error_code == 0 and g.group_state == "Stable" and {m.member_id for m in g.members} == {"m1", "m2"}
    )
    assert missing.error_code == E.GROUP_ID_NOT_FOUND


def test_requests_refused(broker: BrokerProcess, wire: Wire) -> None:
    create_topic(broker.bootstrap, "sw2", 1)
    tid = _topic_id(wire, "sw2")
    hb = wire.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        ShareGroupHeartbeatRequest(
            group_id="sw-g2", member_id="", member_epoch=0, subscribed_topic_names=("sw2",)
        ),
    )
    assert hb.error_code == E.INVALID_REQUEST
    hb = wire.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        ShareGroupHeartbeatRequest(group_id="sw-g2", member_id="x", member_epoch=5),
    )
    assert hb.error_code == E.UNKNOWN_MEMBER_ID
    wire.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        ShareGroupHeartbeatRequest(
            group_id="sw-g2", member_id="x", member_epoch=0, subscribed_topic_names=("sw2",)
        ),
    )
    hb = wire.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        ShareGroupHeartbeatRequest(group_id="sw-g2", member_id="x", member_epoch=9),
    )
    assert hb.error_code == E_FENCED_MEMBER_EPOCH
    # an opening ShareFetch can't acknowledge
    acks = (AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=(1,)),)
    assert _fetch(wire, "sw-g2", "x", 0, tid, acks).error_code == E.INVALID_REQUEST
    # an unknown topic id
    r = _fetch(wire, "sw-g2", "x", 0, uuid.uuid4(), wait=0)
    assert r.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_ID


E_FENCED_MEMBER_EPOCH = 110
E_INVALID_RECORD_STATE = 121
E_SHARE_SESSION_NOT_FOUND = 122
E_INVALID_SHARE_SESSION_EPOCH = 123


def test_list_and_delete_share_groups(broker: BrokerProcess, wire: Wire) -> None:
    create_topic(broker.bootstrap, "sw3", 1)
    join = ShareGroupHeartbeatRequest(
        group_id="sw-g3", member_id="a", member_epoch=0, subscribed_topic_names=("sw3",)
    )
    assert wire.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, join).error_code == 0
    listed = wire.call(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
    assert ("sw-g3", "share", "Stable") in [
        (g.group_id, g.protocol_type, g.group_state) for g in listed.groups
    ]
    assert "sw-g3" not in [
        g.group_id
        for g in wire.call(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=("Empty",))).groups
    ]
    deleted = wire.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=("sw-g3",)))
    assert deleted.results[0].error_code == E.NON_EMPTY_GROUP
    leave = ShareGroupHeartbeatRequest(group_id="sw-g3", member_id="a", member_epoch=-1)
    assert wire.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, leave).member_epoch == -1
    deleted = wire.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=("sw-g3",)))
    assert deleted.results[0].error_code == 0
    assert "sw-g3" not in [g.group_id for g in wire.call(ApiKey.LIST_GROUPS, 4, ListGroupsRequest()).groups]


def test_describe_share_group_offsets(broker: BrokerProcess, wire: Wire) -> None:
    create_topic(broker.bootstrap, "sw4", 2)
    tid = _topic_id(wire, "sw4")
    group = "sw-g4"
    assert _set_configs(wire, group, share_auto_offset_reset="earliest").error_code == 0
    _produce(broker.bootstrap, "sw4", 4)
    join = ShareGroupHeartbeatRequest(
        group_id=group, member_id="a", member_epoch=0, subscribed_topic_names=("sw4",)
    )
    assert wire.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, join).error_code == 0
    assert _acquired(_fetch(wire, group, "a", 0, tid)) == [(0, 3, 1)]
    accept = AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=(1,))
    assert (
        _fetch(wire, group, "a", 1, tid, (accept,), wait=0).responses[0].partitions[0].acknowledge_error_code
        == 0
    )
    req = DescribeShareGroupOffsetsRequest(
        groups=(
            DescribeShareGroupOffsetsRequestGroup(group_id=group),
            DescribeShareGroupOffsetsRequestGroup(
                group_id=group,
                topics=(DescribeShareGroupOffsetsRequestTopic(topic_name="sw4", partitions=(0, 7)),),
            ),
            DescribeShareGroupOffsetsRequestGroup(group_id="no-such-share-group"),
        )
    )
    every, named, unknown = wire.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, req).groups
    assert [
        (t.topic_name, t.topic_id, [(p.partition_index, p.start_offset) for p in t.partitions])
        for t in every.topics
    ] == [
        ("sw4", tid, [(0, 2), (1, -1)])  # partition 1: no state yet
    ]
    assert [(p.partition_index, p.start_offset, p.error_code) for p in named.topics[0].partitions] == [
        (0, 2, 0),
        (7, -1, E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert unknown.error_code == E.GROUP_ID_NOT_FOUND


def test_read_committed_share_group_skips_aborted_transactions(broker: BrokerProcess, wire: Wire) -> None:
    create_topic(broker.bootstrap, "sw5", 1)
    tid = _topic_id(wire, "sw5")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "sw5-tx", "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("sw5", value=b"aborted-%d" % i)
    assert p.flush(30) == 0  # in the log before the abort (an abort purges what is unsent)
    p.abort_transaction(30)  # offsets 0-2, then the ABORT marker at 3
    p.begin_transaction()
    for i in range(2):
        p.produce("sw5", value=b"committed-%d" % i)
    p.commit_transaction(30)  # offsets 4-5, then the COMMIT marker at 6
    for group, isolation in (("sw-g5rc", "read_committed"), ("sw-g5ru", "read_uncommitted")):
        assert (
            _set_configs(
                wire, group, share_auto_offset_reset="earliest", share_isolation_level=isolation
            ).error_code
            == 0
        )
    # The commit is answered before the marker is below the high watermark: wait for the
    # last stable offset to pass it, as a read_committed reader sees it (ListOffsets).
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "sw5-lso", "isolation.level": "read_committed"}
    )
    try:
        deadline = time.monotonic() + 30
        while c.get_watermark_offsets(TopicPartition("sw5", 0), timeout=10)[1] < 7:
            assert time.monotonic() < deadline, "the last stable offset never passed the commit"
            time.sleep(0.05)
    finally:
        c.close()
    # read_committed: the aborted records and the markers are never delivered
    assert _acquired(_fetch(wire, "sw-g5rc", "m", 0, tid, wait=0)) == [(4, 5, 1)]
    # read_uncommitted: the aborted records too (never the markers)
    assert _acquired(_fetch(wire, "sw-g5ru", "m", 0, tid, wait=0)) == [(0, 2, 1), (4, 5, 1)]


def _join(wire: Wire, group: str, member: str, topic: str) -> None:
    join = ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=(topic,)
    )
    assert wire.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, join).error_code == 0


def _leave(wire: Wire, group: str, member: str) -> None:
    leave = ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1)
    assert wire.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, leave).member_epoch == -1


def _start_offsets(wire: Wire, group: str, topic: str) -> Any:
    req = DescribeShareGroupOffsetsRequest(
        groups=(
            DescribeShareGroupOffsetsRequestGroup(
                group_id=group,
                topics=(DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(0,)),),
            ),
        )
    )
    g = wire.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, req).groups[0]
    return g.error_code or g.topics[0].partitions[0].start_offset


def test_alter_and_delete_share_group_offsets(broker: BrokerProcess, wire: Wire) -> None:
    create_topic(broker.bootstrap, "sw8", 1)
    tid = _topic_id(wire, "sw8")
    group = "sw-g8"
    assert _set_configs(wire, group, share_auto_offset_reset="earliest").error_code == 0
    _produce(broker.bootstrap, "sw8", 6)
    _join(wire, group, "a", "sw8")
    assert _acquired(_fetch(wire, group, "a", 0, tid)) == [(0, 5, 1)]
    accept = AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=(1,))
    assert (
        _fetch(wire, group, "a", 1, tid, (accept,), wait=0).responses[0].partitions[0].acknowledge_error_code
        == 0
    )

    def alter(*topics: tuple[str, tuple[tuple[int, int], ...]]) -> Any:
        req = AlterShareGroupOffsetsRequest(
            group_id=group,
            topics=tuple(
                AlterShareGroupOffsetsRequestTopic(
                    topic_name=t,
                    partitions=tuple(
                        AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                        for p, o in ps
                    ),
                )
                for t, ps in topics
            ),
        )
        return wire.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, req)

    # Not while the group has a member.
    busy = alter(("sw8", ((0, 4),)))
    assert busy.error_code == E.NON_EMPTY_GROUP
    assert busy.responses[0].partitions[0].error_code == E.NON_EMPTY_GROUP
    assert _start_offsets(wire, group, "sw8") == 2
    _leave(wire, group, "a")
    done = alter(("sw8", ((0, 4), (9, 0))), ("no-such-topic", ((0, 0),)))
    assert done.error_code == 0
    assert [
        (t.topic_name, t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in done.responses
    ] == [
        ("sw8", tid, [(0, 0), (9, E.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("no-such-topic", ZERO_UUID, [(0, E.UNKNOWN_TOPIC_OR_PARTITION)]),
    ]
    assert _start_offsets(wire, group, "sw8") == 4
    # The group starts at the new offset with nothing in flight: 4-5 delivered a first time.
    _join(wire, group, "b", "sw8")
    assert _acquired(_fetch(wire, group, "b", 0, tid)) == [(4, 5, 1)]
    _leave(wire, group, "b")

    def delete(g: str, *topics: str) -> Any:
        req = DeleteShareGroupOffsetsRequest(
            group_id=g, topics=tuple(DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics)
        )
        return wire.call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, req)

    assert delete("no-such-share-group", "sw8").error_code == E.GROUP_ID_NOT_FOUND
    deleted = delete(group, "sw8", "no-such-topic")
    assert deleted.error_code == 0
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        ("sw8", 0),
        ("no-such-topic", E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert _start_offsets(wire, group, "sw8") == -1  # no state: share.auto.offset.reset again
    _join(wire, group, "c", "sw8")
    assert _acquired(_fetch(wire, group, "c", 0, tid)) == [(0, 5, 1)]
    _leave(wire, group, "c")


def test_delete_groups_removes_the_share_groups_state(broker: BrokerProcess, wire: Wire) -> None:
    create_topic(broker.bootstrap, "sw6", 1)
    tid = _topic_id(wire, "sw6")
    group = "sw-g6"
    assert _set_configs(wire, group, share_auto_offset_reset="earliest").error_code == 0
    _produce(broker.bootstrap, "sw6", 3)
    _join(wire, group, "a", "sw6")
    assert _acquired(_fetch(wire, group, "a", 0, tid)) == [(0, 2, 1)]
    accept = AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=(1,))
    assert (
        _fetch(wire, group, "a", 1, tid, (accept,), wait=0).responses[0].partitions[0].acknowledge_error_code
        == 0
    )
    assert _start_offsets(wire, group, "sw6") == 3
    _leave(wire, group, "a")
    deleted = wire.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=(group,)))
    assert deleted.results[0].error_code == 0
    assert _start_offsets(wire, group, "sw6") == -1  # its state tombstoned
    # A group of the same name starts afresh (share.auto.offset.reset): everything again.
    _join(wire, group, "b", "sw6")
    assert _acquired(_fetch(wire, group, "b", 0, tid)) == [(0, 2, 1)]
    _leave(wire, group, "b")


def test_cli_resets_and_deletes_share_offsets(broker: BrokerProcess, wire: Wire) -> None:
    create_topic(broker.bootstrap, "sw7", 1)
    group = "sw-g7"
    _produce(broker.bootstrap, "sw7", 3)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = (sys.executable, "-m", "api.cli", "groups", *args, "-b", broker.bootstrap)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)

    dry = cli("reset-share-offsets", group, "-t", "sw7", "--to-offset", "2")
    assert dry.returncode == 0 and "dry run" in dry.stdout, dry
    assert _start_offsets(wire, group, "sw7") == -1
    done = cli("reset-share-offsets", group, "-t", "sw7", "--to-offset", "2", "--execute")
    assert done.returncode == 0 and "Successful" in done.stdout, done
    assert _start_offsets(wire, group, "sw7") == 2
    _join(wire, group, "a", "sw7")
    described = cli("describe-share", group, "-o", "json")
    assert described.returncode == 0, described
    info = json.loads(described.stdout)
    assert (info["type"], info["state"]) == ("share", "Stable")
    assert info["partitions"] == [
        {"topic": "sw7", "partition": 0, "start_offset": 2, "log_end_offset": 3, "lag": 1}
    ]
    assert [(m["member_id"], m["partitions"]) for m in info["members"]] == [("a", [["sw7", 0]])]
    listed = cli("list", "-o", "json")
    assert listed.returncode == 0, listed
    assert [(g["type"], g["state"]) for g in json.loads(listed.stdout) if g["group_id"] == group] == [
        ("share", "Stable")
    ]
    busy = cli("delete-share-offsets", group, "-t", "sw7")
    assert busy.returncode == 1 and "NON_EMPTY_GROUP" in busy.stderr, busy
    _leave(wire, group, "a")
    gone = cli("delete-share-offsets", group, "-t", "sw7")
    assert gone.returncode == 0 and "Successful" in gone.stdout, gone
    assert _start_offsets(wire, group, "sw7") == -1


def test_renew_acknowledgements(broker: BrokerProcess, wire: Wire) -> None:
    """RENEW (KIP-1222) keeps records acquired: in ShareAcknowledge v2 only."""
    create_topic(broker.bootstrap, "sw9", 1)
    tid = _topic_id(wire, "sw9")
    group = "sw-g9"
    assert _set_configs(wire, group, share_auto_offset_reset="earliest").error_code == 0
    _produce(broker.bootstrap, "sw9", 2)
    _join(wire, group, "a", "sw9")
    assert _acquired(_fetch(wire, group, "a", 0, tid)) == [(0, 1, 1)]
    renew = AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=(4,))
    in_fetch = _fetch(wire, group, "a", 1, tid, (renew,), wait=0)
    assert in_fetch.responses[0].partitions[0].acknowledge_error_code == E.INVALID_REQUEST

    def acknowledge(version: int, epoch: int, batch: AcknowledgementBatch) -> int:
        req = ShareAcknowledgeRequest(
            group_id=group,
            member_id="a",
            share_session_epoch=epoch,
            is_renew_ack=version >= 2 and 4 in batch.acknowledge_types,
            topics=(
                AcknowledgeTopic(
                    topic_id=tid,
                    partitions=(AcknowledgePartition(partition_index=0, acknowledgement_batches=(batch,)),),
                ),
            ),
        )
        resp = wire.call(ApiKey.SHARE_ACKNOWLEDGE, version, req)
        assert resp.error_code == 0, resp
        code: int = resp.responses[0].partitions[0].error_code
        return code

    assert acknowledge(1, 2, renew) == E.INVALID_REQUEST
    assert acknowledge(2, 3, renew) == 0
    accept = AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=(1,))
    assert acknowledge(2, 4, accept) == 0  # still acquired by "a" after the renewal
    _leave(wire, group, "a")
