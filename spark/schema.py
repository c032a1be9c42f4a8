"""The row schema of the ``strata`` data source: Spark's Kafka source schema, plus headers.

Spark side (what ``df.printSchema()`` shows; every field nullable, as in Spark's Kafka
source, so existing jobs port unchanged)::

    key            binary
    value          binary
    topic          string
    partition      int
    offset         bigint
    timestamp      timestamp        milliseconds since the epoch, as microseconds
    timestampType  int              0 = CreateTime, 1 = LogAppendTime
    headers        array<struct<key:string,value:binary>>   null when a record has none

Arrow side: the exact ``pyarrow`` schema Spark expects from a Python data source that
yields ``RecordBatch``es (``to_arrow_schema(SCHEMA, timezone="UTC")``); Spark refuses
batches whose schema differs in any way, so this module is the one place that builds it.
No pyspark import here: the Parquet export uses the same schema without Spark.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

COLUMNS: Final = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")

SCHEMA_DDL: Final = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>"
)

HEADER_TYPE: Final = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE: Final = pa.list_(pa.field("element", HEADER_TYPE))
TIMESTAMP_TYPE: Final = pa.timestamp("us", tz="UTC")

ARROW_SCHEMA: Final = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP_TYPE),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", HEADERS_TYPE),
    ]
)
