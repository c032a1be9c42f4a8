"""Share-partition state survives a broker kill: it is on ``__share_group_state``
(broker.share.state_store), so after a SIGKILL and a restart accepted records are never
delivered again and the records that were acquired come back with the delivery count they
had before that acquisition (KIP-932: the in-flight delivery dies with the leader)."""

from __future__ import annotations

from pathlib import Path

from kwire import ApiKey
from kwire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from kwire.messages.share_fetch import AcknowledgementBatch
from kwire.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.api.test_share_wire import (
    GROUP_RESOURCE,
    Wire,
    _acquired,
    _fetch,
    _produce,
    _set_configs,
    _topic_id,
)
from tests.brokers import BrokerProcess, create_topic


def _join(wire: Wire, group: str, member: str, topic: str) -> None:
    hb = wire.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=(topic,)
        ),
    )
    assert hb.error_code == 0, hb


def test_state_recovered_after_broker_kill(tmp_path: Path) -> None:
    env = {"STRATA_GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS": "1000"}
    b = BrokerProcess(tmp_path / "data", env=env).start()
    try:
        create_topic(b.bootstrap, "sd", 1)
        _produce(b.bootstrap, "sd", 8)
        wire = Wire(b.bootstrap)
        try:
            tid = _topic_id(wire, "sd")
            assert _set_configs(wire, "sd-g", share_auto_offset_reset="earliest").error_code == 0
            _join(wire, "sd-g", "m1", "sd")
            assert _acquired(_fetch(wire, "sd-g", "m1", 0, tid)) == [(0, 7, 1)]
            acks = (
                AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=(1,)),
                AcknowledgementBatch(first_offset=3, last_offset=3, acknowledge_types=(3,)),
                AcknowledgementBatch(first_offset=5, last_offset=5, acknowledge_types=(1,)),
            )
            r = _fetch(wire, "sd-g", "m1", 1, tid, acks, wait=0)
            assert r.responses[0].partitions[0].acknowledge_error_code == 0
        finally:
            wire.close()
        b.kill()  # SIGKILL: no clean shutdown
        b.start()
        wire = Wire(b.bootstrap)
        try:
            # the group's settings are in the metadata store, so they survived too
            described = wire.call(
                ApiKey.DESCRIBE_CONFIGS,
                4,
                DescribeConfigsRequest(
                    resources=(DescribeConfigsResource(resource_type=GROUP_RESOURCE, resource_name="sd-g"),)
                ),
            )
            values = {c.name: c.value for c in described.results[0].configs}
            assert values["share.auto.offset.reset"] == "earliest"
            _join(wire, "sd-g", "m2", "sd")
            # 0-2 and 5 accepted, 3 rejected: never again; 4, 6, 7 again, with the delivery
            # count they had before the acquisition the crash lost (KIP-932: an acquisition
            # is not persisted, the in-flight delivery is forgotten with the leader)
            got = _acquired(_fetch(wire, "sd-g", "m2", 0, tid, wait=500))
            assert got == [(4, 4, 1), (6, 7, 1)]
        finally:
            wire.close()
    finally:
        b.kill()
