"""Topics as Iceberg tables in the bucket (issue 38, docs/iceberg.md).

- ``table``: the key_value schema, partition specs, Arrow rows -> Parquet data files.
- ``catalog``: the embedded SQLite catalog (a cache of the bucket's metadata pointer) or a
  REST catalog, and the FileIO properties pyiceberg needs to reach the bucket.
- ``translate``: one translation pass of one topic: committed offsets from the last
  snapshot, read both tiers read_committed with the archive reader (``spark.scan``), write
  data files through the object-store seam, commit them with the new offsets.
- ``schema_values``: value_schema_id_prefix mode's decoding (Confluent wire format).

It lives beside the archive reader it is built on (``spark.plan``/``spark.scan``, which
read the bucket without the broker's local disk and the hot tail with Fetch); the broker
runs it from ``api.iceberg_service``.
"""
