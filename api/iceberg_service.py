"""The broker's Iceberg committer: topics with ``iceberg.mode`` on, translated into their
tables (spark.iceberg.translate) every ``iceberg.target.lag.ms / 2``.

One committer per table, so commits never conflict: the broker that leads partition 0 of
the topic (in a cluster, the controller's election, through the metadata store, places it;
a single node leads every partition). A new committer resumes from the offsets in the
table's last snapshot. Passes run on one worker thread of their own: pyiceberg and the
archive reader block.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.config import BrokerConfig
from broker.schema_registry.errors import RegistryError
from broker.schema_registry.lookup import referenced_texts, schema_by_id
from broker.schema_registry.protobuf_format import ProtobufSchema
from broker.schema_registry.schema_base import PROTOBUF, ReferencedText
from broker.schema_registry.state import parse_cached
from broker.schema_registry.store import SchemaStore
from hot.config import ICEBERG_DISABLED, LogConfig
from hot.errors import UnknownTopicOrPartitionError
from hot.manager import LogManager
from hot.topics import TopicInfo
from tiering.iceberg_config import CATALOG_EMBEDDED

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class TableState:
    """What the committer knows of one table (status, metrics, the console)."""

    topic: str
    offsets: dict[int, int] = field(default_factory=dict)
    ends: dict[int, int] = field(default_factory=dict)
    last_pass_ms: int = 0
    last_commit_ms: int = 0
    rows_total: int = 0
    snapshot_id: int | None = None
    error: str | None = None

    def lag_records(self, high_watermarks: dict[int, int]) -> int:
        return sum(max(0, hw - self.offsets.get(p, 0)) for p, hw in high_watermarks.items())


class RegistrySchemaSource:
    """spark.iceberg's ``SchemaSource`` on the broker's schema registry, for the
    committer's thread: each lookup runs on the broker's event loop (answered by this
    broker when it leads ``_schemas``, else by the leader over HTTP) and is cached per id
    there. Only an id the registry does not know is KeyError (the record is then invalid,
    ``iceberg.invalid.record.action``); any other failure (the registry unreachable, a
    failover) raises and fails the pass, which is retried: a record is never dropped
    because the registry was briefly away."""

    def __init__(
        self, store: Callable[[], SchemaStore | None], loop: asyncio.AbstractEventLoop | None
    ) -> None:
        self._store = store
        self._loop = loop

    def schema_by_id(self, schema_id: int) -> tuple[str, str]:
        store = self._store()
        if store is None or self._loop is None:
            raise RuntimeError("the schema registry is not running on this broker")
        fut = asyncio.run_coroutine_threadsafe(schema_by_id(store, schema_id), self._loop)
        try:
            fmt, text, _ = fut.result(timeout=30)
        except RegistryError as exc:
            if exc.code == 40403:
                raise KeyError(schema_id) from exc
            raise
        if fmt == PROTOBUF:
            try:
                return fmt, self._protobuf(schema_id, text).serialized()
            except RegistryError as exc:  # its values are invalid, naming why (not the pass's failure)
                logger.warning("iceberg: Protobuf schema id %d does not compile: %s", schema_id, exc.message)
        return fmt, text

    def references(self, schema_id: int) -> list[tuple[str, str]]:
        store = self._store()
        if store is None or self._loop is None:
            raise RuntimeError("the schema registry is not running on this broker")

        async def texts() -> tuple[str, str, list[ReferencedText]]:
            fmt, text, refs = await schema_by_id(store, schema_id)
            return fmt, text, (await referenced_texts(store, refs) if refs else [])

        fmt, text, refs = asyncio.run_coroutine_threadsafe(texts(), self._loop).result(timeout=30)
        if fmt == PROTOBUF:
            # the files it imports, compiled as the schema was (names as it imports them)
            try:
                parsed = self._protobuf(schema_id, text, refs)
            except RegistryError:
                return [(r.name, r.text) for r in refs]
            return [(d.name, base64.standard_b64encode(d.SerializeToString()).decode()) for d in parsed.deps]
        return [(r.name, r.text) for r in refs]

    def _protobuf(
        self, schema_id: int, text: str, refs: list[ReferencedText] | None = None
    ) -> ProtobufSchema:
        """A Protobuf schema as descriptors (spark.iceberg.protobuf_values takes a base64
        FileDescriptorProto; a schema registered as .proto text is compiled here, by the
        registry's own parser, cached)."""
        if refs is None:
            refs = self.references_of(schema_id)
        parsed = parse_cached(PROTOBUF, text, tuple(refs))
        assert isinstance(parsed, ProtobufSchema)
        return parsed

    def references_of(self, schema_id: int) -> list[ReferencedText]:
        store = self._store()
        assert store is not None and self._loop is not None

        async def texts() -> list[ReferencedText]:
            _, _, refs = await schema_by_id(store, schema_id)
            return await referenced_texts(store, refs) if refs else []

        return asyncio.run_coroutine_threadsafe(texts(), self._loop).result(timeout=30)


class IcebergService:
    def __init__(
        self,
        manager: LogManager,
        config: BrokerConfig,
        broker_address: str,
        is_committer: Callable[[str], bool] | None = None,
        leader_address: Callable[[str, int], str | None] | None = None,
        schemas: Callable[[], SchemaStore | None] | None = None,
    ) -> None:
        self.manager = manager
        self.schemas = schemas  # the broker's schema registry store (None: not served)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.config = config
        self.broker_address = broker_address
        self.is_committer = is_committer or (lambda topic: True)
        self.leader_address = leader_address
        self.tables: dict[str, TableState] = {}
        self._due: dict[str, float] = {}
        self._maintained: dict[str, float] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="strata-iceberg")
        self._translator: Any = None
        self._task: asyncio.Task[None] | None = None

    def catalog_properties(self) -> dict[str, str]:
        from spark.iceberg.catalog import catalog_properties

        return catalog_properties(self.config.iceberg, self.config.data_dir, self.config.object_store_url)

    def _make_translator(self) -> Any:
        from spark.iceberg.catalog import open_catalog
        from spark.iceberg.translate import Translator
        from tiering.store import SyncObjectStore

        store = SyncObjectStore.open(self.config.object_store_url)
        return Translator(
            store,
            open_catalog(self.catalog_properties()),
            namespace=self.config.iceberg.namespace,
            broker=self.broker_address,
            embedded=self.config.iceberg.catalog == CATALOG_EMBEDDED,
            # value_schema_id_prefix: values decoded by the broker's schema registry
            schema_source=None if self.schemas is None else RegistrySchemaSource(self.schemas, self._loop),
            leader_address=self.leader_address,
            # data files are written here before they are put (cleared of a crashed pass's)
            spool_dir=str(Path(self.config.data_dir) / "iceberg" / "spool"),
        )

    def _pass(self, info: TopicInfo) -> Any:
        if self._translator is None:
            self._translator = self._make_translator()
        result = self._translator.run_pass(info, self.manager.log_config(info.name))
        now = time.monotonic()
        if now >= self._maintained.get(info.name, 0.0):
            self._maintained[info.name] = now + self.config.iceberg.maintenance_interval_ms / 1000
            from spark.iceberg.translate import expire_snapshots

            table = self._translator.table(info, self.manager.log_config(info.name), create=False)
            if table is not None:
                expire_snapshots(table, self.config.iceberg.snapshot_max_age_ms)
        return result

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.manager.add_delete_listener(self.on_topic_deleted)
        self._task = asyncio.create_task(self.run(), name="iceberg-committer")

    def on_topic_deleted(self, info: TopicInfo) -> None:
        """Any thread (manager's listener): keep or drop the table per ``iceberg.delete``,
        on the committer's thread. Every broker may run it: both outcomes are idempotent."""
        try:
            cfg = LogConfig.from_kafka(info.configs, self.manager.defaults)
        except Exception:
            return
        if cfg.iceberg_mode == ICEBERG_DISABLED and info.name not in self.tables:
            return
        self.tables.pop(info.name, None)

        def run() -> None:
            from spark.iceberg.translate import on_topic_deleted

            try:
                if self._translator is None:
                    self._translator = self._make_translator()
                t = self._translator
                done = on_topic_deleted(t.catalog, t.store, t.namespace, info, cfg.iceberg_delete)
                logger.info("iceberg: topic %s deleted: its table was %s", info.name, done)
            except Exception:
                logger.exception("iceberg: keeping or dropping the table of deleted topic %s", info.name)

        with contextlib.suppress(RuntimeError):  # the pool is shut down: the broker is stopping
            self._pool.submit(run)

    async def run(self) -> None:
        interval = self.config.iceberg.check_interval_ms / 1000
        while True:
            default_off = self.manager.defaults.iceberg_mode == ICEBERG_DISABLED
            for info in self.manager.topics():
                if default_off and "iceberg.mode" not in info.configs:
                    continue  # cheap: thousands of topics are looked at every second
                try:
                    await self._visit(info)
                except asyncio.CancelledError:
                    raise
                except UnknownTopicOrPartitionError:
                    continue  # deleted since the listing
                except Exception:  # the loop must go on
                    logger.exception("iceberg: looking at topic %s", info.name)
            await asyncio.sleep(interval)

    async def _visit(self, info: TopicInfo) -> None:
        cfg = self.manager.log_config(info.name)
        if cfg.iceberg_mode == ICEBERG_DISABLED or not self.is_committer(info.name):
            return
        now = time.monotonic()
        if now < self._due.get(info.name, 0.0):
            return
        state = self.tables.setdefault(info.name, TableState(info.name))
        started = time.monotonic()
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._pool, self._pass, info)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # the bucket or the catalog is out (or a bad record): retry after a pause;
            # nothing is committed, so nothing is lost or doubled
            state.error = f"{type(e).__name__}: {e}"
            logger.warning("iceberg: translating %s failed: %s", info.name, state.error)
            self._due[info.name] = time.monotonic() + min(5.0, cfg.iceberg_target_lag_ms / 2000)
            return
        state.error = None
        state.offsets = dict(result.offsets)
        state.ends = dict(result.ends)
        state.last_pass_ms = int(time.time() * 1000)
        if result.rows:
            state.last_commit_ms = state.last_pass_ms
            state.rows_total += result.rows
            state.snapshot_id = result.snapshot_id
            logger.info(
                "iceberg: %s: committed %d records in %d files (offsets %s)",
                info.name,
                result.rows,
                result.files,
                result.offsets,
            )
        # every half of the target lag from the pass's start, not its end: a record waits at
        # most a pass and the rest of the period (a period counted from the end would add
        # the pass's duration again, and a slow pass on a loaded broker would overshoot)
        self._due[info.name] = started + cfg.iceberg_target_lag_ms / 2000

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        # Off the event loop: a pass in flight may be fetching the hot tail from this very
        # broker, whose listener must go on answering until it is done.
        try:
            await asyncio.wait_for(asyncio.to_thread(self._pool.shutdown, wait=True), timeout=60)
        except TimeoutError:
            logger.warning("iceberg: a translation pass did not finish within 60 s of the stop")
            return
        if self._translator is not None:
            await asyncio.to_thread(self._translator.store.close)

    def high_watermarks(self, topic: str) -> dict[int, int]:
        state = self.tables.get(topic)
        return dict(state.ends) if state is not None else {}

    def status(self) -> list[dict[str, Any]]:
        now = int(time.time() * 1000)
        out = []
        for name, s in sorted(self.tables.items()):
            lag = s.lag_records(s.ends)
            out.append(
                {
                    "topic": name,
                    "identifier": f"{self.config.iceberg.namespace}.{name}",
                    "committed_offsets": {str(p): o for p, o in sorted(s.offsets.items())},
                    "lag_records": lag,
                    "lag_seconds": 0.0 if lag == 0 else (now - (s.last_commit_ms or s.last_pass_ms)) / 1000,
                    "last_snapshot_id": s.snapshot_id,
                    "last_commit_ms": s.last_commit_ms or None,
                    "rows_translated": s.rows_total,
                    "error": s.error,
                }
            )
        return out


class IcebergCollector:
    """strata_iceberg_* metrics, per topic, from the committer's state."""

    def __init__(self, service: IcebergService) -> None:
        self.service = service

    def collect(self) -> list[Metric]:
        committed = GaugeMetricFamily(
            "strata_iceberg_committed_offset",
            "Next offset to translate, as committed in the table's last snapshot",
            labels=["topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "strata_iceberg_lag_records", "Records not in the table yet", labels=["topic"]
        )
        lag_s = GaugeMetricFamily(
            "strata_iceberg_lag_seconds",
            "Age of the table's last commit while records wait",
            labels=["topic"],
        )
        rows = CounterMetricFamily(
            "strata_iceberg_records_translated", "Records committed to the table", labels=["topic"]
        )
        for item in self.service.status():
            for p, o in item["committed_offsets"].items():
                committed.add_metric([item["topic"], p], o)
            lag.add_metric([item["topic"]], item["lag_records"])
            lag_s.add_metric([item["topic"]], item["lag_seconds"])
            rows.add_metric([item["topic"]], item["rows_translated"])
        return [committed, lag, lag_s, rows]


def register_metrics(service: IcebergService, registry: CollectorRegistry) -> None:
    registry.register(IcebergCollector(service))  # type: ignore[arg-type]
