"""Log compaction (hot.cleaner) on real logs in temporary directories."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot.batch import HEADER, Compression
from hot.cleaner import (
    OFFSET_MAP_ENTRY_BYTES,
    CleanerConfig,
    LogCleaner,
    OffsetMap,
    batch_records,
    rebuild_batch,
)
from hot.config import LogConfig
from hot.errors import InvalidConfigError, InvalidRecordError
from hot.log import Log
from hot.records import RecordInput, build_batch, decode_batch, decode_batches

NOW = 2_000_000_000_000  # fixed wall clock (ms, 2033) handed to the cleaner: after any record
COMPACT = {
    "cleanup_policy": "compact",
    "segment_bytes": 1024,
    "min_cleanable_dirty_ratio": 0.0,
    "delete_retention_ms": 1000,
    "flush_mode": "interval",
}

Write = tuple[int, int | None]  # key id, value id (None = tombstone)


def open_log(path: Path, **overrides: object) -> Log:
    cfg: dict[str, object] = {**COMPACT, **overrides}
    return Log.open(path, LogConfig(**cfg), topic="t", partition=0)  # type: ignore[arg-type]


def key(k: int) -> bytes:
    return b"key-%d" % k


def value(k: int, v: int) -> bytes:
    return b"value-%d-%d-" % (k, v) + b"x" * 20


def append(
    log: Log, writes: list[Write], per_batch: int, compression: Compression = Compression.NONE
) -> None:
    for i in range(0, len(writes), per_batch):
        chunk = writes[i : i + per_batch]
        recs = [
            RecordInput(key(k), None if v is None else value(k, v), timestamp=NOW - 10_000) for k, v in chunk
        ]
        log.append(build_batch(recs, compression=compression))


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        r = log.read(offset, 1 << 20)
        if not r.regions:
            break
        for b in decode_batches(r.read()):
            out.extend((rec.offset, rec.key, rec.value) for rec in b.records if rec.offset >= offset)
        offset = r.next_offset
    return out


def clean_until_done(log: Log, now_ms: int = NOW) -> None:
    cleaner = LogCleaner(CleanerConfig())
    for _ in range(10):
        if cleaner.clean(log, now_ms) is None:
            return


def check_compacted(
    before: list[tuple[int, bytes | None, bytes | None]],
    after: list[tuple[int, bytes | None, bytes | None]],
    active_base: int,
) -> None:
    orig = {o: (k, v) for o, k, v in before}
    # A subsequence of the original: same records at the same offsets, in order.
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    for o, k, v in after:
        assert orig[o] == (k, v)
    # The latest record of every key survives at its original offset (tombstones may go).
    latest: dict[bytes | None, int] = {}
    for o, k, _ in before:
        latest[k] = o
    kept = {o for o, _, _ in after}
    for o in latest.values():
        if orig[o][1] is not None or o >= active_base:
            assert o in kept, f"latest record at {o} is gone"
    # Below the active segment nothing but latest records (and tombstones) remains.
    for o, k, _ in after:
        if o < active_base:
            assert latest[k] == o, f"superseded record at {o} survived"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(
        st.tuples(st.integers(0, 12), st.one_of(st.none(), st.integers(0, 1000))), min_size=1, max_size=200
    ),
    per_batch=st.integers(1, 7),
    compression=st.sampled_from([Compression.NONE, Compression.ZSTD]),
    reopen=st.booleans(),
)
def test_property_latest_value_per_key_survives(
    writes: list[Write], per_batch: int, compression: Compression, reopen: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t-0"
        log = open_log(path)
        try:
            append(log, writes, per_batch, compression)
            log.roll()
            before = read_all(log)
            hw, leo, lso = log.high_watermark, log.log_end_offset, log.log_start_offset
            active_base = log.active_segment.base_offset
            # Two passes: the second, much later, drops tombstones cleaned by the first.
            clean_until_done(log)
            check_compacted(before, read_all(log), active_base)
            clean_until_done(log, NOW + 10_000)
            after = read_all(log)
            check_compacted(before, after, active_base)
            if reopen:
                log.close()
                log = open_log(path)
                assert read_all(log) == after
                log.close()
                log = Log.open(path, LogConfig(**COMPACT), topic="t", partition=0, clean_shutdown=False)  # type: ignore[arg-type]
                assert read_all(log) == after
            assert (log.high_watermark, log.log_end_offset, log.log_start_offset) == (hw, leo, lso)
        finally:
            log.close()


def test_tombstones_survive_delete_retention_then_go(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", delete_retention_ms=60_000)
    try:
        append(log, [(1, 1), (2, 1), (1, None), (3, 1)], 1)
        log.roll()
        cleaner = LogCleaner()
        assert cleaner.clean(log, NOW, force=True) is not None
        assert [(o, v) for o, _, v in read_all(log)] == [(1, value(2, 1)), (2, None), (3, value(3, 1))]
        # Cleaned at NOW (its mtime): still there within delete.retention.ms.
        cleaner.clean(log, NOW + 30_000, force=True)
        assert any(v is None for _, _, v in read_all(log))
        cleaner.clean(log, NOW + 120_000, force=True)
        assert [o for o, _, _ in read_all(log)] == [1, 3]
    finally:
        log.close()


def test_active_segment_and_hw_untouched(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1 << 20)
    try:
        append(log, [(1, i) for i in range(10)], 1)  # all in the active segment
        before = read_all(log)
        assert LogCleaner().clean(log, NOW) is None
        assert read_all(log) == before
    finally:
        log.close()


def test_idempotent_producer_last_batch_header_kept(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        pid, epoch = 7, 0
        # Producer 7 writes key 1 twice; then a plain producer overwrites key 1.
        for seq in range(2):
            log.append(
                build_batch(
                    [RecordInput(key(1), value(1, seq))],
                    producer_id=pid,
                    producer_epoch=epoch,
                    base_sequence=seq,
                )
            )
        log.append(build_batch([RecordInput(key(1), value(1, 99))]))
        log.append(build_batch([RecordInput(key(2), value(2, 0))]))
        log.roll()
        LogCleaner().clean(log, NOW, force=True)
        raw = log.read(0, 1 << 20).read()
        batches = decode_batches(raw)
        # The batch holding producer 7's last sequence stays, empty, with its header.
        b = next(b for b in batches if b.producer_id == pid)
        assert (b.base_offset, b.base_sequence, len(b.records)) == (1, 1, 0)
        assert all(b.producer_id != pid or b.base_offset == 1 for b in batches)
        entries = log.producer_entries()
        log.close()
        log = Log.open(tmp_path / "t-0", LogConfig(**COMPACT), topic="t", partition=0)  # type: ignore[arg-type]
        assert log.producer_entries()[pid].last_seq == entries[pid].last_seq == 1
        # The next sequence is accepted, a duplicate of the old one would be refused.
        log.append(
            build_batch([RecordInput(key(3), b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=2)
        )
    finally:
        log.close()


def test_rebuild_batch_keeps_header_fields() -> None:
    raw = build_batch(
        [RecordInput(key(i), value(i, 0) if i != 3 else None, timestamp=1000 + i) for i in range(5)],
        base_offset=100,
        producer_id=3,
        producer_epoch=2,
        base_sequence=40,
        compression=Compression.LZ4,
        partition_leader_epoch=9,
    )
    src = decode_batch(raw)
    data, recs = batch_records(raw)
    assert [(r.key, r.tombstone, r.offset_delta) for r in recs] == [(key(i), i == 3, i) for i in range(5)]
    out = decode_batch(rebuild_batch(HEADER.unpack_from(raw), data, [recs[1], recs[3]]))
    h, s = out.header, src.header
    assert (h.base_offset, h.last_offset_delta, h.producer_id, h.producer_epoch, h.base_sequence) == (
        s.base_offset,
        s.last_offset_delta,
        s.producer_id,
        s.producer_epoch,
        s.base_sequence,
    )
    assert (h.partition_leader_epoch, h.compression, h.base_timestamp) == (9, Compression.LZ4, 1000)
    assert out.records == (src.records[1], src.records[3])
    assert h.max_timestamp == 1003
    empty = decode_batch(rebuild_batch(HEADER.unpack_from(raw), b"", ()))
    assert (len(empty.records), empty.header.last_offset_delta, empty.header.base_sequence) == (0, 4, 40)


def test_offset_map_full_cleans_prefix(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    try:
        append(log, [(k, 0) for k in range(60)] + [(k, 1) for k in range(60)], 3)
        log.roll()
        before = read_all(log)
        cleaner = LogCleaner(
            CleanerConfig(dedupe_buffer_size=OFFSET_MAP_ENTRY_BYTES * 40)
        )  # 40 keys per pass
        stats = cleaner.clean(log, NOW, force=True)
        assert stats is not None and 0 < stats.cleaned_to < log.log_end_offset
        for _ in range(20):
            if (
                cleaner.clean(log, NOW, force=True) is None
                or log.first_dirty_offset >= log.active_segment.base_offset
            ):
                break
        check_compacted(before, read_all(log), log.active_segment.base_offset)
    finally:
        log.close()


def test_offset_map_undo() -> None:
    m = OffsetMap(OFFSET_MAP_ENTRY_BYTES * 2)
    a, b, c = (OffsetMap.digest(x) for x in (b"a", b"b", b"c"))
    assert m.put(a, 1) == -1 and m.put(b, 2) == -1 and m.put(a, 3) == 1
    assert m.put(c, 4) is None
    m.undo([(a, 1), (b, -1)])
    assert (m.get(a), m.get(b), len(m)) == (1, -1, 1)


def test_dirty_ratio_and_lag_gate(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", min_cleanable_dirty_ratio=0.5, min_compaction_lag_ms=5_000)
    try:
        append(log, [(1, i) for i in range(30)], 1)
        log.roll()
        cleaner = LogCleaner()
        # Records are 10 s old at NOW: past the 5 s lag, fully dirty.
        assert cleaner.needs_cleaning(log, NOW)
        assert not cleaner.needs_cleaning(log, NOW - 10_000)  # within the lag
        assert cleaner.clean(log, NOW) is not None
        assert not cleaner.needs_cleaning(log, NOW)  # now entirely clean
    finally:
        log.close()


def test_config_validation() -> None:
    c = LogConfig.from_kafka(
        {
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.1",
            "min.compaction.lag.ms": "10",
            "max.compaction.lag.ms": "100",
            "delete.retention.ms": "0",
        }
    )
    assert c.compact and c.delete and c.min_cleanable_dirty_ratio == 0.1
    assert c.to_kafka()["min.cleanable.dirty.ratio"] == "0.1"
    for bad in (
        {"min.cleanable.dirty.ratio": "1.5"},
        {"min.cleanable.dirty.ratio": "x"},
        {"max.compaction.lag.ms": "0"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
        {"delete.retention.ms": "-1"},
    ):
        with pytest.raises(InvalidConfigError):
            LogConfig.from_kafka(bad)


def test_compact_only_topic_has_no_time_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", retention_ms=1)
    try:
        append(log, [(1, 0), (2, 0)], 1)
        log.roll()
        assert log.apply_retention(NOW) == []
    finally:
        log.close()


def test_stale_cleaned_and_swap_files(tmp_path: Path) -> None:
    """A crash before the commit point: `.cleaned` files and index `.swap` files without
    their `.log.swap` are discarded and the old segments serve."""
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, [(1, i) for i in range(20)], 1)
    log.roll()
    before = read_all(log)
    log.close()
    name = f"{0:020d}"
    for suffix in (".log.cleaned", ".index.cleaned", ".index.swap", ".timeindex.swap"):
        (path / (name + suffix)).write_bytes(b"garbage")
    log = open_log(path)
    try:
        assert read_all(log) == before
        assert not [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap"))]
    finally:
        log.close()


def test_keyless_record_refused_by_compacted_topic(tmp_path: Path) -> None:
    from hot.errors import InvalidRecordError

    log = open_log(tmp_path / "t-0")
    try:
        with pytest.raises(InvalidRecordError, match="without a key"):
            log.append(build_batch([RecordInput(b"k", b"v"), RecordInput(None, b"v")]))
        assert log.log_end_offset == 0
        log.append(build_batch([RecordInput(b"k", None)]))  # a keyed tombstone is fine
    finally:
        log.close()


def test_tiered_compacted_log_uploads_only_cleaned_segments(tmp_path: Path) -> None:
    """With a cleaner attached, a compacted tiered log hands the uploader only segments
    below the cleaner checkpoint, and the cleaner never rewrites a segment handed out."""
    log = open_log(tmp_path / "t-0", remote_storage_enable=True)
    try:
        log.cleaner_attached = True
        append(log, [(k % 3, k) for k in range(40)], 1)
        log.roll()
        assert log.upload_waits_for_cleaner
        assert log.sealed_segments_for_upload(log.high_watermark) == []
        cleaner = LogCleaner()
        assert cleaner.needs_cleaning(log, NOW)  # uploads wait: due whatever the ratio
        assert cleaner.clean(log, NOW) is not None
        handed = log.sealed_segments_for_upload(log.high_watermark)
        assert handed and handed[-1].next_offset == log.first_dirty_offset
        # New dirty data: the cleaner works only above what the uploader was given.
        append(log, [(k % 3, k) for k in range(40, 60)], 1)
        log.roll()
        view = log.cleaner_view(NOW)
        assert view.segments and all(s.base_offset >= handed[-1].next_offset for s in view.segments)
        assert cleaner.clean(log, NOW) is not None
        assert all(s in log.segments() for s in handed)  # the same objects: not rewritten
    finally:
        log.close()


def test_max_compaction_lag_forces_cleaning_below_the_ratio(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=60_000)
    try:
        append(log, [(k, 0) for k in range(40)], 1)
        log.roll()
        cleaner = LogCleaner()
        assert cleaner.clean(log, NOW) is not None  # fully dirty: ratio 1.0 reached
        append(log, [(1, 1)], 1)  # records written at NOW - 10 s
        log.roll()
        assert LogCleaner.dirty_ratio(log.cleaner_view(NOW)) < 1.0
        assert not cleaner.needs_cleaning(log, NOW)  # 10 s old: within max.compaction.lag.ms
        assert cleaner.needs_cleaning(log, NOW + 60_000)  # past it: due whatever the ratio
    finally:
        log.close()


def test_follower_copies_a_cleaned_leaders_gaps_only_on_compacted_topics(tmp_path: Path) -> None:
    """A follower catching up from a cleaned leader gets batches whose offsets skip: a
    compacted topic's replica appends them as they are (and keeps them across an unclean
    restart and its own cleaning); any other topic's replica refuses a gap as corruption."""
    leader = open_log(tmp_path / "leader")
    append(leader, [(k % 4, k) for k in range(60)], 2)
    leader.roll()
    clean_until_done(leader)
    raw = leader.read(0, 1 << 22).read()
    leader_rows = read_all(leader)
    assert len(leader_rows) < 60 and leader_rows[-1][0] == 59  # gaps below the end
    leader.close()

    follower = Log.open(
        tmp_path / "follower", LogConfig(**COMPACT), topic="t", partition=0, hw_managed_externally=True
    )
    follower.append_as_follower(raw)
    follower.set_high_watermark(follower.log_end_offset)
    assert follower.log_end_offset == 60 and read_all(follower) == leader_rows
    follower.close(clean=False)  # unclean: the reopen scans and recovers the gapped segment
    follower = Log.open(
        tmp_path / "follower", LogConfig(**COMPACT), topic="t", partition=0, hw_managed_externally=True
    )
    try:
        assert follower.log_end_offset == 60
        follower.set_high_watermark(60)
        assert read_all(follower) == leader_rows
        # The follower's own cleaner works on the copied, gapped segments too.
        append(follower, [(k % 4, k) for k in range(60, 80)], 2)  # (as a leader would, later)
        follower.set_high_watermark(follower.log_end_offset)
        follower.roll()
        clean_until_done(follower)
        rows = read_all(follower)
        assert {k for _, k, _ in rows} == {key(k) for k in range(4)}
        assert [o for o, _, _ in rows][-4:] == [76, 77, 78, 79]
    finally:
        follower.close()

    dense = Log.open(
        tmp_path / "dense",
        LogConfig(**{**COMPACT, "cleanup_policy": "delete"}),  # type: ignore[arg-type]
        topic="t",
        partition=0,
        hw_managed_externally=True,
    )
    try:
        with pytest.raises(InvalidRecordError, match="non-monotonic"):
            dense.append_as_follower(raw)
        assert dense.log_end_offset == 0
    finally:
        dense.close()


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 6)), st.booleans()), min_size=1, max_size=6),
        min_size=1,
        max_size=12,
    ),
    long_keys=st.booleans(),
)
def test_filter_fast_path_matches_the_record_scan(
    batches: list[list[tuple[int | None, bool]]], long_keys: bool
) -> None:
    """``filter_batch`` with the map's sorted offsets (all-or-none batches decided from the
    header) keeps exactly what the record-by-record scan keeps, with the same counts."""
    from hot.cleaner import CleanStats, filter_batch, map_batch

    raws: list[tuple[int, int, bytes]] = []
    offset = 0
    for recs in batches:
        inputs = [
            RecordInput(
                None if k is None else (b"k" * (20 if long_keys else 1)) + b"%d" % k,
                None if tomb else b"v%d" % offset,
            )
            for k, tomb in recs
        ]
        raw = bytearray(build_batch(inputs))
        HEADER.pack_into(raw, 0, offset, *HEADER.unpack_from(raw)[1:])
        raws.append((offset, offset + len(recs) - 1, bytes(raw)))
        offset += len(recs)
    m = OffsetMap(1 << 20)
    for _, _, raw in raws:
        assert map_batch(raw, m, [])
    mapped = m.sorted_offsets()
    slow, fast = CleanStats(), CleanStats()
    for base, last, raw in raws:
        kwargs: dict[str, object] = {
            "drop_tombstones": False,
            "producer_last_offsets": {},
            "last_group_batch": raws[-1][1],
        }
        a = filter_batch(raw, base, last, m, stats=slow, **kwargs)  # type: ignore[arg-type]
        b = filter_batch(raw, base, last, m, stats=fast, mapped_offsets=mapped, **kwargs)  # type: ignore[arg-type]
        assert a == b
    assert (slow.records_read, slow.records_kept, slow.keyless_dropped, slow.empty_batches_kept) == (
        fast.records_read,
        fast.records_kept,
        fast.keyless_dropped,
        fast.empty_batches_kept,
    )


def test_truncation_inside_a_gap_ends_the_log_at_the_offset(tmp_path: Path) -> None:
    """A replica truncated to an offset its cleaned log skips ends exactly there (not at
    the next batch), so it refetches every offset from it."""
    log = open_log(tmp_path / "t-0")
    try:
        append(log, [(0, 0)] + [(1 + k % 3, k) for k in range(30)], 1)  # key 0 stays at offset 0
        log.roll()
        clean_until_done(log)
        kept = [o for o, _, _ in read_all(log)]
        gap = next(o for o in range(kept[0], kept[-1]) if o not in kept)
        log.truncate_to(gap)
        assert log.log_end_offset == gap
        assert [o for o, _, _ in read_all(log)] == [o for o in kept if o < gap]
    finally:
        log.close()
