"""read_committed on the one broker (KIP-98): a Fetch with isolation level 1 stops at the
last stable offset and carries the aborted transactions of the batches it returns, and
ListOffsets LATEST answers the LSO; read_uncommitted is unchanged. The transactional data
and markers are appended to the leader's log as the produce handler and WriteTxnMarkers
do."""

from __future__ import annotations

from pathlib import Path

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.read_path import FetchRequestPartition
from hot.records import ControlType, RecordInput, build_batch, decode_batches
from tests.inprocess import broker_of_one, create_topic

TOPIC = "txn"


def _batch(pid: int, seq: int, n: int, *, transactional: bool = True) -> bytes:
    recs = [RecordInput(b"k", b"%d:%d" % (pid, seq + i), timestamp=1000) for i in range(n)]
    return build_batch(
        recs, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=transactional
    )


def _append(broker: Broker, data: bytes) -> None:
    rep = broker.replicas.writable_leader(TOPIC, 0, 1)
    rep.log.append(data, leader_epoch=rep.leader_epoch, transactional=True)
    _acknowledge(broker)


def _marker(broker: Broker, pid: int, kind: ControlType) -> None:
    rep = broker.replicas.writable_leader(TOPIC, 0, 1)
    rep.log.append_marker(pid, 0, kind, 0, leader_epoch=rep.leader_epoch)
    _acknowledge(broker)


def _acknowledge(broker: Broker) -> None:
    """What the flusher does after an append (fsync mode): flush, then move the HW."""
    rep = broker.replicas.writable_leader(TOPIC, 0, 1)
    rep.log.flush()
    broker.replicas.maybe_advance_hw(rep)


async def _fetch(broker: Broker, *, read_committed: bool) -> tuple[list[bytes], object, int, int]:
    (f,) = await broker.reads.fetch(
        [FetchRequestPartition(TOPIC, 0, 0, 1 << 20)],
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        read_committed=read_committed,
    )
    assert f.error is None
    values = [r.value or b"" for b in decode_batches(f.read()) if not b.is_control for r in b.records]
    return values, f.aborted, f.high_watermark, f.last_stable_offset


async def _latest(broker: Broker, *, read_committed: bool) -> int:
    offset, _, _ = await broker.list_offset_with_epoch(
        TOPIC, 0, -1, current_leader_epoch=-1, replica_id=-1, read_committed=read_committed
    )
    return offset


async def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path / "data")
    async with broker_of_one(config) as broker:
        await create_topic(broker, TOPIC)
        _append(broker, _batch(1, 0, 2))  # producer 1: offsets 0-1, later aborted
        _append(broker, _batch(2, 0, 1))  # producer 2: offset 2, later committed
        _marker(broker, 1, ControlType.ABORT)  # offset 3
        _append(broker, _batch(3, 0, 1))  # producer 3: offset 4, still open

        values, aborted, hw, lso = await _fetch(broker, read_committed=True)
        assert (hw, lso) == (5, 2)  # producer 2's transaction (from offset 2) is undecided
        assert values == [b"1:0", b"1:1"]  # below the LSO; the client drops them (aborted)
        assert aborted is not None and [(a.producer_id, a.first_offset) for a in aborted] == [(1, 0)]
        assert await _latest(broker, read_committed=True) == 2
        assert await _latest(broker, read_committed=False) == 5

        _marker(broker, 2, ControlType.COMMIT)  # offset 5
        _marker(broker, 3, ControlType.COMMIT)  # offset 6
        values, aborted, hw, lso = await _fetch(broker, read_committed=True)
        assert (hw, lso) == (7, 7)
        assert values == [b"1:0", b"1:1", b"2:0", b"3:0"]
        assert aborted is not None and [(a.producer_id, a.first_offset) for a in aborted] == [(1, 0)]
        assert await _latest(broker, read_committed=True) == 7

        # read_uncommitted: everything below the HW, and a null aborted list (as Kafka).
        values, aborted, hw, lso = await _fetch(broker, read_committed=False)
        assert values == [b"1:0", b"1:1", b"2:0", b"3:0"] and aborted is None and lso == 7
