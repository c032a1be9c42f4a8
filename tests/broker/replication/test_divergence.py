"""The divergence scenarios of KIP-101 and KIP-279, replayed on real partition logs.

Each replica is a ``hot.log.Log`` in replicated mode; a "fetch" copies the leader's bytes
(``Log.read`` up to its log end) into the follower (``Log.append_as_follower``), exactly as
replication moves them. The follower rule of ``broker.replication.follower`` must leave
the follower with a byte-identical prefix of the leader's log, and after the fetch with
the same log. Where the old rule (truncate to the high watermark, or a pre-KIP-279 answer
without an epoch) loses an acknowledged record or diverges, the test shows that too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from broker.replication.follower import (
    Truncate,
    epoch_to_request,
    truncation_for,
    truncation_without_epochs,
)
from hot.config import LogConfig
from hot.leader_epoch import EpochEntry
from hot.log import Log
from hot.records import RecordInput, build_batch, decode_batches

E = EpochEntry


def replica(path: Path, *, high_watermark: int | None = None) -> Log:
    return Log.open(
        path,
        LogConfig(flush_mode="interval"),
        topic="t",
        partition=0,
        hw_managed_externally=True,
        high_watermark=high_watermark,
    )


def produce(leader: Log, epoch: int, *values: str) -> None:
    """One batch per value, appended by the leader of ``epoch``."""
    for v in values:
        leader.append(build_batch([RecordInput(None, v.encode())]), leader_epoch=epoch)


def fetch(follower: Log, leader: Log, *, upto: int | None = None) -> None:
    end = leader.log_end_offset if upto is None else upto
    if follower.log_end_offset < end:
        follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 30, max_offset=end).read())


def raw(log: Log) -> bytes:
    if log.log_end_offset == log.log_start_offset:
        return b""
    return log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset).read()


def values(log: Log) -> list[str]:
    return [r.value.decode() for b in decode_batches(raw(log)) for r in b if r.value is not None]


def reconcile(follower: Log, leader: Log) -> list[Truncate]:
    """The follower's truncation rule against ``leader``; returns the steps taken."""
    steps: list[Truncate] = []
    while True:
        asked = epoch_to_request(follower.latest_epoch)
        if asked is None:
            step = truncation_without_epochs(follower.high_watermark, follower.log_end_offset)
        else:
            epoch, end = leader.end_offset_for_epoch(asked)
            step = truncation_for(
                epoch, end, follower.leader_epochs(), follower.log_end_offset, follower.high_watermark
            )
        follower.truncate_to(step.offset)
        steps.append(step)
        if step.complete:
            return steps
        assert len(steps) < 20


def assert_prefix(follower: Log, leader: Log) -> None:
    assert raw(leader).startswith(raw(follower))


def assert_identical(a: Log, b: Log) -> None:
    assert raw(a) == raw(b)
    assert a.log_end_offset == b.log_end_offset

    def data_epochs(log: Log) -> list[EpochEntry]:
        return [e for e in log.leader_epochs() if e.start_offset < log.log_end_offset]

    assert data_epochs(a) == data_epochs(b)


def clone(log: Log, path: Path) -> Log:
    log.flush()
    shutil.copytree(log.dir, path)
    return replica(path, high_watermark=log.high_watermark)


def test_kip101_scenario1_hw_truncation_then_immediate_election(tmp_path: Path) -> None:
    """B has m1 and m2 but its high watermark still says 1 when it restarts. Truncating
    to it, then being elected, loses m2, which the leader had acknowledged."""
    a, b = replica(tmp_path / "a"), replica(tmp_path / "b")
    a.assign_leader_epoch(0)
    produce(a, 0, "m1", "m2")
    fetch(b, a)
    b.set_high_watermark(1)  # from A's answer to B's previous fetch
    a.set_high_watermark(2)  # both have m2: acknowledged (acks=all)
    b.close()
    b = replica(tmp_path / "b", high_watermark=1)  # B restarts

    old = truncation_without_epochs(b.high_watermark, b.log_end_offset)
    assert old == Truncate(1)  # the pre-KIP-101 rule would drop m2

    assert reconcile(b, a) == [Truncate(2)]
    assert values(b) == ["m1", "m2"]
    a.close(clean=False)  # A dies; B is elected
    b.assign_leader_epoch(1)
    produce(b, 1, "m3")
    a = replica(tmp_path / "a")  # A returns as a follower
    assert reconcile(a, b) == [Truncate(2)]
    fetch(a, b)
    assert values(a) == values(b) == ["m1", "m2", "m3"]
    assert_identical(a, b)
    a.close()
    b.close()


def test_kip101_scenario2_divergence_after_multiple_hard_failures(tmp_path: Path) -> None:
    """A has m1 m2, B only m1; both crash, B returns first and leads, writing m3 at
    offset 1. With the high-watermark rule A keeps m2 at offset 1: the logs diverge."""
    a, b = replica(tmp_path / "a"), replica(tmp_path / "b")
    a.assign_leader_epoch(0)
    produce(a, 0, "m1", "m2")
    fetch(b, a, upto=1)
    a.set_high_watermark(2)
    b.set_high_watermark(1)
    a.close(clean=False)
    b.close(clean=False)
    b = replica(tmp_path / "b", high_watermark=1)
    b.assign_leader_epoch(1)
    produce(b, 1, "m3")
    a = replica(tmp_path / "a", high_watermark=2)

    old = clone(a, tmp_path / "a-old")
    old.truncate_to(truncation_without_epochs(old.high_watermark, old.log_end_offset).offset)
    fetch(old, b)
    assert values(old) == ["m1", "m2"] and values(b) == ["m1", "m3"]  # diverged at offset 1
    assert raw(old) != raw(b)
    old.close()

    assert reconcile(a, b) == [Truncate(1)]  # B: epoch 0 ended at 1
    assert_prefix(a, b)
    fetch(a, b)
    assert values(a) == ["m1", "m3"]
    assert_identical(a, b)
    a.close()
    b.close()


def test_kip279_fast_back_to_back_failovers(tmp_path: Path) -> None:
    """A (epoch 1) has m1 m2, B only m1. B leads epoch 2 and writes m3 at offset 1 that
    nobody fetches; A leads epoch 3 and writes m4. B returns asking for epoch 2, which A
    never saw: A must answer (1, 2), the largest epoch it knows below 2 and its end."""
    a, b = replica(tmp_path / "a"), replica(tmp_path / "b")
    a.assign_leader_epoch(1)
    produce(a, 1, "m1", "m2")
    fetch(b, a, upto=1)
    b.assign_leader_epoch(2)
    produce(b, 2, "m3")
    b.close(clean=False)
    a.assign_leader_epoch(3)
    produce(a, 3, "m4")
    b = replica(tmp_path / "b")
    assert b.leader_epochs() == (E(1, 0), E(2, 1))
    assert a.end_offset_for_epoch(2) == (1, 2)

    # Before KIP-279 the answer had no epoch: just the start of the next epoch, 2.
    old = clone(b, tmp_path / "b-old")
    old.truncate_to(truncation_for(-1, 2, old.leader_epochs(), old.log_end_offset, 0).offset)
    fetch(old, a)
    assert values(old) == ["m1", "m3", "m4"] and values(a) == ["m1", "m2", "m4"]  # diverged
    old.close()

    assert reconcile(b, a) == [Truncate(1)]  # B's epoch 1 ended at 1: that is where they part
    assert_prefix(b, a)
    fetch(b, a)
    assert values(b) == ["m1", "m2", "m4"]
    assert_identical(a, b)
    a.close()
    b.close()


def test_follower_with_epochs_the_leader_never_saw_truncates_in_rounds(tmp_path: Path) -> None:
    """Five leader changes among three replicas leave C with epochs 2 and 4 that A never
    had: C first cuts its epoch-4 data, asks again for epoch 2, then cuts that too."""
    a, b, c = replica(tmp_path / "a"), replica(tmp_path / "b"), replica(tmp_path / "c")
    a.assign_leader_epoch(1)
    produce(a, 1, "a0", "a1", "a2", "a3", "a4")
    fetch(b, a, upto=3)
    fetch(c, a, upto=3)
    b.assign_leader_epoch(2)
    produce(b, 2, "b3", "b4")
    fetch(c, b)
    a.assign_leader_epoch(3)
    produce(a, 3, "a5", "a6")
    c.assign_leader_epoch(4)
    produce(c, 4, "c5", "c6")
    a.assign_leader_epoch(5)
    produce(a, 5, "a7")
    assert c.leader_epochs() == (E(1, 0), E(2, 3), E(4, 5))
    assert a.leader_epochs() == (E(1, 0), E(3, 5), E(5, 7))

    assert reconcile(c, a) == [Truncate(5, complete=False), Truncate(3)]
    assert_prefix(c, a)
    fetch(c, a)
    assert values(c) == ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"]
    assert_identical(a, c)
    # B (epochs 1 and 2) follows A too.
    assert reconcile(b, a) == [Truncate(3)]
    fetch(b, a)
    assert_identical(a, b)
    for log in (a, b, c):
        log.close()


def test_restarted_follower_that_is_ahead_of_nothing_keeps_everything(tmp_path: Path) -> None:
    """The common case: a follower that merely lagged (same history) truncates nothing."""
    a, b = replica(tmp_path / "a"), replica(tmp_path / "b")
    a.assign_leader_epoch(4)
    produce(a, 4, *(f"v{i}" for i in range(30)))
    fetch(b, a, upto=17)
    b.close(clean=False)
    b = replica(tmp_path / "b")
    assert reconcile(b, a) == [Truncate(17)]
    assert b.log_end_offset == 17
    fetch(b, a)
    assert_identical(a, b)
    a.close()
    b.close()
