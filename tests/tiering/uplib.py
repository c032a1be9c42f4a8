"""Helpers of the uploader and retention tests, and the child program of the crash tests.

As a program (``python -m tests.tiering.uplib <data dir> <store url>``) it opens the
data dir's LogManager and runs one tiering pass (uploads and local retention, no total
retention), then prints ``done <uploaded>``. The parent sets ``STRATA_TIERING_FAULT`` to
make it die abruptly at a chosen point of an upload (tiering.uploader's fault hook).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hot.config import LogConfig
from hot.log import Log
from hot.manager import LogManager
from tests.hot.hotlib import batch_at
from tiering.config import TieringConfig
from tiering.keys import SegmentKeys, partition_root
from tiering.manifest import PartitionManifest, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.metrics import TieringMetrics
from tiering.service import TieringService
from tiering.store import ObjectStore, open_store

ROOT = Path(__file__).resolve().parents[2]
SEGMENT_BYTES = 65536


def store_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh store of the given backend: ``file`` or ``s3`` (moto on loopback)."""
    if kind == "file":
        return f"file://{tmp_path / 'bucket'}"
    bucket = request.getfixturevalue("s3_bucket")  # also points the AWS chain at moto
    return f"s3://{bucket}/strata"


def make_store(url: str) -> ObjectStore:
    # Few botocore attempts: outage tests must see the failure quickly.
    return open_store(url, max_attempts=2, connect_timeout=2.0, read_timeout=10.0)


def new_manager(data_dir: Path, **config: object) -> LogManager:
    cfg = LogConfig(**{"segment_bytes": SEGMENT_BYTES, "flush_mode": "interval", **config})  # type: ignore[arg-type]
    return LogManager(data_dir, cfg).open()


def new_service(manager: LogManager, url: str, **config: object) -> TieringService:
    cfg = TieringConfig(**{"cache_max_bytes": 0, **config})  # type: ignore[arg-type]
    return TieringService(manager, make_store(url), cfg, TieringMetrics())


def produce(log: Log, nbytes: int, *, record_size: int = 4000, ts: int | None = None) -> None:
    """Append about ``nbytes`` in batches of 4 records, timestamped now unless ``ts``."""
    if ts is None:
        ts = time.time_ns() // 1_000_000
    done = 0
    while done < nbytes:
        info = log.append(batch_at(log.log_end_offset, 4, size=record_size, ts=ts))
        done += 4 * record_size
        assert info.record_count == 4


def sha256_file(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


async def load_manifest(url: str, manager: LogManager, topic: str, partition: int = 0) -> PartitionManifest:
    store = make_store(url)
    try:
        m, _ = await ManifestStore(store).load(topic, manager.topic(topic).topic_id, partition)
    finally:
        await store.close()
    assert m is not None, "no manifest"
    return m


async def object_keys(url: str, prefix: str = "") -> list[str]:
    store = make_store(url)
    try:
        return [o.key for o in await store.list(prefix)]
    finally:
        await store.close()


def segment_objects(keys: list[str], root: str) -> list[str]:
    return [k for k in keys if k.startswith(root + "/segments/")]


def root_of(manager: LogManager, topic: str, partition: int = 0) -> str:
    return partition_root(topic, manager.topic(topic).topic_id, partition)


def referenced(m: PartitionManifest) -> set[str]:
    out: set[str] = set()
    for s in m.segments:
        keys: SegmentKeys = s.keys
        out.add(keys.log)
        if s.indexes_size is not None:  # the indexes and snapshot in one object
            out.add(keys.indexes)
            continue
        out.update(k for k in (keys.index, keys.timeindex))
        if s.has_producer_snapshot:
            out.add(keys.producer_snapshot)
        if s.txnindex_size is not None:
            out.add(keys.txnindex)
    return out


def assert_contiguous_copied(m: PartitionManifest, bases: list[int], ends: list[int]) -> None:
    """Exactly one COPIED entry per local segment [base, end), nothing else."""
    assert [s.state for s in m.segments] == [SegmentState.COPIED] * len(m.segments)
    assert [(s.base_offset, s.last_offset + 1) for s in m.segments] == list(zip(bases, ends, strict=True))


def run_child(
    data_dir: Path, url: str, *, fault: str | None = None, env: dict[str, str] | None = None
) -> str:
    """Run one tiering pass in a child process; returns its output. With ``fault`` the
    child must die at that point (exit code tiering.uploader.FAULT_EXIT_CODE)."""
    from tiering.uploader import FAULT_ENV, FAULT_EXIT_CODE

    child_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    child_env.pop(FAULT_ENV, None)
    if fault is not None:
        child_env[FAULT_ENV] = fault
    proc = subprocess.run(
        [sys.executable, "-m", "tests.tiering.uplib", str(data_dir), url],
        cwd=ROOT,
        env=child_env,
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


async def _child(data_dir: str, url: str) -> None:
    manager = LogManager(Path(data_dir)).open()
    service = new_service(manager, url)
    try:
        result = await service.run_once(retention=False, sweep=False)
        print(f"done {result.uploaded}", flush=True)
    finally:
        await service.close()
        manager.close()


def sample(service: TieringService, name: str, **labels: str) -> float:
    """A metric's current value (0 if the series does not exist)."""
    value = service.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


if __name__ == "__main__":
    asyncio.run(_child(sys.argv[1], sys.argv[2]))
