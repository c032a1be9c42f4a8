"""Transaction markers end to end (WriteTxnMarkers, broker.txn_markers, and the coordinator's
MarkerWriter, broker.transactions.markers) on real brokers: the one broker in process, where
the writer reaches its own partitions by a direct call, and a 3-broker cluster on etcd, where
it sends WriteTxnMarkers to the other leaders and the followers replicate the markers.

Transactional data is appended to the leader's log as the produce path does for a
transactional request (tests/broker/test_read_committed.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.groups.offsets import OFFSETS_TOPIC
from broker.groups.types import TopicPartition
from broker.read_path import FetchRequestPartition
from broker.status import read_view
from broker.transactions.markers import MarkerOutcome, MarkersDone, MarkerWriter
from broker.transactions.transitions import TransactionResult
from broker.txn_markers import MarkerChannels, marker_writer, write_txn_markers
from hot.records import ControlType, RecordInput, build_batch, decode_batches
from kwire import error_table as E
from kwire.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from tests.broker.clusterlib import CLUSTER_NAME, Cluster
from tests.broker.etcdlib import EtcdProcess
from tests.inprocess import broker_of_one, create_topic

TOPIC = "txn"


def _batch(pid: int, n: int, *, epoch: int = 0) -> bytes:
    recs = [RecordInput(b"k", b"%d:%d" % (pid, i), timestamp=1000) for i in range(n)]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)


def _append(broker: Broker, partition: int, data: bytes) -> None:
    rep = broker.replicas.writable_leader(TOPIC, partition, 1)
    rep.log.append(data, leader_epoch=rep.leader_epoch, transactional=True)
    rep.log.flush()
    broker.replicas.maybe_advance_hw(rep)


async def _fetch(broker: Broker, partition: int) -> tuple[list[bytes], list[tuple[int, int]], int, int]:
    """read_committed: the data records, the aborted list, the HW and the LSO."""
    (f,) = await broker.reads.fetch(
        [FetchRequestPartition(TOPIC, partition, 0, 1 << 20)],
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        read_committed=True,
    )
    assert f.error is None
    values = [r.value or b"" for b in decode_batches(f.read()) if not b.is_control for r in b.records]
    aborted = [(a.producer_id, a.first_offset) for a in f.aborted or ()]
    return values, aborted, f.high_watermark, f.last_stable_offset


def _markers(broker: Broker, partition: int) -> list[tuple[int, int, ControlType]]:
    """(offset, producer id, type) of every control batch in the partition's log."""
    lg = broker.replicas.leader_replica(TOPIC, partition).log
    data = lg.read(0, 1 << 20).read()
    out = []
    for b in decode_batches(data):
        if b.is_control:
            (rec,) = b.records
            assert rec.key is not None
            out.append((b.base_offset, b.producer_id, ControlType(int.from_bytes(rec.key[2:4], "big"))))
    return out


async def test_single_node_commit_and_abort_through_the_marker_writer(tmp_path: Path) -> None:
    async with broker_of_one(BrokerConfig(data_dir=tmp_path / "data")) as broker:
        await create_topic(broker, TOPIC, partitions=2)
        await broker.prepare_group("g")  # creates __consumer_offsets, led here
        completed: list[tuple[str, int, int, ControlType]] = []

        def on_txn_marker(topic: str, partition: int, producer_id: int, kind: ControlType) -> None:
            completed.append((topic, partition, producer_id, kind))

        broker.on_txn_marker = on_txn_marker  # type: ignore[method-assign]
        writer, channels = marker_writer(broker)
        try:
            # Producer 1 writes to both partitions, producer 2 to partition 0.
            _append(broker, 0, _batch(1, 2))  # p0: 0-1
            _append(broker, 1, _batch(1, 1))  # p1: 0
            _append(broker, 0, _batch(2, 1))  # p0: 2
            assert (await _fetch(broker, 0))[2:] == (3, 0)  # undecided: the LSO holds at 0

            offsets = TopicPartition(OFFSETS_TOPIC, 0)
            done = await writer.write(
                1,
                0,
                0,
                TransactionResult.ABORT,
                [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1), offsets, TopicPartition("gone", 0)],
            )
            assert done.outcome is MarkerOutcome.WRITTEN
            assert done.written == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1), offsets}
            assert done.dropped == {TopicPartition("gone", 0)}
            # The group coordinator's hook: once, for the offsets partition, after the ack.
            assert completed == [(OFFSETS_TOPIC, 0, 1, ControlType.ABORT)]

            values, aborted, hw, lso = await _fetch(broker, 0)
            assert (hw, lso) == (4, 2)  # producer 2's transaction still holds the LSO
            assert aborted == [(1, 0)] and values == [b"1:0", b"1:1"]
            assert await _fetch(broker, 1) == ([b"1:0"], [(1, 0)], 2, 2)

            done = await writer.write(2, 0, 0, TransactionResult.COMMIT, [TopicPartition(TOPIC, 0)])
            assert done.outcome is MarkerOutcome.WRITTEN
            values, aborted, hw, lso = await _fetch(broker, 0)
            assert (hw, lso) == (5, 5) and aborted == [(1, 0)]
            assert values == [b"1:0", b"1:1", b"2:0"]  # the client drops producer 1's (aborted)
            assert _markers(broker, 0) == [(3, 1, ControlType.ABORT), (4, 2, ControlType.COMMIT)]

            # A zombie coordinator (older coordinator epoch) and a stale producer epoch give up.
            _append(broker, 1, _batch(3, 1, epoch=2))
            await writer.write(3, 2, 5, TransactionResult.COMMIT, [TopicPartition(TOPIC, 1)])
            zombie = await writer.write(3, 2, 4, TransactionResult.ABORT, [TopicPartition(TOPIC, 1)])
            assert (zombie.outcome, zombie.error_code) == (
                MarkerOutcome.FENCED,
                E.TRANSACTION_COORDINATOR_FENCED,
            )
            stale = await writer.write(3, 1, 5, TransactionResult.ABORT, [TopicPartition(TOPIC, 1)])
            assert (stale.outcome, stale.error_code) == (MarkerOutcome.FENCED, E.INVALID_PRODUCER_EPOCH)
            assert await _fetch(broker, 1) == ([b"1:0", b"3:0"], [(1, 0)], 4, 4)

            # The leader's answer: one result per partition asked, in request order.
            resp = await write_txn_markers(
                broker,
                WriteTxnMarkersRequest(
                    markers=(
                        WritableTxnMarker(
                            producer_id=4,
                            producer_epoch=0,
                            transaction_result=True,
                            topics=(
                                WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(1, 9)),
                                WritableTxnMarkerTopic(name="nope", partition_indexes=(0,)),
                            ),
                            coordinator_epoch=0,
                        ),
                    )
                ),
            )
            (m,) = resp.markers
            assert m.producer_id == 4
            assert [(t.name, p.partition_index, p.error_code) for t in m.topics for p in t.partitions] == [
                (TOPIC, 1, E.NONE),
                (TOPIC, 9, E.UNKNOWN_TOPIC_OR_PARTITION),
                ("nope", 0, E.UNKNOWN_TOPIC_OR_PARTITION),
            ]
        finally:
            await writer.close()
            await channels.close()


# --- three brokers on etcd -------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    etcd = EtcdProcess(tmp_path / "etcd").start()
    c = Cluster(tmp_path, etcd, n=3)
    try:
        yield c.start()
    finally:
        c.close()
        etcd.kill()


def _control_batches(data: bytes) -> list[tuple[int, int, int, ControlType]]:
    """(offset, producer id, producer epoch, type) of the control batches in ``data``."""
    out = []
    for b in decode_batches(data):
        if b.is_control:
            (rec,) = b.records
            assert rec.key is not None
            kind = ControlType(int.from_bytes(rec.key[2:4], "big"))
            out.append((b.base_offset, b.producer_id, b.producer_epoch, kind))
    return out


@pytest.mark.timeout(240)
def test_markers_reach_every_leader_and_replicate(cluster: Cluster) -> None:
    """A coordinator outside the leaders (this test process, over the replica listeners as a
    broker's MarkerChannels does) writes one transaction's COMMIT to three partitions led
    by three brokers: it follows a stale leader's refusal to the real leader, every replica
    ends with the same marker, and a zombie coordinator epoch is fenced."""
    topic = "txm"
    cluster.create_topic(topic, 3, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    parts = [TopicPartition(topic, p) for p in range(3)]

    async def run() -> tuple[MarkersDone, MarkersDone, list[int]]:
        view = await read_view(cluster.etcd.endpoint, CLUSTER_NAME)
        channels = MarkerChannels(-1, view, None, None)
        asked: list[int] = []
        stale = {parts[0]}  # the first lookup of partition 0 names a follower

        def leader_of(t: str, p: int) -> int | None:
            leader = channels.leader_of(t, p)
            if TopicPartition(t, p) in stale and leader is not None:
                stale.clear()
                leader = leader % 3 + 1
            asked.append(-1 if leader is None else leader)
            return leader

        writer = MarkerWriter(leader_of, channels.send, attempt_timeout_s=30, backoff_s=0.05)
        try:
            done = await writer.write(7, 0, 3, TransactionResult.COMMIT, parts)
            zombie = await writer.write(7, 0, 2, TransactionResult.ABORT, parts)
        finally:
            await writer.close()
            await channels.close()
        return done, zombie, asked

    done, zombie, asked = asyncio.run(run())
    assert done.outcome is MarkerOutcome.WRITTEN and done.written == set(parts)
    assert asked[:4] == [2, 2, 3, 1]  # partition 0 tried at broker 2 first, then at its leader
    assert (zombie.outcome, zombie.error_code) == (MarkerOutcome.FENCED, E.TRANSACTION_COORDINATOR_FENCED)
    assert not zombie.written
    # Every replica of every partition holds the one COMMIT marker at offset 0.
    cluster.wait_replicas_identical(topic, 3, {0: 1, 1: 1, 2: 1})
    for p, replicas in enumerate([[1, 2, 3], [2, 3, 1], [3, 1, 2]]):
        for b in replicas:
            assert _control_batches(cluster.log_bytes(b, topic, p, 1)) == [(0, 7, 0, ControlType.COMMIT)]
