"""Pure parts of cluster/: records and their JSON, the key layout, the in-memory view,
replica placement and leader election. No etcd here."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import pytest

from broker.controller import elect_leader, place_replicas, unclean_election_enabled, validate_topic_configs
from broker.keys import BrokerKey, ControllerKey, KeyLayout, PartitionStateKey, TopicKey
from broker.metadata import (
    NO_LEADER,
    BrokerRegistration,
    ClusterView,
    ControllerRecord,
    CorruptMetadataError,
    PartitionState,
    TopicAssignment,
)
from broker.metadata_store import KeyValue, WatchEvent, WatchEventType, WatchReset
from hot.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
)

# --- records --------------------------------------------------------------------------------


def test_records_round_trip_with_version_field() -> None:
    reg = BrokerRegistration(3, "10.0.0.1", 9092, 8080, "rack-a", 1_700_000_000_000)
    topic = TopicAssignment(str(uuid.uuid4()), 2, ((1, 2), (2, 1)), {"retention.ms": "1000"})
    state = PartitionState(leader=2, leader_epoch=4, isr=(2, 1), controller_epoch=3, partition_epoch=9)
    ctl = ControllerRecord(3, 7)
    for rec in (reg, topic, state, ctl):
        data = rec.to_json()
        assert json.loads(data)["version"] == 1
        assert type(rec).from_json(data) == rec
    assert BrokerRegistration.from_json(BrokerRegistration(1, "h", 1, 2).to_json()).rack is None


@pytest.mark.parametrize(
    ("cls", "data", "match"),
    [
        (PartitionState, b"not json", "not JSON"),
        (PartitionState, b"[1]", "JSON object"),
        (PartitionState, b'{"version":2,"leader":1}', "unsupported record version 2"),
        (PartitionState, b'{"leader":1}', "unsupported record version None"),
        (
            PartitionState,
            b'{"version":1,"leader":1,"leader_epoch":0,"isr":[2],"controller_epoch":0,"partition_epoch":0}',
            "not in the ISR",
        ),
        (
            PartitionState,
            b'{"version":1,"leader":1,"leader_epoch":-1,"isr":[1],"controller_epoch":0,"partition_epoch":0}',
            "leader_epoch",
        ),
        (
            PartitionState,
            b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1,1],"controller_epoch":0,"partition_epoch":0}',
            "repeats",
        ),
        (
            PartitionState,
            b'{"version":1,"leader":true,"leader_epoch":0,"isr":[1],"controller_epoch":0,"partition_epoch":0}',
            "leader",
        ),
        (
            TopicAssignment,
            b'{"version":1,"topic_id":"x","replication_factor":1,"partitions":[[1]],"configs":{}}',
            "topic assignment",
        ),
        (
            TopicAssignment,
            # fixed ids: a test's parameters must be the same in every pytest-xdist worker
            b'{"version":1,"topic_id":"%s","replication_factor":2,"partitions":[[1]],"configs":{}}'
            % b"0b4d1c62-3f1e-4b1a-9a37-2f1f0f8c1d01",
            "replication factor is 2",
        ),
        (
            TopicAssignment,
            b'{"version":1,"topic_id":"%s","replication_factor":1,"partitions":[[1]],"configs":{"a":1}}'
            % b"6a0e4f4c-8d2b-4f55-b1c3-9e6d7a2b5c02",
            "configs",
        ),
        (BrokerRegistration, b'{"version":1,"broker_id":1,"host":"h","kafka_port":70000}', "kafka_port"),
        (ControllerRecord, b'{"version":1,"broker_id":1,"epoch":0}', "epoch"),
    ],
)
def test_corrupt_records_are_refused_precisely(cls: Any, data: bytes, match: str) -> None:
    with pytest.raises(CorruptMetadataError, match=match):
        cls.from_json(data)


# --- keys -----------------------------------------------------------------------------------


def test_key_layout() -> None:
    k = KeyLayout("prod")
    assert k.prefix == b"/strata/prod/"
    assert k.broker(7) == b"/strata/prod/brokers/7"
    assert k.broker_id_counter == b"/strata/prod/broker-ids"
    assert k.controller == b"/strata/prod/controller"
    assert k.controller_epoch == b"/strata/prod/controller-epoch"
    assert k.topic("orders") == b"/strata/prod/topics/orders"
    assert k.partition_state("orders", 12) == b"/strata/prod/partitions/orders/12/state"
    assert k.parse(k.broker(7)) == BrokerKey(7)
    assert k.parse(k.topic("a.b")) == TopicKey("a.b")
    assert k.parse(k.partition_state("a.b", 0)) == PartitionStateKey("a.b", 0)
    assert k.parse(k.controller) == ControllerKey()
    for other in (
        k.controller_epoch,
        k.broker_id_counter,
        b"/strata/prodx/brokers/1",
        b"/strata/prod/brokers/01",
    ):
        assert k.parse(other) is None
    # One topic's partition prefix never covers another topic's partitions.
    assert not k.partition_state("ab", 0).startswith(k.topic_partitions("a"))
    assert KeyLayout("c", root="/").prefix == b"/c/"
    with pytest.raises(InvalidTopicError):
        k.topic("a/b")
    for bad in ("", "a/b", ".."):
        with pytest.raises(InvalidConfigError):
            KeyLayout(bad)
    with pytest.raises(InvalidConfigError):
        KeyLayout("c", root="strata")


# --- placement ------------------------------------------------------------------------------


def test_place_replicas_round_robin() -> None:
    a = place_replicas(6, 3, [3, 1, 2])
    assert a == ((1, 2, 3), (2, 3, 1), (3, 1, 2), (1, 3, 2), (2, 1, 3), (3, 2, 1))
    for replicas in place_replicas(50, 3, range(5), start_index=7):
        assert len(set(replicas)) == 3
    leaders = Counter(r[0] for r in place_replicas(100, 2, range(4), start_index=3))
    assert set(leaders.values()) == {25}  # leaders spread evenly
    assert place_replicas(2, 1, [9]) == ((9,), (9,))


def test_place_replicas_errors() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 2 live"):
        place_replicas(1, 3, [1, 2])
    with pytest.raises(InvalidReplicationFactorError):
        place_replicas(1, 0, [1, 2])
    with pytest.raises(InvalidReplicationFactorError):
        place_replicas(1, 1, [])
    with pytest.raises(InvalidPartitionsError):
        place_replicas(0, 1, [1])


# --- leader election ---------------------------------------------------------------------------


def _st(leader: int, epoch: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(leader, epoch, isr, controller_epoch=1, partition_epoch=5)


def test_leader_alive_no_change_or_isr_shrink() -> None:
    s = _st(1, 3, (1, 2, 3))
    assert elect_leader(s, (1, 2, 3), {1, 2, 3}, unclean=False, controller_epoch=2) is None
    n = elect_leader(s, (1, 2, 3), {1, 3}, unclean=False, controller_epoch=2)
    assert n == PartitionState(1, 3, (1, 3), 2, 5)  # follower dropped, leader epoch kept


def test_clean_election_from_isr_in_replica_order() -> None:
    s = _st(1, 3, (3, 1, 2))
    n = elect_leader(s, (1, 2, 3), {2, 3}, unclean=False, controller_epoch=2)
    assert n is not None and n.leader == 2 and n.leader_epoch == 4 and n.isr == (3, 2)


def test_no_election_of_out_of_sync_replica_when_unclean_off() -> None:
    s = _st(1, 3, (1,))
    n = elect_leader(s, (1, 2, 3), {2, 3}, unclean=False, controller_epoch=2)
    assert n == PartitionState(NO_LEADER, 4, (1,), 2, 5)  # offline, ISR kept, old leader fenced
    assert elect_leader(n, (1, 2, 3), {2, 3}, unclean=False, controller_epoch=2) is None
    # The last ISR member returns: it leads again (clean).
    back = elect_leader(n, (1, 2, 3), {1, 2, 3}, unclean=False, controller_epoch=2)
    assert back is not None and back.leader == 1 and back.leader_epoch == 5 and back.isr == (1,)


def test_unclean_election_when_enabled() -> None:
    s = _st(1, 3, (1,))
    n = elect_leader(s, (1, 2, 3), {3}, unclean=True, controller_epoch=2)
    assert n is not None and n.leader == 3 and n.isr == (3,) and n.leader_epoch == 4
    # Nobody alive at all: offline even with unclean election.
    off = elect_leader(s, (1, 2, 3), set(), unclean=True, controller_epoch=2)
    assert off is not None and off.leader == NO_LEADER


def test_unclean_config_parsing() -> None:
    assert unclean_election_enabled({}) is False
    assert unclean_election_enabled({"unclean.leader.election.enable": "TRUE"}) is True
    with pytest.raises(InvalidConfigError):
        unclean_election_enabled({"unclean.leader.election.enable": "yes"})
    validate_topic_configs({"unclean.leader.election.enable": "false", "retention.ms": "5"})
    with pytest.raises(InvalidConfigError):
        validate_topic_configs({"no.such.config": "1"})


# --- the view ---------------------------------------------------------------------------------


def _kv(key: bytes, value: bytes, rev: int, create: int | None = None, lease: int = 0) -> KeyValue:
    return KeyValue(key, value, create or rev, rev, 1, lease)


def test_view_applies_reset_and_events_and_skips_corrupt_values() -> None:
    k = KeyLayout("v")
    view = ClusterView(k)
    reg = BrokerRegistration(1, "h", 1, 2)
    topic = TopicAssignment(str(uuid.uuid4()), 1, ((1,),))
    state = PartitionState(1, 0, (1,))
    view.apply(
        WatchReset(
            (
                _kv(k.broker(1), reg.to_json(), 5, lease=77),
                _kv(k.topic("t"), topic.to_json(), 6),
                _kv(k.partition_state("t", 0), state.to_json(), 6),
                _kv(k.broker(2), b"garbage", 4),
                _kv(k.broker(3), BrokerRegistration(4, "h", 1, 2).to_json(), 4),  # id mismatch
                _kv(k.controller, ControllerRecord(1, 1).to_json(), 3),
            ),
            10,
        )
    )
    assert view.ready and view.revision == 10
    assert set(view.brokers) == {1} and view.brokers[1].epoch == 5 and view.brokers[1].lease == 77
    assert view.topics["t"].value == topic
    assert view.partition_state("t", 0) == state
    assert view.leader_of("t", 0) == view.brokers[1]
    assert view.controller is not None and view.controller.value.epoch == 1
    # Topic ids both ways (Fetch v13+), the index following the view.
    tid = uuid.UUID(topic.topic_id)
    assert view.topic_name(tid) == "t" and view.topic_id("t") == tid
    assert view.topic_name(uuid.uuid4()) is None and view.topic_id("u") is None
    seq = view.seq
    view.apply(WatchEvent(WatchEventType.DELETE, KeyValue(k.broker(1), b"", 0, 11, 0, 0)))
    assert view.seq == seq + 1 and view.revision == 11 and view.leader_of("t", 0) is None
    view.apply(WatchEvent(WatchEventType.PUT, _kv(k.partition_state("t", 0), b"{}", 12)))
    assert view.partition_state("t", 0) is None  # corrupt update: dropped, not half-served
    view.apply(WatchEvent(WatchEventType.DELETE, KeyValue(k.controller, b"", 0, 13, 0, 0)))
    assert view.controller is None
    view.apply(WatchReset((), 20))
    assert not view.brokers and not view.topics and not view.partitions and view.revision == 20
    assert view.topic_name(tid) is None and view.topic_id("t") is None
