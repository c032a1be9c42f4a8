"""Partition manifests: state machine, strict JSON, compare-and-swap updates, spillover."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hot.errors import InvalidRequestError, RetriableObjectStoreError, StrataError
from tiering.keys import manifest_key, segment_keys, topic_manifest_key
from tiering.manifest import (
    VALID_TRANSITIONS,
    CorruptManifestError,
    InvalidSegmentError,
    InvalidStateTransitionError,
    ObjectPart,
    PartitionManifest,
    RemoteSegment,
    SegmentOverlapError,
    SegmentState,
    SpilloverRef,
    check_transition,
)
from tiering.manifest_store import ManifestStore
from tiering.store import ObjectStore, SyncObjectStore, open_store

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "orders"
TID = uuid.UUID("12345678-1234-5678-1234-567812345678")
S = SegmentState


def seg(
    base: int,
    last: int,
    state: SegmentState = S.COPY_STARTED,
    *,
    sid: uuid.UUID | None = None,
    partition: int = 0,
    now: int = 1_000,
    size: int = 100,
    crc: int | None = None,
) -> RemoteSegment:
    sid = sid or uuid.uuid4()
    return RemoteSegment(
        segment_id=sid,
        base_offset=base,
        last_offset=last,
        first_timestamp=base * 10,
        max_timestamp=last * 10,
        size=size,
        log_sha256="ab" * 32,
        index_size=8,
        timeindex_size=12,
        leader_epoch=0,
        state=state,
        keys=segment_keys(TOPIC, TID, partition, base, sid),
        created_ms=now,
        updated_ms=now,
        record_count=last - base + 1,
        log_crc32c=crc,
    )


def empty(partition: int = 0) -> PartitionManifest:
    return PartitionManifest.empty(TOPIC, TID, partition)


def add_copied(m: PartitionManifest, s: RemoteSegment) -> PartitionManifest:
    return m.add_or_update(s).add_or_update(s.with_state(S.COPIED, s.updated_ms + 1))


# --- state machine -------------------------------------------------------------------------------


def test_valid_transitions_table() -> None:
    assert dict(VALID_TRANSITIONS) == {
        S.COPY_STARTED: {S.COPIED, S.DELETE_STARTED},
        S.COPIED: {S.DELETE_STARTED},
        S.DELETE_STARTED: {S.DELETED},
        S.DELETED: set(),
    }
    check_transition(S.COPY_STARTED, S.COPIED)
    with pytest.raises(InvalidStateTransitionError, match="COPIED to COPY_STARTED"):
        check_transition(S.COPIED, S.COPY_STARTED)
    assert issubclass(InvalidStateTransitionError, StrataError)


@given(st.lists(st.sampled_from(list(SegmentState)), max_size=10))
def test_random_transition_sequences(states: list[SegmentState]) -> None:
    """Only steps along VALID_TRANSITIONS succeed, on a segment and through a manifest."""
    s = seg(0, 9)
    m = empty().add_or_update(s)
    for i, new in enumerate(states):
        if new in VALID_TRANSITIONS[s.state]:
            s = s.with_state(new, 2_000 + i)
            m = m.add_or_update(s)
            assert s.state is new and s.updated_ms == 2_000 + i
            assert m.get(s.segment_id) == s
        else:
            with pytest.raises(InvalidStateTransitionError):
                s.with_state(new, 2_000 + i)
            if new is not s.state:
                with pytest.raises(InvalidStateTransitionError):
                    m.add_or_update(replace(s, state=new))


def test_add_or_update_rules() -> None:
    a = seg(0, 99)
    m = empty().add_or_update(a)
    assert m.add_or_update(a) is m  # replay: no change
    assert m.add_or_update(replace(a, updated_ms=5_000)) is m  # only the timestamp differs
    refreshed = replace(a, size=123)  # COPY_STARTED metadata may be completed
    assert m.add_or_update(refreshed).get(a.segment_id) == refreshed
    with pytest.raises(InvalidStateTransitionError, match="COPY_STARTED"):
        m.add_or_update(seg(100, 199, S.COPIED))  # new segments start in COPY_STARTED
    with pytest.raises(InvalidSegmentError, match="offsets and keys"):
        m.add_or_update(replace(a, last_offset=98))
    m = m.add_or_update(a.with_state(S.COPIED, 2_000))
    with pytest.raises(InvalidStateTransitionError, match="metadata"):
        m.add_or_update(replace(m.segments[0], size=1))  # COPIED is immutable
    with pytest.raises(InvalidStateTransitionError):
        m.add_or_update(a)  # back to COPY_STARTED
    # A second COPIED segment over the same offsets is rejected; a COPY_STARTED one is not.
    b = seg(50, 150)
    m2 = m.add_or_update(b)
    with pytest.raises(SegmentOverlapError, match="overlaps"):
        m2.add_or_update(b.with_state(S.COPIED, 3_000))
    # The abandoned copy is cleaned up through DELETE_STARTED -> DELETED, then forgotten.
    b_del = b.with_state(S.DELETE_STARTED, 3_000)
    m2 = m2.add_or_update(b_del).add_or_update(b_del.with_state(S.DELETED, 3_001))
    m2 = m2.remove_deleted()
    assert m2 == m
    # Replaying a deletion of a forgotten segment is a no-op.
    assert m2.add_or_update(b_del) is m2


def test_queries() -> None:
    m = empty()
    assert (m.next_offset(), m.remote_size(), m.find(0), m.copied(), m.first_offset()) == (
        0,
        0,
        None,
        [],
        None,
    )
    a, b, c = seg(0, 99, size=10), seg(100, 199, size=20), seg(200, 299, size=40)
    m = add_copied(add_copied(m, b), a).add_or_update(c)  # c only COPY_STARTED
    assert [s.base_offset for s in m.segments] == [0, 100, 200]
    assert [s.segment_id for s in m.copied()] == [a.segment_id, b.segment_id]
    assert m.find(0) == m.copied()[0] and m.find(150) == m.copied()[1]
    assert m.find(250) is None and m.find(300) is None
    assert m.next_offset() == 200
    assert m.remote_size() == 30
    assert m.first_offset() == 0
    # Retention: the log start moves first and never backwards.
    m = m.advance_log_start(100)
    assert m.advance_log_start(50).log_start_offset == 100
    assert m.next_offset() == 200
    assert empty().advance_log_start(500).next_offset() == 500
    with pytest.raises(InvalidRequestError):
        m.advance_log_start(-1)


# --- JSON ----------------------------------------------------------------------------------------


def _sample() -> PartitionManifest:
    m = add_copied(empty(), seg(100, 199))
    m = add_copied(m, seg(200, 299, size=5, crc=0xFFFFFFFF))
    m = m.add_or_update(seg(300, 310, crc=0))
    ref = SpilloverRef(
        base_offset=0, last_offset=99, key="x/spillover/a.json", segment_count=2, size=1, max_timestamp=3
    )
    return replace(m, revision=7, log_start_offset=3, spillover=(ref,))


def test_json_round_trip() -> None:
    m = _sample()
    data = m.to_json()
    assert PartitionManifest.from_json(data) == m
    doc = json.loads(data)
    assert doc["format_version"] == 1 and doc["revision"] == 7 and doc["topic_id"] == TID.hex
    assert [s["state"] for s in doc["segments"]] == ["COPIED", "COPIED", "COPY_STARTED"]
    assert m.to_json() == data  # deterministic bytes
    assert [s.get("log_crc32c") for s in doc["segments"]] == [None, 0xFFFFFFFF, 0]
    assert "log_crc32c" not in doc["segments"][0]  # never written as null


def test_entry_without_crc32c_round_trips() -> None:
    """A manifest written before ``log_crc32c`` existed parses, and is written back as it was."""
    doc = json.loads(_sample().to_json())
    for s in doc["segments"]:
        s.pop("log_crc32c", None)
    old = json.dumps(doc).encode()
    m = PartitionManifest.from_json(old)
    assert all(s.log_crc32c is None for s in m.segments)
    assert json.loads(m.to_json()) == doc
    # a newer writer adding a segment with a CRC leaves the older entries as they were
    m2 = add_copied(m, seg(311, 320, crc=12345))
    doc2 = json.loads(m2.to_json())
    assert [s.get("log_crc32c") for s in doc2["segments"]] == [None, None, None, 12345]


def test_indexes_object_parts_and_round_trip() -> None:
    """``indexes_size``: the indexes and snapshot in one object, each part a range of it;
    without it (older entries) each part is an object of its own."""
    old = replace(seg(0, 9), has_producer_snapshot=True)
    assert old.index_part() == ObjectPart(old.keys.index, 0, 8, 8, old.keys.index)
    assert old.timeindex_part() == ObjectPart(old.keys.timeindex, 0, 12, 12, old.keys.timeindex)
    snap = old.snapshot_part()
    assert snap is not None and (snap.key, snap.start, snap.end) == (old.keys.producer_snapshot, None, None)
    new = replace(old, indexes_size=50)
    key = new.keys.indexes
    assert key == new.keys.log.removesuffix(".log") + ".indexes" and key in new.keys.all()
    assert [(p.key, p.start, p.end, p.object_size) for p in (new.index_part(), new.timeindex_part())] == [
        (key, 0, 8, 50),
        (key, 8, 20, 50),
    ]
    snap = new.snapshot_part()
    assert snap is not None and (snap.start, snap.end) == (20, 50)
    assert replace(new, has_producer_snapshot=False).snapshot_part() is None
    assert len({new.index_part().name, new.timeindex_part().name, snap.name}) == 3
    m = empty().add_or_update(new).add_or_update(replace(seg(10, 19), has_producer_snapshot=True))
    doc = json.loads(m.to_json())
    assert [d.get("indexes_size") for d in doc["segments"]] == [50, None]
    assert "indexes_size" not in doc["segments"][1]  # older entries are written as they were
    assert "indexes" not in doc["segments"][0]["keys"]  # derived from keys.log, never stored
    assert PartitionManifest.from_json(m.to_json()) == m
    with pytest.raises(InvalidSegmentError, match="indexes_size"):
        replace(old, indexes_size=19)  # shorter than the two indexes


@given(
    st.lists(
        st.tuples(
            st.integers(1, 50),
            st.sampled_from(list(SegmentState)),
            st.booleans(),
            st.none() | st.integers(0, 9),
            st.none() | st.integers(0, (1 << 32) - 1),
        ),
        max_size=12,
    ),
    st.integers(0, 10),
)
def test_json_round_trip_property(
    specs: list[tuple[int, SegmentState, bool, int | None, int | None]], lso: int
) -> None:
    segments = []
    base = 0
    for length, state, snap, count, crc in specs:
        segments.append(
            replace(
                seg(base, base + length - 1, state),
                has_producer_snapshot=snap,
                record_count=count,
                log_crc32c=crc,
            )
        )
        base += length
    m = PartitionManifest(TOPIC, TID, 3, revision=len(specs), log_start_offset=lso, segments=tuple(segments))
    assert PartitionManifest.from_json(m.to_json()) == m


def _corrupt(change: Callable[[dict[str, Any]], object]) -> bytes:
    doc = json.loads(_sample().to_json())
    change(doc)
    return json.dumps(doc).encode()


def _overlap(d: dict[str, Any]) -> None:
    d["segments"][1]["base_offset"] = 150


def _unsorted(d: dict[str, Any]) -> None:
    d["segments"].reverse()


def _dup(d: dict[str, Any]) -> None:
    d["segments"][2]["segment_id"] = d["segments"][0]["segment_id"]


@pytest.mark.parametrize(
    ("data", "hint"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (_corrupt(lambda d: d.update(format_version=2)), "format_version 2"),
        (_corrupt(lambda d: d.pop("segments")), "missing field(s) segments"),
        (_corrupt(lambda d: d.update(extra=1)), "unknown field(s) extra"),
        (_corrupt(lambda d: d["segments"][0].pop("size")), "segments[0]: segment is missing field(s) size"),
        (_corrupt(lambda d: d["segments"][0].update(state="COPYING")), "unknown state 'COPYING'"),
        (_corrupt(lambda d: d["segments"][1].update(size=-1)), "size is negative"),
        (_corrupt(lambda d: d["segments"][0].update(base_offset="0")), "base_offset must be an integer"),
        (_corrupt(lambda d: d["segments"][0].update(base_offset=True)), "base_offset must be an integer"),
        (_corrupt(lambda d: d["segments"][0].update(last_offset=-5)), "below base_offset"),
        (_corrupt(lambda d: d["segments"][0].update(log_sha256="xyz")), "log_sha256"),
        (_corrupt(lambda d: d["segments"][0].update(log_crc32c=-1)), "log_crc32c must be an integer in"),
        (_corrupt(lambda d: d["segments"][0].update(log_crc32c=1 << 32)), "log_crc32c must be an integer in"),
        (_corrupt(lambda d: d["segments"][0].update(log_crc32c="12")), "log_crc32c must be an integer in"),
        (_corrupt(lambda d: d["segments"][0].update(log_crc32c=1.5)), "log_crc32c must be an integer in"),
        (_corrupt(lambda d: d["segments"][0].update(log_crc32c=True)), "log_crc32c must be an integer in"),
        (_corrupt(lambda d: d["segments"][0].update(log_crc32c=None)), "got null"),
        (_corrupt(lambda d: d["segments"][0].update(segment_id="nope")), "not a UUID"),
        (_corrupt(lambda d: d["segments"][0]["keys"].pop("log")), "missing field(s) log"),
        (_corrupt(_overlap), "overlap"),
        (_corrupt(_unsorted), "not sorted"),
        (_corrupt(_dup), "appears twice"),
        (_corrupt(lambda d: d.update(topic="bad topic")), "illegal"),
        (_corrupt(lambda d: d.update(topic_id="xyz")), "topic_id"),
        (_corrupt(lambda d: d.update(revision=-1)), "revision"),
        (_corrupt(lambda d: d["spillover"][0].update(last_offset=150)), "spilled"),
        (_corrupt(lambda d: d["spillover"][0].update(segment_count=0)), "spillover[0]"),
    ],
    ids=lambda v: v if isinstance(v, str) else "data",
)
def test_corrupt_manifests_rejected(data: bytes, hint: str) -> None:
    with pytest.raises(CorruptManifestError) as ei:
        PartitionManifest.from_json(data, source="bucket/x/manifest.json")
    assert "bucket/x/manifest.json" in str(ei.value)
    assert hint in str(ei.value)


# --- ManifestStore on both backends -----------------------------------------------------------------


@pytest.fixture(params=["file", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    if request.param == "file":
        url = f"file://{tmp_path}/objects"
    else:
        url = f"s3://{request.getfixturevalue('s3_bucket')}/tier"
    s = open_store(url)
    try:
        yield s
    finally:
        await s.close()


async def test_update_creates_and_reloads(store: ObjectStore) -> None:
    ms = ManifestStore(store)
    assert await ms.load(TOPIC, TID, 0) == (None, None)
    assert await ms.update(TOPIC, TID, 0, lambda m: None) == empty()
    assert await store.head(manifest_key(TOPIC, TID, 0)) is None  # "no change" writes nothing
    a = seg(0, 99)
    m1 = await ms.update(TOPIC, TID, 0, lambda m: m.add_or_update(a))
    assert m1.revision == 1 and m1.segments == (a,)
    loaded, etag = await ms.load(TOPIC, TID, 0)
    assert loaded == m1 and etag
    # Replaying the same change is idempotent: no write, no new revision.
    assert await ms.update(TOPIC, TID, 0, lambda m: m.add_or_update(a)) == m1
    assert (await ms.load(TOPIC, TID, 0))[1] == etag
    m2 = await ms.update(TOPIC, TID, 0, lambda m: m.add_or_update(a.with_state(S.COPIED, 2_000)))
    assert m2.revision == 2 and m2.find(50) is not None
    # Other partitions are independent.
    assert (await ms.load(TOPIC, TID, 1)) == (None, None)
    # Mutation errors propagate and write nothing.
    with pytest.raises(InvalidStateTransitionError):
        await ms.update(TOPIC, TID, 0, lambda m: m.add_or_update(a))
    assert (await ms.load(TOPIC, TID, 0))[0] == m2


async def test_update_refuses_to_overwrite_a_corrupt_manifest(store: ObjectStore) -> None:
    key = manifest_key(TOPIC, TID, 0)
    await store.put(key, b'{"format_version": 99}')
    with pytest.raises(CorruptManifestError, match=re.escape(key)):
        await ManifestStore(store).update(TOPIC, TID, 0, lambda m: m.add_or_update(seg(0, 1)))
    assert await store.get(key) == b'{"format_version": 99}'
    # A manifest of another partition stored under this key is corrupt too.
    await store.put(key, PartitionManifest.empty(TOPIC, TID, 5).to_json())
    with pytest.raises(CorruptManifestError, match="orders-5"):
        await ManifestStore(store).load(TOPIC, TID, 0)


async def test_update_gives_up_after_max_attempts(store: ObjectStore) -> None:
    """A writer that keeps losing the CAS (a rival bumps the manifest every time) stops, retriably."""
    ms = ManifestStore(store)
    await ms.update(TOPIC, TID, 0, lambda m: m.add_or_update(seg(0, 9)))
    key = manifest_key(TOPIC, TID, 0)
    rival = SyncObjectStore(open_store(store.url))
    calls = 0

    def racing(m: PartitionManifest) -> PartitionManifest:
        nonlocal calls
        calls += 1
        rival.put(key, replace(m, revision=m.revision + 1000 + calls).to_json())
        return m.add_or_update(seg(100 * calls, 100 * calls + 9))

    try:
        with pytest.raises(RetriableObjectStoreError, match="3 times"):
            await ms.update(TOPIC, TID, 0, racing, max_attempts=3)
    finally:
        rival.close()
    assert calls == 4  # a try on the manifest it last wrote (no GET), then 3 after reloads
    m, _ = await ms.load(TOPIC, TID, 0)
    assert m is not None and len(m.segments) == 1  # none of the losing writes landed


async def test_update_after_own_write_needs_no_get_and_survives_a_rival(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update CASes on the manifest this store last wrote without reading it again; when
    a rival wrote in between, the 412 makes it reload, and both writes are kept."""
    ms = ManifestStore(store)
    gets = 0
    real = store.get_with_etag

    async def counting(key: str) -> tuple[bytes, str]:
        nonlocal gets
        gets += 1
        return await real(key)

    monkeypatch.setattr(store, "get_with_etag", counting)
    await ms.update(TOPIC, TID, 0, lambda m: m.add_or_update(seg(0, 9)))
    assert gets == 1  # the first update reads (nothing there yet)
    await ms.update(TOPIC, TID, 0, lambda m: m.add_or_update(seg(10, 19)))
    assert gets == 1
    # A no-op on the remembered manifest is decided on a fresh read.
    same = await ms.update(TOPIC, TID, 0, lambda m: m)
    assert gets == 2 and [s.base_offset for s in same.segments] == [0, 10]
    rival = ManifestStore(store)
    await rival.update(TOPIC, TID, 0, lambda m: m.add_or_update(seg(20, 29)))
    m = await ms.update(TOPIC, TID, 0, lambda m: m.add_or_update(seg(30, 39)))
    assert [s.base_offset for s in m.segments] == [0, 10, 20, 30]
    assert (await ms.load(TOPIC, TID, 0))[0] == m


async def _writer(url: str, writer: int, count: int, go: Path | None = None) -> list[int]:
    """Adds ``count`` COPIED segments through its own store, one update each; returns revisions."""
    while go is not None and not go.exists():
        await asyncio.sleep(0.005)
    async with open_store(url) as s:
        ms = ManifestStore(s)
        revisions = []
        for i in range(count):
            base = (writer * 1000 + i) * 10
            x = seg(base, base + 9)
            m = await ms.update(TOPIC, TID, 0, lambda m, x=x: add_copied(m, x), max_attempts=500)
            revisions.append(m.revision)
        return revisions


def _check_no_lost_update(
    final: PartitionManifest | None, revisions: list[int], writers: int, count: int
) -> None:
    assert final is not None
    assert len(final.segments) == writers * count
    assert all(s.state is S.COPIED for s in final.segments)
    assert {s.base_offset // 10000 for s in final.segments} == set(range(writers))
    # Every write got its own revision, and the last one is the manifest's.
    assert sorted(revisions) == list(range(1, writers * count + 1))
    assert final.revision == writers * count


async def test_concurrent_updates_never_lose_a_write(store: ObjectStore) -> None:
    results = await asyncio.gather(*(_writer(store.url, w, 10) for w in range(8)))
    for revs in results:
        assert revs == sorted(revs) and len(set(revs)) == len(revs)  # strictly increasing per writer
    final, _ = await ManifestStore(store).load(TOPIC, TID, 0)
    _check_no_lost_update(final, [r for revs in results for r in revs], 8, 10)


_PROCESS_WRITER = """
import asyncio, json, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.tiering.test_manifest import _writer
ready = Path({ready!r})
ready.write_text("")
print(json.dumps(asyncio.run(_writer({url!r}, {writer}, {count}, Path({go!r})))))
"""


async def test_file_store_updates_from_threads_and_processes(tmp_path: Path) -> None:
    """flock + rename across tasks, threads and processes, each with its own FileStore."""
    url = f"file://{tmp_path}/objects"
    go = tmp_path / "go"
    procs = []
    for w in (0, 1):
        code = _PROCESS_WRITER.format(
            root=str(ROOT), ready=str(tmp_path / f"ready{w}"), url=url, writer=w, count=8, go=str(go)
        )
        procs.append(
            await asyncio.create_subprocess_exec(
                sys.executable, "-c", code, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        )
    threads = [asyncio.to_thread(lambda w=w: asyncio.run(_writer(url, w, 8, go))) for w in (2, 3)]
    tasks = [_writer(url, w, 8, go) for w in (4, 5)]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready{w}").exists() for w in (0, 1)):
        assert time.monotonic() < deadline, "writer processes did not start"
        await asyncio.sleep(0.01)
    go.write_text("")
    in_process = await asyncio.gather(*threads, *tasks)
    revisions = [r for revs in in_process for r in revs]
    for p in procs:
        out, err = await asyncio.wait_for(p.communicate(), 60)
        assert p.returncode == 0, err.decode()
        revisions += json.loads(out)
    final, _ = await ManifestStore(open_store(url)).load(TOPIC, TID, 0)
    _check_no_lost_update(final, revisions, 6, 8)


# --- spillover -----------------------------------------------------------------------------------


async def test_spillover_bounds_the_manifest(store: ObjectStore) -> None:
    ms = ManifestStore(store, max_segments=10)
    segs = [seg(i * 100, i * 100 + 99, size=i + 1) for i in range(25)]
    for s in segs:
        await ms.update(TOPIC, TID, 0, lambda m, s=s: add_copied(m, s))
    m, _ = await ms.load(TOPIC, TID, 0)
    assert m is not None
    assert len(m.segments) <= 10 and m.spillover
    assert len(m.segments) + sum(r.segment_count for r in m.spillover) == 25
    assert m.remote_size() == sum(s.size for s in segs)
    assert m.next_offset() == 2_500
    assert m.first_offset() == 0
    # Readers see every segment, spilled or not, also through a fresh store (no cache).
    async with open_store(store.url) as other:
        fresh = ManifestStore(other)
        full = await fresh.load_all_segments(TOPIC, TID, 0)
        assert [s.segment_id for s in full] == [s.segment_id for s in segs]
        assert all(s.state is S.COPIED for s in full)
        for offset in (0, 150, 999, 1_234, 2_499):
            found = await fresh.find_segment(m, offset)
            assert found is not None and found.contains(offset)
        assert await fresh.find_segment(m, 2_500) is None
    assert m.find(0) is None and m.spillover_for(0) is not None
    # Spill objects are immutable and live under the partition's spillover/ prefix.
    spills = await store.list(manifest_key(TOPIC, TID, 0).replace("manifest.json", "spillover/"))
    assert {o.key for o in spills} >= {r.key for r in m.spillover}
    # A COPIED segment may not reappear inside a spilled range.
    with pytest.raises(SegmentOverlapError, match="spilled"):
        await ms.update(TOPIC, TID, 0, lambda m: add_copied(m, seg(50, 60)))
    # Retention of a spilled range: advance the log start, then drop the reference.
    first = m.spillover[0]
    m2 = await ms.update(
        TOPIC, TID, 0, lambda m: m.advance_log_start(first.last_offset + 1).drop_spillover(first.key)
    )
    assert m2.spillover == m.spillover[1:] and m2.log_start_offset == first.last_offset + 1
    assert await ms.update(TOPIC, TID, 0, lambda m: m.drop_spillover(first.key)) == m2  # idempotent


async def test_spillover_object_is_checked_against_its_reference(store: ObjectStore) -> None:
    ms = ManifestStore(store, max_segments=4)
    for i in range(6):
        await ms.update(TOPIC, TID, 0, lambda m, i=i: add_copied(m, seg(i * 10, i * 10 + 9)))
    m, _ = await ms.load(TOPIC, TID, 0)
    assert m is not None and m.spillover
    ref = m.spillover[0]
    await store.put(ref.key, b'{"garbage": true}')
    with pytest.raises(CorruptManifestError, match=re.escape(ref.key)):
        await ManifestStore(store).load_all_segments(TOPIC, TID, 0)
    await store.delete(ref.key)
    with pytest.raises(CorruptManifestError, match="missing"):
        await ManifestStore(store).load_spillover(ref)


# --- topic manifests -----------------------------------------------------------------------------


async def test_topic_manifests(store: ObjectStore) -> None:
    ms = ManifestStore(store)
    assert await ms.list_topics() == []
    assert await ms.load_topic_manifest("orders") is None
    doc = {"name": "orders", "topic_id": str(TID), "partitions": 3, "configs": {"retention.ms": "1000"}}
    await ms.put_topic_manifest(doc)
    await ms.put_topic_manifest({"name": "_internal.x", "topic_id": TID.hex, "partitions": 1})
    assert await ms.load_topic_manifest("orders") == doc
    assert await ms.load_topic_manifest("_internal.x") == {
        "name": "_internal.x",
        "topic_id": str(TID),
        "partitions": 1,
        "configs": {},
    }
    assert await ms.list_topics() == ["_internal.x", "orders"]
    for bad in (
        {"name": "bad name", "topic_id": str(TID), "partitions": 1},
        {"name": "t", "topic_id": "nope", "partitions": 1},
        {"name": "t", "topic_id": str(TID), "partitions": 0},
        {"name": "t", "topic_id": str(TID), "partitions": 1, "configs": {"a": 1}},
        {"name": "t", "topic_id": str(TID), "partitions": 1, "surprise": True},
    ):
        with pytest.raises(InvalidRequestError):
            await ms.put_topic_manifest(bad)
    await store.put(topic_manifest_key("broken"), b"{")
    with pytest.raises(CorruptManifestError, match=r"topics/broken\.json"):
        await ms.load_topic_manifest("broken")
    await store.put(topic_manifest_key("other"), json.dumps({**doc, "format_version": 1}).encode())
    with pytest.raises(CorruptManifestError, match="names topic 'orders'"):
        await ms.load_topic_manifest("other")
