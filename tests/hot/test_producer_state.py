"""Idempotent producers: the sequence/epoch state machine, deduplication in Log.append,
producer-state snapshots and their recovery, and the producer id allocator."""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot.errors import CorruptLogError, InvalidProducerEpochError, InvalidRecordError, OutOfOrderSequenceError
from hot.log import Log
from hot.manager import LogManager
from hot.producer_ids import MAX_EPOCH, PRODUCER_IDS_FILE, ProducerIdAllocator
from hot.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerEntry,
    ProducerSnapshotFile,
    ProducerStateManager,
    increment_sequence,
    parse_snapshot_name,
    snapshot_name,
)
from hot.records import RecordInput, build_batch, decode_batches
from kwire.error_table import kafka_code
from tests.hot.hotlib import open_log

NOW = 1_700_000_000_000  # a fixed wall clock for the pure state-machine tests
CFG: dict[str, object] = {"flush_mode": "interval", "segment_bytes": 1400, "index_interval_bytes": 256}


def pbatch(pid: int, epoch: int, seq: int, n: int = 2, *, pad: int = 20) -> bytes:
    """One idempotent batch of ``n`` records whose values name (pid, epoch, seq)."""
    recs = [
        RecordInput(None, b"%d:%d:%d:" % (pid, epoch, (seq + i) & INT32_MAX) + b"x" * pad, timestamp=1000 + i)
        for i in range(n)
    ]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def log_values(log: Log) -> list[tuple[int, bytes | None]]:
    data = log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset).read()
    return [(r.offset, r.value) for b in decode_batches(data) for r in b]


def log_keys(log: Log) -> list[tuple[int, int, int]]:
    """(pid, epoch, seq) of every record in the log, in log order."""
    out = []
    for _, v in log_values(log):
        assert v is not None
        pid, epoch, seq, _ = v.split(b":", 3)
        out.append((int(pid), int(epoch), int(seq)))
    return out


# --- the pure state machine ------------------------------------------------------------------------


def test_increment_sequence_wraps_at_int32_max() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 0) == INT32_MAX
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 4) == 2


def apply(
    state: ProducerStateManager, pid: int, epoch: int, seq: int, n: int, off: int
) -> BatchMetadata | None:
    plan = state.begin(NOW)
    dup = plan.append(pid, epoch, seq, n - 1, off, NOW)
    plan.commit()
    return dup


def test_sequences_duplicates_gaps_and_fencing() -> None:
    s = ProducerStateManager()
    assert apply(s, 7, 0, 0, 3, 100) is None  # seq 0-2 at 100-102
    assert apply(s, 7, 0, 3, 2, 103) is None  # seq 3-4
    # A retry of either batch is a duplicate answered with the original offsets.
    assert apply(s, 7, 0, 0, 3, 999) == BatchMetadata(0, 2, 100, 102, NOW)
    assert apply(s, 7, 0, 3, 2, 999) == BatchMetadata(3, 4, 103, 104, NOW)
    with pytest.raises(OutOfOrderSequenceError):
        apply(s, 7, 0, 6, 1, 105)  # gap: 5 is missing
    with pytest.raises(OutOfOrderSequenceError):
        apply(s, 7, 0, 1, 2, 105)  # overlaps a batch but is not one
    with pytest.raises(OutOfOrderSequenceError):
        apply(s, 7, 1, 5, 1, 105)  # a new epoch restarts at 0
    assert apply(s, 7, 1, 0, 1, 105) is None  # epoch bump
    with pytest.raises(InvalidProducerEpochError):
        apply(s, 7, 0, 5, 1, 106)  # the old epoch is fenced
    with pytest.raises(InvalidProducerEpochError):
        apply(s, 7, 0, 0, 3, 106)  # even for what was a duplicate
    entry = s.get(7, NOW)
    assert entry is not None and entry.epoch == 1 and entry.last_seq == 0 and entry.last_offset == 105


def test_only_the_last_five_batches_are_cached() -> None:
    s = ProducerStateManager()
    for i in range(7):
        assert apply(s, 1, 0, i, 1, i) is None
    for i in range(2, 7):
        assert apply(s, 1, 0, i, 1, 99) == BatchMetadata(i, i, i, i, NOW)
    with pytest.raises(OutOfOrderSequenceError):
        apply(s, 1, 0, 1, 1, 99)  # too old to answer: Kafka says out of order too


def test_unknown_producer_accepts_any_sequence_and_wraps() -> None:
    s = ProducerStateManager()
    assert apply(s, 3, 4, INT32_MAX - 1, 2, 0) is None  # state lost (expired / retention)
    assert apply(s, 3, 4, 0, 1, 2) is None  # 0 follows 2**31-1


def test_rejected_batch_leaves_state_unchanged() -> None:
    s = ProducerStateManager()
    apply(s, 1, 0, 0, 1, 0)
    plan = s.begin(NOW)
    assert plan.append(1, 0, 1, 0, 1, NOW) is None
    with pytest.raises(OutOfOrderSequenceError):
        plan.append(1, 0, 5, 0, 2, NOW)
    # Never committed: the first append of the failed request is forgotten too.
    assert s.get(1, NOW) == ProducerEntry(1, 0, (BatchMetadata(0, 0, 0, 0, NOW),), NOW)


def test_expiry_forgets_idle_producers() -> None:
    s = ProducerStateManager(expiration_ms=1000)
    apply(s, 1, 0, 0, 1, 0)
    assert s.get(1, NOW + 999) is not None
    assert s.get(1, NOW + 1000) is None
    plan = s.begin(NOW + 2000)
    assert plan.append(1, 0, 17, 0, 1, NOW) is None  # unknown again: accepted


def test_evict_below_drops_producers_whose_data_is_gone() -> None:
    s = ProducerStateManager()
    apply(s, 1, 0, 0, 5, 0)  # offsets 0-4
    apply(s, 2, 0, 0, 5, 5)  # offsets 5-9
    assert s.evict_below(5) == 1
    assert set(s.entries()) == {2}


# --- the snapshot file ------------------------------------------------------------------------------


def sample_entries() -> list[ProducerEntry]:
    return [
        ProducerEntry(1, 0, tuple(BatchMetadata(i, i, 10 + i, 10 + i, 500 + i) for i in range(5)), NOW),
        ProducerEntry(1 << 40, 32000, (BatchMetadata(INT32_MAX, 3, 20, 24, -1),), NOW - 5),
        ProducerEntry(9, 2, (), NOW),
    ]


def test_snapshot_round_trip_and_names() -> None:
    data = ProducerSnapshotFile.encode(100, sample_entries())
    assert ProducerSnapshotFile.decode(data, 100) == sample_entries()
    assert ProducerSnapshotFile.decode(ProducerSnapshotFile.encode(0, []), 0) == []
    assert snapshot_name(42) == "00000000000000000042.snapshot"
    assert parse_snapshot_name("00000000000000000042.snapshot") == 42
    for bad in ("42.snapshot", "0000000000000000004x.snapshot", "00000000000000000042.log"):
        assert parse_snapshot_name(bad) is None


@pytest.mark.parametrize(
    "damage",
    ["flip", "truncate", "trailing", "version", "offset", "empty", "batch-above-offset"],
)
def test_damaged_snapshot_is_rejected(damage: str) -> None:
    data = bytearray(ProducerSnapshotFile.encode(100, sample_entries()))
    offset = 100
    if damage == "flip":
        data[40] ^= 0x01
    elif damage == "truncate":
        del data[-7:]
    elif damage == "trailing":
        data += b"\0"
    elif damage == "version":
        struct.pack_into(">h", data, 0, 9)
    elif damage == "offset":
        offset = 101
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(ProducerSnapshotFile.encode(20, sample_entries()))
        offset = 20
    with pytest.raises(CorruptLogError):
        ProducerSnapshotFile.decode(bytes(data), offset)


# --- Log.append ----------------------------------------------------------------------------------------


def test_duplicate_append_returns_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **CFG)
    log.append(pbatch(-1, -1, -1, 3))  # a plain batch first: offsets 0-2
    first = log.append(pbatch(5, 0, 0, 3))
    assert (first.first_offset, first.last_offset, first.duplicate) == (3, 5, False)
    size = log.size
    again = log.append(pbatch(5, 0, 0, 3))
    assert (again.first_offset, again.last_offset, again.duplicate) == (3, 5, True)
    assert (again.batch_count, again.record_count) == (0, 0)
    assert log.size == size and log.log_end_offset == 6
    nxt = log.append(pbatch(5, 0, 3, 1))
    assert (nxt.first_offset, nxt.last_offset) == (6, 6)
    assert [k for k in log_keys(log) if k[0] == 5] == [(5, 0, 0), (5, 0, 1), (5, 0, 2), (5, 0, 3)]
    log.close()


def test_rejected_append_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **CFG)
    log.append(pbatch(5, 1, 0, 2))
    with pytest.raises(OutOfOrderSequenceError) as ei:
        log.append(pbatch(5, 1, 3, 1))
    assert kafka_code(ei.value) == 45
    with pytest.raises(InvalidProducerEpochError) as ej:
        log.append(pbatch(5, 0, 2, 1))
    assert kafka_code(ej.value) == 47
    # One bad batch of a request: none of it is written, the good one neither.
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(5, 1, 2, 1) + pbatch(5, 1, 9, 1))
    assert log.log_end_offset == 2
    assert log.append(pbatch(5, 1, 2, 1)).first_offset == 2
    with pytest.raises(InvalidRecordError):
        log.append(build_batch([RecordInput(None, b"v")], producer_id=5, producer_epoch=1, base_sequence=-1))
    log.close()


def test_multi_batch_request_is_checked_in_order(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **CFG)
    info = log.append(pbatch(1, 0, 0, 2) + pbatch(2, 0, 0, 1) + pbatch(1, 0, 2, 2))
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 4, 3)
    # Retries of old batches plus one new batch: only the new one is written.
    info = log.append(pbatch(1, 0, 2, 2) + pbatch(1, 0, 4, 1))
    assert (info.first_offset, info.last_offset, info.batch_count, info.duplicate) == (3, 5, 1, False)
    # The same batch twice in one request is written once.
    info = log.append(pbatch(2, 0, 1, 1) + pbatch(2, 0, 1, 1))
    assert (info.first_offset, info.last_offset, info.batch_count) == (6, 6, 1)
    assert log_keys(log) == [(1, 0, 0), (1, 0, 1), (2, 0, 0), (1, 0, 2), (1, 0, 3), (1, 0, 4), (2, 0, 1)]
    log.close()


def test_duplicate_on_log_append_time_topic_reports_original_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime", **CFG)
    first = log.append(pbatch(1, 0, 0), now_ms=NOW)
    again = log.append(pbatch(1, 0, 0), now_ms=NOW + 5000)
    assert first.log_append_time_ms == again.log_append_time_ms == NOW
    assert again.duplicate
    log.close()


def test_follower_append_updates_state_without_checks(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "a-0", **CFG)
    follower = open_log(tmp_path / "b-0", **CFG)
    leader.append(pbatch(1, 0, 0, 3))
    leader.append(pbatch(1, 0, 3, 2))
    follower.append_as_follower(leader.read(0, 1 << 20).read())
    batches = {p: (e.epoch, e.batches) for p, e in leader.producer_entries().items()}
    assert {p: (e.epoch, e.batches) for p, e in follower.producer_entries().items()} == batches
    assert follower.append(pbatch(1, 0, 3, 2)).duplicate
    leader.close()
    follower.close()


# --- the state machine against a model, through a real log (hypothesis) ------------------------------


@dataclass
class Producer:
    pid: int
    epoch: int = 0
    next_seq: int = 0
    sent: list[tuple[int, int, int, int, int]] = field(default_factory=list)  # epoch, seq, n, first, last


actions = st.lists(
    st.one_of(
        st.tuples(st.just("new"), st.integers(0, 2), st.integers(1, 4)),
        st.tuples(st.just("retry"), st.integers(0, 2), st.integers(0, 4)),
        st.tuples(st.just("stale"), st.integers(0, 2), st.integers(5, 8)),
        st.tuples(st.just("gap"), st.integers(0, 2), st.integers(1, 3)),
        st.tuples(st.just("bump"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("fenced"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("plain"), st.just(0), st.integers(1, 3)),
        st.tuples(st.just("reopen"), st.booleans(), st.just(0)),
        st.tuples(st.just("roll"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_model_each_record_exactly_once_in_order(script: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        log = open_log(d, **CFG)
        producers = [Producer(pid) for pid in (10, 11, 12)]
        expected: list[tuple[int, int, int]] = []
        try:
            for op, a, b in script:
                p = producers[a] if op not in ("plain", "reopen", "roll") else producers[0]
                if op == "new":
                    info = log.append(pbatch(p.pid, p.epoch, p.next_seq, b))
                    assert not info.duplicate and info.first_offset == len(expected)
                    p.sent.append((p.epoch, p.next_seq, b, info.first_offset, info.last_offset))
                    expected += [(p.pid, p.epoch, p.next_seq + i) for i in range(b)]
                    p.next_seq += b
                elif op == "retry" and b < len(p.sent):
                    epoch, seq, n, first, last = p.sent[-1 - b]
                    if epoch == p.epoch:
                        info = log.append(pbatch(p.pid, epoch, seq, n))
                        assert info.duplicate and (info.first_offset, info.last_offset) == (first, last)
                elif op == "stale" and b < len(p.sent) and p.sent[-1 - b][0] == p.epoch:
                    epoch, seq, n, _, _ = p.sent[-1 - b]
                    with pytest.raises(OutOfOrderSequenceError):
                        log.append(pbatch(p.pid, epoch, seq, n))
                elif op == "gap" and p.sent:
                    with pytest.raises(OutOfOrderSequenceError):
                        log.append(pbatch(p.pid, p.epoch, p.next_seq + b, 1))
                elif op == "bump":
                    p.epoch += 1
                    p.next_seq = 0
                elif op == "fenced" and p.epoch > 0 and p.sent and p.sent[-1][0] == p.epoch:
                    with pytest.raises(InvalidProducerEpochError):
                        log.append(pbatch(p.pid, p.epoch - 1, p.next_seq, 1))
                elif op == "plain":
                    log.append(pbatch(-1, -1, -1, b))
                    expected += [(-1, -1, (-1 + i) & INT32_MAX) for i in range(b)]
                elif op == "reopen":
                    log.close(clean=a)
                    log = open_log(d, clean=a, **CFG)
                elif op == "roll":
                    log.roll()
            assert log_keys(log) == expected
        finally:
            log.close()


# --- snapshots and recovery -----------------------------------------------------------------------------


def fill_idempotent(log: Log, pid: int, batches: int, *, epoch: int = 0) -> list[tuple[int, int]]:
    """Append ``batches`` 2-record batches; returns (first offset, base sequence) of each."""
    out = []
    entry = log.producer_entries().get(pid)
    seq = entry.last_seq + 1 if entry is not None and entry.epoch == epoch else 0
    for _ in range(batches):
        info = log.append(pbatch(pid, epoch, seq, 2))
        out.append((info.first_offset, seq))
        seq += 2
    return out


def snapshot_files(d: Path) -> list[int]:
    return sorted(o for o in (parse_snapshot_name(n) for n in os.listdir(d)) if o is not None)


def test_roll_and_clean_close_write_snapshots(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    fill_idempotent(log, 1, 30)
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) > 2
    # One per rolled-into segment, named by its base: the state as of its start.
    assert snapshot_files(d) == bases[1:] == log.producer_snapshots()
    segs = log.segments()
    assert all(os.path.exists(s.snapshot_path) for s in segs[1:])
    assert log.producer_snapshot_after(segs[0]) == segs[1].snapshot_path
    assert log.producer_snapshot_after(segs[-1]) is None
    entries = ProducerSnapshotFile.read(segs[-1].snapshot_path, segs[-1].base_offset)
    assert entries[0].last_offset == segs[-1].base_offset - 1
    leo = log.log_end_offset
    log.close()
    assert snapshot_files(d) == [*bases[1:], leo]


def test_clean_restart_loads_the_close_snapshot_without_scanning(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    fill_idempotent(log, 1, 10)
    leo = log.log_end_offset
    log.close()
    # Replace the close snapshot by a state the log does not contain: if the open
    # scanned the log instead of trusting the snapshot, it would not survive.
    forged = [ProducerEntry(1, 3, (BatchMetadata(100, 101, 0, 1, 5),), NOW * 2)]
    ProducerSnapshotFile.write(str(d / snapshot_name(leo)), leo, forged)
    log = open_log(d, clean=True, **CFG)
    assert log.producer_entries() == {1: forged[0]}
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_all_cached_batches_survive_a_restart(tmp_path: Path, clean: bool) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    sent = fill_idempotent(log, 1, 9)
    log.roll()  # unclean: the state comes from the roll snapshot alone
    log.close(clean=clean)
    log = open_log(d, clean=clean, **CFG)
    for first, seq in sent[-5:]:
        info = log.append(pbatch(1, 0, seq, 2))
        assert info.duplicate and info.first_offset == first
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(1, 0, sent[-6][1], 2))
    log.close()


def test_unclean_restart_rebuilds_from_log_after_torn_tail(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    sent = fill_idempotent(log, 1, 12)
    active = log.active_segment
    assert active.base_offset > 0 and not active.is_empty
    before = log.producer_entries()
    log.close(clean=False)
    # Tear the last batch: recovery truncates it, the state must forget it too.
    last_off, last_seq = sent[-1]
    with open(active.log_path, "r+b") as f:
        f.truncate(os.path.getsize(active.log_path) - 5)
    log = open_log(d, **CFG)
    assert log.log_end_offset == last_off
    entry = log.producer_entries()[1]
    assert entry.last_seq == last_seq - 1 and entry.batches[-4:] == before[1].batches[:-1]
    # The lost batch is written again by its retry; the one before it is a duplicate.
    assert not log.append(pbatch(1, 0, last_seq, 2)).duplicate
    prev_off, prev_seq = sent[-2]
    assert log.append(pbatch(1, 0, prev_seq, 2)).first_offset == prev_off
    log.close()


def test_damaged_snapshot_is_ignored_and_deleted(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    sent = fill_idempotent(log, 1, 20)
    want = log.producer_entries()
    last_roll = log.producer_snapshots()[-1]
    leo = log.log_end_offset
    log.close()
    # Damage the close snapshot and the newest roll snapshot: the one before is used.
    for off in (leo, last_roll):
        path = d / snapshot_name(off)
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF
        path.write_bytes(bytes(data))
    log = open_log(d, clean=True, **CFG)
    assert {p: e.batches for p, e in log.producer_entries().items()} == {
        p: e.batches for p, e in want.items()
    }
    assert last_roll not in snapshot_files(d)
    # The rebuilt state was snapshotted again at the log end, and it is valid.
    assert ProducerSnapshotFile.read(str(d / snapshot_name(leo)), leo)
    assert log.append(pbatch(1, 0, sent[-1][1], 2)).first_offset == sent[-1][0]
    log.close()


def test_every_snapshot_damaged_rebuilds_from_log_start(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    fill_idempotent(log, 4, 15)
    want = {pid: e.batches for pid, e in log.producer_entries().items()}
    log.close()
    for off in snapshot_files(d):
        (d / snapshot_name(off)).write_bytes(b"garbage")
    log = open_log(d, clean=True, **CFG)
    assert {pid: e.batches for pid, e in log.producer_entries().items()} == want
    log.close()


def test_truncate_to_rolls_state_back(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    sent = fill_idempotent(log, 1, 20)
    cut_off, cut_seq = sent[5]
    log.truncate_to(cut_off)
    assert log.log_end_offset == cut_off
    assert all(o <= cut_off for o in snapshot_files(d))
    assert log.producer_entries()[1].last_seq == cut_seq - 1
    assert log.append(pbatch(1, 0, sent[4][1], 2)).duplicate
    assert not log.append(pbatch(1, 0, cut_seq, 2)).duplicate
    log.close()
    log = open_log(d, clean=True, **CFG)
    assert log.producer_entries()[1].last_seq == cut_seq + 1
    log.truncate_to(0)
    assert log.producer_entries() == {} and snapshot_files(d) == []
    log.close()


def test_retention_deletes_old_snapshots_and_evicts_producers(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, retention_bytes=3000, **CFG)
    fill_idempotent(log, 1, 5)
    fill_idempotent(log, 2, 40)
    assert log.apply_retention()
    start = log.segments()[0].base_offset
    assert snapshot_files(d)[0] >= start and snapshot_files(d) == log.producer_snapshots()
    assert set(log.producer_entries()) == {2}  # producer 1's data is gone
    log.delete_records(log.high_watermark)
    assert log.producer_entries() == {}
    log.close()


def test_snapshot_above_log_end_is_deleted_on_open(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    fill_idempotent(log, 1, 3)
    leo = log.log_end_offset
    log.close()
    ProducerSnapshotFile.write(str(d / snapshot_name(leo + 50)), leo + 50, [])
    log = open_log(d, **CFG)
    assert leo + 50 not in snapshot_files(d)
    assert log.producer_entries()[1].last_offset == leo - 1
    log.close()


# --- producer ids -----------------------------------------------------------------------------------------


def test_allocator_never_reuses_ids_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / PRODUCER_IDS_FILE
    a = ProducerIdAllocator(path, block_size=10)
    got = [a.allocate() for _ in range(12)]  # crosses into a second block
    assert got == list(range(12))
    # "Crash": a new allocator without any shutdown step, and a stray tmp file from an
    # interrupted block reservation.
    (tmp_path / (PRODUCER_IDS_FILE + ".tmp")).write_bytes(b"junk")
    b = ProducerIdAllocator(path, block_size=10)
    assert b.allocate() == 20
    c = ProducerIdAllocator(path, block_size=10)
    assert c.allocate() == 30


def test_allocator_damaged_file_stays_above_ids_in_use(tmp_path: Path) -> None:
    path = tmp_path / PRODUCER_IDS_FILE
    a = ProducerIdAllocator(path, block_size=10)
    for _ in range(3):
        a.allocate()
    path.write_bytes(b"\x00\x01garbage!!!!!!")
    b = ProducerIdAllocator(path, block_size=10, floor=500)
    assert b.allocate() >= 510


def test_init_producer_epoch_bump() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a = ProducerIdAllocator(Path(tmp) / PRODUCER_IDS_FILE)
        pid, epoch = a.init_producer()
        assert (pid, epoch) == (0, 0)
        assert a.init_producer(pid, epoch) == (pid, 1)
        assert a.init_producer(pid, MAX_EPOCH) == (1, 0)  # exhausted: a new id
        assert a.init_producer(12345, 0) == (2, 0)  # never issued here: a new id


def test_manager_allocator_persists_and_respects_producer_state(tmp_path: Path) -> None:
    with LogManager(tmp_path) as m:
        first = m.producer_ids.allocate()
        m.create_topic("t", 1)
        m.get_log("t", 0).append(pbatch(4321, 0, 0))
    with LogManager(tmp_path) as m:
        assert m.producer_ids.allocate() > first
    (tmp_path / "meta" / PRODUCER_IDS_FILE).unlink()
    with LogManager(tmp_path) as m:
        assert m.producer_ids.allocate() > 4321
