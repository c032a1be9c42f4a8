"""The key_value table: its Iceberg schema and partition spec, and the Parquet data files
made from the archive reader's Arrow rows (``spark.schema.ARROW_SCHEMA``)."""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform, YearTransform
from pyiceberg.types import (
    BinaryType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from hot.errors import InvalidConfigError

# Column names of the key_value table (Kafka metadata first, as Redpanda's and Tableflow's).
COLUMNS: Final = ("partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")

KV_SCHEMA: Final = Schema(
    NestedField(1, "partition", IntegerType(), required=False),
    NestedField(2, "offset", LongType(), required=False),
    NestedField(3, "timestamp", TimestamptzType(), required=False),
    NestedField(4, "timestamp_type", IntegerType(), required=False),
    NestedField(5, "key", BinaryType(), required=False),
    NestedField(6, "value", BinaryType(), required=False),
    NestedField(
        7,
        "headers",
        ListType(
            8,
            StructType(
                NestedField(9, "key", StringType(), required=False),
                NestedField(10, "value", BinaryType(), required=False),
            ),
            element_required=False,
        ),
        required=False,
    ),
)

# The dead-letter table (iceberg.invalid.record.action=dlq_table): the key_value columns,
# the value as the raw bytes, and why it did not decode.
DLQ_SCHEMA: Final = Schema(*KV_SCHEMA.fields, NestedField(11, "reason", StringType(), required=False))

HEADERS_TYPE: Final = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
KV_ARROW_SCHEMA: Final = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestamp_type", pa.int32()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS_TYPE),
    ]
)

DLQ_ARROW_SCHEMA: Final = KV_ARROW_SCHEMA.append(pa.field("reason", pa.string()))

_SMALL_COLUMNS: Final = ("partition", "offset", "timestamp", "timestamp_type")
_US_PER_HOUR: Final = 3_600_000_000
_US_PER_DAY: Final = 86_400_000_000


def partition_spec(text: str, schema: Schema = KV_SCHEMA) -> PartitionSpec:
    """``iceberg.partition.spec`` (hot.config validated its form) as an Iceberg spec."""
    if text == "none":
        return PartitionSpec()
    fields = []
    for i, item in enumerate(text.split(",")):
        transform, _, rest = item.partition("(")
        column = rest.rstrip(")")
        source = schema.find_field(column).field_id
        kinds: dict[str, Any] = {
            "hour": HourTransform(),
            "day": DayTransform(),
            "month": MonthTransform(),
            "year": YearTransform(),
            "identity": IdentityTransform(),
        }
        if transform not in kinds:
            raise InvalidConfigError(f"iceberg.partition.spec: unknown transform {transform!r}")
        name = column if transform == "identity" else f"{column}_{transform}"
        fields.append(
            PartitionField(source_id=source, field_id=1000 + i, transform=kinds[transform], name=name)
        )
    return PartitionSpec(*fields)


def to_kv_rows(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """The archive reader's rows (spark.schema.ARROW_SCHEMA) as the key_value table's."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    return pa.Table.from_arrays(
        [
            table.column("partition"),
            table.column("offset"),
            table.column("timestamp"),
            table.column("timestampType"),
            table.column("key"),
            table.column("value"),
            table.column("headers").cast(HEADERS_TYPE),
        ],
        schema=KV_ARROW_SCHEMA,
    )


@dataclass(frozen=True, slots=True)
class DataFile:
    """One Parquet file's bytes, its partition path (Hive-style, for the key) and row count."""

    partition_path: str
    data: memoryview
    rows: int
    file_id: uuid.UUID
    # The spool file ``data`` maps, left for the taker to put with ``put_file_moved`` (the
    # file store renames it into the bucket: no copy into fresh pages) or remove; None: removed.
    spool: str | None = None


def _group_keys(rows: pa.Table, spec_text: str) -> tuple[pa.Array | None, list[tuple[int, str]]]:
    """One int64 key per row naming its table partition (None: all rows in one), and per
    partition its key and path. Hash-based (``pc.unique``), no sort: the common case, a
    pass within one hour, costs two min/max scans."""
    if spec_text == "none" or rows.num_rows == 0:
        return None, [(0, "")]
    parts: list[tuple[str, np.ndarray]] = []
    ts = rows.column("timestamp")
    if spec_text in ("hour(timestamp)", "day(timestamp)"):
        # the default spec, and a pass's batches mostly within one hour: two C scans say so
        span = _US_PER_HOUR if spec_text[0] == "h" else _US_PER_DAY
        bounds = pc.min_max(ts)
        lo, hi = bounds["min"].value, bounds["max"].value
        if lo is not None and hi is not None and lo // span == hi // span:  # (.value: micros)
            return None, [(0, f"timestamp_{spec_text.partition('(')[0]}={lo // span}")]
    for item in spec_text.split(","):
        transform = item.partition("(")[0]
        if transform == "identity":
            parts.append(
                ("partition", rows.column("partition").to_numpy(zero_copy_only=False).astype(np.int64))
            )
            continue
        micros = pc.cast(ts, pa.int64()).to_numpy(zero_copy_only=False)
        if transform == "hour":
            values = np.floor_divide(micros, _US_PER_HOUR)
        elif transform == "day":
            values = np.floor_divide(micros, _US_PER_DAY)
        elif transform == "month":
            years = pc.year(ts).to_numpy(zero_copy_only=False).astype(np.int64)
            values = (years - 1970) * 12 + pc.month(ts).to_numpy(zero_copy_only=False).astype(np.int64) - 1
        else:
            values = pc.year(ts).to_numpy(zero_copy_only=False).astype(np.int64) - 1970
        parts.append((f"timestamp_{transform}", values))
    # one key: a mixed-radix number of the fields' offsets from their minimums
    key = np.zeros(rows.num_rows, dtype=np.int64)
    radices = []
    for _, values in parts:
        lo, hi = int(values.min()), int(values.max())
        radices.append((lo, hi - lo + 1))
        key = key * (hi - lo + 1) + (values - lo)
    out = []
    for k in pc.unique(pa.array(key)).to_pylist():
        digits, rest = [], int(k)
        for lo, size in reversed(radices):
            digits.append(lo + rest % size)
            rest //= size
        digits.reverse()
        out.append((int(k), "/".join(f"{name}={d}" for (name, _), d in zip(parts, digits, strict=True))))
    return (None if len(out) == 1 else pa.array(key)), out


SPOOL_PREFIX: Final = "strata-iceberg-"
_ROW_GROUP_BYTES: Final = 8 << 20  # as strata export (spark.export.ROW_GROUP_BYTES)
# A data file is closed (and handed on, to be uploaded while the next is written) once this
# much Parquet is in it: the upload of a pass's files overlaps its reading and encoding, and
# memory holds a few files rather than a whole pass (a backfill's can be the topic's history).
# Engines' compaction (docs/iceberg.md) merges them into their own target size later.
FILE_BYTES: Final = 32 << 20


class _OpenFile:
    def __init__(
        self,
        path: str,
        compression: str,
        schema: pa.Schema,
        encoder: Executor,
        group_bytes: int,
        spool_dir: str | None,
    ) -> None:
        self.path = path
        self.group_bytes = group_bytes
        # Row groups are encoded on ``encoder`` (one thread: in order) while the reader
        # decodes the next batches: Parquet encoding and compression release the GIL.
        self.encoder = encoder
        self.encoding: Future[None] | None = None
        # A spool file, not a growing buffer in memory: a BufferOutputStream reallocates (a
        # copy and fresh pages) as it doubles, which cost more CPU than the file's encoding;
        # the page cache takes the bytes, the upload reads them back through a mapping. A
        # native file: a Python file object would take the GIL on every write.
        fd, self.spool = tempfile.mkstemp(prefix=SPOOL_PREFIX, suffix=".parquet", dir=spool_dir)
        os.close(fd)
        self.sink = pa.OSFile(self.spool, "wb")
        self.writer = pq.ParquetWriter(
            self.sink,
            schema,
            compression=compression,
            # dictionaries and min/max only where they pay: keys and values are mostly
            # distinct bytes, and engines prune by partition, offset and timestamp
            use_dictionary=list(_SMALL_COLUMNS),
            write_statistics=list(_SMALL_COLUMNS),
        )
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0
        self.rows = 0
        self.encoded = 0  # Parquet bytes of the row groups encoded so far (a row group behind)

    @property
    def buffered(self) -> int:
        return self.encoded + self.pending_bytes

    def add(self, rows: pa.Table) -> None:
        self.pending.append(rows)
        self.pending_bytes += rows.nbytes
        self.rows += rows.num_rows
        if self.pending_bytes >= self.group_bytes:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            # chunks as they came: the writer cuts row groups by rows across chunks, and a
            # combine_chunks() would copy every byte once more
            group = pa.concat_tables(self.pending)
            self.pending, self.pending_bytes = [], 0
            self._wait()  # one row group in flight: memory stays bounded
            self.encoded = self.sink.tell()  # nothing is being encoded into it now
            self.encoding = self.encoder.submit(self.writer.write_table, group)

    def _wait(self) -> None:
        if self.encoding is not None:
            self.encoding.result()
            self.encoding = None

    def close(self, keep_spool: bool = False) -> DataFile:
        self.flush()
        self._wait()
        self.writer.close()
        self.sink.close()
        try:
            with open(self.spool, "rb") as f:
                # mapped, not read: no copy, and the pages are the page cache's (released
                # with the last reference to the view)
                data = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        finally:
            if not keep_spool:
                os.unlink(self.spool)  # the mapping keeps the bytes while they are needed
        return DataFile(self.path, data, self.rows, uuid.uuid4(), self.spool if keep_spool else None)

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()  # (else its __del__ closes it onto a closed sink)
        with contextlib.suppress(Exception):
            self.sink.close()
        with contextlib.suppress(OSError):
            os.unlink(self.spool)


class DataFileWriter:
    """Rows in, Parquet files per table partition out, written as the rows come (row
    groups of about 8 MiB, as ``strata export`` writes them). A file is closed once it
    holds ``file_bytes`` of Parquet, or when the open files together hold over twice that
    (the least recently written first: a backfill's older hours); closed files go to
    ``on_file`` as they are closed (the translator uploads them while the next ones are
    written), or are all returned by ``finish`` without one. ``keep_spool``: the files'
    spool files are left to the taker (``DataFile.spool``)."""

    def __init__(
        self,
        spec_text: str,
        *,
        compression: str = "snappy",
        schema: pa.Schema = KV_ARROW_SCHEMA,
        file_bytes: int = FILE_BYTES,
        on_file: Callable[[DataFile], None] | None = None,
        spool_dir: str | None = None,
        keep_spool: bool = False,
    ) -> None:
        self.spec_text = spec_text
        self.keep_spool = keep_spool
        self.schema = schema
        self.compression = compression
        self.file_bytes = file_bytes
        self.on_file = on_file
        self.spool_dir = spool_dir  # where files are written before they are put (None: $TMPDIR)
        self._files: dict[str, _OpenFile] = {}  # in order of their last write
        self._closed: list[DataFile] = []
        self._rows_closed = 0
        self._encoder = ThreadPoolExecutor(1, thread_name_prefix="iceberg-parquet")

    @property
    def rows(self) -> int:
        return self._rows_closed + sum(f.rows for f in self._files.values())

    def _close(self, path: str) -> None:
        done = self._files.pop(path).close(self.keep_spool)
        self._rows_closed += done.rows
        if self.on_file is not None:
            self.on_file(done)
        else:
            self._closed.append(done)

    def add(self, rows: pa.Table) -> None:
        if rows.num_rows == 0:
            return
        keys, groups = _group_keys(rows, self.spec_text)
        for key, path in groups:
            f = self._files.pop(path, None)
            if f is None:
                # (row groups no larger than a file)
                group = min(_ROW_GROUP_BYTES, self.file_bytes)
                f = _OpenFile(path, self.compression, self.schema, self._encoder, group, self.spool_dir)
            self._files[path] = f  # now the most recently written
            f.add(rows if keys is None else rows.filter(pc.equal(keys, key)))
            if f.encoded >= self.file_bytes:
                self._close(path)
        while len(self._files) > 1 and sum(f.buffered for f in self._files.values()) > 2 * self.file_bytes:
            self._close(next(iter(self._files)))

    def abort(self) -> None:
        """Drops what was written (a failed pass) and stops the encoding thread."""
        self._encoder.shutdown(wait=True, cancel_futures=True)
        for f in self._files.values():
            f.discard()
        for done in self._closed:
            if done.spool is not None:
                with contextlib.suppress(OSError):
                    os.unlink(done.spool)
        self._files.clear()
        self._closed.clear()

    def finish(self) -> list[DataFile]:
        """Closes the open files: all the files closed, less those given to ``on_file``
        (to which the ones closed now go too)."""
        try:
            for path in list(self._files):
                self._close(path)
            return self._closed
        finally:
            self._files.clear()
            self._closed = []
            self._encoder.shutdown()


def iceberg_data_file(metadata: TableMetadata, url: str, data: bytes | memoryview) -> IcebergDataFile:
    """The manifest entry of a Parquet file written here (pyiceberg's
    ``parquet_file_to_data_file``, from the bytes in hand rather than a read of the footer)."""
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.manifest import DataFileContent, FileFormat

    parquet_metadata = pq.read_metadata(pa.BufferReader(data))
    schema = metadata.schema()
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=parquet_metadata,
        stats_columns=compute_statistics_plan(schema, metadata.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    return IcebergDataFile.from_args(
        content=DataFileContent.DATA,
        file_path=url,
        file_format=FileFormat.PARQUET,
        partition=statistics.partition(metadata.spec(), schema),
        file_size_in_bytes=len(data),
        sort_order_id=None,
        spec_id=metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )
