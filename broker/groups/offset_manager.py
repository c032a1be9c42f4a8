"""Committed offsets of the groups this node coordinates (Kafka's OffsetMetadataManager).

OffsetCommit, OffsetFetch and OffsetDelete, loading the groups the offsets log holds,
expiring committed offsets, and every write the group state machine needs persisted
(the group's metadata after a join phase, its tombstone when it is forgotten). The
bytes live in an ``OffsetStore`` (broker.groups.offsets: the compacted offsets log on a
single node, the replicated ``__consumer_offsets`` topic in cluster mode).

* Commits are checked against the member and generation; generation -1 commits
  ("simple" consumers, admin tools) are accepted while the group is Empty.
* Offsets of an Empty group expire ``offsets.retention.minutes`` after it became Empty
  (KIP-211), those of a simple group that long after their commit, those of a Stable
  consumer group only for topics it no longer subscribes to; an explicit retention time
  of the commit (OffsetCommit v2-v4) wins.
* Transactional commits (TxnOffsetCommit, KIP-98/447) are checked as Kafka's
  ClassicGroup.validateOffsetCommit does for them: generation -1 on an Empty (or new)
  group, or no member id at all, is accepted (pre-KIP-447 producers send no group
  metadata); otherwise the member (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and the
  generation (ILLEGAL_GENERATION) must match, a rebalance in progress does not refuse
  them. They are written as the producer's transactional batch and held pending until
  its marker (broker.groups.txn_offsets); a partition with pending offsets does not
  expire, and a group with only pending offsets is not dropped.

Crash behaviour: a commit, OffsetDelete or DeleteGroups is acknowledged only once the
store says it is durable (at most ``offsets.commit.timeout.ms``, else REQUEST_TIMED_OUT
and the client retries), so nothing acknowledged is lost. Group metadata, offset
expiry and topic-deletion tombstones are written in the background (failures logged): a
crash before one is durable loses only that write. The log, replayed by the store when
it is opened and taken over by ``load_groups``, then has the previous metadata, or the
offsets the write would have removed: expired ones expire again at the first check
after the restart; a deleted topic's stay until they expire like any other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence

from broker.groups.config import GroupConfig
from broker.groups.group import Completing, Dead, Empty, Group, Member, Stable
from broker.groups.membership import GroupMembership
from broker.groups.offsets import OffsetStore, TransactionalOffsetStore
from broker.groups.timers import Clock, Timer, Timers
from broker.groups.types import (
    UNKNOWN_MEMBER_ID,
    OffsetAndMetadata,
    OffsetCommitRequest,
    StoredGroup,
    TopicPartition,
    TxnOffsetCommitRequest,
)
from hot.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    RequestTimedOutError,
    StrataError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from kwire.consumer_protocol import PROTOCOL_TYPE

logger = logging.getLogger("strata.groups")

# (topic, partition) -> does it exist? OffsetCommit/OffsetDelete of others is refused.
PartitionCheck = Callable[[str, int], bool]


class OffsetManager:
    """Offsets and persistence of the groups in ``membership`` (rules: module docstring).
    ``store`` is None until ``load`` hands it the opened store. All on the event loop."""

    def __init__(
        self,
        config: GroupConfig,
        membership: GroupMembership,
        timers: Timers,
        clock: Clock,
        partition_exists: PartitionCheck,
    ) -> None:
        self.config = config
        self._membership = membership
        self._timers = timers
        self._clock = clock
        self._partition_exists = partition_exists
        self.store: OffsetStore | None = None
        self.closing = False
        self._expiry_timer: Timer | None = None
        self._background_writes: set[asyncio.Future[None]] = set()
        # The topics a KIP-848 consumer group with members subscribes to (None: no such
        # group): their offsets do not expire, as a Stable classic group's.
        self.consumer_topics: Callable[[str], set[str] | None] = lambda group_id: None

    # --- loading ------------------------------------------------------------------------------

    def load(self, store: OffsetStore) -> None:
        """Start serving from ``store`` (opened, its log replayed): take over every group it
        holds and start the periodic offset expiry."""
        self.store = store
        self.load_groups(store.groups())
        self._schedule_expiry()

    def load_groups(self, group_ids: Iterable[str]) -> None:
        """Take over the groups the store now holds under ``group_ids`` as Empty (start-up;
        in cluster mode, when this broker becomes leader of their offsets partition).
        Groups already known here are left alone."""
        store = self.store
        if store is None:
            return
        now_ms = self._clock.time_ms()
        for gid in sorted(group_ids):
            if gid in self._membership.groups:
                continue
            g = Group(gid, now_ms)
            meta = store.group_metadata(gid)
            if meta is not None:
                g.protocol_type = meta.protocol_type or None
                g.generation = meta.generation_id
                # Stored while Empty: it has been Empty since then. Stored while it had
                # members: they are gone (not persisted), so it is Empty from now on.
                if meta.protocol_name is None and meta.state_timestamp_ms >= 0:
                    g.state_timestamp_ms = meta.state_timestamp_ms
            else:
                g.state_timestamp_ms = -1  # offsets only: they expire by commit time
            self._membership.adopt(g)

    def close(self) -> None:
        """Close the store (writes already appended are flushed first)."""
        self.closing = True
        if self.store is not None:
            self.store.close()

    def _loaded(self) -> OffsetStore:
        if self.store is None:
            raise CoordinatorLoadInProgressError("the group coordinator is loading")
        return self.store

    # --- writes for the state machine (GroupPersistence) ------------------------------------------

    def background(self, fut: asyncio.Future[None], what: str) -> None:
        """Keep a write nobody waits for, and log its failure."""
        self._background_writes.add(fut)

        def done(f: asyncio.Future[None]) -> None:
            self._background_writes.discard(f)
            if not f.cancelled() and f.exception() is not None:
                logger.error("%s failed: %s", what, f.exception())

        fut.add_done_callback(done)

    def store_group(self, group: Group) -> None:
        """Persist the group's generation, protocol and leader, in the background."""
        store = self.store
        if store is None or group.protocol_type is None:
            return
        value = StoredGroup(
            group.protocol_type,
            group.generation,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp_ms,
        )
        try:
            self.background(store.store_group(group.group_id, value), f"storing group {group.group_id}")
        except StrataError as e:
            logger.error("cannot store group %s: %s", group.group_id, e)

    def maybe_drop(self, group: Group) -> None:
        """Forget an Empty group that has nothing left (and tombstone its metadata)."""
        store = self.store
        if (
            store is None
            or not self._membership.current(group)
            or group.state is not Empty
            or group.members
            or group.pending
            or store.has_offsets(group.group_id)
        ):
            return
        self._membership.drop(group)
        try:
            self.background(store.delete_group(group.group_id), f"deleting group {group.group_id}")
        except StrataError as e:
            logger.error("cannot delete group %s: %s", group.group_id, e)

    # --- OffsetCommit, OffsetFetch, OffsetDelete ---------------------------------------------------

    async def commit_offsets(
        self, req: OffsetCommitRequest, *, member_checked: bool = False
    ) -> dict[TopicPartition, StrataError | None]:
        """Commit offsets; returns each partition's outcome once the valid ones are durable.
        Raises for request-level failures (unknown member, illegal generation, rebalance
        in progress, coordinator not available), which apply to every partition.
        ``member_checked``: a KIP-848 consumer group checked the member and its epoch
        (broker.groups.consumer_group); the classic group is only the offsets' holder."""
        store = self._loaded()
        group = self._membership.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0 and not member_checked:
                raise IllegalGenerationError(f"group {req.group_id!r} does not exist")
            group = self._membership.new_group(req.group_id)
        member: Member | None = None
        if member_checked:
            pass
        elif (
            req.generation_id >= 0 or req.member_id != UNKNOWN_MEMBER_ID or req.group_instance_id is not None
        ):
            member = self._membership.validate_member(group, req.member_id, req.group_instance_id)
            if req.generation_id != group.generation:
                raise IllegalGenerationError(
                    f"generation {req.generation_id} is not group {group.group_id!r}'s {group.generation}"
                )
        elif group.state is not Empty:
            raise UnknownMemberIdError(
                f"group {group.group_id!r} has members: commits without a member id and generation "
                "are accepted only while it is empty"
            )
        if group.state is Completing:
            raise RebalanceInProgressError(f"group {group.group_id!r} is completing a rebalance")
        if member is not None:
            self._membership.touch(group, member)
        now = self._clock.time_ms()
        expire = now + req.retention_time_ms if req.retention_time_ms >= 0 else None
        results: dict[TopicPartition, StrataError | None] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, offset, epoch, metadata in req.offsets:
            md = metadata or ""
            if len(md) > limit:
                results[tp] = OffsetMetadataTooLargeError(
                    f"metadata of {len(md)} characters exceeds offset.metadata.max.bytes={limit}"
                )
            elif not self._partition_exists(tp.topic, tp.partition):
                results[tp] = UnknownTopicOrPartitionError(f"unknown partition {tp.topic}-{tp.partition}")
            else:
                valid[tp] = OffsetAndMetadata(offset, epoch, md, now, expire)
                results[tp] = None
        if valid:
            error = await self._durable(lambda: store.commit(group.group_id, valid), "commit")
            if error is not None:
                for tp in valid:
                    results[tp] = error
        return results

    async def commit_transactional_offsets(
        self, req: TxnOffsetCommitRequest
    ) -> dict[TopicPartition, StrataError | None]:
        """TxnOffsetCommit: each partition's outcome once the valid offsets are durable
        as the producer's pending transactional offsets: UNKNOWN_TOPIC_OR_PARTITION
        first, then the group's refusal (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
        FENCED_INSTANCE_ID) on every other partition, then OFFSET_METADATA_TOO_LARGE."""
        store = self._loaded()
        if not isinstance(store, TransactionalOffsetStore):
            raise CoordinatorNotAvailableError("this offset store keeps no transactional offsets")
        results: dict[TopicPartition, StrataError | None] = {}
        # Unknown partitions are answered first, whatever the group says (Kafka filters
        # them in KafkaApis before the coordinator sees the request).
        known = []
        for entry in req.offsets:
            tp = entry[0]
            if self._partition_exists(tp.topic, tp.partition):
                known.append(entry)
            else:
                results[tp] = UnknownTopicOrPartitionError(f"unknown partition {tp.topic}-{tp.partition}")
        try:
            group = self._txn_group(req)
        except StrataError as e:
            results.update((entry[0], e) for entry in known)
            return results
        now = self._clock.time_ms()
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, offset, epoch, metadata in known:
            md = metadata or ""
            if len(md) > limit:
                results[tp] = OffsetMetadataTooLargeError(
                    f"metadata of {len(md)} characters exceeds offset.metadata.max.bytes={limit}"
                )
            else:
                valid[tp] = OffsetAndMetadata(offset, epoch, md, now, None)
                results[tp] = None
        if valid:
            producer = (req.producer_id, req.producer_epoch)
            error = await self._durable(
                lambda: store.commit_transactional(group.group_id, producer, valid), "transactional commit"
            )
            if error is not None:
                for tp in valid:
                    results[tp] = error
        return results

    def _txn_group(self, req: TxnOffsetCommitRequest) -> Group:
        """The group a TxnOffsetCommit writes to, checked as Kafka's
        ClassicGroup.validateOffsetCommit checks a transactional commit."""
        group = self._membership.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                raise IllegalGenerationError(f"group {req.group_id!r} does not exist")
            group = self._membership.new_group(req.group_id)
        if group.state is Dead:
            raise CoordinatorNotAvailableError(f"group {req.group_id!r} is being removed")
        if req.generation_id < 0 and group.state is Empty:
            return group  # a simple group, or a producer without the consumer's group metadata
        if req.generation_id >= 0 or req.member_id != UNKNOWN_MEMBER_ID or req.group_instance_id is not None:
            self._membership.validate_member(group, req.member_id, req.group_instance_id)
            if req.generation_id != group.generation:
                raise IllegalGenerationError(
                    f"generation {req.generation_id} is not group {group.group_id!r}'s {group.generation}"
                )
        return group

    def pending_transactional(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions whose transactional offsets await their marker."""
        store = self._loaded()
        if not isinstance(store, TransactionalOffsetStore):
            return set()
        return set(store.pending_transactional(group_id))

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A producer's marker in offsets partition ``partition`` was acknowledged."""
        store = self._loaded()
        if not isinstance(store, TransactionalOffsetStore):
            raise CoordinatorNotAvailableError("this offset store keeps no transactional offsets")
        store.complete_txn(partition, producer_id, commit)

    async def _durable(self, write: Callable[[], asyncio.Future[None]], what: str) -> StrataError | None:
        """Run a store write and wait (at most offsets.commit.timeout.ms) until it is
        durable; the error to report, if any."""
        try:
            fut = write()
        except StrataError as e:
            return e
        return await self.wait_durable(fut, what)

    async def wait_durable(self, fut: asyncio.Future[None], what: str) -> StrataError | None:
        timeout = self.config.offsets_commit_timeout_ms / 1000.0
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            return RequestTimedOutError(
                f"{what} not durable within offsets.commit.timeout.ms={self.config.offsets_commit_timeout_ms}"
            )
        except StrataError as e:
            return e
        return None

    def committed_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's durable committed offsets: all of them, or those of ``partitions``
        that have one (OffsetFetch; an unknown group has none)."""
        store = self._loaded()
        offsets = store.committed(group_id)
        if partitions is None:
            return offsets
        return {tp: offsets[tp] for tp in partitions if tp in offsets}

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, StrataError | None]:
        """OffsetDelete: every partition of an Empty group; of a consumer group with
        members, those of topics no member subscribes to (others get
        GROUP_SUBSCRIBED_TO_TOPIC). Raises GroupIdNotFoundError, NonEmptyGroupError."""
        store = self._loaded()
        group = self._membership.groups.get(group_id)
        if group is None or group.state is Dead:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        subscribed: set[str] | None = None
        if group.state is not Empty:
            if group.protocol_type != PROTOCOL_TYPE:
                raise NonEmptyGroupError(
                    f"group {group_id!r} has members and protocol type {group.protocol_type!r}; "
                    "its offsets can be deleted only when it is empty"
                )
            subscribed = group.subscribed_topics()
        results: dict[TopicPartition, StrataError | None] = {}
        eligible: list[TopicPartition] = []
        for tp in partitions:
            if not self._partition_exists(tp.topic, tp.partition):
                results[tp] = UnknownTopicOrPartitionError(f"unknown partition {tp.topic}-{tp.partition}")
            elif group.state is not Empty and (subscribed is None or tp.topic in subscribed):
                results[tp] = GroupSubscribedToTopicError(
                    f"a member of group {group_id!r} subscribes to topic {tp.topic!r}"
                )
            else:
                eligible.append(tp)
                results[tp] = None
        if eligible:
            error = await self._durable(lambda: store.delete_offsets(group_id, eligible), "offset deletion")
            if error is not None:
                for tp in eligible:
                    results[tp] = error
        self.maybe_drop(group)
        return results

    # --- housekeeping --------------------------------------------------------------------------

    def _schedule_expiry(self) -> None:
        def run() -> None:
            try:
                self.expire_offsets()
            finally:
                if not self.closing:
                    self._schedule_expiry()

        self._expiry_timer = self._timers.call_later(self.config.offsets_retention_check_interval_ms, run)

    def expire_offsets(self) -> int:
        """Delete expired offsets (rules: module docstring) and forget Empty groups left
        with nothing; returns how many offsets were deleted."""
        store = self.store
        if store is None or self.closing:
            return 0
        now = self._clock.time_ms()
        retention = self.config.offsets_retention_ms

        def expired(o: OffsetAndMetadata, base_ms: int) -> bool:
            if o.expire_timestamp_ms is not None:
                return now >= o.expire_timestamp_ms
            return now - base_ms >= retention

        removed = 0
        for group in list(self._membership.groups.values()):
            offsets = store.committed(group.group_id)
            doomed: list[TopicPartition] = []
            consumer_topics = self.consumer_topics(group.group_id)
            if consumer_topics is not None:
                doomed = [
                    tp
                    for tp, o in offsets.items()
                    if tp.topic not in consumer_topics and expired(o, o.commit_timestamp_ms)
                ]
            elif group.protocol_type is not None and group.state is Empty:
                for tp, o in offsets.items():
                    base = (
                        group.state_timestamp_ms if group.state_timestamp_ms >= 0 else o.commit_timestamp_ms
                    )
                    if expired(o, base):
                        doomed.append(tp)
            elif group.protocol_type == PROTOCOL_TYPE and group.state is Stable:
                subscribed = group.subscribed_topics()
                if subscribed is not None:
                    doomed = [
                        tp
                        for tp, o in offsets.items()
                        if tp.topic not in subscribed and expired(o, o.commit_timestamp_ms)
                    ]
            elif group.protocol_type is None:
                doomed = [tp for tp, o in offsets.items() if expired(o, o.commit_timestamp_ms)]
            if doomed and isinstance(store, TransactionalOffsetStore):
                # Kafka keeps an offset whose partition has a transactional commit pending.
                pending = store.pending_transactional(group.group_id)
                doomed = [tp for tp in doomed if tp not in pending]
            if doomed:
                logger.info("group %s: %d committed offsets expired", group.group_id, len(doomed))
                try:
                    self.background(
                        store.delete_offsets(group.group_id, doomed), f"expiring offsets of {group.group_id}"
                    )
                    removed += len(doomed)
                except StrataError as e:
                    logger.error("cannot expire offsets of group %s: %s", group.group_id, e)
            self.maybe_drop(group)
        return removed

    def on_topic_deleted(self, topic: str) -> None:
        """A topic was deleted: delete every group's offsets of it, as Kafka does."""
        store = self.store
        if store is None or self.closing:
            return
        try:
            self.background(store.delete_topic(topic), f"deleting offsets of topic {topic}")
        except StrataError as e:
            logger.error("cannot delete offsets of topic %s: %s", topic, e)
            return
        for group in list(self._membership.groups.values()):
            self.maybe_drop(group)
