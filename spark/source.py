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

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

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
from spark.options import LATEST, ReadOptions
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
        if reads_to_latest(self.options):
            from spark.tail import warn_unarchived

            warn_unarchived(plan.ranges, self.options.broker, self.options.security)
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
        # ``spark.dataSource.register`` asks the name on the driver, just before it ships
        # the class to Python workers that must import it: check them there, once.
        check_worker_python()
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


# What a Python worker needs to unpickle the data source and read (pyspark itself comes
# with Spark's own PYTHONPATH).
_WORKER_IMPORTS: Final = "import pyarrow, spark.options"
_checked: dict[str, str | None] = {}  # interpreter -> why it cannot import the source (None: it can)


def check_worker_python(python: str | None = None) -> None:
    """Fail with one line when the interpreter Spark runs its Python workers with
    (``PYSPARK_PYTHON``, or ``python3`` on the PATH: ``SparkContext.pythonExec``) cannot
    import the data source, instead of a worker's ImportError in a py4j traceback. Only
    on a driver with a live SparkContext (a worker, or Spark Connect, has none); each
    interpreter is checked once per process; this interpreter is not checked."""
    if python is None:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is None:
            return
        python = str(getattr(sc, "pythonExec", None) or "python3")
    if python not in _checked:
        _checked[python] = _cannot_import(python)
    why = _checked[python]
    if why is not None:
        raise InvalidConfigError(
            f"strata: Spark's Python workers run {python} (PYSPARK_PYTHON), which cannot import the "
            f"strata data source ({why}): set PYSPARK_PYTHON={sys.executable} before the SparkSession "
            "starts, or activate the virtual environment strata is installed in"
        )


def _cannot_import(python: str) -> str | None:
    exe = shutil.which(python)
    if exe is None:
        return "no such program"
    if os.path.abspath(exe) == os.path.abspath(sys.executable):
        return None  # not samefile: a venv's python links to the system one, with other packages
    try:
        done = subprocess.run(
            [exe, "-c", _WORKER_IMPORTS], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def reads_to_latest(options: ReadOptions) -> bool:
    """A bucket-only read up to the latest offset: it leaves out what is not tiered yet
    (spark.tail warns about it); an explicit end or includeHot does not."""
    end = options.end
    return (
        not options.include_hot
        and end.default == LATEST
        and not end.offsets
        and not end.timestamps
        and end.timestamp is None
    )


def _check_schema(schema: StructType) -> None:
    if schema != SPARK_SCHEMA:
        raise InvalidConfigError(
            f"strata: the schema is fixed ({SCHEMA_DDL}); "
            f"a user-specified schema {schema.simpleString()} is not supported"
        )
