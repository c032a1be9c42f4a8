"""A partition this broker leads with no follower, in interval mode, has its high
watermark moved to the log end by the append itself, in the append's own lock section
(hot.log_write.follow_log_end, broker.replica_manager ``_follow_end``; issue 34 round 5).

One broker in process: right after ``Log.append`` (before ``ReplicaManager.appended``) the
HW is the log end and a listener heard of it (a gated one only while its gate holds the
log: a parked fetch); acks=all waiters still complete; in fsync
mode the HW still waits for the flush; once the partition has a follower (its replica set
grows) the append no longer moves the HW, and the leader's own HW state never lags it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.partition_replica import PartitionReplica
from hot.log import Log
from hot.records import RecordInput, build_batch
from tests.inprocess import broker_of_one, create_topic


def _append(rep: PartitionReplica) -> int:
    """One leader append of one record; the log end after it."""
    info = rep.log.append(build_batch([RecordInput(None, b"v")]), leader_epoch=rep.leader_epoch)
    return info.last_offset + 1


async def _check(broker: Broker) -> None:
    await create_topic(broker, "alone", 1, {"strata.flush.mode": "interval"})
    await create_topic(broker, "flushed", 1, {"strata.flush.mode": "fsync"})
    replicas = broker.replicas
    rep = replicas.leader_replica("alone", 0)
    lg = rep.log
    assert lg.hw_follows_end and lg.hw_managed_externally
    heard: list[int] = []

    def listener(log: Log) -> None:
        heard.append(log.high_watermark)

    lg.add_hw_listener(listener)
    end = _append(rep)
    assert lg.high_watermark == end == lg.log_end_offset  # before ReplicaManager.appended
    assert heard == [end]
    # a listener with a gate (the read path's: its parked fetches) is told of such an
    # append only while its gate holds the log (hot.log_write after_append)
    lg.remove_hw_listener(listener)
    gate: set[int] = set()
    lg.add_hw_listener(listener, gate=gate)
    end = _append(rep)
    assert heard == [end - 1] and lg.high_watermark == end
    gate.add(id(lg))
    end = _append(rep)
    assert heard == [end - 2, end]
    lg.remove_hw_listener(listener)
    assert not lg._hw_waiters.listening or not lg._hw_waiters.wanted()  # the read path's, if any
    lg.add_hw_listener(listener)
    replicas.appended(rep)
    assert rep.leader is not None and rep.leader.high_watermark == end
    # acks=all: acknowledged at once (the HW is past it), as before
    await asyncio.wait_for(replicas.wait_for_acks(rep, rep.leader_epoch, end, -1, 5.0), 5)
    assert replicas.ack_round(rep, rep.leader_epoch, end, -1, 5.0) is None

    # fsync mode: the flag changes nothing, the flush moves the HW
    frep = replicas.leader_replica("flushed", 0)
    before = frep.log.high_watermark
    fend = _append(frep)
    assert frep.log.high_watermark == before < fend
    replicas.appended(frep)
    await asyncio.wait_for(replicas.wait_for_acks(frep, frep.leader_epoch, fend, 1, 10.0), 15)
    await asyncio.wait_for(replicas.wait_for_acks(frep, frep.leader_epoch, fend, -1, 10.0), 15)
    assert frep.log.high_watermark >= fend

    # a follower joins the replica set: the append no longer moves the HW itself
    leader = rep.leader
    leader.update_replicas((broker.config.broker_id, 99))
    replicas._follow_end(rep)
    assert not lg.hw_follows_end
    hw = lg.high_watermark
    end2 = _append(rep)
    assert lg.high_watermark == hw < end2
    leader.update_replicas((broker.config.broker_id,))
    replicas._follow_end(rep)  # alone again: the HW catches up with the log end at once
    assert lg.hw_follows_end and lg.high_watermark == end2 == leader.high_watermark
    lg.remove_hw_listener(listener)


def test_hw_follows_the_log_end_while_led_alone(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker_of_one(BrokerConfig(data_dir=tmp_path / "data")) as broker:
            await _check(broker)

    asyncio.run(main())
