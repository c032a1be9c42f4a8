"""The key_value table's data files: one per table partition of the spec, each file's
rows all in its partition (what add_files-style commits require), paths Hive-style."""

from __future__ import annotations

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


def test_unknown_transform_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="unknown transform"):
        partition_spec("bucket(partition)")
