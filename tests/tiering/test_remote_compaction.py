"""Remote compaction (tiering/compactor.py) against real stores: file:// and S3 (moto on
loopback). Segments come from real hot logs, uploads from the real uploader."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hot.errors import PreconditionFailedError
from hot.manager import LogManager
from tests.tiering.rclib import (
    TOPIC,
    bucket_segment_bytes,
    check_manifest,
    check_subsequence_with_latest,
    local_rows,
    open_compacted,
    remote_rows,
    run_child,
    write,
)
from tests.tiering.uplib import load_manifest, make_store, new_service, root_of, sample, store_url
from tiering.keys import manifest_key
from tiering.manifest import CompactionConflictError, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.service import TieringService
from tiering.store import ObjectStore

pytestmark = pytest.mark.timeout(180)


def _writes(n: int, keys: int) -> list[tuple[int, int | None]]:
    return [(i % keys, i) for i in range(n)]


async def _upload_all(service: TieringService) -> None:
    await service.run_once(retention=False, sweep=False, compact=False)


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_remote_compaction_keeps_latest_values_and_shrinks_the_bucket(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = store_url(kind, tmp_path, request)
    manager = LogManager(tmp_path / "data").open()
    log = open_compacted(manager)
    write(log, _writes(300, 7))
    log.roll()
    before = local_rows(log)

    async def main() -> None:
        service = new_service(manager, url, remote_compaction_grace_ms=0)
        try:
            await _upload_all(service)
            m0 = await load_manifest(url, manager, TOPIC)
            assert len(m0.copied()) > 5 and m0.cleaned_offset == 0
            end = m0.next_offset()
            prefix = root_of(manager, TOPIC) + "/"
            bytes_before = await bucket_segment_bytes(service.store, prefix)
            stats = await service.compactor.compact_log(log, manager.topic(TOPIC).topic_id, force=True)
            assert stats is not None and stats.swapped and stats.bytes_out < stats.bytes_in
            m1 = await load_manifest(url, manager, TOPIC)
            check_manifest(m1)
            assert m1.cleaned_offset == end and m1.next_offset() == end
            assert all(s.compacted and s.cleaned_ms is not None for s in m1.copied())
            replaced = [s for s in m1.segments if s.replaced]
            assert len(replaced) == len(m0.copied())
            after = await remote_rows(service, log, end)
            check_subsequence_with_latest([r for r in before if r[0] < end], after, tombstones_may_go=False)
            assert len(after) < len([r for r in before if r[0] < end])
            # Old objects go after the grace period (0 here); the manifest drops the entries.
            st_ = service.uploader.cached_state(TOPIC, 0)
            assert st_ is not None
            assert await service.uploader.delete_replaced(st_, int(time.time() * 1000)) == len(replaced)
            m2 = await load_manifest(url, manager, TOPIC)
            assert not [s for s in m2.segments if s.replaced]
            assert await bucket_segment_bytes(service.store, prefix) < bytes_before
            assert await remote_rows(service, log, end) == after
            assert sample(service, "strata_tiering_remote_compaction_runs_total", topic=TOPIC) == 1
            assert sample(service, "strata_tiering_remote_compaction_removed_bytes_total", topic=TOPIC) > 0
            # A second pass with nothing dirty does nothing.
            assert await service.compactor.compact_log(log, manager.topic(TOPIC).topic_id) is None
        finally:
            await service.close()

    try:
        asyncio.run(main())
    finally:
        manager.close()


WRITES = st.lists(
    st.tuples(st.integers(0, 9), st.one_of(st.none(), st.integers(0, 99))), min_size=1, max_size=150
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=WRITES, second=WRITES, per_batch=st.integers(1, 4))
def test_property_remote_compaction(
    first: list[tuple[int, int | None]], second: list[tuple[int, int | None]], per_batch: int
) -> None:
    """Any history, tiered over many small segments, compacted remotely twice (a clock
    moving past delete.retention.ms in between): the remote log is a subsequence of the
    original, offsets increase, every key's latest value survives at its offset, and a
    tombstone goes only from a segment first cleaned more than delete.retention.ms ago."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        url = f"file://{tmp / 'bucket'}"
        clock = [time.time_ns() // 1_000_000]
        manager = LogManager(tmp / "data").open()
        log = open_compacted(manager, **{"delete.retention.ms": "1000"})

        async def main() -> None:
            service = new_service(manager, url, remote_compaction_grace_ms=0)
            service.compactor._clock_ms = lambda: clock[0]
            tid = manager.topic(TOPIC).topic_id
            try:
                write(log, first, per_batch=per_batch, ts=clock[0])
                log.roll()
                before1 = local_rows(log)
                await _upload_all(service)
                end1 = (await load_manifest(url, manager, TOPIC)).next_offset()
                await service.compactor.compact_log(log, tid, force=True)
                after1 = await remote_rows(service, log, end1)
                # First pass: nothing was clean before, so every latest tombstone stays.
                check_subsequence_with_latest(before1, after1, tombstones_may_go=False)
                write(log, second, per_batch=per_batch, ts=clock[0])
                log.roll()
                before2 = local_rows(log)
                await _upload_all(service)
                end2 = (await load_manifest(url, manager, TOPIC)).next_offset()
                clock[0] += 2000  # past delete.retention.ms: tombstones cleaned in pass 1 may go
                await service.compactor.compact_log(log, tid, force=True)
                after2 = await remote_rows(service, log, end2)
                check_subsequence_with_latest(before2, after2, tombstones_may_go=True)
                m = await load_manifest(url, manager, TOPIC)
                check_manifest(m)
                # Tombstones that went were all below the first pass's cleaned offset.
                kept = {o for o, _, _ in after2}
                latest: dict[bytes | None, int] = {}
                for o, k, _ in before2:
                    latest[k] = o
                for o in latest.values():
                    if o not in kept:
                        assert o < end1, f"tombstone at {o} dropped before delete.retention.ms"
            finally:
                await service.close()

        try:
            asyncio.run(main())
        finally:
            manager.close()


class _HoldManifestPut(ObjectStore):
    """The real store, except that the first conditional manifest PUT after ``armed`` is
    set waits until ``release`` is set (a real concurrent upload then changes the ETag)."""

    def __init__(self, inner: ObjectStore, mkey: str) -> None:
        self.inner = inner
        self.url = inner.url
        self.mkey = mkey
        self.armed = asyncio.Event()
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.conflicts = 0

    async def put(self, key, data, *, if_match=None, if_none_match=False):  # type: ignore[no-untyped-def]
        if key == self.mkey and self.armed.is_set() and not self.held.is_set():
            self.held.set()
            await self.release.wait()
        try:
            return await self.inner.put(key, data, if_match=if_match, if_none_match=if_none_match)
        except PreconditionFailedError:
            if key == self.mkey:
                self.conflicts += 1
            raise

    async def put_file(self, key, path, *, offset=0, length=None):  # type: ignore[no-untyped-def]
        return await self.inner.put_file(key, path, offset=offset, length=length)

    async def get(self, key, *, start=None, end=None):  # type: ignore[no-untyped-def]
        return await self.inner.get(key, start=start, end=end)

    async def get_with_etag(self, key):  # type: ignore[no-untyped-def]
        return await self.inner.get_with_etag(key)

    async def head(self, key):  # type: ignore[no-untyped-def]
        return await self.inner.head(key)

    async def delete(self, key):  # type: ignore[no-untyped-def]
        await self.inner.delete(key)

    async def delete_many(self, keys):  # type: ignore[no-untyped-def]
        await self.inner.delete_many(keys)

    async def list(self, prefix=""):  # type: ignore[no-untyped-def]
        return await self.inner.list(prefix)

    async def close(self) -> None:
        await self.inner.close()


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_uploads_during_the_swap_lose_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The compactor's swap CAS loses to a real upload by a second uploader on its own
    store client: it reloads and re-applies; no entry lost or duplicated."""
    url = store_url(kind, tmp_path, request)
    manager = LogManager(tmp_path / "data").open()
    log = open_compacted(manager)
    write(log, _writes(200, 5))
    log.roll()

    async def main() -> None:
        tid = manager.topic(TOPIC).topic_id
        held = _HoldManifestPut(make_store(url), manifest_key(TOPIC, tid, 0))
        compacting = TieringService(manager, held, new_service(manager, url).config)
        uploading = new_service(manager, url)
        try:
            await compacting.run_once(retention=False, sweep=False, compact=False)
            before = local_rows(log)
            m0 = await load_manifest(url, manager, TOPIC)
            held.armed.set()
            task = asyncio.ensure_future(compacting.compactor.compact_log(log, tid, force=True))
            await asyncio.wait_for(held.held.wait(), 60)
            # Meanwhile more data arrives and is uploaded by the other uploader.
            write(log, _writes(60, 5))
            log.roll()
            assert await uploading.uploader.upload_partition(log, tid) > 0
            held.release.set()
            stats = await asyncio.wait_for(task, 60)
            assert stats is not None and stats.swapped
            assert held.conflicts >= 1  # the CAS really lost once
            m = await load_manifest(url, manager, TOPIC)
            check_manifest(m)
            assert m.next_offset() > m0.next_offset()  # the concurrent upload is there
            uploaded = [s for s in m.copied() if s.base_offset >= m0.next_offset()]
            assert uploaded and not any(s.compacted for s in uploaded)
            assert m.cleaned_offset == m0.next_offset()
            after = await remote_rows(uploading, log, m.next_offset())
            full = [r for r in local_rows(log) if r[0] < m.next_offset()]
            assert [r for r in before if r[0] < m0.next_offset()] == [
                r for r in full if r[0] < m0.next_offset()
            ]
            check_subsequence_with_latest(full, after, tombstones_may_go=False)
        finally:
            await compacting.close()
            await uploading.close()

    try:
        asyncio.run(main())
    finally:
        manager.close()


def test_swap_abandoned_when_retention_changed_the_segments(tmp_path: Path) -> None:
    """Total retention deletes a segment between the compactor's read and its swap: the
    swap is refused (CompactionConflictError), the new objects are deleted."""
    url = f"file://{tmp_path / 'bucket'}"
    manager = LogManager(tmp_path / "data").open()
    log = open_compacted(manager)
    write(log, _writes(200, 5))
    log.roll()

    async def main() -> None:
        tid = manager.topic(TOPIC).topic_id
        held = _HoldManifestPut(make_store(url), manifest_key(TOPIC, tid, 0))
        service = TieringService(manager, held, new_service(manager, url).config)
        other = new_service(manager, url)
        try:
            await service.run_once(retention=False, sweep=False, compact=False)
            held.armed.set()
            task = asyncio.ensure_future(service.compactor.compact_log(log, tid, force=True))
            await asyncio.wait_for(held.held.wait(), 60)
            m = await load_manifest(url, manager, TOPIC)
            victim = m.copied()[0]
            st_ = other.uploader.state(TOPIC, 0, tid)
            await other.uploader._delete_remote(
                st_, {victim.segment_id}, states=(SegmentState.COPIED,), new_log_start=victim.last_offset + 1
            )
            held.release.set()
            stats = await asyncio.wait_for(task, 60)
            assert stats is not None and stats.conflict and not stats.swapped
            m2 = await load_manifest(url, manager, TOPIC)
            check_manifest(m2)
            assert not any(s.compacted for s in m2.copied()) and m2.cleaned_offset == 0
            referenced = {k for s in m2.segments for k in s.keys.all()}
            objs = [o.key for o in await held.list(root_of(manager, TOPIC) + "/segments/")]
            assert set(objs) <= referenced  # the rewritten objects were deleted
        finally:
            await service.close()
            await other.close()

    try:
        asyncio.run(main())
    finally:
        manager.close()


def test_swap_refuses_changed_entries() -> None:
    """The pure swap: unchanged entries only, exact coverage, idempotent replay."""
    import uuid

    from tiering.keys import segment_keys
    from tiering.manifest import PartitionManifest, RemoteSegment

    tid = uuid.uuid4()

    def seg(base: int, last: int, state: SegmentState = SegmentState.COPIED) -> RemoteSegment:
        sid = uuid.uuid4()
        return RemoteSegment(
            sid, base, last, 0, 0, 10, "0" * 64, 0, 0, 0, state, segment_keys("t", tid, 0, base, sid), 1, 1
        )

    a, b, c = seg(0, 9), seg(10, 19), seg(20, 29)
    m = PartitionManifest("t", tid, 0, 1, 0, (a, b, c))
    new = seg(0, 19)
    swapped = m.swap_compacted([a, b], [new], 5, cleaned_offset=20)
    assert [s.state for s in swapped.segments if s.replaced] == [SegmentState.DELETE_STARTED] * 2
    assert swapped.copied() == [new, c] and swapped.cleaned_offset == 20
    assert swapped.swap_compacted([a, b], [new], 6, cleaned_offset=20) == swapped  # replay
    with pytest.raises(CompactionConflictError):
        swapped.swap_compacted([a, b], [seg(0, 19)], 6, cleaned_offset=20)
    with pytest.raises(Exception, match="cover exactly"):
        m.swap_compacted([a, b], [seg(0, 18)], 5, cleaned_offset=20)
    back = PartitionManifest.from_json(swapped.to_json())
    assert back == swapped
    # The new fields are written only when set, and checked when read.
    assert b"cleaned_offset" not in m.to_json() and b"replaced" not in m.to_json()
    import dataclasses

    from tiering.manifest import InvalidSegmentError

    with pytest.raises(InvalidSegmentError, match="replaced"):
        dataclasses.replace(a, replaced=True)  # a COPIED entry cannot be replaced
    with pytest.raises(InvalidSegmentError, match="cleaned_ms"):
        dataclasses.replace(a, cleaned_ms=-1)
    assert swapped.replaced_due(5, 0) and not swapped.replaced_due(5, 1)


@pytest.mark.parametrize(
    "fault",
    ["compact_after_log_upload", "compact_after_upload", "compact_after_swap", "after_delete_started"],
)
def test_kill9_during_remote_compaction(fault: str, tmp_path: Path) -> None:
    """A child dies (os._exit, as abrupt as kill -9) at each point of a remote compaction;
    after a restart the manifest is the old or the new one, never a mix, every latest
    value is readable, a second compaction completes, and the sweeper removes orphans."""
    url = f"file://{tmp_path / 'bucket'}"
    data = tmp_path / "data"
    manager = LogManager(data).open()
    log = open_compacted(manager)
    write(log, _writes(240, 6))
    log.roll()
    before = local_rows(log)

    async def upload() -> None:
        service = new_service(manager, url)
        try:
            await _upload_all(service)
        finally:
            await service.close()

    asyncio.run(upload())
    m0 = asyncio.run(load_manifest(url, manager, TOPIC))
    end = m0.next_offset()
    manager.close()

    run_child(data, url, grace_ms=0, fault=fault)

    manager = LogManager(data).open()
    try:
        log = manager.get_log(TOPIC, 0)
        log.cleaner_attached = False
        m1 = asyncio.run(load_manifest(url, manager, TOPIC))
        check_manifest(m1)
        if fault in ("compact_after_log_upload", "compact_after_upload"):
            assert m1.copied() == m0.copied()  # the old manifest
        else:
            assert all(s.compacted for s in m1.copied()) and m1.cleaned_offset == end  # the new one

        async def restart() -> None:
            service = new_service(manager, url, remote_compaction_grace_ms=0, orphan_grace_ms=0)
            try:
                rows = await remote_rows(service, log, end)
                check_subsequence_with_latest(
                    [r for r in before if r[0] < end], rows, tombstones_may_go=False
                )
                await service.compactor.compact_log(log, manager.topic(TOPIC).topic_id, force=True)
                await service.run_once(retention=False, sweep=True, compact=False)  # replaced + orphans
                m2 = await load_manifest(url, manager, TOPIC)
                check_manifest(m2)
                assert not [s for s in m2.segments if s.state is not SegmentState.COPIED]
                referenced = {k for s in m2.segments for k in s.keys.all()}
                objs = {o.key for o in await service.store.list(root_of(manager, TOPIC) + "/segments/")}
                assert objs <= referenced, objs - referenced
                rows = await remote_rows(service, log, end)
                check_subsequence_with_latest(
                    [r for r in before if r[0] < end], rows, tombstones_may_go=False
                )
            finally:
                await service.close()

        asyncio.run(restart())
    finally:
        manager.close()


def test_manifest_store_cas_is_what_the_swap_uses(tmp_path: Path) -> None:
    """The swap goes through ManifestStore.update (one CAS): the revision grows by one."""
    url = f"file://{tmp_path / 'bucket'}"
    manager = LogManager(tmp_path / "data").open()
    log = open_compacted(manager)
    write(log, _writes(100, 4))
    log.roll()

    async def main() -> None:
        service = new_service(manager, url)
        try:
            await _upload_all(service)
            store = make_store(url)
            try:
                m0, _ = await ManifestStore(store).load(TOPIC, manager.topic(TOPIC).topic_id, 0)
                assert m0 is not None
                await service.compactor.compact_log(log, manager.topic(TOPIC).topic_id, force=True)
                m1, _ = await ManifestStore(store).load(TOPIC, manager.topic(TOPIC).topic_id, 0)
                assert m1 is not None and m1.revision == m0.revision + 1
            finally:
                await store.close()
        finally:
            await service.close()

    try:
        asyncio.run(main())
    finally:
        manager.close()


def test_a_reader_on_the_old_manifest_rereads_it_when_objects_are_gone(tmp_path: Path) -> None:
    """Another broker's reader cached the manifest before the swap; once the replaced
    objects are deleted its next read meets a missing object, reloads the manifest and
    serves the rewritten segments (no error reaches the client)."""
    url = f"file://{tmp_path / 'bucket'}"
    manager = LogManager(tmp_path / "data").open()
    log = open_compacted(manager)
    write(log, _writes(200, 5))
    log.roll()
    before = local_rows(log)

    async def main() -> None:
        service = new_service(manager, url, remote_compaction_grace_ms=0)
        other = new_service(manager, url)
        tid = manager.topic(TOPIC).topic_id
        try:
            await _upload_all(service)
            end = (await load_manifest(url, manager, TOPIC)).next_offset()
            old = await other.reader.manifest(TOPIC, tid, 0)
            assert old is not None and not any(s.compacted for s in old.copied())
            await service.compactor.compact_log(log, tid, force=True)
            st_ = service.uploader.cached_state(TOPIC, 0)
            assert st_ is not None and await service.uploader.delete_replaced(st_, int(time.time() * 1000))
            rows = []
            offset = 0
            while offset < end:  # the reader's cached (old) manifest is used first
                r = await other.reader.read(TOPIC, tid, 0, offset, 1 << 16, max_offset=end)
                assert r.size
                from hot.records import decode_batches

                for b in decode_batches(b"".join(r.parts)):
                    rows.extend((rec.offset, rec.key, rec.value) for rec in b.records if rec.offset >= offset)
                offset = r.next_offset
            new = await other.reader.manifest(TOPIC, tid, 0)
            assert new is not None and new.revision > old.revision  # it reloaded
            check_subsequence_with_latest([r for r in before if r[0] < end], rows, tombstones_may_go=False)
        finally:
            await service.close()
            await other.close()

    try:
        asyncio.run(main())
    finally:
        manager.close()


def test_spark_tasks_planned_before_the_swap_read_on_from_the_rewritten_segments(tmp_path: Path) -> None:
    """A Spark scan planned on the old manifest, read after the replaced objects are gone:
    the tasks re-plan the rest of their range on the current manifest (no failure)."""
    from spark.options import ReadOptions
    from spark.plan import plan_scan
    from spark.scan import read_task
    from tests.spark.sparklib import rows_of_table

    url = f"file://{tmp_path / 'bucket'}"
    manager = LogManager(tmp_path / "data").open()
    log = open_compacted(manager)
    write(log, _writes(200, 5))
    log.roll()
    before = local_rows(log)

    async def upload_and_end() -> int:
        service = new_service(manager, url)
        try:
            await _upload_all(service)
        finally:
            await service.close()
        return (await load_manifest(url, manager, TOPIC)).next_offset()

    async def compact() -> None:
        service = new_service(manager, url, remote_compaction_grace_ms=0)
        try:
            await service.compactor.compact_log(log, manager.topic(TOPIC).topic_id, force=True)
            st_ = service.uploader.cached_state(TOPIC, 0)
            assert st_ is not None and await service.uploader.delete_replaced(st_, int(time.time() * 1000))
        finally:
            await service.close()

    try:
        end = asyncio.run(upload_and_end())
        opts = ReadOptions.parse({"topic": TOPIC}, path=url)
        plan = plan_scan(opts)
        assert plan.tasks
        asyncio.run(compact())
        rows = [r for task in plan.tasks for b in read_task(task, opts) for r in rows_of_table(b)]
        got = [(r.offset, r.key, r.value) for r in rows]
        check_subsequence_with_latest([r for r in before if r[0] < end], got, tombstones_may_go=False)
    finally:
        manager.close()


def test_producer_last_batch_header_survives_remote_compaction(tmp_path: Path) -> None:
    """An idempotent producer's last batch in the compacted range keeps its header even when
    all its records are superseded (the producer snapshot uploaded with the last segment
    says which batch is last), so its sequence state stays valid; its earlier emptied
    batches go."""
    from hot.batch import HEADER
    from hot.records import RecordInput, build_batch

    url = f"file://{tmp_path / 'bucket'}"
    manager = LogManager(tmp_path / "data").open()
    log = open_compacted(manager)
    pid = 4242
    for i in range(12):  # producer batches over keys 0-1, one record each
        recs = [RecordInput(b"key-%d" % (i % 2), b"p%d" % i)]
        log.append(build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=i))
    last_pid_offset = log.log_end_offset - 1
    write(log, [(0, 100), (1, 101)] * 20)  # supersede everything the producer wrote
    log.roll()

    async def main() -> None:
        service = new_service(manager, url)
        try:
            await _upload_all(service)
            m0 = await load_manifest(url, manager, TOPIC)
            assert m0.copied()[-1].has_producer_snapshot
            stats = await service.compactor.compact_log(log, manager.topic(TOPIC).topic_id, force=True)
            assert stats is not None and stats.swapped
            m = await load_manifest(url, manager, TOPIC)
            headers: list[tuple[int, int, int]] = []  # (base, producer id, record count)
            for s in m.copied():
                data = await service.store.get(s.keys.log)
                pos = 0
                while pos < len(data):
                    h = HEADER.unpack_from(data, pos)
                    headers.append((h[0], h[9], h[12]))
                    pos += 12 + h[1]
            mine = [h for h in headers if h[1] == pid]
            assert mine == [(last_pid_offset, pid, 0)]  # only the last, as a bare header
            # The rewritten segments' indexes and snapshot went up as one ``.indexes``
            # object, as the uploader writes them, and the snapshot reads back whole.
            rewritten = [s for s in m.copied() if s.compacted]
            assert rewritten and all(s.indexes_size is not None for s in rewritten)
            snap, src_snap = rewritten[-1].snapshot_part(), m0.copied()[-1].snapshot_part()
            assert snap is not None and src_snap is not None
            assert await snap.get(service.store) == await src_snap.get(service.store)
            assert not await service.store.exists(rewritten[-1].keys.index)
        finally:
            await service.close()

    try:
        asyncio.run(main())
    finally:
        manager.close()


def test_compactions_and_uploads_racing_freely(tmp_path: Path) -> None:
    """No seam: rounds of writes, each uploaded by one uploader while another broker-like
    service compacts the bucket at the same moment; after every round the manifest covers
    the remote range exactly once and holds every key's latest value."""
    url = f"file://{tmp_path / 'bucket'}"
    manager = LogManager(tmp_path / "data").open()
    log = open_compacted(manager)

    async def main() -> None:
        tid = manager.topic(TOPIC).topic_id
        uploading = new_service(manager, url)
        compacting = new_service(manager, url, remote_compaction_grace_ms=0)
        history: list[tuple[int, bytes | None, bytes | None]] = []
        try:
            for r in range(6):
                write(log, [(k % 5, 100 * r + k) for k in range(40)])
                log.roll()
                history = local_rows(log)
                await asyncio.gather(
                    uploading.uploader.upload_partition(log, tid),
                    compacting.compactor.compact_log(log, tid, force=True),
                )
                m = await load_manifest(url, manager, TOPIC)
                check_manifest(m)
                end = m.next_offset()
                rows = await remote_rows(uploading, log, end)
                check_subsequence_with_latest(
                    [h for h in history if h[0] < end], rows, tombstones_may_go=False
                )
            assert sample(compacting, "strata_tiering_remote_compaction_runs_total", topic=TOPIC) >= 3
        finally:
            await uploading.close()
            await compacting.close()

    try:
        asyncio.run(main())
    finally:
        manager.close()
