"""One translation pass of one topic into its Iceberg table, exactly once.

The committed position of every partition is the snapshot summary of the table's current
snapshot (``strata.offset.<partition>``: the next offset to translate), written by the
same commit that adds the data files holding the records below it. A pass:

1. points the catalog at the bucket's newest metadata (``catalog.sync_from_bucket``) and
   reads the committed offsets (none: the log start, i.e. a backfill of the whole history);
2. plans ``[committed, last stable offset)`` of each partition with the archive reader in
   read_committed isolation (``spark.plan``): archived offsets from the bucket with ranged
   GETs (never through the broker's local disk), the rest with Fetch from the broker;
   aborted transactions are dropped and control records never appear;
3. writes the rows as Parquet data files (one per table partition) through the object-store
   seam under the table's location (``tiering.keys``);
4. commits them with pyiceberg's ``add_files`` and the new offsets in one snapshot.

A crash between 3 and 4 leaves data files no snapshot references: the next pass starts
from the old offsets again (no gap) and the orphans are never read (no duplicate);
``remove_orphans`` deletes them when the committer starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.schema import assign_fresh_schema_ids
from pyiceberg.table import Table, TableProperties

from hot.config import ICEBERG_KEY_VALUE, LogConfig
from hot.errors import InvalidConfigError
from hot.topics import TopicInfo
from spark.iceberg.catalog import object_url, sync_from_bucket
from spark.iceberg.schema_values import SchemaSource, TypedValues, ValueDecoder, merge_struct
from spark.iceberg.table import (
    DLQ_ARROW_SCHEMA,
    DLQ_SCHEMA,
    KV_SCHEMA,
    SPOOL_PREFIX,
    DataFile,
    DataFileWriter,
    iceberg_data_file,
    partition_spec,
    to_kv_rows,
)
from spark.options import ReadOptions
from spark.plan import BrokerClient, HotTask, ScanPlan, ScanTask, plan_scan
from spark.scan import read_task
from tiering.keys import iceberg_data_key, iceberg_dlq_root, iceberg_table_root
from tiering.store import SyncObjectStore

OFFSET_PROPERTY: Final = "strata.offset."  # + partition: the next offset to translate
TOPIC_ID_PROPERTY: Final = "strata.topic-id"
DLQ_ACTION: Final = "dlq_table"  # iceberg.invalid.record.action: invalid records to <topic>~dlq
DLQ_SUFFIX: Final = "~dlq"  # table property: the topic the table belongs to
# No min/max for keys, values and headers (spark.iceberg.table writes none: mostly distinct
# bytes, costly to collect, useless for pruning); said so, readers expect none.
NO_METRICS: Final = {
    f"write.metadata.metrics.column.{c}": "none"
    for c in ("key", "value", "headers.element.key", "headers.element.value")
}
# Test hook: kill -9 this process after the data files are written, before the commit.
CRASH_ENV: Final = "STRATA_ICEBERG_CRASH_BEFORE_COMMIT"
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PassResult:
    topic: str
    rows: int = 0
    files: int = 0
    offsets: Mapping[int, int] = field(default_factory=dict)  # committed after the pass
    ends: Mapping[int, int] = field(default_factory=dict)  # last stable offsets seen
    snapshot_id: int | None = None


def committed_offsets(table: Table | None) -> dict[int, int]:
    """``strata.offset.<p>`` of the newest snapshot in the current one's ancestry that has
    them; empty for a table without one. Ancestry, not just the current snapshot: a
    compaction or expiry by another engine (Spark's rewrite_data_files) commits snapshots
    of its own without Strata's summary, and rewrites only what is there already."""
    if table is None:
        return {}
    snap = table.current_snapshot()
    while snap is not None:
        props = snap.summary.additional_properties if snap.summary is not None else {}
        found = {
            int(k[len(OFFSET_PROPERTY) :]): int(v) for k, v in props.items() if k.startswith(OFFSET_PROPERTY)
        }
        if found:
            return found
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return {}


def identifier(namespace: str, topic: str) -> tuple[str, str]:
    return (namespace, topic)


def archived_identifier(ident: tuple[str, str], topic_id: str) -> tuple[str, str]:
    """Where a deleted topic's kept table goes: ``<topic>_<topic id hex>``."""
    return (ident[0], f"{ident[1]}_{topic_id.replace('-', '')}")


def dlq_identifier(ident: tuple[str, str]) -> tuple[str, str]:
    """The dead-letter table of a topic's table: ``<topic>~dlq`` (Redpanda's name for it;
    ``~`` is in no topic name, so it never collides with a topic's table)."""
    return (ident[0], f"{ident[1]}{DLQ_SUFFIX}")


class Translator:
    """Translates topics of one broker (``broker``: its Kafka listener, for the records
    not archived yet); one instance per committer (not thread-safe)."""

    def __init__(
        self,
        store: SyncObjectStore,
        catalog: Catalog,
        *,
        namespace: str,
        broker: str | None,
        embedded: bool = True,
        read_options: Mapping[str, str] | None = None,
        schema_source: SchemaSource | None = None,
        leader_address: Callable[[str, int], str | None] | None = None,
        spool_dir: str | None = None,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.namespace = namespace
        self.broker = broker
        self.embedded = embedded
        self.read_options = dict(read_options or {})
        self._cleaned: set[str] = set()
        # value_schema_id_prefix: schemas by id; the broker's schema registry (issue 37)
        # once merged, e.g. Translator(..., schema_source=registry)
        self.schema_source = schema_source
        # In a cluster: where each partition's hot tail is fetched (its leader); the archive
        # reader's hot tasks otherwise all go to ``broker``, which leads only some of them.
        self.leader_address = leader_address
        # Data files are written into spool files before they are put (None: $TMPDIR). A
        # directory of the committer's own: what a crashed pass left there is removed now.
        self.spool_dir = spool_dir
        if spool_dir is not None:
            os.makedirs(spool_dir, exist_ok=True)
            for name in os.listdir(spool_dir):
                if name.startswith(SPOOL_PREFIX):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(spool_dir, name))

    def table(
        self, info: TopicInfo, config: LogConfig, *, create: bool, schema: pa.Schema | None = None
    ) -> Table | None:
        ident = identifier(self.namespace, info.name)
        root = iceberg_table_root(info.name, info.topic_id)
        table: Table | None
        if self.embedded:
            table = sync_from_bucket(self.catalog, ident, self.store, root)
        else:
            table = self.catalog.load_table(ident) if self.catalog.table_exists(ident) else None
        if table is not None and table.properties.get(TOPIC_ID_PROPERTY, str(info.topic_id)) != str(
            info.topic_id
        ):
            # a table kept from a deleted topic of the same name: moved aside, never appended to
            self.catalog.rename_table(ident, archived_identifier(ident, table.properties[TOPIC_ID_PROPERTY]))
            table = sync_from_bucket(self.catalog, ident, self.store, root) if self.embedded else None
        if table is not None or not create:
            return table
        self.catalog.create_namespace_if_not_exists(self.namespace)
        iceberg_schema = KV_SCHEMA
        if schema is not None:  # ids of its own first: the partition spec names its sources by id
            iceberg_schema = assign_fresh_schema_ids(self.catalog._convert_schema_if_needed(schema))
        return self.catalog.create_table(
            ident,
            schema=iceberg_schema,
            location=object_url(self.store, root),
            partition_spec=partition_spec(config.iceberg_partition_spec, iceberg_schema),
            properties={"strata.topic": info.name, TOPIC_ID_PROPERTY: str(info.topic_id), **NO_METRICS},
        )

    def run_pass(self, info: TopicInfo, config: LogConfig) -> PassResult:
        typed = config.iceberg_mode != ICEBERG_KEY_VALUE
        if typed and self.schema_source is None:
            raise InvalidConfigError(
                f"iceberg.mode {config.iceberg_mode} needs a schema registry, and this broker has none yet"
            )
        # schema mode: the table is made from the first pass's schemas
        table = self.table(info, config, create=not typed)
        if table is not None and info.name not in self._cleaned:
            remove_orphans(self.store, table, iceberg_table_root(info.name, info.topic_id))
            self._cleaned.add(info.name)
        committed = committed_offsets(table)
        options, plan = self._plan(info, committed)
        ends = {r.partition: r.end for r in plan.ranges}
        offsets = {p: max(committed.get(p, 0), ends.get(p, 0)) for p in range(info.partitions)}
        if all(ends.get(p, 0) <= committed.get(p, -1) for p in range(info.partitions)):
            return PassResult(info.name, offsets=committed, ends=ends)
        evolved: pa.Schema | None = None
        # key_value: the table is known, so each file's manifest entry is made with its upload
        uploads = _Uploads(self.store, info, None if typed else table)
        try:
            if not typed:
                writer = DataFileWriter(
                    config.iceberg_partition_spec,
                    on_file=uploads.submit,
                    spool_dir=self.spool_dir,
                    keep_spool=True,
                )
                try:
                    for task in plan.tasks:
                        for batch in read_task(self._routed(task), options, store=self.store):
                            writer.add(to_kv_rows(batch))
                except BaseException:
                    writer.abort()
                    raise
            else:
                assert self.schema_source is not None
                kv = [
                    to_kv_rows(b)
                    for t in plan.tasks
                    for b in read_task(self._routed(t), options, store=self.store)
                ]
                if not kv:
                    uploads.close()
                    return PassResult(info.name, offsets=committed, ends=ends)
                base = None
                if table is not None:
                    base = table.schema().as_arrow().field("value").type
                rows_in, invalid = _typed_rows(
                    pa.concat_tables(kv), TypedValues(ValueDecoder(self.schema_source)), base
                )
                if invalid.num_rows and config.iceberg_invalid_record_action == DLQ_ACTION:
                    # committed before the table (no two-table atomic commit in Iceberg): the
                    # dead-letter table's own offsets keep a rerun after a crash from adding a
                    # record twice
                    self.dead_letters(info, config, invalid, offsets)
                elif invalid.num_rows:
                    logger.warning(
                        "iceberg: %s: dropped %d records whose value does not decode",
                        info.name,
                        invalid.num_rows,
                    )
                evolved = rows_in.schema
                if table is None:
                    table = self.table(info, config, create=True, schema=evolved)
                    assert table is not None
                writer = DataFileWriter(
                    config.iceberg_partition_spec,
                    schema=evolved,
                    on_file=uploads.submit,
                    spool_dir=self.spool_dir,
                    keep_spool=True,
                )
                writer.add(rows_in)
            for f in writer.finish():
                uploads.submit(f)
            done = uploads.wait()
        except BaseException:
            uploads.abort()
            raise
        rows = sum(u.file.rows for u in done)
        if rows == 0 and (table is None or all(o <= committed.get(p, 0) for p, o in offsets.items())):
            return PassResult(info.name, offsets=committed, ends=ends)
        # (no rows, but the offsets moved past control records, aborted data or invalid
        # values: committed as a snapshot with no file, else every pass would read them
        # again and the lag would never reach 0)
        assert table is not None
        if os.environ.get(CRASH_ENV):
            logger.warning("%s set: killing this process before the Iceberg commit", CRASH_ENV)
            os.kill(os.getpid(), signal.SIGKILL)
        summary = {f"{OFFSET_PROPERTY}{p}": str(o) for p, o in offsets.items()}
        summary["strata.translated-at-ms"] = str(int(time.time() * 1000))
        with table.transaction() as tx:
            if evolved is not None:
                # added fields become new columns (the registry allows only compatible changes)
                with tx.update_schema() as update:
                    update.union_by_name(evolved)
            # pyiceberg's add_files, less its read of each footer back from the bucket: the
            # footers are at hand
            if tx.table_metadata.name_mapping() is None:
                mapping = tx.table_metadata.schema().name_mapping.model_dump_json()
                tx.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
            with tx.update_snapshot(snapshot_properties=summary).fast_append() as append:
                for u in done:
                    # schema mode: made here, from the schema this transaction evolved
                    entry = u.entry or iceberg_data_file(tx.table_metadata, u.url, u.file.data)
                    append.append_data_file(entry)
        snap = table.current_snapshot()
        return PassResult(
            info.name,
            rows=rows,
            files=len(done),
            offsets=offsets,
            ends=ends,
            snapshot_id=snap.snapshot_id if snap is not None else None,
        )

    def dead_letters(
        self, info: TopicInfo, config: LogConfig, rows: pa.Table, offsets: Mapping[int, int]
    ) -> int:
        """Adds the invalid records (key_value columns and the ``reason``) to the topic's
        dead-letter table ``<topic>~dlq``, created on first use; those below the table's
        own committed offsets are there already (a pass that crashed after this commit and
        before the main one). Returns how many were added."""
        ident = dlq_identifier(identifier(self.namespace, info.name))
        root = iceberg_dlq_root(info.name, info.topic_id)
        table: Table | None
        if self.embedded:
            table = sync_from_bucket(self.catalog, ident, self.store, root)
        else:
            table = self.catalog.load_table(ident) if self.catalog.table_exists(ident) else None
        if table is not None and table.properties.get(TOPIC_ID_PROPERTY) != str(info.topic_id):
            self.catalog.rename_table(
                ident,
                dlq_identifier(
                    archived_identifier(
                        identifier(self.namespace, info.name),
                        table.properties.get(TOPIC_ID_PROPERTY, "unknown"),
                    )
                ),
            )
            table = None
        if table is None:
            self.catalog.create_namespace_if_not_exists(self.namespace)
            table = self.catalog.create_table(
                ident,
                schema=DLQ_SCHEMA,
                location=object_url(self.store, root),
                partition_spec=partition_spec(config.iceberg_partition_spec, DLQ_SCHEMA),
                properties={"strata.topic": info.name, TOPIC_ID_PROPERTY: str(info.topic_id), **NO_METRICS},
            )
        done = committed_offsets(table)
        if done:
            partitions = rows.column("partition").to_pylist()
            floor = pa.array([done.get(p, 0) for p in partitions], pa.int64())
            rows = rows.filter(pc.greater_equal(rows.column("offset"), floor))
        if rows.num_rows == 0:
            return 0
        writer = DataFileWriter(
            config.iceberg_partition_spec, schema=DLQ_ARROW_SCHEMA, spool_dir=self.spool_dir
        )
        writer.add(rows)
        files = writer.finish()
        entries = []
        for f in files:
            key = iceberg_data_key(info.name, info.topic_id, f.partition_path, f.file_id, dead_letters=True)
            self.store.put(key, f.data)
            entries.append(iceberg_data_file(table.metadata, object_url(self.store, key), f.data))
        summary = {f"{OFFSET_PROPERTY}{p}": str(o) for p, o in offsets.items()}
        with table.transaction() as tx:
            if tx.table_metadata.name_mapping() is None:
                mapping = tx.table_metadata.schema().name_mapping.model_dump_json()
                tx.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
            with tx.update_snapshot(snapshot_properties=summary).fast_append() as append:
                for entry in entries:
                    append.append_data_file(entry)
        logger.warning(
            "iceberg: %s: %d records whose value does not decode added to %s",
            info.name,
            rows.num_rows,
            ".".join(ident),
        )
        return int(rows.num_rows)

    def _routed(self, task: ScanTask) -> ScanTask:
        if isinstance(task, HotTask) and self.leader_address is not None:
            leader = self.leader_address(task.topic, task.partition)
            if leader is not None:
                return dataclasses.replace(task, broker=leader)
        return task

    def _plan(self, info: TopicInfo, committed: Mapping[int, int]) -> tuple[ReadOptions, ScanPlan]:
        starting = {str(p): committed.get(p, -2) for p in range(info.partitions)}
        options = ReadOptions.parse(
            {
                **self.read_options,
                "subscribe": info.name,
                "startingOffsets": json.dumps({info.name: starting}),
                "endingOffsets": "latest",
                # no broker (tools, the benchmark): the archive only
                **({"broker": self.broker, "includeHot": "true"} if self.broker else {"includeHot": "false"}),
                "kafka.isolation.level": "read_committed",
                # records deleted by retention before they were translated cannot come back
                "failOnDataLoss": "false",
            },
            path=self.store.url,
        )
        broker = (
            _LeaderRouted(self.broker, self.leader_address)
            if self.broker is not None and self.leader_address is not None
            else None
        )
        return options, plan_scan(options, broker=broker)


@dataclass(frozen=True, slots=True)
class _Uploaded:
    file: DataFile  # its bytes dropped once the entry is made
    url: str
    entry: IcebergDataFile | None  # None: made at the commit (schema mode)


class _Uploads:
    """A pass's data files put into the bucket as the writer closes them, while the next
    ones are read and encoded (the put hashes and fsyncs: mostly off the GIL; a file
    with its spool file kept is moved into a file store's bucket, not copied);
    at most ``depth`` in flight, so memory holds a few files, not the pass. With ``table``
    (key_value: its schema is fixed) each file's manifest entry is made after its put and
    its bytes let go."""

    def __init__(self, store: SyncObjectStore, info: TopicInfo, table: Table | None, depth: int = 2) -> None:
        self.store = store
        self.info = info
        self.metadata = table.metadata if table is not None else None
        self.depth = depth
        self._pool = ThreadPoolExecutor(depth, thread_name_prefix="iceberg-put")
        self._pending: deque[Future[_Uploaded]] = deque()
        self._done: list[_Uploaded] = []
        self._keys: list[str] = []
        self._spools: list[str] = []  # removed by abort if not taken by their put yet

    def submit(self, f: DataFile) -> None:
        if f.spool is not None:
            self._spools.append(f.spool)
        if not f.rows:
            if f.spool is not None:
                os.unlink(f.spool)
            return
        while len(self._pending) >= self.depth:
            self._done.append(self._pending.popleft().result())
        key = iceberg_data_key(self.info.name, self.info.topic_id, f.partition_path, f.file_id)
        self._keys.append(key)
        self._pending.append(self._pool.submit(self._put, f, key))

    def _put(self, f: DataFile, key: str) -> _Uploaded:
        if f.spool is not None:
            # the bytes the page cache holds become the object: writing them into a new
            # file cost as much as encoding them (fresh pages), and all of it was wait
            self.store.put_file_moved(key, f.spool)
        else:
            self.store.put(key, f.data)
        url = object_url(self.store, key)
        if self.metadata is None:
            return _Uploaded(f, url, None)
        entry = iceberg_data_file(self.metadata, url, f.data)
        return _Uploaded(dataclasses.replace(f, data=memoryview(b"")), url, entry)

    def wait(self) -> list[_Uploaded]:
        """Every file put (in the order submitted); raises the first failed put's error."""
        try:
            while self._pending:
                self._done.append(self._pending.popleft().result())
            return self._done
        finally:
            self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def abort(self) -> None:
        """A failed pass: the files it put are deleted (best effort; ``remove_orphans``
        deletes what is left when the committer starts). No snapshot references them."""
        self.close()
        self._pending.clear()
        for spool in self._spools:
            with contextlib.suppress(OSError):
                os.unlink(spool)
        if self._keys:
            try:
                self.store.delete_many(self._keys)
            except Exception as e:  # the pass's own error is the one to report
                logger.warning("iceberg: %s: could not delete the failed pass's files: %s", self.info.name, e)


class _LeaderRouted(BrokerClient):
    """The planner's ListOffsets asked of each partition's leader (in a cluster ``broker``
    leads only some of them and answers NOT_LEADER_OR_FOLLOWER for the others)."""

    def __init__(self, address: str, leader_address: Callable[[str, int], str | None]) -> None:
        super().__init__(address)
        self._leader_address = leader_address

    def list_offsets(
        self, topic: str, partitions: list[int], timestamp: int, isolation_level: int = 0
    ) -> dict[int, int]:
        groups: dict[str, list[int]] = {}
        for p in partitions:
            groups.setdefault(self._leader_address(topic, p) or str(self.address), []).append(p)
        out: dict[int, int] = {}
        for address, parts in groups.items():
            out.update(BrokerClient(address).list_offsets(topic, parts, timestamp, isolation_level))
        return out


def expire_snapshots(table: Table, max_age_ms: int) -> None:
    """Expire snapshots older than ``max_age_ms`` (never the current one). Data files stay:
    translation only appends, so the current snapshot still references every one."""
    import datetime

    cutoff = datetime.datetime.fromtimestamp((time.time() * 1000 - max_age_ms) / 1000, tz=datetime.UTC)
    old = [s for s in table.snapshots() if s.timestamp_ms < cutoff.timestamp() * 1000]
    current = table.current_snapshot()
    if current is not None and any(s.snapshot_id != current.snapshot_id for s in old):
        table.maintenance.expire_snapshots().older_than(cutoff).commit()


def on_topic_deleted(
    catalog: Catalog, store: SyncObjectStore, namespace: str, info: TopicInfo, drop: bool
) -> str:
    """``iceberg.delete``: drop the table and its files, or keep it under
    ``archived_identifier`` (the name is free for a new topic). Returns what was done."""
    ident = identifier(namespace, info.name)
    root = iceberg_table_root(info.name, info.topic_id)
    try:
        table = catalog.load_table(ident)
    except Exception:
        table = None
    if table is not None and table.properties.get(TOPIC_ID_PROPERTY) not in (None, str(info.topic_id)):
        table = None  # not this topic's table
    dlq = dlq_identifier(ident)
    try:
        dlq_table = catalog.load_table(dlq)
    except Exception:
        dlq_table = None
    if dlq_table is not None and dlq_table.properties.get(TOPIC_ID_PROPERTY) != str(info.topic_id):
        dlq_table = None
    if drop:
        if table is not None:
            catalog.drop_table(ident)
        if dlq_table is not None:
            catalog.drop_table(dlq)
        keys = [
            i.key for r in (root, iceberg_dlq_root(info.name, info.topic_id)) for i in store.list(f"{r}/")
        ]
        if keys:
            store.delete_many(keys)
        return "dropped"
    if table is not None:
        catalog.rename_table(ident, archived_identifier(ident, str(info.topic_id)))
    if dlq_table is not None:
        catalog.rename_table(dlq, dlq_identifier(archived_identifier(ident, str(info.topic_id))))
    return "kept"


def _typed_rows(kv: pa.Table, values: TypedValues, base: pa.DataType | None) -> tuple[pa.Table, pa.Table]:
    """The key_value rows with ``value`` decoded into a struct (the union of the table's
    type and every schema seen: fields added by an evolution become new columns), and the
    rows whose value does not decode (key_value columns and a ``reason``)."""
    ids, decoded, reasons = values.decode(kv.column("value").to_pylist())
    typ = base
    for key in sorted(values.types):  # older schemas first: their columns keep their places
        typ = merge_struct(typ, values.types[key])
    keep = pa.array([i is not None for i in ids])
    kept = kv.filter(keep)
    invalid = kv.filter(pc.invert(keep))
    invalid = invalid.append_column(
        pa.field("reason", pa.string()), pa.array([r for r in reasons if r is not None], pa.string())
    )
    if typ is None:
        typ = pa.struct([pa.field("value", pa.string())])
    struct = pa.array([d for d, i in zip(decoded, ids, strict=True) if i is not None], type=typ)
    return kept.set_column(kept.schema.get_field_index("value"), pa.field("value", typ), struct), invalid


def referenced_files(table: Table) -> set[str]:
    """Every data file some snapshot of the table references."""
    out: set[str] = set()
    for snap in table.snapshots():
        for manifest in snap.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                out.add(entry.data_file.file_path)
    return out


def remove_orphans(store: SyncObjectStore, table: Table, root: str) -> int:
    """Delete the data files under ``root/data/`` no snapshot references (a pass that
    crashed before its commit); the committer is the only writer, so at its start every
    such file is an orphan. Returns how many were deleted."""
    known = referenced_files(table)
    orphans = [i.key for i in store.list(f"{root}/data/") if object_url(store, i.key) not in known]
    if orphans:
        logger.info("iceberg: removing %d data files no snapshot references under %s", len(orphans), root)
        store.delete_many(orphans)
    return len(orphans)


def table_status(table: Table) -> dict[str, Any]:
    snap = table.current_snapshot()
    return {
        "location": table.metadata.location,
        "metadata_location": table.metadata_location,
        "committed_offsets": committed_offsets(table),
        "last_snapshot": None
        if snap is None
        else {"snapshot_id": snap.snapshot_id, "timestamp_ms": snap.timestamp_ms},
    }
