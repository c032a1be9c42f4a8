"""Helpers of the Spark tests and benchmark: real hot logs, tiered exactly as docs/tiering.md says.

Segments are written by a real ``hot.log.Log`` and uploaded with the real store and
``ManifestStore`` (segment_keys, put_file of .log/.index/.timeindex, a COPY_STARTED then
COPIED manifest entry, the topic manifest), so the reader meets genuine objects.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hot.batch import Compression, TimestampType, iter_batches
from hot.config import LogConfig
from hot.log import Log
from hot.records import Header, RecordInput, build_batch
from tests.tiering.tierlib import CountingStore as _CountingStore
from tiering.keys import segment_keys
from tiering.manifest import RemoteSegment, SegmentState
from tiering.manifest_store import ManifestStore
from tiering.store import ObjectStore

TS0 = 1_700_000_000_000
CODECS = (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD)


@dataclass(frozen=True, slots=True)
class Row:
    """One expected row, in the data source's terms (timestamp in ms)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | None


def open_log(path: Path, topic: str, partition: int, *, segment_bytes: int = 65536) -> Log:
    cfg = LogConfig.from_kafka(
        {"segment.bytes": str(segment_bytes), "strata.flush.mode": "interval", "index.interval.bytes": "4096"}
    )
    return Log.open(path, cfg, topic=topic, partition=partition)


def _noise(seed: bytes, n: int) -> bytes:
    """``n`` incompressible bytes derived from ``seed`` (so segments fill up under every codec)."""
    out = bytearray()
    while len(out) < n:
        out += hashlib.sha256(seed + len(out).to_bytes(4, "big")).digest()
    return bytes(out[:n])


def record_inputs(
    topic: str, partition: int, first: int, count: int, *, value_size: int = 50
) -> list[RecordInput]:
    """Deterministic records: some null keys/values, some headers (one with a null value)."""
    out = []
    for o in range(first, first + count):
        key = None if o % 7 == 3 else b"%s-%d-k%d" % (topic.encode(), partition, o)
        value = None if o % 11 == 5 else _noise(b"%s/%d/%d" % (topic.encode(), partition, o), value_size)
        headers: tuple[Header, ...] = ()
        if o % 5 == 0:
            headers = (Header("trace", b"t%d" % o), Header("empty", None))
        elif o % 5 == 1:
            headers = (Header("h", b""),)
        out.append(RecordInput(key, value, headers, timestamp=TS0 + 1000 * o + (o % 3)))
    return out


def fill_log(
    log: Log,
    topic: str,
    partition: int,
    batches: int,
    per_batch: int,
    *,
    value_size: int = 50,
    log_append_every: int = 0,
) -> list[Row]:
    """Append ``batches`` batches (codecs in rotation) and return the rows they hold."""
    rows: list[Row] = []
    for i in range(batches):
        first = log.log_end_offset
        recs = record_inputs(topic, partition, first, per_batch, value_size=value_size)
        codec = CODECS[i % len(CODECS)]
        log.append(build_batch(recs, compression=codec))
        for j, r in enumerate(recs):
            rows.append(
                Row(
                    topic,
                    partition,
                    first + j,
                    r.timestamp if r.timestamp is not None else 0,
                    int(TimestampType.CREATE_TIME),
                    r.key,
                    r.value,
                    tuple((h.key, h.value) for h in r.headers) or None,
                )
            )
    log.flush()
    return rows


def _facts(log_path: str) -> tuple[int, int, int, int, int, str]:
    """(base offset, last offset, first timestamp, max timestamp, size, sha256) of a sealed .log."""
    with open(log_path, "rb") as f:
        data = f.read()
    headers = [h for _, h in iter_batches(data)]
    if not headers:
        raise ValueError(f"{log_path} holds no batches")
    max_ts = max(h.max_timestamp for h in headers)
    return (
        headers[0].base_offset,
        headers[-1].last_offset,
        headers[0].base_timestamp,
        max_ts,
        len(data),
        hashlib.sha256(data).hexdigest(),
    )


async def upload_segment_files(
    store: ObjectStore,
    manifests: ManifestStore,
    log_path: str,
    topic: str,
    topic_id: uuid.UUID,
    partition: int,
    *,
    compacted: bool = False,
) -> RemoteSegment:
    """Upload one sealed segment (``.log`` and its ``.index``/``.timeindex`` next to it) exactly
    as docs/tiering.md prescribes: COPY_STARTED, the objects, then COPIED. ``compacted``: a
    segment the log cleaner rewrote (offsets may skip), flagged as the uploader flags it."""
    base, last, first_ts, max_ts, size, sha = _facts(log_path)
    stem = log_path[: -len(".log")]
    sid = uuid.uuid4()
    keys = segment_keys(topic, topic_id, partition, base, sid)
    now = int(time.time() * 1000)
    rs = RemoteSegment(
        segment_id=sid,
        base_offset=base,
        last_offset=last,
        first_timestamp=first_ts,
        max_timestamp=max_ts,
        size=size,
        log_sha256=sha,
        index_size=os.path.getsize(stem + ".index"),
        timeindex_size=os.path.getsize(stem + ".timeindex"),
        leader_epoch=0,
        state=SegmentState.COPY_STARTED,
        keys=keys,
        created_ms=now,
        updated_ms=now,
        compacted=compacted,
    )
    await manifests.update(topic, topic_id, partition, lambda m: m.add_or_update(rs))
    await store.put_file(keys.log, log_path)
    await store.put_file(keys.index, stem + ".index")
    await store.put_file(keys.timeindex, stem + ".timeindex")
    copied = rs.with_state(SegmentState.COPIED, now)
    await manifests.update(topic, topic_id, partition, lambda m: m.add_or_update(copied))
    return copied


async def tier_log(
    store: ObjectStore,
    log: Log,
    topic: str,
    topic_id: uuid.UUID,
    partition: int,
    *,
    count: int | None = None,
    manifests: ManifestStore | None = None,
) -> list[RemoteSegment]:
    """Upload the sealed segments of ``log`` (the first ``count`` of them), oldest first."""
    ms = manifests or ManifestStore(store)
    sealed = log.segments()[:-1]
    return [
        await upload_segment_files(
            store, ms, seg.log_path, topic, topic_id, partition, compacted=seg.compacted
        )
        for seg in sealed[:count]
    ]


async def put_topic(store: ObjectStore, topic: str, topic_id: uuid.UUID, partitions: int) -> None:
    await ManifestStore(store).put_topic_manifest(
        {"name": topic, "topic_id": str(topic_id), "partitions": partitions, "configs": {}}
    )


class CountingStore(_CountingStore):
    """The tiering tests' counting store, plus the GETs of ``.log`` objects (pruning tests)."""

    def log_gets(self) -> list[tuple[str, int | None, int | None]]:
        return [g for g in self.gets if g[0].endswith(".log")]


def rows_of_table(table: object) -> list[Row]:
    """Rows of an Arrow table / list of dicts with the data source's columns."""
    import pyarrow as pa

    dicts = table.to_pylist() if isinstance(table, pa.Table | pa.RecordBatch) else list(table)  # type: ignore[call-overload]
    out = []
    for d in dicts:
        ts = d["timestamp"]
        ms = ts if isinstance(ts, int) else round(ts.timestamp() * 1000)
        hs = d["headers"]
        out.append(
            Row(
                d["topic"],
                d["partition"],
                d["offset"],
                ms,
                d["timestampType"],
                None if d["key"] is None else bytes(d["key"]),
                None if d["value"] is None else bytes(d["value"]),
                None
                if hs is None
                else tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in hs),
            )
        )
    return out


def stop_spark(session: object) -> None:
    """Stop ``session`` and the JVM behind it.

    ``SparkSession.stop()`` leaves pyspark's JVM gateway running, and the next session in
    this process reuses that JVM, whose Python workers keep the environment it was started
    with: a module that sets the AWS chain variables (the S3 endpoint) for its session
    would not reach the workers after another module's session. Closing the gateway's stdin
    makes the JVM exit; the next ``getOrCreate`` launches a fresh one."""
    from pyspark import SparkContext

    session.stop()  # type: ignore[attr-defined]
    gateway = SparkContext._gateway
    SparkContext._gateway = None
    SparkContext._jvm = None
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(30)
        except Exception:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def local_spark(app: str, env: Mapping[str, str] | None = None, **conf: str) -> Iterator[Any]:
    """A ``local[2]`` SparkSession whose Python workers run this interpreter with the project
    importable, the ``strata`` source registered, ``env`` exported for the JVM and its
    workers; stopped (JVM included, ``stop_spark``) and the environment restored on exit.
    ``conf``: extra Spark settings, ``spark_sql_x`` for ``spark.sql.x``."""
    from pyspark.sql import SparkSession

    from spark.source import StrataDataSource

    saved = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, saved.get("PYTHONPATH", "")) if p)
    os.environ.update(env or {})
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key.replace("_", "."), value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(StrataDataSource)
    try:
        yield session
    finally:
        stop_spark(session)
        os.environ.clear()
        os.environ.update(saved)
