"""Helpers of the remote compaction tests, and the child program of their crash tests.

As a program (``python -m tests.tiering.rclib <data dir> <store url> <grace ms>``) it opens
the data dir's LogManager and runs one remote compaction of topic ``c`` partition 0
(forced), then deletes the replaced objects whose grace period passed, and prints
``done``. The parent sets ``STRATA_TIERING_FAULT`` to make it die abruptly at a chosen
point (tiering.uploader's fault hook).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hot.log import Log
from hot.manager import LogManager
from hot.records import RecordInput, build_batch, decode_batches
from tiering.manifest import PartitionManifest, SegmentState
from tiering.service import TieringService
from tiering.store import ObjectStore

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "c"
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "index.interval.bytes": "128",
    "min.cleanable.dirty.ratio": "0.0",
    "delete.retention.ms": "60000",
    "remote.storage.enable": "true",
}

Row = tuple[int, bytes | None, bytes | None]


def key(k: int) -> bytes:
    return b"key-%d" % k


def value(k: int, v: int) -> bytes:
    return b"value-%d-%d-" % (k, v) + b"x" * 24


def open_compacted(manager: LogManager, **configs: str) -> Log:
    """Topic ``c`` (one partition) with the test's compaction settings; the local cleaner
    is detached so raw (uncompacted) segments are uploaded and the bucket holds history."""
    manager.create_topic(TOPIC, 1, {**CONFIGS, **configs})
    log = manager.get_log(TOPIC, 0)
    log.cleaner_attached = False
    return log


def write(
    log: Log, writes: list[tuple[int, int | None]], *, per_batch: int = 2, ts: int | None = None
) -> None:
    if ts is None:
        ts = time.time_ns() // 1_000_000
    for i in range(0, len(writes), per_batch):
        recs = [
            RecordInput(key(k), None if v is None else value(k, v), timestamp=ts)
            for k, v in writes[i : i + per_batch]
        ]
        log.append(build_batch(recs))


def local_rows(log: Log) -> list[Row]:
    out: list[Row] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        r = log.read(offset, 1 << 20)
        if not r.regions:
            break
        for b in decode_batches(r.read()):
            out.extend((rec.offset, rec.key, rec.value) for rec in b.records if rec.offset >= offset)
        offset = r.next_offset
    return out


async def remote_rows(service: TieringService, log: Log, end: int) -> list[Row]:
    """Every record of the bucket below ``end`` through the remote reader (fresh manifest)."""
    tid = service.manager.topic(log.topic).topic_id
    service.reader.forget(log.topic, tid, log.partition)
    out: list[Row] = []
    m = await service.reader.manifest(log.topic, tid, log.partition, refresh=True)
    assert m is not None
    offset = m.log_start_offset
    while offset < end:
        r = await service.reader.read(log.topic, tid, log.partition, offset, 1 << 20, max_offset=end)
        if r.size == 0:
            break
        for b in decode_batches(b"".join(r.parts)):
            out.extend((rec.offset, rec.key, rec.value) for rec in b.records if offset <= rec.offset < end)
        offset = r.next_offset
    return out


def check_subsequence_with_latest(before: list[Row], after: list[Row], *, tombstones_may_go: bool) -> None:
    """``after`` is a subsequence of ``before`` (same records, same offsets, in order) that
    holds the latest record of every key (tombstones excepted when they may go)."""
    orig = {o: (k, v) for o, k, v in before}
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets)), "offsets not strictly increasing"
    for o, k, v in after:
        assert orig[o] == (k, v), f"record at {o} changed"
    latest: dict[bytes | None, int] = {}
    for o, k, _ in before:
        latest[k] = o
    kept = set(offsets)
    for o in latest.values():
        if orig[o][1] is not None or not tombstones_may_go:
            assert o in kept, f"latest record of {orig[o][0]!r} at offset {o} is gone"


def check_manifest(m: PartitionManifest) -> None:
    """COPIED entries cover a contiguous range exactly once; ids unique."""
    copied = m.copied()
    for a, b in itertools.pairwise(copied):
        assert b.base_offset == a.last_offset + 1, (a, b)
    ids = [s.segment_id for s in m.segments]
    assert len(ids) == len(set(ids))
    assert not [s for s in m.segments if s.state is SegmentState.COPY_STARTED]


async def bucket_segment_bytes(store: ObjectStore, prefix: str) -> int:
    return sum(o.size for o in await store.list(prefix) if "/segments/" in o.key)


def run_child(data_dir: Path, url: str, *, grace_ms: int, fault: str | None) -> str:
    from tiering.uploader import FAULT_ENV, FAULT_EXIT_CODE

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(FAULT_ENV, None)
    if fault is not None:
        env[FAULT_ENV] = fault
    proc = subprocess.run(
        [sys.executable, "-m", "tests.tiering.rclib", str(data_dir), url, str(grace_ms)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    if fault is not None:
        assert proc.returncode == FAULT_EXIT_CODE, out
    else:
        assert proc.returncode == 0, out
    return out


async def _child(data_dir: str, url: str, grace_ms: int) -> None:
    from tests.tiering.uplib import new_service

    manager = LogManager(Path(data_dir)).open()
    service = new_service(manager, url, remote_compaction_grace_ms=grace_ms)
    try:
        log = manager.get_log(TOPIC, 0)
        log.cleaner_attached = False
        stats = await service.compactor.compact_log(log, manager.topic(TOPIC).topic_id, force=True)
        assert stats is not None and stats.swapped, stats
        st = service.uploader.cached_state(TOPIC, 0)
        assert st is not None
        await service.uploader.delete_replaced(st, time.time_ns() // 1_000_000)
        print("done", flush=True)
    finally:
        await service.close()
        manager.close()


if __name__ == "__main__":
    asyncio.run(_child(sys.argv[1], sys.argv[2], int(sys.argv[3])))
