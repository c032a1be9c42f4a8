"""The broker's share groups: membership on the group's coordinator, share partitions on
the partitions' leaders, share sessions, and the groups' settings.

ShareFetch acquires records through the read path (``ReadPath.fetch``: the hot tail and,
below the local log start, the bucket alike): the share partition says where to read
(its first Available record, else the end of its window), the batches read are walked
header by header (control batches, and in a read_committed group aborted transactions'
batches, are archived and never delivered), the Available records among them are acquired
for the member, and only the batches holding acquired records go back.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from broker.produce_path import ProduceResult
from broker.read_path import FetchRequestPartition, ReadPath
from broker.share.config import (
    ShareBrokerConfig,
    ShareGroupSettings,
    defaults,
    group_config_names,
    settings,
    validate,
)
from broker.share.dead_letters import build_copy, log_skipped, read_records
from broker.share.errors import FencedStateEpochError
from broker.share.membership import HeartbeatResult, ShareGroup
from broker.share.partition import Acquired, Archived, BatchSpan, SharePartition
from broker.share.sessions import ShareSessions
from broker.share.state_store import ShareStateStore, Snapshot
from broker.share.stored_configs import StoredShareConfigs
from hot.batch import parse_header
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedLeaderEpochError,
    InvalidRequestError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotLeaderError,
    OffsetOutOfRangeError,
    StrataError,
    UnknownTopicOrPartitionError,
)
from hot.txn_index import AbortedTxn

Key = tuple[str, str, int]  # group, topic, partition

# Bytes a share partition's read asks for (``_next_hint``): the first one (Kafka's default
# max.partition.fetch.bytes), the least and the most.
FIRST_READ_BYTES = 1 << 20
MIN_READ_BYTES = 64 << 10
MAX_READ_BYTES = 64 << 20


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0


@dataclass(slots=True)
class ShareFetched:
    topic: str
    partition: int
    error: StrataError | None = None
    records: list[bytes] = field(default_factory=list)
    acquired: list[Acquired] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What ``strata groups`` and ShareGroupDescribe show of one share partition."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    in_flight: int
    acquired: int
    lag: int


class ShareService:
    """One broker's share groups (module docstring)."""

    def __init__(
        self,
        reads: ReadPath,
        partition_count: Callable[[str], int],
        *,
        config: ShareBrokerConfig | None = None,
        clock: Callable[[], float] = monotonic_ms,
    ) -> None:
        self.reads = reads
        self.partition_count = partition_count
        self.topic_id: Callable[[str], uuid.UUID | None] = lambda _: None
        self.store: ShareStateStore | None = None
        self._loading: dict[Key, asyncio.Future[SharePartition]] = {}
        self._epochs: dict[Key, int] = {}  # the leader epoch each share partition was loaded in
        # Where the groups' settings persist (broker.share.stored_configs); None: memory only.
        self.stored_configs: StoredShareConfigs | None = None
        self.config = config or ShareBrokerConfig.from_env()
        self.clock = clock
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions = ShareSessions(self.config.max_share_sessions)
        self.group_configs: dict[str, dict[str, str]] = {}
        # The broker's produce path (topic, partition, batch) for dead-letter copies
        # (broker.share.dead_letters); None: not copied.
        self.produce: Callable[[str, int, bytes], Awaitable[ProduceResult]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # How many bytes the next read of each share partition asks for (``_next_hint``).
        self._read_hint: dict[Key, int] = {}
        # The topics each group's members subscribed to here (its coordinator): whose
        # state DeleteGroups tombstones.
        self._subscribed: dict[str, set[str]] = {}

    def attach_store(self, store: ShareStateStore, topic_id: Callable[[str], uuid.UUID | None]) -> None:
        """Persist share partitions on ``__share_group_state`` (broker.share.state_store)."""
        self.store, self.topic_id = store, topic_id
        store.start()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    # -- settings ------------------------------------------------------------------------

    def settings(self, group_id: str) -> ShareGroupSettings:
        return settings(self.config, self.group_configs.get(group_id, {}))

    def describe_configs(self, group_id: str) -> dict[str, tuple[str, bool]]:
        """Name -> (value, is_default) of every share setting of the group."""
        own = self.group_configs.get(group_id, {})
        base = defaults(self.config)
        return {n: (own.get(n, base[n]), n not in own) for n in group_config_names()}

    async def refresh_configs(self) -> None:
        """Re-read the groups' settings from the metadata store when the cache is stale."""
        stored = self.stored_configs
        if stored is not None and stored.stale():
            self._apply_configs(await stored.load())

    def _apply_configs(self, configs: dict[str, dict[str, str]]) -> None:
        changed = {
            g for g in set(configs) | set(self.group_configs) if configs.get(g) != self.group_configs.get(g)
        }
        self.group_configs = configs
        for group_id in changed:
            s = self.settings(group_id)
            for (g, _, _), sp in self.partitions.items():
                if g == group_id:
                    sp.lock_ms, sp.delivery_limit = s.lock_ms, s.delivery_limit
            group = self.groups.get(group_id)
            if group is not None:
                group.session_timeout_ms = s.session_timeout_ms
                group.heartbeat_interval_ms = s.heartbeat_interval_ms

    async def alter_configs(
        self, group_id: str, changes: dict[str, str | None], *, validate_only: bool
    ) -> None:
        await self.refresh_configs()
        own = dict(self.group_configs.get(group_id, {}))
        for name, value in changes.items():
            if value is None:
                own.pop(name, None)
                if name not in group_config_names():
                    validate(self.config, name, "")
            else:
                own[name] = validate(self.config, name, value)
        if validate_only:
            return
        if self.stored_configs is not None:
            self._apply_configs(await self.stored_configs.put(group_id, own))
        else:
            self._apply_configs({**self.group_configs, group_id: own})

    # -- membership ----------------------------------------------------------------------

    def group(self, group_id: str) -> ShareGroup:
        g = self.groups.get(group_id)
        if g is None:
            s = self.settings(group_id)
            g = ShareGroup(
                group_id,
                self.clock,
                session_timeout_ms=s.session_timeout_ms,
                heartbeat_interval_ms=s.heartbeat_interval_ms,
                max_size=self.config.max_size,
            )
            self.groups[group_id] = g
        return g

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed: Sequence[str] | None,
        *,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        group = self.group(group_id)
        if subscribed:
            self._subscribed.setdefault(group_id, set()).update(subscribed)
        before = set(group.members)
        result = group.heartbeat(
            member_id,
            member_epoch,
            subscribed,
            self.partition_count,
            rack_id=rack_id,
            client_id=client_id,
            client_host=client_host,
        )
        for gone in before - set(group.members):
            self.member_gone(group_id, gone)
        return result

    def member_gone(self, group_id: str, member_id: str) -> None:
        """A member left or was expired: its session ends and its records go back."""
        self.sessions.close(group_id, member_id)
        for (g, _, _), sp in self.partitions.items():
            if g == group_id:
                sp.release_member(member_id)

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups of an empty share group: its state on ``__share_group_state``
        tombstoned (every partition of every topic it subscribed to or holds state for
        here), so a group of the same name starts afresh per ``share.auto.offset.reset``."""
        group = self.groups.get(group_id)
        if group is not None and group.members:
            raise NonEmptyGroupError(f"share group {group_id} has members")
        topics = self._subscribed.get(group_id, set()) | {t for g, t, _ in self.partitions if g == group_id}
        for topic in sorted(topics):
            for partition in range(max(0, self.partition_count(topic))):
                await self.delete_state(group_id, topic, partition)
        for key in [k for k in self.partitions if k[0] == group_id]:
            self._drop_local(key)
        self.groups.pop(group_id, None)
        self._subscribed.pop(group_id, None)

    def check_empty(self, group_id: str) -> None:
        """NON_EMPTY_GROUP while the share group has members (offsets can't change then)."""
        self.expire()
        group = self.groups.get(group_id)
        if group is not None and group.members:
            raise NonEmptyGroupError(f"share group {group_id} has members: its offsets can't change")

    def _drop_local(self, key: Key) -> None:
        """Forget this broker's copy of a share partition: the next fetch loads the state
        the share coordinator has."""
        self.partitions.pop(key, None)
        self._epochs.pop(key, None)
        self._read_hint.pop(key, None)

    async def alter_start(self, group_id: str, topic: str, partition: int, offset: int) -> None:
        """AlterShareGroupOffsets of one partition (the caller checked the group is empty):
        the start offset persisted with nothing in flight and the next state epoch, as
        Kafka's share coordinator initializes it; the group exists from then on."""
        if offset < 0:
            raise InvalidRequestError(f"start offset {offset} of {topic}-{partition} is negative")
        key = (group_id, topic, partition)
        self.group(group_id)
        tid = self.topic_id(topic)
        if self.store is None or tid is None:
            sp = self.partitions.get(key)
            if sp is not None:
                sp.runs.clear()
                sp.start = sp.end = offset
            return
        found = await self.store.read(group_id, tid, partition)
        epoch = max(found.state_epoch if found is not None else 0, self._local_epoch(key)) + 1
        await self.store.write(group_id, tid, partition, Snapshot(epoch, offset, ()))
        self._drop_local(key)

    async def delete_state(self, group_id: str, topic: str, partition: int) -> None:
        """Tombstone one share partition's persisted state (DeleteShareGroupOffsets,
        DeleteGroups): the group starts it again where ``share.auto.offset.reset`` says."""
        key = (group_id, topic, partition)
        tid = self.topic_id(topic)
        if self.store is not None and tid is not None:
            await self.store.delete(group_id, tid, partition)
        self._drop_local(key)

    def _local_epoch(self, key: Key) -> int:
        sp = self.partitions.get(key)
        return -1 if sp is None else sp.state_epoch

    def expire(self) -> None:
        for gid, group in self.groups.items():
            for gone in group.expire_members():
                self.member_gone(gid, gone)

    # -- share partitions ----------------------------------------------------------------

    async def share_partition(self, group_id: str, topic: str, partition: int) -> SharePartition:
        """The share partition, loaded from ``__share_group_state`` the first time this
        broker serves it in the partition's current leader epoch (else started where
        ``share.auto.offset.reset`` says): a leader that lost the partition and got it back
        reloads, since another leader may have changed the state meanwhile."""
        key = (group_id, topic, partition)
        epoch = self._leader_epoch(topic, partition)
        sp = self.partitions.get(key)
        if sp is not None and self._epochs.get(key) == epoch:
            return sp
        if sp is not None:
            del self.partitions[key]
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        fut: asyncio.Future[SharePartition] = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            sp = await self._load(group_id, topic, partition, epoch)
            self.partitions[key] = sp
            self._epochs[key] = epoch
            fut.set_result(sp)
            return sp
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: a waiter may not exist
            raise
        finally:
            self._loading.pop(key, None)

    def _leader_epoch(self, topic: str, partition: int) -> int:
        try:
            return self.reads.replicas.leader_replica(topic, partition).leader_epoch
        except StrataError:
            return -1

    async def _load(self, group_id: str, topic: str, partition: int, leader_epoch: int) -> SharePartition:
        s = self.settings(group_id)
        lg = self.reads.log(topic, partition)
        sp = SharePartition(
            start=lg.log_start_offset if s.auto_offset_reset == "earliest" else lg.high_watermark,
            clock=self.clock,
            lock_ms=s.lock_ms,
            delivery_limit=s.delivery_limit,
            max_in_flight=self.config.partition_max_record_locks,
        )
        tid = self.topic_id(topic)
        if self.store is None or tid is None:
            return sp
        # In this leader epoch: from now on the share coordinator fences an older leader's
        # writes (FENCED_LEADER_EPOCH), one that has not noticed it lost the partition.
        found = await self.store.read(group_id, tid, partition, leader_epoch=leader_epoch)
        if found is not None:
            sp.state_epoch = found.state_epoch + 1
            sp.restore(max(found.start, lg.log_start_offset), found.batches)
        return sp

    async def persist(self, group_id: str, topic: str, partition: int) -> None:
        """Write the share partition's state (acks=all) before acknowledgements are
        answered: an accepted record is never delivered again, even after a failover."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        tid = self.topic_id(topic)
        if self.store is None or sp is None or tid is None:
            return
        try:
            await self.store.write(group_id, tid, partition, self._snapshot(key, sp))
        except (FencedStateEpochError, FencedLeaderEpochError):
            self._fenced(key, sp)
            raise

    def persist_now(self, group_id: str, topic: str, partition: int) -> asyncio.Future[None]:
        """``persist`` begun at once: where this broker is the share coordinator the state
        is appended before this returns, so the flush round at the end of this loop
        iteration makes it durable while the caller goes on (a ShareFetch's fetch); else
        (and when that append is not acknowledged: the coordinator moved) ``persist``."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        tid = self.topic_id(topic)
        if self.store is None or sp is None or tid is None:
            return asyncio.ensure_future(self.persist(group_id, topic, partition))
        try:
            fut = self.store.write_now(group_id, tid, partition, self._snapshot(key, sp))
        except (FencedStateEpochError, FencedLeaderEpochError) as exc:
            self._fenced(key, sp)
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed
        if fut is None:
            return asyncio.ensure_future(self.persist(group_id, topic, partition))
        return asyncio.ensure_future(self._acknowledged(fut, group_id, topic, partition))

    async def _acknowledged(
        self, fut: asyncio.Future[None], group_id: str, topic: str, partition: int
    ) -> None:
        try:
            await fut
        except (NotCoordinatorError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError):
            # The state partition moved before the append was acknowledged: written again
            # (the current state) the long way, following the coordinator.
            await self.persist(group_id, topic, partition)

    def _snapshot(self, key: Key, sp: SharePartition) -> Snapshot:
        return Snapshot(sp.state_epoch, sp.start, tuple(sp.snapshot()), self._epochs.get(key, -1))

    def _fenced(self, key: Key, sp: SharePartition) -> None:
        """Altered by an administrator, or taken over by a newer leader of the partition:
        the next fetch loads the state the share coordinator has."""
        if self.partitions.get(key) is sp:
            self._drop_local(key)

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        partition: int,
        batches: Iterable[tuple[int, int, Sequence[int]]],
    ) -> None:
        """Apply one partition's acknowledgement batches (first, last, types) in order; the
        first error stops the rest and is raised. Persisted before returning."""
        try:
            error = await self.apply_acks(group_id, member_id, topic, partition, batches)
        finally:
            await self.persist(group_id, topic, partition)
        if error is not None:
            raise error

    async def apply_acks(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        partition: int,
        batches: Iterable[tuple[int, int, Sequence[int]]],
    ) -> StrataError | None:
        """Apply one partition's acknowledgement batches in memory, in order; the first
        error stops the rest and is returned. The caller persists (``persist``) before it
        answers, error or not (the batches before the error were applied): a ShareFetch
        persists its partitions' acknowledgements together, while it fetches, as Kafka's
        broker does. Raises when the share partition can't be loaded (nothing changed)."""
        sp = await self.share_partition(group_id, topic, partition)
        try:
            for first, last, types in batches:
                sp.acknowledge(member_id, first, last, types)
        except StrataError as exc:
            return exc
        finally:
            self._drain(group_id, topic, partition, sp)
        return None

    def release(self, group_id: str, member_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        for topic, partition in partitions:
            sp = self.partitions.get((group_id, topic, partition))
            if sp is not None:
                sp.release_member(member_id)
                self._drain(group_id, topic, partition, sp)

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        partitions: Sequence[tuple[str, int]],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        max_records: int,
    ) -> list[ShareFetched]:
        """Acquire records of ``partitions`` for the member (module docstring)."""
        await self.refresh_configs()
        s = self.settings(group_id)
        out: dict[tuple[str, int], ShareFetched] = {}
        reads: list[FetchRequestPartition] = []
        for topic, partition in partitions:
            try:
                self.reads.replicas.leader_replica(topic, partition)
                sp = await self.share_partition(group_id, topic, partition)
            except StrataError as exc:
                out[(topic, partition)] = ShareFetched(topic, partition, exc)
                continue
            out[(topic, partition)] = ShareFetched(topic, partition)
            lg = self.reads.log(topic, partition)
            if sp.start < lg.log_start_offset:
                sp.move_start(lg.log_start_offset)
            offset = sp.next_fetch_offset()
            if offset is not None:
                hint = self._read_hint.get((group_id, topic, partition), FIRST_READ_BYTES)
                reads.append(FetchRequestPartition(topic, partition, offset, min(max_bytes, hint)))
        if not reads:
            return list(out.values())
        fetched = await self.reads.fetch(
            reads,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            read_committed=s.read_committed,
        )
        budget = max(1, max_records)
        for req, f in zip(reads, fetched, strict=True):
            answer = out[(f.topic, f.partition)]
            current = self.partitions.get((group_id, f.topic, f.partition))
            if current is None:
                continue  # the group was deleted while the read waited
            sp = current
            if f.error is not None:
                if isinstance(f.error, OffsetOutOfRangeError) and f.log_start_offset > sp.start:
                    sp.move_start(f.log_start_offset)
                    continue
                answer.error = f.error
                continue
            data = f.read()
            spans, positions = _spans(data, f.aborted if s.read_committed else None)
            self._read_hint[(group_id, f.topic, f.partition)] = _next_hint(
                req, f.high_watermark, len(data), positions, max_records
            )
            # The read went where the partition said; another fetch may have acquired in the
            # meantime, which ``acquire`` sees (it only takes Available records).
            got = sp.acquire(member_id, req.offset, spans, budget)
            if not got:
                continue
            budget = max(1, budget - sum(a.last - a.first + 1 for a in got))
            answer.acquired = got
            answer.records = _batches_with(data, positions, got)
            self._drain(group_id, f.topic, f.partition, sp)
        return list(out.values())

    def known(self, group_id: str) -> bool:
        return group_id in self.groups or any(g == group_id for g, _, _ in self.partitions)

    def group_partitions(self, group_id: str) -> list[tuple[str, int]]:
        """The topic-partitions a group has (or may have) state for: its members'
        subscriptions, and the share partitions it has on this broker."""
        out = {(t, p) for g, t, p in self.partitions if g == group_id}
        group = self.groups.get(group_id)
        if group is not None:
            out |= {(t, p) for t in group.subscribed_topics() for p in range(self.partition_count(t))}
        return sorted(out)

    async def start_offset(self, group_id: str, topic: str, partition: int) -> int:
        """The share-partition start offset (-1: no state yet): this broker's share
        partition when it serves it, else the share coordinator's persisted state."""
        sp = self.partitions.get((group_id, topic, partition))
        if sp is not None:
            return sp.start
        tid = self.topic_id(topic)
        if self.store is None or tid is None:
            return -1
        snap = await self.store.read(group_id, tid, partition)
        return -1 if snap is None else snap.start

    def views(self, group_id: str) -> list[PartitionView]:
        out = []
        for (g, topic, partition), sp in sorted(self.partitions.items()):
            if g != group_id:
                continue
            sp.expire_locks()
            try:
                hw = self.reads.log(topic, partition).high_watermark
            except StrataError:
                hw = sp.end
            out.append(
                PartitionView(
                    topic, partition, sp.start, sp.end, sp.in_flight, sp.acquired, max(0, hw - sp.start)
                )
            )
        return out

    def _drain(self, group_id: str, topic: str, partition: int, sp: SharePartition) -> None:
        archived = sp.drain_archived()
        dlq = self.settings(group_id).dlq_topic
        if archived and dlq and self.produce is not None:
            task = asyncio.get_running_loop().create_task(
                self._dead_letter(group_id, topic, partition, archived, dlq), name=f"share-dlq-{group_id}"
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _dead_letter(
        self, group_id: str, topic: str, partition: int, archived: list[Archived], dlq: str
    ) -> None:
        """Copy archived records to the group's dead-letter topic (broker.share.dead_letters)."""
        assert self.produce is not None
        try:
            n = self.partition_count(dlq)
            if n <= 0:
                raise UnknownTopicOrPartitionError(f"no topic {dlq}")
            led = [p for p in range(n) if self._leads(dlq, p)]
            if not led:
                raise NotLeaderError(f"this broker leads no partition of {dlq}")
            target = partition % n if partition % n in led else led[0]
            records = await read_records(self.reads, topic, partition, archived)
            if not records:
                return
            result = await self.produce(dlq, target, build_copy(records))
            if result.error is not None:
                raise result.error
        except StrataError as exc:
            log_skipped(group_id, dlq, exc, len(archived))

    def _leads(self, topic: str, partition: int) -> bool:
        try:
            self.reads.replicas.leader_replica(topic, partition)
        except StrataError:
            return False
        return True


def _next_hint(
    req: FetchRequestPartition,
    high_watermark: int,
    got: int,
    positions: list[tuple[int, int, int, int]],
    max_records: int,
) -> int:
    """The bytes to read next time from a share partition: about ``max_records`` records
    at the sizes just read (and at least its largest batch, read whole), since only that
    many are acquired; reading up to the request's MaxBytes (librdkafka asks 50 MiB) each
    time would read the whole log to hand out one batch per partition. Twice the last
    limit when nothing whole fit though the log had more."""
    if not positions:
        if high_watermark > req.offset and got == 0:
            return min(req.max_bytes * 2, MAX_READ_BYTES)
        return req.max_bytes
    records = positions[-1][1] - positions[0][0] + 1
    per_record = got / max(1, records)
    largest = max(size for _, _, _, size in positions)
    return min(MAX_READ_BYTES, max(MIN_READ_BYTES, largest, int(per_record * max_records * 1.25)))


def _spans(
    data: bytes, aborted: Sequence[AbortedTxn] | None
) -> tuple[list[BatchSpan], list[tuple[int, int, int, int]]]:
    """The batches' offset spans (skipped: control batches, aborted transactions' batches
    when ``aborted`` is given) and their (first, last, position, size) in ``data``."""
    spans: list[BatchSpan] = []
    positions: list[tuple[int, int, int, int]] = []
    pos = 0
    while pos + 61 <= len(data):
        h = parse_header(data, pos)
        if pos + h.size > len(data):
            break
        skip = h.is_control
        if not skip and aborted and h.is_transactional:
            skip = any(
                a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset
                for a in aborted
            )
        spans.append(BatchSpan(h.base_offset, h.last_offset, skip))
        positions.append((h.base_offset, h.last_offset, pos, h.size))
        pos += h.size
    return spans, positions


def _batches_with(
    data: bytes, positions: list[tuple[int, int, int, int]], got: list[Acquired]
) -> list[bytes]:
    """The batches holding at least one acquired record, in log order."""
    out: list[bytes] = []
    for first, last, pos, size in positions:
        if any(a.first <= last and first <= a.last for a in got):
            out.append(data[pos : pos + size])
    return out
