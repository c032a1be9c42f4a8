"""The key_value table's data files: one per table partition of the spec, each file's
rows all in its partition (what add_files-style commits require), paths Hive-style."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hot.errors import InvalidConfigError
from spark.iceberg.table import HEADERS_TYPE, KV_ARROW_SCHEMA, DataFileWriter, partition_spec

HOUR_US = 3_600_000_000


def _rows(parts: list[int], micros: list[int]) -> pa.Table:
    n = len(parts)
    return pa.Table.from_arrays(
        [
            pa.array(parts, pa.int32()),
            pa.array(range(n), pa.int64()),
            pa.array(micros, pa.timestamp("us", tz="UTC")),
            pa.array([0] * n, pa.int32()),
            pa.array([b"k"] * n),
            pa.array([b"v%d" % i for i in range(n)]),
            pa.array([None] * n, HEADERS_TYPE),
        ],
        schema=KV_ARROW_SCHEMA,
    )


@pytest.mark.parametrize(
    ("spec", "paths"),
    [
        ("none", {"": 4}),
        ("hour(timestamp)", {"timestamp_hour=0": 2, "timestamp_hour=1": 1, "timestamp_hour=24": 1}),
        ("day(timestamp)", {"timestamp_day=0": 3, "timestamp_day=1": 1}),
        (
            "identity(partition),hour(timestamp)",
            {
                "partition=0/timestamp_hour=0": 1,
                "partition=1/timestamp_hour=0": 1,
                "partition=0/timestamp_hour=1": 1,
                "partition=1/timestamp_hour=24": 1,
            },
        ),
    ],
)
def test_one_file_per_table_partition(spec: str, paths: dict[str, int]) -> None:
    w = DataFileWriter(spec)
    # two batches: a partition's rows from both land in one file
    w.add(_rows([0, 1], [5, HOUR_US - 1]))
    w.add(_rows([0, 1], [HOUR_US, 24 * HOUR_US]))
    files = w.finish()
    assert {f.partition_path: f.rows for f in files} == paths
    assert sum(pq.read_table(pa.BufferReader(f.data)).num_rows for f in files) == 4
    partition_spec(spec)  # a valid Iceberg spec


def test_files_roll_at_their_size_and_go_out_as_closed(tmp_path: Path) -> None:
    """A file is closed once it holds ``file_bytes`` of Parquet (handed to ``on_file`` then,
    to be uploaded while the next is written); the open files together stay under twice
    that, older hours closed first. No row is lost or doubled across the files."""
    import os

    out: list[tuple[str, int, int]] = []  # (partition path, rows, rows written when closed)
    w = DataFileWriter(
        "hour(timestamp)",
        file_bytes=256 << 10,
        spool_dir=str(tmp_path),
        on_file=lambda f: out.append((f.partition_path, f.rows, w.rows)),
    )
    n = 0
    for hour in range(3):  # 3 hours of 2,000 rows of 1 KiB random values each, in time order
        for _ in range(20):
            rows = _rows([0] * 100, [hour * HOUR_US + i for i in range(100)])
            values = pa.array([os.urandom(1024) for _ in range(100)])
            rows = rows.set_column(rows.schema.get_field_index("value"), "value", values)
            w.add(rows)
            n += 100
    assert w.finish() == []  # every file went to on_file
    assert sum(r for _, r, _ in out) == n == 6000
    per_hour = {
        f"timestamp_hour={h}": sum(r for p, r, _ in out if p == f"timestamp_hour={h}") for h in range(3)
    }
    assert per_hour == {"timestamp_hour=0": 2000, "timestamp_hour=1": 2000, "timestamp_hour=2": 2000}
    assert len(out) > 3  # rolled: about 2 MiB an hour in files of about 0.5 MiB
    # handed on while rows were still coming, not all at the end
    assert out[0][2] < n
    assert not os.listdir(tmp_path)  # the spool files: gone once mapped (and after a failure)
    w = DataFileWriter("none", spool_dir=str(tmp_path))
    w.add(_rows([0], [0]))
    assert os.listdir(tmp_path)
    w.abort()
    assert not os.listdir(tmp_path)


def test_unknown_transform_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="unknown transform"):
        partition_spec("bucket(partition)")
