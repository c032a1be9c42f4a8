"""Leader-epoch cache (KIP-101/KIP-279): the checkpoint file format, Kafka's cache rules
(checked case by case and against a simple model with hypothesis), and how a Log keeps it:
leader and follower appends, becoming leader, retention, reopen, recovery and rebuild."""

from __future__ import annotations

import itertools
import os
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot.errors import CorruptLogError, FencedLeaderEpochError, InvalidRequestError
from hot.leader_epoch import (
    CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCache,
    decode,
    encode,
    end_offset_for,
)
from hot.log import Log
from tests.hot.hotlib import batch_at, open_log

E = EpochEntry
SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def cache_of(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(None, [E(e, s) for e, s in pairs])


def pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries()]


# --- the file --------------------------------------------------------------------------------


def test_file_format_is_kafkas() -> None:
    assert encode([E(0, 0), E(1, 100), E(7, 250)]) == b"0\n3\n0 0\n1 100\n7 250\n"
    assert encode([]) == b"0\n0\n"
    assert decode(b"0\n3\n0 0\n1 100\n7 250\n") == [E(0, 0), E(1, 100), E(7, 250)]
    assert decode(b"0\n0\n") == []


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated"),
        (b"0\n", "missing the version or the entry count"),
        (b"0\n1\n0 0", "truncated"),
        (b"1\n0\n", "unknown version"),
        (b"x\n0\n", "unknown version"),
        (b"0\n-1\n", "bad entry count"),
        (b"0\n2\n0 0\n", "entry count 2 but the file holds 1"),
        (b"0\n1\n0 0\n1 5\n", "entry count 1 but the file holds 2"),
        (b"0\n1\n0\n", "malformed entry"),
        (b"0\n1\n0  5\n", "malformed entry"),
        (b"0\n1\n0 5 6\n", "malformed entry"),
        (b"0\n1\n+1 5\n", "malformed entry"),
        (b"0\n1\n-1 5\n", "malformed entry"),
        (b"0\n1\n1 0x5\n", "malformed entry"),
        (b"0\n1\n2147483648 5\n", "malformed entry"),
        (b"0\n1\n1 99999999999999999999\n", "malformed entry"),
        (b"0\n2\n3 10\n3 20\n", "does not follow"),
        (b"0\n2\n3 10\n4 10\n", "does not follow"),
        (b"0\n2\n3 10\n2 20\n", "does not follow"),
        (b"0\n1\n\xff 1\n", "not ASCII"),
        (b"0\r\n0\r\n", "unknown version"),
    ],
)
def test_malformed_files_are_refused_precisely(data: bytes, reason: str) -> None:
    with pytest.raises(CorruptLogError, match=reason) as info:
        decode(data, "/p/leader-epoch-checkpoint")
    assert info.value.path == "/p/leader-epoch-checkpoint"


def test_every_change_rewrites_the_file_atomically(tmp_path: Path) -> None:
    path = str(tmp_path / CHECKPOINT_FILE)
    assert LeaderEpochCache.read(path) is None
    cache = LeaderEpochCache(path)
    assert cache.assign(0, 0) and cache.assign(3, 40)
    assert Path(path).read_bytes() == b"0\n2\n0 0\n3 40\n"
    assert not cache.assign(3, 55)  # later batch of the current epoch: nothing written
    assert cache.truncate_from_end(40)
    assert Path(path).read_bytes() == b"0\n1\n0 0\n"
    assert cache.truncate_from_start(10)
    assert LeaderEpochCache.read(path) == [E(0, 10)]
    assert not (tmp_path / (CHECKPOINT_FILE + ".tmp")).exists()
    assert cache.clear() and not os.path.exists(path)
    assert not cache.clear()


def test_constructor_and_assign_refuse_bad_entries() -> None:
    with pytest.raises(InvalidRequestError, match="not increasing"):
        cache_of((1, 5), (1, 6))
    with pytest.raises(InvalidRequestError, match="not increasing"):
        cache_of((1, 5), (2, 5))
    with pytest.raises(InvalidRequestError, match="negative"):
        cache_of((-1, 5))
    with pytest.raises(InvalidRequestError, match="invalid leader epoch entry"):
        cache_of().assign(-1, 0)
    with pytest.raises(InvalidRequestError, match="invalid leader epoch entry"):
        cache_of().assign(0, -3)


# --- Kafka's cache rules, case by case (LeaderEpochFileCacheTest) --------------------------


def test_latest_epoch_ends_at_the_log_end() -> None:
    cache = cache_of((2, 5), (3, 6), (4, 7))
    assert cache.end_offset_for(4, 8) == (4, 8)
    assert cache.latest_epoch == 4 and cache_of().latest_epoch == -1
    assert cache_of((2, 6)).end_offset_for(2, 7) == (2, 7)  # epochs need not start at 0


def test_earlier_epoch_ends_where_the_next_one_starts() -> None:
    cache = cache_of((0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(0, 30) == (0, 13)
    # An epoch this replica never saw: the largest one below it, and where that ended.
    assert cache.end_offset_for(1, 30) == (0, 13)
    assert cache.end_offset_for(2, 30) == (2, 17)
    assert cache.end_offset_for(3, 30) == (2, 17)
    assert cache.end_offset_for(4, 30) == (4, 30)


def test_epoch_before_the_first_answers_with_the_first_start_offset() -> None:
    # KIP-279 / KAFKA-7415: not undefined, so a follower can restart at the leader's history.
    assert cache_of((5, 11)).end_offset_for(4, 20) == (4, 11)
    assert cache_of((5, 11), (6, 15)).end_offset_for(0, 20) == (0, 11)


def test_undefined_answers() -> None:
    cache = cache_of((2, 100))
    assert cache.end_offset_for(3, 120) == (-1, -1)  # above every epoch
    assert cache.end_offset_for(-1, 120) == (-1, -1)
    assert cache.end_offset_for(-7, 120) == (-1, -1)
    assert cache_of().end_offset_for(0, 120) == (-1, -1)


def test_assign_ignores_later_batches_of_the_current_epoch() -> None:
    cache = cache_of()
    assert cache.assign(2, 6)
    assert not cache.assign(2, 6)
    assert not cache.assign(2, 10)
    assert pairs(cache) == [(2, 6)]


def test_assign_same_epoch_earlier_start_moves_it() -> None:
    cache = cache_of((5, 11))
    assert cache.assign(5, 10)
    assert pairs(cache) == [(5, 10)]


def test_assign_keeps_start_offsets_increasing() -> None:
    cache = cache_of((2, 9))
    assert cache.assign(3, 9)  # a new leader's entry at the same log end replaces it
    assert pairs(cache) == [(3, 9)]
    cache = cache_of((2, 9))
    assert cache.assign(3, 5)
    assert pairs(cache) == [(3, 5)]


def test_assign_older_epoch_drops_the_contradicted_entries() -> None:
    cache = cache_of((1, 5), (2, 6))
    assert cache.assign(1, 7)
    assert pairs(cache) == [(1, 7)]
    cache = cache_of((1, 5), (3, 8), (4, 12))
    assert cache.assign(2, 9)
    assert pairs(cache) == [(1, 5), (2, 9)]


def test_assign_if_newer_only_extends() -> None:
    cache = cache_of((1, 5), (3, 8))
    assert not cache.assign_if_newer(2, 9)
    assert not cache.assign_if_newer(3, 9)
    assert not cache.assign_if_newer(-1, 9)
    assert cache.assign_if_newer(4, 9)
    assert pairs(cache) == [(1, 5), (3, 8), (4, 9)]


def test_truncate_from_end() -> None:
    cache = cache_of((2, 6), (3, 8), (4, 11))
    assert not cache.truncate_from_end(12)
    assert not cache.truncate_from_end(11 + 1)
    assert cache.truncate_from_end(9)  # inside epoch 3: epoch 4 goes
    assert pairs(cache) == [(2, 6), (3, 8)]
    assert cache.truncate_from_end(8)  # exactly where epoch 3 started
    assert pairs(cache) == [(2, 6)]
    assert cache.truncate_from_end(0)
    assert pairs(cache) == []


def test_truncate_from_start() -> None:
    cache = cache_of((2, 6), (3, 8), (4, 11))
    assert not cache.truncate_from_start(5)  # before every entry
    assert not cache.truncate_from_start(6)  # exactly the first start
    assert cache.truncate_from_start(9)  # inside epoch 3: it now starts at 9
    assert pairs(cache) == [(3, 9), (4, 11)]
    assert cache.truncate_from_start(11)
    assert pairs(cache) == [(4, 11)]
    assert cache.truncate_from_start(15)  # past every start: the latest epoch is kept
    assert pairs(cache) == [(4, 15)]


def test_epoch_for_offset() -> None:
    cache = cache_of((2, 6), (3, 8), (4, 11))
    assert [cache.epoch_for_offset(o) for o in (0, 5, 6, 7, 8, 10, 11, 99)] == [-1, -1, 2, 2, 3, 3, 4, 4]


def test_rebuild_from_batches() -> None:
    batches = [(-1, 0), (0, 1), (0, 4), (2, 7), (1, 9), (2, 12), (5, 13), (5, 20)]
    assert pairs(LeaderEpochCache.rebuild(None, batches)) == [(0, 1), (2, 7), (5, 13)]
    assert pairs(LeaderEpochCache.rebuild(None, [])) == []


# --- hypothesis: the cache against a plain-list model ------------------------------------------

Model = list[tuple[int, int]]


def model_assign(m: Model, epoch: int, start: int) -> Model:
    if m and m[-1][0] == epoch and start >= m[-1][1]:
        return m
    return [x for x in m if x[0] < epoch and x[1] < start] + [(epoch, start)]


def model_truncate_from_end(m: Model, end: int) -> Model:
    return [x for x in m if x[1] < end]


def model_truncate_from_start(m: Model, start: int) -> Model:
    below = [x for x in m if x[1] <= start]
    if not below:
        return m
    return [(below[-1][0], start)] + [x for x in m if x[1] > start]


def model_end_offset_for(m: Model, requested: int, leo: int) -> tuple[int, int]:
    if requested < 0 or not m:
        return -1, -1
    if m[-1][0] == requested:
        return requested, leo
    higher = [x for x in m if x[0] > requested]
    lower = [x for x in m if x[0] <= requested]
    if not higher:
        return -1, -1
    if not lower:
        return requested, higher[0][1]
    return lower[-1][0], higher[0][1]


small = st.integers(0, 12)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), small, st.integers(0, 60)),
        st.tuples(st.just("end"), st.integers(0, 70), st.just(0)),
        st.tuples(st.just("start"), st.integers(0, 70), st.just(0)),
        st.tuples(st.just("clear"), st.just(0), st.just(0)),
    ),
    max_size=25,
)


def check_against_model(cache: LeaderEpochCache, model: Model) -> None:
    assert pairs(cache) == model
    for x, y in itertools.pairwise(model):
        assert x[0] < y[0] and x[1] < y[1]
    leo = (model[-1][1] if model else 0) + 3
    for requested in range(-1, 14):
        assert cache.end_offset_for(requested, leo) == model_end_offset_for(model, requested, leo)


@settings(SETTINGS, max_examples=300)
@given(ops=OPS)
def test_cache_matches_the_model(ops: list[tuple[str, int, int]]) -> None:
    cache = LeaderEpochCache(None)
    model: Model = []
    for op, a, b in ops:
        if op == "assign":
            changed = cache.assign(a, b)
            new = model_assign(model, a, b)
        elif op == "end":
            changed = cache.truncate_from_end(a)
            new = model_truncate_from_end(model, a)
        elif op == "start":
            changed = cache.truncate_from_start(a)
            new = model_truncate_from_start(model, a)
        else:
            changed = cache.clear()
            new = []
        assert changed == (new != model)
        model = new
        check_against_model(cache, model)


@settings(SETTINGS, max_examples=40)
@given(ops=OPS)
def test_file_always_holds_what_memory_holds(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]]
) -> None:
    path = str(tmp_path_factory.mktemp("epochs") / CHECKPOINT_FILE)
    cache = LeaderEpochCache(path)
    for op, a, b in ops:
        if op == "assign":
            cache.assign(a, b)
        elif op == "end":
            cache.truncate_from_end(a)
        elif op == "start":
            cache.truncate_from_start(a)
        else:
            cache.clear()
        stored = LeaderEpochCache.read(path)
        assert (stored or []) == list(cache.entries())


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    """A log as (epoch, first offset, next offset) runs with increasing epochs."""
    epochs = sorted(draw(st.sets(st.integers(0, 15), min_size=1, max_size=6)))
    off = draw(st.integers(0, 5))
    out = []
    for e in epochs:
        n = draw(st.integers(1, 6))
        out.append((e, off, off + n))
        off += n
    return out


@settings(SETTINGS, max_examples=200)
@given(history=histories(), requested=st.integers(-1, 17))
def test_end_offset_for_means_what_kip_279_says(history: list[tuple[int, int, int]], requested: int) -> None:
    """Against the log itself: the largest epoch <= requested present in the log, and the
    first offset written in a later epoch (the log end for the latest)."""
    entries = [E(e, first) for e, first, _ in history]
    leo = history[-1][2]
    epoch, end = end_offset_for(entries, requested, leo)
    known = [e for e, _, _ in history if e <= requested]
    if requested < 0 or requested > history[-1][0]:
        assert (epoch, end) == (-1, -1)
    elif not known:
        assert (epoch, end) == (requested, history[0][1])
    else:
        assert epoch == max(known)
        later = [first for e, first, _ in history if e > epoch]
        assert end == (later[0] if later else leo)


# --- the cache of a Log ---------------------------------------------------------------------------


def with_epoch(batch: bytes, base_offset: int, epoch: int) -> bytes:
    """A batch as a leader wrote it: baseOffset and partitionLeaderEpoch set (outside the CRC)."""
    b = bytearray(batch)
    struct.pack_into(">q", b, 0, base_offset)
    struct.pack_into(">i", b, 12, epoch)
    return bytes(b)


def fill(log: Log, batches: int, epoch: int, records: int = 3) -> None:
    for _ in range(batches):
        log.append(batch_at(log.log_end_offset, records), leader_epoch=epoch)


def test_leader_appends_record_each_new_epoch_at_its_first_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval", segment_bytes=1024)
    fill(log, 3, 0)
    fill(log, 2, 4)
    fill(log, 4, 9)
    assert log.leader_epochs() == (E(0, 0), E(4, 9), E(9, 15))
    assert log.latest_epoch == 9
    assert (tmp_path / "t-0" / CHECKPOINT_FILE).read_bytes() == b"0\n3\n0 0\n4 9\n9 15\n"
    assert log.end_offset_for_epoch(4) == (4, 15)
    assert log.end_offset_for_epoch(5) == (4, 15)
    assert log.end_offset_for_epoch(9) == (9, 27)
    assert log.epoch_for_offset(14) == 4
    with pytest.raises(FencedLeaderEpochError, match="older than epoch 9"):
        log.append(batch_at(27, 1), leader_epoch=8)
    assert log.log_end_offset == 27  # nothing written
    log.close()
    for clean in (True, False):
        again = open_log(tmp_path / "t-0", clean=clean)
        assert again.leader_epochs() == (E(0, 0), E(4, 9), E(9, 15))
        again.close()


def test_new_leader_records_its_epoch_before_writing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    fill(log, 2, 1)
    log.assign_leader_epoch(5)
    assert log.leader_epochs() == (E(1, 0), E(5, 6))
    # It can answer for epochs it never saw (KIP-279): epoch 3 ended where 5 starts.
    assert log.end_offset_for_epoch(3) == (1, 6)
    assert log.end_offset_for_epoch(5) == (5, 6)
    log.assign_leader_epoch(5)  # idempotent
    fill(log, 1, 5)
    assert log.leader_epochs() == (E(1, 0), E(5, 6))
    with pytest.raises(FencedLeaderEpochError):
        log.assign_leader_epoch(4)
    log.close()


def test_follower_appends_take_epochs_from_the_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    data = (
        with_epoch(batch_at(0, 2), 0, 3)
        + with_epoch(batch_at(2, 2), 2, 3)
        + with_epoch(batch_at(4, 1), 4, 6)
        + with_epoch(batch_at(5, 3), 5, -1)  # written without an epoch: not recorded
    )
    log.append_as_follower(data)
    log.append_as_follower(with_epoch(batch_at(8, 2), 8, 7))
    assert log.leader_epochs() == (E(3, 0), E(6, 4), E(7, 8))
    log.close(clean=False)
    again = open_log(tmp_path / "t-0")
    assert again.leader_epochs() == (E(3, 0), E(6, 4), E(7, 8))
    again.close()


def test_a_failed_follower_append_records_no_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    log.append_as_follower(with_epoch(batch_at(0, 2), 0, 1))
    with pytest.raises(Exception, match="non-monotonic"):
        log.append_as_follower(with_epoch(batch_at(2, 1), 2, 2) + with_epoch(batch_at(9, 1), 9, 3))
    assert log.leader_epochs() == (E(1, 0),)
    log.close()


def test_missing_or_damaged_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, flush_mode="interval", segment_bytes=1024)
    fill(log, 10, 0)
    fill(log, 10, 2)
    fill(log, 10, 3)
    expected = log.leader_epochs()
    assert len(log.segments()) > 3 and expected == (E(0, 0), E(2, 30), E(3, 60))
    log.close()
    for damage in (None, b"", b"0\n3\n0 0\n2 30\n", b"garbage\n", b"0\n2\n5 1\n4 2\n"):
        path = d / CHECKPOINT_FILE
        if damage is None:
            path.unlink()
        else:
            path.write_bytes(damage)
        for clean in (True, False):
            again = open_log(d, clean=clean)
            assert again.leader_epochs() == expected, damage
            assert LeaderEpochCache.read(str(path)) == list(expected)
            again.close()


def test_an_empty_log_writes_no_checkpoint_until_its_first_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    log.close(clean=False)
    log = open_log(tmp_path / "t-0", flush_mode="interval")
    assert not (tmp_path / "t-0" / CHECKPOINT_FILE).exists()
    assert log.leader_epochs() == () and log.end_offset_for_epoch(0) == (-1, -1)
    log.append(batch_at(0, 1))  # single node: epoch 0
    assert log.leader_epochs() == (E(0, 0),)
    log.close()


def test_open_drops_entries_beyond_the_log_end(tmp_path: Path) -> None:
    """An entry written before its batches became durable (crash): cut to the log end."""
    d = tmp_path / "t-0"
    log = open_log(d, flush_mode="interval")
    fill(log, 3, 1)
    log.close()
    (d / CHECKPOINT_FILE).write_bytes(encode([E(1, 0), E(4, 9), E(6, 12)]))
    again = open_log(d)
    assert again.leader_epochs() == (E(1, 0),)
    assert LeaderEpochCache.read(str(d / CHECKPOINT_FILE)) == [E(1, 0)]
    again.close()


def test_unclean_recovery_adds_epochs_of_recovered_batches(tmp_path: Path) -> None:
    """Entries the file lacks for batches that survived: recovery scans add them."""
    d = tmp_path / "t-0"
    log = open_log(d, flush_mode="interval")
    fill(log, 3, 1)
    fill(log, 2, 2)
    log.close(clean=False)
    (d / CHECKPOINT_FILE).write_bytes(encode([E(1, 0)]))
    (d / "recovery-point").write_bytes(b"0\n")
    again = open_log(d)
    assert again.leader_epochs() == (E(1, 0), E(2, 9))
    again.close()


def test_torn_tail_takes_its_epoch_with_it(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, flush_mode="interval")
    fill(log, 3, 1)
    fill(log, 1, 2)
    seg = log.active_segment.log_path
    log.close(clean=False)
    size = os.path.getsize(seg)
    with open(seg, "r+b") as f:
        f.truncate(size - 5)  # the epoch-2 batch is torn
    again = open_log(d)
    assert again.log_end_offset == 9
    assert again.leader_epochs() == (E(1, 0),)
    again.close()


def test_log_start_moves_trim_the_cache(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, flush_mode="interval", segment_bytes=1024)
    fill(log, 10, 0)
    fill(log, 10, 1)
    fill(log, 10, 2)
    log.delete_records(20)
    assert log.leader_epochs() == (E(0, 20), E(1, 30), E(2, 60))
    log.delete_records(45)
    assert log.leader_epochs() == (E(1, 45), E(2, 60))
    log.advance_log_start_offset(61)
    assert log.leader_epochs() == (E(2, 61),)
    # Retention of whole segments moves the log start too.
    log.apply_retention(now_ms=0)
    start = log.log_start_offset
    assert log.leader_epochs() == (E(2, max(61, start)),)
    log.close()
    again = open_log(d)
    assert again.leader_epochs() == (E(2, max(61, start)),)
    again.close()


def test_rebuild_covers_every_local_segment(tmp_path: Path) -> None:
    """A directory written before the cache existed (no checkpoint): epoch 0 everywhere."""
    d = tmp_path / "t-0"
    log = open_log(d, flush_mode="interval", segment_bytes=1024)
    fill(log, 20, 0)
    log.close()
    (d / CHECKPOINT_FILE).unlink()
    copy = tmp_path / "copy"
    shutil.copytree(d, copy)
    again = open_log(copy, clean=True)
    assert again.leader_epochs() == (E(0, 0),)
    again.close()


def test_an_epoch_entry_lost_in_a_crash_comes_back_from_the_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint is written without fsync (KAFKA-15046): a crash may bring back an
    older version, or an empty file. Recovery reads the epochs of every batch above the
    persisted recovery point, and the file is fsynced before the recovery point passes
    an entry (a roll persists it), so the entries come back either way."""
    fsynced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsynced.append(fd), real(fd))[1])
    d = tmp_path / "t-0"
    log = open_log(d, flush_mode="interval", segment_bytes=1024)
    fill(log, 2, 1)
    old = (d / CHECKPOINT_FILE).read_bytes()
    fsynced.clear()
    log.assign_leader_epoch(5)
    assert fsynced == []  # no fsync on the way to leadership
    fill(log, 2, 5)
    log.close(clean=False)
    for lost in (old, b""):  # the old version came back, or an empty file
        (d / CHECKPOINT_FILE).write_bytes(lost)
        again = open_log(d, flush_mode="interval", segment_bytes=1024)
        assert again.leader_epochs() == (E(1, 0), E(5, 6))
        again.close(clean=False)

    # A roll persists the recovery point past the entry: the file is fsynced first.
    log = open_log(d, flush_mode="interval", segment_bytes=1024)
    log.assign_leader_epoch(7)
    assert log._epochs._unsynced
    fill(log, 40, 7)  # several rolls
    assert not log._epochs._unsynced
    log.close()
    again = open_log(d, clean=True)
    assert again.leader_epochs()[-1] == E(7, 12)
    again.close()


def test_a_new_leaders_entry_at_the_log_end_is_written_with_the_recovery_point(tmp_path: Path) -> None:
    """Becoming leader creates no file (issue 35: thousands of new partitions at once):
    the entry is written by the sync that precedes the recovery point, which is enough
    because opening a log drops every entry starting at or beyond its log end."""
    d = tmp_path / "t-0"
    log = open_log(d, flush_mode="interval", segment_bytes=1024)
    log.assign_leader_epoch(3)
    assert log.leader_epochs() == (E(3, 0),)
    assert not (d / CHECKPOINT_FILE).exists()
    log.close(clean=False)  # a crash before any batch of the epoch
    # Had the entry reached the file, opening would drop it all the same:
    (d / CHECKPOINT_FILE).write_bytes(encode([E(3, 0)]))
    again = open_log(d, flush_mode="interval", segment_bytes=1024)
    assert again.leader_epochs() == ()
    again.assign_leader_epoch(4)
    fill(again, 40, 4)  # rolls: the recovery point passes the entry, the file has it first
    assert LeaderEpochCache.read(str(d / CHECKPOINT_FILE)) == [E(4, 0)]
    again.assign_leader_epoch(6)  # at the log end again: not written yet
    assert LeaderEpochCache.read(str(d / CHECKPOINT_FILE)) == [E(4, 0)]
    again.close()  # a clean close persists the recovery point: written
    assert LeaderEpochCache.read(str(d / CHECKPOINT_FILE)) == [E(4, 0), E(6, 120)]
    for clean in (True, False):
        reopened = open_log(d, clean=clean)
        assert reopened.leader_epochs() == (E(4, 0),)  # 6 starts at the log end: dropped
        reopened.close()
