"""The coordinator's marker writer (broker.transactions.markers) with a scripted cluster:
grouping by leader, one request per destination, retries with backoff until every partition
is written, dropping deleted topics, giving up when fenced or superseded, per-attempt bounds
and cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from broker.groups.types import TopicPartition
from broker.transactions.markers import (
    NO_LEADER,
    MarkerOutcome,
    MarkerSendError,
    MarkerWriter,
)
from broker.transactions.transitions import TransactionResult
from kwire import error_table as E
from kwire.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

TP = TopicPartition


class FakeCluster:
    """Leaders per partition and, per (broker, partition), the codes it answers next."""

    def __init__(self, leaders: dict[TopicPartition, int | None]) -> None:
        self.leaders = leaders
        self.script: dict[tuple[int, TopicPartition], list[int]] = {}
        self.down: set[int] = set()  # brokers that cannot be reached
        self.hang: set[int] = set()  # brokers that never answer
        self.sent: list[tuple[int, WriteTxnMarkersRequest]] = []
        self.written: dict[TopicPartition, int] = {}  # partition -> markers written

    def leader_of(self, topic: str, partition: int) -> int | None:
        return self.leaders.get(TP(topic, partition))

    async def send(self, dest: int, req: WriteTxnMarkersRequest, timeout: float) -> WriteTxnMarkersResponse:
        self.sent.append((dest, req))
        if dest in self.down:
            raise MarkerSendError(f"broker {dest} unreachable")
        if dest in self.hang:
            await asyncio.sleep(3600)
        results = []
        for m in req.markers:
            topics = []
            for t in m.topics:
                parts = []
                for p in t.partition_indexes:
                    tp = TP(t.name, p)
                    queued = self.script.get((dest, tp))
                    if queued:
                        code = queued.pop(0)
                    elif self.leaders.get(tp) == dest:
                        code = E.NONE
                    else:
                        code = E.NOT_LEADER_OR_FOLLOWER
                    if code == E.NONE:
                        self.written[tp] = self.written.get(tp, 0) + 1
                    parts.append(WritableTxnMarkerPartitionResult(partition_index=p, error_code=code))
                topics.append(WritableTxnMarkerTopicResult(name=t.name, partitions=tuple(parts)))
            results.append(WritableTxnMarkerResult(producer_id=m.producer_id, topics=tuple(topics)))
        return WriteTxnMarkersResponse(markers=tuple(results))


def _writer(cluster: FakeCluster, **kw: float) -> MarkerWriter:
    opts = {"attempt_timeout_s": 5.0, "backoff_s": 0.001, "max_backoff_s": 0.01, **kw}
    return MarkerWriter(cluster.leader_of, cluster.send, **opts)


def _partitions(req: WriteTxnMarkersRequest) -> set[TopicPartition]:
    return {TP(t.name, p) for m in req.markers for t in m.topics for p in t.partition_indexes}


async def test_one_request_per_leader_with_the_marker_fields() -> None:
    parts = [TP("a", 0), TP("a", 1), TP("b", 0), TP("__consumer_offsets", 3)]
    cluster = FakeCluster({parts[0]: 1, parts[1]: 2, parts[2]: 1, parts[3]: 3})
    writer = _writer(cluster)
    done = await writer.write(7, 3, 11, TransactionResult.COMMIT, parts, transaction_version=2)
    assert done.outcome is MarkerOutcome.WRITTEN and done.written == set(parts) and not done.dropped
    assert sorted(dest for dest, _ in cluster.sent) == [1, 2, 3]
    by_dest = {dest: req for dest, req in cluster.sent}
    assert _partitions(by_dest[1]) == {parts[0], parts[2]}
    (m,) = by_dest[1].markers
    assert (m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result) == (7, 3, 11, True)
    assert m.transaction_version == 2
    aborted = await writer.write(7, 3, 11, TransactionResult.ABORT, [parts[0]])
    assert aborted.outcome is MarkerOutcome.WRITTEN
    assert cluster.sent[-1][1].markers[0].transaction_result is False


async def test_retries_moved_leaders_unreachable_brokers_and_retriable_errors() -> None:
    a0, a1, a2 = TP("a", 0), TP("a", 1), TP("a", 2)
    cluster = FakeCluster({a0: 1, a1: NO_LEADER, a2: 2})
    cluster.script[(1, a0)] = [E.NOT_ENOUGH_REPLICAS, E.REQUEST_TIMED_OUT]
    cluster.down.add(2)
    writer = _writer(cluster)
    task = writer.write(1, 0, 0, TransactionResult.COMMIT, [a0, a1, a2])
    # a1 has no leader and broker 2 is down: nothing is sent for a1, a2 is retried.
    while len(cluster.sent) < 4:
        await asyncio.sleep(0.001)
    assert not task.done() and all(a1 not in _partitions(r) for _, r in cluster.sent)
    cluster.leaders[a1] = 3  # a leader is elected
    cluster.leaders[a2] = 3  # a2's leadership moves off the dead broker
    done = await asyncio.wait_for(task, 5)
    assert done.outcome is MarkerOutcome.WRITTEN and done.written == {a0, a1, a2}
    assert cluster.written == {a0: 1, a1: 1, a2: 1}  # each written once, where it is led


async def test_a_stale_leader_answer_is_retried_at_the_new_leader() -> None:
    a0 = TP("a", 0)
    cluster = FakeCluster({a0: 1})
    cluster.script[(1, a0)] = [E.NOT_LEADER_OR_FOLLOWER]

    async def send(dest: int, req: WriteTxnMarkersRequest, timeout: float) -> WriteTxnMarkersResponse:
        resp = await cluster.send(dest, req, timeout)
        cluster.leaders[a0] = 2  # the metadata catches up after the refusal
        return resp

    writer = MarkerWriter(cluster.leader_of, send, backoff_s=0.001)
    done = await writer.write(1, 0, 0, TransactionResult.ABORT, [a0])
    assert done.outcome is MarkerOutcome.WRITTEN
    assert [dest for dest, _ in cluster.sent] == [1, 2]


async def test_deleted_topics_are_dropped() -> None:
    a0, gone = TP("a", 0), TP("gone", 0)
    cluster = FakeCluster({a0: 1, gone: 2})
    cluster.script[(2, gone)] = [E.UNKNOWN_TOPIC_OR_PARTITION]

    async def send(dest: int, req: WriteTxnMarkersRequest, timeout: float) -> WriteTxnMarkersResponse:
        resp = await cluster.send(dest, req, timeout)
        cluster.leaders.pop(gone, None)  # the deletion reaches the metadata view
        return resp

    writer = MarkerWriter(cluster.leader_of, send, backoff_s=0.001)
    done = await writer.write(1, 0, 0, TransactionResult.COMMIT, [a0, gone])
    assert done.outcome is MarkerOutcome.WRITTEN
    assert done.written == {a0} and done.dropped == {gone}


@pytest.mark.parametrize("code", [E.TRANSACTION_COORDINATOR_FENCED, E.INVALID_PRODUCER_EPOCH])
async def test_fenced_gives_up(code: int) -> None:
    a0, a1 = TP("a", 0), TP("a", 1)
    cluster = FakeCluster({a0: 1, a1: 2})
    cluster.script[(2, a1)] = [code]
    done = await _writer(cluster).write(1, 0, 0, TransactionResult.COMMIT, [a0, a1])
    assert done.outcome is MarkerOutcome.FENCED and done.error_code == code
    assert done.written == {a0}
    assert len(cluster.sent) == 2  # no retry


async def test_superseded_coordinator_epoch_stops_the_retries() -> None:
    a0 = TP("a", 0)
    cluster = FakeCluster({a0: NO_LEADER})
    epoch = {"current": 5}
    superseded: Callable[[], bool] = lambda: epoch["current"] != 5  # noqa: E731
    task = _writer(cluster).write(1, 0, 5, TransactionResult.COMMIT, [a0], superseded=superseded)
    await asyncio.sleep(0.05)
    assert not task.done()
    epoch["current"] = 6  # the __transaction_state partition moved to a new coordinator
    done = await asyncio.wait_for(task, 5)
    assert done.outcome is MarkerOutcome.SUPERSEDED and not done.written and not cluster.sent


async def test_each_attempt_is_bounded_and_close_cancels() -> None:
    a0, b0 = TP("a", 0), TP("b", 0)
    cluster = FakeCluster({a0: 1, b0: 2})
    cluster.hang.add(2)
    writer = _writer(cluster, attempt_timeout_s=0.05)
    task = writer.write(1, 0, 0, TransactionResult.COMMIT, [a0, b0])
    while sum(1 for dest, _ in cluster.sent if dest == 2) < 3:  # timed out and retried
        await asyncio.sleep(0.01)
    assert not task.done() and cluster.written == {a0: 1}
    cluster.hang.discard(2)
    assert (await asyncio.wait_for(task, 5)).written == {a0, b0}

    cluster.hang.add(1)
    hung = writer.write(1, 0, 0, TransactionResult.ABORT, [a0])
    await asyncio.sleep(0.01)
    assert writer.in_flight == 1
    await writer.close()
    assert hung.cancelled() and writer.in_flight == 0
    with pytest.raises(MarkerSendError):
        writer.write(1, 0, 0, TransactionResult.ABORT, [a0])
