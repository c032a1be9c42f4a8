"""``strata export``: a topic's archived rows as Parquet files, without Spark.

Same planner, reader and rows as the ``strata`` Spark data source (``spark.plan``,
``spark.scan``, schema ``spark.schema.ARROW_SCHEMA``), so
``spark.read.parquet(DIR)`` and ``spark.read.format("strata")`` return the same rows; the
Spark benchmark uses the export as its baseline.

Output layout: one file per scan task, ``<topic>-<partition>-<first offset, 20 digits>.parquet``
(hot-tail tasks of ``--include-hot`` add ``-hot``; a name that would not fit 255 bytes with
``.tmp``, from a topic name of over about 220 characters, keeps its first bytes followed by
``.<16 hex of the SHA-256 of the whole stem>``), written as ``<name>.tmp`` and renamed
when complete.

The export is all or nothing: files are written into a staging directory
``.strata-export-<random>`` beside ``out_dir`` (same file system), renamed to ``out_dir``
once every file is complete, and removed when the export fails or is interrupted. An
existing ``out_dir`` must be empty unless ``overwrite``: then it is replaced as a whole
(moved aside, the staging directory renamed in, the old one removed), so two exports into
the same directory never mix their rows.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import tempfile
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


# (bytes of archived segments exported so far, total bytes, rows written so far): the bytes
# advance with every batch written, in proportion to the offsets of its slice it covers.
Progress = Callable[[int, int, int], None]
# Bytes written to the output files so far.
Written = Callable[[int], None]
_STAGING_PREFIX: Final = ".strata-export-"


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
    written: Written | None = None,
    overwrite: bool = False,
) -> ExportResult:
    """Write every row the options select into ``out_dir``, all or nothing (module
    docstring); an existing non-empty ``out_dir`` is refused unless ``overwrite``."""
    if fmt not in FORMATS:
        raise InvalidConfigError(f"export format {fmt!r} is not supported (use one of {', '.join(FORMATS)})")
    if jobs < 1:
        raise InvalidConfigError(f"jobs must be at least 1, got {jobs}")
    out = Path(out_dir).resolve()  # its parent holds the staging directory (".": the one above)
    check_target(out, overwrite)
    plan = plan_scan(options)
    total = plan.bytes
    lock = threading.Lock()
    done = [0, 0, 0]

    def advance(nbytes: int, rows: int, out_bytes: int = 0) -> None:
        with lock:
            done[0] += nbytes
            done[1] += rows
            done[2] += out_bytes
            if progress is not None and (nbytes or rows):
                progress(done[0], total, done[1])
            if written is not None and out_bytes:
                written(done[2])

    if progress is not None:
        progress(0, total, 0)

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=out.parent))
    except OSError as e:
        raise StorageError(f"cannot create export directory {out}: {e.strerror or e}") from e
    try:
        store = SyncObjectStore(open_store_from(options.store))
        try:
            with concurrent.futures.ThreadPoolExecutor(jobs, thread_name_prefix="strata-export") as pool:
                futures = [
                    pool.submit(_write_task, t, options, store, staging, compression, advance)
                    for t in plan.tasks
                ]
                files = [f.result() for f in futures]
        finally:
            store.close()
        _publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ExportResult(
        tuple(ExportedFile(out / f.path.name, f.topic, f.partition, f.rows) for f in files if f is not None),
        plan,
    )


def check_target(out: Path, overwrite: bool) -> None:
    """Refuse a target that is a file, or a non-empty directory without ``overwrite``,
    before any work."""
    out = out.resolve()
    if out.parent == out:
        raise InvalidConfigError(f"cannot export into {out}: give a directory below it")
    if not out.exists():
        return
    if not out.is_dir():
        raise InvalidConfigError(f"export directory {out} exists and is not a directory")
    if not overwrite and any(out.iterdir()):
        raise InvalidConfigError(
            f"export directory {out} is not empty: give an empty or new directory, "
            "or --overwrite to replace it"
        )


def _publish(staging: Path, out: Path) -> None:
    """Rename the complete ``staging`` directory to ``out``: straight onto a missing or
    empty one (rename(2) replaces an empty directory), else by moving the old one aside
    first and removing it after."""
    try:
        try:
            os.rename(staging, out)
            return
        except OSError:
            if not out.is_dir() or not any(out.iterdir()):
                raise
        old = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=out.parent))
        os.rename(out, old)  # onto the empty directory just made
        os.rename(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as e:
        raise StorageError(f"cannot move the export into {out}: {e.strerror or e}") from e


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
    advance: Callable[..., None],
) -> ExportedFile | None:
    import pyarrow.parquet as pq

    path = out / _file_name(task)
    tmp = path.with_name(path.name + _TMP_SUFFIX)
    rows = 0
    on_disk = 0  # bytes of ``tmp`` reported as written

    def wrote() -> None:
        nonlocal on_disk
        size = tmp.stat().st_size
        if size > on_disk:
            advance(0, 0, size - on_disk)
            on_disk = size

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
                    wrote()

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
                    credited = 0
                    span = max(1, sl.end_offset - sl.start_offset)
                    for batch in read_cold(store, task, sl, options):
                        add(batch)
                        # the slice's bytes in proportion to the offsets done (exact at its end)
                        last = batch.column("offset")[-1].as_py() + 1 if batch.num_rows else sl.start_offset
                        share = min(sl.length, sl.length * max(0, last - sl.start_offset) // span)
                        if share > credited:
                            advance(share - credited, 0)
                            credited = share
                    advance(sl.length - credited, 0)
            else:
                assert isinstance(task, HotTask)
                for batch in read_hot(task, options, store):
                    add(batch)
            flush()
        if rows == 0:
            tmp.unlink()
            return None
        wrote()
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {e.strerror or e}") from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ExportedFile(path, task.topic, task.partition, rows)
