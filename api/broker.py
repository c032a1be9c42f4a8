"""The broker's request logic, shared by the Kafka protocol server and the REST API.

Both doors call the same coroutines here, so produce/fetch semantics (durability,
long polling, error mapping) cannot drift between them. Nothing in this module
knows about wire formats: it takes and returns plain values and hot.errors types.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from api.config import BrokerConfig
from api.metrics import BrokerMetrics
from api.security.quotas import FileQuotaStore, QuotaManager, quotas_path
from hot.config import LogConfig
from hot.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    OffsetMovedToTieredStorageError,
    RequestTimedOutError,
    StrataError,
    UnknownTopicOrPartitionError,
)
from hot.log import AppendInfo, Log
from hot.manager import LogManager
from hot.region import FileRegion
from hot.topics import TopicInfo
from tiering.remote_read import RemoteReader, RemoteReadResult

if TYPE_CHECKING:
    from api.groups.coordinator import GroupCoordinator
    from api.security.authz import AccessControl
    from api.security.users import UserTable

log = logging.getLogger("strata.broker")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class ProduceResult:
    error: StrataError | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_count: int = 0


@dataclass(frozen=True, slots=True)
class PendingAppend:
    topic: str
    log: Log | None
    info: AppendInfo | None
    error: StrataError | None


@dataclass(frozen=True, slots=True)
class FetchRequestPartition:
    topic: str
    partition: int
    offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    topic: str
    partition: int
    error: StrataError | None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    regions: tuple[FileRegion, ...] = ()
    size: int = 0
    # Whole batches read from the object store (offsets below the local log start), as views
    # of the chunk cache's buffers (never joined: the Fetch encoder sends each as a frame
    # part); a partition's data is either ``regions`` (local, sent with sendfile) or this.
    remote: tuple[bytes | memoryview, ...] = ()
    # Replica fetches (cluster mode): the leader's segment base offsets within the batches
    # returned, so the follower's segments begin where the leader's do.
    segment_bases: tuple[int, ...] = ()
    # Offsets the batches returned cover (next - first): the records served, counted from
    # batch headers already parsed (an upper bound where a compacted segment skips offsets).
    record_span: int = 0

    @property
    def records(self) -> tuple[FileRegion, ...] | tuple[bytes | memoryview, ...]:
        """What to put in a Fetch response: the file regions, or the remote bytes."""
        return self.regions if self.regions else self.remote

    def read(self) -> bytes:
        """The batches' bytes (REST, tests)."""
        if self.regions:
            return b"".join(r.read() for r in self.regions)
        return b"".join(self.remote)


class RemoteTier(Protocol):
    """What the broker needs of tiered storage (``tiering.service.TieringService``)."""

    @property
    def reader(self) -> RemoteReader: ...


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    is_default: bool


class Broker:
    """One node's request logic over a LogManager."""

    def __init__(
        self,
        config: BrokerConfig,
        manager: LogManager,
        metrics: BrokerMetrics | None = None,
        *,
        tiering: RemoteTier | None = None,
        groups: GroupCoordinator | None = None,
    ) -> None:
        self.config = config
        self.manager = manager
        self.metrics = metrics or BrokerMetrics()
        self.tiering = tiering
        self.groups = groups  # consumer groups (api.group_handlers); None: not served
        # ACL enforcement (api.security.authz); None: authorization off, everything allowed.
        self.access: AccessControl | None = None
        # SASL / REST basic-auth users (file or, in cluster mode, etcd); None: not needed.
        self.users: UserTable | None = None
        # Byte-rate quotas per user, shared by the Kafka listeners and REST (cluster mode
        # swaps in quotas kept in etcd: cluster.node).
        self.quotas = QuotaManager(
            config.quotas,
            FileQuotaStore(quotas_path(config.data_dir)),
            on_throttle=self.metrics.quota_throttled,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._waiters: dict[int, set[asyncio.Future[None]]] = {}
        self._listening: weakref.WeakSet[Log] = weakref.WeakSet()

    @property
    def node_id(self) -> int:
        return self.config.broker_id

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called on ``loop``'s thread: parked fetches live there."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    # -- topics -------------------------------------------------------------------------

    def topics(self) -> list[TopicInfo]:
        return self.manager.topics()

    def topic(self, name: str, *, auto_create: bool = False) -> TopicInfo:
        try:
            return self.manager.topic(name)
        except UnknownTopicOrPartitionError:
            if not (auto_create and self.config.auto_create_topics):
                raise
        try:
            return self.manager.create_topic(name, self.config.num_partitions, {})
        except StrataError:
            # lost a race with a concurrent creator: fine, it exists now
            return self.manager.topic(name)

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        if partitions == -1:
            partitions = self.config.num_partitions
        if replication_factor not in (-1, 1):
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} exceeds the 1 available broker"
            )
        if validate_only:
            self.manager.registry.validate_create(name, partitions, configs or {})
            return TopicInfo(name, partitions, dict(configs or {}))
        return self.manager.create_topic(name, partitions, configs or {})

    def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool = False
    ) -> TopicInfo:
        """Change a topic's overrides (None removes one). ``replace``: the given set becomes
        the whole set of overrides (AlterConfigs); otherwise only the named keys change."""
        info = self.manager.topic(name)
        merged: dict[str, str] = {} if replace else dict(info.configs)
        for key, value in changes.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        LogConfig.from_kafka(merged, self.manager.defaults)  # validate before touching anything
        if validate_only:
            return info
        return self.manager.alter_topic_configs(name, changes, replace=replace)

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> TopicInfo:
        info = self.manager.topic(name)
        if total <= info.partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {info.partitions} partitions; the new count {total} must be larger"
            )
        if validate_only:
            return info
        return self.manager.add_partitions(name, total)

    def delete_topic(self, name: str) -> None:
        self.manager.delete_topic(name)
        for key in [k for k in self._waiters]:
            self._wake_key(key)

    def replication_factor(self, name: str) -> int:
        """Replicas per partition of the topic (a single node holds the only one)."""
        self.topic(name)
        return 1

    # Awaited forms of the admin calls, what the REST API and the cluster-mode Kafka
    # handlers use: a cluster-mode broker (cluster.broker) changes etcd, not one node.

    async def admin_create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        return self.create_topic(name, partitions, replication_factor, configs, validate_only=validate_only)

    async def auto_create_topic(self, name: str) -> TopicInfo:
        return self.topic(name, auto_create=True)

    async def admin_delete_topic(self, name: str) -> None:
        self.delete_topic(name)

    async def admin_alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool = False
    ) -> TopicInfo:
        return self.alter_topic_configs(name, changes, replace=replace, validate_only=validate_only)

    async def admin_add_partitions(
        self,
        name: str,
        total: int,
        *,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        return self.add_partitions(name, total, validate_only=validate_only)

    def topic_configs(self, name: str) -> list[ConfigEntry]:
        info = self.manager.topic(name)
        effective = self.manager.log_config(name).to_kafka()
        return [ConfigEntry(k, v, k not in info.configs) for k, v in sorted(effective.items())]

    # -- produce ------------------------------------------------------------------------

    async def prepare_group(self, group_id: str) -> None:
        """Make the group's coordinator ready before the REST consumers use it in process
        (cluster.broker creates ``__consumer_offsets``)."""

    def _log(self, topic: str, partition: int) -> Log:
        lg = self.manager.get_log(topic, partition)
        if lg not in self._listening:
            lg.add_hw_listener(self._on_hw_advance)
            self._listening.add(lg)
        return lg

    def append(self, topic: str, partition: int, data: bytes | bytearray | memoryview) -> PendingAppend:
        """Phase one of a produce: validate and append to the page cache, synchronously.

        Callers serving several partitions (a Kafka produce request) append all of them
        before awaiting any, so requests pipelined on one connection keep their order and
        one group commit covers them all.
        """
        try:
            lg = self._log(topic, partition)
            info = lg.append(data)
        except StrataError as exc:
            # Counted by the protocol layer that answers the request (Kafka or REST), once.
            return PendingAppend(topic, None, None, exc)
        self.metrics.produced_messages.labels(topic).inc(info.record_count)
        self.metrics.produced_bytes.labels(topic).inc(len(data))
        return PendingAppend(topic, lg, info, None)

    async def complete(self, pending: PendingAppend, *, acks: int, timeout_ms: int) -> ProduceResult:
        """Phase two: wait until the append is durable per the log's policy (not for acks=0)."""
        if pending.error is not None or pending.log is None or pending.info is None:
            return ProduceResult(pending.error)
        lg, info = pending.log, pending.info
        if acks != 0:
            try:
                fut = asyncio.wrap_future(lg.high_watermark_future(info.last_offset + 1))
                await asyncio.wait_for(fut, timeout=max(timeout_ms, 1) / 1000)
            except TimeoutError:
                error = RequestTimedOutError(f"not durable within {timeout_ms} ms")
                return ProduceResult(error, record_count=info.record_count)
            except StrataError as exc:
                return ProduceResult(exc)
        return ProduceResult(
            None,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=lg.log_start_offset,
            record_count=info.record_count,
        )

    async def produce(
        self, topic: str, partition: int, data: bytes | bytearray | memoryview, *, acks: int, timeout_ms: int
    ) -> ProduceResult:
        if acks not in (-1, 0, 1):
            return ProduceResult(InvalidRequestError(f"acks must be -1, 0 or 1, got {acks}"))
        return await self.complete(self.append(topic, partition, data), acks=acks, timeout_ms=timeout_ms)

    # -- fetch --------------------------------------------------------------------------

    def _on_hw_advance(self, lg: Log) -> None:
        """Wake the fetches parked on ``lg``. Runs on whichever thread moved the high
        watermark: the event loop for an append in interval mode (once per append), the
        group-commit thread after an fsync, a REST worker thread.

        Cheap when nobody waits: a fetch registers its waiter before it reads, so one
        registered after this membership test (a dict lookup, atomic under the GIL)
        reads the data that moved the high watermark anyway. On the loop's own thread
        the waiters are woken in place (no self-pipe write); elsewhere the wake hops
        onto the loop before touching futures."""
        key = id(lg)
        if key not in self._waiters:
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            self._wake_key(key)
            return
        try:
            loop.call_soon_threadsafe(self._wake_key, key)
        except RuntimeError:
            pass  # loop shutting down

    def _wake_key(self, key: int) -> None:
        waiters = self._waiters.pop(key, None)
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    def _remote_bound(self, lg: Log, offset: int) -> int | None:
        """The offset where the local tier starts if ``offset`` must be read remotely, else None."""
        if self.tiering is None:
            return None
        local_start = min(lg.local_log_start_offset, lg.high_watermark)
        if lg.log_start_offset <= offset < local_start:
            return local_start
        return None

    async def _read_remote(
        self, lg: Log, offset: int, max_bytes: int, bound: int, *, min_one: bool
    ) -> RemoteReadResult:
        assert self.tiering is not None
        topic_id = self.manager.topic(lg.topic).topic_id
        return await self.tiering.reader.read(
            lg.topic, topic_id, lg.partition, offset, max_bytes, min_one=min_one, max_offset=bound
        )

    async def _read_all(
        self, parts: Sequence[FetchRequestPartition], max_bytes: int
    ) -> list[FetchedPartition]:
        """Read every partition, filling ``max_bytes`` in request order (whole batches; the
        first partition with data gets at least one batch, KIP-74).

        Partitions whose offset is below the local log start are read from the object
        store first, all at once (one slow GET delays none of the others, and never a
        produce); their results are then cut to the budget left at their turn.
        """
        remote: dict[int, asyncio.Future[RemoteReadResult]] = {}
        if self.tiering is not None:
            for i, p in enumerate(parts):
                try:
                    lg = self._log(p.topic, p.partition)
                except StrataError:
                    continue
                bound = self._remote_bound(lg, p.offset)
                if bound is not None:
                    limit = max(0, min(p.max_bytes, max_bytes))
                    remote[i] = asyncio.ensure_future(
                        self._read_remote(lg, p.offset, limit, bound, min_one=True)
                    )
            if remote:
                try:
                    await asyncio.wait(remote.values())
                except BaseException:
                    for t in remote.values():
                        t.cancel()
                    raise
                for t in remote.values():
                    t.exception()  # retrieved here; raised per partition below
        out: list[FetchedPartition] = []
        budget = max_bytes
        first_with_data = True
        for i, p in enumerate(parts):
            try:
                lg = self._log(p.topic, p.partition)
                limit = max(0, min(p.max_bytes, budget))
                task = remote.get(i)
                if task is not None:
                    fp = self._remote_fetched(p, lg, task.result().truncate(limit, min_one=first_with_data))
                else:
                    try:
                        result = lg.read(p.offset, limit, min_one=first_with_data)
                    except OffsetMovedToTieredStorageError:
                        # local retention removed the segment since the first pass
                        bound = self._remote_bound(lg, p.offset)
                        if bound is None:
                            raise
                        r = await self._read_remote(lg, p.offset, limit, bound, min_one=first_with_data)
                        fp = self._remote_fetched(p, lg, r)
                    else:
                        hw = lg.high_watermark
                        fp = FetchedPartition(
                            p.topic,
                            p.partition,
                            None,
                            high_watermark=hw,
                            last_stable_offset=hw,
                            log_start_offset=lg.log_start_offset,
                            regions=result.regions,
                            size=result.size,
                            record_span=result.next_offset - result.first_offset if result.size else 0,
                        )
            except StrataError as exc:
                fp = FetchedPartition(p.topic, p.partition, exc)
            if fp.size:
                first_with_data = False
                budget -= fp.size
            out.append(fp)
        return out

    @staticmethod
    def _remote_fetched(p: FetchRequestPartition, lg: Log, r: RemoteReadResult) -> FetchedPartition:
        hw = lg.high_watermark
        return FetchedPartition(
            p.topic,
            p.partition,
            None,
            high_watermark=hw,
            last_stable_offset=hw,
            log_start_offset=lg.log_start_offset,
            remote=r.parts,
            size=r.size,
            record_span=r.next_offset - r.first_offset if r.size else 0,
        )

    async def fetch(
        self,
        parts: Sequence[FetchRequestPartition],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
    ) -> list[FetchedPartition]:
        """Read every partition; long-poll until ``min_bytes`` are available or ``max_wait_ms`` passes.

        Waiters are registered before each read, so an append landing between the read
        and the wait still wakes us.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        while True:
            fut: asyncio.Future[None] = loop.create_future()
            keys = []
            for p in parts:
                try:
                    key = id(self._log(p.topic, p.partition))
                except StrataError:
                    continue
                self._waiters.setdefault(key, set()).add(fut)
                keys.append(key)
            try:
                results = await self._read_all(parts, max_bytes)
                total = sum(r.size for r in results)
                remaining = deadline - loop.time()
                if (
                    total >= max(min_bytes, 1)
                    or remaining <= 0
                    or any(r.error is not None for r in results)
                    or not keys
                ):
                    for r in results:
                        if r.size:
                            self.metrics.fetched_bytes.labels(r.topic).inc(r.size)
                            self.metrics.fetched_messages.labels(r.topic).inc(r.record_span)
                    return results
                try:
                    await asyncio.wait_for(fut, timeout=remaining)
                except TimeoutError:
                    pass
            finally:
                for key in keys:
                    waiters = self._waiters.get(key)
                    if waiters is not None:
                        waiters.discard(fut)
                        if not waiters:
                            self._waiters.pop(key, None)

    # -- offsets ------------------------------------------------------------------------

    async def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        """(offset, timestamp) for ListOffsets; (-1, -1) when no record is at or after ``timestamp``.

        EARLIEST is the log start offset of the whole log (remote included). A timestamp
        search covers the remote tier first (its offsets come first), then the local one."""
        lg = self._log(topic, partition)
        if timestamp == EARLIEST_TIMESTAMP:
            return lg.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return lg.high_watermark, -1
        reader = self.tiering.reader if self.tiering is not None else None
        local_start = min(lg.local_log_start_offset, lg.high_watermark)
        remote = reader is not None and lg.log_start_offset < local_start
        topic_id = self.manager.topic(topic).topic_id if remote else None
        if timestamp == MAX_TIMESTAMP:
            # the earliest record carrying the largest timestamp (ListOffsets v7, KIP-734)
            max_ts = max((s.max_timestamp for s in lg.segments()), default=-1)
            if reader is not None and topic_id is not None:
                remote_max = await reader.max_timestamp(topic, topic_id, partition, max_offset=local_start)
                if remote_max >= 0 and remote_max >= max_ts:
                    found = await reader.offset_for_timestamp(
                        topic, topic_id, partition, remote_max, max_offset=local_start
                    )
                    if found is not None:
                        return found
            if max_ts < 0:
                return -1, -1
            found = lg.offset_for_timestamp(max_ts)
            return found if found is not None else (-1, -1)
        if timestamp < 0:
            raise InvalidRequestError(f"invalid ListOffsets timestamp {timestamp}")
        if reader is not None and topic_id is not None:
            found = await reader.offset_for_timestamp(
                topic, topic_id, partition, timestamp, max_offset=local_start
            )
            if found is not None:
                return found
        found = lg.offset_for_timestamp(timestamp)
        if found is None or found[0] >= lg.high_watermark:
            return -1, -1
        return found


def now_ms() -> int:
    return time.time_ns() // 1_000_000
