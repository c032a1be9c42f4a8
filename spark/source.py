"""The ``strata`` PySpark data source (Spark 4 Python Data Source API).

    from spark import StrataDataSource
    spark.dataSource.register(StrataDataSource)
    df = spark.read.format("strata").option("topic", "events").load("s3://bucket/prefix")

Spark calls ``schema()`` and ``reader()`` on the driver side, ``partitions()`` once while
planning (``spark.plan``: manifests read once, segments pruned), and ``read()`` in a
Python worker per task (``spark.scan``: ranged GETs, columnar decoding, Arrow batches).
The reader holds only parsed options and the partitions only plain task values, so both
pickle small; object store and broker clients are created inside ``read()``. Planning,
scanning and sink modules are imported where used: Spark starts a fresh Python process for
each streaming query's source (``PythonStreamingSourceRunner``), which needs neither the
scan's decoder nor the sink.
Options: ``spark.options``; rows: ``spark.schema``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from hot.errors import InvalidConfigError
from spark.options import ReadOptions
from spark.partition import StrataInputPartition
from spark.schema import SCHEMA_DDL

if TYPE_CHECKING:
    pass

# spark.schema.SCHEMA_DDL as a StructType (parsing DDL needs a SparkContext, which the
# Python workers that plan and read do not have).
SPARK_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
    ]
)


class StrataDataSourceReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        from spark.plan import plan_scan

        plan = plan_scan(self.options)
        return [StrataInputPartition(t) for t in plan.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from spark.scan import read_task

        task = partition.task if isinstance(partition, StrataInputPartition) else None
        return read_task(task, self.options)


class StrataDataSource(DataSource):
    """Reads a topic's history from the bucket the brokers tier to, no broker in the data
    path (unless ``includeHot``), as a batch or as a stream (``spark.stream``). Schema:
    Spark's Kafka source schema plus ``headers``."""

    @classmethod
    def name(cls) -> str:
        return "strata"

    def schema(self) -> StructType:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        return StrataDataSourceReader(ReadOptions.parse(dict(self.options)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream.format("strata")``: micro-batches (``spark.stream``)."""
        from spark.stream import StrataStreamReader

        _check_schema(schema)
        return StrataStreamReader(ReadOptions.parse(dict(self.options), streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """``df.write.format("strata")``: see ``spark.sink``."""
        from spark.sink import StrataSinkWriter, sink_options

        return StrataSinkWriter(sink_options(dict(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """``df.writeStream.format("strata")``: see ``spark.sink``."""
        from spark.sink import StrataStreamSinkWriter, sink_options

        return StrataStreamSinkWriter(sink_options(dict(self.options), schema))


def _check_schema(schema: StructType) -> None:
    if schema != SPARK_SCHEMA:
        raise InvalidConfigError(
            f"strata: the schema is fixed ({SCHEMA_DDL}); "
            f"a user-specified schema {schema.simpleString()} is not supported"
        )
