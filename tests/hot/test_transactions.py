"""Transactions in the partition log (KIP-98): end-transaction markers, the transaction
index, producer state with ongoing transactions, the last stable offset and the aborted
list, across restarts, crashes, truncation, rolls, retention and compaction."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from hot.batch import compute_crc
from hot.cleaner import LogCleaner
from hot.config import LogConfig
from hot.errors import (
    CorruptLogError,
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionalIdAuthorizationError,
    TransactionCoordinatorFencedError,
)
from hot.log import Log
from hot.producer_state import (
    BatchMetadata,
    ProducerEntry,
    ProducerSnapshotFile,
)
from hot.records import ControlType, RecordInput, build_batch, decode_batches
from hot.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, collect_aborted
from hot.txn_marker import EndTxnMarker, build_marker_batch, read_marker
from kwire.error_table import kafka_code
from tests.hot.hotlib import open_log

CFG: dict[str, object] = {"flush_mode": "interval", "segment_bytes": 1024, "index_interval_bytes": 256}
ABORT, COMMIT = ControlType.ABORT, ControlType.COMMIT


def tbatch(
    pid: int, seq: int, n: int = 2, *, epoch: int = 0, transactional: bool = True, pad: int = 30
) -> bytes:
    """A producer's batch of ``n`` records (transactional by default)."""
    recs = [
        RecordInput(b"k%d" % (seq + i), b"%d:%d:" % (pid, seq + i) + b"x" * pad, timestamp=1000)
        for i in range(n)
    ]
    return build_batch(
        recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional
    )


def aborted(log: Log) -> list[AbortedTxn]:
    return log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)


def ongoing(log: Log) -> list[tuple[int, int]]:
    """(first offset, producer id) of the ongoing transactions, from the producer entries."""
    return sorted(
        (e.current_txn_first_offset, pid)
        for pid, e in log.producer_entries().items()
        if e.current_txn_first_offset >= 0
    )


def txnindex_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".txnindex"))


# --- the marker codec ---------------------------------------------------------------------------------

# Kafka's MemoryRecords.withEndTransactionMarker: 61-byte header, one 17-byte record.
COMMIT_GOLDEN = bytes.fromhex(
    "0000000000000000"
    "00000042"
    "ffffffff"
    "02"
    "eba37212"
    "0030"
    "00000000"
    "0000018bcfe56800"
    "0000018bcfe56800"
    "0000000000000007"
    "0002"
    "ffffffff"
    "00000001"
    "20"
    "00"
    "00"
    "00"
    "08"
    "00000001"
    "0c"
    "000000000005"
    "00"
)


def test_marker_batch_golden_bytes() -> None:
    batch = build_marker_batch(
        EndTxnMarker(COMMIT, 5), producer_id=7, producer_epoch=2, timestamp=1_700_000_000_000
    )
    assert batch == COMMIT_GOLDEN
    assert read_marker(batch) == EndTxnMarker(COMMIT, 5)
    # An independent reader (kafka-python) sees Kafka's control batch.
    kb = DefaultRecordBatch(bytes(batch))
    assert kb.validate_crc() and kb.is_control_batch and kb.is_transactional
    assert (kb.producer_id, kb.producer_epoch, kb.base_sequence) == (7, 2, -1)
    (rec,) = list(kb)
    assert rec.key == b"\x00\x00\x00\x01" and rec.value == b"\x00\x00\x00\x00\x00\x05"


def test_marker_decode_rules() -> None:
    m = EndTxnMarker(ABORT, 3)
    assert EndTxnMarker.decode(m.key(), m.value()) == m
    # Later versions add fields at the end: read as version 0.
    assert EndTxnMarker.decode(struct.pack(">hh", 1, 1), struct.pack(">hi", 1, 9) + b"more") == EndTxnMarker(
        COMMIT, 9
    )
    for key, value in [
        (b"\x00\x00\x00", m.value()),
        (struct.pack(">hh", -1, 0), m.value()),
        (struct.pack(">hh", 0, 2), m.value()),  # LEADER_CHANGE is not a transaction marker
        (m.key(), b"\x00\x00\x00"),
        (m.key(), struct.pack(">hi", -1, 0)),
        (m.key(), None),
    ]:
        with pytest.raises(CorruptRecordError):
            EndTxnMarker.decode(key, value)
    with pytest.raises(InvalidRecordError):
        build_marker_batch(m, producer_id=-1, producer_epoch=0, timestamp=0)
    with pytest.raises(InvalidRecordError):
        build_marker_batch(EndTxnMarker(ABORT, 1 << 31), producer_id=1, producer_epoch=0, timestamp=0)


# --- the transaction index file -----------------------------------------------------------------------


def test_aborted_txn_golden_bytes_and_search() -> None:
    t = AbortedTxn(7, 100, 150, 120)
    assert t.encode() == bytes.fromhex("00000000000000000007000000000000006400000000000000960000000000000078")
    assert ENTRY_SIZE == 34 and AbortedTxn.decode(t.encode()) == (0, t)
    entries = [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 30), AbortedTxn(3, 25, 40, 41)]
    # Overlap: last >= fetch offset and first < upper bound; stop at an LSO >= upper bound.
    assert collect_aborted(entries, 11, 25).aborted == (entries[1],)
    assert collect_aborted(entries, 11, 25).complete
    assert collect_aborted(entries, 0, 100).aborted == tuple(entries)
    assert not collect_aborted(entries, 0, 100).complete


def test_index_file_lazy_round_trip_truncate_and_damage(tmp_path: Path) -> None:
    path = str(tmp_path / "00000000000000000100.txnindex")
    idx = TransactionIndex(path, 100)
    assert not os.path.exists(path) and len(idx) == 0  # created on the first entry
    a, b, c = AbortedTxn(1, 90, 105, 106), AbortedTxn(2, 101, 110, 111), AbortedTxn(3, 112, 120, 121)
    for t in (a, b, c):
        idx.append(t)
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(4, 100, 120, 121))  # markers must increase
    idx.fsync()
    idx.close()
    assert os.path.getsize(path) == 3 * 34
    again = TransactionIndex(path, 100)
    assert again.entries() == [a, b, c] and again.problem(200) is None
    assert again.problem(115) is not None  # an entry past the segment end
    again.truncate_to(110)
    assert again.entries() == [a] and os.path.getsize(path) == 34
    again.close()
    # A torn tail: whole entries are read, the loader is told.
    with open(path, "ab") as f:
        f.write(b.encode()[:20])
    torn = TransactionIndex(path, 100)
    assert torn.entries() == [a] and "torn" in (torn.problem(200) or "")
    torn.append(b)  # the torn bytes are cut first
    torn.close()
    assert TransactionIndex(path, 100).entries() == [a, b]
    with open(path, "r+b") as f:
        f.seek(1)
        f.write(b"\x07")  # version
    assert "version" in (TransactionIndex(path, 100).problem(200) or "")


# --- appends, markers, LSO ------------------------------------------------------------------------------


def test_commit_and_abort_move_lso_and_fill_the_index(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **CFG)
    log.append(build_batch([RecordInput(b"k", b"plain")]))  # offset 0
    first1 = log.append(tbatch(1, 0), transactional=True).first_offset  # 1..2
    assert log.first_unstable_offset == first1 and log.last_stable_offset == first1
    first2 = log.append(tbatch(2, 0), transactional=True).first_offset  # 3..4
    log.append(tbatch(1, 2), transactional=True)  # 5..6
    assert ongoing(log) == [(first1, 1), (first2, 2)]
    entry = log.producer_entries()[1]
    assert entry.current_txn_first_offset == first1
    # Producer 1 aborts: the LSO stays at producer 2's transaction, which is in the entry.
    m1 = log.append_marker(1, 0, ABORT, 0).first_offset
    assert m1 == 7 and log.last_stable_offset == first2
    assert aborted(log) == [AbortedTxn(1, first1, m1, first2)]
    assert log.producer_entries()[1].current_txn_first_offset == -1
    # Producer 2 commits: nothing unstable is left.
    m2 = log.append_marker(2, 0, COMMIT, 0).first_offset
    assert log.first_unstable_offset is None and log.last_stable_offset == log.log_end_offset == m2 + 1
    assert aborted(log) == [AbortedTxn(1, first1, m1, first2)]
    # An empty transaction's marker changes nothing but the producer's epochs.
    log.append_marker(3, 4, ABORT, 2)
    assert aborted(log) == [AbortedTxn(1, first1, m1, first2)]
    assert log.producer_entries()[3].epoch == 4 and log.producer_entries()[3].coordinator_epoch == 2
    # The stored marker reads back as one control record.
    data = log.read(m1, 1 << 20, max_offset=m1 + 1).read()
    (mb,) = decode_batches(data)
    assert mb.header.is_control and mb.header.is_transactional and read_marker(data) == EndTxnMarker(ABORT, 0)
    # A later transaction's abort records the LSO right after its own marker.
    f3 = log.append(tbatch(1, 4), transactional=True).first_offset
    m3 = log.append_marker(1, 0, ABORT, 0).first_offset
    assert aborted(log)[-1] == AbortedTxn(1, f3, m3, m3 + 1)
    assert log.collect_aborted_transactions(m1 + 1, f3) == []
    assert log.collect_aborted_transactions(m1, f3) == [AbortedTxn(1, first1, m1, first2)]
    log.close()


def test_refusals_write_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **CFG)
    with pytest.raises(TransactionalIdAuthorizationError) as e1:
        log.append(tbatch(1, 0))  # no transactional id behind the request
    assert kafka_code(e1.value) == 53
    with pytest.raises(InvalidRecordError):  # clients never write markers
        log.append(build_marker_batch(EndTxnMarker(COMMIT, 0), producer_id=1, producer_epoch=0, timestamp=1))
    bad = bytearray(tbatch(1, 0))
    struct.pack_into(">q", bad, 43, -1)  # transactional without a producer id
    struct.pack_into(">I", bad, 17, compute_crc(bad, 0, len(bad)))
    with pytest.raises(InvalidRecordError):
        log.append(bytes(bad), transactional=True)
    assert log.log_end_offset == 0
    log.append(tbatch(1, 0, epoch=1), transactional=True)
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError) as e2:
        log.append(tbatch(1, 2, epoch=1, transactional=False))
    assert kafka_code(e2.value) == 48
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(1, 0, COMMIT, 5)
    log.append_marker(1, 1, COMMIT, 5)
    log.append(tbatch(1, 2, epoch=1), transactional=True)
    end = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError) as e3:
        log.append_marker(1, 1, ABORT, 4)
    assert kafka_code(e3.value) == 52
    assert log.log_end_offset == end and ongoing(log) == [(end - 2, 1)]
    # A bumped epoch (KIP-360) continues the transaction; its marker ends it.
    log.append(tbatch(1, 0, epoch=2), transactional=True)
    log.append_marker(1, 2, ABORT, 5)
    assert aborted(log) == [AbortedTxn(1, end - 2, end + 2, end + 3)]
    log.close()


def test_coordinator_origin_batches_skip_sequence_checks(tmp_path: Path) -> None:
    """The group coordinator's transactional offsets (TxnOffsetCommit) carry the producer's
    id and epoch with NO_SEQUENCE, as Kafka writes them (origin COORDINATOR): accepted
    without a transactional id, never taken for duplicates, checked for the epoch only."""
    log = open_log(tmp_path / "t-0", **CFG)
    coord = tbatch(7, -1, epoch=3)
    with pytest.raises(InvalidRecordError):  # from a client, a producer id needs a sequence
        log.append(coord, transactional=True)
    first = log.append(coord, origin_coordinator=True).first_offset
    # The same batch again (same epoch, same "sequence") is a new write, not a duplicate.
    again = log.append(coord, origin_coordinator=True)
    assert not again.duplicate and again.first_offset == first + 2
    assert ongoing(log) == [(first, 7)]
    with pytest.raises(InvalidProducerEpochError):  # a fenced producer's offsets
        log.append(tbatch(7, -1, epoch=2), origin_coordinator=True)
    log.append(tbatch(7, -1, epoch=4), origin_coordinator=True)  # a bumped epoch needs no sequence 0
    m = log.append_marker(7, 4, COMMIT, 0).first_offset
    assert ongoing(log) == [] and log.last_stable_offset == m + 1
    # A replica and a reopened log rebuild the same producer state.
    log.close()
    log = open_log(tmp_path / "t-0", **CFG)
    assert ongoing(log) == [] and log.producer_entries()[7].epoch == 4
    log.close()


def test_unreplicated_marker_keeps_lso_until_the_hw_passes_it(tmp_path: Path) -> None:
    cfg = LogConfig(**CFG)  # type: ignore[arg-type]
    log = Log.open(tmp_path / "t-0", cfg, topic="t", partition=0, hw_managed_externally=True)
    log.append(tbatch(1, 0), transactional=True)  # 0..1
    log.append_marker(1, 0, COMMIT, 0)  # 2
    log.set_high_watermark(2)
    assert log.last_stable_offset == 0  # decided, but the marker may still be lost
    log.set_high_watermark(3)
    assert log.last_stable_offset == 3 and log.first_unstable_offset is None
    log.append(tbatch(2, 0), transactional=True)  # 3..4
    log.set_high_watermark(4)
    assert log.last_stable_offset == 3
    log.close()


def test_follower_replays_markers_into_the_same_state(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l-0", **CFG)
    script(leader)
    follower = open_log(tmp_path / "f-0", **CFG)
    data = leader.read(0, 1 << 30, max_offset=leader.log_end_offset).read()
    follower.append_as_follower(data)
    assert aborted(follower) == aborted(leader) and aborted(leader)
    assert follower.last_stable_offset == leader.last_stable_offset < leader.log_end_offset
    assert ongoing(follower) == ongoing(leader)
    assert strip(follower.producer_entries()) == strip(leader.producer_entries())
    leader.close()
    follower.close()


def strip(entries: dict[int, ProducerEntry]) -> dict[int, tuple[object, ...]]:
    """Entries without their wall-clock field."""
    return {
        k: (e.epoch, e.batches, e.coordinator_epoch, e.current_txn_first_offset) for k, e in entries.items()
    }


def script(log: Log) -> None:
    """Transactions spanning several segments: two aborted, one committed, one ongoing."""
    seq = {1: 0, 2: 0, 3: 0}

    def data(pid: int, n: int = 3) -> None:
        log.append(tbatch(pid, seq[pid], n, pad=60), transactional=True)
        seq[pid] += n

    for _ in range(4):
        data(1)
        data(2)
    log.append_marker(1, 0, ABORT, 1)
    data(3)
    for _ in range(3):
        data(2)
    log.append_marker(2, 0, COMMIT, 1)
    data(1)
    log.append_marker(3, 0, ABORT, 1)
    data(2)
    log.append_marker(1, 0, ABORT, 1)
    data(3)  # ongoing


def state_of(log: Log) -> tuple[object, ...]:
    return (
        aborted(log),
        log.last_stable_offset,
        ongoing(log),
        strip(log.producer_entries()),
        log.log_end_offset,
    )


# --- restarts, crashes, truncation, rolls, retention -------------------------------------------------------


def test_open_transaction_spans_segments_and_survives_restarts(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    script(log)
    assert len(log.segments()) >= 4
    before = state_of(log)
    files = txnindex_files(d)
    assert files  # only the segments holding an ABORT marker have one
    assert len(files) < len(log.segments())
    first_aborted = before[0][0]  # type: ignore[index]
    # A fetch from a middle segment still finds the transaction that began earlier.
    mid = log.segments()[1].base_offset
    assert first_aborted in log.collect_aborted_transactions(mid, first_aborted.last_offset)
    log.close()
    # Clean restart: the close snapshot carries the ongoing transaction.
    log = open_log(d, clean=True, **CFG)
    assert state_of(log) == before
    log.close()
    # Unclean, no snapshots: everything is rebuilt from the log.
    for p in d.glob("*.snapshot"):
        p.unlink()
    os.unlink(d / "recovery-point")
    for name in files:
        os.unlink(d / name)
    log = open_log(d, **CFG)
    assert state_of(log) == before and txnindex_files(d) == files
    log.close(clean=False)


@pytest.mark.parametrize("clean", [True, False])
def test_crash_recovery_rebuilds_damaged_indexes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, clean: bool
) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    script(log)
    before = state_of(log)
    files = txnindex_files(d)
    log.close()
    # Below the recovery point: a torn tail and a flipped byte are found and rebuilt.
    with open(d / files[0], "r+b") as f:
        f.truncate(os.path.getsize(d / files[0]) - 3)
    with open(d / files[-1], "r+b") as f:
        f.seek(1)
        f.write(b"\x05")
    log = open_log(d, clean=clean, **CFG)
    assert state_of(log) == before
    assert [os.path.getsize(d / n) % 34 for n in files] == [0] * len(files)
    assert caplog.text.count("rebuilding transaction index") >= 1
    log.close()
    # After the recovery point (an unclean stop): every index is rebuilt from the log.
    for p in d.glob("*.snapshot"):
        p.unlink()
    (d / "recovery-point").write_text("0\n")
    for name in files:
        os.unlink(d / name)
    log = open_log(d, **CFG)
    assert state_of(log) == before and txnindex_files(d) == files
    log.close()


def test_old_snapshot_version_still_loads() -> None:
    # Version 1: no coordinator epoch, no transaction (written before transactions).
    body = struct.pack(">qhqb", 5, 1, 123, 1) + struct.pack(">iiqqq", 0, 1, 10, 11, 99)
    head = bytearray(struct.pack(">hIqi", 1, 0, 50, 1))
    struct.pack_into(">I", head, 2, crc32c(body, crc32c(bytes(head[6:]))))
    entries = ProducerSnapshotFile.decode(bytes(head + body), 50)
    assert entries == [ProducerEntry(5, 1, (BatchMetadata(0, 1, 10, 11, 99),), 123, -1, -1)]
    new = ProducerEntry(5, 1, (), 123, 7, 40)
    data = ProducerSnapshotFile.encode(50, [new])
    assert struct.unpack_from(">h", data)[0] == 2 and ProducerSnapshotFile.decode(data, 50) == [new]
    with pytest.raises(CorruptLogError):
        ProducerSnapshotFile.decode(ProducerSnapshotFile.encode(40, [new]), 40)  # txn at the offset


def test_truncation_below_a_marker_reopens_the_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **CFG)
    first = log.append(tbatch(1, 0), transactional=True).first_offset
    for i in range(1, 12):
        log.append(tbatch(1, 2 * i), transactional=True)
    marker = log.append_marker(1, 0, ABORT, 0).first_offset
    log.append(build_batch([RecordInput(b"k", b"after")]))
    assert aborted(log) == [AbortedTxn(1, first, marker, marker + 1)]
    log.truncate_to(marker)
    assert aborted(log) == [] and ongoing(log) == [(first, 1)]
    assert log.last_stable_offset == first
    log.append_marker(1, 0, COMMIT, 0)
    assert aborted(log) == [] and log.last_stable_offset == log.log_end_offset
    log.close()


def test_retention_deletes_indexes_with_their_segments(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **{**CFG, "retention_bytes": 1})
    script(log)
    files = txnindex_files(d)
    assert files
    log.apply_retention()
    kept = {f"{s.base_offset:020d}.txnindex" for s in log.segments()}
    assert set(txnindex_files(d)) <= kept
    assert set(files) - kept  # some were deleted
    assert all(t.last_offset >= log.segments()[0].base_offset for t in aborted(log))
    log.close()


def test_compaction_keeps_markers_and_index_entries(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **{**CFG, "cleanup_policy": "compact", "min_compaction_lag_ms": 0})
    script(log)
    log.roll()
    before = aborted(log)
    log.close()
    # Larger segments from now on: the cleaner merges several old ones into one.
    big = {**CFG, "cleanup_policy": "compact", "segment_bytes": 1 << 20}
    log = open_log(d, clean=True, **big)
    stats = LogCleaner().clean(log, force=True)
    assert stats is not None and stats.segments_in > stats.segments_out
    assert stats.records_kept < stats.records_read
    assert aborted(log) == before
    log.close()
    log = open_log(d, clean=True, **big)
    assert aborted(log) == before
    log.close()


# --- random interleavings against a model ------------------------------------------------------------------


@dataclass
class Model:
    next_offset: int = 0
    seq: dict[int, int] = field(default_factory=dict)
    ongoing: dict[int, int] = field(default_factory=dict)  # pid -> first offset
    aborted: list[AbortedTxn] = field(default_factory=list)

    def lso(self) -> int:
        return min(self.ongoing.values(), default=self.next_offset)


ops = st.lists(
    st.tuples(st.sampled_from(["data", "data", "data", "commit", "abort", "plain"]), st.integers(1, 3)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script_ops=ops)
def test_model_random_interleavings(
    tmp_path_factory: pytest.TempPathFactory, script_ops: list[tuple[str, int]]
) -> None:
    d = tmp_path_factory.mktemp("txn") / "t-0"
    log = open_log(d, **CFG)
    m = Model()
    for op, pid in script_ops:
        if op == "data":
            n = 1 + pid
            info = log.append(tbatch(pid, m.seq.get(pid, 0), n, pad=60), transactional=True)
            assert info.first_offset == m.next_offset
            m.ongoing.setdefault(pid, m.next_offset)
            m.seq[pid] = m.seq.get(pid, 0) + n
            m.next_offset += n
        elif op == "plain":
            log.append(build_batch([RecordInput(b"p", b"v" * 50)]))
            m.next_offset += 1
        else:
            at = log.append_marker(pid, 0, ABORT if op == "abort" else COMMIT, 0).first_offset
            assert at == m.next_offset
            first = m.ongoing.pop(pid, None)
            if first is not None and op == "abort":
                others = [f for p, f in m.ongoing.items() if p != pid]
                m.aborted.append(AbortedTxn(pid, first, at, min(others, default=at + 1)))
            m.next_offset += 1
        assert log.last_stable_offset == m.lso()
    assert aborted(log) == m.aborted
    assert ongoing(log) == sorted((f, p) for p, f in m.ongoing.items())
    # Any fetch range gets exactly the model's overlapping transactions (plus, as Kafka, at
    # most those of later markers before the search stops).
    for start in range(0, m.next_offset, 3):
        upper = min(m.next_offset, start + 7)
        got = log.collect_aborted_transactions(start, upper)
        want = [t for t in m.aborted if t.last_offset >= start and t.first_offset < upper]
        assert got == want
    before = state_of(log)
    # A replica copying the leader's batches ends in the same state.
    follower = open_log(d.parent / "f-0", **CFG)
    follower.append_as_follower(log.read(0, 1 << 30, max_offset=log.log_end_offset).read())
    assert state_of(follower) == before
    follower.close()
    log.close(clean=False)
    for p in d.glob("*.snapshot"):
        p.unlink()
    (d / "recovery-point").unlink(missing_ok=True)  # absent until a roll: 0 either way
    for p in d.glob("*.txnindex"):
        p.unlink()
    log = open_log(d, **CFG)
    assert state_of(log) == before
    log.close()


def test_torn_marker_at_the_log_end_reopens_its_transaction(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, **CFG)
    first = log.append(tbatch(1, 0), transactional=True).first_offset
    log.append(tbatch(2, 0), transactional=True)
    marker = log.append_marker(1, 0, ABORT, 0).first_offset
    assert aborted(log) == [AbortedTxn(1, first, marker, 2)]
    active = log.active_segment.log_path
    log.close(clean=False)
    with open(active, "r+b") as f:  # a flipped byte in the marker: its CRC fails
        f.seek(os.path.getsize(active) - 3)
        f.write(b"\xff")
    log = open_log(d, **CFG)
    assert log.log_end_offset == marker and aborted(log) == []
    assert ongoing(log) == [(first, 1), (2, 2)] and log.last_stable_offset == first
    log.close()


def test_log_start_past_an_ongoing_transaction_bounds_the_first_unstable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **CFG)
    first = log.append(tbatch(1, 0, 4), transactional=True).first_offset
    log.append(build_batch([RecordInput(b"k", b"plain")]))
    assert log.delete_records(first + 2) == first + 2
    # The transaction's first records are gone; it is still ongoing (its marker will come).
    assert log.first_unstable_offset == first + 2 == log.last_stable_offset
    assert ongoing(log) == [(first, 1)]
    log.append_marker(1, 0, ABORT, 0)
    assert log.first_unstable_offset is None and log.last_stable_offset == log.log_end_offset
    log.close()


# --- transaction verification (KIP-890 part 1) ---------------------------------------------------


def test_a_batch_beginning_a_transaction_needs_the_producers_current_guard(tmp_path: Path) -> None:
    log = open_log(tmp_path, **CFG)
    guard = log.start_txn_verification(7, 0)
    assert guard is not None and log.start_txn_verification(7, 0) is guard  # pipelined requests share it
    # Unverified (the leader found the transaction ongoing, but it was not): refused, nothing written.
    with pytest.raises(InvalidTxnStateError):
        log.append(tbatch(7, 0), transactional=True, verification={})
    assert log.log_end_offset == 0
    log.append(tbatch(7, 0), transactional=True, verification={7: guard})
    # Ongoing now: nothing to verify, and the guard is spent.
    assert log.start_txn_verification(7, 0) is None
    log.append(tbatch(7, 2), transactional=True, verification={})
    # A newer epoch is a new transaction to verify.
    assert log.start_txn_verification(7, 1) is not None
    log.append_marker(7, 0, ABORT, 0)
    assert ongoing(log) == []
    # The guard a request took before the marker is void after it: a late batch of the ended
    # transaction cannot open another one.
    stale = log.start_txn_verification(7, 0)
    assert stale is not None
    log.append_marker(7, 0, ABORT, 0)
    with pytest.raises(InvalidTxnStateError) as info:
        log.append(tbatch(7, 4), transactional=True, verification={7: stale})
    assert kafka_code(info.value) == 48  # INVALID_TXN_STATE
    # No transaction is left open for no marker to close: the last stable offset is the end.
    assert ongoing(log) == [] and log.last_stable_offset == log.log_end_offset
    # Unchecked callers (None: replicas, tests, verification disabled) append as before.
    log.append(tbatch(7, 4), transactional=True)
    assert ongoing(log) == [(log.log_end_offset - 2, 7)]
    log.close()


def test_transactional_producers_reads_the_batch_headers() -> None:
    from hot.record_validation import transactional_producers

    data = (
        tbatch(7, 0)
        + tbatch(9, 0, epoch=3)
        + tbatch(11, 0, transactional=False)
        + build_batch([RecordInput(None, b"x")])
    )
    assert transactional_producers(data) == {7: 0, 9: 3}
    assert transactional_producers(data[:20]) == {}  # a torn header: the append refuses it
