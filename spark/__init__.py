"""PySpark data source reading archived segments straight from the bucket.

    from spark import StrataDataSource
    spark.dataSource.register(StrataDataSource)
    df = spark.read.format("strata").option("topic", "events").load("s3://bucket/prefix")
    stream = spark.readStream.format("strata").option("subscribe", "events").load("s3://bucket/prefix")

``StrataDataSource`` is imported lazily so that the Spark-free parts (``spark.plan``,
``spark.scan``, ``spark.columnar``, used by ``strata export``) work without pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spark.source import StrataDataSource

__all__ = ["StrataDataSource"]


def __getattr__(name: str) -> Any:
    if name == "StrataDataSource":
        from spark.source import StrataDataSource

        return StrataDataSource
    raise AttributeError(f"module 'spark' has no attribute {name!r}")
