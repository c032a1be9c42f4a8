"""Transaction indexes in the bucket: uploaded with their segments, recorded in the
manifest, read back by the remote reader with the hot log's answers, kept by restore."""

from __future__ import annotations

import itertools
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.read_path import FetchRequestPartition
from hot.cleaner import LogCleaner
from hot.config import LogConfig
from hot.log import Log
from hot.manager import LogManager
from hot.records import ControlType, RecordInput, build_batch, decode_batches
from hot.txn_cleaning import AbortedRanges
from hot.txn_index import AbortedTxn, TxnSearch
from tests.inprocess import broker_of_one, create_topic
from tests.tiering.tierlib import upload_all
from tests.tiering.uplib import load_manifest, make_store, new_manager, new_service, store_url
from tiering.cache import ChunkCache, RemoteCorruptObjectError
from tiering.keys import segment_keys
from tiering.manifest import InvalidSegmentError, PartitionManifest, RemoteSegment, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.remote_read import RemoteReader
from tiering.remote_txn import combine, parse_txn_index
from tiering.restore import restore_data_dir
from tiering.store import open_store

ABORT, COMMIT = ControlType.ABORT, ControlType.COMMIT
TOPIC = "txns"


@pytest.fixture(params=["file", "s3"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url(request.param, tmp_path, request)


class Writer:
    """Transactional and plain batches of a few producers into one log."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.seq: dict[int, int] = defaultdict(int)

    def batch(self, pid: int, *, keys: list[bytes] | None = None, transactional: bool = True) -> int:
        keys = keys if keys is not None else [b"k%d-%d" % (pid, self.seq[pid] + i) for i in range(2)]
        recs = [RecordInput(k, b"%d:" % pid + b"v" * 60, timestamp=1000) for k in keys]
        data = build_batch(
            recs,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=self.seq[pid],
            transactional=transactional,
        )
        self.seq[pid] += len(keys)
        return self.log.append(data, transactional=transactional).first_offset

    def end(self, pid: int, kind: ControlType) -> int:
        return self.log.append_marker(pid, 0, kind, 0).first_offset


def write_mix(w: Writer, rounds: int) -> None:
    """Interleaved transactions of producers 1..3 (some aborted, some committed) and
    plain batches of producer 9, over many small segments; transactions span segments."""
    for r in range(rounds):
        w.batch(1)
        w.batch(2)
        w.batch(9, transactional=False)
        w.batch(1)
        w.end(1, ABORT if r % 2 == 0 else COMMIT)
        w.batch(3)
        w.batch(2)
        w.end(2, ABORT if r % 3 else COMMIT)
        w.end(3, ABORT if r % 4 != 1 else COMMIT)


def txn_manager(path: Path) -> LogManager:
    m = new_manager(path)
    m.create_topic(TOPIC, 1, {"segment.bytes": "1200", "retention.ms": "-1"})
    return m


# --- the manifest and the index object (pure) -------------------------------------------------


def _segment(**changes: object) -> RemoteSegment:
    sid = uuid.UUID(int=7)
    fields: dict[str, object] = {
        "segment_id": sid,
        "base_offset": 100,
        "last_offset": 199,
        "first_timestamp": 1,
        "max_timestamp": 2,
        "size": 5000,
        "log_sha256": "0" * 64,
        "index_size": 8,
        "timeindex_size": 12,
        "leader_epoch": 0,
        "state": SegmentState.COPIED,
        "keys": segment_keys(TOPIC, uuid.UUID(int=1), 0, 100, sid),
        "created_ms": 1,
        "updated_ms": 1,
        **changes,
    }
    return RemoteSegment(**fields)  # type: ignore[arg-type]


def test_manifest_txnindex_field_round_trip_and_older_entries() -> None:
    with_idx = _segment(txnindex_size=68)
    d = with_idx.to_dict()
    assert d["txnindex_size"] == 68 and d["keys"]["txnindex"].endswith(".txnindex")
    assert RemoteSegment.from_dict(d) == with_idx
    without = _segment()
    assert "txnindex_size" not in without.to_dict()
    assert RemoteSegment.from_dict(without.to_dict()) == without
    # An entry written before the index was tiered: no size, no key; the key is derived.
    old = without.to_dict()
    del old["keys"]["txnindex"]
    loaded = RemoteSegment.from_dict(old)
    assert loaded == without and loaded.txnindex_size is None
    assert loaded.keys.txnindex == without.keys.log[: -len(".log")] + ".txnindex"
    for bad in (0, 33, -34, True, "68"):
        with pytest.raises(InvalidSegmentError, match="txnindex_size"):
            RemoteSegment.from_dict({**d, "txnindex_size": bad})
    with pytest.raises(InvalidSegmentError, match="txnindex_size"):
        RemoteSegment.from_dict({**d, "txnindex_size": None})


def test_parse_txn_index_refuses_damaged_objects() -> None:
    a, b = AbortedTxn(1, 90, 120, 121), AbortedTxn(2, 110, 150, 150)
    seg = _segment(txnindex_size=68)
    assert parse_txn_index(a.encode() + b.encode(), seg) == (a, b)
    bad = {
        "size": a.encode(),  # not what the manifest says
        "order": b.encode() + a.encode(),
        "outside": a.encode() + AbortedTxn(2, 110, 200, 201).encode(),
        "first after marker": a.encode() + AbortedTxn(2, 160, 150, 151).encode(),
        "version": a.encode() + b"\x00\x01" + b.encode()[2:],
    }
    for what, data in bad.items():
        with pytest.raises(RemoteCorruptObjectError) as e:
            parse_txn_index(data, seg)
        assert seg.keys.txnindex in str(e.value), what


def test_combine_remote_and_local() -> None:
    r1, r2, l3 = AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 21), AbortedTxn(1, 25, 30, 31)
    assert combine(TxnSearch((r1,), True), [r2, l3]) == [r1]
    # a segment both uploaded and still local: its entry is not repeated
    assert combine(TxnSearch((r1, r2), False), [r2, l3]) == [r1, r2, l3]
    assert combine(TxnSearch((), False), [r2, l3]) == [r2, l3]


# --- uploads and remote reads --------------------------------------------------------------------


async def test_txnindex_uploaded_and_remote_aborted_list_matches_hot_log(tmp_path: Path, url: str) -> None:
    m = txn_manager(tmp_path / "data")
    svc = new_service(m, url)
    svc.manifests.max_segments = 4  # the oldest entries spill: searches read them too
    try:
        log = m.get_log(TOPIC, 0)
        w = Writer(log)
        write_mix(w, 12)
        open_first = w.batch(1)  # left open: segments from here on wait for its marker
        write_mix_plain = [w.batch(9, transactional=False) for _ in range(30)]
        assert log.last_stable_offset == open_first < write_mix_plain[-1]
        log.roll()
        sealed = log.segments()[:-1]
        with_index = [s for s in sealed if len(s.txn_index)]
        assert len(with_index) >= 3 and len(with_index) < len(sealed)
        await svc.run_once(retention=False, sweep=False)
        man = await load_manifest(url, m, TOPIC)
        assert man.segments and man.next_offset() <= open_first  # undecided data stays local
        assert man.spillover
        local = {s.base_offset: s for s in sealed}
        store = make_store(url)
        try:
            for rs in await svc.manifests.all_segments(man):
                seg = local[rs.base_offset]
                n = len(seg.txn_index)
                assert rs.txnindex_size == (n * 34 if n else None)
                if n:
                    with open(seg.txnindex_path, "rb") as f:
                        assert await store.get(rs.keys.txnindex) == f.read()
                else:
                    assert not await store.exists(rs.keys.txnindex)
        finally:
            await store.close()
        assert any(s.txnindex_size for s in await svc.manifests.all_segments(man))
        # Every fetch range starting in the bucket: remote search + local = the hot log's.
        tid = m.topic(TOPIC).topic_id
        remote_end = man.next_offset()
        starts = range(0, remote_end, 7)
        uppers = [*range(3, log.log_end_offset + 1, 23), log.log_end_offset]
        for start, upper in itertools.product(starts, uppers):
            want = log.collect_aborted_transactions(start, upper)
            found = await svc.reader.search_aborted_transactions(TOPIC, tid, 0, start, upper)
            got = combine(found, log.collect_aborted_transactions(start, upper))
            assert got == want, (start, upper)
            if upper <= remote_end and found.complete:
                assert list(found.aborted) == want
        search = await svc.reader.search_aborted_transactions(TOPIC, tid, 0, 0, remote_end)
        assert await svc.reader.aborted_transactions(TOPIC, tid, 0, 0, remote_end) == list(search.aborted)
        # The marker closes the open transaction: the rest goes up.
        w.end(1, ABORT)
        log.roll()
        await svc.run_once(retention=False, sweep=False)
        man = await load_manifest(url, m, TOPIC)
        assert man.next_offset() == log.segments()[-1].base_offset
        end = log.log_end_offset
        found = await svc.reader.search_aborted_transactions(TOPIC, tid, 0, 0, end)
        assert combine(found, []) == log.collect_aborted_transactions(0, end)
    finally:
        await svc.close()
        m.close()


async def test_restore_keeps_the_remote_aborted_list_and_open_transactions(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'bucket'}"
    m = txn_manager(tmp_path / "data")
    svc = new_service(m, url)
    try:
        log = m.get_log(TOPIC, 0)
        w = Writer(log)
        write_mix(w, 10)
        # A transaction spanning the upload boundary: its marker (a commit) never reaches
        # the bucket (uploads stop below producer 3's open transaction), so it is open at
        # the restore point.
        first = w.batch(2)
        for _ in range(25):
            w.batch(9, transactional=False)
        open3 = w.batch(3)
        w.end(2, COMMIT)
        log.roll()
        for _ in range(12):
            w.batch(9, transactional=False)
        await svc.run_once(retention=False, sweep=False)
        man = await load_manifest(url, m, TOPIC)
        nxt = man.next_offset()
        assert first < nxt <= open3
        tid = m.topic(TOPIC).topic_id
        before = await svc.reader.aborted_transactions(TOPIC, tid, 0, 0, nxt)
        assert before == [t for t in log.collect_aborted_transactions(0, nxt) if t.last_offset < nxt]
        assert before
        store = make_store(url)
        try:
            await restore_data_dir(tmp_path / "new", store)
        finally:
            await store.close()
    finally:
        await svc.close()
        m.close()
    restored = new_manager(tmp_path / "new")
    svc2 = new_service(restored, url)
    try:
        lg = restored.get_log(TOPIC, 0)
        assert lg.log_end_offset == nxt
        # The v2 snapshot brought the open transaction back: the LSO waits for it.
        assert lg.producer_entries()[2].current_txn_first_offset == first
        assert lg.last_stable_offset == first
        # The history's aborted transactions come from the bucket, unchanged.
        assert await svc2.reader.aborted_transactions(TOPIC, tid, 0, 0, nxt) == before
        assert lg.collect_aborted_transactions(0, nxt) == []
        # Ending it (as its coordinator would) frees the LSO; its abort is indexed locally.
        marker = lg.append_marker(2, 0, ABORT, 0).first_offset
        assert lg.last_stable_offset == lg.log_end_offset
        found = await svc2.reader.search_aborted_transactions(TOPIC, tid, 0, 0, lg.log_end_offset)
        got = combine(found, lg.collect_aborted_transactions(0, lg.log_end_offset))
        assert got == [*before, AbortedTxn(2, first, marker, marker + 1)]
    finally:
        await svc2.close()
        restored.close()


# --- compaction: local cleaner and remote compactor ---------------------------------------------


def K(i: int) -> bytes:
    return b"key-%d" % i


def write_compaction_history(w: Writer) -> tuple[int, int]:
    """Committed and aborted transactions over shared keys; then transaction A (aborted
    last) around transaction B, left open. Returns (A's first offset, B's first offset)."""
    for r in range(6):
        w.batch(9, keys=[K(0), K(1)], transactional=False)
        w.batch(1, keys=[K(0), K(1)])  # aborted: must never shadow the values above
        w.batch(2, keys=[K(2)])
        w.batch(9, keys=[K(3)], transactional=False)
        w.end(1, ABORT)
        w.batch(3, keys=[K(3), K(4)])
        w.end(2, COMMIT)
        w.end(3, ABORT if r % 2 == 0 else COMMIT)
    a_first = w.batch(5, keys=[K(0), K(5)])
    for i in range(12):
        w.batch(9, keys=[K(6 + i % 3)], transactional=False)
    b_first = w.batch(4, keys=[K(1)])
    for i in range(12):
        w.batch(9, keys=[K(6 + i % 3)], transactional=False)
    w.end(5, ABORT)
    w.batch(9, keys=[K(9)], transactional=False)
    return a_first, b_first


Rec = tuple[int, int, bool, bool, bytes | None]  # offset, producer, transactional, control, key


def records_of(chunks: list[bytes]) -> list[Rec]:
    out: list[Rec] = []
    for data in chunks:
        for b in decode_batches(data):
            h = b.header
            out.extend((r.offset, h.producer_id, h.is_transactional, h.is_control, r.key) for r in b.records)
    return out


def check_compacted(before: list[Rec], after: list[Rec], aborted: list[AbortedTxn], end: int) -> None:
    """Below ``end``: no aborted data is left, every key's latest committed record and
    every marker is; at and above it nothing changed."""
    ranges = AbortedRanges(aborted)
    is_aborted = {r[0]: r[2] and not r[3] and ranges.contains(r[1], r[0]) for r in before}
    assert any(is_aborted[o] for o, *_ in before if o < end)
    latest: dict[bytes | None, int] = {}
    for o, _, _, control, k in before:
        if o < end and not control and not is_aborted[o]:
            latest[k] = o
    kept = {r[0] for r in after}
    assert {r[0] for r in after} <= {r[0] for r in before}
    assert not [o for o in kept if o < end and is_aborted[o]]
    assert set(latest.values()) <= kept
    assert {r[0] for r in before if r[3]} <= kept  # markers
    assert [r for r in after if r[0] >= end] == [r for r in before if r[0] >= end]
    assert len([r for r in after if r[0] < end]) < len([r for r in before if r[0] < end])


def local_records(log: Log) -> list[Rec]:
    chunks = []
    for seg in log.segments():
        with open(seg.log_path, "rb") as f:
            chunks.append(f.read())
    return records_of(chunks)


def test_local_cleaner_removes_aborted_data_keeps_markers(tmp_path: Path) -> None:
    cfg = {
        "flush_mode": "interval",
        "cleanup_policy": "compact",
        "min_compaction_lag_ms": 0,
        "segment_bytes": 1200,
    }
    log = Log.open(tmp_path / "t-0", LogConfig(**cfg), topic="t", partition=0)  # type: ignore[arg-type]
    try:
        a_first, b_first = write_compaction_history(Writer(log))
        log.roll()
        before = local_records(log)
        aborted = log.collect_aborted_transactions(0, log.log_end_offset)
        assert log.first_unstable_offset == b_first
        stats = LogCleaner().clean(log, force=True)
        assert stats is not None and stats.aborted_records_dropped > 0
        end = stats.cleaned_to
        assert a_first < end <= b_first  # never past the open transaction
        check_compacted(before, local_records(log), aborted, end)
        assert log.collect_aborted_transactions(0, log.log_end_offset) == aborted
    finally:
        log.close()


@pytest.mark.parametrize("kind", ["file", "s3"])
async def test_remote_compaction_removes_aborted_data_keeps_markers(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = store_url(kind, tmp_path, request)
    m = new_manager(tmp_path / "data")
    svc = new_service(m, url, remote_compaction_grace_ms=0)
    try:
        m.create_topic(
            TOPIC,
            1,
            {"cleanup.policy": "compact", "segment.bytes": "1200", "min.compaction.lag.ms": "0"},
        )
        log = m.get_log(TOPIC, 0)
        log.cleaner_attached = False  # raw segments go up: the bucket holds the aborted data
        a_first, b_first = write_compaction_history(Writer(log))
        log.roll()
        await svc.run_once(retention=False, sweep=False, compact=False)
        m0 = await load_manifest(url, m, TOPIC)
        remote_end = m0.next_offset()
        # A's marker is past the open transaction B: not uploaded, A is undecided here.
        assert a_first < remote_end <= b_first
        tid = m.topic(TOPIC).topic_id
        store = make_store(url)
        try:

            async def remote_records(man: PartitionManifest) -> list[Rec]:
                return records_of([await store.get(s.keys.log) for s in man.copied()])

            before = await remote_records(m0)
            found0 = await svc.reader.search_aborted_transactions(TOPIC, tid, 0, 0, remote_end)
            stats = await svc.compactor.compact_log(log, tid, force=True)
            assert stats is not None and stats.swapped and stats.records.aborted_records_dropped > 0
            m1 = await load_manifest(url, m, TOPIC)
            assert m1.next_offset() == remote_end
            # Compacted only below A (still open as far as the bucket knows).
            assert 0 < m1.cleaned_offset <= a_first
            aborted = log.collect_aborted_transactions(0, log.log_end_offset)
            after = await remote_records(m1)
            check_compacted(before, after, aborted, m1.cleaned_offset)
            assert any(s.txnindex_size for s in m1.copied() if s.compacted)
            # The rewritten segments' indexes give read_committed fetches the same answers.
            svc.reader.forget(TOPIC, tid, 0)
            found1 = await svc.reader.search_aborted_transactions(TOPIC, tid, 0, 0, remote_end)
            assert found1 == found0
            for start in range(0, remote_end, 11):
                want = log.collect_aborted_transactions(start, log.log_end_offset)
                got = await svc.reader.search_aborted_transactions(TOPIC, tid, 0, start, log.log_end_offset)
                assert combine(got, want) == want
        finally:
            await store.close()
    finally:
        await svc.close()
        m.close()


# --- through the broker: a read_committed fetch served from the bucket ------------------------


@dataclass
class _Tier:
    reader: RemoteReader


async def test_read_committed_fetch_from_the_bucket_gets_the_local_aborted_list(tmp_path: Path) -> None:
    """The same aborted list whether the segments are read from disk or, after local
    retention, from the bucket (their tiered transaction indexes), through Broker.fetch."""
    store = open_store(f"file://{tmp_path}/bucket")
    manifests = ManifestStore(store)
    reader = RemoteReader(
        store, manifests, ChunkCache(store, tmp_path / "cache", max_bytes=1 << 20, chunk_bytes=2048)
    )
    config = BrokerConfig(data_dir=tmp_path / "data")
    try:
        async with broker_of_one(config, tiering=_Tier(reader)) as broker:
            configs = {"segment.bytes": "1024", "index.interval.bytes": "256", "local.retention.bytes": "0"}
            info = await create_topic(broker, "t", 1, configs=configs)
            rep = broker.replicas.writable_leader("t", 0, 1)
            lg = rep.log
            write_mix(_EpochWriter(lg, rep.leader_epoch), 4)
            lg.flush()
            broker.replicas.maybe_advance_hw(rep)
            end = lg.high_watermark
            assert lg.last_stable_offset == end

            async def fetch_all() -> tuple[list[tuple[int, int]], int]:
                out: list[tuple[int, int]] = []
                offset = 0
                while offset < end:
                    (f,) = await broker.reads.fetch(
                        [FetchRequestPartition("t", 0, offset, 4096)],
                        max_wait_ms=0,
                        min_bytes=1,
                        max_bytes=4096,
                        read_committed=True,
                    )
                    assert f.error is None and f.size and f.aborted is not None
                    out += [(a.producer_id, a.first_offset) for a in f.aborted]
                    offset = _next_offset(f.read())
                return sorted(set(out)), offset

            local, _ = await fetch_all()
            expected = sorted(
                {(a.producer_id, a.first_offset) for a in lg.collect_aborted_transactions(0, end)}
            )
            assert local == expected and expected
            await upload_all(store, manifests, lg, "t", info.topic_id, 0)
            assert lg.apply_local_retention(int(time.time() * 1000), lambda seg: True)
            assert lg.local_log_start_offset > 0
            remote, _ = await fetch_all()
            assert remote == expected
    finally:
        await reader.cache.close()
        await store.close()


class _EpochWriter(Writer):
    """``Writer`` appending as the partition's leader in its epoch (the broker's log)."""

    def __init__(self, log: Log, epoch: int) -> None:
        super().__init__(log)
        self.epoch = epoch

    def batch(self, pid: int, *, keys: list[bytes] | None = None, transactional: bool = True) -> int:
        keys = keys if keys is not None else [b"k%d-%d" % (pid, self.seq[pid] + i) for i in range(2)]
        recs = [RecordInput(k, b"%d:" % pid + b"v" * 60, timestamp=1000) for k in keys]
        data = build_batch(
            recs, producer_id=pid, producer_epoch=0, base_sequence=self.seq[pid], transactional=transactional
        )
        self.seq[pid] += len(keys)
        return self.log.append(data, leader_epoch=self.epoch, transactional=transactional).first_offset

    def end(self, pid: int, kind: ControlType) -> int:
        return self.log.append_marker(pid, 0, kind, 0, leader_epoch=self.epoch).first_offset


def _next_offset(data: bytes) -> int:
    batches = decode_batches(data)
    return batches[-1].header.base_offset + batches[-1].header.last_offset_delta + 1
