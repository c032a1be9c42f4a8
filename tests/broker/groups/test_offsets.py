"""The offsets log: record layouts, durability, replay on open, compaction and its crash
safety, and kill -9 of a process in the middle of commits (and compactions)."""

from __future__ import annotations

import asyncio
import os
import random
import selectors
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.groups.offsets import OFFSETS_DIR, OffsetsLog
from broker.groups.offsets_codec import (
    GroupKey,
    OffsetKey,
    OffsetRecordError,
    decode_group,
    decode_key,
    decode_offset,
    encode_group,
    encode_key,
    encode_offset,
)
from broker.groups.types import OffsetAndMetadata, StoredGroup, TopicPartition
from hot.config import LogConfig
from hot.errors import CorruptLogError, InvalidRequestError
from hot.records import RecordInput, build_batch

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[3]
CHILD = Path(__file__).resolve().parent / "offsets_child.py"
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def om(offset: int, *, epoch: int = 0, md: str = "", ts: int = 1000) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, epoch, md, ts)


# --- the record codec ----------------------------------------------------------------------------


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_records_use_kafkas_consumer_offsets_layout() -> None:
    assert encode_key(OffsetKey("grp", "tp", 3)) == struct.pack(">h", 1) + _s("grp") + _s("tp") + struct.pack(
        ">i", 3
    )
    assert encode_key(GroupKey("grp")) == struct.pack(">h", 2) + _s("grp")
    assert encode_offset(OffsetAndMetadata(7, 2, "md", 99)) == (
        struct.pack(">hqi", 3, 7, 2) + _s("md") + struct.pack(">q", 99)
    )
    # an explicit retention is only expressible in value v1
    assert encode_offset(OffsetAndMetadata(7, 2, "md", 99, 500)) == (
        struct.pack(">hq", 1, 7) + _s("md") + struct.pack(">qq", 99, 500)
    )
    g = StoredGroup("consumer", 4, "range", "m-1", 1234)
    assert encode_group(g) == (
        struct.pack(">h", 3) + _s("consumer") + struct.pack(">i", 4) + _s("range") + _s("m-1")
        + struct.pack(">qi", 1234, 0)
    )  # fmt: skip
    assert decode_group(encode_group(g)) == g
    assert decode_key(encode_key(OffsetKey("grp", "tp", 3))) == OffsetKey("grp", "tp", 3)
    assert decode_key(encode_key(GroupKey("g"))) == GroupKey("g")


def test_older_value_versions_are_read() -> None:
    v0 = struct.pack(">hq", 0, 5) + _s("x") + struct.pack(">q", 77)
    assert decode_offset(v0) == OffsetAndMetadata(5, -1, "x", 77)
    v2 = struct.pack(">hq", 2, 5) + _s("") + struct.pack(">q", 78)
    assert decode_offset(v2) == OffsetAndMetadata(5, -1, "", 78)
    assert decode_key(struct.pack(">h", 0) + _s("g") + _s("t") + struct.pack(">i", 1)) == OffsetKey(
        "g", "t", 1
    )
    # a Kafka group value v1 with one member (rebalance timeout, no instance id)
    member = (
        _s("m") + _s("client") + _s("/1.2.3.4") + struct.pack(">ii", 300, 10) + struct.pack(">i", 2) + b"ab"
    )
    member += struct.pack(">i", -1)
    v1 = (
        struct.pack(">h", 1)
        + _s("consumer")
        + struct.pack(">i", 9)
        + _s("range")
        + _s("m")
        + struct.pack(">i", 1)
    )
    assert decode_group(v1 + member) == StoredGroup("consumer", 9, "range", "m", -1)
    null_protocol = struct.pack(">h", 2) + _s("consumer") + struct.pack(">ihhqi", 3, -1, -1, 55, 0)
    assert decode_group(null_protocol) == StoredGroup("consumer", 3, None, None, 55)


@pytest.mark.parametrize(
    ("decode", "data", "message"),
    [
        (decode_key, struct.pack(">h", 9) + _s("g"), "key version 9"),
        (decode_key, struct.pack(">h", 1) + _s("g"), "truncated"),
        (decode_key, struct.pack(">h", 2) + _s("g") + b"x", "trailing"),
        (decode_offset, struct.pack(">hq", 4, 1), "version 4"),
        (decode_offset, struct.pack(">hq", 3, 1), "truncated"),
        (
            decode_group,
            struct.pack(">h", 3) + _s("c") + struct.pack(">ihhqi", 1, -1, -1, 0, -5),
            "-5 members",
        ),
        (decode_key, struct.pack(">h", 2) + struct.pack(">h", 2) + b"\xff\xfe", "UTF-8"),
    ],
)
def test_bad_records_are_precise_errors(decode: object, data: bytes, message: str) -> None:
    with pytest.raises(OffsetRecordError, match=message):
        decode(data)  # type: ignore[operator]


def test_overlong_strings_are_refused_when_written() -> None:
    with pytest.raises(InvalidRequestError, match="32767"):
        encode_key(GroupKey("g" * 40000))


# --- the store -------------------------------------------------------------------------------


async def test_commits_are_visible_when_durable_and_survive_reopen(tmp_path: Path) -> None:
    store = OffsetsLog.open(tmp_path)
    fut = store.commit("g", {TP0: om(5, epoch=2, md="hello"), TP1: om(6)})
    assert store.has_offsets("g")  # appended ...
    assert store.committed("g") == {}  # ... but not shown before the fsync
    await fut
    assert store.committed("g") == {TP0: om(5, epoch=2, md="hello"), TP1: om(6)}
    await store.store_group("g", StoredGroup("consumer", 3, "range", "m", 10))
    await store.commit("g", {TP0: om(8)})
    await store.commit("other", {TP0: om(1, ts=5)})
    store.close()
    assert (tmp_path / OFFSETS_DIR / "00000000000000000000.log").exists()

    again = OffsetsLog.open(tmp_path)
    try:
        assert again.committed("g") == {TP0: om(8), TP1: om(6)}
        assert again.committed("other") == {TP0: om(1, ts=5)}
        assert again.group_metadata("g") == StoredGroup("consumer", 3, "range", "m", 10)
        assert again.groups() == {"g", "other"}
    finally:
        again.close()


async def test_tombstones(tmp_path: Path) -> None:
    store = OffsetsLog.open(tmp_path)
    await store.commit("a", {TP0: om(1), TP1: om(2)})
    await store.commit("b", {TP0: om(3), TopicPartition("u", 0): om(4)})
    await store.store_group("a", StoredGroup("consumer", 1, None, None, 0))
    await store.delete_offsets("a", [TP1, TopicPartition("nope", 0)])
    assert store.committed("a") == {TP0: om(1)}
    await store.delete_group("a")
    await store.delete_topic("u")
    assert store.groups() == {"b"} and store.committed("b") == {TP0: om(3)}
    assert not store.has_offsets("a")
    store.close()
    again = OffsetsLog.open(tmp_path)
    try:
        assert again.groups() == {"b"} and again.committed("b") == {TP0: om(3)}
        assert again.group_metadata("a") is None
    finally:
        again.close()


async def test_interval_flush_mode_acknowledges_at_append(tmp_path: Path) -> None:
    store = OffsetsLog.open(tmp_path, LogConfig(flush_mode="interval", flush_ms=60_000))
    try:
        await asyncio.wait_for(store.commit("g", {TP0: om(1)}), 5)
        assert store.committed("g") == {TP0: om(1)}
        assert store.log.recovery_point < store.log.log_end_offset  # not fsynced yet
    finally:
        store.close()
    again = OffsetsLog.open(tmp_path)  # a clean close flushed it
    try:
        assert again.committed("g") == {TP0: om(1)}
    finally:
        again.close()


def _segments(tmp_path: Path) -> list[str]:
    return sorted(n for n in os.listdir(tmp_path / OFFSETS_DIR) if n.endswith(".log"))


async def test_compaction_keeps_the_live_keys_and_bounds_the_log(tmp_path: Path) -> None:
    store = OffsetsLog.open(tmp_path, segment_bytes=1024)
    expected: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    for i in range(600):
        group = f"g{i % 5}"
        tp = TopicPartition("t", i % 3)
        value = om(i, md="x" * (i % 11))
        await store.commit(group, {tp: value})
        expected.setdefault(group, {})[tp] = value
        if i == 300:
            await store.delete_group("g4")
            expected.pop("g4")
    for _ in range(100):  # let a compaction that started with the last commit finish
        if store._compaction is None:
            break
        await asyncio.sleep(0.01)
    assert store.compactions > 3
    assert store.log.log_start_offset > 500
    assert store.log.size < 4 * 1024 + 2 * store.live_bytes
    assert len(_segments(tmp_path)) <= 6
    assert {g: store.committed(g) for g in store.groups()} == expected
    store.close()
    again = OffsetsLog.open(tmp_path, segment_bytes=1024)
    try:
        assert {g: again.committed(g) for g in again.groups()} == expected
    finally:
        again.close()


async def test_compacting_an_empty_store_empties_the_log(tmp_path: Path) -> None:
    store = OffsetsLog.open(tmp_path)
    await store.commit("g", {TP0: om(1)})
    await store.delete_group("g")
    await store.compact()
    assert store.log.log_start_offset == store.log.log_end_offset == 2
    assert store.log.size == 0
    store.close()
    again = OffsetsLog.open(tmp_path)
    try:
        assert again.groups() == set()
    finally:
        again.close()


async def _fill(store: OffsetsLog) -> dict[TopicPartition, OffsetAndMetadata]:
    want = {TopicPartition("t", p): om(100 + p) for p in range(8)}
    await store.commit("g", {tp: om(p) for p, tp in enumerate(want)})
    await store.commit("g", want)
    await store.store_group("g", StoredGroup("consumer", 2, None, None, 7))
    return want


async def test_a_crash_in_the_middle_of_a_dump_loses_nothing(tmp_path: Path) -> None:
    store = OffsetsLog.open(tmp_path)
    want = await _fill(store)
    # What compact() does, cut short: roll, append part of the dump, then a torn batch.
    log = store.log
    log.roll()
    latest = list(store._latest.items())
    half = [RecordInput(encode_key(k), v) for k, v in latest[: len(latest) // 2]]
    log.append(build_batch(half))
    log.flush()
    torn = build_batch([RecordInput(encode_key(k), v) for k, v in latest])
    with open(log.active_segment.log_path, "ab") as f:
        f.write(torn[: len(torn) // 2])
    store.close(clean=False)
    again = OffsetsLog.open(tmp_path)
    try:
        assert again.committed("g") == want
        assert again.group_metadata("g") == StoredGroup("consumer", 2, None, None, 7)
    finally:
        again.close()


async def test_a_crash_after_moving_the_log_start_before_deleting_segments(tmp_path: Path) -> None:
    store = OffsetsLog.open(tmp_path)
    want = await _fill(store)
    log = store.log
    log.roll()
    start = log.log_end_offset
    log.append(build_batch([RecordInput(encode_key(k), v) for k, v in store._latest.items()]))
    log.flush()
    log.advance_log_start_offset(start)  # ... and the process dies before the old segments go
    store.close(clean=False)
    assert len(_segments(tmp_path)) == 2
    again = OffsetsLog.open(tmp_path)
    try:
        assert again.committed("g") == want
        assert _segments(tmp_path) == [f"{start:020d}.log"]
    finally:
        again.close()


async def test_a_record_that_does_not_parse_refuses_the_log(tmp_path: Path) -> None:
    store = OffsetsLog.open(tmp_path)
    await store.commit("g", {TP0: om(1)})
    store.log.append(build_batch([RecordInput(b"\x00\x63junk", b"")]))
    store.log.flush()
    store.close()
    with pytest.raises(CorruptLogError, match=r"offset 1.*key version 99"):
        OffsetsLog.open(tmp_path)


async def test_writes_after_close_are_refused(tmp_path: Path) -> None:
    from hot.errors import CoordinatorNotAvailableError

    store = OffsetsLog.open(tmp_path)
    store.close()
    with pytest.raises(CoordinatorNotAvailableError):
        store.commit("g", {TP0: om(1)})


# --- kill -9 ----------------------------------------------------------------------------------


def _run_and_kill(
    data_dir: Path, first: int, acks_wanted: int, seed: int, deadline: float
) -> dict[tuple[str, int], int]:
    """Run the child until it acknowledged ``acks_wanted`` commits (plus a random moment),
    SIGKILL it; returns the highest acknowledged offset per (group, partition)."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(data_dir), str(first)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    acked: dict[tuple[str, int], int] = {}
    buf = b""
    count = 0

    def take(lines: list[bytes]) -> int:
        n = 0
        for line in lines:
            if line.strip():
                group, partition, offset = line.split()
                key = (group.decode(), int(partition))
                assert int(offset) > acked.get(key, -1)
                acked[key] = int(offset)
                n += 1
        return n

    try:
        while count < acks_wanted:
            assert time.monotonic() < deadline, "child too slow"
            if not sel.select(timeout=1.0):
                assert proc.poll() is None, proc.stderr.read().decode()
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, proc.stderr.read().decode()
            buf += chunk
            *lines, buf = buf.split(b"\n")
            count += take(lines)
        time.sleep(random.Random(seed).random() * 0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        sel.close()
    take((buf + proc.stdout.read()).split(b"\n"))
    proc.stdout.close()
    proc.stderr.close()
    return acked


async def test_acknowledged_commits_survive_kill9_mid_commits_and_compactions(tmp_path: Path) -> None:
    deadline = time.monotonic() + 90
    rnd = random.Random(7)
    acked: dict[tuple[str, int], int] = {}
    compacted = False
    for round_no in range(5):
        first = round_no * 1_000_000
        got = _run_and_kill(tmp_path, first, rnd.randint(40, 200), round_no, deadline)
        acked.update(got)
        store = OffsetsLog.open(tmp_path, segment_bytes=2048)
        try:
            compacted = compacted or store.log.log_start_offset > 0
            for (group, partition), offset in acked.items():
                stored = store.committed(group).get(TopicPartition("t", partition))
                assert stored is not None, (group, partition)
                # Everything acknowledged is there (a later, unacknowledged commit may be too).
                assert stored.offset >= offset, (group, partition, stored, offset)
                assert stored.metadata == "m" * (stored.offset % 7)
                assert stored.offset < first + 1_000_000
        finally:
            store.close(clean=False)  # the next round is another unclean start
    assert compacted, "no compaction happened: the kills never landed in one"
