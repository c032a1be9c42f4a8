"""``strata export``: a topic's archived rows as Parquet files, without Spark.

Same planner, reader and rows as the ``strata`` Spark data source (``spark.plan``,
``spark.scan``, schema ``spark.schema.ARROW_SCHEMA``), so
``spark.read.parquet(DIR)`` and ``spark.read.format("strata")`` return the same rows; the
Spark benchmark uses the export as its baseline.

Output layout: one file per scan task, ``<topic>-<partition>-<first offset, 20 digits>.parquet``
(hot-tail tasks of ``--include-hot`` add ``-hot``; a name that would not fit 255 bytes with
``.tmp``, from a topic name of over about 220 characters, keeps its first bytes followed by
``.<16 hex of the SHA-256 of the whole stem>``), written as ``<name>.tmp`` and renamed
when complete, so an interrupted export never leaves a truncated file under a final name.
Files of an earlier export into the same directory are left alone; use a fresh directory.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyarrow as pa

from hot.errors import InvalidConfigError, StorageError
from hot.naming import bounded_name
from spark.options import ReadOptions
from spark.plan import ColdTask, HotTask, ScanPlan, ScanTask, open_store_from, plan_scan
from spark.scan import read_cold, read_hot
from spark.schema import ARROW_SCHEMA
from tiering.store import SyncObjectStore

FORMATS: Final = ("parquet",)
# Rows are buffered into row groups of at least this much Arrow data: one per 8 MiB chunk of
# log read (readChunkBytes), the first, smaller chunks of a slice joined.
ROW_GROUP_BYTES: Final = 8 << 20
_TMP_SUFFIX: Final = ".tmp"


@dataclass(frozen=True, slots=True)
class ExportedFile:
    path: Path
    topic: str
    partition: int
    rows: int


@dataclass(frozen=True, slots=True)
class ExportResult:
    files: tuple[ExportedFile, ...]
    plan: ScanPlan

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)


# (bytes of archived segments read so far, total bytes, rows written so far)
Progress = Callable[[int, int, int], None]


def default_object_store(data_dir: str | os.PathLike[str]) -> str:
    """The object store a broker uses by default: ``file://<data-dir>/objects``."""
    return f"file://{Path(data_dir).resolve() / 'objects'}"


def parse_options(
    object_store: str, topics: str, extra: Mapping[str, str] | None = None, *, partitions: str | None = None
) -> ReadOptions:
    """Export options in the data source's terms (``-o name=value`` takes any reader option)."""
    opts = {**(extra or {}), "topic": topics}
    if partitions:
        opts["partitions"] = partitions
    return ReadOptions.parse(opts, path=object_store)


def export(
    options: ReadOptions,
    out_dir: str | os.PathLike[str],
    *,
    fmt: str = "parquet",
    jobs: int = 2,
    compression: str = "snappy",
    progress: Progress | None = None,
) -> ExportResult:
    """Write every row the options select under ``out_dir`` (created if needed)."""
    if fmt not in FORMATS:
        raise InvalidConfigError(f"export format {fmt!r} is not supported (use one of {', '.join(FORMATS)})")
    if jobs < 1:
        raise InvalidConfigError(f"jobs must be at least 1, got {jobs}")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(f"cannot create export directory {out}: {e.strerror or e}") from e
    plan = plan_scan(options)
    total = plan.bytes
    lock = threading.Lock()
    done = [0, 0]

    def advance(nbytes: int, rows: int) -> None:
        with lock:
            done[0] += nbytes
            done[1] += rows
            if progress is not None:
                progress(done[0], total, done[1])

    if progress is not None:
        progress(0, total, 0)

    store = SyncObjectStore(open_store_from(options.store))
    try:
        with concurrent.futures.ThreadPoolExecutor(jobs, thread_name_prefix="strata-export") as pool:
            futures = [
                pool.submit(_write_task, t, options, store, out, compression, advance) for t in plan.tasks
            ]
            files = [f.result() for f in futures]
    finally:
        store.close()
    return ExportResult(tuple(f for f in files if f is not None), plan)


def _file_name(task: ScanTask) -> str:
    # bounded_name: a 249-character topic name would make the file name 284 bytes long.
    if isinstance(task, ColdTask):
        stem = f"{task.topic}-{task.partition}-{task.slices[0].start_offset:020d}"
        return bounded_name(stem, ".parquet", reserve=len(_TMP_SUFFIX))
    stem = f"{task.topic}-{task.partition}-{task.start_offset:020d}-hot"
    return bounded_name(stem, ".parquet", reserve=len(_TMP_SUFFIX))


def _write_task(
    task: ScanTask,
    options: ReadOptions,
    store: SyncObjectStore,
    out: Path,
    compression: str,
    advance: Callable[[int, int], None],
) -> ExportedFile | None:
    import pyarrow.parquet as pq

    path = out / _file_name(task)
    tmp = path.with_name(path.name + _TMP_SUFFIX)
    rows = 0
    try:
        with pq.ParquetWriter(tmp, ARROW_SCHEMA, compression=compression) as writer:
            group: list[pa.RecordBatch] = []
            group_bytes = 0

            def flush() -> None:
                # One row group per call: a row group per decoded chunk would make many small ones.
                nonlocal group, group_bytes
                if group:
                    writer.write_table(pa.Table.from_batches(group, schema=ARROW_SCHEMA))
                    group, group_bytes = [], 0

            def add(batch: pa.RecordBatch) -> None:
                nonlocal rows, group_bytes
                group.append(batch)
                group_bytes += batch.nbytes
                rows += batch.num_rows
                advance(0, batch.num_rows)
                if group_bytes >= ROW_GROUP_BYTES:
                    flush()

            if isinstance(task, ColdTask):
                for sl in task.slices:
                    for batch in read_cold(store, task, sl, options):
                        add(batch)
                    advance(sl.length, 0)
            else:
                assert isinstance(task, HotTask)
                for batch in read_hot(task, options, store):
                    add(batch)
            flush()
        if rows == 0:
            tmp.unlink()
            return None
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {e.strerror or e}") from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ExportedFile(path, task.topic, task.partition, rows)
