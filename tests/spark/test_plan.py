"""Planning and reading without Spark: options, pruning (GETs counted through the store
seam), ranges, spillover, damage, and ``strata export``; on file:// and on S3 (moto)."""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hot.errors import CorruptLogError, InvalidConfigError, ObjectNotFoundError, UnknownTopicOrPartitionError
from spark.columnar import batch_bounds
from spark.export import export, parse_options
from spark.options import EARLIEST, LATEST, ReadOptions
from spark.plan import ColdTask, open_store_from, plan_scan
from spark.scan import read_task
from tests.brokers import S3Endpoint
from tests.spark.sparklib import (
    TS0,
    CountingStore,
    Row,
    fill_log,
    open_log,
    put_topic,
    rows_of_table,
    tier_log,
)
from tiering.manifest import RemoteSegment
from tiering.manifest_store import ManifestStore
from tiering.store import ObjectStore, SyncObjectStore, open_store

TOPIC = "events"
PARTITIONS = 2


@dataclass
class Archive:
    url: str
    options: dict[str, str]  # store options (S3 endpoint and credentials)
    rows: list[Row]  # every archived row
    segments: dict[int, list[RemoteSegment]]
    topic_id: uuid.UUID

    def opts(self, **extra: str) -> ReadOptions:
        return ReadOptions.parse({"topic": TOPIC, **self.options, **extra}, path=self.url)

    def store(self) -> ObjectStore:
        return open_store(
            self.url,
            endpoint_url=self.options.get("endpoint"),
            access_key=self.options.get("accessKey"),
            secret_key=self.options.get("secretKey"),
            region=self.options.get("region"),
        )


def build_archive(tmp: Path, url: str, options: dict[str, str], *, max_segments: int = 1000) -> Archive:
    topic_id = uuid.uuid4()
    rows: list[Row] = []
    segments: dict[int, list[RemoteSegment]] = {}

    async def go() -> None:
        store = open_store(
            url,
            endpoint_url=options.get("endpoint"),
            access_key=options.get("accessKey"),
            secret_key=options.get("secretKey"),
            region=options.get("region"),
        )
        try:
            for p in range(PARTITIONS):
                log = open_log(tmp / f"{TOPIC}-{p}", TOPIC, p, segment_bytes=16384)
                written = fill_log(log, TOPIC, p, 110, 10, value_size=60)
                segs = await tier_log(
                    store, log, TOPIC, topic_id, p, manifests=ManifestStore(store, max_segments=max_segments)
                )
                segments[p] = segs
                last = segs[-1].last_offset
                rows.extend(r for r in written if r.offset <= last)
                log.close()
            await put_topic(store, TOPIC, topic_id, PARTITIONS)
        finally:
            await store.close()

    asyncio.run(go())
    assert all(len(s) >= 4 for s in segments.values()), "the fixture needs several segments per partition"
    return Archive(url, options, rows, segments, topic_id)


@pytest.fixture(scope="module")
def file_archive(tmp_path_factory: pytest.TempPathFactory) -> Archive:
    tmp = tmp_path_factory.mktemp("archive")
    return build_archive(tmp, f"file://{tmp / 'bucket'}", {})


@pytest.fixture(scope="module")
def s3_archive(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: S3Endpoint) -> Archive:
    tmp = tmp_path_factory.mktemp("archive-s3")
    bucket = s3_endpoint.create_bucket(f"spark-plan-{uuid.uuid4().hex[:8]}")
    opts = {
        "endpoint": s3_endpoint.url,
        "accessKey": "testing",
        "secretKey": "testing",
        "region": "us-east-1",
    }
    return build_archive(tmp, f"s3://{bucket}/prefix/a", opts)


@pytest.fixture(params=["file", "s3"])
def archive(request: pytest.FixtureRequest) -> Archive:
    return request.getfixturevalue(f"{request.param}_archive")  # type: ignore[no-any-return]


def scan(opts: ReadOptions, store: ObjectStore | None = None) -> list[Row]:
    """Plan and read every task in this process (one store for all tasks)."""
    plan = plan_scan(opts, store=store)
    out: list[Row] = []
    sync = SyncObjectStore(store if store is not None else open_store_from(opts.store))
    try:
        for task in plan.tasks:
            for batch in read_task(task, opts, store=sync):
                out.extend(rows_of_table(batch))
    finally:
        if store is None:
            sync.close()
    return out


def key(r: Row) -> tuple[int, int]:
    return (r.partition, r.offset)


# --- options -----------------------------------------------------------------------------------


def test_options_follow_sparks_kafka_source() -> None:
    o = ReadOptions.parse(
        {
            "TOPIC": "a,b",
            "startingOffsets": '{"a":{"0":5,"1":-2}}',
            "endingOffsets": '{"b":{"0":-1}}',
            "partitions": "0, 1",
            "includeHot": "true",
            "kafka.bootstrap.servers": "h:9092,other:9092",
            "maxPartitionBytes": "16m",
        },
        path="file:///x",
    )
    assert o.topics == ("a", "b") and o.partitions == frozenset({0, 1})
    assert o.start.for_partition(("a", 0)) == ("offset", 5)
    assert o.start.for_partition(("a", 1)) == ("earliest", EARLIEST)
    assert o.start.for_partition(("b", 3)) == ("earliest", EARLIEST)
    assert o.end.for_partition(("b", 0)) == ("latest", LATEST)
    assert o.broker == "h:9092" and o.include_hot and o.max_partition_bytes == 16 << 20
    ts = ReadOptions.parse(
        {"topic": "a", "startingOffsetsByTimestamp": '{"a":{"1":77}}', "startingTimestamp": "9"},
        path="file:///x",
    )
    assert ts.start.for_partition(("a", 1)) == ("timestamp", 9)  # startingTimestamp wins


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"startingOffsets": "latest"}, "can't be latest"),
        ({"endingOffsets": "earliest"}, "can't be earliest"),
        ({"startingOffsets": '{"events":{"0":-1}}'}, "can't be latest"),
        ({"endingOffsets": '{"events":{"0":-2}}'}, "can't be earliest"),
        ({"startingOffsets": '{"other":{"0":1}}'}, "not being read"),
        ({"startingOffsets": "{nope"}, "expected"),
        ({"startingOffsets": '{"events":{"x":1}}'}, "not a partition number"),
        ({"startingTimestamp": "yesterday"}, "milliseconds"),
        ({"includeHot": "true"}, "needs option broker"),
        ({"partitions": "0,a"}, "not a partition number"),
        ({"accessKey": "k"}, "together"),
    ],
)
def test_bad_options_are_refused_by_name(opts: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        ReadOptions.parse({"topic": TOPIC, **opts}, path="file:///x")
    with pytest.raises(InvalidConfigError, match="topic"):
        ReadOptions.parse({}, path="file:///x")
    with pytest.raises(InvalidConfigError, match="object store URL"):
        ReadOptions.parse({"topic": TOPIC})


# --- reading ---------------------------------------------------------------------------------------


def test_full_scan_returns_exactly_the_archived_rows(archive: Archive) -> None:
    got = scan(archive.opts())
    assert sorted(got, key=key) == sorted(archive.rows, key=key)
    assert len(got) == len(set(map(key, got)))


def test_unknown_topic_and_partition_are_clear(file_archive: Archive) -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match=r"topics/nope\.json"):
        plan_scan(ReadOptions.parse({"topic": "nope"}, path=file_archive.url))
    with pytest.raises(UnknownTopicOrPartitionError, match="partition"):
        plan_scan(file_archive.opts(partitions="7"))


def test_offset_range_reads_only_the_overlapping_segments(archive: Archive) -> None:
    segs = archive.segments[0]
    lo = segs[1].base_offset + 120  # inside segment 1, past its first index entry
    hi = segs[2].base_offset + 60  # inside segment 2, before its last index entry
    store = CountingStore(archive.store())
    opts = archive.opts(
        startingOffsets=f'{{"{TOPIC}":{{"0":{lo},"1":-2}}}}',
        endingOffsets=f'{{"{TOPIC}":{{"0":{hi}}}}}',
        partitions="0",
    )
    got = scan(opts, store)
    assert sorted(got, key=key) == sorted(
        (r for r in archive.rows if r.partition == 0 and lo <= r.offset < hi), key=key
    )
    wanted = {segs[1].keys.log, segs[2].keys.log}
    assert {k for k, _, _ in store.log_gets()} == wanted
    # Only the boundary segments' offset indexes, and no byte before the indexed batch of lo.
    assert {k for k, _, _ in store.gets if k.endswith(".index")} == {segs[1].keys.index, segs[2].keys.index}
    assert not [k for k, _, _ in store.gets if k.endswith(".timeindex")]
    first = [(s, e) for k, s, e in store.log_gets() if k == segs[1].keys.log]
    assert min(s for s, _ in first if s is not None) > 0
    last = [(s, e) for k, s, e in store.log_gets() if k == segs[2].keys.log]
    assert max(e for _, e in last if e is not None) < segs[2].size
    # Other segments and partition 1's data are never read.
    assert all(s.keys.log not in {k for k, _, _ in store.gets} for s in archive.segments[1])


def test_timestamp_range_resolves_like_offsets_for_times(archive: Archive) -> None:
    ts_lo = TS0 + 1000 * 205 + 1  # offset 205 has timestamp TS0 + 205001 (o % 3 == 1)
    ts_hi = TS0 + 1000 * 512  # offset 512 has TS0 + 512002
    store = CountingStore(archive.store())
    got = scan(archive.opts(startingTimestamp=str(ts_lo), endingTimestamp=str(ts_hi)), store)
    expected = []
    for p in range(PARTITIONS):
        part = sorted((r for r in archive.rows if r.partition == p), key=lambda r: r.offset)
        first = next(r.offset for r in part if r.timestamp >= ts_lo)
        end = next(r.offset for r in part if r.timestamp >= ts_hi)
        assert (first, end) == (205, 512)
        expected += [r for r in part if first <= r.offset < end]
    assert sorted(got, key=key) == sorted(expected, key=key)
    touched = {k for k, _, _ in store.log_gets()}
    for p, segs in archive.segments.items():
        for s in segs:
            overlaps = s.last_offset >= 205 and s.base_offset < 512
            assert (s.keys.log in touched) == overlaps, (p, s.base_offset, s.last_offset)


def test_by_timestamp_json_and_bounds_past_the_archive(file_archive: Archive) -> None:
    last = file_archive.segments[1][-1].last_offset
    opts = file_archive.opts(
        startingOffsetsByTimestamp=f'{{"{TOPIC}":{{"1":{TS0 + 1000 * (last - 1)}}}}}',
        endingTimestamp=str(TS0 + 10**12),  # later than every record: the latest offset
        partitions="1",
    )
    got = scan(opts)
    assert sorted(r.offset for r in got) == [last - 1, last]
    empty = file_archive.opts(startingTimestamp=str(TS0 + 10**12))
    assert scan(empty) == []
    assert all(r.start == r.end for r in plan_scan(empty).ranges)


def test_log_start_offset_hides_deleted_records(tmp_path: Path) -> None:
    a = build_archive(tmp_path, f"file://{tmp_path / 'bucket'}", {})

    async def advance() -> None:
        store = a.store()
        try:
            await ManifestStore(store).update(TOPIC, a.topic_id, 0, lambda m: m.advance_log_start(123))
        finally:
            await store.close()

    asyncio.run(advance())
    got = scan(a.opts(partitions="0"))
    assert min(r.offset for r in got) == 123
    assert sorted(got, key=key) == sorted(
        (r for r in a.rows if r.partition == 0 and r.offset >= 123), key=key
    )


def test_cleaned_segments_of_a_compacted_topic_are_read_with_their_gaps(tmp_path: Path) -> None:
    """The cleaner keeps each record at its offset and drops superseded ones, so a cleaned
    segment skips offsets; the uploader flags it ``compacted`` and the reader accepts the
    gaps there (and only there: dense segments still refuse them, tested elsewhere)."""
    from hot.cleaner import CleanerConfig, LogCleaner
    from hot.config import LogConfig
    from hot.log import Log
    from hot.records import RecordInput, build_batch

    cfg = LogConfig.from_kafka(
        {
            "cleanup.policy": "compact",
            "segment.bytes": "2048",
            "min.cleanable.dirty.ratio": "0",
            "strata.flush.mode": "interval",
        }
    )
    log = Log.open(tmp_path / f"{TOPIC}-0", cfg, topic=TOPIC, partition=0)
    written: list[tuple[int, bytes, bytes]] = []
    for rnd in range(8):
        for k in range(12) if rnd == 0 else range(0, 12, 2):  # odd keys: written once, early
            kb, vb = b"k%d" % k, b"v%d-%d" % (k, rnd) + b"." * 40
            info = log.append(build_batch([RecordInput(kb, vb, timestamp=TS0 + rnd)]))
            written.append((info.last_offset, kb, vb))
    cleaner = LogCleaner(CleanerConfig())
    for _ in range(10):  # until nothing is left to clean
        if cleaner.clean(log, TS0 + 10**9) is None:
            break
    sealed = log.segments()[:-1]
    assert any(seg.compacted for seg in sealed), "the cleaner rewrote nothing"
    last = sealed[-1].next_offset - 1
    url = f"file://{tmp_path / 'bucket'}"
    topic_id = uuid.uuid4()

    async def go() -> None:
        store = open_store(url)
        try:
            segs = await tier_log(store, log, TOPIC, topic_id, 0)
            assert any(s.compacted for s in segs)
            await put_topic(store, TOPIC, topic_id, 1)
        finally:
            await store.close()

    asyncio.run(go())
    log.close()
    got = sorted(scan(ReadOptions.parse({"topic": TOPIC}, path=url)), key=key)
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    assert offsets[0] > 0 and any(b - a > 1 for a, b in itertools.pairwise(offsets)), "no gaps"
    want = {k: (o, v) for o, k, v in written if o <= last}  # the latest in the archived range
    # Exactly one row per key: its latest value, at the offset it was written at.
    assert len(got) == len(want)
    assert {r.key: (r.offset, r.value) for r in got} == want


def test_pieces_are_nearly_equal_cut_at_index_entries_and_small_segments_pack(archive: Archive) -> None:
    sizes = {p: sum(s.size for s in segs) for p, segs in archive.segments.items()}
    split = plan_scan(archive.opts(maxPartitionBytes="12k"))
    for p, total in sizes.items():
        tasks = [t for t in split.tasks if isinstance(t, ColdTask) and t.partition == p]
        assert len(tasks) == -(-total // 12288), "the fewest pieces of at most about 12 KiB"
        # Nearly equal: cuts are at index entries (one per 4 KiB of log) or segment boundaries.
        assert all(abs(t.bytes - total / len(tasks)) <= 5000 for t in tasks), [t.bytes for t in tasks]
        lengths = [t.bytes for t in tasks]
        assert sum(lengths) == total
        slices = [sl for t in tasks for sl in t.slices]
        ends = [sl.end_offset for sl in slices]
        assert [sl.start_offset for sl in slices] == [0, *ends[:-1]], "consecutive, gapless offsets"
        assert any(len(t.slices) > 1 for t in tasks), "pieces cross segment boundaries"
        assert any(sl.start_position > 0 for sl in slices), "and cut inside segments"
    assert sorted(scan(archive.opts(maxPartitionBytes="12k")), key=key) == sorted(archive.rows, key=key)
    halves = plan_scan(archive.opts(maxPartitionBytes=str(max(sizes.values()) // 2 + 1)))
    for p, total in sizes.items():  # two halves, not whole segments (3 + 4 or so)
        halves_p = [t.bytes for t in halves.tasks if t.partition == p]
        assert len(halves_p) == 2 and all(abs(b - total / 2) <= 5000 for b in halves_p), halves_p
    packed = plan_scan(archive.opts())  # 128 MiB pieces: every small segment of a partition in one task
    assert len(packed.tasks) == PARTITIONS
    for t in packed.tasks:
        assert isinstance(t, ColdTask) and len(t.slices) == len(archive.segments[t.partition])
    many = plan_scan(archive.opts(minPartitions="20"))
    assert len(many.tasks) >= 20
    assert sorted(scan(archive.opts(minPartitions="20")), key=key) == sorted(archive.rows, key=key)


def test_spillover_segments_are_read_and_pruned(tmp_path: Path) -> None:
    a = build_archive(tmp_path, f"file://{tmp_path / 'bucket'}", {}, max_segments=2)
    assert sorted(scan(a.opts()), key=key) == sorted(a.rows, key=key)
    segs = a.segments[0]
    store = CountingStore(a.store())
    tail = segs[-1].base_offset
    got = scan(a.opts(startingOffsets=f'{{"{TOPIC}":{{"0":{tail}}}}}', partitions="0"), store)
    assert sorted(r.offset for r in got) == [
        r.offset for r in sorted(a.rows, key=key) if r.partition == 0 and r.offset >= tail
    ]
    assert not [k for k, _, _ in store.gets if "/spillover/" in k]


# --- damage ------------------------------------------------------------------------------------------


def _object_path(a: Archive, key_: str) -> Path:
    return Path(a.url.removeprefix("file://")) / key_


def test_corrupt_object_fails_naming_key_and_offset(tmp_path: Path) -> None:
    a = build_archive(tmp_path, f"file://{tmp_path / 'bucket'}", {})
    seg = a.segments[1][2]
    path = _object_path(a, seg.keys.log)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError) as info:
        scan(a.opts(partitions="1"))
    msg = str(info.value)
    assert seg.keys.log in msg and "offset" in msg and "CRC" in msg
    assert seg.base_offset <= info.value.position <= seg.last_offset


def test_truncated_and_missing_objects_fail_naming_the_key(tmp_path: Path) -> None:
    a = build_archive(tmp_path, f"file://{tmp_path / 'bucket'}", {})
    trunc, gone = a.segments[0][1], a.segments[1][1]
    p = _object_path(a, trunc.keys.log)
    p.write_bytes(p.read_bytes()[:-100])
    with pytest.raises(CorruptLogError, match=trunc.keys.log.replace(".", r"\.")):
        scan(a.opts(partitions="0"))
    os.unlink(_object_path(a, gone.keys.log))
    with pytest.raises(ObjectNotFoundError) as info:
        scan(a.opts(partitions="1"))
    assert gone.keys.log in str(info.value) and f"offsets {gone.base_offset}-{gone.last_offset}" in str(
        info.value
    )


def test_batches_larger_than_a_read_chunk_are_read_again_whole(tmp_path: Path) -> None:
    """Each GET starts at the first batch the previous one did not hold whole: a batch cut
    by a chunk's end is read again (a larger GET when a batch exceeds the chunk), chunks
    are never concatenated, and truncation is still detected."""
    url = f"file://{tmp_path / 'bucket'}"
    topic_id = uuid.uuid4()

    async def go() -> tuple[list[Row], list[RemoteSegment]]:
        store = open_store(url)
        try:
            log = open_log(tmp_path / "log", TOPIC, 0, segment_bytes=65536)
            rows = fill_log(log, TOPIC, 0, 24, 20, value_size=400)  # batches of about 8-9 KiB
            segs = await tier_log(store, log, TOPIC, topic_id, 0)
            await put_topic(store, TOPIC, topic_id, 1)
            log.close()
            return [r for r in rows if r.offset <= segs[-1].last_offset], segs
        finally:
            await store.close()

    rows, segs = asyncio.run(go())
    opts = ReadOptions.parse({"topic": TOPIC, "readChunkBytes": "4096"}, path=url)
    counting = CountingStore(open_store(url))
    assert sorted(scan(opts, counting), key=key) == sorted(rows, key=key)
    log_gets = counting.log_gets()
    requested = sum((end or 0) - (start or 0) for _, start, end in log_gets)
    total = sum(s.size for s in segs)
    assert len(log_gets) >= 2 * len(rows) // 20 and requested < 3 * total, (len(log_gets), requested, total)
    path = tmp_path / "bucket" / segs[0].keys.log
    data = path.read_bytes()
    last = batch_bounds(data).positions[-1]
    length = int.from_bytes(data[last + 8 : last + 12], "big")
    longer = data[: last + 8] + (length + 100).to_bytes(4, "big") + data[last + 12 :]
    path.write_bytes(longer)  # the last batch claims to run past the object's end
    with pytest.raises(CorruptLogError, match=f"bytes at byte {last} are not a whole batch"):
        scan(opts)
    path.write_bytes(data[:-100])
    with pytest.raises(CorruptLogError, match="shorter than its manifest entry"):
        scan(opts)


def test_s3_credentials_from_options_override_the_chain(
    s3_archive: Archive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong")
    got = scan(s3_archive.opts(partitions="1"))
    assert sorted(got, key=key) == sorted((r for r in s3_archive.rows if r.partition == 1), key=key)


# --- export ------------------------------------------------------------------------------------------


def test_export_writes_the_same_rows_as_parquet(archive: Archive, tmp_path: Path) -> None:
    progress: list[tuple[int, int, int]] = []
    result = export(
        parse_options(archive.url, TOPIC, archive.options),
        tmp_path / "out",
        progress=lambda done, total, rows: progress.append((done, total, rows)),
    )
    table = pq.read_table(tmp_path / "out")
    assert sorted(rows_of_table(table), key=key) == sorted(archive.rows, key=key)
    assert result.rows == len(archive.rows)
    assert progress[-1][0] == progress[-1][1] and progress[-1][2] == len(archive.rows)
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_export_command_line(file_archive: Archive, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from api.cli import main

    out = tmp_path / "cli"
    result = CliRunner().invoke(
        main,
        [
            "export",
            "--topic",
            TOPIC,
            "--out",
            str(out),
            "--object-store",
            file_archive.url,
            "--partitions",
            "1",
            "--ending-offsets",
            f'{{"{TOPIC}":{{"1":300}}}}',
            "--option",
            "maxPartitionBytes=8k",
            "--output",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert sorted(table.column("offset").to_pylist()) == list(range(300))
    assert set(table.column("partition").to_pylist()) == {1}
    bad = CliRunner().invoke(
        main, ["export", "--topic", "nope", "--out", str(tmp_path / "x"), "--object-store", file_archive.url]
    )
    assert bad.exit_code == 1 and "topics/nope.json" in bad.output
