"""Helpers of the Iceberg tests: readers no one here wrote (pyiceberg, DuckDB's extension)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

# DuckDB's Iceberg extension ships on PyPI as duckdb-extension-iceberg, built for one
# DuckDB release (pyproject pins duckdb and both extensions to it). It runs in a child
# process: a crash of the extension fails the test instead of the test run.
# STRATA_DUCKDB_ICEBERG_DIR: a directory of those packages to use instead of site-packages.
DUCKDB_ICEBERG_DIR = os.environ.get("STRATA_DUCKDB_ICEBERG_DIR")

_DUCK = r"""
import json, sys
import duckdb
import duckdb_extension_avro, duckdb_extension_iceberg
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # a slow scan (a loaded machine) prints one to stdout
for mod in (duckdb_extension_avro, duckdb_extension_iceberg):
    import glob, os
    path = glob.glob(os.path.join(os.path.dirname(mod.__file__), "extensions", "*", "*.duckdb_extension"))[0]
    con.execute(f"LOAD '{path}'")
rows = con.execute(
    f"SELECT partition, \"offset\", key, {sys.argv[2]} FROM iceberg_scan(?) ORDER BY partition, \"offset\"",
    [sys.argv[1]],
).fetchall()
def hx(b):
    return None if b is None else bytes(b).hex() if isinstance(b, (bytes, bytearray)) else ["raw", b]
print(json.dumps([[p, o, hx(k), hx(v)] for p, o, k, v in rows]))
"""


def duckdb_rows(metadata_path: str, value: str = "value") -> list[tuple[int, int, Any, Any]]:
    """(partition, offset, key, ``value`` (an SQL expression)) DuckDB's iceberg_scan reads
    (never None: the extension is a test dependency, and its absence fails the test)."""
    env = dict(os.environ)
    if DUCKDB_ICEBERG_DIR:
        env["PYTHONPATH"] = DUCKDB_ICEBERG_DIR
    out = subprocess.run(
        [sys.executable, "-c", _DUCK, metadata_path.removeprefix("file://"), value],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout

    def unhex(x: Any) -> Any:
        return x[1] if isinstance(x, list) else None if x is None else bytes.fromhex(x)

    return [(p, o, unhex(k), unhex(v)) for p, o, k, v in json.loads(out)]


def pyiceberg_rows(table: Any) -> list[tuple[int, int, bytes | None, bytes | None]]:
    t = table.refresh().scan(selected_fields=("partition", "offset", "key", "value")).to_arrow()
    rows = list(zip(*(t.column(c).to_pylist() for c in ("partition", "offset", "key", "value")), strict=True))
    return sorted(rows, key=lambda r: (r[0], r[1]))


def wait_for(check: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)


def compiled_proto(text: str) -> tuple[Any, Any]:
    """``.proto`` text compiled by the registry's own parser (protoc): (the
    ``ProtobufSchema``: ``.serialized()`` is the base64 FileDescriptorProto the registry
    source hands the translator; a pool holding it and the well-known types, for message
    classes: ``message_factory.GetMessageClass(pool.FindMessageTypeByName(name))``)."""
    from google.protobuf import descriptor_pool  # type: ignore[import-untyped]

    from broker.schema_registry.protobuf_format import parse_protobuf
    from spark.iceberg.protobuf_values import _WELL_KNOWN

    schema = parse_protobuf(text, [])
    pool = descriptor_pool.DescriptorPool()
    for d in _WELL_KNOWN:
        pool.AddSerializedFile(d.serialized_pb)
    pool.Add(schema.file)
    return schema, pool
